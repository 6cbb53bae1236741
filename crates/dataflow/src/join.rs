//! Joins of two streams on event time: the interval join, the window join and the co-group.
//!
//! * **Interval join** (Flink's `KeyedStream.intervalJoin`): pairs `a` of the left stream and
//!   `b` of the right stream with equal keys where `b.ts ∈ [a.ts + lower, a.ts + upper]`. It is
//!   a [`KeyedCoProcessFunction`] that buffers each side per key and timestamp and cleans the
//!   buffers with event-time timers, exactly as Flink's `IntervalJoinOperator`:
//!
//!   ```text
//!   left a (ts)  ──▶ late (ts < watermark)? ──yes──▶ side output / dropped
//!                         │ no
//!                         ├─▶ left[ts] += a
//!                         ├─▶ join with right[ts + lower ..= ts + upper]   (output ts = max)
//!                         └─▶ timer at ts + max(upper, 0): then left[ts] is dropped
//!   right b (ts) ──▶ the same, mirrored: left[ts - upper ..= ts - lower], timer at ts + max(-lower, 0)
//!   ```
//!
//!   A buffered record is dropped once no record that is not late can still join it.
//!
//! * **Window join** (Flink's `a.join(b).where(..).equalTo(..).window(..).apply(..)`) and
//!   **co-group** (`a.coGroup(b)...`): both sides are tagged ([`Either`]), united, keyed and
//!   windowed by one window operator; each window's elements are split back per side. The join
//!   calls its function for every pair of the window (an inner join); the co-group calls it
//!   once per key and window with all elements of both sides, one of which may be empty.

use std::collections::BTreeMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use spate_types::Data;

use crate::keyed::{KeyFn, KeyedStream};
use crate::process::{
    no_timestamp_error, Either, KeyedCoProcessFunction, OutputTag, ProcessContext, TimeDomain,
};
use crate::stream::DataStream;
use crate::time::{Timestamp, MAX_WATERMARK, NO_TIMESTAMP};
use crate::window::{Trigger, Window, WindowAssigner, WindowContext, WindowedStream};

// ---------------------------------------------------------------------------------------------
// Interval join
// ---------------------------------------------------------------------------------------------

/// The first step of an interval join: two keyed streams, before the bounds are set (Flink's
/// `KeyedStream.IntervalJoin`). Made by [`KeyedStream::interval_join`].
pub struct IntervalJoin<K, A, B> {
    left: KeyedStream<K, A>,
    right: KeyedStream<K, B>,
}

/// An interval join with its bounds, ready for [`IntervalJoined::process`] (Flink's
/// `KeyedStream.IntervalJoined`).
pub struct IntervalJoined<K, A, B> {
    left: KeyedStream<K, A>,
    right: KeyedStream<K, B>,
    lower_ms: i64,
    upper_ms: i64,
    lower_inclusive: bool,
    upper_inclusive: bool,
    left_late: Option<OutputTag<A>>,
    right_late: Option<OutputTag<B>>,
}

impl<K: Data + Hash + Eq, A: Data> KeyedStream<K, A> {
    /// Joins this stream (the left side) with `other` (the right side) on their keys and event
    /// time, within bounds set by [`IntervalJoin::between`] (Flink's `intervalJoin`).
    ///
    /// ```
    /// use spate_dataflow::{DataStream, JoinContext};
    /// # fn f(orders: DataStream<(u32, i64)>, payments: DataStream<(u32, i64)>) {
    /// // Each order with the payments made in the 10 s after it.
    /// let paid = orders
    ///     .key_by(|o: &(u32, i64)| o.0)
    ///     .interval_join(&payments.key_by(|p: &(u32, i64)| p.0))
    ///     .between(0, 10_000)
    ///     .process(|o: &(u32, i64), p: &(u32, i64), ctx: &mut JoinContext<'_, (u32, i64)>| {
    ///         ctx.collect((o.0, ctx.right_timestamp() - ctx.left_timestamp()))
    ///     });
    /// # let _ = paid; }
    /// ```
    pub fn interval_join<B: Data>(&self, other: &KeyedStream<K, B>) -> IntervalJoin<K, A, B> {
        assert!(
            Rc::ptr_eq(&self.stream.plan, &other.stream.plan),
            "interval_join of streams from different jobs"
        );
        IntervalJoin {
            left: self.clone(),
            right: other.clone(),
        }
    }
}

impl<K: Data + Hash + Eq, A: Data, B: Data> IntervalJoin<K, A, B> {
    /// Joins left `a` with right `b` when `a.ts + lower_ms <= b.ts <= a.ts + upper_ms` (both
    /// bounds inclusive until [`IntervalJoined::lower_bound_exclusive`] /
    /// [`IntervalJoined::upper_bound_exclusive`]). Bounds may be negative.
    ///
    /// # Panics
    /// If `lower_ms > upper_ms`, as Flink rejects such a join when it is built.
    pub fn between(&self, lower_ms: i64, upper_ms: i64) -> IntervalJoined<K, A, B> {
        assert!(
            lower_ms <= upper_ms,
            "interval_join: the lower bound ({lower_ms} ms) must not exceed the upper bound \
             ({upper_ms} ms)"
        );
        IntervalJoined {
            left: self.left.clone(),
            right: self.right.clone(),
            lower_ms,
            upper_ms,
            lower_inclusive: true,
            upper_inclusive: true,
            left_late: None,
            right_late: None,
        }
    }
}

impl<K: Data + Hash + Eq, A: Data, B: Data> IntervalJoined<K, A, B> {
    /// Excludes `b.ts == a.ts + lower_ms`.
    pub fn lower_bound_exclusive(mut self) -> Self {
        self.lower_inclusive = false;
        self
    }

    /// Excludes `b.ts == a.ts + upper_ms`.
    pub fn upper_bound_exclusive(mut self) -> Self {
        self.upper_inclusive = false;
        self
    }

    /// Sends left records that arrive late (timestamp below the operator's watermark) to the
    /// side output `tag` instead of dropping them (Flink's `sideOutputLeftLateData`).
    pub fn side_output_left_late_data(mut self, tag: &OutputTag<A>) -> Self {
        self.left_late = Some(tag.clone());
        self
    }

    /// Sends late right records to the side output `tag` (Flink's `sideOutputRightLateData`).
    pub fn side_output_right_late_data(mut self, tag: &OutputTag<B>) -> Self {
        self.right_late = Some(tag.clone());
        self
    }

    /// Calls `f` for every joined pair (Flink's `ProcessJoinFunction`); what it collects gets
    /// the larger of the two timestamps.
    ///
    /// Both inputs need event timestamps (`assign_timestamps_and_watermarks` upstream): a
    /// record without one fails the job, as in Flink. A record whose timestamp is below the
    /// operator's watermark (the minimum of both inputs') is late: it joins nothing and goes
    /// to the late side output if one is set. Late records of either side are retrieved with
    /// [`DataStream::side_output`] on the returned stream.
    pub fn process<O, F>(&self, f: F) -> DataStream<O>
    where
        O: Data,
        F: Fn(&A, &B, &mut JoinContext<'_, O>) + Send + Sync + 'static,
    {
        // Flink moves exclusive bounds by one millisecond so that the join needs no other test.
        let lower = if self.lower_inclusive {
            self.lower_ms
        } else {
            self.lower_ms.saturating_add(1)
        };
        let upper = if self.upper_inclusive {
            self.upper_ms
        } else {
            self.upper_ms.saturating_sub(1)
        };
        let out = self
            .left
            .connect(&self.right)
            .process(IntervalJoinFunction {
                bounds: Bounds { lower, upper },
                left_late: self.left_late.clone(),
                right_late: self.right_late.clone(),
                f,
                _types: PhantomData,
            });
        rename_operator(&out, "interval_join");
        out
    }
}

/// What the function of an interval join sees for one joined pair (Flink's
/// `ProcessJoinFunction.Context` with its `Collector`).
pub struct JoinContext<'a, O> {
    left_ts: Timestamp,
    right_ts: Timestamp,
    out: &'a mut Vec<(Timestamp, O)>,
}

impl<O> JoinContext<'_, O> {
    /// The left record's timestamp.
    pub fn left_timestamp(&self) -> Timestamp {
        self.left_ts
    }

    /// The right record's timestamp.
    pub fn right_timestamp(&self) -> Timestamp {
        self.right_ts
    }

    /// The pair's timestamp, which its outputs get: the larger of the two.
    pub fn timestamp(&self) -> Timestamp {
        self.left_ts.max(self.right_ts)
    }

    /// Emits `value` with the pair's timestamp.
    pub fn collect(&mut self, value: O) {
        let ts = self.timestamp();
        self.out.push((ts, value));
    }
}

/// The join bounds after exclusive bounds were moved by one: `b.ts - a.ts ∈ [lower, upper]`.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    lower: i64,
    upper: i64,
}

impl Bounds {
    /// When a left record at `ts` can no longer join: once the watermark passes it, every right
    /// record still to come is later than `ts + upper`.
    fn left_cleanup(self, ts: Timestamp) -> Timestamp {
        if self.upper > 0 {
            ts.saturating_add(self.upper)
        } else {
            ts
        }
    }

    /// When a right record at `ts` can no longer join (left records join it up to `ts - lower`).
    fn right_cleanup(self, ts: Timestamp) -> Timestamp {
        if self.lower < 0 {
            ts.saturating_sub(self.lower)
        } else {
            ts
        }
    }

    /// The left bucket whose cleanup timer is `timer` (the inverse of `left_cleanup`).
    fn left_bucket(self, timer: Timestamp) -> Timestamp {
        if self.upper > 0 {
            timer.saturating_sub(self.upper)
        } else {
            timer
        }
    }

    /// The right bucket whose cleanup timer is `timer` (the inverse of `right_cleanup`).
    fn right_bucket(self, timer: Timestamp) -> Timestamp {
        if self.lower < 0 {
            timer.saturating_add(self.lower)
        } else {
            timer
        }
    }
}

/// One key's buffered records of both sides, by timestamp.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound(serialize = "A: serde::Serialize, B: serde::Serialize"))]
#[serde(bound(deserialize = "A: serde::de::DeserializeOwned, B: serde::de::DeserializeOwned"))]
struct IntervalJoinBuffers<A, B> {
    left: BTreeMap<Timestamp, Vec<A>>,
    right: BTreeMap<Timestamp, Vec<B>>,
}

impl<A, B> Default for IntervalJoinBuffers<A, B> {
    fn default() -> Self {
        IntervalJoinBuffers {
            left: BTreeMap::new(),
            right: BTreeMap::new(),
        }
    }
}

/// The interval join as a keyed co-process function (Flink's `IntervalJoinOperator`).
struct IntervalJoinFunction<A, B, O, F> {
    bounds: Bounds,
    left_late: Option<OutputTag<A>>,
    right_late: Option<OutputTag<B>>,
    f: F,
    _types: PhantomData<fn(A, B) -> O>,
}

impl<A, B, O, F> IntervalJoinFunction<A, B, O, F>
where
    A: Data,
    B: Data,
    O: Data,
    F: Fn(&A, &B, &mut JoinContext<'_, O>) + Send + Sync + 'static,
{
    /// Calls the user function on one pair and gathers its outputs.
    fn join(
        &self,
        a: &A,
        b: &B,
        left_ts: Timestamp,
        right_ts: Timestamp,
        out: &mut Vec<(Timestamp, O)>,
    ) {
        let mut ctx = JoinContext {
            left_ts,
            right_ts,
            out,
        };
        (self.f)(a, b, &mut ctx);
    }
}

/// Emits what a join produced, each output with its own timestamp.
fn emit<K: Hash + Eq + Clone, S, O>(
    ctx: &mut ProcessContext<'_, K, S, O>,
    joined: Vec<(Timestamp, O)>,
) {
    for (ts, o) in joined {
        ctx.collect_with_timestamp(o, ts);
    }
}

impl<K, A, B, O, F> KeyedCoProcessFunction<K, A, B, O> for IntervalJoinFunction<A, B, O, F>
where
    K: Hash + Eq + Clone,
    A: Data,
    B: Data,
    O: Data,
    F: Fn(&A, &B, &mut JoinContext<'_, O>) + Send + Sync + 'static,
{
    type State = IntervalJoinBuffers<A, B>;

    fn process_element1(&self, a: A, ctx: &mut ProcessContext<'_, K, Self::State, O>) {
        let ts = ctx.timestamp();
        if ts == NO_TIMESTAMP {
            fail_without_timestamp(ctx);
            return;
        }
        if ts < ctx.current_watermark() {
            match &self.left_late {
                Some(tag) => ctx.output(tag, a),
                None => ctx.count_late_record_dropped(),
            }
            return;
        }
        let Bounds { lower, upper } = self.bounds;
        let mut joined = Vec::new();
        let buffers = ctx.state().get_or_insert_with(Default::default);
        let (from, to) = (ts.saturating_add(lower), ts.saturating_add(upper));
        if from <= to {
            for (&right_ts, bs) in buffers.right.range(from..=to) {
                for b in bs {
                    self.join(&a, b, ts, right_ts, &mut joined);
                }
            }
        }
        buffers.left.entry(ts).or_default().push(a);
        emit(ctx, joined);
        ctx.register_event_time_timer(self.bounds.left_cleanup(ts));
    }

    fn process_element2(&self, b: B, ctx: &mut ProcessContext<'_, K, Self::State, O>) {
        let ts = ctx.timestamp();
        if ts == NO_TIMESTAMP {
            fail_without_timestamp(ctx);
            return;
        }
        if ts < ctx.current_watermark() {
            match &self.right_late {
                Some(tag) => ctx.output(tag, b),
                None => ctx.count_late_record_dropped(),
            }
            return;
        }
        let Bounds { lower, upper } = self.bounds;
        let mut joined = Vec::new();
        let buffers = ctx.state().get_or_insert_with(Default::default);
        let (from, to) = (ts.saturating_sub(upper), ts.saturating_sub(lower));
        if from <= to {
            for (&left_ts, as_) in buffers.left.range(from..=to) {
                for a in as_ {
                    self.join(a, &b, left_ts, ts, &mut joined);
                }
            }
        }
        buffers.right.entry(ts).or_default().push(b);
        emit(ctx, joined);
        ctx.register_event_time_timer(self.bounds.right_cleanup(ts));
    }

    fn on_timer(
        &self,
        timestamp: Timestamp,
        domain: TimeDomain,
        ctx: &mut ProcessContext<'_, K, Self::State, O>,
    ) {
        if domain != TimeDomain::EventTime {
            return;
        }
        // Timers are per key and time only, so one timer stands for Flink's two cleanup
        // namespaces: the left bucket and the right bucket whose cleanup time this is.
        let state = ctx.state();
        if timestamp == MAX_WATERMARK {
            // The end of event time, where cleanup times that would lie beyond it saturate:
            // nothing can join any more.
            *state = None;
            return;
        }
        if let Some(buffers) = state.as_mut() {
            buffers.left.remove(&self.bounds.left_bucket(timestamp));
            buffers.right.remove(&self.bounds.right_bucket(timestamp));
            if buffers.left.is_empty() && buffers.right.is_empty() {
                *state = None;
            }
        }
    }
}

/// Fails the job: an interval join cannot place a record without a timestamp, and Flink
/// fails such a job too.
fn fail_without_timestamp<K: Hash + Eq + Clone, S, O>(ctx: &mut ProcessContext<'_, K, S, O>) {
    let error = no_timestamp_error(ctx.operator_name());
    ctx.fail(error);
}

/// Names the operator behind `stream` (the node before its main-output node) `op-<id>`.
fn rename_operator<T: Data>(stream: &DataStream<T>, op: &str) {
    let mut plan = stream.plan.borrow_mut();
    let operator = plan.nodes[stream.node].inputs[0];
    plan.nodes[operator].name = format!("{op}-{operator}");
    plan.nodes[operator].op = op.to_owned();
}

// ---------------------------------------------------------------------------------------------
// Window join and co-group
// ---------------------------------------------------------------------------------------------

/// Marks a window join: its function sees every pair of a window (an inner join).
#[derive(Debug, Clone, Copy)]
pub struct InnerJoin;

/// Marks a co-group: its function sees all elements of both sides of a window at once.
#[derive(Debug, Clone, Copy)]
pub struct CoGroup;

/// Two streams to be joined in windows, before their keys are set (Flink's `JoinedStreams`).
/// Made by [`DataStream::join`]; [`CoGroupedStreams`] by [`DataStream::co_group`].
///
/// ```
/// use std::time::Duration;
/// use spate_dataflow::{DataStream, TumblingEventTimeWindows};
/// # fn f(bids: DataStream<(u32, u64)>, asks: DataStream<(u32, u64)>) {
/// // Each bid with each ask of the same item in the same minute.
/// let pairs = bids
///     .join(&asks)
///     .where_key(|b: &(u32, u64)| b.0)
///     .equal_to(|a: &(u32, u64)| a.0)
///     .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
///     .apply(|b: &(u32, u64), a: &(u32, u64)| (b.0, b.1, a.1));
/// // Per item and minute, the number of bids and of asks (one side may be empty).
/// let counts = bids
///     .co_group(&asks)
///     .where_key(|b: &(u32, u64)| b.0)
///     .equal_to(|a: &(u32, u64)| a.0)
///     .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
///     .apply(|b: &[(u32, u64)], a: &[(u32, u64)], out: &mut Vec<(usize, usize)>| {
///         out.push((b.len(), a.len()))
///     });
/// # let _ = (pairs, counts); }
/// ```
pub struct JoinedStreams<A, B, M = InnerJoin> {
    left: DataStream<A>,
    right: DataStream<B>,
    _kind: PhantomData<fn() -> M>,
}

/// Two streams to be co-grouped in windows (Flink's `CoGroupedStreams`).
pub type CoGroupedStreams<A, B> = JoinedStreams<A, B, CoGroup>;

/// A window join or co-group with the left key set (Flink's `JoinedStreams.Where`).
pub struct JoinWhere<K, A, B, M> {
    left: DataStream<A>,
    right: DataStream<B>,
    left_key: KeyFn<K, A>,
    _kind: PhantomData<fn() -> M>,
}

/// A window join or co-group with both keys set, waiting for its windows (Flink's
/// `JoinedStreams.EqualTo`).
pub struct JoinEqualTo<K, A, B, M> {
    left: DataStream<A>,
    right: DataStream<B>,
    left_key: KeyFn<K, A>,
    right_key: KeyFn<K, B>,
    _kind: PhantomData<fn() -> M>,
}

/// A window join or co-group with its windows, waiting for its function (Flink's
/// `JoinedStreams.WithWindow`).
pub struct JoinWithWindow<K, A, B, W, M> {
    windowed: WindowedStream<K, Either<A, B>, W>,
    _kind: PhantomData<fn() -> M>,
}

impl<A: Data> DataStream<A> {
    /// Joins this stream with `other` in windows: every pair of elements with equal keys in
    /// the same window (Flink's `DataStream.join`). Set the keys with
    /// [`JoinedStreams::where_key`] and [`JoinWhere::equal_to`], the windows with
    /// [`JoinEqualTo::window`], the function with [`JoinWithWindow::apply`].
    pub fn join<B: Data>(&self, other: &DataStream<B>) -> JoinedStreams<A, B> {
        JoinedStreams::new(self, other)
    }

    /// Groups this stream and `other` in windows: per key and window, all elements of both
    /// sides (Flink's `DataStream.coGroup`). Built like [`DataStream::join`].
    pub fn co_group<B: Data>(&self, other: &DataStream<B>) -> CoGroupedStreams<A, B> {
        JoinedStreams::new(self, other)
    }
}

impl<A: Data, B: Data, M> JoinedStreams<A, B, M> {
    fn new(left: &DataStream<A>, right: &DataStream<B>) -> Self {
        assert!(
            Rc::ptr_eq(&left.plan, &right.plan),
            "join or co_group of streams from different jobs"
        );
        JoinedStreams {
            left: left.clone(),
            right: right.clone(),
            _kind: PhantomData,
        }
    }

    /// The key of the left (this) stream's elements (Flink's `where`).
    pub fn where_key<K: Data + Hash + Eq>(
        &self,
        key: impl Fn(&A) -> K + Send + Sync + 'static,
    ) -> JoinWhere<K, A, B, M> {
        JoinWhere {
            left: self.left.clone(),
            right: self.right.clone(),
            left_key: Arc::new(key),
            _kind: PhantomData,
        }
    }
}

impl<K: Data + Hash + Eq, A: Data, B: Data, M> JoinWhere<K, A, B, M> {
    /// The key of the right stream's elements, of the same type as the left key (Flink's
    /// `equalTo`).
    pub fn equal_to(
        &self,
        key: impl Fn(&B) -> K + Send + Sync + 'static,
    ) -> JoinEqualTo<K, A, B, M> {
        JoinEqualTo {
            left: self.left.clone(),
            right: self.right.clone(),
            left_key: Arc::clone(&self.left_key),
            right_key: Arc::new(key),
            _kind: PhantomData,
        }
    }
}

impl<K: Data + Hash + Eq, A: Data, B: Data, M> JoinEqualTo<K, A, B, M> {
    /// Puts the elements of both sides into windows of `assigner`, per key; a window's
    /// result carries its `max_timestamp`. Lateness is the window operator's: an element too
    /// late for every window is dropped and counted (see [`crate::window`]).
    pub fn window<W: WindowAssigner<Either<A, B>>>(
        &self,
        assigner: W,
    ) -> JoinWithWindow<K, A, B, W::W, M> {
        let (k1, k2) = (Arc::clone(&self.left_key), Arc::clone(&self.right_key));
        let tagged = self
            .left
            .map(Either::<A, B>::First)
            .union(&[self.right.map(Either::<A, B>::Second)]);
        let keyed = tagged.key_by(move |e: &Either<A, B>| match e {
            Either::First(a) => k1(a),
            Either::Second(b) => k2(b),
        });
        JoinWithWindow {
            windowed: keyed.window(assigner),
            _kind: PhantomData,
        }
    }
}

impl<K: Data + Hash + Eq, A: Data, B: Data, W: Window, M> JoinWithWindow<K, A, B, W, M> {
    /// Replaces the assigner's default trigger (Flink's `WithWindow.trigger`).
    pub fn trigger(self, trigger: impl Trigger<Either<A, B>, W>) -> Self {
        JoinWithWindow {
            windowed: self.windowed.trigger(trigger),
            _kind: PhantomData,
        }
    }

    /// Keeps windows open for `lateness` after their end: a late element within it fires its
    /// window again, with all of the window's elements (Flink's `allowedLateness`).
    pub fn allowed_lateness(self, lateness: Duration) -> Self {
        JoinWithWindow {
            windowed: self.windowed.allowed_lateness(lateness),
            _kind: PhantomData,
        }
    }

    /// The window operator with `f` on each fired window's elements, split back per side.
    fn build<R: Data>(
        &self,
        op: &str,
        f: impl Fn(Vec<&A>, Vec<&B>, &mut Vec<R>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        let out = self.windowed.process(
            move |_key: &K,
                  _window: &WindowContext<'_, W>,
                  elements: &[Either<A, B>],
                  out: &mut Vec<R>| {
                let (left, right) = split_sides(elements);
                f(left, right, out);
            },
        );
        rename_operator(&out, op);
        out
    }
}

impl<K: Data + Hash + Eq, A: Data, B: Data, W: Window> JoinWithWindow<K, A, B, W, InnerJoin> {
    /// Calls `f` for every pair of a left and a right element with the same key in the same
    /// window, when the window fires (Flink's `apply(JoinFunction)`); pairs are taken left by
    /// left, each with the right elements in arrival order.
    pub fn apply<R: Data>(&self, f: impl Fn(&A, &B) -> R + Send + Sync + 'static) -> DataStream<R> {
        self.flat_apply(move |a: &A, b: &B, out: &mut Vec<R>| out.push(f(a, b)))
    }

    /// Like [`JoinWithWindow::apply`], but each pair may produce any number of results
    /// (Flink's `apply(FlatJoinFunction)`).
    pub fn flat_apply<R: Data>(
        &self,
        f: impl Fn(&A, &B, &mut Vec<R>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.build("window_join", move |left, right, out| {
            for a in &left {
                for b in &right {
                    f(a, b, out);
                }
            }
        })
    }
}

impl<K: Data + Hash + Eq, A: Data, B: Data, W: Window> JoinWithWindow<K, A, B, W, CoGroup> {
    /// Calls `f` once per key and fired window with the elements of each side in arrival
    /// order (Flink's `apply(CoGroupFunction)`). One side may be empty, never both.
    ///
    /// The elements are copied out of the window's buffer, which holds both sides together.
    pub fn apply<R: Data>(
        &self,
        f: impl Fn(&[A], &[B], &mut Vec<R>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.build("co_group", move |left, right, out| {
            let left: Vec<A> = left.into_iter().cloned().collect();
            let right: Vec<B> = right.into_iter().cloned().collect();
            f(&left, &right, out);
        })
    }
}

/// Splits a window's tagged elements back into the left and right sides, in arrival order.
fn split_sides<A, B>(elements: &[Either<A, B>]) -> (Vec<&A>, Vec<&B>) {
    let mut left = Vec::new();
    let mut right = Vec::new();
    for e in elements {
        match e {
            Either::First(a) => left.push(a),
            Either::Second(b) => right.push(b),
        }
    }
    (left, right)
}
