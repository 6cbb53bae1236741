//! The Kafka source and sink against a real broker (started by `scripts/test`, which exports
//! `SPATE_KAFKA_BOOTSTRAP`), driven through the `Source`/`Sink` traits as the engine drives
//! them, with a plain `read_committed` consumer as the oracle of what is visible.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use spate_connectors::kafka::{
    admin::KafkaAdmin, KafkaMessage, KafkaRecord, KafkaSink, KafkaSource, StartOffsets,
};
use spate_types::{
    BadRecordPolicy, DeadLetter, Sink, SinkContext, Source, SourceContext, SourceOutput,
    SourceReader, SourceStatus, SplitMark, SplitPosition,
};

fn bootstrap() -> String {
    std::env::var("SPATE_KAFKA_BOOTSTRAP").expect(
        "SPATE_KAFKA_BOOTSTRAP is not set: run the tests with scripts/test, which starts a Kafka \
         broker (scripts/brokers start) and exports it",
    )
}

/// A fresh topic with `partitions` partitions.
fn topic(name: &str, partitions: i32) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let t = format!("{name}-{}-{nanos}", std::process::id());
    KafkaAdmin::new(&bootstrap())
        .create_topic(&t, partitions, false)
        .unwrap();
    t
}

fn producer(extra: &[(&str, &str)]) -> BaseProducer {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", bootstrap())
        .set("linger.ms", "1")
        .set("partitioner", "murmur2_random");
    for (k, v) in extra {
        cfg.set(*k, *v);
    }
    cfg.create().unwrap()
}

/// Writes `(partition, value, timestamp)` messages and waits for them.
fn produce(topic: &str, messages: &[(i32, String, Option<i64>)]) {
    let p = producer(&[]);
    for (partition, value, ts) in messages {
        let mut r: BaseRecord<'_, (), str> =
            BaseRecord::to(topic).partition(*partition).payload(value);
        if let Some(ts) = ts {
            r = r.timestamp(*ts);
        }
        p.send(r).map_err(|(e, _)| e).unwrap();
        p.poll(Duration::ZERO);
    }
    p.flush(Duration::from_secs(30)).unwrap();
}

/// Everything a `read_committed` consumer sees in `topic`, by partition, in offset order,
/// read up to the last stable offsets (which an open transaction holds back: then this
/// waits up to `patience` and returns what it has).
fn read_committed(topic: &str, partitions: i32, patience: Duration) -> BTreeMap<i32, Vec<String>> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", "oracle")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let deadline = Instant::now() + patience;
    loop {
        // Caught up when every partition's position reached its high watermark.
        let caught_up = (0..partitions).all(|p| {
            let (_, high) = c
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap();
            let pos = c.position().unwrap();
            match pos.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => o >= high,
                _ => high == 0,
            }
        });
        if caught_up || Instant::now() > deadline {
            return out;
        }
        while let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.unwrap();
            out.entry(m.partition())
                .or_default()
                .push(String::from_utf8(m.payload().unwrap_or_default().to_vec()).unwrap());
        }
    }
}

fn ctx(worker_index: usize, workers: usize) -> SourceContext {
    SourceContext {
        worker_index,
        workers,
    }
}

/// What a reader gave in some polls.
struct Polled<T> {
    records: Vec<T>,
    dead: Vec<DeadLetter>,
    marks: Vec<SplitMark>,
    finished: bool,
}

impl<T> Default for Polled<T> {
    fn default() -> Self {
        Polled {
            records: Vec::new(),
            dead: Vec::new(),
            marks: Vec::new(),
            finished: false,
        }
    }
}

/// Polls `reader` until it gave `want` records, finished, or `patience` passed.
fn poll_until<T>(
    reader: &mut dyn SourceReader<T>,
    into: &mut Polled<T>,
    want: usize,
    patience: Duration,
) {
    let deadline = Instant::now() + patience;
    let mut dropped = 0;
    while into.records.len() < want && Instant::now() < deadline && !into.finished {
        let mut out = SourceOutput::new(&mut into.records, &mut into.dead, &mut dropped)
            .with_splits(&mut into.marks);
        // One record per poll at most, so that a test can stop at an exact count.
        let status = reader.poll(&mut out, 1).unwrap();
        match status {
            SourceStatus::Finished => into.finished = true,
            SourceStatus::Idle => std::thread::sleep(Duration::from_millis(5)),
            SourceStatus::More => {}
        }
    }
}

fn values(n: usize, tag: &str) -> Vec<String> {
    (0..n)
        .map(|i| format!("{{\"n\":{i},\"tag\":\"{tag}\"}}"))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
struct Doc {
    n: u64,
    tag: String,
}

#[test]
fn partitions_spread_over_workers_and_a_restore_onto_fewer_goes_on_exactly_where_it_stopped() {
    let t = topic("spread", 5);
    let all: Vec<(i32, String, Option<i64>)> = values(500, "a")
        .into_iter()
        .enumerate()
        .map(|(i, v)| ((i % 5) as i32, v, None))
        .collect();
    produce(&t, &all);
    let source = KafkaSource::<Doc>::json(bootstrap(), &[&t]).bounded();
    // Three workers read about half, then "fail": what they emitted after the snapshot is
    // lost with them.
    let mut before = Vec::new();
    let mut positions: Vec<SplitPosition> = Vec::new();
    for w in 0..3 {
        let mut reader = source.create_reader(&ctx(w, 3)).unwrap();
        let mut polled = Polled::default();
        poll_until(&mut *reader, &mut polled, 80, Duration::from_secs(20));
        positions.extend(reader.snapshot().unwrap());
        before.extend(polled.records);
        let mut more = Polled::default();
        poll_until(&mut *reader, &mut more, 10, Duration::from_secs(5));
    }
    assert_eq!(before.len(), 240);
    assert_eq!(
        positions.len(),
        5,
        "one position per partition over all workers"
    );
    // Two workers restore every position and read the rest.
    let mut after = Vec::new();
    for w in 0..2 {
        let mut reader = source.create_reader(&ctx(w, 2)).unwrap();
        reader.restore(&positions).unwrap();
        let mut polled = Polled::default();
        poll_until(
            &mut *reader,
            &mut polled,
            usize::MAX,
            Duration::from_secs(30),
        );
        assert!(
            polled.finished,
            "a bounded reader finishes at the end offsets"
        );
        after.extend(polled.records);
    }
    let mut got: Vec<Doc> = before.into_iter().chain(after).collect();
    got.sort();
    let mut want: Vec<Doc> = all
        .iter()
        .map(|(_, v, _)| serde_json::from_str(v).unwrap())
        .collect();
    want.sort();
    assert_eq!(got, want, "every record exactly once over the failure");
}

#[test]
fn start_offsets_latest_timestamp_and_committed() {
    let t = topic("start", 2);
    let early: Vec<_> = (0..10)
        .map(|i| {
            (
                i % 2,
                format!("{{\"n\":{i},\"tag\":\"early\"}}"),
                Some(1_000 + i as i64),
            )
        })
        .collect();
    produce(&t, &early);
    let read = |start: StartOffsets| -> Vec<u64> {
        let source = KafkaSource::<Doc>::json(bootstrap(), &[&t])
            .start(start)
            .group("start-test")
            .bounded();
        let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
        let mut polled = Polled::default();
        poll_until(
            &mut *reader,
            &mut polled,
            usize::MAX,
            Duration::from_secs(20),
        );
        assert!(polled.finished);
        let mut n: Vec<u64> = polled.records.iter().map(|d| d.n).collect();
        n.sort();
        n
    };
    assert_eq!(read(StartOffsets::Earliest), (0..10).collect::<Vec<_>>());
    assert_eq!(read(StartOffsets::Latest), Vec::<u64>::new());
    assert_eq!(read(StartOffsets::Timestamp(1_006)), vec![6, 7, 8, 9]);
    assert_eq!(
        read(StartOffsets::Timestamp(1_000)),
        (0..10).collect::<Vec<_>>()
    );
    assert_eq!(read(StartOffsets::Timestamp(5_000)), Vec::<u64>::new());
    // No committed offsets yet: the reset strategy decides.
    assert_eq!(
        read(StartOffsets::Committed {
            reset: Box::new(StartOffsets::Latest)
        }),
        Vec::<u64>::new()
    );
    assert_eq!(
        read(StartOffsets::Committed {
            reset: Box::new(StartOffsets::Earliest)
        }),
        (0..10).collect::<Vec<_>>()
    );
    // Latest: what is written after the reader started, only.
    let source = KafkaSource::<Doc>::json(bootstrap(), &[&t]).start(StartOffsets::Latest);
    let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
    let mut polled = Polled::default();
    poll_until(&mut *reader, &mut polled, 1, Duration::from_millis(500));
    produce(&t, &[(0, "{\"n\":100,\"tag\":\"late\"}".into(), None)]);
    poll_until(&mut *reader, &mut polled, 1, Duration::from_secs(20));
    assert_eq!(
        polled.records.iter().map(|d| d.n).collect::<Vec<_>>(),
        vec![100]
    );
}

#[test]
fn read_committed_skips_aborted_transactions_and_a_bounded_read_ends_after_a_commit_marker() {
    let t = topic("txn", 1);
    let p = producer(&[("transactional.id", &format!("{t}-writer"))]);
    p.init_transactions(Duration::from_secs(30)).unwrap();
    for (tag, commit) in [("c1", true), ("ab", false), ("c2", true)] {
        p.begin_transaction().unwrap();
        for v in values(5, tag) {
            p.send(BaseRecord::<(), str>::to(&t).partition(0).payload(&v))
                .map_err(|(e, _)| e)
                .unwrap();
        }
        p.flush(Duration::from_secs(30)).unwrap();
        if commit {
            p.commit_transaction(Duration::from_secs(30)).unwrap();
        } else {
            p.abort_transaction(Duration::from_secs(30)).unwrap();
        }
    }
    // The partition's tail is c2's commit marker, which no consumer is ever given.
    let source = KafkaSource::<Doc>::json(bootstrap(), &[&t]).bounded();
    let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
    let mut polled = Polled::default();
    poll_until(
        &mut *reader,
        &mut polled,
        usize::MAX,
        Duration::from_secs(20),
    );
    assert!(
        polled.finished,
        "the bounded read ends at the commit marker"
    );
    let tags: BTreeSet<&str> = polled.records.iter().map(|d| d.tag.as_str()).collect();
    assert_eq!(tags, BTreeSet::from(["c1", "c2"]));
    assert_eq!(polled.records.len(), 10);
}

#[test]
fn bad_messages_follow_the_policy_with_partition_and_offset() {
    let t = topic("bad", 2);
    produce(
        &t,
        &[
            (1, "{\"n\":1,\"tag\":\"ok\"}".into(), None),
            (1, "not json".into(), None),
            (0, "{\"n\":2}".into(), None),
        ],
    );
    let source = KafkaSource::<Doc>::json(bootstrap(), &[&t])
        .bounded()
        .policy(BadRecordPolicy::DeadLetter("/dev/null".into()));
    let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
    let mut polled = Polled::default();
    poll_until(
        &mut *reader,
        &mut polled,
        usize::MAX,
        Duration::from_secs(20),
    );
    assert_eq!(polled.records.len(), 1);
    let mut dead: Vec<(String, u64)> = polled
        .dead
        .iter()
        .map(|d| (d.source.clone(), d.line))
        .collect();
    dead.sort();
    assert_eq!(
        dead,
        vec![(format!("kafka:{t}/0"), 0), (format!("kafka:{t}/1"), 1)]
    );
    assert!(polled.dead.iter().any(|d| d.raw == "not json"));
    // Under `fail`, the job fails and names the partition and offset.
    let source = KafkaSource::<Doc>::json(bootstrap(), &[&t]).bounded();
    let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
    let (mut r, mut d, mut n, mut m) = (Vec::new(), Vec::new(), 0, Vec::new());
    let err = loop {
        let mut out = SourceOutput::new(&mut r, &mut d, &mut n).with_splits(&mut m);
        match reader.poll(&mut out, 100) {
            Err(e) => break e.to_string(),
            Ok(SourceStatus::Finished) => panic!("finished without failing"),
            Ok(_) => {}
        }
    };
    assert!(err.contains(&format!("kafka:{t}/")), "{err}");
}

#[test]
fn every_owned_partition_is_a_split_from_the_start_and_new_partitions_are_discovered() {
    let t = topic("discover", 1);
    let source = KafkaSource::<KafkaRecord>::records(bootstrap(), &[&t])
        .discovery_interval(Duration::from_millis(300));
    let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
    let mut polled = Polled::default();
    poll_until(&mut *reader, &mut polled, 1, Duration::from_millis(200));
    assert!(
        polled
            .marks
            .iter()
            .any(|m| matches!(m, SplitMark::Start { split: 0, .. })),
        "an empty partition is a split (it holds the watermark until idle): {:?}",
        polled.marks
    );
    KafkaAdmin::new(&bootstrap())
        .create_partitions(&t, 3)
        .unwrap();
    produce(&t, &[(2, "on a new partition".into(), Some(7))]);
    poll_until(&mut *reader, &mut polled, 1, Duration::from_secs(20));
    assert_eq!(
        polled.records.len(),
        1,
        "the new partition is read from its start"
    );
    let r = &polled.records[0];
    assert_eq!((r.partition, r.offset, r.timestamp), (2, 0, Some(7)));
    assert_eq!(r.value.as_deref(), Some(&b"on a new partition"[..]));
    let positions = reader.snapshot().unwrap();
    assert_eq!(positions.len(), 3, "discovered partitions are checkpointed");
}

fn sink_ctx(worker_index: usize, workers: usize) -> SinkContext {
    SinkContext {
        worker_index,
        workers,
    }
}

fn strings(n: usize, tag: &str) -> Vec<String> {
    (0..n).map(|i| format!("{tag}-{i}")).collect()
}

fn seen(topic: &str, partitions: i32, patience: Duration) -> Vec<String> {
    let mut all: Vec<String> = read_committed(topic, partitions, patience)
        .into_values()
        .flatten()
        .collect();
    all.sort();
    all
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn exactly_once_output_is_visible_only_when_its_checkpoint_completes_and_survives_a_crash() {
    let t = topic("eos", 3);
    let prefix = format!("{t}-tx");
    let sink = KafkaSink::<String>::strings(bootstrap(), &t).exactly_once(&prefix);
    let mut w = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    w.write_batch(&mut strings(10, "a")).unwrap();
    let _state1 = w.pre_commit(1).unwrap();
    assert_eq!(
        seen(&t, 3, Duration::from_millis(500)),
        Vec::<String>::new()
    );
    w.commit(1).unwrap();
    assert_eq!(
        seen(&t, 3, Duration::from_secs(10)),
        sorted(strings(10, "a"))
    );
    // Checkpoint 2 is taken, then the process dies before it completes: its transaction is
    // prepared and open, and so is the one after it, never checkpointed.
    w.write_batch(&mut strings(5, "b")).unwrap();
    let state2 = w.pre_commit(2).unwrap();
    w.write_batch(&mut strings(3, "lost")).unwrap();
    w.tick(Instant::now()).unwrap();
    std::mem::forget(w);
    // Checkpoint 2 completed (the coordinator says so): the restore commits its transaction
    // and aborts the later one, so a reader sees b and not `lost`, and is not held back.
    let mut w2 = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    w2.restore(std::slice::from_ref(&state2)).unwrap();
    let mut want = strings(10, "a");
    want.extend(strings(5, "b"));
    assert_eq!(seen(&t, 3, Duration::from_secs(10)), sorted(want.clone()));
    // A second restore of the same checkpoint (another failure) changes nothing.
    let mut w3 = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    w3.restore(&[state2]).unwrap();
    w3.write_batch(&mut strings(2, "c")).unwrap();
    let _ = w3.pre_commit(3).unwrap();
    w3.commit(3).unwrap();
    want.extend(strings(2, "c"));
    assert_eq!(seen(&t, 3, Duration::from_secs(10)), sorted(want));
    w3.close().unwrap();
    drop(w2);
}

#[test]
fn a_restore_onto_fewer_workers_finishes_every_old_workers_transactions() {
    let t = topic("eos-scale", 2);
    let prefix = format!("{t}-tx");
    let sink = KafkaSink::<String>::strings(bootstrap(), &t).exactly_once(&prefix);
    let mut states = Vec::new();
    let mut want = Vec::new();
    for w in 0..3 {
        let mut writer = sink.create_writer(&sink_ctx(w, 3)).unwrap();
        let mut batch = strings(4, &format!("w{w}"));
        want.extend(batch.clone());
        writer.write_batch(&mut batch).unwrap();
        states.push(writer.pre_commit(1).unwrap());
        writer.write_batch(&mut strings(2, "lost")).unwrap();
        writer.tick(Instant::now()).unwrap();
        std::mem::forget(writer);
    }
    let mut writer = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    writer.restore(&states).unwrap();
    assert_eq!(seen(&t, 2, Duration::from_secs(10)), sorted(want));
    writer.close().unwrap();
}

#[test]
fn at_least_once_output_is_flushed_at_checkpoints_and_keys_land_where_java_puts_them() {
    let t = topic("alo", 4);
    let sink =
        KafkaSink::<String>::strings(bootstrap(), &t).key_by(|s: &String| s.clone().into_bytes());
    let mut w = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    let records = strings(200, "k");
    w.write_batch(&mut records.clone()).unwrap();
    w.pre_commit(1).unwrap();
    let by_partition = read_committed(&t, 4, Duration::from_secs(10));
    for (p, vs) in &by_partition {
        for v in vs {
            assert_eq!(java_partition(v.as_bytes(), 4), *p, "key {v}");
        }
    }
    let n: usize = by_partition.values().map(Vec::len).sum();
    assert_eq!(n, 200);
    w.close().unwrap();
}

/// The Java client's default partitioner for a keyed record: `toPositive(murmur2(key)) % n`.
fn java_partition(key: &[u8], n: i32) -> i32 {
    let (seed, m, r) = (0x9747_b28c_u32, 0x5bd1_e995_u32, 24);
    let len = key.len();
    let mut h = seed ^ len as u32;
    for chunk in key.chunks_exact(4) {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(m);
        k ^= k >> r;
        k = k.wrapping_mul(m);
        h = h.wrapping_mul(m);
        h ^= k;
    }
    let tail = &key[len & !3..];
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(m);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(m);
    h ^= h >> 15;
    ((h & 0x7fff_ffff) % n as u32) as i32
}

#[test]
fn a_transaction_the_broker_aborted_fails_the_restore_loudly() {
    let t = topic("eos-timeout", 1);
    let prefix = format!("{t}-tx");
    let sink = KafkaSink::<String>::strings(bootstrap(), &t)
        .exactly_once(&prefix)
        .property("transaction.timeout.ms", "1500");
    let mut w = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    w.write_batch(&mut strings(3, "x")).unwrap();
    let state = w.pre_commit(1).unwrap();
    std::mem::forget(w);
    // The broker aborts it once its timeout passed (it checks every
    // transaction.abort.timed.out.transaction.cleanup.interval.ms: 1 s in ci/kafka).
    let mut admin = KafkaAdmin::new(&bootstrap());
    let id = format!("{prefix}-0-1");
    let deadline = Instant::now() + Duration::from_secs(60);
    while admin.describe(&id).unwrap().state.as_deref() == Some("Ongoing") {
        assert!(Instant::now() < deadline, "the broker never aborted {id}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut w2 = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    let err = w2.restore(&[state]).unwrap_err().to_string();
    assert!(
        err.contains("aborted by the broker") && err.contains(&id),
        "{err}"
    );
}

#[test]
fn a_decoder_sees_keys_headers_and_timestamps() {
    let t = topic("meta", 1);
    let p = producer(&[]);
    let headers = rdkafka::message::OwnedHeaders::new().insert(rdkafka::message::Header {
        key: "h",
        value: Some("v"),
    });
    p.send(
        BaseRecord::to(&t)
            .partition(0)
            .key("k")
            .payload("p")
            .timestamp(42)
            .headers(headers),
    )
    .map_err(|(e, _)| e)
    .unwrap();
    p.flush(Duration::from_secs(30)).unwrap();
    let decoder = Arc::new(|m: &KafkaMessage<'_>| {
        Ok(format!(
            "{}|{}|{:?}|{:?}",
            String::from_utf8_lossy(m.key.unwrap_or_default()),
            String::from_utf8_lossy(m.value.unwrap_or_default()),
            m.timestamp,
            m.headers()
        ))
    });
    let source = KafkaSource::with_decoder(bootstrap(), &[&t], decoder).bounded();
    let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
    let mut polled = Polled::default();
    poll_until(
        &mut *reader,
        &mut polled,
        usize::MAX,
        Duration::from_secs(20),
    );
    assert_eq!(
        polled.records,
        vec![format!(
            "k|p|Some(42)|{:?}",
            vec![("h".to_string(), Some(b"v".to_vec()))]
        )]
    );
}

#[test]
fn completed_checkpoints_commit_their_offsets_to_the_group() {
    let t = topic("commit", 2);
    produce(
        &t,
        &(0..6)
            .map(|i| (i % 2, format!("{{\"n\":{i},\"tag\":\"c\"}}"), None))
            .collect::<Vec<_>>(),
    );
    let group = format!("{t}-group");
    let source = KafkaSource::<Doc>::json(bootstrap(), &[&t]).group(&group);
    let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
    let mut polled = Polled::default();
    poll_until(&mut *reader, &mut polled, 4, Duration::from_secs(20));
    let positions = reader.snapshot().unwrap();
    reader.checkpoint_complete(&positions).unwrap();
    // The asynchronous commit is sent by the reader's next polls.
    let mut more = Polled::default();
    poll_until(
        &mut *reader,
        &mut more,
        usize::MAX,
        Duration::from_millis(1500),
    );
    // A reader of the group that starts at its committed offsets reads what came after the
    // checkpoint.
    let later = KafkaSource::<Doc>::json(bootstrap(), &[&t])
        .group(&group)
        .start(StartOffsets::Committed {
            reset: Box::new(StartOffsets::Earliest),
        })
        .bounded();
    let mut reader = later.create_reader(&ctx(0, 1)).unwrap();
    let mut rest = Polled::default();
    poll_until(&mut *reader, &mut rest, usize::MAX, Duration::from_secs(20));
    let mut all: Vec<u64> = polled
        .records
        .iter()
        .chain(&rest.records)
        .map(|d| d.n)
        .collect();
    all.sort();
    assert_eq!(
        all,
        (0..6).collect::<Vec<_>>(),
        "before the checkpoint + after it = all, once"
    );
}
