//! The Nexmark events: persons register, open auctions and place bids.
//!
//! Field names follow the Nexmark suite for Flink (`emailAddress` becomes `email_address`,
//! and so on). Event times (`date_time`, `expires`) are epoch milliseconds, UTC; the JSON
//! form writes them as `YYYY-MM-DD HH:MM:SS.mmm` (see [`crate::json`]).
//!
//! Strings are `Arc<str>`: cloning an event is cheap, and the generator hands out its
//! repeated strings (channels, urls, names, cities, states) by reference count instead of
//! allocating them for every event.
//!
//! The `serde` derives are plain on purpose: they are the binary form (bincode) in which
//! events cross process boundaries. The JSON-lines form goes through [`crate::json`].

use std::sync::Arc;

/// A person registering with the auction site.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Person {
    /// The person id (from 1000).
    pub id: i64,
    /// First and last name.
    pub name: Arc<str>,
    /// E-mail address.
    pub email_address: Arc<str>,
    /// Credit card number, as four groups of four digits.
    pub credit_card: Arc<str>,
    /// City.
    pub city: Arc<str>,
    /// US state (two letters).
    pub state: Arc<str>,
    /// Registration time (event time), epoch milliseconds.
    pub date_time: i64,
    /// Payload that pads the event to its nominal size.
    pub extra: Arc<str>,
}

/// An auction opened by a seller.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Auction {
    /// The auction id (from 1000).
    pub id: i64,
    /// Name of the item sold.
    pub item_name: Arc<str>,
    /// Description of the item.
    pub description: Arc<str>,
    /// The initial bid.
    pub initial_bid: i64,
    /// The reserve price (never below the initial bid).
    pub reserve: i64,
    /// Opening time (event time), epoch milliseconds.
    pub date_time: i64,
    /// Closing time, epoch milliseconds (after `date_time`).
    pub expires: i64,
    /// The seller's person id.
    pub seller: i64,
    /// The category id (10 to 14 in generated data).
    pub category: i64,
    /// Payload that pads the event to its nominal size.
    pub extra: Arc<str>,
}

/// A bid on an auction.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Bid {
    /// The auction id bid on.
    pub auction: i64,
    /// The bidder's person id.
    pub bidder: i64,
    /// The price offered.
    pub price: i64,
    /// The channel the bid came through (`Google`, `channel-42`, ...).
    pub channel: Arc<str>,
    /// The url the bid came from.
    pub url: Arc<str>,
    /// Bid time (event time), epoch milliseconds.
    pub date_time: i64,
    /// Payload that pads the event to its nominal size.
    pub extra: Arc<str>,
}

/// One Nexmark event: exactly one of a person, an auction or a bid.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Event {
    /// A new person (`event_type` 0).
    Person(Person),
    /// A new auction (`event_type` 1).
    Auction(Auction),
    /// A new bid (`event_type` 2).
    Bid(Bid),
}

impl Event {
    /// The event time, epoch milliseconds.
    #[inline]
    pub fn date_time(&self) -> i64 {
        match self {
            Event::Person(p) => p.date_time,
            Event::Auction(a) => a.date_time,
            Event::Bid(b) => b.date_time,
        }
    }

    /// The `event_type` of the JSON form: 0 for a person, 1 for an auction, 2 for a bid.
    #[inline]
    pub fn event_type(&self) -> u8 {
        match self {
            Event::Person(_) => 0,
            Event::Auction(_) => 1,
            Event::Bid(_) => 2,
        }
    }

    /// The person, if this is one.
    #[inline]
    pub fn as_person(&self) -> Option<&Person> {
        match self {
            Event::Person(p) => Some(p),
            _ => None,
        }
    }

    /// The auction, if this is one.
    #[inline]
    pub fn as_auction(&self) -> Option<&Auction> {
        match self {
            Event::Auction(a) => Some(a),
            _ => None,
        }
    }

    /// The bid, if this is one.
    #[inline]
    pub fn as_bid(&self) -> Option<&Bid> {
        match self {
            Event::Bid(b) => Some(b),
            _ => None,
        }
    }
}

impl From<Person> for Event {
    fn from(p: Person) -> Self {
        Event::Person(p)
    }
}

impl From<Auction> for Event {
    fn from(a: Auction) -> Self {
        Event::Auction(a)
    }
}

impl From<Bid> for Event {
    fn from(b: Bid) -> Self {
        Event::Bid(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors() {
        let bid = Bid {
            auction: 1000,
            bidder: 2001,
            price: 1102,
            channel: "Google".into(),
            url: "https://www.nexmark.com/a/b/c/item.htm?query=1".into(),
            date_time: 1_704_067_200_000,
            extra: "".into(),
        };
        let e = Event::from(bid.clone());
        assert_eq!(e.date_time(), 1_704_067_200_000);
        assert_eq!(e.event_type(), 2);
        assert_eq!(e.as_bid(), Some(&bid));
        assert!(e.as_person().is_none() && e.as_auction().is_none());
    }
}
