//! Random topics, filters, predicates and records over small vocabularies, so that matches
//! are frequent and the edge cases (empty levels, `$` topics, type mismatches, NaN, integers
//! against floats) come up often.

use std::collections::HashMap;

use proptest::prelude::*;
use spate_pubsub::{AttrValue, Dialect, Predicate, TopicFilter};

fn level(dialect: Dialect) -> BoxedStrategy<String> {
    let words: &[&str] = match dialect {
        Dialect::Mqtt => &["a", "b", "", "$s"],
        Dialect::Nats => &["a", "b", "$s"],
    };
    prop::sample::select(words.to_vec())
        .prop_map(String::from)
        .boxed()
}

/// A valid filter of `dialect`.
pub fn filter(dialect: Dialect) -> impl Strategy<Value = TopicFilter> {
    let single = dialect.single_wildcard().to_string();
    let multi = dialect.multi_wildcard().to_string();
    let lvl = prop_oneof![3 => level(dialect), 1 => Just(single)];
    (prop::collection::vec(lvl, 0..4), any::<bool>()).prop_map(move |(mut levels, with_multi)| {
        if with_multi || levels.is_empty() {
            levels.push(multi.clone());
        }
        let text = levels.join(&dialect.separator().to_string());
        // A lone empty MQTT level is the empty filter, which is invalid.
        let text = if text.is_empty() { multi.clone() } else { text };
        TopicFilter::parse(dialect, &text).unwrap()
    })
}

/// A topic name of `dialect`, sometimes invalid (with a wildcard, or an empty NATS token).
pub fn topic(dialect: Dialect) -> impl Strategy<Value = String> {
    let bad = match dialect {
        Dialect::Mqtt => "+",
        Dialect::Nats => "",
    };
    let lvl = prop_oneof![12 => level(dialect), 1 => Just(bad.to_string())];
    prop::collection::vec(lvl, 1..5)
        .prop_map(move |levels| levels.join(&dialect.separator().to_string()))
}

const ATTRS: &[&str] = &["a", "b", "c", "d"];
const STRS: &[&str] = &["", "a", "ab", "b", "é"];
const FLOATS: &[f64] = &[-1.5, 0.0, 0.5, 2.0, 2.5];

fn attr() -> impl Strategy<Value = &'static str> {
    prop::sample::select(ATTRS)
}

fn num_lit() -> BoxedStrategy<String> {
    prop_oneof![
        (-3i64..3).prop_map(|i| i.to_string()),
        prop::sample::select(FLOATS).prop_map(|f| format!("{f:?}"))
    ]
    .boxed()
}

fn str_lit() -> BoxedStrategy<String> {
    prop::sample::select(STRS)
        .prop_map(|s| format!("'{s}'"))
        .boxed()
}

fn not() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["", "NOT "][..])
}

fn atom() -> impl Strategy<Value = String> {
    let ops = prop::sample::select(&["=", "!=", "<>", "<", "<=", ">", ">="][..]);
    let eq = prop::sample::select(&["=", "!="][..]);
    let list =
        |lit: BoxedStrategy<String>| prop::collection::vec(lit, 1..4).prop_map(|v| v.join(", "));
    prop_oneof![
        (attr(), ops.clone(), num_lit()).prop_map(|(a, o, l)| format!("{a} {o} {l}")),
        (attr(), ops, str_lit()).prop_map(|(a, o, l)| format!("{a} {o} {l}")),
        (attr(), eq, any::<bool>()).prop_map(|(a, o, b)| format!("{a} {o} {b}")),
        (attr(), not(), list(num_lit())).prop_map(|(a, n, l)| format!("{a} {n}IN ({l})")),
        (attr(), not(), list(str_lit())).prop_map(|(a, n, l)| format!("{a} {n}IN ({l})")),
        (attr(), not(), num_lit(), num_lit())
            .prop_map(|(a, n, x, y)| format!("{a} {n}BETWEEN {x} AND {y}")),
        (
            attr(),
            not(),
            prop::sample::select(&["PREFIX", "SUFFIX", "CONTAINS"][..]),
            str_lit()
        )
            .prop_map(|(a, n, o, s)| format!("{a} {n}{o} {s}")),
        attr().prop_map(|a| format!("EXISTS {a}")),
    ]
}

/// A valid predicate (its text is generated, then parsed).
pub fn predicate() -> impl Strategy<Value = Predicate> {
    atom()
        .prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                inner.clone().prop_map(|e| format!("NOT ({e})")),
                prop::collection::vec(inner.clone(), 2..4)
                    .prop_map(|v| format!("({})", v.join(" AND "))),
                prop::collection::vec(inner, 2..4).prop_map(|v| format!("({})", v.join(" OR "))),
            ]
        })
        .prop_filter_map("too many conjunctions", |text| Predicate::parse(&text).ok())
}

fn value() -> impl Strategy<Value = AttrValue> {
    prop_oneof![
        (-3i64..3).prop_map(AttrValue::Int),
        prop::sample::select(FLOATS).prop_map(AttrValue::Float),
        prop::sample::select(&[f64::NAN, 1e19, -0.0][..]).prop_map(AttrValue::Float),
        prop::sample::select(&[i64::MAX, i64::MIN][..]).prop_map(AttrValue::Int),
        prop::sample::select(STRS).prop_map(|s| AttrValue::Str(s.into())),
        any::<bool>().prop_map(AttrValue::Bool),
    ]
}

/// A record with some of the attributes the predicates use, and one they never do.
pub fn record() -> impl Strategy<Value = HashMap<String, AttrValue>> {
    prop::collection::vec(prop::option::weighted(0.7, value()), ATTRS.len() + 1).prop_map(|vals| {
        ATTRS
            .iter()
            .copied()
            .chain(["unused"])
            .zip(vals)
            .filter_map(|(a, v)| Some((a.to_string(), v?)))
            .collect()
    })
}
