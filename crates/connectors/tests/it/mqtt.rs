//! The MQTT source and sink against a real Mosquitto (`scripts/brokers start`, which
//! `scripts/brokers env` describes as `SPATE_MQTT=HOST:PORT`), driven through the
//! `Source`/`Sink` traits as the engine drives them.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use spate_connectors::mqtt::{MqttSink, MqttSource, MqttUrl};
use spate_types::{
    BadRecordPolicy, DeadLetter, Sink, SinkContext, Source, SourceContext, SourceOutput,
    SourceReader,
};

fn broker() -> String {
    std::env::var("SPATE_MQTT").expect(
        "SPATE_MQTT is not set: start the brokers with scripts/brokers start and export what \
         `scripts/brokers env` prints (SPATE_MQTT=127.0.0.1:18830)",
    )
}

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{name}-{}-{nanos}", std::process::id())
}

fn ctx(worker: usize) -> SourceContext {
    SourceContext {
        worker_index: worker,
        workers: 1,
    }
}

/// Polls until `want` records (or dead letters) arrived or `patience` passed.
fn poll_until<T>(
    reader: &mut dyn SourceReader<T>,
    records: &mut Vec<T>,
    dead: &mut Vec<DeadLetter>,
    want: usize,
    patience: Duration,
) {
    let deadline = Instant::now() + patience;
    let mut dropped = 0;
    while records.len() + dead.len() < want && Instant::now() < deadline {
        // No more than wanted, so that a test can stop at an exact count.
        let room = want - records.len() - dead.len();
        let mut out = SourceOutput::new(records, dead, &mut dropped);
        reader.poll(&mut out, room.max(1)).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Publishes `(topic, payload)`s with the sink and waits for the broker's acks.
fn publish(messages: Vec<(String, Vec<u8>)>) {
    let sink = MqttSink::topic_payloads(broker()).client_id(unique("pub"));
    let mut w = sink
        .create_writer(&SinkContext {
            worker_index: 0,
            workers: 1,
        })
        .unwrap();
    let mut batch = messages;
    w.write_batch(&mut batch).unwrap();
    w.pre_commit(1).unwrap();
    w.close().unwrap();
}

#[derive(Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, PartialOrd, Ord, Clone)]
struct Rec {
    n: u32,
}

#[test]
fn json_roundtrip_sink_to_source() {
    let topic = unique("spate/rt");
    let source = MqttSource::<Rec>::json(broker(), &[topic.as_str()], unique("rt"));
    let mut reader = source.create_reader(&ctx(0)).unwrap();
    let sink = MqttSink::<Rec>::json(broker(), topic.clone());
    let mut w = sink
        .create_writer(&SinkContext {
            worker_index: 0,
            workers: 1,
        })
        .unwrap();
    let sent: Vec<Rec> = (0..500).map(|n| Rec { n }).collect();
    w.write_batch(&mut sent.clone()).unwrap();
    w.pre_commit(1).unwrap();
    w.close().unwrap();
    let (mut got, mut dead) = (Vec::new(), Vec::new());
    poll_until(
        &mut *reader,
        &mut got,
        &mut dead,
        500,
        Duration::from_secs(20),
    );
    assert!(dead.is_empty(), "{dead:?}");
    got.sort();
    assert_eq!(got, sent);
    // Other workers read nothing (one subscription per source).
    let mut other = source.create_reader(&ctx(1)).unwrap();
    let (mut r, mut d, mut dr) = (Vec::<Rec>::new(), Vec::new(), 0);
    let status = other
        .poll(&mut SourceOutput::new(&mut r, &mut d, &mut dr), 10)
        .unwrap();
    assert_eq!(status, spate_types::SourceStatus::Finished);
}

#[test]
fn wildcards_plus_and_hash() {
    let root = unique("spate/wc");
    let plus = format!("{root}/+/temp");
    let hash = format!("{root}/#");
    let mut by_plus = MqttSource::topic_payloads(broker(), &[plus.as_str()], unique("wc+"))
        .create_reader(&ctx(0))
        .unwrap();
    let mut by_hash = MqttSource::topic_payloads(broker(), &[hash.as_str()], unique("wc#"))
        .create_reader(&ctx(0))
        .unwrap();
    let topics = [
        format!("{root}/a/temp"),
        format!("{root}/b/temp"),
        root.clone(),
        format!("{root}/a/b/temp"),
        format!("{root}x/a/temp"),
    ];
    publish(topics.iter().map(|t| (t.clone(), b"1".to_vec())).collect());
    let topics_of = |reader: &mut Box<dyn SourceReader<(String, Vec<u8>)>>, want: usize| {
        let (mut got, mut dead) = (Vec::new(), Vec::new());
        poll_until(
            &mut **reader,
            &mut got,
            &mut dead,
            want,
            Duration::from_secs(10),
        );
        // Nothing more comes.
        poll_until(
            &mut **reader,
            &mut got,
            &mut dead,
            want + 1,
            Duration::from_millis(500),
        );
        got.into_iter().map(|(t, _)| t).collect::<BTreeSet<_>>()
    };
    assert_eq!(
        topics_of(&mut by_plus, 2),
        BTreeSet::from([topics[0].clone(), topics[1].clone()])
    );
    // `#` matches the parent level too.
    assert_eq!(
        topics_of(&mut by_hash, 4),
        topics[..4].iter().cloned().collect::<BTreeSet<_>>()
    );
}

#[test]
fn bad_payloads_go_to_dead_letters() {
    let topic = unique("spate/bad");
    let mut reader = MqttSource::<Rec>::json(broker(), &[topic.as_str()], unique("bad"))
        .policy(BadRecordPolicy::DeadLetter("/dev/null".into()))
        .create_reader(&ctx(0))
        .unwrap();
    publish(vec![
        (topic.clone(), br#"{"n":1}"#.to_vec()),
        (topic.clone(), b"not json".to_vec()),
        (topic.clone(), br#"{"n":"x"}"#.to_vec()),
        (topic.clone(), br#"{"n":2}"#.to_vec()),
    ]);
    let (mut got, mut dead) = (Vec::new(), Vec::new());
    poll_until(
        &mut *reader,
        &mut got,
        &mut dead,
        4,
        Duration::from_secs(10),
    );
    assert_eq!(got, vec![Rec { n: 1 }, Rec { n: 2 }]);
    assert_eq!(dead.len(), 2);
    assert_eq!(dead[0].source, format!("mqtt:{topic}"));
    assert_eq!(dead[0].raw, "not json");
    assert!(!dead[1].reason.contains('\n'));
    // Under `fail`, the first bad payload fails the poll.
    let topic = unique("spate/fail");
    let mut reader = MqttSource::<Rec>::json(broker(), &[topic.as_str()], unique("fail"))
        .create_reader(&ctx(0))
        .unwrap();
    publish(vec![(topic.clone(), b"{".to_vec())]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut r, mut d, mut dr) = (Vec::new(), Vec::new(), 0);
    let err = loop {
        match reader.poll(&mut SourceOutput::new(&mut r, &mut d, &mut dr), 10) {
            Err(e) => break e,
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(_) => panic!("no error for a bad payload"),
        }
    };
    assert!(err.to_string().contains(&format!("mqtt:{topic}")), "{err}");
}

/// Messages whose checkpoint did not complete are redelivered to the next reader of the same
/// client id; acked ones are not.
#[test]
fn unacked_messages_are_redelivered_to_the_same_client_id() {
    let topic = unique("spate/alo");
    let client = unique("alo");
    let source = MqttSource::<Rec>::json(broker(), &[topic.as_str()], client.clone());
    let mut first = source.create_reader(&ctx(0)).unwrap();
    publish(
        (0..10)
            .map(|n| (topic.clone(), format!("{{\"n\":{n}}}").into_bytes()))
            .collect(),
    );
    let (mut got, mut dead) = (Vec::new(), Vec::new());
    poll_until(&mut *first, &mut got, &mut dead, 4, Duration::from_secs(10));
    // A checkpoint cuts after the first 4 records read, and completes.
    let cut = first.snapshot().unwrap();
    let read_at_cut = cut[0].position.as_u64().unwrap() as usize;
    assert_eq!(read_at_cut, 4);
    first.checkpoint_complete(&cut).unwrap();
    poll_until(
        &mut *first,
        &mut got,
        &mut dead,
        10,
        Duration::from_secs(10),
    );
    assert_eq!(got.len(), 10);
    // A second checkpoint is taken but never completes: the reader dies.
    let _never = first.snapshot();
    drop(first);
    std::thread::sleep(Duration::from_millis(300));

    let mut second = source.create_reader(&ctx(0)).unwrap();
    second.restore(&cut).unwrap();
    let (mut again, mut dead) = (Vec::new(), Vec::new());
    poll_until(
        &mut *second,
        &mut again,
        &mut dead,
        10 - read_at_cut,
        Duration::from_secs(10),
    );
    poll_until(
        &mut *second,
        &mut again,
        &mut dead,
        11,
        Duration::from_millis(500),
    );
    again.sort();
    let mut want: Vec<Rec> = got[read_at_cut..].to_vec();
    want.sort();
    assert_eq!(want.len(), 6);
    assert_eq!(again, want, "the unacked messages, each once");
    // This time the checkpoint completes: a third reader gets nothing.
    let all = second.snapshot().unwrap();
    second.checkpoint_complete(&all).unwrap();
    drop(second);
    std::thread::sleep(Duration::from_millis(300));
    let mut third = source.create_reader(&ctx(0)).unwrap();
    let (mut none, mut dead) = (Vec::new(), Vec::new());
    poll_until(
        &mut *third,
        &mut none,
        &mut dead,
        1,
        Duration::from_millis(1500),
    );
    assert!(none.is_empty(), "{none:?}");
}

#[test]
fn url_builds_a_working_source_and_sink() {
    let topic = unique("spate/url");
    let url: MqttUrl = format!("mqtt://{}/{topic}/%23?client={}", broker(), unique("u"))
        .parse()
        .unwrap();
    let mut reader = url.json_source::<Rec>().create_reader(&ctx(0)).unwrap();
    let sink_url: MqttUrl = format!("mqtt://{}/{topic}/x?qos=1", broker())
        .parse()
        .unwrap();
    let mut w = sink_url
        .json_sink::<Rec>()
        .unwrap()
        .create_writer(&SinkContext {
            worker_index: 0,
            workers: 1,
        })
        .unwrap();
    w.write_batch(&mut vec![Rec { n: 7 }]).unwrap();
    w.close().unwrap();
    let (mut got, mut dead) = (Vec::new(), Vec::new());
    poll_until(
        &mut *reader,
        &mut got,
        &mut dead,
        1,
        Duration::from_secs(10),
    );
    assert_eq!(got, vec![Rec { n: 7 }]);
}

/// A message of the exactly-once test: `{"id":"m<n>","n":<n>}`; `n == END` ends the job.
#[derive(Debug, serde::Serialize, serde::Deserialize, Clone)]
struct Msg {
    id: String,
    n: u32,
}

const END: u32 = u32::MAX;

/// What the parent tells a child job (in `SPATE_MQTT_EO_JOB`, as JSON).
#[derive(serde::Serialize, serde::Deserialize)]
struct JobSpec {
    url: String,
    out: String,
    ckpt: String,
    restore: bool,
    dedup: bool,
}

/// The job of [`mqtt_source_with_dedup_by_is_exactly_once_through_a_fail_point_and_a_kill`],
/// run only as its child process (`SPATE_MQTT_EO_JOB` set): the MQTT source with `dedup=id`,
/// `dedup_by` on the id (or not, for the control), into the two-phase file sink, checkpoints
/// every 150 ms; the message numbered `END` stops it cleanly.
#[test]
#[ignore = "run as a child process by the MQTT exactly-once test"]
fn exactly_once_job() {
    use spate_dataflow::{DedupConfig, JobConfig, StreamEnv, WatermarkStrategy};
    let spec: JobSpec = serde_json::from_str(
        &std::env::var("SPATE_MQTT_EO_JOB")
            .expect("run by mqtt_source_with_dedup_by_is_exactly_once_... only"),
    )
    .unwrap();
    let url: MqttUrl = spec.url.parse().unwrap();
    let mut config = JobConfig::local(1);
    config.checkpoint_interval = Some(Duration::from_millis(150));
    config.checkpoint_dir = Some(spec.ckpt.clone());
    config.restore = spec.restore.then(|| "latest".to_owned());
    config.rest = None;
    let env = StreamEnv::new(config);
    let records = env
        .from_source(url.json_source_with_id::<Msg>().unwrap())
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_secs(10))
                .with_timestamp_assigner(|r: &(String, Msg), _| i64::from(r.1.n % 1_000_000)),
        );
    let records = if spec.dedup {
        records.dedup_by(
            |r: &(String, Msg)| r.0.clone(),
            DedupConfig {
                retention: Duration::from_secs(3600),
                buckets: 4,
                expected_ids_per_bucket: 10_000,
                false_positive_rate: 0.01,
            },
        )
    } else {
        records
    };
    records
        .map(|(id, m): (String, Msg)| {
            if m.n == END {
                spate_dataflow::request_stop();
            }
            (id, m.n)
        })
        .sink_to(spate_connectors::files::FileSink::<(String, u32)>::json_lines(&spec.out));
    env.execute("mqtt exactly once").unwrap();
}

/// The committed output of a file sink: `(id, n)` and how often each was written.
fn committed(dir: &std::path::Path) -> std::collections::BTreeMap<(String, u32), usize> {
    let mut rows = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        for line in std::fs::read_to_string(entry.path()).unwrap().lines() {
            let row: (String, u32) = serde_json::from_str(line).unwrap();
            *rows.entry(row).or_insert(0) += 1;
        }
    }
    rows
}

/// How one run of the exactly-once scenario went.
struct Run {
    output: std::collections::BTreeMap<(String, u32), usize>,
    /// The fail points that fired, and the kills by the parent.
    failpoints: Vec<String>,
    kills: usize,
    starts: usize,
}

/// Publishes `messages` numbered messages in batches while a child job reads them, with the
/// fail point `mqtt.before_ack` (a checkpoint complete, its messages not yet acked: they are
/// redelivered) and, when `chaos`, a `kill -9` later; each failure restarts the job from its
/// latest checkpoint with the same client id. The job ends on the `END` message.
fn exactly_once_scenario(name: &str, messages: u32, dedup: bool, chaos: bool) -> Run {
    use std::process::{Command, Stdio};
    let tmp = tempfile::tempdir().unwrap();
    let topic = unique(&format!("spate/eo-{name}"));
    let client = unique(&format!("eo-{name}"));
    let url = format!("mqtt://{}/{topic}?client={client}&dedup=id", broker());
    // The persistent session exists before anything is published, so nothing is missed
    // while the first child starts.
    drop(
        url.parse::<MqttUrl>()
            .unwrap()
            .bytes_source()
            .create_reader(&ctx(0))
            .unwrap(),
    );
    let (out, ckpt, fired) = (
        tmp.path().join("out"),
        tmp.path().join("ckpt"),
        tmp.path().join("failpoints"),
    );
    std::fs::create_dir(&fired).unwrap();
    let spawn = |restore: bool| {
        let spec = JobSpec {
            url: url.clone(),
            out: out.display().to_string(),
            ckpt: ckpt.display().to_string(),
            restore,
            dedup,
        };
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "mqtt::exactly_once_job",
            "--ignored",
            "--nocapture",
        ])
        .env("SPATE_MQTT_EO_JOB", serde_json::to_string(&spec).unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if chaos {
            cmd.env("SPATE_FAILPOINTS", "mqtt.before_ack:3")
                .env("SPATE_FAILPOINT_DIR", &fired);
        }
        cmd.spawn().unwrap()
    };
    let mut child = spawn(false);
    let (mut starts, mut kills) = (1, 0);
    let batches = 30;
    let per_batch = messages.div_ceil(batches);
    let restart_if_dead = |child: &mut std::process::Child, starts: &mut usize| {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success(), "the job ended before the END message");
            *child = spawn(true);
            *starts += 1;
        }
    };
    for b in 0..batches {
        let from = b * per_batch;
        let to = (from + per_batch).min(messages);
        publish(
            (from..to)
                .map(|n| {
                    let m = serde_json::to_vec(&Msg {
                        id: format!("m{n}"),
                        n,
                    });
                    (topic.clone(), m.unwrap())
                })
                .collect(),
        );
        std::thread::sleep(Duration::from_millis(100));
        restart_if_dead(&mut child, &mut starts);
        if chaos && b == 2 * batches / 3 {
            // A kill -9 anywhere, once the fail point's restart is behind us.
            child.kill().unwrap();
            child.wait().unwrap();
            kills += 1;
            restart_if_dead(&mut child, &mut starts);
        }
    }
    let end = serde_json::to_vec(&Msg {
        id: "end".into(),
        n: END,
    });
    publish(vec![(topic.clone(), end.unwrap())]);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        match child.try_wait().unwrap() {
            Some(status) if status.success() => break,
            Some(_) => {
                child = spawn(true);
                starts += 1;
            }
            None if Instant::now() > deadline => {
                let _ = child.kill();
                panic!("{name}: the job did not end within 90 s of the END message");
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let failpoints = std::fs::read_dir(&fired)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    Run {
        output: committed(&out),
        failpoints,
        kills,
        starts,
    }
}

/// Exactly once with an at-least-once source: the MQTT source acks on checkpoint completion,
/// so the messages of a completed checkpoint that were not acked yet when the job died are
/// redelivered after the restart; `dedup_by` on the payload's id (state in the checkpoint)
/// drops them. The output equals a failure-free run's, each record once, while the same
/// failures without `dedup_by` duplicate records (so the failures did cause redeliveries).
#[test]
fn mqtt_source_with_dedup_by_is_exactly_once_through_a_fail_point_and_a_kill() {
    const MESSAGES: u32 = 3000;
    let reference = exactly_once_scenario("ref", MESSAGES, true, false);
    let exactly = exactly_once_scenario("dedup", MESSAGES, true, true);
    let control = exactly_once_scenario("nodedup", MESSAGES, false, true);
    let all: std::collections::BTreeMap<(String, u32), usize> = (0..MESSAGES)
        .map(|n| ((format!("m{n}"), n), 1))
        .chain([(("end".to_owned(), END), 1)])
        .collect();
    let duplicated = |run: &Run| run.output.values().map(|c| c - 1).sum::<usize>();
    eprintln!(
        "mqtt exactly once, {MESSAGES} messages: failure-free run {} rows in {} start(s); \
         with dedup_by {} rows, {} duplicated, fail points {:?}, {} kill(s), {} starts; \
         without dedup_by {} rows, {} duplicated, fail points {:?}, {} kill(s), {} starts",
        reference.output.values().sum::<usize>(),
        reference.starts,
        exactly.output.values().sum::<usize>(),
        duplicated(&exactly),
        exactly.failpoints,
        exactly.kills,
        exactly.starts,
        control.output.values().sum::<usize>(),
        duplicated(&control),
        control.failpoints,
        control.kills,
        control.starts,
    );
    assert_eq!(reference.starts, 1);
    assert_eq!(
        reference.output, all,
        "the failure-free run has every message once"
    );
    for run in [&exactly, &control] {
        assert_eq!(run.failpoints, ["mqtt.before_ack"], "the fail point fired");
        assert_eq!(run.kills, 1);
        assert!(run.starts >= 3, "{} starts", run.starts);
    }
    assert_eq!(
        exactly.output, reference.output,
        "with dedup_by: every message exactly once, as in the failure-free run"
    );
    // The control: nothing lost, and the redeliveries show.
    assert!(
        all.keys().all(|k| control.output.contains_key(k)),
        "without dedup_by nothing is lost either"
    );
    assert!(
        duplicated(&control) > 0,
        "without dedup_by the redeliveries after the fail point are duplicates"
    );
}
