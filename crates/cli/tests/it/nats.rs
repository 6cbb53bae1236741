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
//! The exactness check is what tells exactly once from at least once: the same test with
//! `SPATE_NATS_CHAOS_DELIVERY=at-least-once` fails on duplicates (measured: 167 rows twice of
//! 6 098, three kills). The sink's log says how many rows each restore published again and
//! how many the stream dropped as duplicates; the summary line adds them up.
//!
//! Needs the nats-server that `scripts/test` starts (`scripts/brokers start nats`;
//! `SPATE_NATS`). Settings: `SPATE_NATS_CHAOS_EVENTS` (default 600 000),
//! `SPATE_NATS_CHAOS_KILLS` (6), `SPATE_NATS_CHAOS_SEED`, `SPATE_NATS_CHAOS_QUERY` (q11),
//! `SPATE_NATS_CHAOS_DELIVERY` (exactly-once), `SPATE_NATS_CHAOS_FAILPOINTS` (the
//! `SPATE_FAILPOINTS` of the chaos run).

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spate_connectors::nats::admin::JetStreamAdmin;
use spate_connectors::nats::{Delivery, JetStreamSink};
use spate_types::{Sink, SinkContext};

use crate::chaos::{explain_difference, kill_at_random, lost_and_duplicated, setting, Rng};
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
    let _exclusive = crate::exclusive();
    let started = Instant::now();
    let events = setting("SPATE_NATS_CHAOS_EVENTS", 600_000);
    let kills = setting("SPATE_NATS_CHAOS_KILLS", 6);
    let seed = setting("SPATE_NATS_CHAOS_SEED", 23);
    let query = std::env::var("SPATE_NATS_CHAOS_QUERY").unwrap_or_else(|_| "q11".into());
    let delivery =
        std::env::var("SPATE_NATS_CHAOS_DELIVERY").unwrap_or_else(|_| "exactly-once".into());
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
        cmd.args(["nexmark", "run", "--query", &query, "--no-progress"])
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
        "{query} has rows to compare: {}",
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
                "{}/{output}.rows?stream={output}&delivery={delivery}&prefix={}&dedup_window=5m",
                server(),
                unique("chaos")
            ),
        ])
        .env(
            "SPATE_FAILPOINTS",
            // Each point fires once over all runs, at its Nth hit in one process: a process
            // lives for a few checkpoints between kills, so the counts stay low enough for
            // the points to fire however fast the machine runs the job.
            std::env::var("SPATE_NATS_CHAOS_FAILPOINTS").unwrap_or_else(|_| {
                "nats.after_pre_commit:2,nats.before_commit:1,nats.mid_commit:1,\
                 nats.after_restore_publish:1"
                    .into()
            }),
        )
        .env("SPATE_FAILPOINT_DIR", &failpoints)
        .env("RUST_LOG", "warn,spate_connectors::nats=info")
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

    // What the restores published again and the stream dropped, from the sink's log lines.
    let field = |line: &str, name: &str| -> u64 {
        line.split(&format!("{name}="))
            .nth(1)
            .and_then(|v| v.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let restores: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("restored checkpoint published again"))
        .collect();
    let republished: u64 = restores.iter().map(|l| field(l, "republished")).sum();
    let dropped: u64 = restores.iter().map(|l| field(l, "duplicates")).sum();
    let stored = streams.0.read_all(&output).unwrap();
    let with_ids = stored.iter().filter(|m| m.msg_id.is_some()).count();
    let got = rows(&output);
    let (lost, duplicated) = lost_and_duplicated(&expected, &got);
    eprintln!(
        "nats chaos: {query}, {delivery}, {events} events, {} kills, fail points fired \
         {fired:?}, seed {seed}: {} rows, lost {lost}, duplicated {duplicated}; {} restores \
         published {republished} rows again, the stream dropped {dropped}; publish \
         {published:?}, reference run \
         {reference_run:?}, chaos run {chaos_run:?}, total {:?}; recoveries {recoveries:?}",
        recoveries.len(),
        got.len(),
        restores.len(),
        started.elapsed()
    );
    // The input is bounded: a fast run may end before its last kills (CI's cold run landed 5
    // of 6 in a 16 s run), so half of them must land.
    assert!(
        recoveries.len() as u64 >= kills.div_ceil(2),
        "the kills landed in the running job: {recoveries:?}"
    );
    assert!(fired.len() >= 3, "the fail points fired: {fired:?}");
    if delivery == "exactly-once" && fired.iter().any(|f| f == "nats.before_commit") {
        // A process died holding a prepared batch: its restore published it again.
        assert!(
            republished > 0,
            "a restore published a prepared batch again: {restores:?}"
        );
    }
    assert_eq!(
        with_ids,
        stored.len(),
        "every output message has a Nats-Msg-Id"
    );
    assert_eq!(
        (lost, duplicated),
        (0, 0),
        "{}",
        explain_difference(&expected, &got)
    );
    assert_eq!(got, expected);
}
