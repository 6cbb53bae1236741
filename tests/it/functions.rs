//! User functions with a lifecycle: a panic or an error in user code fails the job with the
//! operator's name (never an abort or a hang), and a checkpointed job then restarts under its
//! restart strategy and ends with exactly the failure-free output; non-keyed process functions
//! and rich functions open once per worker, close once at the end and count in the job's
//! metrics.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use spate::dataflow::{RestartStrategy, TumblingEventTimeWindows};
use spate::prelude::*;
use spate::types::ErrorDomain;

use crate::checkpoints::{counted_windows, rows};

/// A job over `0..100` whose map, named `parse`, panics on record 17.
fn panicking_map(workers: usize) -> SpateError {
    let env = StreamEnv::new(JobConfig::local(workers));
    let _out = env
        .from_collection((0u64..100).collect())
        .map(|v: u64| {
            if v == 17 {
                panic!("cannot parse record {v}");
            }
            v * 2
        })
        .name("parse")
        .collect();
    env.execute("panicking map").unwrap_err()
}

#[test]
fn a_panic_in_a_map_fails_the_job_with_the_operator_name_on_1_and_2_workers() {
    for workers in [1, 2] {
        let error = panicking_map(workers);
        assert_eq!(
            error.to_string(),
            "operator parse panicked: cannot parse record 17",
            "{workers} workers"
        );
        assert_eq!(error.domain(), ErrorDomain::Function);
    }
}

const EVENTS: u64 = 30_000;

/// Windows of 1 s of event time (one event per ms) per key `v % 5` after `f`, written to
/// `out` exactly once.
fn windowed_job(
    out: &Path,
    config: JobConfig,
    f: impl Fn(DataStream<u64>) -> DataStream<u64>,
) -> SpateResult<JobResult> {
    let env = StreamEnv::new(config);
    let source = env.from_source(SequenceSource::new(0, Some(EVENTS)).rate(30_000.0));
    counted_windows(f(source), 5).write_jsonl(out);
    env.execute("windows after a user function")
}

fn restarting(workers: usize, ckpt: &Path) -> JobConfig {
    let mut config = JobConfig::local(workers);
    config.checkpoint_interval = Some(Duration::from_millis(100));
    config.checkpoint_dir = Some(ckpt.display().to_string());
    config.restart_strategy = RestartStrategy::FixedDelay {
        attempts: 3,
        delay: Duration::from_millis(10),
    };
    config
}

static PANICKED: AtomicBool = AtomicBool::new(false);

/// Runs the windowed job with `f` in it on 2 workers with checkpoints and a restart strategy,
/// where `f` fails once (raising `failed`): one restart, then the failure-free output.
pub(crate) fn restarts_once_to_the_failure_free_output(
    failed: &AtomicBool,
    f: impl Fn(DataStream<u64>) -> DataStream<u64>,
) {
    let tmp = tempfile::tempdir().unwrap();
    let (expected, out, ckpt) = (
        tmp.path().join("e"),
        tmp.path().join("o"),
        tmp.path().join("c"),
    );
    windowed_job(&expected, JobConfig::local(1), |s| s).unwrap();
    let result = windowed_job(&out, restarting(2, &ckpt), f).unwrap();
    assert!(failed.load(Ordering::SeqCst));
    assert_eq!(result.metrics.get("fullRestarts"), Some(&1));
    assert_eq!(rows(&out), rows(&expected));
}

#[test]
fn a_function_that_panics_once_restarts_and_the_job_writes_the_failure_free_output() {
    restarts_once_to_the_failure_free_output(&PANICKED, |s| {
        s.map(|v: u64| {
            if v == EVENTS / 2 && !PANICKED.swap(true, Ordering::SeqCst) {
                panic!("a failure on the first attempt");
            }
            v
        })
    });
}

struct Explodes;

impl KeyedProcessFunction<u64, u64, u64> for Explodes {
    type State = u64;
    fn process_element(&self, value: u64, ctx: &mut ProcessContext<'_, u64, u64, u64>) {
        let seen = ctx.state().get_or_insert(0);
        *seen += 1;
        if value == 42 {
            let empty: Vec<u64> = Vec::new();
            ctx.collect(empty[value as usize]);
        }
        ctx.collect(value);
    }
}

#[test]
fn a_panicking_keyed_process_function_fails_the_job_with_its_name() {
    let env = StreamEnv::new(JobConfig::local(2));
    let _out = env
        .from_collection((0u64..100).collect())
        .key_by(|v: &u64| v % 3)
        .process(Explodes)
        .name("explodes")
        .collect();
    let error = env.execute("panicking process function").unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("operator explodes panicked: index out of bounds"),
        "{message}"
    );
}

#[test]
fn a_panicking_window_function_fails_the_job_with_its_name() {
    let env = StreamEnv::new(JobConfig::local(2));
    let _out = env
        .from_collection((0u64..100).collect())
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_monotonous_timestamps()
                .with_timestamp_assigner(|v: &u64, _| *v as i64),
        )
        .key_by(|v: &u64| v % 3)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
        .reduce(|a: u64, b: u64| {
            assert!(a + b < 150, "sum too large: {}", a + b);
            a + b
        })
        .name("sums")
        .collect();
    let error = env.execute("panicking window function").unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("operator sums panicked: sum too large"),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------------
// Fallible functions
// ---------------------------------------------------------------------------------------------

#[test]
fn an_error_of_a_fallible_function_fails_the_job_with_the_operator_name_and_message() {
    for workers in [1, 2] {
        let env = StreamEnv::new(JobConfig::local(workers));
        let _out = env
            .from_collection((0u64..100).map(|v| v.to_string()).collect())
            .map(|s: String| if s == "5" { "five".to_owned() } else { s })
            .try_map(|s: String| s.parse::<u64>().map_err(|e| format!("{s:?}: {e}")))
            .name("parse")
            .collect();
        let error = env.execute("fallible map").unwrap_err();
        assert_eq!(
            error.to_string(),
            "operator parse failed: \"five\": invalid digit found in string"
        );
        assert_eq!(error.domain(), ErrorDomain::Function);
    }
}

#[test]
fn fallible_filter_and_flat_map_keep_what_they_return_and_fail_on_an_error() {
    let env = StreamEnv::new(JobConfig::local(2));
    let out = env
        .from_collection((0u64..50).collect())
        .try_filter(|v: &u64| Ok::<_, SpateError>(v % 2 == 0))
        .try_flat_map(|v: u64| Ok::<_, std::io::Error>(vec![v, v + 1]))
        .collect();
    env.execute("fallible filter").unwrap();
    let mut got = out.take();
    got.sort();
    let mut expected: Vec<u64> = (0..50)
        .filter(|v| v % 2 == 0)
        .flat_map(|v| [v, v + 1])
        .collect();
    expected.sort();
    assert_eq!(got, expected);

    let env = StreamEnv::new(JobConfig::local(2));
    let _out = env
        .from_collection((0u64..50).collect())
        .try_filter(|v: &u64| {
            if *v == 30 {
                Err(std::io::Error::other("lookup service down"))
            } else {
                Ok(true)
            }
        })
        .name("lookup")
        .collect();
    let error = env.execute("failing filter").unwrap_err();
    assert_eq!(
        error.to_string(),
        "operator lookup failed: lookup service down"
    );
}

static FAILED_ONCE: AtomicBool = AtomicBool::new(false);

#[test]
fn a_function_that_errs_once_restarts_and_the_job_writes_the_failure_free_output() {
    restarts_once_to_the_failure_free_output(&FAILED_ONCE, |s| {
        s.try_map(|v: u64| {
            if v == EVENTS / 3 && !FAILED_ONCE.swap(true, Ordering::SeqCst) {
                return Err("the enrichment service timed out");
            }
            Ok(v)
        })
    });
}

// ---------------------------------------------------------------------------------------------
// Non-keyed process functions and rich functions
// ---------------------------------------------------------------------------------------------

/// Splits records: even values to the main output (with their timestamp), odd ones to a side
/// output; counts what it saw in a metric; notes its lifecycle.
#[derive(Clone)]
struct Split {
    odd: OutputTag<u64>,
    seen: Option<Counter>,
    opened: &'static Mutex<Vec<(usize, usize, String)>>,
    closed: &'static AtomicUsize,
}

impl ProcessFunction<u64, (u64, i64)> for Split {
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        self.opened.lock().unwrap().push((
            ctx.index_of_this_subtask(),
            ctx.number_of_parallel_subtasks(),
            format!("{}/{}", ctx.job_name(), ctx.operator_name()),
        ));
        self.seen = Some(ctx.metrics().counter("seen"));
        Ok(())
    }

    fn process_element(
        &mut self,
        value: u64,
        ctx: &mut ProcessFunctionContext<'_, (u64, i64)>,
    ) -> FunctionResult {
        self.seen.as_ref().ok_or("not opened")?.inc();
        assert!(ctx.current_watermark() < ctx.timestamp() + 1_000);
        if value % 2 == 0 {
            ctx.collect((value, ctx.timestamp()));
        } else {
            ctx.output(&self.odd, value);
        }
        Ok(())
    }

    fn close(&mut self) -> FunctionResult {
        self.closed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

static SPLIT_OPENED: Mutex<Vec<(usize, usize, String)>> = Mutex::new(Vec::new());
static SPLIT_CLOSED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_process_function_opens_once_per_worker_splits_records_and_counts_in_its_metrics() {
    let env = StreamEnv::new(JobConfig::local(3));
    let odd = OutputTag::<u64>::new("odd");
    let main = env
        .from_collection((0u64..300).collect())
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(10))
                .with_timestamp_assigner(|v: &u64, _| *v as i64 * 10),
        )
        .process(Split {
            odd: odd.clone(),
            seen: None,
            opened: &SPLIT_OPENED,
            closed: &SPLIT_CLOSED,
        })
        .name("split");
    let evens = main.collect();
    let odds = main.side_output(&odd).collect();
    let result = env.execute("splitting").unwrap();

    let mut opened = SPLIT_OPENED.lock().unwrap().clone();
    opened.sort();
    let expected: Vec<(usize, usize, String)> = (0..3)
        .map(|i| (i, 3, "splitting/split".to_owned()))
        .collect();
    assert_eq!(opened, expected);
    assert_eq!(SPLIT_CLOSED.load(Ordering::SeqCst), 3);
    assert_eq!(result.metrics.get("split.seen"), Some(&300));

    let mut evens = evens.take();
    evens.sort();
    let expected: Vec<(u64, i64)> = (0..300)
        .filter(|v| v % 2 == 0)
        .map(|v| (v, v as i64 * 10))
        .collect();
    assert_eq!(evens, expected);
    let mut odds = odds.take();
    odds.sort();
    assert_eq!(odds, (0..300).filter(|v| v % 2 == 1).collect::<Vec<_>>());
}

/// Keeps values below a limit read in `open`, and numbers them per instance.
#[derive(Clone)]
struct Numbered {
    index: usize,
    next: u64,
    closed: &'static AtomicUsize,
}

impl RichMapFunction<u64, (usize, u64, u64)> for Numbered {
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        self.index = ctx.index_of_this_subtask();
        Ok(())
    }
    fn map(&mut self, value: u64) -> FunctionResult<(usize, u64, u64)> {
        self.next += 1;
        Ok((self.index, self.next, value))
    }
    fn close(&mut self) -> FunctionResult {
        self.closed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[derive(Clone)]
struct Below(u64, Option<Counter>);

impl RichFilterFunction<u64> for Below {
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        self.1 = Some(ctx.metrics().counter("kept"));
        Ok(())
    }
    fn filter(&mut self, value: &u64) -> FunctionResult<bool> {
        let keep = *value < self.0;
        if keep {
            self.1.as_ref().ok_or("not opened")?.inc();
        }
        Ok(keep)
    }
}

#[derive(Clone)]
struct Twice;

impl RichFlatMapFunction<u64, u64> for Twice {
    fn flat_map(&mut self, value: u64, out: &mut Vec<u64>) -> FunctionResult {
        out.extend([value, value]);
        Ok(())
    }
}

static NUMBERED_CLOSED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn rich_map_filter_and_flat_map_keep_per_instance_fields_and_close_once_each() {
    let env = StreamEnv::new(JobConfig::local(3));
    let out = env
        .from_collection((0u64..90).collect())
        .filter_rich(Below(60, None))
        .name("below")
        .flat_map_rich(Twice)
        .map_rich(Numbered {
            index: usize::MAX,
            next: 0,
            closed: &NUMBERED_CLOSED,
        })
        .collect();
    let result = env.execute("rich functions").unwrap();
    assert_eq!(result.metrics.get("below.kept"), Some(&60));
    assert_eq!(NUMBERED_CLOSED.load(Ordering::SeqCst), 3);
    let got = out.take();
    let mut values: Vec<u64> = got.iter().map(|r| r.2).collect();
    values.sort();
    let expected: Vec<u64> = (0..60).flat_map(|v| [v, v]).collect();
    assert_eq!(values, expected);
    // Each instance numbers its own records 1, 2, ... n.
    let mut per_instance: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for (i, n, _) in got {
        per_instance.entry(i).or_default().push(n);
    }
    assert!(per_instance.keys().all(|i| *i < 3));
    for numbers in per_instance.values_mut() {
        numbers.sort();
        assert_eq!(*numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
    }
}

#[test]
fn an_error_in_open_fails_the_job_with_the_operator_name() {
    #[derive(Clone)]
    struct NoConfig;
    impl RichMapFunction<u64, u64> for NoConfig {
        fn open(&mut self, _ctx: &RuntimeContext) -> FunctionResult {
            Err("missing setting `endpoint`".into())
        }
        fn map(&mut self, value: u64) -> FunctionResult<u64> {
            Ok(value)
        }
    }
    let env = StreamEnv::new(JobConfig::local(2));
    let _out = env
        .from_collection((0u64..10).collect())
        .map_rich(NoConfig)
        .name("enrich")
        .collect();
    let error = env.execute("failing open").unwrap_err();
    assert_eq!(
        error.to_string(),
        "operator enrich failed: missing setting `endpoint`"
    );
}
