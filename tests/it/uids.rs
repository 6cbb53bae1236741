//! State identity through job edits (Flink's `uid`): state belongs to an operator's uid, set by
//! the user or derived from the job graph's structure, never to its display name.
//!
//! Each test runs a first job over items `0..100` that ends with a savepoint, then an edited
//! job over `0..200` restored from it. A rolling count per key shows whether the count's state
//! came back (the second job's counts go on from 10) and the source's position whether the
//! source resumed (the second job sees only items `100..200`).

use std::path::Path;
use std::time::Duration;

use spate::prelude::*;

const KEYS: u64 = 10;

struct Run<'a> {
    tmp: &'a Path,
    restore: Option<&'a str>,
    allow_non_restored_state: bool,
}

fn config(run: &Run<'_>, savepoint: &str) -> JobConfig {
    let mut config = JobConfig::local(2);
    config.checkpoint_interval = Some(Duration::from_millis(50));
    config.checkpoint_dir = Some(run.tmp.join("ckpt").display().to_string());
    config.restore = run.restore.map(|r| run.tmp.join(r).display().to_string());
    config.allow_non_restored_state = run.allow_non_restored_state;
    config.savepoint_dir = Some(run.tmp.join(savepoint).display().to_string());
    config.restart_strategy = spate::dataflow::RestartStrategy::None;
    config
}

/// `(key, count)` rows, sorted, and the items the job read.
type Counted = (Vec<(u64, u64)>, Vec<u64>);

/// The edits a test makes to the counting job.
#[derive(Clone, Copy)]
struct Shape {
    items: u64,
    names: &'static str,
    uids: bool,
    map_upstream: bool,
    extra_sum: bool,
}

fn counting_job(run: &Run<'_>, savepoint: &str, shape: Shape) -> SpateResult<Counted> {
    let env = StreamEnv::new(config(run, savepoint));
    let mut items = env
        .from_collection((0..shape.items).collect::<Vec<u64>>())
        .name(&format!("numbers-{}", shape.names));
    if shape.uids {
        items = items.uid("numbers");
    }
    if shape.map_upstream {
        items = items.map(|x: u64| x);
    }
    let (seen_sink, seen) = CollectSink::new();
    let seen_sink = items.sink_to(seen_sink);
    if shape.uids {
        seen_sink.uid("seen");
    }
    let mut counts = items
        .key_by(|x: &u64| x % KEYS)
        .count()
        .name(&format!("count-{}", shape.names));
    if shape.uids {
        counts = counts.uid("count");
    }
    let (counted_sink, counted) = CollectSink::new();
    let counted_sink = counts.sink_to(counted_sink);
    if shape.uids {
        counted_sink.uid("counted");
    }
    if shape.extra_sum {
        let mut sums = items
            .key_by(|x: &u64| x % KEYS)
            .sum(|x: &u64| *x)
            .name("sum");
        if shape.uids {
            sums = sums.uid("sum");
        }
        sums.sink_to(DiscardSink::new());
    }
    env.execute("counts")?;
    let mut rows: Vec<(u64, u64)> = counted.take();
    rows.sort_unstable();
    let mut read: Vec<u64> = seen.take();
    read.sort_unstable();
    Ok((rows, read))
}

fn first(tmp: &Path, shape: Shape) {
    let run = Run {
        tmp,
        restore: None,
        allow_non_restored_state: false,
    };
    let (rows, read) = counting_job(
        &run,
        "sp1",
        Shape {
            items: 100,
            ..shape
        },
    )
    .unwrap();
    assert_eq!(read, (0..100).collect::<Vec<_>>());
    assert_eq!(rows.len(), 100);
}

fn second(tmp: &Path, allow: bool, shape: Shape) -> SpateResult<Counted> {
    let run = Run {
        tmp,
        restore: Some("sp1"),
        allow_non_restored_state: allow,
    };
    counting_job(
        &run,
        "sp2",
        Shape {
            items: 200,
            ..shape
        },
    )
}

/// The second job resumed both the source (items 100..200 only) and the counts (10 → 20).
fn assert_resumed((rows, read): &Counted) {
    assert_eq!(
        *read,
        (100..200).collect::<Vec<_>>(),
        "the source resumes at its offsets"
    );
    let expected: Vec<(u64, u64)> = (0..KEYS)
        .flat_map(|k| (11..=20).map(move |n| (k, n)))
        .collect();
    assert_eq!(*rows, expected, "the counts go on from the restored state");
}

/// Runs the job shaped `before` to a savepoint, then the job shaped `after` restored from it.
fn edit(before: Shape, after: Shape, allow: bool) -> SpateResult<Counted> {
    let tmp = tempfile::tempdir().unwrap();
    first(tmp.path(), before);
    second(tmp.path(), allow, after)
}

const WITH_UIDS: Shape = Shape {
    items: 0,
    names: "a",
    uids: true,
    map_upstream: false,
    extra_sum: false,
};
const WITHOUT_UIDS: Shape = Shape {
    uids: false,
    ..WITH_UIDS
};

#[test]
fn renaming_operators_with_uids_keeps_their_state_and_the_source_resumes() {
    let renamed = Shape {
        names: "b",
        ..WITH_UIDS
    };
    assert_resumed(&edit(WITH_UIDS, renamed, false).unwrap());
}

#[test]
fn renaming_operators_without_uids_keeps_their_state_too() {
    // Derived uids come from the graph's structure, never from display names.
    let renamed = Shape {
        names: "b",
        ..WITHOUT_UIDS
    };
    assert_resumed(&edit(WITHOUT_UIDS, renamed, false).unwrap());
}

#[test]
fn inserting_a_stateless_operator_upstream_keeps_every_uid_state() {
    let inserted = Shape {
        map_upstream: true,
        ..WITH_UIDS
    };
    assert_resumed(&edit(WITH_UIDS, inserted, false).unwrap());
}

#[test]
fn without_uids_an_inserted_operator_changes_the_derived_ids_and_the_restore_is_refused() {
    // As in Flink: derived ids follow the graph, so the count's old state is claimed by no one.
    let inserted = Shape {
        map_upstream: true,
        ..WITHOUT_UIDS
    };
    let error = edit(WITHOUT_UIDS, inserted, false).unwrap_err().to_string();
    assert!(error.contains("no operator of this job claims"), "{error}");
}

#[test]
fn removing_a_stateful_operator_is_refused_without_the_flag_and_accepted_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let with_sum = Shape {
        extra_sum: true,
        ..WITH_UIDS
    };
    first(tmp.path(), with_sum);
    let error = second(tmp.path(), false, WITH_UIDS).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("`sum`"),
        "names the unclaimed uid: {message}"
    );
    assert!(!message.contains("`count`"), "{message}");
    assert!(message.contains("--allow-non-restored-state"), "{message}");
    assert!(!message.contains('\n'), "one line: {message}");
    assert_eq!(error.domain(), spate::types::ErrorDomain::User);
    // Nothing ran: no savepoint of the refused job.
    assert!(!tmp.path().join("sp2").exists());
    assert_resumed(&second(tmp.path(), true, WITH_UIDS).unwrap());
}

#[test]
fn an_operator_absent_from_the_snapshot_starts_empty() {
    // The new `sum` has no state in the savepoint; the others resume.
    let with_sum = Shape {
        extra_sum: true,
        ..WITH_UIDS
    };
    assert_resumed(&edit(WITH_UIDS, with_sum, false).unwrap());
}

#[test]
fn duplicate_uids_are_an_error_before_the_job_runs() {
    let env = StreamEnv::new(JobConfig::local(1));
    let numbers = env.from_collection((0..10u64).collect()).uid("same");
    let _doubled = numbers.map(|x: u64| x * 2).uid("same").collect();
    let error = env.execute("duplicates").unwrap_err().to_string();
    assert!(error.contains("same uid `same`"), "{error}");
}

#[test]
fn a_restore_from_a_missing_location_fails_at_once_and_never_starts_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let run = Run {
        tmp: tmp.path(),
        restore: Some("no-such-savepoint"),
        allow_non_restored_state: false,
    };
    let mut config = config(&run, "sp");
    // A restart strategy that would retry a failure a restart can cure.
    config.restart_strategy = spate::dataflow::RestartStrategy::FixedDelay {
        attempts: 3,
        delay: Duration::from_millis(10),
    };
    let env = StreamEnv::new(config);
    let seen = env.from_collection((0..10u64).collect()).collect();
    let error = env.execute("restore").unwrap_err();
    let message = error.to_string();
    assert!(message.contains("no-such-savepoint"), "{message}");
    assert!(!message.contains('\n'), "one line: {message}");
    assert_eq!(error.domain(), spate::types::ErrorDomain::User);
    assert!(seen.take().is_empty(), "the job never ran from empty state");
    assert!(!tmp.path().join("sp").exists());
}
