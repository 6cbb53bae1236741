//! The JSON form: round trips, any valid layout, and bad input that never panics.

use proptest::prelude::*;
use spate_nexmark::generator::GeneratorConfig;
use spate_nexmark::json::{
    event_from_json_value, format_timestamp_string, parse_event, write_event,
};
use spate_nexmark::model::{Auction, Bid, Event, Person, Text};

use crate::util::{generate_all, lines, to_jsonl};

/// The slow reference: serde_json, then the same schema rules.
fn oracle(line: &[u8]) -> Result<Event, String> {
    let v: serde_json::Value = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    event_from_json_value(&v)
}

fn parse_ok(line: &[u8]) -> Event {
    parse_event(line).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(line)))
}

fn parse_err(line: &[u8]) -> String {
    let err = match parse_event(line) {
        Ok(e) => panic!("parsed {e:?} from {}", String::from_utf8_lossy(line)),
        Err(err) => err,
    };
    assert!(!err.contains('\n'), "a reason is one line: {err:?}");
    err
}

#[test]
fn generated_lines_round_trip() {
    for cfg in [
        GeneratorConfig {
            seed: 7,
            rate: 200.0,
            events: Some(20_000),
            ..Default::default()
        },
        GeneratorConfig {
            seed: 2,
            events: Some(5_000),
            partitions: 3,
            beam_bidder: true,
            ..Default::default()
        },
    ] {
        let events = generate_all(&cfg);
        let buf = to_jsonl(&events);
        let lines = lines(&buf);
        assert_eq!(lines.len(), events.len());
        for (line, event) in lines.iter().zip(&events) {
            assert_eq!(&parse_ok(line), event);
            assert_eq!(&oracle(line).expect("oracle"), event);
        }
        // With the newline, and with a Windows line end.
        let mut with_crlf = lines[0].to_vec();
        with_crlf.extend_from_slice(b"\r\n");
        assert_eq!(parse_ok(&with_crlf), events[0]);
    }
}

const BID: &str = r#"{"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,"bidder":2001,"price":1102,"channel":"Google","url":"https://www.nexmark.com/a/b/c/item.htm?query=1","dateTime":"2024-01-01 00:00:00.005","extra":"x\\y"}}"#;

fn bid_with(field: &str, value: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(BID).unwrap();
    let mut bid = v["bid"].as_object().unwrap().clone();
    bid.remove(field);
    let mut body: Vec<String> = bid
        .iter()
        .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), v))
        .collect();
    if !value.is_empty() {
        body.push(format!("\"{field}\":{value}"));
    }
    format!(
        r#"{{"event_type":2,"person":null,"auction":null,"bid":{{{}}}}}"#,
        body.join(",")
    )
}

#[test]
fn accepts_any_valid_layout() {
    let want = parse_ok(BID.as_bytes());
    let Event::Bid(bid) = &want else {
        panic!("not a bid")
    };
    assert_eq!(&*bid.extra, "x\\y");
    assert_eq!(bid.date_time, 1_704_067_200_005);
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(BID).unwrap())
            .unwrap();
    assert_eq!(
        parse_ok(pretty.as_bytes()),
        want,
        "sorted keys, newlines and indentation"
    );
    let escaped = BID
        .replace("Google", r"\u0047oo\u0067le")
        .replace("https:", r"https\u003a");
    assert_eq!(parse_ok(escaped.as_bytes()), want, "escapes");
    let unknown = BID.replace(
        r#""bid":{"#,
        r#""x":[1,{"y":null},"\ud83d\ude00",-2.5e-3,true],"bid":{"z":{},"#,
    );
    assert_eq!(
        parse_ok(unknown.as_bytes()),
        want,
        "unknown keys are skipped"
    );
    let no_nulls = BID.replace(r#""person":null,"auction":null,"#, "");
    assert_eq!(
        parse_ok(no_nulls.as_bytes()),
        want,
        "absent objects are null"
    );
    let epoch_ms = bid_with("dateTime", "1704067200005");
    assert_eq!(
        parse_ok(epoch_ms.as_bytes()),
        want,
        "timestamps as epoch milliseconds"
    );
    let short = bid_with("dateTime", r#""2024-01-01T00:00:00.005Z""#);
    assert_eq!(parse_ok(short.as_bytes()), want);
    let Event::Bid(no_extra) = parse_ok(bid_with("extra", "").as_bytes()) else {
        panic!()
    };
    assert_eq!(&*no_extra.extra, "", "an absent extra is empty");
    let dup = BID.replace(r#""price":1102"#, r#""price":1,"price":1102"#);
    assert!(
        parse_err(dup.as_bytes()).contains("duplicate field `price`"),
        "a key given twice is an error, as with any serde type"
    );
}

#[test]
fn rejects_bad_lines_with_a_reason() {
    let cases: Vec<(String, &str)> = vec![
        (String::new(), "EOF while parsing a value"),
        (" \r\n".into(), "EOF while parsing a value"),
        ("[1]".into(), "invalid length 1, expected struct Line"),
        ("{".into(), "EOF while parsing an object"),
        ("{\"event_type\":2,}".into(), "trailing comma"),
        (BID.replace(r#","bid":{"#, r#","bid":null,"x":{"#), "`bid` is null or absent"),
        (BID.replace(r#""event_type":2,"#, ""), "missing field `event_type`"),
        (BID.replace(r#""event_type":2"#, r#""event_type":0"#), "event_type 0 (person) but the non-null object is `bid`"),
        (BID.replace(r#""event_type":2"#, r#""event_type":7"#), "event_type 7 is not 0"),
        (BID.replace(r#""event_type":2"#, r#""event_type":"2""#), "invalid type: string \"2\", expected i64"),
        (bid_with("price", ""), "missing field `price`"),
        (bid_with("price", "\"12\""), "invalid type: string \"12\", expected i64"),
        (bid_with("price", "null"), "invalid type: null, expected i64"),
        (bid_with("price", "1.5"), "invalid type: floating point `1.5`, expected i64"),
        (bid_with("price", "99999999999999999999"), "invalid type: floating point `1e+20`, expected i64"),
        (bid_with("price", "-"), "invalid number"),
        (bid_with("price", "012"), "invalid number"),
        (bid_with("channel", "7"), "invalid type: integer `7`, expected a string"),
        (bid_with("dateTime", "\"2024-13-01 00:00:00.000\""), "invalid timestamp \"2024-13-01 00:00:00.000\""),
        (bid_with("dateTime", "\"2024-01-01\\n00:00:00\""), "invalid timestamp \"2024-01-01\\n00:00:00\""),
        (bid_with("url", "\"\\ud800x\""), "unexpected end of hex escape"),
        (bid_with("url", "\"\\q\""), "invalid escape"),
        (bid_with("url", "\"a\tb\""), "control character (\\u0000-\\u001F) found while parsing a string"),
        (BID.replace(r#""person":null"#, r#""person":{"id":1}"#), "missing field `name`"),
        (BID.replace(r#""person":null"#, r#""person":[]"#), "invalid length 0, expected struct Person"),
        (format!("{BID} x"), "trailing characters"),
        (format!("{BID}{BID}"), "trailing characters"),
        (BID.replace(r#""auction":null,"#, r#""auction":{"id":1,"itemName":"i","description":"d","initialBid":1,"reserve":2,"dateTime":0,"expires":1,"seller":1,"category":10},"#), "more than one event"),
        (BID.replace(r#""person":null"#, r#""person":nul"#), "expected ident"),
    ];
    for (line, want) in cases {
        let err = parse_err(line.as_bytes());
        assert!(err.contains(want), "{line}\n  gave: {err}\n  want: {want}");
    }
    let mut bad_utf8 = BID.as_bytes().to_vec();
    let at = BID.find("Google").unwrap() + 1;
    bad_utf8[at] = 0xff;
    assert!(parse_err(&bad_utf8).contains("invalid UTF-8"));
    // An unknown value nested deeper than any known one is skipped, as serde_json skips it.
    let deep = BID.replace(
        r#""person":null"#,
        &format!(r#""deep":{}1{}"#, "[".repeat(5000), "]".repeat(5000)),
    );
    assert_eq!(parse_ok(deep.as_bytes()), parse_ok(BID.as_bytes()));
}

#[test]
fn every_truncation_is_an_error() {
    let events = generate_all(&GeneratorConfig {
        seed: 4,
        events: Some(50),
        ..Default::default()
    });
    for e in &events[..5] {
        let mut line = Vec::new();
        write_event(e, &mut line);
        let body = line.len() - 1;
        for cut in 0..body {
            parse_err(&line[..cut]);
        }
        assert_eq!(&parse_ok(&line[..body]), e);
    }
}

// ---------------------------------------------------------------- property tests

/// A small deterministic source of layout choices.
struct Choices(u64);

impl Choices {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }

    fn ws(&mut self) -> &'static str {
        ["", "", "", " ", "\t", "\n  ", "\r\n"][self.next(7) as usize]
    }

    /// A JSON string, with a random mix of raw and escaped characters.
    fn string(&mut self, s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 || self.next(5) == 0 => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{:04X}", u));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    fn ts(&mut self, ms: i64) -> String {
        if self.next(4) == 0 {
            ms.to_string()
        } else {
            format!("\"{}\"", format_timestamp_string(ms))
        }
    }

    fn unknown(&mut self) -> String {
        [
            "1",
            "-2.5e3",
            "\"x\"",
            "true",
            "null",
            "[]",
            "{\"a\":[1,{\"b\":null}]}",
            "[{},[],\"\\u00e9\"]",
        ][self.next(8) as usize]
            .to_string()
    }

    /// `{"k":v,...}` with the fields shuffled, random whitespace and unknown keys.
    fn object(&mut self, mut fields: Vec<(&str, String)>) -> String {
        if self.next(3) == 0 {
            fields.push(("unknownKey", self.unknown()));
        }
        for i in (1..fields.len()).rev() {
            fields.swap(i, self.next(i as u64 + 1) as usize);
        }
        let mut out = String::from("{");
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(self.ws());
            out.push_str(&self.string(k));
            out.push_str(self.ws());
            out.push(':');
            out.push_str(self.ws());
            out.push_str(v);
            out.push_str(self.ws());
        }
        out.push('}');
        out
    }

    fn event(&mut self, e: &Event) -> String {
        let fields = match e {
            Event::Person(p) => vec![
                ("id", p.id.to_string()),
                ("name", self.string(&p.name)),
                ("emailAddress", self.string(&p.email_address)),
                ("creditCard", self.string(&p.credit_card)),
                ("city", self.string(&p.city)),
                ("state", self.string(&p.state)),
                ("dateTime", self.ts(p.date_time)),
                ("extra", self.string(&p.extra)),
            ],
            Event::Auction(a) => vec![
                ("id", a.id.to_string()),
                ("itemName", self.string(&a.item_name)),
                ("description", self.string(&a.description)),
                ("initialBid", a.initial_bid.to_string()),
                ("reserve", a.reserve.to_string()),
                ("dateTime", self.ts(a.date_time)),
                ("expires", self.ts(a.expires)),
                ("seller", a.seller.to_string()),
                ("category", a.category.to_string()),
                ("extra", self.string(&a.extra)),
            ],
            Event::Bid(b) => vec![
                ("auction", b.auction.to_string()),
                ("bidder", b.bidder.to_string()),
                ("price", b.price.to_string()),
                ("channel", self.string(&b.channel)),
                ("url", self.string(&b.url)),
                ("dateTime", self.ts(b.date_time)),
                ("extra", self.string(&b.extra)),
            ],
        };
        let body = self.object(fields);
        let kind = e.event_type();
        let mut top = vec![("event_type", kind.to_string())];
        for (i, name) in ["person", "auction", "bid"].into_iter().enumerate() {
            if i == usize::from(kind) {
                top.push((name, body.clone()));
            } else if self.next(4) != 0 {
                top.push((name, "null".to_string()));
            }
        }
        format!("{}{}{}", self.ws(), self.object(top), self.ws())
    }
}

/// 0000-01-01 00:00:00.000 to 9999-12-31 23:59:59.999.
const TS_RANGE: std::ops::RangeInclusive<i64> = -62_167_219_200_000..=253_402_300_799_999;

fn arb_str() -> impl Strategy<Value = Text> {
    prop_oneof![
        "[a-zA-Z0-9 @._-]{0,24}",
        any::<String>(),
        "[\"\\\\/\\x00-\\x1f\u{7f}-\u{10ffff}]{0,8}",
    ]
    .prop_map(Text::from)
}

fn arb_event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (
            any::<i64>(),
            arb_str(),
            arb_str(),
            arb_str(),
            arb_str(),
            arb_str(),
            TS_RANGE,
            arb_str()
        )
            .prop_map(
                |(id, name, email_address, credit_card, city, state, date_time, extra)| {
                    Event::from(Person {
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
            ),
        (
            any::<i64>(),
            arb_str(),
            arb_str(),
            any::<i64>(),
            any::<i64>(),
            TS_RANGE,
            TS_RANGE,
            any::<i64>(),
            any::<i64>(),
            arb_str()
        )
            .prop_map(
                |(
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
                )| {
                    Event::from(Auction {
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
            ),
        (
            any::<i64>(),
            any::<i64>(),
            any::<i64>(),
            arb_str(),
            arb_str(),
            TS_RANGE,
            arb_str()
        )
            .prop_map(|(auction, bidder, price, channel, url, date_time, extra)| {
                Event::Bid(Bid {
                    auction,
                    bidder,
                    price,
                    channel,
                    url,
                    date_time,
                    extra,
                })
            }),
    ]
}

fn sample_lines() -> &'static [Vec<u8>] {
    static LINES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    LINES.get_or_init(|| {
        let events = generate_all(&GeneratorConfig {
            seed: 9,
            events: Some(200),
            ..Default::default()
        });
        events
            .iter()
            .map(|e| to_jsonl(std::slice::from_ref(e)))
            .collect()
    })
}

/// The fast parser and the reference agree: both accept (with the same event) or both reject.
fn agrees_with_oracle(line: &[u8]) -> Result<(), TestCaseError> {
    let fast = parse_event(line);
    if let Err(err) = &fast {
        prop_assert!(!err.contains('\n'), "multi-line reason {:?}", err);
    }
    // serde_json reads `-0` as a float; the fast parser takes it as the integer 0.
    if line.windows(2).any(|w| w == b"-0") {
        return Ok(());
    }
    let slow = oracle(line);
    match (&fast, &slow) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        _ => prop_assert!(
            false,
            "fast {:?} vs reference {:?} on {:?}",
            fast,
            slow,
            String::from_utf8_lossy(line)
        ),
    }
    Ok(())
}

/// 2000 cases from a fixed seed; `PROPTEST_CASES` and `PROPTEST_SEED` override them.
fn config() -> ProptestConfig {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    ProptestConfig {
        cases: env("PROPTEST_CASES").map_or(2000, |n| n as u32),
        rng_seed: proptest::test_runner::RngSeed::Fixed(env("PROPTEST_SEED").unwrap_or(0x5EED)),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Any event, written by the writer, parses back to itself.
    #[test]
    fn writer_round_trips(event in arb_event()) {
        let mut line = Vec::new();
        write_event(&event, &mut line);
        prop_assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        prop_assert_eq!(&parse_event(&line).map_err(TestCaseError::fail)?, &event);
        prop_assert_eq!(&oracle(&line).map_err(TestCaseError::fail)?, &event);
    }

    /// Any layout of the same fields (order, whitespace, escapes, unknown keys) parses.
    #[test]
    fn any_layout_parses(event in arb_event(), seed in any::<u64>()) {
        let text = Choices(seed).event(&event);
        prop_assert_eq!(&parse_event(text.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?, &event);
        prop_assert_eq!(&oracle(text.as_bytes()).map_err(TestCaseError::fail)?, &event);
    }

    /// Garbage never panics, and the parser accepts exactly what the reference accepts.
    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        agrees_with_oracle(&bytes)?;
    }

    /// Damaged generator lines: cut, flipped, inserted or deleted bytes.
    #[test]
    fn damaged_lines_agree_with_the_reference(
        which in 0usize..200,
        edits in proptest::collection::vec((0u8..4, any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut line = sample_lines()[which].clone();
        for (op, at, byte) in edits {
            let at = at.index(line.len() + 1);
            match op {
                0 => line.truncate(at),
                1 if at < line.len() => line[at] = byte,
                2 => line.insert(at, byte),
                3 if at < line.len() => { line.remove(at); }
                _ => {}
            }
        }
        agrees_with_oracle(&line)?;
    }

    /// Structural characters sprinkled into a valid line.
    #[test]
    fn json_noise_agrees_with_the_reference(
        which in 0usize..200,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), prop::sample::select(br#"{}[]:,"\ 0-.eEtfnul"#.to_vec())), 1..3),
    ) {
        let mut line = sample_lines()[which].clone();
        for (at, byte) in edits {
            let at = at.index(line.len() + 1);
            line.insert(at, byte);
        }
        agrees_with_oracle(&line)?;
    }
}
