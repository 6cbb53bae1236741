//! `DataStream`: the typed handle of a stream in a job being described.

use std::cell::RefCell;
use std::hash::Hash;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use spate_types::{Data, Sink};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::operators::{Concatenate, Operator};

use crate::chain::{Chain, Stage};
use crate::connected::ConnectedStreams;
use crate::execute::{BuildCtx, SinkInput};
use crate::keyed::KeyedStream;
use crate::plan::{Chaining, ErasedStream, Flow, Node, NodeId, NodeKind, Plan, TStream};
use crate::time::Timestamp;

/// A stream of records of type `T` in a job being described.
///
/// Operations add nodes to the job's plan and return new handles; nothing runs until
/// [`crate::StreamEnv::execute`]. A handle can be used many times (the stream fans out).
pub struct DataStream<T> {
    pub(crate) plan: Rc<RefCell<Plan>>,
    pub(crate) node: NodeId,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for DataStream<T> {
    fn clone(&self) -> Self {
        DataStream {
            plan: Rc::clone(&self.plan),
            node: self.node,
            _type: PhantomData,
        }
    }
}

/// Adds a node whose builder is `build` and returns its id.
pub(crate) fn add_node(
    plan: &Rc<RefCell<Plan>>,
    op: &str,
    kind: NodeKind,
    inputs: Vec<NodeId>,
    edge: &'static str,
    builder: crate::plan::Builder,
) -> NodeId {
    let mut plan = plan.borrow_mut();
    let name = format!("{op}-{}", plan.nodes.len());
    plan.add(Node {
        name,
        op: op_kind(op),
        uid: None,
        kind,
        inputs,
        edge,
        builder,
        source_strategy: None,
        source_shed: None,
        chaining: Chaining::Default,
        chain_in: false,
        chain_out: false,
        native_sides: false,
        side: None,
    })
}

/// What an operator does, for its derived uid: `source:jsonl:/a/b.jsonl` → `source:jsonl`,
/// `source:collection[100]` → `source:collection`, so that a source's path or size and a
/// sink's target are not part of its identity.
fn op_kind(op: &str) -> String {
    match op.split_once(':') {
        Some((role, rest)) => {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(rest.len());
            format!("{role}:{}", &rest[..end])
        }
        None => op.to_owned(),
    }
}

impl<T: Data> DataStream<T> {
    pub(crate) fn from_node(plan: Rc<RefCell<Plan>>, node: NodeId) -> Self {
        DataStream {
            plan,
            node,
            _type: PhantomData,
        }
    }

    /// Adds a one-input operator node reading this stream.
    pub(crate) fn unary_node<R: Data, F>(
        &self,
        op: &str,
        edge: &'static str,
        build: F,
    ) -> DataStream<R>
    where
        F: for<'s> Fn(&mut BuildCtx<'s>, Flow<'s, T>, &str) -> Flow<'s, R> + Send + Sync + 'static,
    {
        let builder: crate::plan::Builder = Arc::new(move |ctx, inputs, name| {
            let input = inputs[0].get::<T>(ctx.scope);
            Some(ErasedStream::new(build(ctx, input, name)))
        });
        let node = add_node(
            &self.plan,
            op,
            NodeKind::Operator,
            vec![self.node],
            edge,
            builder,
        );
        DataStream::from_node(Rc::clone(&self.plan), node)
    }

    /// Names the operator that produces this stream; the name shows in logs and metrics.
    ///
    /// Names should be unique within a job: metrics are keyed by them. A name is for display
    /// only: state belongs to the operator's [`uid`](Self::uid).
    pub fn name(self, name: &str) -> Self {
        {
            self.plan.borrow_mut().nodes[self.node].name = name.to_owned();
        }
        self
    }

    /// Sets the uid of the operator that produces this stream (Flink's `uid`): the id its
    /// state belongs to in checkpoints and savepoints. Without one, the id is derived from the
    /// job graph's structure, which an operator inserted upstream changes; with one, the
    /// operator keeps its state through any edit of the job that keeps the uid. Uids must be
    /// unique within a job (`execute` fails otherwise).
    pub fn uid(self, uid: &str) -> Self {
        {
            self.plan.borrow_mut().nodes[self.node].uid = Some(uid.to_owned());
        }
        self
    }

    /// The name of the operator that produces this stream.
    pub fn operator_name(&self) -> String {
        self.plan.borrow().nodes[self.node].name.clone()
    }

    /// Adds a forward (worker-local) operator that turns each input batch into an output
    /// batch with `f`; `map`, `filter`, `flat_map` and `inspect` are all this shape.
    fn batch_node<R: Data>(
        &self,
        op: &str,
        f: impl Fn(&mut Vec<(Timestamp, T)>, &mut Vec<(Timestamp, R)>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.try_batch_node(op, move |batch, out| {
            f(batch, out);
            Ok(())
        })
    }

    /// [`batch_node`](Self::batch_node) with a fallible `f`: an error (its message) fails
    /// the job with the operator's name, as does a panic in `f`; the operator then drops its
    /// input until the job stops.
    pub(crate) fn try_batch_node<R: Data>(
        &self,
        op: &str,
        f: impl Fn(&mut Vec<(Timestamp, T)>, &mut Vec<(Timestamp, R)>) -> Result<(), String>
            + Send
            + Sync
            + 'static,
    ) -> DataStream<R> {
        let f = Arc::new(f);
        self.batch_node_per_instance(op, move |_| Arc::clone(&f))
    }

    /// [`try_batch_node`](Self::try_batch_node) with a function made for each operator
    /// instance by `make`, which sees the instance's build context (its worker, cells, the
    /// job's shared state).
    pub(crate) fn batch_node_per_instance<R: Data, F>(
        &self,
        op: &str,
        make: impl Fn(&mut BuildCtx<'_>) -> Arc<F> + Send + Sync + 'static,
    ) -> DataStream<R>
    where
        F: Fn(&mut Vec<(Timestamp, T)>, &mut Vec<(Timestamp, R)>) -> Result<(), String> + 'static,
    {
        let builder: crate::plan::Builder = Arc::new(move |ctx, inputs, name| {
            let stage = Stage::new(
                make(ctx),
                Arc::clone(ctx.shared()),
                name,
                ctx.cells(),
                ctx.latency_probe(),
            );
            let chain = match ctx.chained.then(|| inputs[0].take_chain::<T>(ctx.scope)) {
                Some(Some(chain)) => chain.then(stage),
                _ => Chain::head(inputs[0].get::<T>(ctx.scope), stage),
            };
            Some(ErasedStream::pending(chain))
        });
        let node = add_node(
            &self.plan,
            op,
            NodeKind::Operator,
            vec![self.node],
            "forward",
            builder,
        );
        {
            let mut plan = self.plan.borrow_mut();
            plan.nodes[node].chain_in = true;
            plan.nodes[node].chain_out = true;
        }
        DataStream::from_node(Rc::clone(&self.plan), node)
    }

    /// Chains the operator that produces this stream to neither its input nor its consumers
    /// (Flink's `disableChaining`): it runs as a timely operator of its own.
    pub fn disable_chaining(self) -> Self {
        self.set_chaining(Chaining::Disabled)
    }

    /// Starts a new chain at the operator that produces this stream (Flink's
    /// `startNewChain`): it is not chained to its input, while its consumers may chain to it.
    pub fn start_new_chain(self) -> Self {
        self.set_chaining(Chaining::NewChain)
    }

    fn set_chaining(self, chaining: Chaining) -> Self {
        {
            self.plan.borrow_mut().nodes[self.node].chaining = chaining;
        }
        self
    }

    /// Applies `f` to every record.
    pub fn map<R: Data>(&self, f: impl Fn(T) -> R + Send + Sync + 'static) -> DataStream<R> {
        self.batch_node("map", move |batch, out| {
            out.extend(batch.drain(..).map(|(ts, x)| (ts, f(x))))
        })
    }

    /// Keeps the records for which `f` is true.
    pub fn filter(&self, f: impl Fn(&T) -> bool + Send + Sync + 'static) -> DataStream<T> {
        self.batch_node("filter", move |batch, out| {
            batch.retain(|(_, x)| f(x));
            std::mem::swap(batch, out);
        })
    }

    /// Sheds records here under overload, keeping the most useful ones: Aurora's semantic
    /// load shedding (see [`crate::shedding`]). With
    /// [`OverloadPolicy::Shed`](crate::OverloadPolicy), when the job's load exceeds its
    /// headroom, this operator drops the fraction of its records that the load controller
    /// asks for, those of lowest `utility` first (a threshold from the recent records'
    /// utilities); every record shed is counted (`numRecordsShed`). Without overload, or
    /// under [`OverloadPolicy::Backpressure`](crate::OverloadPolicy), it passes everything.
    /// A job with `shed_by` sheds only there, never at its sources.
    pub fn shed_by(&self, utility: impl Fn(&T) -> f64 + Send + Sync + 'static) -> DataStream<T> {
        let utility = Arc::new(utility);
        self.batch_node_per_instance(crate::shedding::SHED_BY, move |ctx| {
            let control = ctx.shared().shedding.clone();
            let node = ctx.node;
            let cells = ctx.cells();
            let seed = (ctx.index() as u64) << 32 | node as u64;
            let dropper = RefCell::new(spate_elasticity::shedding::UtilityDropper::new(seed));
            let utility = Arc::clone(&utility);
            Arc::new(
                move |batch: &mut Vec<(Timestamp, T)>,
                      out: &mut Vec<(Timestamp, T)>|
                      -> Result<(), String> {
                    if let Some(control) = &control {
                        let mut d = dropper.borrow_mut();
                        d.set_fraction(control.fraction(node));
                        let before = batch.len();
                        // Every record's utility feeds the threshold, shed or not.
                        batch.retain(|(_, x)| d.keep(utility(x)));
                        crate::metrics::add(&cells.shed, (before - batch.len()) as u64);
                    }
                    std::mem::swap(batch, out);
                    Ok(())
                },
            )
        })
    }

    /// Replaces every record by the records `f` returns for it (none, one or many).
    pub fn flat_map<R: Data, I>(&self, f: impl Fn(T) -> I + Send + Sync + 'static) -> DataStream<R>
    where
        I: IntoIterator<Item = R>,
    {
        self.batch_node("flat_map", move |batch, out| {
            // Typically one record out per record in: one allocation instead of a growing
            // buffer (the previous output buffer went downstream with its batch).
            out.reserve(batch.len());
            for (ts, x) in batch.drain(..) {
                out.extend(f(x).into_iter().map(|r| (ts, r)));
            }
        })
    }

    /// Replaces each batch of records by the records `f` appends to `out`, for local
    /// pre-aggregation (a combiner before a shuffle). A batch holds `(event timestamp,
    /// record)` pairs in arrival order, as the upstream operator handed them on at once; `f`
    /// should drain it. `f` gives each output record its event timestamp, which should be one
    /// of the records it stands for (operators downstream judge lateness by it).
    ///
    /// Batch sizes are not part of any guarantee (they depend on the source's poll size and
    /// on the upstream operators): `f` must give the same final results for any split of the
    /// stream into batches, for example by merging only records that every downstream
    /// operator treats alike (same key, same window).
    pub fn flat_map_batches<R: Data>(
        &self,
        f: impl Fn(&mut Vec<(Timestamp, T)>, &mut Vec<(Timestamp, R)>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.batch_node("flat_map_batches", f)
    }

    /// [`flat_map_batches`](Self::flat_map_batches) with a fallible `f`: an error (its
    /// message) fails the job with the operator's name, as in [`try_map`](Self::try_map).
    /// The Python front runs its fused stages of Python functions through this, entering the
    /// interpreter once per batch.
    pub fn try_flat_map_batches<R: Data>(
        &self,
        f: impl Fn(&mut Vec<(Timestamp, T)>, &mut Vec<(Timestamp, R)>) -> Result<(), String>
            + Send
            + Sync
            + 'static,
    ) -> DataStream<R> {
        self.try_batch_node("flat_map_batches", f)
    }

    /// Calls `f` on every record and passes the records on unchanged.
    pub fn inspect(&self, f: impl Fn(&T) + Send + Sync + 'static) -> DataStream<T> {
        self.batch_node("inspect", move |batch, out| {
            batch.iter().for_each(|(_, x)| f(x));
            std::mem::swap(batch, out);
        })
    }

    /// Applies the fallible `f` to every record (a Flink `MapFunction` that throws): an
    /// `Err` fails the job with the operator's name and the error's message, and a
    /// checkpointed job then restarts under its restart strategy, as it does after a panic.
    /// Any error type that displays will do: `String`, `std::io::Error`, `SpateError`,
    /// `anyhow::Error`, `Box<dyn Error>`.
    pub fn try_map<R: Data, E: std::fmt::Display>(
        &self,
        f: impl Fn(T) -> Result<R, E> + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.try_batch_node("try_map", move |batch, out| {
            out.reserve(batch.len());
            for (ts, x) in batch.drain(..) {
                out.push((ts, f(x).map_err(|e| e.to_string())?));
            }
            Ok(())
        })
    }

    /// Keeps the records for which the fallible `f` gives `Ok(true)`; an `Err` fails the job
    /// as in [`try_map`](Self::try_map).
    pub fn try_filter<E: std::fmt::Display>(
        &self,
        f: impl Fn(&T) -> Result<bool, E> + Send + Sync + 'static,
    ) -> DataStream<T> {
        self.try_batch_node("try_filter", move |batch, out| {
            for (ts, x) in batch.drain(..) {
                if f(&x).map_err(|e| e.to_string())? {
                    out.push((ts, x));
                }
            }
            Ok(())
        })
    }

    /// Replaces every record by the records the fallible `f` returns for it; an `Err` fails
    /// the job as in [`try_map`](Self::try_map).
    pub fn try_flat_map<R: Data, I, E: std::fmt::Display>(
        &self,
        f: impl Fn(T) -> Result<I, E> + Send + Sync + 'static,
    ) -> DataStream<R>
    where
        I: IntoIterator<Item = R>,
    {
        self.try_batch_node("try_flat_map", move |batch, out| {
            out.reserve(batch.len());
            for (ts, x) in batch.drain(..) {
                let items = f(x).map_err(|e| e.to_string())?;
                out.extend(items.into_iter().map(|r| (ts, r)));
            }
            Ok(())
        })
    }

    /// Partitions the stream by key: records with equal keys meet on one worker, where keyed
    /// operators keep state per key. Keys hash into key groups (see
    /// [`spate_types::keygroup`]), and each worker owns a contiguous range of groups.
    pub fn key_by<K>(&self, key: impl Fn(&T) -> K + Send + Sync + 'static) -> KeyedStream<K, T>
    where
        K: Data + Hash + Eq,
    {
        KeyedStream::new(self.clone(), Arc::new(key))
    }

    /// Sends records round-robin to all workers, to even out skew.
    pub fn rebalance(&self) -> DataStream<T> {
        self.unary_node("rebalance", "rebalance", move |ctx, input, name| {
            let mut next = ctx.index() as u64;
            let pact = Exchange::new(move |_: &(Timestamp, T)| {
                next = next.wrapping_add(1);
                next
            });
            let wm = ctx.exchange_wm(input.wm, name);
            let cells = ctx.cells();
            let data = input
                .data
                .unary::<CapacityContainerBuilder<Vec<(Timestamp, T)>>, _, _, _>(
                    pact,
                    name,
                    move |_, _| {
                        move |input, output| {
                            let _busy = cells.busy();
                            input.for_each(|cap, one_batch| {
                                let data = std::iter::once(one_batch);
                                let mut session = output.session(&cap);
                                for batch in data {
                                    cells.count_in(batch.len());
                                    cells.count_out(batch.len());
                                    session.give_container(batch);
                                }
                            });
                        }
                    },
                );
            Flow { data, wm }
        })
    }

    /// Sends every record to every worker.
    pub fn broadcast(&self) -> DataStream<T> {
        self.unary_node("broadcast", "broadcast", move |ctx, input, name| Flow {
            data: input.data.broadcast(),
            wm: ctx.exchange_wm(input.wm, name),
        })
    }

    /// Merges this stream with `others` (of the same type) into one.
    pub fn union(&self, others: &[DataStream<T>]) -> DataStream<T> {
        let mut inputs = vec![self.node];
        inputs.extend(others.iter().map(|o| {
            assert!(
                Rc::ptr_eq(&self.plan, &o.plan),
                "union of streams from different jobs"
            );
            o.node
        }));
        let builder: crate::plan::Builder = Arc::new(move |ctx, inputs, name| {
            let flows: Vec<Flow<'_, T>> = inputs.iter().map(|s| s.get::<T>(ctx.scope)).collect();
            let wm = ctx.merge_wms(flows.iter().map(|f| f.wm.clone()).collect(), name);
            let streams: Vec<TStream<'_, T>> = flows.into_iter().map(|f| f.data).collect();
            Some(ErasedStream::new(Flow {
                data: ctx.scope.concatenate(streams),
                wm,
            }))
        });
        let node = add_node(
            &self.plan,
            "union",
            NodeKind::Operator,
            inputs,
            "forward",
            builder,
        );
        DataStream::from_node(Rc::clone(&self.plan), node)
    }

    /// Pairs this stream with another of any type, for `co_map` / `co_flat_map`.
    pub fn connect<U: Data>(&self, other: &DataStream<U>) -> ConnectedStreams<T, U> {
        assert!(
            Rc::ptr_eq(&self.plan, &other.plan),
            "connect of streams from different jobs"
        );
        ConnectedStreams::new(self.clone(), other.clone())
    }

    /// Writes the stream to `sink`; each worker writes the records that reach it.
    pub fn sink_to(&self, sink: impl Sink<T>) -> SinkNode {
        self.add_sink(Arc::new(sink), false)
    }

    /// Writes the stream to `sink` from a single worker (global worker 0), like a Flink sink of
    /// parallelism 1: for outputs that must be one file.
    pub fn sink_to_single(&self, sink: impl Sink<T>) -> SinkNode {
        self.add_sink(Arc::new(sink), true)
    }

    fn add_sink(&self, sink: Arc<dyn Sink<T>>, single: bool) -> SinkNode {
        let op = format!("sink:{}", sink.name());
        let builder: crate::plan::Builder = Arc::new(move |ctx, inputs, name| {
            let input = if single {
                SinkInput::Single(inputs[0].get::<T>(ctx.scope).data)
            } else {
                SinkInput::Forward(crate::chain::chain_input(ctx, inputs[0]))
            };
            ctx.add_sink(name, input, &sink);
            None
        });
        let edge = if single { "global" } else { "forward" };
        let node = add_node(
            &self.plan,
            &op,
            NodeKind::Sink,
            vec![self.node],
            edge,
            builder,
        );
        self.plan.borrow_mut().nodes[node].chain_in = true;
        SinkNode {
            plan: Rc::clone(&self.plan),
            node,
        }
    }
}

/// The handle of a sink in a job being described.
pub struct SinkNode {
    plan: Rc<RefCell<Plan>>,
    node: NodeId,
}

impl SinkNode {
    /// Names the sink; the name shows in logs and metrics (display only, see
    /// [`uid`](Self::uid)).
    pub fn name(self, name: &str) -> Self {
        self.plan.borrow_mut().nodes[self.node].name = name.to_owned();
        self
    }

    /// Sets the sink's uid, which its state (files pending commit) belongs to (Flink's
    /// `uid`; see [`DataStream::uid`]).
    pub fn uid(self, uid: &str) -> Self {
        self.plan.borrow_mut().nodes[self.node].uid = Some(uid.to_owned());
        self
    }
}
