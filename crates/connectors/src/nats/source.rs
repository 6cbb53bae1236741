//! The JetStream source. See the [module docs](super).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, DeliverPolicy};
use async_nats::jetstream::stream::RetentionPolicy;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use spate_types::{
    BadRecordPolicy, DeadLetter, Sink, Source, SourceContext, SourceOutput, SourceReader,
    SourceStatus, SpateError, SpateResult, SplitPosition,
};
use tokio::sync::mpsc::error::TryRecvError;

use super::net::{server_url, split_id, Net};
use crate::bad::{dead_letter_sink, handle_bad_record};

/// One JetStream message as a decoder sees it.
#[derive(Clone, Copy)]
pub struct JetStreamMessage<'a> {
    /// The stream it is stored in.
    pub stream: &'a str,
    /// Its subject.
    pub subject: &'a str,
    /// Its sequence number in the stream.
    pub sequence: u64,
    /// When the stream stored it, in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// Its payload.
    pub payload: &'a [u8],
    /// Its headers, if it has any.
    pub headers: Option<&'a async_nats::HeaderMap>,
}

impl JetStreamMessage<'_> {
    /// The message, owned.
    pub fn to_record(&self) -> JetStreamRecord {
        JetStreamRecord {
            stream: self.stream.to_owned(),
            subject: self.subject.to_owned(),
            sequence: self.sequence,
            timestamp_ms: self.timestamp_ms,
            payload: self.payload.to_vec(),
        }
    }
}

/// A JetStream message with its coordinates: what [`JetStreamSource::records`] emits (its
/// `timestamp_ms`, the stream's time of the message, can be a job's event time).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JetStreamRecord {
    /// The stream.
    pub stream: String,
    /// The subject.
    pub subject: String,
    /// The stream sequence.
    pub sequence: u64,
    /// The stream's timestamp of the message (ms since the epoch).
    pub timestamp_ms: i64,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Turns a JetStream message into a record, or says in one line why it cannot.
pub type JetStreamDecoder<T> =
    Arc<dyn Fn(&JetStreamMessage<'_>) -> Result<T, String> + Send + Sync>;

/// Where the splits of a job that does not restore start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartPosition {
    /// The first message still in the stream (`all`).
    Earliest,
    /// After the stream's last message when the reader starts (`new`).
    Latest,
    /// This stream sequence (the first message read is the first at or after it).
    Sequence(u64),
    /// The first message the stream stored at or after this time (ms since the epoch).
    Timestamp(i64),
}

impl std::str::FromStr for StartPosition {
    type Err = SpateError;

    /// Parses `earliest` (or `all`), `latest` (or `new`), `seq:N` or `timestamp:MILLIS`.
    fn from_str(s: &str) -> SpateResult<Self> {
        let num = |p: &str| s.strip_prefix(p).map(|n| n.parse::<u64>());
        Ok(match s {
            "earliest" | "all" => StartPosition::Earliest,
            "latest" | "new" => StartPosition::Latest,
            _ => match (num("seq:"), num("timestamp:")) {
                (Some(Ok(n)), _) => StartPosition::Sequence(n),
                (_, Some(Ok(ms))) if ms <= i64::MAX as u64 => StartPosition::Timestamp(ms as i64),
                _ => {
                    return Err(SpateError::Config(format!(
                        "unknown JetStream start `{s}`: use earliest (all), latest (new), seq:N \
                         or timestamp:MILLIS"
                    )))
                }
            },
        })
    }
}

/// A source of JetStream streams, one split per `(stream, filter subject)`. See the
/// [module docs](super).
pub struct JetStreamSource<T> {
    server: String,
    splits: Vec<(String, String)>,
    start: StartPosition,
    bounded: bool,
    decoder: JetStreamDecoder<T>,
    policy: BadRecordPolicy,
}

impl<T: DeserializeOwned + Send + 'static> JetStreamSource<T> {
    /// Reads `stream` at `server` (`nats://HOST:PORT`), one split per subject filter of
    /// `filters` (wildcards allowed), decoding payloads as JSON.
    pub fn json(server: impl Into<String>, stream: &str, filters: &[&str]) -> Self {
        Self::with_decoder(
            server,
            stream,
            filters,
            Arc::new(|m: &JetStreamMessage<'_>| crate::files::decode_json_line(m.payload)),
        )
    }
}

impl JetStreamSource<Vec<u8>> {
    /// Reads `stream`, emitting payloads as bytes.
    pub fn bytes(server: impl Into<String>, stream: &str, filters: &[&str]) -> Self {
        Self::with_decoder(
            server,
            stream,
            filters,
            Arc::new(|m| Ok(m.payload.to_vec())),
        )
    }
}

impl JetStreamSource<JetStreamRecord> {
    /// Reads `stream`, emitting every message with its subject, sequence and timestamp.
    pub fn records(server: impl Into<String>, stream: &str, filters: &[&str]) -> Self {
        Self::with_decoder(server, stream, filters, Arc::new(|m| Ok(m.to_record())))
    }
}

impl<T> JetStreamSource<T> {
    /// Reads `stream` with one split per filter of `filters` (none: the whole stream, `>`),
    /// turning each message into a record with `decoder`.
    pub fn with_decoder(
        server: impl Into<String>,
        stream: &str,
        filters: &[&str],
        decoder: JetStreamDecoder<T>,
    ) -> Self {
        let filters: Vec<&str> = if filters.is_empty() {
            vec![">"]
        } else {
            filters.to_vec()
        };
        JetStreamSource {
            server: server_url(&server.into()),
            splits: filters
                .iter()
                .map(|f| (stream.to_owned(), (*f).to_owned()))
                .collect(),
            start: StartPosition::Earliest,
            bounded: false,
            decoder,
            policy: BadRecordPolicy::default(),
        }
    }

    /// Adds the splits of another stream.
    pub fn and_stream(mut self, stream: &str, filters: &[&str]) -> Self {
        let filters: Vec<&str> = if filters.is_empty() {
            vec![">"]
        } else {
            filters.to_vec()
        };
        self.splits
            .extend(filters.iter().map(|f| (stream.to_owned(), (*f).to_owned())));
        self
    }

    /// Where the splits start when the job does not restore (default: earliest).
    pub fn start(mut self, start: StartPosition) -> Self {
        self.start = start;
        self
    }

    /// Stops every split at the last message it had when its reader started.
    pub fn bounded(mut self) -> Self {
        self.bounded = true;
        self
    }

    /// What to do with a message the decoder rejects (default: fail the job).
    pub fn policy(mut self, policy: BadRecordPolicy) -> Self {
        self.policy = policy;
        self
    }
}

/// The worker of `workers` that reads split `index` (of the source's split list).
pub fn split_owner(index: usize, workers: usize) -> usize {
    index % workers.max(1)
}

impl<T: Send + 'static> Source<T> for JetStreamSource<T> {
    fn name(&self) -> String {
        let names: Vec<String> = self
            .splits
            .iter()
            .map(|(s, f)| format!("{s}/{f}"))
            .collect();
        format!("jetstream:{}", names.join(","))
    }

    fn is_bounded(&self) -> bool {
        self.bounded
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<T>>> {
        let net = Net::connect(&self.server)?;
        let js = net.jetstream()?;
        let mut splits = Vec::new();
        let mut streams: HashMap<String, u64> = HashMap::new();
        for (i, (stream, filter)) in self.splits.iter().enumerate() {
            if split_owner(i, ctx.workers) != ctx.worker_index {
                continue;
            }
            // The stream must exist; its last sequence resolves `latest`.
            if !streams.contains_key(stream) {
                let info = net.stream_info(&js, stream)?.map_err(|e| {
                    SpateError::Config(format!(
                        "JetStream stream `{stream}` at {}: {e}",
                        self.server
                    ))
                })?;
                if info.config.retention != RetentionPolicy::Limits {
                    tracing::warn!(
                        stream = %stream,
                        "the JetStream stream's retention is not limits-based: messages may be \
                         gone when a restore replays them"
                    );
                }
                streams.insert(stream.clone(), info.state.last_sequence);
            }
            let last = streams[stream];
            let pos = match self.start {
                StartPosition::Earliest => Some(0),
                StartPosition::Latest => Some(last),
                StartPosition::Sequence(n) => Some(n.saturating_sub(1)),
                StartPosition::Timestamp(_) => None,
            };
            splits.push(Split {
                stream: stream.clone(),
                filter: filter.clone(),
                id: split_id(stream, filter),
                pos,
                stop: None,
                finished: false,
            });
        }
        let (tx, rx) = tokio::sync::mpsc::channel(16_384);
        Ok(Box::new(JetStreamReader {
            net,
            js,
            splits,
            tx: Some(tx),
            rx,
            started: false,
            start: self.start,
            bounded: self.bounded,
            decoder: Arc::clone(&self.decoder),
            policy: self.policy.clone(),
            current: None,
        }))
    }

    fn dead_letter_sink(&self) -> Option<Arc<dyn Sink<DeadLetter>>> {
        dead_letter_sink(&self.policy)
    }
}

/// One split a reader owns.
struct Split {
    stream: String,
    filter: String,
    id: u64,
    /// The sequence of the last message delivered (`0`: none, start at the first); `None`:
    /// not known yet (a timestamp start before its first message).
    pos: Option<u64>,
    /// Bounded mode: the sequence of its last message when the reader started (`0`: none).
    stop: Option<u64>,
    finished: bool,
}

/// What a consumer task sends the reader.
enum Item {
    Message {
        split: usize,
        subject: async_nats::Subject,
        sequence: u64,
        timestamp_ms: i64,
        payload: bytes::Bytes,
        headers: Option<async_nats::HeaderMap>,
    },
    Failed(String),
}

struct JetStreamReader<T> {
    net: Net,
    js: async_nats::jetstream::Context,
    splits: Vec<Split>,
    tx: Option<tokio::sync::mpsc::Sender<Item>>,
    rx: tokio::sync::mpsc::Receiver<Item>,
    started: bool,
    start: StartPosition,
    bounded: bool,
    decoder: JetStreamDecoder<T>,
    policy: BadRecordPolicy,
    /// The split of the last record pushed in this poll.
    current: Option<usize>,
}

/// The sequence of the first message of `filter` in `stream` that `deliver_policy` selects
/// now (`0`: none). With [`DeliverPolicy::Last`], the last message; with
/// [`DeliverPolicy::ByStartTime`], the first at or after that time.
async fn probe_sequence(
    js: async_nats::jetstream::Context,
    stream: String,
    filter: String,
    deliver_policy: DeliverPolicy,
) -> Result<u64, async_nats::Error> {
    let st = js.get_stream(&stream).await?;
    let consumer = st
        .create_consumer(pull::Config {
            deliver_policy,
            filter_subject: filter,
            inactive_threshold: Duration::from_secs(10),
            ..Default::default()
        })
        .await?;
    let mut batch = consumer
        .fetch()
        .max_messages(1)
        .expires(Duration::from_secs(1))
        .messages()
        .await?;
    let seq = match tokio::time::timeout(Duration::from_secs(5), batch.next()).await {
        Ok(Some(Ok(m))) => m.info()?.stream_sequence,
        Ok(Some(Err(e))) => return Err(e),
        _ => 0,
    };
    let name = consumer.cached_info().name.clone();
    let _ = st.delete_consumer(&name).await;
    Ok(seq)
}

/// `timestamp:MILLIS` as a JetStream start time.
fn start_time(ms: i64) -> SpateResult<time::OffsetDateTime> {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| SpateError::Config(format!("start timestamp {ms}: {e}")))
}

impl<T> JetStreamReader<T> {
    /// Bounded mode: finds where each split stops; then starts a consumer task per unfinished
    /// split, and announces every split for the watermarks.
    fn begin(&mut self, out: &mut SourceOutput<'_, T>) -> SpateResult<()> {
        self.started = true;
        let tx = self.tx.take().expect("begun once");
        for i in 0..self.splits.len() {
            out.split(i as u32);
            if self.bounded {
                let (js, s, f) = (
                    self.js.clone(),
                    self.splits[i].stream.clone(),
                    self.splits[i].filter.clone(),
                );
                let stop = self
                    .net
                    .run(probe_sequence(js, s, f, DeliverPolicy::Last))?
                    .map_err(|e| {
                        self.net.err(format!(
                            "last message of {}/{}: {e}",
                            self.splits[i].stream, self.splits[i].filter
                        ))
                    })?;
                self.splits[i].stop = Some(stop);
                // A timestamp start resolves to a sequence now, so that a split with no
                // message at or after that time is finished rather than waited on.
                if let (None, StartPosition::Timestamp(ms), true) =
                    (self.splits[i].pos, self.start, stop > 0)
                {
                    let (js, s, f) = (
                        self.js.clone(),
                        self.splits[i].stream.clone(),
                        self.splits[i].filter.clone(),
                    );
                    let policy = DeliverPolicy::ByStartTime {
                        start_time: start_time(ms)?,
                    };
                    let first = self
                        .net
                        .run(probe_sequence(js, s, f, policy))?
                        .map_err(|e| {
                            self.net.err(format!(
                                "first message since {ms} of {}/{}: {e}",
                                self.splits[i].stream, self.splits[i].filter
                            ))
                        })?;
                    if first > 0 && first <= stop {
                        self.splits[i].pos = Some(first - 1);
                    } else {
                        self.splits[i].finished = true;
                    }
                }
                let split = &mut self.splits[i];
                if stop == 0 || split.pos.is_some_and(|p| p >= stop) {
                    split.finished = true;
                }
            }
            if self.splits[i].finished {
                out.split_finished(i as u32);
                continue;
            }
            let deliver_policy = match (self.splits[i].pos, self.start) {
                (Some(p), _) => DeliverPolicy::ByStartSequence {
                    start_sequence: p + 1,
                },
                (None, StartPosition::Timestamp(ms)) => DeliverPolicy::ByStartTime {
                    start_time: start_time(ms)?,
                },
                (None, _) => DeliverPolicy::All,
            };
            let (js, stream, filter, tx) = (
                self.js.clone(),
                self.splits[i].stream.clone(),
                self.splits[i].filter.clone(),
                tx.clone(),
            );
            self.net.spawn(async move {
                if let Err(e) = consume(js, i, stream, filter, deliver_policy, tx.clone()).await {
                    let _ = tx.send(Item::Failed(e.to_string())).await;
                }
            });
        }
        self.current = None;
        Ok(())
    }

    fn all_finished(&self) -> bool {
        self.splits.iter().all(|s| s.finished)
    }
}

/// Reads one split with an ordered consumer (ephemeral, flow-controlled, recreated by the
/// client at the next sequence after a gap) and sends its messages to the reader.
async fn consume(
    js: async_nats::jetstream::Context,
    split: usize,
    stream: String,
    filter: String,
    deliver_policy: DeliverPolicy,
    tx: tokio::sync::mpsc::Sender<Item>,
) -> Result<(), async_nats::Error> {
    let st = js.get_stream(&stream).await?;
    let consumer = st
        .create_consumer(pull::OrderedConfig {
            filter_subject: filter,
            deliver_policy,
            ..Default::default()
        })
        .await?;
    let mut messages = consumer.messages().await?;
    while let Some(m) = messages.next().await {
        let m = m?;
        let info = m.info()?;
        let item = Item::Message {
            split,
            sequence: info.stream_sequence,
            timestamp_ms: (info.published.unix_timestamp_nanos() / 1_000_000) as i64,
            subject: m.message.subject.clone(),
            payload: m.message.payload.clone(),
            headers: m.message.headers.clone(),
        };
        if tx.send(item).await.is_err() {
            return Ok(());
        }
    }
    Err("the ordered consumer ended".into())
}

impl<T> SourceReader<T> for JetStreamReader<T> {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, T>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        if !self.started {
            self.begin(out)?;
        }
        if self.bounded && self.all_finished() {
            return Ok(SourceStatus::Finished);
        }
        let mut taken = 0;
        while taken < max_records {
            let item = match self.rx.try_recv() {
                Ok(item) => item,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    // Every consumer task ended: only when all splits were finished.
                    break;
                }
            };
            taken += 1;
            let (i, subject, sequence, timestamp_ms, payload, headers) = match item {
                Item::Failed(e) => return Err(self.net.err(format!("consuming: {e}"))),
                Item::Message {
                    split,
                    subject,
                    sequence,
                    timestamp_ms,
                    payload,
                    headers,
                } => (split, subject, sequence, timestamp_ms, payload, headers),
            };
            let split = &mut self.splits[i];
            if split.finished
                || split.stop.is_some_and(|s| sequence > s)
                || split.pos.is_some_and(|p| sequence <= p)
            {
                continue;
            }
            split.pos = Some(sequence);
            if self.current != Some(i) {
                out.split(i as u32);
                self.current = Some(i);
            }
            let view = JetStreamMessage {
                stream: &split.stream,
                subject: subject.as_str(),
                sequence,
                timestamp_ms,
                payload: &payload,
                headers: headers.as_ref(),
            };
            match (self.decoder)(&view) {
                Ok(record) => out.push(record),
                Err(reason) => handle_bad_record(
                    &self.policy,
                    out,
                    &format!("jetstream:{}/{}", split.stream, view.subject),
                    sequence,
                    &reason,
                    &payload,
                )?,
            }
            if split.stop.is_some_and(|s| sequence >= s) {
                split.finished = true;
                out.split_finished(i as u32);
                self.current = None;
            }
        }
        // A poll that returns `Finished` emits nothing: the end is the next poll's.
        Ok(if taken > 0 {
            SourceStatus::More
        } else if self.bounded && self.all_finished() {
            SourceStatus::Finished
        } else {
            SourceStatus::Idle
        })
    }

    fn progress(&self) -> Option<(u64, u64)> {
        if !self.bounded || !self.started {
            return None;
        }
        let done = self.splits.iter().map(|s| s.pos.unwrap_or(0)).sum();
        let total = self.splits.iter().map(|s| s.stop.unwrap_or(0)).sum();
        Some((done, total))
    }

    /// The last sequence delivered of every split.
    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        Some(
            self.splits
                .iter()
                .map(|s| SplitPosition {
                    split: s.id,
                    position: serde_json::json!({
                        "stream": s.stream,
                        "filter": s.filter,
                        "seq": s.pos,
                    }),
                })
                .collect(),
        )
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        let mut known: HashMap<(String, String), Option<u64>> = HashMap::new();
        for pos in positions {
            let p = &pos.position;
            let (Some(stream), Some(filter), Some(seq)) = (
                p.get("stream").and_then(|v| v.as_str()),
                p.get("filter").and_then(|v| v.as_str()),
                p.get("seq"),
            ) else {
                return Err(SpateError::Internal(format!(
                    "a JetStream split position that is not {{stream, filter, seq}}: {p}"
                )));
            };
            known.insert((stream.to_owned(), filter.to_owned()), seq.as_u64());
        }
        for s in &mut self.splits {
            s.pos = match known.get(&(s.stream.clone(), s.filter.clone())) {
                Some(p) => *p,
                // Not in the checkpoint (a split added since): from the first message.
                None => Some(0),
            };
        }
        Ok(())
    }
}
