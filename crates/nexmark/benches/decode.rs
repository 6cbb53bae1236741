//! Decoding Nexmark JSON lines with general JSON decoders.
//!
//! `cargo bench -p spate-nexmark --bench decode`. Every benchmark decodes the same `EVENTS`
//! lines of the generator's writer per iteration, so criterion's throughput line reads as
//! events per second on one core. Two targets:
//!
//! * `full/*`: every field of every event, into serde types shaped like the JSON (owned
//!   strings, timestamps parsed to epoch milliseconds), or rows of the same declared schema;
//! * `bid_projection/*`: a user's projection `{ bid: Option<{ auction, price }> }`: every
//!   other field is skipped without being built.
//!
//! Candidates: `serde_json` (`from_utf8`, then `from_str`), `serde_json::from_slice`, and
//! Spate's own deserializer (`spate_connectors::files::json`) as the line decoder
//! (`general`: `decode_json_line`) and as the prefix decoder over the whole text
//! (`general_prefix`: `decode_json_prefix`, what `JsonLinesSource::new` uses for every serde
//! type); beside them the schema path (`RowDecoder`, rows of a declared schema with the same
//! fields).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde::de::{DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer};
use spate_connectors::files::json::RowDecoder;
use spate_nexmark::generator::{GeneratorConfig, NexmarkGenerator};
use spate_nexmark::json::{parse_timestamp, write_event};
use spate_types::{DataType, Field, Schema};

/// Events per iteration.
const EVENTS: usize = 50 * 1024;

/// A timestamp: a `YYYY-MM-DD HH:MM:SS.mmm` string or epoch milliseconds.
#[derive(Debug)]
#[allow(dead_code)]
struct Ts(i64);

impl<'de> Deserialize<'de> for Ts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Ts;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a timestamp")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Ts, E> {
                parse_timestamp(s).map(Ts).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Ts, E> {
                Ok(Ts(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Ts, E> {
                i64::try_from(v).map(Ts).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct JsonEvent {
    event_type: u8,
    person: Option<JsonPerson>,
    auction: Option<JsonAuction>,
    bid: Option<JsonBid>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
struct JsonPerson {
    id: i64,
    name: String,
    email_address: String,
    credit_card: String,
    city: String,
    state: String,
    date_time: Ts,
    extra: String,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
struct JsonAuction {
    id: i64,
    item_name: String,
    description: String,
    initial_bid: i64,
    reserve: i64,
    date_time: Ts,
    expires: Ts,
    seller: i64,
    category: i64,
    extra: String,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
struct JsonBid {
    auction: i64,
    bidder: i64,
    price: i64,
    channel: String,
    url: String,
    date_time: Ts,
    extra: String,
}

/// A user's projection: only two fields of bids.
#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct BidOnly {
    bid: Option<BidProj>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct BidProj {
    auction: u64,
    price: u64,
}

fn text() -> Vec<u8> {
    let config = GeneratorConfig {
        seed: 1,
        rate: 10_000_000.0,
        ..Default::default()
    };
    let mut generator = NexmarkGenerator::new(&config, 0).expect("generator");
    let mut events = Vec::with_capacity(EVENTS);
    generator.fill(&mut events, EVENTS);
    let mut text = Vec::new();
    for e in &events {
        write_event(e, &mut text);
    }
    text
}

fn serde_json_str<T: DeserializeOwned>(line: &[u8]) -> T {
    let s = std::str::from_utf8(line).expect("UTF-8");
    serde_json::from_str(s).expect("decodes")
}

fn serde_json_slice<T: DeserializeOwned>(line: &[u8]) -> T {
    serde_json::from_slice(line).expect("decodes")
}

fn general<T: DeserializeOwned>(line: &[u8]) -> T {
    spate_connectors::files::decode_json_line(line).expect("decodes")
}

/// A candidate decoder of one line.
type Decode<T> = fn(&[u8]) -> T;

fn bench_target<T: DeserializeOwned>(c: &mut Criterion, name: &str, lines: &[&[u8]]) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(lines.len() as u64));
    let candidates: [(&str, Decode<T>); 3] = [
        ("serde_json_str", serde_json_str::<T>),
        ("serde_json_slice", serde_json_slice::<T>),
        ("general", general::<T>),
    ];
    for (label, decode) in candidates {
        group.bench_function(label, |b| {
            b.iter(|| {
                for line in lines {
                    black_box(decode(line));
                }
            })
        });
    }
    group.finish();
}

/// Spate's deserializer as the JSON-lines source's prefix decoder: one value after another
/// from the whole text, without splitting it into lines first.
fn bench_prefix<T: DeserializeOwned>(c: &mut Criterion, name: &str, whole: &[u8]) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.bench_function("general_prefix", |b| {
        b.iter(|| {
            let mut at = 0;
            while at < whole.len() {
                let (event, n) = spate_connectors::files::decode_json_prefix::<T>(&whole[at..])
                    .expect("generated lines decode");
                black_box(event);
                at += n;
            }
        })
    });
    group.finish();
}

/// The schema path: rows of a declared schema.
fn bench_rows(c: &mut Criterion, name: &str, lines: &[&[u8]], schema: &Schema) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(lines.len() as u64));
    let decoder = RowDecoder::new(schema);
    group.bench_function("schema_rows", |b| {
        b.iter(|| {
            for line in lines {
                black_box(decoder.decode(line).expect("decodes"));
            }
        })
    });
    group.finish();
}

/// The Nexmark JSON form as a declared schema.
fn full_schema() -> Schema {
    use DataType::{Int64, Row, String, Timestamp};
    let f = Field::new;
    Schema::new(vec![
        Field::not_null("event_type", Int64),
        f(
            "person",
            Row(Schema::new(vec![
                f("id", Int64),
                f("name", String),
                f("emailAddress", String),
                f("creditCard", String),
                f("city", String),
                f("state", String),
                f("dateTime", Timestamp),
                f("extra", String),
            ])),
        ),
        f(
            "auction",
            Row(Schema::new(vec![
                f("id", Int64),
                f("itemName", String),
                f("description", String),
                f("initialBid", Int64),
                f("reserve", Int64),
                f("dateTime", Timestamp),
                f("expires", Timestamp),
                f("seller", Int64),
                f("category", Int64),
                f("extra", String),
            ])),
        ),
        f(
            "bid",
            Row(Schema::new(vec![
                f("auction", Int64),
                f("bidder", Int64),
                f("price", Int64),
                f("channel", String),
                f("url", String),
                f("dateTime", Timestamp),
                f("extra", String),
            ])),
        ),
    ])
}

fn bid_schema() -> Schema {
    Schema::new(vec![Field::new(
        "bid",
        DataType::Row(Schema::new(vec![
            Field::not_null("auction", DataType::Int64),
            Field::not_null("price", DataType::Int64),
        ])),
    )])
}

fn decode(c: &mut Criterion) {
    let text = text();
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), EVENTS);
    bench_target::<JsonEvent>(c, "full", &lines);
    bench_prefix::<JsonEvent>(c, "full", &text);
    bench_rows(c, "full", &lines, &full_schema());
    bench_target::<BidOnly>(c, "bid_projection", &lines);
    bench_prefix::<BidOnly>(c, "bid_projection", &text);
    bench_rows(c, "bid_projection", &lines, &bid_schema());
}

criterion_group!(benches, decode);
criterion_main!(benches);
