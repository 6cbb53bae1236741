//! Updating aggregations (Flink's unbounded `GROUP BY` and `ROW_NUMBER` top-N): q15 to q19,
//! each an [`UpdatingAggregate`] run by the engine's changelog operator.

use rustc_hash::FxHashSet;
use spate_dataflow::changelog::UpdatingAggregate;
use spate_dataflow::DataStream;

use super::{bids, day_string, minute_string, with_event_time, Change, Cols, Row};
use crate::model::{Bid, Event, Text};

/// Bids counted per price range: below 10,000, below 1,000,000, and above.
fn price_range(price: i64) -> usize {
    if price < 10_000 {
        0
    } else if price < 1_000_000 {
        1
    } else {
        2
    }
}

/// The day number (days since 1970-01-01, UTC) of an epoch-millisecond time.
fn day_of(ms: i64) -> i64 {
    ms.div_euclid(86_400_000)
}

type IdSet = FxHashSet<i64>;

/// Counts of bids, distinct bidders and distinct auctions, in total and per price range.
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct BidStats {
    bids: [i64; 4],
    bidders: [IdSet; 4],
    auctions: [IdSet; 4],
}

impl BidStats {
    fn add(&mut self, b: &Bid) {
        let r = price_range(b.price) + 1;
        for i in [0, r] {
            self.bids[i] += 1;
            self.bidders[i].insert(b.bidder);
            self.auctions[i].insert(b.auction);
        }
    }

    fn counts(&self) -> [i64; 12] {
        let mut c = [0; 12];
        for i in 0..4 {
            c[i] = self.bids[i];
            c[4 + i] = self.bidders[i].len() as i64;
            c[8 + i] = self.auctions[i].len() as i64;
        }
        c
    }
}

/// q15's row: a day and its bid statistics.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct BidStatsRow {
    /// The day, `yyyy-MM-dd`.
    pub day: String,
    /// Bids, bids per price range (3), bidders, bidders per range (3), auctions, auctions per
    /// range (3).
    pub counts: [i64; 12],
}

/// q16's row: a channel, a day, the day's latest minute on the channel, and the statistics.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ChannelStatsRow {
    /// The channel.
    pub channel: Text,
    /// The day, `yyyy-MM-dd`.
    pub day: String,
    /// The latest minute with a bid, `HH:mm`.
    pub minute: String,
    /// As in [`BidStatsRow::counts`].
    pub counts: [i64; 12],
}

/// q17's row: an auction, a day, and the day's bids and prices on the auction.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct AuctionDayStatsRow {
    /// Auction id.
    pub auction: i64,
    /// The day, `yyyy-MM-dd`.
    pub day: String,
    /// Bids, and bids per price range (3).
    pub bids: [i64; 4],
    /// The lowest price.
    pub min_price: i64,
    /// The highest price.
    pub max_price: i64,
    /// The average price, truncated.
    pub avg_price: i64,
    /// The sum of prices.
    pub sum_price: i64,
}

/// q18's row: a whole bid.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct FullBidRow(pub Bid);

/// q19's row: a whole bid and its rank among its auction's bids, 1 for the highest price.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RankedBidRow {
    /// The bid.
    pub bid: Bid,
    /// The rank, 1 to 10.
    pub rank: i64,
}

struct DayStats;

impl UpdatingAggregate<i64, Bid> for DayStats {
    type Acc = BidStats;
    type Out = BidStatsRow;
    fn create(&self) -> BidStats {
        BidStats::default()
    }
    fn add(&self, acc: &mut BidStats, b: Bid) {
        acc.add(&b);
    }
    fn results(&self, day: &i64, acc: &BidStats, out: &mut Vec<BidStatsRow>) {
        out.push(BidStatsRow {
            day: day_string(day * 86_400_000),
            counts: acc.counts(),
        });
    }
}

/// q15: per day, the number of bids, distinct bidders and distinct auctions, in total and per
/// price range (an updating result).
pub fn q15(events: &DataStream<Event>) -> DataStream<Change<BidStatsRow>> {
    bids(&with_event_time(events))
        .key_by(|b| day_of(b.date_time))
        .updating(DayStats)
        .name("q15.stats")
}

struct ChannelStats;

impl UpdatingAggregate<(Text, i64), Bid> for ChannelStats {
    type Acc = (BidStats, i64);
    type Out = ChannelStatsRow;
    fn create(&self) -> (BidStats, i64) {
        (BidStats::default(), i64::MIN)
    }
    fn add(&self, acc: &mut (BidStats, i64), b: Bid) {
        acc.0.add(&b);
        acc.1 = acc.1.max(b.date_time);
    }
    fn results(
        &self,
        (channel, day): &(Text, i64),
        acc: &(BidStats, i64),
        out: &mut Vec<ChannelStatsRow>,
    ) {
        out.push(ChannelStatsRow {
            channel: channel.clone(),
            day: day_string(day * 86_400_000),
            // Within one day, the latest `HH:mm` is the latest time's.
            minute: minute_string(acc.1),
            counts: acc.0.counts(),
        });
    }
}

/// q16: q15 per channel and day, with the day's latest minute (an updating result).
pub fn q16(events: &DataStream<Event>) -> DataStream<Change<ChannelStatsRow>> {
    bids(&with_event_time(events))
        .key_by(|b| (b.channel.clone(), day_of(b.date_time)))
        .updating(ChannelStats)
        .name("q16.stats")
}

/// Bids per price range (total first), min, max and sum of prices.
type PriceStats = ([i64; 4], i64, i64, i64);

/// q17's aggregate over `(auction, price, time)` projections of bids.
struct AuctionDayStats;

impl UpdatingAggregate<(i64, i64), (i64, i64, i64)> for AuctionDayStats {
    type Acc = PriceStats;
    type Out = AuctionDayStatsRow;
    fn create(&self) -> PriceStats {
        ([0; 4], i64::MAX, i64::MIN, 0)
    }
    fn add(&self, acc: &mut PriceStats, (_auction, price, _time): (i64, i64, i64)) {
        acc.0[0] += 1;
        acc.0[price_range(price) + 1] += 1;
        acc.1 = acc.1.min(price);
        acc.2 = acc.2.max(price);
        acc.3 += price;
    }
    fn results(
        &self,
        (auction, day): &(i64, i64),
        acc: &PriceStats,
        out: &mut Vec<AuctionDayStatsRow>,
    ) {
        out.push(AuctionDayStatsRow {
            auction: *auction,
            day: day_string(day * 86_400_000),
            bids: acc.0,
            min_price: acc.1,
            max_price: acc.2,
            // A BIGINT average: Java's long division truncates toward zero, as Rust's.
            avg_price: acc.3 / acc.0[0],
            sum_price: acc.3,
        });
    }
}

/// q17: per auction and day, the bids per price range and the min, max, average and sum of
/// their prices (an updating result).
pub fn q17(events: &DataStream<Event>) -> DataStream<Change<AuctionDayStatsRow>> {
    bids(&with_event_time(events))
        .map(|b| (b.auction, b.price, b.date_time))
        .name("q17.project")
        .key_by(|&(auction, _, time)| (auction, day_of(time)))
        .updating(AuctionDayStats)
        .name("q17.stats")
}

struct LastBid;

impl UpdatingAggregate<(i64, i64), Bid> for LastBid {
    type Acc = Option<Bid>;
    type Out = FullBidRow;
    fn create(&self) -> Option<Bid> {
        None
    }
    fn add(&self, acc: &mut Option<Bid>, b: Bid) {
        // Flink deduplicates on event time keeping the last row: a later or equal time wins.
        if acc
            .as_ref()
            .is_none_or(|last| b.date_time >= last.date_time)
        {
            *acc = Some(b);
        }
    }
    fn results(&self, _key: &(i64, i64), acc: &Option<Bid>, out: &mut Vec<FullBidRow>) {
        out.extend(acc.clone().map(FullBidRow));
    }
}

/// q18: the latest bid of each bidder on each auction (an updating result).
pub fn q18(events: &DataStream<Event>) -> DataStream<Change<FullBidRow>> {
    bids(&with_event_time(events))
        .key_by(|b| (b.bidder, b.auction))
        .updating(LastBid)
        .name("q18.last_bid")
}

/// How many bids q19 ranks per auction.
const TOP_N: usize = 10;

struct TopBids;

impl UpdatingAggregate<i64, Bid> for TopBids {
    type Acc = Vec<Bid>;
    type Out = RankedBidRow;
    fn create(&self) -> Vec<Bid> {
        Vec::with_capacity(TOP_N + 1)
    }
    fn add(&self, top: &mut Vec<Bid>, b: Bid) {
        // Highest price first; equal prices in time order (Flink ranks them in arrival order,
        // which is time order for an ordered input).
        let at = top
            .iter()
            .position(|t| t.price < b.price || (t.price == b.price && t.date_time > b.date_time))
            .unwrap_or(top.len());
        if at < TOP_N {
            top.insert(at, b);
            top.truncate(TOP_N);
        }
    }
    fn results(&self, _auction: &i64, top: &Vec<Bid>, out: &mut Vec<RankedBidRow>) {
        out.extend(top.iter().enumerate().map(|(i, b)| RankedBidRow {
            bid: b.clone(),
            rank: i as i64 + 1,
        }));
    }
}

/// q19: the ten highest bids of each auction, with their rank (an updating result).
pub fn q19(events: &DataStream<Event>) -> DataStream<Change<RankedBidRow>> {
    bids(&with_event_time(events))
        .key_by(|b| b.auction)
        .updating(TopBids)
        .name("q19.top_bids")
}

fn write_full_bid<'a>(c: Cols<'a>, b: &Bid) -> Cols<'a> {
    c.int(b.auction)
        .int(b.bidder)
        .int(b.price)
        .str(&b.channel)
        .str(&b.url)
        .ts(b.date_time)
        .str(&b.extra)
}

fn write_counts<'a>(mut c: Cols<'a>, counts: &[i64]) -> Cols<'a> {
    for &n in counts {
        c = c.int(n);
    }
    c
}

impl Row for BidStatsRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_counts(Cols::new(out).str(&self.day), &self.counts).end();
    }
}

impl Row for ChannelStatsRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        let c = Cols::new(out)
            .str(&self.channel)
            .str(&self.day)
            .str(&self.minute);
        write_counts(c, &self.counts).end();
    }
}

impl Row for AuctionDayStatsRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_counts(Cols::new(out).int(self.auction).str(&self.day), &self.bids)
            .int(self.min_price)
            .int(self.max_price)
            .int(self.avg_price)
            .int(self.sum_price)
            .end();
    }
}

impl Row for FullBidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_full_bid(Cols::new(out), &self.0).end();
    }
}

impl Row for RankedBidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_full_bid(Cols::new(out), &self.bid)
            .int(self.rank)
            .end();
    }
}
