//! Benchmarks of the pub/sub indexes against direct evaluation:
//!
//! * `content/*`: 10 000 conjunctive subscriptions of 1–4 predicates over 8 attributes,
//!   records/s through the counting [`Matcher`] and through evaluating every predicate;
//!   `content_broad/*` the same with ranges that half the records satisfy;
//! * `topic/*`: 100 000 MQTT filters, topics/s through the [`TopicTrie`] and through
//!   [`filter_matches`] on every filter;
//! * `route/router`: content-based routing through the [`Router`]: 1 000 000 records (10 000
//!   distinct records with topics, cycled 100 times) to 10 000 subscriptions, a third topic
//!   filters only, a third content predicates only, a third both; records/s.
//!
//! Run with `cargo bench -p spate-pubsub --bench matching`. Everything is generated from
//! fixed seeds, so runs compare.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rustc_hash::FxHashMap;
use spate_pubsub::{
    filter_matches, AttrValue, Dialect, Matcher, Predicate, Router, SubId, Subscription,
    TopicFilter, TopicTrie,
};

/// SplitMix64: a small deterministic generator, so the bench needs no `rand`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

type Record = FxHashMap<String, AttrValue>;

const SUBSCRIPTIONS: usize = 10_000;
const RECORDS: usize = 1_000;
const FILTERS: usize = 100_000;
const TOPICS: usize = 1_000;

/// A quote-like record: 4 string, 2 integer, 2 float and 1 boolean attribute (the broad
/// workload's subscriptions use the boolean, the other's the fourth string).
fn record(rng: &mut Rng) -> Record {
    let mut r = Record::default();
    r.insert("symbol".into(), format!("S{}", rng.below(1000)).into());
    r.insert("exchange".into(), format!("X{}", rng.below(8)).into());
    r.insert("sector".into(), format!("sector{}", rng.below(20)).into());
    r.insert("volume".into(), AttrValue::Int(rng.below(100_000) as i64));
    r.insert("rating".into(), AttrValue::Int(1 + rng.below(10) as i64));
    r.insert("price".into(), AttrValue::Float(rng.unit() * 1000.0));
    r.insert("change".into(), AttrValue::Float(rng.unit() * 20.0 - 10.0));
    r.insert("active".into(), AttrValue::Bool(rng.below(2) == 0));
    r.insert("region".into(), format!("R{}", rng.below(50)).into());
    r
}

/// One predicate on attribute `attr` (0..8), of a kind that suits its type. In the `broad`
/// workload ranges hold for about half the records, and a tenth of all subscriptions match a
/// record; in the other, ranges hold for about a twentieth, and equalities are on
/// attributes of 8 to 1000 values.
fn atom(rng: &mut Rng, attr: u64, broad: bool) -> String {
    // A range threshold in `0..1`: anywhere when broad, in the top 10 % otherwise.
    let tail = |rng: &mut Rng| {
        if broad {
            rng.unit()
        } else {
            0.9 + rng.unit() / 10.0
        }
    };
    match attr {
        0 => {
            // The broad workload's symbols are the first hundred of the thousand.
            let n = if broad { 100 } else { 1000 };
            match rng.below(4) {
                0 => format!(
                    "symbol IN ('S{}', 'S{}', 'S{}')",
                    rng.below(n),
                    rng.below(n),
                    rng.below(n)
                ),
                1 => format!("symbol PREFIX 'S{}'", n / 100 + rng.below(n / 10 - n / 100)),
                _ => format!("symbol = 'S{}'", rng.below(n)),
            }
        }
        1 => format!("exchange = 'X{}'", rng.below(8)),
        2 => match rng.below(3) {
            0 if broad => format!("sector != 'sector{}'", rng.below(20)),
            _ => format!("sector = 'sector{}'", rng.below(20)),
        },
        3 => format!("volume > {}", (tail(rng) * 100_000.0) as i64),
        4 => match rng.below(2) {
            0 if broad => format!("rating >= {}", 1 + rng.below(10)),
            _ => format!("rating = {}", 1 + rng.below(10)),
        },
        5 => {
            let lo = rng.unit() * 900.0;
            format!("price BETWEEN {lo:.2} AND {:.2}", lo + rng.unit() * 100.0)
        }
        6 => format!("change < {:.2}", 10.0 - 20.0 * tail(rng)),
        _ if broad => format!("active = {}", rng.below(2) == 0),
        _ => format!("region = 'R{}'", rng.below(50)),
    }
}

/// A conjunction of 1–4 predicates on distinct attributes.
fn subscription(rng: &mut Rng, broad: bool) -> Predicate {
    let n = 1 + rng.below(4);
    let mut attrs: Vec<u64> = Vec::new();
    while attrs.len() < n as usize {
        let a = rng.below(8);
        if !attrs.contains(&a) {
            attrs.push(a);
        }
    }
    let text = attrs
        .iter()
        .map(|&a| atom(rng, a, broad))
        .collect::<Vec<_>>()
        .join(" AND ");
    Predicate::parse(&text).expect("the bench's predicates parse")
}

fn content(c: &mut Criterion) {
    for (name, broad) in [("content", false), ("content_broad", true)] {
        content_workload(c, name, broad);
    }
}

fn content_workload(c: &mut Criterion, name: &str, broad: bool) {
    let mut rng = Rng(42);
    let preds: Vec<Predicate> = (0..SUBSCRIPTIONS)
        .map(|_| subscription(&mut rng, broad))
        .collect();
    let records: Vec<Record> = (0..RECORDS).map(|_| record(&mut rng)).collect();
    let mut matcher = Matcher::new();
    for (i, p) in preds.iter().enumerate() {
        matcher.insert(SubId(i as u64), p.clone());
    }
    let mut out = Vec::new();
    let total: usize = records.iter().map(|r| matcher.matches(r).len()).sum();
    eprintln!(
        "{name}: {SUBSCRIPTIONS} subscriptions, {:.1} matches per record",
        total as f64 / RECORDS as f64
    );

    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(RECORDS as u64));
    g.bench_function("counting", |b| {
        b.iter(|| {
            let mut n = 0;
            for r in &records {
                matcher.matches_into(r, &mut out);
                n += out.len();
            }
            black_box(n)
        })
    });
    let few = &records[..20];
    g.throughput(Throughput::Elements(few.len() as u64));
    g.bench_function("naive", |b| {
        b.iter(|| {
            let mut n = 0;
            for r in few {
                n += preds.iter().filter(|p| p.matches(r)).count();
            }
            black_box(n)
        })
    });
    g.finish();
}

/// A level of a topic: `regionR/siteS/deviceD/metricM`, with 10·50·200·20 topics in all.
fn topic_level(rng: &mut Rng, depth: usize) -> String {
    match depth {
        0 => format!("region{}", rng.below(10)),
        1 => format!("site{}", rng.below(50)),
        2 => format!("device{}", rng.below(200)),
        _ => format!("metric{}", rng.below(20)),
    }
}

/// A filter of 1–4 levels: each a literal (85 %) or `+`, then `#` when shorter than a topic
/// (so most filters can match something).
fn filter(rng: &mut Rng) -> TopicFilter {
    let depth = 1 + rng.below(4) as usize;
    let mut levels: Vec<String> = (0..depth)
        .map(|d| {
            if rng.below(100) < 85 {
                topic_level(rng, d)
            } else {
                "+".into()
            }
        })
        .collect();
    if depth < 4 && rng.below(2) == 0 {
        levels.push("#".into());
    }
    TopicFilter::mqtt(&levels.join("/")).expect("the bench's filters are valid")
}

fn topics(c: &mut Criterion) {
    let mut rng = Rng(7);
    let filters: Vec<TopicFilter> = (0..FILTERS).map(|_| filter(&mut rng)).collect();
    let topics: Vec<String> = (0..TOPICS)
        .map(|_| {
            (0..4)
                .map(|d| topic_level(&mut rng, d))
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect();
    let mut trie = TopicTrie::new(spate_pubsub::Dialect::Mqtt);
    for (i, f) in filters.iter().enumerate() {
        trie.insert(i as u32, f.clone()).expect("one dialect");
    }
    let total: usize = topics.iter().map(|t| trie.matches(t).len()).sum();
    eprintln!(
        "topic: {FILTERS} filters, {:.1} matches per topic",
        total as f64 / TOPICS as f64
    );

    let mut g = c.benchmark_group("topic");
    g.throughput(Throughput::Elements(TOPICS as u64));
    let mut out = Vec::new();
    g.bench_function("trie", |b| {
        b.iter(|| {
            let mut n = 0;
            for t in &topics {
                out.clear();
                trie.matches_into(t, &mut out);
                n += out.len();
            }
            black_box(n)
        })
    });
    let few = &topics[..5];
    g.throughput(Throughput::Elements(few.len() as u64));
    g.bench_function("naive", |b| {
        b.iter(|| {
            let mut n = 0;
            for t in few {
                n += filters.iter().filter(|f| filter_matches(f, t)).count();
            }
            black_box(n)
        })
    });
    g.finish();
}

/// Records routed per iteration of `route/router`, and how many of them are distinct.
const ROUTED: usize = 1_000_000;
const DISTINCT: usize = 10_000;

fn route(c: &mut Criterion) {
    let mut rng = Rng(99);
    let mut router = Router::new(Dialect::Mqtt);
    for i in 0..SUBSCRIPTIONS {
        let (topic, content) = match i % 3 {
            0 => (Some(filter(&mut rng)), None),
            1 => (None, Some(subscription(&mut rng, false))),
            _ => (Some(filter(&mut rng)), Some(subscription(&mut rng, false))),
        };
        router
            .add(SubId(i as u64), Subscription::new(topic, content))
            .expect("one dialect");
    }
    let messages: Vec<(String, Record)> = (0..DISTINCT)
        .map(|_| {
            let topic = (0..4)
                .map(|d| topic_level(&mut rng, d))
                .collect::<Vec<_>>()
                .join("/");
            (topic, record(&mut rng))
        })
        .collect();
    let mut out = Vec::new();
    let total: usize = messages
        .iter()
        .map(|(t, r)| {
            router.route_into(t, r, &mut out);
            out.len()
        })
        .sum();
    eprintln!(
        "route: {SUBSCRIPTIONS} subscriptions, {:.1} subscribers per record",
        total as f64 / DISTINCT as f64
    );

    let mut g = c.benchmark_group("route");
    g.sample_size(10);
    g.throughput(Throughput::Elements(ROUTED as u64));
    g.bench_function("router", |b| {
        b.iter(|| {
            let mut n = 0;
            for (t, r) in messages.iter().cycle().take(ROUTED) {
                router.route_into(t, r, &mut out);
                n += out.len();
            }
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, content, topics, route);
criterion_main!(benches);
