//! Sliced sliding windows and local-global (two-phase) window aggregation against naive
//! oracles: every window's aggregate computed by brute force over the records, and, for
//! lateness, a record-by-record simulation of Flink's per-window operator.
//!
//! The one-phase per-window path (`slicing(false)`) runs in the same jobs as a second oracle.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use spate::dataflow::{
    AggregateFunction, OutputTag, SlidingEventTimeWindows, SlidingProcessingTimeWindows,
    StateBackend, TimeWindow, TumblingEventTimeWindows, WindowContext, WindowedStream,
};
use spate::prelude::*;

use crate::checkpoints::{rows, Count, Flaky};

use crate::windows::Rec;
type Row = (u8, i64, i64, i64, u64); // key, start, end, sum, count

/// Sum and count of the values, counting the elements it adds.
struct SumCount(Arc<AtomicU64>);

impl SumCount {
    fn new() -> Self {
        SumCount(Arc::new(AtomicU64::new(0)))
    }
}

impl AggregateFunction<Rec> for SumCount {
    type Acc = (i64, u64);
    type Out = (i64, u64);
    fn create_accumulator(&self) -> (i64, u64) {
        (0, 0)
    }
    fn add(&self, r: &Rec, acc: &mut (i64, u64)) {
        self.0.fetch_add(1, Ordering::Relaxed);
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

fn to_row(k: &u8, w: &WindowContext<'_, TimeWindow>, (sum, n): (i64, u64), out: &mut Vec<Row>) {
    out.push((*k, w.window.start, w.window.end, sum, n));
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn ms(n: i64) -> Duration {
    Duration::from_millis(n as u64)
}

/// The starts of the windows of `size` every `slide` that hold `ts`, latest first.
fn starts(ts: i64, size: i64, slide: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut s = ts - ts.rem_euclid(slide);
    while s > ts - size {
        out.push(s);
        s -= slide;
    }
    out
}

/// Every window's sum and count, by brute force over all records (no record is late).
fn oracle_on_time(input: &[Rec], size: i64, slide: i64) -> Vec<Row> {
    let mut windows: Vec<(u8, i64)> = input
        .iter()
        .flat_map(|&(k, ts, _)| starts(ts, size, slide).into_iter().map(move |s| (k, s)))
        .collect();
    windows.sort();
    windows.dedup();
    windows
        .into_iter()
        .map(|(k, s)| {
            let inside = input
                .iter()
                .filter(|r| r.0 == k && s <= r.1 && r.1 < s + size);
            let (sum, n) = inside.fold((0, 0), |(sum, n), r| (sum + r.2, n + 1));
            (k, s, s + size, sum, n)
        })
        .collect()
}

/// Draws records whose timestamps go back at most `disorder` from the largest seen so far.
fn stream(disorder: i64) -> impl Strategy<Value = Vec<Rec>> {
    crate::windows::records(disorder, 400)
}

fn with_time(env: &StreamEnv, input: Vec<Rec>, bound: i64) -> DataStream<Rec> {
    env.from_collection(input).assign_timestamps_and_watermarks(
        WatermarkStrategy::for_bounded_out_of_orderness(ms(bound))
            .with_timestamp_assigner(|r: &Rec, _| r.1),
    )
}

fn sliding(size: i64, slide: i64) -> SlidingEventTimeWindows {
    SlidingEventTimeWindows::of(ms(size), ms(slide))
}

/// The three ways to run a window: per window, sliced, sliced in two phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path3 {
    PerWindow,
    Sliced,
    TwoPhase,
}

const PATHS: [Path3; 3] = [Path3::PerWindow, Path3::Sliced, Path3::TwoPhase];

fn on_path<W>(w: WindowedStream<u8, Rec, W>, path: Path3) -> WindowedStream<u8, Rec, W>
where
    W: spate::dataflow::Window,
{
    w.slicing(path != Path3::PerWindow)
        .local_global(path == Path3::TwoPhase)
}

fn config(workers: usize, disk: bool) -> JobConfig {
    let mut c = JobConfig::local(workers);
    c.epoch_max_records = 37;
    if disk {
        c.state_backend = StateBackend::Disk {
            dir: None,
            cache_keys: 2,
            full_every: 4,
        };
    }
    c
}

fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: n,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases(12))]

    /// Out-of-order input within the watermark's bound (nothing is late): every path gives
    /// every window's brute-force aggregate, for any size and slide (`size % slide != 0` cuts
    /// slices of `gcd(size, slide)`; a slide longer than the size leaves gaps).
    #[test]
    fn sliced_and_two_phase_aggregates_equal_the_oracle(
        input in stream(40),
        size in 1i64..250,
        slide in 1i64..120,
        workers in prop::sample::select(vec![1usize, 3]),
        disk in any::<bool>(),
    ) {
        let env = StreamEnv::new(config(workers, disk));
        let keyed = with_time(&env, input.clone(), 40).key_by(|r: &Rec| r.0);
        let outs: Vec<_> = PATHS
            .iter()
            .map(|&p| {
                on_path(keyed.window(sliding(size, slide)), p)
                    .aggregate_with(SumCount::new(), to_row)
                    .collect()
            })
            .collect();
        // Reduce: the largest timestamp and the sum, per window.
        let reduced: Vec<_> = PATHS
            .iter()
            .map(|&p| {
                on_path(keyed.window(sliding(size, slide)), p)
                    .reduce_with(
                        |a: Rec, b: Rec| (a.0, a.1.max(b.1), a.2 + b.2),
                        |k: &u8, w: &WindowContext<'_, TimeWindow>, r: Rec, out: &mut Vec<(u8, i64, i64, i64)>| {
                            out.push((*k, w.window.start, r.1, r.2))
                        },
                    )
                    .collect()
            })
            .collect();
        env.execute("sliced windows").unwrap();
        let expected = oracle_on_time(&input, size, slide);
        let expected_reduce: Vec<(u8, i64, i64, i64)> = expected
            .iter()
            .map(|&(k, s, e, sum, _)| {
                let max = input.iter().filter(|r| r.0 == k && s <= r.1 && r.1 < e).map(|r| r.1).max();
                (k, s, max.unwrap(), sum)
            })
            .collect();
        for (p, out) in PATHS.iter().zip(outs) {
            prop_assert_eq!(sorted(out.take()), expected.clone(), "{:?}", p);
        }
        for (p, out) in PATHS.iter().zip(reduced) {
            prop_assert_eq!(sorted(out.take()), expected_reduce.clone(), "reduce {:?}", p);
        }
    }

    /// Tumbling windows in two phases (one slice per window) equal the oracle too.
    #[test]
    fn two_phase_tumbling_windows_equal_the_oracle(
        input in stream(30),
        size in 1i64..300,
        workers in prop::sample::select(vec![1usize, 3]),
    ) {
        let env = StreamEnv::new(config(workers, false));
        let out = with_time(&env, input.clone(), 30)
            .key_by(|r: &Rec| r.0)
            .window(TumblingEventTimeWindows::of(ms(size)))
            .local_global(true)
            .aggregate_with(SumCount::new(), to_row)
            .collect();
        env.execute("two-phase tumbling").unwrap();
        prop_assert_eq!(sorted(out.take()), oracle_on_time(&input, size, size));
    }
}

#[test]
fn window_all_in_two_phases_equals_the_oracle() {
    // Windows of 700 ms every 300 ms (slices of 100 ms) over the whole stream, 3 workers.
    let input: Vec<Rec> = (0..6_000)
        .map(|i| ((i % 5) as u8, (i * 7) % 9_000 + i / 3, i % 11))
        .collect();
    let env = StreamEnv::new(config(3, false));
    let out = with_time(&env, input.clone(), 9_000)
        .window_all(sliding(700, 300))
        .local_global(true)
        .aggregate_with(
            SumCount::new(),
            |w: &WindowContext<'_, TimeWindow>, (sum, n), out: &mut Vec<Row>| {
                out.push((0, w.window.start, w.window.end, sum, n))
            },
        )
        .collect();
    env.execute("window_all in two phases").unwrap();
    let as_one: Vec<Rec> = input.iter().map(|r| (0, r.1, r.2)).collect();
    assert_eq!(sorted(out.take()), oracle_on_time(&as_one, 700, 300));
}

#[test]
fn a_sliced_window_adds_each_record_once() {
    let input: Vec<Rec> = (0..2_000).map(|i| ((i % 5) as u8, i * 3, 1)).collect();
    let adds = |path: Path3| {
        let env = StreamEnv::new(config(2, false));
        let agg = SumCount::new();
        let count = Arc::clone(&agg.0);
        let out = on_path(
            with_time(&env, input.clone(), 0)
                .key_by(|r: &Rec| r.0)
                .window(sliding(1_000, 100)),
            path,
        )
        .aggregate_with(agg, to_row)
        .collect();
        env.execute("adds").unwrap();
        assert_eq!(sorted(out.take()), oracle_on_time(&input, 1_000, 100));
        count.load(Ordering::Relaxed)
    };
    assert_eq!(
        adds(Path3::PerWindow),
        2_000 * 10,
        "one add per record and window"
    );
    assert_eq!(adds(Path3::Sliced), 2_000, "one add per record");
    assert_eq!(
        adds(Path3::TwoPhase),
        2_000,
        "one add per record, before the shuffle"
    );
}

#[test]
fn the_local_phase_combines_records_of_a_key_and_slice() {
    // One key, 200 records per 100 ms slice, in order: the local phase sends far fewer
    // partials than records, and the results are the oracle's.
    let input: Vec<Rec> = (0..20_000).map(|i| (0, i / 2, i % 7)).collect();
    let env = StreamEnv::new(config(3, false));
    let out = with_time(&env, input.clone(), 10)
        .key_by(|r: &Rec| r.0)
        .window(sliding(1_000, 100))
        .local_global(true)
        .aggregate_with(SumCount::new(), to_row)
        .collect();
    let result = env.execute("local phase").unwrap();
    assert_eq!(sorted(out.take()), oracle_on_time(&input, 1_000, 100));
    let metric = |suffix: &str| -> u64 {
        result
            .metrics
            .iter()
            .filter(|(k, _)| k.ends_with(suffix))
            .map(|(_, v)| *v)
            .sum()
    };
    let (combined, partials) = (
        metric(".numLocalRecordsCombined"),
        metric(".numLocalPartialsOut"),
    );
    assert!(combined > 19_000, "{combined} of 20 000 records combined");
    assert!(
        partials * 10 < combined,
        "{partials} partials for {combined} records"
    );
}

/// A window over the results of a window (q5's maximum over its counts): the first window's
/// results carry their window's end, which the watermark that fired them has reached, yet they
/// are combined before the second shuffle, and the results are the one-phase ones.
#[test]
fn the_local_phase_combines_the_results_of_a_window_upstream() {
    // 50 keys, a record every ms: sliding sums of 1 s every 200 ms, then per window end the
    // largest sum (tumbling windows of 200 ms keyed by the end), each window on 3 workers.
    let input: Vec<Rec> = (0..20_000).map(|i| ((i % 50) as u8, i, i % 13)).collect();
    let run = |two_phase: bool| {
        let env = StreamEnv::new(config(3, false));
        let out = with_time(&env, input.clone(), 20)
            .key_by(|r: &Rec| r.0)
            .window(sliding(1_000, 200))
            .aggregate_with(SumCount::new(), to_row)
            .key_by(|r: &Row| r.2)
            .window(TumblingEventTimeWindows::of(ms(200)))
            .local_global(two_phase)
            .reduce(|a: Row, b: Row| if (b.3, b.0) > (a.3, a.0) { b } else { a })
            .collect();
        let result = env.execute("window after window").unwrap();
        let metric = |suffix: &str| -> u64 {
            result
                .metrics
                .iter()
                .filter(|(k, _)| k.ends_with(suffix))
                .map(|(_, v)| *v)
                .sum()
        };
        let counts = (
            metric(".numLocalRecordsCombined"),
            metric(".numLocalPartialsOut"),
        );
        (sorted(out.take()), counts)
    };
    let (one_phase, _) = run(false);
    // Windows end every 200 ms from 200 to 20 800: one maximum each.
    assert_eq!(one_phase.len(), 104);
    let expected: Vec<Row> = {
        let mut best: BTreeMap<i64, Row> = BTreeMap::new();
        for r in oracle_on_time(&input, 1_000, 200) {
            let b = best.entry(r.2).or_insert(r);
            if (r.3, r.0) > (b.3, b.0) {
                *b = r;
            }
        }
        sorted(best.into_values().collect())
    };
    assert_eq!(one_phase, expected);
    let (two_phase, (combined, partials)) = run(true);
    assert_eq!(two_phase, one_phase);
    // 50 results per window end, all on time: nearly all combined, a few partials per end
    // and worker.
    let results = 50 * 104;
    assert!(
        combined * 10 > results * 9,
        "{combined} of {results} results combined"
    );
    assert!(
        partials * 5 < combined,
        "{partials} partials for {combined} results"
    );
}

// ---------------------------------------------------------------------------------------------
// Lateness: exact verdicts, and a simulation of Flink's per-window operator as the oracle.
// ---------------------------------------------------------------------------------------------

/// Records per epoch in the lateness tests.
const EPOCH: usize = 4;

/// A watermark after every poll, at most two epochs in flight: a record sees every watermark
/// of the epochs two or more before its own, and none of its own epoch's.
fn lateness_config() -> JobConfig {
    let mut c = JobConfig::local(1);
    c.epoch_max_records = EPOCH;
    c.max_epochs_in_flight = 2;
    c.auto_watermark_interval = Duration::ZERO;
    c
}

/// The key of the records that move the watermark.
const PACER: u8 = 9;
/// The watermark trails the largest timestamp by this (and 1 ms).
const BOUND: i64 = 20;

/// One phase: the watermark moves up by `step` (a pacer record at the new largest timestamp
/// `top`, then enough pacer fillers at `top` that the records after them see exactly the
/// watermark `top - BOUND - 1`), then records `(key, top - back, value)` that do not move it.
type Phase = (i64, Vec<(u8, i64, i64)>);

fn phases() -> impl Strategy<Value = Vec<Phase>> {
    // Half the records on time (the local phase combines those), half up to 700 ms back.
    let back = prop_oneof![0i64..=BOUND, 0i64..700];
    prop::collection::vec(
        (
            1i64..300,
            prop::collection::vec((0u8..3, back, -9i64..10), 0..12),
        ),
        1..14,
    )
}

/// The input of `phases`, and the oracle's events: each record with the watermark it meets.
fn phased_input(phases: &[Phase]) -> (Vec<Rec>, Vec<Event>) {
    let fillers = 6 * EPOCH;
    let (mut input, mut events) = (Vec::new(), Vec::new());
    let (mut top, mut wm) = (1_000i64, i64::MIN);
    for (step, records) in phases {
        top += step;
        for _ in 0..=fillers {
            input.push((PACER, top, 0));
            events.push(Event::Record((PACER, top, 0), wm));
        }
        wm = top - BOUND - 1;
        events.push(Event::Watermark(wm));
        for &(k, back, v) in records {
            let r = (k, (top - back).max(0), v);
            input.push(r);
            events.push(Event::Record(r, wm));
        }
    }
    events.push(Event::Watermark(i64::MAX));
    (input, events)
}

enum Event {
    Record(Rec, i64),
    Watermark(i64),
}

/// Flink's per-window operator with the default event-time trigger, simulated: what it
/// emits (every firing, re-firings too) and the records it finds too late.
fn oracle_late(events: &[Event], size: i64, slide: i64, lateness: i64) -> (Vec<Row>, Vec<Rec>) {
    let mut windows: BTreeMap<(u8, i64), Vec<i64>> = BTreeMap::new();
    let (mut rows, mut late) = (Vec::new(), Vec::new());
    let row = |k: u8, s: i64, vs: &[i64]| (k, s, s + size, vs.iter().sum(), vs.len() as u64);
    let mut current = i64::MIN;
    for e in events {
        match *e {
            Event::Watermark(wm) => {
                for (&(k, s), vs) in &windows {
                    let end = s + size - 1;
                    if current < end && end <= wm {
                        rows.push(row(k, s, vs));
                    }
                }
                windows.retain(|&(_, s), _| (s + size - 1).saturating_add(lateness) > wm);
                current = wm;
            }
            Event::Record(r, wm) => {
                let mut skipped = true;
                for s in starts(r.1, size, slide) {
                    let end = s + size - 1;
                    if end.saturating_add(lateness) <= wm {
                        continue;
                    }
                    skipped = false;
                    let vs = windows.entry((r.0, s)).or_default();
                    vs.push(r.2);
                    if end <= wm {
                        rows.push(row(r.0, s, vs));
                    }
                }
                if skipped && r.1.saturating_add(lateness) <= wm {
                    late.push(r);
                }
            }
        }
    }
    (sorted(rows), sorted(late))
}

/// Runs the three paths on `input` in one job: each path's rows and late records, and the
/// late records the side-output-less copies dropped.
fn run_late(
    input: &[Rec],
    size: i64,
    slide: i64,
    lateness: i64,
) -> Vec<(Path3, Vec<Row>, Vec<Rec>, u64)> {
    PATHS
        .iter()
        .map(|&path| {
            let env = StreamEnv::new(lateness_config());
            let tag = OutputTag::<Rec>::new("late");
            let keyed = with_time(&env, input.to_vec(), BOUND).key_by(|r: &Rec| r.0);
            let main = on_path(keyed.window(sliding(size, slide)), path)
                .allowed_lateness(ms(lateness))
                .side_output_late_data(&tag)
                .aggregate_with(SumCount::new(), to_row);
            let side = main.side_output(&tag).collect();
            let rows = main.collect();
            // The same without a side output: late records are dropped and counted.
            let _ = on_path(keyed.window(sliding(size, slide)), path)
                .allowed_lateness(ms(lateness))
                .aggregate_with(SumCount::new(), to_row)
                .name("dropping")
                .collect();
            let result = env.execute("lateness").unwrap();
            let dropped = result
                .metrics
                .iter()
                .filter(|(k, _)| k.starts_with("dropping") && k.ends_with("numLateRecordsDropped"))
                .map(|(_, v)| *v)
                .sum();
            (path, sorted(rows.take()), sorted(side.take()), dropped)
        })
        .collect()
}

proptest! {
    #![proptest_config(cases(8))]

    /// Late records, within the lateness (re-firing their windows) and beyond it (to the side
    /// output, or dropped and counted): every path emits exactly what Flink's per-window
    /// operator would, window by window and firing by firing.
    #[test]
    fn lateness_and_the_late_side_output_match_flinks_operator(
        phases in phases(),
        size in prop_oneof![1i64..400, (1i64..8).prop_map(|n| 50 * n)],
        slide in prop_oneof![1i64..150, (1i64..6).prop_map(|n| 25 * n)],
        lateness in prop::sample::select(vec![0i64, 1, 150, 500]),
    ) {
        let (input, events) = phased_input(&phases);
        let (rows, late) = oracle_late(&events, size, slide, lateness);
        for (path, got_rows, got_late, dropped) in run_late(&input, size, slide, lateness) {
            prop_assert_eq!(&got_rows, &rows, "{:?}", path);
            prop_assert_eq!(&got_late, &late, "{:?}", path);
            prop_assert_eq!(dropped, late.len() as u64, "{:?}", path);
        }
    }
}

#[test]
fn a_late_record_within_the_lateness_refires_each_of_its_ended_windows() {
    // Windows of 10 s every 5 s. The watermark reaches 14 979 (key 1 has records at 1 s and
    // 6 s), then a record at 7 s comes: [0, 10 s) has ended and re-fires with it; [5 s, 15 s)
    // has not ended and takes it quietly. At 21 s (watermark 20 979), a record at 2 s is
    // beyond [0, 10 s)'s lateness of 10 s (cleaned up at 19 999): late.
    let phases: Vec<Phase> = vec![
        (5_000, vec![(1, 5_000, 1), (1, 0, 1)]),
        (9_000, vec![(1, 8_000, 1)]),
        (6_000, vec![(1, 19_000, 1)]),
    ];
    let (input, events) = phased_input(&phases);
    let (rows, late) = oracle_late(&events, 10_000, 5_000, 10_000);
    let key1: Vec<Row> = rows.iter().copied().filter(|r| r.0 == 1).collect();
    assert_eq!(
        key1,
        vec![
            (1, -5_000, 5_000, 1, 1),
            (1, 0, 10_000, 2, 2),
            (1, 0, 10_000, 3, 3),
            (1, 5_000, 15_000, 2, 2),
        ],
        "the oracle is Flink's operator"
    );
    assert_eq!(late, vec![(1, 2_000, 1)]);
    for (path, got_rows, got_late, dropped) in run_late(&input, 10_000, 5_000, 10_000) {
        assert_eq!(got_rows, rows, "{path:?}");
        assert_eq!(got_late, late, "{path:?}");
        assert_eq!(dropped, 1, "{path:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Processing time
// ---------------------------------------------------------------------------------------------

/// `n` records per poll on worker 0, `polls` times, `pause` apart.
fn paced(n: usize, polls: usize, pause: Duration) -> impl spate::types::Source<Rec> {
    struct Paced(usize, usize, Duration);
    struct Reader(usize, usize, Duration, i64);
    impl spate::types::Source<Rec> for Paced {
        fn name(&self) -> String {
            "paced".into()
        }
        fn is_bounded(&self) -> bool {
            true
        }
        fn create_reader(
            &self,
            ctx: &spate::types::SourceContext,
        ) -> SpateResult<Box<dyn spate::types::SourceReader<Rec>>> {
            let polls = if ctx.worker_index == 0 { self.1 } else { 0 };
            Ok(Box::new(Reader(self.0, polls, self.2, 0)))
        }
    }
    impl spate::types::SourceReader<Rec> for Reader {
        fn poll(
            &mut self,
            out: &mut spate::types::SourceOutput<'_, Rec>,
            _max: usize,
        ) -> SpateResult<spate::types::SourceStatus> {
            if self.1 == 0 {
                return Ok(spate::types::SourceStatus::Finished);
            }
            std::thread::sleep(self.2);
            for _ in 0..self.0 {
                out.push(((self.3 % 3) as u8, self.3, 1));
                self.3 += 1;
            }
            self.1 -= 1;
            Ok(spate::types::SourceStatus::More)
        }
    }
    Paced(n, polls, pause)
}

#[test]
fn sliced_processing_time_windows_count_each_record_in_each_of_its_windows() {
    // 30 polls of 10 records 20 ms apart, in windows of 100 ms every 50 ms (two slices of 50
    // ms each). The windows still open when the input ends never fire (pending
    // processing-time timers are dropped then, as in Flink).
    let env = StreamEnv::new(JobConfig::local(2));
    let agg = SumCount::new();
    let adds = Arc::clone(&agg.0);
    let out = env
        .from_source(paced(10, 30, Duration::from_millis(20)))
        .key_by(|r: &Rec| r.0)
        .window(SlidingProcessingTimeWindows::of(ms(100), ms(50)))
        .aggregate_with(agg, to_row)
        .collect();
    env.execute("processing time").unwrap();
    let rows = out.take();
    assert_eq!(
        adds.load(Ordering::Relaxed),
        300,
        "sliced: one add per record"
    );
    assert!(
        rows.iter().all(|r| r.1 % 50 == 0 && r.2 - r.1 == 100),
        "{rows:?}"
    );
    // Per key, each slice's count shows in exactly the two windows that hold it: along a
    // run of windows 50 ms apart the counts telescope (the run's first window's earlier slice
    // and, but for the last run, its last window's later slice hold no record).
    let mut per_key: BTreeMap<u8, Vec<(i64, u64)>> = BTreeMap::new();
    for r in &rows {
        per_key.entry(r.0).or_default().push((r.1, r.4));
    }
    assert_eq!(per_key.len(), 3);
    for (k, mut ws) in per_key {
        ws.sort();
        let total: u64 = ws.iter().map(|w| w.1).sum();
        assert!(
            (100..=200).contains(&total),
            "key {k}: most records in two windows: {ws:?}"
        );
        let (mut later, mut last_start) = (0u64, None);
        for &(start, n) in &ws {
            if last_start.is_some_and(|s| start - s != 50) {
                assert_eq!(later, 0, "key {k}: a run ends with an empty slice: {ws:?}");
            }
            assert!(n >= later, "key {k}: {ws:?}");
            later = n - later;
            last_start = Some(start);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoints: a sliced window job restored from its checkpoint
// ---------------------------------------------------------------------------------------------

const EVENTS: u64 = 60_000;

/// Event time from the value (one event per ms); windows of 1 s every 300 ms (slices of 100
/// ms) per key `v % 7`: `(key, window start, count, sum)`.
fn sliced_job(
    out: &Path,
    workers: usize,
    checkpoints: Option<(&Path, bool)>,
    fail_after: u64,
    two_phase: bool,
) -> SpateResult<JobResult> {
    let mut config = JobConfig::local(workers);
    if let Some((dir, restore)) = checkpoints {
        config.checkpoint_interval = Some(Duration::from_millis(100));
        config.checkpoint_dir = Some(dir.display().to_string());
        config.restore = restore.then(|| "latest".to_string());
    }
    let env = StreamEnv::new(config);
    env.from_source(Flaky::new(EVENTS, 60_000.0, fail_after))
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(50))
                .with_timestamp_assigner(|v: &u64, _| *v as i64),
        )
        .key_by(|v: &u64| v % 7)
        .window(SlidingEventTimeWindows::of(
            Duration::from_millis(1_000),
            Duration::from_millis(300),
        ))
        .local_global(two_phase)
        .aggregate_with(
            Count,
            |k: &u64,
             w: &WindowContext<'_, TimeWindow>,
             (n, sum): (u64, u64),
             out: &mut Vec<(u64, i64, u64, u64)>| {
                out.push((*k, w.window.start, n, sum))
            },
        )
        .write_jsonl(out);
    env.execute("sliced windows")
}

fn recover_sliced(before: usize, after: usize, two_phase: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let (expected_dir, out, ckpt) = (
        tmp.path().join("e"),
        tmp.path().join("o"),
        tmp.path().join("c"),
    );
    sliced_job(&expected_dir, 1, None, u64::MAX, false).unwrap();
    let expected = rows(&expected_dir);
    // Windows start every 300 ms from -900 to 59 700: 203 per key.
    assert_eq!(expected.len(), 7 * 203);
    let failed = sliced_job(&out, before, Some((&ckpt, false)), EVENTS / 2, two_phase);
    assert!(failed.is_err(), "the first run fails");
    assert!(rows(&out).len() < expected.len());
    let result = sliced_job(&out, after, Some((&ckpt, true)), u64::MAX, two_phase).unwrap();
    assert_eq!(
        rows(&out),
        expected,
        "{before} -> {after} workers: nothing lost, nothing twice"
    );
    assert!(
        result
            .metrics
            .get("checkpoints.numberOfCompletedCheckpoints")
            .copied()
            .unwrap_or(0)
            >= 1
    );
}

#[test]
fn a_sliced_window_job_restored_from_its_checkpoint_writes_the_failure_free_output() {
    recover_sliced(2, 2, false);
}

#[test]
fn a_sliced_window_job_restored_on_more_workers_moves_its_slices_with_their_keys() {
    recover_sliced(2, 3, false);
}

#[test]
fn a_two_phase_window_job_restored_on_fewer_workers_writes_the_failure_free_output() {
    recover_sliced(3, 2, true);
}
