//! Spate's engine: the DataStream API and its execution on timely dataflow.
//!
//! This is the only crate that names `timely`. It turns a job described with the Flink-like
//! API into timely dataflows, one per worker, and runs them:
//!
//! ```text
//!   StreamEnv ──from_source──▶ DataStream ──map/filter/key_by/...──▶ ... ──sink_to──▶ Sink
//!       │                          (each call adds a Node to the Plan)
//!       └──execute──▶ supervisor (P > 1) ──▶ P processes × N worker threads
//!                         each worker: build Plan → timely operators; loop { poll sources
//!                         under flow control; close epochs; step }
//! ```
//!
//! * [`StreamEnv`] ([`env`]): the job's entry point and `execute`.
//! * [`DataStream`] ([`stream`]), [`KeyedStream`] ([`keyed`]), [`ConnectedStreams`] and
//!   [`ConnectedKeyedStreams`] ([`connected`]): the API.
//! * [`all_window`]: windows over a whole non-keyed stream (Flink's `windowAll`).
//! * [`partition`]: one result per key at the end of the input (Flink's
//!   `fullWindowPartition`).
//! * [`join`]: the interval join, the window join and the co-group.
//! * [`changelog`]: updating aggregates emitted as a changelog (`+I -U +U -D`), Flink's
//!   unbounded `GROUP BY` and retract streams.
//! * [`state`]: named keyed state with TTL (Flink's state API), operator state, and the state
//!   backends (`state::backend`: memory, disk) that keep a keyed operator's keys.
//! * [`checkpoint`]: checkpoint boundaries in the epoch space, what each worker snapshots at a
//!   cut (`checkpoint::snapshot`), and the coordination of uploads, manifests and restores
//!   (`checkpoint::coordinator`).
//! * [`function`]: user functions with a lifecycle: panics and errors of user code fail the
//!   job with the operator's name; non-keyed process functions and rich functions.
//! * [`route`]: publish/subscribe routing (`stream.route`): records to the subscriptions
//!   they match, by topic wildcards and content predicates (`spate-pubsub`).
//! * [`dedup`]: record-id deduplication (Bloom filters over exact id stores, event-time buckets).
//! * [`plan`]: the job graph the API records, replayed on every worker.
//! * [`chain`]: operator chaining: consecutive forward operators run as one timely operator.
//! * [`execute`]: the worker loop, source driving and flow control (epochs in flight).
//! * [`cluster`]: launching and supervising local processes.
//! * [`metrics`]: named counters, and the live metric cells of every operator instance.
//! * [`view`]: a running job as readers see it: snapshots with Flink's metric names, and
//!   control (cancel, savepoints, stop with savepoint) through `spate_metrics::JobView`.
//! * `web`: where the job's REST server plugs in.
//!
//! Timestamps in the timely graph are *epochs*: batches of source records, closed by count or
//! time. They bound the data in flight (flow control) and will delimit checkpoints.

pub mod all_window;
pub mod assign;
pub mod autoscale;
pub mod chain;
pub mod changelog;
pub mod checkpoint;
pub mod cluster;
pub mod config;
pub mod connected;
pub(crate) mod controller;
pub mod dedup;
pub mod env;
pub mod execute;
pub mod function;
pub mod join;
pub mod keyed;
pub mod metrics;
pub mod partition;
pub mod plan;
pub mod process;
pub(crate) mod report;
pub mod route;
pub mod shedding;
pub(crate) mod side;
pub mod state;
pub mod stream;
pub mod time;
pub mod view;
pub(crate) mod web;
pub mod window;

pub use all_window::AllWindowedStream;
pub use changelog::{Change, RowKind, Updating, UpdatingAggregate, UpdatingState};
pub use config::{
    AutoscaleConfig, JobConfig, LaunchCommand, OverloadPolicy, RestartStrategy, ScalingPolicy,
    StateBackend, DEFAULT_HEADROOM,
};
pub use connected::{ConnectedKeyedStreams, ConnectedStreams};
pub use dedup::DedupConfig;
pub use env::{JobResult, Role, StopHandle, StreamEnv};
pub use execute::{request_stop, Progress};
pub use function::{
    Counter, FunctionError, FunctionResult, Gauge, MetricGroup, MetricHistogram, ProcessFunction,
    ProcessFunctionContext, RichFilterFunction, RichFlatMapFunction, RichMapFunction,
    RuntimeContext,
};
pub use join::{
    CoGroup, CoGroupedStreams, InnerJoin, IntervalJoin, IntervalJoined, JoinContext, JoinEqualTo,
    JoinWhere, JoinWithWindow, JoinedStreams,
};
pub use keyed::KeyedStream;
pub use partition::PartitionWindowedStream;
pub use process::{
    Either, KeyedCoProcessFunction, KeyedProcessFunction, OutputTag, ProcessContext, TimeDomain,
};
pub use state::{
    AggregatingState, AggregatingStateDescriptor, CheckpointedFunction, KeyedState, ListState,
    ListStateDescriptor, MapState, MapStateDescriptor, ReducingState, ReducingStateDescriptor,
    StateData, StateTtlConfig, StateVisibility, TtlTimeCharacteristic, TtlTimeProvider, UpdateType,
    ValueState, ValueStateDescriptor,
};
pub use stream::{DataStream, SinkNode};
pub use time::{
    BoundedOutOfOrderness, Timestamp, WatermarkGenerator, WatermarkStrategy, MAX_WATERMARK,
    NO_TIMESTAMP,
};
pub use window::{
    AggregateFunction, ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, Count,
    CountTrigger, CumulativeEventTimeWindows, EventTimeSessionWindows, EventTimeTrigger,
    GlobalWindow, GlobalWindows, NeverTrigger, ProcessingTimeSessionWindows, ProcessingTimeTrigger,
    PurgingTrigger, SlidingEventTimeWindows, SlidingProcessingTimeWindows, TimeWindow, Trigger,
    TriggerContext, TriggerResult, TriggerState, TumblingEventTimeWindows,
    TumblingProcessingTimeWindows, Window, WindowAssigner, WindowBuf, WindowContext,
    WindowedStream,
};
