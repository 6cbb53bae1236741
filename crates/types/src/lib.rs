//! Spate's shared vocabulary, at the bottom of the crate graph.
//!
//! Every other Spate crate depends on this one and it depends on no Spate crate. It holds
//! what the layers above must agree on without knowing each other:
//!
//! * [`Data`]: the bound on every record type that flows through a job, typed or dynamic
//!   ([`Value`] is the dynamic record: JSON-like, and exchangeable across processes).
//! * [`row`]: declared schemas ([`Schema`], [`Field`], [`DataType`]) and the positional
//!   [`Row`] of values they describe, the record of the SQL and Python fronts.
//! * [`keygroup`]: how keys map to key groups and key groups to workers. State is
//!   partitioned by key group, so a restore onto another worker count moves whole groups.
//! * [`source`] and [`sink`]: the connector traits. Connectors implement them without
//!   knowing the execution engine; the dataflow crate drives them.
//! * [`bad_record`]: the per-source policy for malformed input (`fail`, `drop`,
//!   `dead-letter=PATH`) and the dead-letter record.
//! * [`error`]: the typed errors, tagged with a domain (user, external, internal).

pub mod bad_record;
pub mod error;
pub mod keygroup;
pub mod row;
pub mod sink;
pub mod source;
pub mod value;

pub use bad_record::{BadRecordPolicy, DeadLetter};
pub use error::{ErrorDomain, SpateError, SpateResult};
pub use keygroup::{KeyGroup, KeyGroupRange, DEFAULT_MAX_PARALLELISM};
pub use row::{DataType, Field, Row, Schema};
pub use sink::{Sink, SinkContext, SinkWriter};
pub use source::{
    Source, SourceContext, SourceOutput, SourceReader, SourceStatus, SplitMark, SplitPosition,
};
pub use value::Value;

/// The bound on every record type that flows through a Spate job.
///
/// Records are cloned when a stream fans out, sent between worker threads, and serialized
/// (with `serde`, as bincode) when they cross a process boundary. Dynamic records satisfy it
/// too: see [`Value`].
pub trait Data:
    Clone + Send + Sync + serde::Serialize + serde::de::DeserializeOwned + 'static
{
}
impl<T: Clone + Send + Sync + serde::Serialize + serde::de::DeserializeOwned + 'static> Data for T {}
