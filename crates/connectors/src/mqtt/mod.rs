//! MQTT: a source of topic filters and a sink to a topic, both **at-least-once**.
//!
//! Both run rumqttc's event loop on a tokio runtime of their own thread and talk to the
//! worker through bounded crossbeam channels, so the worker never blocks on the network.
//!
//! * [`MqttSource`] subscribes at QoS 1 with a persistent session (`clean_session=false`,
//!   a fixed client id) and **manual acks**: a message is acked only when the checkpoint
//!   covering it completes ([`spate_types::SourceReader::checkpoint_complete`]). The broker
//!   redelivers every unacked message when a reader with the same client id connects again,
//!   so after a failure messages are seen at least once (never lost, maybe twice). MQTT cannot
//!   replay from a position: a restore resumes the broker's session, not a checkpointed offset.
//!   The broker's in-flight window must hold every message of a checkpoint interval
//!   (mosquitto: `max_inflight_messages 0`, a large `max_queued_messages`). A job without
//!   checkpoints should use [`MqttSource::ack_on_receive`] (at-most-once across restarts).
//! * **Exactly once** at the output takes a unique id in every payload and an exactly-once
//!   sink: [`MqttUrl::json_source_with_id`] (`mqtt://...?dedup=FIELD`) emits `(id, record)`,
//!   and `DataStream::dedup_by` on the id, whose seen ids are checkpointed keyed state with a
//!   retention, drops the redeliveries of records the restored checkpoint already covers.
//!   The redeliveries come from the window between a checkpoint's completion and its acks
//!   (the fail point `mqtt.before_ack` of `failpoint.rs`) and from messages read after
//!   the checkpoint; the retention must outlast the broker's redelivery (its session).
//! * [`MqttSink`] publishes at QoS 1 and waits for every outstanding PUBACK at `pre_commit`,
//!   so everything before a checkpoint is on the broker when it completes: at-least-once
//!   (a restore may publish the records after the checkpoint again).
//!
//! No TLS. URLs: [`MqttUrl`].

mod net;
mod sink;
mod source;
mod url;

pub use sink::{MqttSink, PayloadEncoder};
pub use source::{MqttMessage, MqttSource, PayloadDecoder};
pub use url::MqttUrl;
