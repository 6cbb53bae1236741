//! The Nexmark queries in Spate's DataStream API, and their output rows.
//!
//! Each query reads the stream of [`Event`]s and produces typed rows. A row writes itself as
//! one JSON array in the column order of `shared/nexmark/README.md` ([`Row::write_json`]),
//! which is the form `nexmark_canon.py --compare` checks against Flink's results.
//!
//! | query | what it computes |
//! |---|---|
//! | q0 | pass-through of bids |
//! | q1 | bids with the price in euro (`0.908 * price`, exact to three decimals) |
//! | q2 | bids on auctions with `auction % 123 == 0` |
//! | q3 | persons in OR, ID or CA who sell in category 10 (incremental keyed join) |

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use spate_dataflow::DataStream;
use spate_types::{Data, SpateError};

use crate::json::{write_i64 as write_int, write_str, write_ts};
use crate::model::{Auction, Bid, Event, Person};

/// A query's output row.
pub trait Row: Data {
    /// Appends the row as one JSON array (no newline), columns in the reference order.
    fn write_json(&self, out: &mut Vec<u8>);
}

/// The queries Spate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// Pass-through.
    Q0,
    /// Currency conversion.
    Q1,
    /// Selection.
    Q2,
    /// Local item suggestion (join).
    Q3,
}

impl Query {
    /// Every query, in order.
    pub const ALL: [Query; 4] = [Query::Q0, Query::Q1, Query::Q2, Query::Q3];
}

impl FromStr for Query {
    type Err = SpateError;
    fn from_str(s: &str) -> Result<Self, SpateError> {
        match s.to_ascii_lowercase().as_str() {
            "q0" => Ok(Query::Q0),
            "q1" => Ok(Query::Q1),
            "q2" => Ok(Query::Q2),
            "q3" => Ok(Query::Q3),
            _ => Err(SpateError::Config(format!(
                "unknown query `{s}`: expected one of q0, q1, q2, q3"
            ))),
        }
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Query::Q0 => "q0",
            Query::Q1 => "q1",
            Query::Q2 => "q2",
            Query::Q3 => "q3",
        };
        f.write_str(name)
    }
}

/// Receives a query's typed output stream (to attach a sink, count, or collect).
pub trait Attach {
    /// Attaches whatever the caller wants to `rows`.
    fn attach<R: Row>(&self, rows: DataStream<R>);
}

/// Builds `query` on `events` and hands its output to `attach`.
pub fn build(query: Query, events: &DataStream<Event>, attach: &impl Attach) {
    match query {
        Query::Q0 => attach.attach(q0(events)),
        Query::Q1 => attach.attach(q1(events)),
        Query::Q2 => attach.attach(q2(events)),
        Query::Q3 => attach.attach(q3(events)),
    }
}

/// The bids of an event stream.
pub fn bids(events: &DataStream<Event>) -> DataStream<Bid> {
    events
        .flat_map(|e| match e {
            Event::Bid(b) => Some(b),
            _ => None,
        })
        .name("bids")
}

/// The persons of an event stream.
pub fn persons(events: &DataStream<Event>) -> DataStream<Person> {
    events
        .flat_map(|e| match e {
            Event::Person(p) => Some(p),
            _ => None,
        })
        .name("persons")
}

/// The auctions of an event stream.
pub fn auctions(events: &DataStream<Event>) -> DataStream<Auction> {
    events
        .flat_map(|e| match e {
            Event::Auction(a) => Some(a),
            _ => None,
        })
        .name("auctions")
}

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
    pub extra: Arc<str>,
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

/// q3's row: a seller's name, city and state, and the auction id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SellerRow {
    /// The seller's name.
    pub name: Arc<str>,
    /// The seller's city.
    pub city: Arc<str>,
    /// The seller's state.
    pub state: Arc<str>,
    /// The auction id.
    pub id: i64,
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
        .name("q2.filter")
        .map(|b| AuctionPriceRow {
            auction: b.auction,
            price: b.price,
        })
        .name("q2.project")
}

/// The keyed state of q3's join for one person id.
#[derive(Debug, Default)]
struct SellerState {
    /// The person, once seen: (name, city, state).
    person: Option<(Arc<str>, Arc<str>, Arc<str>)>,
    /// Auctions of this seller seen before the person.
    pending_auctions: Vec<i64>,
}

/// q3: persons in OR, ID or CA who sell in category 10, joined incrementally on
/// `auction.seller = person.id` with keyed state.
pub fn q3(events: &DataStream<Event>) -> DataStream<SellerRow> {
    // Select both sides in one pass, so that the fan-out below copies only the few events
    // that matter instead of every event twice.
    let relevant = events
        .filter(|e| match e {
            Event::Person(p) => matches!(&*p.state, "OR" | "ID" | "CA"),
            Event::Auction(a) => a.category == 10,
            Event::Bid(_) => false,
        })
        .name("q3.select");
    let sellers = persons(&relevant).key_by(|p| p.id);
    let category_10 = auctions(&relevant).key_by(|a| a.seller);
    sellers
        .connect(&category_10)
        .process_with_state(
            |_id, state: &mut Option<SellerState>, p: Person, out: &mut Vec<SellerRow>| {
                let s = state.get_or_insert_with(SellerState::default);
                for id in s.pending_auctions.drain(..) {
                    out.push(SellerRow {
                        name: Arc::clone(&p.name),
                        city: Arc::clone(&p.city),
                        state: Arc::clone(&p.state),
                        id,
                    });
                }
                s.pending_auctions.shrink_to_fit();
                s.person = Some((p.name, p.city, p.state));
            },
            |_seller, state: &mut Option<SellerState>, a: Auction, out: &mut Vec<SellerRow>| {
                let s = state.get_or_insert_with(SellerState::default);
                match &s.person {
                    Some((name, city, st)) => out.push(SellerRow {
                        name: Arc::clone(name),
                        city: Arc::clone(city),
                        state: Arc::clone(st),
                        id: a.id,
                    }),
                    None => s.pending_auctions.push(a.id),
                }
            },
        )
        .name("q3.join")
}

/// Writes thousandths as a DECIMAL(_, 3) string: `1000616` → `"1000.616"`.
fn write_milli_decimal(milli: i64, out: &mut Vec<u8>) {
    use std::io::Write;
    let sign = if milli < 0 { "-" } else { "" };
    let abs = milli.unsigned_abs();
    write!(out, "\"{sign}{}.{:03}\"", abs / 1000, abs % 1000)
        .expect("writing to a Vec cannot fail");
}

/// Writes a bid row; q0 and q1 differ only in how the price is written.
fn write_bid_row(r: &BidRow, out: &mut Vec<u8>, write_price: fn(i64, &mut Vec<u8>)) {
    out.push(b'[');
    write_int(r.auction, out);
    out.push(b',');
    write_int(r.bidder, out);
    out.push(b',');
    write_price(r.price, out);
    out.push(b',');
    write_ts(r.date_time, out);
    out.push(b',');
    write_str(&r.extra, out);
    out.push(b']');
}

impl Row for BidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_bid_row(self, out, write_int);
    }
}

impl Row for EuroBidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        write_bid_row(&self.0, out, write_milli_decimal);
    }
}

impl Row for AuctionPriceRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        write_int(self.auction, out);
        out.push(b',');
        write_int(self.price, out);
        out.push(b']');
    }
}

impl Row for SellerRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        write_str(&self.name, out);
        out.push(b',');
        write_str(&self.city, out);
        out.push(b',');
        write_str(&self.state, out);
        out.push(b',');
        write_int(self.id, out);
        out.push(b']');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_is_exact() {
        let mut out = Vec::new();
        write_milli_decimal(1102 * 908, &mut out);
        assert_eq!(out, b"\"1000.616\"");
        out.clear();
        write_milli_decimal(5, &mut out);
        assert_eq!(out, b"\"0.005\"");
    }

    #[test]
    fn parses_query_names() {
        assert_eq!("Q3".parse::<Query>().unwrap(), Query::Q3);
        let err = "q99".parse::<Query>().unwrap_err().to_string();
        assert!(err.contains("q99"), "{err}");
    }
}
