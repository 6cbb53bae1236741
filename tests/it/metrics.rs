//! Live metrics and control of a running job: exact record counts along every edge, busy
//! time, backpressure at the sources, watermarks, epoch latency, restarts, and cancel,
//! savepoints and stop with savepoint through the job's `JobView`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spate::dataflow::{KeyedProcessFunction, ProcessContext};
use spate::dataflow::{
    ProcessFunction, ProcessFunctionContext, RestartStrategy, RuntimeContext, TimeWindow,
    TumblingEventTimeWindows, WindowContext, MAX_WATERMARK,
};
use spate::metrics::{ControlError, JobSnapshot, JobState, JobView, Operation, OperationStatus};
use spate::prelude::*;
use spate::types::keygroup::{key_group, worker_for_key_group};
use spate::types::{Sink, SinkContext, SinkWriter};

use crate::checkpoints::{counted_windows, Count};

/// Where a test keeps the view of the job it runs, once it starts.
type ViewSlot = Arc<Mutex<Option<Arc<dyn JobView>>>>;

/// Runs `env` and returns its result with the final snapshot.
fn run(env: &StreamEnv, name: &str) -> (JobResult, JobSnapshot) {
    let result = env.execute(name).unwrap();
    let snapshot = result.snapshot.clone().expect("a final snapshot");
    (result, snapshot)
}

/// The index of the operator called `name`.
fn op(s: &JobSnapshot, name: &str) -> usize {
    s.operators
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no operator {name} in {:?}", names(s)))
        .index
}

fn names(s: &JobSnapshot) -> Vec<String> {
    s.operators.iter().map(|o| o.name.clone()).collect()
}

/// Every edge: the sum of its source's `numRecordsOut` equals the sum of its target's
/// `numRecordsIn` (single-input operators; a side output's edge is the side node's own; a
/// broadcast edge delivers each record to every instance).
fn edges_agree(s: &JobSnapshot) {
    for o in &s.operators {
        if o.inputs.len() != 1 || o.kind == "side" {
            continue;
        }
        let from = o.inputs[0].from;
        // A broadcast edge gives every record to every instance.
        let copies = match o.inputs[0].ship_strategy {
            spate::metrics::ShipStrategy::Broadcast => o.parallelism as f64,
            _ => 1.0,
        };
        assert_eq!(
            s.sum_of(from, "numRecordsOut") * copies,
            s.sum_of(o.index, "numRecordsIn"),
            "edge {} -> {}",
            s.operators[from].name,
            o.name
        );
    }
}

fn exact_counts(workers: usize) {
    let env = StreamEnv::new(JobConfig::local(workers));
    let out = env
        .from_source(SequenceSource::new(0, Some(1_000_000)))
        .filter(|v: &u64| v % 2 == 0)
        .name("even")
        .map(|v: u64| v + 1)
        .name("plus-one")
        .collect();
    let (_, s) = run(&env, "exact counts");
    let rows = out.take();
    assert_eq!(rows.len(), 500_000);
    let source = s
        .operators
        .iter()
        .find(|o| o.kind == "source")
        .unwrap()
        .index;
    let (even, plus) = (op(&s, "even"), op(&s, "plus-one"));
    let sink = s.operators.iter().find(|o| o.kind == "sink").unwrap().index;
    assert_eq!(s.sum_of(source, "numRecordsOut"), 1_000_000.0);
    assert_eq!(s.sum_of(even, "numRecordsIn"), 1_000_000.0);
    assert_eq!(s.sum_of(even, "numRecordsOut"), 500_000.0);
    assert_eq!(s.sum_of(plus, "numRecordsIn"), 500_000.0);
    assert_eq!(s.sum_of(plus, "numRecordsOut"), 500_000.0);
    assert_eq!(s.sum_of(sink, "numRecordsIn"), rows.len() as f64);
    assert_eq!(s.subtasks_of(source).count(), workers);
    assert_eq!(s.state, JobState::Finished);
    edges_agree(&s);
}

#[test]
fn record_counts_are_exact_on_one_worker() {
    exact_counts(1);
}

#[test]
fn record_counts_are_exact_on_three_workers() {
    exact_counts(3);
}

#[test]
fn keyed_and_window_jobs_count_the_same_records_on_both_ends_of_every_edge() {
    let env = StreamEnv::new(JobConfig::local(3));
    let numbers = env.from_source(SequenceSource::new(0, Some(60_000)));
    let sums = numbers
        .key_by(|v: &u64| v % 11)
        .sum(|v: &u64| *v)
        .name("sums")
        .collect();
    let windows = counted_windows(numbers, 7).collect();
    let (_, s) = run(&env, "keyed and windows");
    edges_agree(&s);
    let sinks: Vec<usize> = s
        .operators
        .iter()
        .filter(|o| o.kind == "sink")
        .map(|o| o.index)
        .collect();
    let rows = [sums.take().len(), windows.take().len()];
    let counted: Vec<f64> = sinks.iter().map(|&i| s.sum_of(i, "numRecordsIn")).collect();
    assert_eq!(rows[0] as f64, counted[0]);
    assert_eq!(rows[1] as f64, counted[1]);
    assert_eq!(rows[1], 7 * 60, "7 keys × 60 windows");
    assert_eq!(s.sum_of(op(&s, "sums"), "numRecordsIn"), 60_000.0);
}

/// Spins for about `ns` nanoseconds.
fn spin(ns: u64) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_nanos(ns) {
        std::hint::spin_loop();
    }
}

#[test]
fn a_slow_operator_has_the_most_busy_time() {
    let env = StreamEnv::new(JobConfig::local(2));
    env.from_source(SequenceSource::new(0, Some(200_000)))
        .map(|v: u64| v * 3)
        .name("fast")
        .map(|v: u64| {
            spin(5_000);
            v
        })
        .name("slow")
        .filter(|v: &u64| v % 2 == 0)
        .name("after")
        .sink_to(DiscardSink::new());
    let (_, s) = run(&env, "slow operator");
    let busy = |i: usize| s.sum_of(i, "accumulatedBusyTimeMs");
    let slow = op(&s, "slow");
    // 200 000 records × 5 µs = 1 s of spinning, over both workers.
    assert!(busy(slow) >= 900.0, "slow: {} ms", busy(slow));
    for o in &s.operators {
        if o.index != slow {
            assert!(
                busy(o.index) < busy(slow) / 3.0,
                "{} busy {} ms vs slow {} ms",
                o.name,
                busy(o.index),
                busy(slow)
            );
        }
    }
    // DS2's true processing rate: records per second of busy time, at most one per 5 µs.
    let true_rate = s.sum_of(slow, "numRecordsIn") / (busy(slow) / 1000.0);
    assert!(
        true_rate > 0.0 && true_rate <= 2.0 * 200_000.0,
        "{true_rate}"
    );
    for t in s.subtasks_of(slow) {
        if let Some(&r) = t.metrics.get("trueProcessingRate") {
            assert!(r <= 200_000.0 * 1.05, "subtask {}: {r}", t.subtask);
        }
    }
}

/// A sink that sleeps after each batch it writes.
struct SlowSink(Duration);

impl Sink<u64> for SlowSink {
    fn name(&self) -> String {
        "slow".into()
    }
    fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<u64>>> {
        struct W(Duration);
        impl SinkWriter<u64> for W {
            fn write_batch(&mut self, records: &mut Vec<u64>) -> SpateResult<()> {
                // The cost grows with the batch (per 100 records), so the sink's pace is
                // the same whatever batches the job hands it.
                let hundreds = records.len().div_ceil(100) as u32;
                records.clear();
                std::thread::sleep(self.0 * hundreds);
                Ok(())
            }
            fn close(&mut self) -> SpateResult<()> {
                Ok(())
            }
        }
        Ok(Box::new(W(self.0)))
    }
}

/// Polls `view` until `f` holds of a snapshot, for at most `limit`.
fn poll_until(view: &Arc<dyn JobView>, limit: Duration, f: impl Fn(&JobSnapshot) -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f(&view.snapshot()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The view of the next job `env` runs, once it starts.
fn view_of(env: &mut StreamEnv) -> ViewSlot {
    let slot: ViewSlot = Arc::new(Mutex::new(None));
    let s = Arc::clone(&slot);
    env.on_start(move |view| *s.lock().unwrap() = Some(view));
    slot
}

/// Waits for the view of a job started on another thread.
fn wait_view(slot: &ViewSlot) -> Arc<dyn JobView> {
    let start = Instant::now();
    loop {
        if let Some(v) = slot.lock().unwrap().clone() {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the job never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_slow_sink_backpressures_the_source_and_a_free_running_job_does_not() {
    // Small epochs so that flow control closes quickly. The sink runs on worker 0 only:
    // worker 1's source outruns it (on one worker, a slow sink only shares the thread with
    // the source, which then polls less often: busy time, not backpressure).
    let mut config = JobConfig::local(2);
    config.epoch_max_records = 1000;
    config.poll_batch = 250;
    let mut env = StreamEnv::new(config.clone());
    let slot = view_of(&mut env);
    env.from_source(SequenceSource::new(0, Some(100_000)))
        .sink_to_single(SlowSink(Duration::from_millis(2)));
    let seen = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (slot, seen) = (Arc::clone(&slot), Arc::clone(&seen));
        std::thread::spawn(move || {
            let view = wait_view(&slot);
            let found = poll_until(&view, Duration::from_secs(60), |s| {
                s.operators
                    .iter()
                    .filter(|o| o.kind == "source")
                    .any(|o| s.sum_of(o.index, "isBackPressured") >= 1.0)
                    || s.state.is_terminal()
            });
            let s = view.snapshot();
            let source = s
                .operators
                .iter()
                .find(|o| o.kind == "source")
                .unwrap()
                .index;
            if found && s.sum_of(source, "isBackPressured") >= 1.0 {
                seen.store(true, Ordering::SeqCst);
            }
        })
    };
    let (result, s) = run(&env, "slow sink");
    watcher.join().unwrap();
    assert!(seen.load(Ordering::SeqCst), "isBackPressured was never 1");
    let source = s
        .operators
        .iter()
        .find(|o| o.kind == "source")
        .unwrap()
        .index;
    let held = s.sum_of(source, "accumulatedBackPressuredTimeMs");
    let elapsed = result.elapsed.as_secs_f64() * 1000.0;
    assert!(
        held > elapsed * 0.5,
        "backpressured {held} ms of {elapsed} ms"
    );

    // The same source at a rate the job keeps up with, into a sink that costs nothing.
    let env = StreamEnv::new(config);
    env.from_source(SequenceSource::new(0, Some(20_000)).rate(20_000.0))
        .sink_to(DiscardSink::new());
    let (result, s) = run(&env, "free running");
    let source = s
        .operators
        .iter()
        .find(|o| o.kind == "source")
        .unwrap()
        .index;
    let held = s.sum_of(source, "accumulatedBackPressuredTimeMs");
    let elapsed = result.elapsed.as_secs_f64() * 1000.0;
    assert!(
        held < elapsed * 0.1,
        "backpressured {held} ms of {elapsed} ms"
    );
}

#[test]
fn watermarks_are_the_jobs_and_reach_the_maximum_at_the_end() {
    let mut env = StreamEnv::new(JobConfig::local(2));
    let slot = view_of(&mut env);
    let numbers = env
        .from_source(SequenceSource::new(0, Some(40_000)).rate(20_000.0))
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(0))
                .with_timestamp_assigner(|v: &u64, _| *v as i64),
        );
    let windows = numbers
        .key_by(|v: &u64| v % 3)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .aggregate_with(
            Count,
            |k: &u64,
             w: &WindowContext<'_, TimeWindow>,
             (n, _): (u64, u64),
             out: &mut Vec<(u64, i64, u64)>| { out.push((*k, w.window.start, n)) },
        )
        .name("windows")
        .collect();
    // While it runs: a source's watermark never runs ahead of the timestamps read (the
    // values, interleaved over two workers; a poll may land between reading the count and
    // the watermark, hence the margin).
    let watcher = {
        let slot = Arc::clone(&slot);
        std::thread::spawn(move || {
            let view = wait_view(&slot);
            let mut checked = 0;
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(60) {
                let s = view.snapshot();
                if s.state.is_terminal() {
                    break;
                }
                let source = s
                    .operators
                    .iter()
                    .find(|o| o.kind == "source")
                    .unwrap()
                    .index;
                let read = s.sum_of(source, "numRecordsOut");
                for t in s.subtasks_of(source) {
                    if let Some(&wm) = t.metrics.get("currentOutputWatermark") {
                        if wm > i64::MIN as f64 && wm < MAX_WATERMARK as f64 {
                            assert!(wm <= read * 2.0 + 5000.0, "watermark {wm} after {read}");
                            checked += 1;
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            checked
        })
    };
    let (_, s) = run(&env, "watermarks");
    let checked = watcher.join().unwrap();
    assert!(checked > 0, "no watermark was reported while the job ran");
    let w = op(&s, "windows");
    for t in s.subtasks_of(w) {
        assert_eq!(t.metrics["currentInputWatermark"], MAX_WATERMARK as f64);
        assert_eq!(t.metrics["currentOutputWatermark"], MAX_WATERMARK as f64);
    }
    let source = s
        .operators
        .iter()
        .find(|o| o.kind == "source")
        .unwrap()
        .index;
    for t in s.subtasks_of(source) {
        assert_eq!(t.metrics["currentOutputWatermark"], MAX_WATERMARK as f64);
    }
    let sink = s.operators.iter().find(|o| o.kind == "sink").unwrap().index;
    for t in s.subtasks_of(sink) {
        assert_eq!(t.metrics["currentInputWatermark"], MAX_WATERMARK as f64);
    }
    assert_eq!(windows.take().len(), 3 * 40);
}

static FAILED_ONCE: AtomicBool = AtomicBool::new(false);

#[test]
fn after_a_restart_the_restart_and_its_exception_are_recorded_and_counters_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = JobConfig::local(2);
    config.checkpoint_interval = Some(Duration::from_millis(50));
    config.checkpoint_dir = Some(tmp.path().join("c").display().to_string());
    config.restart_strategy = RestartStrategy::FixedDelay {
        attempts: 3,
        delay: Duration::from_millis(10),
    };
    const N: u64 = 40_000;
    let env = StreamEnv::new(config);
    env.from_source(SequenceSource::new(0, Some(N)).rate(40_000.0))
        .map(|v: u64| {
            if v == N / 2 && !FAILED_ONCE.swap(true, Ordering::SeqCst) {
                panic!("a failure on the first attempt");
            }
            v
        })
        .name("fails-once")
        .key_by(|v: &u64| v % 5)
        .sum(|v: &u64| *v)
        .sink_to(DiscardSink::new());
    let (result, s) = run(&env, "restarts");
    assert_eq!(result.metrics.get("fullRestarts"), Some(&1));
    assert_eq!(s.metrics["numRestarts"], 1.0);
    assert_eq!(s.exceptions.len(), 1, "{:?}", s.exceptions);
    assert!(s.exceptions[0].restarted);
    assert_eq!(s.exceptions[0].operator.as_deref(), Some("fails-once"));
    assert!(
        s.exceptions[0]
            .message
            .contains("a failure on the first attempt"),
        "{}",
        s.exceptions[0].message
    );
    assert!(s.timestamps.contains_key(&JobState::Restarting));
    assert_eq!(s.state, JobState::Finished);
    // The second run counts from zero: it read what came after its restored checkpoint.
    let source = s
        .operators
        .iter()
        .find(|o| o.kind == "source")
        .unwrap()
        .index;
    let read = s.sum_of(source, "numRecordsOut");
    assert!(s.checkpoints.latest_restored.is_some());
    assert!(read < N as f64 && read > 0.0, "read {read}");
    assert!(s.metrics["numberOfCompletedCheckpoints"] >= 1.0);
    edges_agree(&s);
}

#[test]
fn a_canceled_job_ends_canceled_quickly() {
    let mut env = StreamEnv::new(JobConfig::local(2));
    let slot = view_of(&mut env);
    env.from_source(SequenceSource::new(0, None).rate(50_000.0))
        .map(|v: u64| v + 1)
        .sink_to(DiscardSink::new());
    let canceled_at = Arc::new(Mutex::new(None));
    let canceler = {
        let (slot, at) = (Arc::clone(&slot), Arc::clone(&canceled_at));
        std::thread::spawn(move || {
            let view = wait_view(&slot);
            assert!(poll_until(&view, Duration::from_secs(30), |s| {
                s.state == JobState::Running
                    && s.operators
                        .iter()
                        .filter(|o| o.kind == "source")
                        .any(|o| s.sum_of(o.index, "numRecordsOut") > 1000.0)
            }));
            *at.lock().unwrap() = Some(Instant::now());
            view.cancel().unwrap();
            view
        })
    };
    let (result, s) = run(&env, "cancel me");
    let ended = Instant::now();
    let view = canceler.join().unwrap();
    let at = canceled_at.lock().unwrap().unwrap();
    assert!(result.canceled);
    assert_eq!(s.state, JobState::Canceled);
    assert!(s.timestamps.contains_key(&JobState::Cancelling));
    assert!(ended - at < Duration::from_secs(5), "{:?}", ended - at);
    assert!(matches!(view.cancel(), Err(ControlError::Conflict(_))));
}

/// A passthrough process function, with user metrics.
#[derive(Clone)]
struct Measured {
    sleep: Duration,
    seen: Option<spate::dataflow::Counter>,
    last: Option<spate::dataflow::Gauge>,
}

impl ProcessFunction<u64, u64> for Measured {
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        self.seen = Some(ctx.metrics().counter("seen"));
        self.last = Some(ctx.metrics().settable_gauge("last"));
        ctx.metrics().gauge("answer", || 42.0);
        Ok(())
    }
    fn process_element(
        &mut self,
        v: u64,
        ctx: &mut ProcessFunctionContext<'_, u64>,
    ) -> FunctionResult {
        if let Some(c) = &self.seen {
            c.inc();
        }
        if let Some(g) = &self.last {
            g.set(v as f64);
        }
        if !self.sleep.is_zero() && v % 10 == 0 {
            std::thread::sleep(self.sleep);
        }
        ctx.collect(v);
        Ok(())
    }
}

/// Sleeps `0` on every 40th record, passing each on.
struct KeyedSleeper(Duration);

impl KeyedProcessFunction<u64, u64, u64> for KeyedSleeper {
    type State = ();
    fn process_element(&self, v: u64, ctx: &mut ProcessContext<'_, u64, (), u64>) {
        if v % 40 == 0 {
            std::thread::sleep(self.0);
        }
        ctx.collect(v);
    }
}

#[test]
fn epoch_latency_grows_after_a_sleeping_operator_and_user_metrics_show() {
    // Two workers: the sleeper's key lives on worker 1; `before` and the single-worker sink
    // are read on worker 0, whose thread never sleeps. The sink's input frontier passes an
    // epoch only once worker 1's sleeper has handled all of it. Frontiers are global, so
    // `before` waits for worker 1 too (a sleeping worker seals its epochs late): the two
    // differ by the processing between them, not by whole sleeps.
    let mut config = JobConfig::local(2);
    config.epoch_interval = Duration::from_millis(10);
    let maxp = config.max_parallelism;
    let key = (0u64..)
        .find(|k| worker_for_key_group(key_group(k, maxp), maxp, 2) == 1)
        .unwrap();
    let env = StreamEnv::new(config);
    let measured = Measured {
        sleep: Duration::ZERO,
        seen: None,
        last: None,
    };
    env.from_source(SequenceSource::new(0, Some(3_000)).rate(1_000.0))
        .process(measured)
        .name("before")
        .key_by(move |_: &u64| key)
        .process(KeyedSleeper(Duration::from_millis(20)))
        .name("sleeper")
        .sink_to_single(DiscardSink::new());
    let (_, s) = run(&env, "latency");
    let latency = |name: &str| {
        let i = op(&s, name);
        s.subtasks_of(i)
            .find(|t| t.subtask == 0)
            .and_then(|t| t.histograms.get("latency").copied())
            .unwrap_or_else(|| panic!("no latency for {name}"))
    };
    let sink_name = s
        .operators
        .iter()
        .find(|o| o.kind == "sink")
        .unwrap()
        .name
        .clone();
    let (before, after) = (latency("before"), latency(&sink_name));
    eprintln!("epoch latency (ms) before the sleeper {before:?}, at the sink {after:?}");
    assert!(before.count >= 20, "{before:?}");
    assert!(before.p50 >= 0.0 && before.max < 10_000.0, "{before:?}");
    // Per epoch, the sink records no earlier than `before` (it is downstream, and runs after
    // it in a step); some epochs wait for a whole sleep.
    assert!(
        after.mean > before.mean && after.max >= 20.0,
        "before {before:?}, after {after:?}"
    );
    let b = op(&s, "before");
    assert_eq!(s.sum_of(b, "seen"), 3_000.0);
    assert_eq!(s.sum_of(b, "answer"), 84.0, "42 from each of two instances");
    let lasts: Vec<f64> = s.subtasks_of(b).map(|t| t.metrics["last"]).collect();
    assert!(
        lasts.contains(&2_999.0) && lasts.contains(&2_998.0),
        "{lasts:?}"
    );
}

#[test]
fn chained_operators_record_epoch_latency_each() {
    // `m1 -> f1` is a materialized chain before `before`; `m2` runs in the sink's operator.
    // Every member of a chain sees each epoch complete when the operator that runs it does,
    // so members of one chain record the same epochs.
    let mut config = JobConfig::local(1);
    config.epoch_interval = Duration::from_millis(10);
    let env = StreamEnv::new(config);
    env.from_source(SequenceSource::new(0, Some(2_000)).rate(4_000.0))
        .map(|v: u64| v + 1)
        .name("m1")
        .filter(|v: &u64| v % 2 == 0)
        .name("f1")
        .process(Measured {
            sleep: Duration::ZERO,
            seen: None,
            last: None,
        })
        .name("before")
        .map(|v: u64| v * 3)
        .name("m2")
        .sink_to(DiscardSink::new());
    let (_, s) = run(&env, "chain latency");
    let latency = |name: &str| {
        let i = op(&s, name);
        s.subtasks_of(i)
            .next()
            .and_then(|t| t.histograms.get("latency").copied())
            .unwrap_or_else(|| panic!("no latency for {name}"))
    };
    let (m1, f1, before, m2) = (
        latency("m1"),
        latency("f1"),
        latency("before"),
        latency("m2"),
    );
    eprintln!("epoch latency (ms): m1 {m1:?}, f1 {f1:?}, before {before:?}, m2 {m2:?}");
    // About 50 epochs of 10 ms in the half-second run.
    for h in [&m1, &f1, &before, &m2] {
        assert!(h.count >= 10, "{h:?}");
        assert!(h.max < 10_000.0, "{h:?}");
    }
    assert_eq!(m1.count, f1.count, "one chain, one frontier");
    let sink = s.operators.iter().position(|o| o.kind == "sink").unwrap();
    let at_sink = s
        .subtasks_of(sink)
        .next()
        .and_then(|t| t.histograms.get("latency").copied())
        .expect("the sink's latency");
    assert_eq!(m2.count, at_sink.count, "m2 runs in the sink's operator");
}

/// The checkpointed keyed job of the savepoint tests: running sums of `v` per `v % 7`, the
/// largest per key collected.
fn summing_job(
    config: JobConfig,
    events: u64,
    rate: f64,
) -> (StreamEnv, CollectHandle<(u64, u64)>) {
    let env = StreamEnv::new(config);
    let sums = env
        .from_source(SequenceSource::new(0, Some(events)).rate(rate))
        .uid("numbers")
        .key_by(|v: &u64| v % 7)
        .sum(|v: &u64| *v)
        .uid("sums")
        .collect();
    (env, sums)
}

fn finals(rows: Vec<(u64, u64)>) -> BTreeMap<u64, u64> {
    let mut m = BTreeMap::new();
    for (k, v) in rows {
        let e = m.entry(k).or_insert(0);
        *e = (*e).max(v);
    }
    m
}

fn checkpointed(dir: &std::path::Path, workers: usize) -> JobConfig {
    let mut config = JobConfig::local(workers);
    config.checkpoint_interval = Some(Duration::from_millis(50));
    config.checkpoint_dir = Some(dir.display().to_string());
    config
}

#[test]
fn a_savepoint_of_a_running_job_restores_to_the_exact_result() {
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = tmp.path().join("c");
    const N: u64 = 30_000;
    let expected: BTreeMap<u64, u64> = finals((0..N).map(|v| (v % 7, 0)).collect::<Vec<_>>())
        .keys()
        .map(|&k| (k, (0..N).filter(|v| v % 7 == k).sum()))
        .collect();
    let (mut env, _sums) = summing_job(checkpointed(&ckpt, 2), N, 15_000.0);
    let slot = view_of(&mut env);
    let trigger = {
        let slot = Arc::clone(&slot);
        std::thread::spawn(move || {
            let view = wait_view(&slot);
            assert!(poll_until(&view, Duration::from_secs(30), |s| {
                s.state == JobState::Running
                    && s.operators
                        .iter()
                        .filter(|o| o.kind == "source")
                        .any(|o| s.sum_of(o.index, "numRecordsOut") > 3000.0)
            }));
            // Outside the root: refused, nothing written.
            for bad in ["/tmp/elsewhere", "../up", "a/../../b"] {
                let r = view.trigger(Operation::Savepoint {
                    target: Some(bad.into()),
                    cancel_job: false,
                });
                assert!(
                    matches!(r, Err(ControlError::BadRequest(_))),
                    "{bad}: {r:?}"
                );
            }
            let id = view
                .trigger(Operation::Savepoint {
                    target: Some("mine".into()),
                    cancel_job: false,
                })
                .unwrap();
            let start = Instant::now();
            loop {
                match view.operation(&id) {
                    Some(OperationStatus::Completed { location }) => return (location, view),
                    Some(OperationStatus::Failed { cause }) => panic!("savepoint failed: {cause}"),
                    _ => {}
                }
                assert!(start.elapsed() < Duration::from_secs(60));
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let (_, s) = run(&env, "savepoint while running");
    let (location, view) = trigger.join().unwrap();
    assert_eq!(location, format!("{}/savepoints/mine", ckpt.display()));
    assert!(!std::path::Path::new("/tmp/elsewhere").exists());
    assert!(!ckpt.join("up").exists() && !tmp.path().join("up").exists());
    assert!(s
        .checkpoints
        .history
        .iter()
        .any(|c| c.is_savepoint && c.external_path.as_deref() == Some(location.as_str())));
    assert!(view.operation("no-such-operation").is_none());

    // Restored from the savepoint on 3 workers: the sums are exact.
    let mut config = checkpointed(&tmp.path().join("c2"), 3);
    config.restore = Some(location);
    let (env, sums) = summing_job(config, N, 1e9);
    let (_, s) = run(&env, "restored");
    let source = s
        .operators
        .iter()
        .find(|o| o.kind == "source")
        .unwrap()
        .index;
    assert!(
        s.sum_of(source, "numRecordsOut") < N as f64,
        "it restarted from the savepoint"
    );
    assert_eq!(finals(sums.take()), expected);
}

#[test]
fn stop_with_a_drained_savepoint_fires_every_window_and_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = tmp.path().join("c");
    let mut env = StreamEnv::new(checkpointed(&ckpt, 2));
    let slot = view_of(&mut env);
    let windows = env
        .from_source(SequenceSource::new(0, None).rate(20_000.0))
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(0))
                .with_timestamp_assigner(|v: &u64, _| *v as i64),
        )
        .key_by(|v: &u64| v % 3)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .aggregate_with(
            Count,
            |_k: &u64,
             _w: &WindowContext<'_, TimeWindow>,
             (n, _): (u64, u64),
             out: &mut Vec<u64>| { out.push(n) },
        )
        .collect();
    let stopper = {
        let slot = Arc::clone(&slot);
        std::thread::spawn(move || {
            let view = wait_view(&slot);
            assert!(poll_until(&view, Duration::from_secs(30), |s| {
                s.state == JobState::Running
                    && s.metrics
                        .get("numberOfCompletedCheckpoints")
                        .copied()
                        .unwrap_or(0.0)
                        >= 1.0
                    && s.operators
                        .iter()
                        .filter(|o| o.kind == "source")
                        .any(|o| s.sum_of(o.index, "numRecordsOut") > 5000.0)
            }));
            let r = view.trigger(Operation::Stop {
                target: Some("/etc".into()),
                drain: true,
            });
            assert!(matches!(r, Err(ControlError::BadRequest(_))), "{r:?}");
            let id = view
                .trigger(Operation::Stop {
                    target: None,
                    drain: true,
                })
                .unwrap();
            (id, view)
        })
    };
    let (_, s) = run(&env, "stop with drain");
    let (id, view) = stopper.join().unwrap();
    assert_eq!(s.state, JobState::Finished);
    let location = match view.operation(&id) {
        Some(OperationStatus::Completed { location }) => location,
        other => panic!("{other:?}"),
    };
    assert!(location.starts_with(&format!("{}/savepoints/savepoint-", ckpt.display())));
    assert!(std::path::Path::new(&location).is_dir());
    let source = s
        .operators
        .iter()
        .find(|o| o.kind == "source")
        .unwrap()
        .index;
    let read = s.sum_of(source, "numRecordsOut");
    let counted: u64 = windows.take().iter().sum();
    assert_eq!(
        counted as f64, read,
        "every record read was counted in a fired window"
    );
}

#[test]
fn savepoints_need_a_checkpoint_directory() {
    let mut env = StreamEnv::new(JobConfig::local(1));
    let slot = view_of(&mut env);
    env.from_source(SequenceSource::new(0, None).rate(10_000.0))
        .sink_to(DiscardSink::new());
    let asker = {
        let slot = Arc::clone(&slot);
        std::thread::spawn(move || {
            let view = wait_view(&slot);
            assert!(poll_until(&view, Duration::from_secs(30), |s| s.state
                == JobState::Running));
            let s = view.trigger(Operation::Savepoint {
                target: None,
                cancel_job: false,
            });
            let t = view.trigger(Operation::Stop {
                target: None,
                drain: false,
            });
            let snapshot = view.snapshot();
            view.cancel().unwrap();
            (s, t, snapshot)
        })
    };
    let (result, _) = run(&env, "no checkpoints");
    let (s, t, snapshot) = asker.join().unwrap();
    assert!(result.canceled);
    assert!(!snapshot.savepoints_enabled);
    for r in [s, t] {
        match r {
            Err(ControlError::Conflict(m)) => assert!(m.contains("checkpoint directory"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}

/// Sends odd numbers to a side output, even ones on.
#[derive(Clone)]
struct SplitOdd(spate::dataflow::OutputTag<u64>);

impl ProcessFunction<u64, u64> for SplitOdd {
    fn process_element(
        &mut self,
        v: u64,
        ctx: &mut ProcessFunctionContext<'_, u64>,
    ) -> FunctionResult {
        if v % 2 == 1 {
            ctx.output(&self.0, v);
        } else {
            ctx.collect(v);
        }
        Ok(())
    }
}

#[test]
fn a_side_output_counts_what_its_operator_sent_on_it() {
    let env = StreamEnv::new(JobConfig::local(2));
    let tag = spate::dataflow::OutputTag::<u64>::new("odd");
    let main = env
        .from_source(SequenceSource::new(0, Some(10_001)))
        .process(SplitOdd(tag.clone()))
        .name("split");
    let odd = main.side_output(&tag).collect();
    let even = main.collect();
    let (_, s) = run(&env, "side outputs");
    let side = s.operators.iter().find(|o| o.kind == "side").unwrap().index;
    let split = op(&s, "split");
    assert_eq!(s.sum_of(split, "numRecordsIn"), 10_001.0);
    assert_eq!(s.sum_of(split, "numRecordsOut"), even.take().len() as f64);
    assert_eq!(s.sum_of(side, "numRecordsOut"), 5000.0);
    assert_eq!(odd.take().len(), 5000);
    edges_agree(&s);
}

#[test]
fn unions_and_broadcasts_report_what_passes_through_them() {
    let env = StreamEnv::new(JobConfig::local(2));
    let a = env.from_source(SequenceSource::new(0, Some(1000)));
    let b = env.from_source(SequenceSource::new(0, Some(500)));
    let all = a
        .union(&[b])
        .name("both")
        .broadcast()
        .name("everywhere")
        .collect();
    let (_, s) = run(&env, "union and broadcast");
    assert_eq!(s.sum_of(op(&s, "both"), "numRecordsIn"), 1500.0);
    assert_eq!(s.sum_of(op(&s, "both"), "numRecordsOut"), 1500.0);
    assert_eq!(s.sum_of(op(&s, "everywhere"), "numRecordsOut"), 3000.0);
    assert_eq!(all.take().len(), 3000);
    edges_agree(&s);
}

/// One HTTP/1.1 GET on `addr`; the status line and the body.
fn get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

#[test]
fn the_web_server_serves_a_running_jobs_view() {
    let mut env = StreamEnv::new(JobConfig::local(2));
    let slot = view_of(&mut env);
    env.from_source(SequenceSource::new(0, None).rate(20_000.0))
        .map(|v: u64| v + 1)
        .name("plus-one")
        .sink_to(DiscardSink::new());
    let client = {
        let slot = Arc::clone(&slot);
        std::thread::spawn(move || {
            let view = wait_view(&slot);
            assert!(poll_until(&view, Duration::from_secs(30), |s| {
                s.state == JobState::Running && s.sum_of(1, "numRecordsIn") > 1000.0
            }));
            let server =
                spate_web::serve(&spate_web::ServerConfig::default(), Arc::clone(&view)).unwrap();
            let jid = view.snapshot().job_id;
            let (status, body) = get(server.addr(), &format!("/v1/jobs/{jid}"));
            assert!(status.contains("200"), "{status} {body}");
            assert!(body.contains("plus-one"), "{body}");
            let (status, body) = get(server.addr(), "/metrics");
            assert!(status.contains("200"), "{status}");
            assert!(body.contains("numRecordsIn"), "{body}");
            let (status, body) = get(server.addr(), &format!("/v1/jobs/{jid}/dashboard"));
            assert!(status.contains("200"), "{status} {body}");
            view.cancel().unwrap();
            server.shutdown();
        })
    };
    let (result, _) = run(&env, "served");
    client.join().unwrap();
    assert!(result.canceled);
}
