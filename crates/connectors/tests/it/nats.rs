//! The NATS core and JetStream sources and sinks against a real nats-server with JetStream
//! (`scripts/brokers start nats`; `scripts/brokers env` exports
//! `SPATE_NATS=nats://127.0.0.1:14222`), driven through the `Source`/`Sink` traits as the
//! engine drives them, with a pull consumer of the stream ([`JetStreamAdmin::read_all`]) as
//! the oracle of what is stored. Without the server these tests fail, they never skip.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spate_connectors::nats::admin::JetStreamAdmin;
use spate_connectors::nats::{
    Delivery, JetStreamRecord, JetStreamSink, JetStreamSource, NatsSink, NatsSource, NatsUrl,
    StartPosition,
};
use spate_types::{
    BadRecordPolicy, DeadLetter, Sink, SinkContext, Source, SourceContext, SourceOutput,
    SourceReader, SourceStatus,
};

fn server() -> String {
    std::env::var("SPATE_NATS").expect(
        "SPATE_NATS is not set: start the server with `scripts/brokers start nats` and export \
         what `scripts/brokers env` prints (SPATE_NATS=nats://127.0.0.1:14222)",
    )
}

/// A name unique to this test run, valid as a stream name and as a subject token.
fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{name}_{}_{nanos}", std::process::id())
}

fn ctx(worker_index: usize, workers: usize) -> SourceContext {
    SourceContext {
        worker_index,
        workers,
    }
}

fn sink_ctx(worker_index: usize, workers: usize) -> SinkContext {
    SinkContext {
        worker_index,
        workers,
    }
}

/// A fresh stream of the subjects `{base}.>` (memory storage), named `base`.
struct Stream {
    admin: JetStreamAdmin,
    name: String,
}

impl Stream {
    fn new(base: &str, duplicate_window: Duration) -> Stream {
        let admin = JetStreamAdmin::new(&server()).unwrap();
        admin
            .create_stream(base, &[&format!("{base}.>")], duplicate_window, false)
            .unwrap();
        Stream {
            admin,
            name: base.to_owned(),
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.admin.delete_stream(&self.name);
    }
}

/// Publishes `(subject, payload)`s to JetStream, at least once, and waits for every ack.
fn publish(stream: &str, messages: Vec<(String, Vec<u8>)>) {
    let sink = JetStreamSink::with_encoder(
        server(),
        stream,
        "unused",
        Arc::new(|m: &(String, Vec<u8>)| Ok((Some(m.0.clone()), m.1.clone()))),
    )
    .delivery(Delivery::AtLeastOnce);
    let mut w = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    let mut batch = messages;
    w.write_batch(&mut batch).unwrap();
    w.pre_commit(1).unwrap();
    w.close().unwrap();
}

#[derive(Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, PartialOrd, Ord, Clone)]
struct Rec {
    n: u32,
}

fn json(n: u32) -> Vec<u8> {
    format!("{{\"n\":{n}}}").into_bytes()
}

/// Polls until `want` records and dead letters arrived (never more: each poll asks for the
/// rest only), the reader finished, or `patience` passed; then returns whether it finished.
fn poll_until<T>(
    reader: &mut dyn SourceReader<T>,
    records: &mut Vec<T>,
    dead: &mut Vec<DeadLetter>,
    want: usize,
    patience: Duration,
) -> bool {
    let deadline = Instant::now() + patience;
    let mut dropped = 0;
    while records.len() + dead.len() < want && Instant::now() < deadline {
        let room = want - records.len() - dead.len();
        let mut out = SourceOutput::new(records, dead, &mut dropped);
        match reader.poll(&mut out, room.max(1)).unwrap() {
            SourceStatus::Finished => return true,
            SourceStatus::More => {}
            SourceStatus::Idle => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    false
}

/// Polls for `quiet` and fails if anything arrives.
fn assert_nothing_more<T: std::fmt::Debug>(reader: &mut dyn SourceReader<T>, quiet: Duration) {
    let (mut more, mut dead) = (Vec::new(), Vec::new());
    poll_until(reader, &mut more, &mut dead, 1, quiet);
    assert!(more.is_empty() && dead.is_empty(), "{more:?} {dead:?}");
}

#[test]
fn core_round_trip_and_queue_groups() {
    let base = unique("core");
    let source = NatsSource::<Rec>::json(server(), format!("{base}.>"));
    let mut reader = source.create_reader(&ctx(0, 2)).unwrap();
    // Without a queue group, one subscription per source: the other workers read nothing.
    let mut other = source.create_reader(&ctx(1, 2)).unwrap();
    let (mut r, mut d, mut dr) = (Vec::<Rec>::new(), Vec::new(), 0);
    let status = other
        .poll(&mut SourceOutput::new(&mut r, &mut d, &mut dr), 10)
        .unwrap();
    assert_eq!(status, SourceStatus::Finished);
    // Two workers of a queue-group source share the messages.
    let grouped = NatsSource::<Rec>::json(server(), format!("{base}.>")).queue_group("g");
    let mut g0 = grouped.create_reader(&ctx(0, 2)).unwrap();
    let mut g1 = grouped.create_reader(&ctx(1, 2)).unwrap();

    let sink = NatsSink::<Rec>::json(server(), format!("{base}.x"));
    let mut w = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    let sent: Vec<Rec> = (0..2000).map(|n| Rec { n }).collect();
    w.write_batch(&mut sent.clone()).unwrap();
    // `pre_commit` flushes: the server has every message when it returns.
    assert_eq!(w.pre_commit(1).unwrap(), Vec::<u8>::new());
    w.close().unwrap();

    let (mut got, mut dead) = (Vec::new(), Vec::new());
    poll_until(
        &mut *reader,
        &mut got,
        &mut dead,
        2000,
        Duration::from_secs(20),
    );
    assert!(dead.is_empty(), "{dead:?}");
    got.sort();
    assert_eq!(got, sent, "every message once");
    assert_nothing_more(&mut *reader, Duration::from_millis(300));

    let (mut a, mut b, mut dead) = (Vec::new(), Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.len() + b.len() < 2000 && Instant::now() < deadline {
        let want_a = 2000 - b.len();
        poll_until(
            &mut *g0,
            &mut a,
            &mut dead,
            want_a,
            Duration::from_millis(20),
        );
        let want_b = 2000 - a.len();
        poll_until(
            &mut *g1,
            &mut b,
            &mut dead,
            want_b,
            Duration::from_millis(20),
        );
    }
    assert!(!a.is_empty() && !b.is_empty(), "both members got some");
    let mut all: Vec<Rec> = a.into_iter().chain(b).collect();
    all.sort();
    assert_eq!(all, sent, "the group got every message once");
}

#[test]
fn core_url_and_bad_payloads() {
    let base = unique("coreurl");
    let url: NatsUrl = format!("{}/{base}.*", server()).parse().unwrap();
    assert!(!url.is_jetstream());
    let mut reader = url
        .core_source::<Rec>()
        .unwrap()
        .policy(BadRecordPolicy::DeadLetter("/dev/null".into()))
        .create_reader(&ctx(0, 1))
        .unwrap();
    let sink_url: NatsUrl = format!("{}/{base}.in", server()).parse().unwrap();
    let bytes = Arc::new(|r: &Vec<u8>| Ok((None, r.clone())));
    let mut w = sink_url
        .core_sink(bytes)
        .unwrap()
        .create_writer(&sink_ctx(0, 1))
        .unwrap();
    w.write_batch(&mut vec![json(1), b"not json".to_vec(), json(2)])
        .unwrap();
    w.close().unwrap();
    let (mut got, mut dead) = (Vec::new(), Vec::new());
    poll_until(
        &mut *reader,
        &mut got,
        &mut dead,
        3,
        Duration::from_secs(10),
    );
    assert_eq!(got, vec![Rec { n: 1 }, Rec { n: 2 }]);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].source, format!("nats:{base}.in"));
    assert_eq!((dead[0].line, dead[0].raw.as_str()), (2, "not json"));
    assert!(!dead[0].reason.contains('\n'));
}

/// A reader cut by a checkpoint after some records resumes, on one worker or on two, at the
/// stream sequences the checkpoint holds: every later message once, none earlier.
#[test]
fn jetstream_replays_from_a_checkpointed_sequence() {
    let base = unique("replay");
    let _stream = Stream::new(&base, Duration::from_secs(120));
    let (a, b) = (format!("{base}.a"), format!("{base}.b"));
    publish(
        &base,
        (0..60u32)
            .map(|n| (if n % 3 == 0 { b.clone() } else { a.clone() }, json(n)))
            .collect(),
    );
    let source = JetStreamSource::records(server(), &base, &[&a, &b]);
    let mut first = source.create_reader(&ctx(0, 1)).unwrap();
    let (mut got, mut dead) = (Vec::<JetStreamRecord>::new(), Vec::new());
    poll_until(
        &mut *first,
        &mut got,
        &mut dead,
        25,
        Duration::from_secs(20),
    );
    assert_eq!(got.len(), 25);
    let cut = first.snapshot().unwrap();
    assert_eq!(cut.len(), 2, "one position per split: {cut:?}");
    // Each split's position is the stream sequence of its last record before the cut (0: none
    // read yet).
    for pos in &cut {
        let filter = pos.position["filter"].as_str().unwrap();
        let last = got
            .iter()
            .filter(|r| r.subject == filter)
            .map(|r| r.sequence)
            .max()
            .unwrap_or(0);
        assert_eq!(pos.position["seq"].as_u64(), Some(last), "{pos:?}");
        assert_eq!(pos.position["stream"], base.as_str());
    }
    poll_until(
        &mut *first,
        &mut got,
        &mut dead,
        60,
        Duration::from_secs(20),
    );
    let sequences: BTreeSet<u64> = got.iter().map(|r| r.sequence).collect();
    assert_eq!(sequences, (1..=60).collect(), "every message once");
    assert_nothing_more(&mut *first, Duration::from_millis(300));
    let seen: BTreeSet<u64> = got[..25].iter().map(|r| r.sequence).collect();
    let rest: BTreeSet<u64> = (1..=60).filter(|s| !seen.contains(s)).collect();
    drop(first);

    // Restored on one worker.
    let mut second = source.create_reader(&ctx(0, 1)).unwrap();
    second.restore(&cut).unwrap();
    let mut again = Vec::new();
    poll_until(
        &mut *second,
        &mut again,
        &mut dead,
        35,
        Duration::from_secs(20),
    );
    assert_nothing_more(&mut *second, Duration::from_millis(500));
    let replayed: Vec<u64> = again.iter().map(|r| r.sequence).collect();
    assert_eq!(replayed.len(), 35, "nothing twice: {replayed:?}");
    assert_eq!(replayed.iter().copied().collect::<BTreeSet<_>>(), rest);
    // Payloads and subjects are the stored ones.
    for r in &again {
        let n: u32 = serde_json::from_slice::<Rec>(&r.payload).unwrap().n;
        assert_eq!(r.sequence, u64::from(n) + 1);
        assert_eq!(&r.subject, if n % 3 == 0 { &b } else { &a });
        assert_eq!(r.stream, base);
    }
    // New messages go on from there.
    publish(&base, vec![(a.clone(), json(60))]);
    let mut newer = Vec::new();
    poll_until(
        &mut *second,
        &mut newer,
        &mut dead,
        1,
        Duration::from_secs(10),
    );
    assert_eq!(
        newer.iter().map(|r| r.sequence).collect::<Vec<_>>(),
        vec![61]
    );
    drop(second);

    // Restored on two workers: each takes its split's position.
    let mut w0 = source.create_reader(&ctx(0, 2)).unwrap();
    let mut w1 = source.create_reader(&ctx(1, 2)).unwrap();
    w0.restore(&cut).unwrap();
    w1.restore(&cut).unwrap();
    let (mut r0, mut r1) = (Vec::new(), Vec::new());
    let a_rest = rest.iter().filter(|s| (*s - 1) % 3 != 0).count() + 1;
    poll_until(
        &mut *w0,
        &mut r0,
        &mut dead,
        a_rest,
        Duration::from_secs(20),
    );
    poll_until(
        &mut *w1,
        &mut r1,
        &mut dead,
        36 - a_rest,
        Duration::from_secs(20),
    );
    assert_nothing_more(&mut *w0, Duration::from_millis(300));
    assert_nothing_more(&mut *w1, Duration::from_millis(300));
    assert!(r0.iter().all(|r| r.subject == a) && r1.iter().all(|r| r.subject == b));
    let mut both: Vec<u64> = r0.iter().chain(&r1).map(|r| r.sequence).collect();
    both.sort_unstable();
    let mut want: Vec<u64> = rest.iter().copied().chain([61]).collect();
    want.sort_unstable();
    assert_eq!(both, want);
    assert!(dead.is_empty());

    // A start sequence without a checkpoint.
    let mut from = JetStreamSource::records(server(), &base, &[&a, &b])
        .start(StartPosition::Sequence(50))
        .create_reader(&ctx(0, 1))
        .unwrap();
    let mut tail = Vec::new();
    poll_until(
        &mut *from,
        &mut tail,
        &mut dead,
        12,
        Duration::from_secs(20),
    );
    assert_nothing_more(&mut *from, Duration::from_millis(300));
    let mut seqs: Vec<u64> = tail.iter().map(|r| r.sequence).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (50..=61).collect::<Vec<_>>());
}

/// `stop=latest` ends each split at its last message of when the reader started.
#[test]
fn bounded_jetstream_url_reads_to_the_end_and_finishes() {
    let base = unique("bounded");
    let _stream = Stream::new(&base, Duration::from_secs(120));
    publish(
        &base,
        (0..300u32)
            .map(|n| (format!("{base}.k{}", n % 4), json(n)))
            .collect(),
    );
    let url: NatsUrl = format!(
        "{}/{base}.k0,{base}.k1,{base}.k2,{base}.k3,{base}.none?stream={base}&stop=latest",
        server()
    )
    .parse()
    .unwrap();
    let source = url.jetstream_source::<Rec>().unwrap();
    assert!(source.is_bounded());
    let mut all = Vec::new();
    for w in 0..2 {
        let mut reader = source.create_reader(&ctx(w, 2)).unwrap();
        let drained = crate::util::drain(&mut *reader, 64);
        assert!(drained.error.is_none(), "{:?}", drained.error);
        all.extend(drained.records);
    }
    all.sort();
    assert_eq!(all, (0..300).map(|n| Rec { n }).collect::<Vec<_>>());
    // A start after the end: finished at once.
    let url: NatsUrl = format!(
        "{}/{base}.>?stream={base}&stop=latest&start=latest",
        server()
    )
    .parse()
    .unwrap();
    let mut reader = url
        .jetstream_source::<Rec>()
        .unwrap()
        .create_reader(&ctx(0, 1))
        .unwrap();
    let drained = crate::util::drain(&mut *reader, 64);
    assert!(drained.records.is_empty() && drained.error.is_none());
}

/// A bounded read from `start=timestamp:` reads exactly the messages published at or after
/// that time, and one from a time after the last message finishes at once, empty.
#[test]
fn bounded_jetstream_from_a_timestamp_reads_what_came_after_and_finishes() {
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let base = unique("since");
    let _stream = Stream::new(&base, Duration::from_secs(120));
    publish(
        &base,
        (0..200u32)
            .map(|n| (format!("{base}.k{}", n % 2), json(n)))
            .collect(),
    );
    std::thread::sleep(Duration::from_millis(50));
    let between = now_ms();
    std::thread::sleep(Duration::from_millis(50));
    // Only `k1` gets later messages: `k0` has none after the time.
    publish(
        &base,
        (200..260u32)
            .map(|n| (format!("{base}.k1"), json(n)))
            .collect(),
    );
    std::thread::sleep(Duration::from_millis(50));
    let after = now_ms();
    let read = |start: i64, workers: usize| {
        let url: NatsUrl = format!(
            "{}/{base}.k0,{base}.k1?stream={base}&stop=latest&start=timestamp:{start}",
            server()
        )
        .parse()
        .unwrap();
        let source = url.jetstream_source::<Rec>().unwrap();
        let mut all = Vec::new();
        for w in 0..workers {
            let mut reader = source.create_reader(&ctx(w, workers)).unwrap();
            let drained = crate::util::drain(&mut *reader, 64);
            assert!(drained.error.is_none(), "{:?}", drained.error);
            all.extend(drained.records);
        }
        all.sort();
        all
    };
    for workers in [1, 2] {
        assert_eq!(
            read(between, workers),
            (200..260).map(|n| Rec { n }).collect::<Vec<_>>()
        );
        assert_eq!(read(after, workers), Vec::<Rec>::new());
    }
}

/// Bad payloads go to the dead letters with `jetstream:STREAM/SUBJECT` as their source and
/// the stream sequence as their line; under `fail` the first one fails the poll and names both.
#[test]
fn jetstream_bad_payloads_go_to_dead_letters_with_subject_and_sequence() {
    let base = unique("bad");
    let _stream = Stream::new(&base, Duration::from_secs(120));
    let (good, odd) = (format!("{base}.good"), format!("{base}.odd"));
    publish(
        &base,
        vec![
            (good.clone(), json(1)),
            (odd.clone(), b"not json".to_vec()),
            (good.clone(), json(2)),
            (good.clone(), br#"{"n":"x"}"#.to_vec()),
            (odd.clone(), json(3)),
        ],
    );
    let source = JetStreamSource::<Rec>::json(server(), &base, &[&format!("{base}.>")])
        .policy(BadRecordPolicy::DeadLetter("/dev/null".into()));
    assert!(source.dead_letter_sink().is_some());
    let mut reader = source.create_reader(&ctx(0, 1)).unwrap();
    let (mut got, mut dead) = (Vec::new(), Vec::new());
    poll_until(
        &mut *reader,
        &mut got,
        &mut dead,
        5,
        Duration::from_secs(20),
    );
    assert_eq!(got, vec![Rec { n: 1 }, Rec { n: 2 }, Rec { n: 3 }]);
    let origins: Vec<(String, u64, String)> = dead
        .iter()
        .map(|d| (d.source.clone(), d.line, d.raw.clone()))
        .collect();
    assert_eq!(
        origins,
        vec![
            (format!("jetstream:{base}/{odd}"), 2, "not json".to_owned()),
            (
                format!("jetstream:{base}/{good}"),
                4,
                r#"{"n":"x"}"#.to_owned()
            ),
        ]
    );
    assert!(dead
        .iter()
        .all(|d| !d.reason.is_empty() && !d.reason.contains('\n')));
    // The dead letter's sequence is the stream's.
    let stored = _stream.admin.read_all(&base).unwrap();
    assert_eq!(stored[1].sequence, 2);
    assert_eq!(stored[1].payload, b"not json");

    // Under `drop`, counted.
    let mut reader = JetStreamSource::<Rec>::json(server(), &base, &[&format!("{base}.>")])
        .policy(BadRecordPolicy::Drop)
        .create_reader(&ctx(0, 1))
        .unwrap();
    let (mut records, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while records.len() + (dropped as usize) < 5 && Instant::now() < deadline {
        let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
        reader.poll(&mut out, 10).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!((records.len(), dropped, dead.len()), (3, 2, 0));

    // Under `fail`, the first bad payload fails the poll.
    let mut reader = JetStreamSource::<Rec>::json(server(), &base, &[&format!("{base}.>")])
        .create_reader(&ctx(0, 1))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut r, mut d, mut dr) = (Vec::new(), Vec::new(), 0);
    let err = loop {
        match reader.poll(&mut SourceOutput::new(&mut r, &mut d, &mut dr), 10) {
            Err(e) => break e.to_string(),
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(_) => panic!("no error for a bad payload"),
        }
    };
    assert!(
        err.contains(&format!("jetstream:{base}/{odd} line 2")),
        "{err}"
    );
    assert!(!err.contains('\n'));
}

/// Exactly once: a checkpoint's messages are published when it completes, with message ids;
/// restores publish the checkpointed batches again, and the stream's deduplication keeps one
/// copy of each (a restore within the duplicate window).
#[test]
fn jetstream_sink_exactly_once_publishes_at_commit_and_dedups_restores() {
    let base = unique("eo");
    let stream = Stream::new(&base, Duration::from_secs(600));
    let subject = format!("{base}.out");
    let sink = JetStreamSink::<Rec>::json(server(), &base, subject.clone())
        .delivery(Delivery::ExactlyOnce)
        .prefix(unique("p"))
        .min_duplicate_window(Duration::from_secs(300));
    let count = |stream: &Stream| stream.admin.state(&base).unwrap().0;
    let mut w = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    assert!(w.exactly_once());
    w.write_batch(&mut (0..10).map(|n| Rec { n }).collect())
        .unwrap();
    let state1 = w.pre_commit(1).unwrap();
    assert_eq!(count(&stream), 0, "nothing before the checkpoint completes");
    w.commit(1).unwrap();
    assert_eq!(count(&stream), 10);
    w.write_batch(&mut (10..15).map(|n| Rec { n }).collect())
        .unwrap();
    let state2 = w.pre_commit(2).unwrap();
    w.commit(2).unwrap();
    assert_eq!(count(&stream), 15);
    w.write_batch(&mut (15..20).map(|n| Rec { n }).collect())
        .unwrap();
    let state3 = w.pre_commit(3).unwrap();
    // The process dies after checkpoint 3's pre-commit, before its commit.
    drop(w);
    assert_eq!(count(&stream), 15, "checkpoint 3 never committed");

    // A restore from checkpoint 2 (its batch was published) adds nothing; one from checkpoint
    // 3 publishes its batch; a second restore from 3 (the restored job died too) adds nothing.
    for (states, want) in [
        (vec![state2.clone()], 15),
        (vec![state3.clone()], 20),
        (vec![state3.clone()], 20),
    ] {
        let mut w = sink.create_writer(&sink_ctx(0, 1)).unwrap();
        w.restore(&states).unwrap();
        w.close().unwrap();
        assert_eq!(count(&stream), want);
    }
    // Onto two workers: each publishes its share, nothing twice.
    for worker in 0..2 {
        let mut w = sink.create_writer(&sink_ctx(worker, 2)).unwrap();
        w.restore(&[state3.clone(), state1.clone()]).unwrap();
        w.close().unwrap();
    }
    let stored = stream.admin.read_all(&base).unwrap();
    let got: Vec<Rec> = stored
        .iter()
        .map(|m| serde_json::from_slice(&m.payload).unwrap())
        .collect();
    assert_eq!(got, (0..20).map(|n| Rec { n }).collect::<Vec<_>>());
    let ids: BTreeSet<&str> = stored.iter().filter_map(|m| m.msg_id.as_deref()).collect();
    assert_eq!(ids.len(), 20, "every message has its own Nats-Msg-Id");
    assert!(stored.iter().all(|m| m.subject == subject));

    // A fresh start (no restore) never reuses an id the stream remembers.
    let mut w = sink.create_writer(&sink_ctx(0, 1)).unwrap();
    w.write_batch(&mut (0..3).map(|n| Rec { n }).collect())
        .unwrap();
    w.pre_commit(1).unwrap();
    w.commit(1).unwrap();
    w.close().unwrap();
    assert_eq!(count(&stream), 23);
}

#[test]
fn jetstream_sink_checks_the_stream_and_its_duplicate_window() {
    let base = unique("window");
    let _stream = Stream::new(&base, Duration::from_secs(1));
    let sink = JetStreamSink::<Rec>::json(server(), &base, format!("{base}.x"))
        .delivery(Delivery::ExactlyOnce);
    let err = sink
        .create_writer(&sink_ctx(0, 1))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("duplicate window of 1s"), "{err}");
    assert!(!err.contains('\n'));
    // Accepted with a lower minimum, or at least once.
    let lower = JetStreamSink::<Rec>::json(server(), &base, format!("{base}.x"))
        .delivery(Delivery::ExactlyOnce)
        .min_duplicate_window(Duration::from_millis(500));
    assert!(lower.create_writer(&sink_ctx(0, 1)).is_ok());
    let alo = JetStreamSink::<Rec>::json(server(), &base, format!("{base}.x"))
        .delivery(Delivery::AtLeastOnce);
    assert!(alo.create_writer(&sink_ctx(0, 1)).is_ok());
    let err = JetStreamSink::<Rec>::json(server(), &unique("missing"), "x")
        .create_writer(&sink_ctx(0, 1))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("create it first"), "{err}");
}

/// At least once: `pre_commit` returns once the stream acknowledged every message.
#[test]
fn jetstream_sink_at_least_once_awaits_acks_at_pre_commit() {
    let base = unique("alo");
    let stream = Stream::new(&base, Duration::from_secs(120));
    let url: NatsUrl = format!("{}/{base}.out?stream={base}", server())
        .parse()
        .unwrap();
    let encoder = Arc::new(|r: &Rec| Ok((None, serde_json::to_vec(r).unwrap())));
    let mut w = url
        .jetstream_sink(encoder)
        .unwrap()
        .create_writer(&sink_ctx(0, 1))
        .unwrap();
    assert!(!w.exactly_once());
    for chunk in 0..5u32 {
        w.write_batch(
            &mut (chunk * 4000..(chunk + 1) * 4000)
                .map(|n| Rec { n })
                .collect(),
        )
        .unwrap();
    }
    assert_eq!(w.pre_commit(1).unwrap(), Vec::<u8>::new());
    assert_eq!(stream.admin.state(&base).unwrap(), (20_000, 20_000));
    w.close().unwrap();
    let stored = stream.admin.read_all(&base).unwrap();
    let by_n: BTreeMap<u32, u64> = stored
        .iter()
        .map(|m| {
            (
                serde_json::from_slice::<Rec>(&m.payload).unwrap().n,
                m.sequence,
            )
        })
        .collect();
    assert_eq!(by_n.len(), 20_000);
    assert!(stored.iter().all(|m| m.msg_id.is_none()));
}
