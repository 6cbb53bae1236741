//! Integration tests of spate-pubsub: every index against direct evaluation, by proptest.

mod content;
mod router;
mod strategies;
mod topic;
