//! The DS2 autoscaler (Kalavri et al., "Three steps is all you need: fast, accurate,
//! automatic scaling decisions for distributed streaming dataflows", OSDI 2018).
//!
//! # Rates from useful time
//!
//! Observed rates (records per second of wall-clock time) say how much an operator *did*, not
//! how much it *could* do: an operator that waits half the window for input looks half as fast
//! as it is. DS2 measures each instance's *useful time* W_u, the time it spent deserializing,
//! processing and serializing (not waiting for input or for output buffers), and divides by
//! it:
//!
//! * true processing rate λp = records in / W_u,
//! * true output rate λo = records out / W_u.
//!
//! [`OperatorRates`] carries those summed over an operator's instances (Σλp, Σλo), with its
//! current parallelism p, so Σλp / p is what one instance can process per second of busy time.
//!
//! # One pass over the graph
//!
//! [`estimate`] visits operators in topological order. An operator's *target input rate* is
//! the sum of the estimated output rates of its upstream operators; a source's is the rate
//! the outside world offers plus its backlog spread over [`Ds2Config::catch_up_secs`] (so a
//! job that fell behind, or that restarts after a failure, gets the spare capacity to catch
//! up). Then
//!
//! ```text
//!   π* = target / (Σλp / p) × (1 + factor)        π = max(1, ceil(π*))
//!   estimated output = target × Σλo / Σλp          (= Σλo × π*/p when factor = 0)
//! ```
//!
//! The estimated output is what the operator will emit once it keeps up with its target, and
//! it is the next operators' input: so one pass sizes the whole graph at once, which is why
//! DS2 converges in one to three steps where queue-based controllers (Dhalion) take many. The
//! headroom factor is kept out of the propagated output on purpose: it buys spare instances,
//! it does not create records, and compounding it along a chain of n operators would ask the
//! last one for (1 + factor)ⁿ times its real input.
//!
//! Edge cases, chosen so that an idle operator never pins or inflates the worker count:
//!
//! * A **source** emits what it reads, so its estimated output is its target rate. If it has
//!   measured useful time (Σλp > 0) it is sized like any operator; with Σλp = 0 it costs
//!   nothing measurable, and π* = 0 (π is still 1).
//! * An operator with **Σλp = 0 and target 0** saw no input and is offered none: π* = 0, π = 1,
//!   estimated output 0.
//! * An operator with **Σλp = 0 but a target > 0** is offered input but measured none (in
//!   practice the first window after a start or a rescale, before records reach it): its cost
//!   is unknown, so it keeps what it has (π* = p) and passes its target through as its output
//!   (selectivity 1 assumed). Such an estimate is not a measurement, and [`Ds2Manager`] does not
//!   act on a window that has one.
//!
//! # From operator parallelism to a worker count
//!
//! DS2 sizes each operator separately; Spate runs on timely, where every worker thread runs
//! every operator, so what can change is the number of workers. [`WorkerRule`] says how the
//! per-operator numbers become one:
//!
//! * [`WorkerRule::Max`]: the largest π. Right when each operator's instances are their own
//!   threads (as in Flink or Heron), so an operator with π instances needs π threads and the
//!   others fit beside it.
//! * [`WorkerRule::Sum`] (the default, and the one that matches timely): each worker thread
//!   runs every operator one after the other, so the busy time of all operators adds up on the
//!   same thread. π* is then the worker-seconds per second an operator needs (its target over
//!   the rate of one instance), and the job needs ceil(Σ π*) threads. A tiny epsilon (1e-9) is
//!   taken off before the ceiling so that float noise on an exact integer does not buy a
//!   worker.
//!
//! # The manager loop
//!
//! [`Ds2Manager`] is fed one window at a time. After it starts and after every applied change
//! it ignores [`Ds2Config::warm_up_windows`] windows (rates right after a rescale describe
//! neither the old nor the new configuration). Then it acts only if the derived worker count is
//! above the current one, or below it by more than one: scaling up is never delayed, and a
//! one-worker surplus is tolerated so that a rate that sits near an integer boundary does not
//! flap between two counts.
//!
//! PRODUCT.md states the rule per operator ("some operator has new > old, or new < old − 1").
//! Every operator's parallelism is the worker count w here, and the only configuration that
//! can be applied gives every operator the same derived count w'. Comparing each operator's
//! new parallelism (w') with its old one (w) is therefore the same comparison for every
//! operator, and "some operator" becomes w' > w or w' < w − 1. (Comparing an operator's own π
//! with w instead would fire on changes that cannot be made: one operator needing fewer
//! instances while another still needs w.)

use serde::{Deserialize, Serialize};

/// One operator's measurements over one policy window, summed over its instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorRates {
    /// Position in the slice passed to [`estimate`] (topological order: inputs come first).
    pub index: usize,
    /// The operator's stable name, for reasons and logs.
    pub name: String,
    /// Indices of upstream operators (empty for sources).
    pub inputs: Vec<usize>,
    /// Current number of instances p.
    pub parallelism: usize,
    /// Σλp over instances: records in per second of busy (useful) time, summed.
    pub true_processing_rate: f64,
    /// Σλo over instances: records out per second of busy time, summed.
    pub true_output_rate: f64,
    /// `Some` for sources.
    pub source: Option<SourceRate>,
}

/// What the outside world offers a source.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SourceRate {
    /// Records per second the outside world offers: the observed output rate plus the growth
    /// of the backlog over the window.
    pub external_rate: f64,
    /// Records waiting at the source (source lag) at the end of the window.
    pub backlog: f64,
}

/// DS2's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ds2Config {
    /// Headroom: π = ceil(target / (Σλp/p) × (1 + factor)). Default 0.0.
    pub factor: f64,
    /// Backlog term: a source's target rate = external_rate + backlog / catch_up_secs.
    /// Default 30.0; `f64::INFINITY` ignores the backlog.
    pub catch_up_secs: f64,
    /// Windows ignored after the start and after each applied change. Default 2.
    pub warm_up_windows: u32,
    /// The fewest workers [`workers`] returns (at least 1 in any case). Default 1.
    pub min_workers: usize,
    /// The most workers [`workers`] returns; wins over `min_workers`. Default 64.
    pub max_workers: usize,
    /// How per-operator parallelism becomes a worker count. Default [`WorkerRule::Sum`].
    pub rule: WorkerRule,
}

impl Default for Ds2Config {
    fn default() -> Self {
        Ds2Config {
            factor: 0.0,
            catch_up_secs: 30.0,
            warm_up_windows: 2,
            min_workers: 1,
            max_workers: 64,
            rule: WorkerRule::Sum,
        }
    }
}

/// How the per-operator parallelism of an estimate becomes one worker count (see the module
/// docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum WorkerRule {
    /// The maximum over operators of π: operators whose instances are threads of their own.
    Max,
    /// ceil(Σ π* − 1e-9): every worker thread runs every operator (timely), so the busy shares
    /// of all operators add up on one thread.
    #[default]
    Sum,
}

/// DS2's estimate for one operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorEstimate {
    /// The operator's position, as in [`OperatorRates::index`].
    pub index: usize,
    /// The operator's name.
    pub name: String,
    /// Records per second the operator will be offered: the sum of its upstream operators'
    /// estimated outputs, or for a source its external rate plus the backlog term.
    pub target_input_rate: f64,
    /// π*, the parallelism before the ceiling (headroom factor included).
    pub optimal: f64,
    /// π = ceil(π*), at least 1.
    pub parallelism: usize,
    /// Records per second the operator will emit at its target: target × Σλo/Σλp (a source's
    /// is its target rate: a source emits what it reads).
    pub estimated_output_rate: f64,
}

/// Why a window's rates cannot be estimated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Ds2Error {
    /// An operator's `index` is not its position in the slice.
    #[error("operator `{name}` at position {position} says index {index}; pass operators in topological order with index = position")]
    IndexMismatch {
        /// The operator.
        name: String,
        /// Its position in the slice.
        position: usize,
        /// The index it carries.
        index: usize,
    },
    /// An input index that does not come earlier in the slice.
    #[error("operator `{name}` (index {index}) reads from index {input}, which is not an earlier operator; pass operators in topological order")]
    InputNotEarlier {
        /// The operator.
        name: String,
        /// Its index.
        index: usize,
        /// The offending input index.
        input: usize,
    },
    /// Parallelism 0.
    #[error(
        "operator `{name}` (index {index}) has parallelism 0; report the instances it runs on"
    )]
    ZeroParallelism {
        /// The operator.
        name: String,
        /// Its index.
        index: usize,
    },
    /// An operator that is not a source and has no inputs: nothing would offer it records.
    #[error("operator `{name}` (index {index}) has no inputs and no source rate; give a source its `SourceRate`")]
    NoInputs {
        /// The operator.
        name: String,
        /// Its index.
        index: usize,
    },
    /// A source with inputs: a source's target is its external rate alone.
    #[error("source `{name}` (index {index}) has inputs; a source's rate comes from outside only")]
    SourceWithInputs {
        /// The operator.
        name: String,
        /// Its index.
        index: usize,
    },
    /// A rate that is NaN, infinite or negative.
    #[error("operator `{name}` (index {index}) has {field} = {value}; rates must be finite and not negative")]
    InvalidRate {
        /// The operator.
        name: String,
        /// Its index.
        index: usize,
        /// Which measurement.
        field: &'static str,
        /// Its value.
        value: f64,
    },
    /// A setting out of range.
    #[error("DS2 setting {field} = {value} is out of range: {expected}")]
    InvalidConfig {
        /// Which setting.
        field: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        expected: &'static str,
    },
}

/// Taken off Σπ* before the ceiling of [`WorkerRule::Sum`], so float noise on an exact
/// integer does not buy a worker.
const SUM_EPSILON: f64 = 1e-9;

/// DS2's estimate for one window: visits operators in order; the target input rate is the sum
/// of the upstream estimated outputs (sources: external_rate + backlog / catch_up_secs).
///
/// An operator with Σλp = 0 (no busy time in the window): π* = 0 if its target is 0 as well;
/// otherwise it keeps its current parallelism (π* = p) and passes its target through as its
/// output. A source with Σλp > 0 is sized like any operator; with Σλp = 0 its π* is 0. See the
/// module docs for why.
pub fn estimate(
    ops: &[OperatorRates],
    config: &Ds2Config,
) -> Result<Vec<OperatorEstimate>, Ds2Error> {
    check_config(config)?;
    let mut estimates: Vec<OperatorEstimate> = Vec::with_capacity(ops.len());
    for (position, op) in ops.iter().enumerate() {
        check_operator(position, op)?;
        let p = op.parallelism as f64;
        let lambda_p = op.true_processing_rate;
        let lambda_o = op.true_output_rate;
        let target = match &op.source {
            Some(source) => source.external_rate + source.backlog / config.catch_up_secs,
            None => op
                .inputs
                .iter()
                .map(|&i| estimates[i].estimated_output_rate)
                .sum(),
        };
        let (optimal, estimated_output_rate) = if lambda_p > 0.0 {
            let optimal = target / (lambda_p / p) * (1.0 + config.factor);
            let output = if op.source.is_some() {
                target
            } else {
                target * lambda_o / lambda_p
            };
            (optimal, output)
        } else if op.source.is_some() || target == 0.0 {
            (0.0, target)
        } else {
            (p, target)
        };
        estimates.push(OperatorEstimate {
            index: position,
            name: op.name.clone(),
            target_input_rate: target,
            optimal,
            parallelism: ceil_at_least_one(optimal),
            estimated_output_rate,
        });
    }
    Ok(estimates)
}

fn check_config(config: &Ds2Config) -> Result<(), Ds2Error> {
    if !(config.factor.is_finite() && config.factor >= 0.0) {
        return Err(Ds2Error::InvalidConfig {
            field: "factor",
            value: config.factor,
            expected: "finite and not negative",
        });
    }
    // NaN fails the comparison; +∞ is allowed (the backlog is then ignored).
    if config.catch_up_secs.is_nan() || config.catch_up_secs <= 0.0 {
        return Err(Ds2Error::InvalidConfig {
            field: "catch_up_secs",
            value: config.catch_up_secs,
            expected: "above 0 (infinity ignores the backlog)",
        });
    }
    Ok(())
}

fn check_operator(position: usize, op: &OperatorRates) -> Result<(), Ds2Error> {
    let name = || op.name.clone();
    if op.index != position {
        return Err(Ds2Error::IndexMismatch {
            name: name(),
            position,
            index: op.index,
        });
    }
    if op.parallelism == 0 {
        return Err(Ds2Error::ZeroParallelism {
            name: name(),
            index: position,
        });
    }
    if let Some(&input) = op.inputs.iter().find(|&&i| i >= position) {
        return Err(Ds2Error::InputNotEarlier {
            name: name(),
            index: position,
            input,
        });
    }
    match &op.source {
        None if op.inputs.is_empty() => {
            return Err(Ds2Error::NoInputs {
                name: name(),
                index: position,
            })
        }
        Some(_) if !op.inputs.is_empty() => {
            return Err(Ds2Error::SourceWithInputs {
                name: name(),
                index: position,
            })
        }
        _ => {}
    }
    let mut rates = vec![
        ("true_processing_rate", op.true_processing_rate),
        ("true_output_rate", op.true_output_rate),
    ];
    if let Some(source) = &op.source {
        rates.push(("external_rate", source.external_rate));
        rates.push(("backlog", source.backlog));
    }
    for (field, value) in rates {
        if !(value.is_finite() && value >= 0.0) {
            return Err(Ds2Error::InvalidRate {
                name: name(),
                index: position,
                field,
                value,
            });
        }
    }
    Ok(())
}

fn ceil_at_least_one(optimal: f64) -> usize {
    // `optimal` is finite and not negative: the rates and the factor are checked, and
    // Σλp > 0 where it divides. The cast saturates on absurd values.
    (optimal.ceil() as usize).max(1)
}

/// The worker count the estimates call for, by `config.rule`, clamped to
/// [`min_workers`, `max_workers`] (`max_workers` wins if they cross) and at least 1.
/// No estimates call for `min_workers`.
pub fn workers(estimates: &[OperatorEstimate], config: &Ds2Config) -> usize {
    let derived = match config.rule {
        WorkerRule::Max => estimates.iter().map(|e| e.parallelism).max().unwrap_or(0),
        WorkerRule::Sum => {
            let total: f64 = estimates.iter().map(|e| e.optimal).sum();
            ((total - SUM_EPSILON).ceil().max(0.0)) as usize
        }
    };
    derived
        .max(config.min_workers)
        .min(config.max_workers)
        .max(1)
}

/// A rescale the manager calls for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The manager's window counter when decided ([`Ds2Manager::windows_seen`]).
    pub window: u64,
    /// The worker count the job runs on.
    pub from_workers: usize,
    /// The worker count it should run on.
    pub to_workers: usize,
    /// The estimate behind the decision.
    pub operators: Vec<OperatorEstimate>,
    /// One line for logs and the dashboard, e.g. "op `cost` needs 5 instances at 3000
    /// records/s, has 2".
    pub reason: String,
}

/// The DS2 manager loop: feed it one window at a time, apply its decisions, and tell it.
///
/// ```
/// use spate_elasticity::ds2::{Ds2Config, Ds2Manager};
///
/// let mut manager = Ds2Manager::new(Ds2Config::default(), 4);
/// # let window = vec![];
/// // Every policy window:
/// if let Some(decision) = manager.observe(&window)? {
///     // ... stop with a savepoint, restart on decision.to_workers ...
///     manager.applied(decision.to_workers);
/// }
/// # Ok::<(), spate_elasticity::ds2::Ds2Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Ds2Manager {
    config: Ds2Config,
    current_workers: usize,
    windows_seen: u64,
    /// Windows observed since `new` or the last `applied`.
    since_change: u64,
    last_estimate: Option<Vec<OperatorEstimate>>,
}

impl Ds2Manager {
    /// A manager for a job that runs on `current_workers`.
    pub fn new(config: Ds2Config, current_workers: usize) -> Self {
        Ds2Manager {
            config,
            current_workers,
            windows_seen: 0,
            since_change: 0,
            last_estimate: None,
        }
    }

    /// One policy window's rates. Returns a decision to apply, or `None`.
    ///
    /// The first `warm_up_windows` windows after [`new`](Self::new) or
    /// [`applied`](Self::applied) only update [`last_estimate`](Self::last_estimate). After
    /// that it decides if the derived worker count is above the current one or below it by
    /// more than one (see the module docs), unless an operator was offered input but measured
    /// no busy time (its estimate is a placeholder, not a measurement). Until
    /// [`applied`](Self::applied) is called, every later window decides again. An `Err` from
    /// [`estimate`] is returned; the window still counts as seen and toward the warm-up.
    pub fn observe(&mut self, window: &[OperatorRates]) -> Result<Option<Decision>, Ds2Error> {
        self.windows_seen += 1;
        self.since_change += 1;
        let estimates = estimate(window, &self.config)?;
        self.last_estimate = Some(estimates);
        let estimates = self.last_estimate.as_deref().expect("just stored");
        if self.since_change <= u64::from(self.config.warm_up_windows) {
            return Ok(None);
        }
        let unmeasured = window.iter().zip(estimates).any(|(op, e)| {
            op.source.is_none() && op.true_processing_rate == 0.0 && e.target_input_rate > 0.0
        });
        if unmeasured {
            return Ok(None);
        }
        let to = workers(estimates, &self.config);
        let from = self.current_workers;
        if to > from || to + 1 < from {
            let reason = reason(estimates, &self.config, from, to);
            return Ok(Some(Decision {
                window: self.windows_seen,
                from_workers: from,
                to_workers: to,
                operators: estimates.to_vec(),
                reason,
            }));
        }
        Ok(None)
    }

    /// The decision was applied: the job now runs on `workers`. Restarts the warm-up.
    pub fn applied(&mut self, workers: usize) {
        self.current_workers = workers;
        self.since_change = 0;
    }

    /// The worker count the job runs on, as far as the manager knows.
    pub fn current_workers(&self) -> usize {
        self.current_workers
    }

    /// The estimate of the last window that had one (warm-up windows included).
    pub fn last_estimate(&self) -> Option<&[OperatorEstimate]> {
        self.last_estimate.as_deref()
    }

    /// Windows observed since [`new`](Self::new).
    pub fn windows_seen(&self) -> u64 {
        self.windows_seen
    }
}

/// One line naming the operator that drives the decision.
fn reason(estimates: &[OperatorEstimate], config: &Ds2Config, from: usize, to: usize) -> String {
    let clamp = if to == config.max_workers.max(1) && to > from {
        " (capped at max_workers)"
    } else if to == config.min_workers.max(1) && to < from {
        " (floored at min_workers)"
    } else {
        ""
    };
    match config.rule {
        WorkerRule::Max => match estimates.iter().max_by_key(|e| e.parallelism) {
            Some(e) => format!(
                "op `{}` needs {} instance{} at {:.0} records/s, has {from}; {from} -> {to} workers{clamp}",
                e.name,
                e.parallelism,
                if e.parallelism == 1 { "" } else { "s" },
                e.target_input_rate,
            ),
            None => format!("no operators; {from} -> {to} workers{clamp}"),
        },
        WorkerRule::Sum => {
            let total: f64 = estimates.iter().map(|e| e.optimal).sum();
            match estimates.iter().max_by(|a, b| a.optimal.total_cmp(&b.optimal)) {
                Some(e) => format!(
                    "operators need {total:.2} workers of busy time, most op `{}` ({:.2} at {:.0} records/s); {from} -> {to} workers{clamp}",
                    e.name, e.optimal, e.target_input_rate,
                ),
                None => format!("no operators; {from} -> {to} workers{clamp}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(index: usize, name: &str, rate: f64) -> OperatorRates {
        OperatorRates {
            index,
            name: name.into(),
            inputs: vec![],
            parallelism: 1,
            true_processing_rate: 0.0,
            true_output_rate: 0.0,
            source: Some(SourceRate {
                external_rate: rate,
                backlog: 0.0,
            }),
        }
    }

    fn op(index: usize, name: &str, inputs: Vec<usize>, lp: f64, lo: f64) -> OperatorRates {
        OperatorRates {
            index,
            name: name.into(),
            inputs,
            parallelism: 1,
            true_processing_rate: lp,
            true_output_rate: lo,
            source: None,
        }
    }

    fn max_rule() -> Ds2Config {
        Ds2Config {
            rule: WorkerRule::Max,
            ..Ds2Config::default()
        }
    }

    /// Source → Op1 → Op2, all at parallelism 1.
    fn chain(source_rate: f64, op1: (f64, f64), op2_lp: f64) -> Vec<OperatorRates> {
        vec![
            source(0, "source", source_rate),
            op(1, "op1", vec![0], op1.0, op1.1),
            op(2, "op2", vec![1], op2_lp, 0.0),
        ]
    }

    fn parallelism(ops: &[OperatorRates]) -> Vec<usize> {
        estimate(ops, &max_rule())
            .unwrap()
            .iter()
            .map(|e| e.parallelism)
            .collect()
    }

    #[test]
    fn product_vector_1() {
        assert_eq!(parallelism(&chain(100.0, (50.0, 400.0), 100.0)), [1, 2, 8]);
    }

    #[test]
    fn product_vector_2() {
        assert_eq!(parallelism(&chain(200.0, (40.0, 700.0), 99.0)), [1, 5, 36]);
    }

    #[test]
    fn product_vector_3() {
        assert_eq!(
            parallelism(&chain(200.0, (10.0, 700.0), 201.0)),
            [1, 20, 70]
        );
    }

    #[test]
    fn product_vector_4_two_sources() {
        let ops = vec![
            source(0, "source1", 100.0),
            source(1, "source2", 100.0),
            op(2, "op1", vec![0, 1], 50.0, 400.0),
            op(3, "op2", vec![2], 100.0, 0.0),
        ];
        assert_eq!(parallelism(&ops), [1, 1, 4, 16]);
    }

    #[test]
    fn vector_1_details() {
        let e = estimate(&chain(100.0, (50.0, 400.0), 100.0), &max_rule()).unwrap();
        assert_eq!(e[0].target_input_rate, 100.0);
        assert_eq!(e[0].optimal, 0.0);
        assert_eq!(e[0].estimated_output_rate, 100.0);
        assert_eq!(e[1].target_input_rate, 100.0);
        assert_eq!(e[1].optimal, 2.0);
        assert_eq!(e[1].estimated_output_rate, 800.0);
        assert_eq!(e[2].target_input_rate, 800.0);
        assert_eq!(e[2].optimal, 8.0);
        assert_eq!(e[2].estimated_output_rate, 0.0);
        assert_eq!(workers(&e, &max_rule()), 8);
        assert_eq!(workers(&e, &Ds2Config::default()), 10);
    }

    #[test]
    fn parallelism_divides_the_summed_rate() {
        // Op1 on 4 instances with Σλp 200 is 50 per instance: the same as vector 1.
        let mut ops = chain(100.0, (200.0, 1600.0), 400.0);
        ops[1].parallelism = 4;
        ops[2].parallelism = 4;
        let e = estimate(&ops, &max_rule()).unwrap();
        assert_eq!(e[1].optimal, 2.0);
        assert_eq!(e[1].estimated_output_rate, 800.0);
        assert_eq!(e[2].optimal, 8.0);
        assert_eq!(parallelism(&ops), [1, 2, 8]);
    }

    #[test]
    fn factor_adds_headroom_but_does_not_compound() {
        let config = Ds2Config {
            factor: 0.25,
            ..max_rule()
        };
        let e = estimate(&chain(100.0, (50.0, 400.0), 100.0), &config).unwrap();
        assert_eq!(e[1].optimal, 2.5);
        assert_eq!(e[1].parallelism, 3);
        // The output is what the operator emits at its target, not at its headroom.
        assert_eq!(e[1].estimated_output_rate, 800.0);
        assert_eq!(e[2].optimal, 10.0);
        assert_eq!(e[2].parallelism, 10);
    }

    #[test]
    fn backlog_is_spread_over_the_catch_up_time() {
        let mut ops = chain(100.0, (50.0, 400.0), 100.0);
        ops[0].source = Some(SourceRate {
            external_rate: 100.0,
            backlog: 3000.0,
        });
        let e = estimate(&ops, &max_rule()).unwrap();
        assert_eq!(e[0].target_input_rate, 200.0);
        assert_eq!(e[0].estimated_output_rate, 200.0);
        assert_eq!(e[1].parallelism, 4);
        assert_eq!(e[2].parallelism, 16);
        let config = Ds2Config {
            catch_up_secs: 60.0,
            ..max_rule()
        };
        let e = estimate(&ops, &config).unwrap();
        assert_eq!(e[0].target_input_rate, 150.0);
        assert_eq!(e[1].parallelism, 3);
        let config = Ds2Config {
            catch_up_secs: f64::INFINITY,
            ..max_rule()
        };
        assert_eq!(estimate(&ops, &config).unwrap()[0].target_input_rate, 100.0);
    }

    #[test]
    fn a_measured_source_is_sized_like_any_operator() {
        let mut ops = chain(100.0, (50.0, 400.0), 100.0);
        ops[0].true_processing_rate = 40.0;
        ops[0].true_output_rate = 40.0;
        let e = estimate(&ops, &max_rule()).unwrap();
        assert_eq!(e[0].optimal, 2.5);
        assert_eq!(e[0].parallelism, 3);
        assert_eq!(e[0].estimated_output_rate, 100.0);
        assert_eq!(e[1].parallelism, 2);
    }

    #[test]
    fn idle_operators_need_nothing() {
        // No input offered, none measured: π* 0 (π 1), output 0; downstream idle too.
        let mut ops = chain(0.0, (0.0, 0.0), 0.0);
        ops[1].parallelism = 6;
        ops[2].parallelism = 6;
        let e = estimate(&ops, &Ds2Config::default()).unwrap();
        assert!(e
            .iter()
            .all(|e| e.optimal == 0.0 && e.parallelism == 1 && e.estimated_output_rate == 0.0));
        assert_eq!(workers(&e, &Ds2Config::default()), 1);
        assert_eq!(workers(&e, &max_rule()), 1);
    }

    #[test]
    fn an_unmeasured_operator_with_a_target_keeps_its_parallelism() {
        let mut ops = chain(100.0, (0.0, 0.0), 100.0);
        ops[1].parallelism = 3;
        let e = estimate(&ops, &max_rule()).unwrap();
        assert_eq!(e[1].optimal, 3.0);
        assert_eq!(e[1].parallelism, 3);
        // Passed through at selectivity 1.
        assert_eq!(e[1].estimated_output_rate, 100.0);
        assert_eq!(e[2].target_input_rate, 100.0);
        assert_eq!(e[2].parallelism, 1);
    }

    #[test]
    fn max_and_sum_rules() {
        // Op1 π* 2, Op2 π* 8: Max 8, Sum 10.
        let e = estimate(&chain(100.0, (50.0, 400.0), 100.0), &max_rule()).unwrap();
        assert_eq!(workers(&e, &max_rule()), 8);
        assert_eq!(
            workers(
                &e,
                &Ds2Config {
                    rule: WorkerRule::Sum,
                    ..max_rule()
                }
            ),
            10
        );
        // Fractions add before the ceiling: 0.3 + 0.3 + 0.3 → 1 under Sum, not 3.
        let e = estimate(&chain(30.0, (100.0, 100.0), 100.0), &max_rule()).unwrap();
        assert_eq!(e[1].optimal, 0.3);
        assert_eq!(workers(&e, &max_rule()), 1);
        assert_eq!(workers(&e, &Ds2Config::default()), 1);
        let e = estimate(&chain(60.0, (100.0, 100.0), 100.0), &max_rule()).unwrap();
        assert_eq!(workers(&e, &max_rule()), 1);
        assert_eq!(workers(&e, &Ds2Config::default()), 2);
    }

    #[test]
    fn sum_rule_ignores_float_noise_on_an_integer() {
        let estimate = |optimal: f64| OperatorEstimate {
            index: 0,
            name: "x".into(),
            target_input_rate: 0.0,
            optimal,
            parallelism: ceil_at_least_one(optimal),
            estimated_output_rate: 0.0,
        };
        let e = [estimate(0.1), estimate(2.7), estimate(0.2)];
        assert!(e.iter().map(|e| e.optimal).sum::<f64>() > 3.0); // 3.0000000000000004
        assert_eq!(workers(&e, &Ds2Config::default()), 3);
        assert_eq!(workers(&[estimate(1.01)], &Ds2Config::default()), 2);
    }

    #[test]
    fn workers_are_clamped() {
        let e = estimate(&chain(100.0, (50.0, 400.0), 100.0), &max_rule()).unwrap();
        assert_eq!(
            workers(
                &e,
                &Ds2Config {
                    max_workers: 5,
                    ..max_rule()
                }
            ),
            5
        );
        assert_eq!(
            workers(
                &e,
                &Ds2Config {
                    min_workers: 12,
                    ..max_rule()
                }
            ),
            12
        );
        assert_eq!(
            workers(
                &e,
                &Ds2Config {
                    min_workers: 12,
                    max_workers: 9,
                    ..max_rule()
                }
            ),
            9
        );
        assert_eq!(
            workers(
                &[],
                &Ds2Config {
                    min_workers: 3,
                    ..max_rule()
                }
            ),
            3
        );
        assert_eq!(
            workers(
                &[],
                &Ds2Config {
                    min_workers: 0,
                    ..max_rule()
                }
            ),
            1
        );
    }

    #[test]
    fn errors() {
        let config = Ds2Config::default();
        let mut ops = chain(100.0, (50.0, 400.0), 100.0);
        ops[1].inputs = vec![2];
        assert!(matches!(
            estimate(&ops, &config),
            Err(Ds2Error::InputNotEarlier {
                index: 1,
                input: 2,
                ..
            })
        ));
        ops[1].inputs = vec![1];
        assert!(matches!(
            estimate(&ops, &config),
            Err(Ds2Error::InputNotEarlier {
                index: 1,
                input: 1,
                ..
            })
        ));

        let mut ops = chain(100.0, (50.0, 400.0), 100.0);
        ops[2].true_processing_rate = f64::NAN;
        let err = estimate(&ops, &config).unwrap_err();
        assert!(matches!(
            err,
            Ds2Error::InvalidRate {
                index: 2,
                field: "true_processing_rate",
                ..
            }
        ));
        assert!(err.to_string().contains("op2"), "{err}");

        let mut ops = chain(100.0, (50.0, 400.0), 100.0);
        ops[1].true_output_rate = -1.0;
        assert!(matches!(
            estimate(&ops, &config),
            Err(Ds2Error::InvalidRate {
                field: "true_output_rate",
                ..
            })
        ));
        let ops = chain(f64::INFINITY, (50.0, 400.0), 100.0);
        assert!(matches!(
            estimate(&ops, &config),
            Err(Ds2Error::InvalidRate {
                field: "external_rate",
                ..
            })
        ));

        let mut ops = chain(100.0, (50.0, 400.0), 100.0);
        ops[1].parallelism = 0;
        assert!(matches!(
            estimate(&ops, &config),
            Err(Ds2Error::ZeroParallelism { index: 1, .. })
        ));

        let mut ops = chain(100.0, (50.0, 400.0), 100.0);
        ops[1].inputs.clear();
        assert!(matches!(
            estimate(&ops, &config),
            Err(Ds2Error::NoInputs { index: 1, .. })
        ));

        let mut ops = chain(100.0, (50.0, 400.0), 100.0);
        ops[1].source = Some(SourceRate {
            external_rate: 1.0,
            backlog: 0.0,
        });
        assert!(matches!(
            estimate(&ops, &config),
            Err(Ds2Error::SourceWithInputs { index: 1, .. })
        ));

        let mut ops = chain(100.0, (50.0, 400.0), 100.0);
        ops[2].index = 7;
        assert!(matches!(
            estimate(&ops, &config),
            Err(Ds2Error::IndexMismatch {
                position: 2,
                index: 7,
                ..
            })
        ));

        let ops = chain(100.0, (50.0, 400.0), 100.0);
        for bad in [
            Ds2Config {
                factor: f64::NAN,
                ..config.clone()
            },
            Ds2Config {
                factor: -0.5,
                ..config.clone()
            },
            Ds2Config {
                catch_up_secs: 0.0,
                ..config.clone()
            },
            Ds2Config {
                catch_up_secs: f64::NAN,
                ..config.clone()
            },
        ] {
            assert!(
                matches!(estimate(&ops, &bad), Err(Ds2Error::InvalidConfig { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn config_deserializes_with_defaults() {
        // Serde is a dependency; a hand-built map stands in for a config file.
        let config: Ds2Config =
            serde::Deserialize::deserialize(serde::de::value::MapDeserializer::<
                _,
                serde::de::value::Error,
            >::new([("factor", 0.5)].into_iter()))
            .unwrap();
        assert_eq!(
            config,
            Ds2Config {
                factor: 0.5,
                ..Ds2Config::default()
            }
        );
    }

    // ---- the manager ----

    /// Vector 1 under Max: the job needs 8 workers.
    fn needs_8() -> Vec<OperatorRates> {
        chain(100.0, (50.0, 400.0), 100.0)
    }

    #[test]
    fn warm_up_after_new_and_after_applied() {
        let mut m = Ds2Manager::new(max_rule(), 2);
        assert_eq!(m.observe(&needs_8()).unwrap(), None);
        assert_eq!(m.last_estimate().unwrap()[2].parallelism, 8);
        assert_eq!(m.observe(&needs_8()).unwrap(), None);
        let d = m.observe(&needs_8()).unwrap().expect("past the warm-up");
        assert_eq!((d.window, d.from_workers, d.to_workers), (3, 2, 8));
        assert_eq!(d.operators[2].parallelism, 8);
        assert!(
            d.reason
                .contains("op `op2` needs 8 instances at 800 records/s, has 2"),
            "{}",
            d.reason
        );
        // Not applied yet: the next window decides again.
        assert!(m.observe(&needs_8()).unwrap().is_some());
        m.applied(3);
        assert_eq!(m.current_workers(), 3);
        assert_eq!(m.observe(&needs_8()).unwrap(), None);
        assert_eq!(m.observe(&needs_8()).unwrap(), None);
        let d = m
            .observe(&needs_8())
            .unwrap()
            .expect("past the second warm-up");
        assert_eq!((d.window, d.from_workers, d.to_workers), (7, 3, 8));
        assert_eq!(m.windows_seen(), 7);
    }

    #[test]
    fn no_warm_up_when_configured_off() {
        let mut m = Ds2Manager::new(
            Ds2Config {
                warm_up_windows: 0,
                ..max_rule()
            },
            2,
        );
        assert!(m.observe(&needs_8()).unwrap().is_some());
    }

    fn decides(current: usize) -> Option<usize> {
        let mut m = Ds2Manager::new(max_rule(), current);
        for _ in 0..2 {
            assert_eq!(m.observe(&needs_8()).unwrap(), None);
        }
        m.observe(&needs_8()).unwrap().map(|d| d.to_workers)
    }

    #[test]
    fn hysteresis_on_the_worker_count() {
        assert_eq!(decides(8), None, "derived = current");
        assert_eq!(decides(9), None, "derived = current - 1");
        assert_eq!(decides(10), Some(8), "derived = current - 2");
        assert_eq!(decides(7), Some(8), "derived = current + 1");
        assert_eq!(decides(1), Some(8));
        assert_eq!(decides(30), Some(8));
    }

    #[test]
    fn no_decision_on_a_window_with_an_unmeasured_operator() {
        let mut ops = needs_8();
        ops[2].true_processing_rate = 0.0;
        let mut m = Ds2Manager::new(
            Ds2Config {
                warm_up_windows: 0,
                ..Ds2Config::default()
            },
            30,
        );
        assert_eq!(m.observe(&ops).unwrap(), None);
        assert!(m.last_estimate().is_some());
        assert!(m.observe(&needs_8()).unwrap().is_some());
    }

    #[test]
    fn errors_pass_through_the_manager() {
        let mut ops = needs_8();
        ops[1].parallelism = 0;
        let mut m = Ds2Manager::new(Ds2Config::default(), 2);
        assert!(m.observe(&ops).is_err());
        assert_eq!(m.windows_seen(), 1);
        assert!(m.last_estimate().is_none());
    }

    // ---- the simulator ----

    /// A deterministic job: a source at an external rate feeding a chain of operators with fixed
    /// per-instance capacities (records per second of busy time) and selectivities, on
    /// `workers` threads, 10-second windows.
    ///
    /// Under [`WorkerRule::Sum`] every worker runs every operator: operator i needs
    /// input_i / cap_i worker-seconds per second, and the job can process at most
    /// `workers` worker-seconds per second in total. Under [`WorkerRule::Max`] each operator
    /// has `workers` instances of its own, and the slowest operator bounds the job. Either way
    /// the source throttles to what the job can take (backpressure) and the rest waits as
    /// backlog. Measured capacities carry a deterministic ±`noise` relative error.
    struct Sim {
        rule: WorkerRule,
        caps: Vec<f64>,
        selectivities: Vec<f64>,
        workers: usize,
        backlog: f64,
        noise: f64,
        rng: u64,
    }

    const WINDOW_SECS: f64 = 10.0;

    impl Sim {
        fn new(rule: WorkerRule, workers: usize, noise: f64) -> Self {
            Sim {
                rule,
                caps: vec![1000.0, 200.0, 500.0],
                selectivities: vec![0.5, 2.0, 1.0],
                workers,
                backlog: 0.0,
                noise,
                rng: 7,
            }
        }

        /// Records each operator reads per record read by the source.
        fn ratios(&self) -> Vec<f64> {
            let mut ratio = 1.0;
            let mut ratios = vec![];
            for s in &self.selectivities {
                ratios.push(ratio);
                ratio *= s;
            }
            ratios
        }

        /// Source records per second the job can take on `workers`.
        fn throughput(&self, workers: usize) -> f64 {
            let w = workers as f64;
            let ratios = self.ratios();
            match self.rule {
                WorkerRule::Sum => {
                    w / ratios
                        .iter()
                        .zip(&self.caps)
                        .map(|(r, c)| r / c)
                        .sum::<f64>()
                }
                WorkerRule::Max => ratios
                    .iter()
                    .zip(&self.caps)
                    .map(|(r, c)| c * w / r)
                    .fold(f64::INFINITY, f64::min),
            }
        }

        /// The fewest workers that keep up with `rate`.
        fn needed(&self, rate: f64) -> usize {
            (1..).find(|&w| self.throughput(w) >= rate - 1e-9).unwrap()
        }

        fn jitter(&mut self) -> f64 {
            // splitmix64, for a reproducible ±noise.
            self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let unit = (z >> 11) as f64 / (1u64 << 53) as f64;
            1.0 + self.noise * (2.0 * unit - 1.0)
        }

        /// Runs one window at external rate `rate` and returns what the job measured.
        fn window(&mut self, rate: f64) -> Vec<OperatorRates> {
            let available = self.backlog + rate * WINDOW_SECS;
            let processed = available.min(self.throughput(self.workers) * WINDOW_SECS);
            self.backlog = available - processed;
            let p = self.workers;
            let mut ops = vec![OperatorRates {
                index: 0,
                name: "source".into(),
                inputs: vec![],
                parallelism: p,
                true_processing_rate: 0.0,
                true_output_rate: 0.0,
                // Observed output + backlog growth = the offered rate.
                source: Some(SourceRate {
                    external_rate: rate,
                    backlog: self.backlog,
                }),
            }];
            for i in 0..self.caps.len() {
                let busy = processed > 0.0;
                let lp = if busy {
                    self.caps[i] * self.jitter() * p as f64
                } else {
                    0.0
                };
                ops.push(OperatorRates {
                    index: i + 1,
                    name: format!("op{}", i + 1),
                    inputs: vec![i],
                    parallelism: p,
                    true_processing_rate: lp,
                    true_output_rate: lp * self.selectivities[i],
                    source: None,
                });
            }
            ops
        }
    }

    /// Runs `rates` (one per window) and returns the worker count after each window and the
    /// decisions taken. Decisions are applied at once.
    fn run(sim: &mut Sim, rates: &[f64]) -> (Vec<usize>, Vec<Decision>) {
        let config = Ds2Config {
            rule: sim.rule,
            ..Ds2Config::default()
        };
        let mut manager = Ds2Manager::new(config, sim.workers);
        let mut history = vec![];
        let mut decisions = vec![];
        for &rate in rates {
            let window = sim.window(rate);
            if let Some(d) = manager.observe(&window).unwrap() {
                sim.workers = d.to_workers;
                manager.applied(d.to_workers);
                decisions.push(d);
            }
            history.push(sim.workers);
        }
        (history, decisions)
    }

    /// Segments of constant rate: (first window, end window).
    fn constant_segments(rates: &[f64]) -> Vec<(usize, usize)> {
        let mut segments = vec![];
        let mut start = 0;
        for i in 1..=rates.len() {
            if i == rates.len() || rates[i] != rates[start] {
                segments.push((start, i));
                start = i;
            }
        }
        segments
    }

    /// Runs the simulation, checks every constant-rate segment, and returns the decisions.
    fn check_convergence(
        rule: WorkerRule,
        noise: f64,
        rates: &[f64],
        start_workers: usize,
    ) -> Vec<Decision> {
        let mut sim = Sim::new(rule, start_workers, noise);
        let (history, decisions) = run(&mut sim, rates);
        if std::env::var_os("DS2_TRACE").is_some() {
            eprintln!("{rule:?} noise {noise} start {start_workers}");
            for d in &decisions {
                eprintln!("  w{} {}", d.window, d.reason);
            }
        }
        let trace: Vec<String> = decisions
            .iter()
            .map(|d| format!("w{} {}", d.window, d.reason))
            .collect();
        for (start, end) in constant_segments(rates) {
            if end - start < 2 {
                continue; // a ramp step: not a constant rate
            }
            let rate = rates[start];
            let needed = sim.needed(rate);
            let in_segment: Vec<&Decision> = decisions
                .iter()
                .filter(|d| (start as u64) < d.window && d.window <= end as u64)
                .collect();
            assert!(
                in_segment.len() <= 3,
                "{rule:?} rate {rate}: {} decisions: {trace:#?}",
                in_segment.len()
            );
            // Settled: holds the rate, with at most the one spare worker the hysteresis keeps.
            let settled = history[end - 1];
            assert!(
                (needed..=needed + 1).contains(&settled),
                "{rule:?} rate {rate}: settled on {settled}, needs {needed}: {trace:#?}"
            );
            // No oscillation: within a constant rate, never up after a down (or down after an up
            // that followed a down).
            let moves: Vec<bool> = in_segment
                .iter()
                .map(|d| d.to_workers > d.from_workers)
                .collect();
            let flips = moves.windows(2).filter(|m| m[0] != m[1]).count();
            assert!(flips <= 1, "{rule:?} rate {rate}: oscillates: {trace:#?}");
            assert!(
                !moves.windows(3).any(|m| m[0] && !m[1] && m[2]),
                "{rule:?} rate {rate}: up-down-up: {trace:#?}"
            );
        }
        assert!(
            sim.backlog < 1.0,
            "{rule:?}: backlog left {}: {trace:#?}",
            sim.backlog
        );
        decisions
    }

    fn step_rates(r: f64) -> Vec<f64> {
        [vec![r; 15], vec![3.0 * r; 15], vec![r; 15]].concat()
    }

    fn ramp_rates(r: f64) -> Vec<f64> {
        let ramp = (0..20).map(|i| r + (2.0 * r) * f64::from(i) / 20.0);
        [vec![r; 10], ramp.collect(), vec![3.0 * r; 15], vec![r; 15]].concat()
    }

    #[test]
    fn simulator_converges_on_steps_under_sum() {
        for start in [1, 6, 40] {
            check_convergence(WorkerRule::Sum, 0.0, &step_rates(1000.0), start);
            check_convergence(WorkerRule::Sum, 0.03, &step_rates(1000.0), start);
        }
    }

    #[test]
    fn simulator_converges_on_steps_under_max() {
        for start in [1, 6, 40] {
            check_convergence(WorkerRule::Max, 0.0, &step_rates(1000.0), start);
            check_convergence(WorkerRule::Max, 0.03, &step_rates(1000.0), start);
        }
    }

    #[test]
    fn simulator_follows_a_ramp() {
        let rates = ramp_rates(1000.0);
        for rule in [WorkerRule::Sum, WorkerRule::Max] {
            for noise in [0.0, 0.03] {
                let decisions = check_convergence(rule, noise, &rates, 6);
                // While the rate rises (windows 11..=30, and the first window at 3R), the
                // manager only scales up.
                let rising: Vec<&Decision> = decisions
                    .iter()
                    .filter(|d| (11..=31).contains(&d.window))
                    .collect();
                assert!(!rising.is_empty());
                assert!(
                    rising.iter().all(|d| d.to_workers > d.from_workers),
                    "{rule:?} noise {noise}: {decisions:#?}"
                );
            }
        }
    }

    #[test]
    fn simulator_one_step_without_backlog() {
        // With the backlog ignored, DS2 lands on the exact count in one decision per step.
        let mut sim = Sim::new(WorkerRule::Sum, 6, 0.0);
        let config = Ds2Config {
            catch_up_secs: f64::INFINITY,
            ..Ds2Config::default()
        };
        let mut manager = Ds2Manager::new(config, sim.workers);
        let mut decisions = vec![];
        for rate in step_rates(1000.0) {
            if let Some(d) = manager.observe(&sim.window(rate)).unwrap() {
                sim.workers = d.to_workers;
                manager.applied(d.to_workers);
                decisions.push((d.from_workers, d.to_workers));
            }
        }
        // 1000/s needs 5.5 worker-seconds per second: 6; 3000/s needs 16.5: 17.
        assert_eq!(decisions, [(6, 17), (17, 6)]);
    }
}
