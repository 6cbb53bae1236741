//! The MQTT sink. See the [module docs](super).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rumqttc::{AsyncClient, ClientError, MqttOptions, QoS};
use serde::Serialize;
use spate_types::{Sink, SinkContext, SinkWriter, SpateError, SpateResult};

use super::net::{self, Shared};

/// Turns a record into `(topic, payload)`; `None` as the topic means the sink's topic.
pub type PayloadEncoder<T> =
    Arc<dyn Fn(&T) -> Result<(Option<String>, Vec<u8>), String> + Send + Sync>;

/// A sink publishing every record at QoS 1 (at-least-once: every outstanding PUBACK is
/// awaited at `pre_commit`).
pub struct MqttSink<T> {
    address: String,
    topic: String,
    client_id: String,
    qos: QoS,
    encoder: PayloadEncoder<T>,
    ack_timeout: Duration,
}

impl<T: Serialize> MqttSink<T> {
    /// Publishes every record to `topic` as JSON.
    pub fn json(address: impl Into<String>, topic: impl Into<String>) -> Self {
        Self::with_encoder(
            address,
            topic,
            Arc::new(|r: &T| {
                serde_json::to_vec(r)
                    .map(|v| (None, v))
                    .map_err(|e| e.to_string())
            }),
        )
    }
}

impl MqttSink<Vec<u8>> {
    /// Publishes every record to `topic` as it is.
    pub fn bytes(address: impl Into<String>, topic: impl Into<String>) -> Self {
        Self::with_encoder(
            address,
            topic,
            Arc::new(|r: &Vec<u8>| Ok((None, r.clone()))),
        )
    }
}

impl MqttSink<(String, Vec<u8>)> {
    /// Publishes every `(topic, payload)` to its own topic.
    pub fn topic_payloads(address: impl Into<String>) -> Self {
        Self::with_encoder(
            address,
            "",
            Arc::new(|(t, p): &(String, Vec<u8>)| Ok((Some(t.clone()), p.clone()))),
        )
    }
}

impl<T> MqttSink<T> {
    /// Publishes every record as `encoder` says, to `topic` unless the encoder names one.
    pub fn with_encoder(
        address: impl Into<String>,
        topic: impl Into<String>,
        encoder: PayloadEncoder<T>,
    ) -> Self {
        let topic = topic.into();
        MqttSink {
            address: address.into(),
            client_id: format!("spate-sink-{}", topic.replace(['/', '+', '#'], "_")),
            topic,
            qos: QoS::AtLeastOnce,
            encoder,
            ack_timeout: Duration::from_secs(30),
        }
    }

    /// The client id's prefix (each worker appends `-W`); default `spate-sink-TOPIC`.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = id.into();
        self
    }

    /// The QoS of the publishes: 0 (no acks: at most once), 1 (the default) or 2.
    pub fn qos(mut self, qos: u8) -> Self {
        self.qos = match qos {
            0 => QoS::AtMostOnce,
            2 => QoS::ExactlyOnce,
            _ => QoS::AtLeastOnce,
        };
        self
    }

    /// How long `pre_commit` and `close` wait for the broker's acks (default 30 s).
    pub fn ack_timeout(mut self, timeout: Duration) -> Self {
        self.ack_timeout = timeout;
        self
    }
}

impl<T: 'static> Sink<T> for MqttSink<T> {
    fn name(&self) -> String {
        format!("mqtt:{}", self.topic)
    }

    fn create_writer(&self, ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        let (host, port) = net::host_port(&self.address)?;
        let id = format!("{}-{}", self.client_id, ctx.worker_index);
        let mut options = MqttOptions::new(id.clone(), host, port);
        options
            .set_clean_session(true)
            .set_inflight(1000)
            .set_keep_alive(Duration::from_secs(60))
            .set_max_packet_size(16 << 20, 16 << 20);
        let name = format!("mqtt {} {id}", self.address);
        let (client, shared) = net::start(options, None, &name)?;
        Ok(Box::new(MqttWriter {
            client,
            shared,
            topic: self.topic.clone(),
            qos: self.qos,
            encoder: Arc::clone(&self.encoder),
            published: 0,
            ack_timeout: self.ack_timeout,
            name,
        }))
    }
}

struct MqttWriter<T> {
    client: AsyncClient,
    shared: Arc<Shared>,
    topic: String,
    qos: QoS,
    encoder: PayloadEncoder<T>,
    /// QoS 1/2 publishes handed to the client.
    published: u64,
    ack_timeout: Duration,
    name: String,
}

impl<T> MqttWriter<T> {
    /// Waits until the broker has acked every publish.
    fn flush(&mut self) -> SpateResult<()> {
        let deadline = Instant::now() + self.ack_timeout;
        while self.shared.acked.load(Ordering::Acquire) < self.published {
            if Instant::now() > deadline {
                let why = self.shared.last_error();
                return Err(SpateError::connector(
                    self.name.clone(),
                    format!(
                        "{} of {} publishes not acked after {:?} (last error: {why})",
                        self.published - self.shared.acked.load(Ordering::Acquire),
                        self.published,
                        self.ack_timeout
                    ),
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }
}

impl<T> SinkWriter<T> for MqttWriter<T> {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        for r in records.drain(..) {
            let (topic, payload) =
                (self.encoder)(&r).map_err(|e| SpateError::connector(self.name.clone(), e))?;
            let topic = topic.unwrap_or_else(|| self.topic.clone());
            let mut pending = Some(payload);
            // The client's request queue is bounded: wait for room (back pressure).
            loop {
                let payload = pending.take().expect("set above");
                match self
                    .client
                    .try_publish(topic.clone(), self.qos, false, payload)
                {
                    Ok(()) => break,
                    Err(ClientError::TryRequest(rumqttc::Request::Publish(p))) => {
                        pending = Some(p.payload.to_vec());
                        if self.shared.stop.load(Ordering::Relaxed) {
                            return Err(SpateError::connector(self.name.clone(), "closed"));
                        }
                        std::thread::sleep(Duration::from_micros(100));
                    }
                    Err(e) => return Err(SpateError::connector(self.name.clone(), e)),
                }
            }
            if self.qos != QoS::AtMostOnce {
                self.published += 1;
            }
        }
        Ok(())
    }

    fn pre_commit(&mut self, _checkpoint: u64) -> SpateResult<Vec<u8>> {
        self.flush()?;
        Ok(Vec::new())
    }

    fn close(&mut self) -> SpateResult<()> {
        self.flush()
    }
}

impl<T> Drop for MqttWriter<T> {
    fn drop(&mut self) {
        self.shared.close(&self.client);
    }
}
