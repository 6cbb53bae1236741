//! The stateless queries: q0, q1, q2, q10, q13, q14, q21 and q22.

use std::sync::Arc;

use spate_dataflow::DataStream;

use super::{bids, day_string, minute_string, Cols, Row};
use crate::model::{Bid, Event, Text};

/// q0's row: a bid's auction, bidder, price, dateTime and extra.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct BidRow {
    /// Auction id.
    pub auction: i64,
    /// Bidder id.
    pub bidder: i64,
    /// Price (q0) or price in thousandths of a euro (q1).
    pub price: i64,
    /// Bid time, epoch milliseconds.
    pub date_time: i64,
    /// Payload.
    pub extra: Text,
}

/// q1's row: like q0's, with the price converted to euro as DECIMAL(23,3).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct EuroBidRow(pub BidRow);

/// q2's row: auction and price.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct AuctionPriceRow {
    /// Auction id.
    pub auction: i64,
    /// Price.
    pub price: i64,
}

/// q10's row: q0's columns, then the bid's day `dt` (`yyyy-MM-dd`) and minute `hm` (`HH:mm`),
/// both derived from `date_time` when written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct DatedBidRow(pub BidRow);

/// q13's row: a bid's auction, bidder, price and dateTime, and the side input's value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SideInputRow {
    /// Auction id.
    pub auction: i64,
    /// Bidder id.
    pub bidder: i64,
    /// Price.
    pub price: i64,
    /// Bid time, epoch milliseconds.
    pub date_time: i64,
    /// The side input's value for `auction % 10000`.
    pub value: Arc<str>,
}

/// The time of day of a bid, as q14 classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum BidTimeType {
    /// Hours 8 to 18.
    Day,
    /// Hours 0 to 6 and 20 to 23.
    Night,
    /// Hours 7 and 19.
    Other,
}

impl BidTimeType {
    /// The class of an epoch-millisecond time (UTC).
    pub fn of(date_time: i64) -> Self {
        let hour = date_time.div_euclid(3_600_000).rem_euclid(24);
        if (8..=18).contains(&hour) {
            BidTimeType::Day
        } else if hour <= 6 || hour >= 20 {
            BidTimeType::Night
        } else {
            BidTimeType::Other
        }
    }

    /// `dayTime`, `nightTime` or `otherTime`.
    pub fn as_str(self) -> &'static str {
        match self {
            BidTimeType::Day => "dayTime",
            BidTimeType::Night => "nightTime",
            BidTimeType::Other => "otherTime",
        }
    }
}

/// q14's row: a bid with its price in euro, its time of day, and the `c`s in its extra.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct PricedBidRow {
    /// Auction id.
    pub auction: i64,
    /// Bidder id.
    pub bidder: i64,
    /// `0.908 * price` in thousandths (DECIMAL(23,3)).
    pub price_milli: i64,
    /// The time of day.
    pub bid_time_type: BidTimeType,
    /// Bid time, epoch milliseconds.
    pub date_time: i64,
    /// Payload.
    pub extra: Text,
    /// The number of `c` characters in `extra`.
    pub c_counts: i64,
}

/// q21's row: a bid's auction, bidder, price and channel, and the channel id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ChannelIdRow {
    /// Auction id.
    pub auction: i64,
    /// Bidder id.
    pub bidder: i64,
    /// Price.
    pub price: i64,
    /// Channel.
    pub channel: Text,
    /// `0` to `3` for Apple, Google, Facebook and Baidu, else the url's `channel_id`.
    pub channel_id: Arc<str>,
}

/// q22's row: a bid's auction, bidder, price and channel, and its url's directories 1 to 3
/// (`SPLIT_INDEX(url, '/', 3..=5)`, `None` where the url has fewer parts).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct UrlDirsRow {
    /// Auction id.
    pub auction: i64,
    /// Bidder id.
    pub bidder: i64,
    /// Price.
    pub price: i64,
    /// Channel.
    pub channel: Text,
    /// The first directory.
    pub dir1: Option<Box<str>>,
    /// The second directory.
    pub dir2: Option<Box<str>>,
    /// The third directory.
    pub dir3: Option<Box<str>>,
}

/// q0: pass-through of bids.
pub fn q0(events: &DataStream<Event>) -> DataStream<BidRow> {
    bids(events).map(bid_row).name("q0.project")
}

fn bid_row(b: Bid) -> BidRow {
    BidRow {
        auction: b.auction,
        bidder: b.bidder,
        price: b.price,
        date_time: b.date_time,
        extra: b.extra,
    }
}

/// q1: bids with the price converted to euro (`0.908 * price`), kept exact in thousandths.
pub fn q1(events: &DataStream<Event>) -> DataStream<EuroBidRow> {
    bids(events)
        .map(|b| {
            let mut row = bid_row(b);
            // 0.908 * price as DECIMAL(23,3) is exactly price * 908 thousandths.
            row.price *= 908;
            EuroBidRow(row)
        })
        .name("q1.convert")
}

/// q2: bids on every 123rd auction.
pub fn q2(events: &DataStream<Event>) -> DataStream<AuctionPriceRow> {
    bids(events)
        .filter(|b| b.auction % 123 == 0)
        .name("q2.select")
        .map(|b| AuctionPriceRow {
            auction: b.auction,
            price: b.price,
        })
        .name("q2.project")
}

/// q10: bids with the day and minute that partition Flink's file sink.
pub fn q10(events: &DataStream<Event>) -> DataStream<DatedBidRow> {
    bids(events)
        .map(|b| DatedBidRow(bid_row(b)))
        .name("q10.project")
}

/// The rows of q13's side input: `(key, key as text)` for `key` in `[0, SIDE_INPUT_ROWS)`, as
/// the Nexmark suite's `SideInputGenerator` writes them.
pub const SIDE_INPUT_ROWS: i64 = 10_000;

/// q13: bids joined with the side input on `auction % 10000 = key` (a lookup join: the side
/// input is a table held by every worker).
pub fn q13(events: &DataStream<Event>) -> DataStream<SideInputRow> {
    let side: Arc<Vec<Arc<str>>> = Arc::new(
        (0..SIDE_INPUT_ROWS)
            .map(|k| Arc::from(k.to_string()))
            .collect(),
    );
    bids(events)
        .flat_map(move |b| {
            // SQL's MOD keeps the dividend's sign, as Rust's `%`: a negative id finds no key.
            let key = b.auction % SIDE_INPUT_ROWS;
            let value = usize::try_from(key).ok().and_then(|k| side.get(k))?;
            Some(SideInputRow {
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                date_time: b.date_time,
                value: Arc::clone(value),
            })
        })
        .name("q13.lookup")
}

/// q14: bids worth more than 1,000,000 and less than 50,000,000 euro, with the time of day
/// and the number of `c` characters in `extra`.
pub fn q14(events: &DataStream<Event>) -> DataStream<PricedBidRow> {
    bids(events)
        .filter(|b| {
            let milli = euro_milli(b.price);
            milli > 1_000_000_000 && milli < 50_000_000_000
        })
        .name("q14.select")
        .map(|b| PricedBidRow {
            auction: b.auction,
            bidder: b.bidder,
            price_milli: euro_milli(b.price) as i64,
            bid_time_type: BidTimeType::of(b.date_time),
            date_time: b.date_time,
            c_counts: b.extra.bytes().filter(|&c| c == b'c').count() as i64,
            extra: b.extra,
        })
        .name("q14.calc")
}

/// `0.908 * price` exactly, in thousandths of a euro.
fn euro_milli(price: i64) -> i128 {
    i128::from(price) * 908
}

/// SQL's `lower(s) = name` for a lower-case ASCII `name`.
fn lower_equals(s: &str, name: &str) -> bool {
    if s.is_ascii() {
        s.eq_ignore_ascii_case(name)
    } else {
        s.to_lowercase() == name
    }
}

/// `REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)`: the value of the first `channel_id`
/// parameter at the start of `url` or after a `&`.
pub(crate) fn url_channel_id(url: &str) -> Option<&str> {
    const NAME: &str = "channel_id=";
    let start = if url.starts_with(NAME) {
        NAME.len()
    } else {
        url.find("&channel_id=")? + 1 + NAME.len()
    };
    let rest = &url[start..];
    Some(rest.split('&').next().unwrap_or(rest))
}

/// q21: bids with a channel id: `0` to `3` for the four named channels, else the url's
/// `channel_id`; bids with neither are dropped.
pub fn q21(events: &DataStream<Event>) -> DataStream<ChannelIdRow> {
    let names: [(&'static str, Arc<str>); 4] = [
        ("apple", Arc::from("0")),
        ("google", Arc::from("1")),
        ("facebook", Arc::from("2")),
        ("baidu", Arc::from("3")),
    ];
    bids(events)
        .flat_map(move |b| {
            let named = names
                .iter()
                .find(|(name, _)| lower_equals(&b.channel, name))
                .map(|(_, id)| Arc::clone(id));
            let channel_id = match named {
                Some(id) => id,
                None => Arc::from(url_channel_id(&b.url)?),
            };
            Some(ChannelIdRow {
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                channel: b.channel,
                channel_id,
            })
        })
        .name("q21.channel_id")
}

/// Flink's `SPLIT_INDEX(s, sep, index)`: the `index`-th part of `s` split at `sep` (empty
/// parts kept), or `None`.
pub(crate) fn split_index(s: &str, sep: char, index: usize) -> Option<&str> {
    if s.is_empty() {
        return None;
    }
    s.split(sep).nth(index)
}

/// q22: bids with the first three directories of their url.
pub fn q22(events: &DataStream<Event>) -> DataStream<UrlDirsRow> {
    bids(events)
        .map(|b| {
            let dir = |i| split_index(&b.url, '/', i).map(Box::from);
            UrlDirsRow {
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                dir1: dir(3),
                dir2: dir(4),
                dir3: dir(5),
                channel: b.channel,
            }
        })
        .name("q22.split")
}

impl Row for BidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out)
            .int(self.auction)
            .int(self.bidder)
            .int(self.price)
            .ts(self.date_time)
            .str(&self.extra)
            .end();
    }
}

impl Row for EuroBidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        let r = &self.0;
        Cols::new(out)
            .int(r.auction)
            .int(r.bidder)
            .milli(r.price)
            .ts(r.date_time)
            .str(&r.extra)
            .end();
    }
}

impl Row for AuctionPriceRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out).int(self.auction).int(self.price).end();
    }
}

impl Row for DatedBidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        let r = &self.0;
        Cols::new(out)
            .int(r.auction)
            .int(r.bidder)
            .int(r.price)
            .ts(r.date_time)
            .str(&r.extra)
            .str(&day_string(r.date_time))
            .str(&minute_string(r.date_time))
            .end();
    }
}

impl Row for SideInputRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out)
            .int(self.auction)
            .int(self.bidder)
            .int(self.price)
            .ts(self.date_time)
            .str(&self.value)
            .end();
    }
}

impl Row for PricedBidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out)
            .int(self.auction)
            .int(self.bidder)
            .milli(self.price_milli)
            .str(self.bid_time_type.as_str())
            .ts(self.date_time)
            .str(&self.extra)
            .int(self.c_counts)
            .end();
    }
}

impl Row for ChannelIdRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out)
            .int(self.auction)
            .int(self.bidder)
            .int(self.price)
            .str(&self.channel)
            .str(&self.channel_id)
            .end();
    }
}

impl Row for UrlDirsRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out)
            .int(self.auction)
            .int(self.bidder)
            .int(self.price)
            .str(&self.channel)
            .opt_str(self.dir1.as_deref())
            .opt_str(self.dir2.as_deref())
            .opt_str(self.dir3.as_deref())
            .end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids_follow_the_regular_expression() {
        let url = "https://www.nexmark.com/a/b/c/item.htm?query=1&channel_id=1850212352";
        assert_eq!(url_channel_id(url), Some("1850212352"));
        assert_eq!(url_channel_id("channel_id=7&x=1"), Some("7"));
        assert_eq!(url_channel_id("x?achannel_id=7"), None);
        assert_eq!(url_channel_id("a&channel_id=&channel_id=3"), Some(""));
        assert_eq!(
            url_channel_id("https://www.nexmark.com/a/item.htm?query=1"),
            None
        );
    }

    #[test]
    fn split_index_keeps_empty_parts() {
        let url = "https://www.nexmark.com/vfq/hgj/frwf/item.htm?query=1";
        assert_eq!(split_index(url, '/', 1), Some(""));
        assert_eq!(split_index(url, '/', 3), Some("vfq"));
        assert_eq!(split_index(url, '/', 5), Some("frwf"));
        assert_eq!(split_index(url, '/', 7), None);
        assert_eq!(split_index("", '/', 0), None);
    }

    #[test]
    fn bid_time_types() {
        let hour = 3_600_000;
        let day = 1_704_067_200_000; // midnight
        assert_eq!(BidTimeType::of(day), BidTimeType::Night);
        assert_eq!(BidTimeType::of(day + 7 * hour), BidTimeType::Other);
        assert_eq!(BidTimeType::of(day + 8 * hour), BidTimeType::Day);
        assert_eq!(BidTimeType::of(day + 19 * hour - 1), BidTimeType::Day);
        assert_eq!(BidTimeType::of(day + 19 * hour), BidTimeType::Other);
        assert_eq!(BidTimeType::of(day + 20 * hour), BidTimeType::Night);
    }
}
