//! Spate's pub/sub layer: topic-based and content-based subscriptions, and their indexes.
//!
//! Standalone: it depends on no other Spate crate, so the engine adapts its records through
//! the [`Attributes`] trait and owns the routing operator.
//!
//! ```text
//!   Subscription = Option<TopicFilter> + Option<Predicate>
//!                        │                     │
//!                   TopicTrie<SubId>        Matcher (counting algorithm over the DNF)
//!                        └──────── Router ─────┘      route(topic, record) -> [SubId]
//! ```
//!
//! * [`topic`]: topic names and filters in the MQTT (`/`, `+`, `#`, `$SYS`) and NATS (`.`,
//!   `*`, `>`) dialects, validated, with the naive [`filter_matches`].
//! * [`trie`]: [`TopicTrie`], many filters in a trie over levels.
//! * [`attrs`]: the [`Attributes`] view of a record and its scalar values.
//! * [`predicate`]: content predicates ([`Predicate`]): SQL-like or PADRES syntax,
//!   three-valued evaluation, and their disjunctive normal form.
//! * [`matcher`]: [`Matcher`], many predicates matched with the counting algorithm.
//! * [`router`]: [`Subscription`], [`Router`] and its [`Control`] messages.
//!
//! Every index is checked against direct evaluation by property tests (`tests/it`).
//!
//! ```
//! use spate_pubsub::{Dialect, Router, SubId, Subscription};
//!
//! let mut router = Router::new(Dialect::Mqtt);
//! let sub = Subscription::parse(Dialect::Mqtt, Some("sensors/+/temp"), Some("value > 45"))?;
//! router.add(SubId(1), sub)?;
//! let record = serde_json::json!({"value": 50, "area": "north"});
//! assert_eq!(router.route("sensors/7/temp", &record), [SubId(1)]);
//! assert!(router.route("sensors/7/smoke", &record).is_empty());
//! # Ok::<(), spate_pubsub::SubscriptionError>(())
//! ```

pub mod attrs;
pub mod matcher;
mod parse;
pub mod predicate;
pub mod router;
pub mod topic;
pub mod trie;

pub use attrs::{AttrRef, AttrValue, Attributes};
pub use matcher::Matcher;
pub use predicate::{Predicate, PredicateError, MAX_CONJUNCTIONS};
pub use router::{Control, Router, SubId, Subscription, SubscriptionError};
pub use topic::{filter_matches, validate_topic, Dialect, Level, TopicError, TopicFilter};
pub use trie::TopicTrie;
