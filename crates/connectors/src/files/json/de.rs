//! A `serde` deserializer of JSON text, written for speed on JSON lines and checked against
//! `serde_json`, whose data model, accepted texts and values it follows exactly (see the
//! [parent module](super) for the one documented difference: floats are correctly rounded).
//!
//! It reads bytes, not a `&str`: bytes outside strings must be JSON's ASCII anyway, and a
//! string is checked to be UTF-8 only when its scan saw a byte of 128 or more, so ASCII text
//! is never validated twice. What makes it fast, all general:
//!
//! * a string's end (a `"`, `\` or control character) is found 8 bytes at a time (SWAR, in
//!   safe code), and a string without escapes is handed to the visitor borrowed from the
//!   input: keys of derived structs are matched by `visit_str` without any allocation;
//! * integers are accumulated in a `u64` with overflow checks; other numbers are parsed by
//!   `str::parse::<f64>` on their span (correctly rounded);
//! * whitespace costs one compare when there is none;
//! * skipped values (`deserialize_ignored_any`: unknown fields of a struct) are checked to be
//!   valid JSON without building anything and without recursion (a stack of the open
//!   brackets), so a skipped value may nest arbitrarily deep, as in `serde_json`; values that
//!   are built may nest 127 levels, `serde_json`'s recursion limit.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Expected, Unexpected, Visitor};

/// `serde_json`'s recursion limit: a value built may nest one level less.
const RECURSION_LIMIT: u8 = 128;

/// A newtype-struct name that asks this deserializer for a number's text as it stands in the
/// line (a borrowed `str`), so that an exact decimal is read without going through a float;
/// anything other than a number is deserialized as `deserialize_any` would. Other
/// deserializers (`serde_json`) treat it as any newtype struct.
pub const NUMBER_TEXT: &str = "$spate::NumberText";

/// Why a text was refused, with the byte offset where it was noticed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    msg: Box<str>,
    /// A byte offset into the text; `usize::MAX` until it is known.
    at: usize,
}

impl Error {
    /// The reason, without the position.
    pub fn reason(&self) -> &str {
        &self.msg
    }

    /// The 1-based byte column where the error was noticed.
    pub fn column(&self) -> usize {
        self.at.saturating_add(1)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at == usize::MAX {
            f.write_str(&self.msg)
        } else {
            write!(f, "{} at column {}", self.msg, self.column())
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    #[cold]
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error {
            msg: msg.to_string().into(),
            at: usize::MAX,
        }
    }
}

type Result<T> = std::result::Result<T, Error>;

/// Decodes one JSON value from all of `input` (whitespace around it is allowed, anything else
/// after it is an error).
pub fn from_slice<'de, T: Deserialize<'de>>(input: &'de [u8]) -> Result<T> {
    let mut de = Deserializer::new(input);
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Decodes one JSON value from the start of `text`, which must end its line: returns the
/// value and the number of bytes up to and including the line's `\n`, or `None` (see
/// [`decode_json_prefix`](super::decode_json_prefix)).
pub fn from_line_prefix<'de, T: Deserialize<'de>>(text: &'de [u8]) -> Option<(T, usize)> {
    let mut de = Deserializer::new(text);
    de.one_line = true;
    let value = T::deserialize(&mut de).ok()?;
    // In one-line mode a `\n` is no whitespace: it stops the skip.
    match de.peek_ws() {
        Some(b'\n') => Some((value, de.pos + 1)),
        _ => None,
    }
}

/// The deserializer: a position in a byte slice.
pub struct Deserializer<'de> {
    input: &'de [u8],
    pos: usize,
    /// Levels of nesting left before the recursion limit.
    depth: u8,
    /// Whether `\n` is refused as whitespace (the value must end on its line).
    one_line: bool,
    /// The unescaped text of a string with escapes.
    scratch: Vec<u8>,
    /// The open brackets of a value being skipped.
    frames: Vec<u8>,
}

/// A string: borrowed from the input when it has no escapes, else unescaped into scratch.
enum Text<'de, 's> {
    Borrowed(&'de [u8]),
    Copied(&'s [u8]),
}

/// A parsed number, as `serde_json` visits it.
#[derive(Clone, Copy)]
enum Number {
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Number {
    fn visit<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Number::U64(n) => visitor.visit_u64(n),
            Number::I64(n) => visitor.visit_i64(n),
            Number::F64(n) => visitor.visit_f64(n),
        }
    }

    fn unexpected(&self) -> Unexpected<'static> {
        match *self {
            Number::U64(n) => Unexpected::Unsigned(n),
            Number::I64(n) => Unexpected::Signed(n),
            Number::F64(n) => Unexpected::Float(n),
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The index of the first `"`, `\` or control character at or after `from` (or the input's
/// length), and whether a byte of 128 or more may lie before it (then the span must be checked
/// to be UTF-8): 16 bytes at a time with SSE2 (part of the x86-64 baseline).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn scan_string(input: &[u8], from: usize) -> (usize, bool) {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let mut at = from;
    let mut high = 0;
    while let Some(chunk) = input.get(at..at + 16) {
        // SAFETY: SSE2 is part of the x86-64 baseline, so these intrinsics are always
        // available; the load reads the 16 bytes of `chunk`, a slice of exactly 16 bytes,
        // and `_mm_loadu_si128` has no alignment requirement.
        let (found, high_bits) = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // `v <= 0x1f` unsigned: the minimum of the two is `v`.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            let found = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control));
            (found, _mm_movemask_epi8(v))
        };
        if found != 0 {
            let k = found.trailing_zeros();
            high |= high_bits & ((1 << k) - 1);
            return (at + k as usize, high != 0);
        }
        high |= high_bits;
        at += 16;
    }
    let (end, tail_high) = scan_string_portable(input, at);
    (end, high != 0 || tail_high)
}

/// [`scan_string`] in portable code: 8 bytes at a time (SWAR).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn scan_string(input: &[u8], from: usize) -> (usize, bool) {
    scan_string_portable(input, from)
}

/// The index of the first `"`, `\` or control character at or after `from` (or the input's
/// length), and whether a byte of 128 or more may lie before it (then the span must be checked
/// to be UTF-8).
#[inline(always)]
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(super) fn scan_string_portable(input: &[u8], from: usize) -> (usize, bool) {
    let mut high = 0u64;
    let mut at = from;
    let rest = input.get(from..).unwrap_or_default();
    let mut chunks = rest.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let v = u64::from_le_bytes(word);
        let quote = v ^ (ONES * u64::from(b'"'));
        let backslash = v ^ (ONES * u64::from(b'\\'));
        // The classic zero-byte test: exact for the lowest flagged byte (a borrow only carries
        // upwards from a byte that is flagged itself).
        let found = ((quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (v.wrapping_sub(ONES * 0x20) & !v))
            & HIGH;
        high |= v & HIGH;
        if found != 0 {
            return (at + (found.trailing_zeros() / 8) as usize, high != 0);
        }
        at += 8;
    }
    for &b in chunks.remainder() {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return (at, high != 0);
        }
        high |= u64::from(b & 0x80);
        at += 1;
    }
    (at, high != 0)
}

/// Checks that `bytes` (a raw span of a string, cut at ASCII bytes) are UTF-8.
#[inline]
fn check_utf8(bytes: &[u8], at: usize) -> Result<()> {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(_) => Ok(()),
        Err(_) => Err(Error {
            msg: "invalid UTF-8 in a string".into(),
            at,
        }),
    }
}

/// Appends a code point, or a lone surrogate as WTF-8 (only in byte strings).
fn push_wtf8(n: u32, out: &mut Vec<u8>) {
    if let Some(c) = char::from_u32(n) {
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    } else {
        // A surrogate (U+D800..U+DFFF): three bytes, as UTF-8 would encode it.
        out.extend_from_slice(&[
            0xE0 | (n >> 12) as u8,
            0x80 | ((n >> 6) & 0x3F) as u8,
            0x80 | (n & 0x3F) as u8,
        ]);
    }
}

thread_local! {
    /// Each thread's unescaping buffer, lent to one deserializer at a time.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
    /// Each thread's stack of open brackets for skipping, lent likewise.
    static FRAMES: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// The most bytes of a buffer handed back to its thread (a huge one is freed).
const KEEP: usize = 1 << 16;

impl Drop for Deserializer<'_> {
    fn drop(&mut self) {
        let mut scratch = std::mem::take(&mut self.scratch);
        if scratch.capacity() <= KEEP {
            scratch.clear();
            let _ = SCRATCH.try_with(|cell| cell.set(scratch));
        }
        let mut frames = std::mem::take(&mut self.frames);
        if frames.capacity() <= KEEP {
            frames.clear();
            let _ = FRAMES.try_with(|cell| cell.set(frames));
        }
    }
}

impl<'de> Deserializer<'de> {
    /// A deserializer at the start of `input`.
    pub fn new(input: &'de [u8]) -> Self {
        Deserializer {
            input,
            pos: 0,
            depth: RECURSION_LIMIT,
            one_line: false,
            // The thread's buffers, grown by earlier texts: no allocation per text.
            scratch: SCRATCH.try_with(Cell::take).unwrap_or_default(),
            frames: FRAMES.try_with(Cell::take).unwrap_or_default(),
        }
    }

    /// Checks that only whitespace is left.
    pub fn end(&mut self) -> Result<()> {
        match self.peek_ws() {
            None => Ok(()),
            Some(_) => Err(self.error("trailing characters")),
        }
    }

    #[cold]
    fn error(&self, msg: &str) -> Error {
        Error {
            msg: msg.into(),
            at: self.pos,
        }
    }

    #[cold]
    fn fix(&self, mut err: Error) -> Error {
        if err.at == usize::MAX {
            err.at = self.pos;
        }
        err
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    /// Skips whitespace and returns the next byte, without consuming it.
    #[inline(always)]
    fn peek_ws(&mut self) -> Option<u8> {
        match self.input.get(self.pos) {
            Some(&b) if b > b' ' => Some(b),
            _ => self.peek_ws_slow(),
        }
    }

    fn peek_ws_slow(&mut self) -> Option<u8> {
        while let Some(&b) = self.input.get(self.pos) {
            match b {
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'\n' if !self.one_line => self.pos += 1,
                _ => return Some(b),
            }
        }
        None
    }

    #[inline]
    fn eof_value(&self) -> Error {
        self.error("EOF while parsing a value")
    }

    /// Consumes the rest of a literal whose first byte is consumed.
    #[inline]
    fn ident(&mut self, rest: &[u8]) -> Result<()> {
        let end = self.pos + rest.len();
        if self.input.get(self.pos..end) == Some(rest) {
            self.pos = end;
            Ok(())
        } else {
            Err(self.error("expected ident"))
        }
    }

    /// Parses a string whose opening quote is consumed. With `strict`, `\u` escapes must give
    /// characters (surrogates paired); without, lone surrogates become WTF-8 (byte strings).
    #[inline]
    fn parse_text<'s>(&'s mut self, strict: bool) -> Result<Text<'de, 's>> {
        let input = self.input;
        let start = self.pos;
        let (end, high) = scan_string(input, start);
        match input.get(end) {
            Some(b'"') => {
                let span = &input[start..end];
                if high {
                    check_utf8(span, start)?;
                }
                self.pos = end + 1;
                Ok(Text::Borrowed(span))
            }
            _ => {
                self.scratch.clear();
                self.parse_escaped(start, strict)?;
                Ok(Text::Copied(&self.scratch))
            }
        }
    }

    /// Parses a string from `start` into `scratch` (the slow path: escapes, or an error).
    #[inline(never)]
    fn parse_escaped(&mut self, mut start: usize, strict: bool) -> Result<()> {
        let input = self.input;
        loop {
            let (end, high) = scan_string(input, start);
            let span = &input[start..end];
            if high {
                check_utf8(span, start)?;
            }
            self.scratch.extend_from_slice(span);
            self.pos = end;
            match input.get(end) {
                Some(b'"') => {
                    self.pos = end + 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos = end + 1;
                    self.unescape(strict)?;
                    start = self.pos;
                }
                Some(_) => return Err(self.error("control character found while parsing a string")),
                None => return Err(self.error("EOF while parsing a string")),
            }
        }
    }

    /// Decodes the escape after a `\` into `scratch`.
    fn unescape(&mut self, strict: bool) -> Result<()> {
        let Some(b) = self.peek() else {
            return Err(self.error("EOF while parsing a string"));
        };
        self.pos += 1;
        let plain = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => return self.unescape_unicode(strict),
            _ => return Err(self.error("invalid escape")),
        };
        self.scratch.push(plain);
        Ok(())
    }

    /// Four hex digits.
    #[inline]
    fn hex4(&mut self) -> Result<u32> {
        let Some(digits) = self.input.get(self.pos..self.pos + 4) else {
            self.pos = self.input.len();
            return Err(self.error("EOF while parsing a string"));
        };
        let mut n = 0u32;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.error("invalid escape")),
            };
            n = n * 16 + u32::from(v);
        }
        self.pos += 4;
        Ok(n)
    }

    /// A `\u` escape, after the `u`: as `serde_json`'s `parse_unicode_escape`.
    fn unescape_unicode(&mut self, strict: bool) -> Result<()> {
        let mut n = self.hex4()?;
        if strict && (0xDC00..=0xDFFF).contains(&n) {
            return Err(self.error("lone leading surrogate in hex escape"));
        }
        loop {
            if !(0xD800..=0xDBFF).contains(&n) {
                push_wtf8(n, &mut self.scratch);
                return Ok(());
            }
            let lead = n;
            if self.peek() != Some(b'\\') {
                if strict {
                    return Err(self.error("unexpected end of hex escape"));
                }
                push_wtf8(lead, &mut self.scratch);
                return Ok(());
            }
            self.pos += 1;
            if self.peek() != Some(b'u') {
                if strict {
                    return Err(self.error("unexpected end of hex escape"));
                }
                push_wtf8(lead, &mut self.scratch);
                return self.unescape(strict);
            }
            self.pos += 1;
            let trail = self.hex4()?;
            if !(0xDC00..=0xDFFF).contains(&trail) {
                if strict {
                    return Err(self.error("lone leading surrogate in hex escape"));
                }
                push_wtf8(lead, &mut self.scratch);
                n = trail;
                continue;
            }
            let c = (((lead - 0xD800) << 10) | (trail - 0xDC00)) + 0x1_0000;
            push_wtf8(c, &mut self.scratch);
            return Ok(());
        }
    }

    /// Parses a string (opening quote consumed) and hands it to `visitor` as a `str`.
    #[inline]
    #[allow(unsafe_code)]
    fn visit_text<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        match self.parse_text(true)? {
            // SAFETY: `parse_text` returns bytes that are ASCII (its scan saw no byte of 128
            // or more) or were checked by `check_utf8`, cut at ASCII bytes (quotes and
            // backslashes), so they are whole UTF-8.
            Text::Borrowed(b) => {
                visitor.visit_borrowed_str(unsafe { std::str::from_utf8_unchecked(b) })
            }
            // SAFETY: strict unescaping appends checked spans (as above) and the UTF-8 of
            // `char`s only, so the scratch is UTF-8.
            Text::Copied(b) => visitor.visit_str(unsafe { std::str::from_utf8_unchecked(b) }),
        }
    }

    /// Skips a string whose opening quote is consumed, checking it as `serde_json` does:
    /// escapes must be valid (a `\u` escape needs four hex digits; surrogates need no pair).
    #[inline]
    fn skip_text(&mut self) -> Result<()> {
        let input = self.input;
        loop {
            let start = self.pos;
            let (end, high) = scan_string(input, start);
            if high {
                check_utf8(&input[start..end], start)?;
            }
            self.pos = end;
            match input.get(end) {
                Some(b'"') => {
                    self.pos = end + 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos = end + 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1;
                        }
                        Some(b'u') => {
                            self.pos += 1;
                            self.hex4()?;
                        }
                        Some(_) => return Err(self.error("invalid escape")),
                        None => return Err(self.error("EOF while parsing a string")),
                    }
                }
                Some(_) => return Err(self.error("control character found while parsing a string")),
                None => return Err(self.error("EOF while parsing a string")),
            }
        }
    }

    /// Consumes digits and returns how many.
    #[inline(always)]
    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// Consumes a fraction and exponent, if any, after the integer part; returns whether there
    /// was one.
    #[inline]
    fn fraction_exponent(&mut self) -> Result<bool> {
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.error("invalid number"));
            }
            float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("invalid number"));
            }
            float = true;
        }
        Ok(float)
    }

    /// Parses a number at the current byte (a `-` or a digit), as `serde_json` does: a
    /// non-negative integer is a `u64`, a negative one an `i64`, anything else (a fraction, an
    /// exponent, `-0`, an integer out of range) an `f64`.
    #[inline]
    fn parse_number(&mut self) -> Result<Number> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let mut n: u64 = 0;
        let mut overflow = false;
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.error("invalid number"));
                }
            }
            Some(b'1'..=b'9') => {
                let first = self.pos;
                // Up to 19 digits cannot overflow a `u64`: no check per digit.
                while let Some(d @ b'0'..=b'9') = self.peek() {
                    n = n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                    self.pos += 1;
                }
                if self.pos - first > 19 {
                    n = 0;
                    for &d in &self.input[first..self.pos] {
                        match n
                            .checked_mul(10)
                            .and_then(|m| m.checked_add(u64::from(d - b'0')))
                        {
                            Some(m) => n = m,
                            None => {
                                overflow = true;
                                break;
                            }
                        }
                    }
                }
            }
            Some(_) => {
                self.pos += 1;
                return Err(self.error("invalid number"));
            }
            None => return Err(self.eof_value()),
        }
        let float = self.fraction_exponent()?;
        if !float && !overflow {
            if !negative {
                return Ok(Number::U64(n));
            }
            let neg = (n as i64).wrapping_neg();
            // `-0` and integers below `i64::MIN` are floats, as in `serde_json`.
            if neg < 0 {
                return Ok(Number::I64(neg));
            }
        }
        self.parse_float(start)
    }

    /// Parses the number spanning `start..pos` (known to be JSON's number syntax) as an `f64`.
    #[cold]
    fn parse_float(&self, start: usize) -> Result<Number> {
        let span = std::str::from_utf8(&self.input[start..self.pos]).unwrap_or("x");
        match span.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Number::F64(f)),
            _ => Err(Error {
                msg: "number out of range".into(),
                at: start,
            }),
        }
    }

    /// Skips a number at the current byte, checking its syntax only (as `serde_json` does).
    #[inline]
    fn skip_number(&mut self) -> Result<()> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.error("invalid number"));
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            Some(_) => return Err(self.error("invalid number")),
            None => return Err(self.eof_value()),
        }
        self.fraction_exponent().map(|_| ())
    }

    /// The error for a value of the wrong type at the current position, as `serde_json`
    /// gives it (a malformed value gives its own error instead).
    #[cold]
    fn invalid_type(&mut self, exp: &dyn Expected) -> Error {
        let err = match self.peek_ws() {
            Some(b'n') => {
                self.pos += 1;
                match self.ident(b"ull") {
                    Ok(()) => de::Error::invalid_type(Unexpected::Unit, exp),
                    Err(e) => return e,
                }
            }
            Some(b't') => {
                self.pos += 1;
                match self.ident(b"rue") {
                    Ok(()) => de::Error::invalid_type(Unexpected::Bool(true), exp),
                    Err(e) => return e,
                }
            }
            Some(b'f') => {
                self.pos += 1;
                match self.ident(b"alse") {
                    Ok(()) => de::Error::invalid_type(Unexpected::Bool(false), exp),
                    Err(e) => return e,
                }
            }
            Some(b'-' | b'0'..=b'9') => match self.parse_number() {
                Ok(n) => de::Error::invalid_type(n.unexpected(), exp),
                Err(e) => return e,
            },
            Some(b'"') => {
                self.pos += 1;
                match self.parse_text(true) {
                    Ok(Text::Borrowed(s) | Text::Copied(s)) => {
                        let s = String::from_utf8_lossy(s);
                        de::Error::invalid_type(Unexpected::Str(&s), exp)
                    }
                    Err(e) => return e,
                }
            }
            Some(b'[') => de::Error::invalid_type(Unexpected::Seq, exp),
            Some(b'{') => de::Error::invalid_type(Unexpected::Map, exp),
            Some(_) => self.error("expected value"),
            None => self.eof_value(),
        };
        self.fix(err)
    }

    /// Enters a nested array or object (after its bracket): fails past the recursion limit.
    #[inline(always)]
    fn enter(&mut self) -> Result<()> {
        if self.depth == 1 {
            return Err(self.error("recursion limit exceeded"));
        }
        self.depth -= 1;
        self.pos += 1;
        Ok(())
    }

    /// After the visitor of an array: the closing bracket must follow.
    fn end_seq(&mut self) -> Result<()> {
        match self.peek_ws() {
            Some(b']') => {
                self.pos += 1;
                Ok(())
            }
            Some(b',') => {
                self.pos += 1;
                match self.peek_ws() {
                    Some(b']') => Err(self.error("trailing comma")),
                    _ => Err(self.error("trailing characters")),
                }
            }
            Some(_) => Err(self.error("trailing characters")),
            None => Err(self.error("EOF while parsing a list")),
        }
    }

    /// After the visitor of an object: the closing brace must follow.
    fn end_map(&mut self) -> Result<()> {
        match self.peek_ws() {
            Some(b'}') => {
                self.pos += 1;
                Ok(())
            }
            Some(b',') => Err(self.error("trailing comma")),
            Some(_) => Err(self.error("trailing characters")),
            None => Err(self.error("EOF while parsing an object")),
        }
    }

    /// Visits an array at the current `[` with `visitor`.
    #[inline]
    fn visit_array<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        self.enter()?;
        let value = visitor.visit_seq(SeqAccess {
            de: self,
            first: true,
        });
        self.depth += 1;
        let value = value?;
        self.end_seq()?;
        Ok(value)
    }

    /// Visits an object at the current `{` with `visitor`.
    #[inline]
    fn visit_object<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        self.enter()?;
        let value = visitor.visit_map(MapAccess {
            de: self,
            first: true,
        });
        self.depth += 1;
        let value = value?;
        self.end_map()?;
        Ok(value)
    }

    /// Skips one value, checking it, without recursion (`serde_json`'s `ignore_value`).
    fn skip_value(&mut self) -> Result<()> {
        let base = self.frames.len();
        let result = self.skip_value_in(base);
        self.frames.truncate(base);
        result
    }

    fn skip_value_in(&mut self, base: usize) -> Result<()> {
        loop {
            // A value.
            match self.peek_ws() {
                Some(b'"') => {
                    self.pos += 1;
                    self.skip_text()?;
                }
                Some(b'-' | b'0'..=b'9') => self.skip_number()?,
                Some(b'n') => {
                    self.pos += 1;
                    self.ident(b"ull")?;
                }
                Some(b't') => {
                    self.pos += 1;
                    self.ident(b"rue")?;
                }
                Some(b'f') => {
                    self.pos += 1;
                    self.ident(b"alse")?;
                }
                Some(open @ (b'[' | b'{')) => {
                    self.pos += 1;
                    let close = open + 2;
                    if self.peek_ws() == Some(close) {
                        self.pos += 1;
                    } else {
                        self.frames.push(open);
                        if open == b'{' {
                            self.skip_key()?;
                        }
                        continue;
                    }
                }
                Some(_) => return Err(self.error("expected value")),
                None => return Err(self.eof_value()),
            }
            // After a value: a comma and the next, or the closing bracket(s).
            loop {
                let Some(&frame) = self.frames.get(base..).and_then(<[u8]>::last) else {
                    return Ok(());
                };
                match self.peek_ws() {
                    Some(b',') => {
                        self.pos += 1;
                        if frame == b'{' {
                            if self.peek_ws() != Some(b'"') {
                                return Err(self.error("key must be a string"));
                            }
                            self.skip_key()?;
                        }
                        break;
                    }
                    Some(b) if b == frame + 2 => {
                        self.pos += 1;
                        self.frames.pop();
                    }
                    Some(_) if frame == b'[' => {
                        return Err(self.error("expected `,` or `]`"));
                    }
                    Some(_) => return Err(self.error("expected `,` or `}`")),
                    None if frame == b'[' => return Err(self.error("EOF while parsing a list")),
                    None => return Err(self.error("EOF while parsing an object")),
                }
            }
        }
    }

    /// Skips a key and its colon (at the key's quote, after whitespace).
    fn skip_key(&mut self) -> Result<()> {
        if self.peek_ws() != Some(b'"') {
            return Err(self.error("key must be a string"));
        }
        self.pos += 1;
        self.skip_text()?;
        self.colon()
    }

    #[inline(always)]
    fn colon(&mut self) -> Result<()> {
        match self.peek_ws() {
            Some(b':') => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => Err(self.error("expected `:`")),
            None => Err(self.error("EOF while parsing an object")),
        }
    }

    /// Numbers of any type: as `serde_json`, parsed and visited as `u64`, `i64` or `f64`;
    /// the visitor converts (and refuses what does not fit).
    #[inline]
    fn deserialize_number<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        let value = match self.peek_ws() {
            Some(b'-' | b'0'..=b'9') => self.parse_number()?.visit(visitor),
            Some(_) => return Err(self.invalid_type(&visitor)),
            None => return Err(self.eof_value()),
        };
        value.map_err(|e| self.fix(e))
    }

    /// The digits of a 128-bit integer (`serde_json`'s `scan_integer128`), after any `-`.
    fn integer128_span(&mut self) -> Result<()> {
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.error("invalid number"));
                }
                Ok(())
            }
            Some(b'1'..=b'9') => {
                self.digits();
                Ok(())
            }
            _ => {
                self.pos = (self.pos + 1).min(self.input.len());
                Err(self.error("invalid number"))
            }
        }
    }

    fn do_i128<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        let start = match self.peek_ws() {
            Some(_) => self.pos,
            None => return Err(self.eof_value()),
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        self.integer128_span()?;
        let span = std::str::from_utf8(&self.input[start..self.pos]).unwrap_or("x");
        match span.parse::<i128>() {
            Ok(n) => visitor.visit_i128(n).map_err(|e| self.fix(e)),
            Err(_) => Err(self.error("number out of range")),
        }
    }

    fn do_u128<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        let start = match self.peek_ws() {
            Some(b'-') => return Err(self.error("number out of range")),
            Some(_) => self.pos,
            None => return Err(self.eof_value()),
        };
        self.integer128_span()?;
        let span = std::str::from_utf8(&self.input[start..self.pos]).unwrap_or("x");
        match span.parse::<u128>() {
            Ok(n) => visitor.visit_u128(n).map_err(|e| self.fix(e)),
            Err(_) => Err(self.error("number out of range")),
        }
    }
}

macro_rules! numbers {
    ($($method:ident)*) => {
        $(
            #[inline]
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
                self.deserialize_number(visitor)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let value = match self.peek_ws() {
            Some(b'"') => {
                self.pos += 1;
                self.visit_text(visitor)
            }
            Some(b'-' | b'0'..=b'9') => self.parse_number()?.visit(visitor),
            Some(b'{') => self.visit_object(visitor),
            Some(b'[') => self.visit_array(visitor),
            Some(b'n') => {
                self.pos += 1;
                self.ident(b"ull")?;
                visitor.visit_unit()
            }
            Some(b't') => {
                self.pos += 1;
                self.ident(b"rue")?;
                visitor.visit_bool(true)
            }
            Some(b'f') => {
                self.pos += 1;
                self.ident(b"alse")?;
                visitor.visit_bool(false)
            }
            Some(_) => return Err(self.error("expected value")),
            None => return Err(self.eof_value()),
        };
        value.map_err(|e| self.fix(e))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let value = match self.peek_ws() {
            Some(b't') => {
                self.pos += 1;
                self.ident(b"rue")?;
                visitor.visit_bool(true)
            }
            Some(b'f') => {
                self.pos += 1;
                self.ident(b"alse")?;
                visitor.visit_bool(false)
            }
            Some(_) => return Err(self.invalid_type(&visitor)),
            None => return Err(self.eof_value()),
        };
        value.map_err(|e| self.fix(e))
    }

    numbers! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_f32 deserialize_f64
    }

    fn deserialize_i128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.do_i128(visitor)
    }

    fn deserialize_u128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.do_u128(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    #[inline]
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let value = match self.peek_ws() {
            Some(b'"') => {
                self.pos += 1;
                self.visit_text(visitor)
            }
            Some(_) => return Err(self.invalid_type(&visitor)),
            None => return Err(self.eof_value()),
        };
        value.map_err(|e| self.fix(e))
    }

    #[inline]
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let value = match self.peek_ws() {
            Some(b'"') => {
                self.pos += 1;
                match self.parse_text(false)? {
                    Text::Borrowed(b) => visitor.visit_borrowed_bytes(b),
                    Text::Copied(b) => visitor.visit_bytes(b),
                }
            }
            Some(b'[') => self.deserialize_seq(visitor),
            Some(_) => return Err(self.invalid_type(&visitor)),
            None => return Err(self.eof_value()),
        };
        value.map_err(|e| self.fix(e))
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    #[inline]
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek_ws() {
            Some(b'n') => {
                self.pos += 1;
                self.ident(b"ull")?;
                visitor.visit_none()
            }
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let value = match self.peek_ws() {
            Some(b'n') => {
                self.pos += 1;
                self.ident(b"ull")?;
                visitor.visit_unit()
            }
            Some(_) => return Err(self.invalid_type(&visitor)),
            None => return Err(self.eof_value()),
        };
        value.map_err(|e| self.fix(e))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        if name != NUMBER_TEXT {
            return visitor.visit_newtype_struct(self);
        }
        match self.peek_ws() {
            Some(b'-' | b'0'..=b'9') => {
                let start = self.pos;
                self.parse_number()?;
                let input = self.input;
                // A number is ASCII.
                let text = std::str::from_utf8(&input[start..self.pos])
                    .map_err(|_| self.error("invalid number"))?;
                visitor.visit_borrowed_str(text).map_err(|e| self.fix(e))
            }
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let value = match self.peek_ws() {
            Some(b'[') => self.visit_array(visitor),
            Some(_) => return Err(self.invalid_type(&visitor)),
            None => return Err(self.eof_value()),
        };
        value.map_err(|e| self.fix(e))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let value = match self.peek_ws() {
            Some(b'{') => self.visit_object(visitor),
            Some(_) => return Err(self.invalid_type(&visitor)),
            None => return Err(self.eof_value()),
        };
        value.map_err(|e| self.fix(e))
    }

    #[inline]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let value = match self.peek_ws() {
            Some(b'{') => self.visit_object(visitor),
            Some(b'[') => self.visit_array(visitor),
            Some(_) => return Err(self.invalid_type(&visitor)),
            None => return Err(self.eof_value()),
        };
        value.map_err(|e| self.fix(e))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self.peek_ws() {
            Some(b'{') => {
                self.enter()?;
                let value = visitor.visit_enum(VariantAccess { de: self });
                self.depth += 1;
                let value = value?;
                match self.peek_ws() {
                    Some(b'}') => {
                        self.pos += 1;
                        Ok(value)
                    }
                    Some(_) => Err(self.error("expected value")),
                    None => Err(self.error("EOF while parsing an object")),
                }
            }
            Some(b'"') => visitor.visit_enum(UnitVariantAccess { de: self }),
            Some(_) => Err(self.error("expected value")),
            None => Err(self.eof_value()),
        }
    }

    #[inline]
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    #[inline]
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        // Scalars directly; arrays and objects with the non-recursive skip.
        match self.peek_ws() {
            Some(b'"') => {
                self.pos += 1;
                self.skip_text()?;
            }
            Some(b'-' | b'0'..=b'9') => self.skip_number()?,
            Some(b'n') => {
                self.pos += 1;
                self.ident(b"ull")?;
            }
            _ => self.skip_value()?,
        }
        visitor.visit_unit()
    }
}

struct SeqAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    first: bool,
}

impl<'de> de::SeqAccess<'de> for SeqAccess<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let de = &mut *self.de;
        match de.peek_ws() {
            Some(b']') => return Ok(None),
            Some(_) if self.first => self.first = false,
            Some(b',') => {
                de.pos += 1;
                match de.peek_ws() {
                    Some(b']') => return Err(de.error("trailing comma")),
                    Some(_) => {}
                    None => return Err(de.eof_value()),
                }
            }
            Some(_) => return Err(de.error("expected `,` or `]`")),
            None => return Err(de.error("EOF while parsing a list")),
        }
        seed.deserialize(&mut *self.de).map(Some)
    }
}

struct MapAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    first: bool,
}

impl<'de> de::MapAccess<'de> for MapAccess<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let de = &mut *self.de;
        match de.peek_ws() {
            Some(b'}') => return Ok(None),
            Some(b'"') if self.first => self.first = false,
            Some(_) if self.first => return Err(de.error("key must be a string")),
            Some(b',') => {
                de.pos += 1;
                match de.peek_ws() {
                    Some(b'"') => {}
                    Some(b'}') => return Err(de.error("trailing comma")),
                    Some(_) => return Err(de.error("key must be a string")),
                    None => return Err(de.eof_value()),
                }
            }
            Some(_) => return Err(de.error("expected `,` or `}`")),
            None => return Err(de.error("EOF while parsing an object")),
        }
        seed.deserialize(MapKey { de: &mut *self.de }).map(Some)
    }

    #[inline]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        self.de.colon()?;
        seed.deserialize(&mut *self.de)
    }
}

struct VariantAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
}

impl<'de> de::EnumAccess<'de> for VariantAccess<'_, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self)> {
        match self.de.peek_ws() {
            Some(b'"') => {}
            Some(b'}') => return Err(self.de.error("expected value")),
            Some(_) => return Err(self.de.error("key must be a string")),
            None => return Err(self.de.error("EOF while parsing an object")),
        }
        let value = seed
            .deserialize(MapKey { de: &mut *self.de })
            .map_err(|e| self.de.fix(e))?;
        self.de.colon()?;
        Ok((value, self))
    }
}

impl<'de> de::VariantAccess<'de> for VariantAccess<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<()> {
        de::Deserialize::deserialize(self.de)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        seed.deserialize(self.de)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        de::Deserializer::deserialize_seq(self.de, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        de::Deserializer::deserialize_struct(self.de, "", fields, visitor)
    }
}

struct UnitVariantAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
}

impl<'de> de::EnumAccess<'de> for UnitVariantAccess<'_, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self)> {
        let variant = seed.deserialize(&mut *self.de)?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for UnitVariantAccess<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<()> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value> {
        Err(de::Error::invalid_type(
            Unexpected::UnitVariant,
            &"newtype variant",
        ))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value> {
        Err(de::Error::invalid_type(
            Unexpected::UnitVariant,
            &"tuple variant",
        ))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value> {
        Err(de::Error::invalid_type(
            Unexpected::UnitVariant,
            &"struct variant",
        ))
    }
}

/// An object's key, at its opening quote: a string, or (as in `serde_json`) a number or a
/// boolean written in quotes for maps with such keys.
struct MapKey<'a, 'de> {
    de: &'a mut Deserializer<'de>,
}

impl<'de> MapKey<'_, 'de> {
    /// A number in quotes.
    fn quoted<V: Visitor<'de>>(
        self,
        visitor: V,
        parse: fn(&mut Deserializer<'de>, V) -> Result<V::Value>,
    ) -> Result<V::Value> {
        self.de.pos += 1;
        match self.de.peek() {
            Some(b'0'..=b'9' | b'-') => {}
            _ => return Err(self.de.error("invalid value: expected numeric key")),
        }
        let value = parse(self.de, visitor)?;
        match self.de.peek() {
            Some(b'"') => {
                self.de.pos += 1;
                Ok(value)
            }
            _ => Err(self.de.error("expected `\"`")),
        }
    }
}

macro_rules! numeric_keys {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
                self.quoted(visitor, |de, v| de.deserialize_number(v))
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for MapKey<'_, 'de> {
    type Error = Error;

    #[inline]
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.de.pos += 1;
        self.de.visit_text(visitor)
    }

    #[inline]
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_any(visitor)
    }

    #[inline]
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_any(visitor)
    }

    #[inline]
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_any(visitor)
    }

    numeric_keys! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_f32 deserialize_f64
    }

    fn deserialize_i128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.quoted(visitor, Deserializer::do_i128)
    }

    fn deserialize_u128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.quoted(visitor, Deserializer::do_u128)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let de = self.de;
        de.pos += 1;
        let value = match de.peek() {
            Some(b't') if de.input.get(de.pos..de.pos + 5) == Some(b"true\"") => {
                de.pos += 5;
                visitor.visit_bool(true)
            }
            Some(b'f') if de.input.get(de.pos..de.pos + 6) == Some(b"false\"") => {
                de.pos += 6;
                visitor.visit_bool(false)
            }
            Some(b't' | b'f') => return Err(de.error("expected ident")),
            Some(_) => {
                let err = match de.parse_text(true)? {
                    Text::Borrowed(s) | Text::Copied(s) => {
                        let s = String::from_utf8_lossy(s);
                        de::Error::invalid_type(Unexpected::Str(&s), &visitor)
                    }
                };
                Err(err)
            }
            None => return Err(de.eof_value()),
        };
        value.map_err(|e| de.fix(e))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        de::Deserializer::deserialize_enum(self.de, name, variants, visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        de::Deserializer::deserialize_bytes(self.de, visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        de::Deserializer::deserialize_bytes(self.de, visitor)
    }

    serde::forward_to_deserialize_any! {
        char unit unit_struct seq tuple tuple_struct map struct ignored_any
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// The first `"`, `\` or control character, byte by byte; and whether a high byte is before.
    fn naive(input: &[u8], from: usize) -> (usize, bool) {
        let end = input[from..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .map_or(input.len(), |i| from + i);
        (end, input[from..end].iter().any(|&b| b >= 0x80))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn string_scans_find_the_first_special_byte(
            bytes in prop::collection::vec(prop_oneof![
                8 => 0x20u8..0x7f,
                1 => any::<u8>(),
                1 => prop::sample::select(vec![b'"', b'\\', 0x1f, 0x00, 0x80, 0xff, 0x7f, 0x20]),
            ], 0..80),
            from in 0usize..80,
        ) {
            let from = from.min(bytes.len());
            let (end, high) = naive(&bytes, from);
            let (fast_end, fast_high) = super::scan_string(&bytes, from);
            let (swar_end, swar_high) = super::scan_string_portable(&bytes, from);
            prop_assert_eq!(fast_end, end);
            prop_assert_eq!(swar_end, end);
            // A high byte before the end must be seen (one after it may be, harmlessly).
            prop_assert!(!high || fast_high);
            prop_assert!(!high || swar_high);
        }
    }
}
