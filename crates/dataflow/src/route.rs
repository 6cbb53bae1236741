//! Publish/subscribe routing as an operator: `stream.route(router, topic)` sends each record
//! to the subscriptions it matches, by topic filter (MQTT or NATS wildcards) and by content
//! (a predicate over the record's attributes), with `spate-pubsub`'s indexes.
//!
//! The output is `(subscriber, record)`, one per match, so that a job can key, filter or sink
//! per subscriber. [`DataStream::route_with`] also takes a stream of [`Control`] changes
//! (add or remove a subscription) while the job runs: the changes are broadcast to every
//! instance, each of which applies them to its own copy of the router, between records (a
//! record is matched against the subscriptions each instance had when it arrived, as in
//! Flink's broadcast-state pattern).
//!
//! The subscription set is not checkpointed: after a restore every instance starts from the
//! router the job was built with, and a control source that replays (files, Kafka) replays
//! the changes after its checkpointed position only. Keep the lasting subscriptions in the
//! initial router, or in a control source read from its start.

use spate_pubsub::{Attributes, Control, Router, SubId};
use spate_types::Data;

use crate::function::{FunctionResult, RichFlatMapFunction, RuntimeContext};
use crate::DataStream;

/// A record, or a change to the subscriptions: the input of the routing instance.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
enum Input<T> {
    Record(T),
    Control(Control),
}

/// Topic of a record.
type TopicFn<T> = std::sync::Arc<dyn Fn(&T) -> &str + Send + Sync>;

#[derive(Clone)]
struct Route<T> {
    router: Router,
    topic: TopicFn<T>,
    matched: Vec<SubId>,
}

impl<T: Data + Attributes> RichFlatMapFunction<Input<T>, (u64, T)> for Route<T> {
    fn open(&mut self, _ctx: &RuntimeContext) -> FunctionResult {
        Ok(())
    }

    fn flat_map(&mut self, value: Input<T>, out: &mut Vec<(u64, T)>) -> FunctionResult {
        match value {
            Input::Record(record) => {
                let topic = (self.topic)(&record);
                self.router.route_into(topic, &record, &mut self.matched);
                if let Some((last, rest)) = self.matched.split_last() {
                    for id in rest {
                        out.push((id.0, record.clone()));
                    }
                    out.push((last.0, record));
                }
            }
            Input::Control(change) => {
                // A bad subscription fails the job with its reason, like a bad record of a
                // user function: nobody would know that it was never applied.
                self.router.apply(change).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}

impl<T: Data + Attributes> DataStream<T> {
    /// Routes each record to the subscriptions of `router` it matches: `(subscriber,
    /// record)` once per match, none for a record nobody subscribed to. `topic` gives a
    /// record's topic (for subscriptions with a topic filter); the record's attributes are
    /// what content predicates see. See the [module docs](crate::route).
    ///
    /// ```no_run
    /// use spate_dataflow::DataStream;
    /// use spate_pubsub::{Dialect, Router, SubId, Subscription};
    /// fn alerts(readings: &DataStream<serde_json::Value>) -> DataStream<(u64, serde_json::Value)> {
    ///     let mut router = Router::new(Dialect::Mqtt);
    ///     let hot = Subscription::parse(Dialect::Mqtt, Some("sensors/+/temp"), Some("value > 45"));
    ///     router.add(SubId(1), hot.expect("a valid subscription")).expect("added");
    ///     readings.route(router, |r: &serde_json::Value| r["topic"].as_str().unwrap_or(""))
    /// }
    /// ```
    pub fn route(
        &self,
        router: Router,
        topic: impl Fn(&T) -> &str + Send + Sync + 'static,
    ) -> DataStream<(u64, T)> {
        self.map(Input::Record)
            .name("route-input")
            .flat_map_rich(Route {
                router,
                topic: std::sync::Arc::new(topic),
                matched: Vec::new(),
            })
            .name_default("route")
    }

    /// [`route`](Self::route), with subscriptions added and removed while the job runs by the
    /// `changes` stream (broadcast to every instance).
    pub fn route_with(
        &self,
        router: Router,
        topic: impl Fn(&T) -> &str + Send + Sync + 'static,
        changes: &DataStream<Control>,
    ) -> DataStream<(u64, T)> {
        let changes = changes
            .broadcast()
            .map(Input::Control)
            .name("route-changes");
        self.map(Input::Record)
            .name("route-input")
            .union(&[changes])
            .flat_map_rich(Route {
                router,
                topic: std::sync::Arc::new(topic),
                matched: Vec::new(),
            })
            .name_default("route")
    }
}
