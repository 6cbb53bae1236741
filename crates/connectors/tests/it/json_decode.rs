//! General JSON decoding through the JSON-lines source: the serde path and the schema path
//! read the same records whatever the layout of their lines (fields in any order, any
//! whitespace, unknown fields with nested values and escapes), and malformed lines go to the
//! bad-record policy with their exact line numbers.

use proptest::prelude::*;
use spate_connectors::files::json::RowDecoder;
use spate_connectors::files::{decode_json_line, JsonLinesSource};
use spate_types::{BadRecordPolicy, DataType, Field, Row, Schema, Value};

use crate::util::read_all;

/// The serde side: a user's type with a nested struct, an optional field and a timestamp kept
/// as its string.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Order {
    id: i64,
    name: String,
    price: f64,
    paid: bool,
    at: String,
    item: Option<Item>,
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Item {
    code: i64,
    label: String,
}

/// The schema side: the same fields, `id` not nullable.
fn schema() -> Schema {
    Schema::new(vec![
        Field::not_null("id", DataType::Int64),
        Field::new("name", DataType::String),
        Field::new("price", DataType::Float64),
        Field::new("paid", DataType::Bool),
        Field::new("at", DataType::Timestamp),
        Field::new(
            "item",
            DataType::Row(Schema::new(vec![
                Field::not_null("code", DataType::Int64),
                Field::new("label", DataType::String),
            ])),
        ),
    ])
}

/// An order with the epoch milliseconds of its timestamp.
#[derive(Debug, Clone)]
struct Case {
    order: Order,
    at_ms: i64,
}

impl Case {
    fn row(&self) -> Row {
        let o = &self.order;
        Row(vec![
            Value::Int(o.id),
            Value::Str(o.name.clone()),
            Value::Float(o.price),
            Value::Bool(o.paid),
            Value::Int(self.at_ms),
            match &o.item {
                None => Value::Null,
                Some(item) => {
                    Value::List(vec![Value::Int(item.code), Value::Str(item.label.clone())])
                }
            },
        ])
    }
}

/// Characters that need every kind of treatment: ASCII, quotes and backslashes, control
/// characters, 2- to 4-byte UTF-8 (the last as a surrogate pair when escaped).
fn text() -> impl Strategy<Value = String> {
    let c = prop::sample::select(vec![
        'a', 'Z', '0', ' ', '"', '\\', '/', '\n', '\t', '\u{1}', '\u{1f}', '\u{7f}', 'é', 'ß', '€',
        '字', '😀', '𝄞',
    ]);
    prop::collection::vec(c, 0..12).prop_map(|v| v.into_iter().collect())
}

fn case() -> impl Strategy<Value = Case> {
    let item =
        prop::option::of((any::<i64>(), text()).prop_map(|(code, label)| Item { code, label }));
    // Prices are exact binary fractions (so both JSON libraries read them back exactly),
    // negative zero included.
    let price = prop_oneof![
        (-4_000_000i64..4_000_000).prop_map(|q| q as f64 / 4.0),
        Just(-0.0),
        Just(1e300),
    ];
    // 1970 to 2100, with a millisecond part.
    let at_ms = 0i64..4_102_444_800_000;
    (any::<i64>(), text(), price, any::<bool>(), at_ms, item).prop_map(
        |(id, name, price, paid, at_ms, item)| Case {
            order: Order {
                id,
                name,
                price,
                paid,
                at: timestamp(at_ms),
                item,
            },
            at_ms,
        },
    )
}

/// Flink's `YYYY-MM-DD HH:MM:SS.mmm` form of epoch milliseconds (a naive civil calendar).
fn timestamp(ms: i64) -> String {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// How one line is laid out: whitespace pieces used in turn at every place JSON allows
/// them, how each character of a string is written, the order of the fields, and unknown
/// fields to mix in.
#[derive(Debug, Clone)]
struct Layout {
    spaces: Vec<&'static str>,
    escapes: Vec<u8>,
    order: Vec<usize>,
    unknown: Vec<(String, String)>,
}

/// An arbitrary JSON value as text: nested arrays and objects, escaped strings, numbers.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<u64>().prop_map(|i| i.to_string()),
        (-1e9f64..1e9).prop_map(|f| format!("{f:e}")),
        Just("123456789012345678901234567890".to_string()),
        (text(), prop::collection::vec(0u8..3, 1..8))
            .prop_map(|(s, escapes)| quote(&s, &escapes, &mut 0)),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((text(), inner), 0..4).prop_map(|kv| {
                let fields: Vec<String> = kv
                    .iter()
                    .map(|(k, v)| format!("{}:{v}", quote(k, &[1], &mut 0)))
                    .collect();
                format!("{{{}}}", fields.join(" , "))
            }),
        ]
    })
}

fn layout() -> impl Strategy<Value = Layout> {
    let space = prop::sample::select(vec!["", "", " ", "  ", "\t", " \r "]);
    // Unknown keys are not declared fields, even after unescaping, nor prefixes of them
    // that a sloppy matcher could take.
    let key = prop::sample::select(vec![
        "x", "ids", "nam", "Name", "item_", "é", "\u{1}", "pa\"id",
    ]);
    (
        prop::collection::vec(space, 1..6),
        prop::collection::vec(0u8..3, 1..8),
        Just((0..6).collect::<Vec<usize>>()).prop_shuffle(),
        prop::collection::vec((key.prop_map(str::to_string), json_value()), 0..4),
    )
        .prop_map(|(spaces, escapes, order, unknown)| Layout {
            spaces,
            escapes,
            order,
            unknown,
        })
}

/// `s` as a JSON string; `escapes` say, in turn, how to write each character: 0 as itself
/// where JSON allows, 1 as `\uXXXX` (surrogate pairs beyond the BMP), 2 with a short escape
/// where there is one.
fn quote(s: &str, escapes: &[u8], turn: &mut usize) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        let how = escapes[*turn % escapes.len()];
        *turn += 1;
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\t' => Some("\\t"),
            '/' if how == 2 => Some("\\/"),
            _ => None,
        };
        let must_escape = (c as u32) < 0x20 || c == '"' || c == '\\';
        match (how, short) {
            (2, Some(e)) => out.push_str(e),
            (0, _) if !must_escape => out.push(c),
            (0, Some(e)) => out.push_str(e),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// One line of `case` laid out as `layout` says.
fn render(case: &Case, layout: &Layout) -> String {
    let mut turn = 0;
    let mut space_turn = 0;
    let mut ws = || {
        space_turn += 1;
        layout.spaces[space_turn % layout.spaces.len()]
    };
    let o = &case.order;
    let price = if o.price == 0.0 && o.price.is_sign_negative() {
        "-0.0".to_string()
    } else {
        format!("{:?}", o.price)
    };
    let item = match &o.item {
        None => "null".to_string(),
        Some(item) => format!(
            "{{{}\"label\"{}:{}{}{},{}\"code\"{}:{}{}}}",
            ws(),
            ws(),
            ws(),
            quote(&item.label, &layout.escapes, &mut turn),
            ws(),
            ws(),
            ws(),
            ws(),
            item.code
        ),
    };
    let values = [
        ("id", o.id.to_string()),
        ("name", quote(&o.name, &layout.escapes, &mut turn)),
        ("price", price),
        ("paid", o.paid.to_string()),
        ("at", quote(&o.at, &layout.escapes, &mut turn)),
        ("item", item),
    ];
    let mut fields: Vec<String> = Vec::new();
    for (i, &f) in layout.order.iter().enumerate() {
        if let Some((key, value)) = layout.unknown.get(i) {
            fields.push(format!(
                "{}:{}{value}",
                quote(key, &layout.escapes, &mut turn),
                ws()
            ));
        }
        let (name, value) = &values[f];
        fields.push(format!(
            "{}\"{name}\"{}:{}{value}{}",
            ws(),
            ws(),
            ws(),
            ws()
        ));
    }
    let sep = format!(",{}", ws());
    format!("{}{{{}}}{}", ws(), fields.join(&sep), ws())
}

/// Lines that are not records of either path, each for another reason.
const MALFORMED: &[&[u8]] = &[
    br#"{"id":1,"name":"x""#,
    br#"{"id":1} trailing"#,
    br#"{"id":"1"}"#,
    br#"{"name":"no id"}"#,
    b"{\"id\":1,\"x\":\"\xff\"}",
    b"{\"id\":1,\"name\":\"a\x01b\"}",
    br#"{"id":1,"x":[1,2,}"#,
    br#"[1,2,3]"#,
];

fn decode_row(line: &[u8]) -> Result<Row, String> {
    RowDecoder::new(&schema()).decode(line)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Any layout of a record decodes to the record itself, through both paths.
    #[test]
    fn every_layout_decodes_to_the_same_record(case in case(), layouts in prop::collection::vec(layout(), 1..4)) {
        let expected_row = case.row();
        for layout in &layouts {
            let line = render(&case, layout);
            let order: Order = decode_json_line(line.as_bytes())
                .map_err(|e| TestCaseError::fail(format!("{e}: {line}")))?;
            prop_assert_eq!(&order, &case.order, "{}", line);
            prop_assert_eq!(order.price.to_bits(), case.order.price.to_bits());
            let row = decode_row(line.as_bytes())
                .map_err(|e| TestCaseError::fail(format!("{e}: {line}")))?;
            prop_assert_eq!(&row, &expected_row, "{}", line);
        }
    }

    /// Through the source: records in order, and every malformed line a dead letter with its
    /// exact line number, for both paths, in any splits.
    #[test]
    fn bad_lines_keep_their_line_numbers(
        lines in prop::collection::vec(
            prop_oneof![
                4 => (case(), layout()).prop_map(|(c, l)| Ok((render(&c, &l), c))),
                1 => prop::sample::select(MALFORMED).prop_map(Err),
                1 => Just(Ok((String::new(), Case {
                    order: Order { id: 0, name: String::new(), price: 0.0, paid: false, at: String::new(), item: None },
                    at_ms: 0,
                }))),
            ],
            1..40,
        ),
        split_size in prop_oneof![Just(1u64 << 30), 1u64..2000],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orders.jsonl");
        let mut content = Vec::new();
        let (mut good, mut bad) = (Vec::new(), Vec::new());
        for (i, line) in lines.iter().enumerate() {
            match line {
                Ok((text, case)) => {
                    content.extend_from_slice(text.as_bytes());
                    // An empty line is blank: skipped, but counted.
                    if !text.is_empty() {
                        good.push(case.clone());
                    }
                }
                Err(raw) => {
                    content.extend_from_slice(raw);
                    bad.push(i as u64 + 1);
                }
            }
            content.push(b'\n');
        }
        std::fs::write(&path, &content).unwrap();
        let policy = BadRecordPolicy::DeadLetter(dir.path().join("dead.jsonl"));

        let source = JsonLinesSource::<Order>::new(&path).policy(policy.clone()).split_size(split_size);
        let drained = read_all(&source, 1, 7).remove(0);
        prop_assert!(drained.error.is_none());
        let expected: Vec<Order> = good.iter().map(|c| c.order.clone()).collect();
        prop_assert_eq!(&drained.records, &expected);
        let lines: Vec<u64> = drained.dead.iter().map(|d| d.line).collect();
        prop_assert_eq!(&lines, &bad);

        let source = JsonLinesSource::with_schema(&path, &schema()).policy(policy).split_size(split_size);
        let drained = read_all(&source, 1, 7).remove(0);
        prop_assert!(drained.error.is_none());
        let expected: Vec<Row> = good.iter().map(Case::row).collect();
        prop_assert_eq!(&drained.records, &expected);
        let lines: Vec<u64> = drained.dead.iter().map(|d| d.line).collect();
        prop_assert_eq!(&lines, &bad);
        prop_assert!(drained.dead.iter().all(|d| d.source == path.display().to_string()));
    }
}

#[test]
fn the_fail_policy_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("orders.jsonl");
    std::fs::write(
        &path,
        "{\"id\":1}\n\n{\"id\":2, \"x\": {\"deep\": [\"\\u00e9\"]}}\n{\"id\":\"3\"}\n",
    )
    .unwrap();
    let source = JsonLinesSource::with_schema(&path, &schema());
    let drained = read_all(&source, 1, 100).remove(0);
    let err = drained.error.expect("the fourth line fails").to_string();
    assert!(err.contains("line 4"), "{err}");
    assert!(
        err.contains("wrong type for field `id`: expected an integer, found a string"),
        "{err}"
    );
    assert_eq!(drained.records.len(), 2);
}
