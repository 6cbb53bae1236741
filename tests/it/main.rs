//! Integration tests of the engine through the facade: operators against naive
//! single-threaded evaluation, flow control, and bad input end to end.

mod bad_input;
mod chaining;
mod changelog;
mod checkpoint_failures;
mod checkpoints;
mod dedup;
mod event_time;
mod file_checkpoints;
mod final_checkpoint;
mod flow_control;
mod functions;
mod joins;
mod keyed_lifecycle;
mod metrics;
mod operators;
mod route;
mod sensors;
mod side_outputs;
mod sliced_windows;
mod state;
mod state_backends;
mod uids;
mod windows;
