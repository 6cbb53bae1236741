//! Event time end to end: watermarks through exchanges, timers and side outputs.

use std::time::Duration;

use spate::prelude::*;

/// Counts records per key in 10-ms buckets, emitted when an event-time timer at the bucket's
/// end fires: a tumbling window written by hand on the process-function API.
struct BucketCount;

impl KeyedProcessFunction<u32, (u32, i64), (u32, i64, u64)> for BucketCount {
    type State = std::collections::BTreeMap<i64, u64>;

    fn process_element(
        &self,
        value: (u32, i64),
        ctx: &mut ProcessContext<'_, u32, Self::State, (u32, i64, u64)>,
    ) {
        let bucket = value.1 - value.1.rem_euclid(10);
        if value.1 <= ctx.current_watermark() {
            return;
        }
        *ctx.state()
            .get_or_insert_with(Default::default)
            .entry(bucket)
            .or_default() += 1;
        ctx.register_event_time_timer(bucket + 9);
    }

    fn on_timer(
        &self,
        timestamp: Timestamp,
        _domain: TimeDomain,
        ctx: &mut ProcessContext<'_, u32, Self::State, (u32, i64, u64)>,
    ) {
        let bucket = timestamp - 9;
        let key = *ctx.key();
        if let Some(n) = ctx.state().as_mut().and_then(|s| s.remove(&bucket)) {
            ctx.collect((key, bucket, n));
        }
    }
}

fn run(workers: usize, records: Vec<(u32, i64)>) -> Vec<(u32, i64, u64)> {
    let env = StreamEnv::new(JobConfig::local(workers));
    let out = env
        .from_collection(records)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(0))
                .with_timestamp_assigner(|r: &(u32, i64), _| r.1),
        )
        .key_by(|r: &(u32, i64)| r.0)
        .process(BucketCount)
        .collect();
    env.execute("buckets").unwrap();
    let mut v = out.take();
    v.sort();
    v
}

#[test]
fn timers_fire_on_the_final_watermark_on_any_number_of_workers() {
    let records: Vec<(u32, i64)> = (0..2000).map(|i| ((i % 7) as u32, i as i64 / 3)).collect();
    let mut naive = std::collections::BTreeMap::new();
    for &(k, t) in &records {
        *naive.entry((k, t - t % 10)).or_insert(0u64) += 1;
    }
    let expected: Vec<(u32, i64, u64)> = naive.into_iter().map(|((k, b), n)| (k, b, n)).collect();
    assert_eq!(run(1, records.clone()), expected);
    assert_eq!(run(3, records), expected);
}

/// An unbounded source of `(i, i * 10 ms)` that never ends.
struct Ticks;

struct TickReader {
    next: i64,
}

impl spate::types::Source<(i64, i64)> for Ticks {
    fn name(&self) -> String {
        "ticks".into()
    }
    fn is_bounded(&self) -> bool {
        false
    }
    fn create_reader(
        &self,
        ctx: &spate::types::SourceContext,
    ) -> SpateResult<Box<dyn spate::types::SourceReader<(i64, i64)>>> {
        // Only worker 0 ticks; the others have no split and stay silent.
        Ok(Box::new(TickReader {
            next: if ctx.worker_index == 0 { 0 } else { -1 },
        }))
    }
}

impl spate::types::SourceReader<(i64, i64)> for TickReader {
    fn poll(
        &mut self,
        out: &mut spate::types::SourceOutput<'_, (i64, i64)>,
        max: usize,
    ) -> SpateResult<spate::types::SourceStatus> {
        if self.next < 0 {
            return Ok(spate::types::SourceStatus::Idle);
        }
        for _ in 0..max.min(50) {
            out.push((self.next, self.next * 10));
            self.next += 1;
        }
        std::thread::sleep(Duration::from_millis(2));
        Ok(spate::types::SourceStatus::More)
    }
}

/// Windows of 100 ms of ticks, on two workers where worker 1's reader never gives anything.
fn windows_with_a_silent_worker(idleness: Option<Duration>) -> Vec<(i64, u64)> {
    let env = StreamEnv::new(JobConfig::local(2));
    let mut strategy = WatermarkStrategy::for_monotonous_timestamps()
        .with_timestamp_assigner(|r: &(i64, i64), _| r.1);
    if let Some(t) = idleness {
        strategy = strategy.with_idleness(t);
    }
    let out = env
        .from_source(Ticks)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(|_| 0u8)
        .window(spate::dataflow::TumblingEventTimeWindows::of(
            Duration::from_millis(100),
        ))
        .process(
            |_k: &u8,
             w: &spate::dataflow::WindowContext<'_, spate::dataflow::TimeWindow>,
             els: &[(i64, i64)],
             out: &mut Vec<(i64, u64)>| out.push((w.window.start, els.len() as u64)),
        )
        .collect();
    let stop = env.stop_handle();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        stop.stop();
    });
    env.execute("idleness").unwrap();
    stopper.join().unwrap();
    out.take()
}

#[test]
fn an_idle_worker_leaves_the_watermark_minimum_only_with_idleness() {
    // Without idleness the silent worker holds the combined watermark at its start: no
    // window can fire (and a stop does not drain them, as in Flink).
    assert!(windows_with_a_silent_worker(None).is_empty());
    // With idleness it drops out after 100 ms, and full windows fire with 10 ticks each.
    let fired = windows_with_a_silent_worker(Some(Duration::from_millis(100)));
    assert!(fired.len() >= 2, "windows fired: {fired:?}");
    assert!(
        fired.iter().all(|&(start, n)| start % 100 == 0 && n == 10),
        "{fired:?}"
    );
}

/// One reader with two interleaved splits whose clocks run at different speeds: split 0 at
/// 10 ms per record, split 1 at 1 ms per record.
struct TwoSpeeds;

struct TwoSpeedsReader {
    next: i64,
}

const PER_SPLIT: i64 = 3000;

impl spate::types::Source<(u32, i64)> for TwoSpeeds {
    fn name(&self) -> String {
        "two-speeds".into()
    }
    fn is_bounded(&self) -> bool {
        true
    }
    fn create_reader(
        &self,
        _ctx: &spate::types::SourceContext,
    ) -> SpateResult<Box<dyn spate::types::SourceReader<(u32, i64)>>> {
        Ok(Box::new(TwoSpeedsReader { next: 0 }))
    }
}

impl spate::types::SourceReader<(u32, i64)> for TwoSpeedsReader {
    fn poll(
        &mut self,
        out: &mut spate::types::SourceOutput<'_, (u32, i64)>,
        max: usize,
    ) -> SpateResult<spate::types::SourceStatus> {
        for _ in 0..max.min(64) {
            if self.next == PER_SPLIT {
                out.split_finished(0);
                out.split_finished(1);
                return Ok(spate::types::SourceStatus::Finished);
            }
            out.split(0);
            out.push((0, self.next * 10));
            out.split(1);
            out.push((1, self.next));
            self.next += 1;
        }
        // Give the watermark timer a chance between polls.
        std::thread::sleep(Duration::from_millis(1));
        Ok(spate::types::SourceStatus::More)
    }
}

#[test]
fn watermarks_are_the_minimum_over_a_readers_splits() {
    let mut config = JobConfig::local(1);
    config.auto_watermark_interval = Duration::from_millis(5);
    let env = StreamEnv::new(config);
    let late = OutputTag::<(u32, i64)>::new("late");
    let windows = env
        .from_source(TwoSpeeds)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_monotonous_timestamps()
                .with_timestamp_assigner(|r: &(u32, i64), _| r.1),
        )
        .key_by(|r: &(u32, i64)| r.0)
        .window(spate::dataflow::TumblingEventTimeWindows::of(
            Duration::from_millis(100),
        ))
        .side_output_late_data(&late)
        .aggregate_with(
            CountAgg,
            |k: &u32,
             w: &spate::dataflow::WindowContext<'_, spate::dataflow::TimeWindow>,
             n: u64,
             out: &mut Vec<(u32, i64, u64)>| out.push((*k, w.window.start, n)),
        );
    let late_records = windows.side_output(&late).collect();
    let rows = windows.collect();
    env.execute("splits").unwrap();
    // Split 1's clock is ten times slower: with one generator for the whole reader, its
    // records would be behind the watermark split 0 drives. Per split, none is late.
    assert!(late_records.take().is_empty(), "no record is late");
    let rows = rows.take();
    let total: u64 = rows.iter().map(|r| r.2).sum();
    assert_eq!(total, 2 * PER_SPLIT as u64);
}

struct CountAgg;

impl spate::dataflow::AggregateFunction<(u32, i64)> for CountAgg {
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _: &(u32, i64), acc: &mut u64) {
        *acc += 1;
    }
    fn get_result(&self, acc: &u64) -> u64 {
        *acc
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

/// The lines of `files` shard files, each with one record per millisecond of
/// `[0, per_file)`: every file covers the same event times, in order.
fn write_time_ordered_shards(dir: &std::path::Path, files: usize, per_file: i64, csv: bool) {
    std::fs::create_dir_all(dir).unwrap();
    for f in 0..files {
        let mut text = String::from(if csv { "f,t\n" } else { "" });
        for t in 0..per_file {
            if csv {
                text.push_str(&format!("{f},{t}\n"));
            } else {
                text.push_str(&format!("{{\"f\":{f},\"t\":{t}}}\n"));
            }
        }
        let ext = if csv { "csv" } else { "jsonl" };
        std::fs::write(dir.join(format!("part-{f}.{ext}")), text).unwrap();
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Shard {
    f: u32,
    t: i64,
}

/// Counts per 100 ms event-time window of shard files that all cover the same time range,
/// read slowly (so that watermarks go out while a file is read); returns the windows and the
/// records the window operator found late.
fn count_shards(
    dir: &std::path::Path,
    csv: bool,
    workers: usize,
    split_size: u64,
) -> (Vec<(i64, u64)>, usize) {
    use crate::checkpoints::Flaky;
    let mut config = JobConfig::local(workers);
    config.auto_watermark_interval = Duration::from_millis(2);
    let env = StreamEnv::new(config);
    fn pace<S>(s: S) -> Flaky<S> {
        Flaky::wrap(s, u64::MAX).paced(Duration::from_millis(1), 50)
    }
    let records = if csv {
        env.from_source(pace(spate::connectors::files::CsvSource::<Shard>::new(dir)))
    } else {
        let src =
            spate::connectors::files::JsonLinesSource::<Shard>::new(dir).split_size(split_size);
        env.from_source(pace(src))
    };
    let late = OutputTag::<Shard>::new("late");
    let windows = records
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(0))
                .with_timestamp_assigner(|r: &Shard, _| r.t),
        )
        .key_by(|_: &Shard| 0u8)
        .window(spate::dataflow::TumblingEventTimeWindows::of(
            Duration::from_millis(100),
        ))
        .side_output_late_data(&late)
        .aggregate_with(
            spate::dataflow::Count,
            |_: &u8,
             w: &spate::dataflow::WindowContext<'_, spate::dataflow::TimeWindow>,
             n: i64,
             out: &mut Vec<(i64, u64)>| out.push((w.window.start, n as u64)),
        );
    let late_records = windows.side_output(&late).collect();
    let rows = windows.collect();
    env.execute("shards").unwrap();
    let mut rows = rows.take();
    rows.sort_unstable();
    (rows, late_records.take().len())
}

/// A worker that reads several files reads them one after another, and each file starts again
/// at the earliest event time: the files it has not started hold its watermark, so no record
/// is late (before, the second file of a worker was dropped as late, window by window), on
/// one worker or several, whole files (CSV) or byte-range splits (JSON lines, several per
/// file), and the counts are those of the input.
#[test]
fn files_read_one_after_another_hold_the_watermark_for_those_not_started() {
    const PER_FILE: i64 = 1_500;
    let dir = tempfile::tempdir().unwrap();
    let (jsonl, csv) = (dir.path().join("jsonl"), dir.path().join("csv"));
    write_time_ordered_shards(&jsonl, 4, PER_FILE, false);
    write_time_ordered_shards(&csv, 4, PER_FILE, true);
    // Each 100 ms window holds 100 records of each of the 4 files.
    let expected: Vec<(i64, u64)> = (0..PER_FILE / 100).map(|w| (w * 100, 400)).collect();
    for (path, is_csv, workers, split_size) in [
        (&csv, true, 1, 0),
        (&csv, true, 2, 0),
        (&jsonl, false, 1, 64 << 20),
        (&jsonl, false, 2, 64 << 20),
        (&jsonl, false, 3, 7_000), // about 4 splits per file, ranges across files
    ] {
        let (rows, late) = count_shards(path, is_csv, workers, split_size);
        let what = format!("csv {is_csv}, {workers} workers, splits of {split_size} bytes");
        assert_eq!(late, 0, "{what}: no record is late");
        assert_eq!(rows, expected, "{what}");
    }
}
