//! The router against direct evaluation of every subscription, through a checkpoint.

use std::collections::BTreeMap;

use proptest::prelude::*;
use spate_pubsub::{Control, Dialect, Router, SubId, Subscription};

use crate::strategies::{filter, predicate, record, topic};

fn subscription() -> impl Strategy<Value = Subscription> {
    (
        prop::option::of(filter(Dialect::Mqtt)),
        prop::option::of(predicate()),
    )
        .prop_map(|(t, c)| Subscription::new(t, c))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn router_equals_direct_evaluation(ops in prop::collection::vec(
        (0u64..16, prop::option::weighted(0.8, subscription()), topic(Dialect::Mqtt), record()), 1..40))
    {
        let mut r = Router::new(Dialect::Mqtt);
        let mut model: BTreeMap<u64, Subscription> = BTreeMap::new();
        for (id, op, topic, rec) in ops {
            let id = SubId(id);
            match op {
                Some(s) => {
                    model.insert(id.0, s.clone());
                    r.apply(Control::Add { id, subscription: s }).unwrap();
                }
                None => {
                    model.remove(&id.0);
                    r.apply(Control::Remove { id }).unwrap();
                }
            }
            let want: Vec<SubId> =
                model.iter().filter(|(_, s)| s.matches(&topic, &rec)).map(|(id, _)| SubId(*id)).collect();
            prop_assert_eq!(r.route(&topic, &rec), want.clone(), "topic {:?} record {:?}", topic, rec);
            let mut restored: Router = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
            prop_assert_eq!(restored.route(&topic, &rec), want);
        }
    }
}
