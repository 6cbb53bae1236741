//! Operator chaining: a chained job gives exactly the results of the same job with chaining
//! disabled (Flink's `disableOperatorChaining`), errors and panics name the operator of the
//! chain they happen in, a stream read twice runs its operators once, and chaining builds
//! fewer timely operators: exactly one per chain (a sink runs the chain before it).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use spate::dataflow::plan::Plan;
use spate::dataflow::{TimeWindow, TumblingEventTimeWindows, WindowContext};
use spate::prelude::*;

use crate::functions::restarts_once_to_the_failure_free_output;

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

/// An environment on `workers` workers, with chaining on or off.
fn env(workers: usize, chaining: bool) -> StreamEnv {
    let env = StreamEnv::new(JobConfig::local(workers));
    if !chaining {
        env.disable_operator_chaining();
    }
    env
}

/// Every chainable operator in a row, then a shuffle: what reached the sink.
fn stateless(input: Vec<(u8, i64)>, workers: usize, chaining: bool) -> Vec<(u8, i64)> {
    let env = env(workers, chaining);
    let out = env
        .from_collection(input)
        .filter(|(k, _)| k % 3 != 0)
        .map(|(k, v)| (k, v * 2))
        .flat_map(|(k, v)| (0..(k % 3)).map(move |i| (k, v + i as i64)))
        .inspect(|_| {})
        .try_map(|(k, v)| Ok::<_, String>((k, v - 1)))
        .try_filter(|(_, v)| Ok::<_, String>(v % 5 != 0))
        .try_flat_map(|(k, v)| Ok::<_, String>(vec![(k, v), (k + 100, v)]))
        .flat_map_batches(|batch, out| {
            out.extend(batch.drain(..).filter(|(_, (k, _))| k % 2 == 0));
        })
        .rebalance()
        .map(|(k, v)| (k, v + 1))
        .collect();
    env.execute("stateless").expect("job runs");
    out.take()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_chained_job_gives_the_results_of_the_unchained_job_and_of_naive_code(
        input in prop::collection::vec((0u8..12, -1000i64..1000), 0..300),
        workers in 1usize..4,
    ) {
        let chained = sorted(stateless(input.clone(), workers, true));
        let unchained = sorted(stateless(input.clone(), workers, false));
        let naive: Vec<(u8, i64)> = input
            .iter()
            .filter(|(k, _)| k % 3 != 0)
            .map(|&(k, v)| (k, v * 2))
            .flat_map(|(k, v)| (0..(k % 3)).map(move |i| (k, v + i as i64)))
            .map(|(k, v)| (k, v - 1))
            .filter(|(_, v)| v % 5 != 0)
            .flat_map(|(k, v)| [(k, v), (k + 100, v)])
            .filter(|(k, _)| k % 2 == 0)
            .map(|(k, v)| (k, v + 1))
            .collect();
        prop_assert_eq!(&chained, &unchained);
        prop_assert_eq!(chained, sorted(naive));
    }
}

/// `source → map → filter → map → flat_map → sink`, with `edit` applied to the second map,
/// and how many timely operators it built on worker 0.
fn four_operators(
    chaining: bool,
    edit: impl Fn(DataStream<u64>) -> DataStream<u64>,
) -> (usize, u64, Plan) {
    let env = env(1, chaining);
    let stream = env
        .from_collection((0u64..1000).collect())
        .map(|x| x + 1)
        .filter(|x| x % 3 != 0);
    let out = edit(stream.map(|x| x * 2))
        .flat_map(|x| [x, x + 1])
        .collect();
    let result = env.execute("four operators").expect("job runs");
    let sum = out.take().iter().sum();
    (result.operators, sum, env.plan())
}

/// The same job without its four forward operators: what a job builds besides them.
fn base_operators() -> usize {
    let env = env(1, true);
    let _out = env.from_collection((0u64..1000).collect()).collect();
    env.execute("no operators").expect("job runs").operators
}

#[test]
fn a_chain_is_one_timely_operator_and_disable_chaining_and_start_new_chain_split_it() {
    let base = base_operators();
    let expected_sum: u64 = (0u64..1000)
        .map(|x| x + 1)
        .filter(|x| x % 3 != 0)
        .map(|x| x * 2)
        .flat_map(|x| [x, x + 1])
        .sum();
    type Case = (&'static str, bool, fn(DataStream<u64>) -> DataStream<u64>);
    let cases: [(Case, usize, [usize; 5]); 5] = [
        // Without chaining, each operator is a timely operator of its own.
        (("unchained", false, |s| s), 4, [1, 2, 3, 4, 5]),
        // With chaining, the four run in the sink's operator.
        (("chained", true, |s| s), 0, [1, 1, 1, 1, 1]),
        // A new chain at the second map: map → filter | map → flat_map → sink.
        (
            ("start_new_chain", true, |s| s.start_new_chain()),
            1,
            [1, 1, 3, 3, 3],
        ),
        // The second map alone: map → filter | map | flat_map → sink.
        (
            ("disable_chaining", true, |s| s.disable_chaining()),
            2,
            [1, 1, 3, 4, 4],
        ),
        // Disabled job-wide, a start_new_chain changes nothing.
        (
            ("unchained, new chain", false, |s| s.start_new_chain()),
            4,
            [1, 2, 3, 4, 5],
        ),
    ];
    for ((case, chaining, edit), operators, heads) in cases {
        let (built, sum, plan) = four_operators(chaining, edit);
        assert_eq!(sum, expected_sum, "{case}");
        assert_eq!(built, base + operators, "{case}: timely operators built");
        assert_eq!(plan.chain_heads()[1..6], heads, "{case}: chain heads");
        let describe = plan.describe();
        assert!(
            describe.contains("#4 Operator flat_map-4 <- [#3] (forward) uid="),
            "{describe}"
        );
        assert!(
            describe.contains(&format!(" chain=#{}\n#5 Sink", heads[3])),
            "{case}: {describe}"
        );
        assert!(
            describe.ends_with(&format!(" chain=#{}\n", heads[4])),
            "{case}: {describe}"
        );
    }
}

/// A job whose chain `map → parse → filter` fails in `parse` on record 17, by an error or a
/// panic.
fn failing_in_a_chain(chaining: bool, panics: bool) -> SpateError {
    let env = env(2, chaining);
    let _out = env
        .from_collection((0u64..100).collect())
        .map(|v| v + 1)
        .name("before")
        .try_map(move |v: u64| {
            if v == 18 {
                if panics {
                    panic!("cannot parse record {}", v - 1);
                }
                return Err(format!("cannot parse record {}", v - 1));
            }
            Ok(v)
        })
        .name("parse")
        .filter(|v| v % 2 == 0)
        .name("after")
        .collect();
    env.execute("failing chain").unwrap_err()
}

#[test]
fn an_error_or_panic_inside_a_chain_names_its_own_operator() {
    for panics in [false, true] {
        let chained = failing_in_a_chain(true, panics);
        let unchained = failing_in_a_chain(false, panics);
        assert_eq!(chained.to_string(), unchained.to_string());
        let expected = if panics {
            "operator parse panicked: cannot parse record 17"
        } else {
            "operator parse failed: cannot parse record 17"
        };
        assert_eq!(chained.to_string(), expected);
    }
}

/// A chain `map → inspect` read by two consumers, and a second chain after it: the records
/// of both branches and how often `inspect` ran.
fn fan_out(chaining: bool) -> (Vec<u64>, Vec<u64>, u64, usize) {
    static SEEN: AtomicU64 = AtomicU64::new(0);
    SEEN.store(0, Ordering::SeqCst);
    let env = env(1, chaining);
    let shared = env
        .from_collection((0u64..500).collect())
        .map(|x| x * 3)
        .inspect(|_| {
            SEEN.fetch_add(1, Ordering::SeqCst);
        });
    let a = shared.filter(|x| x % 2 == 0).map(|x| x + 1).collect();
    let b = shared.map(|x| x * 10).collect();
    let result = env.execute("fan out").expect("job runs");
    (
        sorted(a.take()),
        sorted(b.take()),
        SEEN.load(Ordering::SeqCst),
        result.operators,
    )
}

#[test]
fn a_stream_read_twice_runs_its_chain_once() {
    let (a, b, seen, chained_ops) = fan_out(true);
    let (ua, ub, useen, unchained_ops) = fan_out(false);
    let naive_a: Vec<u64> = (0u64..500)
        .map(|x| x * 3)
        .filter(|x| x % 2 == 0)
        .map(|x| x + 1)
        .collect();
    let naive_b: Vec<u64> = (0u64..500).map(|x| x * 30).collect();
    assert_eq!((&a, &b), (&naive_a, &naive_b));
    assert_eq!((&ua, &ub), (&naive_a, &naive_b));
    // `inspect` runs once per record, though two consumers read its output.
    assert_eq!((seen, useen), (500, 500));
    // Unchained: 5 operators and 2 sinks. Chained: map → inspect, then
    // filter → map → sink and map → sink.
    assert_eq!(unchained_ops - chained_ops, 4);
}

#[test]
fn a_union_after_chains_gets_every_record_once() {
    for workers in [1, 3] {
        let run = |chaining: bool| {
            let env = env(workers, chaining);
            let left = env
                .from_collection((0u64..300).collect())
                .map(|x| x * 2)
                .filter(|x| x % 3 != 0);
            let right = env
                .from_collection((0u64..200).collect())
                .map(|x| x + 10_000);
            let out = left.union(&[right]).map(|x| x + 1).collect();
            env.execute("union").expect("job runs");
            sorted(out.take())
        };
        let naive: Vec<u64> = sorted(
            (0u64..300)
                .map(|x| x * 2)
                .filter(|x| x % 3 != 0)
                .chain((0u64..200).map(|x| x + 10_000))
                .map(|x| x + 1)
                .collect(),
        );
        assert_eq!(run(true), naive, "{workers} workers, chained");
        assert_eq!(run(false), naive, "{workers} workers, unchained");
    }
}

#[test]
fn a_dangling_chain_still_runs() {
    static SEEN: AtomicU64 = AtomicU64::new(0);
    let env = env(2, true);
    let source = env.from_collection((0u64..100).collect());
    // Nothing reads the inspect's output: its chain is built all the same.
    source.map(|x| x + 1).inspect(|_| {
        SEEN.fetch_add(1, Ordering::SeqCst);
    });
    let _out = source.collect();
    env.execute("dangling").expect("job runs");
    assert_eq!(SEEN.load(Ordering::SeqCst), 100);
}

static CHAIN_PANICKED: AtomicBool = AtomicBool::new(false);

#[test]
fn a_checkpointed_job_restarts_through_a_chain_to_the_failure_free_output() {
    restarts_once_to_the_failure_free_output(&CHAIN_PANICKED, |s| {
        s.map(|v: u64| v + 7)
            .filter(|_| true)
            .map(|v: u64| {
                if v == 15_007 && !CHAIN_PANICKED.swap(true, Ordering::SeqCst) {
                    panic!("a failure in the middle of a chain");
                }
                v - 7
            })
            .inspect(|_| {})
    });
}

/// Counts per key and tumbling window of 100 ms, with the timestamps assigned after a chain
/// `map → filter`, and how many timely operators the job built.
fn windows_after_a_chain(workers: usize, chaining: bool) -> (Vec<(u32, i64, u64)>, usize) {
    let env = env(workers, chaining);
    let out = env
        .from_collection((0i64..3000).collect())
        .map(|i| ((i % 7) as u32, i / 2))
        .filter(|(k, _)| *k != 3)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(5))
                .with_timestamp_assigner(|r: &(u32, i64), _| r.1),
        )
        .key_by(|r: &(u32, i64)| r.0)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)))
        .process(
            |k: &u32, w: &WindowContext<'_, TimeWindow>, els: &[(u32, i64)], out: &mut Vec<_>| {
                out.push((*k, w.window.start, els.len() as u64))
            },
        )
        .collect();
    let result = env.execute("windows after a chain").expect("job runs");
    (sorted(out.take()), result.operators)
}

#[test]
fn timestamps_assigned_after_a_chain_run_in_it_and_windows_are_unchanged() {
    let mut naive: BTreeMap<(u32, i64), u64> = BTreeMap::new();
    for i in 0i64..3000 {
        let (k, ts) = ((i % 7) as u32, i / 2);
        if k != 3 {
            *naive.entry((k, ts - ts.rem_euclid(100))).or_default() += 1;
        }
    }
    let naive: Vec<(u32, i64, u64)> = naive.into_iter().map(|((k, s), n)| (k, s, n)).collect();
    for workers in [1, 2] {
        let (chained, chained_ops) = windows_after_a_chain(workers, true);
        let (unchained, unchained_ops) = windows_after_a_chain(workers, false);
        assert_eq!(chained, naive, "{workers} workers, chained");
        assert_eq!(unchained, naive, "{workers} workers, unchained");
        // map → filter → timestamps is one operator instead of three.
        assert_eq!(unchained_ops - chained_ops, 2, "{workers} workers");
    }
}
