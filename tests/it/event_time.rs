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
