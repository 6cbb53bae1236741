//! The topic trie against the naive matcher, in both dialects.

use std::collections::HashMap;

use proptest::prelude::*;
use spate_pubsub::{filter_matches, Dialect, TopicFilter, TopicTrie};

use crate::strategies::{filter, topic};

/// Applies adds (with a filter) and removes (without) to a trie and to a plain map, and
/// checks after each that both give the same subscribers for a topic.
fn check(
    dialect: Dialect,
    ops: Vec<(u32, Option<TopicFilter>, String)>,
) -> Result<(), TestCaseError> {
    let mut trie = TopicTrie::new(dialect);
    let mut model: HashMap<u32, TopicFilter> = HashMap::new();
    for (id, op, topic) in ops {
        match op {
            Some(f) => {
                prop_assert_eq!(trie.insert(id, f.clone()).unwrap(), model.insert(id, f));
            }
            None => prop_assert_eq!(trie.remove(id), model.remove(&id)),
        }
        let mut got = trie.matches(&topic);
        got.sort_unstable();
        let mut want: Vec<u32> = model
            .iter()
            .filter(|(_, f)| filter_matches(f, &topic))
            .map(|(id, _)| *id)
            .collect();
        want.sort_unstable();
        prop_assert_eq!(got, want, "topic {:?}, filters {:?}", topic, model);
        prop_assert_eq!(trie.len(), model.len());
    }
    Ok(())
}

fn ops(dialect: Dialect) -> impl Strategy<Value = Vec<(u32, Option<TopicFilter>, String)>> {
    prop::collection::vec(
        (
            0u32..24,
            prop::option::weighted(0.8, filter(dialect)),
            topic(dialect),
        ),
        1..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn mqtt_trie_equals_naive(ops in ops(Dialect::Mqtt)) {
        check(Dialect::Mqtt, ops)?;
    }

    #[test]
    fn nats_trie_equals_naive(ops in ops(Dialect::Nats)) {
        check(Dialect::Nats, ops)?;
    }
}
