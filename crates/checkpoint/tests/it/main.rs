//! Integration tests of checkpoint storage, one binary (see STYLE.md).

mod common;

mod concurrency;
mod corruption;
mod failures;
mod retention;
mod roundtrip;
mod savepoints;
