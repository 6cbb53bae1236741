//! Load shedding under overload, after Aurora (Tatbul et al., VLDB 2003).
//!
//! With [`OverloadPolicy::Shed`](crate::OverloadPolicy), a controller thread in each process
//! measures, once a second, every operator's cost per record `c` (busy time per record in)
//! and selectivity `s` (records out per record in) from the metric cells, and the rate `r`
//! and queue `q` of records at each place where records may be shed. Aurora's load model
//! ([`spate_elasticity::shedding`]) turns them into the load coefficient `L` of each place
//! (the processing time one record costs downstream of it), the stream load `S = Σ L·r`, the
//! queue load `Q = MELT_RATE · L · q` and the total `T = S + Q`. When `T > H · C` (headroom
//! `H`; capacity `C` = the process's worker threads less the time spent upstream of the
//! places), the plan drops the smallest fraction of records that brings the load back under
//! `H · C`, at the places where the load saved per record lost is greatest.
//!
//! **Places.** Records are shed where the job says with
//! [`DataStream::shed_by`](crate::DataStream::shed_by): a *semantic* drop that keeps the
//! records of highest utility (Aurora's value-based drops). A job without `shed_by` sheds at
//! its sources, at random, right after the source's records get their timestamps (so the
//! watermarks still account for every record read). Either way every record shed is counted
//! where it was shed (`numRecordsShed`) and in the job's shedding snapshot; nothing is lost
//! silently.
//!
//! **Queues.** The queue before a place is its sources' backlog (`pendingRecords`: records
//! due but not read) plus the records in flight to the place and from it to its consumers.
//! It melts at `MELT_RATE` (1 per second): a backlog left from a burst, or from a capacity
//! lower than the model's, raises the drop fraction until it is worked off, which keeps the
//! latency bounded.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spate_elasticity::shedding::{plan, OperatorLoad, ShedConfig};
use spate_metrics::{JobSnapshot, SheddingSnapshot};

use spate_types::Data;

use crate::controller::ControllerThread;
use crate::function::{FunctionResult, ProcessFunction, ProcessFunctionContext};
use crate::metrics::Cells;
use crate::process::OutputTag;
use crate::stream::DataStream;
use crate::view::Observer;

/// How often the controller recomputes the drop fractions.
const PERIOD: Duration = Duration::from_millis(500);

/// Aurora's MELT_RATE: the share of a queue's load worked off per second. 1.0 melts a
/// backlog within about a second (PRODUCT.md's example uses 0.1); a lower rate lets queues,
/// and so latency, grow further before the drops catch up.
const MELT_RATE: f64 = 1.0;

/// The drop fraction of every place, written by the controller, read by the places.
#[derive(Debug)]
pub(crate) struct ShedControl {
    /// Per plan node: the fraction (an `f64`'s bits) of its records to drop.
    fractions: Vec<AtomicU64>,
}

impl ShedControl {
    pub(crate) fn new(nodes: usize) -> Self {
        ShedControl {
            fractions: (0..nodes).map(|_| AtomicU64::new(0f64.to_bits())).collect(),
        }
    }

    /// The fraction node `node` drops now.
    #[inline]
    pub(crate) fn fraction(&self, node: usize) -> f64 {
        self.fractions
            .get(node)
            .map_or(0.0, |f| f64::from_bits(f.load(Ordering::Relaxed)))
    }

    fn set(&self, node: usize, fraction: f64) {
        if let Some(f) = self.fractions.get(node) {
            f.store(fraction.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
        }
    }
}

/// The places of a job: its `shed_by` operators, or else its sources.
pub(crate) fn places(plan: &crate::plan::Plan) -> Vec<usize> {
    let of = |f: &dyn Fn(&crate::plan::Node) -> bool| -> Vec<usize> {
        plan.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| f(n))
            .map(|(i, _)| i)
            .collect()
    };
    let semantic = of(&|n| n.op == SHED_BY);
    if !semantic.is_empty() {
        return semantic;
    }
    of(&|n| n.kind == crate::plan::NodeKind::Source)
}

/// The plan op of [`DataStream::shed_by`](crate::DataStream::shed_by).
pub(crate) const SHED_BY: &str = "shed_by";

impl<T: Data> DataStream<T> {
    /// On a source's stream: the records that load shedding drops at this source go to
    /// `sink` rather than nowhere (a job without [`DataStream::shed_by`] sheds at its
    /// sources, at random). They are still counted (`numRecordsShed`); the sink is part of
    /// the source's checkpoints (uid `<source uid>.shed`), so an exactly-once sink holds
    /// every record shed exactly once through failures.
    ///
    /// # Panics
    /// If this stream is not a source's.
    pub fn shed_to(self, sink: impl spate_types::Sink<T>) -> Self {
        let sink: Arc<dyn spate_types::Sink<T>> = Arc::new(sink);
        {
            let plan = self.plan.borrow();
            let node = &plan.nodes[self.node];
            let slot = node
                .source_shed
                .as_ref()
                .filter(|_| node.kind == crate::plan::NodeKind::Source)
                .unwrap_or_else(|| panic!("shed_to: `{}` is not a source", node.name));
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(sink));
        }
        self
    }

    /// [`DataStream::shed_by`], with every record it sheds emitted to the side output `tag`
    /// instead of dropped: read them with [`DataStream::side_output`] on the result. The
    /// records shed are still counted (`numRecordsShed`); the side output and what reads it
    /// are not part of the load that shedding saves, so keep them cheap (a file sink).
    ///
    /// A job that wants its random drops kept too uses a constant utility here, right after
    /// its source: among records of equal utility, which are dropped is random.
    ///
    /// ```
    /// use spate_dataflow::{DataStream, OutputTag};
    ///
    /// /// Keeps the dearest bids under overload; the others go to `shed`.
    /// fn dearest(bids: DataStream<u64>) -> (DataStream<u64>, DataStream<u64>) {
    ///     let shed = OutputTag::<u64>::new("shed-bids");
    ///     let kept = bids.shed_by_with_side_output(|price| *price as f64, &shed);
    ///     let dropped = kept.side_output(&shed);
    ///     (kept, dropped)
    /// }
    /// ```
    pub fn shed_by_with_side_output(
        &self,
        utility: impl Fn(&T) -> f64 + Send + Sync + 'static,
        tag: &OutputTag<T>,
    ) -> DataStream<T> {
        let utility: Arc<dyn Fn(&T) -> f64 + Send + Sync> = Arc::new(utility);
        let tag = tag.clone();
        self.process_node(SHED_BY, "forward", move |ctx, input, name| {
            let f = ShedToSide {
                control: ctx.shared().shedding.clone(),
                node: ctx.node,
                cells: ctx.cells(),
                dropper: spate_elasticity::shedding::UtilityDropper::new(
                    (ctx.index() as u64) << 32 | ctx.node as u64,
                ),
                utility: Arc::clone(&utility),
                tag: tag.clone(),
            };
            crate::function::build_process(ctx, input, f, name)
        })
    }
}

/// A semantic drop whose shed records go to a side output.
struct ShedToSide<T> {
    control: Option<Arc<ShedControl>>,
    node: usize,
    cells: Arc<Cells>,
    dropper: spate_elasticity::shedding::UtilityDropper,
    utility: Arc<dyn Fn(&T) -> f64 + Send + Sync>,
    tag: OutputTag<T>,
}

impl<T> Clone for ShedToSide<T> {
    fn clone(&self) -> Self {
        ShedToSide {
            control: self.control.clone(),
            node: self.node,
            cells: Arc::clone(&self.cells),
            dropper: self.dropper.clone(),
            utility: Arc::clone(&self.utility),
            tag: self.tag.clone(),
        }
    }
}

impl<T: Data> ProcessFunction<T, T> for ShedToSide<T> {
    fn process_element(
        &mut self,
        value: T,
        ctx: &mut ProcessFunctionContext<'_, T>,
    ) -> FunctionResult {
        let Some(control) = &self.control else {
            ctx.collect(value);
            return Ok(());
        };
        self.dropper.set_fraction(control.fraction(self.node));
        // Every record's utility feeds the threshold, shed or not.
        if self.dropper.keep((self.utility)(&value)) {
            ctx.collect(value);
        } else {
            crate::metrics::add(&self.cells.shed, 1);
            ctx.output(&self.tag, value);
        }
        Ok(())
    }
}

/// The load-shedding controller of one process, on a thread of its own.
pub(crate) struct Shedder;

impl Shedder {
    /// Starts controlling `control` for this process's `workers` threads, with headroom
    /// `headroom`; `shed_before` records were shed by earlier runs of the job.
    pub(crate) fn start(
        observer: Arc<Observer>,
        control: Arc<ShedControl>,
        places: Vec<usize>,
        workers: usize,
        headroom: f64,
    ) -> ControllerThread {
        ControllerThread::spawn("spate-shedder", move |stop| {
            run(observer, control, places, workers, headroom, stop)
        })
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    records_in: f64,
    records_out: f64,
    busy_ms: f64,
    shed: f64,
    pending: f64,
}

fn counts(snap: &JobSnapshot, index: usize) -> Counts {
    Counts {
        records_in: snap.sum_of(index, "numRecordsIn"),
        records_out: snap.sum_of(index, "numRecordsOut"),
        busy_ms: snap.sum_of(index, "accumulatedBusyTimeMs"),
        shed: snap.sum_of(index, "numRecordsShed"),
        pending: snap.sum_of(index, "pendingRecords"),
    }
}

/// The model of one control period: the operators' loads, each place's (rate, queue), the
/// capacity left for the operators downstream of the places.
pub(crate) struct Period {
    pub(crate) ops: Vec<OperatorLoad>,
    pub(crate) inputs: Vec<(usize, f64, f64)>,
    pub(crate) capacity: f64,
}

/// Measures a period from two snapshots of one run, for `workers` threads and headroom
/// `headroom`; `costs` keeps each operator's last measured cost and selectivity for operators
/// that saw no records in the period.
pub(crate) fn measure(
    before: &JobSnapshot,
    after: &JobSnapshot,
    places: &[usize],
    workers: usize,
    headroom: f64,
    costs: &mut BTreeMap<usize, (f64, f64)>,
) -> Option<Period> {
    let secs = (after.now - before.now) as f64 / 1000.0;
    if secs <= 0.0 || before.operators.len() != after.operators.len() {
        return None;
    }
    let n = after.operators.len();
    // A place's side output of shed records, and what reads it, get more to do the more is
    // shed: no part of the load that shedding saves.
    let shed_side = |op: &spate_metrics::OperatorInfo| {
        op.kind == "side" && op.inputs.iter().any(|e| places.contains(&e.from))
    };
    // Which operators are downstream of a place (their load is what shedding saves).
    let mut downstream = vec![false; n];
    for op in &after.operators {
        downstream[op.index] = !shed_side(op)
            && op
                .inputs
                .iter()
                .any(|e| places.contains(&e.from) || downstream[e.from]);
    }
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for op in after.operators.iter().filter(|op| !shed_side(op)) {
        for e in &op.inputs {
            consumers[e.from].push(op.index);
        }
    }
    let mut ops = Vec::with_capacity(n);
    let mut upstream_busy = 0.0;
    let mut downstream_busy = 0.0;
    for op in &after.operators {
        let (a, b) = (counts(after, op.index), counts(before, op.index));
        let d_in = a.records_in - b.records_in;
        let d_out = a.records_out - b.records_out;
        let d_busy = (a.busy_ms - b.busy_ms) / 1000.0;
        if d_in < 0.0 || d_out < 0.0 || d_busy < 0.0 {
            return None;
        }
        let place = places.contains(&op.index);
        if !downstream[op.index] {
            // Sources, places and what feeds them: their time is spent whatever is shed.
            upstream_busy += d_busy;
        } else {
            downstream_busy += d_busy;
        }
        let (cost, selectivity) = if place || op.kind == "source" {
            // A place's own cost is paid before it drops; its selectivity is the decision.
            (0.0, 1.0)
        } else if d_in > 0.0 {
            let measured = (d_busy / d_in, d_out / d_in);
            costs.insert(op.index, measured);
            measured
        } else {
            costs.get(&op.index).copied().unwrap_or((0.0, 1.0))
        };
        ops.push(OperatorLoad {
            index: op.index,
            name: op.name.clone(),
            cost,
            selectivity,
            outputs: consumers[op.index].clone(),
        });
    }
    // The sources upstream of each operator (their backlogs wait for it too).
    let mut sources_of: Vec<Vec<usize>> = vec![Vec::new(); n];
    for op in &after.operators {
        let mut s: Vec<usize> = if op.kind == "source" {
            vec![op.index]
        } else {
            op.inputs
                .iter()
                .flat_map(|e| sources_of[e.from].clone())
                .collect()
        };
        s.sort_unstable();
        s.dedup();
        sources_of[op.index] = s;
    }
    let capacity = (workers as f64 - upstream_busy / secs).max(0.0);
    // A queue is load for the operators downstream of the places only while they are what is
    // busy: a backlog that grows while they idle (every record shed, or the sources held back
    // by something else) would not melt however much more were shed. Counting it anyway would
    // latch the drops at 100 %: nothing reaches downstream, so nothing shows that the
    // capacity is there. So the queue counts in proportion to the downstream's use of the
    // capacity, in full once it uses its share `headroom · capacity`.
    let saturation = if capacity > 0.0 {
        (downstream_busy / secs / (headroom * capacity)).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let inputs = places
        .iter()
        .map(|&p| {
            let (a, b) = (counts(after, p), counts(before, p));
            let source = after.operators[p].kind == "source";
            let upstream = &sources_of[p];
            let backlog = |s: &JobSnapshot| -> f64 {
                upstream
                    .iter()
                    .map(|&u| counts(s, u).pending.max(0.0))
                    .sum()
            };
            // What reached the place, plus the growth of the backlogs before it (records
            // that would have arrived but for backpressure): a source's records read (sent
            // on or shed); an operator's records in.
            let grown = backlog(after) - backlog(before);
            let arrived = if source {
                (a.records_out - b.records_out) + (a.shed - b.shed) + grown
            } else {
                (a.records_in - b.records_in) + grown
            };
            // Queued before the place's consumers: the backlogs, what is in flight from the
            // sources to the place, and from the place to its consumers.
            let before_place = if source {
                0.0
            } else {
                let sent: f64 = upstream.iter().map(|&u| counts(after, u).records_out).sum();
                (sent - a.records_in).max(0.0)
            };
            let taken: f64 = consumers[p]
                .iter()
                .map(|&c| after.sum_of(c, "numRecordsIn"))
                .sum();
            let queued = backlog(after) + before_place + (a.records_out - taken).max(0.0);
            (p, (arrived / secs).max(0.0), queued * saturation)
        })
        .collect();
    Some(Period {
        ops,
        inputs,
        capacity,
    })
}

fn run(
    observer: Arc<Observer>,
    control: Arc<ShedControl>,
    places: Vec<usize>,
    workers: usize,
    headroom: f64,
    done: Arc<AtomicBool>,
) {
    let config = ShedConfig {
        headroom,
        melt_rate: MELT_RATE,
    };
    let shed_before = observer.elastic().shedding.as_ref().map_or(0, |s| s.shed);
    let mut costs = BTreeMap::new();
    let mut before: Option<JobSnapshot> = None;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(PERIOD);
        let snap = observer.job_snapshot();
        if snap.subtasks.is_empty() {
            continue;
        }
        let Some(prev) = before.replace(snap.clone()) else {
            continue;
        };
        let Some(period) = measure(&prev, &snap, &places, workers, headroom, &mut costs) else {
            continue;
        };
        let drop_plan = plan(&period.ops, &period.inputs, period.capacity, &config);
        let mut fractions: BTreeMap<usize, f64> = places.iter().map(|&p| (p, 0.0)).collect();
        for d in &drop_plan.drops {
            fractions.insert(d.input, d.fraction);
        }
        for (&p, &f) in &fractions {
            control.set(p, f);
        }
        let shed_now: f64 = snap
            .operators
            .iter()
            .map(|o| snap.sum_of(o.index, "numRecordsShed"))
            .sum();
        tracing::debug!(
            overloaded = drop_plan.overloaded,
            total = drop_plan.load.total,
            capacity = period.capacity,
            inputs = ?period.inputs,
            ?fractions,
            "load shedding"
        );
        observer.elastic().shedding = Some(SheddingSnapshot {
            headroom,
            capacity: period.capacity,
            stream_load: drop_plan.load.stream,
            queue_load: drop_plan.load.queue,
            total_load: drop_plan.load.total,
            overloaded: drop_plan.overloaded,
            fractions,
            shed: shed_before + shed_now as u64,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spate_metrics::{
        CheckpointsSnapshot, EdgeInfo, JobState, OperatorInfo, ShipStrategy, SubtaskSnapshot,
    };

    const COST: f64 = 250e-6;
    const CONFIG: ShedConfig = ShedConfig {
        headroom: 0.9,
        melt_rate: MELT_RATE,
    };

    /// A job `source → cost → count` on one worker at `now` ms, with per-operator metrics.
    fn snapshot(now: i64, metrics: [&[(&str, f64)]; 3]) -> JobSnapshot {
        let op = |index: usize, kind: &str| OperatorInfo {
            index,
            uid: format!("op{index}"),
            id: String::new(),
            name: format!("op{index}"),
            kind: kind.into(),
            chain: index,
            inputs: if index == 0 {
                Vec::new()
            } else {
                vec![EdgeInfo {
                    from: index - 1,
                    ship_strategy: ShipStrategy::Forward,
                }]
            },
            parallelism: 1,
        };
        JobSnapshot {
            job_id: String::new(),
            name: "shed".into(),
            state: JobState::Running,
            timestamps: BTreeMap::new(),
            start_time: 0,
            end_time: -1,
            now,
            max_parallelism: 128,
            parallelism: 1,
            operators: vec![op(0, "source"), op(1, "operator"), op(2, "operator")],
            subtasks: metrics
                .iter()
                .enumerate()
                .map(|(operator, m)| SubtaskSnapshot {
                    operator,
                    subtask: 0,
                    process: 0,
                    metrics: m.iter().map(|&(k, v)| (k.to_owned(), v)).collect(),
                    histograms: BTreeMap::new(),
                })
                .collect(),
            workers: Vec::new(),
            processes: Vec::new(),
            metrics: BTreeMap::new(),
            checkpoints: CheckpointsSnapshot::default(),
            exceptions: Vec::new(),
            savepoints_enabled: false,
            autoscaler: None,
            shedding: None,
        }
    }

    /// The drop fraction at the source for one second from `before` to `after`.
    fn fraction(before: &JobSnapshot, after: &JobSnapshot) -> f64 {
        let mut costs = BTreeMap::from([(1, (COST, 1.0)), (2, (1e-6, 0.01))]);
        let period = measure(before, after, &[0], 1, CONFIG.headroom, &mut costs).unwrap();
        let plan = plan(&period.ops, &period.inputs, period.capacity, &CONFIG);
        plan.drops.iter().map(|d| d.fraction).sum()
    }

    #[test]
    fn a_backlog_counts_while_the_downstream_is_busy() {
        // 6 000 records/s arrive, the costly operator takes 4 000 (its whole second) and the
        // backlog grows by the other 2 000: shed them, and melt the 2 000 queued as well.
        let before = snapshot(0, [&[], &[], &[]]);
        let after = snapshot(
            1000,
            [
                &[("numRecordsOut", 4000.0), ("pendingRecords", 2000.0)],
                &[
                    ("numRecordsIn", 4000.0),
                    ("numRecordsOut", 4000.0),
                    ("accumulatedBusyTimeMs", 1000.0),
                ],
                &[("numRecordsIn", 4000.0)],
            ],
        );
        let f = fraction(&before, &after);
        // Stream load 1.5 s/s, queue load 0.5, room 0.9: (2.0 − 0.9) / 1.5 of the records.
        assert!((f - 1.1 / 1.5).abs() < 0.01, "{f}");
    }

    #[test]
    fn a_backlog_that_grows_while_everything_is_shed_does_not_latch_the_drops() {
        // Every record read was shed and the downstream idled, yet the backlog grew (the
        // sources were held back by something else). Shedding all would show nothing new:
        // the fraction is the stream's alone, 1 − 0.9 / (6 000 · 250 µs) = 0.4.
        let before = snapshot(0, [&[("pendingRecords", 1000.0)], &[], &[]]);
        let after = snapshot(
            1000,
            [
                &[("numRecordsShed", 3000.0), ("pendingRecords", 4000.0)],
                &[],
                &[],
            ],
        );
        let f = fraction(&before, &after);
        assert!((f - 0.4).abs() < 0.01, "{f}");
    }
}
