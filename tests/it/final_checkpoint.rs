//! The final checkpoint of a bounded job comes after the end of its input has been processed
//! everywhere (as Flink's FLIP-147): every record the final watermark fires, through every
//! stage, reaches an exactly-once sink before the cut it publishes. A record written after the
//! last cut would be published by `close`, outside the checkpoint protocol, and a failure after
//! some workers closed would publish it a second time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spate::dataflow::{EventTimeSessionWindows, TumblingEventTimeWindows};
use spate::prelude::*;
use spate::types::{Sink, SinkContext, SinkWriter};

/// Counts, over every writer, the records written and those still unprepared at `close`.
#[derive(Clone, Default)]
struct Probe {
    written: Arc<AtomicU64>,
    after_last_cut: Arc<AtomicU64>,
    cuts: Arc<AtomicU64>,
}

struct ProbeWriter {
    probe: Probe,
    since_cut: u64,
}

impl<T: Send + 'static> Sink<T> for Probe {
    fn name(&self) -> String {
        "probe".into()
    }
    fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        Ok(Box::new(ProbeWriter {
            probe: self.clone(),
            since_cut: 0,
        }))
    }
}

impl<T> SinkWriter<T> for ProbeWriter {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        self.since_cut += records.len() as u64;
        self.probe
            .written
            .fetch_add(records.len() as u64, Ordering::SeqCst);
        records.clear();
        Ok(())
    }
    fn pre_commit(&mut self, _checkpoint: u64) -> SpateResult<Vec<u8>> {
        self.since_cut = 0;
        self.probe.cuts.fetch_add(1, Ordering::SeqCst);
        Ok(Vec::new())
    }
    fn close(&mut self) -> SpateResult<()> {
        self.probe
            .after_last_cut
            .fetch_add(self.since_cut, Ordering::SeqCst);
        Ok(())
    }
    fn exactly_once(&self) -> bool {
        true
    }
}

fn config(workers: usize, dir: &std::path::Path) -> JobConfig {
    let mut config = JobConfig::local(workers);
    config.checkpoint_interval = Some(Duration::from_millis(100));
    config.checkpoint_dir = Some(dir.display().to_string());
    config
}

/// `0..n`, one event per ms of event time, paced so that checkpoints complete while it reads.
/// With `at_source`, the source assigns the timestamps (and ends event time itself); else an
/// operator after a `map` does, which learns of the end from the source's final watermark.
fn numbers(env: &StreamEnv, n: u64, rate: f64, at_source: bool) -> DataStream<u64> {
    let numbers = env.from_source(SequenceSource::new(0, Some(n)).rate(rate));
    let numbers = if at_source {
        numbers
    } else {
        numbers.map(|v| v).name("identity")
    };
    numbers.assign_timestamps_and_watermarks(
        WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(20))
            .with_timestamp_assigner(|v: &u64, _| *v as i64),
    )
}

fn assert_all_before_the_last_cut(probe: &Probe, expected: u64) {
    assert_eq!(probe.written.load(Ordering::SeqCst), expected);
    assert!(
        probe.cuts.load(Ordering::SeqCst) > 0,
        "no checkpoint was cut"
    );
    assert_eq!(
        probe.after_last_cut.load(Ordering::SeqCst),
        0,
        "records reached the sink after the final checkpoint's cut"
    );
}

/// Per key `v % 50` of [`numbers`], one event every 50 ms: one session per key, which only the
/// end of the input closes; its latest value.
fn sessions(env: &StreamEnv, at_source: bool) -> DataStream<u64> {
    numbers(env, 20_000, 40_000.0, at_source)
        .key_by(|v: &u64| v % 50)
        .window(EventTimeSessionWindows::with_gap(Duration::from_millis(
            500,
        )))
        .reduce(|a: u64, b: u64| a.max(b))
}

#[test]
fn session_windows_fired_by_the_end_of_input_are_in_the_final_checkpoint() {
    for (workers, at_source) in [(1, true), (1, false), (3, true), (3, false)] {
        let dir = tempfile::tempdir().unwrap();
        let env = StreamEnv::new(config(workers, dir.path()));
        let probe = Probe::default();
        sessions(&env, at_source).sink_to(probe.clone());
        env.execute("sessions").unwrap();
        assert_all_before_the_last_cut(&probe, 50);
    }
}

#[test]
fn two_window_stages_fired_by_the_end_of_input_are_in_the_final_checkpoint() {
    for at_source in [true, false] {
        two_stages(at_source);
    }
}

fn two_stages(at_source: bool) {
    let dir = tempfile::tempdir().unwrap();
    let env = StreamEnv::new(config(2, dir.path()));
    let probe = Probe::default();
    // Sessions per key, then their count per 10 s of event time: the second stage fires on
    // the final watermark that the first stage passes on after its own last output.
    sessions(&env, at_source)
        .map(|_| 1u64)
        .key_by(|_: &u64| 0u64)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(10)))
        .reduce(|a: u64, b: u64| a + b)
        .sink_to(probe.clone());
    env.execute("two stages").unwrap();
    assert_all_before_the_last_cut(&probe, 1);
}
