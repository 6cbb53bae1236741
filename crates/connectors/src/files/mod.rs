//! File connectors: the JSON-lines and CSV sources, and the file sinks.
//!
//! * [`JsonLinesSource`]: JSON lines from a file or directory, read in parallel byte-range
//!   splits at memory speed, with a pluggable line decoder; by default any serde type, or
//!   [`Row`](spate_types::Row)s of a declared schema ([`json`]: the general decoders).
//! * [`CsvSource`]: CSV rows from a file or directory, one split per file.
//! * [`FileSink`]: rolling part files in a directory (JSON lines, CSV or custom lines), after
//!   Flink's `FileSink`.
//! * [`SingleFileSink`]: one file written by worker 0, for small streams routed there (and the
//!   dead letters); exactly once under checkpoints, as the `FileSink` is.
//!
//! Sources read a directory as its regular files in name order, skipping names that start
//! with `.` or `_`; sinks write unfinished files under `.`-names, so a job can read another
//! job's output directory while it is being written and see only finished files.

pub mod csv;
mod discover;
mod encode;
pub mod file_sink;
pub mod json;
pub mod jsonl;
mod part;
pub mod single_file_sink;

pub use self::csv::CsvSource;
pub use self::json::decode_json_prefix;
pub use encode::LineEncoder;
pub use file_sink::{FileSink, RollingPolicy, DEFAULT_WRITE_BUFFER};
pub use jsonl::{
    decode_json_line, JsonLinesSource, LineDecoder, PrefixDecoder, DEFAULT_BLOCK_SIZE,
    DEFAULT_SPLIT_SIZE,
};
pub use single_file_sink::SingleFileSink;
