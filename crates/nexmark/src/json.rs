//! The JSON-lines form of Nexmark events: a byte-exact writer, and the serde type lines are read into.
//!
//! The form is the nested one of the Nexmark suite for Flink (its JSON / Kafka schema), one
//! event per line, with exactly one of `person`, `auction`, `bid` non-null:
//!
//! ```text
//! {"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,"bidder":2001,"price":1102,"channel":"Google","url":"https://…","dateTime":"2024-01-01 00:00:00.000","extra":"…"}}
//! ```
//!
//! Timestamps are UTC strings `YYYY-MM-DD HH:MM:SS.mmm`. [`write_event`] writes exactly the
//! bytes of `shared/anchors/nexmark_gen.py` for generated events (and escapes `"`, `\` and
//! control characters in any string, so it always writes valid JSON).
//!
//! # Reading
//!
//! There is no Nexmark parser: lines are decoded like any user's JSON lines, by the general
//! decoder of `spate-connectors` into a plain serde type, [`JsonEvent`] (the nested wire
//! layout, derived), which checks the Nexmark rules as it becomes an [`Event`]. Keys may come
//! in any order, with any whitespace and escapes; unknown keys are skipped. See
//! [`JsonEvent`] for the rules and [`parse_event`] for one line. Bad input gives an `Err`
//! with a one-line reason, never a panic, for example "missing field \`price\`" or
//! "event_type 2 (bid) but \`bid\` is null or absent".
//! [`event_from_json_value`] is a slow second reading of the same rules, on a
//! `serde_json::Value`; the tests check that both accept the same lines.

use crate::model::{Auction, Bid, Event, Person, Text};

// ------------------------------------------------------------------------------- writing

const DIGIT_PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends the decimal form of `v`.
#[inline]
fn write_u64(mut v: u64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let mut pos = buf.len();
    while v >= 100 {
        let d = (v % 100) as usize * 2;
        v /= 100;
        pos -= 2;
        buf[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
    }
    if v >= 10 {
        let d = v as usize * 2;
        pos -= 2;
        buf[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
    } else {
        pos -= 1;
        buf[pos] = b'0' + v as u8;
    }
    out.extend_from_slice(&buf[pos..]);
}

/// Appends the decimal form of `v` (with a `-` when negative).
#[inline]
pub(crate) fn write_i64(v: i64, out: &mut Vec<u8>) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(v.unsigned_abs(), out);
}

#[inline(always)]
fn write_2(v: u32, out: &mut Vec<u8>) {
    let d = v as usize * 2;
    out.extend_from_slice(&DIGIT_PAIRS[d..d + 2]);
}

/// Appends a JSON string (with its quotes), escaping `"`, `\` and control characters.
#[inline]
pub(crate) fn write_str(s: &str, out: &mut Vec<u8>) {
    let b = s.as_bytes();
    // No early exit, so that it vectorizes: strings are short.
    let (quote, control) = b.iter().fold((false, false), |(q, c), &x| {
        (q | (x == b'"') | (x == b'\\'), c | (x < 0x20))
    });
    out.push(b'"');
    if !(quote | control) {
        out.extend_from_slice(b);
    } else if !control {
        let mut last = 0;
        for pos in memchr::memchr2_iter(b'"', b'\\', b) {
            out.extend_from_slice(&b[last..pos]);
            out.push(b'\\');
            out.push(b[pos]);
            last = pos + 1;
        }
        out.extend_from_slice(&b[last..]);
    } else {
        write_str_slow(b, out);
    }
    out.push(b'"');
}

#[cold]
fn write_str_slow(b: &[u8], out: &mut Vec<u8>) {
    for &c in b {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(c >> 4)]);
                out.push(HEX[usize::from(c & 15)]);
            }
            c => out.push(c),
        }
    }
}

#[inline]
pub(crate) fn write_ts(ms: i64, out: &mut Vec<u8>) {
    out.push(b'"');
    format_timestamp(ms, out);
    out.push(b'"');
}

/// The civil date `(year, month, day)` of a day number (days since 1970-01-01).
///
/// Howard Hinnant's `civil_from_days`, valid over the whole `i64` millisecond range.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], from March
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The day number (days since 1970-01-01) of a civil date; `month` in 1..=12.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Appends `ms` (epoch milliseconds) as the UTC timestamp `YYYY-MM-DD HH:MM:SS.mmm`.
///
/// Years outside 0..=9999 are written as Python's `%04d` would (`-001`, `10000`).
#[inline]
pub fn format_timestamp(ms: i64, out: &mut Vec<u8>) {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000) as u32;
    let (year, month, day) = civil_from_days(days);
    if (0..=9999).contains(&year) {
        let y = year as u32;
        write_2(y / 100, out);
        write_2(y % 100, out);
    } else {
        out.extend_from_slice(format!("{year:04}").as_bytes());
    }
    out.push(b'-');
    write_2(month, out);
    out.push(b'-');
    write_2(day, out);
    out.push(b' ');
    let secs = in_day / 1000;
    write_2(secs / 3600, out);
    out.push(b':');
    write_2(secs / 60 % 60, out);
    out.push(b':');
    write_2(secs % 60, out);
    out.push(b'.');
    let milli = in_day % 1000;
    out.push(b'0' + (milli / 100) as u8);
    write_2(milli % 100, out);
}

/// `ms` (epoch milliseconds) as the UTC timestamp `YYYY-MM-DD HH:MM:SS.mmm`.
pub fn format_timestamp_string(ms: i64) -> String {
    let mut out = Vec::with_capacity(23);
    format_timestamp(ms, &mut out);
    String::from_utf8(out).expect("a formatted timestamp is ASCII")
}

fn write_person_body(p: &Person, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"id\":");
    write_i64(p.id, out);
    out.extend_from_slice(b",\"name\":");
    write_str(&p.name, out);
    out.extend_from_slice(b",\"emailAddress\":");
    write_str(&p.email_address, out);
    out.extend_from_slice(b",\"creditCard\":");
    write_str(&p.credit_card, out);
    out.extend_from_slice(b",\"city\":");
    write_str(&p.city, out);
    out.extend_from_slice(b",\"state\":");
    write_str(&p.state, out);
    out.extend_from_slice(b",\"dateTime\":");
    write_ts(p.date_time, out);
    out.extend_from_slice(b",\"extra\":");
    write_str(&p.extra, out);
    out.push(b'}');
}

fn write_auction_body(a: &Auction, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"id\":");
    write_i64(a.id, out);
    out.extend_from_slice(b",\"itemName\":");
    write_str(&a.item_name, out);
    out.extend_from_slice(b",\"description\":");
    write_str(&a.description, out);
    out.extend_from_slice(b",\"initialBid\":");
    write_i64(a.initial_bid, out);
    out.extend_from_slice(b",\"reserve\":");
    write_i64(a.reserve, out);
    out.extend_from_slice(b",\"dateTime\":");
    write_ts(a.date_time, out);
    out.extend_from_slice(b",\"expires\":");
    write_ts(a.expires, out);
    out.extend_from_slice(b",\"seller\":");
    write_i64(a.seller, out);
    out.extend_from_slice(b",\"category\":");
    write_i64(a.category, out);
    out.extend_from_slice(b",\"extra\":");
    write_str(&a.extra, out);
    out.push(b'}');
}

#[inline]
fn write_bid_body(b: &Bid, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"auction\":");
    write_i64(b.auction, out);
    out.extend_from_slice(b",\"bidder\":");
    write_i64(b.bidder, out);
    out.extend_from_slice(b",\"price\":");
    write_i64(b.price, out);
    out.extend_from_slice(b",\"channel\":");
    write_str(&b.channel, out);
    out.extend_from_slice(b",\"url\":");
    write_str(&b.url, out);
    out.extend_from_slice(b",\"dateTime\":");
    write_ts(b.date_time, out);
    out.extend_from_slice(b",\"extra\":");
    write_str(&b.extra, out);
    out.push(b'}');
}

/// Appends `event` as one nested JSON line, with its trailing `\n`.
///
/// For generated events the bytes are exactly those of the Python reference generator.
#[inline]
pub fn write_event(event: &Event, out: &mut Vec<u8>) {
    match event {
        Event::Person(p) => {
            out.extend_from_slice(b"{\"event_type\":0,\"person\":");
            write_person_body(p, out);
            out.extend_from_slice(b",\"auction\":null,\"bid\":null}\n");
        }
        Event::Auction(a) => {
            out.extend_from_slice(b"{\"event_type\":1,\"person\":null,\"auction\":");
            write_auction_body(a, out);
            out.extend_from_slice(b",\"bid\":null}\n");
        }
        Event::Bid(b) => {
            out.extend_from_slice(b"{\"event_type\":2,\"person\":null,\"auction\":null,\"bid\":");
            write_bid_body(b, out);
            out.extend_from_slice(b"}\n");
        }
    }
}

/// Appends `event` as one flat JSON line (`--flat` of the Python reference): the fields of
/// the event merged into the top level after `event_type`, with a trailing `\n`.
pub fn write_event_flat(event: &Event, out: &mut Vec<u8>) {
    let start = out.len();
    let kind = event.event_type();
    match event {
        Event::Person(p) => write_person_body(p, out),
        Event::Auction(a) => write_auction_body(a, out),
        Event::Bid(b) => write_bid_body(b, out),
    }
    // Replace the body's `{` by `{"event_type":N,`.
    let prefix = [
        b'{', b'"', b'e', b'v', b'e', b'n', b't', b'_', b't', b'y', b'p', b'e', b'"',
    ];
    out.splice(
        start..start + 1,
        prefix.iter().copied().chain([b':', b'0' + kind, b',']),
    );
    out.push(b'\n');
}

// ------------------------------------------------------------------------------- parsing

type PResult<T> = Result<T, String>;

/// A value's text for an error message: quoted, escaped, and cut to a readable length.
fn quote_for_error(s: &str) -> String {
    const MAX: usize = 40;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{:?}…", &s[..cut]),
        None => format!("{s:?}"),
    }
}

fn missing(field: &str) -> String {
    format!("missing field `{field}`")
}

fn wrong_type(field: &str, expected: &str, found: &str) -> String {
    format!("wrong type for field `{field}`: expected {expected}, found {found}")
}

/// The event of an `event_type` and the non-null objects, checked against each other.
fn assemble(
    event_type: Option<i64>,
    person: Option<Person>,
    auction: Option<Auction>,
    bid: Option<Bid>,
) -> PResult<Event> {
    let event_type = event_type.ok_or_else(|| missing("event_type"))?;
    let name = |t: i64| match t {
        0 => "person",
        1 => "auction",
        _ => "bid",
    };
    if !(0..=2).contains(&event_type) {
        return Err(format!(
            "event_type {event_type} is not 0 (person), 1 (auction) or 2 (bid)"
        ));
    }
    let non_null = [
        person.is_some().then_some("person"),
        auction.is_some().then_some("auction"),
        bid.is_some().then_some("bid"),
    ];
    if non_null.iter().flatten().count() > 1 {
        let names: Vec<&str> = non_null.into_iter().flatten().collect();
        return Err(format!(
            "more than one event in a line: `{}` are all non-null",
            names.join("`, `")
        ));
    }
    let event = match (person, auction, bid) {
        (Some(p), _, _) => Event::Person(Box::new(p)),
        (_, Some(a), _) => Event::Auction(Box::new(a)),
        (_, _, Some(b)) => Event::Bid(b),
        _ => {
            return Err(format!(
                "event_type {event_type} ({}) but `{}` is null or absent",
                name(event_type),
                name(event_type)
            ))
        }
    };
    if i64::from(event.event_type()) != event_type {
        return Err(format!(
            "event_type {event_type} ({}) but the non-null object is `{}`",
            name(event_type),
            name(i64::from(event.event_type()))
        ));
    }
    Ok(event)
}

/// An event in its JSON-lines form, as serde reads it: decode lines into it with the
/// general JSON decoder ([`spate_connectors::files::decode_json_line`], or a
/// [`JsonLinesSource`](spate_connectors::files::JsonLinesSource) of `JsonEvent`), then take
/// the [`Event`] with [`JsonEvent::into_event`] (or `Event::from`).
///
/// It is a plain serde type (derived, over the nested wire layout), so the decoder's rules
/// are serde's: keys in any order, any whitespace, escapes, unknown keys skipped, a key given
/// twice is an error. On top of them, those of the Nexmark form (checked when the value is
/// built, so a line that breaks them is a bad record like malformed JSON):
/// `event_type` must be 0, 1 or 2 and name the one non-null object; an absent `person`,
/// `auction` or `bid` is `null`; `extra` may be absent (empty); timestamps are
/// `YYYY-MM-DD HH:MM:SS[.f…]` strings ([`parse_timestamp`]) or epoch milliseconds.
///
/// It serializes back to the same layout (timestamps as strings), so it round-trips through
/// any self-describing format; it is not meant for the binary form between processes (use
/// [`Event`] there, as the map after the source does).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "wire::Line", into = "wire::Line")]
pub struct JsonEvent(pub Event);

impl JsonEvent {
    /// The event.
    #[inline]
    pub fn into_event(self) -> Event {
        self.0
    }
}

impl From<JsonEvent> for Event {
    #[inline]
    fn from(e: JsonEvent) -> Event {
        e.0
    }
}

impl TryFrom<wire::Line> for JsonEvent {
    type Error = String;
    #[inline]
    fn try_from(line: wire::Line) -> Result<Self, String> {
        let person = line.person.map(|p| Person {
            id: p.id,
            name: p.name,
            email_address: p.email_address,
            credit_card: p.credit_card,
            city: p.city,
            state: p.state,
            date_time: p.date_time.0,
            extra: p.extra,
        });
        let auction = line.auction.map(|a| Auction {
            id: a.id,
            item_name: a.item_name,
            description: a.description,
            initial_bid: a.initial_bid,
            reserve: a.reserve,
            date_time: a.date_time.0,
            expires: a.expires.0,
            seller: a.seller,
            category: a.category,
            extra: a.extra,
        });
        let bid = line.bid.map(|b| Bid {
            auction: b.auction,
            bidder: b.bidder,
            price: b.price,
            channel: b.channel,
            url: b.url,
            date_time: b.date_time.0,
            extra: b.extra,
        });
        assemble(line.event_type, person, auction, bid).map(JsonEvent)
    }
}

impl From<JsonEvent> for wire::Line {
    fn from(e: JsonEvent) -> wire::Line {
        let mut line = wire::Line {
            event_type: Some(i64::from(e.0.event_type())),
            person: None,
            auction: None,
            bid: None,
        };
        match e.0 {
            Event::Person(p) => {
                line.person = Some(wire::Person {
                    id: p.id,
                    name: p.name,
                    email_address: p.email_address,
                    credit_card: p.credit_card,
                    city: p.city,
                    state: p.state,
                    date_time: wire::Ts(p.date_time),
                    extra: p.extra,
                })
            }
            Event::Auction(a) => {
                line.auction = Some(wire::Auction {
                    id: a.id,
                    item_name: a.item_name,
                    description: a.description,
                    initial_bid: a.initial_bid,
                    reserve: a.reserve,
                    date_time: wire::Ts(a.date_time),
                    expires: wire::Ts(a.expires),
                    seller: a.seller,
                    category: a.category,
                    extra: a.extra,
                })
            }
            Event::Bid(b) => {
                line.bid = Some(wire::Bid {
                    auction: b.auction,
                    bidder: b.bidder,
                    price: b.price,
                    channel: b.channel,
                    url: b.url,
                    date_time: wire::Ts(b.date_time),
                    extra: b.extra,
                })
            }
        }
        line
    }
}

/// The serde shape of a line: the nested layout of the Nexmark suite's JSON schema.
mod wire {
    use crate::model::Text;
    use serde::de::{self, Deserializer, Visitor};
    use serde::{Deserialize, Serialize, Serializer};
    use std::fmt;

    #[derive(Serialize, Deserialize)]
    pub struct Line {
        pub event_type: Option<i64>,
        pub person: Option<Person>,
        pub auction: Option<Auction>,
        pub bid: Option<Bid>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Person {
        pub id: i64,
        pub name: Text,
        pub email_address: Text,
        pub credit_card: Text,
        pub city: Text,
        pub state: Text,
        pub date_time: Ts,
        #[serde(default)]
        pub extra: Text,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Auction {
        pub id: i64,
        pub item_name: Text,
        pub description: Text,
        pub initial_bid: i64,
        pub reserve: i64,
        pub date_time: Ts,
        pub expires: Ts,
        pub seller: i64,
        pub category: i64,
        #[serde(default)]
        pub extra: Text,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Bid {
        pub auction: i64,
        pub bidder: i64,
        pub price: i64,
        pub channel: Text,
        pub url: Text,
        pub date_time: Ts,
        #[serde(default)]
        pub extra: Text,
    }

    /// An event time: a `YYYY-MM-DD HH:MM:SS[.f…]` string, or epoch milliseconds.
    pub struct Ts(pub i64);

    impl Serialize for Ts {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&super::format_timestamp_string(self.0))
        }
    }

    impl<'de> Deserialize<'de> for Ts {
        #[inline]
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Ts;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a timestamp (YYYY-MM-DD HH:MM:SS.mmm, or epoch milliseconds)")
                }
                #[inline]
                fn visit_str<E: de::Error>(self, s: &str) -> Result<Ts, E> {
                    super::parse_timestamp(s).map(Ts).map_err(E::custom)
                }
                fn visit_i64<E: de::Error>(self, v: i64) -> Result<Ts, E> {
                    Ok(Ts(v))
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Ts, E> {
                    i64::try_from(v)
                        .map(Ts)
                        .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
                }
            }
            d.deserialize_any(V)
        }
    }
}

/// Parses one nested JSON line (a trailing `\n` or `\r\n` is fine) into an event, with the
/// general JSON decoder and [`JsonEvent`]'s rules.
///
/// Never panics; bad input gives an `Err` with a one-line reason.
pub fn parse_event(line: &[u8]) -> Result<Event, String> {
    spate_connectors::files::decode_json_line::<JsonEvent>(line).map(JsonEvent::into_event)
}

// ------------------------------------------------------------------------ timestamps in

/// Parses a UTC timestamp `YYYY-MM-DD HH:MM:SS[.f…]` into epoch milliseconds.
///
/// Also accepts `T` as the separator, 1 to 9 fraction digits (beyond milliseconds they are
/// truncated) or none, and a trailing `Z`.
pub fn parse_timestamp(s: &str) -> Result<i64, String> {
    parse_ts_bytes(s.as_bytes()).ok_or_else(|| {
        format!(
            "invalid timestamp {}: expected YYYY-MM-DD HH:MM:SS.mmm",
            quote_for_error(s)
        )
    })
}

#[inline]
fn parse_ts_bytes(b: &[u8]) -> Option<i64> {
    #[inline(always)]
    fn num(b: &[u8], at: usize, len: usize) -> Option<u32> {
        let mut v = 0u32;
        for &c in b.get(at..at + len)? {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + u32::from(c - b'0');
        }
        Some(v)
    }
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !(b[10] == b' ' || b[10] == b'T')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let year = i64::from(num(b, 0, 4)?);
    let month = num(b, 5, 2)?;
    let day = num(b, 8, 2)?;
    let hour = num(b, 11, 2)?;
    let minute = num(b, 14, 2)?;
    let second = num(b, 17, 2)?;
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut rest = &b[19..];
    if let Some(stripped) = rest.strip_suffix(b"Z") {
        rest = stripped;
    }
    let mut milli = 0u32;
    if let Some(frac) = rest.strip_prefix(b".") {
        if frac.is_empty() || frac.len() > 9 || !frac.iter().all(u8::is_ascii_digit) {
            return None;
        }
        for k in 0..3 {
            milli = milli * 10 + frac.get(k).map_or(0, |&c| u32::from(c - b'0'));
        }
    } else if !rest.is_empty() {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = i64::from(hour * 3600 + minute * 60 + second);
    Some(days * 86_400_000 + secs * 1000 + i64::from(milli))
}

// --------------------------------------------------------------- the reference slow path

/// Converts a parsed JSON value into an event with the same rules as [`parse_event`].
///
/// This is the slow reference path (a generic JSON parser, then a conversion); tests check
/// the fast parser against it.
pub fn event_from_json_value(v: &serde_json::Value) -> Result<Event, String> {
    use serde_json::Value as J;
    fn kind(v: &J) -> &'static str {
        match v {
            J::Null => "null",
            J::Bool(_) => "a boolean",
            J::Number(_) => "a number",
            J::String(_) => "a string",
            J::Array(_) => "an array",
            J::Object(_) => "an object",
        }
    }
    fn int(o: &serde_json::Map<String, J>, field: &str, key: &str) -> PResult<i64> {
        match o.get(key) {
            None => Err(missing(field)),
            Some(J::Number(n)) => n.as_i64().ok_or_else(|| {
                format!("wrong type for field `{field}`: expected an integer that fits 64 bits, found {n}")
            }),
            Some(v) => Err(wrong_type(field, "an integer", kind(v))),
        }
    }
    fn string(o: &serde_json::Map<String, J>, field: &str, key: &str) -> PResult<Text> {
        match o.get(key) {
            None if key == "extra" => Ok(Text::EMPTY),
            None => Err(missing(field)),
            Some(J::String(s)) => Ok(Text::from(s.as_str())),
            Some(v) => Err(wrong_type(field, "a string", kind(v))),
        }
    }
    fn ts(o: &serde_json::Map<String, J>, field: &str, key: &str) -> PResult<i64> {
        match o.get(key) {
            Some(J::String(s)) => parse_ts_bytes(s.as_bytes()).ok_or_else(|| {
                format!(
                    "invalid timestamp in field `{field}`: {} (expected YYYY-MM-DD HH:MM:SS.mmm)",
                    quote_for_error(s)
                )
            }),
            Some(J::Number(_)) | None => int(o, field, key),
            Some(v) => Err(wrong_type(field, "a timestamp string", kind(v))),
        }
    }
    fn sub<'v>(
        top: &'v serde_json::Map<String, J>,
        key: &str,
    ) -> PResult<Option<&'v serde_json::Map<String, J>>> {
        match top.get(key) {
            None | Some(J::Null) => Ok(None),
            Some(J::Object(o)) => Ok(Some(o)),
            Some(v) => Err(wrong_type(key, "an object or null", kind(v))),
        }
    }
    let J::Object(top) = v else {
        return Err(format!("expected a JSON object, found {}", kind(v)));
    };
    let event_type = match top.get("event_type") {
        None => None,
        Some(_) => Some(int(top, "event_type", "event_type")?),
    };
    let person = sub(top, "person")?
        .map(|o| {
            Ok::<_, String>(Person {
                id: int(o, "person.id", "id")?,
                name: string(o, "person.name", "name")?,
                email_address: string(o, "person.emailAddress", "emailAddress")?,
                credit_card: string(o, "person.creditCard", "creditCard")?,
                city: string(o, "person.city", "city")?,
                state: string(o, "person.state", "state")?,
                date_time: ts(o, "person.dateTime", "dateTime")?,
                extra: string(o, "person.extra", "extra")?,
            })
        })
        .transpose()?;
    let auction = sub(top, "auction")?
        .map(|o| {
            Ok::<_, String>(Auction {
                id: int(o, "auction.id", "id")?,
                item_name: string(o, "auction.itemName", "itemName")?,
                description: string(o, "auction.description", "description")?,
                initial_bid: int(o, "auction.initialBid", "initialBid")?,
                reserve: int(o, "auction.reserve", "reserve")?,
                date_time: ts(o, "auction.dateTime", "dateTime")?,
                expires: ts(o, "auction.expires", "expires")?,
                seller: int(o, "auction.seller", "seller")?,
                category: int(o, "auction.category", "category")?,
                extra: string(o, "auction.extra", "extra")?,
            })
        })
        .transpose()?;
    let bid = sub(top, "bid")?
        .map(|o| {
            Ok::<_, String>(Bid {
                auction: int(o, "bid.auction", "auction")?,
                bidder: int(o, "bid.bidder", "bidder")?,
                price: int(o, "bid.price", "price")?,
                channel: string(o, "bid.channel", "channel")?,
                url: string(o, "bid.url", "url")?,
                date_time: ts(o, "bid.dateTime", "dateTime")?,
                extra: string(o, "bid.extra", "extra")?,
            })
        })
        .transpose()?;
    assemble(event_type, person, auction, bid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for ms in [
            0,
            1_704_067_200_000,
            1_704_067_200_999,
            951_782_400_000,
            253_402_300_799_999,
        ] {
            let s = format_timestamp_string(ms);
            assert_eq!(parse_timestamp(&s), Ok(ms), "{s}");
        }
        assert_eq!(
            format_timestamp_string(1_704_067_200_000),
            "2024-01-01 00:00:00.000"
        );
        assert_eq!(
            format_timestamp_string(951_825_661_042),
            "2000-02-29 12:01:01.042"
        );
        assert_eq!(format_timestamp_string(-1), "1969-12-31 23:59:59.999");
        assert_eq!(
            parse_timestamp("2024-01-01T00:00:01.5Z"),
            Ok(1_704_067_201_500)
        );
        assert_eq!(
            parse_timestamp("2024-01-01 00:00:01"),
            Ok(1_704_067_201_000)
        );
        assert_eq!(
            parse_timestamp("2024-01-01 00:00:01.123456789"),
            Ok(1_704_067_201_123)
        );
        for bad in [
            "",
            "2024-01-01",
            "2023-02-29 00:00:00",
            "2024-13-01 00:00:00",
            "2024-01-01 24:00:00",
            "2024-01-01 00:00:00.",
            "2024-01-01 00:00:00.1234567890",
            "2024-01-01 00:00:00x",
            "+024-01-01 00:00:00",
        ] {
            assert!(parse_timestamp(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_day_round_trips() {
        for days in -800_000..800_000 {
            let (y, m, d) = civil_from_days(days);
            assert!((1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m));
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn integers() {
        for v in [0, 1, 9, 10, 99, 100, 12345, -7, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            write_i64(v, &mut out);
            assert_eq!(out, v.to_string().as_bytes());
        }
    }

    #[test]
    fn escapes_strings() {
        let mut out = Vec::new();
        write_str("a\"b\\c\n\u{1}é", &mut out);
        assert_eq!(out, b"\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"");
        let back: String = serde_json::from_slice(&out).unwrap();
        assert_eq!(back, "a\"b\\c\n\u{1}é");
    }

    #[test]
    fn json_events_follow_the_nexmark_rules() {
        let bid = r#"{"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,"bidder":2001,"price":1102,"channel":"Google","url":"u","dateTime":"2024-01-01 00:00:00.000","extra":"x"}}"#;
        let Ok(Event::Bid(b)) = parse_event(bid.as_bytes()) else {
            panic!("{:?}", parse_event(bid.as_bytes()))
        };
        assert_eq!(
            (b.auction, b.price, b.date_time),
            (1000, 1102, 1_704_067_200_000)
        );
        assert_eq!(&*b.extra, "x");
        // Absent objects are null, `extra` may be absent, times may be integers.
        let short = r#"{"bid":{"auction":1,"bidder":2,"price":3,"channel":"c","url":"u","dateTime":5},"event_type":2}"#;
        let Ok(Event::Bid(b)) = parse_event(short.as_bytes()) else {
            panic!("{:?}", parse_event(short.as_bytes()))
        };
        assert_eq!((b.date_time, &*b.extra), (5, ""));
        for (line, reason) in [
            (r#"{"bid":null}"#, "missing field `event_type`"),
            (r#"{"event_type":3}"#, "event_type 3 is not"),
            (r#"{"event_type":2}"#, "but `bid` is null or absent"),
            (
                r#"{"event_type":0,"bid":{"auction":1,"bidder":2,"price":3,"channel":"c","url":"u","dateTime":5}}"#,
                "but the non-null object is `bid`",
            ),
            (
                r#"{"event_type":2,"bid":{"auction":1,"bidder":2,"price":3,"channel":"c","url":"u","dateTime":"2024-02-30 00:00:00"}}"#,
                "invalid timestamp",
            ),
            (
                r#"{"event_type":2,"bid":{"auction":1,"bidder":2,"price":3,"channel":"c","url":"u"}}"#,
                "missing field `dateTime`",
            ),
        ] {
            let err = parse_event(line.as_bytes()).expect_err(line);
            assert!(err.contains(reason), "{line}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
