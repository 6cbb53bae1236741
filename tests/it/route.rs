//! `stream.route`: records to the subscriptions they match (topic wildcards and content
//! predicates), against each subscription evaluated directly, with subscriptions changed by a
//! control stream while the job runs.

use std::collections::BTreeSet;

use spate::prelude::*;
use spate::pubsub::{Control, Dialect, Router, SubId, Subscription};

fn readings() -> Vec<serde_json::Value> {
    (0..400)
        .map(|i| {
            serde_json::json!({
                "topic": format!("sensors/{}/{}", i % 7, if i % 3 == 0 { "temp" } else { "smoke" }),
                "value": i % 100,
                "area": if i % 2 == 0 { "north" } else { "south" },
            })
        })
        .collect()
}

fn subscriptions() -> Vec<(u64, Subscription)> {
    [
        (1, Some("sensors/+/temp"), Some("value > 45")),
        (2, Some("sensors/#"), Some("area = 'north' AND value < 10")),
        (3, None, Some("value IN (1, 2, 3) OR area = 'nowhere'")),
        (4, Some("sensors/3/+"), None),
    ]
    .into_iter()
    .map(|(id, t, c)| (id, Subscription::parse(Dialect::Mqtt, t, c).unwrap()))
    .collect()
}

fn topic_of(r: &serde_json::Value) -> &str {
    r["topic"].as_str().unwrap_or("")
}

/// Every (subscriber, record) by direct evaluation of each subscription.
fn naive(subs: &[(u64, Subscription)]) -> BTreeSet<(u64, String)> {
    let mut out = BTreeSet::new();
    for r in readings() {
        for (id, s) in subs {
            if s.matches(topic_of(&r), &r) {
                out.insert((*id, r.to_string()));
            }
        }
    }
    out
}

#[test]
fn records_reach_exactly_the_subscriptions_they_match_on_several_workers() {
    let subs = subscriptions();
    let mut router = Router::new(Dialect::Mqtt);
    for (id, s) in &subs {
        router.add(SubId(*id), s.clone()).unwrap();
    }
    let env = StreamEnv::new(JobConfig::local(3));
    let (sink, got) = CollectSink::new();
    env.from_collection(readings())
        .rebalance()
        .route(router, topic_of)
        .sink_to(sink);
    env.execute("route").unwrap();
    let got: Vec<(u64, serde_json::Value)> = got.take();
    let set: BTreeSet<(u64, String)> = got.iter().map(|(id, r)| (*id, r.to_string())).collect();
    assert_eq!(set.len(), got.len(), "each match once");
    let want = naive(&subs);
    assert!(
        want.len() > 50,
        "the subscriptions match something: {}",
        want.len()
    );
    assert_eq!(set, want);
}

#[test]
fn a_control_stream_adds_and_removes_subscriptions() {
    // No subscription at first; the control stream adds them all, then removes 4. When each
    // change lands among the readings is up to the job, so every output must be a true match
    // of a subscription that was added.
    let subs = subscriptions();
    let env = StreamEnv::new(JobConfig::local(1));
    let mut changes: Vec<Control> = subs
        .iter()
        .map(|(id, s)| Control::Add {
            id: SubId(*id),
            subscription: s.clone(),
        })
        .collect();
    changes.push(Control::Remove { id: SubId(4) });
    let control = env.from_collection(changes);
    let (sink, got) = CollectSink::new();
    env.from_collection(readings())
        .route_with(Router::new(Dialect::Mqtt), topic_of, &control)
        .sink_to(sink);
    env.execute("route-control").unwrap();
    let got: Vec<(u64, serde_json::Value)> = got.take();
    let ids: BTreeSet<u64> = got.iter().map(|(id, _)| *id).collect();
    assert!(ids.is_subset(&BTreeSet::from([1, 2, 3, 4])));
    let want = naive(&subs);
    for (id, r) in &got {
        assert!(want.contains(&(*id, r.to_string())), "{id} {r}");
    }
}
