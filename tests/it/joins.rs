//! Joins against a naive nested-loop evaluation (property tests with fixed seeds), the
//! interval join's late records and missing timestamps, and the window join's trigger and
//! allowed lateness.
//!
//! The inputs are keyed streams out of order by at most `JITTER_MS`, with a bounded
//! out-of-orderness watermark of exactly that bound: nothing is late, yet the watermark
//! follows the data closely (it is emitted after every poll of at most four records), so
//! buffers are cleaned and windows fire while the job runs, and a join that cleaned too early
//! would lose pairs.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use spate::dataflow::{
    CountTrigger, EventTimeSessionWindows, GlobalWindows, PurgingTrigger, SlidingEventTimeWindows,
    TumblingEventTimeWindows,
};
use spate::prelude::*;

/// A record of either input: `(key, timestamp, id)`.
type Rec = (u8, i64, u32);

/// The most a record's timestamp trails the largest one before it.
const JITTER_MS: i64 = 25;

fn cases(seed: u64) -> ProptestConfig {
    ProptestConfig {
        cases: 10,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Records whose timestamps grow by 0..6 ms a step and trail the running maximum by at most
/// `JITTER_MS`; ids are positions, so that a pair of ids names a pair of records.
fn stream(max_len: usize) -> impl Strategy<Value = Vec<Rec>> {
    prop::collection::vec((0u8..4, 0i64..6, 0i64..=JITTER_MS), 0..max_len).prop_map(|steps| {
        let mut base = 1_000;
        steps
            .into_iter()
            .enumerate()
            .map(|(i, (key, step, jitter))| {
                base += step;
                (key, base - jitter, i as u32)
            })
            .collect()
    })
}

/// Small epochs and polls, few epochs in flight and a watermark after every poll: the
/// watermark moves closely behind the data.
fn config(workers: usize) -> JobConfig {
    JobConfig {
        epoch_max_records: 4,
        poll_batch: 4,
        max_epochs_in_flight: 2,
        auto_watermark_interval: Duration::ZERO,
        ..JobConfig::local(workers)
    }
}

fn timestamps() -> WatermarkStrategy<Rec> {
    timestamps_within(JITTER_MS)
}

fn timestamps_within(bound_ms: i64) -> WatermarkStrategy<Rec> {
    WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(bound_ms as u64))
        .with_timestamp_assigner(|r: &Rec, _| r.1)
}

/// Passes records on with the event timestamp the stream carries for them.
struct WithTimestamp;

impl<T: Data> KeyedProcessFunction<u8, T, (T, Timestamp)> for WithTimestamp {
    type State = ();

    fn process_element(&self, value: T, ctx: &mut ProcessContext<'_, u8, (), (T, Timestamp)>) {
        let ts = ctx.timestamp();
        ctx.collect((value, ts));
    }
}

/// One joined pair as the tests see it: ids, both timestamps, the context's timestamp and the
/// timestamp the output record carries downstream.
type Pair = (u32, u32, i64, i64, i64, i64);

/// Bounds of an interval join: `(lower, upper, lower exclusive, upper exclusive)`.
type IntervalBounds = (i64, i64, bool, bool);

fn interval_join(
    workers: usize,
    left: Vec<Rec>,
    right: Vec<Rec>,
    bounds: IntervalBounds,
) -> Vec<Pair> {
    let (lower, upper, lower_exclusive, upper_exclusive) = bounds;
    let env = StreamEnv::new(config(workers));
    let l = env
        .from_collection(left)
        .assign_timestamps_and_watermarks(timestamps())
        .key_by(|r: &Rec| r.0);
    let r = env
        .from_collection(right)
        .assign_timestamps_and_watermarks(timestamps())
        .key_by(|r: &Rec| r.0);
    let mut joined = l.interval_join(&r).between(lower, upper);
    if lower_exclusive {
        joined = joined.lower_bound_exclusive();
    }
    if upper_exclusive {
        joined = joined.upper_bound_exclusive();
    }
    let out = joined
        .process(
            |a: &Rec, b: &Rec, ctx: &mut JoinContext<'_, (u32, u32, i64, i64, i64)>| {
                assert_eq!(a.0, b.0, "joined records have equal keys");
                let v = (
                    a.2,
                    b.2,
                    ctx.left_timestamp(),
                    ctx.right_timestamp(),
                    ctx.timestamp(),
                );
                ctx.collect(v)
            },
        )
        .key_by(|p: &(u32, u32, i64, i64, i64)| (p.0 % 7) as u8)
        .process(WithTimestamp)
        .map(|((l, r, lt, rt, t), ts)| (l, r, lt, rt, t, ts))
        .collect();
    env.execute("interval join").expect("job runs");
    let mut v = out.take();
    v.sort();
    v
}

fn naive_interval_join(left: &[Rec], right: &[Rec], bounds: IntervalBounds) -> Vec<Pair> {
    let (lower, upper, lower_exclusive, upper_exclusive) = bounds;
    let mut v = Vec::new();
    for a in left {
        for b in right {
            let d = b.1 - a.1;
            let above = if lower_exclusive {
                d > lower
            } else {
                d >= lower
            };
            let below = if upper_exclusive {
                d < upper
            } else {
                d <= upper
            };
            if a.0 == b.0 && above && below {
                let t = a.1.max(b.1);
                v.push((a.2, b.2, a.1, b.1, t, t));
            }
        }
    }
    v.sort();
    v
}

fn bounds() -> impl Strategy<Value = IntervalBounds> {
    (-40i64..40, 0i64..60, any::<bool>(), any::<bool>())
        .prop_map(|(lower, width, le, ue)| (lower, lower + width, le, ue))
}

proptest! {
    #![proptest_config(cases(0x1a7e_2024))]

    #[test]
    fn interval_join_equals_nested_loops_on_one_and_three_workers(
        left in stream(120),
        right in stream(120),
        bounds in bounds(),
    ) {
        let expected = naive_interval_join(&left, &right, bounds);
        prop_assert_eq!(&interval_join(1, left.clone(), right.clone(), bounds), &expected);
        prop_assert_eq!(&interval_join(3, left, right, bounds), &expected);
    }
}

/// What [`lockstep_join`] saw: the pairs, the ids of the late records of each side (with
/// side outputs) and the count of late records dropped.
type Lockstep = (Vec<(u32, u32)>, Vec<u32>, Vec<u32>, u64);

/// Both inputs from one source, so that they share one watermark, one record per epoch and
/// one epoch in flight: a watermark has reached the join before the next record is read.
fn lockstep_join(records: Vec<(bool, Rec)>, late_tags: bool) -> Lockstep {
    let config = JobConfig {
        epoch_max_records: 1,
        poll_batch: 1,
        max_epochs_in_flight: 1,
        auto_watermark_interval: Duration::ZERO,
        ..JobConfig::local(1)
    };
    let env = StreamEnv::new(config);
    let all = env
        .from_collection(records)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_monotonous_timestamps()
                .with_timestamp_assigner(|r: &(bool, Rec), _| r.1 .1),
        );
    let left = all.filter(|r| r.0).map(|r| r.1).key_by(|r: &Rec| r.0);
    let right = all.filter(|r| !r.0).map(|r| r.1).key_by(|r: &Rec| r.0);
    let left_late = OutputTag::<Rec>::new("left-late");
    let right_late = OutputTag::<Rec>::new("right-late");
    let mut joined = left.interval_join(&right).between(-10, 10);
    if late_tags {
        joined = joined
            .side_output_left_late_data(&left_late)
            .side_output_right_late_data(&right_late);
    }
    let pairs = joined
        .process(|a: &Rec, b: &Rec, ctx: &mut JoinContext<'_, (u32, u32)>| ctx.collect((a.2, b.2)));
    let out = pairs.collect();
    let late = if late_tags {
        Some((
            pairs.side_output(&left_late).map(|r| r.2).collect(),
            pairs.side_output(&right_late).map(|r| r.2).collect(),
        ))
    } else {
        None
    };
    let result = env.execute("late records").expect("job runs");
    let dropped = result
        .metrics
        .iter()
        .filter(|(k, _)| k.ends_with("numLateRecordsDropped"))
        .map(|(_, v)| *v)
        .sum();
    let mut pairs = out.take();
    pairs.sort();
    let (l, r) = late.map_or((vec![], vec![]), |(l, r)| (l.take(), r.take()));
    (pairs, l, r, dropped)
}

#[test]
fn interval_join_drops_late_records_or_sends_them_to_side_outputs() {
    let (l, r) = (true, false);
    let records = vec![
        (l, (1, 100, 0)),
        (r, (1, 105, 1)), // joins 0
        (l, (1, 200, 2)),
        (r, (1, 300, 3)),
        // The watermark is now 299: these would join 1 and 0, but they are late.
        (l, (1, 104, 4)),
        (r, (1, 101, 5)),
        // Not late: joins 3.
        (l, (1, 305, 6)),
        (r, (2, 299, 7)), // late, and of a key with nothing else
    ];
    let (pairs, left_late, right_late, dropped) = lockstep_join(records.clone(), true);
    assert_eq!(pairs, vec![(0, 1), (6, 3)]);
    assert_eq!(left_late, vec![4]);
    assert_eq!(right_late, vec![5, 7]);
    assert_eq!(dropped, 0, "records sent to a side output are not dropped");

    // Without side outputs the late records are dropped and counted, as windows count them.
    let (pairs, left_late, right_late, dropped) = lockstep_join(records, false);
    assert_eq!(pairs, vec![(0, 1), (6, 3)]);
    assert!(left_late.is_empty() && right_late.is_empty());
    assert_eq!(dropped, 3, "numLateRecordsDropped");
}

#[test]
fn interval_join_at_the_ends_of_the_timestamp_range() {
    let (l, r) = (true, false);
    let (min, max) = (i64::MIN, i64::MAX);
    // Bounds of +-10 ms reach beyond both ends of the range; they are cut there.
    let records = vec![
        (l, (1, min + 1, 0)),
        (r, (1, min + 1, 1)),  // joins 0
        (r, (1, min + 12, 2)), // 11 ms after 0: no pair
        (l, (1, max - 1, 3)),
        (r, (1, max, 4)),     // joins 3
        (l, (1, max, 5)),     // joins 4
        (r, (1, max - 1, 6)), // joins 3 and 5
    ];
    let (pairs, _, _, dropped) = lockstep_join(records, false);
    assert_eq!(pairs, vec![(0, 1), (3, 4), (3, 6), (5, 4), (5, 6)]);
    assert_eq!(dropped, 0);
}

#[test]
fn interval_join_fails_the_job_on_records_without_timestamps() {
    let env = StreamEnv::new(JobConfig::local(2));
    let l = env
        .from_collection(vec![(1u8, 5i64, 0u32)])
        .key_by(|r: &Rec| r.0);
    let r = env
        .from_collection(vec![(1u8, 5i64, 1u32)])
        .key_by(|r: &Rec| r.0);
    let _ = l
        .interval_join(&r)
        .between(0, 0)
        .process(|a: &Rec, b: &Rec, ctx: &mut JoinContext<'_, (u32, u32)>| ctx.collect((a.2, b.2)))
        .collect();
    let err = env.execute("no timestamps").expect_err("the job fails");
    assert!(err.to_string().contains("no timestamp"), "{err}");
}

#[test]
#[should_panic(expected = "must not exceed the upper bound")]
fn interval_join_rejects_a_lower_bound_above_the_upper() {
    let env = StreamEnv::new(JobConfig::local(1));
    let s = env
        .from_collection(vec![(1u8, 5i64, 0u32)])
        .key_by(|r: &Rec| r.0);
    let _ = s.interval_join(&s).between(1, 0);
}

// ---------------------------------------------------------------------------------------------
// Window join and co-group
// ---------------------------------------------------------------------------------------------

/// The windows of a property test.
#[derive(Debug, Clone, Copy)]
enum Windows {
    Tumbling(i64),
    Sliding(i64, i64),
    Session(i64),
}

/// Per key and window `[start, end)`, the elements of each side: what both window functions
/// see, computed from scratch.
type Groups = BTreeMap<(u8, i64, i64), (Vec<Rec>, Vec<Rec>)>;

fn naive_groups(left: &[Rec], right: &[Rec], windows: Windows) -> Groups {
    let mut groups = Groups::new();
    let tagged = left
        .iter()
        .map(|r| (true, *r))
        .chain(right.iter().map(|r| (false, *r)));
    let mut put = |key: u8, start: i64, end: i64, (is_left, r): (bool, Rec)| {
        let g = groups.entry((key, start, end)).or_default();
        if is_left {
            g.0.push(r);
        } else {
            g.1.push(r);
        }
    };
    match windows {
        Windows::Tumbling(size) => {
            for (side, r) in tagged {
                let start = r.1 - r.1.rem_euclid(size);
                put(r.0, start, start + size, (side, r));
            }
        }
        Windows::Sliding(size, slide) => {
            for (side, r) in tagged {
                let mut start = r.1 - r.1.rem_euclid(slide);
                while start > r.1 - size {
                    put(r.0, start, start + size, (side, r));
                    start -= slide;
                }
            }
        }
        Windows::Session(gap) => {
            let mut per_key: BTreeMap<u8, Vec<(i64, bool, Rec)>> = BTreeMap::new();
            for (side, r) in tagged {
                per_key.entry(r.0).or_default().push((r.1, side, r));
            }
            for (key, mut events) in per_key {
                events.sort_by_key(|e| e.0);
                // Sessions `[first, last + gap)`; windows that touch merge, as in Flink.
                let mut session: Vec<(bool, Rec)> = Vec::new();
                let (mut start, mut end) = (0, i64::MIN);
                for (ts, side, r) in events {
                    if ts > end && !session.is_empty() {
                        for e in session.drain(..) {
                            put(key, start, end, e);
                        }
                    }
                    if session.is_empty() {
                        start = ts;
                    }
                    end = end.max(ts + gap);
                    session.push((side, r));
                }
                for e in session.drain(..) {
                    put(key, start, end, e);
                }
            }
        }
    }
    groups
}

/// Joins or co-groups `left` and `right` in `windows` on `workers` workers. Session tests
/// put timestamps on a 10-ms grid and use a gap that is not a multiple of 10: a session then
/// never ends exactly where a later record starts, the one case in which Flink's result (the
/// session has fired and is gone when a record that merely touches it arrives, though that
/// record is not late) differs from merging all sessions at once.
fn windowed<R: Data + Ord>(
    workers: usize,
    left: Vec<Rec>,
    right: Vec<Rec>,
    windows: Windows,
    bound_ms: i64,
    apply: impl FnOnce(DataStream<Rec>, DataStream<Rec>, Windows) -> DataStream<R>,
) -> Vec<(R, Timestamp)> {
    let env = StreamEnv::new(config(workers));
    let l = env
        .from_collection(left)
        .assign_timestamps_and_watermarks(timestamps_within(bound_ms));
    let r = env
        .from_collection(right)
        .assign_timestamps_and_watermarks(timestamps_within(bound_ms));
    let out = apply(l, r, windows)
        .key_by(|_: &R| 0u8)
        .process(WithTimestamp)
        .collect();
    env.execute("window join").expect("job runs");
    let mut v = out.take();
    v.sort();
    v
}

fn window_join(l: DataStream<Rec>, r: DataStream<Rec>, windows: Windows) -> DataStream<(u32, u32)> {
    let f = |a: &Rec, b: &Rec| {
        assert_eq!(a.0, b.0, "joined records have equal keys");
        (a.2, b.2)
    };
    let flat_f = move |a: &Rec, b: &Rec, out: &mut Vec<(u32, u32)>| out.push(f(a, b));
    let keyed = l.join(&r).where_key(|a: &Rec| a.0).equal_to(|b: &Rec| b.0);
    let ms = |x: i64| Duration::from_millis(x as u64);
    match windows {
        Windows::Tumbling(size) => keyed
            .window(TumblingEventTimeWindows::of(ms(size)))
            .apply(f),
        Windows::Sliding(size, slide) => keyed
            .window(SlidingEventTimeWindows::of(ms(size), ms(slide)))
            .apply(f),
        // The same join as a flat join function.
        Windows::Session(gap) => keyed
            .window(EventTimeSessionWindows::with_gap(ms(gap)))
            .flat_apply(flat_f),
    }
}

/// One co-group call: the key, and the ids of each side in order.
type Group = (u8, Vec<u32>, Vec<u32>);

fn co_group(l: DataStream<Rec>, r: DataStream<Rec>, windows: Windows) -> DataStream<Group> {
    let f = |a: &[Rec], b: &[Rec], out: &mut Vec<Group>| {
        let key = a.first().or(b.first()).expect("a group is never empty").0;
        assert!(a.iter().chain(b).all(|r| r.0 == key), "one key per group");
        let mut ids = (
            a.iter().map(|r| r.2).collect::<Vec<_>>(),
            b.iter().map(|r| r.2).collect::<Vec<_>>(),
        );
        ids.0.sort();
        ids.1.sort();
        out.push((key, ids.0, ids.1));
    };
    let keyed = l
        .co_group(&r)
        .where_key(|a: &Rec| a.0)
        .equal_to(|b: &Rec| b.0);
    let ms = |x: i64| Duration::from_millis(x as u64);
    match windows {
        Windows::Tumbling(size) => keyed
            .window(TumblingEventTimeWindows::of(ms(size)))
            .apply(f),
        Windows::Sliding(size, slide) => keyed
            .window(SlidingEventTimeWindows::of(ms(size), ms(slide)))
            .apply(f),
        Windows::Session(gap) => keyed
            .window(EventTimeSessionWindows::with_gap(ms(gap)))
            .apply(f),
    }
}

fn naive_window_join(groups: &Groups) -> Vec<((u32, u32), Timestamp)> {
    let mut v = Vec::new();
    for ((_, _, end), (left, right)) in groups {
        for a in left {
            for b in right {
                v.push(((a.2, b.2), end - 1));
            }
        }
    }
    v.sort();
    v
}

fn naive_co_group(groups: &Groups) -> Vec<(Group, Timestamp)> {
    let mut v: Vec<(Group, Timestamp)> = groups
        .iter()
        .map(|(&(key, _, end), (left, right))| {
            let mut ids = (
                left.iter().map(|r| r.2).collect::<Vec<_>>(),
                right.iter().map(|r| r.2).collect::<Vec<_>>(),
            );
            ids.0.sort();
            ids.1.sort();
            ((key, ids.0, ids.1), end - 1)
        })
        .collect();
    v.sort();
    v
}

/// The three kinds of windows, each with drawn sizes.
fn window_kinds() -> impl Strategy<Value = [Windows; 3]> {
    (5i64..60, 1i64..4, 1i64..6).prop_map(|(size, slides, gap)| {
        [
            Windows::Tumbling(size),
            // A slide that divides the size or not.
            Windows::Sliding(size, (size / slides).max(1) + slides - 1),
            Windows::Session(10 * gap + 5),
        ]
    })
}

/// Session inputs on a 10-ms grid (see [`windowed`]).
fn on_grid(records: &[Rec]) -> Vec<Rec> {
    records
        .iter()
        .map(|&(k, ts, id)| (k, ts * 10, id))
        .collect()
}

proptest! {
    #![proptest_config(cases(0x3016_2024))]

    #[test]
    fn window_join_equals_nested_loops_on_one_and_three_workers(
        left in stream(100),
        right in stream(100),
        kinds in window_kinds(),
    ) {
        for windows in kinds {
            let (left, right, bound) = match windows {
                Windows::Session(_) => (on_grid(&left), on_grid(&right), 10 * JITTER_MS),
                _ => (left.clone(), right.clone(), JITTER_MS),
            };
            let expected = naive_window_join(&naive_groups(&left, &right, windows));
            for workers in [1, 3] {
                let got = windowed(workers, left.clone(), right.clone(), windows, bound, window_join);
                prop_assert_eq!(&got, &expected, "{:?} on {} workers", windows, workers);
            }
        }
    }

    #[test]
    fn co_group_equals_naive_groups_on_one_and_three_workers(
        left in stream(100),
        right in stream(100),
        kinds in window_kinds(),
    ) {
        for windows in kinds {
            let (left, right, bound) = match windows {
                Windows::Session(_) => (on_grid(&left), on_grid(&right), 10 * JITTER_MS),
                _ => (left.clone(), right.clone(), JITTER_MS),
            };
            let expected = naive_co_group(&naive_groups(&left, &right, windows));
            for workers in [1, 3] {
                let got = windowed(workers, left.clone(), right.clone(), windows, bound, co_group);
                prop_assert_eq!(&got, &expected, "{:?} on {} workers", windows, workers);
            }
        }
    }
}

/// Runs `build` over both sides of one source in lockstep (see [`lockstep_join`]).
fn lockstep<R: Data>(
    records: Vec<(bool, Rec)>,
    build: impl FnOnce(DataStream<Rec>, DataStream<Rec>) -> DataStream<R>,
) -> Vec<R> {
    let config = JobConfig {
        epoch_max_records: 1,
        poll_batch: 1,
        max_epochs_in_flight: 1,
        auto_watermark_interval: Duration::ZERO,
        ..JobConfig::local(1)
    };
    let env = StreamEnv::new(config);
    let all = env
        .from_collection(records)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_monotonous_timestamps()
                .with_timestamp_assigner(|r: &(bool, Rec), _| r.1 .1),
        );
    let left = all.filter(|r| r.0).map(|r| r.1);
    let right = all.filter(|r| !r.0).map(|r| r.1);
    let out = build(left, right).collect();
    env.execute("lockstep").expect("job runs");
    out.take()
}

#[test]
fn window_join_fires_again_for_records_within_the_allowed_lateness() {
    let (l, r) = (true, false);
    let records = vec![
        (l, (1, 1, 0)),
        (r, (1, 2, 1)),
        (l, (1, 15, 2)), // watermark 14: [0, 10) fires with (0, 1)
        (r, (1, 5, 3)),  // late, within 20 ms of lateness: [0, 10) fires again
        (l, (1, 40, 4)), // watermark 39: [10, 20) fires (no pair), [0, 10) is gone
        (r, (1, 6, 5)),  // beyond the lateness: dropped
    ];
    let join = |lateness: Option<u64>| {
        move |a: DataStream<Rec>, b: DataStream<Rec>| {
            let w = a
                .join(&b)
                .where_key(|x: &Rec| x.0)
                .equal_to(|x: &Rec| x.0)
                .window(TumblingEventTimeWindows::of(Duration::from_millis(10)));
            let w = match lateness {
                Some(ms) => w.allowed_lateness(Duration::from_millis(ms)),
                None => w,
            };
            w.apply(|x: &Rec, y: &Rec| (x.2, y.2))
        }
    };
    let mut with_lateness = lockstep(records.clone(), join(Some(20)));
    with_lateness.sort();
    assert_eq!(with_lateness, vec![(0, 1), (0, 1), (0, 3)]);
    assert_eq!(lockstep(records, join(None)), vec![(0, 1)]);
}

#[test]
fn co_group_with_a_count_trigger_fires_per_two_elements_and_sees_empty_sides() {
    let (l, r) = (true, false);
    let records = vec![
        (l, (1, 1, 0)),
        (r, (1, 2, 1)), // two elements of key 1: fires ([0], [1])
        (l, (2, 3, 2)),
        (l, (1, 4, 3)),
        (l, (1, 5, 4)), // fires ([3, 4], [])
        (r, (2, 6, 5)), // fires ([2], [5])
        (r, (2, 7, 6)), // alone at the end: a count trigger never fires it
    ];
    let got = lockstep(records, |a, b| {
        a.co_group(&b)
            .where_key(|x: &Rec| x.0)
            .equal_to(|x: &Rec| x.0)
            .window(GlobalWindows::create())
            .trigger(PurgingTrigger::of(CountTrigger::of(2)))
            .apply(
                |xs: &[Rec], ys: &[Rec], out: &mut Vec<(Vec<u32>, Vec<u32>)>| {
                    out.push((
                        xs.iter().map(|x| x.2).collect(),
                        ys.iter().map(|y| y.2).collect(),
                    ))
                },
            )
    });
    assert_eq!(
        got,
        vec![(vec![0], vec![1]), (vec![3, 4], vec![]), (vec![2], vec![5])]
    );
}
