//! The forest-sensor alert pipelines, shared by `examples/temperature_alert.rs`,
//! `examples/smoke_heat_alert.rs` and their tests (`tests/it/sensors.rs`), which include this
//! file as a module (`mod sensors;`): demo pipelines, not part of the library.
//!
//! Both read [`SensorReading`]s, as the forest-sensor generator ([`SensorSource`]) makes them:
//! one reading per sensor every 5 s of event time, sensor `id` in area `id / 50`
//! ([`SENSORS_PER_AREA`]).
//!
//! * [`temperature_alerts`]: Flink's classic `TemperatureAlertFunction(1.7)`. Keyed by sensor,
//!   it remembers each sensor's last temperature (keyed state) and emits a
//!   [`TemperatureAlert`] when a reading differs from the previous one by more than the
//!   threshold. As in Flink, "previous" means the previous reading *to arrive*, which is the
//!   previous one in event time when a sensor's readings come in order (the generator reads
//!   each sensor on one worker, round by round).
//! * [`smoke_heat_alerts`]: per area, over sliding event-time windows (1 minute every 10 s by
//!   default), an incremental aggregate ([`AreaStatsAggregate`]: one small accumulator per
//!   area and window, never the readings) whose result becomes a [`SmokeHeatAlert`] when the
//!   window saw smoke and its hottest reading is above a threshold. [`area_window_stats`] is
//!   the same pipeline without the condition: every window's statistics.
//!
//! ```ignore
//! use spate::prelude::*;
//! use sensors::{smoke_heat_alerts, temperature_alerts, SmokeHeatConfig};
//!
//! let env = StreamEnv::new(JobConfig::local(2));
//! let readings = env.from_source(SensorSource::new(7).sensors(100).rounds(60));
//! let jumps = temperature_alerts(&readings, 1.7).collect();
//! let fires = smoke_heat_alerts(&readings, &SmokeHeatConfig::default()).collect();
//! env.execute("forest alerts").unwrap();
//! assert!(jumps.take().iter().all(|a| (a.temperature - a.last_temperature).abs() > 1.7));
//! assert!(fires.take().iter().all(|a| a.smoke_readings > 0));
//! ```
//!
//! [`SensorSource`]: spate_connectors::SensorSource
//! [`SENSORS_PER_AREA`]: spate_connectors::generators::SENSORS_PER_AREA

use std::time::Duration;

use serde::{Deserialize, Serialize};
use spate_connectors::SensorReading;
use spate_dataflow::{
    AggregateFunction, DataStream, KeyedProcessFunction, ProcessContext, SlidingEventTimeWindows,
    TimeWindow, WatermarkStrategy, WindowContext,
};

/// The temperature jump (°C between two consecutive readings of a sensor) of Flink's example.
pub const DEFAULT_JUMP_THRESHOLD: f64 = 1.7;

/// A sensor's temperature jumped between two consecutive readings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemperatureAlert {
    /// The sensor.
    pub sensor_id: u32,
    /// The event time of the reading that jumped, in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// The sensor's previous temperature, in °C.
    pub last_temperature: f64,
    /// The temperature of the reading that jumped, in °C.
    pub temperature: f64,
}

/// Flink's `TemperatureAlertFunction`: keyed by sensor, it keeps the last temperature and
/// emits an alert when a reading differs from it by more than `threshold`. A sensor's first
/// reading only sets the state.
#[derive(Debug, Clone, Copy)]
pub struct TemperatureAlertFunction {
    threshold: f64,
}

impl TemperatureAlertFunction {
    /// Alerts on jumps of more than `threshold` °C.
    pub fn new(threshold: f64) -> Self {
        TemperatureAlertFunction { threshold }
    }
}

impl KeyedProcessFunction<u32, SensorReading, TemperatureAlert> for TemperatureAlertFunction {
    /// The sensor's last temperature.
    type State = f64;

    fn process_element(
        &self,
        reading: SensorReading,
        ctx: &mut ProcessContext<'_, u32, f64, TemperatureAlert>,
    ) {
        let last = ctx.state().replace(reading.temperature);
        if let Some(last) = last {
            if (reading.temperature - last).abs() > self.threshold {
                ctx.collect(TemperatureAlert {
                    sensor_id: reading.sensor_id,
                    timestamp_ms: reading.timestamp_ms,
                    last_temperature: last,
                    temperature: reading.temperature,
                });
            }
        }
    }
}

/// The alerts of [`TemperatureAlertFunction`]`(threshold)` over `readings`, keyed by sensor.
pub fn temperature_alerts(
    readings: &DataStream<SensorReading>,
    threshold: f64,
) -> DataStream<TemperatureAlert> {
    readings
        .key_by(|r: &SensorReading| r.sensor_id)
        .process(TemperatureAlertFunction::new(threshold))
        .name("temperature alert")
}

/// The parameters of the smoke-and-heat alert.
#[derive(Debug, Clone)]
pub struct SmokeHeatConfig {
    /// The window length (default 1 minute).
    pub window: Duration,
    /// How often a window starts (default 10 s).
    pub slide: Duration,
    /// An area alerts when a window saw smoke and a reading above this temperature, in °C
    /// (default 26 °C: 4 °C above the warmest baseline, 22 °C).
    pub max_temperature: f64,
    /// How late a reading may arrive behind the latest one seen (the watermark's bound;
    /// default 5 s, one reading interval).
    pub out_of_orderness: Duration,
}

impl Default for SmokeHeatConfig {
    fn default() -> Self {
        SmokeHeatConfig {
            window: Duration::from_secs(60),
            slide: Duration::from_secs(10),
            max_temperature: 26.0,
            out_of_orderness: Duration::from_secs(5),
        }
    }
}

/// What an area's window saw. Temperatures are summed in hundredths of a degree (readings
/// are rounded to hundredths), so the result does not depend on the order of the readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AreaStats {
    /// The number of readings.
    pub readings: u64,
    /// The number of readings with smoke.
    pub smoke_readings: u64,
    /// The sum of the temperatures, in hundredths of a degree.
    pub sum_centi: i64,
    /// The hottest reading, in hundredths of a degree (`i64::MIN` while empty).
    pub max_centi: i64,
    /// The sensor of the hottest reading (the smallest id on a tie).
    pub hottest_sensor: u32,
}

impl AreaStats {
    /// No readings.
    pub fn empty() -> Self {
        AreaStats {
            max_centi: i64::MIN,
            ..AreaStats::default()
        }
    }

    /// Adds one reading.
    pub fn add(&mut self, reading: &SensorReading) {
        let centi = to_centi(reading.temperature);
        self.readings += 1;
        self.smoke_readings += u64::from(reading.smoke);
        self.sum_centi += centi;
        self.take_max(centi, reading.sensor_id);
    }

    /// Adds everything `other` saw.
    pub fn merge(mut self, other: &AreaStats) -> AreaStats {
        self.readings += other.readings;
        self.smoke_readings += other.smoke_readings;
        self.sum_centi += other.sum_centi;
        if other.readings > 0 {
            self.take_max(other.max_centi, other.hottest_sensor);
        }
        self
    }

    fn take_max(&mut self, centi: i64, sensor: u32) {
        if centi > self.max_centi || (centi == self.max_centi && sensor < self.hottest_sensor) {
            self.max_centi = centi;
            self.hottest_sensor = sensor;
        }
    }
}

/// A temperature in hundredths of a degree.
fn to_centi(temperature: f64) -> i64 {
    (temperature * 100.0).round() as i64
}

/// The incremental aggregate of the smoke-and-heat alert: [`AreaStats`] per area and window.
#[derive(Debug, Clone, Copy, Default)]
pub struct AreaStatsAggregate;

impl AggregateFunction<SensorReading> for AreaStatsAggregate {
    type Acc = AreaStats;
    type Out = AreaStats;
    fn create_accumulator(&self) -> AreaStats {
        AreaStats::empty()
    }
    fn add(&self, reading: &SensorReading, acc: &mut AreaStats) {
        acc.add(reading);
    }
    fn get_result(&self, acc: &AreaStats) -> AreaStats {
        *acc
    }
    fn merge(&self, a: AreaStats, b: AreaStats) -> AreaStats {
        a.merge(&b)
    }
}

/// One area's window: what [`area_window_stats`] emits for every window, and
/// [`smoke_heat_alerts`] for the windows that alert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmokeHeatAlert {
    /// The area.
    pub area: u32,
    /// The window's start, in milliseconds since the Unix epoch (inclusive).
    pub window_start_ms: i64,
    /// The window's end (exclusive).
    pub window_end_ms: i64,
    /// The number of readings in the window.
    pub readings: u64,
    /// The number of readings with smoke.
    pub smoke_readings: u64,
    /// The hottest reading, in °C.
    pub max_temperature: f64,
    /// The sensor of the hottest reading (the smallest id on a tie).
    pub hottest_sensor: u32,
    /// The average temperature, in °C, rounded to hundredths.
    pub avg_temperature: f64,
}

impl SmokeHeatAlert {
    /// The row of area `area`'s window `[start, end)` that saw `stats` (at least one reading).
    pub fn new(area: u32, window_start_ms: i64, window_end_ms: i64, stats: &AreaStats) -> Self {
        let n = stats.readings.max(1) as f64;
        SmokeHeatAlert {
            area,
            window_start_ms,
            window_end_ms,
            readings: stats.readings,
            smoke_readings: stats.smoke_readings,
            max_temperature: stats.max_centi as f64 / 100.0,
            hottest_sensor: stats.hottest_sensor,
            avg_temperature: (stats.sum_centi as f64 / n).round() / 100.0,
        }
    }

    /// Whether this window alerts: it saw smoke, and a reading above `max_temperature`.
    pub fn is_alert(&self, max_temperature: f64) -> bool {
        self.smoke_readings > 0 && self.max_temperature > max_temperature
    }
}

/// Gives the readings their event time (`timestamp_ms`) and watermarks that trail the latest
/// reading by `out_of_orderness`. On a source, the source applies it (per split).
pub fn with_event_time(
    readings: &DataStream<SensorReading>,
    out_of_orderness: Duration,
) -> DataStream<SensorReading> {
    readings.assign_timestamps_and_watermarks(
        WatermarkStrategy::for_bounded_out_of_orderness(out_of_orderness)
            .with_timestamp_assigner(|r: &SensorReading, _| r.timestamp_ms),
    )
}

/// Every area's statistics over sliding event-time windows (`config.window` every
/// `config.slide`), one row per area and window with at least one reading. Assigns event time
/// with [`with_event_time`] first.
pub fn area_window_stats(
    readings: &DataStream<SensorReading>,
    config: &SmokeHeatConfig,
) -> DataStream<SmokeHeatAlert> {
    area_windows(readings, config, |_| true)
}

/// The smoke-and-heat alerts: per area and sliding event-time window (`config.window` every
/// `config.slide`), the windows that saw smoke and a reading above `config.max_temperature`.
/// Assigns event time with [`with_event_time`] first.
pub fn smoke_heat_alerts(
    readings: &DataStream<SensorReading>,
    config: &SmokeHeatConfig,
) -> DataStream<SmokeHeatAlert> {
    let threshold = config.max_temperature;
    area_windows(readings, config, move |row| row.is_alert(threshold))
}

fn area_windows(
    readings: &DataStream<SensorReading>,
    config: &SmokeHeatConfig,
    keep: impl Fn(&SmokeHeatAlert) -> bool + Send + Sync + 'static,
) -> DataStream<SmokeHeatAlert> {
    with_event_time(readings, config.out_of_orderness)
        .key_by(|r: &SensorReading| r.area)
        .window(SlidingEventTimeWindows::of(config.window, config.slide))
        .aggregate_with(
            AreaStatsAggregate,
            move |area: &u32,
                  w: &WindowContext<'_, TimeWindow>,
                  stats: AreaStats,
                  out: &mut Vec<SmokeHeatAlert>| {
                let row = SmokeHeatAlert::new(*area, w.window.start, w.window.end, &stats);
                if keep(&row) {
                    out.push(row);
                }
            },
        )
        .name("smoke and heat")
}
