//! General-purpose sinks: stdout, an in-memory collector for tests, and a discarder for
//! benchmarks. The file sinks are in [`crate::files`].

pub mod collect;
pub mod discard;
pub mod stdout;

pub use collect::{CollectHandle, CollectSink};
pub use discard::DiscardSink;
pub use stdout::StdoutSink;
