//! User functions with a lifecycle: failures of user code, fallible functions, non-keyed
//! process functions and rich functions.
//!
//! A user function that panics, or a fallible one that returns an error, fails the job with
//! the operator's name ([`SpateError::Function`]), as an exception thrown by a Flink user
//! function fails its task. The error's domain is [`spate_types::ErrorDomain::Function`],
//! which a restart may cure, so a checkpointed job goes through its restart strategy.
//!
//! Panics are caught with `catch_unwind` around each call of user code per batch (or per
//! record and timer in keyed operators), which costs nothing unless something panics; the
//! operator then stops calling the function and the worker loop stops the job. A last-resort
//! catch around each worker's whole run turns any other panic into a failure too, so that no
//! panic ends the process without a message. Rust's panic hook still prints the panic to
//! stderr, as it does for any panic.
//!
//! Fallible functions (`DataStream::try_map`, `try_filter`, `try_flat_map`, and every
//! function of this module) return a `Result` whose error displays; an `Err` fails the job in
//! the same way, with the error's message.
//!
//! Rich functions ([`ProcessFunction`], [`RichMapFunction`], [`RichFlatMapFunction`],
//! [`RichFilterFunction`]) have one instance per worker, cloned from the one given to the
//! API, so they may keep plain mutable fields. `open` runs on the instance's worker when the
//! job starts, before any record, with a [`RuntimeContext`]: the instance's index, the
//! parallelism, the operator's and the job's names, and a [`MetricGroup`] whose counters
//! show in [`crate::JobResult::metrics`] as `<operator>.<name>`. `close` runs once the
//! instance's input has ended (at the end of a bounded input, or after a clean stop), or,
//! as in Flink, when a failing job drops its instances (the failure's error stands then,
//! whatever `close` returns). Keyed process functions ([`crate::KeyedProcessFunction`],
//! [`crate::KeyedCoProcessFunction`]) have the same `open` and `close`, once per worker
//! instance, `open` after the instance's state is restored. Such a function's fields are not
//! checkpointed: state that must survive a restart belongs in keyed state or in
//! [`crate::CheckpointedFunction`].

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use spate_types::{Data, SpateError};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;

use crate::execute::{BuildCtx, JobShared};
use crate::metrics::Metrics;
use crate::plan::{Epoch, ErasedStream, Flow};
use crate::process::{Closing, OutputTag};
use crate::side::SideOuts;
use crate::stream::DataStream;
use crate::time::{Timestamp, WmMsg, WmTracker, NO_TIMESTAMP};

/// The message of a panic's payload (a `&str` or a `String`), on one line.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic whose payload is not a string".to_owned()
    };
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join("; ")
}

/// The job failure for a panic with `payload` in a function of `operator`.
pub(crate) fn panicked(operator: &str, payload: &(dyn Any + Send)) -> SpateError {
    SpateError::Function {
        operator: operator.to_owned(),
        panicked: true,
        message: panic_message(payload),
    }
}

/// Runs `f`, user code of `operator`; a panic fails the job and gives `None`.
pub(crate) fn guard<R>(shared: &JobShared, operator: &str, f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(payload) => {
            shared.fail(panicked(operator, payload.as_ref()));
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rich functions: a lifecycle per worker instance
// ---------------------------------------------------------------------------------------------

/// The error a fallible user function returns: any error (`?` converts `std::io::Error`,
/// [`SpateError`], `anyhow::Error`, a `String` or a `&str` with `.into()`). It fails the job
/// with the operator's name and the error's message, then the restart strategy applies.
pub type FunctionError = Box<dyn std::error::Error + Send + Sync>;

/// The result of a fallible user function.
pub type FunctionResult<T = ()> = Result<T, FunctionError>;

/// A counter of a user function, registered in the job's metrics as `<operator>.<name>`
/// (shared by the operator's instances in a process, so it shows their total) and in the
/// instance's snapshot as `<name>` (its own count).
#[derive(Debug, Clone)]
pub struct Counter {
    shared: Arc<AtomicU64>,
    instance: Option<Arc<AtomicU64>>,
}

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.inc_by(1);
    }

    /// Adds `n`.
    pub fn inc_by(&self, n: u64) {
        self.shared.fetch_add(n, Ordering::Relaxed);
        if let Some(i) = &self.instance {
            i.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The current count over the operator's instances in this process.
    pub fn count(&self) -> u64 {
        self.shared.load(Ordering::Relaxed)
    }
}

/// A gauge that a user function sets (Flink's settable gauge), shown in its instance's
/// snapshot under its name.
#[derive(Debug, Clone)]
pub struct Gauge(Arc<AtomicU64>);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }

    /// The value.
    pub fn value(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// A histogram of a user function (log buckets, ≤ 12.5 % error), shown in its instance's
/// snapshot with Flink's quantiles.
#[derive(Debug, Clone)]
pub struct MetricHistogram(Arc<std::sync::Mutex<spate_metrics::Histogram>>);

impl MetricHistogram {
    /// Records one value.
    pub fn update(&self, v: u64) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).record(v);
    }

    /// Values recorded so far.
    pub fn count(&self) -> u64 {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).count()
    }
}

/// The metrics of an operator, for its user functions (Flink's `MetricGroup`).
#[derive(Debug, Clone)]
pub struct MetricGroup {
    metrics: Arc<Metrics>,
    operator: String,
    cells: Option<Arc<crate::metrics::Cells>>,
}

impl MetricGroup {
    fn register(
        &self,
        name: &str,
        metric: crate::metrics::UserMetric,
    ) -> crate::metrics::UserMetric {
        match &self.cells {
            Some(c) => c
                .user
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(name.to_owned())
                .or_insert(metric)
                .clone(),
            None => metric,
        }
    }

    /// The counter `<operator>.<name>`, created at zero on first use; every instance of the
    /// operator in a process that asks for `name` gets the same counter.
    pub fn counter(&self, name: &str) -> Counter {
        use crate::metrics::UserMetric;
        let instance = match self.register(name, UserMetric::Counter(Default::default())) {
            UserMetric::Counter(c) => Some(c),
            _ => None,
        };
        Counter {
            shared: self.metrics.counter(&format!("{}.{name}", self.operator)),
            instance: instance.filter(|_| self.cells.is_some()),
        }
    }

    /// A gauge `name` that the function sets.
    pub fn settable_gauge(&self, name: &str) -> Gauge {
        use crate::metrics::UserMetric;
        match self.register(name, UserMetric::Gauge(Default::default())) {
            UserMetric::Gauge(g) => Gauge(g),
            _ => Gauge(Default::default()),
        }
    }

    /// A gauge `name` whose value `f` gives each time the metrics are read (from another
    /// thread: `f` must be cheap and must not block).
    pub fn gauge(&self, name: &str, f: impl Fn() -> f64 + Send + Sync + 'static) {
        self.register(name, crate::metrics::UserMetric::GaugeFn(Arc::new(f)));
    }

    /// A histogram `name`.
    pub fn histogram(&self, name: &str) -> MetricHistogram {
        use crate::metrics::UserMetric;
        match self.register(name, UserMetric::Histogram(Default::default())) {
            UserMetric::Histogram(h) => MetricHistogram(h),
            _ => MetricHistogram(Default::default()),
        }
    }
}

/// What a rich function's `open` sees of its operator instance (Flink's `RuntimeContext`).
#[derive(Debug, Clone)]
pub struct RuntimeContext {
    index: usize,
    parallelism: usize,
    operator: String,
    job: String,
    metrics: MetricGroup,
}

impl RuntimeContext {
    pub(crate) fn new(ctx: &BuildCtx<'_>, operator: &str) -> Self {
        RuntimeContext {
            index: ctx.index(),
            parallelism: ctx.peers(),
            operator: operator.to_owned(),
            job: ctx.job.clone(),
            metrics: MetricGroup {
                metrics: Arc::clone(&ctx.shared().metrics),
                operator: operator.to_owned(),
                cells: Some(ctx.cells()),
            },
        }
    }

    /// This instance's index among the operator's instances, `0..parallelism` (Flink's
    /// `getIndexOfThisSubtask`): the global worker index.
    pub fn index_of_this_subtask(&self) -> usize {
        self.index
    }

    /// The number of the operator's instances: the job's workers over all processes (Flink's
    /// `getNumberOfParallelSubtasks`).
    pub fn number_of_parallel_subtasks(&self) -> usize {
        self.parallelism
    }

    /// The operator's name.
    pub fn operator_name(&self) -> &str {
        &self.operator
    }

    /// The job's name, as given to `execute`.
    pub fn job_name(&self) -> &str {
        &self.job
    }

    /// The operator's metrics, for counters of its own.
    pub fn metrics(&self) -> &MetricGroup {
        &self.metrics
    }
}

/// What a [`ProcessFunction`] sees while it handles one record (Flink's
/// `ProcessFunction.Context` with its `Collector`).
pub struct ProcessFunctionContext<'a, O> {
    timestamp: Timestamp,
    watermark: Timestamp,
    out: &'a mut Vec<(Timestamp, O)>,
    sides: &'a mut SideOuts,
}

impl<O> ProcessFunctionContext<'_, O> {
    /// The record's event timestamp; [`crate::NO_TIMESTAMP`] when it has none.
    pub fn timestamp(&self) -> Timestamp {
        self.timestamp
    }

    /// The operator instance's current event-time watermark.
    pub fn current_watermark(&self) -> Timestamp {
        self.watermark
    }

    /// Emits `value` with the record's timestamp.
    pub fn collect(&mut self, value: O) {
        self.out.push((self.timestamp, value));
    }

    /// Emits `value` with timestamp `ts`.
    pub fn collect_with_timestamp(&mut self, value: O, ts: Timestamp) {
        self.out.push((ts, value));
    }

    /// Emits `value` to the side output `tag`, with the record's timestamp (read it with
    /// [`DataStream::side_output`] on the result; dropped when nothing reads it).
    pub fn output<X: Data>(&mut self, tag: &OutputTag<X>, value: X) {
        self.sides.push(tag.shared_id(), self.timestamp, value);
    }
}

/// A function over a non-keyed stream (Flink's `ProcessFunction`): one instance per worker,
/// cloned from the one given, with `open` before its first record and `close` after its
/// last. Timers need a keyed stream ([`crate::KeyedProcessFunction`]), as in Flink.
pub trait ProcessFunction<I, O>: Clone + Send + 'static {
    /// Prepares this instance; runs on its worker before any record.
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        let _ = ctx;
        Ok(())
    }

    /// Handles one record; an `Err` fails the job.
    fn process_element(
        &mut self,
        value: I,
        ctx: &mut ProcessFunctionContext<'_, O>,
    ) -> FunctionResult;

    /// Ends this instance once its input has ended (also after a clean stop), or when the job
    /// fails (then its outcome is ignored).
    fn close(&mut self) -> FunctionResult {
        Ok(())
    }
}

/// A map function with a lifecycle (Flink's `RichMapFunction`).
pub trait RichMapFunction<I, O>: Clone + Send + 'static {
    /// Prepares this instance; runs on its worker before any record.
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        let _ = ctx;
        Ok(())
    }

    /// Maps one record; an `Err` fails the job.
    fn map(&mut self, value: I) -> FunctionResult<O>;

    /// Ends this instance once its input has ended.
    fn close(&mut self) -> FunctionResult {
        Ok(())
    }
}

/// A flat-map function with a lifecycle (Flink's `RichFlatMapFunction`).
pub trait RichFlatMapFunction<I, O>: Clone + Send + 'static {
    /// Prepares this instance; runs on its worker before any record.
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        let _ = ctx;
        Ok(())
    }

    /// Appends the records for `value` to `out`; an `Err` fails the job.
    fn flat_map(&mut self, value: I, out: &mut Vec<O>) -> FunctionResult;

    /// Ends this instance once its input has ended.
    fn close(&mut self) -> FunctionResult {
        Ok(())
    }
}

/// A filter function with a lifecycle (Flink's `RichFilterFunction`).
pub trait RichFilterFunction<T>: Clone + Send + 'static {
    /// Prepares this instance; runs on its worker before any record.
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        let _ = ctx;
        Ok(())
    }

    /// Whether to keep `value`; an `Err` fails the job.
    fn filter(&mut self, value: &T) -> FunctionResult<bool>;

    /// Ends this instance once its input has ended.
    fn close(&mut self) -> FunctionResult {
        Ok(())
    }
}

#[derive(Clone)]
struct RichMap<F>(F);

impl<I, O, F: RichMapFunction<I, O>> ProcessFunction<I, O> for RichMap<F> {
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        self.0.open(ctx)
    }
    fn process_element(
        &mut self,
        value: I,
        ctx: &mut ProcessFunctionContext<'_, O>,
    ) -> FunctionResult {
        ctx.collect(self.0.map(value)?);
        Ok(())
    }
    fn close(&mut self) -> FunctionResult {
        self.0.close()
    }
}

#[derive(Clone)]
struct RichFlatMap<F, O>(F, Vec<O>);

impl<I, O: Clone + Send + 'static, F: RichFlatMapFunction<I, O>> ProcessFunction<I, O>
    for RichFlatMap<F, O>
{
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        self.0.open(ctx)
    }
    fn process_element(
        &mut self,
        value: I,
        ctx: &mut ProcessFunctionContext<'_, O>,
    ) -> FunctionResult {
        let result = self.0.flat_map(value, &mut self.1);
        for o in self.1.drain(..) {
            ctx.collect(o);
        }
        result
    }
    fn close(&mut self) -> FunctionResult {
        self.0.close()
    }
}

#[derive(Clone)]
struct RichFilter<F>(F);

impl<T, F: RichFilterFunction<T>> ProcessFunction<T, T> for RichFilter<F> {
    fn open(&mut self, ctx: &RuntimeContext) -> FunctionResult {
        self.0.open(ctx)
    }
    fn process_element(
        &mut self,
        value: T,
        ctx: &mut ProcessFunctionContext<'_, T>,
    ) -> FunctionResult {
        if self.0.filter(&value)? {
            ctx.collect(value);
        }
        Ok(())
    }
    fn close(&mut self) -> FunctionResult {
        self.0.close()
    }
}

impl<T: Data> DataStream<T> {
    /// Applies a process function to the non-keyed stream (Flink's `DataStream.process`):
    /// one clone of `f` per worker, opened before its first record and closed after its last,
    /// with side outputs and the current watermark but no timers.
    pub fn process<O: Data, F: ProcessFunction<T, O>>(&self, f: F) -> DataStream<O> {
        let f = Mutex::new(f);
        self.process_node("process", "forward", move |ctx, input, name| {
            let f = f.lock().unwrap_or_else(|p| p.into_inner()).clone();
            build_process(ctx, input, f, name)
        })
    }

    /// Applies a rich map function: one clone per worker, with `open` and `close`.
    pub fn map_rich<R: Data>(&self, f: impl RichMapFunction<T, R>) -> DataStream<R> {
        self.process(RichMap(f)).name_default("map_rich")
    }

    /// Applies a rich flat-map function: one clone per worker, with `open` and `close`.
    pub fn flat_map_rich<R: Data>(&self, f: impl RichFlatMapFunction<T, R>) -> DataStream<R> {
        self.process(RichFlatMap(f, Vec::new()))
            .name_default("flat_map_rich")
    }

    /// Applies a rich filter function: one clone per worker, with `open` and `close`.
    pub fn filter_rich(&self, f: impl RichFilterFunction<T>) -> DataStream<T> {
        self.process(RichFilter(f)).name_default("filter_rich")
    }
}

/// Fails the job with the error `e` of a function of `operator`.
fn fail_with(shared: &JobShared, operator: &str, e: &FunctionError) {
    shared.fail(SpateError::function(operator, e));
}

/// Builds the non-keyed process operator on one worker: records in, records out at their
/// epochs on the main output and on each side output the job reads (see [`crate::side`]);
/// the watermark passes through unchanged and is read (once the records before it have
/// arrived) for `current_watermark`. Returns the main output, with the side outputs.
pub(crate) fn build_process<'s, I: Data, O: Clone + 'static, F: ProcessFunction<I, O>>(
    ctx: &mut BuildCtx<'s>,
    input: Flow<'s, I>,
    f: F,
    name: &str,
) -> ErasedStream {
    let shared = Arc::clone(ctx.shared());
    let operator = name.to_owned();
    let runtime = RuntimeContext::new(ctx, name);
    let mut f = Closing::open(f, &shared, &operator, |f| f.open(&runtime), |f| f.close());
    let mut failed = !f.is_open();
    let cells = ctx.cells();
    let mut latency = ctx.latency_probe();
    let mut builder = OperatorBuilder::new(name.to_owned(), ctx.scope);
    let mut data_in = builder.new_input(input.data.clone(), Pipeline);
    let mut wm_in = builder.new_input(input.wm.clone(), Pipeline);
    let (main, data) = builder.new_output::<Vec<(Timestamp, O)>>();
    let mut main = OutputBuilder::<_, CapacityContainerBuilder<Vec<(Timestamp, O)>>>::from(main);
    let (mut sides, side_streams) =
        crate::side::new_outputs(&ctx.sides, &mut builder, &input.wm, &cells);
    builder.build(move |_capabilities| {
        let mut pending: Vec<(Epoch, WmMsg)> = Vec::new();
        let mut tracker = WmTracker::new(1);
        let mut watermark = NO_TIMESTAMP;
        let mut out: Vec<(Timestamp, O)> = Vec::new();
        let mut closed = false;
        move |frontiers| {
            let _busy = cells.busy();
            let data_frontier = &frontiers[0];
            latency.observe(&data_frontier.frontier());
            let mut main = main.activate();
            data_in.for_each(|cap, batch| {
                cells.count_in(batch.len());
                if failed {
                    batch.clear();
                    return;
                }
                let mut c = ProcessFunctionContext {
                    timestamp: NO_TIMESTAMP,
                    watermark,
                    out: &mut out,
                    sides: &mut sides,
                };
                let result = guard(&shared, &operator, || {
                    for (ts, x) in batch.drain(..) {
                        c.timestamp = ts;
                        f.f.process_element(x, &mut c)?;
                    }
                    Ok::<(), FunctionError>(())
                });
                match result {
                    Some(Ok(())) => {}
                    Some(Err(e)) => {
                        fail_with(&shared, &operator, &e);
                        failed = true;
                    }
                    None => failed = true,
                }
                if failed {
                    out.clear();
                    sides.clear();
                    batch.clear();
                } else {
                    if !out.is_empty() {
                        cells.count_out(out.len());
                        main.session(&cap).give_container(&mut out);
                        out.clear();
                    }
                    sides.flush(&cap);
                }
            });
            // Watermarks apply once every record before them has arrived.
            wm_in.for_each(|cap, batch| {
                let Some(&epoch) = cap.least() else { return };
                pending.extend(batch.drain(..).map(|m| (epoch, m)));
            });
            if !pending.is_empty() {
                pending.sort_by_key(|(e, _)| *e);
                let ready = pending
                    .iter()
                    .take_while(|(e, _)| !data_frontier.less_equal(e))
                    .count();
                for (_, msg) in pending.drain(..ready) {
                    if let Some(next) = tracker.update(&msg) {
                        if !next.idle {
                            watermark = watermark.max(next.wm);
                            cells.watermarks(watermark, watermark);
                        }
                    }
                }
            }
            if data_frontier.is_empty() && !closed {
                closed = true;
                // After a failure the instance closes when the job drops it.
                if !failed {
                    f.close();
                }
            }
        }
    });
    ErasedStream::new(Flow { data, wm: input.wm }).with_sides(side_streams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_message_is_one_line_from_str_or_string() {
        let p = catch_unwind(|| panic!("index out of bounds")).unwrap_err();
        assert_eq!(panic_message(p.as_ref()), "index out of bounds");
        let n = 3;
        let p = catch_unwind(|| panic!("bad {n}\n  left: 1\n right: 2")).unwrap_err();
        assert_eq!(panic_message(p.as_ref()), "bad 3; left: 1; right: 2");
        let p = catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
        assert_eq!(
            panic_message(p.as_ref()),
            "a panic whose payload is not a string"
        );
        let e = panicked("q3.join", p.as_ref());
        assert!(e.to_string().starts_with("operator q3.join panicked: "));
        assert_eq!(e.domain(), spate_types::ErrorDomain::Function);
        let e = SpateError::function("parse", "not a number");
        assert_eq!(e.to_string(), "operator parse failed: not a number");
    }
}
