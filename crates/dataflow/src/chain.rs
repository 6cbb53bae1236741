//! Operator chaining: consecutive forward operators run as one timely operator.
//!
//! As in Flink, operators that read their input over a forward edge, at the same parallelism,
//! from an operator that has no other consumer, form a *chain*: the records go from one
//! function to the next inside one timely operator, with no channel, no scheduling and no
//! progress tracking between them. `map`, `filter`, `flat_map`, `inspect`, the `try_*`
//! operators and `flat_map_batches` chain; [`Plan::chain_heads`](crate::plan::Plan::chain_heads)
//! decides which node is chained to its input, following Flink's rules and
//! [`DataStream::disable_chaining`](crate::DataStream::disable_chaining) /
//! [`DataStream::start_new_chain`](crate::DataStream::start_new_chain).
//!
//! Chains are built lazily on each worker. A chainable node does not build an operator: it
//! produces a pending `Chain`, which the next chained node extends with its own `Stage`.
//! The first consumer that needs a real stream (one that knows the record type: any other
//! operator, a sink, a second consumer) *materializes* the chain into one timely operator
//! named after its members (`map-1 -> filter-2`), whose input is the head's input. Each stage
//! keeps its own name (for errors and panics), its own failed flag and its own panic guard;
//! the only dynamic dispatch is one call per stage per batch, never per record.
//!
//! Two operators that are more than a batch function run the chain before them inside their
//! own timely operator, as its last member: timestamp assignment on a non-source stream and a
//! sink (not a single-worker sink, whose input is an exchange). A keyed operator's first
//! stage (its key function) already runs inside the exchange that feeds it, so the chain
//! before a `key_by` ends there, as in Flink (a hash edge breaks a chain). Rich functions and
//! process functions (`map_rich`, `process`) are not chained: they read watermarks and
//! close at the end of their input.

use std::sync::Arc;

use spate_types::SpateError;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::InputCapability;
use timely::dataflow::Scope;
use timely::progress::operate::FrontierInterest;

use std::time::Instant;

use crate::execute::JobShared;
use crate::function::guard;
use crate::metrics::{Cells, LatencyProbe};
use crate::plan::{Epoch, Flow, WStream};
use crate::time::Timestamp;

/// A batch of records with their event timestamps.
pub(crate) type Batch<T> = Vec<(Timestamp, T)>;

/// Where a chain hands each of its output batches, with the capability of its input batch.
pub(crate) type Emit<'a, T> = &'a mut dyn FnMut(&InputCapability<Epoch>, &mut Batch<T>);

/// A chain attached to its operator: each call reads the head's input and pushes every
/// batch through the stages, handing the last stage's output to `emit`. The first argument
/// is the frontier of the head's input: every stage records the epochs it has passed as its
/// epoch latency (the stages of a chain see each epoch complete at the same moment, in the
/// operator that runs them).
pub(crate) type Puller<T> = Box<dyn FnMut(&[Epoch], Emit<'_, T>)>;

/// Adds a chain's head input to the operator being built and returns the chain's puller.
type Attach<'s, T> = Box<dyn FnOnce(&mut OperatorBuilder<'s, Epoch>) -> Puller<T> + 's>;

/// A chain that is not an operator yet: the stages so far, and how to attach them to the
/// operator that will run them.
pub(crate) struct Chain<'s, T> {
    /// The members' names, head first.
    pub(crate) names: Vec<String>,
    /// Adds the head's input to the operator being built and returns the puller.
    attach: Attach<'s, T>,
    /// The watermarks of the head's input, which chained operators pass on unchanged.
    pub(crate) wm: WStream<'s>,
}

/// One chained function: a batch function of one node, with its name, panic guard and
/// failure flag (after an error it drops its input until the job stops).
pub(crate) struct Stage<T, R, F> {
    f: Arc<F>,
    shared: Arc<JobShared>,
    operator: String,
    cells: Arc<Cells>,
    latency: LatencyProbe,
    failed: bool,
    out: Batch<R>,
    _in: std::marker::PhantomData<fn(T)>,
}

impl<T, R, F> Stage<T, R, F>
where
    F: Fn(&mut Batch<T>, &mut Batch<R>) -> Result<(), String>,
{
    pub(crate) fn new(
        f: Arc<F>,
        shared: Arc<JobShared>,
        operator: &str,
        cells: Arc<Cells>,
        latency: LatencyProbe,
    ) -> Self {
        Stage {
            f,
            shared,
            operator: operator.to_owned(),
            cells,
            latency,
            failed: false,
            out: Vec::new(),
            _in: std::marker::PhantomData,
        }
    }

    /// Runs the function on `batch`; true when it left records in `self.out`.
    fn apply(&mut self, batch: &mut Batch<T>) -> bool {
        if self.failed {
            batch.clear();
            return false;
        }
        let (f, out) = (&self.f, &mut self.out);
        let records_in = batch.len();
        let start = Instant::now();
        let result = guard(&self.shared, &self.operator, || f(batch, out));
        // Records in, busy time and records out are counted together, after the batch: a
        // reader (the autoscaler's policy window) never sees a batch's records without the
        // time they took.
        self.cells.count_in(records_in);
        self.cells.add_busy(start.elapsed().as_nanos() as u64);
        match result {
            Some(Ok(())) => {}
            Some(Err(message)) => {
                self.failed = true;
                self.shared
                    .fail(SpateError::function(&self.operator, message));
            }
            None => self.failed = true,
        }
        if self.failed {
            self.out.clear();
            batch.clear();
            return false;
        }
        self.cells.count_out(self.out.len());
        !self.out.is_empty()
    }
}

impl<'s, T: 'static> Chain<'s, T> {
    /// A chain of one stage reading `input`.
    pub(crate) fn head<I, F>(input: Flow<'s, I>, stage: Stage<I, T, F>) -> Self
    where
        I: Clone + 'static,
        F: Fn(&mut Batch<I>, &mut Batch<T>) -> Result<(), String> + 'static,
    {
        let names = vec![stage.operator.clone()];
        let data = input.data;
        Chain {
            names,
            wm: input.wm,
            attach: Box::new(move |builder| {
                let mut input = builder.new_input(data, Pipeline);
                let mut stage = stage;
                Box::new(move |frontier: &[Epoch], emit: Emit<'_, T>| {
                    stage.latency.observe(frontier);
                    input.for_each(|cap, batch| {
                        if stage.apply(batch) {
                            emit(&cap, &mut stage.out);
                            stage.out.clear();
                        }
                    });
                })
            }),
        }
    }

    /// No stage: the records of `input` as they come, for an operator that can run a chain
    /// before its own logic (see [`Chain::attach`]) when its input is not a chain.
    pub(crate) fn of(input: Flow<'s, T>) -> Self
    where
        T: Clone,
    {
        let data = input.data;
        Chain {
            names: Vec::new(),
            wm: input.wm,
            attach: Box::new(move |builder| {
                let mut input = builder.new_input(data, Pipeline);
                Box::new(move |_frontier: &[Epoch], emit: Emit<'_, T>| {
                    input.for_each(|cap, batch| emit(&cap, batch));
                })
            }),
        }
    }

    /// Adds the chain's input to `builder` (as its next input) and returns the puller that
    /// runs the chain; the operator that calls this runs the chain's last stage's output
    /// through its own logic, and is the chain's last member.
    pub(crate) fn attach(self, builder: &mut OperatorBuilder<'s, Epoch>) -> Puller<T> {
        (self.attach)(builder)
    }

    /// The name of an operator `name` that runs this chain before its own logic.
    pub(crate) fn name_with(&self, name: &str) -> String {
        let mut names = self.names.clone();
        names.push(name.to_owned());
        names.join(" -> ")
    }

    /// This chain followed by `stage`.
    pub(crate) fn then<R: 'static, F>(self, stage: Stage<T, R, F>) -> Chain<'s, R>
    where
        F: Fn(&mut Batch<T>, &mut Batch<R>) -> Result<(), String> + 'static,
    {
        let Chain {
            mut names,
            attach,
            wm,
        } = self;
        names.push(stage.operator.clone());
        Chain {
            names,
            wm,
            attach: Box::new(move |builder| {
                let mut inner = attach(builder);
                let mut stage = stage;
                Box::new(move |frontier: &[Epoch], emit: Emit<'_, R>| {
                    stage.latency.observe(frontier);
                    inner(frontier, &mut |cap, batch| {
                        if stage.apply(batch) {
                            emit(cap, &mut stage.out);
                            stage.out.clear();
                        }
                    });
                })
            }),
        }
    }

    /// The name of the chain's operator: its members' names, head first (as Flink's
    /// `map -> filter -> map`).
    pub(crate) fn name(&self) -> String {
        self.names.join(" -> ")
    }

    /// Builds the chain as one timely operator and returns its output.
    pub(crate) fn materialize(self, scope: Scope<'s, Epoch>) -> Flow<'s, T>
    where
        T: Clone,
    {
        let mut builder = OperatorBuilder::new(self.name(), scope);
        let mut pull = (self.attach)(&mut builder);
        // The operator runs when records arrive and when the input's frontier moves (once per
        // epoch), which the stages' latency probes read.
        builder.set_notify_for(0, FrontierInterest::Always);
        let (output, data) = builder.new_output::<Batch<T>>();
        let mut output = OutputBuilder::<_, CapacityContainerBuilder<Batch<T>>>::from(output);
        builder.build(move |_capabilities| {
            move |frontiers| {
                let mut output = output.activate();
                let frontier = frontiers[0].frontier();
                pull(&frontier, &mut |cap, batch| {
                    output.session(cap).give_container(batch)
                });
            }
        });
        Flow { data, wm: self.wm }
    }
}

/// The input of the node being built, as a chain to run before the node's own logic: the
/// pending chain of its input when the node is chained to it, otherwise the input's records
/// as they come.
pub(crate) fn chain_input<'s, T: Clone + 'static>(
    ctx: &crate::execute::BuildCtx<'s>,
    input: &crate::plan::ErasedStream,
) -> Chain<'s, T> {
    let taken = if ctx.chained {
        input.take_chain::<T>(ctx.scope)
    } else {
        None
    };
    taken.unwrap_or_else(|| Chain::of(input.get::<T>(ctx.scope)))
}
