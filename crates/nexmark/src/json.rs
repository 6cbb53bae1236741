//! The JSON-lines form of Nexmark events: a byte-exact writer and a fast, strict parser.
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
//! # Parsing
//!
//! [`parse_event`] is a hand-written parser for this schema, not a generic JSON parser
//! followed by a conversion. A fast path reads the exact layout that [`write_event`] writes
//! (so the generator's and the Python reference's files); at the first difference it gives
//! up and the general parser reads the line, which takes any valid JSON of the same shape:
//! keys in any order, any whitespace, escapes in strings (decoded), and unknown keys
//! (skipped, but still checked to be valid JSON). The rules:
//!
//! * `event_type` is required and must be 0, 1 or 2 and match the one non-null object;
//!   an absent `person`, `auction` or `bid` counts as `null`;
//! * every field of the non-null object is required and must have its type (an integer, or
//!   a string), except `extra`, which is empty when absent (it is only padding);
//! * `dateTime` and `expires` are `YYYY-MM-DD HH:MM:SS[.f…]` strings (see
//!   [`parse_timestamp`]), or integers taken as epoch milliseconds;
//! * integers must fit in an `i64` and have no fraction or exponent (`-0` is 0);
//! * a key given twice keeps its last value, as with `serde_json` (but every value given
//!   must have the field's type).
//!
//! Bad input gives an `Err` with a one-line reason, never a panic, for example
//! "missing field \`bid.price\`", "wrong type for field \`bid.price\`: expected an integer,
//! found a string" or "malformed JSON at byte 17: expected ':', found '}'".
//! [`event_from_json_value`] is the slow reference for the same rules, on a
//! `serde_json::Value`; the tests check that both accept the same lines.
//!
//! [`parse_event_projected`] checks a line in the same way, but leaves empty the string fields
//! a reader does not need (a [`Projection`], for example a query's
//! [`crate::queries::Query::projection`]): most of a bid's bytes are its `extra` padding, and
//! its channel and url, which few queries read.

use crate::model::{Auction, Bid, Event, Person, Text};
use std::borrow::Cow;

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

/// The deepest nesting accepted inside an unknown field's value.
const MAX_DEPTH: u32 = 100;

/// A short, printable description of a byte for error messages.
fn describe_byte(c: u8) -> String {
    if c.is_ascii_graphic() || c == b' ' {
        format!("'{}'", char::from(c))
    } else {
        format!("byte 0x{c:02x}")
    }
}

#[cold]
fn invalid_utf8(start: usize, e: &std::str::Utf8Error) -> String {
    format!(
        "invalid UTF-8 in a string at byte {}",
        start + e.valid_up_to()
    )
}

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

/// What a JSON value is, from its first byte.
fn kind_name(first: Option<u8>) -> &'static str {
    match first {
        Some(b'"') => "a string",
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        Some(b'-' | b'0'..=b'9') => "a number",
        _ => "malformed JSON",
    }
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline(always)]
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if c == b' ' || c == b'\n' || c == b'\t' || c == b'\r' {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    #[cold]
    fn expected(&self, what: &str) -> String {
        match self.peek() {
            None => format!("malformed JSON: the line ends where {what} was expected"),
            Some(c) => {
                format!(
                    "malformed JSON at byte {}: expected {what}, found {}",
                    self.i,
                    describe_byte(c)
                )
            }
        }
    }

    #[inline(always)]
    fn eat(&mut self, c: u8, what: &str) -> PResult<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.expected(what))
        }
    }

    /// Parses an object, calling `field` with the parser positioned on each value.
    #[inline(always)]
    fn object<F>(&mut self, mut field: F) -> PResult<()>
    where
        F: FnMut(&mut Self, &[u8]) -> PResult<()>,
    {
        self.eat(b'{', "'{'")?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.expected("a key string"));
            }
            let key = self.raw_string()?;
            self.ws();
            self.eat(b':', "':'")?;
            self.ws();
            field(self, &key)?;
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.expected("',' or '}'")),
            }
        }
    }

    /// Parses a string (at its opening quote), decoding escapes.
    #[inline]
    fn string(&mut self) -> PResult<Cow<'a, str>> {
        debug_assert_eq!(self.peek(), Some(b'"'));
        let start = self.i + 1;
        let rest = &self.b[start..];
        match memchr::memchr2(b'"', b'\\', rest) {
            Some(len) if rest[len] == b'"' => {
                let raw = &rest[..len];
                // No early exit, so that it vectorizes.
                if raw.iter().fold(false, |acc, &c| acc | (c < 0x20)) {
                    return Err(self.control_char(start, raw));
                }
                let s = std::str::from_utf8(raw).map_err(|e| invalid_utf8(start, &e))?;
                self.i = start + len + 1;
                Ok(Cow::Borrowed(s))
            }
            Some(_) => self.string_escaped(start).map(Cow::Owned),
            None => Err(format!(
                "malformed JSON: unterminated string starting at byte {}",
                self.i
            )),
        }
    }

    /// Like [`Self::string`], as (valid UTF-8) bytes: ASCII needs no UTF-8 validation.
    #[inline]
    fn raw_string(&mut self) -> PResult<Cow<'a, [u8]>> {
        debug_assert_eq!(self.peek(), Some(b'"'));
        let start = self.i + 1;
        let rest = &self.b[start..];
        match memchr::memchr2(b'"', b'\\', rest) {
            Some(len) if rest[len] == b'"' => {
                let raw = &rest[..len];
                let (control, high) = raw.iter().fold((false, false), |(c, h), &x| {
                    (c | (x < 0x20), h | (x >= 0x80))
                });
                if control {
                    return Err(self.control_char(start, raw));
                }
                if high {
                    std::str::from_utf8(raw).map_err(|e| invalid_utf8(start, &e))?;
                }
                self.i = start + len + 1;
                Ok(Cow::Borrowed(raw))
            }
            Some(_) => self
                .string_escaped(start)
                .map(|s| Cow::Owned(s.into_bytes())),
            None => Err(format!(
                "malformed JSON: unterminated string starting at byte {}",
                self.i
            )),
        }
    }

    #[cold]
    fn control_char(&self, start: usize, raw: &[u8]) -> String {
        let at = start + raw.iter().position(|&c| c < 0x20).unwrap_or(0);
        format!("malformed JSON at byte {at}: unescaped control character in a string")
    }

    /// The slow path of [`Self::string`]: a string with escapes, decoded.
    fn string_escaped(&mut self, start: usize) -> PResult<String> {
        let mut out = String::new();
        let mut i = start;
        loop {
            let rest = &self.b[i..];
            let Some(len) = memchr::memchr2(b'"', b'\\', rest) else {
                return Err(format!(
                    "malformed JSON: unterminated string starting at byte {}",
                    start - 1
                ));
            };
            let raw = &rest[..len];
            if raw.iter().any(|&c| c < 0x20) {
                return Err(self.control_char(i, raw));
            }
            // Escapes are ASCII, so the runs between them are whole UTF-8 sequences.
            out.push_str(std::str::from_utf8(raw).map_err(|e| {
                format!("invalid UTF-8 in a string at byte {}", i + e.valid_up_to())
            })?);
            i += len;
            if self.b[i] == b'"' {
                self.i = i + 1;
                return Ok(out);
            }
            // A backslash.
            let esc = self.b.get(i + 1).copied();
            i += 2;
            match esc {
                Some(b'"') => out.push('"'),
                Some(b'\\') => out.push('\\'),
                Some(b'/') => out.push('/'),
                Some(b'b') => out.push('\u{8}'),
                Some(b'f') => out.push('\u{c}'),
                Some(b'n') => out.push('\n'),
                Some(b'r') => out.push('\r'),
                Some(b't') => out.push('\t'),
                Some(b'u') => {
                    let hi = self.hex4(i)?;
                    i += 4;
                    let code = if (0xD800..0xDC00).contains(&hi) {
                        if self.b.get(i) != Some(&b'\\') || self.b.get(i + 1) != Some(&b'u') {
                            return Err(format!(
                                "malformed JSON at byte {i}: lone leading surrogate in a \\u escape"
                            ));
                        }
                        let lo = self.hex4(i + 2)?;
                        if !(0xDC00..0xE000).contains(&lo) {
                            return Err(format!(
                                "malformed JSON at byte {i}: invalid trailing surrogate in a \\u escape"
                            ));
                        }
                        i += 6;
                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                    } else if (0xDC00..0xE000).contains(&hi) {
                        return Err(format!(
                            "malformed JSON at byte {}: lone trailing surrogate in a \\u escape",
                            i - 6
                        ));
                    } else {
                        hi
                    };
                    out.push(char::from_u32(code).expect("a non-surrogate code point is a char"));
                }
                Some(c) => {
                    return Err(format!(
                        "malformed JSON at byte {}: invalid escape '\\{}' in a string",
                        i - 2,
                        char::from(c).escape_default()
                    ))
                }
                None => {
                    return Err(format!(
                        "malformed JSON: unterminated string starting at byte {}",
                        start - 1
                    ))
                }
            }
        }
    }

    fn hex4(&self, at: usize) -> PResult<u32> {
        let digits = self
            .b
            .get(at..at + 4)
            .ok_or_else(|| "malformed JSON: the line ends inside a \\u escape".to_string())?;
        let mut v = 0u32;
        for (k, &c) in digits.iter().enumerate() {
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => {
                    return Err(format!(
                        "malformed JSON at byte {}: expected a hex digit in a \\u escape, found {}",
                        at + k,
                        describe_byte(c)
                    ))
                }
            };
            v = v * 16 + u32::from(d);
        }
        Ok(v)
    }

    /// Scans a JSON number; returns its integer value if it is an integer that fits an i64,
    /// `Ok(None)` if it is a valid number that is not one (fraction, exponent, too large).
    #[inline]
    fn number(&mut self) -> PResult<Option<i64>> {
        let neg = self.peek() == Some(b'-');
        if neg {
            self.i += 1;
        }
        let digits_start = self.i;
        let mut v: u64 = 0;
        let mut overflow = false;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            match v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(c - b'0')))
            {
                Some(n) => v = n,
                None => overflow = true,
            }
            self.i += 1;
        }
        let n_digits = self.i - digits_start;
        if n_digits == 0 {
            return Err(self.expected("a digit"));
        }
        if n_digits > 1 && self.b[digits_start] == b'0' {
            return Err(format!(
                "malformed JSON at byte {digits_start}: a number with a leading zero"
            ));
        }
        let mut integral = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            integral = false;
            self.digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            integral = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.digits()?;
        }
        if !integral || overflow {
            return Ok(None);
        }
        Ok(if neg {
            if v <= 1 << 63 {
                Some((v as i64).wrapping_neg())
            } else {
                None
            }
        } else {
            i64::try_from(v).ok()
        })
    }

    fn digits(&mut self) -> PResult<()> {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        if self.i == start {
            return Err(self.expected("a digit"));
        }
        Ok(())
    }

    /// An integer field.
    #[inline]
    fn int(&mut self, field: &str) -> PResult<i64> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => {
                let start = self.i;
                match self.number()? {
                    Some(v) => Ok(v),
                    None => Err(format!(
                        "wrong type for field `{field}`: expected an integer that fits 64 bits, found {}",
                        String::from_utf8_lossy(&self.b[start..self.i.min(start + 40)])
                    )),
                }
            }
            other => Err(wrong_type(field, "an integer", kind_name(other))),
        }
    }

    /// A string field.
    #[inline]
    fn str_field(&mut self, field: &str) -> PResult<Text> {
        match self.peek() {
            Some(b'"') => Ok(Text::from(self.string()?)),
            other => Err(wrong_type(field, "a string", kind_name(other))),
        }
    }

    /// A timestamp field: a timestamp string, or an integer of epoch milliseconds.
    #[inline]
    fn ts_field(&mut self, field: &str) -> PResult<i64> {
        match self.peek() {
            Some(b'"') => {
                let s = self.raw_string()?;
                parse_ts_bytes(&s).ok_or_else(|| {
                    format!(
                        "invalid timestamp in field `{field}`: {} (expected YYYY-MM-DD HH:MM:SS.mmm)",
                        quote_for_error(&String::from_utf8_lossy(&s))
                    )
                })
            }
            Some(b'-' | b'0'..=b'9') => self.int(field),
            other => Err(wrong_type(field, "a timestamp string", kind_name(other))),
        }
    }

    /// Skips (and checks) any JSON value.
    fn skip_value(&mut self, depth: u32) -> PResult<()> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "malformed JSON at byte {}: nested deeper than {MAX_DEPTH} levels",
                self.i
            ));
        }
        match self.peek() {
            Some(b'"') => self.string().map(drop),
            Some(b'{') => self.object(|p, _| p.skip_value(depth + 1)),
            Some(b'[') => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => {
                            self.i += 1;
                            self.ws();
                        }
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(self.expected("',' or ']'")),
                    }
                }
            }
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number().map(drop),
            _ => Err(self.expected("a JSON value")),
        }
    }

    fn literal(&mut self, word: &[u8]) -> PResult<()> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(self.expected(&format!("'{}'", String::from_utf8_lossy(word))))
        }
    }

    /// `null` (as `None`) or an object parsed by `parse`.
    #[inline]
    fn nullable<T>(
        &mut self,
        field: &str,
        parse: impl FnOnce(&mut Self) -> PResult<T>,
    ) -> PResult<Option<T>> {
        match self.peek() {
            Some(b'n') => self.literal(b"null").map(|()| None),
            Some(b'{') => parse(self).map(Some),
            other => Err(wrong_type(field, "an object or null", kind_name(other))),
        }
    }

    fn person(&mut self) -> PResult<Person> {
        let (mut id, mut name, mut email, mut card, mut city, mut state, mut dt, mut extra) =
            (None, None, None, None, None, None, None, None);
        self.object(|p, key| {
            match key {
                b"id" => id = Some(p.int("person.id")?),
                b"name" => name = Some(p.str_field("person.name")?),
                b"emailAddress" => email = Some(p.str_field("person.emailAddress")?),
                b"creditCard" => card = Some(p.str_field("person.creditCard")?),
                b"city" => city = Some(p.str_field("person.city")?),
                b"state" => state = Some(p.str_field("person.state")?),
                b"dateTime" => dt = Some(p.ts_field("person.dateTime")?),
                b"extra" => extra = Some(p.str_field("person.extra")?),
                _ => p.skip_value(1)?,
            }
            Ok(())
        })?;
        Ok(Person {
            id: id.ok_or_else(|| missing("person.id"))?,
            name: name.ok_or_else(|| missing("person.name"))?,
            email_address: email.ok_or_else(|| missing("person.emailAddress"))?,
            credit_card: card.ok_or_else(|| missing("person.creditCard"))?,
            city: city.ok_or_else(|| missing("person.city"))?,
            state: state.ok_or_else(|| missing("person.state"))?,
            date_time: dt.ok_or_else(|| missing("person.dateTime"))?,
            extra: extra.unwrap_or(Text::EMPTY),
        })
    }

    fn auction(&mut self) -> PResult<Auction> {
        let (mut id, mut item, mut desc, mut initial, mut reserve) = (None, None, None, None, None);
        let (mut dt, mut expires, mut seller, mut category, mut extra) =
            (None, None, None, None, None);
        self.object(|p, key| {
            match key {
                b"id" => id = Some(p.int("auction.id")?),
                b"itemName" => item = Some(p.str_field("auction.itemName")?),
                b"description" => desc = Some(p.str_field("auction.description")?),
                b"initialBid" => initial = Some(p.int("auction.initialBid")?),
                b"reserve" => reserve = Some(p.int("auction.reserve")?),
                b"dateTime" => dt = Some(p.ts_field("auction.dateTime")?),
                b"expires" => expires = Some(p.ts_field("auction.expires")?),
                b"seller" => seller = Some(p.int("auction.seller")?),
                b"category" => category = Some(p.int("auction.category")?),
                b"extra" => extra = Some(p.str_field("auction.extra")?),
                _ => p.skip_value(1)?,
            }
            Ok(())
        })?;
        Ok(Auction {
            id: id.ok_or_else(|| missing("auction.id"))?,
            item_name: item.ok_or_else(|| missing("auction.itemName"))?,
            description: desc.ok_or_else(|| missing("auction.description"))?,
            initial_bid: initial.ok_or_else(|| missing("auction.initialBid"))?,
            reserve: reserve.ok_or_else(|| missing("auction.reserve"))?,
            date_time: dt.ok_or_else(|| missing("auction.dateTime"))?,
            expires: expires.ok_or_else(|| missing("auction.expires"))?,
            seller: seller.ok_or_else(|| missing("auction.seller"))?,
            category: category.ok_or_else(|| missing("auction.category"))?,
            extra: extra.unwrap_or(Text::EMPTY),
        })
    }

    fn bid(&mut self) -> PResult<Bid> {
        let (mut auction, mut bidder, mut price, mut channel, mut url, mut dt, mut extra) =
            (None, None, None, None, None, None, None);
        self.object(|p, key| {
            match key {
                b"auction" => auction = Some(p.int("bid.auction")?),
                b"bidder" => bidder = Some(p.int("bid.bidder")?),
                b"price" => price = Some(p.int("bid.price")?),
                b"channel" => channel = Some(p.str_field("bid.channel")?),
                b"url" => url = Some(p.str_field("bid.url")?),
                b"dateTime" => dt = Some(p.ts_field("bid.dateTime")?),
                b"extra" => extra = Some(p.str_field("bid.extra")?),
                _ => p.skip_value(1)?,
            }
            Ok(())
        })?;
        Ok(Bid {
            auction: auction.ok_or_else(|| missing("bid.auction"))?,
            bidder: bidder.ok_or_else(|| missing("bid.bidder"))?,
            price: price.ok_or_else(|| missing("bid.price"))?,
            channel: channel.ok_or_else(|| missing("bid.channel"))?,
            url: url.ok_or_else(|| missing("bid.url"))?,
            date_time: dt.ok_or_else(|| missing("bid.dateTime"))?,
            extra: extra.unwrap_or(Text::EMPTY),
        })
    }
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

/// Parses one nested JSON line (a trailing `\n` or `\r\n` is fine) into an event.
///
/// See the [module docs](self) for what it accepts. Never panics; bad input gives an `Err`
/// with a one-line reason.
pub fn parse_event(line: &[u8]) -> Result<Event, String> {
    parse_event_projected(line, Projection::ALL)
}

/// Like [`parse_event`], but only the string fields in `projection` are materialized; the
/// others are left empty ([`Text::EMPTY`]). The line is checked exactly as [`parse_event`]
/// checks it (a line one rejects, the other rejects with the same reason), and every integer
/// and timestamp is read: a projection only saves the copies (and allocations) of strings
/// that a query never reads, such as the `extra` padding.
pub fn parse_event_projected(line: &[u8], projection: Projection) -> Result<Event, String> {
    if let Some(event) = fast::parse(line, projection) {
        return Ok(event);
    }
    parse_general(line).map(|mut event| {
        projection.apply(&mut event);
        event
    })
}

/// The event at the start of `text`, and the length of its JSON object, when it is in the
/// exact layout that [`write_event`] writes; `None` otherwise. A fast path for readers that
/// hold many lines at once: when the object is followed by a line end, it is the event that
/// [`parse_event_projected`] returns for that line. It never reads past a control character,
/// so never past the end of the line it starts. `text` need not be UTF-8: the parser checks
/// the bytes it reads (so an object that is not UTF-8 is `None`).
pub fn parse_event_prefix(text: &[u8], projection: Projection) -> Option<(Event, usize)> {
    fast::parse_prefix(text, projection)
}

/// The string fields of the events that a reader needs (see [`parse_event_projected`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Projection(u16);

impl Projection {
    /// Every field.
    pub const ALL: Projection = Projection(u16::MAX);
    /// No string field (only ids, numbers and times).
    pub const NONE: Projection = Projection(0);
    /// `person.name`.
    pub const PERSON_NAME: Projection = Projection(1);
    /// `person.emailAddress`.
    pub const PERSON_EMAIL: Projection = Projection(1 << 1);
    /// `person.creditCard`.
    pub const PERSON_CREDIT_CARD: Projection = Projection(1 << 2);
    /// `person.city`.
    pub const PERSON_CITY: Projection = Projection(1 << 3);
    /// `person.state`.
    pub const PERSON_STATE: Projection = Projection(1 << 4);
    /// `person.extra`.
    pub const PERSON_EXTRA: Projection = Projection(1 << 5);
    /// `auction.itemName`.
    pub const AUCTION_ITEM_NAME: Projection = Projection(1 << 6);
    /// `auction.description`.
    pub const AUCTION_DESCRIPTION: Projection = Projection(1 << 7);
    /// `auction.extra`.
    pub const AUCTION_EXTRA: Projection = Projection(1 << 8);
    /// `bid.channel`.
    pub const BID_CHANNEL: Projection = Projection(1 << 9);
    /// `bid.url`.
    pub const BID_URL: Projection = Projection(1 << 10);
    /// `bid.extra`.
    pub const BID_EXTRA: Projection = Projection(1 << 11);

    /// The fields of both.
    pub const fn union(self, other: Projection) -> Projection {
        Projection(self.0 | other.0)
    }

    /// Whether every field of `other` is in `self`.
    pub const fn contains(self, other: Projection) -> bool {
        self.0 & other.0 == other.0
    }

    /// Empties the string fields of `event` that are not in this projection.
    pub fn apply(self, event: &mut Event) {
        let keep = |field: Projection, text: &mut Text| {
            if !self.contains(field) {
                *text = Text::EMPTY;
            }
        };
        match event {
            Event::Person(p) => {
                keep(Self::PERSON_NAME, &mut p.name);
                keep(Self::PERSON_EMAIL, &mut p.email_address);
                keep(Self::PERSON_CREDIT_CARD, &mut p.credit_card);
                keep(Self::PERSON_CITY, &mut p.city);
                keep(Self::PERSON_STATE, &mut p.state);
                keep(Self::PERSON_EXTRA, &mut p.extra);
            }
            Event::Auction(a) => {
                keep(Self::AUCTION_ITEM_NAME, &mut a.item_name);
                keep(Self::AUCTION_DESCRIPTION, &mut a.description);
                keep(Self::AUCTION_EXTRA, &mut a.extra);
            }
            Event::Bid(b) => {
                keep(Self::BID_CHANNEL, &mut b.channel);
                keep(Self::BID_URL, &mut b.url);
                keep(Self::BID_EXTRA, &mut b.extra);
            }
        }
    }
}

/// The general parser: any layout, and the reason when the line is bad.
fn parse_general(line: &[u8]) -> Result<Event, String> {
    let mut p = Parser { b: line, i: 0 };
    p.ws();
    match p.peek() {
        None => return Err("empty line".to_string()),
        Some(b'{') => {}
        Some(c) => {
            return Err(format!(
                "malformed JSON at byte {}: expected a JSON object, found {}",
                p.i,
                describe_byte(c)
            ))
        }
    }
    let (mut event_type, mut person, mut auction, mut bid) = (None, None, None, None);
    p.object(|p, key| {
        match key {
            b"event_type" => event_type = Some(p.int("event_type")?),
            b"person" => person = p.nullable("person", Parser::person)?,
            b"auction" => auction = p.nullable("auction", Parser::auction)?,
            b"bid" => bid = p.nullable("bid", Parser::bid)?,
            _ => p.skip_value(1)?,
        }
        Ok(())
    })?;
    p.ws();
    if p.i != line.len() {
        return Err(format!(
            "malformed JSON at byte {}: unexpected {} after the object",
            p.i,
            describe_byte(line[p.i])
        ));
    }
    assemble(event_type, person, auction, bid)
}

// ----------------------------------------------------------------------------- fast path

/// The fast path of [`parse_event`]: the exact layout that [`write_event`] (and the Python
/// reference) writes. It gives up (`None`) at the first difference, and the general parser
/// then reads the line from the start, so it never decides whether a line is bad; when it
/// does return an event, the general parser would return the same one.
///
/// It checks the whole line once for UTF-8 instead of each string; in the exact layout,
/// everything outside strings is matched byte for byte, so control characters are looked for
/// only inside strings, by the same 16-byte scan that finds a string's end (SSE2 on x86_64).
/// So it accepts exactly the lines the general parser accepts. Strings the [`Projection`] leaves out are only checked
/// and skipped (escapes included), never copied.
/// Strings that take few distinct values (a bid's channel and url, a person's name, city and
/// state) come from a small per-thread cache when they have escapes (decoding them would cost
/// an allocation anyway); without escapes they are copied as they are.
mod fast {
    use std::cell::{Cell, RefCell};

    use super::{parse_ts_bytes, Projection};
    use crate::model::{Auction, Bid, Event, Person, Text};

    /// The number of slots of the per-thread cache of repeated strings (a power of two).
    const INTERN_SLOTS: usize = 1 << 14;
    /// Strings longer than this are not cached.
    const INTERN_MAX_LEN: usize = 128;

    thread_local! {
        /// Where strings with escapes are decoded before they become a `Text`.
        static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        /// A direct-mapped cache of repeated strings: a hit is a reference count increment
        /// instead of an allocation and a copy; a miss replaces the slot.
        static INTERNED: RefCell<Vec<Option<Text>>> = const { RefCell::new(Vec::new()) };
    }

    #[inline(always)]
    fn read_u64(b: &[u8], at: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    }

    /// A cheap hash of a short string: its length and three 8-byte windows (start, middle,
    /// end). Collisions only cost a cache miss.
    #[inline(always)]
    fn slot_of(b: &[u8]) -> usize {
        let n = b.len();
        let h = if n >= 8 {
            read_u64(b, 0)
                ^ read_u64(b, n / 2 - 4).rotate_left(21)
                ^ read_u64(b, n - 8).rotate_left(42)
        } else {
            b.iter().fold(0u64, |h, &c| (h << 8) | u64::from(c))
        };
        let h = (h ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - INTERN_SLOTS.trailing_zeros())) as usize
    }

    /// `s` as a `Text`, from the per-thread cache when it holds it.
    #[inline]
    fn intern(s: &str) -> Text {
        if s.len() > INTERN_MAX_LEN {
            return Text::from(s);
        }
        let slot = slot_of(s.as_bytes());
        INTERNED.with_borrow_mut(|table| {
            if table.is_empty() {
                table.resize(INTERN_SLOTS, None);
            }
            let entry = &mut table[slot];
            if let Some(cached) = entry {
                if **cached == *s {
                    return cached.clone();
                }
            }
            let fresh = Text::from(s);
            *entry = Some(fresh.clone());
            fresh
        })
    }

    /// Whether a byte ends the plain run of a JSON string: a quote, a backslash, a control
    /// character (which JSON forbids in strings) or a byte that is not ASCII (whose UTF-8
    /// sequence is then checked: see [`utf8_char`]).
    #[inline(always)]
    fn special(c: u8) -> bool {
        (c == b'"') | (c == b'\\') | !(0x20..0x80).contains(&c)
    }

    /// The length of the UTF-8 sequence that starts at `b[k]` (a byte that is not ASCII), or
    /// `None` if it is not one well-formed character.
    #[inline(never)]
    fn utf8_char(b: &[u8], k: usize) -> Option<usize> {
        let len = match b[k] {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return None,
        };
        std::str::from_utf8(b.get(k..k + len)?).ok()?;
        Some(len)
    }

    /// The bytes of a string scanned with [`special_mask`], as a `str`: every byte in them
    /// is ASCII or part of a character that [`utf8_char`] checked.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn scanned_str(b: &[u8]) -> &str {
        debug_assert!(std::str::from_utf8(b).is_ok(), "a scanned string is UTF-8");
        // SAFETY: the callers pass only bytes of a string's scan (or the decoded string made
        // of them), in which the scan stops at every byte of 0x80 or more and resumes only
        // past a sequence that `utf8_char` checked with `from_utf8`. The decoding adds only
        // the ASCII bytes of escapes. So `b` is ASCII bytes and whole, valid UTF-8
        // characters: valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(b) }
    }

    /// Bit `k` is set when byte `k` of `chunk` is [`special`].
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    #[inline(always)]
    fn special_mask(chunk: &[u8; 16]) -> u32 {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        // SAFETY: SSE2 is part of the x86_64 baseline, so every x86_64 CPU has these
        // instructions; the unaligned load reads exactly the 16 bytes of `chunk`.
        unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // Unsigned `c < 0x20` is `min(c, 0x1f) == c`.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            // The mask takes each byte's top bit: `v` itself adds the bytes over 0x7f.
            let stop = _mm_or_si128(_mm_or_si128(quote, backslash), _mm_or_si128(control, v));
            _mm_movemask_epi8(stop) as u32
        }
    }

    /// Bit `k` is set when byte `k` of `chunk` is [`special`].
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn special_mask(chunk: &[u8; 16]) -> u32 {
        chunk
            .iter()
            .enumerate()
            .fold(0, |mask, (k, &c)| mask | (u32::from(special(c)) << k))
    }

    /// The position of the first [`special`] byte of `b` at or after `from`: 16 bytes at a
    /// time, inline (strings are short, so a call per string would cost more than the scan).
    #[inline(always)]
    fn find_special(b: &[u8], from: usize) -> Option<usize> {
        let mut at = from;
        while at + 16 <= b.len() {
            let mask = mask_at(b, at);
            if mask != 0 {
                return Some(at + mask.trailing_zeros() as usize);
            }
            at += 16;
        }
        if at >= b.len() {
            return None;
        }
        if b.len() >= 16 {
            // The last 16 bytes, of which those before `at` were already scanned.
            let start = b.len() - 16;
            let mask = mask_at(b, start) >> (at - start);
            return (mask != 0).then(|| at + mask.trailing_zeros() as usize);
        }
        b[at..].iter().position(|&c| special(c)).map(|k| at + k)
    }

    /// The [`special_mask`] of `b[at..at + 16]`, which must be in range.
    #[inline(always)]
    fn mask_at(b: &[u8], at: usize) -> u32 {
        match b[at..].first_chunk::<16>() {
            Some(chunk) => special_mask(chunk),
            None => unreachable!("the caller checks that 16 bytes are left"),
        }
    }

    /// The value and count of the decimal digits that start the 8 bytes `x` (little-endian),
    /// when there are 1 to 7 of them (`None` for none or 8, which the digit loop reads).
    #[inline(always)]
    pub(super) fn swar_digits(x: u64) -> Option<(i64, usize)> {
        const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
        // Each byte of `d` is its digit's value for '0' to '9' and 10 or more for any other
        // byte (no carry crosses bytes).
        let d = x ^ 0x3030_3030_3030_3030;
        let non_digit = (((d & LOW7) + 0x7676_7676_7676_7676) | d) & !LOW7;
        let digits = (non_digit.trailing_zeros() / 8) as usize;
        if digits == 0 || digits == 8 {
            return None;
        }
        // The digits to the top bytes (zeros before them), then pairs, quads and the whole.
        let v = d << (8 * (8 - digits));
        let v = ((v & 0x0f0f_0f0f_0f0f_0f0f).wrapping_mul(2561)) >> 8;
        let v = ((v & 0x00ff_00ff_00ff_00ff).wrapping_mul(6_553_601)) >> 16;
        let v = ((v & 0x0000_ffff_0000_ffff).wrapping_mul(42_949_672_960_001)) >> 32;
        Some((v as i64, digits))
    }

    thread_local! {
        /// The date of the last timestamp read on this thread (its first 10 bytes, as 8 + 2)
        /// and its epoch milliseconds at midnight: consecutive events share the date.
        static LAST_DATE: Cell<(u64, u16, i64)> = const { Cell::new((0, 0, 0)) };
    }

    /// A `YYYY-MM-DD HH:MM:SS.mmm` timestamp, as [`parse_ts_bytes`] reads it.
    #[inline(always)]
    pub(super) fn timestamp(b: &[u8]) -> Option<i64> {
        let Ok(b) = <&[u8; 23]>::try_from(b) else {
            return parse_ts_bytes(b);
        };
        if b[10] != b' ' || b[13] != b':' || b[16] != b':' || b[19] != b'.' {
            return parse_ts_bytes(b);
        }
        // Constant indices into a fixed-size array, and no early exit: straight-line code.
        let d = |k: usize| i64::from(b[k].wrapping_sub(b'0'));
        let digits = [
            d(11),
            d(12),
            d(14),
            d(15),
            d(17),
            d(18),
            d(20),
            d(21),
            d(22),
        ];
        if digits.iter().fold(0, |max, &digit| max.max(digit)) > 9 {
            return None;
        }
        let (hour, minute, second) = (d(11) * 10 + d(12), d(14) * 10 + d(15), d(17) * 10 + d(18));
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        let in_day = ((hour * 60 + minute) * 60 + second) * 1000 + d(20) * 100 + d(21) * 10 + d(22);
        let key = (read_u64(b, 0), u16::from_le_bytes([b[8], b[9]]));
        let (last_hi, last_lo, midnight) = LAST_DATE.get();
        if (last_hi, last_lo) == key {
            return Some(midnight + in_day);
        }
        // A new date: the full check, and remember its midnight.
        let v = parse_ts_bytes(b)?;
        LAST_DATE.set((key.0, key.1, v - in_day));
        Some(v)
    }

    struct Cursor<'a> {
        /// The input: a line without its trailing whitespace, or bytes that start with a
        /// line. They need not be UTF-8: the cursor matches every byte outside strings
        /// against ASCII, and checks the characters in strings that are not ASCII.
        b: &'a [u8],
        i: usize,
        /// The string fields to materialize.
        projection: Projection,
    }

    impl<'a> Cursor<'a> {
        /// Consumes the literal `s`.
        #[inline(always)]
        fn lit<const N: usize>(&mut self, s: &[u8; N]) -> Option<()> {
            // A fixed-size comparison: inline loads and compares, not a call to `bcmp`.
            if self.b.get(self.i..)?.first_chunk::<N>()? == s {
                self.i += N;
                Some(())
            } else {
                None
            }
        }

        /// A plain JSON integer of at most 18 digits.
        #[inline(always)]
        fn int(&mut self) -> Option<i64> {
            let b = &self.b[self.i..];
            let neg = b.first() == Some(&b'-');
            let start = usize::from(neg);
            // Up to 7 digits (every id and most prices) from one 8-byte word.
            if let Some(&word) = b.get(start..).and_then(|rest| rest.first_chunk::<8>()) {
                if let Some((v, digits)) = swar_digits(u64::from_le_bytes(word)) {
                    if digits > 1 && b[start] == b'0' {
                        return None;
                    }
                    let end = start + digits;
                    if matches!(b.get(end), Some(b'.' | b'e' | b'E')) {
                        return None;
                    }
                    self.i += end;
                    return Some(if neg { -v } else { v });
                }
            }
            let mut k = start;
            let mut v: i64 = 0;
            while let Some(&c @ b'0'..=b'9') = b.get(k) {
                if k - start == 18 {
                    return None;
                }
                v = v * 10 + i64::from(c - b'0');
                k += 1;
            }
            let digits = k - start;
            if digits == 0 || (digits > 1 && b[start] == b'0') {
                return None;
            }
            if matches!(b.get(k), Some(b'.' | b'e' | b'E')) {
                return None;
            }
            self.i += k;
            Some(if neg { -v } else { v })
        }

        /// The rest of a string whose opening quote was consumed, as a slice of the input
        /// when it has no escape (`Err(())` when it has one: the cursor is left at its start).
        #[inline(always)]
        fn plain(&mut self) -> Option<Result<&'a str, ()>> {
            let start = self.i;
            let mut i = start;
            loop {
                let end = find_special(self.b, i)?;
                match self.b[end] {
                    b'"' => {
                        self.i = end + 1;
                        return Some(Ok(scanned_str(&self.b[start..end])));
                    }
                    b'\\' => return Some(Err(())),
                    0x80.. => i = end + utf8_char(self.b, end)?,
                    _ => return None,
                }
            }
        }

        /// The rest of a string whose opening quote was consumed.
        #[inline(always)]
        fn string(&mut self) -> Option<Text> {
            match self.plain()? {
                Ok(s) => Some(Text::from(s)),
                Err(()) => self.string_escaped(false),
            }
        }

        /// The rest of a string whose opening quote was consumed, if `field` is in the
        /// projection; otherwise it is checked and skipped, and the field left empty.
        #[inline(always)]
        fn field(&mut self, field: Projection) -> Option<Text> {
            if self.projection.contains(field) {
                return self.string();
            }
            self.skip_string().map(|()| Text::EMPTY)
        }

        /// Checks and skips the rest of a string whose opening quote was consumed, as
        /// [`Self::string`] would read it (the same escapes accepted), without decoding it.
        #[inline(always)]
        fn skip_string(&mut self) -> Option<()> {
            let mut i = self.i;
            loop {
                let k = find_special(self.b, i)?;
                match self.b[k] {
                    b'"' => {
                        self.i = k + 1;
                        return Some(());
                    }
                    b'\\' => match self.b.get(k + 1)? {
                        b'"' | b'\\' | b'/' | b'n' | b't' | b'r' | b'b' | b'f' => i = k + 2,
                        _ => return None,
                    },
                    0x80.. => i = k + utf8_char(self.b, k)?,
                    _ => return None,
                }
            }
        }

        /// Like [`Self::field`], for a string that takes few distinct values.
        #[inline(always)]
        fn interned_field(&mut self, field: Projection) -> Option<Text> {
            if self.projection.contains(field) {
                return self.interned();
            }
            self.field(field)
        }

        /// Like [`Self::string`], for a string that takes few distinct values (one with
        /// escapes comes from the per-thread cache).
        #[inline(always)]
        fn interned(&mut self) -> Option<Text> {
            match self.plain()? {
                Ok(s) => Some(Text::from(s)),
                Err(()) => self.string_escaped(true),
            }
        }

        /// A string with escapes (`interned`: from the cache); `\u` escapes are left to the
        /// general parser.
        ///
        /// It decodes 16 bytes at a time: each block is copied whole, and the output grows
        /// by the bytes before the block's first [`special`] one (the rest is overwritten).
        #[inline(never)]
        fn string_escaped(&mut self, interned: bool) -> Option<Text> {
            SCRATCH.with_borrow_mut(|buf| {
                let b = self.b;
                let (mut i, mut o) = (self.i, 0);
                loop {
                    // Room for a block and a character after it.
                    if buf.len() < o + 32 {
                        buf.resize((o + 32).max(2 * buf.len()), 0);
                    }
                    let rest = &b[i..];
                    let mut padded = [0u8; 16];
                    let block = match rest.first_chunk::<16>() {
                        Some(block) => block,
                        // The end of the input: zeros after it, which stop the scan.
                        None => {
                            padded[..rest.len()].copy_from_slice(rest);
                            &padded
                        }
                    };
                    let mask = special_mask(block);
                    buf[o..o + 16].copy_from_slice(block);
                    if mask == 0 {
                        i += 16;
                        o += 16;
                        continue;
                    }
                    let k = mask.trailing_zeros() as usize;
                    i += k;
                    o += k;
                    let unescaped = match *b.get(i)? {
                        b'"' => {
                            self.i = i + 1;
                            let s = scanned_str(&buf[..o]);
                            return Some(if interned { intern(s) } else { Text::from(s) });
                        }
                        b'\\' => match b.get(i + 1)? {
                            b'"' => b'"',
                            b'\\' => b'\\',
                            b'/' => b'/',
                            b'n' => b'\n',
                            b't' => b'\t',
                            b'r' => b'\r',
                            b'b' => 0x08,
                            b'f' => 0x0c,
                            _ => return None,
                        },
                        0x80.. => {
                            let n = utf8_char(b, i)?;
                            buf[o..o + n].copy_from_slice(&b[i..i + n]);
                            i += n;
                            o += n;
                            continue;
                        }
                        _ => return None,
                    };
                    buf[o] = unescaped;
                    o += 1;
                    i += 2;
                }
            })
        }

        /// The rest of a `YYYY-MM-DD HH:MM:SS.mmm"` timestamp whose opening quote was consumed.
        #[inline(always)]
        fn ts(&mut self) -> Option<i64> {
            let b = self.b.get(self.i..self.i + 24)?;
            if b[23] != b'"' {
                return None;
            }
            let v = timestamp(&b[..23])?;
            self.i += 24;
            Some(v)
        }

        #[inline(always)]
        fn bid(&mut self) -> Option<Bid> {
            self.lit(b"{\"auction\":")?;
            let auction = self.int()?;
            self.lit(b",\"bidder\":")?;
            let bidder = self.int()?;
            self.lit(b",\"price\":")?;
            let price = self.int()?;
            self.lit(b",\"channel\":\"")?;
            let channel = self.interned_field(Projection::BID_CHANNEL)?;
            self.lit(b",\"url\":\"")?;
            let url = self.interned_field(Projection::BID_URL)?;
            self.lit(b",\"dateTime\":\"")?;
            let date_time = self.ts()?;
            self.lit(b",\"extra\":\"")?;
            let extra = self.field(Projection::BID_EXTRA)?;
            self.lit(b"}")?;
            Some(Bid {
                auction,
                bidder,
                price,
                channel,
                url,
                date_time,
                extra,
            })
        }

        #[inline(never)]
        fn auction(&mut self) -> Option<Auction> {
            self.lit(b"{\"id\":")?;
            let id = self.int()?;
            self.lit(b",\"itemName\":\"")?;
            let item_name = self.field(Projection::AUCTION_ITEM_NAME)?;
            self.lit(b",\"description\":\"")?;
            let description = self.field(Projection::AUCTION_DESCRIPTION)?;
            self.lit(b",\"initialBid\":")?;
            let initial_bid = self.int()?;
            self.lit(b",\"reserve\":")?;
            let reserve = self.int()?;
            self.lit(b",\"dateTime\":\"")?;
            let date_time = self.ts()?;
            self.lit(b",\"expires\":\"")?;
            let expires = self.ts()?;
            self.lit(b",\"seller\":")?;
            let seller = self.int()?;
            self.lit(b",\"category\":")?;
            let category = self.int()?;
            self.lit(b",\"extra\":\"")?;
            let extra = self.field(Projection::AUCTION_EXTRA)?;
            self.lit(b"}")?;
            Some(Auction {
                id,
                item_name,
                description,
                initial_bid,
                reserve,
                date_time,
                expires,
                seller,
                category,
                extra,
            })
        }

        #[inline(never)]
        fn person(&mut self) -> Option<Person> {
            self.lit(b"{\"id\":")?;
            let id = self.int()?;
            self.lit(b",\"name\":\"")?;
            let name = self.interned_field(Projection::PERSON_NAME)?;
            self.lit(b",\"emailAddress\":\"")?;
            let email_address = self.field(Projection::PERSON_EMAIL)?;
            self.lit(b",\"creditCard\":\"")?;
            let credit_card = self.field(Projection::PERSON_CREDIT_CARD)?;
            self.lit(b",\"city\":\"")?;
            let city = self.interned_field(Projection::PERSON_CITY)?;
            self.lit(b",\"state\":\"")?;
            let state = self.interned_field(Projection::PERSON_STATE)?;
            self.lit(b",\"dateTime\":\"")?;
            let date_time = self.ts()?;
            self.lit(b",\"extra\":\"")?;
            let extra = self.field(Projection::PERSON_EXTRA)?;
            self.lit(b"}")?;
            Some(Person {
                id,
                name,
                email_address,
                credit_card,
                city,
                state,
                date_time,
                extra,
            })
        }
    }

    /// The event of a line in the exact writer layout, or `None`.
    #[inline]
    pub(super) fn parse(line: &[u8], projection: Projection) -> Option<Event> {
        let body_len = line
            .iter()
            .rposition(|&c| !matches!(c, b' ' | b'\n' | b'\r' | b'\t'))
            .map_or(0, |last| last + 1);
        let body = &line[..body_len];
        match parse_prefix(body, projection)? {
            // Trailing whitespace (a line end) was cut off; anything else after the object
            // is not allowed.
            (event, n) if n == body.len() => Some(event),
            _ => None,
        }
    }

    /// The event at the start of `text` in the exact writer layout, and the length of its
    /// object, or `None`. It never reads past a control character, so never past the end of
    /// the line it starts. Every byte it reads is checked: ASCII outside strings, UTF-8 in
    /// them.
    #[inline]
    pub(super) fn parse_prefix(text: &[u8], projection: Projection) -> Option<(Event, usize)> {
        let mut c = Cursor {
            b: text,
            i: 0,
            projection,
        };
        c.lit(b"{\"event_type\":")?;
        let event = match c.b.get(c.i)? {
            b'2' => {
                c.lit(b"2,\"person\":null,\"auction\":null,\"bid\":")?;
                let bid = c.bid()?;
                c.lit(b"}")?;
                Event::Bid(bid)
            }
            b'1' => {
                c.lit(b"1,\"person\":null,\"auction\":")?;
                let auction = c.auction()?;
                c.lit(b",\"bid\":null}")?;
                Event::Auction(Box::new(auction))
            }
            b'0' => {
                c.lit(b"0,\"person\":")?;
                let person = c.person()?;
                c.lit(b",\"auction\":null,\"bid\":null}")?;
                Event::Person(Box::new(person))
            }
            _ => return None,
        };
        Some((event, c.i))
    }
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
    fn word_digits_agree_with_a_digit_loop() {
        let suffixes: [&[u8]; 6] = [
            b",\"bidder\"",
            b"}",
            b".5xxxxxxx",
            b"\"aaaaaaaa",
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
            b"/:;<=>?@@@@",
        ];
        let mut numbers: Vec<u64> = (0..2000).collect();
        numbers.extend((0..2000u64).map(|k| k.wrapping_mul(2_654_435_761) % 100_000_000));
        for n in numbers {
            for suffix in suffixes {
                let mut text = n.to_string().into_bytes();
                text.extend_from_slice(suffix);
                text.resize(text.len().max(8), b'x');
                let word = u64::from_le_bytes(*text.first_chunk::<8>().unwrap());
                let digits = text.iter().take_while(|c| c.is_ascii_digit()).count();
                let want = (1..8).contains(&digits).then_some((n as i64, digits));
                assert_eq!(
                    fast::swar_digits(word),
                    want,
                    "{}",
                    String::from_utf8_lossy(&text)
                );
            }
        }
    }

    #[test]
    fn fast_timestamps_agree() {
        let mut checked = 0;
        for base in [
            0i64,
            951_782_400_000,
            1_704_067_200_000,
            253_000_000_000_000,
        ] {
            for step in 0..3000i64 {
                let ms = base + step * 59_999_999 - 86_400_000;
                let good = format_timestamp_string(ms).into_bytes();
                assert_eq!(fast::timestamp(&good), Some(ms));
                // Damage each byte: the fast path and the full check still agree.
                if step % 100 == 0 {
                    for at in 0..good.len() {
                        for c in [b'0', b'9', b'3', b'x', b' ', b':'] {
                            let mut bad = good.clone();
                            bad[at] = c;
                            assert_eq!(fast::timestamp(&bad), parse_ts_bytes(&bad), "{bad:?}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 1000);
        assert_eq!(fast::timestamp(b"2023-02-29 00:00:00.000"), None);
        assert_eq!(
            fast::timestamp(b"2024-01-01T00:00:01.5Z"),
            Some(1_704_067_201_500)
        );
    }

    #[test]
    fn fast_path_agrees_with_the_general_parser() {
        use crate::generator::{GeneratorConfig, NexmarkGenerator};
        let cfg = GeneratorConfig {
            seed: 3,
            events: Some(60),
            ..Default::default()
        };
        let events: Vec<Event> = NexmarkGenerator::new(&cfg, 0).unwrap().collect();
        for (k, e) in events.iter().enumerate() {
            let mut line = Vec::new();
            write_event(e, &mut line);
            assert_eq!(fast::parse(&line, Projection::ALL).as_ref(), Some(e));
            assert_eq!(parse_general(&line).as_ref(), Ok(e));
            // Each projection keeps exactly its fields.
            for bit in 0..12 {
                let projection = Projection(1 << bit);
                let mut want = e.clone();
                projection.apply(&mut want);
                assert_eq!(parse_event_projected(&line, projection), Ok(want));
            }
            // Damage one line of each kind everywhere: when the fast path still takes it, it
            // must agree with the general parser.
            if ![0, 1, 4].contains(&k) {
                continue;
            }
            let bytes = [
                b'\\', b'"', b'0', b'9', b'-', b'.', b'e', b' ', b'a', b'u', b'}', 1, 0xc3, 0xff,
            ];
            for at in 0..line.len() {
                for b in bytes {
                    let mut replaced = line.clone();
                    replaced[at] = b;
                    let mut inserted = line.clone();
                    inserted.insert(at, b);
                    for damaged in [replaced, inserted] {
                        if let Some(fast) = fast::parse(&damaged, Projection::ALL) {
                            assert_eq!(
                                parse_general(&damaged).as_ref(),
                                Ok(&fast),
                                "{}",
                                String::from_utf8_lossy(&damaged)
                            );
                        }
                        // A projection accepts and rejects the same lines.
                        let full = parse_event(&damaged);
                        let none = parse_event_projected(&damaged, Projection::NONE);
                        assert_eq!(
                            full.map(|mut e| {
                                Projection::NONE.apply(&mut e);
                                e
                            }),
                            none,
                            "{}",
                            String::from_utf8_lossy(&damaged)
                        );
                    }
                }
            }
        }
    }

    /// Strings of any characters (1 to 4 bytes of UTF-8) and escapes, at any offset from a
    /// 16-byte block, in a bid.
    fn bid_with(channel: &str, extra: &str) -> Event {
        Event::Bid(Bid {
            auction: 7,
            bidder: 8,
            price: 9,
            channel: Text::from(channel),
            url: Text::from("u"),
            date_time: 1_700_000_000_000,
            extra: Text::from(extra),
        })
    }

    proptest::proptest! {
        #[test]
        fn fast_path_reads_any_characters(
            channel in "[a\\\"é€𝄞/\u{7f}]{0,40}",
            extra in "[ -~é€𝄞\n\t\u{8}\u{c}\r\u{7ff}\u{800}\u{ffff}\u{10000}\u{10ffff}]{0,80}",
        ) {
            let event = bid_with(&channel, &extra);
            let mut line = Vec::new();
            write_event(&event, &mut line);
            proptest::prop_assert_eq!(fast::parse(&line, Projection::ALL), Some(event.clone()));
            line.extend_from_slice(b"\nrest");
            let (parsed, n) = parse_event_prefix(&line, Projection::ALL).expect("the fast path");
            proptest::prop_assert_eq!(parsed, event);
            proptest::prop_assert_eq!(line[n], b'\n');
        }
    }

    #[test]
    fn fast_path_rejects_what_is_not_utf8() {
        // Whole characters are taken; broken, overlong, surrogate and out-of-range sequences
        // are not, wherever they stand in a string (and then the general parser agrees).
        let good: [&[u8]; 4] = [
            b"\xc3\xa9",
            b"\xe2\x82\xac",
            b"\xf0\x9d\x84\x9e",
            b"\xdf\xbf",
        ];
        let bad: [&[u8]; 9] = [
            b"\xc3",
            b"\xe2\x82",
            b"\xf0\x9d\x84",
            b"\xc0\x80",
            b"\xe0\x80\x80",
            b"\xed\xa0\x80",
            b"\xf4\x90\x80\x80",
            b"\xf5\x80\x80\x80",
            b"\x80",
        ];
        let mut line = Vec::new();
        write_event(
            &bid_with("Google", "abc\\def\"ghijklmnopqrstuvwxyz0123456789"),
            &mut line,
        );
        // Where the contents of the two strings start, and their lengths.
        let strings: Vec<(usize, usize)> = [&b"\"Google\""[..], b"\"abc"]
            .iter()
            .map(|open| {
                let start = 1 + line.windows(open.len()).position(|w| w == *open).unwrap();
                let len = line[start..].iter().position(|&c| c == b'"').unwrap();
                (start, len)
            })
            .collect();
        for &(start, len) in &strings {
            // (Not inside an escape.)
            for at in (start..=start + len).filter(|&at| line[at - 1] != b'\\') {
                for (sequences, ok) in [(&good[..], true), (&bad[..], false)] {
                    for seq in sequences {
                        let mut damaged = line.clone();
                        damaged.splice(at..at, seq.iter().copied());
                        let fast = fast::parse(&damaged, Projection::ALL);
                        let general = parse_general(&damaged).ok();
                        assert_eq!(fast.is_some(), ok, "{}", String::from_utf8_lossy(&damaged));
                        assert_eq!(general.is_some(), ok);
                        assert_eq!(fast, general);
                        // Skipped strings are checked the same way.
                        let none = parse_event_projected(&damaged, Projection::NONE);
                        assert_eq!(none.is_ok(), ok);
                    }
                }
            }
        }
    }

    #[test]
    fn escapes_strings() {
        let mut out = Vec::new();
        write_str("a\"b\\c\n\u{1}é", &mut out);
        assert_eq!(out, b"\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"");
        let mut p = Parser { b: &out, i: 0 };
        assert_eq!(p.string().unwrap(), "a\"b\\c\n\u{1}é");
    }
}
