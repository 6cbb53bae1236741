//! Rows as text: JSON arrays for files and tests (the format of `shared/nexmark`'s expected
//! results), Flink's `+I[...]` for `print`, and a value's text for `CAST(x AS STRING)`.
//!
//! In JSON, `INT`/`BIGINT` are numbers, `DECIMAL` a string with exactly its scale's decimals
//! (`"18002.008"`), `TIMESTAMP(3)` a `"YYYY-MM-DD HH:MM:SS.mmm"` string, `DOUBLE` a number,
//! `ROW` an array of its fields, `NULL` `null`.

use crate::types::{format_decimal, format_timestamp, Datum, SqlType};

/// Appends `row` (of `types`) as a JSON array.
pub fn write_json_row(row: &[Datum], types: &[SqlType], out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, (d, t)) in row.iter().zip(types).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json(d, t, out);
    }
    out.push(b']');
}

/// Appends one value as JSON.
pub fn write_json(d: &Datum, ty: &SqlType, out: &mut Vec<u8>) {
    match d {
        Datum::Null => out.extend_from_slice(b"null"),
        Datum::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Datum::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Datum::Double(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => out.extend_from_slice(n.to_string().as_bytes()),
            None => out.extend_from_slice(b"null"),
        },
        Datum::Decimal(_) | Datum::Timestamp(_) => {
            let mut s = String::new();
            write_text(d, ty, &mut s);
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        }
        Datum::Str(s) => {
            // Writing a `str` into a `Vec` cannot fail.
            let _ = serde_json::to_writer(&mut *out, &**s);
        }
        Datum::Row(fields) => {
            let types: Vec<SqlType> = match ty {
                SqlType::Row(f) => f.iter().map(|(_, t)| t.clone()).collect(),
                _ => vec![SqlType::Null; fields.len()],
            };
            write_json_row(fields, &types, out);
        }
    }
}

/// Appends the columns `which` of `row` as one JSON object, as Flink's `json` format writes
/// a row: named by `columns`, a `ROW` as a nested object, a `DECIMAL` as a number with its
/// scale's decimals, a `TIMESTAMP(3)` as `"2024-01-01 00:00:00.000"`, `NULL` as `null`.
pub fn write_flink_json(
    row: &[Datum],
    columns: &[(String, SqlType)],
    which: &[usize],
    out: &mut Vec<u8>,
) {
    out.push(b'{');
    for (i, &c) in which.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let (name, ty) = &columns[c];
        // Writing a `str` into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *out, name.as_str());
        out.push(b':');
        write_flink_value(row.get(c).unwrap_or(&Datum::Null), ty, out);
    }
    out.push(b'}');
}

fn write_flink_value(d: &Datum, ty: &SqlType, out: &mut Vec<u8>) {
    match (d, ty) {
        (Datum::Row(fields), SqlType::Row(names)) => {
            let all: Vec<usize> = (0..names.len()).collect();
            write_flink_json(fields, names, &all, out);
        }
        (Datum::Decimal(_), _) => {
            let mut s = String::new();
            write_text(d, ty, &mut s);
            out.extend_from_slice(s.as_bytes());
        }
        _ => write_json(d, ty, out),
    }
}

/// Appends a value's text, as `CAST(x AS STRING)` gives it (`NULL` as `NULL`).
pub fn write_text(d: &Datum, ty: &SqlType, out: &mut String) {
    use std::fmt::Write;
    match d {
        Datum::Null => out.push_str("NULL"),
        Datum::Bool(b) => out.push_str(if *b { "TRUE" } else { "FALSE" }),
        Datum::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Datum::Double(f) => java_double(*f, out),
        Datum::Decimal(i) => format_decimal(*i, ty.scale(), out),
        Datum::Timestamp(ms) => format_timestamp(*ms, out),
        Datum::Str(s) => out.push_str(s),
        Datum::Row(fields) => write_fields(fields, ty, out, write_text),
    }
}

/// Appends a nested row's fields as `(a, b)`, each written by `write`.
fn write_fields(
    fields: &[Datum],
    ty: &SqlType,
    out: &mut String,
    write: fn(&Datum, &SqlType, &mut String),
) {
    out.push('(');
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let t = match ty {
            SqlType::Row(ts) => ts.get(i).map_or(SqlType::Null, |(_, t)| t.clone()),
            _ => SqlType::Null,
        };
        write(f, &t, out);
    }
    out.push(')');
}

/// Appends a double as Java's `Double.toString` does (Flink's `CAST(d AS STRING)`):
/// `2.5`, `100.0`, `1.0E20`, `1.5E-5`, `NaN`, `Infinity`.
fn java_double(f: f64, out: &mut String) {
    use std::fmt::Write;
    if f.is_nan() {
        out.push_str("NaN");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
    } else if f == 0.0 || (1e-3..1e7).contains(&f.abs()) {
        let text = format!("{f}");
        out.push_str(&text);
        if !text.contains('.') {
            out.push_str(".0");
        }
    } else {
        let text = format!("{f:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        out.push_str(mantissa);
        if !mantissa.contains('.') {
            out.push_str(".0");
        }
        let _ = write!(out, "E{exponent}");
    }
}

/// Appends a value as Flink's `Row.toString()` writes it (the `print` connector, the SQL
/// client's changelog): `null` for NULL, `true`/`false`, timestamps as Java's
/// `LocalDateTime` (`2024-01-01T00:00:04.400`, with `:ss` and `.SSS` left out when zero),
/// rows as `(a, b)`; other values as their text.
pub fn write_print(d: &Datum, ty: &SqlType, out: &mut String) {
    use std::fmt::Write;
    match d {
        Datum::Null => out.push_str("null"),
        Datum::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Datum::Timestamp(ms) => {
            let (y, mo, day, h, mi, sec, milli) = crate::types::timestamp_parts(*ms);
            let _ = write!(out, "{y:04}-{mo:02}-{day:02}T{h:02}:{mi:02}");
            if sec != 0 || milli != 0 {
                let _ = write!(out, ":{sec:02}");
            }
            if milli != 0 {
                let _ = write!(out, ".{milli:03}");
            }
        }
        Datum::Row(fields) => write_fields(fields, ty, out, write_print),
        other => write_text(other, ty, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_print_as_the_expected_results_do() {
        let row = vec![
            Datum::Int(1000),
            Datum::Decimal(18_002_008),
            Datum::Timestamp(1_704_067_204_400),
            Datum::str("a\"b"),
            Datum::Null,
        ];
        let types = [
            SqlType::BigInt,
            SqlType::Decimal(23, 3),
            SqlType::Timestamp,
            SqlType::String,
            SqlType::BigInt,
        ];
        let mut out = Vec::new();
        write_json_row(&row, &types, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"[1000,"18002.008","2024-01-01 00:00:04.400","a\"b",null]"#
        );
    }

    #[test]
    fn printed_values_are_flinks_row_to_string() {
        let text = |d: Datum, t: SqlType| {
            let mut out = String::new();
            write_print(&d, &t, &mut out);
            out
        };
        assert_eq!(text(Datum::Null, SqlType::BigInt), "null");
        assert_eq!(text(Datum::Bool(true), SqlType::Boolean), "true");
        let t = |s| crate::types::parse_timestamp(s).unwrap();
        assert_eq!(
            text(
                Datum::Timestamp(t("2024-01-01 00:00:04.400")),
                SqlType::Timestamp
            ),
            "2024-01-01T00:00:04.400"
        );
        assert_eq!(
            text(
                Datum::Timestamp(t("2024-01-01 10:20:00")),
                SqlType::Timestamp
            ),
            "2024-01-01T10:20"
        );
        assert_eq!(
            text(
                Datum::Timestamp(t("2024-01-01 10:20:07")),
                SqlType::Timestamp
            ),
            "2024-01-01T10:20:07"
        );
        assert_eq!(text(Datum::Decimal(5), SqlType::Decimal(10, 3)), "0.005");
    }

    /// Flink's `json` format: an object per row, a nested object per `ROW`, a `DECIMAL` as a
    /// number, a `TIMESTAMP(3)` as SQL text; only the columns asked for, in their order.
    #[test]
    fn a_row_is_written_as_flinks_json_object() {
        let columns = vec![
            ("id".to_owned(), SqlType::BigInt),
            ("price".to_owned(), SqlType::Decimal(10, 2)),
            (
                "who".to_owned(),
                SqlType::Row(vec![
                    ("name".to_owned(), SqlType::String),
                    ("at".to_owned(), SqlType::Timestamp),
                ]),
            ),
            ("note".to_owned(), SqlType::String),
        ];
        let row = vec![
            Datum::Int(7),
            Datum::Decimal(-1250),
            Datum::Row(vec![Datum::str("a\"b"), Datum::Timestamp(1_704_067_200_001)].into()),
            Datum::Null,
        ];
        let mut out = Vec::new();
        write_flink_json(&row, &columns, &[0, 1, 2, 3], &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"id":7,"price":-12.50,"who":{"name":"a\"b","at":"2024-01-01 00:00:00.001"},"note":null}"#
        );
        let mut key = Vec::new();
        write_flink_json(&row, &columns, &[1, 0], &mut key);
        assert_eq!(
            String::from_utf8(key).unwrap(),
            r#"{"price":-12.50,"id":7}"#
        );
    }
}
