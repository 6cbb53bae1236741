//! The few JetStream management calls that tests and tools need: create, inspect, read back
//! and delete streams.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use async_nats::jetstream::stream::{Config, StorageType};
use futures::StreamExt;
use spate_types::SpateResult;

use super::net::{server_url, Net};

/// One stored message, as [`JetStreamAdmin::read_all`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Its subject.
    pub subject: String,
    /// Its stream sequence.
    pub sequence: u64,
    /// Its `Nats-Msg-Id` header, if it has one.
    pub msg_id: Option<String>,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// A connection for management calls.
pub struct JetStreamAdmin {
    net: Net,
    js: async_nats::jetstream::Context,
}

impl JetStreamAdmin {
    /// Connects to `server` (`nats://HOST:PORT`).
    pub fn new(server: &str) -> SpateResult<Self> {
        let net = Net::connect(&server_url(server))?;
        let js = net.jetstream()?;
        Ok(JetStreamAdmin { net, js })
    }

    /// Creates stream `name` of `subjects` (file storage when `file`, else memory) with this
    /// duplicate window.
    pub fn create_stream(
        &self,
        name: &str,
        subjects: &[&str],
        duplicate_window: Duration,
        file: bool,
    ) -> SpateResult<()> {
        let config = Config {
            name: name.to_owned(),
            subjects: subjects.iter().map(|s| (*s).to_owned()).collect(),
            duplicate_window,
            storage: if file {
                StorageType::File
            } else {
                StorageType::Memory
            },
            ..Default::default()
        };
        let js = self.js.clone();
        self.net
            .run(async move { js.create_stream(config).await.map(|_| ()) })?
            .map_err(|e| self.net.err(format!("creating stream {name}: {e}")))
    }

    /// Deletes stream `name`.
    pub fn delete_stream(&self, name: &str) -> SpateResult<()> {
        let (js, n) = (self.js.clone(), name.to_owned());
        self.net
            .run(async move { js.delete_stream(&n).await.map(|_| ()) })?
            .map_err(|e| self.net.err(format!("deleting stream {name}: {e}")))
    }

    /// `(messages, last sequence)` of stream `name`.
    pub fn state(&self, name: &str) -> SpateResult<(u64, u64)> {
        let (js, n) = (self.js.clone(), name.to_owned());
        self.net
            .run(async move {
                let mut st = js.get_stream(&n).await?;
                let info = st.info().await?;
                Ok::<_, async_nats::Error>((info.state.messages, info.state.last_sequence))
            })?
            .map_err(|e| self.net.err(format!("stream {name}: {e}")))
    }

    /// Every message stored in stream `name` now, in sequence order, read with a pull
    /// consumer of its own (not the source's ordered consumer).
    pub fn read_all(&self, name: &str) -> SpateResult<Vec<StoredMessage>> {
        let (js, n) = (self.js.clone(), name.to_owned());
        self.net
            .run(async move {
                let mut st = js.get_stream(&n).await?;
                let total = st.info().await?.state.messages;
                let consumer = st
                    .create_consumer(pull::Config {
                        deliver_policy: DeliverPolicy::All,
                        ack_policy: AckPolicy::None,
                        inactive_threshold: Duration::from_secs(30),
                        ..Default::default()
                    })
                    .await?;
                let mut out = Vec::with_capacity(total as usize);
                while (out.len() as u64) < total {
                    let mut batch = consumer
                        .fetch()
                        .max_messages(10_000)
                        .expires(Duration::from_secs(2))
                        .messages()
                        .await?;
                    let before = out.len();
                    while let Some(m) = batch.next().await {
                        let m = m?;
                        let info = m.info()?;
                        out.push(StoredMessage {
                            subject: m.subject.to_string(),
                            sequence: info.stream_sequence,
                            msg_id: m
                                .headers
                                .as_ref()
                                .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
                                .map(|v| v.as_str().to_owned()),
                            payload: m.payload.to_vec(),
                        });
                    }
                    if out.len() == before {
                        return Err::<_, async_nats::Error>(
                            format!("read {before} of {total} messages, then nothing").into(),
                        );
                    }
                }
                Ok(out)
            })?
            .map_err(|e| self.net.err(format!("reading stream {name}: {e}")))
    }
}
