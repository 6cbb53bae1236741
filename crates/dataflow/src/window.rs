//! Windows on keyed streams, with Flink's semantics: assigners, triggers, window functions,
//! allowed lateness and a late-data side output.
//!
//! `keyed.window(assigner)` gives a [`WindowedStream`]; a window function turns each fired
//! window into results. The operator is a keyed process function ([`crate::process`]): per key
//! it keeps the key's open windows, each with its contents and its trigger's state, and it
//! fires on the watermark (event time) or the wall clock (processing time).
//!
//! * Assigners: [`TumblingEventTimeWindows`], [`SlidingEventTimeWindows`],
//!   [`EventTimeSessionWindows`] (merging), their processing-time twins, and
//!   [`GlobalWindows`] (with a count trigger: [`KeyedStream::count_window`]).
//! * Triggers: [`EventTimeTrigger`], [`ProcessingTimeTrigger`], [`CountTrigger`],
//!   [`PurgingTrigger`], [`ContinuousEventTimeTrigger`], [`ContinuousProcessingTimeTrigger`].
//! * Functions: incremental [`WindowedStream::reduce`] and [`WindowedStream::aggregate`] (one
//!   accumulator per key and window, never the elements), full [`WindowedStream::process`]
//!   with the window's metadata, and the combined `reduce_with` / `aggregate_with`.
//! * Lateness, as Flink: an element is late when `timestamp + allowed_lateness <= watermark`
//!   and no window still takes it; a window is late once `max_timestamp + allowed_lateness <=
//!   watermark`. Late elements inside the lateness re-fire their window; beyond it they go to
//!   the late side output, or are dropped and counted in `numLateRecordsDropped`.
//!
//! * Sliding windows of an incremental function with the default trigger are kept as slices
//!   of `gcd(size, slide)` per key: a record is added once, into its slice, and a window that
//!   fires merges its slices (`sliced`, Flink's slicing window aggregation); the results and
//!   the lateness rules are the per-window operator's. [`WindowedStream::local_global`] adds
//!   a pre-aggregation per key and slice on each worker before the shuffle (two-phase).
//!   [`WindowedStream::slicing`]`(false)` keeps one accumulator per window.
//!
//! Results carry the timestamp `window.max_timestamp()`, so a second windowed stage can follow.

use std::any::{Any, TypeId};
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use spate_types::{Data, SpateError};

use crate::keyed::{KeyFn, KeyedStream};
use crate::process::{
    build_keyed_process, KeyedProcessFunction, OutputTag, ProcessContext, TimeDomain,
};
use crate::stream::DataStream;
use crate::time::{processing_time_now, Timestamp, MAX_WATERMARK, NO_TIMESTAMP};

mod sliced;

use sliced::{local_aggregate, Global, Partial, SlicedOperator, Slicing};

/// The windows an assigner gives one element (inline up to 8; use it like a `Vec`).
pub type WindowBuf<W> = SmallVec<[W; 8]>;

/// Timer requests of a trigger call.
type TimerBuf = SmallVec<[(TimeDomain, Timestamp); 4]>;

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A window: a group of elements of one key that fire together.
pub trait Window:
    Clone + PartialEq + Eq + Hash + Debug + Send + Sync + Serialize + DeserializeOwned + 'static
{
    /// The largest timestamp that belongs to the window; results carry it.
    fn max_timestamp(&self) -> Timestamp;
    /// For merging assigners: the window covering both, if they overlap or touch.
    fn merge_with(&self, other: &Self) -> Option<Self> {
        let _ = other;
        None
    }
}

/// A window of time `[start, end)`, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TimeWindow {
    /// The first millisecond in the window.
    pub start: Timestamp,
    /// The first millisecond after the window.
    pub end: Timestamp,
}

impl TimeWindow {
    /// The window `[start, end)`.
    pub fn new(start: Timestamp, end: Timestamp) -> Self {
        TimeWindow { start, end }
    }

    /// Flink's `TimeWindow.getWindowStartWithOffset`: the start of the window of `size` (and
    /// `offset`) that holds `timestamp`; at the low end of the range the start saturates at
    /// `i64::MIN` (Flink's `long` arithmetic wraps around there).
    pub fn start_with_offset(timestamp: Timestamp, offset: i64, size: i64) -> Timestamp {
        Self::aligned(timestamp, offset, size).start
    }

    /// The window of `size` (and `offset`) that holds `timestamp`, computed without overflow:
    /// near the ends of the `i64` range it is cut at `i64::MIN` and `i64::MAX`. (The last
    /// window ends at `i64::MAX`, exclusive, so a record at `i64::MAX` lies past its
    /// `max_timestamp`; it still belongs to it.)
    pub(crate) fn aligned(timestamp: Timestamp, offset: i64, size: i64) -> TimeWindow {
        let size = i128::from(size.max(1));
        let ts = i128::from(timestamp);
        let start = ts - (ts - i128::from(offset)).rem_euclid(size);
        TimeWindow::new(saturate(start), saturate(start + size))
    }
}

/// An `i128` time cut into the `i64` range.
fn saturate(t: i128) -> Timestamp {
    t.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

impl Window for TimeWindow {
    fn max_timestamp(&self) -> Timestamp {
        self.end.saturating_sub(1)
    }
    fn merge_with(&self, other: &Self) -> Option<Self> {
        // Flink's `TimeWindow.intersects`: touching windows merge too.
        if self.start <= other.end && self.end >= other.start {
            Some(TimeWindow::new(
                self.start.min(other.start),
                self.end.max(other.end),
            ))
        } else {
            None
        }
    }
}

/// The one window of [`GlobalWindows`]: everything of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GlobalWindow;

impl Window for GlobalWindow {
    fn max_timestamp(&self) -> Timestamp {
        MAX_WATERMARK
    }
}

/// Puts elements into windows.
pub trait WindowAssigner<T>: Send + Sync + 'static {
    /// The kind of window.
    type W: Window;
    /// The windows of an element with `timestamp`, at wall-clock `processing_time`.
    fn assign_windows(
        &self,
        element: &T,
        timestamp: Timestamp,
        processing_time: Timestamp,
        out: &mut WindowBuf<Self::W>,
    );
    /// The trigger used when none is set.
    fn default_trigger(&self) -> Arc<dyn Trigger<T, Self::W>>;
    /// Whether windows follow event time (and lateness applies).
    fn is_event_time(&self) -> bool;
    /// Whether windows merge (sessions).
    fn is_merging(&self) -> bool {
        false
    }
}

/// Fixed-size, non-overlapping event-time windows.
#[derive(Debug, Clone, Copy)]
pub struct TumblingEventTimeWindows {
    size: i64,
    offset: i64,
}

impl TumblingEventTimeWindows {
    /// Windows of `size`, aligned to the epoch.
    pub fn of(size: Duration) -> Self {
        TumblingEventTimeWindows {
            size: millis(size).max(1),
            offset: 0,
        }
    }
    /// Windows of `size`, shifted by `offset`.
    pub fn with_offset(size: Duration, offset: Duration) -> Self {
        let size = millis(size).max(1);
        TumblingEventTimeWindows {
            size,
            offset: millis(offset) % size,
        }
    }
}

impl<T> WindowAssigner<T> for TumblingEventTimeWindows {
    type W = TimeWindow;
    fn assign_windows(&self, _: &T, ts: Timestamp, _: Timestamp, out: &mut WindowBuf<TimeWindow>) {
        out.push(TimeWindow::aligned(ts, self.offset, self.size));
    }
    fn default_trigger(&self) -> Arc<dyn Trigger<T, TimeWindow>> {
        Arc::new(EventTimeTrigger)
    }
    fn is_event_time(&self) -> bool {
        true
    }
}

/// Fixed-size, overlapping event-time windows that start every `slide`.
#[derive(Debug, Clone, Copy)]
pub struct SlidingEventTimeWindows {
    size: i64,
    slide: i64,
    offset: i64,
}

impl SlidingEventTimeWindows {
    /// Windows of `size` starting every `slide`.
    pub fn of(size: Duration, slide: Duration) -> Self {
        SlidingEventTimeWindows {
            size: millis(size).max(1),
            slide: millis(slide).max(1),
            offset: 0,
        }
    }
}

/// Flink's `SlidingEventTimeWindows.assignWindows`, in `i128` so that the windows near the ends
/// of the `i64` range are cut there instead of wrapping around.
fn sliding(ts: Timestamp, size: i64, slide: i64, offset: i64, out: &mut WindowBuf<TimeWindow>) {
    let (wide_ts, size, slide) = (i128::from(ts), i128::from(size), i128::from(slide));
    let mut start = wide_ts - (wide_ts - i128::from(offset)).rem_euclid(slide);
    while start > wide_ts - size {
        out.push(TimeWindow::new(saturate(start), saturate(start + size)));
        start -= slide;
    }
}

impl<T> WindowAssigner<T> for SlidingEventTimeWindows {
    type W = TimeWindow;
    fn assign_windows(&self, _: &T, ts: Timestamp, _: Timestamp, out: &mut WindowBuf<TimeWindow>) {
        sliding(ts, self.size, self.slide, self.offset, out);
    }
    fn default_trigger(&self) -> Arc<dyn Trigger<T, TimeWindow>> {
        Arc::new(EventTimeTrigger)
    }
    fn is_event_time(&self) -> bool {
        true
    }
}

/// Event-time windows that grow by `step` from a start every `max_size` (Flink SQL's
/// `CUMULATE`): an element at `ts` is in `[start, start + k·step)` for each `k` in
/// `1..=max_size/step` whose window ends after `ts`, where `start` is `ts` rounded down to
/// a multiple of `max_size`. Each window fires when the watermark passes its end, so a day's
/// window fires every `step` with everything since the day began.
#[derive(Debug, Clone, Copy)]
pub struct CumulativeEventTimeWindows {
    step: i64,
    max_size: i64,
}

impl CumulativeEventTimeWindows {
    /// Windows growing by `step` up to `max_size`, or `None` unless `max_size` is a
    /// positive multiple of a positive `step` (as Flink requires).
    pub fn of(step: Duration, max_size: Duration) -> Option<Self> {
        let (step, max_size) = (millis(step), millis(max_size));
        (step > 0 && max_size > 0 && max_size % step == 0)
            .then_some(CumulativeEventTimeWindows { step, max_size })
    }
}

impl<T> WindowAssigner<T> for CumulativeEventTimeWindows {
    type W = TimeWindow;
    fn assign_windows(&self, _: &T, ts: Timestamp, _: Timestamp, out: &mut WindowBuf<TimeWindow>) {
        let wide = i128::from(ts);
        let start = wide - wide.rem_euclid(i128::from(self.max_size));
        let last = start + i128::from(self.max_size);
        // The first end after ts, then every step up to the largest window.
        let mut end = start
            + (wide - start) / i128::from(self.step) * i128::from(self.step)
            + i128::from(self.step);
        while end <= last {
            out.push(TimeWindow::new(saturate(start), saturate(end)));
            end += i128::from(self.step);
        }
    }
    fn default_trigger(&self) -> Arc<dyn Trigger<T, TimeWindow>> {
        Arc::new(EventTimeTrigger)
    }
    fn is_event_time(&self) -> bool {
        true
    }
}

/// Event-time sessions: an element opens `[ts, ts + gap)`; overlapping sessions merge.
#[derive(Debug, Clone, Copy)]
pub struct EventTimeSessionWindows {
    gap: i64,
}

impl EventTimeSessionWindows {
    /// Sessions that close after `gap` without elements.
    pub fn with_gap(gap: Duration) -> Self {
        EventTimeSessionWindows {
            gap: millis(gap).max(1),
        }
    }
}

impl<T> WindowAssigner<T> for EventTimeSessionWindows {
    type W = TimeWindow;
    fn assign_windows(&self, _: &T, ts: Timestamp, _: Timestamp, out: &mut WindowBuf<TimeWindow>) {
        out.push(TimeWindow::new(ts, ts.saturating_add(self.gap)));
    }
    fn default_trigger(&self) -> Arc<dyn Trigger<T, TimeWindow>> {
        Arc::new(EventTimeTrigger)
    }
    fn is_event_time(&self) -> bool {
        true
    }
    fn is_merging(&self) -> bool {
        true
    }
}

/// Fixed-size, non-overlapping windows of wall-clock time.
#[derive(Debug, Clone, Copy)]
pub struct TumblingProcessingTimeWindows {
    size: i64,
    offset: i64,
}

impl TumblingProcessingTimeWindows {
    /// Windows of `size`, aligned to the epoch.
    pub fn of(size: Duration) -> Self {
        TumblingProcessingTimeWindows {
            size: millis(size).max(1),
            offset: 0,
        }
    }
}

impl<T> WindowAssigner<T> for TumblingProcessingTimeWindows {
    type W = TimeWindow;
    fn assign_windows(&self, _: &T, _: Timestamp, now: Timestamp, out: &mut WindowBuf<TimeWindow>) {
        out.push(TimeWindow::aligned(now, self.offset, self.size));
    }
    fn default_trigger(&self) -> Arc<dyn Trigger<T, TimeWindow>> {
        Arc::new(ProcessingTimeTrigger)
    }
    fn is_event_time(&self) -> bool {
        false
    }
}

/// Fixed-size, overlapping windows of wall-clock time.
#[derive(Debug, Clone, Copy)]
pub struct SlidingProcessingTimeWindows {
    size: i64,
    slide: i64,
}

impl SlidingProcessingTimeWindows {
    /// Windows of `size` starting every `slide`.
    pub fn of(size: Duration, slide: Duration) -> Self {
        SlidingProcessingTimeWindows {
            size: millis(size).max(1),
            slide: millis(slide).max(1),
        }
    }
}

impl<T> WindowAssigner<T> for SlidingProcessingTimeWindows {
    type W = TimeWindow;
    fn assign_windows(&self, _: &T, _: Timestamp, now: Timestamp, out: &mut WindowBuf<TimeWindow>) {
        sliding(now, self.size, self.slide, 0, out);
    }
    fn default_trigger(&self) -> Arc<dyn Trigger<T, TimeWindow>> {
        Arc::new(ProcessingTimeTrigger)
    }
    fn is_event_time(&self) -> bool {
        false
    }
}

/// Wall-clock sessions.
#[derive(Debug, Clone, Copy)]
pub struct ProcessingTimeSessionWindows {
    gap: i64,
}

impl ProcessingTimeSessionWindows {
    /// Sessions that close after `gap` of wall-clock time without elements.
    pub fn with_gap(gap: Duration) -> Self {
        ProcessingTimeSessionWindows {
            gap: millis(gap).max(1),
        }
    }
}

impl<T> WindowAssigner<T> for ProcessingTimeSessionWindows {
    type W = TimeWindow;
    fn assign_windows(&self, _: &T, _: Timestamp, now: Timestamp, out: &mut WindowBuf<TimeWindow>) {
        out.push(TimeWindow::new(now, now.saturating_add(self.gap)));
    }
    fn default_trigger(&self) -> Arc<dyn Trigger<T, TimeWindow>> {
        Arc::new(ProcessingTimeTrigger)
    }
    fn is_event_time(&self) -> bool {
        false
    }
    fn is_merging(&self) -> bool {
        true
    }
}

/// One window per key holding everything; it fires only through a custom trigger.
#[derive(Debug, Clone, Copy)]
pub struct GlobalWindows;

impl GlobalWindows {
    /// The global window assigner (its default trigger never fires).
    pub fn create() -> Self {
        GlobalWindows
    }
}

impl<T> WindowAssigner<T> for GlobalWindows {
    type W = GlobalWindow;
    fn assign_windows(&self, _: &T, _: Timestamp, _: Timestamp, out: &mut WindowBuf<GlobalWindow>) {
        out.push(GlobalWindow);
    }
    fn default_trigger(&self) -> Arc<dyn Trigger<T, GlobalWindow>> {
        Arc::new(NeverTrigger)
    }
    fn is_event_time(&self) -> bool {
        false
    }
}

/// What a trigger decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerResult {
    /// Nothing.
    Continue,
    /// Emit the window's result; keep its contents.
    Fire,
    /// Drop the window's contents without emitting.
    Purge,
    /// Emit, then drop the contents.
    FireAndPurge,
}

impl TriggerResult {
    fn fires(self) -> bool {
        matches!(self, TriggerResult::Fire | TriggerResult::FireAndPurge)
    }
    fn purges(self) -> bool {
        matches!(self, TriggerResult::Purge | TriggerResult::FireAndPurge)
    }
}

/// A trigger's per-window state (count triggers count; continuous triggers remember their
/// next firing time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerState {
    /// Elements counted.
    pub count: u64,
    /// The next firing time a continuous trigger registered.
    pub fire_at: Option<Timestamp>,
}

/// What a trigger can see and do.
pub struct TriggerContext<'a> {
    watermark: Timestamp,
    processing_time: Timestamp,
    state: &'a mut TriggerState,
    timers: &'a mut TimerBuf,
}

impl TriggerContext<'_> {
    /// The operator's current watermark.
    pub fn current_watermark(&self) -> Timestamp {
        self.watermark
    }
    /// The wall clock.
    pub fn current_processing_time(&self) -> Timestamp {
        self.processing_time
    }
    /// This window's trigger state.
    pub fn state(&mut self) -> &mut TriggerState {
        self.state
    }
    /// Calls `on_event_time` for this window when the watermark reaches `ts`.
    pub fn register_event_time_timer(&mut self, ts: Timestamp) {
        self.timers.push((TimeDomain::EventTime, ts));
    }
    /// Calls `on_processing_time` for this window when the clock passes `ts`.
    pub fn register_processing_time_timer(&mut self, ts: Timestamp) {
        self.timers.push((TimeDomain::ProcessingTime, ts));
    }
}

/// Decides when a window fires (Flink's `Trigger`).
///
/// A timer call may reach a window that did not register that time (timers are kept per key
/// and time); triggers check the time against their window or state, as Flink's do.
pub trait Trigger<T, W>: Send + Sync + 'static {
    /// An element was added to `window`.
    fn on_element(
        &self,
        element: &T,
        timestamp: Timestamp,
        window: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult;
    /// The watermark reached `time`.
    fn on_event_time(
        &self,
        time: Timestamp,
        window: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult;
    /// The clock passed `time`.
    fn on_processing_time(
        &self,
        time: Timestamp,
        window: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult;
    /// Windows were merged into `window`; the state is already combined.
    fn on_merge(&self, window: &W, ctx: &mut TriggerContext<'_>) {
        let _ = (window, ctx);
    }
}

/// Fires when the watermark passes the window's end (the event-time default).
#[derive(Debug, Clone, Copy)]
pub struct EventTimeTrigger;

impl<T, W: Window> Trigger<T, W> for EventTimeTrigger {
    fn on_element(
        &self,
        _: &T,
        _: Timestamp,
        w: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if w.max_timestamp() <= ctx.current_watermark() {
            TriggerResult::Fire
        } else {
            ctx.register_event_time_timer(w.max_timestamp());
            TriggerResult::Continue
        }
    }
    fn on_event_time(&self, time: Timestamp, w: &W, _: &mut TriggerContext<'_>) -> TriggerResult {
        if time == w.max_timestamp() {
            TriggerResult::Fire
        } else {
            TriggerResult::Continue
        }
    }
    fn on_processing_time(&self, _: Timestamp, _: &W, _: &mut TriggerContext<'_>) -> TriggerResult {
        TriggerResult::Continue
    }
    fn on_merge(&self, w: &W, ctx: &mut TriggerContext<'_>) {
        if w.max_timestamp() > ctx.current_watermark() {
            ctx.register_event_time_timer(w.max_timestamp());
        }
    }
}

/// Fires when the clock passes the window's end (the processing-time default).
#[derive(Debug, Clone, Copy)]
pub struct ProcessingTimeTrigger;

impl<T, W: Window> Trigger<T, W> for ProcessingTimeTrigger {
    fn on_element(
        &self,
        _: &T,
        _: Timestamp,
        w: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        ctx.register_processing_time_timer(w.max_timestamp());
        TriggerResult::Continue
    }
    fn on_event_time(&self, _: Timestamp, _: &W, _: &mut TriggerContext<'_>) -> TriggerResult {
        TriggerResult::Continue
    }
    fn on_processing_time(
        &self,
        time: Timestamp,
        w: &W,
        _: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if time == w.max_timestamp() {
            TriggerResult::Fire
        } else {
            TriggerResult::Continue
        }
    }
    fn on_merge(&self, w: &W, ctx: &mut TriggerContext<'_>) {
        if w.max_timestamp() > ctx.current_processing_time() {
            ctx.register_processing_time_timer(w.max_timestamp());
        }
    }
}

/// Never fires (the default of [`GlobalWindows`]).
#[derive(Debug, Clone, Copy)]
pub struct NeverTrigger;

impl<T, W> Trigger<T, W> for NeverTrigger {
    fn on_element(&self, _: &T, _: Timestamp, _: &W, _: &mut TriggerContext<'_>) -> TriggerResult {
        TriggerResult::Continue
    }
    fn on_event_time(&self, _: Timestamp, _: &W, _: &mut TriggerContext<'_>) -> TriggerResult {
        TriggerResult::Continue
    }
    fn on_processing_time(&self, _: Timestamp, _: &W, _: &mut TriggerContext<'_>) -> TriggerResult {
        TriggerResult::Continue
    }
}

/// Fires every `count` elements of a window (counts carry over merges).
#[derive(Debug, Clone, Copy)]
pub struct CountTrigger {
    count: u64,
}

impl CountTrigger {
    /// Fires when a window holds `count` elements since the last firing.
    pub fn of(count: u64) -> Self {
        CountTrigger {
            count: count.max(1),
        }
    }
}

impl<T, W> Trigger<T, W> for CountTrigger {
    fn on_element(
        &self,
        _: &T,
        _: Timestamp,
        _: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        let state = ctx.state();
        state.count += 1;
        if state.count >= self.count {
            state.count = 0;
            TriggerResult::Fire
        } else {
            TriggerResult::Continue
        }
    }
    fn on_event_time(&self, _: Timestamp, _: &W, _: &mut TriggerContext<'_>) -> TriggerResult {
        TriggerResult::Continue
    }
    fn on_processing_time(&self, _: Timestamp, _: &W, _: &mut TriggerContext<'_>) -> TriggerResult {
        TriggerResult::Continue
    }
}

/// Turns every `Fire` of the inner trigger into `FireAndPurge`.
pub struct PurgingTrigger<T, W> {
    inner: Arc<dyn Trigger<T, W>>,
}

impl<T: 'static, W: 'static> PurgingTrigger<T, W> {
    /// Wraps `inner`.
    pub fn of(inner: impl Trigger<T, W>) -> Self {
        PurgingTrigger {
            inner: Arc::new(inner),
        }
    }
}

fn purging(r: TriggerResult) -> TriggerResult {
    if r.fires() {
        TriggerResult::FireAndPurge
    } else {
        r
    }
}

impl<T: 'static, W: 'static> Trigger<T, W> for PurgingTrigger<T, W> {
    fn on_element(
        &self,
        e: &T,
        ts: Timestamp,
        w: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        purging(self.inner.on_element(e, ts, w, ctx))
    }
    fn on_event_time(&self, t: Timestamp, w: &W, ctx: &mut TriggerContext<'_>) -> TriggerResult {
        purging(self.inner.on_event_time(t, w, ctx))
    }
    fn on_processing_time(
        &self,
        t: Timestamp,
        w: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        purging(self.inner.on_processing_time(t, w, ctx))
    }
    fn on_merge(&self, w: &W, ctx: &mut TriggerContext<'_>) {
        self.inner.on_merge(w, ctx)
    }
}

/// Fires every `interval` of event time while the window is open, and at its end (early
/// results; Flink's `ContinuousEventTimeTrigger`).
#[derive(Debug, Clone, Copy)]
pub struct ContinuousEventTimeTrigger {
    interval: i64,
}

impl ContinuousEventTimeTrigger {
    /// Early firings every `interval` of event time.
    pub fn of(interval: Duration) -> Self {
        ContinuousEventTimeTrigger {
            interval: millis(interval).max(1),
        }
    }
}

impl<T, W: Window> Trigger<T, W> for ContinuousEventTimeTrigger {
    fn on_element(
        &self,
        _: &T,
        ts: Timestamp,
        w: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if w.max_timestamp() <= ctx.current_watermark() {
            return TriggerResult::Fire;
        }
        ctx.register_event_time_timer(w.max_timestamp());
        if ctx.state().fire_at.is_none() {
            let next = TimeWindow::aligned(ts, 0, self.interval).end;
            ctx.state().fire_at = Some(next);
            ctx.register_event_time_timer(next);
        }
        TriggerResult::Continue
    }
    fn on_event_time(&self, time: Timestamp, w: &W, ctx: &mut TriggerContext<'_>) -> TriggerResult {
        if time == w.max_timestamp() {
            return TriggerResult::Fire;
        }
        if ctx.state().fire_at == Some(time) {
            // At the end of the range there is no next firing.
            let next = time.saturating_add(self.interval);
            ctx.state().fire_at = Some(next);
            if next > time {
                ctx.register_event_time_timer(next);
            }
            return TriggerResult::Fire;
        }
        TriggerResult::Continue
    }
    fn on_processing_time(&self, _: Timestamp, _: &W, _: &mut TriggerContext<'_>) -> TriggerResult {
        TriggerResult::Continue
    }
    fn on_merge(&self, w: &W, ctx: &mut TriggerContext<'_>) {
        if let Some(next) = ctx.state().fire_at {
            ctx.register_event_time_timer(next);
        }
        if w.max_timestamp() > ctx.current_watermark() {
            ctx.register_event_time_timer(w.max_timestamp());
        }
    }
}

/// Fires every `interval` of wall-clock time while the window has elements (Flink's
/// `ContinuousProcessingTimeTrigger`).
#[derive(Debug, Clone, Copy)]
pub struct ContinuousProcessingTimeTrigger {
    interval: i64,
}

impl ContinuousProcessingTimeTrigger {
    /// Firings every `interval` of wall-clock time.
    pub fn of(interval: Duration) -> Self {
        ContinuousProcessingTimeTrigger {
            interval: millis(interval).max(1),
        }
    }
}

impl<T, W: Window> Trigger<T, W> for ContinuousProcessingTimeTrigger {
    fn on_element(
        &self,
        _: &T,
        _: Timestamp,
        _: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if ctx.state().fire_at.is_none() {
            let now = ctx.current_processing_time();
            let next = TimeWindow::aligned(now, 0, self.interval).end;
            ctx.state().fire_at = Some(next);
            ctx.register_processing_time_timer(next);
        }
        TriggerResult::Continue
    }
    fn on_event_time(&self, _: Timestamp, _: &W, _: &mut TriggerContext<'_>) -> TriggerResult {
        TriggerResult::Continue
    }
    fn on_processing_time(
        &self,
        time: Timestamp,
        _: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if ctx.state().fire_at == Some(time) {
            // At the end of the range there is no next firing.
            let next = time.saturating_add(self.interval);
            ctx.state().fire_at = Some(next);
            if next > time {
                ctx.register_processing_time_timer(next);
            }
            return TriggerResult::Fire;
        }
        TriggerResult::Continue
    }
}

/// An incremental aggregation (Flink's `AggregateFunction`): one accumulator per key and
/// window.
pub trait AggregateFunction<T>: Send + Sync + 'static {
    /// The accumulator; it is checkpointed, so it serializes.
    type Acc: Clone + Send + Sync + Serialize + DeserializeOwned + 'static;
    /// The result.
    type Out: Data;
    /// A fresh accumulator.
    fn create_accumulator(&self) -> Self::Acc;
    /// Adds one element.
    fn add(&self, value: &T, acc: &mut Self::Acc);
    /// The result of an accumulator.
    fn get_result(&self, acc: &Self::Acc) -> Self::Out;
    /// Combines two accumulators: sessions that merge, a sliding window made of slices, the
    /// partial accumulators of a two-phase aggregation. It must give what adding both
    /// accumulators' elements to one accumulator gives.
    fn merge(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
}

/// Counts the elements (SQL's `COUNT(*)`), as an [`AggregateFunction`] of any element type.
///
/// ```
/// use spate_dataflow::{Count, DataStream};
///
/// fn words_per_word(words: DataStream<String>) -> DataStream<(String, i64)> {
///     words
///         .key_by(|w: &String| w.clone())
///         .full_window_partition()
///         .aggregate_with(Count, |w: &String, n, out: &mut Vec<(String, i64)>| {
///             out.push((w.clone(), n))
///         })
/// }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Count;

impl<T> AggregateFunction<T> for Count {
    type Acc = i64;
    type Out = i64;
    fn create_accumulator(&self) -> i64 {
        0
    }
    fn add(&self, _: &T, acc: &mut i64) {
        *acc += 1;
    }
    fn get_result(&self, acc: &i64) -> i64 {
        *acc
    }
    fn merge(&self, a: i64, b: i64) -> i64 {
        a + b
    }
}

/// What a window function knows about the window it is called for.
#[derive(Debug, Clone, Copy)]
pub struct WindowContext<'a, W> {
    /// The window.
    pub window: &'a W,
    /// The operator's watermark when the window fired.
    pub current_watermark: Timestamp,
    /// The wall clock when the window fired.
    pub current_processing_time: Timestamp,
}

/// How a window's contents are kept and turned into results.
pub(crate) trait Contents<K, T, W, R>: Send + Sync + 'static {
    type Acc: Clone + Send + Sync + Serialize + DeserializeOwned + 'static;
    /// Whether windows can be kept as slices (incremental functions: not the element lists
    /// of `process`).
    fn sliceable(&self) -> bool {
        false
    }
    fn create(&self) -> Self::Acc;
    fn add(&self, acc: &mut Self::Acc, value: &T);
    fn merge(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn emit(&self, key: &K, ctx: &WindowContext<'_, W>, acc: &Self::Acc, out: &mut Vec<R>);
}

struct ReduceContents<F, G>(F, G);

impl<K, T, W, R, F, G> Contents<K, T, W, R> for ReduceContents<F, G>
where
    T: Data,
    F: Fn(T, T) -> T + Send + Sync + 'static,
    G: Fn(&K, &WindowContext<'_, W>, T, &mut Vec<R>) + Send + Sync + 'static,
{
    type Acc = Option<T>;
    fn sliceable(&self) -> bool {
        true
    }
    fn create(&self) -> Option<T> {
        None
    }
    fn add(&self, acc: &mut Option<T>, value: &T) {
        *acc = Some(match acc.take() {
            None => value.clone(),
            Some(prev) => (self.0)(prev, value.clone()),
        });
    }
    fn merge(&self, a: Option<T>, b: Option<T>) -> Option<T> {
        match (a, b) {
            (Some(a), Some(b)) => Some((self.0)(a, b)),
            (a, b) => a.or(b),
        }
    }
    fn emit(&self, key: &K, ctx: &WindowContext<'_, W>, acc: &Option<T>, out: &mut Vec<R>) {
        if let Some(v) = acc {
            (self.1)(key, ctx, v.clone(), out);
        }
    }
}

struct AggregateContents<A, G>(A, G);

impl<K, T, W, R, A, G> Contents<K, T, W, R> for AggregateContents<A, G>
where
    A: AggregateFunction<T>,
    G: Fn(&K, &WindowContext<'_, W>, A::Out, &mut Vec<R>) + Send + Sync + 'static,
{
    type Acc = A::Acc;
    fn sliceable(&self) -> bool {
        true
    }
    fn create(&self) -> A::Acc {
        self.0.create_accumulator()
    }
    fn add(&self, acc: &mut A::Acc, value: &T) {
        self.0.add(value, acc);
    }
    fn merge(&self, a: A::Acc, b: A::Acc) -> A::Acc {
        self.0.merge(a, b)
    }
    fn emit(&self, key: &K, ctx: &WindowContext<'_, W>, acc: &A::Acc, out: &mut Vec<R>) {
        (self.1)(key, ctx, self.0.get_result(acc), out);
    }
}

struct ProcessContents<G>(G);

impl<K, T, W, R, G> Contents<K, T, W, R> for ProcessContents<G>
where
    T: Data,
    G: Fn(&K, &WindowContext<'_, W>, &[T], &mut Vec<R>) + Send + Sync + 'static,
{
    type Acc = Vec<T>;
    fn create(&self) -> Vec<T> {
        Vec::new()
    }
    fn add(&self, acc: &mut Vec<T>, value: &T) {
        acc.push(value.clone());
    }
    fn merge(&self, mut a: Vec<T>, b: Vec<T>) -> Vec<T> {
        a.extend(b);
        a
    }
    fn emit(&self, key: &K, ctx: &WindowContext<'_, W>, acc: &Vec<T>, out: &mut Vec<R>) {
        (self.0)(key, ctx, acc, out);
    }
}

/// One open window of a key.
#[derive(Serialize, Deserialize)]
#[serde(bound(serialize = "W: Serialize, Acc: Serialize"))]
#[serde(bound(deserialize = "W: DeserializeOwned, Acc: DeserializeOwned"))]
struct WinEntry<W, Acc> {
    window: W,
    /// `None` after a purge, until the next element.
    acc: Option<Acc>,
    trigger: TriggerState,
    /// Timers registered for this window (usually one), to skip registering again.
    timers: Vec<(TimeDomain, Timestamp)>,
}

/// A key's open windows.
#[derive(Serialize, Deserialize)]
#[serde(bound(serialize = "W: Serialize, Acc: Serialize"))]
#[serde(bound(deserialize = "W: DeserializeOwned, Acc: DeserializeOwned"))]
pub(crate) struct KeyWindows<W, Acc> {
    entries: Vec<WinEntry<W, Acc>>,
}

/// The window operator as a keyed process function.
struct WindowOperator<K, T, W, R, C> {
    assigner: Arc<dyn WindowAssignerDyn<T, W>>,
    trigger: Arc<dyn Trigger<T, W>>,
    contents: C,
    allowed_lateness: i64,
    late_tag: Option<OutputTag<T>>,
    _types: PhantomData<fn() -> (K, R)>,
}

/// The object-safe part of an assigner.
trait WindowAssignerDyn<T, W>: Send + Sync {
    fn assign(&self, e: &T, ts: Timestamp, now: Timestamp, out: &mut WindowBuf<W>);
    fn event_time(&self) -> bool;
    fn merging(&self) -> bool;
}

impl<T, A: WindowAssigner<T>> WindowAssignerDyn<T, A::W> for A {
    fn assign(&self, e: &T, ts: Timestamp, now: Timestamp, out: &mut WindowBuf<A::W>) {
        self.assign_windows(e, ts, now, out)
    }
    fn event_time(&self) -> bool {
        self.is_event_time()
    }
    fn merging(&self) -> bool {
        self.is_merging()
    }
}

type Ctx<'a, K, W, Acc, R> = ProcessContext<'a, K, KeyWindows<W, Acc>, R>;

impl<K, T, W, R, C> WindowOperator<K, T, W, R, C>
where
    W: Window,
{
    fn cleanup_time(&self, w: &W) -> Timestamp {
        if self.assigner.event_time() {
            w.max_timestamp().saturating_add(self.allowed_lateness)
        } else {
            w.max_timestamp()
        }
    }

    fn is_window_late(&self, w: &W, watermark: Timestamp) -> bool {
        self.assigner.event_time() && self.cleanup_time(w) <= watermark
    }
}

/// Registers `timers` for the current key, skipping ones the window already has.
fn register_timers<K, S, O>(
    ctx: &mut ProcessContext<'_, K, S, O>,
    known: &mut Vec<(TimeDomain, Timestamp)>,
    timers: &mut TimerBuf,
) where
    K: Hash + Eq + Clone,
{
    for (domain, ts) in timers.drain(..) {
        if known.contains(&(domain, ts)) {
            continue;
        }
        known.push((domain, ts));
        match domain {
            TimeDomain::EventTime => ctx.register_event_time_timer(ts),
            TimeDomain::ProcessingTime => ctx.register_processing_time_timer(ts),
        }
    }
}

impl<K, T, W, R, C> WindowOperator<K, T, W, R, C>
where
    K: Data + Hash + Eq,
    T: Data,
    W: Window,
    R: Data,
    C: Contents<K, T, W, R>,
{
    /// Emits `entry`'s result (if it has contents) and purges it if asked.
    fn act(
        &self,
        result: TriggerResult,
        entry: &mut WinEntry<W, C::Acc>,
        key: &K,
        watermark: Timestamp,
        out: &mut Vec<R>,
    ) {
        if result.fires() {
            if let Some(acc) = entry.acc.as_ref() {
                let wctx = WindowContext {
                    window: &entry.window,
                    current_watermark: watermark,
                    current_processing_time: processing_time_now(),
                };
                self.contents.emit(key, &wctx, acc, out);
            }
        }
        if result.purges() {
            entry.acc = None;
        }
    }

    fn flush(ctx: &mut Ctx<'_, K, W, C::Acc, R>, ts: Timestamp, out: &mut Vec<R>) {
        for r in out.drain(..) {
            ctx.collect_with_timestamp(r, ts);
        }
    }

    /// Merges `new` into the key's session windows; returns the index of the window that
    /// now holds it.
    fn merge_into(
        &self,
        windows: &mut KeyWindows<W, C::Acc>,
        new: W,
        watermark: Timestamp,
        now: Timestamp,
        timers: &mut TimerBuf,
    ) -> usize {
        let mut merged = new;
        let mut absorbed: Vec<WinEntry<W, C::Acc>> = Vec::new();
        loop {
            let pos = windows
                .entries
                .iter()
                .position(|e| e.window.merge_with(&merged).is_some());
            match pos {
                Some(i) => {
                    let e = windows.entries.swap_remove(i);
                    merged = e.window.merge_with(&merged).expect("checked above");
                    absorbed.push(e);
                }
                None => break,
            }
        }
        let mut entry = WinEntry {
            window: merged,
            acc: None,
            trigger: TriggerState::default(),
            timers: Vec::new(),
        };
        let had_windows = !absorbed.is_empty();
        for e in absorbed {
            entry.acc = match (entry.acc.take(), e.acc) {
                (Some(a), Some(b)) => Some(self.contents.merge(a, b)),
                (a, b) => a.or(b),
            };
            entry.trigger.count += e.trigger.count;
            entry.trigger.fire_at = match (entry.trigger.fire_at, e.trigger.fire_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            entry.timers.extend(e.timers);
        }
        if had_windows {
            let mut tctx = TriggerContext {
                watermark,
                processing_time: now,
                state: &mut entry.trigger,
                timers,
            };
            self.trigger.on_merge(&entry.window, &mut tctx);
        }
        windows.entries.push(entry);
        windows.entries.len() - 1
    }
}

impl<K, T, W, R, C> KeyedProcessFunction<K, T, R> for WindowOperator<K, T, W, R, C>
where
    K: Data + Hash + Eq,
    T: Data,
    W: Window,
    R: Data,
    C: Contents<K, T, W, R>,
{
    type State = KeyWindows<W, C::Acc>;

    fn process_element(&self, value: T, ctx: &mut Ctx<'_, K, W, C::Acc, R>) {
        let ts = ctx.timestamp();
        let event_time = self.assigner.event_time();
        if event_time && ts == NO_TIMESTAMP {
            let name = ctx.operator_name().to_owned();
            ctx.fail(SpateError::Config(format!(
                "window operator {name}: a record has no timestamp; event-time windows need \
                 `assign_timestamps_and_watermarks` upstream"
            )));
            return;
        }
        let watermark = ctx.current_watermark();
        let now = processing_time_now();
        let mut assigned: WindowBuf<W> = WindowBuf::new();
        self.assigner.assign(&value, ts, now, &mut assigned);
        let key = ctx.key();
        let mut windows = ctx.state().take().unwrap_or(KeyWindows {
            entries: Vec::new(),
        });
        let mut out: Vec<R> = Vec::new();
        let mut timers = TimerBuf::new();
        let mut skipped = true;
        for w in assigned {
            let idx = if self.assigner.merging() {
                let idx = self.merge_into(&mut windows, w, watermark, now, &mut timers);
                if self.is_window_late(&windows.entries[idx].window, watermark) {
                    // The merged session is already beyond its lateness: drop the element.
                    if windows.entries[idx].acc.is_none() {
                        windows.entries.swap_remove(idx);
                    }
                    timers.clear();
                    continue;
                }
                idx
            } else {
                if self.is_window_late(&w, watermark) {
                    continue;
                }
                match windows.entries.iter().position(|e| e.window == w) {
                    Some(idx) => idx,
                    None => {
                        windows.entries.push(WinEntry {
                            window: w,
                            acc: None,
                            trigger: TriggerState::default(),
                            timers: Vec::new(),
                        });
                        windows.entries.len() - 1
                    }
                }
            };
            skipped = false;
            let cleanup = self.cleanup_time(&windows.entries[idx].window);
            let entry = &mut windows.entries[idx];
            let result = {
                let mut tctx = TriggerContext {
                    watermark,
                    processing_time: now,
                    state: &mut entry.trigger,
                    timers: &mut timers,
                };
                self.trigger
                    .on_element(&value, ts, &entry.window, &mut tctx)
            };
            let acc = entry.acc.get_or_insert_with(|| self.contents.create());
            self.contents.add(acc, &value);
            if cleanup != MAX_WATERMARK {
                let domain = if self.assigner.event_time() {
                    TimeDomain::EventTime
                } else {
                    TimeDomain::ProcessingTime
                };
                timers.push((domain, cleanup));
            }
            register_timers(ctx, &mut entry.timers, &mut timers);
            self.act(result, entry, key, watermark, &mut out);
            let at = entry.window.max_timestamp();
            Self::flush(ctx, at, &mut out);
        }
        if skipped && event_time && ts.saturating_add(self.allowed_lateness) <= watermark {
            match &self.late_tag {
                Some(tag) => ctx.output(tag, value),
                None => ctx.count_late_record_dropped(),
            }
        }
        if !windows.entries.is_empty() {
            *ctx.state() = Some(windows);
        }
    }

    fn on_timer(&self, time: Timestamp, domain: TimeDomain, ctx: &mut Ctx<'_, K, W, C::Acc, R>) {
        let Some(mut windows) = ctx.state().take() else {
            return;
        };
        let key = ctx.key();
        let watermark = ctx.current_watermark();
        let now = processing_time_now();
        let mut out: Vec<R> = Vec::new();
        let mut timers = TimerBuf::new();
        let timer_domain_matches = |event: bool| match domain {
            TimeDomain::EventTime => event,
            TimeDomain::ProcessingTime => !event,
        };
        let event_time = self.assigner.event_time();
        let mut i = 0;
        while i < windows.entries.len() {
            let entry = &mut windows.entries[i];
            entry.timers.retain(|t| *t != (domain, time));
            let result = {
                let mut tctx = TriggerContext {
                    watermark,
                    processing_time: now,
                    state: &mut entry.trigger,
                    timers: &mut timers,
                };
                match domain {
                    TimeDomain::EventTime => {
                        self.trigger.on_event_time(time, &entry.window, &mut tctx)
                    }
                    TimeDomain::ProcessingTime => {
                        self.trigger
                            .on_processing_time(time, &entry.window, &mut tctx)
                    }
                }
            };
            register_timers(ctx, &mut entry.timers, &mut timers);
            self.act(result, entry, key, watermark, &mut out);
            let at = entry.window.max_timestamp();
            Self::flush(ctx, at, &mut out);
            let cleanup = self.cleanup_time(&entry.window);
            if timer_domain_matches(event_time) && time >= cleanup {
                windows.entries.swap_remove(i);
            } else {
                i += 1;
            }
        }
        if !windows.entries.is_empty() {
            *ctx.state() = Some(windows);
        }
    }
}

/// A keyed stream cut into windows, waiting for its window function.
pub struct WindowedStream<K, T, W> {
    keyed: KeyedStream<K, T>,
    assigner: Arc<dyn WindowAssignerDyn<T, W>>,
    trigger: Arc<dyn Trigger<T, W>>,
    allowed_lateness: i64,
    late_tag: Option<OutputTag<T>>,
    /// How the assigner's windows cut into slices, when they are time-aligned.
    slicing: Option<Slicing>,
    /// A trigger replaced the assigner's default (windows are then kept one by one).
    custom_trigger: bool,
    /// Sliding windows of incremental functions are kept as slices.
    sliced: bool,
    /// Pre-aggregate before the shuffle (event-time, time-aligned windows).
    local_global: bool,
}

/// The slicing of the built-in time-aligned assigners.
fn slicing_of<A: Any>(assigner: &A) -> Option<Slicing> {
    let a: &dyn Any = assigner;
    if let Some(s) = a.downcast_ref::<SlidingEventTimeWindows>() {
        return Some(Slicing::new(s.size, s.slide, s.offset, true));
    }
    if let Some(s) = a.downcast_ref::<SlidingProcessingTimeWindows>() {
        return Some(Slicing::new(s.size, s.slide, 0, false));
    }
    if let Some(t) = a.downcast_ref::<TumblingEventTimeWindows>() {
        return Some(Slicing::new(t.size, t.size, t.offset, true));
    }
    None
}

impl<K: Data + Hash + Eq, T: Data> KeyedStream<K, T> {
    /// Cuts the keyed stream into windows (Flink's `KeyedStream.window`).
    pub fn window<A: WindowAssigner<T>>(&self, assigner: A) -> WindowedStream<K, T, A::W> {
        let trigger = assigner.default_trigger();
        WindowedStream {
            keyed: self.clone(),
            slicing: slicing_of(&assigner),
            assigner: Arc::new(assigner),
            trigger,
            allowed_lateness: 0,
            late_tag: None,
            custom_trigger: false,
            sliced: true,
            local_global: false,
        }
    }

    /// Windows of `size` elements per key, fired and purged when full (Flink's
    /// `countWindow(size)`).
    pub fn count_window(&self, size: u64) -> WindowedStream<K, T, GlobalWindow> {
        self.window(GlobalWindows::create())
            .trigger(PurgingTrigger::of(CountTrigger::of(size)))
    }
}

impl<K: Data + Hash + Eq, T: Data, W: Window> WindowedStream<K, T, W> {
    /// Replaces the assigner's default trigger.
    pub fn trigger(mut self, trigger: impl Trigger<T, W>) -> Self {
        self.trigger = Arc::new(trigger);
        self.custom_trigger = true;
        self
    }

    /// Whether sliding windows of an incremental function ([`reduce`](Self::reduce),
    /// [`aggregate`](Self::aggregate) and their `_with` forms) are kept as slices (the
    /// default): a record is then added once, into its slice of `gcd(size, slide)`, rather than
    /// into each of the `size / slide` windows that hold it, and a window that fires merges its
    /// slices. Results are the same for any function whose `merge` is consistent with `add`;
    /// `false` keeps one accumulator per window, as Flink's DataStream operator does (for a
    /// reduce function that depends on the order of the elements). Windows with a custom
    /// trigger, sessions, global windows and `process` are always kept one by one.
    pub fn slicing(mut self, on: bool) -> Self {
        self.sliced = on;
        self
    }

    /// Local-global (two-phase) aggregation, Flink's `TWO_PHASE` strategy: each worker first
    /// combines its records per key and slice within an epoch and sends the partial
    /// accumulators through the shuffle; the keyed side merges them. It applies to event-time
    /// tumbling and sliding windows of an incremental function with the default trigger
    /// (otherwise it is ignored) and gives the one-phase results: records that could be late
    /// or re-fire a window are sent alone and judged as in one phase. It pays off when a
    /// worker sees several records of a key per slice and epoch, for few keys above all
    /// (`window_all`).
    pub fn local_global(mut self, on: bool) -> Self {
        self.local_global = on;
        self
    }

    /// Keeps windows open for `lateness` after their end: late elements within it update
    /// the window and fire it again.
    pub fn allowed_lateness(mut self, lateness: Duration) -> Self {
        self.allowed_lateness = millis(lateness);
        self
    }

    /// Sends elements too late for any window to the side output `tag` instead of dropping
    /// them (read it with [`DataStream::side_output`] on the result).
    pub fn side_output_late_data(mut self, tag: &OutputTag<T>) -> Self {
        self.late_tag = Some(tag.clone());
        self
    }

    /// The slicing to build with (and whether in two phases), if the windows are sliced.
    fn sliced_plan(&self, sliceable: bool) -> Option<(Slicing, bool)> {
        let slicing = self.slicing?;
        if !sliceable || self.custom_trigger || TypeId::of::<W>() != TypeId::of::<TimeWindow>() {
            return None;
        }
        let two_phase = self.local_global && slicing.event_time();
        (two_phase || (self.sliced && !slicing.tumbling())).then_some((slicing, two_phase))
    }

    fn build<R: Data, C: Contents<K, T, W, R>>(&self, op: &str, contents: C) -> DataStream<R> {
        if let Some((slicing, two_phase)) = self.sliced_plan(contents.sliceable()) {
            return self.build_sliced(op, slicing, two_phase, contents);
        }
        let f = Arc::new(WindowOperator {
            assigner: Arc::clone(&self.assigner),
            trigger: Arc::clone(&self.trigger),
            contents,
            allowed_lateness: self.allowed_lateness,
            late_tag: self.late_tag.clone(),
            _types: PhantomData,
        });
        let key = Arc::clone(&self.keyed.key);
        self.keyed
            .stream
            .process_node(op, "hash", move |ctx, input, name| {
                build_keyed_process(ctx, input, Arc::clone(&key), Arc::clone(&f), name)
            })
    }

    fn build_sliced<R: Data, C: Contents<K, T, W, R>>(
        &self,
        op: &str,
        slicing: Slicing,
        two_phase: bool,
        contents: C,
    ) -> DataStream<R> {
        let contents = Arc::new(contents);
        let sliced = SlicedOperator {
            slicing,
            contents: Arc::clone(&contents),
            allowed_lateness: self.allowed_lateness,
            late_tag: self.late_tag.clone(),
            _types: PhantomData,
        };
        let key = Arc::clone(&self.keyed.key);
        if !two_phase {
            let f = Arc::new(sliced);
            return self
                .keyed
                .stream
                .process_node(op, "hash", move |ctx, input, name| {
                    build_keyed_process(ctx, input, Arc::clone(&key), Arc::clone(&f), name)
                });
        }
        let f = Arc::new(Global(sliced));
        self.keyed
            .stream
            .process_node(op, "hash", move |ctx, input, name| {
                let shared = Arc::clone(ctx.shared());
                let partials = local_aggregate::<K, T, W, R, C>(
                    input,
                    Arc::clone(&key),
                    slicing,
                    Arc::clone(&contents),
                    shared,
                    name,
                    ctx.cells(),
                );
                ctx.skip_input_count = true;
                let of_record = Arc::clone(&key);
                let of_partial: KeyFn<K, Partial<K, T, C::Acc>> =
                    Arc::new(move |p: &Partial<K, T, C::Acc>| match p {
                        Partial::Slice { key, .. } => key.clone(),
                        Partial::Raw(x) => of_record(x),
                    });
                build_keyed_process(ctx, partials, of_partial, Arc::clone(&f), name)
            })
    }

    /// Combines the elements of each window with `f`, incrementally (Flink's `reduce`).
    pub fn reduce(&self, f: impl Fn(T, T) -> T + Send + Sync + 'static) -> DataStream<T> {
        self.reduce_with(
            f,
            |_k: &K, _w: &WindowContext<'_, W>, v: T, out: &mut Vec<T>| out.push(v),
        )
    }

    /// Reduces incrementally, then hands each window's result to `g` with the key and window
    /// (Flink's `reduce(reduceFunction, processWindowFunction)`).
    pub fn reduce_with<R: Data>(
        &self,
        f: impl Fn(T, T) -> T + Send + Sync + 'static,
        g: impl Fn(&K, &WindowContext<'_, W>, T, &mut Vec<R>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.build("window_reduce", ReduceContents(f, g))
    }

    /// Aggregates incrementally with `agg` (Flink's `aggregate`).
    pub fn aggregate<A: AggregateFunction<T>>(&self, agg: A) -> DataStream<A::Out> {
        self.aggregate_with(agg, |_k: &K, _w: &WindowContext<'_, W>, v, out| out.push(v))
    }

    /// Aggregates incrementally, then hands each window's result to `g` with the key and
    /// window (Flink's `aggregate(aggregateFunction, processWindowFunction)`).
    pub fn aggregate_with<A: AggregateFunction<T>, R: Data>(
        &self,
        agg: A,
        g: impl Fn(&K, &WindowContext<'_, W>, A::Out, &mut Vec<R>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.build("window_aggregate", AggregateContents(agg, g))
    }

    /// Calls `f` with every element of a fired window (Flink's `process` with a
    /// `ProcessWindowFunction`); the window buffers its elements.
    pub fn process<R: Data>(
        &self,
        f: impl Fn(&K, &WindowContext<'_, W>, &[T], &mut Vec<R>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.build("window_process", ProcessContents(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cumulative windows against their definition: every `[start, start + k·step)` with
    /// `start` a multiple of the largest size, `k` in `1..=max/step`, that holds `ts`.
    #[test]
    fn cumulative_windows_are_the_growing_windows_that_hold_the_element() {
        let (step, max) = (3_i64, 12_i64);
        let assigner = CumulativeEventTimeWindows::of(
            Duration::from_millis(step as u64),
            Duration::from_millis(max as u64),
        )
        .unwrap();
        for ts in -30..30 {
            let mut got = WindowBuf::new();
            WindowAssigner::<()>::assign_windows(&assigner, &(), ts, 0, &mut got);
            let mut want = Vec::new();
            for start in (-48..48).filter(|s| s % max == 0) {
                for k in 1..=max / step {
                    let w = TimeWindow::new(start, start + k * step);
                    if w.start <= ts && ts < w.end {
                        want.push(w);
                    }
                }
            }
            assert_eq!(got.to_vec(), want, "ts {ts}");
        }
        assert!(CumulativeEventTimeWindows::of(
            Duration::from_millis(5),
            Duration::from_millis(12)
        )
        .is_none());
        // Near the end of time: cut there, never an overflow.
        let mut edge = WindowBuf::new();
        WindowAssigner::<()>::assign_windows(&assigner, &(), i64::MAX - 1, 0, &mut edge);
        assert!(!edge.is_empty() && edge.iter().all(|w| w.end == i64::MAX || w.end > w.start));
    }
}
