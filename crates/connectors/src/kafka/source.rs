//! The Kafka source, after Flink's `KafkaSource`.
//!
//! * **Splits** are topic partitions. Among `n` workers, partition `p` of topic `t` belongs to
//!   worker `((hash(t) * 31 & 0x7FFFFFFF) % n + p) % n` (Flink's `getSplitOwner`, with Java's
//!   `String.hashCode`), so the partitions of several topics spread over all workers. Each
//!   worker reads its partitions with one consumer that `assign`s them (no group membership,
//!   no rebalances).
//! * **Positions** (the next offset of every partition) go into checkpoints with a split id
//!   stable over worker counts (`crc32c(topic) << 32 | partition`), so a job restores onto any
//!   number of workers. The start offsets ([`StartOffsets`]) are resolved to numbers when a
//!   reader starts and are used only when the job does not restore: after a restore every
//!   partition goes on from its checkpointed offset, and a partition the checkpoint does not
//!   know (it was added since) starts at its earliest offset, as in Flink.
//! * **Watermarks** are per partition: every partition a reader owns is announced as a split
//!   when it starts, so an empty partition holds the watermark back until the idleness timeout
//!   of the job's watermark strategy, and a partition that lags holds it where it is.
//! * **Discovery**: with [`KafkaSource::discovery_interval`], a thread looks up the topics'
//!   partition counts at that interval, and a worker starts reading a new partition it owns
//!   from its earliest offset.
//! * **Bounded** mode ([`KafkaSource::bounded`]) stops each partition at its end offset of
//!   when the reader started (the last stable offset under `read_committed`, so that a
//!   transaction's commit marker at the tail, which is never delivered, still ends it).
//! * **Isolation** is `read_committed` unless the properties say otherwise.
//!
//! Values are decoded by a [`MessageDecoder`]; a message it rejects follows the bad-record
//! policy, and a dead letter names `kafka:TOPIC/PARTITION` as its source and the offset as its
//! line.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde::de::DeserializeOwned;
use spate_types::{
    BadRecordPolicy, DeadLetter, Sink, Source, SourceContext, SourceOutput, SourceReader,
    SourceStatus, SpateError, SpateResult, SplitPosition,
};

use super::batch::{BatchQueue, RawMessage};
use crate::bad::{dead_letter_sink, handle_bad_record};

/// How long a metadata or offset look-up may take before the reader gives up.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(30);

/// At most this many messages are taken from librdkafka in one call.
const BATCH: usize = 1024;

/// One Kafka message as a decoder sees it: borrowed from the consumer's buffer.
#[derive(Clone, Copy)]
pub struct KafkaMessage<'a> {
    /// Its topic.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its timestamp (create or log-append time) in milliseconds, if it has one.
    pub timestamp: Option<i64>,
    /// Its key, if it has one.
    pub key: Option<&'a [u8]>,
    /// Its value; `None` for a tombstone.
    pub value: Option<&'a [u8]>,
    headers: MessageHeaders<'a>,
}

/// Where a [`KafkaMessage`]'s headers are read from, when asked for.
#[derive(Clone, Copy)]
enum MessageHeaders<'a> {
    Owned(&'a [(String, Option<Vec<u8>>)]),
    Batched(RawMessage<'a>),
}

impl KafkaMessage<'_> {
    /// Its headers, in order (a header may have no value).
    pub fn headers(&self) -> Vec<(String, Option<Vec<u8>>)> {
        match self.headers {
            MessageHeaders::Owned(h) => h.to_vec(),
            MessageHeaders::Batched(m) => m.headers(),
        }
    }

    /// The message, owned.
    pub fn to_record(&self) -> KafkaRecord {
        KafkaRecord {
            topic: self.topic.to_owned(),
            partition: self.partition,
            offset: self.offset,
            timestamp: self.timestamp,
            key: self.key.map(<[u8]>::to_vec),
            value: self.value.map(<[u8]>::to_vec),
            headers: self.headers(),
        }
    }
}

/// A Kafka message with everything it carries: what [`KafkaSource::records`] emits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KafkaRecord {
    /// Its topic.
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its timestamp in milliseconds, if it has one.
    pub timestamp: Option<i64>,
    /// Its key.
    pub key: Option<Vec<u8>>,
    /// Its value (`None`: a tombstone).
    pub value: Option<Vec<u8>>,
    /// Its headers.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Turns a message into a record, or says in one line why it cannot.
pub type MessageDecoder<T> = Arc<dyn Fn(&KafkaMessage<'_>) -> Result<T, String> + Send + Sync>;

/// Where the partitions of a job that does not restore start: Flink's `OffsetsInitializer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOffsets {
    /// The earliest offset still in the partition.
    Earliest,
    /// The end of the partition: only what is written after the start.
    Latest,
    /// The group's committed offset; a partition without one starts at `reset`.
    Committed {
        /// Where a partition without a committed offset starts (`Earliest` or `Latest`).
        reset: Box<StartOffsets>,
    },
    /// The first offset whose timestamp is at or after this time (ms); the end of the
    /// partition if there is none.
    Timestamp(i64),
    /// These offsets, by `(topic, partition)`; other partitions start at the earliest.
    Specific(HashMap<(String, i32), i64>),
}

impl std::str::FromStr for StartOffsets {
    type Err = SpateError;

    /// Parses `earliest`, `latest`, `committed` (then `earliest`), `committed-latest` or
    /// `timestamp:MILLIS`.
    fn from_str(s: &str) -> SpateResult<Self> {
        Ok(match s {
            "earliest" => StartOffsets::Earliest,
            "latest" => StartOffsets::Latest,
            "committed" | "committed-earliest" => StartOffsets::Committed {
                reset: Box::new(StartOffsets::Earliest),
            },
            "committed-latest" => StartOffsets::Committed {
                reset: Box::new(StartOffsets::Latest),
            },
            _ => match s.strip_prefix("timestamp:").map(str::parse::<i64>) {
                Some(Ok(ms)) => StartOffsets::Timestamp(ms),
                _ => {
                    return Err(SpateError::Config(format!(
                        "unknown Kafka start `{s}`: use earliest, latest, committed, \
                         committed-latest or timestamp:MILLIS"
                    )))
                }
            },
        })
    }
}

/// A source of Kafka topics. See the [module docs](self).
pub struct KafkaSource<T> {
    bootstrap: String,
    topics: Vec<String>,
    group: Option<String>,
    start: StartOffsets,
    bounded: bool,
    discovery: Option<Duration>,
    properties: Vec<(String, String)>,
    decoder: MessageDecoder<T>,
    policy: BadRecordPolicy,
    commit_offsets: bool,
}

impl<T: DeserializeOwned + Send + 'static> KafkaSource<T> {
    /// Reads `topics` from the cluster at `bootstrap` (`host:port[,host:port...]`), decoding
    /// each value as JSON into `T` (the JSON-lines source's decoder).
    pub fn json(bootstrap: impl Into<String>, topics: &[&str]) -> Self {
        Self::with_decoder(
            bootstrap,
            topics,
            Arc::new(|m: &KafkaMessage<'_>| match m.value {
                Some(v) => crate::files::decode_json_line(v),
                None => Err("a message without a value (a tombstone)".into()),
            }),
        )
    }
}

impl KafkaSource<KafkaRecord> {
    /// Reads `topics`, emitting every message whole: key, value, headers, timestamp.
    pub fn records(bootstrap: impl Into<String>, topics: &[&str]) -> Self {
        Self::with_decoder(bootstrap, topics, Arc::new(|m| Ok(m.to_record())))
    }
}

impl KafkaSource<Vec<u8>> {
    /// Reads `topics`, emitting the value of every message as bytes (a tombstone is a bad
    /// record).
    pub fn bytes(bootstrap: impl Into<String>, topics: &[&str]) -> Self {
        Self::with_decoder(
            bootstrap,
            topics,
            Arc::new(|m| {
                m.value
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| "a message without a value (a tombstone)".into())
            }),
        )
    }
}

impl<T> KafkaSource<T> {
    /// Reads `topics`, turning each message into a record with `decoder`.
    pub fn with_decoder(
        bootstrap: impl Into<String>,
        topics: &[&str],
        decoder: MessageDecoder<T>,
    ) -> Self {
        KafkaSource {
            bootstrap: bootstrap.into(),
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            group: None,
            start: StartOffsets::Earliest,
            bounded: false,
            discovery: None,
            properties: Vec::new(),
            decoder,
            policy: BadRecordPolicy::default(),
            commit_offsets: true,
        }
    }

    /// The consumer group: where [`StartOffsets::Committed`] starts, and where the offsets of
    /// every completed checkpoint are committed (for lag monitoring and a later `committed`
    /// start; the checkpoint, not the group, is what a restore reads). Without a group,
    /// nothing is committed.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Whether to commit the offsets of completed checkpoints to the group (default: yes,
    /// when a group is set; Flink's `commit.offsets.on.checkpoint`).
    pub fn commit_offsets_on_checkpoint(mut self, commit: bool) -> Self {
        self.commit_offsets = commit;
        self
    }

    /// Where the partitions start when the job does not restore (default: earliest).
    pub fn start(mut self, start: StartOffsets) -> Self {
        self.start = start;
        self
    }

    /// Stops at the end offsets of when the job starts (Flink's `setBounded(latest())`).
    pub fn bounded(mut self) -> Self {
        self.bounded = true;
        self
    }

    /// Looks for new partitions of the topics at this interval (Flink's
    /// `partition.discovery.interval.ms`); without it, the partitions are those of the start.
    pub fn discovery_interval(mut self, every: Duration) -> Self {
        self.discovery = Some(every);
        self
    }

    /// Sets a librdkafka consumer property (such as `isolation.level` or `fetch.min.bytes`).
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.push((key.into(), value.into()));
        self
    }

    /// What to do with a message the decoder rejects (default: fail the job).
    pub fn policy(mut self, policy: BadRecordPolicy) -> Self {
        self.policy = policy;
        self
    }

    fn consumer(&self) -> SpateResult<BaseConsumer> {
        let mut cfg = ClientConfig::new();
        cfg.set("bootstrap.servers", &self.bootstrap)
            .set("group.id", self.group.as_deref().unwrap_or("spate"))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("isolation.level", "read_committed")
            .set("enable.partition.eof", "false")
            // Prefetch per partition: librdkafka's defaults (100 000 messages, 64 MiB) multiply
            // by the partitions a worker owns.
            .set("queued.min.messages", "20000")
            .set("queued.max.messages.kbytes", "16384")
            // When a partition's prefetch queue is over those bounds, librdkafka waits this
            // long before it fetches for it again: its default (1 s) made a source 30 times
            // slower than Kafka's consumer tool (2 M records at 36 K/s); 10 ms reads ~1 M/s.
            .set("fetch.queue.backoff.ms", "10")
            .set("log_level", "3");
        for (k, v) in &self.properties {
            cfg.set(k, v);
        }
        cfg.create()
            .map_err(|e| SpateError::connector(self.system(), e))
    }

    fn system(&self) -> String {
        format!("kafka {}", self.bootstrap)
    }
}

/// Java's `String.hashCode`.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// The worker of `workers` that reads `partition` of `topic` (Flink's `getSplitOwner`).
pub fn partition_owner(topic: &str, partition: i32, workers: usize) -> usize {
    let n = workers.max(1) as i64;
    let start = ((java_hash(topic).wrapping_mul(31) & 0x7FFF_FFFF) as i64) % n;
    ((start + partition as i64) % n) as usize
}

/// The split id of a partition in checkpoints: the same on any number of workers.
pub fn split_id(topic: &str, partition: i32) -> u64 {
    (u64::from(crc32c::crc32c(topic.as_bytes())) << 32) | (partition as u32 as u64)
}

/// The partition counts of `topics`, from the cluster's metadata.
fn partition_counts(
    consumer: &BaseConsumer,
    topics: &[String],
    system: &str,
) -> SpateResult<Vec<i32>> {
    let mut counts = Vec::with_capacity(topics.len());
    for topic in topics {
        let md = consumer
            .fetch_metadata(Some(topic), LOOKUP_TIMEOUT)
            .map_err(|e| SpateError::connector(system, format!("metadata of {topic}: {e}")))?;
        let t = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .ok_or_else(|| SpateError::connector(system, format!("no topic {topic}")))?;
        if let Some(e) = t.error() {
            return Err(SpateError::Config(format!(
                "Kafka topic `{topic}` at {system}: {e:?}"
            )));
        }
        counts.push(t.partitions().len() as i32);
    }
    Ok(counts)
}

impl<T: Send + 'static> Source<T> for KafkaSource<T> {
    fn name(&self) -> String {
        format!("kafka:{}", self.topics.join(","))
    }

    fn is_bounded(&self) -> bool {
        self.bounded
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<T>>> {
        let system = self.system();
        let consumer = self.consumer()?;
        let counts = partition_counts(&consumer, &self.topics, &system)?;
        let mut parts = Vec::new();
        for (t, topic) in self.topics.iter().enumerate() {
            for p in 0..counts[t] {
                if partition_owner(topic, p, ctx.workers) == ctx.worker_index {
                    parts.push(Part::new(t, p));
                }
            }
        }
        let mut reader = KafkaReader {
            topics: self
                .topics
                .iter()
                .map(|t| Arc::<str>::from(t.as_str()))
                .collect(),
            queue: BatchQueue::new(&consumer),
            consumer,
            parts,
            index: HashMap::new(),
            last_part: None,
            assigned: false,
            restored: false,
            current: None,
            decoder: Arc::clone(&self.decoder),
            policy: self.policy.clone(),
            system,
            bounded: self.bounded,
            discovered: None,
            ctx: ctx.clone(),
            last_finished_check: Instant::now(),
            commit_offsets: self.commit_offsets && self.group.is_some(),
        };
        reader.reindex();
        reader.resolve_start(&self.start)?;
        if let Some(every) = self.discovery {
            let discovery_consumer = self.consumer()?;
            reader.discovered = Some(spawn_discovery(
                discovery_consumer,
                self.topics.clone(),
                every,
                reader.system.clone(),
            ));
        }
        Ok(Box::new(reader))
    }

    fn dead_letter_sink(&self) -> Option<Arc<dyn Sink<DeadLetter>>> {
        dead_letter_sink(&self.policy)
    }
}

/// Looks up partition counts at `every` and sends them when they change.
fn spawn_discovery(
    consumer: BaseConsumer,
    topics: Vec<String>,
    every: Duration,
    system: String,
) -> Receiver<Vec<i32>> {
    let (tx, rx) = crossbeam_channel::bounded(4);
    let spawned = std::thread::Builder::new()
        .name("kafka-discovery".into())
        .spawn(move || {
            let mut last: Option<Vec<i32>> = None;
            loop {
                std::thread::sleep(every);
                match partition_counts(&consumer, &topics, &system) {
                    Ok(counts) => {
                        if last.as_ref() != Some(&counts) {
                            last = Some(counts.clone());
                            if tx.send(counts).is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "Kafka partition discovery failed"),
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start Kafka partition discovery");
    }
    rx
}

/// One partition a reader owns.
#[derive(Debug, Clone)]
struct Part {
    topic: usize,
    partition: i32,
    /// The next offset to read; [`EARLIEST`] for the earliest there is.
    next: i64,
    /// Bounded mode: the offset at which it is finished.
    stop: Option<i64>,
    finished: bool,
}

/// A partition's `next` before anything was read from it and without a known offset.
const EARLIEST: i64 = -1;

impl Part {
    fn new(topic: usize, partition: i32) -> Part {
        Part {
            topic,
            partition,
            next: EARLIEST,
            stop: None,
            finished: false,
        }
    }

    /// Where the consumer starts it.
    fn offset(&self) -> Offset {
        if self.next < 0 {
            Offset::Beginning
        } else {
            Offset::Offset(self.next)
        }
    }
}

/// One worker's consumer of its partitions.
struct KafkaReader<T> {
    topics: Vec<Arc<str>>,
    /// The queue the assigned partitions are forwarded to, read in batches. Declared before
    /// `consumer`: it must be destroyed before the client it belongs to.
    queue: Option<BatchQueue>,
    consumer: BaseConsumer,
    parts: Vec<Part>,
    /// `(topic, partition)` → index into `parts`.
    index: HashMap<(usize, i32), usize>,
    /// The last look-up in `index` (messages come in runs of one partition).
    last_part: Option<((usize, i32), usize)>,
    assigned: bool,
    restored: bool,
    /// The split of the last record pushed in this poll.
    current: Option<usize>,
    decoder: MessageDecoder<T>,
    policy: BadRecordPolicy,
    system: String,
    bounded: bool,
    discovered: Option<Receiver<Vec<i32>>>,
    ctx: SourceContext,
    last_finished_check: Instant,
    commit_offsets: bool,
}

impl<T> KafkaReader<T> {
    fn reindex(&mut self) {
        self.last_part = None;
        self.index = self
            .parts
            .iter()
            .enumerate()
            .map(|(i, p)| ((p.topic, p.partition), i))
            .collect();
    }

    fn err(&self, what: impl std::fmt::Display) -> SpateError {
        SpateError::connector(self.system.clone(), what)
    }

    /// The (low, high) offsets of a partition; high is the last stable offset under
    /// `read_committed`.
    fn watermarks(&self, part: &Part) -> SpateResult<(i64, i64)> {
        let topic = &self.topics[part.topic];
        self.consumer
            .fetch_watermarks(topic, part.partition, LOOKUP_TIMEOUT)
            .map_err(|e| self.err(format!("offsets of {topic}/{}: {e}", part.partition)))
    }

    /// Resolves `start` to an offset for every partition.
    fn resolve_start(&mut self, start: &StartOffsets) -> SpateResult<()> {
        for i in 0..self.parts.len() {
            let next = self.start_offset(i, start)?;
            self.parts[i].next = next;
        }
        Ok(())
    }

    fn start_offset(&self, i: usize, start: &StartOffsets) -> SpateResult<i64> {
        let part = &self.parts[i];
        let topic = &self.topics[part.topic];
        Ok(match start {
            StartOffsets::Earliest => self.watermarks(part)?.0,
            StartOffsets::Latest => self.watermarks(part)?.1,
            StartOffsets::Committed { reset } => {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition(topic, part.partition);
                let committed = self
                    .consumer
                    .committed_offsets(tpl, LOOKUP_TIMEOUT)
                    .map_err(|e| self.err(format!("committed offsets of {topic}: {e}")))?;
                match committed
                    .find_partition(topic, part.partition)
                    .map(|e| e.offset())
                {
                    Some(Offset::Offset(o)) => o,
                    _ => self.start_offset(i, reset)?,
                }
            }
            StartOffsets::Timestamp(ms) => {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition_offset(topic, part.partition, Offset::Offset(*ms))
                    .map_err(|e| self.err(e))?;
                let found = self
                    .consumer
                    .offsets_for_times(tpl, LOOKUP_TIMEOUT)
                    .map_err(|e| self.err(format!("offsets for time {ms} of {topic}: {e}")))?;
                match found
                    .find_partition(topic, part.partition)
                    .map(|e| e.offset())
                {
                    Some(Offset::Offset(o)) if o >= 0 => o,
                    _ => self.watermarks(part)?.1,
                }
            }
            StartOffsets::Specific(map) => match map.get(&(topic.to_string(), part.partition)) {
                Some(o) => *o,
                None => self.watermarks(part)?.0,
            },
        })
    }

    /// Assigns every unfinished partition at its next offset; in bounded mode first takes the
    /// stop offsets.
    fn assign(&mut self, out: &mut SourceOutput<'_, T>) -> SpateResult<()> {
        let mut tpl = TopicPartitionList::new();
        for i in 0..self.parts.len() {
            if self.bounded && self.parts[i].stop.is_none() {
                let (low, high) = self.watermarks(&self.parts[i])?;
                self.parts[i].stop = Some(high);
                if self.parts[i].next < 0 {
                    self.parts[i].next = low;
                }
            }
            let part = &mut self.parts[i];
            if part.stop.is_some_and(|s| part.next >= s) {
                part.finished = true;
            }
            // Every partition is a split from the start: an empty one holds the watermark
            // until the idleness timeout, as in Flink.
            out.split(i as u32);
            if part.finished {
                out.split_finished(i as u32);
                continue;
            }
            tpl.add_partition_offset(&self.topics[part.topic], part.partition, part.offset())
                .map_err(|e| SpateError::connector(self.system.clone(), e))?;
        }
        self.current = None;
        self.consumer
            .assign(&tpl)
            .map_err(|e| self.err(format!("assigning partitions: {e}")))?;
        self.forward(&tpl);
        self.assigned = true;
        Ok(())
    }

    /// Adds the partitions that discovery found and this worker owns, from their earliest
    /// offset.
    fn discover(&mut self, out: &mut SourceOutput<'_, T>) -> SpateResult<()> {
        let Some(rx) = self.discovered.as_ref() else {
            return Ok(());
        };
        let counts = match rx.try_recv() {
            Ok(c) => c,
            Err(TryRecvError::Empty) => return Ok(()),
            Err(TryRecvError::Disconnected) => {
                self.discovered = None;
                return Ok(());
            }
        };
        let mut tpl = TopicPartitionList::new();
        for (t, count) in counts.into_iter().enumerate() {
            for p in 0..count {
                if partition_owner(&self.topics[t], p, self.ctx.workers) != self.ctx.worker_index
                    || self.index.contains_key(&(t, p))
                {
                    continue;
                }
                // At its earliest offset: `next` stays negative (the consumer's metadata may not
                // know the partition yet, so no offset is looked up here).
                let part = Part::new(t, p);
                tracing::info!(topic = %self.topics[t], partition = p, "reading a new Kafka partition");
                tpl.add_partition_offset(&self.topics[t], p, part.offset())
                    .map_err(|e| self.err(e))?;
                self.parts.push(part);
                out.split((self.parts.len() - 1) as u32);
            }
        }
        if tpl.count() > 0 {
            self.reindex();
            self.current = None;
            self.consumer
                .incremental_assign(&tpl)
                .map_err(|e| self.err(format!("assigning new partitions: {e}")))?;
            self.forward(&tpl);
        }
        Ok(())
    }

    /// Bounded mode: finishes the partitions whose consumer position reached their stop
    /// (after a transaction's commit marker, which is never delivered, the position moves
    /// past it).
    fn check_finished(&mut self, out: &mut SourceOutput<'_, T>) -> SpateResult<()> {
        let position = self
            .consumer
            .position()
            .map_err(|e| self.err(format!("consumer position: {e}")))?;
        let mut done = TopicPartitionList::new();
        for i in 0..self.parts.len() {
            let part = self.parts[i].clone();
            if part.finished {
                continue;
            }
            let Some(stop) = part.stop else { continue };
            let topic = &self.topics[part.topic];
            let pos = match position
                .find_partition(topic, part.partition)
                .map(|e| e.offset())
            {
                Some(Offset::Offset(o)) => o.max(part.next),
                _ => part.next,
            };
            if pos >= stop {
                self.parts[i].finished = true;
                self.parts[i].next = self.parts[i].next.max(pos.min(stop));
                done.add_partition(topic, part.partition);
                out.split_finished(i as u32);
                self.current = None;
            }
        }
        if done.count() > 0 {
            self.consumer
                .incremental_unassign(&done)
                .map_err(|e| self.err(format!("unassigning finished partitions: {e}")))?;
        }
        Ok(())
    }

    /// Forwards the partitions just assigned to the batch queue.
    fn forward(&self, tpl: &TopicPartitionList) {
        if let Some(queue) = &self.queue {
            for e in tpl.elements() {
                queue.forward(e.topic(), e.partition());
            }
        }
    }

    /// The index of the part that a message of topic `t`'s `partition` belongs to.
    fn part_of(&mut self, t: usize, partition: i32) -> Option<usize> {
        match self.last_part {
            Some((key, i)) if key == (t, partition) => Some(i),
            _ => {
                let i = *self.index.get(&(t, partition))?;
                self.last_part = Some(((t, partition), i));
                Some(i)
            }
        }
    }

    /// Emits one message (or routes it to the bad-record policy); `false` if it was not for
    /// this reader or past its stop.
    fn emit(
        &mut self,
        out: &mut SourceOutput<'_, T>,
        t: usize,
        view: &KafkaMessage<'_>,
    ) -> SpateResult<()> {
        let Some(i) = self.part_of(t, view.partition) else {
            return Ok(());
        };
        let offset = view.offset;
        let part = &mut self.parts[i];
        if part.finished || part.stop.is_some_and(|s| offset >= s) {
            return Ok(());
        }
        part.next = offset + 1;
        let finished = part.stop.is_some_and(|s| part.next >= s);
        if self.current != Some(i) {
            out.split(i as u32);
            self.current = Some(i);
        }
        match (self.decoder)(view) {
            Ok(record) => out.push(record),
            Err(reason) => handle_bad_record(
                &self.policy,
                out,
                &format!("kafka:{}/{}", view.topic, view.partition),
                offset as u64,
                &reason,
                view.value.unwrap_or_default(),
            )?,
        }
        if finished {
            self.parts[i].finished = true;
            out.split_finished(i as u32);
            self.current = None;
        }
        Ok(())
    }

    fn all_finished(&self) -> bool {
        self.parts.iter().all(|p| p.finished)
    }
}

impl<T> SourceReader<T> for KafkaReader<T> {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, T>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        if !self.assigned {
            self.assign(out)?;
        }
        self.discover(out)?;
        if self.bounded && self.all_finished() {
            return Ok(SourceStatus::Finished);
        }
        let mut idle = true;
        let mut taken = 0;
        // The consumer's own queue first: its events, and any message fetched before its
        // partition was forwarded to the batch queue (older than those there).
        while taken < max_records {
            let Some(result) = self.consumer.poll(Duration::ZERO) else {
                break;
            };
            taken += 1;
            let msg = match result {
                Ok(m) => m,
                Err(KafkaError::PartitionEOF(_)) => continue,
                Err(e) => return Err(self.err(format!("consuming: {e}"))),
            };
            idle = false;
            // Rare (see above), so copied: the message borrows the consumer.
            let record = KafkaRecord {
                topic: msg.topic().to_owned(),
                partition: msg.partition(),
                offset: msg.offset(),
                timestamp: msg.timestamp().to_millis(),
                key: msg.key().map(<[u8]>::to_vec),
                value: msg.payload().map(<[u8]>::to_vec),
                headers: msg
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default(),
            };
            drop(msg);
            let Some(t) = self.topics.iter().position(|x| **x == *record.topic) else {
                continue;
            };
            let view = KafkaMessage {
                topic: &record.topic,
                partition: record.partition,
                offset: record.offset,
                timestamp: record.timestamp,
                key: record.key.as_deref(),
                value: record.value.as_deref(),
                headers: MessageHeaders::Owned(&record.headers),
            };
            self.emit(out, t, &view)?;
        }
        // Then the batch queue.
        while taken < max_records {
            let Some(queue) = self.queue.as_mut() else {
                break;
            };
            let batch = queue.consume((max_records - taken).min(BATCH));
            if batch.is_empty() {
                queue.recycle(batch);
                break;
            }
            taken += batch.len();
            idle = false;
            let mut result = Ok(());
            for m in batch.iter() {
                if m.is_partition_eof() {
                    continue;
                }
                if let Some(e) = m.error() {
                    result = Err(self.err(format!("consuming: {e}")));
                    break;
                }
                let name = m.topic();
                let Some(t) = self.topics.iter().position(|x| x.as_bytes() == name) else {
                    continue;
                };
                let view = KafkaMessage {
                    topic: std::str::from_utf8(name).unwrap_or_default(),
                    partition: m.partition(),
                    offset: m.offset(),
                    timestamp: m.timestamp(),
                    key: m.key(),
                    value: m.payload(),
                    headers: MessageHeaders::Batched(m),
                };
                if let Err(e) = self.emit(out, t, &view) {
                    result = Err(e);
                    break;
                }
            }
            if let Some(queue) = self.queue.as_mut() {
                queue.recycle(batch);
            }
            result?;
        }
        if self.bounded {
            let now = Instant::now();
            if idle && now.duration_since(self.last_finished_check) >= Duration::from_millis(100) {
                self.last_finished_check = now;
                self.check_finished(out)?;
            }
            if self.all_finished() {
                return Ok(SourceStatus::Finished);
            }
        }
        Ok(if idle {
            SourceStatus::Idle
        } else {
            SourceStatus::More
        })
    }

    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        Some(
            self.parts
                .iter()
                .map(|p| {
                    let topic = &self.topics[p.topic];
                    SplitPosition {
                        split: split_id(topic, p.partition),
                        position: serde_json::json!({
                            "topic": &**topic,
                            "partition": p.partition,
                            "offset": p.next,
                        }),
                    }
                })
                .collect(),
        )
    }

    fn checkpoint_complete(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        if !self.commit_offsets {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for pos in positions {
            let p = &pos.position;
            if let (Some(topic), Some(partition), Some(offset)) = (
                p.get("topic").and_then(|v| v.as_str()),
                p.get("partition").and_then(|v| v.as_i64()),
                p.get("offset").and_then(|v| v.as_i64()),
            ) {
                if offset >= 0 {
                    tpl.add_partition_offset(topic, partition as i32, Offset::Offset(offset))
                        .map_err(|e| self.err(e))?;
                }
            }
        }
        if tpl.count() == 0 {
            return Ok(());
        }
        // Asynchronous: the worker does not wait for the broker; a failed commit is only
        // logged, since the offsets in the group are for monitoring.
        if let Err(e) = self.consumer.commit(&tpl, CommitMode::Async) {
            tracing::warn!(error = %e, "committing Kafka offsets to the group failed");
        }
        Ok(())
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        let mut known: HashMap<(String, i32), i64> = HashMap::new();
        for pos in positions {
            let p = &pos.position;
            let (Some(topic), Some(partition), Some(offset)) = (
                p.get("topic").and_then(|v| v.as_str()),
                p.get("partition").and_then(|v| v.as_i64()),
                p.get("offset").and_then(|v| v.as_i64()),
            ) else {
                return Err(SpateError::Internal(format!(
                    "a Kafka split position that is not {{topic, partition, offset}}: {p}"
                )));
            };
            known.insert((topic.to_owned(), partition as i32), offset);
        }
        self.restored = true;
        for i in 0..self.parts.len() {
            let key = (
                self.topics[self.parts[i].topic].to_string(),
                self.parts[i].partition,
            );
            self.parts[i].next = match known.get(&key) {
                Some(o) => *o,
                // Not in the checkpoint: the partition is new since, and starts at the
                // earliest offset (as in Flink), never at the start initializer's.
                None => EARLIEST,
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_hash_matches_java() {
        // "hello".hashCode() == 99162322 and "topic".hashCode() == 110546223 in Java.
        assert_eq!(java_hash("hello"), 99162322);
        assert_eq!(java_hash("topic"), 110546223);
        assert_eq!(java_hash(""), 0);
    }

    #[test]
    fn owners_spread_partitions_over_workers_and_are_stable() {
        for workers in 1..=5 {
            let mut per = vec![0; workers];
            for p in 0..20 {
                let w = partition_owner("events", p, workers);
                assert!(w < workers);
                per[w] += 1;
            }
            assert!(
                per.iter()
                    .all(|&n| n == 20 / workers || n == 20 / workers + 1),
                "{per:?}"
            );
        }
        // Consecutive partitions go to consecutive workers, from a topic-dependent start.
        let start = partition_owner("events", 0, 4);
        assert_eq!(partition_owner("events", 1, 4), (start + 1) % 4);
    }

    #[test]
    fn split_ids_differ_by_topic_and_partition() {
        assert_ne!(split_id("a", 0), split_id("b", 0));
        assert_ne!(split_id("a", 0), split_id("a", 1));
        assert_eq!(split_id("a", 7) & 0xFFFF_FFFF, 7);
    }

    #[test]
    fn parses_start_offsets() {
        assert_eq!(
            "earliest".parse::<StartOffsets>().unwrap(),
            StartOffsets::Earliest
        );
        assert_eq!(
            "timestamp:5".parse::<StartOffsets>().unwrap(),
            StartOffsets::Timestamp(5)
        );
        assert!("soon"
            .parse::<StartOffsets>()
            .unwrap_err()
            .to_string()
            .contains("soon"));
    }
}
