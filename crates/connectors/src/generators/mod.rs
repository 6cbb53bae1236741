//! Data generators: sources that make their records up, deterministically.
//!
//! * [`SequenceSource`]: the numbers `start..end`, as fast as possible or at a target rate.
//! * [`SensorSource`]: the forest-sensor workload ([`SensorReading`]s).
//! * [`ScheduledSource`]: [`Tick`]s at a rate that follows a [`RateSchedule`] of steps and
//!   ramps, on the wall clock, for autoscaling and load-shedding experiments.
//! * [`SplitMix64`]: the small seedable random number generator they use.

pub mod schedule;
pub mod sensor;
pub mod sequence;
pub mod splitmix;
mod throttle;

pub use schedule::{RateSchedule, ScheduledSource, Segment, Tick};
pub use sensor::{
    SensorReading, SensorSource, DEFAULT_BASE_TIME_MS, DEFAULT_INTERVAL_MS, DEFAULT_SENSORS,
    SENSORS_PER_AREA,
};
pub use sequence::SequenceSource;
pub use splitmix::SplitMix64;
