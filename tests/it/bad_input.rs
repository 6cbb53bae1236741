//! Bad input end to end through the engine: every policy, with several workers.

use std::io::Write;

use spate::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
struct Reading {
    id: u64,
    name: String,
}

/// 2000 lines, every 97th bad in a different way; returns the file and the bad line numbers.
fn input(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u64>) {
    let path = dir.join("readings.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    let mut bad = Vec::new();
    for i in 0..2000u64 {
        let line = if i % 97 == 5 {
            bad.push(i + 1);
            match (i / 97) % 4 {
                0 => r#"{"id": 1, "name": "trunc"#.to_string(),
                1 => r#"{"id": "seven", "name": "x"}"#.to_string(),
                2 => r#"{"name": "no id"}"#.to_string(),
                _ => "not json at all".to_string(),
            }
        } else {
            format!(r#"{{"id": {i}, "name": "r{i}"}}"#)
        };
        writeln!(f, "{line}").unwrap();
    }
    (path, bad)
}

fn good(bad: &[u64]) -> Vec<Reading> {
    (0..2000u64)
        .filter(|i| !bad.contains(&(i + 1)))
        .map(|i| Reading {
            id: i,
            name: format!("r{i}"),
        })
        .collect()
}

fn run(path: &std::path::Path, policy: BadRecordPolicy) -> (SpateResult<JobResult>, Vec<Reading>) {
    let env = StreamEnv::new(JobConfig::local(3));
    let source = JsonLinesSource::<Reading>::new(path)
        .policy(policy)
        .split_size(4096);
    let out = env.from_source(source).name("readings").collect();
    let result = env.execute("bad input");
    let mut got = out.take();
    got.sort();
    (result, got)
}

#[test]
fn fail_names_file_line_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bad) = input(dir.path());
    let (result, _) = run(&path, BadRecordPolicy::Fail);
    let err = result.expect_err("the job must fail").to_string();
    assert!(err.contains("readings.jsonl"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // Which bad line fails first depends on the workers' pace; it must be one of them.
    assert!(
        bad.iter().any(|l| err.contains(&format!("line {l}:"))),
        "{err}"
    );
}

#[test]
fn drop_counts_and_keeps_every_good_record() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bad) = input(dir.path());
    let (result, got) = run(&path, BadRecordPolicy::Drop);
    let result = result.expect("the job goes on");
    assert_eq!(
        result.totals["readings.numRecordsDropped"],
        bad.len() as u64
    );
    assert_eq!(got, good(&bad));
}

#[test]
fn dead_letters_carry_reason_origin_line_and_text() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bad) = input(dir.path());
    let dl = dir.path().join("dead.jsonl");
    let (result, got) = run(&path, BadRecordPolicy::DeadLetter(dl.clone()));
    let result = result.expect("the job goes on");
    assert_eq!(got, good(&bad));
    assert_eq!(
        result.totals["readings.numRecordsDeadLettered"],
        bad.len() as u64
    );
    let text = std::fs::read_to_string(&dl).expect("dead-letter file is written");
    let mut letters: Vec<DeadLetter> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("dead letters are JSON lines"))
        .collect();
    letters.sort_by_key(|d| d.line);
    assert_eq!(letters.iter().map(|d| d.line).collect::<Vec<_>>(), bad);
    let raw = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = raw.lines().collect();
    for d in &letters {
        assert!(d.source.ends_with("readings.jsonl"), "{d:?}");
        assert!(!d.reason.is_empty());
        assert_eq!(d.raw, lines[d.line as usize - 1]);
    }
}
