//! Generators: determinism, worker-count invariance, rates.

use std::time::{Duration, Instant};

use spate_connectors::generators::{
    SensorReading, SensorSource, SequenceSource, DEFAULT_BASE_TIME_MS,
};
use spate_types::{Source, SourceContext, SourceOutput, SourceStatus};

use crate::util::read_all;

fn all_records<T: 'static>(source: &dyn Source<T>, workers: usize) -> Vec<T> {
    read_all(source, workers, 1000)
        .into_iter()
        .flat_map(|d| d.records)
        .collect()
}

#[test]
fn sequence_is_the_same_for_any_worker_count() {
    let source = SequenceSource::new(3, Some(10_003));
    let mut one = all_records(&source, 1);
    assert_eq!(one, (3..10_003).collect::<Vec<_>>());
    for workers in [2, 4, 7] {
        let mut many = all_records(&source, workers);
        many.sort();
        one.sort();
        assert_eq!(many, one);
    }
    assert!(source.is_bounded());
    assert!(!SequenceSource::new(0, None).is_bounded());
}

#[test]
fn sequence_rate_is_respected() {
    // 2000 events/s over 2 workers: 1000/s each.
    let source = SequenceSource::new(0, None).rate(2000.0);
    let mut reader = source
        .create_reader(&SourceContext {
            worker_index: 1,
            workers: 2,
        })
        .unwrap();
    let (mut recs, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
    let started = Instant::now();
    let mut idle = 0;
    while started.elapsed() < Duration::from_millis(300) {
        match reader
            .poll(
                &mut SourceOutput::new(&mut recs, &mut dead, &mut dropped),
                10_000,
            )
            .unwrap()
        {
            SourceStatus::Idle => {
                idle += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            SourceStatus::More => {}
            SourceStatus::Finished => panic!("unbounded"),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    assert!(idle > 0, "ahead of schedule means idle");
    let expected = elapsed * 1000.0;
    assert!(
        (recs.len() as f64) <= expected + 2.0,
        "{} records in {elapsed} s",
        recs.len()
    );
    assert!(
        (recs.len() as f64) >= expected * 0.8,
        "{} records in {elapsed} s",
        recs.len()
    );
    assert!(recs.iter().all(|v| v % 2 == 1));
    assert!(recs.windows(2).all(|w| w[1] == w[0] + 2));
}

fn sorted(mut readings: Vec<SensorReading>) -> Vec<SensorReading> {
    readings.sort_by_key(|r| (r.timestamp_ms, r.sensor_id));
    readings
}

#[test]
fn sensors_do_not_depend_on_the_worker_count() {
    let source = SensorSource::new(42).sensors(300).rounds(20);
    let one = all_records(&source, 1);
    assert_eq!(one.len(), 6000);
    let four = sorted(all_records(&source, 4));
    assert_eq!(sorted(one.clone()), four);
    assert_eq!(sorted(all_records(&source, 7)), four);
    // Deterministic by seed.
    assert_eq!(
        all_records(&SensorSource::new(42).sensors(300).rounds(20), 1),
        one
    );
    assert_ne!(
        all_records(&SensorSource::new(43).sensors(300).rounds(20), 1),
        one
    );
    // A worker emits its own sensors, round by round.
    let worker = &read_all(&source, 4, 50)[3].records;
    assert!(worker.iter().all(|r| r.sensor_id % 4 == 3));
    assert!(worker
        .windows(2)
        .all(|w| (w[0].timestamp_ms, w[0].sensor_id) < (w[1].timestamp_ms, w[1].sensor_id)));
}

#[test]
fn sensor_readings_look_like_a_forest() {
    let rounds = 200;
    let readings = all_records(&SensorSource::new(7).rounds(rounds), 2);
    assert_eq!(readings.len(), 1000 * rounds as usize);
    let mut by_sensor: Vec<Vec<&SensorReading>> = vec![Vec::new(); 1000];
    for r in &readings {
        assert_eq!(r.area, r.sensor_id / 50);
        assert!(r.area < 20);
        assert_eq!((r.timestamp_ms - DEFAULT_BASE_TIME_MS) % 5000, 0);
        assert!(r.timestamp_ms >= DEFAULT_BASE_TIME_MS);
        assert!(r.timestamp_ms < DEFAULT_BASE_TIME_MS + 5000 * rounds as i64);
        assert!((-10.0..60.0).contains(&r.temperature), "{r:?}");
        by_sensor[r.sensor_id as usize].push(r);
    }
    let mut alerts = 0;
    let mut sum = 0.0;
    for series in &by_sensor {
        series.windows(2).for_each(|w| {
            assert_eq!(w[1].timestamp_ms - w[0].timestamp_ms, 5000);
            if (w[1].temperature - w[0].temperature).abs() > 1.7 {
                alerts += 1;
            }
        });
        sum += series.iter().map(|r| r.temperature).sum::<f64>();
    }
    let mean = sum / readings.len() as f64;
    assert!((18.0..23.0).contains(&mean), "mean temperature {mean}");
    // Jumps happen for about 1% of readings: TemperatureAlert(1.7) fires sometimes.
    let rate = alerts as f64 / readings.len() as f64;
    assert!((0.005..0.02).contains(&rate), "alert rate {rate}");
    let smoke = readings.iter().filter(|r| r.smoke).count() as f64 / readings.len() as f64;
    assert!(smoke > 0.0 && smoke < 0.005, "smoke rate {smoke}");
}

#[test]
fn sensor_rate_makes_it_idle() {
    let source = SensorSource::new(1).rate(100.0);
    assert!(!source.is_bounded());
    let mut reader = source
        .create_reader(&SourceContext {
            worker_index: 0,
            workers: 1,
        })
        .unwrap();
    let (mut recs, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
    let first = reader
        .poll(
            &mut SourceOutput::new(&mut recs, &mut dead, &mut dropped),
            1000,
        )
        .unwrap();
    assert_eq!((first, recs.len()), (SourceStatus::More, 1));
    let second = reader
        .poll(
            &mut SourceOutput::new(&mut recs, &mut dead, &mut dropped),
            1000,
        )
        .unwrap();
    assert_eq!(second, SourceStatus::Idle);
}
