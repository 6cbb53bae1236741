//! NATS: core subjects (**at most once**) and JetStream streams (**exactly once** with
//! checkpoints, for the source; at least once or exactly once, for the sink), as sources and
//! sinks.
//!
//! Every reader and writer owns one connection (async-nats) driven by a tokio runtime on a
//! thread of its own; the worker never blocks on the network while polling. No TLS.
//!
//! * [`NatsSource`] / [`NatsSink`]: NATS core stores nothing, so both are **at most once**:
//!   a message published while no reader is subscribed (or while a job restarts) is lost, and
//!   a publish is never acknowledged (the sink flushes its connection at `pre_commit`, so a
//!   checkpoint completes only after the server took its messages, and at the end). The
//!   source cannot replay and checkpoints no position. With a queue group it reads on every
//!   worker; without one, on worker 0. A dead letter names `nats:SUBJECT` as its source and
//!   the reader's message count as its line.
//! * [`JetStreamSource`]: splits are `(stream, filter subject)` pairs, dealt over the workers
//!   by their index in the source's list ([`split_owner`]), as Kafka partitions are. Each split
//!   is read with an **ordered consumer** (ephemeral, no acks, flow control, recreated by the
//!   client after a gap) starting at `DeliverPolicy::ByStartSequence(pos + 1)`, where `pos` is
//!   the stream sequence of the last message delivered: the position every checkpoint holds
//!   per split (with an id stable over worker counts), so a restore onto any number of
//!   workers replays exactly what followed the checkpoint. Nothing is acknowledged and no
//!   durable consumer is left behind. That needs a stream with limits-based retention
//!   (work-queue and interest streams delete acknowledged or unwanted messages; the reader
//!   warns). Starts: [`StartPosition`]. Bounded mode stops each split at its last message of
//!   when the reader starts. Every split is a split of the engine's per-split watermarks (an
//!   empty one holds the watermark until the idleness timeout). Decoded payloads follow the
//!   bad-record policy; a dead letter names `jetstream:STREAM/SUBJECT` as its source and the
//!   stream sequence as its line. [`JetStreamMessage::timestamp_ms`] (the stream's time of
//!   the message) is given to the decoder ([`JetStreamSource::records`] emits it) for
//!   event-time jobs.
//! * [`JetStreamSink`], [`Delivery::AtLeastOnce`] (the default): publishes at once and awaits
//!   every publish ack at `pre_commit`, so a completed checkpoint's output is stored; a
//!   restore publishes what followed the checkpoint again (duplicates, without message ids).
//! * [`JetStreamSink`], [`Delivery::ExactlyOnce`]: **write-ahead**. A checkpoint's messages
//!   are buffered and returned as the writer's `pre_commit` state (with earlier checkpoints'
//!   messages not yet committed), and published when the checkpoint completes (`commit`),
//!   message `i` of worker `w`'s checkpoint `c` with `Nats-Msg-Id`
//!   `{prefix}-{run}-{w}-{c}-{i}` (`run` is new at every start of a writer, so a job started
//!   afresh never collides with ids the stream remembers). A restore publishes every restored
//!   batch again with its ids, and the stream's deduplication drops what it stored already:
//!   **exactly once as long as the restore comes within the stream's `duplicate_window`** of
//!   the first publish. The writer checks that window when it starts and fails if it is
//!   shorter than [`JetStreamSink::min_duplicate_window`] (default 2 min, the server's
//!   default; 10 min or more is wise) or the stream does not exist. The cost: a checkpoint
//!   holds its interval's output (rate × interval bytes per worker), and output appears a
//!   checkpoint later. Fail points for the tests that kill a job inside that window
//!   (`SPATE_FAILPOINTS`, as Kafka's): `nats.after_pre_commit`, `nats.before_commit`,
//!   `nats.mid_commit` (half of a batch stored), `nats.after_restore_publish`.
//!
//! URLs: [`NatsUrl`]. Management calls for tests and tools: [`admin`].

pub mod admin;
mod core;
mod net;
mod sink;
mod source;
mod url;

pub use self::core::{NatsDecoder, NatsEncoder, NatsMessage, NatsSink, NatsSource};
pub use sink::{Delivery, JetStreamSink};
pub use source::{
    split_owner, JetStreamDecoder, JetStreamMessage, JetStreamRecord, JetStreamSource,
    StartPosition,
};
pub use url::NatsUrl;
