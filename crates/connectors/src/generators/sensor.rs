//! The forest-sensor workload: temperature and smoke readings of sensors spread over a forest.
//!
//! Every sensor sends one [`SensorReading`] per round; round `r` has the event time
//! `base_time_ms + r × interval_ms` (5 s by default). The temperature of each sensor is a random
//! walk around its own baseline (18–22 °C) that reverts to it, with a step of at most a few
//! tenths of a degree, and occasional jumps of 2–5 °C (about one reading in a hundred), so a
//! classic `TemperatureAlert(1.7)` (a jump of more than 1.7 °C between two consecutive readings
//! of a sensor) fires now and then. Smoke is rare, and twenty times more likely when a sensor
//! is more than 3 °C above its baseline.
//!
//! The data is deterministic: each sensor has its own random generator, seeded from the seed
//! and its id, so the readings depend on neither the number of workers nor the order of
//! polls. Worker `w` of `n` emits the sensors with `sensor_id % n == w`, round by round.

use std::time::Duration;

use spate_types::{Source, SourceContext, SourceOutput, SourceReader, SourceStatus, SpateResult};

use super::splitmix::SplitMix64;
use super::throttle::{check_rate, Throttle};

/// The default number of sensors.
pub const DEFAULT_SENSORS: u32 = 1000;

/// The number of sensors in one area: sensor `id` is in area `id / SENSORS_PER_AREA`.
pub const SENSORS_PER_AREA: u32 = 50;

/// The default event time of the first round: 2024-01-01T00:00:00Z, in milliseconds.
pub const DEFAULT_BASE_TIME_MS: i64 = 1_704_067_200_000;

/// The default time between two readings of a sensor: 5 s.
pub const DEFAULT_INTERVAL_MS: i64 = 5_000;

/// The probability that a reading jumps.
const JUMP_CHANCE: f64 = 0.01;

/// One reading of one sensor.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SensorReading {
    /// The sensor, in `0..sensors`.
    pub sensor_id: u32,
    /// The area of the sensor: `sensor_id / 50`.
    pub area: u32,
    /// The event time, in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// The temperature in °C, rounded to hundredths.
    pub temperature: f64,
    /// Whether the sensor detects smoke.
    pub smoke: bool,
}

/// A source of forest-sensor readings. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct SensorSource {
    seed: u64,
    sensors: u32,
    rounds: Option<u64>,
    base_time_ms: i64,
    interval_ms: i64,
    rate: Option<f64>,
}

impl SensorSource {
    /// 1000 sensors, unbounded, starting at 2024-01-01T00:00:00Z, with data drawn from `seed`.
    pub fn new(seed: u64) -> Self {
        SensorSource {
            seed,
            sensors: DEFAULT_SENSORS,
            rounds: None,
            base_time_ms: DEFAULT_BASE_TIME_MS,
            interval_ms: DEFAULT_INTERVAL_MS,
            rate: None,
        }
    }

    /// Sets the number of sensors (default 1000).
    pub fn sensors(mut self, sensors: u32) -> Self {
        self.sensors = sensors;
        self
    }

    /// Stops after `rounds` readings of every sensor (default: unbounded).
    pub fn rounds(mut self, rounds: u64) -> Self {
        self.rounds = Some(rounds);
        self
    }

    /// Sets the event time of the first round, in milliseconds since the Unix epoch.
    pub fn base_time_ms(mut self, ms: i64) -> Self {
        self.base_time_ms = ms;
        self
    }

    /// Sets the event time between two readings of a sensor (default 5 s).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval_ms = i64::try_from(interval.as_millis()).unwrap_or(i64::MAX);
        self
    }

    /// Limits the whole job to `events_per_second` readings per second of wall-clock time
    /// (default: as fast as possible). It must be positive and finite.
    pub fn rate(mut self, events_per_second: f64) -> Self {
        self.rate = Some(events_per_second);
        self
    }
}

impl Source<SensorReading> for SensorSource {
    fn name(&self) -> String {
        format!("sensors:{}", self.sensors)
    }

    fn is_bounded(&self) -> bool {
        self.rounds.is_some()
    }

    fn create_reader(
        &self,
        ctx: &SourceContext,
    ) -> SpateResult<Box<dyn SourceReader<SensorReading>>> {
        check_rate("sensor source", self.rate)?;
        let workers = ctx.workers.max(1);
        let sensors: Vec<SensorState> = (ctx.worker_index..self.sensors as usize)
            .step_by(workers)
            .map(|id| SensorState::new(self.seed, id as u32))
            .collect();
        let share = sensors.len() as f64 / f64::from(self.sensors.max(1));
        let finished = sensors.is_empty() || self.rounds == Some(0);
        Ok(Box::new(SensorReader {
            throttle: self.rate.map(|rate| Throttle::new(rate * share)),
            total: self.rounds.map(|r| r.saturating_mul(sensors.len() as u64)),
            sensors,
            next: 0,
            round: 0,
            rounds: self.rounds,
            base_time_ms: self.base_time_ms,
            interval_ms: self.interval_ms,
            emitted: 0,
            finished,
        }))
    }
}

/// The state of one sensor's random walk.
#[derive(Debug, Clone)]
struct SensorState {
    id: u32,
    rng: SplitMix64,
    baseline: f64,
    temperature: f64,
}

impl SensorState {
    fn new(seed: u64, id: u32) -> Self {
        let mut rng = SplitMix64::for_stream(seed, u64::from(id));
        let baseline = rng.range_f64(18.0, 22.0);
        let temperature = baseline + rng.range_f64(-0.5, 0.5);
        SensorState {
            id,
            rng,
            baseline,
            temperature,
        }
    }

    /// The next reading, at `timestamp_ms`. Always draws the same number of random numbers.
    fn next(&mut self, timestamp_ms: i64) -> SensorReading {
        let step = self.rng.range_f64(-0.3, 0.3);
        let jump = self.rng.chance(JUMP_CHANCE);
        let size = self.rng.range_f64(2.0, 5.0);
        let up = self.rng.chance(0.5);
        let smoke_draw = self.rng.next_f64();
        if jump {
            self.temperature += if up { size } else { -size };
        } else {
            self.temperature += 0.1 * (self.baseline - self.temperature) + step;
        }
        let hot = self.temperature > self.baseline + 3.0;
        SensorReading {
            sensor_id: self.id,
            area: self.id / SENSORS_PER_AREA,
            timestamp_ms,
            temperature: (self.temperature * 100.0).round() / 100.0,
            smoke: smoke_draw < if hot { 0.01 } else { 0.0005 },
        }
    }
}

/// One worker's reader of a [`SensorSource`].
struct SensorReader {
    sensors: Vec<SensorState>,
    /// The index in `sensors` of the next reading.
    next: usize,
    round: u64,
    rounds: Option<u64>,
    base_time_ms: i64,
    interval_ms: i64,
    throttle: Option<Throttle>,
    emitted: u64,
    total: Option<u64>,
    finished: bool,
}

impl SourceReader<SensorReading> for SensorReader {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, SensorReading>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        if self.finished {
            return Ok(SourceStatus::Finished);
        }
        let mut n = max_records.max(1) as u64;
        if let Some(total) = self.total {
            n = n.min(total - self.emitted);
        }
        if let Some(throttle) = &mut self.throttle {
            n = throttle.allowance(n);
            if n == 0 {
                return Ok(SourceStatus::Idle);
            }
            throttle.emitted(n);
        }
        let round_offset = |round: u64, interval: i64| {
            i64::try_from(round)
                .unwrap_or(i64::MAX)
                .saturating_mul(interval)
        };
        let mut timestamp = self
            .base_time_ms
            .saturating_add(round_offset(self.round, self.interval_ms));
        for _ in 0..n {
            out.push(self.sensors[self.next].next(timestamp));
            self.next += 1;
            if self.next == self.sensors.len() {
                self.next = 0;
                self.round += 1;
                timestamp = self
                    .base_time_ms
                    .saturating_add(round_offset(self.round, self.interval_ms));
            }
        }
        self.emitted += n;
        if self.rounds.is_some_and(|rounds| self.round >= rounds) {
            self.finished = true;
        }
        Ok(SourceStatus::More)
    }

    fn progress(&self) -> Option<(u64, u64)> {
        self.total.map(|total| (self.emitted, total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_advance_by_rounds() {
        let source = SensorSource::new(1).sensors(3).rounds(2);
        let mut reader = source
            .create_reader(&SourceContext {
                worker_index: 0,
                workers: 1,
            })
            .unwrap();
        let (mut recs, mut letters, mut dropped) = (Vec::new(), Vec::new(), 0);
        let mut polls = 0;
        while reader
            .poll(
                &mut SourceOutput::new(&mut recs, &mut letters, &mut dropped),
                4,
            )
            .unwrap()
            != SourceStatus::Finished
        {
            polls += 1;
        }
        assert_eq!(polls, 2);
        let keys: Vec<_> = recs.iter().map(|r| (r.sensor_id, r.timestamp_ms)).collect();
        let t = DEFAULT_BASE_TIME_MS;
        assert_eq!(
            keys,
            [
                (0, t),
                (1, t),
                (2, t),
                (0, t + 5000),
                (1, t + 5000),
                (2, t + 5000)
            ]
        );
        assert_eq!(reader.progress(), Some((6, 6)));
    }

    #[test]
    fn no_sensors_or_rounds_is_finished() {
        for source in [
            SensorSource::new(1).sensors(0),
            SensorSource::new(1).rounds(0),
            SensorSource::new(1).sensors(2),
        ] {
            let mut reader = source
                .create_reader(&SourceContext {
                    worker_index: 2,
                    workers: 3,
                })
                .unwrap();
            let (mut recs, mut letters, mut dropped) = (Vec::new(), Vec::new(), 0);
            let status = reader
                .poll(
                    &mut SourceOutput::new(&mut recs, &mut letters, &mut dropped),
                    10,
                )
                .unwrap();
            assert_eq!(status, SourceStatus::Finished);
        }
    }
}
