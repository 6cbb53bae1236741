//! Spate's connectors: where records come from and where they go.
//!
//! Connectors implement the [`Source`](spate_types::Source) and [`Sink`](spate_types::Sink)
//! traits of `spate-types` and know nothing of the engine that drives them. Their semantics
//! follow Apache Flink's where Flink has the same connector.
//!
//! Sources:
//!
//! * [`files::JsonLinesSource`]: JSON lines from a file or a directory, split in byte ranges
//!   read in parallel by all workers, with a pluggable line decoder.
//! * [`files::CsvSource`]: CSV rows from a file or a directory, one split per file.
//! * [`socket::SocketTextSource`]: text lines from a TCP server, like Flink's
//!   `socketTextStream`.
//! * [`stdin::StdinSource`]: text lines from standard input.
//! * [`collection::CollectionSource`]: the elements of a `Vec`.
//! * [`generators::SequenceSource`] and [`generators::SensorSource`]: deterministic generated
//!   data, optionally at a wall-clock rate.
//!
//! Sinks:
//!
//! * [`files::FileSink`]: rolling part files in a directory (JSON lines, CSV or custom lines),
//!   like Flink's `FileSink`; unfinished parts are hidden.
//! * [`files::SingleFileSink`]: one file, written by worker 0.
//! * [`sinks::StdoutSink`], [`sinks::CollectSink`] (for tests), [`sinks::DiscardSink`] (for
//!   benchmarks).
//!
//! Under checkpoints, the file sources and the generators replay from their split positions,
//! and the two file sinks commit in two phases (in progress → pending at the snapshot →
//! finished when the checkpoint completes), so together they are exactly once; the dead letters
//! go through a [`files::SingleFileSink`] and are exactly once too. The socket and stdin
//! sources cannot replay (at most once after a restore), and the stdout and collect sinks
//! cannot take output back (at least once).
//!
//! Malformed input follows each source's [`BadRecordPolicy`](spate_types::BadRecordPolicy):
//! fail the job with the origin and line, drop and count, or route to the dead letters. Errors
//! are [`SpateError`](spate_types::SpateError)s with one-line messages that name the file or
//! address involved and, where possible, what to do about it.

mod bad;
pub mod collection;
#[cfg(any(feature = "kafka", feature = "mqtt", feature = "nats"))]
mod failpoint;
pub mod files;
pub mod generators;
#[cfg(feature = "kafka")]
pub mod kafka;
mod lines;
#[cfg(feature = "mqtt")]
pub mod mqtt;
#[cfg(feature = "nats")]
pub mod nats;
pub mod sinks;
pub mod socket;
pub mod stdin;

pub use collection::CollectionSource;
pub use files::{CsvSource, FileSink, JsonLinesSource, RollingPolicy, SingleFileSink};
pub use generators::{
    RateSchedule, ScheduledSource, SensorReading, SensorSource, SequenceSource, Tick,
};
pub use sinks::{CollectHandle, CollectSink, DiscardSink, StdoutSink};
pub use socket::SocketTextSource;
pub use stdin::StdinSource;
