//! Spate's elasticity policies as pure math: how many workers a job needs (DS2), and what to
//! drop when even that is not enough (Aurora load shedding).
//!
//! Standalone and side-effect free: it depends on no other Spate crate and does no I/O. The
//! engine measures, calls these functions once per policy window, and applies the result
//! (a rescale through a savepoint, or drop fractions at its inputs). Keeping the policies
//! apart from the engine lets them be tested against the published test vectors and against
//! a simulated job, deterministically.
//!
//! ```text
//!   per window, per operator:             ┌─────────────── ds2 ───────────────┐
//!   records in/out, useful (busy) time ──▶│ estimate ─▶ workers ─▶ Ds2Manager │──▶ Decision
//!   source rate and backlog               └───────────────────────────────────┘   (rescale)
//!
//!   per operator: cost, selectivity       ┌──────────── shedding ─────────────┐
//!   per input: rate, queued records   ───▶│ load_coefficient ─▶ plan          │──▶ DropPlan
//!   capacity (worker threads)             │ RandomDropper / UtilityDropper    │   (per record)
//!                                         └───────────────────────────────────┘
//! ```
//!
//! * [`ds2`]: the DS2 autoscaler (Kalavri et al., "Three steps is all you need: fast,
//!   accurate, automatic scaling decisions for distributed streaming dataflows", OSDI 2018):
//!   true processing and output rates from useful time, the optimal parallelism of each
//!   operator in one pass over the graph, the worker count they call for, and the manager
//!   loop with warm-up and hysteresis.
//! * [`shedding`]: Aurora's load shedding (Tatbul et al., "Load Shedding in a Data Stream
//!   Manager", VLDB 2003): load coefficients, stream and queue load, the overload test, a
//!   drop plan placed by loss/gain ratio, and the random and semantic (utility) droppers.
//! * [`workload`]: what the experiments run: operators whose cost per record is set
//!   ([`workload::Cost`], waited by default so that capacity follows the worker count).
//!
//! ```
//! use spate_elasticity::ds2::{self, Ds2Config, OperatorRates, SourceRate, WorkerRule};
//!
//! // PRODUCT.md's first vector: Source (100/s) → Op1 (λp 50, λo 400) → Op2 (λp 100).
//! let op = |index: usize, name: &str, inputs: Vec<usize>, lp: f64, lo: f64| OperatorRates {
//!     index, name: name.into(), inputs, parallelism: 1,
//!     true_processing_rate: lp, true_output_rate: lo, source: None,
//! };
//! let mut source = op(0, "source", vec![], 0.0, 0.0);
//! source.source = Some(SourceRate { external_rate: 100.0, backlog: 0.0 });
//! let ops = [source, op(1, "op1", vec![0], 50.0, 400.0), op(2, "op2", vec![1], 100.0, 0.0)];
//! let config = Ds2Config { rule: WorkerRule::Max, ..Ds2Config::default() };
//! let estimates = ds2::estimate(&ops, &config)?;
//! assert_eq!(estimates[1].parallelism, 2);
//! assert_eq!(estimates[2].parallelism, 8);
//! assert_eq!(ds2::workers(&estimates, &config), 8);
//! # Ok::<(), ds2::Ds2Error>(())
//! ```

pub mod ds2;
pub mod shedding;
pub mod workload;
