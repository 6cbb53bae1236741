//! JetStream → job → JetStream, exactly once through kill -9: `spate nexmark run --input
//! nats://…?stream=IN&stop=latest --output nats://…?stream=OUT&delivery=exactly-once` on 3
//! processes with checkpoints every second, killed at random moments and, once each, at fail
//! points inside the sink's commit window (after a checkpoint's pre-commit; after it completed
//! and before its batch is published; with half of a batch published; after a restore
//! published its batches again). The output stream must then hold exactly the rows of a
//! failure-free run, each once: the source replays from the checkpointed stream sequences,
//! and the sink's `Nats-Msg-Id`s let the stream drop what a restore publishes again (within
//! its duplicate window, 10 minutes here).
//!
//! Needs the nats-server that `scripts/test` starts (`scripts/brokers start nats`;
//! `SPATE_NATS`). Settings: `SPATE_NATS_CHAOS_EVENTS` (default 300 000),
//! `SPATE_NATS_CHAOS_KILLS` (6), `SPATE_NATS_CHAOS_SEED`.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spate_connectors::nats::admin::JetStreamAdmin;
use spate_connectors::nats::{Delivery, JetStreamSink};
use spate_types::{Sink, SinkContext};

use crate::chaos::{kill_at_random, lost_and_duplicated, setting, Rng};
use crate::{ok, spate};

fn server() -> String {
    std::env::var("SPATE_NATS").expect(
        "SPATE_NATS is not set: run the tests with scripts/test, which starts nats-server \
         (scripts/brokers start) and exports it",
    )
}

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{name}_{}_{nanos}", std::process::id())
}

/// Streams deleted when the test ends, however it ends.
struct Streams(JetStreamAdmin, Vec<String>);

impl Drop for Streams {
    fn drop(&mut self) {
        for s in &self.1 {
            let _ = self.0.delete_stream(s);
        }
    }
}

/// Publishes `lines` round-robin over `subjects`, waiting for every ack.
fn publish_lines(stream: &str, subjects: &[String], lines: &[&str]) {
    let sink = JetStreamSink::with_encoder(
        server(),
        stream,
        subjects[0].clone(),
        Arc::new(|r: &(String, Vec<u8>)| Ok((Some(r.0.clone()), r.1.clone()))),
    )
    .delivery(Delivery::AtLeastOnce);
    let mut w = sink
        .create_writer(&SinkContext {
            worker_index: 0,
            workers: 1,
        })
        .unwrap();
    for (chunk_no, chunk) in lines.chunks(10_000).enumerate() {
        let mut batch: Vec<(String, Vec<u8>)> = chunk
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let n = chunk_no * 10_000 + i;
                (subjects[n % subjects.len()].clone(), l.as_bytes().to_vec())
            })
            .collect();
        w.write_batch(&mut batch).unwrap();
    }
    w.pre_commit(1).unwrap();
    w.close().unwrap();
}

#[test]
fn jetstream_to_jetstream_is_exactly_once_through_kill_9_and_fail_points() {
    let started = Instant::now();
    let events = setting("SPATE_NATS_CHAOS_EVENTS", 300_000);
    let kills = setting("SPATE_NATS_CHAOS_KILLS", 6);
    let seed = setting("SPATE_NATS_CHAOS_SEED", 23);
    let tmp = tempfile::tempdir().unwrap();
    let gen = tmp.path().join("events.jsonl");
    ok(spate()
        .args(["nexmark", "gen", "--events", &events.to_string(), "--out"])
        .arg(&gen));
    let text = std::fs::read_to_string(&gen).unwrap();
    let lines: Vec<&str> = text.lines().collect();

    let base = unique("chaos");
    let (input, output, reference) = (
        format!("{base}_in"),
        format!("{base}_out"),
        format!("{base}_ref"),
    );
    let admin = JetStreamAdmin::new(&server()).unwrap();
    let window = Duration::from_secs(600);
    for s in [&input, &output, &reference] {
        admin
            .create_stream(s, &[&format!("{s}.>")], window, true)
            .unwrap();
    }
    let streams = Streams(
        admin,
        vec![input.clone(), output.clone(), reference.clone()],
    );
    // Six splits over the three processes.
    let subjects: Vec<String> = (0..6).map(|i| format!("{input}.p{i}")).collect();
    publish_lines(&input, &subjects, &lines);
    drop(text);
    let published = started.elapsed();
    let source_url = format!(
        "{}/{}?stream={input}&stop=latest",
        server(),
        subjects.join(",")
    );
    let common = |cmd: &mut std::process::Command| {
        cmd.args(["nexmark", "run", "--query", "q11", "--no-progress"])
            .args(["--input", &source_url]);
    };

    // The failure-free run, at least once into its own stream.
    let mut cmd = spate();
    common(&mut cmd);
    ok(cmd.args([
        "--output",
        &format!("{}/{reference}.rows?stream={reference}", server()),
    ]));
    let reference_run = started.elapsed() - published;
    let rows = |stream: &str| -> Vec<String> {
        let mut rows: Vec<String> = streams
            .0
            .read_all(stream)
            .unwrap()
            .into_iter()
            .map(|m| String::from_utf8(m.payload).unwrap())
            .collect();
        rows.sort();
        rows
    };
    let expected = rows(&reference);
    assert!(
        expected.len() > 1000,
        "q11 has rows to compare: {}",
        expected.len()
    );

    // The chaos run.
    let ckpt = tmp.path().join("ckpt");
    let failpoints = tmp.path().join("failpoints");
    std::fs::create_dir(&failpoints).unwrap();
    let chaos_start = Instant::now();
    let mut cmd = spate();
    common(&mut cmd);
    let mut supervisor = cmd
        .args(["--processes", "3", "--checkpoint-interval", "1s"])
        .args(["--restart-strategy", "fixed-delay:1000:100"])
        .arg("--checkpoint-dir")
        .arg(&ckpt)
        .args([
            "--output",
            &format!(
                "{}/{output}.rows?stream={output}&delivery=exactly-once&prefix={}&dedup_window=5m",
                server(),
                unique("chaos")
            ),
        ])
        .env(
            "SPATE_FAILPOINTS",
            "nats.after_pre_commit:3,nats.before_commit:2,nats.mid_commit:2,\
             nats.after_restore_publish:1",
        )
        .env("SPATE_FAILPOINT_DIR", &failpoints)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut rng = Rng(seed);
    std::thread::sleep(Duration::from_millis(1500 + rng.below(1000)));
    let recoveries = kill_at_random(&mut supervisor, &ckpt, 3, kills, &mut rng, "nats chaos");
    let out = supervisor.wait_with_output().unwrap();
    let chaos_run = chaos_start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the job ends well after the kills: {stderr}"
    );
    let mut fired: Vec<String> = std::fs::read_dir(&failpoints)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    fired.sort();

    let stored = streams.0.read_all(&output).unwrap();
    let with_ids = stored.iter().filter(|m| m.msg_id.is_some()).count();
    let got = rows(&output);
    let (lost, duplicated) = lost_and_duplicated(&expected, &got);
    eprintln!(
        "nats chaos: {events} events, {} kills, fail points fired {fired:?}, seed {seed}: {} rows, \
         lost {lost}, duplicated {duplicated}; publish {published:?}, reference run \
         {reference_run:?}, chaos run {chaos_run:?}, total {:?}; recoveries {recoveries:?}",
        recoveries.len(),
        got.len(),
        started.elapsed()
    );
    assert!(
        recoveries.len() as u64 >= kills.min(6),
        "the kills landed in the running job: {recoveries:?}"
    );
    assert!(fired.len() >= 3, "the fail points fired: {fired:?}");
    assert_eq!(
        with_ids,
        stored.len(),
        "every output message has a Nats-Msg-Id"
    );
    assert_eq!((lost, duplicated), (0, 0));
    assert_eq!(got, expected);
}
