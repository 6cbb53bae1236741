//! Per-process metrics: named counters, and the live cells of every operator instance.
//!
//! Two kinds:
//!
//! - [`Metrics`]: named counters shared by the workers of a process (`<operator>.<name>`),
//!   read at the end of a run into [`crate::JobResult::metrics`].
//! - [`Cells`]: one block of counters and gauges per operator instance (plan node × worker),
//!   and [`WorkerCells`] per worker, registered in a [`LiveMetrics`] and read by the sampler
//!   ([`crate::view`]) about once a second. Each cell has a single writer, the worker thread
//!   that runs the instance, which adds with a plain `load` + `store` (no locked instruction),
//!   once per batch or per activation, never per record.
//!
//! Names follow Flink's (`numRecordsIn`, `numRecordsOut`, `busyTimeMsPerSecond`, …), so that
//! dashboards and alerts map one to one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use spate_metrics::Histogram;

/// A registry of named counters.
#[derive(Debug, Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
}

impl Metrics {
    /// The counter called `name`, created at zero on first use.
    pub fn counter(&self, name: &str) -> Arc<AtomicU64> {
        let mut counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(counters.entry(name.to_owned()).or_default())
    }

    /// The current value of every counter.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        let counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        counters
            .iter()
            .map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed)))
            .collect()
    }
}

/// Adds `n` to a cell that only the calling thread writes: no locked instruction.
#[inline]
pub(crate) fn add(cell: &AtomicU64, n: u64) {
    cell.store(
        cell.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// "No watermark yet" in a watermark cell (Flink reports `i64::MIN`).
pub(crate) const NO_WATERMARK: i64 = i64::MIN;

/// The live metrics of one worker thread.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct WorkerCells {
    /// The worker's global index.
    pub(crate) index: usize,
    /// Nanoseconds in the node closures of this worker (the sum of its instances' busy time).
    pub(crate) busy_ns: AtomicU64,
    /// Nanoseconds in `step_or_park` not spent in a node closure: parked, spinning for work,
    /// and timely's own bookkeeping.
    pub(crate) idle_ns: AtomicU64,
    /// The length of the flow-control window now (epochs possibly incomplete downstream).
    pub(crate) epochs_in_flight: AtomicU64,
}

/// A user metric of an operator instance (see [`crate::function::MetricGroup`]).
#[derive(Clone)]
pub(crate) enum UserMetric {
    /// A counter.
    Counter(Arc<AtomicU64>),
    /// A gauge set by the function (an `f64` in its bits).
    Gauge(Arc<AtomicU64>),
    /// A gauge read when sampled.
    GaugeFn(Arc<dyn Fn() -> f64 + Send + Sync>),
    /// A histogram.
    Histogram(Arc<Mutex<Histogram>>),
}

impl std::fmt::Debug for UserMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UserMetric::Counter(_) => "Counter",
            UserMetric::Gauge(_) | UserMetric::GaugeFn(_) => "Gauge",
            UserMetric::Histogram(_) => "Histogram",
        })
    }
}

/// The live metrics of one operator instance (plan node × worker).
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Cells {
    /// The plan node.
    pub(crate) node: usize,
    /// The worker's global index.
    pub(crate) worker: Arc<WorkerCells>,
    pub(crate) records_in: AtomicU64,
    pub(crate) records_out: AtomicU64,
    /// Nanoseconds inside the node's closures.
    pub(crate) busy_ns: AtomicU64,
    /// Sources: nanoseconds during which the source had more to give but flow control held
    /// it back.
    pub(crate) backpressured_ns: AtomicU64,
    pub(crate) backpressured: AtomicBool,
    pub(crate) late_dropped: AtomicU64,
    /// Records dropped here by load shedding (see [`crate::shedding`]).
    pub(crate) shed: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) dead_lettered: AtomicU64,
    /// Sources: what is left to read, when the reader knows (`u64::MAX`: unknown).
    pub(crate) pending: AtomicU64,
    /// The combined watermark of the node's input(s), ms; [`NO_WATERMARK`] before the first.
    pub(crate) input_wm: AtomicI64,
    /// The watermark the node last sent on, ms.
    pub(crate) output_wm: AtomicI64,
    /// Epoch latency, µs: from an epoch's closing at this worker's sources until the node's
    /// input frontier passed it.
    pub(crate) latency: Mutex<Histogram>,
    /// User metrics by name.
    pub(crate) user: Mutex<BTreeMap<String, UserMetric>>,
    /// Records sent on each side output, by tag id.
    pub(crate) side_out: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
}

impl Cells {
    fn new(node: usize, worker: Arc<WorkerCells>) -> Self {
        Cells {
            node,
            worker,
            records_in: AtomicU64::new(0),
            records_out: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            backpressured_ns: AtomicU64::new(0),
            backpressured: AtomicBool::new(false),
            late_dropped: AtomicU64::new(0),
            shed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            dead_lettered: AtomicU64::new(0),
            pending: AtomicU64::new(u64::MAX),
            input_wm: AtomicI64::new(NO_WATERMARK),
            output_wm: AtomicI64::new(NO_WATERMARK),
            latency: Mutex::new(Histogram::new()),
            user: Mutex::new(BTreeMap::new()),
            side_out: Mutex::new(BTreeMap::new()),
        }
    }

    /// The count of records sent on side output `tag`.
    pub(crate) fn side_counter(&self, tag: &str) -> Arc<AtomicU64> {
        let mut sides = self.side_out.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(sides.entry(tag.to_owned()).or_default())
    }

    /// Cells that no reader sees (for internal operators, such as dead-letter sinks).
    pub(crate) fn detached() -> Arc<Self> {
        Arc::new(Cells::new(
            usize::MAX,
            Arc::new(WorkerCells {
                index: usize::MAX,
                busy_ns: AtomicU64::new(0),
                idle_ns: AtomicU64::new(0),
                epochs_in_flight: AtomicU64::new(0),
            }),
        ))
    }

    /// Counts `n` records in.
    #[inline]
    pub(crate) fn count_in(&self, n: usize) {
        add(&self.records_in, n as u64);
    }

    /// Counts `n` records out.
    #[inline]
    pub(crate) fn count_out(&self, n: usize) {
        add(&self.records_out, n as u64);
    }

    /// Starts timing an activation; the time is added when the guard drops.
    #[inline]
    pub(crate) fn busy(&self) -> Busy<'_> {
        Busy {
            cells: self,
            start: Instant::now(),
        }
    }

    /// Adds busy time measured elsewhere.
    #[inline]
    pub(crate) fn add_busy(&self, ns: u64) {
        add(&self.busy_ns, ns);
        add(&self.worker.busy_ns, ns);
    }

    /// Sets the input and output watermarks.
    #[inline]
    pub(crate) fn watermarks(&self, input: i64, output: i64) {
        self.input_wm.store(input, Ordering::Relaxed);
        self.output_wm.store(output, Ordering::Relaxed);
    }
}

/// Times one activation of a node's closure (see [`Cells::busy`]).
pub(crate) struct Busy<'a> {
    cells: &'a Cells,
    start: Instant,
}

impl Drop for Busy<'_> {
    #[inline]
    fn drop(&mut self) {
        self.cells.add_busy(self.start.elapsed().as_nanos() as u64);
    }
}

/// The cells of one run (attempt) of a job in this process: counters restart from zero when
/// the job restarts, as Flink's do.
#[derive(Debug, Default)]
pub(crate) struct LiveMetrics {
    instances: Mutex<Vec<Arc<Cells>>>,
    workers: Mutex<Vec<Arc<WorkerCells>>>,
}

impl LiveMetrics {
    /// The cells of worker `index`, made on first use.
    pub(crate) fn worker(&self, index: usize) -> Arc<WorkerCells> {
        let mut workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = workers.iter().find(|w| w.index == index) {
            return Arc::clone(w);
        }
        let w = Arc::new(WorkerCells {
            index,
            busy_ns: AtomicU64::new(0),
            idle_ns: AtomicU64::new(0),
            epochs_in_flight: AtomicU64::new(0),
        });
        workers.push(Arc::clone(&w));
        w
    }

    /// The cells of node `node` on worker `worker`, made on first use.
    pub(crate) fn instance(&self, node: usize, worker: usize) -> Arc<Cells> {
        let w = self.worker(worker);
        let mut instances = self.instances.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = instances
            .iter()
            .find(|c| c.node == node && c.worker.index == worker)
        {
            return Arc::clone(c);
        }
        let c = Arc::new(Cells::new(node, w));
        instances.push(Arc::clone(&c));
        c
    }

    /// Every instance's cells, by (node, worker).
    pub(crate) fn instances(&self) -> Vec<Arc<Cells>> {
        let mut all = self
            .instances
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        all.sort_by_key(|c| (c.node, c.worker.index));
        all
    }

    /// Every worker's cells, by index.
    pub(crate) fn workers(&self) -> Vec<Arc<WorkerCells>> {
        let mut all = self
            .workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        all.sort_by_key(|w| w.index);
        all
    }
}

/// When each epoch of one worker was closed at its sources, for epoch latency: a bounded
/// ring of `(epoch, instant)`, epochs increasing. Worker-local.
pub(crate) type Seals = std::rc::Rc<std::cell::RefCell<std::collections::VecDeque<(u64, Instant)>>>;

/// The seals a worker keeps.
pub(crate) const SEALS_KEPT: usize = 4096;

/// Records one latency sample per epoch that a node's input frontier has passed.
pub(crate) struct LatencyProbe {
    seals: Seals,
    cells: Arc<Cells>,
    /// Epochs below this are recorded.
    done: u64,
}

impl LatencyProbe {
    pub(crate) fn new(seals: Seals, cells: Arc<Cells>) -> Self {
        LatencyProbe {
            seals,
            cells,
            done: 0,
        }
    }

    /// Records the epochs that the frontier (its least element, or the end when empty) has
    /// passed since the last call.
    #[inline]
    pub(crate) fn observe(&mut self, frontier: &[u64]) {
        let f = frontier.iter().copied().min().unwrap_or(u64::MAX);
        if f <= self.done {
            return;
        }
        self.record(f);
    }

    fn record(&mut self, f: u64) {
        let seals = self.seals.borrow();
        let start = seals.partition_point(|(e, _)| *e < self.done);
        let now = Instant::now();
        let mut h = self.cells.latency.lock().unwrap_or_else(|p| p.into_inner());
        for (e, t) in seals.iter().skip(start) {
            if *e >= f {
                break;
            }
            h.record(now.saturating_duration_since(*t).as_micros() as u64);
        }
        self.done = f;
    }
}
