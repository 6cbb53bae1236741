//! Flink SQL's built-in scalar functions, with Flink's semantics (the "System (Built-in)
//! Functions" of Flink 1.20 / 2.x, checked against Flink's runtime code: `SqlFunctionUtils`,
//! `BinaryStringDataUtil`, `DateTimeUtils`, `ExtractCallGen`).
//!
//! A call is planned in three steps: [`lookup`] finds the [`Func`] of a SQL name,
//! [`return_type`] checks the argument types and gives the result's, and [`prepare`] compiles
//! the constant arguments (a regular expression, a date pattern, a set of characters to trim)
//! once per query into a [`Prepared`] call, which [`Prepared::call`] then runs on each row.
//!
//! # NULLs
//!
//! Flink's rule: a function of a `NULL` argument is `NULL`. Every function here follows it
//! except three, as Flink's do: `COALESCE` (the first non-`NULL` argument), `CONCAT_WS`
//! (skips `NULL` strings; `NULL` only for a `NULL` separator) and Nexmark's `count_char` UDF
//! (0 for a `NULL` string, as its Java code does). A bare `NULL` literal (type
//! [`SqlType::Null`]) is accepted wherever an argument type is checked.
//!
//! Where Flink would fail the job at runtime (an exception in the generated code), the call
//! gives `NULL` instead, and no input makes a call panic.
//!
//! # The functions
//!
//! | function | result | notes |
//! |---|---|---|
//! | `MOD(a, b)` | the type of `b`; `DECIMAL` if either is | Java's `%` (the sign of `a`); `b = 0` gives `NULL` (Flink throws) |
//! | `ABS(x)` | the type of `x` | Java's `Math.abs`, as Flink: `ABS` of the smallest `INT`/`BIGINT` is that value |
//! | `LOWER(s)`, `UPPER(s)` | `STRING` | Unicode case mapping (Java's `toLowerCase`/`toUpperCase`) |
//! | `CHAR_LENGTH(s)`, `CHARACTER_LENGTH(s)` | `INT` | code points, as Flink's `numChars` |
//! | `TRIM(s [, chars])`, `LTRIM`, `RTRIM` | `STRING` | removes spaces (or any of `chars`) from both ends / the start / the end |
//! | `REPLACE(s, from, to)` | `STRING` | Java's `String.replace`: an empty `from` puts `to` before every character and at the end |
//! | `REGEXP_EXTRACT(s, regex [, group])` | `STRING` | the first match's group (default 0, the whole match) |
//! | `SPLIT_INDEX(s, delimiter, index)` | `STRING` | Apache Commons' `splitByWholeSeparatorPreserveAllTokens`, 0-based |
//! | `DATE_FORMAT(ts, pattern)` | `STRING` | Java `DateTimeFormatter` patterns |
//! | `YEAR`, `MONTH`, `DAYOFMONTH`, `HOUR`, `MINUTE`, `SECOND` `(ts)` | `BIGINT` | |
//! | `CONCAT(s1, ...)` | `STRING` | `NULL` if any argument is |
//! | `CONCAT_WS(sep, s1, ...)` | `STRING` | skips `NULL` arguments |
//! | `SUBSTRING(s, start [, len])`, `SUBSTR` | `STRING` | 1-based; a negative start counts from the end |
//! | `POSITION(needle IN haystack)` | `INT` | 1-based, 0 if absent; called as `POSITION(needle, haystack)` |
//! | `COALESCE(a, ...)` | the arguments' common type | |
//! | `count_char(s, c)` | `BIGINT` | Nexmark's UDF `com.github.nexmark.flink.udf.CountChar` (see [`java_class`]) |
//! | `ROUND(x [, d])` | `x`'s type; of a `DECIMAL(p, s)` with a constant `d < s`, a `DECIMAL(p - s + d + 1, d)` (`DECIMAL(p - s + 1, 0)` for `d < 0`) | half up (away from zero); a DOUBLE is rounded as the decimal that prints it (Flink's `BigDecimal.valueOf`); an `INT` wraps around as Java's |
//! | `FLOOR(x)`, `CEIL(x)`, `CEILING(x)` | `x`'s type; `DECIMAL(p, 0)` of a `DECIMAL(p, s)` | |
//! | `SIGN(x)` | `x`'s type | Java's `signum` (a zero and `NaN` are themselves) |
//! | `POWER(x, y)`, `SQRT(x)`, `EXP(x)`, `LN(x)`, `LOG10(x)`, `LOG2(x)`, `LOG([b,] x)` | `DOUBLE` | Java's `Math`: `NaN` and infinities where it gives them; `LOG2` and `LOG(b, x)` are quotients of `ln` |
//! | `LPAD(s, len, pad)`, `RPAD(s, len, pad)` | `STRING` | `s` cut to `len` characters or padded with `pad`; `NULL` for a negative `len` or an empty `pad` (Flink's `lpad`/`rpad`) |
//! | `REPEAT(s, n)` | `STRING` | empty for `n <= 0` |
//! | `REVERSE(s)` | `STRING` | by characters |
//! | `INITCAP(s)` | `STRING` | Flink's (Calcite's): ASCII letters and digits make words, anything else ends them |
//! | `LEFT(s, n)`, `RIGHT(s, n)` | `STRING` | the first / last `n` characters; empty for `n < 0` |
//! | `IFNULL(a, b)` | the common type | `COALESCE(a, b)` |
//! | `IF(c, a, b)`, `NULLIF(a, b)` | the common type / the type of `a` | `CASE WHEN c THEN a ELSE b END`, `CASE WHEN a = b THEN NULL ELSE a END` (bound as those) |
//! | `s [NOT] LIKE p [ESCAPE c]` | `BOOLEAN` | `%` any characters, `_` one (not a line break, as Java's `.`); no escape character without `ESCAPE`, as Flink |
//!
//! # Where this differs from Flink, and why
//!
//! - Regular expressions are the `regex` crate's, not `java.util.regex`: no backreferences
//!   or lookaround, `\d`, `\w`, `\s`, `\b` are Unicode-aware, and `.` and `$` know only
//!   `\n` as a line end (Java: also `\r`, `\u{85}`, `\u{2028}`, `\u{2029}`). A constant pattern the
//!   crate cannot compile is an error of [`prepare`] (Flink would give `NULL` on every row);
//!   a pattern computed per row that does not compile gives `NULL`, as in Flink.
//! - `YEAR` … `SECOND` of a timestamp before 1970 give the calendar's values; Flink's
//!   generated code divides with Java's `/` and `%` there and gives e.g. `HOUR = -1` for
//!   `1969-12-31 23:00:00`. From 1970 on the two agree.
//! - `DATE_FORMAT` of a `STRING` reads it as `YYYY-MM-DD HH:MM:SS[.fff]` and, as Flink's
//!   `SimpleDateFormat("yyyy-MM-dd HH:mm:ss")` does, drops the fraction and gives `NULL` for
//!   a string without the time. Its pattern is read with `DateTimeFormatter`'s rules for
//!   both argument types (Flink uses `SimpleDateFormat` for strings; the common letters mean
//!   the same in both).
//! - Integer arguments are `i64` here; Flink's are Java `int`s for positions and indices.
//!   Values outside `int`'s range are taken as they are (so `SUBSTRING(s, 1, 3000000000)`
//!   is the whole string), except `REGEXP_EXTRACT`'s group index, which Flink truncates to
//!   an `int` and so does this.

use std::sync::{Arc, Mutex};

use regex::Regex;

use crate::types::{days_from_civil, parse_timestamp, timestamp_parts, Datum, SqlType};

/// A built-in scalar function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Func {
    /// `MOD(a, b)`: the remainder of `a / b`, with the sign of `a`.
    Mod,
    /// `ABS(x)`: the absolute value.
    Abs,
    /// `LOWER(s)`: the string in lower case.
    Lower,
    /// `UPPER(s)`: the string in upper case.
    Upper,
    /// `CHAR_LENGTH(s)` / `CHARACTER_LENGTH(s)`: the number of characters.
    CharLength,
    /// `TRIM(s [, chars])`: `s` without leading and trailing spaces (or characters of `chars`).
    Trim,
    /// `LTRIM(s [, chars])`: `s` without leading spaces (or characters of `chars`).
    LTrim,
    /// `RTRIM(s [, chars])`: `s` without trailing spaces (or characters of `chars`).
    RTrim,
    /// `REPLACE(s, from, to)`: every occurrence of `from` in `s` replaced by `to`.
    Replace,
    /// `REGEXP_EXTRACT(s, regex [, group])`: a group of the first match of `regex` in `s`.
    RegexpExtract,
    /// `SPLIT_INDEX(s, delimiter, index)`: the `index`-th (0-based) part of `s` split at `delimiter`.
    SplitIndex,
    /// `DATE_FORMAT(ts, pattern)`: a timestamp as text in a `DateTimeFormatter` pattern.
    DateFormat,
    /// `HOUR(ts)`: the hour of the day, 0 to 23.
    Hour,
    /// `MINUTE(ts)`: the minute of the hour.
    Minute,
    /// `SECOND(ts)`: the second of the minute.
    Second,
    /// `YEAR(ts)`: the year.
    Year,
    /// `MONTH(ts)`: the month, 1 to 12.
    Month,
    /// `DAYOFMONTH(ts)`: the day of the month, 1 to 31.
    DayOfMonth,
    /// `CONCAT(s1, s2, ...)`: the strings joined; `NULL` if any is.
    Concat,
    /// `CONCAT_WS(sep, s1, ...)`: the non-`NULL` strings joined by `sep`.
    ConcatWs,
    /// `SUBSTRING(s, start [, len])` / `SUBSTR`: `len` characters (all by default) from the
    /// 1-based `start`.
    Substring,
    /// `POSITION(needle IN haystack)`, called as `POSITION(needle, haystack)`: the 1-based
    /// character position of the first occurrence, 0 if there is none.
    Position,
    /// `COALESCE(a, b, ...)`: the first non-`NULL` argument.
    Coalesce,
    /// `count_char(s, c)`: Nexmark's UDF, how many bytes of `s` equal the first byte of `c`.
    CountChar,
    /// `LPAD(s, len, pad)`: `s` cut or padded on the left with `pad` to `len` characters.
    LPad,
    /// `RPAD(s, len, pad)`: `s` cut or padded on the right with `pad` to `len` characters.
    RPad,
    /// `REPEAT(s, n)`: `s` `n` times.
    Repeat,
    /// `REVERSE(s)`: the characters of `s` in reverse order.
    Reverse,
    /// `INITCAP(s)`: each word's first letter in upper case, its others in lower case.
    InitCap,
    /// `LEFT(s, n)`: the first `n` characters of `s`.
    Left,
    /// `RIGHT(s, n)`: the last `n` characters of `s`.
    Right,
    /// `ROUND(x [, d])`: `x` rounded half up (away from zero) to `d` digits after the point
    /// (before it when `d` is negative).
    Round,
    /// `FLOOR(x)`: the greatest integer not above `x`.
    Floor,
    /// `CEIL(x)` / `CEILING(x)`: the least integer not below `x`.
    Ceil,
    /// `SIGN(x)`: -1, 0 or 1, of `x`'s type.
    Sign,
    /// `POWER(x, y)`: `x` to the power `y`, a `DOUBLE`.
    Power,
    /// `SQRT(x)`: the square root, a `DOUBLE`.
    Sqrt,
    /// `EXP(x)`: e to the power `x`.
    Exp,
    /// `LN(x)`: the natural logarithm.
    Ln,
    /// `LOG10(x)`: the logarithm of base 10.
    Log10,
    /// `LOG2(x)`: the logarithm of base 2.
    Log2,
    /// `LOG(x)` (natural) or `LOG(b, x)` (of base `b`).
    Log,
    /// `s LIKE pattern [ESCAPE c]` (an operator, not callable by name): `%` matches any
    /// characters, `_` any one character but a line break (as Flink's, after Java's `.`), and
    /// `c` before `%`, `_` or itself makes it literal. Without `ESCAPE` no character escapes.
    Like,
}

impl Func {
    /// Every function, in declaration order.
    pub const ALL: &'static [Func] = &[
        Func::Mod,
        Func::Abs,
        Func::Lower,
        Func::Upper,
        Func::CharLength,
        Func::Trim,
        Func::LTrim,
        Func::RTrim,
        Func::Replace,
        Func::RegexpExtract,
        Func::SplitIndex,
        Func::DateFormat,
        Func::Hour,
        Func::Minute,
        Func::Second,
        Func::Year,
        Func::Month,
        Func::DayOfMonth,
        Func::Concat,
        Func::ConcatWs,
        Func::Substring,
        Func::Position,
        Func::Coalesce,
        Func::CountChar,
        Func::LPad,
        Func::RPad,
        Func::Repeat,
        Func::Reverse,
        Func::InitCap,
        Func::Left,
        Func::Right,
        Func::Round,
        Func::Floor,
        Func::Ceil,
        Func::Sign,
        Func::Power,
        Func::Sqrt,
        Func::Exp,
        Func::Ln,
        Func::Log10,
        Func::Log2,
        Func::Log,
        Func::Like,
    ];

    /// The function's SQL name, as error messages spell it.
    pub fn name(self) -> &'static str {
        match self {
            Func::Mod => "MOD",
            Func::Abs => "ABS",
            Func::Lower => "LOWER",
            Func::Upper => "UPPER",
            Func::CharLength => "CHAR_LENGTH",
            Func::Trim => "TRIM",
            Func::LTrim => "LTRIM",
            Func::RTrim => "RTRIM",
            Func::Replace => "REPLACE",
            Func::RegexpExtract => "REGEXP_EXTRACT",
            Func::SplitIndex => "SPLIT_INDEX",
            Func::DateFormat => "DATE_FORMAT",
            Func::Hour => "HOUR",
            Func::Minute => "MINUTE",
            Func::Second => "SECOND",
            Func::Year => "YEAR",
            Func::Month => "MONTH",
            Func::DayOfMonth => "DAYOFMONTH",
            Func::Concat => "CONCAT",
            Func::ConcatWs => "CONCAT_WS",
            Func::Substring => "SUBSTRING",
            Func::Position => "POSITION",
            Func::Coalesce => "COALESCE",
            Func::CountChar => "count_char",
            Func::LPad => "LPAD",
            Func::RPad => "RPAD",
            Func::Repeat => "REPEAT",
            Func::Reverse => "REVERSE",
            Func::InitCap => "INITCAP",
            Func::Left => "LEFT",
            Func::Right => "RIGHT",
            Func::Round => "ROUND",
            Func::Floor => "FLOOR",
            Func::Ceil => "CEIL",
            Func::Sign => "SIGN",
            Func::Power => "POWER",
            Func::Sqrt => "SQRT",
            Func::Exp => "EXP",
            Func::Ln => "LN",
            Func::Log10 => "LOG10",
            Func::Log2 => "LOG2",
            Func::Log => "LOG",
            Func::Like => "LIKE",
        }
    }
}

/// SQL names (matched case-insensitively) and their functions.
const NAMES: &[(&str, Func)] = &[
    ("MOD", Func::Mod),
    ("ABS", Func::Abs),
    ("LOWER", Func::Lower),
    ("UPPER", Func::Upper),
    ("CHAR_LENGTH", Func::CharLength),
    ("CHARACTER_LENGTH", Func::CharLength),
    ("TRIM", Func::Trim),
    ("LTRIM", Func::LTrim),
    ("RTRIM", Func::RTrim),
    ("REPLACE", Func::Replace),
    ("REGEXP_EXTRACT", Func::RegexpExtract),
    ("SPLIT_INDEX", Func::SplitIndex),
    ("DATE_FORMAT", Func::DateFormat),
    ("HOUR", Func::Hour),
    ("MINUTE", Func::Minute),
    ("SECOND", Func::Second),
    ("YEAR", Func::Year),
    ("MONTH", Func::Month),
    ("DAYOFMONTH", Func::DayOfMonth),
    ("CONCAT", Func::Concat),
    ("CONCAT_WS", Func::ConcatWs),
    ("SUBSTRING", Func::Substring),
    ("SUBSTR", Func::Substring),
    ("POSITION", Func::Position),
    ("COALESCE", Func::Coalesce),
    ("COUNT_CHAR", Func::CountChar),
    // Flink's IFNULL(a, b) is COALESCE(a, b).
    ("IFNULL", Func::Coalesce),
    ("LPAD", Func::LPad),
    ("RPAD", Func::RPad),
    ("REPEAT", Func::Repeat),
    ("REVERSE", Func::Reverse),
    ("INITCAP", Func::InitCap),
    ("LEFT", Func::Left),
    ("RIGHT", Func::Right),
    ("ROUND", Func::Round),
    ("FLOOR", Func::Floor),
    ("CEIL", Func::Ceil),
    ("CEILING", Func::Ceil),
    ("SIGN", Func::Sign),
    ("POWER", Func::Power),
    ("SQRT", Func::Sqrt),
    ("EXP", Func::Exp),
    ("LN", Func::Ln),
    ("LOG10", Func::Log10),
    ("LOG2", Func::Log2),
    ("LOG", Func::Log),
];

/// The function of a (case-insensitive) SQL name, e.g. `"MOD"`, `"char_length"`,
/// `"CHARACTER_LENGTH"`, `"SUBSTR"`/`"SUBSTRING"`, `"DAYOFMONTH"`, `"count_char"`.
pub fn lookup(name: &str) -> Option<Func> {
    NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, f)| *f)
}

/// The function a Java UDF class stands for, for `CREATE FUNCTION f AS 'class'`: only
/// Nexmark's `com.github.nexmark.flink.udf.CountChar` (as [`Func::CountChar`]).
pub fn java_class(class: &str) -> Option<Func> {
    match class.trim() {
        "com.github.nexmark.flink.udf.CountChar" => Some(Func::CountChar),
        _ => None,
    }
}

// ------------------------------------------------------------------------------------------
// Types
// ------------------------------------------------------------------------------------------

/// What an argument position accepts (besides the `NULL` type, accepted everywhere).
#[derive(Debug, Clone, Copy)]
enum Want {
    Str,
    Integer,
    StrOrInteger,
    Numeric,
    Exact,
    Ts,
    TsOrStr,
}

impl Want {
    fn accepts(self, t: &SqlType) -> bool {
        if *t == SqlType::Null {
            return true;
        }
        match self {
            Want::Str => *t == SqlType::String,
            Want::Integer => t.is_integer(),
            Want::StrOrInteger => *t == SqlType::String || t.is_integer(),
            Want::Numeric => t.is_numeric(),
            Want::Exact => t.is_integer() || matches!(t, SqlType::Decimal(..)),
            Want::Ts => *t == SqlType::Timestamp,
            Want::TsOrStr => matches!(t, SqlType::Timestamp | SqlType::String),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Want::Str => "a STRING",
            Want::Integer => "an integer (INT or BIGINT)",
            Want::StrOrInteger => "a STRING or an integer",
            Want::Numeric => "a number",
            Want::Exact => "an exact number (INT, BIGINT or DECIMAL)",
            Want::Ts => "a TIMESTAMP(3)",
            Want::TsOrStr => "a TIMESTAMP(3) or a STRING",
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        "argument"
    } else {
        "arguments"
    }
}

/// Checks the argument count: `min..=max`, or at least `min` when `max` is `None`.
fn arity(f: Func, n: usize, min: usize, max: Option<usize>) -> Result<(), String> {
    let ok = n >= min && max.is_none_or(|m| n <= m);
    if ok {
        return Ok(());
    }
    let name = f.name();
    Err(match max {
        Some(m) if m == min => format!("{name} takes {min} {}, not {n}", plural(min)),
        Some(m) if m == min + 1 => format!("{name} takes {min} or {m} arguments, not {n}"),
        Some(m) => format!("{name} takes {min} to {m} arguments, not {n}"),
        None => format!("{name} takes at least {min} {}, not {n}", plural(min)),
    })
}

/// Checks each argument's type against `wants` (the last entry repeats for variadics).
fn typed(f: Func, args: &[SqlType], wants: &[Want]) -> Result<(), String> {
    for (i, t) in args.iter().enumerate() {
        let Some(want) = wants.get(i).or(wants.last()) else {
            continue;
        };
        if !want.accepts(t) {
            let name = f.name();
            let what = want.describe();
            return Err(if args.len() == 1 {
                format!("{name} takes {what}, not {t}")
            } else {
                format!("{name} takes {what} as argument {}, not {t}", i + 1)
            });
        }
    }
    Ok(())
}

/// An exact number's `(precision, scale)` as a DECIMAL: Flink's `INT` is `DECIMAL(10, 0)`
/// and `BIGINT` `DECIMAL(19, 0)`; `None` for the `NULL` type.
fn decimal_parts(t: &SqlType) -> Option<(u8, u8)> {
    match t {
        SqlType::Int => Some((10, 0)),
        SqlType::BigInt => Some((19, 0)),
        SqlType::Decimal(p, s) => Some((*p, *s)),
        _ => None,
    }
}

/// Flink's `LogicalTypeMerging.findModuloDecimalType`.
fn mod_type(a: &SqlType, b: &SqlType) -> SqlType {
    let is_decimal = |t: &SqlType| matches!(t, SqlType::Decimal(..));
    if is_decimal(a) || is_decimal(b) {
        let (da, db) = (decimal_parts(a), decimal_parts(b));
        let (p1, s1) = da.or(db).unwrap_or((10, 0));
        let (p2, s2) = db.or(da).unwrap_or((10, 0));
        let scale = s1.max(s2).min(38);
        let int = p1.saturating_sub(s1).min(p2.saturating_sub(s2));
        let precision = int.saturating_add(scale).clamp(1, 38);
        return SqlType::Decimal(precision, scale.min(precision));
    }
    // Calcite's and Flink's MOD: the divisor's type (the remainder is smaller than it).
    if *b == SqlType::Null {
        a.clone()
    } else {
        b.clone()
    }
}

/// COALESCE's common type: equal types, or numbers widened (INT < BIGINT < DECIMAL < DOUBLE).
fn common_type(f: Func, args: &[SqlType]) -> Result<SqlType, String> {
    let typed: Vec<&SqlType> = args.iter().filter(|t| **t != SqlType::Null).collect();
    let Some(first) = typed.first() else {
        return Ok(SqlType::Null);
    };
    if typed.iter().all(|t| t == first) {
        return Ok((*first).clone());
    }
    let numeric = first.is_numeric();
    if let Some(odd) = typed
        .iter()
        .find(|t| **t != *first && !(numeric && t.is_numeric()))
    {
        return Err(format!(
            "{} arguments have no common type: {first} and {odd}",
            f.name()
        ));
    }
    if typed.iter().any(|t| **t == SqlType::Double) {
        return Ok(SqlType::Double);
    }
    if typed.iter().any(|t| matches!(t, SqlType::Decimal(..))) {
        let parts: Vec<(u8, u8)> = typed.iter().filter_map(|t| decimal_parts(t)).collect();
        let scale = parts.iter().map(|p| p.1).max().unwrap_or(0).min(38);
        let int = parts
            .iter()
            .map(|(p, s)| p.saturating_sub(*s))
            .max()
            .unwrap_or(0);
        let precision = int.saturating_add(scale).clamp(1, 38);
        return Ok(SqlType::Decimal(precision, scale.min(precision)));
    }
    if typed.iter().any(|t| **t == SqlType::BigInt) {
        Ok(SqlType::BigInt)
    } else {
        Ok(SqlType::Int)
    }
}

/// The result type for these argument types, or a one-line error naming the function and
/// what is wrong (e.g. `"MOD takes 2 arguments, not 3"`, `"LOWER takes a STRING, not BIGINT"`).
pub fn return_type(f: Func, args: &[SqlType]) -> Result<SqlType, String> {
    use Want::*;
    let n = args.len();
    let get = |i: usize| args.get(i).cloned().unwrap_or(SqlType::Null);
    match f {
        Func::Mod => {
            arity(f, n, 2, Some(2))?;
            typed(f, args, &[Exact, Exact])?;
            Ok(mod_type(&get(0), &get(1)))
        }
        Func::Abs => {
            arity(f, n, 1, Some(1))?;
            typed(f, args, &[Numeric])?;
            Ok(get(0))
        }
        Func::Lower | Func::Upper => {
            arity(f, n, 1, Some(1))?;
            typed(f, args, &[Str])?;
            Ok(SqlType::String)
        }
        Func::CharLength => {
            arity(f, n, 1, Some(1))?;
            typed(f, args, &[Str])?;
            Ok(SqlType::Int)
        }
        Func::Trim | Func::LTrim | Func::RTrim => {
            arity(f, n, 1, Some(2))?;
            typed(f, args, &[Str, Str])?;
            Ok(SqlType::String)
        }
        Func::Replace => {
            arity(f, n, 3, Some(3))?;
            typed(f, args, &[Str, Str, Str])?;
            Ok(SqlType::String)
        }
        Func::RegexpExtract => {
            arity(f, n, 2, Some(3))?;
            typed(f, args, &[Str, Str, Integer])?;
            Ok(SqlType::String)
        }
        Func::SplitIndex => {
            arity(f, n, 3, Some(3))?;
            typed(f, args, &[Str, StrOrInteger, Integer])?;
            Ok(SqlType::String)
        }
        Func::DateFormat => {
            arity(f, n, 2, Some(2))?;
            typed(f, args, &[TsOrStr, Str])?;
            Ok(SqlType::String)
        }
        Func::Hour | Func::Minute | Func::Second | Func::Year | Func::Month | Func::DayOfMonth => {
            arity(f, n, 1, Some(1))?;
            typed(f, args, &[Ts])?;
            Ok(SqlType::BigInt)
        }
        Func::Concat | Func::ConcatWs => {
            arity(f, n, 1, None)?;
            typed(f, args, &[Str])?;
            Ok(SqlType::String)
        }
        Func::Substring => {
            arity(f, n, 2, Some(3))?;
            typed(f, args, &[Str, Integer, Integer])?;
            Ok(SqlType::String)
        }
        Func::Position => {
            arity(f, n, 2, Some(2))?;
            typed(f, args, &[Str, Str])?;
            Ok(SqlType::Int)
        }
        Func::Coalesce => {
            arity(f, n, 1, None)?;
            common_type(f, args)
        }
        Func::CountChar => {
            arity(f, n, 2, Some(2))?;
            typed(f, args, &[Str, Str])?;
            Ok(SqlType::BigInt)
        }
        Func::LPad | Func::RPad => {
            arity(f, n, 3, Some(3))?;
            typed(f, args, &[Str, Integer, Str])?;
            Ok(SqlType::String)
        }
        Func::Repeat | Func::Left | Func::Right => {
            arity(f, n, 2, Some(2))?;
            typed(f, args, &[Str, Integer])?;
            Ok(SqlType::String)
        }
        Func::Reverse | Func::InitCap => {
            arity(f, n, 1, Some(1))?;
            typed(f, args, &[Str])?;
            Ok(SqlType::String)
        }
        Func::Round => {
            arity(f, n, 1, Some(2))?;
            typed(f, args, &[Numeric, Integer])?;
            // A DECIMAL's result scale needs the digits: see `result_type`.
            Ok(get(0))
        }
        Func::Floor | Func::Ceil => {
            arity(f, n, 1, Some(1))?;
            typed(f, args, &[Numeric])?;
            Ok(match get(0) {
                SqlType::Decimal(p, _) => SqlType::Decimal(p, 0),
                t => t,
            })
        }
        Func::Sign => {
            arity(f, n, 1, Some(1))?;
            typed(f, args, &[Numeric])?;
            Ok(get(0))
        }
        Func::Power => {
            arity(f, n, 2, Some(2))?;
            typed(f, args, &[Numeric, Numeric])?;
            Ok(SqlType::Double)
        }
        Func::Log => {
            arity(f, n, 1, Some(2))?;
            typed(f, args, &[Numeric, Numeric])?;
            Ok(SqlType::Double)
        }
        Func::Sqrt | Func::Exp | Func::Ln | Func::Log10 | Func::Log2 => {
            arity(f, n, 1, Some(1))?;
            typed(f, args, &[Numeric])?;
            Ok(SqlType::Double)
        }
        Func::Like => {
            arity(f, n, 2, Some(3))?;
            typed(f, args, &[Str, Str, Str])?;
            Ok(SqlType::Boolean)
        }
    }
}

// ------------------------------------------------------------------------------------------
// Prepared calls
// ------------------------------------------------------------------------------------------

/// A function call prepared once per query; see [`prepare`].
#[derive(Debug, Clone)]
pub struct Prepared {
    func: Func,
    op: Op,
}

/// What a prepared call does.
#[derive(Debug, Clone)]
enum Op {
    /// The result is `NULL` whatever the row (a constant `NULL` pattern, say).
    AlwaysNull,
    /// Integer MOD.
    Mod,
    /// DECIMAL MOD: the scales of `a`, `b` and the result.
    ModDecimal {
        a: u8,
        b: u8,
        out: u8,
    },
    Abs(AbsKind),
    Lower,
    Upper,
    CharLength,
    /// The characters to trim: fixed, or the second argument's per row (`None`).
    Trim {
        side: Side,
        set: Option<Arc<[char]>>,
    },
    Replace,
    RegexpExtract(RegexSource),
    /// `ROUND`, of an argument of this kind.
    Round(Rounding),
    /// `FLOOR` (`up` false) or `CEIL` of a DECIMAL of this scale (other types: `scale` None).
    FloorCeil {
        up: bool,
        scale: Option<u8>,
    },
    /// `SIGN` of a DECIMAL of this scale (other types: None).
    Sign(Option<u8>),
    /// A function of DOUBLEs (`POWER`, `SQRT`, `EXP`, `LN`, `LOG10`, `LOG2`, `LOG`), with its
    /// arguments' scales (0 but for DECIMALs).
    Math(Func, [u8; 2]),
    /// `LPAD` (`left`) or `RPAD`.
    Pad {
        left: bool,
    },
    Repeat,
    Reverse,
    InitCap,
    /// `LEFT` (`left`) or `RIGHT`.
    Take {
        left: bool,
    },
    /// `LIKE`: the pattern compiled once (a constant pattern and escape), or per row.
    Like(RegexSource),
    /// `by_code`: the delimiter is a character code (Flink's `SPLIT_INDEX(s, INT, INT)`).
    SplitIndex {
        by_code: bool,
    },
    /// `text`: the timestamp is a STRING; `pattern`: fixed, or the second argument's per row.
    DateFormat {
        text: bool,
        pattern: Option<Arc<DatePattern>>,
    },
    Part(Part),
    Concat,
    ConcatWs,
    Substring,
    Position,
    /// How each argument becomes the common type.
    Coalesce(Arc<[Conv]>),
    CountChar,
}

#[derive(Debug, Clone, Copy)]
enum AbsKind {
    Int,
    BigInt,
    Double,
    Decimal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Both,
    Leading,
    Trailing,
}

#[derive(Debug, Clone, Copy)]
enum Part {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

/// A COALESCE argument's conversion to the common type.
#[derive(Debug, Clone, Copy)]
enum Conv {
    Keep,
    /// An integer or a DECIMAL at scale `from` to a DECIMAL at scale `to`.
    Rescale {
        from: u8,
        to: u8,
    },
    /// An integer to a DOUBLE.
    IntToDouble,
    /// A DECIMAL at this scale to a DOUBLE.
    DecimalToDouble(u8),
}

/// REGEXP_EXTRACT's pattern: compiled once, or per row with the last one kept.
#[derive(Debug, Clone)]
enum RegexSource {
    Fixed(Regex),
    PerRow(RegexCache),
}

/// The last pattern compiled per row, per clone of the call (a clone starts empty, so
/// parallel instances never wait on one another).
#[derive(Debug, Default)]
struct RegexCache(Mutex<Option<(Arc<str>, Regex)>>);

impl Clone for RegexCache {
    fn clone(&self) -> Self {
        RegexCache::default()
    }
}

impl RegexCache {
    /// Runs `f` on the compiled `pattern`; `None` if it does not compile.
    fn with<R>(&self, pattern: &Arc<str>, f: impl FnOnce(&Regex) -> R) -> Option<R> {
        self.with_made(pattern, || Ok(pattern.to_string()), f)
    }

    /// Runs `f` on the regular expression `regex()` makes of the pattern `key`, compiled (the
    /// last one is kept, by its key); `None` if it cannot be made or does not compile.
    fn with_made<R>(
        &self,
        key: &Arc<str>,
        regex: impl FnOnce() -> Result<String, String>,
        f: impl FnOnce(&Regex) -> R,
    ) -> Option<R> {
        let compile = || compile_regex(&regex().ok()?).ok();
        match self.0.try_lock() {
            Ok(mut last) => {
                if let Some((p, re)) = last.as_ref() {
                    if **p == **key {
                        return Some(f(re));
                    }
                }
                let re = compile()?;
                let out = f(&re);
                *last = Some((key.clone(), re));
                Some(out)
            }
            Err(_) => compile().map(|re| f(&re)),
        }
    }
}

/// How `ROUND` rounds a value of its argument's type.
#[derive(Debug, Clone)]
enum Rounding {
    /// `INT` (`int32`: the result wraps around as Java's `int`) or `BIGINT`.
    Int {
        int32: bool,
    },
    Double,
    /// A DECIMAL of `scale`, to `digits`, into a `DECIMAL` of `precision` (and the scale
    /// [`round_decimal_type`] gives).
    Decimal {
        scale: u8,
        digits: i64,
        precision: u8,
    },
}

/// The result type of `f` on arguments of `args`, some of them constants: [`return_type`],
/// but for `ROUND` of a DECIMAL, whose scale is its constant number of digits.
pub fn result_type(
    f: Func,
    args: &[SqlType],
    constants: &[Option<Datum>],
) -> Result<SqlType, String> {
    let ty = return_type(f, args)?;
    Ok(match (f, &ty) {
        (Func::Round, SqlType::Decimal(p, s)) => {
            let digits = match constants.get(1) {
                None if args.len() == 1 => 0,
                Some(Some(Datum::Int(d))) => *d,
                Some(Some(Datum::Null)) => 0,
                _ => return Err("ROUND of a DECIMAL takes a constant number of digits".into()),
            };
            let (p, s) = round_decimal_type(*p, *s, digits);
            SqlType::Decimal(p, s)
        }
        _ => ty,
    })
}

/// `ROUND(DECIMAL(p, s), d)`'s type, as Flink's: unchanged for `d >= s`; `DECIMAL(p - s + d +
/// 1, d)` for `0 <= d < s`; `DECIMAL(p - s + 1, 0)` for `d < 0`.
pub(crate) fn round_decimal_type(p: u8, s: u8, d: i64) -> (u8, u8) {
    let whole = i64::from(p) - i64::from(s);
    let (p, s) = if d >= i64::from(s) {
        (i64::from(p), i64::from(s))
    } else if d >= 0 {
        (whole + d + 1, d)
    } else {
        (whole + 1, 0)
    };
    (p.clamp(1, 38) as u8, s as u8)
}

/// `v / div` rounded half up (away from zero).
fn half_up(v: i128, div: i128) -> i128 {
    let (q, r) = (v / div, v % div);
    if 2 * r.abs() >= div {
        q + v.signum()
    } else {
        q
    }
}

/// An integer rounded half up to 10^-d (unchanged for `d >= 0`).
fn round_integer(v: i64, d: i64) -> i128 {
    match u32::try_from(-d).ok().and_then(|k| 10i128.checked_pow(k)) {
        Some(unit) if d < 0 => half_up(i128::from(v), unit) * unit,
        None if d < 0 => 0,
        _ => i128::from(v),
    }
}

/// A DOUBLE rounded half up to `d` digits after the point, as Flink's `ROUND`: on the decimal
/// that prints the double (`BigDecimal.valueOf`), so that `ROUND(1.005, 2)` is 1.01.
fn round_double(v: f64, d: i64) -> f64 {
    if !v.is_finite() {
        return v;
    }
    // The shortest digits that give `v` back, and the power of ten of the first one.
    let text = format!("{:e}", v.abs());
    let Some((mantissa, exponent)) = text.split_once('e') else {
        return v;
    };
    let Ok(exponent) = exponent.parse::<i64>() else {
        return v;
    };
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    // Digits kept: those down to 10^-d.
    let keep = exponent + 1 + d;
    if keep >= digits.len() as i64 {
        return v;
    }
    let sign = if v < 0.0 { "-" } else { "" };
    if keep < 0 {
        return if v < 0.0 { -0.0 } else { 0.0 };
    }
    let keep = keep as usize;
    let mut kept: Vec<u8> = digits[..keep].to_vec();
    if digits[keep] >= b'5' {
        // Carry from the last kept digit.
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, b'1');
                break;
            }
            i -= 1;
            if kept[i] == b'9' {
                kept[i] = b'0';
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    if kept.is_empty() {
        return if v < 0.0 { -0.0 } else { 0.0 };
    }
    let kept = String::from_utf8(kept).unwrap_or_default();
    format!("{sign}{kept}e{}", -d).parse().unwrap_or(v)
}

/// Flink's `INITCAP` (Calcite's `initcap`): letters and digits of ASCII make words, anything
/// else ends them; a word's first letter goes to upper case and its others to lower case.
fn initcap(s: &str) -> String {
    let mut start = true;
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                let out = if start {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                };
                start = false;
                out
            } else {
                start = true;
                c
            }
        })
        .collect()
}

/// The one character of a `LIKE`'s `ESCAPE` clause.
fn escape_char(e: &str) -> Result<char, String> {
    let mut chars = e.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(format!(
            "the ESCAPE of LIKE must be one character, not {e:?}"
        )),
    }
}

/// A `LIKE` pattern as an anchored regular expression (Flink's `sqlToRegexLike`): `%` is
/// `(?s:.*)`, `_` any character but Java's line terminators, the escape before `%`, `_` or
/// itself makes it literal, and the escape before anything else (or at the end) is an error.
fn like_pattern(pattern: &str, escape: Option<char>) -> Result<String, String> {
    let mut re = String::with_capacity(pattern.len() + 8);
    re.push_str("\\A(?:");
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(next) if next == '%' || next == '_' || Some(next) == escape => {
                    re.push_str(&regex::escape(next.encode_utf8(&mut [0; 4])));
                }
                _ => {
                    return Err(format!(
                        "invalid escape sequence in the LIKE pattern {pattern:?}"
                    ))
                }
            }
        } else if c == '%' {
            re.push_str("(?s:.*)");
        } else if c == '_' {
            re.push_str("[^\\n\\r\\x{85}\\x{2028}\\x{2029}]");
        } else {
            re.push_str(&regex::escape(c.encode_utf8(&mut [0; 4])));
        }
    }
    re.push_str(")\\z");
    Ok(re)
}

/// [`like_pattern`], compiled (a constant pattern: its errors are planning errors).
fn like_regex(pattern: &str, escape: Option<char>) -> Result<Regex, String> {
    compile_regex(&like_pattern(pattern, escape)?)
}

fn compile_regex(pattern: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 22)
        .build()
        .map_err(|e| one_line(&e.to_string()))
}

/// The gist of a multi-line error message (the regex crate's show the pattern and a caret).
fn one_line(msg: &str) -> String {
    if let Some(line) = msg.lines().find_map(|l| l.trim().strip_prefix("error:")) {
        return line.trim().to_string();
    }
    msg.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A function call prepared once per query: constant arguments (a regex pattern, a date
/// format pattern, a set of characters to trim) are compiled here. `constants[i]` is
/// `Some(value)` when argument `i` is a literal. An invalid constant (bad regex, bad date
/// pattern) is an `Err` with one line; so are argument types [`return_type`] rejects.
pub fn prepare(f: Func, args: &[SqlType], constants: &[Option<Datum>]) -> Result<Prepared, String> {
    let out = return_type(f, args)?;
    let constant = |i: usize| constants.get(i).and_then(Option::as_ref);
    let ty = |i: usize| args.get(i).cloned().unwrap_or(SqlType::Null);
    let op = match f {
        Func::Mod => match out {
            SqlType::Decimal(_, s) => Op::ModDecimal {
                a: ty(0).scale(),
                b: ty(1).scale(),
                out: s,
            },
            _ => Op::Mod,
        },
        Func::Abs => match ty(0) {
            SqlType::Int => Op::Abs(AbsKind::Int),
            SqlType::BigInt => Op::Abs(AbsKind::BigInt),
            SqlType::Double => Op::Abs(AbsKind::Double),
            SqlType::Decimal(..) => Op::Abs(AbsKind::Decimal),
            _ => Op::AlwaysNull,
        },
        Func::Lower => Op::Lower,
        Func::Upper => Op::Upper,
        Func::CharLength => Op::CharLength,
        Func::Round => Op::Round(match (ty(0), ty(1)) {
            (SqlType::Decimal(p, s), _) => {
                let digits = match (args.len(), constant(1)) {
                    (1, _) => 0,
                    (_, Some(Datum::Int(d))) => *d,
                    (_, Some(Datum::Null)) => {
                        return Ok(Prepared {
                            func: f,
                            op: Op::AlwaysNull,
                        })
                    }
                    _ => return Err("ROUND of a DECIMAL takes a constant number of digits".into()),
                };
                Rounding::Decimal {
                    scale: s,
                    digits,
                    precision: round_decimal_type(p, s, digits).0,
                }
            }
            (SqlType::Double, _) => Rounding::Double,
            (SqlType::Int, _) => Rounding::Int { int32: true },
            _ => Rounding::Int { int32: false },
        }),
        Func::Floor | Func::Ceil => Op::FloorCeil {
            up: f == Func::Ceil,
            scale: match ty(0) {
                SqlType::Decimal(_, s) => Some(s),
                _ => None,
            },
        },
        Func::Sign => Op::Sign(match ty(0) {
            SqlType::Decimal(_, s) => Some(s),
            _ => None,
        }),
        Func::Power | Func::Sqrt | Func::Exp | Func::Ln | Func::Log10 | Func::Log2 | Func::Log => {
            // LOG(x) is LN(x).
            let function = if f == Func::Log && args.len() == 1 {
                Func::Ln
            } else {
                f
            };
            Op::Math(function, [ty(0).scale(), ty(1).scale()])
        }
        Func::LPad => Op::Pad { left: true },
        Func::RPad => Op::Pad { left: false },
        Func::Repeat => Op::Repeat,
        Func::Reverse => Op::Reverse,
        Func::InitCap => Op::InitCap,
        Func::Left => Op::Take { left: true },
        Func::Right => Op::Take { left: false },
        Func::Trim | Func::LTrim | Func::RTrim => {
            let side = match f {
                Func::LTrim => Side::Leading,
                Func::RTrim => Side::Trailing,
                _ => Side::Both,
            };
            if args.len() < 2 {
                Op::Trim {
                    side,
                    set: Some(Arc::from([' '].as_slice())),
                }
            } else {
                match constant(1) {
                    Some(Datum::Null) => Op::AlwaysNull,
                    Some(Datum::Str(chars)) => Op::Trim {
                        side,
                        set: Some(chars.chars().collect()),
                    },
                    _ => Op::Trim { side, set: None },
                }
            }
        }
        Func::Replace => Op::Replace,
        Func::RegexpExtract => match constant(1) {
            Some(Datum::Null) => Op::AlwaysNull,
            Some(Datum::Str(p)) => {
                let re = compile_regex(p).map_err(|e| {
                    format!("REGEXP_EXTRACT: invalid regular expression {:?}: {e}", &**p)
                })?;
                Op::RegexpExtract(RegexSource::Fixed(re))
            }
            _ => Op::RegexpExtract(RegexSource::PerRow(RegexCache::default())),
        },
        Func::SplitIndex => Op::SplitIndex {
            by_code: ty(1).is_integer(),
        },
        Func::DateFormat => {
            let text = ty(0) == SqlType::String;
            match constant(1) {
                Some(Datum::Null) => Op::AlwaysNull,
                Some(Datum::Str(p)) => {
                    let items = parse_date_pattern(p)
                        .map_err(|e| format!("DATE_FORMAT: invalid pattern {:?}: {e}", &**p))?;
                    Op::DateFormat {
                        text,
                        pattern: Some(Arc::new(DatePattern::new(items))),
                    }
                }
                _ => Op::DateFormat {
                    text,
                    pattern: None,
                },
            }
        }
        Func::Hour => Op::Part(Part::Hour),
        Func::Minute => Op::Part(Part::Minute),
        Func::Second => Op::Part(Part::Second),
        Func::Year => Op::Part(Part::Year),
        Func::Month => Op::Part(Part::Month),
        Func::DayOfMonth => Op::Part(Part::Day),
        Func::Concat => Op::Concat,
        Func::ConcatWs => Op::ConcatWs,
        Func::Substring => Op::Substring,
        Func::Position => Op::Position,
        Func::Coalesce => {
            let convs: Vec<Conv> = args.iter().map(|t| conversion(t, &out)).collect();
            Op::Coalesce(convs.into())
        }
        Func::CountChar => Op::CountChar,
        Func::Like => match (constant(1), args.len() < 3, constant(2)) {
            (Some(Datum::Null), ..) | (_, false, Some(Datum::Null)) => Op::AlwaysNull,
            (Some(Datum::Str(p)), true, _) => Op::Like(RegexSource::Fixed(like_regex(p, None)?)),
            (Some(Datum::Str(p)), false, Some(Datum::Str(e))) => {
                Op::Like(RegexSource::Fixed(like_regex(p, Some(escape_char(e)?))?))
            }
            _ => Op::Like(RegexSource::PerRow(RegexCache::default())),
        },
    };
    Ok(Prepared { func: f, op })
}

/// How a value of type `from` becomes one of COALESCE's common type `to`.
fn conversion(from: &SqlType, to: &SqlType) -> Conv {
    match (from, to) {
        (SqlType::Int | SqlType::BigInt, SqlType::Double) => Conv::IntToDouble,
        (SqlType::Decimal(_, s), SqlType::Double) => Conv::DecimalToDouble(*s),
        (SqlType::Int | SqlType::BigInt, SqlType::Decimal(_, s)) => {
            Conv::Rescale { from: 0, to: *s }
        }
        (SqlType::Decimal(_, a), SqlType::Decimal(_, b)) if a != b => {
            Conv::Rescale { from: *a, to: *b }
        }
        _ => Conv::Keep,
    }
}

/// `10^n` as an `i128`, `None` past 10^38.
fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

impl Prepared {
    /// The function this call runs.
    pub fn func(&self) -> Func {
        self.func
    }

    /// Calls the function on one row's argument values (already evaluated, in order).
    /// [`call`](Self::call) on owned values.
    pub fn call_values(&self, args: &[Datum]) -> Datum {
        let refs: smallvec::SmallVec<[&Datum; 4]> = args.iter().collect();
        self.call(&refs)
    }

    /// The function's value on `args` (borrowed where they stand in the row).
    pub fn call(&self, args: &[&Datum]) -> Datum {
        match &self.op {
            Op::Coalesce(convs) => coalesce(convs, args),
            Op::ConcatWs => concat_ws(args),
            Op::CountChar => count_char(args),
            _ if args.iter().any(|a| a.is_null()) => Datum::Null,
            op => eval(op, args).unwrap_or(Datum::Null),
        }
    }
}

fn text<'a>(args: &[&'a Datum], i: usize) -> Option<&'a Arc<str>> {
    match args.get(i)? {
        Datum::Str(s) => Some(s),
        _ => None,
    }
}

fn int(args: &[&Datum], i: usize) -> Option<i64> {
    match args.get(i)? {
        Datum::Int(v) => Some(*v),
        _ => None,
    }
}

fn string(s: String) -> Datum {
    Datum::Str(Arc::from(s))
}

/// The strict functions (`NULL` arguments are already answered): `None` is `NULL`.
fn eval(op: &Op, args: &[&Datum]) -> Option<Datum> {
    Some(match op {
        Op::AlwaysNull | Op::Coalesce(_) | Op::ConcatWs | Op::CountChar => return None,
        Op::Mod => {
            let (a, b) = (int(args, 0)?, int(args, 1)?);
            if b == 0 {
                return None;
            }
            Datum::Int(a.wrapping_rem(b))
        }
        Op::ModDecimal { a, b, out } => {
            let x = i128::from(args.first()?.as_i64()?);
            let y = i128::from(args.get(1)?.as_i64()?);
            // At the result's scale: x·10^ka % y·10^kb, with ka or kb 0 (the scale is the
            // larger one). A divisor past an i128 is larger than the dividend, which is then
            // the remainder; a scaled dividend is reduced modulo the divisor first:
            // (x·p) % y = ((x % y)·(p % y)) % y, with the dividend's sign as Java's.
            let pa = pow10(u32::from(out.saturating_sub(*a)))?;
            let pb = pow10(u32::from(out.saturating_sub(*b)))?;
            let r = match y.checked_mul(pb) {
                Some(0) => return None,
                Some(y) => (x % y).checked_mul(pa % y)? % y,
                None if pa == 1 => x,
                None => return None,
            };
            Datum::Decimal(i64::try_from(r).ok()?)
        }
        Op::Abs(kind) => match (kind, args.first()?) {
            // Java's Math.abs, as Flink's: the smallest value is its own absolute value.
            (AbsKind::Int, Datum::Int(v)) => Datum::Int(i64::from((*v as i32).wrapping_abs())),
            (AbsKind::BigInt, Datum::Int(v)) => Datum::Int(v.wrapping_abs()),
            (AbsKind::Double, Datum::Double(v)) => Datum::Double(v.abs()),
            (AbsKind::Decimal, Datum::Decimal(v)) => Datum::Decimal(v.checked_abs()?),
            _ => return None,
        },
        Op::Lower => {
            let s = text(args, 0)?;
            if !s.chars().any(char::is_uppercase) && s.is_ascii() {
                Datum::Str(s.clone())
            } else {
                string(s.to_lowercase())
            }
        }
        Op::Upper => {
            let s = text(args, 0)?;
            if !s.chars().any(char::is_lowercase) && s.is_ascii() {
                Datum::Str(s.clone())
            } else {
                string(s.to_uppercase())
            }
        }
        Op::CharLength => Datum::Int(text(args, 0)?.chars().count() as i64),
        Op::Round(rounding) => {
            let digits = match args.get(1) {
                Some(_) => int(args, 1)?,
                None => 0,
            };
            match (rounding, args.first()?) {
                (Rounding::Int { int32 }, Datum::Int(v)) => {
                    let r = round_integer(*v, digits);
                    // Java's int and long arithmetic wrap around.
                    Datum::Int(if *int32 {
                        i64::from(r as i32)
                    } else {
                        r as i64
                    })
                }
                (Rounding::Double, Datum::Double(v)) => Datum::Double(round_double(*v, digits)),
                (
                    Rounding::Decimal {
                        scale,
                        digits,
                        precision,
                    },
                    Datum::Decimal(v),
                ) => {
                    let v = i128::from(*v);
                    let (s, d) = (i64::from(*scale), *digits);
                    let unscaled = if d >= s {
                        v
                    } else {
                        // To 10^-d units, then at the result's scale (0 when d < 0).
                        let units = half_up(v, 10i128.checked_pow(u32::try_from(s - d).ok()?)?);
                        if d < 0 {
                            units.checked_mul(10i128.checked_pow(u32::try_from(-d).ok()?)?)?
                        } else {
                            units
                        }
                    };
                    let limit = 10i128
                        .checked_pow(u32::from(*precision))
                        .unwrap_or(i128::MAX);
                    if unscaled.abs() >= limit {
                        return None;
                    }
                    Datum::Decimal(i64::try_from(unscaled).ok()?)
                }
                _ => return None,
            }
        }
        Op::FloorCeil { up, scale } => match (args.first()?, scale) {
            (Datum::Double(v), _) => Datum::Double(if *up { v.ceil() } else { v.floor() }),
            (Datum::Decimal(v), Some(s)) => {
                let p = 10i64.checked_pow(u32::from(*s))?;
                Datum::Decimal(if *up {
                    -((-v).div_euclid(p))
                } else {
                    v.div_euclid(p)
                })
            }
            (Datum::Int(v), _) => Datum::Int(*v),
            _ => return None,
        },
        Op::Sign(scale) => match (args.first()?, scale) {
            // Java's Math.signum: a zero (of either sign) and NaN are themselves.
            (Datum::Double(v), _) => Datum::Double(if *v == 0.0 || v.is_nan() {
                *v
            } else {
                v.signum()
            }),
            (Datum::Decimal(v), Some(s)) => {
                Datum::Decimal(v.signum() * 10i64.checked_pow(u32::from(*s))?)
            }
            (Datum::Int(v), _) => Datum::Int(v.signum()),
            _ => return None,
        },
        Op::Math(function, scales) => {
            let x = |i: usize| -> Option<f64> {
                Some(match args.get(i)? {
                    Datum::Int(v) => *v as f64,
                    Datum::Double(v) => *v,
                    Datum::Decimal(v) => *v as f64 / 10f64.powi(i32::from(scales[i])),
                    _ => return None,
                })
            };
            Datum::Double(match function {
                Func::Power => x(0)?.powf(x(1)?),
                Func::Sqrt => x(0)?.sqrt(),
                Func::Exp => x(0)?.exp(),
                Func::Log10 => x(0)?.log10(),
                // As Flink: Math.log(x) / Math.log(2), and Math.log(x) / Math.log(b).
                Func::Log2 => x(0)?.ln() / 2f64.ln(),
                Func::Log => x(1)?.ln() / x(0)?.ln(),
                _ => x(0)?.ln(),
            })
        }
        Op::Pad { left } => {
            let (s, len, pad) = (text(args, 0)?, int(args, 1)?, text(args, 2)?);
            // Flink's lpad/rpad: NULL for a negative length or an empty pad (even when no
            // padding is needed); `s` is cut to `len` (its first characters).
            let len = usize::try_from(len).ok()?;
            // A result past 1 GiB is NULL rather than an allocation that fails.
            if pad.is_empty() || len > 1 << 28 {
                return None;
            }
            let base: Vec<char> = s.chars().take(len).collect();
            let padding = pad.chars().cycle().take(len - base.len());
            string(if *left {
                padding.chain(base).collect()
            } else {
                base.into_iter().chain(padding).collect()
            })
        }
        Op::Repeat => {
            let (s, n) = (text(args, 0)?, int(args, 1)?);
            let n = usize::try_from(n).unwrap_or(0);
            // A result past 1 GiB is NULL rather than an allocation that fails.
            if s.len().saturating_mul(n) > 1 << 30 {
                return None;
            }
            string(s.repeat(n))
        }
        Op::Reverse => string(text(args, 0)?.chars().rev().collect()),
        Op::InitCap => string(initcap(text(args, 0)?)),
        Op::Take { left } => {
            let (s, n) = (text(args, 0)?, int(args, 1)?);
            let n = usize::try_from(n).unwrap_or(0);
            let count = s.chars().count();
            if n >= count {
                Datum::Str(s.clone())
            } else if *left {
                Datum::str(&s[..s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)])
            } else {
                Datum::str(&s[s.char_indices().nth(count - n).map_or(s.len(), |(i, _)| i)..])
            }
        }
        Op::Trim { side, set } => {
            let s = text(args, 0)?;
            let per_row: Vec<char>;
            let set: &[char] = match set {
                Some(set) => set,
                None => {
                    per_row = text(args, 1)?.chars().collect();
                    &per_row
                }
            };
            let is_trimmed = |c: char| set.contains(&c);
            let t = match side {
                Side::Both => s.trim_matches(is_trimmed),
                Side::Leading => s.trim_start_matches(is_trimmed),
                Side::Trailing => s.trim_end_matches(is_trimmed),
            };
            if t.len() == s.len() {
                Datum::Str(s.clone())
            } else {
                Datum::str(t)
            }
        }
        Op::Replace => {
            let (s, from, to) = (text(args, 0)?, text(args, 1)?, text(args, 2)?);
            if !from.is_empty() && !s.contains(&**from) {
                Datum::Str(s.clone())
            } else {
                // Java's String.replace: an empty target matches before every character and
                // at the end ("abc".replace("", "-") is "-a-b-c-"), as Rust's str::replace.
                string(s.replace(&**from, to))
            }
        }
        Op::RegexpExtract(source) => {
            let s = text(args, 0)?;
            // Flink: `regexpExtract(str, regex, (int) index)`, 0 when omitted.
            let group = match args.get(2) {
                Some(_) => int(args, 2)? as i32,
                None => 0,
            };
            let group = usize::try_from(group).ok()?;
            let extract = |re: &Regex| -> Option<Datum> {
                let caps = re.captures(s)?;
                Some(Datum::str(caps.get(group)?.as_str()))
            };
            match source {
                RegexSource::Fixed(re) => extract(re)?,
                RegexSource::PerRow(cache) => cache.with(text(args, 1)?, extract)??,
            }
        }
        Op::Like(source) => {
            let s = text(args, 0)?;
            match source {
                RegexSource::Fixed(re) => Datum::Bool(re.is_match(s)),
                RegexSource::PerRow(cache) => {
                    let escape = match args.get(2) {
                        Some(_) => Some(escape_char(text(args, 2)?).ok()?),
                        None => None,
                    };
                    let pattern = text(args, 1)?;
                    // The cache is keyed by the pattern as LIKE spells it, with its escape.
                    let key: Arc<str> = match escape {
                        Some(c) => format!("{c}{pattern}").into(),
                        None => pattern.clone(),
                    };
                    let regex = || like_pattern(pattern, escape);
                    Datum::Bool(cache.with_made(&key, regex, |re| re.is_match(s))?)
                }
            }
        }
        Op::SplitIndex { by_code } => {
            let s = text(args, 0)?;
            let index = usize::try_from(int(args, 2)?).ok()?;
            // Commons' splitters give no tokens at all for an empty string.
            if s.is_empty() {
                return None;
            }
            let part = if *by_code {
                // Flink's SPLIT_INDEX(s, character code, index): codes 1 to 255 only.
                let code = int(args, 1)?;
                if !(1..=255).contains(&code) {
                    return None;
                }
                let c = char::from(code as u8);
                s.split(c).nth(index)?
            } else {
                let delimiter = text(args, 1)?;
                if delimiter.is_empty() {
                    // A null or empty separator splits at each whitespace character.
                    s.split(is_java_whitespace).nth(index)?
                } else if let [byte] = delimiter.as_bytes() {
                    // One ASCII character (q22's '/'): a byte search, not a substring search.
                    s.split(char::from(*byte)).nth(index)?
                } else {
                    s.split(&**delimiter).nth(index)?
                }
            };
            if part.len() == s.len() {
                Datum::Str(s.clone())
            } else {
                Datum::str(part)
            }
        }
        Op::DateFormat {
            text: is_text,
            pattern,
        } => {
            let ms = match args.first()? {
                Datum::Timestamp(ms) if !is_text => *ms,
                Datum::Str(s) if *is_text => parse_timestamp_text(s)?,
                _ => return None,
            };
            match pattern {
                // A timestamp's text under a fixed pattern: the same for every timestamp in
                // one span of the pattern's finest unit, so a stream's run of them is
                // formatted once.
                Some(pattern) => pattern.format_memo(ms),
                None => {
                    let items = parse_date_pattern(text(args, 1)?).ok()?;
                    let mut out = String::new();
                    format_date(&items, ms, &mut out);
                    string(out)
                }
            }
        }
        Op::Part(part) => {
            let Datum::Timestamp(ms) = args.first()? else {
                return None;
            };
            let (y, mo, d, h, mi, s, _) = timestamp_parts(*ms);
            Datum::Int(match part {
                Part::Year => y,
                Part::Month => i64::from(mo),
                Part::Day => i64::from(d),
                Part::Hour => i64::from(h),
                Part::Minute => i64::from(mi),
                Part::Second => i64::from(s),
            })
        }
        Op::Concat => {
            let mut out = String::new();
            for i in 0..args.len() {
                out.push_str(text(args, i)?);
            }
            string(out)
        }
        Op::Substring => {
            let s = text(args, 0)?;
            let pos = int(args, 1)?;
            let len = match args.get(2) {
                Some(_) => int(args, 2)?,
                None => i64::MAX,
            };
            substring(s, pos, len)?
        }
        Op::Position => {
            let (needle, haystack) = (text(args, 0)?, text(args, 1)?);
            Datum::Int(match haystack.find(&**needle) {
                Some(at) => haystack[..at].chars().count() as i64 + 1,
                None => 0,
            })
        }
    })
}

/// Flink's `BinaryStringDataUtil.substringSQL`.
fn substring(s: &Arc<str>, pos: i64, len: i64) -> Option<Datum> {
    if len < 0 {
        return None;
    }
    if s.is_empty() {
        return Some(Datum::str(""));
    }
    let n = s.chars().count() as i64;
    let start = match pos {
        p if p > 0 => p - 1,
        0 => 0,
        p => n + p,
    };
    if start >= n || start < 0 {
        return Some(Datum::str(""));
    }
    let end = if n - start < len { n } else { start + len };
    if start == 0 && end == n {
        return Some(Datum::Str(s.clone()));
    }
    let byte_at = |c: i64| -> usize {
        if s.is_ascii() {
            c as usize
        } else {
            s.char_indices().nth(c as usize).map_or(s.len(), |(b, _)| b)
        }
    };
    let (from, to) = (byte_at(start), byte_at(end));
    Some(Datum::str(s.get(from..to)?))
}

/// Java's `Character.isWhitespace` (what Commons splits at without a separator): Unicode
/// space separators except the no-break ones, and the ASCII controls \t \n \v \f \r and
/// \x1C to \x1F.
fn is_java_whitespace(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t'..='\r'
            | '\u{1C}'..='\u{1F}'
            | '\u{1680}'
            | '\u{2000}'..='\u{2006}'
            | '\u{2008}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{205F}'
            | '\u{3000}'
    )
}

/// A STRING timestamp as Flink's DATE_FORMAT reads it (`SimpleDateFormat("yyyy-MM-dd
/// HH:mm:ss")`): the time is required and a fraction is ignored.
fn parse_timestamp_text(s: &str) -> Option<i64> {
    let t = s.trim();
    if t.len() < 19 || t.as_bytes().get(10) != Some(&b' ') {
        return None;
    }
    let ms = parse_timestamp(t)?;
    Some(ms - ms.rem_euclid(1000))
}

fn coalesce(convs: &[Conv], args: &[&Datum]) -> Datum {
    let Some((i, value)) = args.iter().enumerate().find(|(_, d)| !d.is_null()) else {
        return Datum::Null;
    };
    let conv = convs.get(i).copied().unwrap_or(Conv::Keep);
    let converted = match (conv, *value) {
        (Conv::Keep, v) => Some(v.clone()),
        (Conv::IntToDouble, Datum::Int(v)) => Some(Datum::Double(*v as f64)),
        (Conv::DecimalToDouble(s), Datum::Decimal(v)) => {
            pow10(u32::from(s)).map(|p| Datum::Double(*v as f64 / p as f64))
        }
        (Conv::Rescale { from, to }, Datum::Int(v) | Datum::Decimal(v)) => {
            rescale(*v, from, to).map(Datum::Decimal)
        }
        (_, v) => Some(v.clone()),
    };
    converted.unwrap_or(Datum::Null)
}

/// An unscaled value from one scale to another (rounding half up when the scale shrinks);
/// `None` past an `i64`.
fn rescale(v: i64, from: u8, to: u8) -> Option<i64> {
    if to >= from {
        let scaled = i128::from(v).checked_mul(pow10(u32::from(to - from))?)?;
        i64::try_from(scaled).ok()
    } else {
        let p = pow10(u32::from(from - to))?;
        let v = i128::from(v);
        let half = if v < 0 { -(p / 2) } else { p / 2 };
        i64::try_from((v + half) / p).ok()
    }
}

/// Flink's `concatWs`: `NULL` for a `NULL` separator, `NULL` strings skipped.
fn concat_ws(args: &[&Datum]) -> Datum {
    let Some(sep) = text(args, 0) else {
        return Datum::Null;
    };
    let mut out = String::new();
    let mut first = true;
    for arg in args.iter().skip(1) {
        if let Datum::Str(s) = arg {
            if !first {
                out.push_str(sep);
            }
            out.push_str(s);
            first = false;
        }
    }
    string(out)
}

/// Nexmark's `CountChar.eval`: 0 for a `NULL` string; else the bytes of the string equal to
/// the first byte of the second argument's UTF-8 (Java throws for a `NULL` or empty second
/// argument; that is `NULL` here).
fn count_char(args: &[&Datum]) -> Datum {
    let Some(s) = text(args, 0) else {
        return if matches!(args.first(), None | Some(Datum::Null)) {
            Datum::Int(0)
        } else {
            Datum::Null
        };
    };
    let Some(&c) = text(args, 1).and_then(|c| c.as_bytes().first()) else {
        return Datum::Null;
    };
    Datum::Int(s.bytes().filter(|b| *b == c).count() as i64)
}

// ------------------------------------------------------------------------------------------
// DATE_FORMAT patterns
// ------------------------------------------------------------------------------------------

/// One element of a compiled `DateTimeFormatter` pattern; the counts are the letters'.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DateItem {
    Literal(String),
    /// `G`.
    Era(usize),
    /// `y` (year of era) or `u` (proleptic year, may be negative).
    Year {
        count: usize,
        proleptic: bool,
    },
    /// `Q` / `q`.
    Quarter(usize),
    /// `M` / `L`.
    Month(usize),
    /// `D`.
    DayOfYear(usize),
    /// `d`.
    Day(usize),
    /// `E`.
    DayOfWeek(usize),
    /// `a`.
    AmPm,
    /// `H` (0-23), `k` (1-24), `K` (0-11), `h` (1-12).
    Hour {
        letter: char,
        count: usize,
    },
    /// `m`.
    Minute(usize),
    /// `s`.
    Second(usize),
    /// `S`: this many digits of the fraction of the second.
    Fraction(usize),
}

/// A `DATE_FORMAT` pattern fixed when the query is planned, and the time its text holds.
#[derive(Debug)]
struct DatePattern {
    items: Vec<DateItem>,
    /// The span of the pattern's finest unit, in milliseconds: every timestamp of one
    /// span (counted from the epoch, in UTC) has the same text. A day for `yyyy-MM-dd`, a
    /// minute for `HH:mm`.
    span_ms: i64,
    /// This pattern's place in each thread's [`DATE_MEMO`] (unique per prepared pattern).
    id: u64,
}

/// The number of patterns each thread remembers a last text for.
const DATE_MEMO_SLOTS: usize = 8;

/// A text [`DatePattern::format_memo`] remembers: the pattern's id, the span, the text.
type DateMemo = Option<(u64, i64, Arc<str>)>;

thread_local! {
    /// Per thread: in slot `id % DATE_MEMO_SLOTS`, the last text formatted for pattern `id`,
    /// and the span it holds for.
    static DATE_MEMO: std::cell::RefCell<[DateMemo; DATE_MEMO_SLOTS]> =
        const { std::cell::RefCell::new([const { None }; DATE_MEMO_SLOTS]) };
}

impl DatePattern {
    fn new(items: Vec<DateItem>) -> Self {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let span_ms = items
            .iter()
            .map(|item| match item {
                DateItem::Fraction(_) => 1,
                DateItem::Second(_) => 1_000,
                DateItem::Minute(_) => 60_000,
                DateItem::Hour { .. } | DateItem::AmPm => 3_600_000,
                DateItem::Literal(_) => i64::MAX,
                _ => 86_400_000,
            })
            .min()
            .unwrap_or(i64::MAX);
        DatePattern {
            items,
            span_ms,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// The text of timestamp `ms`: this thread's last one for this pattern when `ms` lies in
    /// the same span, else formatted (and remembered).
    fn format_memo(&self, ms: i64) -> Datum {
        let span = ms.div_euclid(self.span_ms);
        let slot = (self.id % DATE_MEMO_SLOTS as u64) as usize;
        DATE_MEMO.with(|memo| {
            let mut memo = memo.borrow_mut();
            if let Some((id, last, text)) = &memo[slot] {
                if *id == self.id && *last == span {
                    return Datum::Str(text.clone());
                }
            }
            let mut out = String::new();
            format_date(&self.items, ms, &mut out);
            let text: Arc<str> = Arc::from(out);
            memo[slot] = Some((self.id, span, text.clone()));
            Datum::Str(text)
        })
    }
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Compiles a pattern by `DateTimeFormatterBuilder.appendPattern`'s rules: ASCII letters are
/// fields (a run of one letter is one field), `'...'` is quoted text with `''` for a quote,
/// `[` and `]` bracket optional sections (always printed here: every field is known), and
/// `{`, `}`, `#` are reserved; anything else is copied.
fn parse_date_pattern(pattern: &str) -> Result<Vec<DateItem>, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut items: Vec<DateItem> = Vec::new();
    let push_literal = |items: &mut Vec<DateItem>, s: &str| {
        if let Some(DateItem::Literal(last)) = items.last_mut() {
            last.push_str(s);
        } else {
            items.push(DateItem::Literal(s.to_string()));
        }
    };
    let mut optional = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() {
            let mut count = 1;
            while chars.get(i + count) == Some(&c) {
                count += 1;
            }
            i += count;
            items.push(date_field(c, count)?);
        } else if c == '\'' {
            let start = i;
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        i += 1;
                    } else {
                        break;
                    }
                }
                i += 1;
            }
            if i >= chars.len() {
                return Err("it ends inside a quoted literal".to_string());
            }
            let quoted: String = chars[start + 1..i].iter().collect();
            i += 1;
            if quoted.is_empty() {
                push_literal(&mut items, "'");
            } else {
                push_literal(&mut items, &quoted.replace("''", "'"));
            }
        } else if c == '[' {
            optional += 1;
            i += 1;
        } else if c == ']' {
            if optional == 0 {
                return Err("it has a ']' without a '[' before it".to_string());
            }
            optional -= 1;
            i += 1;
        } else if matches!(c, '{' | '}' | '#') {
            return Err(format!("'{c}' is reserved"));
        } else {
            push_literal(&mut items, c.encode_utf8(&mut [0; 4]));
            i += 1;
        }
    }
    Ok(items)
}

fn date_field(letter: char, count: usize) -> Result<DateItem, String> {
    let too_many = |max: usize| {
        if count > max {
            Err(format!(
                "too many pattern letters '{letter}' ({count}, at most {max})"
            ))
        } else {
            Ok(())
        }
    };
    Ok(match letter {
        'G' => {
            too_many(5)?;
            DateItem::Era(count)
        }
        'y' | 'u' => {
            too_many(19)?;
            DateItem::Year {
                count,
                proleptic: letter == 'u',
            }
        }
        'Q' | 'q' => {
            too_many(5)?;
            DateItem::Quarter(count)
        }
        'M' | 'L' => {
            too_many(5)?;
            DateItem::Month(count)
        }
        'D' => {
            too_many(3)?;
            DateItem::DayOfYear(count)
        }
        'd' => {
            too_many(2)?;
            DateItem::Day(count)
        }
        'E' => {
            too_many(5)?;
            DateItem::DayOfWeek(count)
        }
        'a' => {
            too_many(1)?;
            DateItem::AmPm
        }
        'H' | 'k' | 'K' | 'h' => {
            too_many(2)?;
            DateItem::Hour { letter, count }
        }
        'm' => {
            too_many(2)?;
            DateItem::Minute(count)
        }
        's' => {
            too_many(2)?;
            DateItem::Second(count)
        }
        'S' => {
            too_many(9)?;
            DateItem::Fraction(count)
        }
        'c' | 'e' | 'F' | 'W' | 'w' | 'Y' | 'A' | 'n' | 'N' | 'B' | 'g' => {
            return Err(format!("pattern letter '{letter}' is not supported"));
        }
        'V' | 'v' | 'z' | 'Z' | 'O' | 'X' | 'x' => {
            return Err(format!(
                "pattern letter '{letter}' needs a time zone, and TIMESTAMP has none"
            ));
        }
        _ => return Err(format!("unknown pattern letter '{letter}'")),
    })
}

/// `DateTimeFormatter`'s number printer: `width` digits at least, zero-padded; a '-' for a
/// negative value, and with `exceeds_pad` a '+' for a value wider than `width`.
fn push_number(out: &mut String, v: i64, width: usize, exceeds_pad: bool) {
    // The decimal digits of |v|, last first (an i64 has at most 19).
    let mut digits = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = digits.len() - start;
    if v < 0 {
        out.push('-');
    } else if exceeds_pad && len > width {
        out.push('+');
    }
    for _ in len..width {
        out.push('0');
    }
    for &d in &digits[start..] {
        out.push(char::from(d));
    }
}

/// Text in `DateTimeFormatter`'s styles: 1-3 letters short, 4 full, 5 narrow.
fn push_text(out: &mut String, full: &str, count: usize) {
    match count {
        4 => out.push_str(full),
        5 => out.extend(full.chars().take(1)),
        _ => out.extend(full.chars().take(3)),
    }
}

fn format_date(items: &[DateItem], ms: i64, out: &mut String) {
    let (year, month, day, hour, minute, second, milli) = timestamp_parts(ms);
    let days = ms.div_euclid(86_400_000);
    let (month, day, hour) = (i64::from(month), i64::from(day), i64::from(hour));
    for item in items {
        match item {
            DateItem::Literal(s) => out.push_str(s),
            DateItem::Era(count) => {
                let (full, short) = if year > 0 {
                    ("Anno Domini", "AD")
                } else {
                    ("Before Christ", "BC")
                };
                match count {
                    4 => out.push_str(full),
                    5 => out.push_str(&short[..1]),
                    _ => out.push_str(short),
                }
            }
            DateItem::Year { count, proleptic } => {
                let v = if *proleptic || year > 0 {
                    year
                } else {
                    1 - year
                };
                match count {
                    2 => push_number(out, v.rem_euclid(100), 2, false),
                    1 | 3 => push_number(out, v, *count, false),
                    _ => push_number(out, v, *count, true),
                }
            }
            DateItem::Quarter(count) => {
                let q = (month - 1) / 3 + 1;
                match count {
                    1 | 2 => push_number(out, q, *count, false),
                    3 => {
                        out.push('Q');
                        push_number(out, q, 1, false);
                    }
                    4 => out.push_str(["1st", "2nd", "3rd", "4th"][(q as usize - 1) % 4]),
                    _ => push_number(out, q, 1, false),
                }
                if *count == 4 {
                    out.push_str(" quarter");
                }
            }
            DateItem::Month(count) => match count {
                1 | 2 => push_number(out, month, *count, false),
                _ => push_text(out, MONTHS[(month as usize - 1) % 12], *count),
            },
            DateItem::DayOfYear(count) => {
                let doy = days - days_from_civil(year, 1, 1) + 1;
                push_number(out, doy, *count, false);
            }
            DateItem::Day(count) => push_number(out, day, *count, false),
            DateItem::DayOfWeek(count) => {
                // 1970-01-01 was a Thursday.
                let weekday = (days + 3).rem_euclid(7) as usize;
                push_text(out, WEEKDAYS[weekday], *count);
            }
            DateItem::AmPm => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            DateItem::Hour { letter, count } => {
                let v = match letter {
                    'k' if hour == 0 => 24,
                    'K' => hour % 12,
                    'h' if hour % 12 == 0 => 12,
                    'h' => hour % 12,
                    _ => hour,
                };
                push_number(out, v, *count, false);
            }
            DateItem::Minute(count) => push_number(out, i64::from(minute), *count, false),
            DateItem::Second(count) => push_number(out, i64::from(second), *count, false),
            DateItem::Fraction(count) => {
                // Nine digits of nanoseconds, cut to `count` (more than nine: all nine).
                let mut nanos = String::with_capacity(9);
                push_number(&mut nanos, i64::from(milli) * 1_000_000, 9, false);
                out.push_str(nanos.get(..*count).unwrap_or(&nanos));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Datum {
        Datum::str(v)
    }

    fn i(v: i64) -> Datum {
        Datum::Int(v)
    }

    fn ts(text: &str) -> Datum {
        Datum::Timestamp(parse_timestamp(text).expect("a valid timestamp"))
    }

    /// Prepares `f` with no constants and calls it once.
    fn call(f: Func, types: &[SqlType], args: &[Datum]) -> Datum {
        prepare(f, types, &[])
            .unwrap_or_else(|e| panic!("{e}"))
            .call_values(args)
    }

    /// Prepares `f` with every argument a constant (as literals are) and calls it once.
    fn call_const(f: Func, types: &[SqlType], args: &[Datum]) -> Datum {
        let constants: Vec<Option<Datum>> = args.iter().cloned().map(Some).collect();
        prepare(f, types, &constants)
            .unwrap_or_else(|e| panic!("{e}"))
            .call_values(args)
    }

    /// Calls a function of STRING arguments both ways and checks they agree.
    fn strings(f: Func, args: &[Datum]) -> Datum {
        let types = vec![SqlType::String; args.len()];
        let a = call(f, &types, args);
        let b = call_const(f, &types, args);
        assert_eq!(a, b, "{f:?} per row and constant differ on {args:?}");
        a
    }

    use SqlType::{BigInt, Decimal, Double, Int, String as Str, Timestamp as Ts};

    #[test]
    fn names_are_found_case_insensitively() {
        assert_eq!(lookup("MOD"), Some(Func::Mod));
        assert_eq!(lookup("char_length"), Some(Func::CharLength));
        assert_eq!(lookup("CHARACTER_LENGTH"), Some(Func::CharLength));
        assert_eq!(lookup("SUBSTR"), Some(Func::Substring));
        assert_eq!(lookup("substring"), Some(Func::Substring));
        assert_eq!(lookup("DayOfMonth"), Some(Func::DayOfMonth));
        assert_eq!(lookup("count_char"), Some(Func::CountChar));
        assert_eq!(lookup("Regexp_Extract"), Some(Func::RegexpExtract));
        assert_eq!(lookup("POWER"), Some(Func::Power));
        assert_eq!(lookup("ATAN2"), None);
        assert_eq!(lookup(""), None);
        assert_eq!(
            java_class("com.github.nexmark.flink.udf.CountChar"),
            Some(Func::CountChar)
        );
        assert_eq!(java_class("com.example.Other"), None);
        // Every function has a name `lookup` finds (LIKE is an operator only).
        assert_eq!(lookup("LIKE"), None);
        for f in Func::ALL.iter().filter(|f| **f != Func::Like) {
            assert_eq!(lookup(f.name()), Some(*f), "{f:?}");
        }
    }

    #[test]
    fn return_types_and_their_errors() {
        assert_eq!(return_type(Func::Mod, &[Int, Int]), Ok(Int));
        assert_eq!(
            return_type(Func::Mod, &[Int, Int, Int]),
            Err("MOD takes 2 arguments, not 3".to_string())
        );
        assert_eq!(
            return_type(Func::Lower, &[BigInt]),
            Err("LOWER takes a STRING, not BIGINT".to_string())
        );
        assert_eq!(
            return_type(Func::Substring, &[Str]),
            Err("SUBSTRING takes 2 or 3 arguments, not 1".to_string())
        );
        assert_eq!(
            return_type(Func::Substring, &[Str, Str]),
            Err("SUBSTRING takes an integer (INT or BIGINT) as argument 2, not STRING".to_string())
        );
        assert_eq!(
            return_type(Func::Concat, &[]),
            Err("CONCAT takes at least 1 argument, not 0".to_string())
        );
        assert_eq!(
            return_type(Func::Mod, &[Double, Int]),
            Err(
                "MOD takes an exact number (INT, BIGINT or DECIMAL) as argument 1, not DOUBLE"
                    .to_string()
            )
        );
        assert_eq!(
            return_type(Func::Hour, &[Str]),
            Err("HOUR takes a TIMESTAMP(3), not STRING".to_string())
        );
        // Flink's MOD has the divisor's type (BuiltInFunctionDefinitions.MOD: argument(1)).
        assert_eq!(return_type(Func::Mod, &[BigInt, Int]), Ok(Int));
        assert_eq!(return_type(Func::Mod, &[Int, BigInt]), Ok(BigInt));
        // Flink's TypeStrategiesTest: DECIMAL(5, 4) % DECIMAL(3, 2) is DECIMAL(5, 4).
        assert_eq!(
            return_type(Func::Mod, &[Decimal(5, 4), Decimal(3, 2)]),
            Ok(Decimal(5, 4))
        );
        // INT is DECIMAL(10, 0): min(10 - 2, 10) + 2.
        assert_eq!(
            return_type(Func::Mod, &[Decimal(10, 2), Int]),
            Ok(Decimal(10, 2))
        );
        assert_eq!(return_type(Func::Abs, &[Decimal(7, 2)]), Ok(Decimal(7, 2)));
        assert_eq!(return_type(Func::Abs, &[Double]), Ok(Double));
        assert_eq!(return_type(Func::CharLength, &[Str]), Ok(Int));
        assert_eq!(return_type(Func::Position, &[Str, Str]), Ok(Int));
        assert_eq!(return_type(Func::Year, &[Ts]), Ok(BigInt));
        assert_eq!(return_type(Func::DateFormat, &[Str, Str]), Ok(Str));
        assert_eq!(return_type(Func::DateFormat, &[Ts, Str]), Ok(Str));
        assert_eq!(return_type(Func::SplitIndex, &[Str, Int, Int]), Ok(Str));
        assert_eq!(return_type(Func::CountChar, &[Str, Str]), Ok(BigInt));
        assert_eq!(return_type(Func::RegexpExtract, &[Str, Str]), Ok(Str));
        // The NULL type fits anywhere.
        assert_eq!(return_type(Func::Upper, &[SqlType::Null]), Ok(Str));
        assert_eq!(return_type(Func::Mod, &[Int, SqlType::Null]), Ok(Int));
    }

    #[test]
    fn coalesce_types() {
        assert_eq!(return_type(Func::Coalesce, &[Int, BigInt]), Ok(BigInt));
        assert_eq!(return_type(Func::Coalesce, &[SqlType::Null, Str]), Ok(Str));
        assert_eq!(
            return_type(Func::Coalesce, &[SqlType::Null]),
            Ok(SqlType::Null)
        );
        assert_eq!(return_type(Func::Coalesce, &[Int, Double]), Ok(Double));
        assert_eq!(
            return_type(Func::Coalesce, &[Int, Decimal(5, 2)]),
            Ok(Decimal(12, 2))
        );
        assert_eq!(
            return_type(Func::Coalesce, &[Str, Int]),
            Err("COALESCE arguments have no common type: STRING and INT".to_string())
        );
        assert_eq!(
            return_type(Func::Coalesce, &[Int, Int, Ts]),
            Err("COALESCE arguments have no common type: INT and TIMESTAMP(3)".to_string())
        );
        assert_eq!(
            return_type(Func::Coalesce, &[]),
            Err("COALESCE takes at least 1 argument, not 0".to_string())
        );
    }

    #[test]
    fn coalesce_values() {
        let f = Func::Coalesce;
        assert_eq!(call(f, &[Int, Int, Int], &[Datum::Null, i(1), i(2)]), i(1));
        assert_eq!(
            call(f, &[Int, Int], &[Datum::Null, Datum::Null]),
            Datum::Null
        );
        assert_eq!(call(f, &[Str, Str], &[s(""), s("b")]), s(""));
        assert_eq!(
            call(f, &[Int, Double], &[i(3), Datum::Double(1.5)]),
            Datum::Double(3.0)
        );
        assert_eq!(
            call(
                f,
                &[Decimal(5, 2), Double],
                &[Datum::Decimal(125), Datum::Null]
            ),
            Datum::Double(1.25)
        );
        // 3 as DECIMAL(12, 2) is 3.00.
        assert_eq!(
            call(f, &[Int, Decimal(5, 2)], &[i(3), Datum::Decimal(1)]),
            Datum::Decimal(300)
        );
        // A value too wide for the rescaled DECIMAL overflows to NULL, as Flink's decimals do.
        assert_eq!(
            call(f, &[BigInt, Decimal(5, 2)], &[i(i64::MAX), Datum::Null]),
            Datum::Null
        );
    }

    #[test]
    fn mod_follows_java() {
        let f = Func::Mod;
        let m = |a: i64, b: i64| call(f, &[BigInt, BigInt], &[i(a), i(b)]);
        assert_eq!(m(7, 3), i(1));
        // Java's %: the sign of the dividend.
        assert_eq!(m(-7, 3), i(-1));
        assert_eq!(m(7, -3), i(1));
        assert_eq!(m(-7, -3), i(-1));
        assert_eq!(m(0, 5), i(0));
        // Flink throws an ArithmeticException; NULL here.
        assert_eq!(m(7, 0), Datum::Null);
        // Java: Long.MIN_VALUE % -1 == 0.
        assert_eq!(m(i64::MIN, -1), i(0));
        assert_eq!(m(i64::MIN, i64::MAX), i(-1));
        assert_eq!(call(f, &[Int, Int], &[Datum::Null, i(3)]), Datum::Null);
        assert_eq!(call(f, &[Int, Int], &[i(3), Datum::Null]), Datum::Null);
    }

    #[test]
    fn mod_of_decimals_aligns_scales() {
        let f = Func::Mod;
        // 7.50 % 2 = 1.50.
        assert_eq!(
            call(f, &[Decimal(5, 2), Int], &[Datum::Decimal(750), i(2)]),
            Datum::Decimal(150)
        );
        // 7.5 % 0.25 = 0.00 (scale 2); -7.5 % 2.25 = -0.75.
        assert_eq!(
            call(
                f,
                &[Decimal(3, 1), Decimal(3, 2)],
                &[Datum::Decimal(75), Datum::Decimal(25)]
            ),
            Datum::Decimal(0)
        );
        assert_eq!(
            call(
                f,
                &[Decimal(3, 1), Decimal(3, 2)],
                &[Datum::Decimal(-75), Datum::Decimal(225)]
            ),
            Datum::Decimal(-75)
        );
        assert_eq!(
            call(f, &[Decimal(3, 1), Int], &[Datum::Decimal(75), i(0)]),
            Datum::Null
        );
        assert_eq!(
            call(
                f,
                &[Decimal(18, 0), Decimal(18, 18)],
                &[Datum::Decimal(i64::MIN), Datum::Decimal(i64::MAX)]
            ),
            Datum::Decimal((i128::from(i64::MIN) * 10i128.pow(18) % i128::from(i64::MAX)) as i64)
        );
        // 5 % 3E-38 = 2E-38, though 5 at scale 38 is past an i128 (found by the fuzz loop).
        assert_eq!(
            call(
                f,
                &[Decimal(1, 0), Decimal(38, 38)],
                &[Datum::Decimal(5), Datum::Decimal(3)]
            ),
            Datum::Decimal(2)
        );
        // 3E-38 % 9223372036854775807 = 3E-38, the divisor past an i128 at scale 38.
        assert_eq!(
            call(
                f,
                &[Decimal(38, 38), BigInt],
                &[Datum::Decimal(3), i(i64::MAX)]
            ),
            Datum::Decimal(3)
        );
    }

    /// ROUND, FLOOR, CEIL, SIGN and the functions of DOUBLEs, with their types, as Flink 2.3
    /// answers (each case was run there).
    #[test]
    fn math_as_flink() {
        let dec = |p: u8, s: u8| SqlType::Decimal(p, s);
        let round = |ty: SqlType, v: Datum, d: i64| {
            let types = [ty, Int];
            let constants = [None, Some(i(d))];
            let out = result_type(Func::Round, &types, &constants).unwrap();
            let value = prepare(Func::Round, &types, &constants)
                .unwrap()
                .call_values(&[v, i(d)]);
            (out, value)
        };
        let d = Datum::Decimal;
        assert_eq!(round(dec(5, 3), d(12_345), 1), (dec(4, 1), d(123)));
        assert_eq!(round(dec(4, 2), d(1235), 1), (dec(4, 1), d(124)));
        assert_eq!(round(dec(4, 2), d(-1235), 1), (dec(4, 1), d(-124)));
        assert_eq!(round(dec(5, 3), d(12_345), 0), (dec(3, 0), d(12)));
        assert_eq!(round(dec(3, 1), d(125), 0), (dec(3, 0), d(13)));
        assert_eq!(round(dec(5, 3), d(15_345), -1), (dec(3, 0), d(20)));
        assert_eq!(round(dec(5, 3), d(12_345), 5), (dec(5, 3), d(12_345)));
        assert_eq!(round(dec(4, 2), d(9995), 1), (dec(4, 1), d(1000)));
        assert_eq!(round(Int, i(125), -1), (Int, i(130)));
        assert_eq!(round(BigInt, i(-125), -1), (BigInt, i(-130)));
        assert_eq!(round(Int, i(125), 2), (Int, i(125)));
        assert_eq!(round(Int, i(2_147_483_647), -1), (Int, i(-2_147_483_646)));
        let dbl = |v: f64, d: i64| round(Double, Datum::Double(v), d).1;
        assert_eq!(dbl(2.5, 0), Datum::Double(3.0));
        assert_eq!(dbl(-2.5, 0), Datum::Double(-3.0));
        assert_eq!(dbl(1.005, 2), Datum::Double(1.01));
        assert_eq!(dbl(2.675, 2), Datum::Double(2.68));
        assert_eq!(dbl(9.96, 1), Datum::Double(10.0));
        assert_eq!(dbl(0.4, 0), Datum::Double(0.0));
        assert_eq!(dbl(0.5, 0), Datum::Double(1.0));
        assert_eq!(dbl(1234.5, -2), Datum::Double(1200.0));
        assert_eq!(dbl(1e300, 2), Datum::Double(1e300));
        assert_eq!(
            result_type(Func::Floor, &[dec(5, 3)], &[None]),
            Ok(dec(5, 0))
        );
        assert_eq!(call(Func::Floor, &[dec(5, 3)], &[d(-12_345)]), d(-13));
        assert_eq!(call(Func::Ceil, &[dec(5, 3)], &[d(-12_345)]), d(-12));
        assert_eq!(call(Func::Ceil, &[dec(5, 3)], &[d(12_345)]), d(13));
        assert_eq!(
            call(Func::Floor, &[Double], &[Datum::Double(-2.5)]),
            Datum::Double(-3.0)
        );
        assert_eq!(
            call(Func::Ceil, &[Double], &[Datum::Double(-2.5)]),
            Datum::Double(-2.0)
        );
        assert_eq!(call(Func::Floor, &[Int], &[i(1)]), i(1));
        assert_eq!(call(Func::Sign, &[dec(3, 1)], &[d(-125)]), d(-10));
        assert_eq!(call(Func::Sign, &[Int], &[i(-3)]), i(-1));
        assert_eq!(
            call(Func::Sign, &[Double], &[Datum::Double(0.0)]),
            Datum::Double(0.0)
        );
        let f = |func: Func, types: &[SqlType], args: &[Datum]| match call(func, types, args) {
            Datum::Double(v) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!(f(Func::Power, &[Int, Int], &[i(2), i(10)]), 1024.0);
        assert_eq!(
            f(
                Func::Power,
                &[Double, Double],
                &[Datum::Double(2.5), Datum::Double(0.5)]
            ),
            1.5811388300841898
        );
        assert!(f(
            Func::Power,
            &[Double, Double],
            &[Datum::Double(-8.0), Datum::Double(0.5)]
        )
        .is_nan());
        assert_eq!(f(Func::Sqrt, &[Int], &[i(2)]), std::f64::consts::SQRT_2);
        assert_eq!(f(Func::Sqrt, &[dec(3, 2)], &[d(225)]), 1.5);
        assert!(f(Func::Sqrt, &[Double], &[Datum::Double(-1.0)]).is_nan());
        assert_eq!(f(Func::Exp, &[Int], &[i(1)]), std::f64::consts::E);
        assert_eq!(
            f(Func::Ln, &[Double], &[Datum::Double(0.0)]),
            f64::NEG_INFINITY
        );
        assert!(f(Func::Ln, &[Double], &[Datum::Double(-1.0)]).is_nan());
        assert_eq!(
            f(Func::Ln, &[Double], &[Datum::Double(std::f64::consts::E)]),
            1.0
        );
        assert_eq!(f(Func::Log10, &[Int], &[i(1000)]), 3.0);
        assert_eq!(f(Func::Log2, &[Int], &[i(8)]), 3.0);
        assert_eq!(f(Func::Log, &[Int], &[i(8)]), 2.0794415416798357);
        assert_eq!(f(Func::Log, &[Int, Int], &[i(2), i(8)]), 3.0);
        assert_eq!(
            prepare(Func::Round, &[dec(5, 2), Int], &[None, None]).unwrap_err(),
            "ROUND of a DECIMAL takes a constant number of digits"
        );
    }

    /// LPAD, RPAD, REPEAT, REVERSE, INITCAP, LEFT and RIGHT as Flink 2.3 answers (each case was
    /// run there).
    #[test]
    fn string_functions_as_flink() {
        let pad =
            |f: Func, x: &str, n: i64, p: &str| call(f, &[Str, Int, Str], &[s(x), i(n), s(p)]);
        assert_eq!(pad(Func::LPad, "abc", 5, "xy"), s("xyabc"));
        assert_eq!(pad(Func::LPad, "abc", 2, "xy"), s("ab"));
        assert_eq!(pad(Func::LPad, "abc", 0, "xy"), s(""));
        assert_eq!(pad(Func::LPad, "abc", -2, "xy"), Datum::Null);
        assert_eq!(pad(Func::LPad, "abc", 5, ""), Datum::Null);
        assert_eq!(pad(Func::LPad, "", 3, "ab"), s("aba"));
        assert_eq!(pad(Func::RPad, "abc", 6, "xy"), s("abcxyx"));
        assert_eq!(pad(Func::RPad, "abc", 1, "xy"), s("a"));
        assert_eq!(pad(Func::RPad, "abc", 5, ""), Datum::Null);
        assert_eq!(pad(Func::RPad, "ÄÖ", 3, "ü"), s("ÄÖü"));
        let two = |f: Func, x: &str, n: i64| call(f, &[Str, Int], &[s(x), i(n)]);
        assert_eq!(two(Func::Repeat, "abc", 3), s("abcabcabc"));
        assert_eq!(two(Func::Repeat, "abc", 0), s(""));
        assert_eq!(two(Func::Repeat, "abc", -2), s(""));
        assert_eq!(two(Func::Repeat, "abc", i64::MAX), Datum::Null);
        assert_eq!(two(Func::Left, "abc", 2), s("ab"));
        assert_eq!(two(Func::Left, "abc", 10), s("abc"));
        assert_eq!(two(Func::Left, "abc", 0), s(""));
        assert_eq!(two(Func::Left, "abc", -2), s(""));
        assert_eq!(two(Func::Left, "ÄÖü", 2), s("ÄÖ"));
        assert_eq!(two(Func::Right, "abc", 2), s("bc"));
        assert_eq!(two(Func::Right, "abc", 10), s("abc"));
        assert_eq!(two(Func::Right, "abc", -2), s(""));
        assert_eq!(two(Func::Right, "ÄÖü", 2), s("Öü"));
        let one = |f: Func, x: &str| call(f, &[Str], &[s(x)]);
        assert_eq!(one(Func::Reverse, "abc"), s("cba"));
        assert_eq!(one(Func::Reverse, "ÄÖü"), s("üÖÄ"));
        assert_eq!(
            one(Func::InitCap, "hello wORLD  x-y_z"),
            s("Hello World  X-Y_Z")
        );
        assert_eq!(one(Func::InitCap, "ÄBC déf"), s("ÄBc DéF"));
        assert_eq!(one(Func::InitCap, "a1b c_d e-f"), s("A1b C_D E-F"));
        for f in [Func::Reverse, Func::InitCap] {
            assert_eq!(call(f, &[Str], &[Datum::Null]), Datum::Null);
        }
        assert_eq!(
            call(Func::Repeat, &[Str, Int], &[Datum::Null, i(2)]),
            Datum::Null
        );
        assert_eq!(lookup("ifnull"), Some(Func::Coalesce));
    }

    /// `LIKE`, as Flink 2.3 answers (each case was run there): per-row and constant patterns
    /// agree.
    #[test]
    fn like_as_flink() {
        let cases: &[(&str, &str, Option<&str>, Option<bool>)] = &[
            ("abc", "a%", None, Some(true)),
            ("abc", "%b%", None, Some(true)),
            ("abc", "_bc", None, Some(true)),
            ("abc", "ab", None, Some(false)),
            ("abc", "ABC", None, Some(false)),
            // No escape without ESCAPE: a backslash is itself.
            ("x%y_z", "x\\%y%", None, Some(false)),
            ("a\\b", "a\\b", None, Some(true)),
            ("a_c", "a\\_c", None, Some(false)),
            ("ab", "a\\", None, Some(false)),
            ("x%y_z", "x!%y%", Some("!"), Some(true)),
            ("xay", "x!%y%", Some("!"), Some(false)),
            ("a%", "a!%", Some("!"), Some(true)),
            ("a!", "a!!", Some("!"), Some(true)),
            ("abc", "a%", Some("a"), Some(false)),
            // `_` is not a line break; `%` takes any.
            ("a\nb", "a_b", None, Some(false)),
            ("a\nb", "a%", None, Some(true)),
            ("", "%", None, Some(true)),
            ("", "_", None, Some(false)),
            ("ÄÖü", "__ü", None, Some(true)),
            // Regular-expression characters are plain.
            ("a.c", "a.c", None, Some(true)),
            ("abc", "a.c", None, Some(false)),
            ("a*c", "a*c", None, Some(true)),
            ("(x)", "(x)", None, Some(true)),
            ("a[b]", "a[b]", None, Some(true)),
            ("a^b$", "a^b$", None, Some(true)),
            ("ab", "a|b", None, Some(false)),
            ("abc", "%%c", None, Some(true)),
            ("Hello World", "%o W%", None, Some(true)),
            ("aXbXc", "%X%X%", None, Some(true)),
        ];
        for (text, pattern, escape, want) in cases {
            let want = want.map_or(Datum::Null, Datum::Bool);
            let mut types = vec![Str, Str];
            let mut args = vec![s(text), s(pattern)];
            if let Some(e) = escape {
                types.push(Str);
                args.push(s(e));
            }
            assert_eq!(
                call(Func::Like, &types, &args),
                want,
                "{text:?} LIKE {pattern:?}"
            );
            assert_eq!(
                call_const(Func::Like, &types, &args),
                want,
                "{text:?} LIKE {pattern:?} (constant)"
            );
        }
        // NULL either side is NULL; a bad escape is a planning error for a constant pattern
        // and NULL per row.
        assert_eq!(
            call(Func::Like, &[Str, Str], &[Datum::Null, s("a")]),
            Datum::Null
        );
        assert_eq!(
            call_const(Func::Like, &[Str, Str], &[s("a"), Datum::Null]),
            Datum::Null
        );
        let bad = |p: &str, e: &str| {
            prepare(
                Func::Like,
                &[Str, Str, Str],
                &[None, Some(s(p)), Some(s(e))],
            )
            .unwrap_err()
        };
        assert_eq!(
            bad("a!b", "!"),
            "invalid escape sequence in the LIKE pattern \"a!b\""
        );
        assert_eq!(
            bad("a!", "!"),
            "invalid escape sequence in the LIKE pattern \"a!\""
        );
        assert_eq!(
            bad("a", "xx"),
            "the ESCAPE of LIKE must be one character, not \"xx\""
        );
        assert_eq!(
            call(Func::Like, &[Str, Str, Str], &[s("ab"), s("a!b"), s("!")]),
            Datum::Null
        );
    }

    #[test]
    fn abs() {
        let f = Func::Abs;
        assert_eq!(call(f, &[BigInt], &[i(-5)]), i(5));
        assert_eq!(call(f, &[BigInt], &[i(5)]), i(5));
        // Java's Math.abs (Flink 2.3 gives -9223372036854775808 for the smallest BIGINT).
        assert_eq!(call(f, &[BigInt], &[i(i64::MIN)]), i(i64::MIN));
        assert_eq!(call(f, &[BigInt], &[i(i64::MIN + 1)]), i(i64::MAX));
        assert_eq!(
            call(f, &[Int], &[i(i64::from(i32::MIN))]),
            i(i64::from(i32::MIN))
        );
        assert_eq!(
            call(f, &[Int], &[i(-i64::from(i32::MAX))]),
            i(i64::from(i32::MAX))
        );
        assert_eq!(
            call(f, &[Double], &[Datum::Double(-1.5)]),
            Datum::Double(1.5)
        );
        assert_eq!(
            call(f, &[Double], &[Datum::Double(f64::NEG_INFINITY)]),
            Datum::Double(f64::INFINITY)
        );
        assert_eq!(
            call(f, &[Decimal(5, 2)], &[Datum::Decimal(-125)]),
            Datum::Decimal(125)
        );
        assert_eq!(
            call(f, &[Decimal(18, 2)], &[Datum::Decimal(i64::MIN)]),
            Datum::Null
        );
        assert_eq!(call(f, &[Int], &[Datum::Null]), Datum::Null);
    }

    #[test]
    fn case_and_length() {
        assert_eq!(
            strings(Func::Lower, &[s("Hello ÄÖ World")]),
            s("hello äö world")
        );
        assert_eq!(strings(Func::Upper, &[s("Hello äö")]), s("HELLO ÄÖ"));
        // Java's "straße".toUpperCase() is "STRASSE", as Rust's.
        assert_eq!(strings(Func::Upper, &[s("straße")]), s("STRASSE"));
        assert_eq!(strings(Func::Lower, &[s("")]), s(""));
        assert_eq!(strings(Func::Lower, &[Datum::Null]), Datum::Null);
        assert_eq!(strings(Func::CharLength, &[s("héllo")]), i(5));
        assert_eq!(strings(Func::CharLength, &[s("")]), i(0));
        // Flink counts code points (BinaryStringData.numChars), not UTF-16 units.
        assert_eq!(strings(Func::CharLength, &[s("😀a")]), i(2));
        assert_eq!(strings(Func::CharLength, &[Datum::Null]), Datum::Null);
    }

    #[test]
    fn trim() {
        assert_eq!(strings(Func::Trim, &[s("  a b  ")]), s("a b"));
        assert_eq!(strings(Func::LTrim, &[s("  a b  ")]), s("a b  "));
        assert_eq!(strings(Func::RTrim, &[s("  a b  ")]), s("  a b"));
        // Spaces only (Flink's TRIM defaults to BOTH ' ').
        assert_eq!(strings(Func::Trim, &[s("\ta\n ")]), s("\ta\n"));
        assert_eq!(strings(Func::Trim, &[s("   ")]), s(""));
        assert_eq!(strings(Func::Trim, &[s("")]), s(""));
        // TRIM(BOTH 'xy' FROM s): any of the characters.
        assert_eq!(strings(Func::Trim, &[s("xyxaxyy"), s("xy")]), s("a"));
        assert_eq!(strings(Func::LTrim, &[s("ééaé"), s("é")]), s("aé"));
        assert_eq!(strings(Func::Trim, &[s(" a "), s("")]), s(" a "));
        assert_eq!(strings(Func::Trim, &[s(" a "), Datum::Null]), Datum::Null);
        assert_eq!(strings(Func::Trim, &[Datum::Null]), Datum::Null);
    }

    #[test]
    fn replace() {
        let r = |a: &str, b: &str, c: &str| strings(Func::Replace, &[s(a), s(b), s(c)]);
        assert_eq!(r("hello world", "o", "0"), s("hell0 w0rld"));
        // Non-overlapping, left to right (Java's String.replace).
        assert_eq!(r("aaa", "aa", "b"), s("ba"));
        assert_eq!(r("abc", "x", "y"), s("abc"));
        assert_eq!(r("abc", "b", ""), s("ac"));
        // Java: "abc".replace("", "-") is "-a-b-c-", and "".replace("", "-") is "-".
        assert_eq!(r("abc", "", "-"), s("-a-b-c-"));
        assert_eq!(r("", "", "-"), s("-"));
        assert_eq!(r("çaça", "ç", "c"), s("caca"));
        assert_eq!(
            strings(Func::Replace, &[s("a"), Datum::Null, s("b")]),
            Datum::Null
        );
    }

    #[test]
    fn regexp_extract() {
        let f = Func::RegexpExtract;
        let types = [Str, Str, Int];
        let re = |a: &str, p: &str, g: i64| {
            let args = [s(a), s(p), i(g)];
            let x = call(f, &types, &args);
            assert_eq!(x, call_const(f, &types, &args));
            x
        };
        // Flink's documented example.
        assert_eq!(re("foothebar", "foo(.*?)(bar)", 2), s("bar"));
        assert_eq!(re("foothebar", "foo(.*?)(bar)", 1), s("the"));
        assert_eq!(re("foothebar", "foo(.*?)(bar)", 0), s("foothebar"));
        // Past the groups, or negative: Java's group() throws, Flink catches it: NULL.
        assert_eq!(re("foothebar", "foo(.*?)(bar)", 3), Datum::Null);
        assert_eq!(re("foothebar", "foo(.*?)(bar)", -1), Datum::Null);
        // No match: NULL; a group that took no part: NULL (Java's group() is null).
        assert_eq!(re("foo", "bar", 0), Datum::Null);
        assert_eq!(re("ab", "a(x)?b", 1), Datum::Null);
        // An empty match is the empty string.
        assert_eq!(re("abc", "x*", 0), s(""));
        // The first match only (Matcher.find).
        assert_eq!(re("a1b22c333", "([0-9]+)", 1), s("1"));
        assert_eq!(re("日本語123", "(\\d+)", 1), s("123"));
        // Flink truncates a BIGINT index to an int: 2^32 + 1 is group 1.
        assert_eq!(
            call(
                f,
                &[Str, Str, BigInt],
                &[s("foothebar"), s("foo(.*?)(bar)"), i((1 << 32) + 1)]
            ),
            s("the")
        );
        // The index defaults to 0 (SqlFunctionUtils.regexpExtract(str, regex)).
        assert_eq!(call(f, &[Str, Str], &[s("foothebar"), s("o+")]), s("oo"));
        assert_eq!(call(f, &types, &[Datum::Null, s("a"), i(0)]), Datum::Null);
        assert_eq!(call(f, &types, &[s("a"), Datum::Null, i(0)]), Datum::Null);
        assert_eq!(call(f, &types, &[s("a"), s("a"), Datum::Null]), Datum::Null);
        assert_eq!(
            call_const(f, &types, &[s("a"), Datum::Null, i(0)]),
            Datum::Null
        );
    }

    #[test]
    fn regexp_extract_bad_patterns() {
        let f = Func::RegexpExtract;
        let err = prepare(f, &[Str, Str], &[None, Some(s("(abc"))]).unwrap_err();
        assert!(
            err.starts_with("REGEXP_EXTRACT: invalid regular expression \"(abc\": "),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
        // Java has lookahead; the regex crate does not: an error, not a silent NULL.
        let err = prepare(f, &[Str, Str], &[None, Some(s("a(?=b)"))]).unwrap_err();
        assert!(!err.contains('\n'), "{err}");
        // Per row, a bad pattern is NULL and a good one after it still works.
        let p = prepare(f, &[Str, Str, Int], &[]).unwrap();
        assert_eq!(p.call_values(&[s("abc"), s("(b"), i(0)]), Datum::Null);
        assert_eq!(p.call_values(&[s("abc"), s("(b)c"), i(1)]), s("b"));
        assert_eq!(p.call_values(&[s("abc"), s("(b)c"), i(0)]), s("bc"));
        assert_eq!(p.call_values(&[s("abc"), s("a"), i(0)]), s("a"));
        let copy = p.clone();
        assert_eq!(copy.call_values(&[s("abc"), s("(b)c"), i(1)]), s("b"));
    }

    #[test]
    fn split_index() {
        let f = Func::SplitIndex;
        let types = [Str, Str, Int];
        let sp = |a: &str, d: &str, n: i64| {
            let args = [s(a), s(d), i(n)];
            let x = call(f, &types, &args);
            assert_eq!(x, call_const(f, &types, &args));
            x
        };
        // Flink's documented example.
        assert_eq!(sp("Jack,John,Mary", ",", 2), s("Mary"));
        assert_eq!(sp("Jack,John,Mary", ",", 0), s("Jack"));
        assert_eq!(sp("Jack,John,Mary", ",", 3), Datum::Null);
        assert_eq!(sp("Jack,John,Mary", ",", -1), Datum::Null);
        // splitByWholeSeparatorPreserveAllTokens keeps empty tokens, leading and trailing too.
        assert_eq!(sp("a,,b", ",", 1), s(""));
        assert_eq!(sp("a,,b", ",", 2), s("b"));
        assert_eq!(sp(",a", ",", 0), s(""));
        assert_eq!(sp("a,", ",", 1), s(""));
        assert_eq!(sp(",", ",", 1), s(""));
        assert_eq!(sp("abc", ",", 0), s("abc"));
        // Commons: "ab-!-cd-!-ef" by "-!-" is [ab, cd, ef].
        assert_eq!(sp("ab-!-cd-!-ef", "-!-", 1), s("cd"));
        // Commons gives [] for an empty string.
        assert_eq!(sp("", ",", 0), Datum::Null);
        // An empty separator splits at whitespace, keeping empty tokens:
        // "ab   de fg" is [ab, "", "", de, fg].
        assert_eq!(sp("ab   de fg", "", 0), s("ab"));
        assert_eq!(sp("ab   de fg", "", 1), s(""));
        assert_eq!(sp("ab   de fg", "", 3), s("de"));
        assert_eq!(sp("ab\tde", "", 1), s("de"));
        // No-break spaces are not Java whitespace.
        assert_eq!(sp("a\u{A0}b", "", 0), s("a\u{A0}b"));
        assert_eq!(sp("日本,語", ",", 1), s("語"));
        // One character of several bytes is a substring search.
        assert_eq!(sp("日本,語", "本", 1), s(",語"));
        assert_eq!(sp("a/b//c", "/", 3), s("c"));
        assert_eq!(sp("a,b", ",", i64::MAX), Datum::Null);
        assert_eq!(sp("a,b", ",", i64::MIN), Datum::Null);
        assert_eq!(call(f, &types, &[s("a,b"), Datum::Null, i(0)]), Datum::Null);
        // SPLIT_INDEX(s, character code, index): ',' is 44; codes outside 1..255 are NULL.
        assert_eq!(call(f, &[Str, Int, Int], &[s("a,b"), i(44), i(1)]), s("b"));
        assert_eq!(
            call(f, &[Str, Int, Int], &[s("a,b"), i(0), i(0)]),
            Datum::Null
        );
        assert_eq!(
            call(f, &[Str, Int, Int], &[s("a,b"), i(256), i(0)]),
            Datum::Null
        );
    }

    #[test]
    fn substring() {
        let f = Func::Substring;
        let sub = |a: &str, p: i64, l: Option<i64>| match l {
            Some(l) => call(f, &[Str, Int, Int], &[s(a), i(p), i(l)]),
            None => call(f, &[Str, Int], &[s(a), i(p)]),
        };
        // BinaryStringDataUtil.substringSQL.
        assert_eq!(sub("hello", 2, Some(3)), s("ell"));
        assert_eq!(sub("hello", 1, None), s("hello"));
        assert_eq!(sub("hello", 2, None), s("ello"));
        assert_eq!(sub("hello", 0, Some(2)), s("he"));
        assert_eq!(sub("hello", 5, Some(1)), s("o"));
        assert_eq!(sub("hello", 6, Some(1)), s(""));
        assert_eq!(sub("hello", 2, Some(100)), s("ello"));
        assert_eq!(sub("hello", 2, Some(0)), s(""));
        // A negative length is NULL; a negative start counts from the end.
        assert_eq!(sub("hello", 2, Some(-1)), Datum::Null);
        assert_eq!(sub("hello", -3, None), s("llo"));
        assert_eq!(sub("hello", -3, Some(2)), s("ll"));
        assert_eq!(sub("hello", -5, None), s("hello"));
        assert_eq!(sub("hello", -6, None), s(""));
        assert_eq!(sub("", 1, Some(1)), s(""));
        assert_eq!(sub("", 1, Some(-1)), Datum::Null);
        assert_eq!(sub("héllo wörld", 2, Some(4)), s("éllo"));
        assert_eq!(sub("héllo wörld", -5, Some(2)), s("wö"));
        assert_eq!(sub("hello", i64::MIN, Some(i64::MAX)), s(""));
        assert_eq!(sub("hello", i64::MAX, Some(i64::MAX)), s(""));
        assert_eq!(sub("hello", 1, Some(i64::MAX)), s("hello"));
        assert_eq!(call(f, &[Str, Int], &[s("a"), Datum::Null]), Datum::Null);
        assert_eq!(
            call(f, &[Str, Int, Int], &[s("a"), i(1), Datum::Null]),
            Datum::Null
        );
    }

    #[test]
    fn position() {
        let p = |n: &str, h: &str| strings(Func::Position, &[s(n), s(h)]);
        assert_eq!(p("lo", "hello"), i(4));
        assert_eq!(p("h", "hello"), i(1));
        assert_eq!(p("x", "hello"), i(0));
        // An empty needle is at 1 (BinaryStringData.indexOf gives 0 for it).
        assert_eq!(p("", "hello"), i(1));
        assert_eq!(p("", ""), i(1));
        assert_eq!(p("a", ""), i(0));
        // Character positions, not bytes.
        assert_eq!(p("é", "hhéé"), i(3));
        assert_eq!(strings(Func::Position, &[Datum::Null, s("a")]), Datum::Null);
    }

    #[test]
    fn concat() {
        assert_eq!(strings(Func::Concat, &[s("a"), s("b"), s("c")]), s("abc"));
        assert_eq!(strings(Func::Concat, &[s("é")]), s("é"));
        assert_eq!(strings(Func::Concat, &[s(""), s("")]), s(""));
        assert_eq!(strings(Func::Concat, &[s("a"), Datum::Null]), Datum::Null);
        // Flink's documented example: CONCAT_WS('~', 'AA', NULL, 'BB', '', 'CC') = 'AA~BB~~CC'.
        assert_eq!(
            strings(
                Func::ConcatWs,
                &[s("~"), s("AA"), Datum::Null, s("BB"), s(""), s("CC")]
            ),
            s("AA~BB~~CC")
        );
        assert_eq!(
            strings(Func::ConcatWs, &[Datum::Null, s("a"), s("b")]),
            Datum::Null
        );
        assert_eq!(strings(Func::ConcatWs, &[s(","), Datum::Null]), s(""));
        assert_eq!(strings(Func::ConcatWs, &[s(",")]), s(""));
    }

    #[test]
    fn count_char_is_nexmarks_udf() {
        let c = |a: Datum, b: Datum| strings(Func::CountChar, &[a, b]);
        assert_eq!(c(s("hello"), s("l")), i(2));
        assert_eq!(c(s("hello"), s("z")), i(0));
        assert_eq!(c(s(""), s("l")), i(0));
        // Only the first byte of the second argument counts.
        assert_eq!(c(s("hello"), s("lo")), i(2));
        // CountChar.eval returns 0 for a null string.
        assert_eq!(c(Datum::Null, s("l")), i(0));
        assert_eq!(c(Datum::Null, Datum::Null), i(0));
        // Java throws for a null or empty character: NULL here.
        assert_eq!(c(s("hello"), Datum::Null), Datum::Null);
        assert_eq!(c(s("hello"), s("")), Datum::Null);
        // Bytes: 'é' (C3 A9) and 'è' (C3 A8) share their first byte.
        assert_eq!(c(s("éèe"), s("é")), i(2));
    }

    #[test]
    fn time_parts() {
        let t = ts("2024-01-01 08:05:03.004");
        let part = |f: Func, t: &Datum| call(f, &[Ts], std::slice::from_ref(t));
        assert_eq!(part(Func::Year, &t), i(2024));
        assert_eq!(part(Func::Month, &t), i(1));
        assert_eq!(part(Func::DayOfMonth, &t), i(1));
        assert_eq!(part(Func::Hour, &t), i(8));
        assert_eq!(part(Func::Minute, &t), i(5));
        assert_eq!(part(Func::Second, &t), i(3));
        let t = ts("2000-02-29 23:59:59.999");
        assert_eq!(part(Func::Month, &t), i(2));
        assert_eq!(part(Func::DayOfMonth, &t), i(29));
        assert_eq!(part(Func::Hour, &t), i(23));
        // Before 1970: the calendar's values (Flink's `%` would give -1 for this hour).
        let t = ts("1969-12-31 23:00:00");
        assert_eq!(part(Func::Year, &t), i(1969));
        assert_eq!(part(Func::Hour, &t), i(23));
        assert_eq!(part(Func::Hour, &Datum::Null), Datum::Null);
        assert_eq!(
            part(Func::Year, &Datum::Timestamp(i64::MIN)),
            i(-292_275_055)
        );
    }

    #[test]
    fn date_format_patterns() {
        let t = ts("2024-01-01 08:05:03.004");
        let fmt = |t: &Datum, p: &str| {
            let args = [t.clone(), s(p)];
            let x = call(Func::DateFormat, &[Ts, Str], &args);
            assert_eq!(x, call_const(Func::DateFormat, &[Ts, Str], &args), "{p}");
            x
        };
        assert_eq!(
            fmt(&t, "yyyy-MM-dd HH:mm:ss.SSS"),
            s("2024-01-01 08:05:03.004")
        );
        assert_eq!(fmt(&t, "y-M-d H:m:s"), s("2024-1-1 8:5:3"));
        assert_eq!(fmt(&t, "yy/MM"), s("24/01"));
        // DateTimeFormatter's S is the fraction: S = tenths, SSSS = 0040.
        assert_eq!(fmt(&t, "S|SS|SSSS|SSSSSSSSS"), s("0|00|0040|004000000"));
        assert_eq!(
            fmt(&t, "EEE, d MMM yyyy hh:mm a"),
            s("Mon, 1 Jan 2024 08:05 AM")
        );
        assert_eq!(fmt(&t, "EEEE MMMM"), s("Monday January"));
        assert_eq!(fmt(&t, "EEEEE MMMMM"), s("M J"));
        assert_eq!(
            fmt(&t, "D DD DDD Q QQ QQQ QQQQ G GGGG"),
            s("1 01 001 1 01 Q1 1st quarter AD Anno Domini")
        );
        // Quotes: 'T' is text and '' a quote, inside quotes too.
        assert_eq!(fmt(&t, "yyyy'T'HH''mm"), s("2024T08'05"));
        assert_eq!(fmt(&t, "'o''clock' h"), s("o'clock 8"));
        assert_eq!(fmt(&t, "''"), s("'"));
        assert_eq!(fmt(&t, "[yyyy]"), s("2024"));
        assert_eq!(fmt(&t, "日付 yyyy"), s("日付 2024"));
        assert_eq!(fmt(&t, ""), s(""));
        let pm = ts("2023-12-31 12:30:00");
        assert_eq!(fmt(&pm, "h:mm a, K k E D"), s("12:30 PM, 0 12 Sun 365"));
        let midnight = ts("2023-07-15 00:00:00");
        assert_eq!(fmt(&midnight, "h a k K H"), s("12 AM 24 0 0"));
        assert_eq!(fmt(&midnight, "Q QQQQ"), s("3 3rd quarter"));
        // Year 0 is 1 BC: year of era 1, proleptic year 0.
        let bc = ts("0000-06-01 00:00:00");
        assert_eq!(fmt(&bc, "y G u"), s("1 BC 0"));
        assert_eq!(fmt(&bc, "yyyy"), s("0001"));
        // A year past the pad width gets a '+' (SignStyle.EXCEEDS_PAD).
        let far = Datum::Timestamp(parse_timestamp("9999-12-31 00:00:00").unwrap() + 86_400_000);
        assert_eq!(fmt(&far, "yyyy-MM-dd"), s("+10000-01-01"));
        assert_eq!(fmt(&far, "y"), s("10000"));
        assert_eq!(fmt(&Datum::Null, "yyyy"), Datum::Null);
        assert_eq!(
            call(Func::DateFormat, &[Ts, Str], &[t.clone(), Datum::Null]),
            Datum::Null
        );
        assert_eq!(
            call_const(Func::DateFormat, &[Ts, Str], &[t, Datum::Null]),
            Datum::Null
        );
    }

    /// A fixed pattern's text is remembered per span of its finest unit: over timestamps that
    /// step forward and back across span boundaries (and before 1970), with more patterns
    /// than a thread remembers (so they share slots), every text equals the one formatted
    /// afresh from a pattern given per row.
    #[test]
    fn date_format_memo_agrees_with_formatting_each_time() {
        let patterns = [
            "yyyy-MM-dd",
            "HH:mm",
            "HH:mm:ss.SSS",
            "a h",
            "yyyy",
            "'at' ss",
            "EEE",
            "D",
            "mm",
            "''",
            "HH",
        ];
        let prepared: Vec<Prepared> = patterns
            .iter()
            .map(|p| prepare(Func::DateFormat, &[Ts, Str], &[None, Some(s(p))]).expect("prepares"))
            .collect();
        let per_row = prepare(Func::DateFormat, &[Ts, Str], &[]).expect("prepares");
        let mut ms: i64 = -86_400_000 * 3 - 1;
        let mut x: u64 = 7;
        for _ in 0..5_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Mostly small steps forward, sometimes a jump back or across a day.
            ms += match x >> 60 {
                0 => -3_600_000,
                1 => 86_400_000 - 1,
                2 => -1,
                _ => ((x >> 20) % 40_000) as i64,
            };
            let t = Datum::Timestamp(ms);
            for (p, call) in patterns.iter().zip(&prepared) {
                let expected = per_row.call_values(&[t.clone(), s(p)]);
                assert_ne!(expected, Datum::Null);
                assert_eq!(
                    call.call_values(&[t.clone(), s(p)]),
                    expected,
                    "{p} at {ms}"
                );
            }
        }
    }

    #[test]
    fn date_format_of_strings() {
        let fmt = |t: &str, p: &str| call(Func::DateFormat, &[Str, Str], &[s(t), s(p)]);
        assert_eq!(
            fmt("2024-01-01 08:05:03", "yyyy/MM/dd HH"),
            s("2024/01/01 08")
        );
        // SimpleDateFormat("yyyy-MM-dd HH:mm:ss") drops the fraction and needs the time.
        assert_eq!(
            fmt("2024-01-01 08:05:03.004", "HH:mm:ss.SSS"),
            s("08:05:03.000")
        );
        assert_eq!(fmt("2024-01-01", "yyyy"), Datum::Null);
        assert_eq!(fmt("yesterday", "yyyy"), Datum::Null);
        assert_eq!(fmt("", "yyyy"), Datum::Null);
        // A pattern that does not compile, per row: NULL.
        assert_eq!(fmt("2024-01-01 08:05:03", "ddd"), Datum::Null);
    }

    #[test]
    fn date_format_bad_patterns() {
        let bad = |p: &str| {
            let err = prepare(Func::DateFormat, &[Ts, Str], &[None, Some(s(p))]).unwrap_err();
            assert!(err.starts_with("DATE_FORMAT: invalid pattern "), "{err}");
            assert!(!err.contains('\n'), "{err}");
            err
        };
        assert!(bad("ddd").contains("too many pattern letters 'd'"));
        assert!(bad("HHH").contains("'H'"));
        assert!(bad("aa").contains("'a'"));
        assert!(bad("SSSSSSSSSS").contains("'S'"));
        assert!(bad("yyyy 'unclosed").contains("quoted literal"));
        assert!(bad("yyyy]").contains("']'"));
        assert!(bad("yyyy#").contains("reserved"));
        assert!(bad("b").contains("unknown pattern letter 'b'"));
        assert!(bad("Z").contains("time zone"));
        assert!(bad("ww").contains("not supported"));
        assert!(prepare(Func::DateFormat, &[Ts, Str], &[None, Some(s("'[a]'"))]).is_ok());
    }

    #[test]
    fn nexmark_uses() {
        let url = "https://www.nexmark.com/abc/def/ghi/item.htm?query=1&channel_id=1234";
        // Q? (channel): REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2).
        let p = prepare(
            Func::RegexpExtract,
            &[Str, Str, Int],
            &[None, Some(s("(&|^)channel_id=([^&]*)")), Some(i(2))],
        )
        .unwrap();
        assert_eq!(
            p.call_values(&[s(url), s("(&|^)channel_id=([^&]*)"), i(2)]),
            s("1234")
        );
        assert_eq!(
            p.call_values(&[
                s("https://www.nexmark.com/abc/def/ghi/item.htm?query=1"),
                s("x"),
                i(2)
            ]),
            Datum::Null
        );
        // SPLIT_INDEX(url, '/', 3) and 5.
        let split = prepare(
            Func::SplitIndex,
            &[Str, Str, Int],
            &[None, Some(s("/")), None],
        )
        .unwrap();
        assert_eq!(split.call_values(&[s(url), s("/"), i(3)]), s("abc"));
        assert_eq!(split.call_values(&[s(url), s("/"), i(5)]), s("ghi"));
        assert_eq!(
            split.call_values(&[s(url), s("/"), i(2)]),
            s("www.nexmark.com")
        );
        assert_eq!(split.call_values(&[s(url), s("/"), i(1)]), s(""));
        // DATE_FORMAT(dateTime, 'yyyy-MM-dd') and 'HH:mm'.
        let t = ts("2024-01-01 08:05:03.004");
        for (pattern, want) in [("yyyy-MM-dd", "2024-01-01"), ("HH:mm", "08:05")] {
            let p = prepare(Func::DateFormat, &[Ts, Str], &[None, Some(s(pattern))]).unwrap();
            assert_eq!(p.call_values(&[t.clone(), s(pattern)]), s(want));
        }
    }

    #[test]
    fn prepared_calls_are_send_sync_clone() {
        fn check<T: Send + Sync + Clone + std::fmt::Debug>() {}
        check::<Prepared>();
        let p = prepare(Func::Upper, &[Str], &[None]).unwrap();
        assert_eq!(p.func(), Func::Upper);
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn string(&mut self) -> String {
            const PIECES: &[&str] = &[
                "a", "b", "Z", " ", "/", ",", "&", "=", "'", "''", "(", ")", "[", "]", "*", "?",
                "\\", "é", "ß", "日", "😀", "\t", "\u{A0}", "y", "M", "d", "H", "S", "E", "a", "{",
                "#", "-!-", "", ".", "^", "$", "+",
            ];
            let n = self.below(8);
            (0..n).map(|_| PIECES[self.below(PIECES.len())]).collect()
        }

        fn int(&mut self) -> i64 {
            const EDGES: &[i64] = &[
                0,
                1,
                -1,
                2,
                3,
                5,
                44,
                255,
                256,
                i32::MAX as i64,
                i32::MIN as i64,
                i64::MAX,
                i64::MIN,
                i64::MIN + 1,
                1 << 32,
            ];
            if self.below(2) == 0 {
                EDGES[self.below(EDGES.len())]
            } else {
                self.next() as i64 >> self.below(64)
            }
        }

        fn datum(&mut self) -> Datum {
            match self.below(8) {
                0 => Datum::Null,
                1 | 2 => Datum::Int(self.int()),
                3 => Datum::Double([0.0, -1.5, f64::NAN, f64::INFINITY, f64::MIN][self.below(5)]),
                4 => Datum::Decimal(self.int()),
                5 => Datum::Timestamp(self.int()),
                _ => Datum::str(&self.string()),
            }
        }

        fn sql_type(&mut self) -> SqlType {
            match self.below(9) {
                0 => SqlType::Null,
                1 => Int,
                2 => BigInt,
                3 => Double,
                4 => Decimal(self.below(40) as u8, self.below(40) as u8),
                5 => Ts,
                6 => SqlType::Boolean,
                _ => Str,
            }
        }
    }

    #[test]
    fn calls_never_panic() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..30_000 {
            let f = Func::ALL[rng.below(Func::ALL.len())];
            let n = rng.below(5);
            // Mostly the types the function wants, so that the calls get past prepare.
            let types: Vec<SqlType> = (0..n)
                .map(|_| match rng.below(3) {
                    0 => rng.sql_type(),
                    _ => [Str, Int, Ts][rng.below(3)].clone(),
                })
                .collect();
            let args: Vec<Datum> = (0..n).map(|_| rng.datum()).collect();
            let constants: Vec<Option<Datum>> = args
                .iter()
                .map(|a| (rng.below(2) == 0).then(|| a.clone()))
                .collect();
            let _ = return_type(f, &types);
            if let Ok(p) = prepare(f, &types, &constants) {
                let _ = p.call_values(&args);
                // Values that do not fit the types, and too few or too many of them.
                let wild: Vec<Datum> = (0..rng.below(5)).map(|_| rng.datum()).collect();
                let _ = p.call_values(&wild);
                let _ = p.call_values(&[]);
            }
            if round % 7 == 0 {
                let pattern = rng.string();
                let _ = parse_date_pattern(&pattern);
                let _ = call(
                    Func::DateFormat,
                    &[Ts, Str],
                    &[Datum::Timestamp(rng.int()), s(&pattern)],
                );
                let _ = call(
                    Func::RegexpExtract,
                    &[Str, Str, BigInt],
                    &[s(&rng.string()), s(&pattern), i(rng.int())],
                );
            }
        }
    }

    #[test]
    fn string_functions_never_panic_on_odd_positions() {
        let mut rng = Rng(12345);
        for _ in 0..20_000 {
            let text = rng.string();
            let (a, b) = (rng.int(), rng.int());
            let _ = call(
                Func::Substring,
                &[Str, BigInt, BigInt],
                &[s(&text), i(a), i(b)],
            );
            let _ = call(Func::Substring, &[Str, BigInt], &[s(&text), i(a)]);
            let _ = call(
                Func::SplitIndex,
                &[Str, Str, BigInt],
                &[s(&text), s(&rng.string()), i(a)],
            );
            let _ = call(
                Func::SplitIndex,
                &[Str, BigInt, BigInt],
                &[s(&text), i(b), i(a)],
            );
            let _ = call(Func::Position, &[Str, Str], &[s(&rng.string()), s(&text)]);
            let _ = call(
                Func::Replace,
                &[Str, Str, Str],
                &[s(&text), s(&rng.string()), s(&rng.string())],
            );
            let _ = call(Func::Trim, &[Str, Str], &[s(&text), s(&rng.string())]);
            let _ = call(Func::Year, &[Ts], &[Datum::Timestamp(a)]);
            let _ = call(
                Func::Mod,
                &[Decimal(18, (b & 31) as u8), Decimal(18, (a & 31) as u8)],
                &[Datum::Decimal(a), Datum::Decimal(b)],
            );
            // Substring agrees with a char-vector model of substringSQL.
            if (-20..20).contains(&a) && (-5..20).contains(&b) {
                let chars: Vec<char> = text.chars().collect();
                let n = chars.len() as i64;
                let want = if b < 0 {
                    None
                } else if chars.is_empty() {
                    Some(String::new())
                } else {
                    let start = if a > 0 {
                        a - 1
                    } else if a < 0 {
                        n + a
                    } else {
                        0
                    };
                    if start < 0 || start >= n {
                        Some(String::new())
                    } else {
                        let end = (start + b).min(n);
                        Some(chars[start as usize..end as usize].iter().collect())
                    }
                };
                let got = call(Func::Substring, &[Str, Int, Int], &[s(&text), i(a), i(b)]);
                assert_eq!(got, want.map_or(Datum::Null, |w| s(&w)), "{text:?} {a} {b}");
            }
        }
    }
}
