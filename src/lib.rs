//! Spate: a distributed stream processing engine.
//!
//! This facade is what a job author imports. It re-exports the engine ([`dataflow`]), the
//! connectors ([`connectors`]) and the shared types ([`types`]), and its [`prelude`] adds
//! shortcuts in the style of Flink's `StreamExecutionEnvironment` and `DataStream`:
//!
//! ```
//! use spate::prelude::*;
//!
//! let env = StreamEnv::new(JobConfig::local(2));
//! let words = env.from_collection(vec!["a b", "b c", "c"].into_iter().map(String::from).collect());
//! let counts = words
//!     .flat_map(|line: String| line.split(' ').map(str::to_owned).collect::<Vec<_>>())
//!     .key_by(|w: &String| w.clone())
//!     .count()
//!     .collect();
//! env.execute("word count").unwrap();
//! let mut finals = counts.take();
//! finals.sort();
//! assert!(finals.contains(&("c".to_string(), 2)));
//! ```
//!
//! See `README.md` for a tour and `ARCHITECTURE.md` for how the crates fit together.

use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::Serialize;

pub use spate_checkpoint as checkpoint;
pub use spate_connectors as connectors;
pub use spate_dataflow as dataflow;
pub use spate_elasticity as elasticity;
pub use spate_metrics as metrics;
pub use spate_pubsub as pubsub;
pub use spate_types as types;

use spate_connectors::{
    CollectHandle, CollectSink, CollectionSource, CsvSource, FileSink, JsonLinesSource,
    SocketTextSource, StdinSource, StdoutSink,
};
use spate_dataflow::{DataStream, SinkNode, StreamEnv};
use spate_types::{Data, Row, Schema, Value};

/// Everything a job author needs, in one import.
pub mod prelude {
    pub use crate::{EnvExt, StreamExt};
    pub use spate_connectors::{
        CollectHandle, CollectSink, CollectionSource, CsvSource, DiscardSink, FileSink,
        JsonLinesSource, RateSchedule, RollingPolicy, ScheduledSource, SensorReading, SensorSource,
        SequenceSource, SingleFileSink, SocketTextSource, StdinSource, StdoutSink, Tick,
    };
    pub use spate_dataflow::{
        AggregateFunction, AggregatingState, AggregatingStateDescriptor, CheckpointedFunction,
        KeyedState, ListState, ListStateDescriptor, MapState, MapStateDescriptor, ReducingState,
        ReducingStateDescriptor, StateTtlConfig, StateVisibility, UpdateType, ValueState,
        ValueStateDescriptor,
    };
    pub use spate_dataflow::{
        AllWindowedStream, Counter, FunctionError, FunctionResult, MetricGroup, ProcessFunction,
        ProcessFunctionContext, RichFilterFunction, RichFlatMapFunction, RichMapFunction,
        RuntimeContext,
    };
    pub use spate_dataflow::{AutoscaleConfig, OverloadPolicy, ScalingPolicy};
    pub use spate_dataflow::{
        CoGroup, CoGroupedStreams, InnerJoin, IntervalJoin, IntervalJoined, JoinContext,
        JoinEqualTo, JoinWhere, JoinWithWindow, JoinedStreams,
    };
    pub use spate_dataflow::{
        ConnectedKeyedStreams, ConnectedStreams, DataStream, DedupConfig, Either, JobConfig,
        JobResult, KeyedCoProcessFunction, KeyedProcessFunction, KeyedStream, OutputTag,
        ProcessContext, SinkNode, StreamEnv, TimeDomain, Timestamp, WatermarkGenerator,
        WatermarkStrategy, MAX_WATERMARK, NO_TIMESTAMP,
    };
    pub use spate_types::{
        BadRecordPolicy, Data, DataType, DeadLetter, Field, Row, Schema, SpateError, SpateResult,
        Value,
    };
}

/// Source shortcuts on [`StreamEnv`].
pub trait EnvExt {
    /// A bounded stream of `items` (item `i` is read by worker `i % workers`).
    #[allow(clippy::wrong_self_convention)] // Flink's name: `fromCollection`.
    fn from_collection<T: Data>(&self, items: Vec<T>) -> DataStream<T>;
    /// Records of type `T` from a JSON-lines file or directory (bad lines fail the job).
    fn read_jsonl<T: Data + DeserializeOwned>(&self, path: impl Into<PathBuf>) -> DataStream<T>;
    /// Dynamic records from a JSON-lines file or directory.
    fn read_json_values(&self, path: impl Into<PathBuf>) -> DataStream<Value>;
    /// Rows of a declared schema from a JSON-lines file or directory: the declared fields
    /// only, in any order, unknown fields skipped (bad lines fail the job).
    fn read_jsonl_rows(&self, path: impl Into<PathBuf>, schema: &Schema) -> DataStream<Row>;
    /// Records of type `T` from a CSV file or directory with a header row.
    fn read_csv<T: Data + DeserializeOwned>(&self, path: impl Into<PathBuf>) -> DataStream<T>;
    /// The lines of a text file or directory (split and read in parallel; empty lines skipped).
    fn read_text_lines(&self, path: impl Into<PathBuf>) -> DataStream<String>;
    /// Text lines from a TCP server (Flink's `socketTextStream`).
    fn socket_text(&self, host: &str, port: u16) -> DataStream<String>;
    /// Text lines from standard input.
    fn stdin_lines(&self) -> DataStream<String>;
}

impl EnvExt for StreamEnv {
    fn from_collection<T: Data>(&self, items: Vec<T>) -> DataStream<T> {
        self.from_source(CollectionSource::new(items))
    }
    fn read_jsonl<T: Data + DeserializeOwned>(&self, path: impl Into<PathBuf>) -> DataStream<T> {
        self.from_source(JsonLinesSource::<T>::new(path))
    }
    fn read_json_values(&self, path: impl Into<PathBuf>) -> DataStream<Value> {
        self.from_source(JsonLinesSource::<Value>::new(path))
    }
    fn read_jsonl_rows(&self, path: impl Into<PathBuf>, schema: &Schema) -> DataStream<Row> {
        self.from_source(JsonLinesSource::with_schema(path, schema))
    }
    fn read_csv<T: Data + DeserializeOwned>(&self, path: impl Into<PathBuf>) -> DataStream<T> {
        self.from_source(CsvSource::<T>::new(path))
    }
    fn read_text_lines(&self, path: impl Into<PathBuf>) -> DataStream<String> {
        let decoder = std::sync::Arc::new(|line: &[u8]| {
            std::str::from_utf8(line)
                .map(str::to_owned)
                .map_err(|e| format!("invalid UTF-8: {e}"))
        });
        self.from_source(JsonLinesSource::with_decoder(path, decoder))
    }
    fn socket_text(&self, host: &str, port: u16) -> DataStream<String> {
        self.from_source(SocketTextSource::new(host, port))
    }
    fn stdin_lines(&self) -> DataStream<String> {
        self.from_source(StdinSource::new())
    }
}

/// Sink shortcuts on [`DataStream`].
pub trait StreamExt<T> {
    /// Prints every record as a JSON line on stdout.
    fn print(&self) -> SinkNode
    where
        T: Serialize;
    /// Collects every record in memory, for tests (records of this process's workers).
    fn collect(&self) -> CollectHandle<T>;
    /// Writes rolling JSON-lines part files into `dir` (Flink's `FileSink` defaults).
    fn write_jsonl(&self, dir: impl Into<PathBuf>) -> SinkNode
    where
        T: Serialize;
    /// Writes rolling CSV part files into `dir`.
    fn write_csv(&self, dir: impl Into<PathBuf>) -> SinkNode
    where
        T: Serialize;
}

impl<T: Data> StreamExt<T> for DataStream<T> {
    fn print(&self) -> SinkNode
    where
        T: Serialize,
    {
        self.sink_to(StdoutSink::new())
    }
    fn collect(&self) -> CollectHandle<T> {
        let (sink, handle) = CollectSink::new();
        self.sink_to(sink);
        handle
    }
    fn write_jsonl(&self, dir: impl Into<PathBuf>) -> SinkNode
    where
        T: Serialize,
    {
        self.sink_to(FileSink::json_lines(dir))
    }
    fn write_csv(&self, dir: impl Into<PathBuf>) -> SinkNode
    where
        T: Serialize,
    {
        self.sink_to(FileSink::csv(dir))
    }
}

/// The README's Rust example compiles (it is a doc test).
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
