//! General-purpose sinks: stdout, an in-memory collector for tests, and a discarder for
//! benchmarks. The file sinks are in [`crate::files`].
//!
//! None of these can hold output back until a checkpoint completes, so under checkpoints they
//! are **at least once** (a restore repeats what followed the checkpoint); the file sinks
//! commit in two phases and are exactly once.

pub mod collect;
pub mod discard;
pub mod stdout;

pub use collect::{CollectHandle, CollectSink};
pub use discard::DiscardSink;
pub use stdout::StdoutSink;
