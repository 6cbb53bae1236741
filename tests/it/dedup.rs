//! Dedup end to end against a naive oracle: with duplicates on 1 and 3 workers, expiry after
//! the retention, and exactly once through a failure and a restore on another worker count.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Duration;

use spate::prelude::*;

use crate::checkpoints::Flaky;

/// Value `v` is a record at event time `v` ms with id `(v / 3) % IDS`: three copies in a row,
/// and the same ids again every `3 * IDS` ms (an "episode").
const IDS: u64 = 4000;
const EPISODE: u64 = 3 * IDS;

fn id_of(v: u64) -> u64 {
    (v / 3) % IDS
}

fn strategy() -> WatermarkStrategy<u64> {
    WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(10))
        .with_timestamp_assigner(|v: &u64, _| *v as i64)
}

/// The naive oracle: the (id, episode) of every kept record, each id kept once per episode
/// when the retention is shorter than the gap between episodes, once overall when longer.
fn oracle(events: u64, forget_between_episodes: bool) -> Vec<(u64, u64)> {
    let mut seen = HashSet::new();
    let mut kept = Vec::new();
    for v in 0..events {
        let episode = if forget_between_episodes {
            v / EPISODE
        } else {
            0
        };
        if seen.insert((id_of(v), episode)) {
            kept.push((id_of(v), episode));
        }
    }
    kept.sort_unstable();
    kept
}

fn config(retention_ms: u64) -> DedupConfig {
    DedupConfig {
        retention: Duration::from_millis(retention_ms),
        buckets: 4,
        expected_ids_per_bucket: 2000,
        false_positive_rate: 0.01,
    }
}

fn run_collect(events: u64, workers: usize, retention_ms: u64) -> (Vec<(u64, u64)>, JobResult) {
    let env = StreamEnv::new(JobConfig::local(workers));
    let out = env
        .from_collection((0..events).collect::<Vec<u64>>())
        .assign_timestamps_and_watermarks(strategy())
        .dedup_by(|v: &u64| id_of(*v), config(retention_ms))
        .map(|v: u64| (id_of(v), v / EPISODE))
        .collect();
    let result = env.execute("dedup").unwrap();
    let mut got = out.take();
    got.sort_unstable();
    (got, result)
}

#[test]
fn drops_exactly_the_duplicates_on_1_and_3_workers() {
    let events = 2 * EPISODE;
    // Longer than the whole input: every id once.
    let expected = oracle(events, false);
    assert_eq!(expected.len() as u64, IDS);
    for workers in [1, 3] {
        let (got, result) = run_collect(events, workers, 10 * EPISODE);
        assert_eq!(got, expected, "{workers} workers");
        let dropped: u64 = result
            .metrics
            .iter()
            .filter(|(k, _)| k.ends_with(".numDuplicatesDropped"))
            .map(|(_, v)| *v)
            .sum();
        assert_eq!(dropped, events - IDS, "{workers} workers");
    }
}

#[test]
fn ids_are_forgotten_after_the_retention() {
    let events = 3 * EPISODE;
    // Copies of an episode are 2 ms apart; episodes 12 s apart; retention 4 s (+1 s bucket).
    let expected = oracle(events, true);
    assert_eq!(expected.len() as u64, 3 * IDS);
    let (got, _) = run_collect(events, 3, 4000);
    assert_eq!(got, expected);
}

fn run_checkpointed(
    events: u64,
    out: &Path,
    ckpt: &Path,
    workers: usize,
    restore: bool,
    fail_after: u64,
) -> SpateResult<JobResult> {
    let mut config = JobConfig::local(workers);
    config.checkpoint_interval = Some(Duration::from_millis(100));
    config.checkpoint_dir = Some(ckpt.display().to_string());
    config.restore = restore.then(|| "latest".to_string());
    let env = StreamEnv::new(config);
    env.from_source(
        // Paced so that several checkpoints complete before the failure.
        Flaky::wrap(
            SequenceSource::new(0, Some(events)).rate(40_000.0),
            fail_after,
        )
        .after_a_checkpoint_in(Some(ckpt.to_path_buf())),
    )
    .assign_timestamps_and_watermarks(strategy())
    .dedup_by(|v: &u64| id_of(*v), self::config(4000))
    .map(|v: u64| (id_of(v), v / EPISODE))
    .write_jsonl(out);
    env.execute("checkpointed dedup")
}

fn rows(dir: &Path) -> BTreeMap<(u64, u64), u64> {
    let mut rows = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        for line in std::fs::read_to_string(entry.path()).unwrap().lines() {
            let row: (u64, u64) = serde_json::from_str(line).unwrap();
            *rows.entry(row).or_insert(0) += 1;
        }
    }
    rows
}

#[test]
fn dedup_state_is_exact_after_a_failure_and_a_restore_on_other_workers() {
    let events = 3 * EPISODE;
    let expected: BTreeMap<(u64, u64), u64> =
        oracle(events, true).into_iter().map(|r| (r, 1)).collect();
    let tmp = tempfile::tempdir().unwrap();
    let (out, ckpt) = (tmp.path().join("o"), tmp.path().join("c"));
    let failed = run_checkpointed(events, &out, &ckpt, 2, false, events / 2);
    assert!(failed.is_err(), "the first run fails");
    let partial = rows(&out);
    // The sink may not have heard of the checkpoint's completion before the failure (then the
    // restore publishes its parts): only "not everything yet" is certain.
    assert!(partial.len() < expected.len());
    let result = run_checkpointed(events, &out, &ckpt, 3, true, u64::MAX).unwrap();
    assert_eq!(rows(&out), expected, "nothing lost, nothing twice");
    assert!(result.metrics["checkpoints.numberOfCompletedCheckpoints"] >= 1);
}
