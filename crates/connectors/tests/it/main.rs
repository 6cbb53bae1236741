//! Integration tests of `spate-connectors`, through the public API only, against oracles.

mod csv;
mod file_sink;
mod generators;
mod json_decode;
mod jsonl;
#[cfg(feature = "kafka")]
mod kafka;
#[cfg(feature = "mqtt")]
mod mqtt;
#[cfg(feature = "nats")]
mod nats;
mod restore;
mod single_file;
mod sinks;
mod socket;
mod util;
