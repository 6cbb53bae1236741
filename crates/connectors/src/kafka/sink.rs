//! The Kafka sink, after Flink's `KafkaSink`, at least once or exactly once.
//!
//! **At least once** ([`Delivery::AtLeastOnce`]): one idempotent producer per worker; a
//! checkpoint's first phase waits until every record written before it is acknowledged, so
//! a restore replays at most what came after.
//!
//! **Exactly once** ([`Delivery::ExactlyOnce`]): records go into Kafka transactions, one per
//! worker and checkpoint interval, each with its own transactional id
//! `PREFIX-WORKER-N` and its own producer. At a checkpoint's cut the open transaction is
//! flushed and kept open (prepared), its id goes into the checkpoint, and the next one begins;
//! when the checkpoint completes, the prepared transactions it covers are committed, so a
//! `read_committed` reader sees a checkpoint's output only once it can never be rolled back.
//!
//! After a restore, before anything new is written:
//!
//! * the transactions the restored checkpoint prepared are committed, with the producer id
//!   and epoch the coordinator describes (the producer that opened them is gone; see
//!   [`super::admin`]). One the coordinator has already committed is left alone; one it has
//!   aborted (its `transaction.timeout.ms` ran out while the job was down) means that
//!   checkpoint's output is lost, and the job fails with that message instead of going on;
//! * every other open transaction of the prefix is aborted (those of later checkpoints, of
//!   any earlier worker count), so that `read_committed` readers are not held back until the
//!   broker's timeout.
//!
//! Each old worker's transactions are finished by the new worker `old % workers`. A job that
//! starts without a restore aborts the prefix's open transactions too.
//!
//! Records are partitioned like the Java client's default partitioner when they have a key
//! (`murmur2` of the key), and spread over partitions when they have none.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Message};
use serde::Serialize;
use spate_types::{Sink, SinkContext, SinkWriter, SpateError, SpateResult};

use super::admin::KafkaAdmin;

/// How long a flush before a checkpoint may take before the checkpoint fails.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(120);

/// How the sink delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// No guarantee: records are sent and not waited for at checkpoints.
    None,
    /// Every record at least once through failures: checkpoints wait for acknowledgements.
    AtLeastOnce,
    /// Every record exactly once through failures, to `read_committed` readers: Kafka
    /// transactions committed when checkpoints complete. The prefix of the transactional ids
    /// must be unique to this sink among the cluster's writers.
    ExactlyOnce {
        /// The prefix of the transactional ids.
        prefix: String,
    },
}

impl std::str::FromStr for Delivery {
    type Err = SpateError;

    /// Parses `none`, `at-least-once` or `exactly-once` (the prefix is set separately).
    fn from_str(s: &str) -> SpateResult<Self> {
        match s {
            "none" => Ok(Delivery::None),
            "at-least-once" => Ok(Delivery::AtLeastOnce),
            "exactly-once" => Ok(Delivery::ExactlyOnce {
                prefix: "spate".into(),
            }),
            _ => Err(SpateError::Config(format!(
                "unknown Kafka delivery `{s}`: use none, at-least-once or exactly-once"
            ))),
        }
    }
}

/// One record, encoded: filled in by a [`MessageEncoder`].
#[derive(Debug, Default)]
pub struct Encoded {
    /// The key; `None` for a record without one.
    pub key: Option<Vec<u8>>,
    /// The value (cleared before each record).
    pub value: Vec<u8>,
    /// The partition to write to; `None` lets the partitioner choose.
    pub partition: Option<i32>,
}

/// The key of a record.
pub type KeyFn<T> = Arc<dyn Fn(&T) -> Vec<u8> + Send + Sync>;

/// Encodes a record into `Encoded`, or says in one line why it cannot.
pub type MessageEncoder<T> = Arc<dyn Fn(&T, &mut Encoded) -> Result<(), String> + Send + Sync>;

/// A sink into one Kafka topic. See the [module docs](self).
pub struct KafkaSink<T> {
    bootstrap: String,
    topic: String,
    delivery: Delivery,
    properties: Vec<(String, String)>,
    encoder: MessageEncoder<T>,
    key: Option<KeyFn<T>>,
}

impl<T: Serialize> KafkaSink<T> {
    /// Writes each record as a JSON value to `topic` of the cluster at `bootstrap`.
    pub fn json(bootstrap: impl Into<String>, topic: impl Into<String>) -> Self {
        Self::with_encoder(
            bootstrap,
            topic,
            Arc::new(|r: &T, out: &mut Encoded| {
                serde_json::to_writer(&mut out.value, r).map_err(|e| e.to_string())
            }),
        )
    }
}

impl KafkaSink<String> {
    /// Writes each string as a value, as it is.
    pub fn strings(bootstrap: impl Into<String>, topic: impl Into<String>) -> Self {
        Self::with_encoder(
            bootstrap,
            topic,
            Arc::new(|r: &String, out: &mut Encoded| {
                out.value.extend_from_slice(r.as_bytes());
                Ok(())
            }),
        )
    }
}

impl<T> KafkaSink<T> {
    /// Writes each record as `encoder` encodes it.
    pub fn with_encoder(
        bootstrap: impl Into<String>,
        topic: impl Into<String>,
        encoder: MessageEncoder<T>,
    ) -> Self {
        KafkaSink {
            bootstrap: bootstrap.into(),
            topic: topic.into(),
            delivery: Delivery::AtLeastOnce,
            properties: Vec::new(),
            encoder,
            key: None,
        }
    }

    /// The delivery guarantee (default: at least once).
    pub fn delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// Exactly once, with transactional ids starting with `prefix`.
    pub fn exactly_once(self, prefix: impl Into<String>) -> Self {
        self.delivery(Delivery::ExactlyOnce {
            prefix: prefix.into(),
        })
    }

    /// Gives every record the key `key(record)` (so records of a key land on one partition).
    pub fn key_by(mut self, key: impl Fn(&T) -> Vec<u8> + Send + Sync + 'static) -> Self {
        self.key = Some(Arc::new(key));
        self
    }

    /// Sets a librdkafka producer property (such as `linger.ms` or
    /// `transaction.timeout.ms`, default 15 minutes: the broker's largest by default; it must
    /// exceed the time from a checkpoint's cut to its completion plus the longest restart).
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.push((key.into(), value.into()));
        self
    }

    fn config(&self) -> ClientConfig {
        let mut cfg = ClientConfig::new();
        cfg.set("bootstrap.servers", &self.bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            // The Java client's partitioner: a key lands where Java producers put it.
            .set("partitioner", "murmur2_random")
            .set("transaction.timeout.ms", "900000")
            .set("log_level", "3");
        for (k, v) in &self.properties {
            cfg.set(k, v);
        }
        cfg
    }

    fn system(&self) -> String {
        format!("kafka {}", self.bootstrap)
    }
}

impl<T: 'static> Sink<T> for KafkaSink<T> {
    fn name(&self) -> String {
        format!("kafka:{}", self.topic)
    }

    fn create_writer(&self, ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        let mut writer = KafkaWriter {
            config: self.config(),
            system: self.system(),
            bootstrap: self.bootstrap.clone(),
            topic: self.topic.clone(),
            encoder: Arc::clone(&self.encoder),
            key: self.key.clone(),
            encoded: Encoded::default(),
            ctx: ctx.clone(),
            prefix: match &self.delivery {
                Delivery::ExactlyOnce { prefix } => Some(prefix.clone()),
                _ => None,
            },
            wait_at_checkpoints: self.delivery != Delivery::None,
            producer: None,
            current: None,
            pending: Vec::new(),
            next_seq: 1,
            started: false,
            to_commit: Vec::new(),
        };
        if writer.prefix.is_none() {
            writer.producer = Some(writer.new_producer(None)?);
        }
        Ok(Box::new(writer))
    }
}

/// Delivery failures, seen by the producer's callback.
#[derive(Default)]
struct Failures {
    count: std::sync::atomic::AtomicU64,
    first: Mutex<Option<String>>,
}

struct Context(Arc<Failures>);

impl ClientContext for Context {}

impl ProducerContext for Context {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, msg)) = result {
            self.0
                .count
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut first = self.0.first.lock().unwrap_or_else(|p| p.into_inner());
            if first.is_none() {
                *first = Some(format!("{e} (partition {})", msg.partition()));
            }
        }
    }
}

struct Producing {
    producer: BaseProducer<Context>,
    failures: Arc<Failures>,
}

/// One open or prepared transaction.
struct Txn {
    id: String,
    producing: Producing,
    records: u64,
}

/// What a checkpoint keeps of a prepared transaction.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct PreparedTxn {
    id: String,
    records: u64,
    checkpoint: u64,
}

/// A writer's state in a checkpoint.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct WriterState {
    worker: usize,
    workers: usize,
    /// The next sequence number of its transactional ids.
    next_seq: u64,
    /// Every transaction it had prepared and not committed.
    prepared: Vec<PreparedTxn>,
}

struct KafkaWriter<T> {
    config: ClientConfig,
    system: String,
    bootstrap: String,
    topic: String,
    encoder: MessageEncoder<T>,
    key: Option<KeyFn<T>>,
    encoded: Encoded,
    ctx: SinkContext,
    /// Exactly once: the transactional ids' prefix.
    prefix: Option<String>,
    wait_at_checkpoints: bool,
    /// At least once, or none: the one producer.
    producer: Option<Producing>,
    /// Exactly once: the open transaction.
    current: Option<Txn>,
    /// Exactly once: prepared transactions, by checkpoint.
    pending: Vec<(u64, Txn)>,
    next_seq: u64,
    /// Whether the lingering transactions were dealt with and the first one began.
    started: bool,
    /// Restored prepared transactions this writer must commit before it starts.
    to_commit: Vec<PreparedTxn>,
}

impl<T> KafkaWriter<T> {
    fn err(&self, what: impl std::fmt::Display) -> SpateError {
        SpateError::connector(self.system.clone(), what)
    }

    fn new_producer(&self, txn_id: Option<&str>) -> SpateResult<Producing> {
        let mut cfg = self.config.clone();
        if let Some(id) = txn_id {
            cfg.set("transactional.id", id);
        }
        let failures = Arc::new(Failures::default());
        let producer: BaseProducer<Context> = cfg
            .create_with_context(Context(Arc::clone(&failures)))
            .map_err(|e| self.err(format!("creating a producer: {e}")))?;
        Ok(Producing { producer, failures })
    }

    fn txn_id(&self, seq: u64) -> String {
        let prefix = self.prefix.as_deref().unwrap_or("spate");
        format!("{prefix}-{}-{seq}", self.ctx.worker_index)
    }

    /// Exactly once: begins the next transaction on a producer of its own.
    fn begin(&mut self) -> SpateResult<()> {
        let id = self.txn_id(self.next_seq);
        self.next_seq += 1;
        let producing = self.new_producer(Some(&id))?;
        producing
            .producer
            .init_transactions(Duration::from_secs(60))
            .map_err(|e| self.err(format!("initializing transactions of {id}: {e}")))?;
        producing
            .producer
            .begin_transaction()
            .map_err(|e| self.err(format!("beginning transaction {id}: {e}")))?;
        self.current = Some(Txn {
            id,
            producing,
            records: 0,
        });
        Ok(())
    }

    /// Exactly once, before the first record: finishes what the restored checkpoint
    /// prepared, aborts the prefix's other open transactions of the old workers this one
    /// stands in for, and begins the first transaction.
    fn start(&mut self) -> SpateResult<()> {
        if self.started || self.prefix.is_none() {
            return Ok(());
        }
        self.started = true;
        let prefix = self.prefix.clone().expect("checked above");
        let mut admin = KafkaAdmin::new(&self.bootstrap);
        let committed: Vec<String> = self.to_commit.iter().map(|t| t.id.clone()).collect();
        for txn in std::mem::take(&mut self.to_commit) {
            self.recommit(&mut admin, &txn)?;
            crate::failpoint::failpoint("kafka.after_recovery_commit");
        }
        // The brokers, from a producer's metadata, to list their open transactions.
        let probe = self.new_producer(None)?;
        let md = probe
            .producer
            .client()
            .fetch_metadata(None, Duration::from_secs(30))
            .map_err(|e| self.err(format!("cluster metadata: {e}")))?;
        let brokers: Vec<String> = md
            .brokers()
            .iter()
            .map(|b| format!("{}:{}", b.host(), b.port()))
            .collect();
        let open = admin.list_open(&brokers, &format!("{prefix}-"))?;
        for id in open {
            if committed.contains(&id) {
                continue;
            }
            let Some(old_worker) = worker_of(&prefix, &id) else {
                continue;
            };
            if old_worker % self.ctx.workers.max(1) != self.ctx.worker_index {
                continue;
            }
            let d = admin.describe(&id)?;
            if d.state.as_deref() == Some("Ongoing") {
                tracing::info!(transaction = %id, "aborting a transaction the restored checkpoint does not cover");
                admin.end(&d, false)?;
            }
        }
        self.begin()
    }

    /// Commits a transaction that a restored checkpoint prepared (idempotently).
    fn recommit(&self, admin: &mut KafkaAdmin, txn: &PreparedTxn) -> SpateResult<()> {
        let d = admin.describe(&txn.id)?;
        match d.state.as_deref() {
            Some("Ongoing") => {
                tracing::info!(transaction = %txn.id, "committing a transaction of the restored checkpoint");
                admin.end(&d, true)
            }
            Some("PrepareCommit") | Some("CompleteCommit") => Ok(()),
            _ if txn.records == 0 => Ok(()),
            state => Err(SpateError::Job(format!(
                "Kafka transaction {} of checkpoint {} ({} records) was aborted by the broker \
                 (state {}), so that checkpoint's output is lost: its transaction.timeout.ms ran \
                 out before the job recovered; raise transaction.timeout.ms (at most the \
                 broker's transaction.max.timeout.ms) above the longest time to recover",
                txn.id,
                txn.checkpoint,
                txn.records,
                state.unwrap_or("unknown")
            ))),
        }
    }

    fn failed(&self, producing: &Producing) -> SpateResult<()> {
        let n = producing
            .failures
            .count
            .load(std::sync::atomic::Ordering::Relaxed);
        if n == 0 {
            return Ok(());
        }
        let first = producing
            .failures
            .first
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default();
        Err(self.err(format!(
            "{n} records to {} were not delivered; the first: {first}",
            self.topic
        )))
    }
}

/// The old worker index in a transactional id `PREFIX-WORKER-SEQ`.
fn worker_of(prefix: &str, id: &str) -> Option<usize> {
    let rest = id.strip_prefix(prefix)?.strip_prefix('-')?;
    let (worker, seq) = rest.split_once('-')?;
    seq.parse::<u64>().ok()?;
    worker.parse().ok()
}

/// Sends one encoded record, waiting (while serving delivery reports) when the producer's
/// queue is full.
fn send(producing: &Producing, topic: &str, encoded: &Encoded) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let mut record: BaseRecord<'_, [u8], [u8]> =
            BaseRecord::to(topic).payload(encoded.value.as_slice());
        if let Some(k) = encoded.key.as_deref() {
            record = record.key(k);
        }
        if let Some(p) = encoded.partition {
            record = record.partition(p);
        }
        match producing.producer.send(record) {
            Ok(()) => return Ok(()),
            Err((
                rdkafka::error::KafkaError::MessageProduction(
                    rdkafka::types::RDKafkaErrorCode::QueueFull,
                ),
                _,
            )) => {
                if started.elapsed() > FLUSH_TIMEOUT {
                    return Err("the producer's queue stayed full for 120 s".into());
                }
                producing.producer.poll(Duration::from_millis(5));
            }
            Err((e, _)) => return Err(e.to_string()),
        }
    }
}

impl<T> SinkWriter<T> for KafkaWriter<T> {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.start()?;
        let producing = match (&self.current, &self.producer) {
            (Some(txn), _) => &txn.producing,
            (None, Some(p)) => p,
            (None, None) => {
                return Err(SpateError::Internal("Kafka sink without a producer".into()))
            }
        };
        for record in records.iter() {
            self.encoded.value.clear();
            self.encoded.partition = None;
            self.encoded.key = self.key.as_ref().map(|k| k(record));
            if let Err(e) = (self.encoder)(record, &mut self.encoded) {
                return Err(SpateError::function(format!("kafka:{}", self.topic), e));
            }
            send(producing, &self.topic, &self.encoded).map_err(|e| {
                SpateError::connector(
                    self.system.clone(),
                    format!("writing to {}: {e}", self.topic),
                )
            })?;
        }
        producing.producer.poll(Duration::ZERO);
        self.failed(producing)?;
        if let Some(txn) = self.current.as_mut() {
            txn.records += records.len() as u64;
        }
        records.clear();
        Ok(())
    }

    fn tick(&mut self, _now: Instant) -> SpateResult<()> {
        let producing = match (&self.current, &self.producer) {
            (Some(txn), _) => &txn.producing,
            (None, Some(p)) => p,
            (None, None) => return Ok(()),
        };
        producing.producer.poll(Duration::ZERO);
        self.failed(producing)
    }

    fn close(&mut self) -> SpateResult<()> {
        if let Some(p) = self.producer.as_ref() {
            p.producer
                .flush(FLUSH_TIMEOUT)
                .map_err(|e| self.err(format!("flushing: {e}")))?;
            return self.failed(p);
        }
        // The engine closes sinks once the final checkpoint, if any, has completed: commit
        // everything.
        self.start()?;
        let pending = std::mem::take(&mut self.pending);
        for (_, txn) in pending
            .into_iter()
            .chain(self.current.take().map(|t| (0, t)))
        {
            txn.producing
                .producer
                .commit_transaction(FLUSH_TIMEOUT)
                .map_err(|e| self.err(format!("committing transaction {}: {e}", txn.id)))?;
            self.failed(&txn.producing)?;
        }
        Ok(())
    }

    fn pre_commit(&mut self, checkpoint: u64) -> SpateResult<Vec<u8>> {
        if let Some(p) = self.producer.as_ref() {
            if self.wait_at_checkpoints {
                p.producer
                    .flush(FLUSH_TIMEOUT)
                    .map_err(|e| self.err(format!("flushing at checkpoint {checkpoint}: {e}")))?;
            }
            self.failed(p)?;
            return Ok(Vec::new());
        }
        self.start()?;
        let txn = self.current.take().expect("started: a transaction is open");
        txn.producing
            .producer
            .flush(FLUSH_TIMEOUT)
            .map_err(|e| self.err(format!("flushing transaction {}: {e}", txn.id)))?;
        self.failed(&txn.producing)?;
        self.pending.push((checkpoint, txn));
        self.begin()?;
        crate::failpoint::failpoint("kafka.after_pre_commit");
        let state = WriterState {
            worker: self.ctx.worker_index,
            workers: self.ctx.workers,
            next_seq: self.next_seq,
            prepared: self
                .pending
                .iter()
                .map(|(c, t)| PreparedTxn {
                    id: t.id.clone(),
                    records: t.records,
                    checkpoint: *c,
                })
                .collect(),
        };
        serde_json::to_vec(&state)
            .map_err(|e| SpateError::Internal(format!("Kafka sink state: {e}")))
    }

    fn commit(&mut self, checkpoint: u64) -> SpateResult<()> {
        while self.pending.first().is_some_and(|(c, _)| *c <= checkpoint) {
            let (_, txn) = self.pending.remove(0);
            crate::failpoint::failpoint("kafka.before_commit");
            txn.producing
                .producer
                .commit_transaction(FLUSH_TIMEOUT)
                .map_err(|e| self.err(format!("committing transaction {}: {e}", txn.id)))?;
        }
        Ok(())
    }

    fn restore(&mut self, states: &[Vec<u8>]) -> SpateResult<()> {
        if self.prefix.is_none() {
            return Ok(());
        }
        let workers = self.ctx.workers.max(1);
        for bytes in states {
            if bytes.is_empty() {
                continue;
            }
            let state: WriterState = serde_json::from_slice(bytes).map_err(|e| {
                SpateError::Job(format!(
                    "Kafka sink {}: a checkpoint's sink state is unreadable: {e}",
                    self.topic
                ))
            })?;
            // Sequence numbers go on after every old worker's, so no id of the restored
            // checkpoint is used again.
            self.next_seq = self.next_seq.max(state.next_seq);
            if state.worker % workers == self.ctx.worker_index {
                self.to_commit.extend(state.prepared);
            }
        }
        self.start()
    }

    fn exactly_once(&self) -> bool {
        self.prefix.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_worker_of_a_transactional_id() {
        assert_eq!(worker_of("job-a", "job-a-3-17"), Some(3));
        assert_eq!(worker_of("job-a", "job-ab-3-17"), None);
        assert_eq!(worker_of("job", "job-a-3-17"), None);
        assert_eq!(worker_of("job", "job-3"), None);
    }
}
