//! Integration tests of spate-pubsub: every index against direct evaluation, by proptest, and
//! the topic trie against the real Mosquitto and nats-server (`brokers`).

mod brokers;
mod content;
mod router;
mod strategies;
mod topic;
