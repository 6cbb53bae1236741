//! The forest-sensor examples' pipelines (`examples/sensors`) against naive oracles: the
//! temperature alert against a sequential walk over each sensor's readings in event-time
//! order, the smoke-and-heat alert against a per-area grouping of the readings into sliding
//! windows. On 1 and 3 workers, with small epochs so that records cross many epochs.
//!
//! The temperature alert is Flink's: it compares a reading with the previous one *to arrive*,
//! so it relies on the engine keeping the order of the records that one worker sends another
//! (Flink's per-channel FIFO). Spate does not yet, when a worker's epoch spans several
//! containers to one peer (timely's `InputHandle::for_each_stamp` sorts a batch of received
//! containers by stamp with an unstable sort); `per_sensor_order_survives_large_epochs` shows
//! it and is ignored until the engine is fixed, and the other tests on several workers use
//! epochs that fit in one container per peer.

use std::collections::BTreeMap;
use std::time::Duration;

use spate::connectors::generators::SplitMix64;
use spate::prelude::*;
#[allow(dead_code)]
#[path = "../../examples/sensors/mod.rs"]
mod pipelines;

use pipelines::{
    area_window_stats, smoke_heat_alerts, temperature_alerts, AreaStats, SmokeHeatAlert,
    SmokeHeatConfig, TemperatureAlert, DEFAULT_JUMP_THRESHOLD,
};

const SEED: u64 = 42;

fn config(workers: usize) -> JobConfig {
    let mut c = JobConfig::local(workers);
    c.epoch_max_records = 1000;
    c
}

/// Epochs of at most one exchange container (204 timestamped readings) per peer, which the
/// engine keeps in order (see the module docs).
fn ordered_config(workers: usize) -> JobConfig {
    let mut c = JobConfig::local(workers);
    c.epoch_max_records = 200;
    c
}

fn source(sensors: u32, rounds: u64) -> SensorSource {
    SensorSource::new(SEED).sensors(sensors).rounds(rounds)
}

/// The generator's readings, in event-time order (then by sensor).
fn readings(sensors: u32, rounds: u64) -> Vec<SensorReading> {
    let env = StreamEnv::new(JobConfig::local(1));
    let all = env.from_source(source(sensors, rounds)).collect();
    env.execute("readings").unwrap();
    let mut v = all.take();
    v.sort_by_key(|r| (r.timestamp_ms, r.sensor_id));
    assert_eq!(v.len() as u64, u64::from(sensors) * rounds);
    v
}

fn alert_key(a: &TemperatureAlert) -> (u32, i64) {
    (a.sensor_id, a.timestamp_ms)
}

/// Per sensor, in event-time order: each reading against the one before.
fn oracle_temperature(readings: &[SensorReading], threshold: f64) -> Vec<TemperatureAlert> {
    let mut per_sensor: BTreeMap<u32, Vec<&SensorReading>> = BTreeMap::new();
    for r in readings {
        per_sensor.entry(r.sensor_id).or_default().push(r);
    }
    let mut alerts = Vec::new();
    for (_, mut rs) in per_sensor {
        rs.sort_by_key(|r| r.timestamp_ms);
        for pair in rs.windows(2) {
            let (last, new) = (pair[0], pair[1]);
            if (new.temperature - last.temperature).abs() > threshold {
                alerts.push(TemperatureAlert {
                    sensor_id: new.sensor_id,
                    timestamp_ms: new.timestamp_ms,
                    last_temperature: last.temperature,
                    temperature: new.temperature,
                });
            }
        }
    }
    alerts.sort_by_key(alert_key);
    alerts
}

/// Per area and sliding window `[start, start + size)` with at least one reading: its readings
/// sorted by event time, summarized.
fn oracle_windows(readings: &[SensorReading], size: i64, slide: i64) -> Vec<SmokeHeatAlert> {
    let mut groups: BTreeMap<(u32, i64), Vec<&SensorReading>> = BTreeMap::new();
    for r in readings {
        let ts = r.timestamp_ms;
        let mut start = ts - ts.rem_euclid(slide);
        while start > ts - size {
            groups.entry((r.area, start)).or_default().push(r);
            start -= slide;
        }
    }
    groups
        .into_iter()
        .map(|((area, start), mut rs)| {
            rs.sort_by_key(|r| (r.timestamp_ms, r.sensor_id));
            let hottest = rs
                .iter()
                .max_by(|a, b| {
                    a.temperature
                        .total_cmp(&b.temperature)
                        .then(b.sensor_id.cmp(&a.sensor_id))
                })
                .unwrap();
            let mean = rs.iter().map(|r| r.temperature).sum::<f64>() / rs.len() as f64;
            SmokeHeatAlert {
                area,
                window_start_ms: start,
                window_end_ms: start + size,
                readings: rs.len() as u64,
                smoke_readings: rs.iter().filter(|r| r.smoke).count() as u64,
                max_temperature: hottest.temperature,
                hottest_sensor: hottest.sensor_id,
                avg_temperature: mean,
            }
        })
        .collect()
}

fn window_key(w: &SmokeHeatAlert) -> (u32, i64) {
    (w.area, w.window_start_ms)
}

/// Equal rows, the average within its rounding to hundredths.
fn assert_windows_eq(got: &[SmokeHeatAlert], want: &[SmokeHeatAlert], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of windows");
    for (g, w) in got.iter().zip(want) {
        let same_avg = (g.avg_temperature - w.avg_temperature).abs() <= 0.005 + 1e-9;
        let g_rest = SmokeHeatAlert {
            avg_temperature: 0.0,
            ..g.clone()
        };
        let w_rest = SmokeHeatAlert {
            avg_temperature: 0.0,
            ..w.clone()
        };
        assert!(
            g_rest == w_rest && same_avg,
            "{what}: got {g:?}, want {w:?}"
        );
    }
}

#[test]
fn temperature_alerts_equal_a_sequential_walk_per_sensor() {
    let (sensors, rounds) = (300, 200);
    let expected = oracle_temperature(&readings(sensors, rounds), DEFAULT_JUMP_THRESHOLD);
    assert!(
        expected.len() > 100,
        "too few jumps to test: {}",
        expected.len()
    );
    for (workers, config) in [(1, JobConfig::local(1)), (3, ordered_config(3))] {
        let env = StreamEnv::new(config);
        let readings = env.from_source(source(sensors, rounds));
        let alerts = temperature_alerts(&readings, DEFAULT_JUMP_THRESHOLD).collect();
        env.execute("temperature alert").unwrap();
        let mut got = alerts.take();
        got.sort_by_key(alert_key);
        assert_eq!(got, expected, "{workers} workers");
    }
}

#[test]
fn a_lower_threshold_alerts_on_a_superset() {
    let (sensors, rounds) = (100, 100);
    let all = readings(sensors, rounds);
    let strict = oracle_temperature(&all, DEFAULT_JUMP_THRESHOLD);
    let env = StreamEnv::new(ordered_config(2));
    let readings = env.from_source(source(sensors, rounds));
    let loose = temperature_alerts(&readings, 0.25).collect();
    env.execute("temperature alert").unwrap();
    let mut loose = loose.take();
    loose.sort_by_key(alert_key);
    assert_eq!(loose, oracle_temperature(&all, 0.25));
    assert!(loose.len() > strict.len());
    assert!(strict.iter().all(|a| loose.contains(a)));
}

#[test]
fn smoke_heat_windows_and_alerts_equal_a_per_area_grouping() {
    let (sensors, rounds) = (1000, 90); // 20 areas, 7.5 minutes of event time
    let cfg = SmokeHeatConfig::default();
    let all = readings(sensors, rounds);
    let windows = oracle_windows(&all, 60_000, 10_000);
    let alerts: Vec<SmokeHeatAlert> = windows
        .iter()
        .filter(|w| w.smoke_readings > 0 && w.max_temperature > cfg.max_temperature)
        .cloned()
        .collect();
    // The condition matters both ways: some smoky windows alert, some do not.
    let smoky = windows.iter().filter(|w| w.smoke_readings > 0).count();
    assert!(
        !alerts.is_empty() && alerts.len() < smoky,
        "{} of {smoky}",
        alerts.len()
    );
    // Full windows hold 12 rounds of 50 sensors; the first and last ones fewer.
    assert!(windows.iter().all(|w| w.readings <= 600));
    for workers in [1, 3] {
        let env = StreamEnv::new(config(workers));
        let readings = env.from_source(source(sensors, rounds));
        let got_windows = area_window_stats(&readings, &cfg).collect();
        let got_alerts = smoke_heat_alerts(&readings, &cfg).collect();
        env.execute("smoke and heat").unwrap();
        let mut got_windows = got_windows.take();
        got_windows.sort_by_key(window_key);
        let mut got_alerts = got_alerts.take();
        got_alerts.sort_by_key(window_key);
        assert_windows_eq(
            &got_windows,
            &windows,
            &format!("windows, {workers} workers"),
        );
        assert_windows_eq(&got_alerts, &alerts, &format!("alerts, {workers} workers"));
    }
}

#[test]
fn smoke_heat_windows_take_readings_out_of_order_within_the_bound() {
    // Readings arrive shuffled by up to 5 s of event time (the watermark's bound), spread
    // over the workers so that a sensor's readings cross workers: no reading is late.
    let (sensors, rounds) = (200, 60);
    let mut all = readings(sensors, rounds);
    let windows = oracle_windows(&all, 30_000, 5_000);
    let mut rng = SplitMix64::new(7);
    let mut keyed: Vec<(i64, SensorReading)> = all
        .drain(..)
        .map(|r| (r.timestamp_ms + rng.below(5_001) as i64, r))
        .collect();
    keyed.sort_by_key(|(k, r)| (*k, r.sensor_id));
    let shuffled: Vec<SensorReading> = keyed.into_iter().map(|(_, r)| r).collect();
    let cfg = SmokeHeatConfig {
        window: Duration::from_secs(30),
        slide: Duration::from_secs(5),
        ..SmokeHeatConfig::default()
    };
    for workers in [1, 3] {
        let env = StreamEnv::new(config(workers));
        let readings = env.from_collection(shuffled.clone());
        let got = area_window_stats(&readings, &cfg).collect();
        let result = env.execute("smoke and heat").unwrap();
        let late: u64 = result
            .metrics
            .iter()
            .filter(|(k, _)| k.ends_with(".numLateRecordsDropped"))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(late, 0, "{workers} workers");
        let mut got = got.take();
        got.sort_by_key(window_key);
        assert_windows_eq(&got, &windows, &format!("{workers} workers"));
    }
}

#[test]
fn area_stats_merge_equals_adding_everything() {
    let all = readings(60, 20);
    let (a, b) = all.split_at(all.len() / 3);
    let sum = |rs: &[SensorReading]| {
        rs.iter().fold(AreaStats::empty(), |mut s, r| {
            s.add(r);
            s
        })
    };
    assert_eq!(sum(a).merge(&sum(b)), sum(&all));
    assert_eq!(sum(b).merge(&sum(a)), sum(&all));
    assert_eq!(AreaStats::empty().merge(&sum(a)), sum(a));
    assert_eq!(sum(a).merge(&AreaStats::empty()), sum(a));
}

#[test]
fn per_sensor_order_survives_large_epochs() {
    // Each sensor is read by one worker, round by round: with per-channel order, every reading
    // of a sensor comes 5 s after the one before it, whatever the epochs.
    let env = StreamEnv::new(JobConfig::local(3));
    let readings = env.from_source(source(1000, 300));
    let out_of_order = readings
        .key_by(|r: &SensorReading| r.sensor_id)
        .process_with_state(
            |_sensor, last: &mut Option<i64>, r: SensorReading, out: &mut Vec<(u32, i64, i64)>| {
                if let Some(last) = *last {
                    if r.timestamp_ms != last + 5_000 {
                        out.push((r.sensor_id, last, r.timestamp_ms));
                    }
                }
                *last = Some(r.timestamp_ms);
            },
        )
        .collect();
    env.execute("per-sensor order").unwrap();
    let out_of_order = out_of_order.take();
    assert!(
        out_of_order.is_empty(),
        "{} readings came after a different one than their predecessor, e.g. {:?}",
        out_of_order.len(),
        &out_of_order[..out_of_order.len().min(3)]
    );
}
