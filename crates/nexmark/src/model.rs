//! The Nexmark events: persons register, open auctions and place bids.
//!
//! Field names follow the Nexmark suite for Flink (`emailAddress` becomes `email_address`,
//! and so on). Event times (`date_time`, `expires`) are epoch milliseconds, UTC; the JSON
//! form writes them as `YYYY-MM-DD HH:MM:SS.mmm` (see [`crate::json`]).
//!
//! Strings are [`Text`]: either a `&'static str` or a shared `Arc<str>`. The generator
//! hands out the strings it takes from its per-seed tables (channels, urls, names, cities,
//! states, and the `extra` payloads, which are slices of one 1 MiB string) as `&'static str`:
//! no allocation, no reference count, nothing to free. Cloning an event stays cheap either way.
//!
//! The `serde` derives are plain on purpose: they are the binary form (bincode) in which
//! events cross process boundaries. The JSON-lines form goes through [`crate::json`].

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// An immutable string of an event: a `&'static str` (from the generator's tables, free to
/// copy) or an `Arc<str>` (parsed input). It behaves as a `str`: equality, order and hash are
/// those of its text, whatever its representation, and it serializes as a string.
#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    Static(&'static str),
    Shared(Arc<str>),
}

impl Text {
    /// The empty string.
    pub const EMPTY: Text = Text(Repr::Static(""));

    /// A text borrowing a static string (no allocation).
    #[inline]
    pub const fn from_static(s: &'static str) -> Text {
        Text(Repr::Static(s))
    }

    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Static(s) => s,
            Repr::Shared(s) => s,
        }
    }
}

impl Default for Text {
    fn default() -> Self {
        Text::EMPTY
    }
}

impl Deref for Text {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Text {
    #[inline]
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Text) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Text) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Text {
    // As `str` hashes, so that `Borrow<str>` lookups work.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Text(Repr::Shared(Arc::from(s)))
    }
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        Text(Repr::Shared(Arc::from(s)))
    }
}

impl From<Box<str>> for Text {
    fn from(s: Box<str>) -> Self {
        Text(Repr::Shared(Arc::from(s)))
    }
}

impl From<Cow<'_, str>> for Text {
    fn from(s: Cow<'_, str>) -> Self {
        Text(Repr::Shared(Arc::from(s)))
    }
}

impl From<Arc<str>> for Text {
    fn from(s: Arc<str>) -> Self {
        Text(Repr::Shared(s))
    }
}

impl From<Text> for Arc<str> {
    fn from(t: Text) -> Self {
        match t.0 {
            Repr::Static(s) => Arc::from(s),
            Repr::Shared(s) => s,
        }
    }
}

impl serde::Serialize for Text {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Text {
    /// One allocation for the `Arc<str>` (none for an empty string), from the borrowed text
    /// when the deserializer has it: not through a `String` or `Box<str>` first.
    #[inline]
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            #[inline]
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Text, E> {
                Ok(if s.is_empty() {
                    Text::EMPTY
                } else {
                    Text(Repr::Shared(Arc::from(s)))
                })
            }
            fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<Text, E> {
                std::str::from_utf8(b)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Bytes(b), &self))
                    .and_then(|s| self.visit_str(s))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// A person registering with the auction site.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Person {
    /// The person id (from 1000).
    pub id: i64,
    /// First and last name.
    pub name: Text,
    /// E-mail address.
    pub email_address: Text,
    /// Credit card number, as four groups of four digits.
    pub credit_card: Text,
    /// City.
    pub city: Text,
    /// US state (two letters).
    pub state: Text,
    /// Registration time (event time), epoch milliseconds.
    pub date_time: i64,
    /// Payload that pads the event to its nominal size.
    pub extra: Text,
}

/// An auction opened by a seller.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Auction {
    /// The auction id (from 1000).
    pub id: i64,
    /// Name of the item sold.
    pub item_name: Text,
    /// Description of the item.
    pub description: Text,
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
    pub extra: Text,
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
    pub channel: Text,
    /// The url the bid came from.
    pub url: Text,
    /// Bid time (event time), epoch milliseconds.
    pub date_time: i64,
    /// Payload that pads the event to its nominal size.
    pub extra: Text,
}

/// One Nexmark event: exactly one of a person, an auction or a bid.
///
/// Persons and auctions (8% of the events, and the larger ones) are boxed, so that an event
/// is the size of a bid: the bulk of the stream moves fewer bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Event {
    /// A new person (`event_type` 0).
    Person(Box<Person>),
    /// A new auction (`event_type` 1).
    Auction(Box<Auction>),
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
        Event::Person(Box::new(p))
    }
}

impl From<Auction> for Event {
    fn from(a: Auction) -> Self {
        Event::Auction(Box::new(a))
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
    fn text_is_its_string_whatever_the_representation() {
        use std::collections::hash_map::DefaultHasher;
        use std::collections::HashSet;
        let hash = |t: &dyn Fn(&mut DefaultHasher)| {
            let mut h = DefaultHasher::new();
            t(&mut h);
            h.finish()
        };
        let fixed = Text::from_static("channel-7");
        let shared = Text::from(String::from("channel-7"));
        assert_eq!(fixed, shared);
        assert_eq!(fixed, "channel-7");
        assert_eq!(
            hash(&|h| fixed.hash(h)),
            hash(&|h| shared.hash(h)),
            "hash by content"
        );
        assert_eq!(hash(&|h| fixed.hash(h)), hash(&|h| "channel-7".hash(h)));
        let set: HashSet<Text> = [fixed.clone()].into();
        assert!(set.contains("channel-7") && set.contains(&shared));
        let (a, b) = (Text::from("a"), Text::from_static("b"));
        assert!(a < b, "ordered by content");
        assert_eq!(format!("{fixed:?} {fixed}"), "\"channel-7\" channel-7");
        assert_eq!(Text::default(), Text::EMPTY);
        assert_eq!(&*Arc::<str>::from(fixed.clone()), "channel-7");
        let json = serde_json::to_string(&fixed).unwrap();
        assert_eq!(json, "\"channel-7\"");
        assert_eq!(serde_json::from_str::<Text>(&json).unwrap(), shared);
    }

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
