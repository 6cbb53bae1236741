//! Integration tests of the engine through the facade: operators against naive
//! single-threaded evaluation, flow control, and bad input end to end.

mod bad_input;
mod checkpoints;
mod event_time;
mod flow_control;
mod joins;
mod operators;
mod sensors;
mod state_backends;
mod windows;
