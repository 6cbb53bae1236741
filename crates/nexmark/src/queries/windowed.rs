//! The windowed queries: q5, q7, q8, q11 and q12.
//!
//! q5 and q7 carry the benchmark's bulk (every bid), so their first stage is a keyed process
//! function that keeps one small accumulator per key and time slice, with timers at window
//! ends (Flink SQL's sliced window aggregation); their second stage, over a few partial
//! results per window, and q8, q11 and q12 use the window API.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use spate_dataflow::{
    AggregateFunction, DataStream, EventTimeSessionWindows, KeyedProcessFunction, ProcessContext,
    TimeDomain, TimeWindow, Timestamp, Trigger, TriggerContext, TriggerResult,
    TumblingEventTimeWindows, TumblingProcessingTimeWindows, Window, MAX_WATERMARK,
};

use super::{ms, with_event_time, Cols, IdBuildHasher, Row};
use crate::model::{Event, Text};

/// q5's row: a hot auction and its number of bids in the window.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct HotItemRow {
    /// Auction id.
    pub auction: i64,
    /// Bids on it in the window.
    pub num: i64,
}

/// q8's row: a new person who opened an auction, and the window start.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct NewSellerRow {
    /// Person id.
    pub id: i64,
    /// Name.
    pub name: Text,
    /// The window start, epoch milliseconds.
    pub start: i64,
}

/// q11's and q12's row: a bidder's number of bids in a window.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SessionCountRow {
    /// Bidder id.
    pub bidder: i64,
    /// Bids in the window.
    pub bid_count: i64,
    /// Window start, epoch milliseconds.
    pub start: i64,
    /// Window end, epoch milliseconds.
    pub end: i64,
}

/// q5's window size and slide.
const HOT_SIZE: Duration = Duration::from_secs(10);
const HOT_SLIDE: Duration = Duration::from_secs(2);

/// The number of bids on one auction in one sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct AuctionCount {
    window_end: i64,
    auction: i64,
    count: i64,
}

/// q5's first stage spreads auctions over this many keys.
const HOT_BUCKETS: i64 = 256;

/// Bids per auction.
type Counts = HashMap<i64, i64, IdBuildHasher>;

/// Counts the bids per auction and sliding window, for the auctions of one key (a bucket).
/// Each `(auction, bids)` record (from [`combine_bids`]) adds its bids to its auction in its
/// `slide`-long slice; at a window's end, the counts
/// of its `size / slide` slices are summed. Elements whose windows have all fired are late
/// and dropped, as Flink's window aggregation does.
struct SlicedCount {
    size: i64,
    slide: i64,
}

/// q5's combiner, before the shuffle: the bids of one batch as `(auction, bids)` per
/// `slide`-long slice, each with the latest timestamp of its bids. [`SlicedCount`] only looks
/// at the slice of a timestamp (to place the bids and to judge them late), so it counts the
/// same as with one record per bid, for any split of the stream into batches; the shuffle and
/// the keyed state see one record per auction and slice instead of one per bid.
fn combine_bids(
    slide: i64,
    batch: &mut Vec<(Timestamp, Event)>,
    out: &mut Vec<(Timestamp, (i64, i64))>,
) {
    // Bids come in time order (or nearly): one map for the current slice, emptied into `out`
    // when the slice changes.
    let mut slice = i64::MIN;
    let mut counts: HashMap<i64, (Timestamp, i64), IdBuildHasher> = HashMap::default();
    let flush = |counts: &mut HashMap<i64, (Timestamp, i64), IdBuildHasher>,
                 out: &mut Vec<(Timestamp, (i64, i64))>| {
        out.extend(counts.drain().map(|(auction, (ts, n))| (ts, (auction, n))));
    };
    for (ts, event) in batch.drain(..) {
        let Event::Bid(bid) = event else { continue };
        let s = ts - ts.rem_euclid(slide);
        if s != slice {
            flush(&mut counts, out);
            slice = s;
        }
        let entry = counts.entry(bid.auction).or_insert((ts, 0));
        entry.0 = entry.0.max(ts);
        entry.1 += 1;
    }
    flush(&mut counts, out);
}

impl KeyedProcessFunction<i64, (i64, i64), AuctionCount> for SlicedCount {
    /// The bucket's slices: (start, bids per auction), in time order.
    type State = VecDeque<(i64, Counts)>;

    fn process_element(
        &self,
        (auction, bids): (i64, i64),
        ctx: &mut ProcessContext<'_, i64, Self::State, AuctionCount>,
    ) {
        let ts = ctx.timestamp();
        let watermark = ctx.current_watermark();
        let slice = ts - ts.rem_euclid(self.slide);
        if slice + self.size - 1 <= watermark {
            for _ in 0..bids {
                ctx.count_late_record_dropped();
            }
            return;
        }
        let slices = ctx.state().get_or_insert_with(VecDeque::new);
        let (i, new) = match slices.back() {
            Some((start, _)) if *start == slice => (slices.len() - 1, false),
            Some((start, _)) if *start > slice => {
                match slices.binary_search_by_key(&slice, |s| s.0) {
                    Ok(i) => (i, false),
                    Err(i) => {
                        slices.insert(i, (slice, Counts::default()));
                        (i, true)
                    }
                }
            }
            _ => {
                slices.push_back((slice, Counts::default()));
                (slices.len() - 1, true)
            }
        };
        *slices[i].1.entry(auction).or_insert(0) += bids;
        if new {
            // The windows that contain the slice end at slice + slide, ..., slice + size.
            let mut end = slice + self.slide;
            while end <= slice + self.size {
                if end - 1 > watermark {
                    ctx.register_event_time_timer(end - 1);
                }
                end += self.slide;
            }
        }
    }

    fn on_timer(
        &self,
        timestamp: Timestamp,
        _domain: TimeDomain,
        ctx: &mut ProcessContext<'_, i64, Self::State, AuctionCount>,
    ) {
        let end = timestamp + 1;
        let start = end - self.size;
        let Some(slices) = ctx.state().as_mut() else {
            return;
        };
        let mut sums = Counts::default();
        for (_, counts) in slices.iter().filter(|(s, _)| (start..end).contains(s)) {
            for (&auction, &n) in counts {
                *sums.entry(auction).or_insert(0) += n;
            }
        }
        // Slices before the next window's start are in no later window.
        while slices.front().is_some_and(|(s, _)| *s < start + self.slide) {
            slices.pop_front();
        }
        if slices.is_empty() {
            *ctx.state() = None;
        }
        // Only the bucket's most bid auctions (ties all kept) can be the window's: the second
        // stage takes the maximum over the buckets' maxima.
        let max = sums.values().copied().max().unwrap_or(0);
        for (auction, count) in sums {
            if count == max {
                ctx.collect(AuctionCount {
                    window_end: end,
                    auction,
                    count,
                });
            }
        }
    }
}

/// The auctions with the highest count in one window (ties all kept).
struct MostBids;

impl AggregateFunction<AuctionCount> for MostBids {
    type Acc = (i64, Vec<i64>);
    type Out = Vec<HotItemRow>;

    fn create_accumulator(&self) -> (i64, Vec<i64>) {
        (0, Vec::new())
    }

    fn add(&self, c: &AuctionCount, acc: &mut (i64, Vec<i64>)) {
        if c.count > acc.0 {
            acc.0 = c.count;
            acc.1.clear();
        }
        if c.count == acc.0 {
            acc.1.push(c.auction);
        }
    }

    fn get_result(&self, acc: &(i64, Vec<i64>)) -> Vec<HotItemRow> {
        acc.1
            .iter()
            .map(|&auction| HotItemRow {
                auction,
                num: acc.0,
            })
            .collect()
    }

    fn merge(&self, a: (i64, Vec<i64>), b: (i64, Vec<i64>)) -> (i64, Vec<i64>) {
        match a.0.cmp(&b.0) {
            std::cmp::Ordering::Greater => a,
            std::cmp::Ordering::Less => b,
            std::cmp::Ordering::Equal => (a.0, [a.1, b.1].concat()),
        }
    }
}

/// q5: hot items, the auctions with the most bids in each sliding window (size 10 s, slide
/// 2 s); ties are all kept.
pub fn q5(events: &DataStream<Event>) -> DataStream<HotItemRow> {
    let (size, slide) = (ms(HOT_SIZE), ms(HOT_SLIDE));
    with_event_time(events)
        .flat_map_batches(move |batch, out| combine_bids(slide, batch, out))
        .name("q5.combine")
        .key_by(|&(auction, _)| auction.rem_euclid(HOT_BUCKETS))
        .process(SlicedCount { size, slide })
        .name("q5.count")
        // Counts carry their window's max timestamp, so each lands in the 2 s tumbling window
        // that ends with its sliding window.
        .key_by(|c| c.window_end)
        .window(TumblingEventTimeWindows::of(HOT_SLIDE))
        .aggregate_with(MostBids, |_end, _w, rows, out| out.extend(rows))
        .name("q5.max")
}

/// q7's window size.
const MAX_PRICE_SIZE: Duration = Duration::from_secs(10);

/// q7's first stage spreads bids over this many keys.
const MAX_PRICE_BUCKETS: i64 = 256;

/// The columns of a bid that q7 outputs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct PriceBidRow {
    /// Auction id.
    pub auction: i64,
    /// Price.
    pub price: i64,
    /// Bidder id.
    pub bidder: i64,
    /// Bid time, epoch milliseconds.
    pub date_time: i64,
    /// Payload.
    pub extra: Text,
}

/// One key's maximum in one tumbling window.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct PartialMax {
    /// The highest price, if the key had bids in the window.
    max: Option<i64>,
    /// The key's bids at that price.
    at_max: Vec<PriceBidRow>,
    /// The key's bids at exactly the window's end (the next window's first millisecond):
    /// q7 takes the bids in `[end - 10 s, end]`, both ends included.
    at_end: Vec<PriceBidRow>,
}

impl PartialMax {
    fn add(&mut self, b: PriceBidRow) {
        match self.max {
            Some(m) if m > b.price => {}
            Some(m) if m == b.price => self.at_max.push(b),
            _ => {
                self.max = Some(b.price);
                self.at_max.clear();
                self.at_max.push(b);
            }
        }
    }

    /// Keeps only the boundary bids that can still match a maximum of at least `max`.
    fn prune_at_end(&mut self) {
        if let Some(m) = self.max {
            self.at_end.retain(|b| b.price >= m);
        }
    }
}

/// One key's open window in q7's first stage.
#[derive(serde::Serialize, serde::Deserialize)]
struct OpenWindow {
    start: i64,
    partial: PartialMax,
    /// Bids at exactly `start`: they belong to the previous window's result too.
    at_start: Vec<PriceBidRow>,
}

/// q7's first stage: per key and tumbling window, the highest price and its bids, emitted
/// when the watermark passes the window's end.
struct WindowMax {
    size: i64,
}

impl WindowMax {
    /// The index of the window starting at `start`, added (with its timer) if missing.
    fn open(
        &self,
        windows: &mut Vec<OpenWindow>,
        start: i64,
        timers: &mut Vec<Timestamp>,
    ) -> usize {
        if let Some(i) = windows.iter().position(|w| w.start == start) {
            return i;
        }
        let i = windows.partition_point(|w| w.start < start);
        windows.insert(
            i,
            OpenWindow {
                start,
                partial: PartialMax::default(),
                at_start: Vec::new(),
            },
        );
        timers.push(start + self.size - 1);
        i
    }
}

impl KeyedProcessFunction<i64, PriceBidRow, PartialMax> for WindowMax {
    /// The key's open windows, in time order.
    type State = Vec<OpenWindow>;

    fn process_element(
        &self,
        b: PriceBidRow,
        ctx: &mut ProcessContext<'_, i64, Self::State, PartialMax>,
    ) {
        let ts = ctx.timestamp();
        let watermark = ctx.current_watermark();
        let start = ts - ts.rem_euclid(self.size);
        if start + self.size - 1 <= watermark {
            ctx.count_late_record_dropped();
            return;
        }
        let mut timers = Vec::new();
        let windows = ctx.state().get_or_insert_with(Vec::new);
        if ts == start && start - 1 > watermark {
            // The previous window takes this bid too if its price is that window's maximum,
            // so this key must report to it even without bids of its own there.
            self.open(windows, start - self.size, &mut timers);
        }
        let i = self.open(windows, start, &mut timers);
        let w = &mut windows[i];
        if ts == start {
            w.at_start.push(b.clone());
        }
        w.partial.add(b);
        for t in timers {
            ctx.register_event_time_timer(t);
        }
    }

    fn on_timer(
        &self,
        timestamp: Timestamp,
        _domain: TimeDomain,
        ctx: &mut ProcessContext<'_, i64, Self::State, PartialMax>,
    ) {
        let end = timestamp + 1;
        let Some(windows) = ctx.state().as_mut() else {
            return;
        };
        let Some(i) = windows.iter().position(|w| w.start == end - self.size) else {
            return;
        };
        let mut partial = windows.remove(i).partial;
        if let Some(next) = windows.iter_mut().find(|w| w.start == end) {
            partial.at_end = std::mem::take(&mut next.at_start);
        }
        partial.prune_at_end();
        if windows.is_empty() {
            *ctx.state() = None;
        }
        if partial.max.is_some() || !partial.at_end.is_empty() {
            ctx.collect(partial);
        }
    }
}

/// q7's second stage: the maximum of one window over the partial maxima.
struct GlobalMax;

impl AggregateFunction<PartialMax> for GlobalMax {
    type Acc = PartialMax;
    type Out = Vec<PriceBidRow>;

    fn create_accumulator(&self) -> PartialMax {
        PartialMax::default()
    }

    fn add(&self, p: &PartialMax, acc: &mut PartialMax) {
        let p = p.clone();
        *acc = self.merge(std::mem::take(acc), p);
    }

    fn get_result(&self, acc: &PartialMax) -> Vec<PriceBidRow> {
        let Some(max) = acc.max else {
            return Vec::new();
        };
        acc.at_max
            .iter()
            .chain(acc.at_end.iter().filter(|b| b.price == max))
            .cloned()
            .collect()
    }

    fn merge(&self, mut a: PartialMax, b: PartialMax) -> PartialMax {
        a.at_end.extend(b.at_end);
        match (a.max, b.max) {
            (_, None) => {}
            (None, Some(_)) => {
                a.max = b.max;
                a.at_max = b.at_max;
            }
            (Some(x), Some(y)) if y > x => {
                a.max = b.max;
                a.at_max = b.at_max;
            }
            (Some(x), Some(y)) if y == x => a.at_max.extend(b.at_max),
            _ => {}
        }
        a.prune_at_end();
        a
    }
}

/// q7: the bids with the highest price of each 10 s tumbling window (whose time lies in
/// `[window_end - 10 s, window_end]`).
pub fn q7(events: &DataStream<Event>) -> DataStream<PriceBidRow> {
    let size = ms(MAX_PRICE_SIZE);
    with_event_time(events)
        .flat_map(|e| match e {
            Event::Bid(b) => Some(PriceBidRow {
                auction: b.auction,
                price: b.price,
                bidder: b.bidder,
                date_time: b.date_time,
                extra: b.extra,
            }),
            _ => None,
        })
        .name("q7.project")
        .key_by(|b| b.auction.rem_euclid(MAX_PRICE_BUCKETS))
        .process(WindowMax { size })
        .name("q7.partial_max")
        // One key per window: partial results carry the window's max timestamp.
        .key_by(|_| 0u8)
        .window(TumblingEventTimeWindows::of(MAX_PRICE_SIZE))
        .aggregate_with(GlobalMax, |_k, _w, rows, out| out.extend(rows))
        .name("q7.max")
}

/// q8's input: a person's registration or an auction's opening, by person id.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
enum PersonOrSeller {
    Person(i64, Text),
    Seller(i64),
}

impl PersonOrSeller {
    fn id(&self) -> i64 {
        match self {
            PersonOrSeller::Person(id, _) | PersonOrSeller::Seller(id) => *id,
        }
    }
}

/// The persons (names) registered and whether an auction was opened, per id and window.
struct NewSeller;

impl AggregateFunction<PersonOrSeller> for NewSeller {
    type Acc = (Vec<Text>, bool);
    type Out = (Vec<Text>, bool);

    fn create_accumulator(&self) -> Self::Acc {
        (Vec::new(), false)
    }

    fn add(&self, e: &PersonOrSeller, acc: &mut Self::Acc) {
        match e {
            PersonOrSeller::Person(_, name) => {
                if !acc.0.contains(name) {
                    acc.0.push(name.clone());
                }
            }
            PersonOrSeller::Seller(_) => acc.1 = true,
        }
    }

    fn get_result(&self, acc: &Self::Acc) -> Self::Out {
        acc.clone()
    }

    fn merge(&self, mut a: Self::Acc, b: Self::Acc) -> Self::Acc {
        for name in b.0 {
            if !a.0.contains(&name) {
                a.0.push(name);
            }
        }
        (a.0, a.1 || b.1)
    }
}

/// q8: persons who opened an auction in the same 10 s tumbling window in which they
/// registered.
pub fn q8(events: &DataStream<Event>) -> DataStream<NewSellerRow> {
    with_event_time(events)
        .flat_map(|e| match e {
            Event::Person(p) => Some(PersonOrSeller::Person(p.id, p.name)),
            Event::Auction(a) => Some(PersonOrSeller::Seller(a.seller)),
            Event::Bid(_) => None,
        })
        .name("q8.select")
        .key_by(PersonOrSeller::id)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(10)))
        .aggregate_with(NewSeller, |&id, w, (names, sold), out| {
            if sold {
                out.extend(names.into_iter().map(|name| NewSellerRow {
                    id,
                    name,
                    start: w.window.start,
                }));
            }
        })
        .name("q8.join")
}

/// Counts elements.
struct Count;

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

/// q11: the number of bids of each bidder per session (gap 10 s).
pub fn q11(events: &DataStream<Event>) -> DataStream<SessionCountRow> {
    with_event_time(events)
        .flat_map(|e| match e {
            Event::Bid(b) => Some(b.bidder),
            _ => None,
        })
        .name("q11.bidder")
        .key_by(|&bidder| bidder)
        .window(EventTimeSessionWindows::with_gap(Duration::from_secs(10)))
        .aggregate_with(Count, |&bidder, w, bid_count, out| {
            out.push(SessionCountRow {
                bidder,
                bid_count,
                start: w.window.start,
                end: w.window.end,
            })
        })
        .name("q11.sessions")
}

/// Fires a processing-time window when the clock passes its end, as Flink's
/// `ProcessingTimeTrigger`, and every open window when the input ends (the final watermark),
/// so that a bounded input loses no element.
struct ProcessingTimeOrEndTrigger;

impl<T> Trigger<T, TimeWindow> for ProcessingTimeOrEndTrigger {
    fn on_element(
        &self,
        _: &T,
        _: Timestamp,
        w: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        ctx.register_processing_time_timer(w.max_timestamp());
        ctx.register_event_time_timer(MAX_WATERMARK);
        TriggerResult::Continue
    }

    fn on_event_time(
        &self,
        time: Timestamp,
        _: &TimeWindow,
        _: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if time == MAX_WATERMARK {
            TriggerResult::FireAndPurge
        } else {
            TriggerResult::Continue
        }
    }

    fn on_processing_time(
        &self,
        time: Timestamp,
        w: &TimeWindow,
        _: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if time == w.max_timestamp() {
            TriggerResult::FireAndPurge
        } else {
            TriggerResult::Continue
        }
    }
}

/// q12: the number of bids of each bidder per 10 s processing-time tumbling window; open
/// windows fire when a bounded input ends.
pub fn q12(events: &DataStream<Event>) -> DataStream<SessionCountRow> {
    events
        .flat_map(|e| match e {
            Event::Bid(b) => Some(b.bidder),
            _ => None,
        })
        .name("q12.bidder")
        .key_by(|&bidder| bidder)
        .window(TumblingProcessingTimeWindows::of(Duration::from_secs(10)))
        .trigger(ProcessingTimeOrEndTrigger)
        .aggregate_with(Count, |&bidder, w, bid_count, out| {
            out.push(SessionCountRow {
                bidder,
                bid_count,
                start: w.window.start,
                end: w.window.end,
            })
        })
        .name("q12.windows")
}

impl Row for HotItemRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out).int(self.auction).int(self.num).end();
    }
}

impl Row for PriceBidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out)
            .int(self.auction)
            .int(self.price)
            .int(self.bidder)
            .ts(self.date_time)
            .str(&self.extra)
            .end();
    }
}

impl Row for NewSellerRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out)
            .int(self.id)
            .str(&self.name)
            .ts(self.start)
            .end();
    }
}

impl Row for SessionCountRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out)
            .int(self.bidder)
            .int(self.bid_count)
            .ts(self.start)
            .ts(self.end)
            .end();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::{Bid, Text};

    fn bid(auction: i64) -> Event {
        Event::Bid(Bid {
            auction,
            bidder: 1,
            price: 1,
            channel: Text::EMPTY,
            url: Text::EMPTY,
            date_time: 0,
            extra: Text::EMPTY,
        })
    }

    fn person() -> Event {
        Event::from(crate::model::Person {
            id: 1000,
            name: Text::EMPTY,
            email_address: Text::EMPTY,
            credit_card: Text::EMPTY,
            city: Text::EMPTY,
            state: Text::EMPTY,
            date_time: 0,
            extra: Text::EMPTY,
        })
    }

    /// The combiner's records count the same bids per (slice, auction) as one record per bid,
    /// each with a timestamp of one of its bids, for any split of the stream into batches.
    #[test]
    fn combiner_keeps_the_counts_per_slice_and_auction() {
        let slide = 2000;
        // Out of order, across slices, with a non-bid in between.
        let mut events: Vec<(Timestamp, Event)> = Vec::new();
        for k in 0..500i64 {
            let ts = (k * 37) % 9000 + if k % 7 == 0 { 5000 } else { 0 };
            events.push((ts, bid(1000 + k % 13)));
            if k % 50 == 0 {
                events.push((ts, person()));
            }
        }
        let mut want: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        for (ts, e) in &events {
            if let Event::Bid(b) = e {
                *want
                    .entry((ts - ts.rem_euclid(slide), b.auction))
                    .or_default() += 1;
            }
        }
        for batch_len in [1, 7, 100, events.len()] {
            let mut got: BTreeMap<(i64, i64), i64> = BTreeMap::new();
            for chunk in events.chunks(batch_len) {
                let mut batch = chunk.to_vec();
                let mut out = Vec::new();
                combine_bids(slide, &mut batch, &mut out);
                assert!(batch.is_empty());
                for (ts, (auction, n)) in out {
                    let slice = ts - ts.rem_euclid(slide);
                    assert!(
                        chunk
                            .iter()
                            .any(|(t, e)| *t == ts
                                && e.as_bid().is_some_and(|b| b.auction == auction))
                    );
                    *got.entry((slice, auction)).or_default() += n;
                }
            }
            assert_eq!(got, want, "batches of {batch_len}");
        }
    }
}
