//! The JetStream sink. See the [module docs](super).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use serde::Serialize;
use spate_types::{Sink, SinkContext, SinkWriter, SpateError, SpateResult};

use super::core::NatsEncoder;
use super::net::{server_url, Net};

/// How the JetStream sink delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Write-ahead: a checkpoint's messages are held in the checkpoint and published when it
    /// completes, each with a `Nats-Msg-Id`, so the stream drops the copies a restore
    /// publishes again (within its duplicate window).
    ExactlyOnce,
    /// Published at once; every ack awaited at `pre_commit` (a restore may publish the
    /// messages after the checkpoint again).
    AtLeastOnce,
}

impl std::str::FromStr for Delivery {
    type Err = SpateError;

    fn from_str(s: &str) -> SpateResult<Self> {
        match s {
            "exactly-once" => Ok(Delivery::ExactlyOnce),
            "at-least-once" => Ok(Delivery::AtLeastOnce),
            _ => Err(SpateError::Config(format!(
                "unknown JetStream delivery `{s}`: use exactly-once or at-least-once"
            ))),
        }
    }
}

/// Acks a writer keeps outstanding before it waits for the oldest.
const ACK_WINDOW: usize = 8_192;

/// A sink publishing to a JetStream stream. See the [module docs](super).
pub struct JetStreamSink<T> {
    server: String,
    stream: String,
    subject: String,
    encoder: NatsEncoder<T>,
    delivery: Delivery,
    prefix: String,
    min_duplicate_window: Duration,
    timeout: Duration,
}

impl<T: Serialize> JetStreamSink<T> {
    /// Publishes every record to `subject` (stored in `stream`) as JSON.
    pub fn json(server: impl Into<String>, stream: &str, subject: impl Into<String>) -> Self {
        Self::with_encoder(
            server,
            stream,
            subject,
            Arc::new(|r: &T| {
                serde_json::to_vec(r)
                    .map(|v| (None, v))
                    .map_err(|e| e.to_string())
            }),
        )
    }
}

impl JetStreamSink<Vec<u8>> {
    /// Publishes every record to `subject` as it is.
    pub fn bytes(server: impl Into<String>, stream: &str, subject: impl Into<String>) -> Self {
        Self::with_encoder(
            server,
            stream,
            subject,
            Arc::new(|r: &Vec<u8>| Ok((None, r.clone()))),
        )
    }
}

impl<T> JetStreamSink<T> {
    /// Publishes every record as `encoder` says, to `subject` unless the encoder names one;
    /// `stream` must exist and store those subjects. At least once unless
    /// [`JetStreamSink::delivery`] says otherwise.
    pub fn with_encoder(
        server: impl Into<String>,
        stream: &str,
        subject: impl Into<String>,
        encoder: NatsEncoder<T>,
    ) -> Self {
        JetStreamSink {
            server: server_url(&server.into()),
            stream: stream.to_owned(),
            prefix: format!("spate-{stream}"),
            subject: subject.into(),
            encoder,
            delivery: Delivery::AtLeastOnce,
            min_duplicate_window: Duration::from_secs(120),
            timeout: Duration::from_secs(30),
        }
    }

    /// At least once (the default) or exactly once.
    pub fn delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// The first part of every `Nats-Msg-Id` (default `spate-STREAM`); jobs writing to the
    /// same stream need different prefixes.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The shortest duplicate window of the stream that exactly-once accepts (default 2 min,
    /// the server's default): a restore must publish a checkpoint's messages again within it
    /// of their first publish, or the stream keeps both copies.
    pub fn min_duplicate_window(mut self, window: Duration) -> Self {
        self.min_duplicate_window = window;
        self
    }

    /// How long a publish may wait for its ack (default 30 s).
    pub fn ack_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl<T: 'static> Sink<T> for JetStreamSink<T> {
    fn name(&self) -> String {
        format!("jetstream:{}/{}", self.stream, self.subject)
    }

    fn create_writer(&self, ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        let net = Net::connect(&self.server)?;
        let (client, timeout) = (net.client.clone(), self.timeout);
        let js = net.run(async move {
            async_nats::jetstream::ContextBuilder::new()
                .timeout(timeout)
                .ack_timeout(timeout)
                .max_ack_inflight(4 * ACK_WINDOW)
                .backpressure_on_inflight(true)
                .build(client)
        })?;
        let info = net.stream_info(&js, &self.stream)?.map_err(|e| {
            SpateError::Config(format!(
                "JetStream sink: stream `{}` at {}: {e} (create it first, with the subject \
                     `{}` and a duplicate window of at least {:?})",
                self.stream, self.server, self.subject, self.min_duplicate_window
            ))
        })?;
        let window = info.config.duplicate_window;
        if self.delivery == Delivery::ExactlyOnce && window < self.min_duplicate_window {
            return Err(SpateError::Config(format!(
                "JetStream sink: stream `{}` has a duplicate window of {window:?}, shorter than \
                 the {:?} exactly-once needs (raise the stream's duplicate_window or lower the \
                 sink's minimum, dedup_window=)",
                self.stream, self.min_duplicate_window
            )));
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        Ok(Box::new(JetStreamWriter {
            net,
            js,
            subject: self.subject.clone(),
            encoder: Arc::clone(&self.encoder),
            delivery: self.delivery,
            id_prefix: format!(
                "{}-{:x}{:x}",
                self.prefix,
                nanos & 0xFFFF_FFFF_FFFF,
                std::process::id()
            ),
            ctx: ctx.clone(),
            buffer: Vec::new(),
            pending: Vec::new(),
            acks: Some(VecDeque::new()),
            duplicates: 0,
        }))
    }
}

/// The messages of one checkpoint interval, held until the checkpoint completes.
#[derive(Debug, Clone, PartialEq)]
struct Batch {
    checkpoint: u64,
    /// The worker that wrote it (a restore onto other workers deals batches by it).
    worker: u64,
    /// Message `i` gets `Nats-Msg-Id` `{id}-{i}`.
    id: String,
    messages: Vec<(String, Bytes)>,
}

struct JetStreamWriter<T> {
    net: Net,
    js: async_nats::jetstream::Context,
    subject: String,
    encoder: NatsEncoder<T>,
    delivery: Delivery,
    /// `{prefix}-{run}`: the run part differs between starts of a writer, so a job started
    /// afresh never reuses an id that the stream still remembers.
    id_prefix: String,
    ctx: SinkContext,
    /// Exactly once: the messages since the last `pre_commit`.
    buffer: Vec<(String, Bytes)>,
    /// Exactly once: the batches of checkpoints not yet committed.
    pending: Vec<Batch>,
    /// At least once: acks not yet received (`None` while a future has them).
    acks: Option<VecDeque<PublishAckFuture>>,
    /// Publishes the stream reported as duplicates (dropped by its dedup).
    duplicates: u64,
}

/// Awaits every ack of `acks`, failing on the first error.
async fn await_acks(
    acks: &mut VecDeque<PublishAckFuture>,
    keep: usize,
) -> Result<u64, async_nats::Error> {
    let mut duplicates = 0;
    while acks.len() > keep {
        let ack = acks.pop_front().expect("non-empty").await?;
        duplicates += u64::from(ack.duplicate);
    }
    Ok(duplicates)
}

/// Publishes `batches` with their message ids and waits for every ack; returns the number
/// the stream reported as duplicates. At a commit (not a restore), fail point
/// `nats.mid_commit` aborts the process once half of a batch is stored.
async fn publish_batches(
    js: async_nats::jetstream::Context,
    batches: Vec<Batch>,
    commit: bool,
) -> Result<u64, async_nats::Error> {
    let mut acks = VecDeque::new();
    let mut duplicates = 0;
    for b in batches {
        let half = b.messages.len() / 2;
        for (i, (subject, payload)) in b.messages.into_iter().enumerate() {
            if commit && i == half && i > 0 {
                duplicates += await_acks(&mut acks, 0).await?;
                crate::failpoint::failpoint("nats.mid_commit");
            }
            let publish = PublishMessage::build()
                .payload(payload)
                .message_id(format!("{}-{i}", b.id));
            acks.push_back(js.send_publish(subject, publish).await?);
            duplicates += await_acks(&mut acks, ACK_WINDOW).await?;
        }
    }
    duplicates += await_acks(&mut acks, 0).await?;
    Ok(duplicates)
}

impl<T> JetStreamWriter<T> {
    /// Publishes the pending batches of checkpoints up to `upto` (`commit`: at a checkpoint's
    /// completion, not a restore).
    fn publish_pending(&mut self, upto: u64, commit: bool) -> SpateResult<()> {
        let (ready, later): (Vec<Batch>, Vec<Batch>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|b| b.checkpoint <= upto);
        self.pending = later;
        if ready.is_empty() {
            return Ok(());
        }
        let js = self.js.clone();
        self.duplicates += self
            .net
            .run(publish_batches(js, ready, commit))?
            .map_err(|e| self.net.err(format!("publishing to JetStream: {e}")))?;
        Ok(())
    }

    /// At least once: waits until at most `keep` acks are outstanding.
    fn drain_acks(&mut self, keep: usize) -> SpateResult<()> {
        let mut acks = self.acks.take().unwrap_or_default();
        let (acks, result) = self.net.run(async move {
            let r = await_acks(&mut acks, keep).await;
            (acks, r)
        })?;
        self.acks = Some(acks);
        self.duplicates += result.map_err(|e| self.net.err(format!("JetStream ack: {e}")))?;
        Ok(())
    }
}

impl<T> SinkWriter<T> for JetStreamWriter<T> {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        let mut encoded = Vec::with_capacity(records.len());
        for r in records.drain(..) {
            let (subject, payload) = (self.encoder)(&r).map_err(|e| self.net.err(e))?;
            encoded.push((
                subject.unwrap_or_else(|| self.subject.clone()),
                Bytes::from(payload),
            ));
        }
        match self.delivery {
            Delivery::ExactlyOnce => {
                self.buffer.extend(encoded);
                Ok(())
            }
            Delivery::AtLeastOnce => {
                let mut acks = self.acks.take().unwrap_or_default();
                let js = self.js.clone();
                let (acks, result) = self.net.run(async move {
                    let r = async {
                        let mut duplicates = 0;
                        for (subject, payload) in encoded {
                            acks.push_back(js.publish(subject, payload).await?);
                            duplicates += await_acks(&mut acks, ACK_WINDOW).await?;
                        }
                        Ok::<_, async_nats::Error>(duplicates)
                    }
                    .await;
                    (acks, r)
                })?;
                self.acks = Some(acks);
                self.duplicates +=
                    result.map_err(|e| self.net.err(format!("publishing to JetStream: {e}")))?;
                Ok(())
            }
        }
    }

    /// Exactly once: the checkpoint's messages (and those of earlier checkpoints not yet
    /// committed) are the state; at least once: every ack is awaited.
    fn pre_commit(&mut self, checkpoint: u64) -> SpateResult<Vec<u8>> {
        match self.delivery {
            Delivery::AtLeastOnce => {
                self.drain_acks(0)?;
                Ok(Vec::new())
            }
            Delivery::ExactlyOnce => {
                if !self.buffer.is_empty() {
                    self.pending.push(Batch {
                        checkpoint,
                        worker: self.ctx.worker_index as u64,
                        id: format!("{}-{}-{checkpoint}", self.id_prefix, self.ctx.worker_index),
                        messages: std::mem::take(&mut self.buffer),
                    });
                }
                crate::failpoint::failpoint("nats.after_pre_commit");
                Ok(encode_state(&self.pending))
            }
        }
    }

    fn commit(&mut self, checkpoint: u64) -> SpateResult<()> {
        if self.delivery == Delivery::ExactlyOnce {
            if self.pending.iter().any(|b| b.checkpoint <= checkpoint) {
                crate::failpoint::failpoint("nats.before_commit");
            }
            self.publish_pending(checkpoint, true)?;
        }
        Ok(())
    }

    /// Publishes the restored batches this writer's share (by the worker that wrote them) again:
    /// the stream drops the messages it already stored.
    fn restore(&mut self, states: &[Vec<u8>]) -> SpateResult<()> {
        let workers = self.ctx.workers.max(1) as u64;
        for state in states {
            for b in decode_state(state).map_err(|e| {
                SpateError::Job(format!(
                    "JetStream sink: a checkpoint's sink state is unreadable: {e}"
                ))
            })? {
                if b.worker % workers == self.ctx.worker_index as u64 {
                    self.pending.push(b);
                }
            }
        }
        let (before, republished) = (
            self.duplicates,
            self.pending.iter().map(|b| b.messages.len()).sum::<usize>(),
        );
        self.publish_pending(u64::MAX, false)?;
        tracing::info!(
            republished,
            duplicates = self.duplicates - before,
            "JetStream sink: restored checkpoint published again; the stream dropped the \
             duplicates"
        );
        crate::failpoint::failpoint("nats.after_restore_publish");
        Ok(())
    }

    /// The engine closes sinks after the final checkpoint, if any: publishes everything.
    fn close(&mut self) -> SpateResult<()> {
        match self.delivery {
            Delivery::AtLeastOnce => self.drain_acks(0),
            Delivery::ExactlyOnce => {
                if !self.buffer.is_empty() {
                    self.pending.push(Batch {
                        checkpoint: u64::MAX,
                        worker: self.ctx.worker_index as u64,
                        id: format!("{}-{}-end", self.id_prefix, self.ctx.worker_index),
                        messages: std::mem::take(&mut self.buffer),
                    });
                }
                self.publish_pending(u64::MAX, true)?;
                if self.duplicates > 0 {
                    tracing::info!(
                        duplicates = self.duplicates,
                        "JetStream dropped messages published again by a restore"
                    );
                }
                Ok(())
            }
        }
    }

    fn exactly_once(&self) -> bool {
        self.delivery == Delivery::ExactlyOnce
    }
}

/// The state format: `SPJ1`, then per batch: checkpoint, worker (u64 LE), id, message
/// count (u32), and per message subject and payload; strings and payloads as u32 length and
/// bytes.
fn encode_state(batches: &[Batch]) -> Vec<u8> {
    let size: usize = batches
        .iter()
        .map(|b| {
            32 + b.id.len()
                + b.messages
                    .iter()
                    .map(|(s, p)| 8 + s.len() + p.len())
                    .sum::<usize>()
        })
        .sum();
    let mut out = Vec::with_capacity(8 + size);
    out.extend_from_slice(b"SPJ1");
    out.extend_from_slice(&(batches.len() as u32).to_le_bytes());
    let put = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    };
    for b in batches {
        out.extend_from_slice(&b.checkpoint.to_le_bytes());
        out.extend_from_slice(&b.worker.to_le_bytes());
        put(&mut out, b.id.as_bytes());
        out.extend_from_slice(&(b.messages.len() as u32).to_le_bytes());
        for (s, p) in &b.messages {
            put(&mut out, s.as_bytes());
            put(&mut out, p);
        }
    }
    out
}

fn decode_state(bytes: &[u8]) -> Result<Vec<Batch>, String> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let mut r = Reader(bytes);
    if r.take(4)? != b"SPJ1" {
        return Err("not a JetStream sink state".into());
    }
    let n = r.u32()?;
    let mut batches = Vec::new();
    for _ in 0..n {
        let checkpoint = r.u64()?;
        let worker = r.u64()?;
        let id = r.string()?;
        let count = r.u32()?;
        let mut messages = Vec::with_capacity(count.min(1 << 20) as usize);
        for _ in 0..count {
            let s = r.string()?;
            let len = r.u32()? as usize;
            messages.push((s, Bytes::copy_from_slice(r.take(len)?)));
        }
        batches.push(Batch {
            checkpoint,
            worker,
            id,
            messages,
        });
    }
    if !r.0.is_empty() {
        return Err("trailing bytes".into());
    }
    Ok(batches)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("truncated".into());
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips() {
        let batches = vec![
            Batch {
                checkpoint: 3,
                worker: 1,
                id: "p-r-1-3".into(),
                messages: vec![
                    ("a.b".into(), Bytes::from_static(b"x")),
                    ("c".into(), Bytes::new()),
                ],
            },
            Batch {
                checkpoint: 4,
                worker: 1,
                id: "p-r-1-4".into(),
                messages: vec![],
            },
        ];
        let bytes = encode_state(&batches);
        assert_eq!(decode_state(&bytes).unwrap(), batches);
        assert!(decode_state(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_state(b"nope").is_err());
        assert_eq!(decode_state(&[]).unwrap(), vec![]);
    }

    #[test]
    fn parses_delivery() {
        assert_eq!(
            "exactly-once".parse::<Delivery>().unwrap(),
            Delivery::ExactlyOnce
        );
        assert!("maybe"
            .parse::<Delivery>()
            .unwrap_err()
            .to_string()
            .contains("maybe"));
    }
}
