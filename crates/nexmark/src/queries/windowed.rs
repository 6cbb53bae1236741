//! The windowed queries: q5, q7, q8, q11 and q12, written with the window API.
//!
//! q5 counts bids per auction in sliding windows, then takes each window's maximum in a
//! tumbling window keyed by the window's end (Flink SQL's plan: a window aggregate, then a
//! window top-1 with ties). q7 keeps the highest bids of each tumbling window over the whole
//! stream (`window_all`), and joins the bids at exactly a window's end, which the query's
//! inclusive `BETWEEN window_end - 10 s AND window_end` adds, to the window before.

use std::time::Duration;

use spate_dataflow::{
    AggregateFunction, Count, DataStream, Either, EventTimeSessionWindows, KeyedCoProcessFunction,
    ProcessContext, SlidingEventTimeWindows, TimeDomain, TimeWindow, Timestamp, Trigger,
    TriggerContext, TriggerResult, TumblingEventTimeWindows, TumblingProcessingTimeWindows, Window,
    MAX_WATERMARK,
};

use super::{auctions, bids, ms, persons, with_event_time, Cols, Row};
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
        // Counted per worker before the shuffle, as Flink's two-phase aggregation does with
        // mini-batch on.
        .local_global(true)
        .aggregate_with(Count, |&auction, w, count, out| {
            out.push(AuctionCount {
                window_end: w.window.end,
                auction,
                count,
            })
        })
        .name("q5.count")
        // Counts carry their window's max timestamp, so each lands in the 2 s tumbling window
        // that ends with its sliding window. Each worker keeps only its own most bid auctions
        // of a window before the shuffle (two phases again).
        .key_by(|c| c.window_end)
        .window(TumblingEventTimeWindows::of(HOT_SLIDE))
        .local_global(true)
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

/// The highest price of a tumbling window `[start, end)` and the window's bids at that price.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct HighestBids {
    /// The highest price, once the window has a bid.
    price: Option<i64>,
    /// The bids at that price.
    bids: Vec<PriceBidRow>,
}

/// Keeps a window's highest price and the bids at it.
struct HighestPrice;

impl AggregateFunction<PriceBidRow> for HighestPrice {
    type Acc = HighestBids;
    type Out = HighestBids;

    fn create_accumulator(&self) -> HighestBids {
        HighestBids::default()
    }

    fn add(&self, b: &PriceBidRow, acc: &mut HighestBids) {
        match acc.price {
            Some(max) if max > b.price => {}
            Some(max) if max == b.price => acc.bids.push(b.clone()),
            _ => {
                acc.price = Some(b.price);
                acc.bids.clear();
                acc.bids.push(b.clone());
            }
        }
    }

    fn get_result(&self, acc: &HighestBids) -> HighestBids {
        acc.clone()
    }

    fn merge(&self, mut a: HighestBids, b: HighestBids) -> HighestBids {
        match (a.price, b.price) {
            (_, None) => a,
            (None, Some(_)) => b,
            (Some(x), Some(y)) if y > x => b,
            (Some(x), Some(y)) if y < x => a,
            _ => {
                a.bids.extend(b.bids);
                a
            }
        }
    }
}

/// A window's highest bids, keyed by the window's end.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct WindowTop {
    end: i64,
    price: i64,
    bids: Vec<PriceBidRow>,
}

/// One window end's state in q7's boundary join: the window's highest bids, and the bids at
/// exactly its end.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct BoundaryState {
    top: Option<WindowTop>,
    at_end: Vec<PriceBidRow>,
}

/// Joins each window's highest bids with the bids at exactly its end (keyed by the window's
/// end), as q7's `B.dateTime BETWEEN window_end - 10 s AND window_end` takes them: when the
/// watermark reaches the end, both have arrived; the window's bids at its maximum are emitted
/// with the boundary bids at the same price.
struct BoundaryJoin;

impl KeyedCoProcessFunction<i64, WindowTop, PriceBidRow, PriceBidRow> for BoundaryJoin {
    type State = BoundaryState;

    fn process_element1(
        &self,
        top: WindowTop,
        ctx: &mut ProcessContext<'_, i64, BoundaryState, PriceBidRow>,
    ) {
        let end = top.end;
        ctx.state().get_or_insert_with(BoundaryState::default).top = Some(top);
        ctx.register_event_time_timer(end);
    }

    fn process_element2(
        &self,
        b: PriceBidRow,
        ctx: &mut ProcessContext<'_, i64, BoundaryState, PriceBidRow>,
    ) {
        let end = b.date_time;
        ctx.state()
            .get_or_insert_with(BoundaryState::default)
            .at_end
            .push(b);
        ctx.register_event_time_timer(end);
    }

    fn on_timer(
        &self,
        _timestamp: Timestamp,
        _domain: TimeDomain,
        ctx: &mut ProcessContext<'_, i64, BoundaryState, PriceBidRow>,
    ) {
        let Some(st) = ctx.state().take() else {
            return;
        };
        let Some(top) = st.top else {
            // The window before had no bids: its boundary bids match no maximum.
            return;
        };
        for b in top.bids {
            ctx.collect(b);
        }
        for b in st.at_end {
            if b.price == top.price {
                ctx.collect(b);
            }
        }
    }
}

/// q7: the bids with the highest price of each 10 s tumbling window (whose time lies in
/// `[window_end - 10 s, window_end]`).
///
/// Flink's SQL joins each window's `MAX(price)` back to the bids with `B.price = maxprice AND
/// B.dateTime BETWEEN window_end - 10 s AND window_end`. Here a tumbling window over all bids
/// (`window_all`) keeps its highest price with the bids at it; the bids at exactly a window's
/// end, which the inclusive `BETWEEN` adds to the window before, are joined to that window's
/// result by a keyed co-process function on the window's end.
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
    let tops = bids
        .window_all(TumblingEventTimeWindows::of(MAX_PRICE_SIZE))
        .local_global(true)
        .aggregate_with(HighestPrice, |w, highest, out| {
            if let Some(price) = highest.price {
                out.push(WindowTop {
                    end: w.window.end,
                    price,
                    bids: highest.bids,
                });
            }
        })
        .name("q7.max");
    let at_end = bids
        .filter(move |b| b.date_time.rem_euclid(size) == 0)
        .name("q7.at_window_end");
    tops.key_by(|t| t.end)
        .connect(&at_end.key_by(|b| b.date_time))
        .process(BoundaryJoin)
        .name("q7.join")
}

/// q8's window size.
const NEW_SELLER_SIZE: Duration = Duration::from_secs(10);

/// The names of the persons registered and whether an auction was opened, per person id and
/// window: persons ([`Either::First`]) and auctions ([`Either::Second`]) of one id.
struct NewSeller;

impl AggregateFunction<Either<(i64, Text), i64>> for NewSeller {
    type Acc = (Vec<Text>, bool);
    type Out = (Vec<Text>, bool);

    fn create_accumulator(&self) -> Self::Acc {
        (Vec::new(), false)
    }

    fn add(&self, e: &Either<(i64, Text), i64>, acc: &mut Self::Acc) {
        match e {
            Either::First((_, name)) => {
                if !acc.0.contains(name) {
                    acc.0.push(name.clone());
                }
            }
            Either::Second(_) => acc.1 = true,
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
///
/// Flink's SQL groups persons by `(id, name, window)` and auctions by `(seller, window)` and
/// joins the two on id and window: here the persons and the sellers, united, are keyed by
/// person id and aggregated per window (a co-group that keeps only the names and whether
/// the id sold, instead of buffering both sides).
pub fn q8(events: &DataStream<Event>) -> DataStream<NewSellerRow> {
    let events = with_event_time(events);
    let persons = persons(&events)
        .map(|p| Either::First((p.id, p.name)))
        .name("q8.persons");
    let sellers = auctions(&events)
        .map(|a| Either::Second(a.seller))
        .name("q8.sellers");
    persons
        .union(&[sellers])
        .key_by(|e: &Either<(i64, Text), i64>| match e {
            Either::First((id, _)) => *id,
            Either::Second(seller) => *seller,
        })
        .window(TumblingEventTimeWindows::of(NEW_SELLER_SIZE))
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
