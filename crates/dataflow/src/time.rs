//! Event time: timestamps, watermark strategies, and how watermarks travel.
//!
//! Records carry their event timestamp next to them (`(timestamp, record)` in the timely
//! streams; [`NO_TIMESTAMP`] until an assigner sets one), as Flink's `StreamRecord` does, so
//! timestamps survive `map`, `filter` and exchanges, and window results get the window's
//! `max_timestamp`.
//!
//! Watermarks are **data on a side stream**, not timely timestamps. Every stream of the plan
//! has a companion stream of [`WmMsg`] at the same epochs. The rules:
//!
//! * A source emits, on its worker, the minimum watermark over its active splits (each split
//!   has its own generator), periodically (`auto_watermark_interval`, 200 ms as in Flink),
//!   and `MAX_WATERMARK` when it ends.
//! * Forward operators pass the companion on untouched: no per-record cost.
//! * Where records are exchanged, the watermark is broadcast, and a *combiner* takes the
//!   minimum over every upstream worker (and every input), skipping idle ones, never going
//!   back ([`WmTracker`]).
//! * A message at epoch `e` certifies that every record sent before it, on that path, is at an
//!   epoch `<= e`. An operator that acts on watermarks (windows, timers, joins) therefore
//!   applies a message only once its data input's frontier has passed `e` ([`WmGate`]): then
//!   every record that preceded the watermark has arrived, whatever the channels' order.
//!
//! Why not watermarks in the timely timestamp: epochs must stay the unit of flow control and of
//! checkpoints (a checkpoint is a cut at an epoch, identical on every worker), and a product
//! timestamp `(epoch, event time)` would make the frontier partially ordered, multiply the
//! progress traffic by the number of distinct event times, and tie watermark granularity to
//! the scheduler. As data, a watermark is one small message per worker per interval, it is
//! never per key, and it is cut by checkpoints like any record.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxBuildHasher;
use spate_types::SplitMark;

use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::vec::{Broadcast, Map};
use timely::dataflow::operators::{Capability, Concatenate, Operator};
use timely::dataflow::Scope;
use timely::progress::frontier::MutableAntichain;

use crate::plan::{Epoch, WStream};

/// Milliseconds since the Unix epoch, as Flink's timestamps.
pub type Timestamp = i64;

/// The timestamp of a record that has none (Flink's `Long.MIN_VALUE` marker).
pub const NO_TIMESTAMP: Timestamp = i64::MIN;

/// The watermark that ends event time: every window and timer fires.
pub const MAX_WATERMARK: Timestamp = i64::MAX;

/// The current wall-clock time in milliseconds, for processing time.
pub fn processing_time_now() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// One watermark message on a companion stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WmMsg {
    /// Which upstream instance (worker or input) it speaks for, at the receiving combiner.
    pub slot: u32,
    /// The watermark; meaningless while `idle`.
    pub wm: Timestamp,
    /// The sender has no data to give for now and leaves the minimum (Flink's `IDLE` status).
    pub idle: bool,
}

/// Decides the watermarks of one split or one operator from the records it sees (Flink's
/// `WatermarkGenerator`).
pub trait WatermarkGenerator<T>: Send {
    /// Sees every record with its assigned timestamp.
    fn on_event(&mut self, record: &T, timestamp: Timestamp);
    /// The watermark to emit now, called every `auto_watermark_interval`; `None` for none yet.
    fn on_periodic_emit(&mut self) -> Option<Timestamp>;
}

/// `max_timestamp - bound - 1`, as Flink's `BoundedOutOfOrdernessWatermarks`.
#[derive(Debug, Clone)]
pub struct BoundedOutOfOrderness {
    max_ts: Timestamp,
    bound_ms: i64,
}

impl BoundedOutOfOrderness {
    /// A generator that tolerates records up to `bound` late.
    pub fn new(bound: Duration) -> Self {
        let bound_ms = i64::try_from(bound.as_millis()).unwrap_or(i64::MAX);
        BoundedOutOfOrderness {
            max_ts: NO_TIMESTAMP.saturating_add(bound_ms).saturating_add(1),
            bound_ms,
        }
    }
}

impl<T> WatermarkGenerator<T> for BoundedOutOfOrderness {
    fn on_event(&mut self, _record: &T, timestamp: Timestamp) {
        self.max_ts = self.max_ts.max(timestamp);
    }
    fn on_periodic_emit(&mut self) -> Option<Timestamp> {
        Some(self.max_ts.saturating_sub(self.bound_ms).saturating_sub(1))
    }
}

type TimestampFn<T> = Arc<dyn Fn(&T, Timestamp) -> Timestamp + Send + Sync>;
type GeneratorFactory<T> = Arc<dyn Fn() -> Box<dyn WatermarkGenerator<T>> + Send + Sync>;

/// How a stream gets timestamps and watermarks (Flink's `WatermarkStrategy`).
///
/// ```
/// use std::time::Duration;
/// use spate_dataflow::WatermarkStrategy;
/// let s = WatermarkStrategy::<(i64, String)>::for_bounded_out_of_orderness(Duration::from_secs(4))
///     .with_timestamp_assigner(|r, _| r.0)
///     .with_idleness(Duration::from_secs(10));
/// # let _ = s;
/// ```
pub struct WatermarkStrategy<T> {
    pub(crate) generator: GeneratorFactory<T>,
    pub(crate) assigner: Option<TimestampFn<T>>,
    pub(crate) idleness: Option<Duration>,
}

impl<T> Clone for WatermarkStrategy<T> {
    fn clone(&self) -> Self {
        WatermarkStrategy {
            generator: Arc::clone(&self.generator),
            assigner: self.assigner.clone(),
            idleness: self.idleness,
        }
    }
}

impl<T: 'static> WatermarkStrategy<T> {
    /// Watermarks for timestamps that never go back: `max_timestamp - 1`.
    pub fn for_monotonous_timestamps() -> Self {
        Self::for_bounded_out_of_orderness(Duration::ZERO)
    }

    /// Watermarks that trail the largest timestamp seen by `bound` (and 1 ms).
    pub fn for_bounded_out_of_orderness(bound: Duration) -> Self {
        Self::for_generator(move || BoundedOutOfOrderness::new(bound))
    }

    /// A custom generator, made fresh for every split or operator instance.
    pub fn for_generator<G: WatermarkGenerator<T> + 'static>(
        make: impl Fn() -> G + Send + Sync + 'static,
    ) -> Self {
        WatermarkStrategy {
            generator: Arc::new(move || Box::new(make())),
            assigner: None,
            idleness: None,
        }
    }

    /// Takes each record's timestamp from `f(record, previous_timestamp)`.
    pub fn with_timestamp_assigner(
        mut self,
        f: impl Fn(&T, Timestamp) -> Timestamp + Send + Sync + 'static,
    ) -> Self {
        self.assigner = Some(Arc::new(f));
        self
    }

    /// Marks a split (or operator instance) idle after `timeout` without records: it leaves
    /// the watermark minimum until records come back.
    pub fn with_idleness(mut self, timeout: Duration) -> Self {
        self.idleness = Some(timeout);
        self
    }

    pub(crate) fn timestamp(&self, record: &T, previous: Timestamp) -> Timestamp {
        match &self.assigner {
            Some(f) => f(record, previous),
            None => previous,
        }
    }
}

/// The minimum over several upstream watermarks, skipping idle ones and never going back.
#[derive(Debug, Clone)]
pub(crate) struct WmTracker {
    slots: Vec<(Timestamp, bool)>,
    current: Timestamp,
    idle: bool,
}

impl WmTracker {
    pub(crate) fn new(slots: usize) -> Self {
        WmTracker {
            slots: vec![(NO_TIMESTAMP, false); slots.max(1)],
            current: NO_TIMESTAMP,
            idle: false,
        }
    }

    /// Takes one message in; returns the combined message to send on, if it changed.
    pub(crate) fn update(&mut self, msg: &WmMsg) -> Option<WmMsg> {
        let slot = msg.slot as usize;
        if slot >= self.slots.len() {
            return None;
        }
        let entry = &mut self.slots[slot];
        entry.1 = msg.idle;
        if !msg.idle {
            entry.0 = entry.0.max(msg.wm);
        }
        let active_min = self.slots.iter().filter(|s| !s.1).map(|s| s.0).min();
        let (wm, idle) = match active_min {
            Some(min) => (self.current.max(min), false),
            None => (self.current, true),
        };
        if wm != self.current || idle != self.idle {
            self.current = wm;
            self.idle = idle;
            Some(WmMsg { slot: 0, wm, idle })
        } else {
            None
        }
    }
}

/// Holds watermark messages until the data they follow has arrived (see the module docs),
/// each with the capability `C` to emit at its epoch (one, or one per output of the operator).
pub(crate) struct WmGate<C = Capability<Epoch>> {
    pending: Vec<(C, WmMsg)>,
}

/// A held capability's epoch.
pub(crate) trait AtEpoch {
    /// The epoch.
    fn epoch(&self) -> Epoch;
}

impl AtEpoch for Capability<Epoch> {
    fn epoch(&self) -> Epoch {
        *self.time()
    }
}

impl<C: AtEpoch> WmGate<C> {
    pub(crate) fn new() -> Self {
        WmGate {
            pending: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, cap: C, msg: WmMsg) {
        self.pending.push((cap, msg));
    }

    /// The messages whose epoch the data frontier has passed, in epoch order, with their
    /// capabilities (to emit what they trigger, and the watermark itself, at their epoch).
    /// Only messages at epochs below `limit` are returned (a checkpoint cut not yet taken).
    pub(crate) fn ready(
        &mut self,
        data_frontier: &MutableAntichain<Epoch>,
        limit: Epoch,
    ) -> Vec<(C, WmMsg)> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        let (ready, waiting): (Vec<_>, Vec<_>) = self
            .pending
            .drain(..)
            .partition(|(cap, _)| cap.epoch() < limit && !data_frontier.less_equal(&cap.epoch()));
        self.pending = waiting;
        let mut ready = ready;
        ready.sort_by_key(|(cap, _)| cap.epoch());
        ready
    }
}

/// Combines the messages of `slots` senders into this worker's own watermark: the minimum
/// over the active slots, sent on at the latest epoch of any message it saw (so it still
/// follows every record that preceded any of them).
pub(crate) fn combine<'s>(input: WStream<'s>, slots: usize, name: &str) -> WStream<'s> {
    input.unary::<CapacityContainerBuilder<Vec<WmMsg>>, _, _, _>(
        Pipeline,
        &format!("{name}.watermarks"),
        move |_, _| {
            let mut tracker = WmTracker::new(slots);
            let mut max_epoch: Epoch = 0;
            move |input, output| {
                input.for_each(|cap, one_batch| {
                    let data = std::iter::once(one_batch);
                    let Some(&epoch) = cap.least() else { return };
                    max_epoch = max_epoch.max(epoch);
                    let mut last = None;
                    for batch in data {
                        for msg in batch.drain(..) {
                            if let Some(out) = tracker.update(&msg) {
                                last = Some(out);
                            }
                        }
                    }
                    if let Some(out) = last {
                        let at = cap.delayed(&max_epoch, 0);
                        output.session(&at).give(out);
                    }
                });
            }
        },
    )
}

/// The watermark a worker sees after an exchange: every worker's, broadcast and combined.
pub(crate) fn exchange<'s>(
    input: WStream<'s>,
    index: usize,
    peers: usize,
    name: &str,
) -> WStream<'s> {
    if peers == 1 {
        return input;
    }
    let slot = index as u32;
    let spread = input.map(move |m| WmMsg { slot, ..m }).broadcast();
    combine(spread, peers, name)
}

/// The watermark of several inputs on one worker: their minimum.
pub(crate) fn merge<'s>(
    scope: Scope<'s, Epoch>,
    inputs: Vec<WStream<'s>>,
    name: &str,
) -> WStream<'s> {
    if inputs.len() == 1 {
        return inputs.into_iter().next().expect("one input");
    }
    let n = inputs.len();
    let tagged: Vec<WStream<'s>> = inputs
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            s.map(move |m| WmMsg {
                slot: i as u32,
                ..m
            })
        })
        .collect();
    combine(scope.concatenate(tagged), n, name)
}

/// One split's watermark generator inside a source.
struct SplitState<T> {
    generator: Box<dyn WatermarkGenerator<T>>,
    last_active: Instant,
    wm: Timestamp,
    /// Announced ([`SplitMark::Pending`]) and not started: it holds the minimum at its `wm`
    /// and is never idle.
    pending: bool,
}

/// A source instance's timestamps and watermarks: one generator per split, the minimum over
/// the active splits emitted every `interval` (Flink's split-aware watermark output).
pub(crate) struct SourceWatermarks<T> {
    strategy: WatermarkStrategy<T>,
    splits: HashMap<u32, SplitState<T>, FxBuildHasher>,
    current: u32,
    interval: Duration,
    last_emit: Instant,
    last_record: Instant,
    emitted: Timestamp,
    idle: bool,
}

impl<T: 'static> SourceWatermarks<T> {
    pub(crate) fn new(strategy: WatermarkStrategy<T>, interval: Duration) -> Self {
        let now = Instant::now();
        SourceWatermarks {
            strategy,
            splits: HashMap::default(),
            current: 0,
            interval,
            last_emit: now,
            last_record: now,
            emitted: NO_TIMESTAMP,
            idle: false,
        }
    }

    fn split_mut(&mut self, split: u32, now: Instant) -> &mut SplitState<T> {
        let make = &self.strategy.generator;
        self.splits.entry(split).or_insert_with(|| SplitState {
            generator: make(),
            last_active: now,
            wm: NO_TIMESTAMP,
            pending: false,
        })
    }

    fn apply_mark(&mut self, mark: SplitMark, now: Instant) {
        match mark {
            SplitMark::Start { split, .. } => {
                self.current = split;
                let state = self.split_mut(split, now);
                state.last_active = now;
                state.pending = false;
            }
            SplitMark::Pending { split, .. } => {
                if !self.splits.contains_key(&split) {
                    self.split_mut(split, now).pending = true;
                }
            }
            SplitMark::Finished { split, .. } => {
                self.splits.remove(&split);
            }
        }
    }

    /// Timestamps `records` (read in one poll, with the split `marks` the reader made) into
    /// `out`, feeding each split's generator.
    pub(crate) fn assign(
        &mut self,
        records: &mut Vec<T>,
        marks: &mut Vec<SplitMark>,
        out: &mut Vec<(Timestamp, T)>,
        now: Instant,
    ) {
        let n = records.len();
        if n > 0 {
            self.last_record = now;
        }
        out.reserve(n);
        let mut marks_iter = marks.drain(..).peekable();
        let mut records = records.drain(..);
        let mut at = 0;
        // Runs of records between marks: one split lookup per run, not per record.
        while at < n {
            while let Some(mark) = marks_iter.next_if(|m| mark_at(m) <= at) {
                self.apply_mark(mark, now);
            }
            let end = marks_iter.peek().map_or(n, |m| mark_at(m).min(n));
            let SourceWatermarks {
                strategy,
                splits,
                current,
                ..
            } = self;
            let split = splits.entry(*current).or_insert_with(|| SplitState {
                generator: (strategy.generator)(),
                last_active: now,
                wm: NO_TIMESTAMP,
                pending: false,
            });
            split.last_active = now;
            split.pending = false;
            for record in records.by_ref().take(end - at) {
                let ts = strategy.timestamp(&record, NO_TIMESTAMP);
                split.generator.on_event(&record, ts);
                out.push((ts, record));
            }
            at = end;
        }
        for mark in marks_iter {
            self.apply_mark(mark, now);
        }
    }

    /// The watermark message to send now, if one is due and it says something new.
    pub(crate) fn tick(&mut self, now: Instant) -> Option<WmMsg> {
        if now.duration_since(self.last_emit) < self.interval {
            return None;
        }
        self.last_emit = now;
        let idleness = self.strategy.idleness;
        let mut active_min: Option<Timestamp> = None;
        for split in self.splits.values_mut() {
            if let Some(wm) = split.generator.on_periodic_emit() {
                split.wm = split.wm.max(wm);
            }
            let idle = !split.pending
                && idleness.is_some_and(|t| now.duration_since(split.last_active) >= t);
            if !idle {
                active_min = Some(active_min.map_or(split.wm, |m| m.min(split.wm)));
            }
        }
        match active_min {
            Some(wm) => {
                let wm = wm.max(self.emitted);
                if wm > self.emitted || self.idle {
                    self.emitted = wm;
                    self.idle = false;
                    return Some(WmMsg {
                        slot: 0,
                        wm,
                        idle: false,
                    });
                }
                None
            }
            None => {
                // No split is active: with an idleness timeout, the whole instance is idle
                // once it has had nothing for that long.
                let idle = idleness.is_some_and(|t| now.duration_since(self.last_record) >= t);
                if idle && !self.idle {
                    self.idle = true;
                    return Some(WmMsg {
                        slot: 0,
                        wm: self.emitted,
                        idle: true,
                    });
                }
                None
            }
        }
    }
}

fn mark_at(mark: &SplitMark) -> usize {
    match *mark {
        SplitMark::Start { at, .. }
        | SplitMark::Pending { at, .. }
        | SplitMark::Finished { at, .. } => at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(slot: u32, wm: i64, idle: bool) -> WmMsg {
        WmMsg { slot, wm, idle }
    }

    #[test]
    fn tracker_is_the_minimum_over_active_slots_and_never_goes_back() {
        let mut t = WmTracker::new(2);
        assert_eq!(t.update(&msg(0, 10, false)), None, "slot 1 still unknown");
        assert_eq!(t.update(&msg(1, 5, false)).map(|m| m.wm), Some(5));
        assert_eq!(t.update(&msg(1, 20, false)).map(|m| m.wm), Some(10));
        // Slot 0 goes idle: slot 1 alone decides.
        assert_eq!(t.update(&msg(0, 0, true)).map(|m| m.wm), Some(20));
        // Slot 0 comes back behind: the output does not go back.
        assert_eq!(t.update(&msg(0, 12, false)), None);
        // Both idle: the output says idle.
        t.update(&msg(0, 0, true));
        assert_eq!(t.update(&msg(1, 0, true)), Some(msg(0, 20, true)));
    }

    #[test]
    fn bounded_out_of_orderness_trails_the_maximum() {
        let mut g = BoundedOutOfOrderness::new(Duration::from_millis(100));
        WatermarkGenerator::<()>::on_event(&mut g, &(), 1_000);
        WatermarkGenerator::<()>::on_event(&mut g, &(), 900);
        assert_eq!(
            WatermarkGenerator::<()>::on_periodic_emit(&mut g),
            Some(899)
        );
    }
}
