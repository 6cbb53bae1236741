//! Windows against a naive oracle that sorts by event time, and Flink's lateness rules.
//!
//! The property tests draw out-of-order streams whose disorder stays within the watermark
//! bound, so no element is late and the result is fully determined: per key and window, the
//! same aggregate as the oracle's, on any number of workers. The lateness tests build streams
//! whose verdicts do not depend on timing (see `lateness_config`).

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use spate::dataflow::{
    AggregateFunction, CountTrigger, EventTimeSessionWindows, GlobalWindow, OutputTag,
    PurgingTrigger, SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows, Window,
    WindowContext,
};
use spate::prelude::*;

pub(crate) type Rec = (u8, i64, i64); // (key, event time, value)

/// Draws records whose timestamps go back at most `disorder` from the largest seen so far.
fn stream(disorder: i64) -> impl Strategy<Value = Vec<Rec>> {
    records(disorder, 300)
}

/// Draws up to `max_len` records `(key < 6, timestamp, value)` whose timestamps go back at
/// most `disorder` from the largest seen so far.
pub(crate) fn records(disorder: i64, max_len: usize) -> impl Strategy<Value = Vec<Rec>> {
    prop::collection::vec((0u8..6, 0i64..400, -50i64..50), 0..max_len).prop_map(move |steps| {
        let mut max = 0i64;
        steps
            .into_iter()
            .map(|(k, step, v)| {
                // Mostly forward; sometimes back by up to `disorder`.
                let ts = if step % 4 == 0 {
                    (max - step % (disorder + 1)).max(0)
                } else {
                    max + step / 8
                };
                max = max.max(ts);
                (k, ts, v)
            })
            .collect()
    })
}

fn config(workers: usize) -> JobConfig {
    let mut c = JobConfig::local(workers);
    c.epoch_max_records = 37;
    c
}

/// [`config`] with window state on disk (when `disk`) behind a cache of 2 keys (of 6).
fn config_backend(workers: usize, disk: bool) -> JobConfig {
    let mut c = config(workers);
    if disk {
        c.state_backend = spate::dataflow::StateBackend::Disk {
            dir: None,
            cache_keys: 2,
            full_every: 4,
        };
    }
    c
}

fn with_time(env: &StreamEnv, input: Vec<Rec>, bound: i64) -> DataStream<Rec> {
    env.from_collection(input).assign_timestamps_and_watermarks(
        WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(bound as u64))
            .with_timestamp_assigner(|r: &Rec, _| r.1),
    )
}

/// Sum and count of the values: an incremental aggregate.
struct SumCount;

impl AggregateFunction<Rec> for SumCount {
    type Acc = (i64, u64);
    type Out = (i64, u64);
    fn create_accumulator(&self) -> (i64, u64) {
        (0, 0)
    }
    fn add(&self, r: &Rec, acc: &mut (i64, u64)) {
        acc.0 += r.2;
        acc.1 += 1;
    }
    fn get_result(&self, acc: &(i64, u64)) -> (i64, u64) {
        *acc
    }
    fn merge(&self, a: (i64, u64), b: (i64, u64)) -> (i64, u64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

type Row = (u8, i64, i64, i64, u64); // key, start, end, sum, count

fn oracle_fixed(input: &[Rec], size: i64, slide: i64) -> Vec<Row> {
    let mut acc: BTreeMap<(u8, i64), (i64, u64)> = BTreeMap::new();
    for &(k, ts, v) in input {
        let last = ts - ts.rem_euclid(slide);
        let mut start = last;
        while start > ts - size {
            let e = acc.entry((k, start)).or_default();
            e.0 += v;
            e.1 += 1;
            start -= slide;
        }
    }
    acc.into_iter()
        .map(|((k, s), (sum, n))| (k, s, s + size, sum, n))
        .collect()
}

fn oracle_sessions(input: &[Rec], gap: i64) -> Vec<Row> {
    let mut per_key: BTreeMap<u8, Vec<(i64, i64)>> = BTreeMap::new();
    for &(k, ts, v) in input {
        per_key.entry(k).or_default().push((ts, v));
    }
    let mut rows = Vec::new();
    for (k, mut evs) in per_key {
        evs.sort();
        let mut cur: Option<(i64, i64, i64, u64)> = None;
        for (ts, v) in evs {
            cur = match cur {
                // Flink merges windows that touch: [s, e) and [ts, ts+gap) with ts <= e.
                Some((s, e, sum, n)) if ts <= e => Some((s, e.max(ts + gap), sum + v, n + 1)),
                Some(done) => {
                    rows.push((k, done.0, done.1, done.2, done.3));
                    Some((ts, ts + gap, v, 1))
                }
                None => Some((ts, ts + gap, v, 1)),
            };
        }
        if let Some(done) = cur {
            rows.push((k, done.0, done.1, done.2, done.3));
        }
    }
    rows
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn to_row(k: &u8, w: &WindowContext<'_, TimeWindow>, (sum, n): (i64, u64), out: &mut Vec<Row>) {
    out.push((*k, w.window.start, w.window.end, sum, n));
}

fn cases() -> ProptestConfig {
    ProptestConfig {
        cases: 10,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn tumbling_and_sliding_aggregates_equal_the_oracle(
        input in stream(40),
        size in 1i64..200,
        slides in 1i64..4,
        workers in 1usize..4,
        disk in any::<bool>(),
    ) {
        let slide = (size / slides).max(1);
        let env = StreamEnv::new(config_backend(workers, disk));
        let out = with_time(&env, input.clone(), 40)
            .key_by(|r: &Rec| r.0)
            .window(SlidingEventTimeWindows::of(
                Duration::from_millis(size as u64),
                Duration::from_millis(slide as u64),
            ))
            .aggregate_with(SumCount, to_row)
            .collect();
        env.execute("sliding").unwrap();
        prop_assert_eq!(sorted(out.take()), oracle_fixed(&input, size, slide));
    }

    #[test]
    fn reduce_and_process_equal_the_oracle(input in stream(25), size in 1i64..300, workers in 1usize..4) {
        let env = StreamEnv::new(config(workers));
        let timed = with_time(&env, input.clone(), 25);
        let keyed = timed.key_by(|r: &Rec| r.0);
        let window = keyed.window(TumblingEventTimeWindows::of(Duration::from_millis(size as u64)));
        let reduced = window
            .reduce_with(
                |a: Rec, b: Rec| (a.0, a.1.max(b.1), a.2 + b.2),
                |k: &u8, w: &WindowContext<'_, TimeWindow>, r: Rec, out: &mut Vec<(u8, i64, i64)>| {
                    out.push((*k, w.window.start, r.2))
                },
            )
            .collect();
        let processed = window
            .process(|k: &u8, w: &WindowContext<'_, TimeWindow>, els: &[Rec], out: &mut Vec<Row>| {
                out.push((*k, w.window.start, w.window.end, els.iter().map(|r| r.2).sum(), els.len() as u64))
            })
            .collect();
        env.execute("tumbling").unwrap();
        let expected = oracle_fixed(&input, size, size);
        let sums: Vec<(u8, i64, i64)> = expected.iter().map(|r| (r.0, r.1, r.3)).collect();
        prop_assert_eq!(sorted(reduced.take()), sums);
        prop_assert_eq!(sorted(processed.take()), expected);
    }

    #[test]
    fn sessions_merge_like_the_oracle(
        input in stream(30),
        gap in 1i64..120,
        workers in 1usize..4,
        disk in any::<bool>(),
    ) {
        let env = StreamEnv::new(config_backend(workers, disk));
        let out = with_time(&env, input.clone(), 30)
            .key_by(|r: &Rec| r.0)
            .window(EventTimeSessionWindows::with_gap(Duration::from_millis(gap as u64)))
            .aggregate_with(SumCount, to_row)
            .collect();
        env.execute("sessions").unwrap();
        prop_assert_eq!(sorted(out.take()), sorted(oracle_sessions(&input, gap)));
    }
}

/// One record per epoch, a watermark after every record, two epochs in flight: a record at
/// position `j` sees the watermark of record `j - 3` or later and never that of `j` itself,
/// so lateness verdicts are exact when every late record follows its watermark's cause by
/// three fillers or more.
fn lateness_config() -> JobConfig {
    let mut c = JobConfig::local(1);
    c.epoch_max_records = 1;
    c.max_epochs_in_flight = 2;
    c.auto_watermark_interval = Duration::ZERO;
    c
}

fn lateness_input() -> Vec<Rec> {
    let mut v = vec![(1, 1_000, 1), (1, 2_000, 1), (1, 15_000, 1)];
    // Fillers on another key carry the watermark (14_999) down to the window operator.
    v.extend((0..4).map(|i| (9, 15_000 + i, 0)));
    // Late for [0, 10_000): behind the watermark by more than 0 ms, within 10 s.
    v.push((1, 3_000, 1));
    v.extend((0..4).map(|i| (9, 30_000 + i, 0)));
    // Beyond 10 s of lateness once the watermark is 29_999.
    v.push((1, 4_000, 1));
    v
}

fn count_windows(allowed: u64, late: Option<&OutputTag<Rec>>) -> (Vec<(u8, i64, u64)>, Vec<Rec>) {
    let env = StreamEnv::new(lateness_config());
    let mut windowed = with_time(&env, lateness_input(), 0)
        .key_by(|r: &Rec| r.0)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(10)))
        .allowed_lateness(Duration::from_secs(allowed));
    if let Some(tag) = late {
        windowed = windowed.side_output_late_data(tag);
    }
    let main = windowed.aggregate_with(
        SumCount,
        |k: &u8,
         w: &WindowContext<'_, TimeWindow>,
         (_, n): (i64, u64),
         out: &mut Vec<(u8, i64, u64)>| { out.push((*k, w.window.start, n)) },
    );
    let rows = main.filter(|r| r.0 == 1).collect();
    let side = late.map(|tag| main.side_output(tag).collect());
    let result = env.execute("lateness").unwrap();
    let dropped: u64 = result
        .metrics
        .iter()
        .filter(|(k, _)| k.ends_with("numLateRecordsDropped"))
        .map(|(_, v)| *v)
        .sum();
    let side = side.map(|s| s.take()).unwrap_or_default();
    if late.is_none() {
        // Without a side output, what would go there is dropped and counted.
        let expected_dropped = if allowed == 0 { 2 } else { 1 };
        assert_eq!(dropped, expected_dropped, "numLateRecordsDropped");
    }
    (sorted(rows.take()), sorted(side))
}

#[test]
fn late_records_go_to_the_side_output_without_lateness() {
    let tag = OutputTag::<Rec>::new("late");
    let (rows, side) = count_windows(0, Some(&tag));
    assert_eq!(rows, vec![(1, 0, 2), (1, 10_000, 1)]);
    assert_eq!(side, vec![(1, 3_000, 1), (1, 4_000, 1)]);
}

#[test]
fn late_records_within_the_lateness_fire_the_window_again() {
    let tag = OutputTag::<Rec>::new("late");
    let (rows, side) = count_windows(10, Some(&tag));
    // [0, 10 s) fires with 2, then again with 3 for the record 5 s late; the record that
    // comes after the window's cleanup (watermark 29 999 >= 9 999 + 10 000) is late for good.
    assert_eq!(rows, vec![(1, 0, 2), (1, 0, 3), (1, 10_000, 1)]);
    assert_eq!(side, vec![(1, 4_000, 1)]);
}

#[test]
fn late_records_are_counted_when_dropped() {
    count_windows(0, None);
    count_windows(10, None);
}

#[test]
fn count_windows_fire_every_n_elements_per_key() {
    let env = StreamEnv::new(JobConfig::local(2));
    let input: Vec<(u8, i64)> = (0..100).map(|i| ((i % 3) as u8, i)).collect();
    let out = env
        .from_collection(input.clone())
        .key_by(|r: &(u8, i64)| r.0)
        .count_window(5)
        .process(
            |k: &u8,
             _w: &WindowContext<'_, GlobalWindow>,
             els: &[(u8, i64)],
             out: &mut Vec<(u8, usize)>| { out.push((*k, els.len())) },
        )
        .collect();
    env.execute("count windows").unwrap();
    let got = out.take();
    // Keys 0 and 1 have 34 and 33 elements: 6 full windows each; key 2 has 33: 6.
    assert_eq!(got.len(), 18);
    assert!(got.iter().all(|&(_, n)| n == 5));
    let _ = PurgingTrigger::<Rec, GlobalWindow>::of(CountTrigger::of(2));
}

/// A source that gives `n` records per poll, `polls` times, sleeping `pause` between polls.
fn paced(n: usize, polls: usize, pause: Duration) -> impl spate::types::Source<(u8, i64)> {
    struct Paced(usize, usize, Duration);
    struct Reader(usize, usize, Duration, i64);
    impl spate::types::Source<(u8, i64)> for Paced {
        fn name(&self) -> String {
            "paced".into()
        }
        fn is_bounded(&self) -> bool {
            true
        }
        fn create_reader(
            &self,
            ctx: &spate::types::SourceContext,
        ) -> SpateResult<Box<dyn spate::types::SourceReader<(u8, i64)>>> {
            let polls = if ctx.worker_index == 0 { self.1 } else { 0 };
            Ok(Box::new(Reader(self.0, polls, self.2, 0)))
        }
    }
    impl spate::types::SourceReader<(u8, i64)> for Reader {
        fn poll(
            &mut self,
            out: &mut spate::types::SourceOutput<'_, (u8, i64)>,
            _max: usize,
        ) -> SpateResult<spate::types::SourceStatus> {
            if self.1 == 0 {
                return Ok(spate::types::SourceStatus::Finished);
            }
            std::thread::sleep(self.2);
            for _ in 0..self.0 {
                out.push(((self.3 % 3) as u8, self.3));
                self.3 += 1;
            }
            self.1 -= 1;
            Ok(spate::types::SourceStatus::More)
        }
    }
    Paced(n, polls, pause)
}

#[test]
fn processing_time_windows_fire_on_the_clock() {
    // 30 polls of 10 records, 20 ms apart: about 600 ms of wall-clock time in 100 ms windows.
    let env = StreamEnv::new(JobConfig::local(2));
    let out = env
        .from_source(paced(10, 30, Duration::from_millis(20)))
        .key_by(|r: &(u8, i64)| r.0)
        .window(spate::dataflow::TumblingProcessingTimeWindows::of(
            Duration::from_millis(100),
        ))
        .aggregate_with(
            Count,
            |k: &u8, w: &WindowContext<'_, TimeWindow>, n: u64, out: &mut Vec<(u8, i64, u64)>| {
                out.push((*k, w.window.start, n))
            },
        )
        .collect();
    // Keep the job alive well past the last window's end, so that its timer fires (pending
    // processing-time timers are dropped at the end of input, as in Flink). Both sources poll
    // on worker 0 in turn, so the tail's 60 pauses outlast the 30 of the data by 30 pauses.
    let tail = env
        .from_source(paced(0, 60, Duration::from_millis(20)))
        .map(|r| (r.0, r.1, 0u64));
    let tail = tail.filter(|_| false).collect();
    env.execute("processing time").unwrap();
    let rows = out.take();
    let _ = tail.take();
    assert!(
        rows.len() >= 3 * 4,
        "several windows per key fired: {rows:?}"
    );
    assert!(rows.iter().all(|r| r.1 % 100 == 0));
    // Every record is counted once, in the window of the clock when it arrived.
    let total: u64 = rows.iter().map(|r| r.2).sum();
    assert!(
        (250..=300).contains(&total),
        "{total} of 300 counted before the end"
    );
}

struct Count;

impl AggregateFunction<(u8, i64)> for Count {
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _: &(u8, i64), acc: &mut u64) {
        *acc += 1;
    }
    fn get_result(&self, acc: &u64) -> u64 {
        *acc
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

#[test]
fn continuous_event_time_triggers_fire_early_and_at_the_end() {
    // One key, timestamps 0..1000 ms, one 1-second window with an early firing every 250 ms
    // of event time: counts grow at each firing; the last one sees all 1000 records.
    let env = StreamEnv::new(lateness_config());
    let input: Vec<Rec> = (0..1000).map(|i| (1, i, 1)).collect();
    let out = with_time(&env, input, 0)
        .key_by(|r: &Rec| r.0)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .trigger(spate::dataflow::ContinuousEventTimeTrigger::of(
            Duration::from_millis(250),
        ))
        .aggregate_with(
            SumCount,
            |_k: &u8,
             _w: &WindowContext<'_, TimeWindow>,
             (_, n): (i64, u64),
             out: &mut Vec<u64>| out.push(n),
        )
        .collect();
    env.execute("continuous").unwrap();
    let counts = out.take();
    // Early firings at 250, 500 and 750 ms see the records up to the watermark then; the
    // final firing at the window's end sees them all.
    assert_eq!(counts.len(), 4, "{counts:?}");
    assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
    assert_eq!(*counts.last().unwrap(), 1000);
}

#[test]
fn timestamps_assigned_mid_stream_drive_windows() {
    // Timestamps assigned after a map (per worker, not per split) work the same.
    let input: Vec<Rec> = (0..500).map(|i| ((i % 4) as u8, i * 3, 1)).collect();
    let env = StreamEnv::new(config(3));
    let out = env
        .from_collection(input.clone())
        .map(|r: Rec| r)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(5))
                .with_timestamp_assigner(|r: &Rec, _| r.1),
        )
        .key_by(|r: &Rec| r.0)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)))
        .aggregate_with(SumCount, to_row)
        .collect();
    env.execute("mid-stream").unwrap();
    assert_eq!(sorted(out.take()), oracle_fixed(&input, 100, 100));
}

/// `(start, end, max_timestamp, count)` of each window of key 1 over `records`.
fn extreme_windows<A>(assigner: A, records: Vec<i64>) -> SpateResult<Vec<(i64, i64, i64, u64)>>
where
    A: spate::dataflow::WindowAssigner<Rec, W = TimeWindow>,
{
    let env = StreamEnv::new(JobConfig::local(1));
    let input = records.into_iter().map(|ts| (1u8, ts, 1i64)).collect();
    let out = with_time(&env, input, 0)
        .key_by(|r: &Rec| r.0)
        .window(assigner)
        .allowed_lateness(Duration::from_secs(3600))
        .aggregate_with(
            SumCount,
            |_: &u8,
             w: &WindowContext<'_, TimeWindow>,
             (_, n): (i64, u64),
             out: &mut Vec<(i64, i64, i64, u64)>| {
                out.push((w.window.start, w.window.end, w.window.max_timestamp(), n))
            },
        )
        .collect();
    env.execute("extreme timestamps")?;
    Ok(sorted(out.take()))
}

#[test]
fn windows_at_the_ends_of_the_timestamp_range_are_cut_there() {
    const MIN: i64 = i64::MIN;
    const MAX: i64 = i64::MAX;
    let records = || vec![MIN + 1, MAX - 1, MAX];
    // i64::MIN + 1 is 3 past a multiple of 10 (and i64::MAX 7 past one): the windows that hold
    // them begin below i64::MIN or end beyond i64::MAX, and are cut there (a window's end is
    // exclusive, so the last one also takes the record at i64::MAX). Cleanup times beyond
    // i64::MAX saturate, as Flink's do, and the windows fire at the end of the input.
    let tumbling = TumblingEventTimeWindows::of(Duration::from_millis(10));
    assert_eq!(
        extreme_windows(tumbling, records()).unwrap(),
        vec![(MIN, MIN + 8, MIN + 7, 1), (MAX - 7, MAX, MAX - 1, 2)]
    );
    let sliding = SlidingEventTimeWindows::of(Duration::from_millis(10), Duration::from_millis(5));
    assert_eq!(
        extreme_windows(sliding, records()).unwrap(),
        vec![
            (MIN, MIN + 3, MIN + 2, 1),
            (MIN, MIN + 8, MIN + 7, 1),
            (MAX - 7, MAX, MAX - 1, 2),
            (MAX - 2, MAX, MAX - 1, 2),
        ]
    );
    let sessions = EventTimeSessionWindows::with_gap(Duration::from_millis(10));
    assert_eq!(
        extreme_windows(sessions, records()).unwrap(),
        vec![(MIN + 1, MIN + 11, MIN + 10, 1), (MAX - 1, MAX, MAX - 1, 2)]
    );
    // i64::MIN is the marker of a record without a timestamp (as in Flink): a clear error.
    let err = extreme_windows(tumbling, vec![MIN, MAX]).expect_err("the job fails");
    assert!(err.to_string().contains("no timestamp"), "{err}");
}

/// `(event time, value)` records, out of order by at most 40 ms.
fn all_window_input() -> Vec<(i64, i64)> {
    (0..600i64)
        .map(|i| {
            let ts = i * 3 - (i * 7919 % 13) * 3;
            (ts.max(0), (i * 31) % 17 - 8)
        })
        .collect()
}

/// `window_all` on 3 workers: per window `(start, count, sum)`, from `assign`.
fn run_window_all<A>(assigner: A) -> Vec<(i64, u64, i64)>
where
    A: spate::dataflow::WindowAssigner<(i64, i64), W = TimeWindow>,
{
    let env = StreamEnv::new(config(3));
    let out = env
        .from_collection(all_window_input())
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(50))
                .with_timestamp_assigner(|r: &(i64, i64), _| r.0),
        )
        .window_all(assigner)
        .process(
            |w: &WindowContext<'_, TimeWindow>,
             xs: &[(i64, i64)],
             out: &mut Vec<(i64, u64, i64)>| {
                out.push((
                    w.window.start,
                    xs.len() as u64,
                    xs.iter().map(|x| x.1).sum(),
                ))
            },
        )
        .collect();
    env.execute("window_all").unwrap();
    let mut got = out.take();
    got.sort();
    got
}

/// The oracle: every record in each window that `starts` gives for its timestamp.
fn naive_all_windows(starts: impl Fn(i64) -> Vec<i64>) -> Vec<(i64, u64, i64)> {
    let mut windows: BTreeMap<i64, (u64, i64)> = BTreeMap::new();
    for (ts, v) in all_window_input() {
        for s in starts(ts) {
            let e = windows.entry(s).or_default();
            e.0 += 1;
            e.1 += v;
        }
    }
    windows
        .into_iter()
        .map(|(s, (n, sum))| (s, n, sum))
        .collect()
}

#[test]
fn tumbling_window_all_on_3_workers_matches_the_naive_evaluation() {
    let got = run_window_all(TumblingEventTimeWindows::of(Duration::from_millis(100)));
    assert_eq!(got, naive_all_windows(|ts| vec![ts - ts % 100]));
}

#[test]
fn sliding_window_all_on_3_workers_matches_the_naive_evaluation() {
    let got = run_window_all(SlidingEventTimeWindows::of(
        Duration::from_millis(100),
        Duration::from_millis(25),
    ));
    let expected = naive_all_windows(|ts| {
        let last = ts - ts % 25;
        (0..4)
            .map(|k| last - k * 25)
            .filter(|s| *s > ts - 100 && *s >= -75)
            .collect()
    });
    assert_eq!(got, expected);
}

#[test]
fn window_all_reduces_and_aggregates_over_the_whole_stream() {
    let env = StreamEnv::new(config(3));
    let stream = env
        .from_collection(all_window_input())
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(50))
                .with_timestamp_assigner(|r: &(i64, i64), _| r.0),
        );
    let sums = stream
        .window_all(TumblingEventTimeWindows::of(Duration::from_millis(100)))
        .reduce(|a: (i64, i64), b: (i64, i64)| (a.0.max(b.0), a.1 + b.1))
        .map(|r: (i64, i64)| r.1)
        .collect();
    env.execute("window_all reduce").unwrap();
    let mut got = sums.take();
    got.sort();
    let mut expected: Vec<i64> = naive_all_windows(|ts| vec![ts - ts % 100])
        .into_iter()
        .map(|w| w.2)
        .collect();
    expected.sort();
    assert_eq!(got, expected);
}

/// `full_window_partition`: each key once, at the end of the input, with the aggregate of all
/// its records (against a plain fold), on one worker and several; `reduce` likewise. There
/// are more keys per worker than the end-of-input pass takes in one step.
#[test]
fn a_full_window_partition_emits_each_key_once_at_the_end() {
    struct SumCount;
    impl spate::dataflow::AggregateFunction<(u32, i64)> for SumCount {
        type Acc = (i64, u64);
        type Out = (i64, u64);
        fn create_accumulator(&self) -> (i64, u64) {
            (0, 0)
        }
        fn add(&self, r: &(u32, i64), acc: &mut (i64, u64)) {
            acc.0 += r.1;
            acc.1 += 1;
        }
        fn get_result(&self, acc: &(i64, u64)) -> (i64, u64) {
            *acc
        }
        fn merge(&self, a: (i64, u64), b: (i64, u64)) -> (i64, u64) {
            (a.0 + b.0, a.1 + b.1)
        }
    }
    let records: Vec<(u32, i64)> = (0..20_000i64)
        .map(|i| ((i * 7919 % 4099) as u32, i % 97 - 40))
        .collect();
    let mut oracle = std::collections::BTreeMap::<u32, (i64, u64)>::new();
    for &(k, v) in &records {
        let e = oracle.entry(k).or_default();
        e.0 += v;
        e.1 += 1;
    }
    let want: Vec<(u32, i64, u64)> = oracle.iter().map(|(&k, &(s, n))| (k, s, n)).collect();
    let want_max: Vec<(u32, i64)> = {
        let mut m = std::collections::BTreeMap::<u32, i64>::new();
        for &(k, v) in &records {
            let e = m.entry(k).or_insert(i64::MIN);
            *e = (*e).max(v);
        }
        m.into_iter().collect()
    };
    for workers in [1, 3] {
        let env = StreamEnv::new(JobConfig::local(workers));
        let keyed = env
            .from_source(CollectionSource::new(records.clone()))
            .key_by(|r: &(u32, i64)| r.0);
        let sums = keyed
            .full_window_partition()
            .aggregate_with(
                SumCount,
                |k: &u32, (s, n), out: &mut Vec<(u32, i64, u64)>| out.push((*k, s, n)),
            )
            .collect();
        let maxima = keyed
            .full_window_partition()
            .reduce(|a: (u32, i64), b: (u32, i64)| if b.1 > a.1 { b } else { a })
            .collect();
        env.execute("full partitions").unwrap();
        let mut got = sums.take();
        got.sort_unstable();
        assert_eq!(got, want, "{workers} workers");
        let mut got = maxima.take();
        got.sort_unstable();
        assert_eq!(got, want_max, "{workers} workers");
    }
}
