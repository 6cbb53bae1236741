//! Property tests of the deserializer against its oracle, `serde_json::from_str`: random JSON
//! texts (valid ones, and mutated ones) decoded into several targets must give the same
//! values, or both an error.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

use super::de;

#[derive(Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Rec {
    s: Option<String>,
    n: i64,
    u: Option<u64>,
    f: Option<f64>,
    b: Option<bool>,
    v: Option<Vec<i64>>,
    o: Option<Inner>,
    e: Option<Kind>,
    #[serde(default)]
    d: u32,
    big: Option<i128>,
    m: Option<BTreeMap<String, i32>>,
    t: Option<(i8, String)>,
}

#[derive(Debug, Deserialize, Serialize, PartialEq)]
struct Inner {
    x: Option<String>,
    y: Vec<f64>,
}

#[derive(Debug, Deserialize, Serialize, PartialEq)]
enum Kind {
    A,
    B(i64),
    C { x: String },
    D(i16, bool),
}

/// A projection of [`Rec`]: two of its fields.
#[derive(Debug, Deserialize, Serialize, PartialEq)]
struct Proj {
    n: i64,
    s: Option<String>,
}

/// Random whitespace, sometimes none.
fn ws() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "", "", " ", "\n", "\t", " \r\n ", "  "])
}

/// Numbers, at the edges of the integer types and of floats.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "-0",
            "-0.0",
            "0.0",
            "1",
            "-1",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "18446744073709551616",
            "123456789012345678901234567890",
            "1e2",
            "1E+2",
            "1e-2",
            "-1.5e-3",
            "2.2250738585072011e-308",
            "1.7976931348623157e308",
            "1e309",
            "1e-400",
            "4.9e-324",
            "0.1",
            "3.141592653589793",
            "1e0",
            "-0e0",
            "100000000000000000000.5",
        ])
        .prop_map(String::from),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i32>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:?}")),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        (any::<u32>(), any::<u8>(), -30i32..30).prop_map(|(m, f, e)| format!("{m}.{f}e{e}")),
    ]
}

/// Strings with escapes, unicode and lone surrogates.
fn string() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "a",
        "b",
        "xyz",
        "n",
        "s",
        " ",
        "é",
        "日本",
        "😀",
        "\\\"",
        "\\\\",
        "\\/",
        "\\n",
        "\\t",
        "\\b",
        "\\f",
        "\\r",
        "\\u0041",
        "\\u00e9",
        "\\u65e5",
        "\\ud83d\\ude00",
        "\\uD83D\\uDE00",
        "\\ud800",
        "\\udc00",
        "\\ud83d\\u0041",
        "\\u0000",
        "0",
        "-",
        "{",
        "[",
        "]",
        ":",
        ",",
    ]);
    prop::collection::vec(piece, 0..6).prop_map(|p| format!("\"{}\"", p.concat()))
}

/// Keys: mostly [`Rec`]'s fields (so that duplicates and fields of a wrong type occur).
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "s", "n", "u", "f", "b", "v", "o", "e", "d", "big", "m", "t", "x", "y", "A", "B", "C",
            "D", "zz", "1", "-2",
        ])
        .prop_map(|k| format!("\"{k}\"")),
        1 => string(),
    ]
}

/// Any JSON value, nested, with random whitespace.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        number(),
        string(),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec((inner.clone(), ws(), ws()), 0..6).prop_map(|items| {
                let items: Vec<String> = items
                    .into_iter()
                    .map(|(v, a, b)| format!("{a}{v}{b}"))
                    .collect();
                format!("[{}]", items.join(","))
            }),
            prop::collection::vec((key(), inner, ws(), ws()), 0..6).prop_map(|fields| {
                let fields: Vec<String> = fields
                    .into_iter()
                    .map(|(k, v, a, b)| format!("{a}{k}{b}:{a}{v}{b}"))
                    .collect();
                format!("{{{}}}", fields.join(","))
            }),
        ]
    })
}

/// A value for one of [`Rec`]'s fields, mostly of the right type.
fn field_value(key: &'static str) -> BoxedStrategy<String> {
    let right: BoxedStrategy<String> = match key {
        "s" => string().boxed(),
        "n" | "u" | "f" | "d" | "big" => number().boxed(),
        "b" => prop::sample::select(vec!["true", "false", "null"])
            .prop_map(String::from)
            .boxed(),
        "v" => prop::collection::vec(any::<i64>(), 0..4)
            .prop_map(|v| format!("{v:?}"))
            .boxed(),
        "o" => (
            prop::option::of(string()),
            prop::collection::vec(number(), 0..3),
        )
            .prop_map(|(x, y)| match x {
                Some(x) => format!("{{\"y\":[{}],\"x\":{x}}}", y.join(",")),
                None => format!("{{\"y\":[{}]}}", y.join(",")),
            })
            .boxed(),
        "e" => prop_oneof![
            Just("\"A\"".to_string()),
            Just("{\"A\":null}".to_string()),
            number().prop_map(|n| format!("{{\"B\":{n}}}")),
            string().prop_map(|s| format!("{{ \"C\" : {{\"x\":{s}}} }}")),
            string().prop_map(|s| format!("{{\"C\":[{s}]}}")),
            Just("{\"D\":[7,true]}".to_string()),
            Just("{\"D\":[7,true,1]}".to_string()),
            Just("\"B\"".to_string()),
            Just("{\"A\":null,\"B\":1}".to_string()),
        ]
        .boxed(),
        "m" => prop::collection::vec((string(), number()), 0..3)
            .prop_map(|kv| {
                let kv: Vec<String> = kv.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!("{{{}}}", kv.join(","))
            })
            .boxed(),
        _ => (any::<i8>(), string())
            .prop_map(|(a, s)| format!("[{a},{s}]"))
            .boxed(),
    };
    prop_oneof![6 => right, 1 => value(), 1 => Just("null".to_string())].boxed()
}

/// An object shaped like [`Rec`]: its fields in any order, some missing, some given twice,
/// unknown fields between them, random whitespace.
fn record() -> impl Strategy<Value = String> {
    let keys = ["s", "n", "u", "f", "b", "v", "o", "e", "d", "big", "m", "t"];
    let fields: Vec<BoxedStrategy<Option<(String, &'static str)>>> = keys
        .iter()
        .map(|&k| {
            prop_oneof![
                4 => field_value(k).prop_map(move |v| Some((format!("\"{k}\":{v}"), k))),
                1 => Just(None),
            ]
            .boxed()
        })
        .collect();
    (
        fields,
        prop::collection::vec((key(), value()), 0..3),
        any::<bool>(),
        ws(),
        ws(),
    )
        .prop_flat_map(|(fields, unknown, twice, a, b)| {
            let mut parts: Vec<String> = fields.into_iter().flatten().map(|(f, _)| f).collect();
            parts.extend(
                unknown
                    .into_iter()
                    .map(|(k, v)| format!("\"unknown{k}\":{v}")),
            );
            if twice {
                if let Some(first) = parts.first().cloned() {
                    parts.push(first);
                }
            }
            Just(parts)
                .prop_shuffle()
                .prop_map(move |parts| format!("{a}{{{}}}{b}", parts.join(&format!("{b},{a}"))))
        })
}

/// A text made invalid (or not): cut, a byte changed, or a byte put in.
fn mutated(text: impl Strategy<Value = String>) -> impl Strategy<Value = Vec<u8>> {
    (text, any::<prop::sample::Index>(), any::<u8>(), 0..4u8).prop_map(|(text, at, byte, how)| {
        let mut bytes = text.into_bytes();
        if bytes.is_empty() {
            return bytes;
        }
        let i = at.index(bytes.len());
        let byte = match byte % 4 {
            0 => byte,
            1 => b"\"\\{}[],:0-e. \n"[usize::from(byte) % 14],
            _ => byte & 0x7f,
        };
        match how {
            0 => bytes.truncate(i),
            1 => bytes[i] = byte,
            2 => bytes.insert(i, byte),
            _ => {}
        }
        bytes
    })
}

/// Whether two floats are the same, but for a few units in the last place: `serde_json`'s
/// default parser does not round correctly (ours is `str::parse`, checked exactly in
/// `floats_are_correctly_rounded`).
fn close(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a != 0.0 && ((a - b) / a).abs() < 1e-14)
}

/// Whether two `serde_json` values are the same (floats up to [`close`]).
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => match (x.as_f64(), y.as_f64()) {
            _ if x.is_f64() != y.is_f64() => false,
            (Some(p), Some(q)) if x.is_f64() => close(p, q),
            _ => x == y,
        },
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k, p), (l, q))| k == l && same(p, q))
        }
        _ => a == b,
    }
}

/// Decodes `text` into `T` with both, and checks that they agree.
fn agree<T: DeserializeOwned + Serialize + std::fmt::Debug>(
    text: &[u8],
) -> Result<(), TestCaseError> {
    let ours: Result<T, _> = de::from_slice(text);
    let oracle: Result<T, _> = std::str::from_utf8(text)
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str(s).map_err(|e| e.to_string()));
    let shown = String::from_utf8_lossy(text);
    match (&ours, &oracle) {
        (Ok(a), Ok(b)) => {
            let (a, b) = (serde_json::to_value(a), serde_json::to_value(b));
            match (a, b) {
                (Ok(a), Ok(b)) => prop_assert!(same(&a, &b), "{shown}: {a} vs {b}"),
                (a, b) => prop_assert_eq!(a.is_ok(), b.is_ok(), "{}", shown),
            }
        }
        (Err(_), Err(_)) => {}
        _ => prop_assert!(false, "{shown}: ours {ours:?}, serde_json {oracle:?}"),
    }
    Ok(())
}

/// Checks every target on `text`.
fn agree_all(text: &[u8]) -> Result<(), TestCaseError> {
    agree::<serde_json::Value>(text)?;
    agree::<Rec>(text)?;
    agree::<Proj>(text)?;
    agree::<Vec<serde_json::Value>>(text)?;
    agree::<Option<String>>(text)?;
    agree::<BTreeMap<i64, serde_json::Value>>(text)?;
    let ours = de::from_slice::<IgnoredAny>(text).is_ok();
    let oracle = std::str::from_utf8(text)
        .ok()
        .and_then(|s| serde_json::from_str::<IgnoredAny>(s).ok())
        .is_some();
    prop_assert_eq!(ours, oracle, "{}", String::from_utf8_lossy(text));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn random_values_decode_as_serde_json_does(text in value(), a in ws(), b in ws()) {
        agree_all(format!("{a}{text}{b}").as_bytes())?;
    }

    #[test]
    fn random_records_decode_as_serde_json_does(text in record()) {
        agree_all(text.as_bytes())?;
    }

    #[test]
    fn mutated_values_decode_as_serde_json_does(text in mutated(value())) {
        agree_all(&text)?;
    }

    #[test]
    fn mutated_records_decode_as_serde_json_does(text in mutated(record())) {
        agree_all(&text)?;
    }

    #[test]
    fn floats_are_correctly_rounded(text in number()) {
        let exact = text.parse::<f64>().ok().filter(|f| f.is_finite());
        let ours = de::from_slice::<f64>(text.as_bytes()).ok();
        prop_assert_eq!(ours.map(f64::to_bits), exact.map(f64::to_bits), "{}", text);
    }

    #[test]
    fn prefixes_decode_as_their_lines(text in mutated(record()), next in mutated(record())) {
        // A line followed by another: the prefix decoder takes exactly what the line decoder
        // takes from the first line, and consumes it with its `\n`.
        let mut whole = text.clone();
        whole.push(b'\n');
        whole.extend_from_slice(&next);
        let end = memchr::memchr(b'\n', &whole).unwrap_or(whole.len());
        let line = &whole[..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match super::decode_json_prefix::<Rec>(&whole) {
            Some((record, n)) => {
                prop_assert_eq!(n, end + 1);
                let expected = super::decode::<Rec>(line);
                prop_assert_eq!(Ok(&record), expected.as_ref());
            }
            // Only a line that is not a `Rec` (a value that goes on past the line end is not
            // one on the line alone).
            None => prop_assert!(de::from_slice::<Rec>(line).is_err()),
        }
    }
}
