//! NATS core: a subscription source and a publishing sink, both **at most once** (NATS core
//! stores nothing: what a reader misses while it is down is gone, and a publish is never
//! acknowledged). See the [module docs](super).

use std::sync::Arc;

use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use spate_types::{
    BadRecordPolicy, DeadLetter, Sink, SinkContext, SinkWriter, Source, SourceContext,
    SourceOutput, SourceReader, SourceStatus, SpateResult,
};
use tokio::sync::mpsc::error::TryRecvError;

use super::net::{server_url, Net};
use crate::bad::{dead_letter_sink, handle_bad_record};
use crate::lines::FinishedReader;

/// One NATS message as a decoder sees it.
#[derive(Clone, Copy)]
pub struct NatsMessage<'a> {
    /// The subject it was published to.
    pub subject: &'a str,
    /// Its payload.
    pub payload: &'a [u8],
    /// Its headers, if it has any.
    pub headers: Option<&'a async_nats::HeaderMap>,
}

/// Turns a NATS message into a record, or says in one line why it cannot.
pub type NatsDecoder<T> = Arc<dyn Fn(&NatsMessage<'_>) -> Result<T, String> + Send + Sync>;

/// Turns a record into `(subject, payload)`; `None` as the subject means the sink's subject.
pub type NatsEncoder<T> =
    Arc<dyn Fn(&T) -> Result<(Option<String>, Vec<u8>), String> + Send + Sync>;

/// A source of a NATS core subject (wildcards `*` and `>` allowed): **at most once**.
///
/// Without a queue group, worker 0 subscribes and the others finish at once (every subscriber
/// gets every message); with [`NatsSource::queue_group`], every worker subscribes in the group
/// and the server spreads the messages over them.
pub struct NatsSource<T> {
    server: String,
    subject: String,
    queue: Option<String>,
    decoder: NatsDecoder<T>,
    policy: BadRecordPolicy,
}

impl<T: DeserializeOwned + Send + 'static> NatsSource<T> {
    /// Subscribes to `subject` at `server` (`nats://HOST:PORT`), decoding payloads as JSON.
    pub fn json(server: impl Into<String>, subject: impl Into<String>) -> Self {
        Self::with_decoder(
            server,
            subject,
            Arc::new(|m: &NatsMessage<'_>| crate::files::decode_json_line(m.payload)),
        )
    }
}

impl NatsSource<Vec<u8>> {
    /// Subscribes to `subject`, emitting payloads as bytes.
    pub fn bytes(server: impl Into<String>, subject: impl Into<String>) -> Self {
        Self::with_decoder(server, subject, Arc::new(|m| Ok(m.payload.to_vec())))
    }
}

impl NatsSource<(String, Vec<u8>)> {
    /// Subscribes to `subject`, emitting `(subject, payload)` of every message.
    pub fn subject_payloads(server: impl Into<String>, subject: impl Into<String>) -> Self {
        Self::with_decoder(
            server,
            subject,
            Arc::new(|m| Ok((m.subject.to_owned(), m.payload.to_vec()))),
        )
    }
}

impl<T> NatsSource<T> {
    /// Subscribes to `subject`, turning each message into a record with `decoder`.
    pub fn with_decoder(
        server: impl Into<String>,
        subject: impl Into<String>,
        decoder: NatsDecoder<T>,
    ) -> Self {
        NatsSource {
            server: server_url(&server.into()),
            subject: subject.into(),
            queue: None,
            decoder,
            policy: BadRecordPolicy::default(),
        }
    }

    /// Every worker subscribes in this queue group (the server gives each message to one).
    pub fn queue_group(mut self, group: impl Into<String>) -> Self {
        self.queue = Some(group.into());
        self
    }

    /// What to do with a message the decoder rejects (default: fail the job).
    pub fn policy(mut self, policy: BadRecordPolicy) -> Self {
        self.policy = policy;
        self
    }
}

impl<T: 'static> Source<T> for NatsSource<T> {
    fn name(&self) -> String {
        format!("nats:{}", self.subject)
    }

    fn is_bounded(&self) -> bool {
        false
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<T>>> {
        if self.queue.is_none() && ctx.worker_index != 0 {
            return Ok(Box::new(FinishedReader));
        }
        let net = Net::connect(&self.server)?;
        let (client, subject, queue) =
            (net.client.clone(), self.subject.clone(), self.queue.clone());
        // Subscribed (and flushed, so the server has the subscription) before the reader
        // exists: what is published after this call is read.
        let mut sub = net
            .run(async move {
                let sub = match queue {
                    Some(q) => client.queue_subscribe(subject, q).await?,
                    None => client.subscribe(subject).await?,
                };
                client.flush().await?;
                Ok::<_, async_nats::Error>(sub)
            })?
            .map_err(|e| net.err(format!("subscribing to {}: {e}", self.subject)))?;
        let (tx, rx) = tokio::sync::mpsc::channel(8192);
        net.spawn(async move {
            while let Some(m) = sub.next().await {
                if tx.send(m).await.is_err() {
                    return;
                }
            }
        });
        Ok(Box::new(NatsReader {
            net,
            rx,
            decoder: Arc::clone(&self.decoder),
            policy: self.policy.clone(),
            read: 0,
        }))
    }

    fn dead_letter_sink(&self) -> Option<Arc<dyn Sink<DeadLetter>>> {
        dead_letter_sink(&self.policy)
    }
}

struct NatsReader<T> {
    net: Net,
    rx: tokio::sync::mpsc::Receiver<async_nats::Message>,
    decoder: NatsDecoder<T>,
    policy: BadRecordPolicy,
    /// Messages read so far: a dead letter's line.
    read: u64,
}

impl<T> SourceReader<T> for NatsReader<T> {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, T>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        let mut n = 0;
        while n < max_records {
            let m = match self.rx.try_recv() {
                Ok(m) => m,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    return Err(self.net.err("the subscription ended"));
                }
            };
            n += 1;
            self.read += 1;
            let view = NatsMessage {
                subject: m.subject.as_str(),
                payload: &m.payload,
                headers: m.headers.as_ref(),
            };
            match (self.decoder)(&view) {
                Ok(r) => out.push(r),
                Err(reason) => handle_bad_record(
                    &self.policy,
                    out,
                    &format!("nats:{}", view.subject),
                    self.read,
                    &reason,
                    view.payload,
                )?,
            }
        }
        Ok(if n == 0 {
            SourceStatus::Idle
        } else {
            SourceStatus::More
        })
    }
}

/// A sink publishing every record to a NATS core subject: **at most once** (the client's
/// buffer is flushed at every checkpoint and at the end, but the server acknowledges nothing,
/// and a message without a subscriber is dropped).
pub struct NatsSink<T> {
    server: String,
    subject: String,
    encoder: NatsEncoder<T>,
}

impl<T: Serialize> NatsSink<T> {
    /// Publishes every record to `subject` as JSON.
    pub fn json(server: impl Into<String>, subject: impl Into<String>) -> Self {
        Self::with_encoder(
            server,
            subject,
            Arc::new(|r: &T| {
                serde_json::to_vec(r)
                    .map(|v| (None, v))
                    .map_err(|e| e.to_string())
            }),
        )
    }
}

impl NatsSink<Vec<u8>> {
    /// Publishes every record to `subject` as it is.
    pub fn bytes(server: impl Into<String>, subject: impl Into<String>) -> Self {
        Self::with_encoder(
            server,
            subject,
            Arc::new(|r: &Vec<u8>| Ok((None, r.clone()))),
        )
    }
}

impl<T> NatsSink<T> {
    /// Publishes every record as `encoder` says, to `subject` unless the encoder names one.
    pub fn with_encoder(
        server: impl Into<String>,
        subject: impl Into<String>,
        encoder: NatsEncoder<T>,
    ) -> Self {
        NatsSink {
            server: server_url(&server.into()),
            subject: subject.into(),
            encoder,
        }
    }
}

impl<T: 'static> Sink<T> for NatsSink<T> {
    fn name(&self) -> String {
        format!("nats:{}", self.subject)
    }

    fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        Ok(Box::new(NatsWriter {
            net: Net::connect(&self.server)?,
            subject: self.subject.clone(),
            encoder: Arc::clone(&self.encoder),
        }))
    }
}

struct NatsWriter<T> {
    net: Net,
    subject: String,
    encoder: NatsEncoder<T>,
}

impl<T> NatsWriter<T> {
    fn flush(&mut self) -> SpateResult<()> {
        let client = self.net.client.clone();
        self.net
            .run(async move { client.flush().await })?
            .map_err(|e| self.net.err(format!("flushing: {e}")))
    }
}

impl<T> SinkWriter<T> for NatsWriter<T> {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        let mut batch = Vec::with_capacity(records.len());
        for r in records.drain(..) {
            let (subject, payload) = (self.encoder)(&r).map_err(|e| self.net.err(e))?;
            batch.push((
                subject.unwrap_or_else(|| self.subject.clone()),
                bytes::Bytes::from(payload),
            ));
        }
        let client = self.net.client.clone();
        self.net
            .run(async move {
                for (subject, payload) in batch {
                    client.publish(subject, payload).await?;
                }
                Ok::<_, async_nats::Error>(())
            })?
            .map_err(|e| self.net.err(format!("publishing: {e}")))
    }

    fn pre_commit(&mut self, _checkpoint: u64) -> SpateResult<Vec<u8>> {
        self.flush()?;
        Ok(Vec::new())
    }

    fn close(&mut self) -> SpateResult<()> {
        self.flush()
    }
}
