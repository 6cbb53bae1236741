//! Flink's state API: named keyed state with time-to-live, and operator (non-keyed) state.
//!
//! # Keyed state
//!
//! A [`KeyedProcessFunction`](crate::KeyedProcessFunction) whose `type State = KeyedState`
//! declares its states with descriptors, each with a name and a type, and reaches them,
//! scoped to the current key, through the [`ProcessContext`]:
//!
//! | descriptor | handle | operations |
//! |---|---|---|
//! | [`ValueStateDescriptor<T>`] | [`ValueState`] | `value`, `update`, `clear` |
//! | [`ListStateDescriptor<T>`] | [`ListState`] | `get`, `add`, `add_all`, `update`, `clear` |
//! | [`MapStateDescriptor<UK, UV>`] | [`MapState`] | `get`, `put`, `put_all`, `remove`, `contains`, `entries`, `keys`, `values`, `is_empty`, `clear` |
//! | [`ReducingStateDescriptor<T>`] | [`ReducingState`] | `add` (folds with the reduce function), `get`, `clear` |
//! | [`AggregatingStateDescriptor<IN, ACC, OUT>`] | [`AggregatingState`] | `add` (an [`AggregateFunction`]), `get`, `clear` |
//!
//! ```
//! use std::time::Duration;
//! use spate_dataflow::state::{
//!     KeyedState, ReducingStateDescriptor, StateTtlConfig, ValueStateDescriptor,
//! };
//! use spate_dataflow::{DataStream, KeyedProcessFunction, ProcessContext};
//!
//! /// Per sensor: the change since its last reading, and how many readings it had.
//! struct Delta {
//!     last: ValueStateDescriptor<f64>,
//!     seen: ReducingStateDescriptor<u64>,
//! }
//!
//! impl KeyedProcessFunction<u32, (u32, f64), (u32, f64, u64)> for Delta {
//!     type State = KeyedState;
//!
//!     fn process_element(
//!         &self,
//!         (sensor, temp): (u32, f64),
//!         ctx: &mut ProcessContext<'_, u32, KeyedState, (u32, f64, u64)>,
//!     ) {
//!         // A handle borrows the context: take it for each use.
//!         let before = ctx.value_state(&self.last).value().copied();
//!         ctx.value_state(&self.last).update(temp);
//!         let mut seen = ctx.reducing_state(&self.seen);
//!         seen.add(1);
//!         let n = seen.get().copied().unwrap_or(0);
//!         drop(seen);
//!         if let Some(before) = before {
//!             ctx.collect((sensor, temp - before, n));
//!         }
//!     }
//! }
//!
//! fn deltas(readings: DataStream<(u32, f64)>) -> DataStream<(u32, f64, u64)> {
//!     readings.key_by(|r: &(u32, f64)| r.0).process(Delta {
//!         // A sensor silent for an hour starts over.
//!         last: ValueStateDescriptor::new("last")
//!             .enable_time_to_live(StateTtlConfig::new(Duration::from_secs(3600))),
//!         seen: ReducingStateDescriptor::new("seen", |a: u64, b: u64| a + b),
//!     })
//! }
//! ```
//!
//! **Design.** [`KeyedState`] is the per-key state object `S` of the process operator: the
//! named states of one key, each a typed value behind `dyn Any`. It is therefore part of what
//! checkpoints snapshot and restore by key group, and of what a state backend stores per key,
//! with no extra machinery. A handle ([`ValueState`], ...) borrows the context while it lives
//! (take it again for each use, or drop it before `ctx.collect`); when it is dropped, an
//! emptied state is removed and a key with no state left is removed from the operator.
//!
//! **Cost model.** Taking a handle scans the key's states by name (a few string compares; a
//! function has few states), checks the type (one `TypeId` compare) and, with a TTL, reads the
//! clock once. The first access after a restore (or a read from a state backend) decodes that
//! one state from its bytes (bincode); the others stay encoded until used. An access is then a
//! plain field, `Vec` or `HashMap` operation. A snapshot encodes each named state on its own
//! (length-prefixed), so a key costs its values plus its state names and about 16 bytes per
//! state. Creating the first state of a key allocates; reading a state a key does not have
//! allocates and frees (it is created empty and removed when the handle drops).
//! Measured (`cargo bench --bench state`, `BENCHMARKS.md`): a rolling count in a
//! `ValueState` runs at about 40% of the speed of the same count in a plain `Option<u64>`, about
//! 60 ns more per record; a TTL adds one clock read per access.
//!
//! # Time-to-live
//!
//! [`StateTtlConfig`] is Flink's: a time-to-live, an [`UpdateType`] (when the last-access
//! time is refreshed: [`OnCreateAndWrite`](UpdateType::OnCreateAndWrite), the default, or
//! [`OnReadAndWrite`](UpdateType::OnReadAndWrite)), a [`StateVisibility`]
//! ([`NeverReturnExpired`](StateVisibility::NeverReturnExpired), the default, or
//! [`ReturnExpiredIfNotCleanedUp`](StateVisibility::ReturnExpiredIfNotCleanedUp): an expired
//! value is returned once, by the access that finds it, and is cleaned when that handle
//! drops) and processing time as the time characteristic. A value is expired once
//! `last access + ttl <= now`. Lists and maps keep one last-access time per element or entry,
//! as Flink does. Expired state is cleaned on access; state never accessed again stays until
//! the key is cleared (Flink's default, without background cleanup). The clock is the wall
//! clock, or [`StateTtlConfig::with_time_provider`] (Flink's `TtlTimeProvider`, for tests).
//!
//! # Operator state
//!
//! A [`CheckpointedFunction`] applied with [`DataStream::flat_map_with_operator_state`] keeps
//! state per parallel instance, not per key (Flink's `ListCheckpointed`): at each checkpoint
//! cut it hands in a list ([`CheckpointedFunction::snapshot_state`]), and on a restore every
//! new instance gets an even share of the union of all old instances' lists (round-robin,
//! [`CheckpointedFunction::restore_state`]), so the lists may be restored on any number of
//! workers, with nothing lost or doubled.
//!
//! # Backends
//!
//! [`backend`] holds where a keyed operator instance keeps its keys' state: on the heap
//! (memory, the default) or in an embedded B-tree on local disk with incremental checkpoints.

pub(crate) mod backend;

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use rustc_hash::FxBuildHasher;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use spate_types::{Data, SpateError};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::Operator;

use crate::checkpoint::snapshot::Cuts;
use crate::plan::Flow;
use crate::process::ProcessContext;
use crate::stream::DataStream;
use crate::time::{processing_time_now, Timestamp};
use crate::window::AggregateFunction;

// ---------------------------------------------------------------------------------------------
// Time-to-live

/// When the last-access time of a state with a TTL is refreshed (Flink's
/// `StateTtlConfig.UpdateType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpdateType {
    /// On creation and every write (the default).
    #[default]
    OnCreateAndWrite,
    /// Also on every read.
    OnReadAndWrite,
}

/// Whether an expired value that was not cleaned up yet is returned (Flink's
/// `StateTtlConfig.StateVisibility`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateVisibility {
    /// Expired values are never returned (the default).
    #[default]
    NeverReturnExpired,
    /// An expired value is returned by the access that finds it, then cleaned up.
    ReturnExpiredIfNotCleanedUp,
}

/// The time a TTL follows (Flink's `TtlTimeCharacteristic`): only processing time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TtlTimeCharacteristic {
    /// The wall clock of the worker (or the configured time provider).
    #[default]
    ProcessingTime,
}

/// A clock in milliseconds, for TTL tests (Flink's `TtlTimeProvider`).
pub type TtlTimeProvider = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The time-to-live of a state (Flink's `StateTtlConfig`), enabled with a descriptor's
/// `enable_time_to_live`.
#[derive(Clone)]
pub struct StateTtlConfig {
    ttl: Duration,
    update_type: UpdateType,
    visibility: StateVisibility,
    characteristic: TtlTimeCharacteristic,
    time_provider: Option<TtlTimeProvider>,
}

impl fmt::Debug for StateTtlConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateTtlConfig")
            .field("ttl", &self.ttl)
            .field("update_type", &self.update_type)
            .field("visibility", &self.visibility)
            .field("characteristic", &self.characteristic)
            .field("time_provider", &self.time_provider.is_some())
            .finish()
    }
}

impl StateTtlConfig {
    /// A TTL of `ttl`, refreshed on create and write, never returning expired values, in
    /// processing time (Flink's `StateTtlConfig.newBuilder(ttl).build()`).
    pub fn new(ttl: Duration) -> Self {
        StateTtlConfig {
            ttl,
            update_type: UpdateType::default(),
            visibility: StateVisibility::default(),
            characteristic: TtlTimeCharacteristic::default(),
            time_provider: None,
        }
    }

    /// Sets when the last-access time is refreshed.
    pub fn set_update_type(mut self, update_type: UpdateType) -> Self {
        self.update_type = update_type;
        self
    }

    /// Refreshes the last-access time on create and write (the default).
    pub fn update_ttl_on_create_and_write(self) -> Self {
        self.set_update_type(UpdateType::OnCreateAndWrite)
    }

    /// Refreshes the last-access time on reads too.
    pub fn update_ttl_on_read_and_write(self) -> Self {
        self.set_update_type(UpdateType::OnReadAndWrite)
    }

    /// Sets whether expired values not cleaned up yet are returned.
    pub fn set_state_visibility(mut self, visibility: StateVisibility) -> Self {
        self.visibility = visibility;
        self
    }

    /// Never returns expired values (the default).
    pub fn never_return_expired(self) -> Self {
        self.set_state_visibility(StateVisibility::NeverReturnExpired)
    }

    /// Returns an expired value once, then cleans it up.
    pub fn return_expired_if_not_cleaned_up(self) -> Self {
        self.set_state_visibility(StateVisibility::ReturnExpiredIfNotCleanedUp)
    }

    /// Sets the time the TTL follows (processing time is the only one, as in Flink).
    pub fn set_ttl_time_characteristic(mut self, characteristic: TtlTimeCharacteristic) -> Self {
        self.characteristic = characteristic;
        self
    }

    /// Follows processing time (the default).
    pub fn use_processing_time(self) -> Self {
        self.set_ttl_time_characteristic(TtlTimeCharacteristic::ProcessingTime)
    }

    /// Reads the time from `now` (milliseconds) instead of the wall clock: a test hook, so
    /// that tests of expiry need no sleeps. It is called once per state access, on the worker
    /// thread that makes it (a thread-local clock works).
    pub fn with_time_provider(
        mut self,
        now: impl Fn() -> Timestamp + Send + Sync + 'static,
    ) -> Self {
        self.time_provider = Some(Arc::new(now));
        self
    }

    /// The time-to-live.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// When the last-access time is refreshed.
    pub fn update_type(&self) -> UpdateType {
        self.update_type
    }

    /// Whether expired values are returned.
    pub fn state_visibility(&self) -> StateVisibility {
        self.visibility
    }

    /// The current time of this TTL's clock.
    fn now(&self) -> Timestamp {
        match &self.time_provider {
            Some(now) => now(),
            None => processing_time_now(),
        }
    }
}

/// What a handle knows of its TTL: the time of the access and the rules.
#[derive(Clone, Copy)]
struct Clock {
    /// `None`: the state has no TTL.
    ttl_ms: Option<i64>,
    on_read: bool,
    return_expired: bool,
    now: Timestamp,
}

impl Clock {
    fn of(ttl: Option<&StateTtlConfig>) -> Self {
        match ttl {
            None => Clock {
                ttl_ms: None,
                on_read: false,
                return_expired: false,
                now: 0,
            },
            Some(c) => Clock {
                ttl_ms: Some(i64::try_from(c.ttl.as_millis()).unwrap_or(i64::MAX)),
                on_read: c.update_type == UpdateType::OnReadAndWrite,
                return_expired: c.visibility == StateVisibility::ReturnExpiredIfNotCleanedUp,
                now: c.now(),
            },
        }
    }

    fn expired(&self, stamp: Timestamp) -> bool {
        self.ttl_ms
            .is_some_and(|ttl| stamp.saturating_add(ttl) <= self.now)
    }

    fn has_ttl(&self) -> bool {
        self.ttl_ms.is_some()
    }
}

// ---------------------------------------------------------------------------------------------
// Descriptors

/// What every descriptor has: a name and maybe a TTL.
#[derive(Clone, Debug)]
struct Desc {
    name: Arc<str>,
    ttl: Option<StateTtlConfig>,
}

impl Desc {
    fn new(name: &str) -> Self {
        Desc {
            name: Arc::from(name),
            ttl: None,
        }
    }
}

macro_rules! descriptor_common {
    () => {
        /// Gives the state a time-to-live (Flink's `enableTimeToLive`).
        pub fn enable_time_to_live(mut self, ttl: StateTtlConfig) -> Self {
            self.desc.ttl = Some(ttl);
            self
        }

        /// The state's name, unique within the function.
        pub fn name(&self) -> &str {
            &self.desc.name
        }

        /// The state's TTL, if enabled.
        pub fn ttl_config(&self) -> Option<&StateTtlConfig> {
            self.desc.ttl.as_ref()
        }
    };
}

/// Declares a [`ValueState`]: one value of type `T` per key.
#[derive(Clone, Debug)]
pub struct ValueStateDescriptor<T> {
    desc: Desc,
    _type: PhantomData<fn() -> T>,
}

impl<T> ValueStateDescriptor<T> {
    /// A value state named `name`.
    pub fn new(name: &str) -> Self {
        ValueStateDescriptor {
            desc: Desc::new(name),
            _type: PhantomData,
        }
    }
    descriptor_common!();
}

/// Declares a [`ListState`]: a list of `T` per key.
#[derive(Clone, Debug)]
pub struct ListStateDescriptor<T> {
    desc: Desc,
    _type: PhantomData<fn() -> T>,
}

impl<T> ListStateDescriptor<T> {
    /// A list state named `name`.
    pub fn new(name: &str) -> Self {
        ListStateDescriptor {
            desc: Desc::new(name),
            _type: PhantomData,
        }
    }
    descriptor_common!();
}

/// Declares a [`MapState`]: a map from `UK` to `UV` per key.
#[derive(Clone, Debug)]
pub struct MapStateDescriptor<UK, UV> {
    desc: Desc,
    _type: PhantomData<fn() -> (UK, UV)>,
}

impl<UK, UV> MapStateDescriptor<UK, UV> {
    /// A map state named `name`.
    pub fn new(name: &str) -> Self {
        MapStateDescriptor {
            desc: Desc::new(name),
            _type: PhantomData,
        }
    }
    descriptor_common!();
}

/// Declares a [`ReducingState`]: one `T` per key that `add` folds with `reduce`.
#[derive(Clone)]
pub struct ReducingStateDescriptor<T> {
    desc: Desc,
    reduce: Arc<dyn Fn(T, T) -> T + Send + Sync>,
}

impl<T> ReducingStateDescriptor<T> {
    /// A reducing state named `name`: `add(v)` makes the value `reduce(value, v)` (Flink's
    /// `ReduceFunction`).
    pub fn new(name: &str, reduce: impl Fn(T, T) -> T + Send + Sync + 'static) -> Self {
        ReducingStateDescriptor {
            desc: Desc::new(name),
            reduce: Arc::new(reduce),
        }
    }
    descriptor_common!();
}

/// Declares an [`AggregatingState`]: one accumulator `ACC` per key that `add` feeds with
/// records `IN` and `get` turns into an `OUT`.
#[derive(Clone)]
pub struct AggregatingStateDescriptor<IN, ACC, OUT> {
    desc: Desc,
    agg: Arc<dyn AggregateFunction<IN, Acc = ACC, Out = OUT>>,
}

impl<IN, ACC, OUT> AggregatingStateDescriptor<IN, ACC, OUT> {
    /// An aggregating state named `name`, with the aggregation `agg`.
    pub fn new(name: &str, agg: impl AggregateFunction<IN, Acc = ACC, Out = OUT>) -> Self {
        AggregatingStateDescriptor {
            desc: Desc::new(name),
            agg: Arc::new(agg),
        }
    }
    descriptor_common!();
}

// ---------------------------------------------------------------------------------------------
// The per-key container

/// The bound on a type kept in keyed or operator state: it is checkpointed, so it serializes.
pub trait StateData: Serialize + DeserializeOwned + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + Send + Sync + 'static> StateData for T {}

/// One named state's storage, behind `dyn Any`.
trait Slot: Any + Send + Sync {
    fn encode(&self) -> bincode::Result<Vec<u8>>;
    fn is_empty(&self) -> bool;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// A typed storage of one named state.
trait SlotData: Serialize + DeserializeOwned + Default + Send + Sync + 'static {
    fn is_empty(&self) -> bool;
    /// Fits per-element access times to whether the state has a TTL now (it may have been
    /// restored from a run without one).
    fn fit(&mut self, _clock: &Clock) {}
}

impl<S: SlotData> Slot for S {
    fn encode(&self) -> bincode::Result<Vec<u8>> {
        bincode::serialize(self)
    }
    fn is_empty(&self) -> bool {
        SlotData::is_empty(self)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A named state as restored (bytes, decoded on first use) or in use (typed).
enum Entry {
    Encoded(Vec<u8>),
    Live(Box<dyn Slot>),
}

struct Named {
    name: Box<str>,
    entry: Entry,
}

/// The named states of one key: the `State` of a process function that uses descriptors.
///
/// It serializes each state to its own bytes, and decodes a restored state when it is first
/// used, so a function may be restored without knowing every state's type up front.
#[derive(Default)]
pub struct KeyedState {
    slots: Vec<Named>,
}

impl fmt::Debug for KeyedState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl KeyedState {
    /// The names of the states this key has.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().map(|s| &*s.name)
    }

    /// Whether the key has no state.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

/// Bytes that serialize as one byte string (not a sequence of numbers).
struct RawBytes<'a>(&'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<Se: serde::Serializer>(&self, s: Se) -> Result<Se::Ok, Se::Error> {
        s.serialize_bytes(self.0)
    }
}

struct OwnedBytes(Vec<u8>);

impl<'de> Deserialize<'de> for OwnedBytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = OwnedBytes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<OwnedBytes, E> {
                Ok(OwnedBytes(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<OwnedBytes, E> {
                Ok(OwnedBytes(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<OwnedBytes, A::Error> {
                let mut v = Vec::new();
                while let Some(b) = seq.next_element()? {
                    v.push(b);
                }
                Ok(OwnedBytes(v))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

impl Serialize for KeyedState {
    fn serialize<Se: serde::Serializer>(&self, s: Se) -> Result<Se::Ok, Se::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut seq = s.serialize_seq(Some(self.slots.len()))?;
        for named in &self.slots {
            match &named.entry {
                Entry::Encoded(bytes) => seq.serialize_element(&(&*named.name, RawBytes(bytes)))?,
                Entry::Live(slot) => {
                    let bytes = slot
                        .encode()
                        .map_err(|e| Se::Error::custom(format!("state `{}`: {e}", named.name)))?;
                    seq.serialize_element(&(&*named.name, RawBytes(&bytes)))?
                }
            }
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for KeyedState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let named: Vec<(String, OwnedBytes)> = Vec::deserialize(d)?;
        Ok(KeyedState {
            slots: named
                .into_iter()
                .map(|(name, bytes)| Named {
                    name: name.into_boxed_str(),
                    entry: Entry::Encoded(bytes.0),
                })
                .collect(),
        })
    }
}

/// The short name of a storage type, for messages.
fn kind<S>() -> String {
    std::any::type_name::<S>().replace("spate_dataflow::state::", "")
}

/// Makes state `name` of a key ready to use as `S` (creating it if absent) and returns its
/// index. A state that does not decode as `S`, or that was used with another type, is replaced
/// by an empty one and reported (the caller fails the job).
fn prepare<S: SlotData>(
    state: &mut Option<KeyedState>,
    name: &str,
    clock: &Clock,
) -> (usize, Option<SpateError>) {
    let keyed = state.get_or_insert_with(KeyedState::default);
    let idx = match keyed.slots.iter().position(|s| &*s.name == name) {
        Some(i) => i,
        None => {
            keyed.slots.push(Named {
                name: Box::from(name),
                entry: Entry::Live(Box::new(S::default())),
            });
            keyed.slots.len() - 1
        }
    };
    let mut error = None;
    let entry = &mut keyed.slots[idx].entry;
    if let Entry::Encoded(bytes) = entry {
        let decoded = bincode::deserialize::<S>(bytes).unwrap_or_else(|e| {
            error = Some(SpateError::Job(format!(
                "state `{name}` does not decode as {} (was the job changed?): {e}",
                kind::<S>()
            )));
            S::default()
        });
        *entry = Entry::Live(Box::new(decoded));
    }
    if let Entry::Live(slot) = entry {
        match slot.as_any_mut().downcast_mut::<S>() {
            Some(s) => s.fit(clock),
            None => {
                error = Some(SpateError::Job(format!(
                    "state `{name}` is used with two types; one of them is {}",
                    kind::<S>()
                )));
                *slot = Box::new(S::default());
            }
        }
    }
    (idx, error)
}

/// Opens state `name` of a key as `S`; a type error goes to `fail`.
#[cfg(test)]
fn open<'a, S: SlotData>(
    state: &'a mut Option<KeyedState>,
    desc: &Desc,
    fail: impl FnOnce(SpateError),
) -> Opened<'a> {
    let clock = Clock::of(desc.ttl.as_ref());
    let (idx, error) = prepare::<S>(state, &desc.name, &clock);
    if let Some(e) = error {
        fail(e);
    }
    Opened { state, idx, clock }
}

/// An open slot: removed when it is dropped empty, and the key's state with it when none is
/// left.
struct Opened<'a> {
    state: &'a mut Option<KeyedState>,
    idx: usize,
    clock: Clock,
}

impl Opened<'_> {
    fn get<S: SlotData>(&mut self) -> &mut S {
        let slot = self
            .state
            .as_mut()
            .and_then(|k| k.slots.get_mut(self.idx))
            .and_then(|n| match &mut n.entry {
                Entry::Live(slot) => slot.as_any_mut().downcast_mut::<S>(),
                Entry::Encoded(_) => None,
            });
        // `open` made the slot live and typed; nothing else can reach it while it is open.
        slot.expect("an open state slot is live and typed")
    }
}

impl Drop for Opened<'_> {
    fn drop(&mut self) {
        let Some(keyed) = self.state.as_mut() else {
            return;
        };
        let empty = match keyed.slots.get(self.idx).map(|n| &n.entry) {
            Some(Entry::Live(slot)) => slot.is_empty(),
            _ => false,
        };
        if empty {
            keyed.slots.swap_remove(self.idx);
            if keyed.slots.is_empty() {
                *self.state = None;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Storage of each kind

#[derive(Serialize, Deserialize)]
#[serde(bound = "T: StateData")]
struct ValueSlot<T> {
    value: Option<T>,
    /// The last access that counts for the TTL.
    stamp: Timestamp,
}

impl<T> Default for ValueSlot<T> {
    fn default() -> Self {
        ValueSlot {
            value: None,
            stamp: 0,
        }
    }
}

impl<T: StateData> SlotData for ValueSlot<T> {
    fn is_empty(&self) -> bool {
        self.value.is_none()
    }
}

#[derive(Serialize, Deserialize)]
#[serde(bound = "T: StateData")]
struct ListSlot<T> {
    items: Vec<T>,
    /// Per item, the last access (empty without a TTL).
    stamps: Vec<Timestamp>,
}

impl<T> Default for ListSlot<T> {
    fn default() -> Self {
        ListSlot {
            items: Vec::new(),
            stamps: Vec::new(),
        }
    }
}

impl<T> ListSlot<T> {
    /// Keeps the items whose access time passes `keep`.
    fn retain(&mut self, keep: impl Fn(Timestamp) -> bool) {
        let mut stamps = self.stamps.iter();
        // `retain` visits every item once, in order.
        self.items
            .retain(|_| stamps.next().is_some_and(|&s| keep(s)));
        self.stamps.retain(|&s| keep(s));
    }
}

impl<T: StateData> SlotData for ListSlot<T> {
    fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    fn fit(&mut self, clock: &Clock) {
        if clock.has_ttl() {
            self.stamps.resize(self.items.len(), clock.now);
        } else {
            self.stamps.clear();
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(bound = "UK: StateData + Hash + Eq, UV: StateData")]
struct MapSlot<UK, UV> {
    /// Per entry, its value and last access.
    entries: HashMap<UK, (UV, Timestamp), FxBuildHasher>,
}

impl<UK, UV> Default for MapSlot<UK, UV> {
    fn default() -> Self {
        MapSlot {
            entries: HashMap::default(),
        }
    }
}

impl<UK: StateData + Hash + Eq, UV: StateData> SlotData for MapSlot<UK, UV> {
    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

// ---------------------------------------------------------------------------------------------
// Handles

/// The current key's value of a [`ValueStateDescriptor`] (Flink's `ValueState`).
pub struct ValueState<'a, T: StateData> {
    slot: Opened<'a>,
    /// An expired value was returned: clear it when the handle drops.
    clear_expired: bool,
    _type: PhantomData<fn() -> T>,
}

impl<T: StateData> ValueState<'_, T> {
    fn cell(&mut self) -> &mut ValueSlot<T> {
        self.slot.get::<ValueSlot<T>>()
    }

    /// The value, if set and not expired (a read, for the TTL).
    pub fn value(&mut self) -> Option<&T> {
        self.value_mut().map(|v| &*v)
    }

    /// The value to change in place, if set and not expired (a read and a write, for the TTL).
    pub fn value_mut(&mut self) -> Option<&mut T> {
        let clock = self.slot.clock;
        let cell = self.slot.get::<ValueSlot<T>>();
        cell.value.as_ref()?;
        if clock.expired(cell.stamp) {
            if !clock.return_expired {
                cell.value = None;
                return None;
            }
            self.clear_expired = true;
        } else if clock.on_read {
            cell.stamp = clock.now;
        }
        cell.value.as_mut()
    }

    /// Sets the value (a write, for the TTL).
    pub fn update(&mut self, value: T) {
        let now = self.slot.clock.now;
        let cell = self.cell();
        cell.value = Some(value);
        cell.stamp = now;
        self.clear_expired = false;
    }

    /// Removes the value.
    pub fn clear(&mut self) {
        self.cell().value = None;
    }

    /// Takes the value out if it is set and not expired (an expired one is dropped).
    fn take_live(&mut self) -> Option<T> {
        let clock = self.slot.clock;
        let cell = self.cell();
        let value = cell.value.take()?;
        (!clock.expired(cell.stamp)).then_some(value)
    }
}

impl<T: StateData> Drop for ValueState<'_, T> {
    fn drop(&mut self) {
        if self.clear_expired {
            self.clear();
        }
    }
}

/// The current key's list of a [`ListStateDescriptor`] (Flink's `ListState`).
pub struct ListState<'a, T: StateData> {
    slot: Opened<'a>,
    clean_expired: bool,
    _type: PhantomData<fn() -> T>,
}

impl<T: StateData> ListState<'_, T> {
    fn cell(&mut self) -> &mut ListSlot<T> {
        self.slot.get::<ListSlot<T>>()
    }

    /// The elements not expired, in the order they were added (a read, for the TTL).
    pub fn get(&mut self) -> std::slice::Iter<'_, T> {
        let clock = self.slot.clock;
        if clock.has_ttl() {
            let cell = self.slot.get::<ListSlot<T>>();
            if clock.return_expired {
                if cell.stamps.iter().any(|&s| clock.expired(s)) {
                    self.clean_expired = true;
                }
                if clock.on_read {
                    for s in cell.stamps.iter_mut().filter(|s| !clock.expired(**s)) {
                        *s = clock.now;
                    }
                }
            } else {
                cell.retain(|s| !clock.expired(s));
                if clock.on_read {
                    cell.stamps.iter_mut().for_each(|s| *s = clock.now);
                }
            }
        }
        self.cell().items.iter()
    }

    /// Appends an element.
    pub fn add(&mut self, value: T) {
        self.add_all(std::iter::once(value));
    }

    /// Appends elements.
    pub fn add_all(&mut self, values: impl IntoIterator<Item = T>) {
        let clock = self.slot.clock;
        let cell = self.cell();
        cell.items.extend(values);
        if clock.has_ttl() {
            cell.stamps.resize(cell.items.len(), clock.now);
        }
    }

    /// Replaces the list (an empty one clears it).
    pub fn update(&mut self, values: Vec<T>) {
        self.cell().items.clear();
        self.cell().stamps.clear();
        self.add_all(values);
        self.clean_expired = false;
    }

    /// Removes every element.
    pub fn clear(&mut self) {
        self.update(Vec::new());
    }
}

impl<T: StateData> Drop for ListState<'_, T> {
    fn drop(&mut self) {
        if self.clean_expired {
            let clock = self.slot.clock;
            self.cell().retain(|s| !clock.expired(s));
        }
    }
}

/// The access time of a map entry that was returned expired: it is removed when the handle
/// drops (entries not accessed stay until they are).
const RETURNED_EXPIRED: Timestamp = Timestamp::MIN;

/// The current key's map of a [`MapStateDescriptor`] (Flink's `MapState`).
pub struct MapState<'a, UK: StateData + Hash + Eq, UV: StateData> {
    slot: Opened<'a>,
    /// Expired entries were returned: remove them when the handle drops.
    clean_expired: bool,
    _type: PhantomData<fn() -> (UK, UV)>,
}

impl<UK: StateData + Hash + Eq, UV: StateData> MapState<'_, UK, UV> {
    fn map(&mut self) -> &mut HashMap<UK, (UV, Timestamp), FxBuildHasher> {
        &mut self.slot.get::<MapSlot<UK, UV>>().entries
    }

    /// The value of `key`, if present and not expired (a read, for the TTL).
    pub fn get(&mut self, key: &UK) -> Option<&UV> {
        let clock = self.slot.clock;
        let map = &mut self.slot.get::<MapSlot<UK, UV>>().entries;
        let (_, stamp) = map.get_mut(key)?;
        if clock.expired(*stamp) {
            if !clock.return_expired {
                map.remove(key);
                return None;
            }
            *stamp = RETURNED_EXPIRED;
            self.clean_expired = true;
        } else if clock.on_read {
            *stamp = clock.now;
        }
        map.get(key).map(|(v, _)| v)
    }

    /// Sets the value of `key` (a write, for the TTL).
    pub fn put(&mut self, key: UK, value: UV) {
        let now = self.slot.clock.now;
        self.map().insert(key, (value, now));
    }

    /// Sets several entries.
    pub fn put_all(&mut self, entries: impl IntoIterator<Item = (UK, UV)>) {
        let now = self.slot.clock.now;
        self.map()
            .extend(entries.into_iter().map(|(k, v)| (k, (v, now))));
    }

    /// Removes `key`; returns its value if it was present and not expired.
    pub fn remove(&mut self, key: &UK) -> Option<UV> {
        let clock = self.slot.clock;
        let (v, stamp) = self.map().remove(key)?;
        (!clock.expired(stamp) || clock.return_expired).then_some(v)
    }

    /// Whether `key` is present and not expired (a read, for the TTL).
    pub fn contains(&mut self, key: &UK) -> bool {
        self.get(key).is_some()
    }

    /// Applies the TTL to every entry before an iteration (a read of all of them).
    fn read_all(&mut self) -> &HashMap<UK, (UV, Timestamp), FxBuildHasher> {
        let clock = self.slot.clock;
        if clock.has_ttl() {
            let map = &mut self.slot.get::<MapSlot<UK, UV>>().entries;
            if !clock.return_expired {
                map.retain(|_, (_, s)| !clock.expired(*s));
            } else {
                for (_, s) in map.values_mut().filter(|(_, s)| clock.expired(*s)) {
                    *s = RETURNED_EXPIRED;
                    self.clean_expired = true;
                }
            }
            if clock.on_read {
                let map = self.map();
                for (_, s) in map.values_mut().filter(|(_, s)| !clock.expired(*s)) {
                    *s = clock.now;
                }
            }
        }
        self.map()
    }

    /// The entries not expired, in no particular order (a read of each, for the TTL).
    pub fn entries(&mut self) -> impl Iterator<Item = (&UK, &UV)> {
        self.read_all().iter().map(|(k, (v, _))| (k, v))
    }

    /// The keys not expired.
    pub fn keys(&mut self) -> impl Iterator<Item = &UK> {
        self.read_all().keys()
    }

    /// The values not expired.
    pub fn values(&mut self) -> impl Iterator<Item = &UV> {
        self.read_all().values().map(|(v, _)| v)
    }

    /// Whether no entry is left that is not expired (expired ones are cleaned up).
    pub fn is_empty(&mut self) -> bool {
        let clock = self.slot.clock;
        let map = self.map();
        if clock.has_ttl() && !clock.return_expired {
            map.retain(|_, (_, s)| !clock.expired(*s));
        }
        map.is_empty()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.map().clear();
        self.clean_expired = false;
    }
}

impl<UK: StateData + Hash + Eq, UV: StateData> Drop for MapState<'_, UK, UV> {
    fn drop(&mut self) {
        if self.clean_expired {
            self.map().retain(|_, (_, s)| *s != RETURNED_EXPIRED);
        }
    }
}

/// The current key's value of a [`ReducingStateDescriptor`] (Flink's `ReducingState`).
pub struct ReducingState<'a, T: StateData> {
    value: ValueState<'a, T>,
    reduce: &'a (dyn Fn(T, T) -> T + Send + Sync),
}

impl<T: StateData> ReducingState<'_, T> {
    /// Folds `value` into the state: `reduce(current, value)`, or `value` when there is none
    /// (or it expired).
    pub fn add(&mut self, value: T) {
        let next = match self.value.take_live() {
            Some(current) => (self.reduce)(current, value),
            None => value,
        };
        self.value.update(next);
    }

    /// The folded value, if any and not expired (a read, for the TTL).
    pub fn get(&mut self) -> Option<&T> {
        self.value.value()
    }

    /// Removes the value.
    pub fn clear(&mut self) {
        self.value.clear();
    }
}

/// The current key's accumulator of an [`AggregatingStateDescriptor`] (Flink's
/// `AggregatingState`).
pub struct AggregatingState<'a, IN: 'static, ACC: StateData + Clone, OUT: Data> {
    acc: ValueState<'a, ACC>,
    agg: &'a dyn AggregateFunction<IN, Acc = ACC, Out = OUT>,
}

impl<IN: 'static, ACC: StateData + Clone, OUT: Data> AggregatingState<'_, IN, ACC, OUT> {
    /// Adds `value` to the accumulator (a fresh one when there is none, or it expired).
    pub fn add(&mut self, value: IN) {
        let mut acc = self
            .acc
            .take_live()
            .unwrap_or_else(|| self.agg.create_accumulator());
        self.agg.add(&value, &mut acc);
        self.acc.update(acc);
    }

    /// The result of the accumulator, if any and not expired (a read, for the TTL).
    pub fn get(&mut self) -> Option<OUT> {
        let agg = self.agg;
        self.acc.value().map(|acc| agg.get_result(acc))
    }

    /// Removes the accumulator.
    pub fn clear(&mut self) {
        self.acc.clear();
    }
}

// ---------------------------------------------------------------------------------------------
// Access from the process context

impl<K: Hash + Eq + Clone, O> ProcessContext<'_, K, KeyedState, O> {
    /// Opens a state slot of the current key, failing the job (with the operator's name) on
    /// a type error.
    fn open_slot<S: SlotData>(&mut self, desc: &Desc) -> Opened<'_> {
        let clock = Clock::of(desc.ttl.as_ref());
        let (idx, error) = prepare::<S>(self.state(), &desc.name, &clock);
        if let Some(e) = error {
            let name = self.operator_name().to_owned();
            self.fail(SpateError::Job(format!("operator {name}: {e}")));
        }
        Opened {
            state: self.state(),
            idx,
            clock,
        }
    }

    /// The current key's value state `desc`.
    pub fn value_state<'s, T: StateData>(
        &'s mut self,
        desc: &ValueStateDescriptor<T>,
    ) -> ValueState<'s, T> {
        ValueState {
            slot: self.open_slot::<ValueSlot<T>>(&desc.desc),
            clear_expired: false,
            _type: PhantomData,
        }
    }

    /// The current key's list state `desc`.
    pub fn list_state<'s, T: StateData>(
        &'s mut self,
        desc: &ListStateDescriptor<T>,
    ) -> ListState<'s, T> {
        ListState {
            slot: self.open_slot::<ListSlot<T>>(&desc.desc),
            clean_expired: false,
            _type: PhantomData,
        }
    }

    /// The current key's map state `desc`.
    pub fn map_state<'s, UK: StateData + Hash + Eq, UV: StateData>(
        &'s mut self,
        desc: &MapStateDescriptor<UK, UV>,
    ) -> MapState<'s, UK, UV> {
        MapState {
            slot: self.open_slot::<MapSlot<UK, UV>>(&desc.desc),
            clean_expired: false,
            _type: PhantomData,
        }
    }

    /// The current key's reducing state `desc`.
    pub fn reducing_state<'s, T: StateData>(
        &'s mut self,
        desc: &'s ReducingStateDescriptor<T>,
    ) -> ReducingState<'s, T> {
        ReducingState {
            value: ValueState {
                slot: self.open_slot::<ValueSlot<T>>(&desc.desc),
                clear_expired: false,
                _type: PhantomData,
            },
            reduce: &*desc.reduce,
        }
    }

    /// The current key's aggregating state `desc`.
    pub fn aggregating_state<'s, IN: 'static, ACC: StateData + Clone, OUT: Data>(
        &'s mut self,
        desc: &'s AggregatingStateDescriptor<IN, ACC, OUT>,
    ) -> AggregatingState<'s, IN, ACC, OUT> {
        AggregatingState {
            acc: ValueState {
                slot: self.open_slot::<ValueSlot<ACC>>(&desc.desc),
                clear_expired: false,
                _type: PhantomData,
            },
            agg: &*desc.agg,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Operator state

/// A function with state per parallel instance, checkpointed as a list (Flink's
/// `ListCheckpointed` / `CheckpointedFunction` with even-split redistribution).
///
/// Each worker runs its own clone. At every checkpoint cut, [`snapshot_state`] hands in the
/// instance's state as a list of items; on a restore, the lists of all old instances are
/// joined (in worker order) and dealt out round-robin over the new instances, whose
/// [`restore_state`] receives its share before the first record. A job that starts without
/// a checkpoint does not call [`restore_state`].
///
/// [`snapshot_state`]: CheckpointedFunction::snapshot_state
/// [`restore_state`]: CheckpointedFunction::restore_state
pub trait CheckpointedFunction<T, R>: Clone + Send + Sync + 'static {
    /// One item of the instance's state list.
    type State: Data;

    /// Handles one record; the outputs pushed to `out` carry the record's timestamp.
    fn flat_map(&mut self, value: T, out: &mut Vec<R>);

    /// The instance's state at a checkpoint cut: it reflects exactly the records before it.
    fn snapshot_state(&mut self) -> Vec<Self::State>;

    /// Loads this instance's share of the restored state.
    fn restore_state(&mut self, state: Vec<Self::State>);
}

/// Item `j` of the old instances' lists joined in order goes to new instance `j % workers`:
/// instance `me`'s share.
fn even_share<X: DeserializeOwned>(
    parts: &[bytes::Bytes],
    me: usize,
    workers: usize,
    operator: &str,
) -> Result<Vec<X>, SpateError> {
    let mut share = Vec::new();
    let mut j = 0usize;
    for part in parts {
        let list: Vec<X> = bincode::deserialize(part).map_err(|e| {
            SpateError::Job(format!(
                "operator {operator}: the checkpoint's operator state does not fit this job's \
                 types (was the job changed?): {e}"
            ))
        })?;
        for item in list {
            if j % workers == me {
                share.push(item);
            }
            j += 1;
        }
    }
    Ok(share)
}

impl<T: Data> DataStream<T> {
    /// Applies `f`, a function with operator state (one instance per worker, not per key):
    /// its state list is checkpointed at every cut and, on a restore, redistributed evenly
    /// over the new workers (see [`CheckpointedFunction`]).
    pub fn flat_map_with_operator_state<R: Data, F: CheckpointedFunction<T, R>>(
        &self,
        f: F,
    ) -> DataStream<R> {
        self.unary_node(
            "flat_map_with_operator_state",
            "forward",
            move |ctx, input, name| {
                let mut f = f.clone();
                let restored = ctx.restored_parts();
                let shared = std::sync::Arc::clone(ctx.shared());
                if !restored.is_empty() {
                    match even_share(&restored, ctx.index(), ctx.peers(), name) {
                        Ok(share) => f.restore_state(share),
                        Err(e) => shared.fail(e),
                    }
                }
                let mut cuts = Cuts::new(ctx.stateful());
                let operator = name.to_owned();
                let cells = ctx.cells();
                let data = input
                    .data
                    .unary_frontier::<CapacityContainerBuilder<Vec<(Timestamp, R)>>, _, _, _>(
                        Pipeline,
                        name,
                        move |_, _| {
                            let mut out: Vec<R> = Vec::new();
                            let mut emitted: Vec<(Timestamp, R)> = Vec::new();
                            let guarded = std::sync::Arc::clone(&shared);
                            let op = operator.clone();
                            let mut apply = move |f: &mut F, batch: &mut Vec<(Timestamp, T)>| {
                                let done = crate::function::guard(&guarded, &op, || {
                                    for (ts, x) in batch.drain(..) {
                                        f.flat_map(x, &mut out);
                                        emitted.extend(out.drain(..).map(|r| (ts, r)));
                                    }
                                });
                                if done.is_none() {
                                    batch.clear();
                                    out.clear();
                                    emitted.clear();
                                }
                                std::mem::take(&mut emitted)
                            };
                            move |(input, frontier), output| {
                                let _busy = cells.busy();
                                input.for_each(|cap, batch| {
                                    cells.count_in(batch.len());
                                    let Some(&epoch) = cap.least() else { return };
                                    if cuts.holds(epoch) {
                                        if let Some(held) = cap.retain_least(0) {
                                            cuts.hold(held, std::mem::take(batch));
                                        }
                                        return;
                                    }
                                    let mut results = apply(&mut f, batch);
                                    if !results.is_empty() {
                                        cells.count_out(results.len());
                                        output.session(&cap).give_container(&mut results);
                                    }
                                });
                                while cuts.due(frontier) {
                                    let bytes = bincode::serialize(&f.snapshot_state())
                                        .map_err(|e| {
                                            shared.fail(SpateError::Internal(format!(
                                                "operator {operator}: cannot snapshot its \
                                                 operator state: {e}"
                                            )))
                                        })
                                        .ok();
                                    for (cap, mut batch) in cuts.taken(bytes) {
                                        let mut results = apply(&mut f, &mut batch);
                                        if !results.is_empty() {
                                            cells.count_out(results.len());
                                            output.session(&cap).give_container(&mut results);
                                        }
                                    }
                                }
                                for (cap, mut batch) in cuts.released() {
                                    let mut results = apply(&mut f, &mut batch);
                                    if !results.is_empty() {
                                        cells.count_out(results.len());
                                        output.session(&cap).give_container(&mut results);
                                    }
                                }
                            }
                        },
                    );
                Flow { data, wm: input.wm }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        static NOW: Cell<Timestamp> = const { Cell::new(0) };
    }

    fn at(t: Timestamp) {
        NOW.with(|n| n.set(t));
    }

    fn ttl(ms: u64) -> StateTtlConfig {
        StateTtlConfig::new(Duration::from_millis(ms)).with_time_provider(|| NOW.with(Cell::get))
    }

    fn no_fail(e: SpateError) {
        panic!("unexpected state error: {e}");
    }

    fn value<'a, T: StateData>(
        s: &'a mut Option<KeyedState>,
        d: &ValueStateDescriptor<T>,
    ) -> ValueState<'a, T> {
        ValueState {
            slot: open::<ValueSlot<T>>(s, &d.desc, no_fail),
            clear_expired: false,
            _type: PhantomData,
        }
    }

    fn list<'a, T: StateData>(
        s: &'a mut Option<KeyedState>,
        d: &ListStateDescriptor<T>,
    ) -> ListState<'a, T> {
        ListState {
            slot: open::<ListSlot<T>>(s, &d.desc, no_fail),
            clean_expired: false,
            _type: PhantomData,
        }
    }

    fn map<'a>(
        s: &'a mut Option<KeyedState>,
        d: &MapStateDescriptor<u32, String>,
    ) -> MapState<'a, u32, String> {
        MapState {
            slot: open::<MapSlot<u32, String>>(s, &d.desc, no_fail),
            clean_expired: false,
            _type: PhantomData,
        }
    }

    fn roundtrip(s: &Option<KeyedState>) -> Option<KeyedState> {
        bincode::deserialize(&bincode::serialize(s).unwrap()).unwrap()
    }

    #[test]
    fn named_states_survive_serialization_and_decode_on_first_use() {
        let v = ValueStateDescriptor::<f64>::new("v");
        let l = ListStateDescriptor::<u64>::new("l");
        let m = MapStateDescriptor::<u32, String>::new("m");
        let mut s = None;
        value(&mut s, &v).update(1.5);
        list(&mut s, &l).add_all([3, 1, 2]);
        map(&mut s, &m).put(7, "seven".into());
        let mut s = roundtrip(&s);
        assert_eq!(
            s.as_ref().unwrap().names().collect::<Vec<_>>(),
            ["v", "l", "m"]
        );
        assert_eq!(value(&mut s, &v).value(), Some(&1.5));
        // Encoded and live states serialize alike.
        let mut s = roundtrip(&s);
        assert_eq!(
            list(&mut s, &l).get().copied().collect::<Vec<_>>(),
            [3, 1, 2]
        );
        assert_eq!(map(&mut s, &m).get(&7).map(String::as_str), Some("seven"));
    }

    #[test]
    fn cleared_states_leave_no_trace_of_the_key() {
        let v = ValueStateDescriptor::<u8>::new("v");
        let l = ListStateDescriptor::<u8>::new("l");
        let mut s = None;
        assert_eq!(value(&mut s, &v).value(), None);
        assert!(s.is_none(), "a read of absent state creates nothing");
        value(&mut s, &v).update(1);
        list(&mut s, &l).add(2);
        value(&mut s, &v).clear();
        assert_eq!(s.as_ref().unwrap().names().collect::<Vec<_>>(), ["l"]);
        list(&mut s, &l).update(Vec::new());
        assert!(s.is_none());
    }

    #[test]
    fn a_state_used_with_two_types_is_an_error_not_a_panic() {
        let mut s = None;
        value(&mut s, &ValueStateDescriptor::<u64>::new("x")).update(3);
        let mut failed = None;
        let d = Desc::new("x");
        drop(open::<ListSlot<String>>(&mut s, &d, |e| failed = Some(e)));
        assert!(failed.unwrap().to_string().contains("state `x`"));
        let mut s = roundtrip(&Some({
            let mut k = None;
            value(&mut k, &ValueStateDescriptor::<u64>::new("x")).update(3);
            k.unwrap()
        }));
        let mut failed = None;
        drop(open::<MapSlot<String, String>>(&mut s, &d, |e| {
            failed = Some(e)
        }));
        assert!(failed.unwrap().to_string().contains("does not decode"));
    }

    #[test]
    fn value_ttl_on_create_and_write_never_returning_expired() {
        let d = ValueStateDescriptor::<u32>::new("v").enable_time_to_live(ttl(100));
        let mut s = None;
        at(1000);
        value(&mut s, &d).update(1);
        at(1099);
        assert_eq!(value(&mut s, &d).value(), Some(&1));
        // Reads do not refresh: written at 1000, expired at 1100.
        at(1100);
        assert_eq!(value(&mut s, &d).value(), None);
        assert!(s.is_none(), "cleaned on access");
    }

    #[test]
    fn value_ttl_on_read_and_write_is_refreshed_by_reads() {
        let d = ValueStateDescriptor::<u32>::new("v")
            .enable_time_to_live(ttl(100).update_ttl_on_read_and_write());
        let mut s = None;
        at(1000);
        value(&mut s, &d).update(1);
        at(1090);
        assert_eq!(value(&mut s, &d).value(), Some(&1));
        at(1180);
        assert_eq!(value(&mut s, &d).value(), Some(&1));
        at(1280);
        assert_eq!(value(&mut s, &d).value(), None);
    }

    #[test]
    fn expired_value_is_returned_once_if_not_cleaned_up() {
        let d = ValueStateDescriptor::<u32>::new("v")
            .enable_time_to_live(ttl(100).return_expired_if_not_cleaned_up());
        let mut s = None;
        at(0);
        value(&mut s, &d).update(1);
        at(500);
        {
            let mut h = value(&mut s, &d);
            assert_eq!(h.value(), Some(&1));
            assert_eq!(h.value(), Some(&1), "within one access");
        }
        assert_eq!(
            value(&mut s, &d).value(),
            None,
            "cleaned when the handle dropped"
        );
        // Writing after finding it expired keeps the new value.
        value(&mut s, &d).update(2);
        at(700);
        {
            let mut h = value(&mut s, &d);
            assert_eq!(h.value(), Some(&2));
            h.update(3);
        }
        assert_eq!(value(&mut s, &d).value(), Some(&3));
    }

    #[test]
    fn list_and_map_expire_per_element() {
        let l = ListStateDescriptor::<u32>::new("l").enable_time_to_live(ttl(100));
        let m = MapStateDescriptor::<u32, String>::new("m").enable_time_to_live(ttl(100));
        let mut s = None;
        at(0);
        list(&mut s, &l).add(1);
        map(&mut s, &m).put(1, "a".into());
        at(50);
        list(&mut s, &l).add(2);
        map(&mut s, &m).put(2, "b".into());
        at(120);
        assert_eq!(list(&mut s, &l).get().copied().collect::<Vec<_>>(), [2]);
        assert!(!map(&mut s, &m).contains(&1));
        assert_eq!(map(&mut s, &m).keys().copied().collect::<Vec<_>>(), [2]);
        at(150);
        assert!(map(&mut s, &m).is_empty());
        assert_eq!(list(&mut s, &l).get().count(), 0);
        assert!(s.is_none());
    }

    #[test]
    fn list_returns_expired_elements_once_then_cleans_them() {
        let l = ListStateDescriptor::<u32>::new("l").enable_time_to_live(
            ttl(100)
                .return_expired_if_not_cleaned_up()
                .update_ttl_on_read_and_write(),
        );
        let mut s = None;
        at(0);
        list(&mut s, &l).add(1);
        at(60);
        list(&mut s, &l).add(2);
        at(100);
        assert_eq!(list(&mut s, &l).get().copied().collect::<Vec<_>>(), [1, 2]);
        // 2 was read at 100 (refreshed to 100), 1 was already expired and is gone.
        at(199);
        assert_eq!(list(&mut s, &l).get().copied().collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn ttl_enabled_on_restore_stamps_old_elements_with_the_restore_time() {
        let plain = ListStateDescriptor::<u32>::new("l");
        let mut s = None;
        list(&mut s, &plain).add_all([1, 2]);
        let mut s = roundtrip(&s);
        let timed = ListStateDescriptor::<u32>::new("l").enable_time_to_live(ttl(10));
        at(5000);
        assert_eq!(list(&mut s, &timed).get().count(), 2);
        at(5010);
        assert_eq!(list(&mut s, &timed).get().count(), 0);
    }

    #[test]
    fn even_share_deals_every_item_once() {
        let parts: Vec<bytes::Bytes> = [vec![0u32, 1, 2, 3, 4], vec![], vec![5, 6]]
            .iter()
            .map(|l| bytes::Bytes::from(bincode::serialize(l).unwrap()))
            .collect();
        let shares: Vec<Vec<u32>> = (0..3)
            .map(|me| even_share(&parts, me, 3, "op").unwrap())
            .collect();
        assert_eq!(shares, [vec![0, 3, 6], vec![1, 4], vec![2, 5]]);
        assert!(even_share::<String>(&parts[..1], 0, 1, "op").is_err());
    }
}
