//! Nexmark for Spate: the auction benchmark's events, generator, JSON form and queries.
//!
//! * [`model`]: `Person`, `Auction`, `Bid` and `Event`, with event times in epoch milliseconds.
//! * [`generator`]: a deterministic generator that follows the Nexmark reference generator
//!   (and produces byte-identical JSON to `shared/anchors/nexmark_gen.py` for one partition).
//! * [`json`]: the nested JSON-lines form of the Nexmark suite for Flink: a byte-exact writer
//!   and a fast parser.
//! * [`queries`]: the queries in Spate's DataStream API, and their output rows.

pub mod generator;
pub mod json;
pub mod model;
pub mod queries;
pub mod source;
