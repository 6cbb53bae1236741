//! The MQTT source. See the [module docs](super).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError};
use rumqttc::{AsyncClient, MqttOptions, Publish, QoS};
use serde::de::DeserializeOwned;
use spate_types::{
    BadRecordPolicy, DeadLetter, Sink, Source, SourceContext, SourceOutput, SourceReader,
    SourceStatus, SpateResult, SplitPosition,
};

use super::net::{self, Shared};
use crate::bad::{dead_letter_sink, handle_bad_record};
use crate::lines::FinishedReader;

/// One MQTT message as a decoder sees it.
#[derive(Clone, Copy)]
pub struct MqttMessage<'a> {
    /// The topic it was published to.
    pub topic: &'a str,
    /// Its payload.
    pub payload: &'a [u8],
    /// Whether the broker flagged it as a redelivery.
    pub dup: bool,
}

/// Turns a message into a record, or says in one line why it cannot.
pub type PayloadDecoder<T> = Arc<dyn Fn(&MqttMessage<'_>) -> Result<T, String> + Send + Sync>;

/// A source of MQTT topic filters, read by worker 0 (MQTT 3.1.1 has no shared subscriptions;
/// the other workers' readers finish at once).
pub struct MqttSource<T> {
    address: String,
    filters: Vec<String>,
    client_id: String,
    qos: QoS,
    decoder: PayloadDecoder<T>,
    policy: BadRecordPolicy,
    ack_on_receive: bool,
    keep_alive: Duration,
}

impl<T: DeserializeOwned + Send + 'static> MqttSource<T> {
    /// Subscribes to `filters` (wildcards `+` and `#` allowed) at `address` (`HOST:PORT`),
    /// decoding each payload as JSON into `T` (the JSON-lines source's decoder).
    pub fn json(
        address: impl Into<String>,
        filters: &[&str],
        client_id: impl Into<String>,
    ) -> Self {
        Self::with_decoder(
            address,
            filters,
            client_id,
            Arc::new(|m: &MqttMessage<'_>| crate::files::decode_json_line(m.payload)),
        )
    }
}

impl MqttSource<Vec<u8>> {
    /// Subscribes to `filters`, emitting every payload as bytes.
    pub fn bytes(
        address: impl Into<String>,
        filters: &[&str],
        client_id: impl Into<String>,
    ) -> Self {
        Self::with_decoder(
            address,
            filters,
            client_id,
            Arc::new(|m| Ok(m.payload.to_vec())),
        )
    }
}

impl MqttSource<(String, Vec<u8>)> {
    /// Subscribes to `filters`, emitting `(topic, payload)` of every message.
    pub fn topic_payloads(
        address: impl Into<String>,
        filters: &[&str],
        client_id: impl Into<String>,
    ) -> Self {
        Self::with_decoder(
            address,
            filters,
            client_id,
            Arc::new(|m| Ok((m.topic.to_owned(), m.payload.to_vec()))),
        )
    }
}

impl<T> MqttSource<T> {
    /// Subscribes to `filters` with the persistent session of `client_id`, turning each message
    /// into a record with `decoder`.
    pub fn with_decoder(
        address: impl Into<String>,
        filters: &[&str],
        client_id: impl Into<String>,
        decoder: PayloadDecoder<T>,
    ) -> Self {
        MqttSource {
            address: address.into(),
            filters: filters.iter().map(|f| (*f).to_owned()).collect(),
            client_id: client_id.into(),
            qos: QoS::AtLeastOnce,
            decoder,
            policy: BadRecordPolicy::default(),
            ack_on_receive: false,
            keep_alive: Duration::from_secs(60),
        }
    }

    /// The subscription's QoS: 0 (at most once), 1 (the default) or 2.
    pub fn qos(mut self, qos: u8) -> Self {
        self.qos = match qos {
            0 => QoS::AtMostOnce,
            2 => QoS::ExactlyOnce,
            _ => QoS::AtLeastOnce,
        };
        self
    }

    /// Acks each message when it is read, not when its checkpoint completes: for jobs without
    /// checkpoints (a message read but not yet processed when the job dies is lost).
    pub fn ack_on_receive(mut self) -> Self {
        self.ack_on_receive = true;
        self
    }

    /// What to do with a message the decoder rejects (default: fail the job).
    pub fn policy(mut self, policy: BadRecordPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The MQTT keep-alive interval (default 60 s).
    pub fn keep_alive(mut self, every: Duration) -> Self {
        self.keep_alive = every;
        self
    }
}

impl<T: 'static> Source<T> for MqttSource<T> {
    fn name(&self) -> String {
        format!("mqtt:{}", self.filters.join(","))
    }

    fn is_bounded(&self) -> bool {
        false
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<T>>> {
        if ctx.worker_index != 0 {
            return Ok(Box::new(FinishedReader));
        }
        let (host, port) = net::host_port(&self.address)?;
        let mut options = MqttOptions::new(self.client_id.clone(), host, port);
        options
            .set_clean_session(false)
            .set_manual_acks(true)
            .set_keep_alive(self.keep_alive)
            .set_max_packet_size(16 << 20, 16 << 20);
        let (tx, rx) = crossbeam_channel::bounded(8192);
        let name = format!("mqtt {} {}", self.address, self.client_id);
        let (client, shared) = net::start(options, Some(tx), &name)?;
        for f in &self.filters {
            client
                .try_subscribe(f.clone(), self.qos)
                .map_err(|e| spate_types::SpateError::connector(name.clone(), e))?;
        }
        // Wait for the subscriptions, so that what is published after this call is read (and
        // a broker that is not there is an error now, not later).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while shared.subscribed.load(Ordering::Acquire) < self.filters.len() as u64 {
            if std::time::Instant::now() > deadline {
                shared.close(&client);
                return Err(spate_types::SpateError::connector(
                    name,
                    format!(
                        "not subscribed after 30 s (is a broker listening at {}? last error: {})",
                        self.address,
                        shared.last_error()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(Box::new(MqttReader {
            client,
            shared,
            rx,
            decoder: Arc::clone(&self.decoder),
            policy: self.policy.clone(),
            ack_on_receive: self.ack_on_receive,
            emitted: 0,
            unacked: VecDeque::new(),
            to_ack: 0,
        }))
    }

    fn dead_letter_sink(&self) -> Option<Arc<dyn Sink<DeadLetter>>> {
        dead_letter_sink(&self.policy)
    }
}

struct MqttReader<T> {
    client: AsyncClient,
    shared: Arc<Shared>,
    rx: Receiver<Publish>,
    decoder: PayloadDecoder<T>,
    policy: BadRecordPolicy,
    ack_on_receive: bool,
    /// Messages read so far (good or bad): the position `snapshot` reports.
    emitted: u64,
    /// `(number, message)` of the messages read but not acked, in arrival order (payloads
    /// dropped: an ack needs the packet id only).
    unacked: VecDeque<(u64, Publish)>,
    /// Messages numbered below this are to be acked (a completed checkpoint covers them).
    to_ack: u64,
}

impl<T> MqttReader<T> {
    /// Acks what completed checkpoints cover, in arrival order, as far as the client's request
    /// queue takes them now.
    fn send_acks(&mut self) {
        while let Some((n, p)) = self.unacked.front() {
            if *n >= self.to_ack || self.client.try_ack(p).is_err() {
                return;
            }
            self.unacked.pop_front();
        }
    }
}

impl<T> SourceReader<T> for MqttReader<T> {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, T>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        self.send_acks();
        let mut read = 0;
        while read < max_records {
            let p = match self.rx.try_recv() {
                Ok(p) => p,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    return Err(spate_types::SpateError::connector(
                        "mqtt",
                        format!(
                            "the connection ended (last error: {})",
                            self.shared.last_error()
                        ),
                    ));
                }
            };
            read += 1;
            let number = self.emitted;
            self.emitted += 1;
            let message = MqttMessage {
                topic: &p.topic,
                payload: &p.payload,
                dup: p.dup,
            };
            match (self.decoder)(&message) {
                Ok(r) => out.push(r),
                Err(reason) => handle_bad_record(
                    &self.policy,
                    out,
                    &format!("mqtt:{}", p.topic),
                    number,
                    &reason,
                    &p.payload,
                )?,
            }
            if p.qos != QoS::AtMostOnce {
                if self.ack_on_receive {
                    if self.client.try_ack(&p).is_err() {
                        self.to_ack = self.to_ack.max(number + 1);
                        self.unacked.push_back((number, ack_only(&p)));
                    }
                } else {
                    self.unacked.push_back((number, ack_only(&p)));
                }
            }
        }
        if self.ack_on_receive {
            self.to_ack = self.emitted;
        }
        Ok(if read == 0 {
            SourceStatus::Idle
        } else {
            SourceStatus::More
        })
    }

    /// The number of messages read so far: the checkpoint's cut, whose completion acks them.
    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        Some(vec![SplitPosition {
            split: 0,
            position: serde_json::json!(self.emitted),
        }])
    }

    fn checkpoint_complete(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        if let Some(n) = positions
            .iter()
            .find(|p| p.split == 0)
            .and_then(|p| p.position.as_u64())
        {
            self.to_ack = self.to_ack.max(n);
        }
        if self.unacked.front().is_some_and(|(n, _)| *n < self.to_ack) {
            // The window where the checkpoint is complete but the broker still holds its
            // messages as unacked: a crash here makes the broker redeliver them.
            crate::failpoint::failpoint("mqtt.before_ack");
        }
        self.send_acks();
        Ok(())
    }

    /// Nothing to move: the broker's session holds what was not acked and resends it.
    fn restore(&mut self, _positions: &[SplitPosition]) -> SpateResult<()> {
        Ok(())
    }
}

impl<T> Drop for MqttReader<T> {
    fn drop(&mut self) {
        self.shared.close(&self.client);
    }
}

/// A copy of `p` with what an ack needs only.
fn ack_only(p: &Publish) -> Publish {
    let mut a = Publish::new("", p.qos, Vec::new());
    a.pkid = p.pkid;
    a
}
