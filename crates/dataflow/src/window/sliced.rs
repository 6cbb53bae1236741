//! Sliced window aggregation (Flink's slicing window operators of its table runtime, or
//! "panes"), and its optional local-global (two-phase) form.
//!
//! Time-aligned windows of `size` that start every `slide` cut time into slices of
//! `gcd(size, slide)`: every window is a run of whole slices. With the default trigger and an
//! incremental function ([`WindowedStream::aggregate`] or [`WindowedStream::reduce`]), the
//! operator keeps one accumulator per key and *slice*: a record is added once, into its slice,
//! instead of once into each of the `size / slide` windows it belongs to; a window that fires
//! merges copies of its slices' accumulators (oldest first). A slice is freed once the last
//! window holding it is cleaned up.
//!
//! The results are Flink's per-window ones, record for record:
//!
//! * A record is late when the latest window holding it is late (`max_timestamp +
//!   allowed_lateness <= watermark`, so all its windows are); it then goes to the late side
//!   output or is counted in `numLateRecordsDropped`. A record between windows (a slide longer
//!   than the size) is late when `timestamp + allowed_lateness <= watermark`, as in Flink.
//! * A window fires at its end (its timer) if any of its slices holds a record. Its slices hold
//!   exactly the records the per-window operator would have added to it: a record that reaches
//!   a slice while one of the slice's windows is already late comes after that window's last
//!   firing and cleanup (timers at or below the watermark have fired before any record is seen),
//!   so it never shows in that window.
//! * A record inside the lateness re-fires, right away, each of its windows that has ended
//!   but is not late, in the order of the per-window operator (latest window first).
//! * The timers are the per-window operator's: each window's end and cleanup time, registered
//!   when the first record of one of its slices arrives.
//!
//! So results equal the per-window path's for any function whose `merge` combines two
//! accumulators as adding their records would (Flink's contract for `AggregateFunction.merge`,
//! and what its slicing assumes); a reduce function that depends on the order of records
//! should use [`WindowedStream::slicing`]`(false)`.
//!
//! **Local-global** ([`WindowedStream::local_global`], Flink's `TWO_PHASE` strategy): before
//! the shuffle, each worker pre-aggregates its records per key and slice within an epoch and
//! sends partial accumulators; the keyed side merges them into its slices. Lateness stays
//! exact because only records that cannot be late nor re-fire a window are combined: a record
//! is combined when its timestamp is above every watermark this worker has passed on (so above
//! the keyed operator's watermark when the partial arrives, see [`local_aggregate`]); any other
//! record travels alone and is judged by the keyed operator as in the one-phase path.

use std::any::Any;
use std::collections::VecDeque;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hashbrown::HashMap;
use rustc_hash::FxBuildHasher;
use serde::{Deserialize, Serialize};
use spate_types::{Data, SpateError};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::{Capability, Operator};

use super::{saturate, Contents, TimeWindow, Window, WindowBuf, WindowContext};
use crate::execute::JobShared;
use crate::keyed::KeyFn;
use crate::plan::{Epoch, Flow};
use crate::process::{split_out, KeyedProcessFunction, Out, OutputTag, ProcessContext, TimeDomain};
use crate::time::{processing_time_now, Timestamp, MAX_WATERMARK, NO_TIMESTAMP};

/// How time-aligned windows cut time into slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slicing {
    size: i64,
    slide: i64,
    offset: i64,
    /// `gcd(size, slide)`.
    slice: i64,
    event_time: bool,
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `(ts - offset) mod unit`, in `0..unit`.
fn rem(ts: Timestamp, offset: i64, unit: i64) -> i64 {
    match ts.checked_sub(offset) {
        Some(d) => d.rem_euclid(unit),
        None => (i128::from(ts) - i128::from(offset)).rem_euclid(i128::from(unit)) as i64,
    }
}

impl Slicing {
    /// Windows of `size` every `slide` (both at least 1 ms), shifted by `offset`.
    pub(crate) fn new(size: i64, slide: i64, offset: i64, event_time: bool) -> Self {
        let (size, slide) = (size.max(1), slide.max(1));
        Slicing {
            size,
            slide,
            offset,
            slice: gcd(size, slide),
            event_time,
        }
    }

    /// Tumbling windows (one slice per window).
    pub(crate) fn tumbling(&self) -> bool {
        self.size == self.slide
    }

    pub(crate) fn event_time(&self) -> bool {
        self.event_time
    }

    /// The start of the slice holding `ts` (cut at `i64::MIN`).
    fn slice_start(&self, ts: Timestamp) -> Timestamp {
        let r = rem(ts, self.offset, self.slice);
        ts.checked_sub(r).unwrap_or(i64::MIN)
    }

    /// The windows holding `ts`, latest first (the assigner's order), cut at the ends of the
    /// `i64` range as the assigner cuts them.
    fn windows_of(&self, ts: Timestamp) -> impl Iterator<Item = TimeWindow> {
        let (wide, size, slide) = (
            i128::from(ts),
            i128::from(self.size),
            i128::from(self.slide),
        );
        let first = wide - i128::from(rem(ts, self.offset, self.slide));
        (0..)
            .map(move |k: i128| first - k * slide)
            .take_while(move |start| *start > wide - size)
            .map(move |start| TimeWindow::new(saturate(start), saturate(start + size)))
    }

    /// The windows whose `max_timestamp` is `t` (usually one, or none when `t + 1 - size` is
    /// not on the slide's grid; several only where ends are cut at `i64::MAX`).
    fn windows_ending_at(&self, t: Timestamp) -> WindowBuf<TimeWindow> {
        let mut out = WindowBuf::new();
        if t < i64::MAX - 1 {
            let end = t + 1;
            let start = i128::from(end) - i128::from(self.size);
            if (start - i128::from(self.offset)).rem_euclid(i128::from(self.slide)) == 0 {
                out.push(TimeWindow::new(saturate(start), end));
            }
        } else {
            out.extend(self.windows_of(t).filter(|w| w.max_timestamp() == t));
        }
        out
    }
}

/// One key's non-empty slices, by start time.
#[derive(Serialize, Deserialize)]
#[serde(bound(serialize = "Acc: Serialize"))]
#[serde(bound(deserialize = "Acc: serde::de::DeserializeOwned"))]
pub(crate) struct KeySlices<Acc> {
    slices: VecDeque<(Timestamp, Acc)>,
}

/// What the keyed side of a two-phase aggregation receives.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) enum Partial<K, T, Acc> {
    /// `n` records of `key` in the slice starting at `start`, pre-aggregated on one worker.
    Slice {
        key: K,
        start: Timestamp,
        acc: Acc,
        n: u64,
    },
    /// A record that might be late or re-fire a window: judged alone.
    Raw(T),
}

/// The sliced window operator: a keyed process function over one slice accumulator per key
/// and slice.
pub(crate) struct SlicedOperator<K, T, W, R, C> {
    pub(crate) slicing: Slicing,
    pub(crate) contents: Arc<C>,
    pub(crate) allowed_lateness: i64,
    pub(crate) late_tag: Option<OutputTag<T>>,
    pub(crate) _types: Types<K, W, R>,
}

/// The key, window and result types of a [`SlicedOperator`].
pub(crate) type Types<K, W, R> = PhantomData<fn() -> (K, W, R)>;

type SCtx<'a, K, Acc, R> = ProcessContext<'a, K, KeySlices<Acc>, R>;

impl<K, T, W, R, C> SlicedOperator<K, T, W, R, C>
where
    K: Data + Hash + Eq,
    T: Data,
    W: Window,
    R: Data,
    C: Contents<K, T, W, R>,
{
    /// When a window's state is dropped (its end, plus the lateness in event time).
    fn cleanup_time(&self, w: &TimeWindow) -> Timestamp {
        if self.slicing.event_time {
            w.max_timestamp().saturating_add(self.allowed_lateness)
        } else {
            w.max_timestamp()
        }
    }

    fn is_late(&self, w: &TimeWindow, watermark: Timestamp) -> bool {
        self.slicing.event_time && self.cleanup_time(w) <= watermark
    }

    /// The time a record is sliced by: its timestamp, or the clock in processing time; `None`
    /// (the job failed) for an event-time record without a timestamp.
    fn time_of(&self, ctx: &mut SCtx<'_, K, C::Acc, R>) -> Option<Timestamp> {
        if !self.slicing.event_time {
            return Some(processing_time_now());
        }
        let ts = ctx.timestamp();
        if ts == NO_TIMESTAMP {
            let name = ctx.operator_name().to_owned();
            ctx.fail(SpateError::Config(format!(
                "window operator {name}: a record has no timestamp; event-time windows need \
                 `assign_timestamps_and_watermarks` upstream"
            )));
            return None;
        }
        Some(ts)
    }

    /// Handles one record with time `ts` (its timestamp, or the clock in processing time).
    fn record(&self, value: T, ts: Timestamp, ctx: &mut SCtx<'_, K, C::Acc, R>) {
        let watermark = ctx.current_watermark();
        let event = self.slicing.event_time;
        let accepted = match self.slicing.windows_of(ts).next() {
            // The latest window has the latest cleanup: if it is late, all are.
            Some(latest) => !self.is_late(&latest, watermark),
            None => false,
        };
        if !accepted {
            if event && ts.saturating_add(self.allowed_lateness) <= watermark {
                match &self.late_tag {
                    Some(tag) => ctx.output(tag, value),
                    None => ctx.count_late_record_dropped(),
                }
            }
            return;
        }
        let start = self.slicing.slice_start(ts);
        self.add(start, ts, ctx, |acc| self.contents.add(acc, &value));
    }

    /// Adds into the key's slice at `start` with `f` (`ts` is a time in the slice), registering
    /// the timers of its windows when the slice is new, then re-fires the windows that have
    /// ended but are not late.
    fn add(
        &self,
        start: Timestamp,
        ts: Timestamp,
        ctx: &mut SCtx<'_, K, C::Acc, R>,
        f: impl FnOnce(&mut C::Acc),
    ) {
        let watermark = ctx.current_watermark();
        let mut st = ctx.state().take().unwrap_or(KeySlices {
            slices: VecDeque::new(),
        });
        // Records mostly reach the latest slice: look from the back.
        let at = st.slices.iter().rposition(|(s, _)| *s <= start);
        match at {
            Some(i) if st.slices[i].0 == start => f(&mut st.slices[i].1),
            _ => {
                let mut acc = self.contents.create();
                f(&mut acc);
                let i = at.map_or(0, |i| i + 1);
                let prev = at.map(|i| st.slices[i].0);
                let next = st.slices.get(i).map(|s| s.0);
                st.slices.insert(i, (start, acc));
                self.register_timers(ts, watermark, (prev, next), ctx);
            }
        }
        // Only a record at or behind the watermark can find an ended window.
        if self.slicing.event_time && ts <= watermark {
            let key = ctx.key();
            for w in self.slicing.windows_of(ts) {
                if w.max_timestamp() <= watermark && !self.is_late(&w, watermark) {
                    self.emit(&w, &st, key, watermark, ctx);
                }
            }
        }
        *ctx.state() = Some(st);
    }

    /// The timers of the windows holding `ts` (in a new slice) that are not late: their end
    /// (the trigger's) and their cleanup time, as the per-window operator registers them.
    /// A window that holds a neighbour (`prev` or `next`, the starts of the slices before and
    /// after) got them when its first slice came (and that slice is kept while the window is
    /// open), so in order only the newest window registers.
    fn register_timers(
        &self,
        ts: Timestamp,
        watermark: Timestamp,
        (prev, next): (Option<Timestamp>, Option<Timestamp>),
        ctx: &mut SCtx<'_, K, C::Acc, R>,
    ) {
        for w in self.slicing.windows_of(ts) {
            if self.is_late(&w, watermark) {
                break; // earlier windows are late too
            }
            if prev.is_some_and(|p| p >= w.start) || next.is_some_and(|n| n < w.end) {
                continue;
            }
            let end = w.max_timestamp();
            let cleanup = self.cleanup_time(&w);
            if self.slicing.event_time {
                if end > watermark {
                    ctx.register_event_time_timer(end);
                }
                if cleanup != end && cleanup != MAX_WATERMARK {
                    ctx.register_event_time_timer(cleanup);
                }
            } else {
                ctx.register_processing_time_timer(end);
            }
        }
    }

    /// Emits window `w`'s result (at `w.max_timestamp()`) if any of its slices holds records.
    fn emit(
        &self,
        w: &TimeWindow,
        st: &KeySlices<C::Acc>,
        key: &K,
        watermark: Timestamp,
        ctx: &mut SCtx<'_, K, C::Acc, R>,
    ) {
        let from = st.slices.partition_point(|(s, _)| *s < w.start);
        let mut acc: Option<C::Acc> = None;
        for (_, slice) in st.slices.range(from..).take_while(|(s, _)| *s < w.end) {
            acc = Some(match acc {
                None => slice.clone(),
                Some(a) => self.contents.merge(a, slice.clone()),
            });
        }
        let Some(acc) = acc else { return };
        // Only built when `W` is `TimeWindow` (see `WindowedStream::build`).
        let Some(window) = (w as &dyn Any).downcast_ref::<W>() else {
            return;
        };
        let wctx = WindowContext {
            window,
            current_watermark: watermark,
            current_processing_time: processing_time_now(),
        };
        let mut out: Vec<R> = Vec::new();
        self.contents.emit(key, &wctx, &acc, &mut out);
        let at = w.max_timestamp();
        for r in out {
            ctx.collect_with_timestamp(r, at);
        }
    }

    /// A timer: fires the windows ending at `time`, then frees the slices whose last window is
    /// cleaned up.
    fn timer(&self, time: Timestamp, domain: TimeDomain, ctx: &mut SCtx<'_, K, C::Acc, R>) {
        if (domain == TimeDomain::EventTime) != self.slicing.event_time {
            return;
        }
        let Some(mut st) = ctx.state().take() else {
            return;
        };
        let key = ctx.key();
        let watermark = ctx.current_watermark();
        for w in self.slicing.windows_ending_at(time) {
            self.emit(&w, &st, key, watermark, ctx);
        }
        while let Some(&(start, _)) = st.slices.front() {
            match self.slicing.windows_of(start).next() {
                Some(last) if self.cleanup_time(&last) > time => break,
                _ => {
                    st.slices.pop_front();
                }
            }
        }
        if !st.slices.is_empty() {
            *ctx.state() = Some(st);
        }
    }
}

impl<K, T, W, R, C> KeyedProcessFunction<K, T, R> for SlicedOperator<K, T, W, R, C>
where
    K: Data + Hash + Eq,
    T: Data,
    W: Window,
    R: Data,
    C: Contents<K, T, W, R>,
{
    type State = KeySlices<C::Acc>;

    fn process_element(&self, value: T, ctx: &mut SCtx<'_, K, C::Acc, R>) {
        if let Some(ts) = self.time_of(ctx) {
            self.record(value, ts, ctx);
        }
    }

    fn on_timer(&self, time: Timestamp, domain: TimeDomain, ctx: &mut SCtx<'_, K, C::Acc, R>) {
        self.timer(time, domain, ctx);
    }
}

/// The keyed side of a two-phase aggregation: the sliced operator over partials.
pub(crate) struct Global<Op>(pub(crate) Op);

impl<K, T, W, R, C> KeyedProcessFunction<K, Partial<K, T, C::Acc>, R>
    for Global<SlicedOperator<K, T, W, R, C>>
where
    K: Data + Hash + Eq,
    T: Data,
    W: Window,
    R: Data,
    C: Contents<K, T, W, R>,
{
    type State = KeySlices<C::Acc>;

    fn process_element(&self, value: Partial<K, T, C::Acc>, ctx: &mut SCtx<'_, K, C::Acc, R>) {
        let op = &self.0;
        match value {
            Partial::Raw(x) => op.process_element(x, ctx),
            Partial::Slice { start, acc, n, .. } => {
                let watermark = ctx.current_watermark();
                let late = match op.slicing.windows_of(start).next() {
                    Some(latest) => op.is_late(&latest, watermark),
                    None => true,
                };
                if late {
                    // Not reached: a partial's records are above every watermark its worker
                    // passed on, so above this operator's (see `local_aggregate`).
                    for _ in 0..n {
                        ctx.count_late_record_dropped();
                    }
                    return;
                }
                op.add(start, start, ctx, |into| {
                    let mine = std::mem::replace(into, op.contents.create());
                    *into = op.contents.merge(mine, acc);
                });
            }
        }
    }

    fn on_timer(&self, time: Timestamp, domain: TimeDomain, ctx: &mut SCtx<'_, K, C::Acc, R>) {
        self.0.timer(time, domain, ctx);
    }
}

/// Records buffered by the local phase: per key and slice, the accumulator, the largest
/// timestamp and the number of records.
type Buffer<K, Acc> = HashMap<(K, Timestamp), (Acc, Timestamp, u64), FxBuildHasher>;

/// The largest watermark the local phase has sent at each epoch, for
/// [`local_aggregate`]'s bound: the epochs below the input frontier folded into one.
#[derive(Default)]
struct SentWatermarks {
    /// The largest watermark sent at an epoch below `from`.
    folded: Option<Timestamp>,
    from: Epoch,
    /// Per epoch at or after `from`, the largest watermark sent there.
    by_epoch: std::collections::BTreeMap<Epoch, Timestamp>,
}

impl SentWatermarks {
    /// A watermark `wm` left at epoch `at`.
    fn record(&mut self, at: Epoch, wm: Timestamp) {
        if at < self.from {
            self.folded = Some(self.folded.map_or(wm, |f| f.max(wm)));
        } else {
            let e = self.by_epoch.entry(at).or_insert(wm);
            *e = (*e).max(wm);
        }
    }

    /// The largest watermark sent at an epoch below `epoch` ([`NO_TIMESTAMP`] if none).
    fn below(&self, epoch: Epoch) -> Timestamp {
        // The folded epochs are all below `epoch`, as no record of them comes any more (and
        // counting them otherwise only sends more records alone).
        let later = self.by_epoch.range(..epoch).map(|(_, &wm)| wm).max();
        self.folded
            .into_iter()
            .chain(later)
            .max()
            .unwrap_or(NO_TIMESTAMP)
    }

    /// Folds the epochs below `epoch` (no record of them comes any more) into one.
    fn forget_below(&mut self, epoch: Epoch) {
        if epoch <= self.from {
            return;
        }
        let keep = self.by_epoch.split_off(&epoch);
        let gone = std::mem::replace(&mut self.by_epoch, keep);
        self.folded = gone.into_values().chain(self.folded).max();
        self.from = epoch;
    }
}

/// The most partials the local phase buffers before it sends them on.
const MAX_BUFFERED: usize = 1 << 16;

/// The local phase of a two-phase aggregation, on each worker before the shuffle.
///
/// Per epoch it combines records per key and slice (flushed when the epoch's input is
/// complete, when a record of another epoch comes, or at [`MAX_BUFFERED`] partials), and
/// passes on every watermark message at the latest epoch of the data it has seen (or later).
///
/// Why lateness stays exact. The keyed operator applies a watermark message at epoch `e` only
/// once all its input at epochs `<= e` has arrived, so when it handles a partial of epoch `e`
/// this worker's part of its watermark is at most the largest this worker sent at an epoch
/// below `e`. Such messages leave only while this worker has seen no record of epoch `e` or
/// later (once it has, every message leaves at `e` or after), so when a record of epoch `e`
/// comes their largest watermark, [`SentWatermarks::below`]`(e)`, is known. The keyed
/// operator's watermark is the minimum over all workers, so it is at most that bound too,
/// unless this worker was idle there: an idle slot leaves the minimum. Records are therefore
/// combined only while `timestamp > below(e)` and no idle message has left at an epoch below
/// the record's: such a record is in no late window and re-fires none, whatever the timing,
/// so combining it changes nothing. Other records (behind the watermark, without a timestamp,
/// or between windows) travel alone.
///
/// The bound is per epoch, not the largest watermark received so far, because an upstream
/// window fires its results at the epoch of the watermark that fired them, and that watermark
/// comes with them: the results of a window ending at `t` carry `t`, which that watermark
/// has reached. They are above every watermark of an earlier epoch, so a second window after
/// the first (a chained aggregation, q5's maximum over the counts) is combined too.
pub(crate) fn local_aggregate<'s, K, T, W, R, C>(
    input: Flow<'s, T>,
    key: KeyFn<K, T>,
    slicing: Slicing,
    contents: Arc<C>,
    shared: Arc<JobShared>,
    name: &str,
    cells: Arc<crate::metrics::Cells>,
) -> Flow<'s, Partial<K, T, C::Acc>>
where
    K: Data + Hash + Eq,
    T: Data,
    W: Window,
    R: Data,
    C: Contents<K, T, W, R>,
{
    type OutVec<K, T, Acc> = Vec<(Timestamp, Out<Partial<K, T, Acc>>)>;
    let op_name = format!("{name}.local");
    // How many records the local phase combined, and into how many partials.
    let combined = shared
        .metrics
        .counter(&format!("{name}.numLocalRecordsCombined"));
    let partials = shared
        .metrics
        .counter(&format!("{name}.numLocalPartialsOut"));
    let name = name.to_owned();
    let both = input
        .data
        .binary_frontier::<_, CapacityContainerBuilder<OutVec<K, T, C::Acc>>, _, _, _, _>(
            input.wm,
            Pipeline,
            Pipeline,
            &op_name,
            move |_initial, _info| {
                let mut sent = SentWatermarks::default();
                let mut idle_from: Option<Epoch> = None;
                let mut max_data_epoch: Epoch = 0;
                let mut held: Option<Capability<Epoch>> = None;
                let mut buffer: Buffer<K, C::Acc> = HashMap::with_hasher(FxBuildHasher);
                let mut out: OutVec<K, T, C::Acc> = Vec::new();
                let flush = move |held: &mut Option<Capability<Epoch>>,
                                  buffer: &mut Buffer<K, C::Acc>,
                                  out: &mut OutVec<K, T, C::Acc>|
                      -> Option<Capability<Epoch>> {
                    let cap = held.take()?;
                    partials.fetch_add(buffer.len() as u64, Ordering::Relaxed);
                    out.extend(buffer.drain().map(|((key, start), (acc, ts, n))| {
                        (ts, Out::Record(Partial::Slice { key, start, acc, n }))
                    }));
                    Some(cap)
                };
                move |(data, data_frontier), (wms, _), output| {
                    let _busy = cells.busy();
                    // Watermarks first, so that a message that arrives with data of a later
                    // epoch still leaves at its own epoch.
                    wms.for_each(|cap, batch| {
                        let Some(&epoch) = cap.least() else { return };
                        let at = epoch.max(max_data_epoch);
                        let cap = cap.delayed(&at, 0);
                        let mut session = output.session(&cap);
                        for msg in batch.drain(..) {
                            if msg.idle {
                                idle_from = Some(idle_from.map_or(at, |f| f.min(at)));
                            } else {
                                sent.record(at, msg.wm);
                            }
                            session.give((NO_TIMESTAMP, Out::Watermark(msg)));
                        }
                    });
                    data.for_each(|cap, batch| {
                        cells.count_in(batch.len());
                        let Some(&epoch) = cap.least() else { return };
                        max_data_epoch = max_data_epoch.max(epoch);
                        if held.as_ref().is_some_and(|h| *h.time() != epoch) {
                            if let Some(h) = flush(&mut held, &mut buffer, &mut out) {
                                output.session(&h).give_container(&mut out);
                                out.clear();
                            }
                        }
                        let combine = idle_from.is_none_or(|f| f >= epoch);
                        let local_wm = sent.below(epoch);
                        let mut n = 0u64;
                        let done = crate::function::guard(&shared, &name, || {
                            for (ts, x) in batch.drain(..) {
                                let alone = !combine
                                    || ts == NO_TIMESTAMP
                                    || ts <= local_wm
                                    || slicing.windows_of(ts).next().is_none();
                                if alone {
                                    out.push((ts, Out::Record(Partial::Raw(x))));
                                    continue;
                                }
                                let start = slicing.slice_start(ts);
                                let entry = buffer
                                    .entry((key(&x), start))
                                    .or_insert_with(|| (contents.create(), ts, 0));
                                contents.add(&mut entry.0, &x);
                                entry.1 = entry.1.max(ts);
                                entry.2 += 1;
                                n += 1;
                            }
                        });
                        combined.fetch_add(n, Ordering::Relaxed);
                        if done.is_none() {
                            buffer.clear();
                            out.clear();
                            return;
                        }
                        if !out.is_empty() {
                            output.session(&cap).give_container(&mut out);
                            out.clear();
                        }
                        if held.is_none() && !buffer.is_empty() {
                            held = cap.retain_least(0);
                        }
                        if buffer.len() >= MAX_BUFFERED {
                            if let Some(h) = flush(&mut held, &mut buffer, &mut out) {
                                output.session(&h).give_container(&mut out);
                                out.clear();
                            }
                        }
                    });
                    // No record of an epoch below the input frontier comes any more.
                    if let Some(&least) = data_frontier.frontier().first() {
                        sent.forget_below(least);
                    }
                    // The epoch's input is complete: send its partials.
                    let complete = held
                        .as_ref()
                        .is_some_and(|h| !data_frontier.less_equal(h.time()));
                    if complete {
                        if let Some(h) = flush(&mut held, &mut buffer, &mut out) {
                            output.session(&h).give_container(&mut out);
                            out.clear();
                        }
                    }
                }
            },
        );
    split_out(both)
}
