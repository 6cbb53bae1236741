//! The windowed queries: q5, q7, q8, q11 and q12, written with the window API.
//!
//! q5 counts bids per auction in sliding windows, then takes each window's maximum in a
//! tumbling window keyed by the window's end (Flink SQL's plan: a window aggregate, then a
//! window top-1 with ties). q7 takes the highest price of each tumbling window over the whole
//! stream and joins it back to the bids on price with an interval join, whose inclusive
//! bounds are the query's `BETWEEN window_end - 10 s AND window_end`.

use std::time::Duration;

use spate_dataflow::{
    AggregateFunction, DataStream, EventTimeSessionWindows, JoinContext, SlidingEventTimeWindows,
    TimeWindow, Timestamp, Trigger, TriggerContext, TriggerResult, TumblingEventTimeWindows,
    TumblingProcessingTimeWindows, Window, MAX_WATERMARK,
};

use super::{auctions, bids, ms, persons, with_event_time, Cols, Row};
use crate::model::{Auction, Event, Person, Text};

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
pub(super) const HOT_SIZE: Duration = Duration::from_secs(10);
pub(super) const HOT_SLIDE: Duration = Duration::from_secs(2);

/// The number of bids on one auction in one sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct AuctionCount {
    pub(super) window_end: i64,
    pub(super) auction: i64,
    pub(super) count: i64,
}

/// The auctions with the highest count in one window (ties all kept).
pub(super) struct MostBids;

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
    bids(&with_event_time(events))
        .map(|b| b.auction)
        .name("q5.auction")
        .key_by(|&auction| auction)
        .window(SlidingEventTimeWindows::of(HOT_SIZE, HOT_SLIDE))
        .aggregate_with(Count, |&auction, w, count, out| {
            out.push(AuctionCount {
                window_end: w.window.end,
                auction,
                count,
            })
        })
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

/// A tumbling window's highest price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct WindowMaxPrice {
    /// The window's end, epoch milliseconds.
    end: i64,
    /// The highest price of the window's bids.
    price: i64,
}

/// q7: the bids with the highest price of each 10 s tumbling window (whose time lies in
/// `[window_end - 10 s, window_end]`).
///
/// Flink's SQL joins the window maxima back to the bids with `B.price = maxprice AND
/// B.dateTime BETWEEN window_end - 10 s AND window_end`: here an interval join keyed by
/// price. A maximum carries its window's max timestamp (`window_end - 1`), so the bids at
/// `[window_end - 10 s, window_end]` are those `- (10 s - 1)` to `+1` from it.
pub fn q7(events: &DataStream<Event>) -> DataStream<PriceBidRow> {
    let size = ms(MAX_PRICE_SIZE);
    let bids = bids(&with_event_time(events))
        .map(|b| PriceBidRow {
            auction: b.auction,
            price: b.price,
            bidder: b.bidder,
            date_time: b.date_time,
            extra: b.extra,
        })
        .name("q7.project");
    let maxima = bids
        .map(|b| b.price)
        .name("q7.price")
        .window_all(TumblingEventTimeWindows::of(MAX_PRICE_SIZE))
        .reduce_with(i64::max, |w, price, out| {
            out.push(WindowMaxPrice {
                end: w.window.end,
                price,
            })
        })
        .name("q7.max");
    maxima
        .key_by(|m| m.price)
        .interval_join(&bids.key_by(|b| b.price))
        .between(-(size - 1), 1)
        .process(
            |_max: &WindowMaxPrice, b: &PriceBidRow, ctx: &mut JoinContext<'_, PriceBidRow>| {
                ctx.collect(b.clone())
            },
        )
        .name("q7.join")
}

/// q8's window size.
const NEW_SELLER_SIZE: Duration = Duration::from_secs(10);

/// q8: persons who opened an auction in the same 10 s tumbling window in which they
/// registered (a window co-group of persons and auctions on `person.id = auction.seller`).
pub fn q8(events: &DataStream<Event>) -> DataStream<NewSellerRow> {
    let size = ms(NEW_SELLER_SIZE);
    let events = with_event_time(events);
    persons(&events)
        .co_group(&auctions(&events))
        .where_key(|p: &Person| p.id)
        .equal_to(|a: &Auction| a.seller)
        .window(TumblingEventTimeWindows::of(NEW_SELLER_SIZE))
        .apply(move |persons: &[Person], sold: &[Auction], out| {
            if sold.is_empty() {
                return;
            }
            // One row per distinct (id, name, window), as Flink's GROUP BY before its join.
            let mut rows: Vec<NewSellerRow> = Vec::new();
            for p in persons {
                let row = NewSellerRow {
                    id: p.id,
                    name: p.name.clone(),
                    // A person's time is its event time, so this is the window's start.
                    start: TimeWindow::start_with_offset(p.date_time, 0, size),
                };
                if !rows.contains(&row) {
                    rows.push(row);
                }
            }
            out.extend(rows);
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
    bids(&with_event_time(events))
        .map(|b| b.bidder)
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
    bids(events)
        .map(|b| b.bidder)
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
