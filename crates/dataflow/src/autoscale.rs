//! Automatic scaling: DS2 (or a simple threshold controller) over the job's own metrics.
//!
//! An autoscaler thread reads the job's snapshot once a second. Every policy window
//! ([`AutoscaleConfig::window`], 10 s by default) it turns the counters of the window into
//! each operator's rates ([`window_rates`]): records in and out, and *useful* time, which is
//! the busy time the metrics measure (the wall time inside the operator's closures). DS2
//! ([`spate_elasticity::ds2`]) derives from them the parallelism π every operator needs for
//! the sources' rates, and from those the worker count.
//!
//! **Why a worker count.** On timely every worker runs every operator, one after the other on
//! its thread, so the busy shares of all operators add up on each worker: the count applied
//! is ⌈Σ π*⌉ over the operators (DS2's optimal parallelisms before rounding up; the
//! [`WorkerRule::Sum`](spate_elasticity::ds2::WorkerRule) rule), the per-operator π are
//! reported beside it. Processes stay as configured: a multi-process job gets
//! ⌈workers / processes⌉ threads in each.
//!
//! **Applying a decision.** The job stops with a final checkpoint (as a stop without drain
//! does: no final watermark, so no window fires early; exactly-once sinks commit) and runs
//! again from it on the new count, where key groups and source splits are spread over the
//! new workers. Nothing is lost or duplicated: it is the path of a restore on another worker
//! count. In a supervised job (the `spate` CLI, or several processes) the supervisor decides
//! and restarts its processes; an embedded job restarts its runs in place.
//!
//! **Sources.** DS2 needs the rate the outside offers, not the rate a backpressured source
//! reads at: a source's external rate is its output rate plus the growth of its backlog
//! (`pendingRecords`), and the backlog itself adds `backlog / catch_up_secs`, so that a job
//! that fell behind scales up to catch up. A source that reports no backlog counts its
//! output rate only.
//!
//! Every decision is logged with its inputs, kept in the job's snapshot (the REST API's
//! `/v1/jobs/{jid}/autoscaler` and the dashboard) and counted (`numScalingDecisions`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spate_elasticity::ds2::{Decision, Ds2Manager, OperatorEstimate, OperatorRates, SourceRate};
use spate_metrics::{
    AutoscalerSnapshot, JobSnapshot, JobState, OperatorParallelism, ScalingDecisionRecord,
};

use crate::config::{AutoscaleConfig, ScalingPolicy};
use crate::controller::ControllerThread;
use crate::view::Observer;

/// Decisions kept in the snapshot.
const HISTORY: usize = 64;

/// The counters of one operator, summed over its instances.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    records_in: f64,
    records_out: f64,
    busy_ms: f64,
    pending: f64,
}

fn counters(snap: &JobSnapshot, index: usize) -> Counters {
    Counters {
        records_in: snap.sum_of(index, "numRecordsIn"),
        records_out: snap.sum_of(index, "numRecordsOut"),
        busy_ms: snap.sum_of(index, "accumulatedBusyTimeMs"),
        pending: snap.sum_of(index, "pendingRecords"),
    }
}

/// The rates of every operator over the window from `before` to `after`, in DS2's terms;
/// `None` when the two snapshots are not of one run (a counter went back) or the window is
/// empty.
pub fn window_rates(before: &JobSnapshot, after: &JobSnapshot) -> Option<Vec<OperatorRates>> {
    let secs = (after.now - before.now) as f64 / 1000.0;
    if secs <= 0.0 || before.operators.len() != after.operators.len() {
        return None;
    }
    let mut rates = Vec::with_capacity(after.operators.len());
    for op in &after.operators {
        let (a, b) = (counters(after, op.index), counters(before, op.index));
        let d_in = a.records_in - b.records_in;
        let d_out = a.records_out - b.records_out;
        let d_busy = a.busy_ms - b.busy_ms;
        if d_in < 0.0 || d_out < 0.0 || d_busy < 0.0 {
            return None;
        }
        // An operator with no closure of its own (a union, a side output) has no busy
        // time: a microsecond stands for it, so it needs no worker time.
        let busy_s = (d_busy / 1000.0).max(1e-6);
        let source = op.kind == "source";
        let processed = if source { d_out } else { d_in };
        // DS2's Σλp is the sum of the instances' rates: the rate per second of busy time of
        // all instances together, times their number.
        let p = op.parallelism.max(1);
        rates.push(OperatorRates {
            index: op.index,
            name: op.name.clone(),
            inputs: op.inputs.iter().map(|e| e.from).collect(),
            parallelism: p,
            true_processing_rate: processed / busy_s * p as f64,
            true_output_rate: d_out / busy_s * p as f64,
            source: source.then(|| SourceRate {
                external_rate: ((d_out + (a.pending - b.pending)) / secs).max(0.0),
                backlog: a.pending.max(0.0),
            }),
        });
    }
    Some(rates)
}

/// The threshold controller DS2 is compared with (as Dhalion-like rules scale): one worker
/// more when the workers' average busy share exceeds `high`, one fewer below `low`.
#[derive(Debug)]
struct Threshold {
    high: f64,
    low: f64,
    workers: usize,
    min: usize,
    max: usize,
    warm_up: u32,
    skip: u32,
}

impl Threshold {
    fn observe(&mut self, busy_share: f64) -> Option<(usize, String)> {
        if self.skip > 0 {
            self.skip -= 1;
            return None;
        }
        let to = if busy_share > self.high {
            self.workers + 1
        } else if busy_share < self.low {
            self.workers.saturating_sub(1)
        } else {
            self.workers
        }
        .clamp(self.min, self.max);
        (to != self.workers).then(|| {
            (
                to,
                format!(
                    "workers {:.0}% busy ({} {:.0}%)",
                    busy_share * 100.0,
                    if to > self.workers { "above" } else { "below" },
                    if to > self.workers {
                        self.high
                    } else {
                        self.low
                    } * 100.0
                ),
            )
        })
    }

    fn applied(&mut self, workers: usize) {
        self.workers = workers;
        self.skip = self.warm_up;
    }
}

/// The average busy share of the workers over the window (from the worker metrics).
fn busy_share(before: &JobSnapshot, after: &JobSnapshot) -> Option<f64> {
    let secs = (after.now - before.now) as f64 / 1000.0;
    let total = |s: &JobSnapshot| -> f64 {
        s.operators
            .iter()
            .map(|op| s.sum_of(op.index, "accumulatedBusyTimeMs"))
            .sum()
    };
    let busy = (total(after) - total(before)) / 1000.0;
    (secs > 0.0 && busy >= 0.0).then(|| busy / secs / after.parallelism.max(1) as f64)
}

enum Policy {
    Ds2(Ds2Manager),
    Threshold(Threshold),
}

/// What an autoscaler needs from its job: snapshots, and a way to ask for a rescale.
pub(crate) trait Scaled: Send + Sync + 'static {
    /// The job's snapshot now.
    fn snapshot(&self) -> JobSnapshot;
    /// The job's observer, where decisions are reported and rescales asked for.
    fn observer(&self) -> &Observer;
}

/// An embedded job: its own observer (the run's stop flag is the observer's).
pub(crate) struct InProcess(pub(crate) Arc<Observer>);

impl Scaled for InProcess {
    fn snapshot(&self) -> JobSnapshot {
        self.0.job_snapshot()
    }

    fn observer(&self) -> &Observer {
        &self.0
    }
}

/// A supervised job: the supervisor's merged view of its processes (the supervisor polls
/// [`Observer::rescale_pending`] and stops its processes).
pub(crate) struct Supervised {
    pub(crate) view: Arc<dyn spate_metrics::JobView>,
    pub(crate) observer: Arc<Observer>,
}

impl Scaled for Supervised {
    fn snapshot(&self) -> JobSnapshot {
        self.view.snapshot()
    }

    fn observer(&self) -> &Observer {
        &self.observer
    }
}

/// The autoscaler of a running job, on a thread of its own.
pub(crate) struct Autoscaler;

impl Autoscaler {
    /// Starts scaling a job that runs on `workers` threads in each of `processes` processes.
    pub(crate) fn start(
        config: AutoscaleConfig,
        workers: usize,
        processes: usize,
        job: Arc<dyn Scaled>,
    ) -> ControllerThread {
        let processes = processes.max(1);
        let total = workers * processes;
        let policy_name = match config.policy {
            ScalingPolicy::Ds2 => "ds2",
            ScalingPolicy::Threshold { .. } => "threshold",
        };
        job.observer().elastic().autoscaler = Some(AutoscalerSnapshot {
            policy: policy_name.into(),
            workers: total,
            processes,
            min_workers: config.ds2.min_workers,
            max_workers: config.ds2.max_workers,
            window_ms: config.window.as_millis() as u64,
            ..Default::default()
        });
        ControllerThread::spawn("spate-autoscaler", move |stop| {
            run(config, total, processes, job, stop)
        })
    }
}

fn run(
    config: AutoscaleConfig,
    mut total: usize,
    mut processes: usize,
    job: Arc<dyn Scaled>,
    done: Arc<AtomicBool>,
) {
    let mut policy = match config.policy {
        ScalingPolicy::Ds2 => Policy::Ds2(Ds2Manager::new(config.ds2.clone(), total)),
        ScalingPolicy::Threshold { high, low } => Policy::Threshold(Threshold {
            high,
            low,
            workers: total,
            min: config.ds2.min_workers,
            max: config.ds2.max_workers,
            warm_up: config.ds2.warm_up_windows,
            skip: config.ds2.warm_up_windows,
        }),
    };
    let mut baseline: Option<(Instant, JobSnapshot)> = None;
    let mut windows = 0u64;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        let observer = job.observer();
        if observer.rescale_pending() {
            // Waiting for the job to run on the new count.
            baseline = None;
            continue;
        }
        let snap = job.snapshot();
        // A run on another count than the one decided has not begun yet.
        let running = snap.state == JobState::Running
            && snap.parallelism == total
            && !snap.subtasks.is_empty();
        if !running {
            baseline = None;
            continue;
        }
        let Some((at, before)) = &baseline else {
            baseline = Some((Instant::now(), snap));
            continue;
        };
        if at.elapsed() < config.window {
            continue;
        }
        let before = before.clone();
        baseline = Some((Instant::now(), snap.clone()));
        windows += 1;
        let decided: Option<(usize, String, Vec<OperatorParallelism>)> = match &mut policy {
            Policy::Ds2(manager) => {
                let Some(rates) = window_rates(&before, &snap) else {
                    continue;
                };
                match manager.observe(&rates) {
                    Ok(decision) => {
                        let estimate = manager
                            .last_estimate()
                            .map(|e| report(e, &rates))
                            .unwrap_or_default();
                        let estimate_workers = manager
                            .last_estimate()
                            .map_or(total, |e| spate_elasticity::ds2::workers(e, &config.ds2));
                        if let Some(a) = observer.elastic().autoscaler.as_mut() {
                            a.windows = windows;
                            a.estimate = estimate.clone();
                            a.estimate_workers = estimate_workers;
                        }
                        tracing::debug!(
                            window = windows,
                            estimate_workers,
                            ?estimate,
                            "DS2 window"
                        );
                        decision.map(|d: Decision| {
                            (d.to_workers, d.reason, report(&d.operators, &rates))
                        })
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "DS2 cannot estimate this window");
                        None
                    }
                }
            }
            Policy::Threshold(t) => {
                let share = busy_share(&before, &snap).unwrap_or(0.0);
                if let Some(a) = observer.elastic().autoscaler.as_mut() {
                    a.windows = windows;
                }
                t.observe(share).map(|(to, why)| (to, why, Vec::new()))
            }
        };
        let Some((to, reason, operators)) = decided else {
            continue;
        };
        let (to_processes, per_process) = config.layout(to, processes);
        let applied_total = per_process * to_processes;
        tracing::info!(
            from = total,
            to = applied_total,
            from_processes = processes,
            to_processes,
            window = windows,
            %reason,
            operators = ?operators,
            "autoscaler: rescaling"
        );
        let rescale = crate::view::Rescale {
            processes: to_processes,
            workers: per_process,
        };
        if !observer.request_rescale(rescale) {
            continue;
        }
        if let Some(a) = observer.elastic().autoscaler.as_mut() {
            a.num_decisions += 1;
            a.decisions.push(ScalingDecisionRecord {
                timestamp: snap.now,
                window: windows,
                from_workers: total,
                to_workers: applied_total,
                from_processes: processes,
                to_processes,
                reason,
                operators,
            });
            if a.decisions.len() > HISTORY {
                a.decisions.remove(0);
            }
        }
        total = applied_total;
        processes = to_processes;
        match &mut policy {
            Policy::Ds2(m) => m.applied(total),
            Policy::Threshold(t) => t.applied(total),
        }
        baseline = None;
    }
}

/// The estimate as the snapshot shows it, with the measured rates beside it.
fn report(estimates: &[OperatorEstimate], rates: &[OperatorRates]) -> Vec<OperatorParallelism> {
    estimates
        .iter()
        .map(|e| {
            let r = rates.iter().find(|r| r.index == e.index);
            OperatorParallelism {
                operator: e.index,
                name: e.name.clone(),
                target_input_rate: e.target_input_rate,
                true_processing_rate: r.map_or(0.0, |r| r.true_processing_rate),
                true_output_rate: r.map_or(0.0, |r| r.true_output_rate),
                optimal: e.optimal,
                parallelism: e.parallelism,
            }
        })
        .collect()
}
