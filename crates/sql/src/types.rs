//! SQL types and the values of SQL rows.
//!
//! A [`SqlType`] is a column's declared or derived type (Flink's logical types, the subset
//! Nexmark and its neighbours use). A [`Datum`] is one value of a [`SqlRow`]; its variant
//! follows from the column's type, which the planner knows, so a row never carries types:
//!
//! | type | datum |
//! |---|---|
//! | `BOOLEAN` | [`Datum::Bool`] |
//! | `INT`, `BIGINT` | [`Datum::Int`] |
//! | `DOUBLE` | [`Datum::Double`] |
//! | `DECIMAL(p, s)` | [`Datum::Decimal`]: the unscaled value (`1.25` at scale 2 is 125) |
//! | `VARCHAR`, `STRING` | [`Datum::Str`] |
//! | `TIMESTAMP(3)` | [`Datum::Timestamp`]: milliseconds since the epoch, no time zone |
//! | `ROW<...>` | [`Datum::Row`] |
//!
//! and [`Datum::Null`] for SQL's `NULL` of any type. DECIMALs are exact while their unscaled
//! value fits an `i64` (18 digits); past it an operation gives `NULL`, as Flink's decimal
//! overflow does.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A column's type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SqlType {
    /// `BOOLEAN`.
    Boolean,
    /// `INT`: 32 bits, kept in an `i64`; arithmetic on it wraps around in 32 bits, as
    /// Java's.
    Int,
    /// `BIGINT`.
    BigInt,
    /// `DOUBLE` (and `FLOAT`).
    Double,
    /// `DECIMAL(precision, scale)`.
    Decimal(u8, u8),
    /// `VARCHAR` / `STRING`.
    String,
    /// `TIMESTAMP(3)`.
    Timestamp,
    /// `ROW<name type, ...>`.
    Row(Vec<(String, SqlType)>),
    /// An interval of time (`INTERVAL '4' SECOND`): milliseconds, as a [`Datum::Int`].
    Interval,
    /// The type of a bare `NULL` literal, before it meets another type.
    Null,
}

impl SqlType {
    /// Whether values of this type are numbers.
    pub fn is_numeric(&self) -> bool {
        matches!(
            self,
            SqlType::Int | SqlType::BigInt | SqlType::Double | SqlType::Decimal(..)
        )
    }

    /// Whether this is `INT` or `BIGINT`.
    pub fn is_integer(&self) -> bool {
        matches!(self, SqlType::Int | SqlType::BigInt)
    }

    /// The scale of a DECIMAL (0 for integers).
    pub fn scale(&self) -> u8 {
        match self {
            SqlType::Decimal(_, s) => *s,
            _ => 0,
        }
    }
}

impl fmt::Display for SqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlType::Boolean => f.write_str("BOOLEAN"),
            SqlType::Int => f.write_str("INT"),
            SqlType::BigInt => f.write_str("BIGINT"),
            SqlType::Double => f.write_str("DOUBLE"),
            SqlType::Decimal(p, s) => write!(f, "DECIMAL({p}, {s})"),
            SqlType::String => f.write_str("STRING"),
            SqlType::Timestamp => f.write_str("TIMESTAMP(3)"),
            SqlType::Null => f.write_str("NULL"),
            SqlType::Interval => f.write_str("INTERVAL"),
            SqlType::Row(fields) => {
                f.write_str("ROW<")?;
                for (i, (name, t)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{name}` {t}")?;
                }
                f.write_str(">")
            }
        }
    }
}

/// One value of a SQL row; see the [module docs](self) for which variant each type uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub enum Datum {
    /// SQL's `NULL`.
    #[default]
    Null,
    /// A `BOOLEAN`.
    Bool(bool),
    /// An `INT` or `BIGINT`.
    Int(i64),
    /// A `DOUBLE`.
    Double(f64),
    /// A `DECIMAL`: the unscaled value; the scale is the column type's.
    Decimal(i64),
    /// A `VARCHAR`.
    Str(Arc<str>),
    /// A `TIMESTAMP(3)`: epoch milliseconds.
    Timestamp(i64),
    /// A `ROW<...>`: the nested row's values in its type's order.
    Row(Arc<[Datum]>),
}

impl Datum {
    /// Whether this is `NULL`.
    pub fn is_null(&self) -> bool {
        matches!(self, Datum::Null)
    }

    /// A string datum.
    pub fn str(s: &str) -> Datum {
        Datum::Str(Arc::from(s))
    }

    /// The integer of an `INT`/`BIGINT`, a DECIMAL's unscaled value or a timestamp's
    /// milliseconds.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Datum::Int(i) | Datum::Decimal(i) | Datum::Timestamp(i) => Some(*i),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Datum::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Datum::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

impl Eq for Datum {}

impl std::hash::Hash for Datum {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Datum::Null => {}
            Datum::Bool(b) => b.hash(state),
            Datum::Int(i) | Datum::Decimal(i) | Datum::Timestamp(i) => i.hash(state),
            Datum::Double(d) => d.to_bits().hash(state),
            Datum::Str(s) => s.hash(state),
            Datum::Row(r) => r.hash(state),
        }
    }
}

/// One row of a SQL stream: a datum per column, in the plan node's column order.
pub type SqlRow = Vec<Datum>;

/// The key of a keyed operator (a `GROUP BY`'s, a join's, a `PARTITION BY`'s values): up to
/// two values stand inline, so that keying a row allocates nothing and comparing two keys
/// reads no other memory. It hashes, compares and serializes as a [`SqlRow`] of the same
/// values does.
pub type SqlKey = smallvec::SmallVec<[Datum; 2]>;

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date `(year, month, day)` of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The parts of a timestamp: `(year, month, day, hour, minute, second, millisecond)`.
pub fn timestamp_parts(ms: i64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let secs = (in_day / 1000) as u32;
    (
        y,
        m,
        d,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        (in_day % 1000) as u32,
    )
}

/// A timestamp as Flink's SQL form `YYYY-MM-DD HH:MM:SS.mmm`.
pub fn format_timestamp(ms: i64, out: &mut String) {
    use fmt::Write;
    let (y, mo, d, h, mi, s, milli) = timestamp_parts(ms);
    let _ = write!(
        out,
        "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{milli:03}"
    );
}

/// Parses `YYYY-MM-DD[ HH:MM:SS[.fff]]` (a `T` may stand for the space) into epoch
/// milliseconds; digits past the milliseconds are truncated.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let b = text.trim().as_bytes();
    let num = |s: &[u8]| -> Option<i64> {
        if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(s).ok()?.parse().ok()
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (num(&b[0..4])?, num(&b[5..7])?, num(&b[8..10])?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut ms = days_from_civil(y, m as u32, d as u32) * 86_400_000;
    if b.len() > 10 {
        if (b[10] != b' ' && b[10] != b'T') || b.len() < 19 || b[13] != b':' || b[16] != b':' {
            return None;
        }
        let (h, mi, s) = (num(&b[11..13])?, num(&b[14..16])?, num(&b[17..19])?);
        if h > 23 || mi > 59 || s > 59 {
            return None;
        }
        ms += (h * 3600 + mi * 60 + s) * 1000;
        if b.len() > 19 {
            if b[19] != b'.' {
                return None;
            }
            let frac = &b[20..];
            num(frac)?;
            let mut milli = 0;
            for i in 0..3 {
                milli = milli * 10 + frac.get(i).map_or(0, |c| (c - b'0') as i64);
            }
            ms += milli;
        }
    }
    Some(ms)
}

/// A DECIMAL's unscaled value at `scale` as text with exactly `scale` decimals.
pub fn format_decimal(unscaled: i64, scale: u8, out: &mut String) {
    use fmt::Write;
    if scale == 0 {
        let _ = write!(out, "{unscaled}");
        return;
    }
    let pow = 10i128.pow(scale as u32);
    let v = unscaled as i128;
    let sign = if v < 0 { "-" } else { "" };
    let a = v.abs();
    let _ = write!(
        out,
        "{sign}{}.{:0width$}",
        a / pow,
        a % pow,
        width = scale as usize
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_through_their_text() {
        for text in [
            "2024-01-01 00:00:00.000",
            "1969-12-31 23:59:59.999",
            "2000-02-29 12:34:56.789",
            "1970-01-01 00:00:00.001",
        ] {
            let ms = parse_timestamp(text).unwrap();
            let mut out = String::new();
            format_timestamp(ms, &mut out);
            assert_eq!(out, text);
        }
        assert_eq!(parse_timestamp("1970-01-01 00:00:01.5"), Some(1500));
        assert_eq!(parse_timestamp("1970-01-01T00:00:01"), Some(1000));
        assert_eq!(parse_timestamp("1970-01-02"), Some(86_400_000));
        assert_eq!(parse_timestamp("1970-13-01"), None);
        assert_eq!(parse_timestamp("yesterday"), None);
    }

    #[test]
    fn decimals_print_every_decimal() {
        let text = |v, s| {
            let mut out = String::new();
            format_decimal(v, s, &mut out);
            out
        };
        assert_eq!(text(18_002_008, 3), "18002.008");
        assert_eq!(text(-5, 3), "-0.005");
        assert_eq!(text(1_000, 3), "1.000");
        assert_eq!(text(42, 0), "42");
        assert_eq!(text(i64::MIN, 3), "-9223372036854775.808");
    }
}
