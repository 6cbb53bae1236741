//! Each operator against a naive evaluation of the same pipeline (property tests with seeds).
//!
//! With one worker a source's order is kept end to end, so rolling aggregates are compared as
//! exact sequences. With several workers only per-key facts that do not depend on interleaving
//! are compared (multisets, counts, final values).

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use spate::prelude::*;

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn cases() -> ProptestConfig {
    ProptestConfig {
        cases: 12,
        ..ProptestConfig::default()
    }
}

fn records() -> impl Strategy<Value = Vec<(u8, i64)>> {
    prop::collection::vec((0u8..12, -1000i64..1000), 0..400)
}

/// Runs `build` over `input` on `workers` workers and returns what reached the collect sink.
fn run<T: Data, R: Data>(
    input: Vec<T>,
    workers: usize,
    build: impl FnOnce(DataStream<T>) -> DataStream<R>,
) -> Vec<R> {
    let env = StreamEnv::new(JobConfig::local(workers));
    let out = build(env.from_collection(input)).collect();
    env.execute("test").expect("job runs");
    out.take()
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn stateless_chain_equals_naive(input in records(), workers in 1usize..4) {
        let got = run(input.clone(), workers, |s| {
            s.filter(|(k, _)| k % 3 != 0)
                .map(|(k, v)| (k, v * 2))
                .flat_map(|(k, v)| (0..(k % 3)).map(move |i| (k, v + i as i64)))
                .inspect(|_| {})
                .rebalance()
        });
        let naive: Vec<(u8, i64)> = input
            .iter()
            .filter(|(k, _)| k % 3 != 0)
            .map(|&(k, v)| (k, v * 2))
            .flat_map(|(k, v)| (0..(k % 3)).map(move |i| (k, v + i as i64)))
            .collect();
        prop_assert_eq!(sorted(got), sorted(naive));
    }

    #[test]
    fn rolling_aggregates_are_exact_sequences_on_one_worker(input in records()) {
        let sums = run(input.clone(), 1, |s| s.key_by(|r: &(u8, i64)| r.0).sum(|r| r.1));
        let mins = run(input.clone(), 1, |s| s.key_by(|r: &(u8, i64)| r.0).min(|r| r.1));
        let maxs = run(input.clone(), 1, |s| s.key_by(|r: &(u8, i64)| r.0).max(|r| r.1));
        let reduced = run(input.clone(), 1, |s| {
            s.key_by(|r: &(u8, i64)| r.0).reduce(|a, b| (a.0, a.1 - b.1))
        });
        let max_by = run(input.clone(), 1, |s| s.key_by(|r: &(u8, i64)| r.0).max_by(|r| r.1));
        let (mut sum, mut min, mut max, mut red, mut mb) =
            (HashMap::new(), HashMap::new(), HashMap::new(), HashMap::new(), HashMap::new());
        let (mut e_sum, mut e_min, mut e_max, mut e_red, mut e_mb) = (vec![], vec![], vec![], vec![], vec![]);
        for &(k, v) in &input {
            let s = sum.entry(k).or_insert(0i64);
            *s += v;
            e_sum.push((k, *s));
            let m = min.entry(k).or_insert(v);
            *m = (*m).min(v);
            e_min.push((k, *m));
            let m = max.entry(k).or_insert(v);
            *m = (*m).max(v);
            e_max.push((k, *m));
            let r = red.entry(k).and_modify(|a: &mut (u8, i64)| a.1 -= v).or_insert((k, v));
            e_red.push(*r);
            let b = mb.entry(k).and_modify(|a: &mut (u8, i64)| if v > a.1 { *a = (k, v) }).or_insert((k, v));
            e_mb.push(*b);
        }
        prop_assert_eq!(sums, e_sum);
        prop_assert_eq!(mins, e_min);
        prop_assert_eq!(maxs, e_max);
        prop_assert_eq!(reduced, e_red);
        prop_assert_eq!(max_by, e_mb);
    }

    #[test]
    fn keyed_results_do_not_depend_on_workers(input in records(), workers in 2usize..5) {
        let counts = run(input.clone(), workers, |s| s.key_by(|r: &(u8, i64)| r.0).count());
        let sums = run(input.clone(), workers, |s| {
            s.map(|(k, v)| (k, v.abs())).key_by(|r: &(u8, i64)| r.0).sum(|r| r.1)
        });
        let mut n: BTreeMap<u8, u64> = BTreeMap::new();
        let mut total: BTreeMap<u8, i64> = BTreeMap::new();
        for &(k, v) in &input {
            *n.entry(k).or_default() += 1;
            *total.entry(k).or_default() += v.abs();
        }
        // Every key emits 1..=n exactly once, whatever the interleaving.
        let expected_counts: Vec<(u8, u64)> =
            n.iter().flat_map(|(&k, &c)| (1..=c).map(move |i| (k, i))).collect();
        prop_assert_eq!(sorted(counts), expected_counts);
        // Sums of non-negative values: one output per record, the largest is the total.
        let mut last: BTreeMap<u8, i64> = BTreeMap::new();
        for (k, s) in &sums {
            let e = last.entry(*k).or_insert(*s);
            *e = (*e).max(*s);
        }
        prop_assert_eq!(sums.len(), input.len());
        prop_assert_eq!(last, total);
    }

    #[test]
    fn union_connect_and_broadcast(a in records(), b in prop::collection::vec(any::<u16>(), 0..200), workers in 1usize..4) {
        let env = StreamEnv::new(JobConfig::local(workers));
        let sa = env.from_collection(a.clone());
        let sb = env.from_collection(b.clone());
        let unioned = sa.union(&[sa.map(|(k, v)| (k, v + 1))]).collect();
        let connected = sa.connect(&sb).co_map(|(k, v)| v + k as i64, |x| -(x as i64)).collect();
        let broadcast = sb.broadcast().collect();
        env.execute("test").expect("job runs");

        let mut expected_union = a.clone();
        expected_union.extend(a.iter().map(|&(k, v)| (k, v + 1)));
        prop_assert_eq!(sorted(unioned.take()), sorted(expected_union));
        let mut expected_co: Vec<i64> = a.iter().map(|&(k, v)| v + k as i64).collect();
        expected_co.extend(b.iter().map(|&x| -(x as i64)));
        prop_assert_eq!(sorted(connected.take()), sorted(expected_co));
        let expected_bc: Vec<u16> = b.iter().flat_map(|&x| std::iter::repeat_n(x, workers)).collect();
        prop_assert_eq!(sorted(broadcast.take()), sorted(expected_bc));
    }

    #[test]
    fn keyed_co_process_joins_like_naive(
        left in prop::collection::vec((0u8..20, any::<u16>()), 0..150),
        right in prop::collection::vec((0u8..20, any::<u16>()), 0..150),
        workers in 1usize..4,
    ) {
        // An incremental inner join with buffered state on both sides.
        let env = StreamEnv::new(JobConfig::local(workers));
        let l = env.from_collection(left.clone()).key_by(|r: &(u8, u16)| r.0);
        let r = env.from_collection(right.clone()).key_by(|r: &(u8, u16)| r.0);
        type Sides = (Vec<u16>, Vec<u16>);
        let joined = l
            .connect(&r)
            .process_with_state(
                |k, s: &mut Option<Sides>, (_, a), out| {
                    let st = s.get_or_insert_with(Default::default);
                    out.extend(st.1.iter().map(|&b| (*k, a, b)));
                    st.0.push(a);
                },
                |k, s: &mut Option<Sides>, (_, b), out| {
                    let st = s.get_or_insert_with(Default::default);
                    out.extend(st.0.iter().map(|&a| (*k, a, b)));
                    st.1.push(b);
                },
            )
            .collect();
        env.execute("join").expect("job runs");
        let naive: Vec<(u8, u16, u16)> = left
            .iter()
            .flat_map(|&(k, a)| right.iter().filter(move |r| r.0 == k).map(move |&(_, b)| (k, a, b)))
            .collect();
        prop_assert_eq!(sorted(joined.take()), sorted(naive));
    }
}

#[test]
fn operator_names_reach_metrics() {
    let env = StreamEnv::new(JobConfig::local(2));
    env.from_collection((0..100u64).collect())
        .name("numbers")
        .filter(|x| x % 2 == 0)
        .name("evens")
        .sink_to(DiscardSink::new())
        .name("drain");
    let result = env.execute("names").expect("job runs");
    assert_eq!(result.totals["numbers.numRecordsOut"], 100);
    assert_eq!(result.metrics["drain.numRecordsIn"], 50);
    let plan_names: Vec<String> = env.plan().nodes.iter().map(|n| n.name.clone()).collect();
    assert_eq!(plan_names, ["numbers", "evens", "drain"]);
}

#[test]
fn dynamic_json_values_flow_through_keyed_operators() {
    let env = StreamEnv::new(JobConfig::local(3));
    let items: Vec<Value> = (0..60)
        .map(|i| serde_json::from_str(&format!(r#"{{"user":"u{}","n":{i}}}"#, i % 4)).unwrap())
        .collect();
    let sums = env
        .from_collection(items)
        .key_by(|v: &Value| {
            v.get("user")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        })
        .sum(|v| v.get("n").and_then(Value::as_i64).unwrap_or(0))
        .collect();
    env.execute("values").expect("job runs");
    let mut finals: BTreeMap<String, i64> = BTreeMap::new();
    for (k, s) in sums.take() {
        let e = finals.entry(k).or_insert(s);
        *e = (*e).max(s);
    }
    let expected: BTreeMap<String, i64> = (0..4)
        .map(|u| (format!("u{u}"), (0..60).filter(|i| i % 4 == u).sum()))
        .collect();
    assert_eq!(finals, expected);
}
