//! The logical plan: a job graph recorded by the API and instantiated on every worker.
//!
//! The DataStream API does not touch timely while a job is being described. Each call adds a
//! [`Node`] to a [`Plan`]: its name, its inputs, and a *builder*, a closure that knows the
//! concrete record types and builds the timely operators for that node. When the job runs,
//! every worker walks the nodes in order (they are added in topological order) and calls each
//! builder with the streams its inputs produced. The builder is the only dynamic dispatch;
//! the operators it builds are monomorphized, so records never go through a `dyn` call.
//!
//! Keeping the plan as data lets later layers inspect it (the dashboard's job graph, the
//! Python and SQL fronts, the optimizer) without running it.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use spate_types::keygroup::stable_hash;
use spate_types::{SpateError, SpateResult};

use timely::dataflow::{Scope, StreamVec};

use crate::chain::Chain;
use crate::checkpoint::snapshot::sanitize;
use crate::execute::BuildCtx;
use crate::time::{Timestamp, WmMsg};

/// The index of a node in its plan.
pub type NodeId = usize;

/// What a node is, for display and for the engine's wiring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// Reads from a [`spate_types::Source`].
    Source,
    /// Transforms its inputs into one output stream.
    Operator,
    /// Writes to a [`spate_types::Sink`]; produces no stream.
    Sink,
    /// A side output of the operator it reads: one of that operator's own outputs, no
    /// operator of its own (see [`crate::side`]).
    Side,
}

/// A stream whose record type is hidden, passed between node builders.
///
/// It holds a `Flow` (records and their watermark companion), or a pending `Chain` of
/// forward operators not built yet (see [`crate::chain`]). The lifetime of the worker's scope
/// is erased so that streams of different types can sit in one vector while the plan is
/// built (see `extend_lifetime` for why that is sound).
pub struct ErasedStream {
    inner: RefCell<Box<dyn Any>>,
    /// Builds the pending chain, if any, knowing its record type.
    force: for<'s> fn(&ErasedStream, Scope<'s, Epoch>),
    /// The side outputs of the operator whose main output this is, by tag id and record type.
    sides: Vec<(Arc<str>, TypeId, ErasedStream)>,
}

/// What an [`ErasedStream`] holds.
enum Slot<'s, T> {
    Flow(Flow<'s, T>),
    Chain(Chain<'s, T>),
    /// A chain that the next operator of the chain took over.
    Taken,
}

/// The timely timestamp of every stream: the epoch (see [`crate::execute`]).
pub type Epoch = u64;
/// The records of a stream: `(event timestamp, record)` at epoch timestamps.
pub(crate) type TStream<'s, T> = StreamVec<'s, Epoch, (Timestamp, T)>;
/// The watermark companion of a stream (see [`crate::time`]).
pub(crate) type WStream<'s> = StreamVec<'s, Epoch, WmMsg>;

/// What every node produces: its records and their watermarks, both at epoch timestamps.
///
/// The watermark stream is always *local*: its messages speak for this worker only (slot 0),
/// so a consumer on the same worker needs no combining; exchanges broadcast and combine it.
pub(crate) struct Flow<'s, T> {
    pub(crate) data: TStream<'s, T>,
    pub(crate) wm: WStream<'s>,
}

impl<T: Clone + 'static> Clone for Flow<'_, T> {
    fn clone(&self) -> Self {
        Flow {
            data: self.data.clone(),
            wm: self.wm.clone(),
        }
    }
}

impl ErasedStream {
    /// Hides the type and lifetime of `stream`.
    pub(crate) fn new<'s, T: Clone + 'static>(stream: Flow<'s, T>) -> Self {
        Self::of(Slot::Flow(stream))
    }

    /// Hides the type and lifetime of a pending chain.
    pub(crate) fn pending<'s, T: Clone + 'static>(chain: Chain<'s, T>) -> Self {
        Self::of(Slot::Chain(chain))
    }

    fn of<'s, T: Clone + 'static>(slot: Slot<'s, T>) -> Self {
        ErasedStream {
            inner: RefCell::new(Box::new(extend_lifetime(slot))),
            force: force::<T>,
            sides: Vec::new(),
        }
    }

    /// This main output with the side outputs `sides` of its operator.
    pub(crate) fn with_sides(mut self, sides: Vec<(Arc<str>, TypeId, ErasedStream)>) -> Self {
        self.sides = sides;
        self
    }

    /// The side output `id` of records of type `X` of the operator whose main output this is.
    pub(crate) fn side<'s, X: Clone + 'static>(
        &self,
        id: &str,
        scope: Scope<'s, Epoch>,
    ) -> Flow<'s, X> {
        let (_, _, side) = self
            .sides
            .iter()
            .find(|(tag, t, _)| &**tag == id && *t == TypeId::of::<X>())
            .expect("the operator is built with an output for each of its side nodes");
        side.get::<X>(scope)
    }

    /// Recovers the stream, building its pending chain first if it has one; panics if the
    /// plan's types are inconsistent, which the typed API makes impossible.
    pub(crate) fn get<'s, T: Clone + 'static>(&self, scope: Scope<'s, Epoch>) -> Flow<'s, T> {
        let mut inner = self.inner.borrow_mut();
        let slot = inner
            .downcast_mut::<Slot<'static, T>>()
            .expect("plan types are checked by the typed API");
        match std::mem::replace(slot, Slot::Taken) {
            Slot::Flow(flow) => {
                *slot = Slot::Flow(flow.clone());
                shorten_lifetime::<Flow<'s, T>>(flow)
            }
            Slot::Chain(chain) => {
                let flow = shorten_lifetime::<Chain<'s, T>>(chain).materialize(scope);
                *slot = Slot::Flow(extend_lifetime(flow.clone()));
                flow
            }
            Slot::Taken => unreachable!("a chained stream has exactly one consumer"),
        }
    }

    /// Takes the pending chain, for the next operator of the chain to extend; `None` when the
    /// stream is built already.
    pub(crate) fn take_chain<'s, T: Clone + 'static>(
        &self,
        _scope: Scope<'s, Epoch>,
    ) -> Option<Chain<'s, T>> {
        let mut inner = self.inner.borrow_mut();
        let slot = inner
            .downcast_mut::<Slot<'static, T>>()
            .expect("plan types are checked by the typed API");
        if !matches!(slot, Slot::Chain(_)) {
            return None;
        }
        match std::mem::replace(slot, Slot::Taken) {
            Slot::Chain(chain) => Some(shorten_lifetime::<Chain<'s, T>>(chain)),
            _ => None,
        }
    }

    /// Builds the pending chain, if the stream still has one (a stream no operator reads:
    /// its operators run all the same, as they would unchained).
    pub(crate) fn build_pending(&self, scope: Scope<'_, Epoch>) {
        (self.force)(self, scope);
    }
}

/// Builds the pending chain of `stream`, whose record type is `T`.
fn force<'s, T: Clone + 'static>(stream: &ErasedStream, scope: Scope<'s, Epoch>) {
    let pending = matches!(
        stream.inner.borrow().downcast_ref::<Slot<'static, T>>(),
        Some(Slot::Chain(_))
    );
    if pending {
        let _ = stream.get::<T>(scope);
    }
}

/// Erases the scope lifetime of a stream or chain.
///
/// SAFETY argument: erased streams only live in the `BuildCtx` of one `worker.dataflow(..)`
/// call and are dropped before that call returns, so no stream outlives its scope; a stream is
/// recovered only through [`ErasedStream::get`] and [`ErasedStream::take_chain`], which hand
/// it back with the scope's lifetime. Types that differ only in lifetimes have the same
/// layout.
#[allow(unsafe_code, clippy::unnecessary_cast)]
fn extend_lifetime<'s, X: Lifetimed<'s>>(value: X) -> X::Static {
    let boxed = Box::new(value);
    // SAFETY: see the function comment; this is a lifetime-only pointer cast.
    unsafe { *Box::from_raw(Box::into_raw(boxed) as *mut X::Static) }
}

#[allow(unsafe_code, clippy::unnecessary_cast)]
fn shorten_lifetime<'s, X: Lifetimed<'s>>(value: X::Static) -> X {
    // Shortening a lifetime is always sound; the cast only helps the type checker, which
    // cannot see through the `'scope` parameter's invariance.
    let boxed = Box::new(value);
    // SAFETY: lifetime-only pointer cast, from a longer to a shorter lifetime.
    unsafe { *Box::from_raw(Box::into_raw(boxed) as *mut X) }
}

/// A type with a scope lifetime `'s`, and the same type at `'static`: implemented only for
/// types whose `Static` differs from them in that lifetime alone, which is what makes the
/// casts of [`extend_lifetime`] and [`shorten_lifetime`] layout-preserving.
trait Lifetimed<'s> {
    type Static: 'static;
}

impl<'s, T: 'static> Lifetimed<'s> for Flow<'s, T> {
    type Static = Flow<'static, T>;
}

impl<'s, T: 'static> Lifetimed<'s> for Chain<'s, T> {
    type Static = Chain<'static, T>;
}

impl<'s, T: 'static> Lifetimed<'s> for Slot<'s, T> {
    type Static = Slot<'static, T>;
}

/// Builds a node's timely operators on one worker, from its input streams.
/// Its arguments are the worker's build context, the input streams and the node's name.
pub(crate) type Builder = Arc<
    dyn for<'s> Fn(&mut BuildCtx<'s>, &[&ErasedStream], &str) -> Option<ErasedStream> + Send + Sync,
>;

/// One node of the job graph.
#[derive(Clone)]
pub struct Node {
    /// The node's display name, shown in logs and metrics; never used to find state.
    pub name: String,
    /// What the node does (`map`, `window`, `source`, `sink`, ...): part of its derived uid.
    pub op: String,
    /// The uid the user set (Flink's `uid`), which state belongs to; `None` derives one from
    /// the graph's structure (see [`Plan::state_ids`]).
    pub uid: Option<String>,
    /// Source, operator or sink.
    pub kind: NodeKind,
    /// The nodes whose output this node reads, in input order.
    pub inputs: Vec<NodeId>,
    /// How records reach this node from its inputs (`forward`, `hash`, `rebalance`, ...).
    pub edge: &'static str,
    pub(crate) builder: Builder,
    /// For a source: the watermark strategy its readers apply per split, once set by
    /// `assign_timestamps_and_watermarks` (a `WatermarkStrategy<T>` behind `Any`).
    pub(crate) source_strategy: Option<StrategySlot>,
    /// For a source: the sink of the records load shedding drops there, once set by
    /// `shed_to` (an `Arc<dyn Sink<T>>` behind `Any`).
    pub(crate) source_shed: Option<StrategySlot>,
    /// How the node may chain with its neighbours (Flink's `disableChaining` and
    /// `startNewChain`).
    pub chaining: Chaining,
    /// Whether the node can run in the chain of its input (see [`crate::chain`]): forward
    /// batch operators, timestamp assignment.
    pub(crate) chain_in: bool,
    /// Whether the node's consumer can run in its chain: forward batch operators.
    pub(crate) chain_out: bool,
    /// Whether the node's operator has native side outputs (see [`crate::side`]).
    pub(crate) native_sides: bool,
    /// For a side node: the port that makes its output in the operator it reads.
    pub(crate) side: Option<Arc<dyn crate::side::SidePort>>,
}

/// How an operator may chain with its neighbours, as set by
/// [`DataStream::disable_chaining`](crate::DataStream::disable_chaining) and
/// [`DataStream::start_new_chain`](crate::DataStream::start_new_chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Chaining {
    /// Chained to its neighbours wherever Flink's rules allow.
    #[default]
    Default,
    /// Chained to neither its input nor its consumer.
    Disabled,
    /// Not chained to its input; its consumer may chain to it.
    NewChain,
}

/// Where a source node keeps its watermark strategy (see [`Node::source_strategy`]).
pub(crate) type StrategySlot = Arc<Mutex<Option<Arc<dyn Any + Send + Sync>>>>;

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.name)
            .field("op", &self.op)
            .field("uid", &self.uid)
            .field("kind", &self.kind)
            .field("inputs", &self.inputs)
            .field("edge", &self.edge)
            .field("chaining", &self.chaining)
            .finish()
    }
}

/// A job graph: nodes in topological order.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The nodes; a node's inputs always have smaller ids.
    pub nodes: Vec<Node>,
    /// No operator is chained to another (Flink's `env.disableOperatorChaining()`).
    pub chaining_disabled: bool,
}

impl Plan {
    /// For each node, the ports of the side nodes that read it, one per tag id and record
    /// type (the outputs its operator makes, besides its main one).
    pub(crate) fn side_ports(&self) -> Vec<Vec<Arc<dyn crate::side::SidePort>>> {
        let mut ports: Vec<Vec<Arc<dyn crate::side::SidePort>>> =
            vec![Vec::new(); self.nodes.len()];
        for node in &self.nodes {
            if let Some(port) = &node.side {
                let of = &mut ports[node.inputs[0]];
                if !of
                    .iter()
                    .any(|p| p.id() == port.id() && p.record_type() == port.record_type())
                {
                    of.push(Arc::clone(port));
                }
            }
        }
        ports
    }

    /// Adds a node and returns its id.
    pub(crate) fn add(&mut self, node: Node) -> NodeId {
        debug_assert!(node.inputs.iter().all(|&i| i < self.nodes.len()));
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// A one-line-per-node description of the graph, for logs and `--explain`: each node
    /// with its inputs, its edge, its state id and its chain (the node that heads the chain
    /// it runs in; a node not chained to its input heads its own).
    pub fn describe(&self) -> String {
        let ids = self.derived_ids();
        let heads = self.chain_heads();
        let mut out = String::new();
        for (id, node) in self.nodes.iter().enumerate() {
            let inputs: Vec<String> = node.inputs.iter().map(|i| format!("#{i}")).collect();
            out.push_str(&format!(
                "#{id} {:?} {} <- [{}] ({}) uid={} chain=#{}\n",
                node.kind,
                node.name,
                inputs.join(", "),
                node.edge,
                node.uid.as_deref().unwrap_or(&ids[id]),
                heads[id]
            ));
        }
        out
    }

    /// For each node, the node that heads its chain: itself, unless it is chained to its
    /// input, then its input's head (see [`crate::chain`]).
    ///
    /// Flink's rules, for the operators that chain here (forward batch operators, and timestamp
    /// assignment after them): a node is
    /// chained to its input when it has that one input, over a forward edge (same
    /// parallelism: every operator runs on every worker), the input has no other consumer,
    /// neither has chaining disabled, the node does not start a new chain, and the job has
    /// not disabled chaining.
    pub fn chain_heads(&self) -> Vec<NodeId> {
        let mut consumers = vec![0usize; self.nodes.len()];
        for node in &self.nodes {
            for &i in &node.inputs {
                consumers[i] += 1;
            }
        }
        let mut heads: Vec<NodeId> = Vec::with_capacity(self.nodes.len());
        for (id, node) in self.nodes.iter().enumerate() {
            let chained = !self.chaining_disabled
                && node.chain_in
                && node.chaining == Chaining::Default
                && node.edge == "forward"
                && node.inputs.len() == 1
                && {
                    let input = &self.nodes[node.inputs[0]];
                    input.chain_out
                        && input.chaining != Chaining::Disabled
                        && consumers[node.inputs[0]] == 1
                };
            heads.push(if chained { heads[node.inputs[0]] } else { id });
        }
        heads
    }

    /// The id that each node's state belongs to, by node: the uid the user set, or one derived
    /// from the graph's structure, never from a display name (Flink's `uid` and its
    /// `StreamGraphHasher`). An error when two nodes have the same id.
    ///
    /// A derived id hashes what the node does (`op`), how it reads its inputs (`edge`), its
    /// inputs' ids and how many nodes before it had the same three: so renaming any operator
    /// keeps every id, and adding a branch elsewhere keeps this one, while inserting an
    /// operator upstream changes it (as in Flink: set a uid on operators whose state must
    /// survive such edits).
    pub fn state_ids(&self) -> SpateResult<Vec<String>> {
        let derived = self.derived_ids();
        let ids: Vec<String> = self
            .nodes
            .iter()
            .zip(derived)
            .map(|(n, d)| n.uid.clone().unwrap_or(d))
            .collect();
        // Ids name folders in checkpoint storage, so two ids that differ only in characters
        // storage does not keep would share one.
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, id) in ids.iter().enumerate() {
            if id.is_empty() {
                return Err(SpateError::Config(format!(
                    "operator {} has an empty uid",
                    self.nodes[i].name
                )));
            }
            if let Some(&j) = seen.get(&sanitize(id)) {
                return Err(SpateError::Config(format!(
                    "operators {} and {} have the same uid `{id}`: uids must be unique in a job",
                    self.nodes[j].name, self.nodes[i].name
                )));
            }
            seen.insert(sanitize(id), i);
        }
        Ok(ids)
    }

    fn derived_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = Vec::with_capacity(self.nodes.len());
        let mut occurrences: HashMap<u64, u32> = HashMap::new();
        for node in &self.nodes {
            let inputs: Vec<&str> = node
                .inputs
                .iter()
                .map(|&i| self.nodes[i].uid.as_deref().unwrap_or(&ids[i]))
                .collect();
            let shape = stable_hash(&(node.op.as_str(), node.edge, &inputs));
            let n = occurrences.entry(shape).or_insert(0);
            let id = format!("{:016x}", stable_hash(&(shape, *n)));
            *n += 1;
            ids.push(id);
        }
        ids
    }
}
