//! Keyed process functions: per-key state, event- and processing-time timers, side outputs.
//!
//! This is Flink's `KeyedProcessFunction` and the operator every event-time operator of
//! Spate is built on: windows ([`crate::window`]) and joins ([`crate::join`]) are process
//! functions with their own state and timers.
//!
//! One operator instance per worker owns the keys of its key groups. It sees:
//!
//! * records, each with its key's state, timestamp and the current watermark;
//! * watermark messages (combined over every upstream worker), applied once the records they
//!   follow have arrived ([`crate::time::WmGate`]); each one fires the event-time timers at or
//!   below it, in timestamp order, then is sent on;
//! * the wall clock, for processing-time timers (Flink fires them once the clock has passed
//!   them; pending ones are dropped at the end of the input, as Flink quiesces them).
//!
//! The operator has native outputs: its main records, its watermarks, and one output per
//! side output the job reads ([`DataStream::side_output`], see [`crate::side`]); a watermark
//! leaves on its output at the epoch of the records it fired.

use std::collections::BTreeMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hashbrown::hash_table::{Entry, HashTable};
use spate_types::keygroup::{key_group, worker_for_key_group, KeyGroup};
use spate_types::{Data, SpateError, SpateResult};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::Operator;

use crate::checkpoint::boundary;
use crate::execute::{BuildCtx, JobShared};
use crate::function::{FunctionResult, RuntimeContext};
use crate::keyed::{KeyFn, KeyedStream};
use crate::plan::{Epoch, ErasedStream, Flow, NodeKind, TStream, WStream};
use crate::side::{Caps, SideOuts};
use crate::state::backend::{
    decode_chain_part, encode_chain_part, hash_key, read_records, stored_key_group, ChainPart,
    Drain, KeyedStates, PartFiles,
};
use crate::stream::{add_node, DataStream};
use crate::time::{
    processing_time_now, Timestamp, WmGate, WmMsg, WmTracker, MAX_WATERMARK, NO_TIMESTAMP,
};

/// Which clock a timer follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum TimeDomain {
    /// Fires when the watermark reaches the timer's timestamp.
    EventTime,
    /// Fires when the wall clock passes the timer's timestamp.
    ProcessingTime,
}

/// Names a side output of records of type `X` (Flink's `OutputTag`).
pub struct OutputTag<X> {
    id: Arc<str>,
    _type: PhantomData<fn() -> X>,
}

impl<X> Clone for OutputTag<X> {
    fn clone(&self) -> Self {
        OutputTag {
            id: Arc::clone(&self.id),
            _type: PhantomData,
        }
    }
}

impl<X: Data> OutputTag<X> {
    /// A tag named `id`; tags with the same id and type name the same side output.
    pub fn new(id: &str) -> Self {
        OutputTag {
            id: Arc::from(id),
            _type: PhantomData,
        }
    }

    /// The tag's name.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tag's name, shared (to find its side output).
    pub(crate) fn shared_id(&self) -> &Arc<str> {
        &self.id
    }
}

/// The timers of one operator instance in one time domain: per timestamp, the keys with a
/// timer there (registering the same key and time twice makes one timer, as in Flink).
///
/// Registering, deleting and popping cost one `BTreeMap` step (`O(log n)`) and one hash of
/// the key, also when many keys share a timestamp (every key of a tumbling window fires at
/// one watermark): see [`TimerKeys`].
pub(crate) struct Timers<K> {
    queue: BTreeMap<Timestamp, TimerKeys<K>>,
}

/// The keys with a timer at one timestamp: a hash set, and where `pop` looks for the next key.
///
/// Removing a key never moves the others, so every bucket before `cursor` was empty when the
/// last pop looked, and draining the set scans its buckets once (not once per key, as asking
/// a hash set for its first element after each removal would). A key inserted behind the
/// cursor (a function registering a timer at the time being fired), or a growth of the table,
/// is found when the scan wraps around, which it does only while keys remain. The order is
/// the table's bucket order: deterministic for a given sequence of operations.
struct TimerKeys<K> {
    keys: HashTable<K>,
    cursor: usize,
}

impl<K: Hash + Eq> TimerKeys<K> {
    fn new() -> Self {
        TimerKeys {
            keys: HashTable::new(),
            cursor: 0,
        }
    }

    /// Removes and returns some key; the set is not empty.
    fn take_next(&mut self) -> Option<K> {
        let n = self.keys.num_buckets();
        let start = self.cursor.min(n);
        for i in (start..n).chain(0..start) {
            if let Ok(entry) = self.keys.get_bucket_entry(i) {
                self.cursor = i + 1;
                return Some(entry.remove().0);
            }
        }
        None
    }
}

impl<K: Hash + Eq + Clone> Timers<K> {
    fn new() -> Self {
        Timers {
            queue: BTreeMap::new(),
        }
    }

    /// A timer for `key` at `ts` (cloning the key only when the timer is new).
    fn register(&mut self, key: &K, ts: Timestamp) {
        let keys = &mut self.queue.entry(ts).or_insert_with(TimerKeys::new).keys;
        if let Entry::Vacant(vacant) = keys.entry(hash_key(key), |k| k == key, hash_key) {
            vacant.insert(key.clone());
        }
    }

    /// A restored timer.
    fn insert(&mut self, key: K, ts: Timestamp) {
        let keys = &mut self.queue.entry(ts).or_insert_with(TimerKeys::new).keys;
        if let Entry::Vacant(vacant) = keys.entry(hash_key(&key), |k| *k == key, hash_key) {
            vacant.insert(key);
        }
    }

    fn delete(&mut self, key: &K, ts: Timestamp) {
        if let std::collections::btree_map::Entry::Occupied(mut at) = self.queue.entry(ts) {
            if let Ok(found) = at.get_mut().keys.find_entry(hash_key(key), |k| k == key) {
                found.remove();
            }
            if at.get().keys.is_empty() {
                at.remove();
            }
        }
    }

    /// Takes the earliest timer at or before `upto`.
    fn pop(&mut self, upto: Timestamp) -> Option<(Timestamp, K)> {
        let mut first = self.queue.first_entry()?;
        let ts = *first.key();
        if ts > upto {
            return None;
        }
        let key = first.get_mut().take_next();
        debug_assert!(key.is_some(), "an empty timestamp is never kept");
        if first.get().keys.is_empty() {
            first.remove();
        }
        key.map(|k| (ts, k))
    }

    fn next(&self) -> Option<Timestamp> {
        self.queue.keys().next().copied()
    }

    /// Every timer, for a snapshot.
    fn entries(&self) -> Vec<(Timestamp, &K)> {
        self.queue
            .iter()
            .flat_map(|(ts, at)| at.keys.iter().map(move |k| (*ts, k)))
            .collect()
    }

    /// The number of timers.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.queue.values().map(|at| at.keys.len()).sum()
    }
}

/// What a process function sees while it handles one record or one timer.
pub struct ProcessContext<'a, K, S, O> {
    env: &'a OperatorEnv,
    key: &'a K,
    state: &'a mut Option<S>,
    timestamp: Timestamp,
    watermark: Timestamp,
    event_timers: &'a mut Timers<K>,
    processing_timers: &'a mut Timers<K>,
    out: &'a mut Vec<(Timestamp, O)>,
    sides: &'a mut SideOuts,
    scratch: &'a mut Vec<O>,
}

impl<'a, K: Hash + Eq + Clone, S, O> ProcessContext<'a, K, S, O> {
    /// The current key (borrowed for the whole call, not from the context, so a function can
    /// hold it while it uses the context: no clone needed).
    pub fn key(&self) -> &'a K {
        self.key
    }

    /// Fails the job with `error` (for input the function cannot handle).
    pub fn fail(&mut self, error: SpateError) {
        self.env.shared.fail(error);
    }

    /// Counts one record dropped for being late (`<operator>.numLateRecordsDropped`).
    pub fn count_late_record_dropped(&mut self) {
        self.env.late_dropped.fetch_add(1, Ordering::Relaxed);
        crate::metrics::add(&self.env.cells.late_dropped, 1);
    }

    /// The operator's name, for messages.
    pub fn operator_name(&self) -> &str {
        &self.env.name
    }

    /// The current key's state: `None` until set; set it to `None` to clear it.
    pub fn state(&mut self) -> &mut Option<S> {
        self.state
    }

    /// The timestamp of the record (or of the event-time timer) being handled;
    /// [`NO_TIMESTAMP`] when it has none.
    pub fn timestamp(&self) -> Timestamp {
        self.timestamp
    }

    /// The operator's current event-time watermark.
    pub fn current_watermark(&self) -> Timestamp {
        self.watermark
    }

    /// The wall clock, in milliseconds.
    pub fn current_processing_time(&self) -> Timestamp {
        processing_time_now()
    }

    /// Runs `f` with the key, its state and a buffer whose records are emitted with the
    /// current timestamp (the shape of `process_with_state` functions): the state and the
    /// output at once, which [`state`](Self::state) and [`collect`](Self::collect) cannot
    /// borrow together.
    pub fn emit_with(&mut self, f: impl FnOnce(&K, &mut Option<S>, &mut Vec<O>)) {
        f(self.key, self.state, self.scratch);
        let ts = self.timestamp;
        self.out.extend(self.scratch.drain(..).map(|o| (ts, o)));
    }

    /// Emits `value` with the current timestamp.
    pub fn collect(&mut self, value: O) {
        self.out.push((self.timestamp, value));
    }

    /// Emits `value` with timestamp `ts`.
    pub fn collect_with_timestamp(&mut self, value: O, ts: Timestamp) {
        self.out.push((ts, value));
    }

    /// Emits `value` to the side output `tag`, with the current timestamp (dropped when
    /// nothing reads it, as in Flink).
    pub fn output<X: Data>(&mut self, tag: &OutputTag<X>, value: X) {
        self.sides.push(&tag.id, self.timestamp, value);
    }

    /// Calls `on_timer` for the current key once the watermark reaches `ts`. Registering the
    /// same (key, time) twice makes one timer.
    pub fn register_event_time_timer(&mut self, ts: Timestamp) {
        self.event_timers.register(self.key, ts);
    }

    /// Calls `on_timer` for the current key once the wall clock passes `ts`.
    pub fn register_processing_time_timer(&mut self, ts: Timestamp) {
        self.processing_timers.register(self.key, ts);
    }

    /// Deletes the current key's event-time timer at `ts`, if any.
    pub fn delete_event_time_timer(&mut self, ts: Timestamp) {
        self.event_timers.delete(self.key, ts);
    }

    /// Deletes the current key's processing-time timer at `ts`, if any.
    pub fn delete_processing_time_timer(&mut self, ts: Timestamp) {
        self.processing_timers.delete(self.key, ts);
    }
}

/// A function over a keyed stream with per-key state and timers (Flink's
/// `KeyedProcessFunction`).
pub trait KeyedProcessFunction<K, I, O>: Send + Sync + 'static {
    /// The per-key state; it is checkpointed, so it serializes.
    type State: serde::Serialize + serde::de::DeserializeOwned + 'static;

    /// Prepares the function on one worker's instance (Flink's `RichFunction.open`): runs once
    /// per instance, after its state has been restored and before its first record or timer.
    /// The instance is shared by the worker's keys (and `&self` by the process's workers):
    /// per-instance fields need interior mutability, keyed per
    /// [`RuntimeContext::index_of_this_subtask`]. An `Err` fails the job.
    fn open(&self, ctx: &RuntimeContext) -> FunctionResult {
        let _ = ctx;
        Ok(())
    }

    /// Handles one record of the current key.
    fn process_element(&self, value: I, ctx: &mut ProcessContext<'_, K, Self::State, O>);

    /// Handles a timer of the current key that fired at `timestamp`.
    fn on_timer(
        &self,
        timestamp: Timestamp,
        domain: TimeDomain,
        ctx: &mut ProcessContext<'_, K, Self::State, O>,
    ) {
        let _ = (timestamp, domain, ctx);
    }

    /// Whether [`on_end_of_input`](Self::on_end_of_input) runs. Asked once per instance.
    fn keys_at_end_of_input(&self) -> bool {
        false
    }

    /// Handles the end of the input for one key with state (in the manner of Flink's
    /// `BoundedOneInput.endInput`, per key): when the watermark reaches
    /// [`MAX_WATERMARK`](crate::time::MAX_WATERMARK) (a bounded input's end, or a stop with a
    /// draining savepoint), after the timers due then, every key that has state gets one
    /// call, in no particular order, if [`keys_at_end_of_input`](Self::keys_at_end_of_input)
    /// says so. A function that emits each key's result at the end of the input this way
    /// keeps no timer per key. The pass goes a step of keys at a time, and the operators
    /// after it run between steps; the watermark follows the pass's last outputs.
    fn on_end_of_input(&self, ctx: &mut ProcessContext<'_, K, Self::State, O>) {
        let _ = ctx;
    }

    /// Ends the function on one worker's instance (Flink's `RichFunction.close`): once, after
    /// the instance's last output at the end of its input, or when the job fails (then an
    /// `Err` or a panic is ignored: the job has failed already).
    fn close(&self) -> FunctionResult {
        Ok(())
    }

    /// Runs `body`, which calls the function on a batch of records or timers (Flink has no
    /// equivalent). The default just runs it; a function that must enter a runtime to run
    /// (the Python front takes the interpreter's lock) enters it once here, not per call.
    fn batch_scope(&self, body: &mut dyn FnMut()) {
        body()
    }
}

/// A function instance that is closed once: at the end of its input ([`Closing::close`]), or
/// when it is dropped without having been closed (a failed job drops its operators), as Flink
/// closes its functions on failure too.
pub(crate) struct Closing<F> {
    pub(crate) f: F,
    close: fn(&mut F) -> FunctionResult,
    shared: Arc<JobShared>,
    name: String,
    open: bool,
}

impl<F> Closing<F> {
    /// Opens `f` with `open` (a panic or an `Err` fails the job, and the instance is then not
    /// closed: Flink does not close a function whose `open` threw); `close` closes it.
    pub(crate) fn open(
        mut f: F,
        shared: &Arc<JobShared>,
        name: &str,
        open: impl FnOnce(&mut F) -> FunctionResult,
        close: fn(&mut F) -> FunctionResult,
    ) -> Self {
        let opened = match crate::function::guard(shared, name, || open(&mut f)) {
            Some(Ok(())) => true,
            Some(Err(e)) => {
                shared.fail(SpateError::function(name, &e));
                false
            }
            None => false,
        };
        Closing {
            f,
            close,
            shared: Arc::clone(shared),
            name: name.to_owned(),
            open: opened,
        }
    }

    /// Whether `open` succeeded and `close` has not run yet.
    pub(crate) fn is_open(&self) -> bool {
        self.open
    }

    /// Closes the instance at the end of its input: an `Err` or a panic fails the job.
    pub(crate) fn close(&mut self) {
        if std::mem::take(&mut self.open) {
            let (f, close) = (&mut self.f, self.close);
            match crate::function::guard(&self.shared, &self.name, || close(f)) {
                Some(Ok(())) | None => {}
                Some(Err(e)) => self.shared.fail(SpateError::function(&self.name, &e)),
            }
        }
    }
}

impl<F> Drop for Closing<F> {
    fn drop(&mut self) {
        // Not closed at the end of the input: the job failed (or stopped). Its error stands;
        // the close's own outcome is ignored.
        if std::mem::take(&mut self.open) {
            let (f, close) = (&mut self.f, self.close);
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| close(f)));
        }
    }
}

/// What an operator instance's functions may reach of the job.
pub(crate) struct OperatorEnv {
    shared: Arc<JobShared>,
    late_dropped: Arc<AtomicU64>,
    cells: Arc<crate::metrics::Cells>,
    name: String,
}

/// One operator instance: its keys' state and timers, and its watermark.
struct Instance<K, S, O> {
    env: OperatorEnv,
    states: KeyedStates<K, S>,
    event_timers: Timers<K>,
    processing_timers: Timers<K>,
    watermark: Timestamp,
    out: Vec<(Timestamp, O)>,
    sides: SideOuts,
    scratch: Vec<O>,
}

impl<K, S, O> Instance<K, S, O>
where
    K: Data + Hash + Eq,
    S: serde::Serialize + serde::de::DeserializeOwned,
{
    /// Runs `f` with `key` and its state in place (one lookup; the key is stored only when
    /// its state first appears). A panic in `f` fails the job with the operator's name.
    fn with_key<R: Default>(
        &mut self,
        key: K,
        timestamp: Timestamp,
        f: impl FnOnce(&mut ProcessContext<'_, K, S, O>) -> R,
    ) -> R {
        let mut f = Some(f);
        let mut result = None;
        self.in_context(timestamp, Visit::One(key), |ctx| {
            result = f.take().map(|f| f(ctx))
        });
        result.unwrap_or_default()
    }

    /// Runs `f` in the context of each key and state that `keys` visits (with the
    /// instance's timers and outputs), unless the job has failed. A panic in `f` fails the
    /// job with the operator's name, as does an error of the state backend. Returns whether
    /// a pass has keys left.
    fn in_context(
        &mut self,
        timestamp: Timestamp,
        keys: Visit<'_, K, S>,
        mut f: impl FnMut(&mut ProcessContext<'_, K, S, O>),
    ) -> bool {
        // After a failure (a panic in a user function, say) the job stops: call no more.
        if self.env.shared.aborted() {
            return false;
        }
        let Instance {
            env,
            states,
            event_timers,
            processing_timers,
            watermark,
            out,
            sides,
            scratch,
        } = self;
        let env: &OperatorEnv = env;
        let done = keys.visit(states, |key, state| {
            if env.shared.aborted() {
                return;
            }
            let mut ctx = ProcessContext {
                env,
                key,
                state,
                timestamp,
                watermark: *watermark,
                event_timers,
                processing_timers,
                out,
                sides,
                scratch,
            };
            // A panic fails the job (the guard says so).
            crate::function::guard(&env.shared, &env.name, || f(&mut ctx));
        });
        match done {
            Ok(more) => more,
            Err(e) => {
                env.shared.fail(e);
                false
            }
        }
    }
}

/// Which keys [`Instance::in_context`] visits.
enum Visit<'d, K, S> {
    /// One key, with its state in place.
    One(K),
    /// Up to this many more keys of a pass over every key with state, each state handed over
    /// ([`KeyedStates::drain_some`]).
    Drain(&'d mut Drain<K, S>, usize),
}

impl<K, S> Visit<'_, K, S>
where
    K: Hash + Eq + Clone + serde::Serialize + serde::de::DeserializeOwned,
    S: serde::Serialize + serde::de::DeserializeOwned,
{
    /// Runs `f` on the keys; returns whether a pass has keys left.
    fn visit(
        self,
        states: &mut KeyedStates<K, S>,
        f: impl FnMut(&K, &mut Option<S>),
    ) -> SpateResult<bool> {
        match self {
            Visit::One(key) => states.with_state(key, f).map(|()| false),
            Visit::Drain(drain, n) => states.drain_some(drain, n, f),
        }
    }
}

/// Keys a pass at the end of the input hands to the function before it lets the operators
/// after it run (their outputs wait in a channel until then).
const KEYS_PER_STEP: usize = 1024;

/// A pass at the end of the input under way: the capabilities and the watermark that wait
/// for it, and the keys left.
type Ending<K, S> = (Caps, WmMsg, Drain<K, S>);

/// Records held back past a checkpoint cut, with the capabilities of their epoch.
type Held<I> = (Caps, Vec<(Timestamp, I)>);

/// A keyed operator instance's checkpointed state (written from references, read owned).
#[derive(serde::Serialize, serde::Deserialize)]
struct KeyedSnapshot<K, S> {
    states: Vec<(K, S)>,
    event_timers: Vec<(Timestamp, K)>,
    processing_timers: Vec<(Timestamp, K)>,
}

impl<K, S, O> Instance<K, S, O>
where
    K: Data + Hash + Eq,
    S: serde::Serialize + serde::de::DeserializeOwned,
{
    /// Runs `f` on the next keys of a pass at the end of the input (see
    /// [`KeyedProcessFunction::on_end_of_input`]); returns whether keys are left.
    fn end_of_input<I, F: KeyedProcessFunction<K, I, O, State = S>>(
        &mut self,
        f: &F,
        drain: &mut Drain<K, S>,
    ) -> bool {
        let at = self.watermark;
        self.in_context(at, Visit::Drain(drain, KEYS_PER_STEP), |ctx| {
            f.on_end_of_input(ctx)
        })
    }

    /// Runs `f` on `records` with their keys' state.
    fn process<I, F: KeyedProcessFunction<K, I, O, State = S>>(
        &mut self,
        f: &F,
        key: &KeyFn<K, I>,
        records: impl Iterator<Item = (Timestamp, I)>,
    ) {
        for (ts, x) in records {
            let Some(k) = crate::function::guard(&self.env.shared, &self.env.name, || key(&x))
            else {
                return;
            };
            self.with_key(k, ts, |c| f.process_element(x, c));
        }
    }

    /// The instance's part of checkpoint `c` (and, with the disk backend, the files it writes
    /// or refers to); `completed` is the latest checkpoint complete everywhere.
    fn snapshot(&mut self, c: u64, completed: u64) -> SpateResult<(Vec<u8>, PartFiles)> {
        let fail = |e: String| {
            SpateError::Internal(format!(
                "operator {}: cannot snapshot state: {e}",
                self.env.name
            ))
        };
        match &mut self.states {
            KeyedStates::Memory(map) => {
                let snapshot = KeyedSnapshot {
                    states: map.iter().collect::<Vec<_>>(),
                    event_timers: self.event_timers.entries(),
                    processing_timers: self.processing_timers.entries(),
                };
                let bytes = bincode::serialize(&snapshot).map_err(|e| fail(e.to_string()))?;
                Ok((bytes, PartFiles::default()))
            }
            KeyedStates::Disk(disk) => {
                let (chain, files) = disk
                    .checkpoint(c, completed)
                    .map_err(|e| fail(e.to_string()))?;
                let part = ChainPart {
                    chain,
                    timers: (
                        self.event_timers.entries(),
                        self.processing_timers.entries(),
                    ),
                };
                Ok((encode_chain_part(&part)?, files))
            }
        }
    }

    /// Loads the keys this instance owns from the parts of all old instances: full snapshots,
    /// or chains of key-value files read with `read` (either backend reads both). `mine_group`
    /// says whether a key group is this instance's.
    fn restore(
        &mut self,
        parts: &[bytes::Bytes],
        read: &dyn Fn(&str) -> SpateResult<bytes::Bytes>,
        mine_group: impl Fn(u32) -> bool,
        group: fn(&K, u32) -> KeyGroup,
        max_parallelism: u32,
    ) -> SpateResult<()> {
        let name = self.env.name.clone();
        let misfit = |e: bincode::Error| {
            SpateError::Job(format!(
                "operator {name}: the checkpoint's state does not fit this job's types \
                 (was the job changed?): {e}"
            ))
        };
        let mine = |k: &K| mine_group(group(k, max_parallelism));
        for part in parts {
            type Timers2<K> = (Vec<(Timestamp, K)>, Vec<(Timestamp, K)>);
            let (event_timers, processing_timers) = match decode_chain_part::<Timers2<K>>(part) {
                Some(chain) => {
                    let chain = chain.map_err(misfit)?;
                    for file in &chain.chain {
                        let bytes = read(file)?;
                        let records = read_records(&bytes, file)?;
                        let records = records
                            .into_iter()
                            .filter(|(k, _)| mine_group(stored_key_group(k)));
                        match &mut self.states {
                            KeyedStates::Disk(disk) => disk.apply_restored(records)?,
                            KeyedStates::Memory(map) => {
                                for (k, v) in records {
                                    let key: K = bincode::deserialize(&k[2..]).map_err(misfit)?;
                                    match v {
                                        Some(v) => {
                                            let s: S = bincode::deserialize(v).map_err(misfit)?;
                                            map.insert(key, s);
                                        }
                                        None => {
                                            map.remove(&key);
                                        }
                                    }
                                }
                            }
                        }
                    }
                    chain.timers
                }
                None => {
                    let snapshot: KeyedSnapshot<K, S> =
                        bincode::deserialize(part).map_err(misfit)?;
                    for (k, s) in snapshot.states {
                        if mine(&k) {
                            match &mut self.states {
                                KeyedStates::Memory(map) => {
                                    map.insert(k, s);
                                }
                                KeyedStates::Disk(disk) => disk.restore_state(k, s)?,
                            }
                        }
                    }
                    (snapshot.event_timers, snapshot.processing_timers)
                }
            };
            for (ts, k) in event_timers {
                if mine(&k) {
                    self.event_timers.insert(k, ts);
                }
            }
            for (ts, k) in processing_timers {
                if mine(&k) {
                    self.processing_timers.insert(k, ts);
                }
            }
        }
        Ok(())
    }
}

/// Builds the keyed process operator on one worker. `data` is exchanged by `key`; `wm` is the
/// input's local watermark stream (exchanged here).
pub(crate) fn build_keyed_process<'s, K, I, O, F>(
    ctx: &mut BuildCtx<'s>,
    input: Flow<'s, I>,
    key: KeyFn<K, I>,
    f: Arc<F>,
    name: &str,
) -> ErasedStream
where
    K: Data + Hash + Eq,
    I: Data,
    O: Clone + 'static,
    F: KeyedProcessFunction<K, I, O>,
{
    build_keyed_process_grouped(ctx, input, key, f, name, key_group::<K>)
}

/// [`build_keyed_process`] with the key group of a key given by `group` (for operators whose
/// keys *are* key groups, such as dedup): records are routed, and restored state is kept, by
/// `group(key, max_parallelism)`.
pub(crate) fn build_keyed_process_grouped<'s, K, I, O, F>(
    ctx: &mut BuildCtx<'s>,
    input: Flow<'s, I>,
    key: KeyFn<K, I>,
    f: Arc<F>,
    name: &str,
    group: fn(&K, u32) -> KeyGroup,
) -> ErasedStream
where
    K: Data + Hash + Eq,
    I: Data,
    O: Clone + 'static,
    F: KeyedProcessFunction<K, I, O>,
{
    let (maxp, peers) = (ctx.config().max_parallelism, ctx.peers());
    let route = Arc::clone(&key);
    let key_route = move |k: &K, maxp: u32, peers: usize| {
        worker_for_key_group(group(k, maxp), maxp, peers) as u64
    };
    let pact = Exchange::new(move |x: &(Timestamp, I)| key_route(&route(&x.1), maxp, peers));
    let wm = ctx.exchange_wm(input.wm, name);
    let scope = ctx.scope;
    let snap = ctx.stateful();
    let restored = ctx.restored_parts();
    let read_file = ctx.restored_file_reader();
    let states = ctx.keyed_states::<K, F::State>(snap.is_some(), group);
    let me = ctx.index() as u64;
    let runtime = RuntimeContext::new(ctx, name);
    let count_input = !ctx.skip_input_count;
    let mut latency = ctx.latency_probe();
    let env = OperatorEnv {
        cells: ctx.cells(),
        shared: Arc::clone(ctx.shared()),
        late_dropped: ctx
            .shared()
            .metrics
            .counter(&format!("{name}.numLateRecordsDropped")),
        name: name.to_owned(),
    };
    // The operator's outputs: its main records (port 0), its watermarks (port 1), then one
    // per side output the job reads. A watermark leaves at the epoch of the records it fired.
    let mut builder = OperatorBuilder::new(name.to_owned(), scope);
    let info = builder.operator_info();
    let mut data_in = builder.new_input(input.data, pact);
    let mut wm_in = builder.new_input(wm, Pipeline);
    let (main, data) = builder.new_output::<Vec<(Timestamp, O)>>();
    let mut main = OutputBuilder::<_, CapacityContainerBuilder<Vec<(Timestamp, O)>>>::from(main);
    let (wm_out, wm_stream) = builder.new_output::<Vec<WmMsg>>();
    let mut wm_out = OutputBuilder::<_, CapacityContainerBuilder<Vec<WmMsg>>>::from(wm_out);
    let (sides, side_streams) =
        crate::side::new_outputs(&ctx.sides, &mut builder, &wm_stream, &env.cells);
    let ports = builder.shape().outputs();
    builder.build(move |capabilities| {
        let activator = scope.activator_for(Rc::clone(&info.address));
        let mut frontier_cap: Option<Caps> = Some(Caps::new(capabilities));
        let mut gate: WmGate<Caps> = WmGate::new();
        let mut tracker = WmTracker::new(1);
        let mut inst: Instance<K, F::State, O> = Instance {
            env,
            states,
            event_timers: Timers::new(),
            processing_timers: Timers::new(),
            watermark: NO_TIMESTAMP,
            out: Vec::new(),
            sides,
            scratch: Vec::new(),
        };
        let mine = |g: u32| worker_for_key_group(g, maxp, peers) as u64 == me;
        if let Err(e) = inst.restore(&restored, &*read_file, mine, group, maxp) {
            inst.env.shared.fail(e);
        }
        // Opened once its state is restored, before its first record or timer.
        let mut f = Closing::open(
            f,
            &inst.env.shared,
            &inst.env.name,
            |f| f.open(&runtime),
            |f| f.close(),
        );
        let at_end_of_input = f.f.keys_at_end_of_input();
        let mut ending: Option<Ending<K, F::State>> = None;
        let mut next_c: u64 = 1;
        let mut stash: Vec<Held<I>> = Vec::new();
        move |frontiers| {
            let cells = Arc::clone(&inst.env.cells);
            let _busy = cells.busy();
            let (data_frontier, wm_frontier) = (&frontiers[0], &frontiers[1]);
            latency.observe(&data_frontier.frontier());
            let mut main = main.activate();
            let mut wm_out = wm_out.activate();
            // Sends what the function emitted: main records with `main_cap`, side records
            // with `caps`.
            macro_rules! emit {
                ($main_cap:expr, $caps:expr) => {
                    if !inst.out.is_empty() {
                        cells.count_out(inst.out.len());
                        main.session($main_cap).give_container(&mut inst.out);
                        inst.out.clear();
                    }
                    inst.sides.flush($caps);
                };
            }
            // A pass at the end of the input goes on a step at a time, and nothing else runs
            // meanwhile (no record, no watermark, no cut: its keys are out of the state).
            // Its watermark follows its last outputs.
            if let Some((caps, _, drain)) = ending.as_mut() {
                let mut more = false;
                f.f.batch_scope(&mut || more = inst.end_of_input(&*f.f, drain));
                emit!(caps.port(0), &*caps);
                if more {
                    activator.activate();
                    return;
                }
                let (caps, next, _) = ending.take().expect("a pass under way");
                cells.watermarks(inst.watermark, next.wm);
                wm_out.session(caps.port(1)).give(next);
            }
            // Records: each with its key's state, at the current watermark. With
            // checkpoints, records at or after the next cut wait until it is taken.
            // Once the job has finished, no cut comes any more: nothing waits for one.
            let open = snap.as_ref().filter(|h| !h.job_finished());
            let cut = open.map(|_| boundary(next_c));
            data_in.for_each(|cap, batch| {
                if count_input {
                    cells.count_in(batch.len());
                }
                let Some(&epoch) = cap.least() else { return };
                if cut.is_some_and(|b| epoch >= b) {
                    if let Some(held) = Caps::retain(&cap, ports) {
                        stash.push((held, std::mem::take(batch)));
                    }
                    return;
                }
                f.f.batch_scope(&mut || inst.process(&*f.f, &key, batch.drain(..)));
                emit!(&cap, &cap);
            });
            // Watermarks wait until the records before them have arrived.
            wm_in.for_each(|cap, batch| {
                let Some(held) = Caps::retain(&cap, ports) else {
                    return;
                };
                for msg in batch.drain(..) {
                    gate.push(held.clone(), msg);
                }
            });
            if open.is_none() && !stash.is_empty() {
                stash.sort_by_key(|(c, _)| *c.time());
                for (caps, mut records) in std::mem::take(&mut stash) {
                    f.f.batch_scope(&mut || inst.process(&*f.f, &key, records.drain(..)));
                    emit!(caps.port(0), &caps);
                }
            }
            loop {
                let limit = open.map_or(Epoch::MAX, |_| boundary(next_c));
                let mut ready = gate.ready(data_frontier, limit).into_iter();
                while let Some((caps, msg)) = ready.next() {
                    let Some(next) = tracker.update(&msg) else {
                        continue;
                    };
                    if !next.idle && next.wm > inst.watermark {
                        inst.watermark = next.wm;
                        f.f.batch_scope(&mut || {
                            while let Some((ts, k)) = inst.event_timers.pop(inst.watermark) {
                                inst.with_key(k, ts, |c| {
                                    f.f.on_timer(ts, TimeDomain::EventTime, c)
                                });
                            }
                        });
                        if inst.watermark == MAX_WATERMARK && at_end_of_input {
                            // The pass starts at the next activation, after these outputs
                            // have gone; the messages after this one wait for its end.
                            emit!(caps.port(0), &caps);
                            match inst.states.start_drain() {
                                Ok(drain) => ending = Some((caps, next, drain)),
                                Err(e) => inst.env.shared.fail(e),
                            }
                            for (caps, msg) in ready {
                                gate.push(caps, msg);
                            }
                            activator.activate();
                            return;
                        }
                    }
                    emit!(caps.port(0), &caps);
                    if !next.idle {
                        cells.watermarks(inst.watermark, next.wm);
                    }
                    wm_out.session(caps.port(1)).give(next);
                }
                // The cut: once nothing before it can arrive any more.
                let Some(handle) = snap.as_ref() else { break };
                let before = limit - 1;
                if data_frontier.less_equal(&before)
                    || wm_frontier.less_equal(&before)
                    || !handle.may_snapshot(next_c)
                {
                    break;
                }
                match inst.snapshot(next_c, handle.completed()) {
                    Ok((bytes, files)) => handle.submit_with(next_c, bytes, files),
                    Err(e) => inst.env.shared.fail(e),
                }
                next_c += 1;
                // The records held for the interval that now begins.
                let next_cut = boundary(next_c);
                let (now, later): (Vec<_>, Vec<_>) =
                    stash.drain(..).partition(|(c, _)| *c.time() < next_cut);
                stash = later;
                let mut now = now;
                now.sort_by_key(|(c, _)| *c.time());
                for (caps, mut records) in now {
                    f.f.batch_scope(&mut || inst.process(&*f.f, &key, records.drain(..)));
                    emit!(caps.port(0), &caps);
                }
            }
            // Processing-time timers, at the epoch of the input frontier.
            let ended = data_frontier.is_empty() && wm_frontier.is_empty();
            if let Some(caps) = frontier_cap.as_mut() {
                if !ended {
                    let now = processing_time_now();
                    f.f.batch_scope(&mut || {
                        while let Some((ts, k)) = inst.processing_timers.pop(now - 1) {
                            inst.with_key(k, NO_TIMESTAMP, |c| {
                                f.f.on_timer(ts, TimeDomain::ProcessingTime, c)
                            });
                        }
                    });
                    emit!(caps.port(0), &*caps);
                    if let Some(next) = inst.processing_timers.next() {
                        let wait = next.saturating_sub(now).saturating_add(1).max(1) as u64;
                        activator.activate_after(Duration::from_millis(wait));
                    }
                    let least = [data_frontier.frontier(), wm_frontier.frontier()]
                        .iter()
                        .filter_map(|f| f.first().copied())
                        .min();
                    if let Some(t) = least {
                        if t > *caps.time() {
                            caps.downgrade(&t);
                        }
                    }
                }
            }
            if ended {
                // Pending processing-time timers are dropped, and event-time timers
                // beyond the last watermark (a stop rather than an end) stay unfired,
                // as in Flink. The function closes after its last output.
                frontier_cap = None;
                f.close();
            }
        }
    });
    ErasedStream::new(Flow {
        data,
        wm: wm_stream,
    })
    .with_sides(side_streams)
}

/// What an operator that makes watermarks sends: records, and the watermarks after them.
#[derive(Clone)]
pub(crate) enum Out<X> {
    Record(X),
    Watermark(WmMsg),
}

/// Splits an operator's single output into records and watermarks.
pub(crate) fn split_out<'s, X: Clone + 'static>(both: TStream<'s, Out<X>>) -> Flow<'s, X> {
    let data = both
        .clone()
        .unary::<CapacityContainerBuilder<Vec<(Timestamp, X)>>, _, _, _>(
            Pipeline,
            "records",
            |_, _| {
                move |input, output| {
                    input.for_each(|cap, one_batch| {
                        let batches = std::iter::once(one_batch);
                        let mut session = output.session(&cap);
                        for batch in batches {
                            for (ts, x) in batch.drain(..) {
                                if let Out::Record(r) = x {
                                    session.give((ts, r));
                                }
                            }
                        }
                    });
                }
            },
        );
    let wm: WStream<'s> = both.unary::<CapacityContainerBuilder<Vec<WmMsg>>, _, _, _>(
        Pipeline,
        "watermarks",
        |_, _| {
            move |input, output| {
                input.for_each(|cap, one_batch| {
                    let batches = std::iter::once(one_batch);
                    let mut session = output.session(&cap);
                    for batch in batches {
                        for (_, x) in batch.drain(..) {
                            if let Out::Watermark(m) = x {
                                session.give(m);
                            }
                        }
                    }
                });
            }
        },
    );
    Flow { data, wm }
}

impl<T: Data> DataStream<T> {
    /// Adds an operator node with native side outputs (see [`crate::side`]): `build` returns
    /// its main output with its side outputs; returns the main output's stream.
    pub(crate) fn process_node<R: Data, F>(
        &self,
        op: &str,
        edge: &'static str,
        build: F,
    ) -> DataStream<R>
    where
        F: for<'s> Fn(&mut BuildCtx<'s>, Flow<'s, T>, &str) -> ErasedStream + Send + Sync + 'static,
    {
        let builder: crate::plan::Builder = Arc::new(move |ctx, inputs, name| {
            let input = inputs[0].get::<T>(ctx.scope);
            Some(build(ctx, input, name))
        });
        let node = add_node(
            &self.plan,
            op,
            NodeKind::Operator,
            vec![self.node],
            edge,
            builder,
        );
        self.plan.borrow_mut().nodes[node].native_sides = true;
        DataStream::from_node(Rc::clone(&self.plan), node)
    }

    /// The side output `tag` of the operator that produced this stream (a process function,
    /// a window with a late-data output, an interval join with late-data outputs): one of
    /// that operator's own outputs. Records the operator emits to a tag no stream reads are
    /// dropped, as in Flink.
    ///
    /// # Panics
    /// If this stream is not the main output of such an operator.
    pub fn side_output<X: Data>(&self, tag: &OutputTag<X>) -> DataStream<X> {
        {
            let plan = self.plan.borrow();
            let node = &plan.nodes[self.node];
            assert!(
                node.native_sides,
                "side_output: `{}` is not the output of a process function or window",
                node.name
            );
        }
        let id = Arc::clone(&tag.id);
        let of = Arc::clone(&id);
        let builder: crate::plan::Builder = Arc::new(move |ctx, inputs, _name| {
            Some(ErasedStream::new(inputs[0].side::<X>(&of, ctx.scope)))
        });
        let node = add_node(
            &self.plan,
            &format!("side:{id}"),
            NodeKind::Side,
            vec![self.node],
            "side",
            builder,
        );
        self.plan.borrow_mut().nodes[node].side =
            Some(Arc::new(crate::side::Port::<X>(id, PhantomData)));
        DataStream::from_node(Rc::clone(&self.plan), node)
    }
}

impl<K: Data + Hash + Eq, T: Data> KeyedStream<K, T> {
    /// Applies a keyed process function: per-key state, timers and side outputs (Flink's
    /// `KeyedStream.process`).
    pub fn process<O: Data, F: KeyedProcessFunction<K, T, O>>(&self, f: F) -> DataStream<O> {
        let f = Arc::new(f);
        let key = Arc::clone(&self.key);
        self.stream
            .process_node("process", "hash", move |ctx, input, name| {
                build_keyed_process(ctx, input, Arc::clone(&key), Arc::clone(&f), name)
            })
    }
}

/// Fails the job with a clear message when an event-time operator meets a record without a
/// timestamp (as Flink does).
pub(crate) fn no_timestamp_error(operator: &str) -> SpateError {
    SpateError::Config(format!(
        "operator {operator}: a record has no timestamp; event-time operators need \
         `assign_timestamps_and_watermarks` upstream"
    ))
}

/// A record of one of two connected streams.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Either<A, B> {
    /// From the first stream.
    First(A),
    /// From the second stream.
    Second(B),
}

/// A function over two keyed streams with shared per-key state and timers (Flink's
/// `KeyedCoProcessFunction`).
pub trait KeyedCoProcessFunction<K, A, B, O>: Send + Sync + 'static {
    /// The per-key state, shared by both inputs; it is checkpointed, so it serializes.
    type State: serde::Serialize + serde::de::DeserializeOwned + 'static;

    /// Prepares the function on one worker's instance, as [`KeyedProcessFunction::open`].
    fn open(&self, ctx: &RuntimeContext) -> FunctionResult {
        let _ = ctx;
        Ok(())
    }

    /// Ends the function on one worker's instance, as [`KeyedProcessFunction::close`].
    fn close(&self) -> FunctionResult {
        Ok(())
    }

    /// Handles one record of the first stream.
    fn process_element1(&self, value: A, ctx: &mut ProcessContext<'_, K, Self::State, O>);

    /// Handles one record of the second stream.
    fn process_element2(&self, value: B, ctx: &mut ProcessContext<'_, K, Self::State, O>);

    /// Handles a timer of the current key.
    fn on_timer(
        &self,
        timestamp: Timestamp,
        domain: TimeDomain,
        ctx: &mut ProcessContext<'_, K, Self::State, O>,
    ) {
        let _ = (timestamp, domain, ctx);
    }
}

/// Runs a co-process function as a process function over `Either` records.
struct CoAdapter<F, A, B>(F, PhantomData<fn(A, B)>);

impl<K, A, B, O, F> KeyedProcessFunction<K, Either<A, B>, O> for CoAdapter<F, A, B>
where
    F: KeyedCoProcessFunction<K, A, B, O>,
    A: 'static,
    B: 'static,
{
    type State = F::State;

    fn open(&self, ctx: &RuntimeContext) -> FunctionResult {
        self.0.open(ctx)
    }

    fn close(&self) -> FunctionResult {
        self.0.close()
    }

    fn process_element(&self, value: Either<A, B>, ctx: &mut ProcessContext<'_, K, F::State, O>) {
        match value {
            Either::First(a) => self.0.process_element1(a, ctx),
            Either::Second(b) => self.0.process_element2(b, ctx),
        }
    }

    fn on_timer(
        &self,
        timestamp: Timestamp,
        domain: TimeDomain,
        ctx: &mut ProcessContext<'_, K, F::State, O>,
    ) {
        self.0.on_timer(timestamp, domain, ctx)
    }
}

impl<K: Data + Hash + Eq, A: Data, B: Data> crate::ConnectedKeyedStreams<K, A, B> {
    /// Applies a keyed co-process function: both inputs, routed by key, share per-key state
    /// and timers; the operator's watermark is the minimum of both inputs'.
    pub fn process<O: Data, F: KeyedCoProcessFunction<K, A, B, O>>(&self, f: F) -> DataStream<O> {
        let (first, second) = self.parts();
        let (k1, k2) = (Arc::clone(&first.key), Arc::clone(&second.key));
        let merged = first
            .stream
            .map(Either::<A, B>::First)
            .union(&[second.stream.map(Either::<A, B>::Second)]);
        let key: KeyFn<K, Either<A, B>> = Arc::new(move |e: &Either<A, B>| match e {
            Either::First(a) => k1(a),
            Either::Second(b) => k2(b),
        });
        KeyedStream::new(merged, key).process(CoAdapter(f, PhantomData))
    }
}

/// A `process_with_state` function as a process function.
pub(crate) struct WithState<F, S>(pub(crate) F, pub(crate) PhantomData<fn() -> S>);

impl<K, T, R, S, F> KeyedProcessFunction<K, T, R> for WithState<F, S>
where
    K: Hash + Eq + Clone,
    S: serde::Serialize + serde::de::DeserializeOwned + 'static,
    F: Fn(&K, &mut Option<S>, T, &mut Vec<R>) + Send + Sync + 'static,
{
    type State = S;

    fn process_element(&self, value: T, ctx: &mut ProcessContext<'_, K, S, R>) {
        ctx.emit_with(|k, state, out| (self.0)(k, state, value, out));
    }
}

/// Two `process_with_state` functions over connected streams as one process function.
pub(crate) struct WithState2<F1, F2, S>(
    pub(crate) F1,
    pub(crate) F2,
    pub(crate) PhantomData<fn() -> S>,
);

impl<K, A, B, R, S, F1, F2> KeyedCoProcessFunction<K, A, B, R> for WithState2<F1, F2, S>
where
    K: Hash + Eq + Clone,
    S: serde::Serialize + serde::de::DeserializeOwned + 'static,
    F1: Fn(&K, &mut Option<S>, A, &mut Vec<R>) + Send + Sync + 'static,
    F2: Fn(&K, &mut Option<S>, B, &mut Vec<R>) + Send + Sync + 'static,
{
    type State = S;

    fn process_element1(&self, value: A, ctx: &mut ProcessContext<'_, K, S, R>) {
        ctx.emit_with(|k, state, out| (self.0)(k, state, value, out));
    }

    fn process_element2(&self, value: B, ctx: &mut ProcessContext<'_, K, S, R>) {
        ctx.emit_with(|k, state, out| (self.1)(k, state, value, out));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Timers against a sorted set of `(time, key)`: the same timers fire, in time order,
    /// whatever the mix of registrations (twice is once), deletions, pops and registrations
    /// made while a timestamp is being drained.
    #[test]
    fn timers_match_a_sorted_set() {
        let mut timers = Timers::<u64>::new();
        let mut oracle = BTreeSet::<(Timestamp, u64)>::new();
        let mut seed = 7u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut fired = 0;
        for round in 0..200 {
            for _ in 0..500 {
                let (key, ts) = (next() % 300, (next() % 40) as Timestamp + round);
                match next() % 4 {
                    0 => {
                        timers.delete(&key, ts);
                        oracle.remove(&(ts, key));
                    }
                    _ => {
                        timers.register(&key, ts);
                        oracle.insert((ts, key));
                    }
                }
            }
            assert_eq!(timers.len(), oracle.len());
            let upto = round + 10;
            let mut last = Timestamp::MIN;
            while let Some((ts, key)) = timers.pop(upto) {
                assert!(ts >= last, "time order");
                last = ts;
                assert!(oracle.remove(&(ts, key)), "fired ({ts}, {key}) once");
                fired += 1;
                // A function that registers a timer at the time being fired, behind the
                // cursor: it fires in this drain too.
                if key < 1_000 && key % 50 == 0 && round % 2 == 0 {
                    let again = key + 1_000;
                    if oracle.insert((ts, again)) {
                        timers.register(&again, ts);
                    }
                }
            }
            assert!(oracle.first().is_none_or(|(ts, _)| *ts > upto));
            assert_eq!(timers.next(), oracle.first().map(|(ts, _)| *ts));
        }
        assert!(fired > 10_000);
        let mut left: Vec<_> = timers.entries().into_iter().map(|(t, k)| (t, *k)).collect();
        left.sort();
        assert_eq!(left, oracle.into_iter().collect::<Vec<_>>());
    }

    /// A million keys at one timestamp drain in linear time (it was quadratic: a hash set was
    /// asked for its first element after each removal).
    #[test]
    fn many_keys_at_one_time_pop_in_linear_time() {
        let mut timers = Timers::<u64>::new();
        let n = 1_000_000u64;
        for k in 0..n {
            timers.register(&k, 100);
            timers.register(&k, 100);
        }
        assert_eq!(timers.len(), n as usize);
        let start = std::time::Instant::now();
        let mut seen = vec![false; n as usize];
        while let Some((ts, k)) = timers.pop(100) {
            assert_eq!(ts, 100);
            assert!(!std::mem::replace(&mut seen[k as usize], true));
        }
        assert!(seen.iter().all(|s| *s));
        assert!(timers.next().is_none());
        // Linear: well under a second even in a debug build (the quadratic drain took minutes).
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
    }
}
