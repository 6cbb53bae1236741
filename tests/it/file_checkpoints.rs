//! Exactly-once file sources and dead letters: a checkpointed windowed job over a JSON-lines
//! directory (byte-range splits) or a CSV directory, with bad records sent to a dead-letter
//! file, fails mid-way and is restored from its latest checkpoint on the same or another number
//! of workers. Its output and its dead letters must equal the failure-free run's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use spate::dataflow::{AggregateFunction, TimeWindow, TumblingEventTimeWindows, WindowContext};
use spate::prelude::*;

use crate::checkpoints::Flaky;

/// Good records per input; one line in 50 is bad.
const LINES: u64 = 30_000;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Rec {
    t: u64,
    v: u64,
}

struct Count;

impl AggregateFunction<Rec> for Count {
    type Acc = (u64, u64);
    type Out = (u64, u64);
    fn create_accumulator(&self) -> (u64, u64) {
        (0, 0)
    }
    fn add(&self, r: &Rec, acc: &mut (u64, u64)) {
        acc.0 += 1;
        acc.1 += r.v;
    }
    fn get_result(&self, acc: &(u64, u64)) -> (u64, u64) {
        *acc
    }
    fn merge(&self, a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

/// Writes the inputs: records in event-time order over the files (so no record is ever late,
/// whichever worker reads which split), one line in 50 bad.
fn write_inputs(dir: &Path, csv: bool) {
    std::fs::create_dir_all(dir).unwrap();
    let files = 3;
    let per_file = LINES / files;
    for f in 0..files {
        let mut text = String::new();
        if csv {
            text.push_str("t,v\n");
        }
        for i in 0..per_file {
            let t = f * per_file + i;
            let v = t * 7 % 13;
            if t % 50 == 17 {
                text.push_str(if csv {
                    "oops,1\n"
                } else {
                    "{\"t\": \"oops\"}\n"
                });
            } else if csv {
                text.push_str(&format!("{t},{v}\n"));
            } else {
                text.push_str(&format!("{{\"t\":{t},\"v\":{v}}}\n"));
            }
        }
        let ext = if csv { "csv" } else { "jsonl" };
        std::fs::write(dir.join(format!("f{f}.{ext}")), text).unwrap();
    }
}

fn run(
    input: &Path,
    csv: bool,
    out: &Path,
    dead: &Path,
    workers: usize,
    checkpoints: Option<(&Path, bool)>,
    fail_after: u64,
) -> SpateResult<JobResult> {
    let mut config = JobConfig::local(workers);
    if let Some((dir, restore)) = checkpoints {
        config.checkpoint_interval = Some(Duration::from_millis(100));
        config.checkpoint_dir = Some(dir.display().to_string());
        config.restore = restore.then(|| "latest".to_string());
    }
    let env = StreamEnv::new(config);
    let policy = BadRecordPolicy::DeadLetter(dead.to_path_buf());
    let ckpt_dir = checkpoints.map(|(dir, _)| dir.to_path_buf());
    // Read slowly, so that checkpoints complete while it reads.
    fn slow<S>(inner: S, fail_after: u64, dir: Option<PathBuf>) -> Flaky<S> {
        Flaky::wrap(inner, fail_after)
            .after_a_checkpoint_in(dir)
            .paced(Duration::from_millis(2), 100)
    }
    let records = if csv {
        let inner = CsvSource::<Rec>::new(input).policy(policy);
        env.from_source(slow(inner, fail_after, ckpt_dir))
    } else {
        // Small splits: several per file, read by different workers.
        let inner = JsonLinesSource::<Rec>::new(input)
            .policy(policy)
            .split_size(40_000);
        env.from_source(slow(inner, fail_after, ckpt_dir))
    };
    records
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(0))
                .with_timestamp_assigner(|r: &Rec, _| r.t as i64),
        )
        .key_by(|r: &Rec| r.t % 5)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(1000)))
        .aggregate_with(
            Count,
            |k: &u64,
             w: &WindowContext<'_, TimeWindow>,
             (n, sum): (u64, u64),
             out: &mut Vec<(u64, i64, u64, u64)>| {
                out.push((*k, w.window.start, n, sum))
            },
        )
        .write_jsonl(out);
    env.execute("checkpointed file source")
}

/// The lines of a file or of every visible file of a directory, sorted.
fn lines(path: &Path) -> Vec<String> {
    let files: Vec<PathBuf> = if path.is_dir() {
        std::fs::read_dir(path)
            .unwrap()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.path())
            .collect()
    } else if path.exists() {
        vec![path.to_path_buf()]
    } else {
        Vec::new()
    };
    let mut rows: Vec<String> = files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}

fn complete_checkpoints(dir: &Path) -> usize {
    walk(dir)
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "_manifest.json"))
        .count()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| {
            let p = e.path();
            if p.is_dir() {
                walk(&p)
            } else {
                vec![p]
            }
        })
        .collect()
}

fn recover(csv: bool, before: usize, after: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let p = |name: &str| tmp.path().join(name);
    write_inputs(&p("in"), csv);
    run(
        &p("in"),
        csv,
        &p("e"),
        &p("e-dead.jsonl"),
        1,
        None,
        u64::MAX,
    )
    .unwrap();
    let expected = lines(&p("e"));
    let expected_dead = lines(&p("e-dead.jsonl"));
    assert_eq!(expected.len(), 5 * (LINES as usize).div_ceil(1000));
    assert_eq!(expected_dead.len(), (LINES / 50) as usize);

    let failed = run(
        &p("in"),
        csv,
        &p("o"),
        &p("dead.jsonl"),
        before,
        Some((&p("c"), false)),
        LINES / 2,
    );
    assert!(failed.is_err(), "the first run fails");
    assert!(
        complete_checkpoints(&p("c")) >= 1,
        "a checkpoint completed before the failure: {:?}",
        walk(&p("c"))
    );
    assert!(lines(&p("dead.jsonl")).len() < expected_dead.len());
    run(
        &p("in"),
        csv,
        &p("o"),
        &p("dead.jsonl"),
        after,
        Some((&p("c"), true)),
        u64::MAX,
    )
    .unwrap();
    assert_eq!(
        lines(&p("o")),
        expected,
        "{before} -> {after} workers: output"
    );
    assert_eq!(
        lines(&p("dead.jsonl")),
        expected_dead,
        "{before} -> {after} workers: dead letters"
    );
}

#[test]
fn jsonl_directory_restored_on_the_same_workers_is_exact() {
    recover(false, 2, 2);
}

#[test]
fn jsonl_directory_restored_on_other_workers_is_exact() {
    recover(false, 3, 2);
}

#[test]
fn csv_directory_restored_is_exact() {
    recover(true, 2, 2);
    recover(true, 1, 3);
}
