//! Spate: a distributed stream processing engine.
//!
//! This facade re-exports the pieces a job author needs; see `README.md` for a tour and
//! `ARCHITECTURE.md` for how the crates fit together.

pub use spate_connectors as connectors;
pub use spate_dataflow as dataflow;
pub use spate_types as types;
