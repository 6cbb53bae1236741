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
