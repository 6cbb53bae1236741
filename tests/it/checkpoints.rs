//! Exactly-once through failures: a windowed job that fails mid-way and is restored from its
//! latest checkpoint (on the same or another number of workers) writes, in the end, exactly
//! what a failure-free run writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spate::dataflow::{
    AggregateFunction, StateBackend, TimeWindow, TumblingEventTimeWindows, WindowContext,
};
use spate::prelude::*;
use spate::types::{
    DeadLetter, Sink, Source, SourceContext, SourceOutput, SourceReader, SourceStatus,
    SplitPosition,
};

pub(crate) const EVENTS: u64 = 60_000;

/// A source wrapper that fails the job once `fail_after` records have been read over all
/// workers (and, with [`Flaky::after_a_checkpoint_in`], once a checkpoint is complete: it reads
/// no further until then), reading at most `batch` records per poll after a `pause`, so that
/// checkpoints complete while it reads.
pub(crate) struct Flaky<S> {
    inner: S,
    read: Arc<AtomicU64>,
    fail_after: u64,
    checkpoints: Option<(PathBuf, usize)>,
    pause: Duration,
    batch: usize,
}

impl Flaky<SequenceSource> {
    /// `0..events` at `rate` records per second, failing after `fail_after` records.
    pub(crate) fn new(events: u64, rate: f64, fail_after: u64) -> Self {
        Flaky::wrap(SequenceSource::new(0, Some(events)).rate(rate), fail_after)
    }
}

impl<S> Flaky<S> {
    /// `inner`, failing after `fail_after` records.
    pub(crate) fn wrap(inner: S, fail_after: u64) -> Self {
        Flaky {
            inner,
            read: Arc::new(AtomicU64::new(0)),
            fail_after,
            checkpoints: None,
            pause: Duration::ZERO,
            batch: 500,
        }
    }

    /// Fails only once a checkpoint under `dir` is complete too (when `dir` is given).
    pub(crate) fn after_a_checkpoint_in(self, dir: Option<PathBuf>) -> Self {
        self.after_checkpoints_in(dir, 1)
    }

    /// Fails only once `n` checkpoints under `dir` are complete too (when `dir` is given).
    pub(crate) fn after_checkpoints_in(mut self, dir: Option<PathBuf>, n: usize) -> Self {
        self.checkpoints = dir.map(|dir| (dir, n));
        self
    }

    /// Reads at most `batch` records per poll, after sleeping `pause`.
    pub(crate) fn paced(mut self, pause: Duration, batch: usize) -> Self {
        self.pause = pause;
        self.batch = batch;
        self
    }
}

struct FlakyReader<T> {
    inner: Box<dyn SourceReader<T>>,
    read: Arc<AtomicU64>,
    fail_after: u64,
    checkpoints: Option<(PathBuf, usize)>,
    pause: Duration,
    batch: usize,
}

impl<T: Data, S: Source<T>> Source<T> for Flaky<S> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn is_bounded(&self) -> bool {
        true
    }
    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<T>>> {
        Ok(Box::new(FlakyReader {
            inner: self.inner.create_reader(ctx)?,
            read: Arc::clone(&self.read),
            fail_after: self.fail_after,
            checkpoints: self.checkpoints.clone(),
            pause: self.pause,
            batch: self.batch,
        }))
    }
    fn dead_letter_sink(&self) -> Option<Arc<dyn Sink<DeadLetter>>> {
        self.inner.dead_letter_sink()
    }
}

/// How many checkpoints under `dir` are complete (have their manifest).
fn completed(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("_manifest.json").exists())
        .count()
}

impl<T: Data> SourceReader<T> for FlakyReader<T> {
    fn poll(&mut self, out: &mut SourceOutput<'_, T>, max: usize) -> SpateResult<SourceStatus> {
        if !self.pause.is_zero() {
            std::thread::sleep(self.pause);
        }
        let checkpoints_done = || match &self.checkpoints {
            Some((dir, at_least)) => completed(dir) >= *at_least,
            None => true,
        };
        // Past the failure point, it waits for the checkpoints it needs (however slowly a
        // loaded machine completes them), then fails: the failure always comes.
        if self.read.load(Ordering::SeqCst) >= self.fail_after {
            if !checkpoints_done() {
                std::thread::sleep(Duration::from_millis(2));
                return Ok(SourceStatus::Idle);
            }
            return Err(SpateError::Job("injected failure".into()));
        }
        let before = out.len();
        let status = self.inner.poll(out, max.min(self.batch))?;
        let n = self
            .read
            .fetch_add((out.len() - before) as u64, Ordering::SeqCst);
        if n >= self.fail_after && checkpoints_done() {
            return Err(SpateError::Job("injected failure".into()));
        }
        Ok(status)
    }
    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        self.inner.snapshot()
    }
    fn restore(&mut self, positions: &[SplitPosition]) -> SpateResult<()> {
        self.inner.restore(positions)
    }
}

/// Event time from the value (one event per ms), then 1 s tumbling windows per key
/// `v % keys`: `(key, window start, count, sum)`.
pub(crate) fn counted_windows(
    numbers: DataStream<u64>,
    keys: u64,
) -> DataStream<(u64, i64, u64, u64)> {
    numbers
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(50))
                .with_timestamp_assigner(|v: &u64, _| *v as i64),
        )
        .key_by(move |v: &u64| v % keys)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .aggregate_with(
            Count,
            |k: &u64,
             w: &WindowContext<'_, TimeWindow>,
             (n, sum): (u64, u64),
             out: &mut Vec<(u64, i64, u64, u64)>| {
                out.push((*k, w.window.start, n, sum))
            },
        )
}

pub(crate) struct Count;

impl AggregateFunction<u64> for Count {
    type Acc = (u64, u64);
    type Out = (u64, u64);
    fn create_accumulator(&self) -> (u64, u64) {
        (0, 0)
    }
    fn add(&self, v: &u64, acc: &mut (u64, u64)) {
        acc.0 += 1;
        acc.1 += v;
    }
    fn get_result(&self, acc: &(u64, u64)) -> (u64, u64) {
        *acc
    }
    fn merge(&self, a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

/// Windows of 1 s of "event time" (one event per ms) per key `v % 7`: count and sum.
fn run(
    out: &Path,
    workers: usize,
    checkpoints: Option<(&Path, bool)>,
    fail_after: u64,
) -> SpateResult<JobResult> {
    run_with(out, workers, checkpoints, fail_after, StateBackend::Memory)
}

/// [`run`] with a state backend.
fn run_with(
    out: &Path,
    workers: usize,
    checkpoints: Option<(&Path, bool)>,
    fail_after: u64,
    backend: StateBackend,
) -> SpateResult<JobResult> {
    run_windows(out, checkpointed(workers, checkpoints, backend), fail_after)
}

/// A local job on `workers` with `backend`, checkpointing every 100 ms into the directory of
/// `checkpoints` (restoring its latest checkpoint when its flag is set).
fn checkpointed(
    workers: usize,
    checkpoints: Option<(&Path, bool)>,
    backend: StateBackend,
) -> JobConfig {
    let mut config = JobConfig::local(workers);
    config.state_backend = backend;
    if let Some((dir, restore)) = checkpoints {
        config.checkpoint_interval = Some(Duration::from_millis(100));
        config.checkpoint_dir = Some(dir.display().to_string());
        config.restore = restore.then(|| "latest".to_string());
    }
    config
}

/// The windowed job of [`run`] with any configuration; the source fails the job once
/// `fail_after` records have been read in total.
pub(crate) fn run_windows(
    out: &Path,
    config: JobConfig,
    fail_after: u64,
) -> SpateResult<JobResult> {
    // Paced so that several checkpoints complete before the failure.
    run_windows_paced(out, config, fail_after, 60_000.0, None)
}

/// [`run_windows`] with the source paced to `per_s` records per second, failing only once
/// `checkpoints` (a directory and a count) are complete too.
pub(crate) fn run_windows_paced(
    out: &Path,
    config: JobConfig,
    fail_after: u64,
    per_s: f64,
    checkpoints: Option<(PathBuf, usize)>,
) -> SpateResult<JobResult> {
    let env = StreamEnv::new(config);
    let source = Flaky::new(EVENTS, per_s, fail_after);
    let source = match checkpoints {
        Some((dir, n)) => source.after_checkpoints_in(Some(dir), n),
        None => source,
    };
    counted_windows(env.from_source(source), 7).write_jsonl(out);
    env.execute("checkpointed windows")
}

/// The rows of every visible part file, sorted.
pub(crate) fn rows(dir: &Path) -> Vec<String> {
    let mut rows: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .flat_map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}

fn recover(before: usize, after: usize) {
    recover_with(before, after, StateBackend::Memory, StateBackend::Memory);
}

/// The disk backend with a cache smaller than the keys and short chains of deltas, so that
/// state goes through the B-tree and restores read base + deltas.
fn small_disk() -> StateBackend {
    StateBackend::Disk {
        dir: None,
        cache_keys: 3,
        full_every: 2,
    }
}

/// [`recover`] with the state backend of the failing run and of the restored one.
fn recover_with(before: usize, after: usize, first: StateBackend, second: StateBackend) {
    let tmp = tempfile::tempdir().unwrap();
    let (expected_dir, out, ckpt) = (
        tmp.path().join("e"),
        tmp.path().join("o"),
        tmp.path().join("c"),
    );
    run(&expected_dir, 1, None, u64::MAX).unwrap();
    let expected = rows(&expected_dir);
    assert_eq!(expected.len(), 7 * 60, "7 keys × 60 windows");

    let failed = run_with(&out, before, Some((&ckpt, false)), EVENTS / 2, first);
    assert!(failed.is_err(), "the first run fails");
    let partial = rows(&out);
    assert!(partial.len() < expected.len());
    let result = run_with(&out, after, Some((&ckpt, true)), u64::MAX, second).unwrap();
    assert_eq!(
        rows(&out),
        expected,
        "{before} -> {after} workers: nothing lost, nothing twice"
    );
    assert!(
        result
            .metrics
            .get("checkpoints.numberOfCompletedCheckpoints")
            .copied()
            .unwrap_or(0)
            >= 1,
        "{:?}",
        result.metrics
    );
}

#[test]
fn a_failed_job_restored_from_its_checkpoint_writes_exactly_the_failure_free_output() {
    recover(2, 2);
}

#[test]
fn a_restore_on_another_number_of_workers_moves_whole_key_groups() {
    recover(2, 3);
    recover(3, 1);
}

#[test]
fn with_the_disk_backend_a_restored_job_writes_exactly_the_failure_free_output() {
    recover_with(2, 2, small_disk(), small_disk());
}

#[test]
fn with_the_disk_backend_a_restore_on_more_workers_moves_whole_key_groups() {
    recover_with(2, 3, small_disk(), small_disk());
}

#[test]
fn incremental_checkpoints_restore_into_the_memory_backend_and_back() {
    recover_with(2, 1, small_disk(), StateBackend::Memory);
    recover_with(1, 2, StateBackend::Memory, small_disk());
}

#[test]
fn a_job_restarts_in_place_after_a_failure_a_restart_can_cure() {
    // The source fails once with an outside error (not bad input): the job restarts from its
    // latest checkpoint by itself and ends with the failure-free output.
    let tmp = tempfile::tempdir().unwrap();
    let (expected_dir, out, ckpt) = (
        tmp.path().join("e"),
        tmp.path().join("o"),
        tmp.path().join("c"),
    );
    run(&expected_dir, 1, None, u64::MAX).unwrap();
    let mut config = JobConfig::local(2);
    config.checkpoint_interval = Some(Duration::from_millis(100));
    config.checkpoint_dir = Some(ckpt.display().to_string());
    config.restart_strategy = spate::dataflow::RestartStrategy::FixedDelay {
        attempts: 3,
        delay: Duration::from_millis(10),
    };
    let env = StreamEnv::new(config);
    let failed_once = Arc::new(AtomicU64::new(0));
    let flag = Arc::clone(&failed_once);
    let numbers = env
        .from_source(SequenceSource::new(0, Some(EVENTS)).rate(60_000.0))
        .map(move |v: u64| {
            // An outside failure, once, in the middle of the run.
            if v == EVENTS / 2 && flag.fetch_add(1, Ordering::SeqCst) == 0 {
                FAIL.store(true, Ordering::SeqCst);
            }
            v
        });
    counted_windows(numbers, 7).sink_to(FailingSink::new(&out));
    let result = env.execute("restarts in place").unwrap();
    assert_eq!(result.metrics.get("fullRestarts"), Some(&1));
    assert_eq!(rows(&out), rows(&expected_dir));
}

static FAIL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A file sink whose writer fails with an I/O error when `FAIL` is raised (once).
struct FailingSink(FileSink<(u64, i64, u64, u64)>);

impl FailingSink {
    fn new(dir: &Path) -> Self {
        FailingSink(FileSink::json_lines(dir))
    }
}

struct FailingWriter(Box<dyn spate::types::SinkWriter<(u64, i64, u64, u64)>>);

impl spate::types::Sink<(u64, i64, u64, u64)> for FailingSink {
    fn name(&self) -> String {
        self.0.name()
    }
    fn create_writer(
        &self,
        ctx: &spate::types::SinkContext,
    ) -> SpateResult<Box<dyn spate::types::SinkWriter<(u64, i64, u64, u64)>>> {
        Ok(Box::new(FailingWriter(self.0.create_writer(ctx)?)))
    }
}

impl spate::types::SinkWriter<(u64, i64, u64, u64)> for FailingWriter {
    fn write_batch(&mut self, records: &mut Vec<(u64, i64, u64, u64)>) -> SpateResult<()> {
        if FAIL.swap(false, Ordering::SeqCst) {
            return Err(SpateError::Execution("injected I/O failure".into()));
        }
        self.0.write_batch(records)
    }
    fn tick(&mut self, now: std::time::Instant) -> SpateResult<()> {
        if FAIL.swap(false, Ordering::SeqCst) {
            return Err(SpateError::Execution("injected I/O failure".into()));
        }
        self.0.tick(now)
    }
    fn close(&mut self) -> SpateResult<()> {
        self.0.close()
    }
    fn pre_commit(&mut self, c: u64) -> SpateResult<Vec<u8>> {
        self.0.pre_commit(c)
    }
    fn commit(&mut self, c: u64) -> SpateResult<()> {
        self.0.commit(c)
    }
    fn restore(&mut self, states: &[Vec<u8>]) -> SpateResult<()> {
        self.0.restore(states)
    }
    fn exactly_once(&self) -> bool {
        true
    }
}

/// Runs a rolling count per key over `0..N`; with `stop_after`, stops it then with a savepoint
/// into `savepoint`. Restores `restore` if given.
fn counting_run(
    workers: usize,
    out: &Path,
    ckpt: &Path,
    restore: Option<&Path>,
    savepoint: Option<&Path>,
    stop_after: Option<Duration>,
    backend: StateBackend,
) {
    let mut config = JobConfig::local(workers);
    config.state_backend = backend;
    config.checkpoint_interval = Some(Duration::from_millis(100));
    config.checkpoint_dir = Some(ckpt.display().to_string());
    config.restore = restore.map(|p| p.display().to_string());
    config.savepoint_dir = savepoint.map(|p| p.display().to_string());
    config.restart_strategy = spate::dataflow::RestartStrategy::None;
    let env = StreamEnv::new(config);
    env.from_source(SequenceSource::new(0, Some(COUNTED)).rate(40_000.0))
        .key_by(|v: &u64| v % 13)
        .count()
        .write_jsonl(out);
    let stopper = stop_after.map(|after| {
        let stop = env.stop_handle();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            stop.stop();
        })
    });
    env.execute("rolling counts").unwrap();
    if let Some(s) = stopper {
        s.join().unwrap();
    }
}

const COUNTED: u64 = 40_000;

#[test]
fn per_key_state_is_exact_after_rescaling_2_4_2_3_through_savepoints() {
    rescale_through_savepoints(StateBackend::Memory);
}

#[test]
fn with_the_disk_backend_per_key_state_is_exact_after_rescaling_through_savepoints() {
    rescale_through_savepoints(small_disk());
}

fn rescale_through_savepoints(backend: StateBackend) {
    let run = |workers, out: &Path, ckpt: &Path, restore, savepoint, stop_after| {
        counting_run(
            workers,
            out,
            ckpt,
            restore,
            savepoint,
            stop_after,
            backend.clone(),
        )
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let ckpt = tmp.path().join("ckpt");
    let sp: Vec<_> = (0..3)
        .map(|i| tmp.path().join(format!("savepoint-{i}")))
        .collect();
    run(
        2,
        &out,
        &ckpt,
        None,
        Some(&sp[0]),
        Some(Duration::from_millis(250)),
    );
    // A restored sequence reader first skips what earlier runs read (at the same rate), so
    // each later run gets longer to make progress of its own.
    let ms = |n| Some(Duration::from_millis(n));
    run(4, &out, &ckpt, Some(&sp[0]), Some(&sp[1]), ms(500));
    run(2, &out, &ckpt, Some(&sp[1]), Some(&sp[2]), ms(800));
    run(3, &out, &ckpt, Some(&sp[2]), None, None);
    // Every key's rolling count went 1, 2, ..., n exactly once across the four runs.
    let mut counts: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for row in rows(&out) {
        let (k, n): (u64, u64) = serde_json::from_str(&row).unwrap();
        counts.entry(k).or_default().push(n);
    }
    assert_eq!(counts.len(), 13);
    for (k, mut ns) in counts {
        ns.sort_unstable();
        let n = (COUNTED - k).div_ceil(13);
        let dups = ns.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(
            ns == (1..=n).collect::<Vec<_>>(),
            "key {k}: {} counts up to {:?} with {dups} repeated, want 1..={n}",
            ns.len(),
            ns.last()
        );
    }
}

/// Per key `v % 5000`: its count and sum over the whole input, from `full_window_partition`
/// (more keys per worker than the end-of-input pass takes in one step).
fn full_partition_run(
    out: &Path,
    workers: usize,
    checkpoints: Option<(&Path, bool)>,
    fail_after: u64,
    backend: StateBackend,
) -> SpateResult<JobResult> {
    let env = StreamEnv::new(checkpointed(workers, checkpoints, backend));
    let source = Flaky::new(EVENTS, 60_000.0, fail_after)
        .after_a_checkpoint_in(checkpoints.map(|(d, _)| d.to_path_buf()));
    env.from_source(source)
        .key_by(|v: &u64| v % 5000)
        .full_window_partition()
        .aggregate_with(
            Count,
            |k: &u64, (n, sum), out: &mut Vec<(u64, u64, u64)>| out.push((*k, n, sum)),
        )
        .write_jsonl(out);
    env.execute("full partition")
}

/// A full partition's accumulators are keyed state, emitted by a pass over the keys at the
/// end of the input: on either state backend, a failure-free run emits each key once, and a
/// job that fails half-way and is restored, on another number of workers and the other state
/// backend, emits exactly the failure-free result.
#[test]
fn a_full_window_partition_restored_after_a_failure_gives_the_failure_free_results() {
    let tmp = tempfile::tempdir().unwrap();
    let (expected_dir, out, ckpt) = (
        tmp.path().join("e"),
        tmp.path().join("o"),
        tmp.path().join("c"),
    );
    full_partition_run(&expected_dir, 1, None, u64::MAX, StateBackend::Memory).unwrap();
    let expected = rows(&expected_dir);
    assert_eq!(expected.len(), 5000, "every key once");
    let on_disk = tmp.path().join("d");
    full_partition_run(&on_disk, 2, None, u64::MAX, small_disk()).unwrap();
    assert_eq!(
        rows(&on_disk),
        expected,
        "the disk backend's keys at the end"
    );
    let failed = full_partition_run(&out, 2, Some((&ckpt, false)), EVENTS / 2, small_disk());
    assert!(failed.is_err(), "the first run fails");
    full_partition_run(&out, 3, Some((&ckpt, true)), u64::MAX, StateBackend::Memory).unwrap();
    assert_eq!(rows(&out), expected, "nothing lost, nothing twice");
}
