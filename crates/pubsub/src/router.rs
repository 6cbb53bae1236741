//! Subscriptions (an optional topic filter and an optional content predicate) and the
//! [`Router`] that finds the subscribers of a message.
//!
//! A stream operator owns one `Router` per worker and applies [`Control`] messages (a
//! broadcast control stream) as they arrive; its state for a checkpoint is the router itself,
//! which serializes as its dialect and the `(id, subscription)` list, sorted by id, with
//! filters and predicates as text, and is rebuilt (re-indexed) when read.

use std::fmt;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::attrs::Attributes;
use crate::matcher::Matcher;
use crate::predicate::{Predicate, PredicateError};
use crate::topic::{Dialect, TopicError, TopicFilter};
use crate::trie::TopicTrie;

/// A subscription's id, chosen by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SubId(pub u64);

impl fmt::Display for SubId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a subscription was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubscriptionError {
    /// Its topic filter is invalid, or of another dialect than the router's.
    #[error("topic filter: {0}")]
    Topic(#[from] TopicError),
    /// Its content predicate is invalid.
    #[error("content predicate: {0}")]
    Predicate(#[from] PredicateError),
}

/// What a subscriber wants: messages whose topic matches `topic` (any topic if `None`) and
/// whose record matches `content` (any record if `None`).
///
/// Serialized as `{"topic": {"dialect": "mqtt", "filter": "sport/#"}, "content": "price > 100"}`,
/// either field `null`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Subscription {
    /// The topic filter.
    pub topic: Option<TopicFilter>,
    /// The content predicate.
    pub content: Option<Predicate>,
}

impl Subscription {
    /// A subscription from its parts.
    pub fn new(topic: Option<TopicFilter>, content: Option<Predicate>) -> Self {
        Subscription { topic, content }
    }

    /// Parses a topic filter of `dialect` and a predicate, either optional.
    pub fn parse(
        dialect: Dialect,
        topic: Option<&str>,
        content: Option<&str>,
    ) -> Result<Self, SubscriptionError> {
        Ok(Subscription {
            topic: topic.map(|t| TopicFilter::parse(dialect, t)).transpose()?,
            content: content.map(Predicate::parse).transpose()?,
        })
    }

    /// Whether a message matches, evaluated directly (the reference for [`Router`]).
    pub fn matches<A: Attributes + ?Sized>(&self, topic: &str, attrs: &A) -> bool {
        self.topic.as_ref().is_none_or(|f| f.matches(topic))
            && self.content.as_ref().is_none_or(|p| p.matches(attrs))
    }
}

/// A change to a router's subscriptions, as an operator receives it on a control stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// Add `subscription` as `id`, replacing any subscription of that id.
    Add {
        /// The subscription's id.
        id: SubId,
        /// The subscription.
        subscription: Subscription,
    },
    /// Remove the subscription `id` (if there is none, nothing happens).
    Remove {
        /// The subscription's id.
        id: SubId,
    },
}

/// The subscriptions of one dialect, indexed by topic (a [`TopicTrie`]) and by content (a
/// [`Matcher`]), to find the subscribers of a (topic, record) message.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "RouterState", into = "RouterState")]
pub struct Router {
    subs: FxHashMap<SubId, Subscription>,
    topics: TopicTrie<SubId>,
    content: Matcher,
    /// Subscriptions with neither filter, ascending.
    everything: Vec<SubId>,
    by_topic: Vec<SubId>,
    by_content: Vec<SubId>,
}

impl Router {
    /// An empty router for topics of `dialect`.
    pub fn new(dialect: Dialect) -> Self {
        Router {
            subs: FxHashMap::default(),
            topics: TopicTrie::new(dialect),
            content: Matcher::new(),
            everything: Vec::new(),
            by_topic: Vec::new(),
            by_content: Vec::new(),
        }
    }

    /// The topics' dialect.
    pub fn dialect(&self) -> Dialect {
        self.topics.dialect()
    }

    /// How many subscriptions are held.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    /// Whether no subscription is held.
    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// The subscription `id`.
    pub fn get(&self, id: SubId) -> Option<&Subscription> {
        self.subs.get(&id)
    }

    /// The subscriptions, ascending by id.
    pub fn subscriptions(&self) -> Vec<(SubId, &Subscription)> {
        let mut v: Vec<_> = self.subs.iter().map(|(id, s)| (*id, s)).collect();
        v.sort_unstable_by_key(|(id, _)| *id);
        v
    }

    /// Adds `subscription` as `id`, replacing and returning the previous one. Fails, changing
    /// nothing, if its topic filter is of another dialect.
    pub fn add(
        &mut self,
        id: SubId,
        subscription: Subscription,
    ) -> Result<Option<Subscription>, SubscriptionError> {
        if let Some(f) = &subscription.topic {
            if f.dialect() != self.dialect() {
                return Err(TopicError::DialectMismatch {
                    text: f.as_str().to_owned(),
                    found: f.dialect(),
                    expected: self.dialect(),
                }
                .into());
            }
        }
        let previous = self.remove(id);
        if let Some(f) = &subscription.topic {
            self.topics.insert(id, f.clone())?;
        }
        if let Some(p) = &subscription.content {
            self.content.insert(id, p.clone());
        }
        if subscription.topic.is_none() && subscription.content.is_none() {
            let at = self.everything.partition_point(|&e| e < id);
            self.everything.insert(at, id);
        }
        self.subs.insert(id, subscription);
        Ok(previous)
    }

    /// Removes the subscription `id`, returning it.
    pub fn remove(&mut self, id: SubId) -> Option<Subscription> {
        let sub = self.subs.remove(&id)?;
        if sub.topic.is_some() {
            self.topics.remove(id);
        }
        if sub.content.is_some() {
            self.content.remove(id);
        }
        if let Ok(at) = self.everything.binary_search(&id) {
            self.everything.remove(at);
        }
        Some(sub)
    }

    /// Applies a control message.
    pub fn apply(&mut self, control: Control) -> Result<(), SubscriptionError> {
        match control {
            Control::Add { id, subscription } => self.add(id, subscription).map(drop),
            Control::Remove { id } => {
                self.remove(id);
                Ok(())
            }
        }
    }

    /// The subscribers of a message, ascending. An invalid topic name matches only the
    /// subscriptions without a topic filter.
    pub fn route<A: Attributes + ?Sized>(&mut self, topic: &str, attrs: &A) -> Vec<SubId> {
        let mut out = Vec::new();
        self.route_into(topic, attrs, &mut out);
        out
    }

    /// Like [`Router::route`], into `out` (cleared first), to reuse one buffer.
    pub fn route_into<A: Attributes + ?Sized>(
        &mut self,
        topic: &str,
        attrs: &A,
        out: &mut Vec<SubId>,
    ) {
        self.route_dyn(topic, &attrs, out);
    }

    fn route_dyn(&mut self, topic: &str, attrs: &dyn Attributes, out: &mut Vec<SubId>) {
        out.clear();
        self.by_topic.clear();
        self.topics.matches_into(topic, &mut self.by_topic);
        self.content.matches_into(attrs, &mut self.by_content);
        let (subs, by_content) = (&self.subs, &self.by_content);
        // Topic matches: those without a predicate, and those whose predicate matched.
        out.extend(self.by_topic.iter().copied().filter(|id| {
            subs.get(id).is_some_and(|s| s.content.is_none())
                || by_content.binary_search(id).is_ok()
        }));
        // Content matches without a topic filter.
        out.extend(
            by_content
                .iter()
                .copied()
                .filter(|id| subs.get(id).is_some_and(|s| s.topic.is_none())),
        );
        out.extend_from_slice(&self.everything);
        out.sort_unstable();
    }
}

/// A router as checkpointed: its dialect and its subscriptions, ascending by id.
#[derive(Serialize, Deserialize)]
struct RouterState {
    dialect: Dialect,
    subscriptions: Vec<(SubId, Subscription)>,
}

impl From<Router> for RouterState {
    fn from(r: Router) -> Self {
        let mut subscriptions: Vec<_> = r.subs.into_iter().collect();
        subscriptions.sort_unstable_by_key(|(id, _)| *id);
        RouterState {
            dialect: r.topics.dialect(),
            subscriptions,
        }
    }
}

impl TryFrom<RouterState> for Router {
    type Error = SubscriptionError;
    fn try_from(s: RouterState) -> Result<Self, SubscriptionError> {
        let mut r = Router::new(s.dialect);
        for (id, sub) in s.subscriptions {
            r.add(id, sub)?;
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids(v: Vec<SubId>) -> Vec<u64> {
        v.into_iter().map(|s| s.0).collect()
    }

    fn router() -> Router {
        let mut r = Router::new(Dialect::Mqtt);
        let subs = [
            (Some("sensors/+/temp"), None),
            (Some("sensors/#"), Some("value > 45")),
            (None, Some("value > 45 AND area = 'north'")),
            (None, None),
            (Some("$SYS/#"), None),
        ];
        for (i, (t, c)) in subs.into_iter().enumerate() {
            r.add(
                SubId(i as u64),
                Subscription::parse(Dialect::Mqtt, t, c).unwrap(),
            )
            .unwrap();
        }
        r
    }

    #[test]
    fn routes_by_topic_and_content() {
        let mut r = router();
        let hot = json!({"value": 50, "area": "north"});
        let cold = json!({"value": 20, "area": "north"});
        assert_eq!(ids(r.route("sensors/7/temp", &hot)), [0, 1, 2, 3]);
        assert_eq!(ids(r.route("sensors/7/temp", &cold)), [0, 3]);
        assert_eq!(ids(r.route("sensors/7/smoke", &hot)), [1, 2, 3]);
        assert_eq!(ids(r.route("other", &hot)), [2, 3]);
        assert_eq!(ids(r.route("$SYS/load", &cold)), [3, 4]);
        assert_eq!(ids(r.route("bad/+", &hot)), [2, 3]);
        r.apply(Control::Remove { id: SubId(3) }).unwrap();
        r.apply(Control::Remove { id: SubId(99) }).unwrap();
        assert_eq!(ids(r.route("other", &cold)), Vec::<u64>::new());
        let nats = Subscription::parse(Dialect::Nats, Some("a.>"), None).unwrap();
        let err = r
            .apply(Control::Add {
                id: SubId(9),
                subscription: nats,
            })
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "topic filter: filter `a.>` is a NATS filter, but this index holds MQTT filters"
        );
        assert_eq!(r.len(), 4);
    }

    #[test]
    fn replacing_a_subscription_moves_it_between_indexes() {
        let mut r = router();
        let old = r
            .add(
                SubId(0),
                Subscription::parse(Dialect::Mqtt, None, Some("value < 0")).unwrap(),
            )
            .unwrap();
        assert_eq!(old.unwrap().topic.unwrap().as_str(), "sensors/+/temp");
        assert_eq!(ids(r.route("sensors/1/temp", &json!({"value": 1}))), [3]);
        assert_eq!(ids(r.route("x", &json!({"value": -1}))), [0, 3]);
    }

    #[test]
    fn checkpoint_round_trip() {
        let mut r = router();
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.starts_with(r#"{"dialect":"mqtt","subscriptions":[[0,{"topic":{"dialect":"mqtt","filter":"sensors/+/temp"},"content":null}]"#), "{json}");
        let mut back: Router = serde_json::from_str(&json).unwrap();
        let rec = json!({"value": 50, "area": "north"});
        assert_eq!(
            back.route("sensors/1/temp", &rec),
            r.route("sensors/1/temp", &rec)
        );
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
        let control = Control::Add {
            id: SubId(1),
            subscription: Subscription::parse(Dialect::Nats, None, Some("a = 1")).unwrap(),
        };
        let text = serde_json::to_string(&control).unwrap();
        assert_eq!(
            text,
            r#"{"add":{"id":1,"subscription":{"topic":null,"content":"a = 1"}}}"#
        );
        assert_eq!(serde_json::from_str::<Control>(&text).unwrap(), control);
    }
}
