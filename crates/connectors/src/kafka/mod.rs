//! Kafka: a source of topic partitions and a sink with at-least-once or exactly-once delivery,
//! after Flink's `KafkaSource` and `KafkaSink`.
//!
//! Both run on librdkafka (the `rdkafka` crate, built from its bundled source); the
//! exactly-once sink's recovery also speaks a few requests of Kafka's protocol itself
//! ([`admin`]). Everything runs on the worker's thread but partition discovery.

pub mod admin;
mod sink;
mod source;
mod url;

pub use sink::{Delivery, Encoded, KafkaSink, MessageEncoder};
pub use source::{
    partition_owner, split_id, KafkaMessage, KafkaRecord, KafkaSource, MessageDecoder, StartOffsets,
};
pub use url::KafkaUrl;

pub(crate) use crate::failpoint::failpoint;
