//! Integration tests of spate-nexmark, in one binary.
//!
//! * `identity`: byte identity with the Python reference generator, and the shared checksum.
//! * `partitions`: the data does not depend on how partitions are spread over workers.
//! * `parse`: round trips and the parser's robustness against malformed input.
//! * `hand`: the plain q5 against the hand-tuned one it replaced, q7 against a naive oracle.

mod hand;
mod identity;
mod parse;
mod partitions;
mod restore;
mod util;
