//! The counting matcher against direct evaluation of every predicate's syntax tree (which
//! also checks the DNF conversion, since the matcher only sees the DNF).

use std::collections::BTreeMap;

use proptest::prelude::*;
use spate_pubsub::{Matcher, Predicate, SubId};

use crate::strategies::{predicate, record};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn matcher_equals_direct_evaluation(ops in prop::collection::vec(
        (0u64..16, prop::option::weighted(0.8, predicate()), record()), 1..60))
    {
        let mut m = Matcher::new();
        let mut model: BTreeMap<u64, Predicate> = BTreeMap::new();
        for (id, op, rec) in ops {
            match op {
                Some(p) => prop_assert_eq!(m.insert(SubId(id), p.clone()), model.insert(id, p)),
                None => prop_assert_eq!(m.remove(SubId(id)), model.remove(&id)),
            }
            let want: Vec<SubId> = model.iter().filter(|(_, p)| p.matches(&rec)).map(|(id, _)| SubId(*id)).collect();
            prop_assert_eq!(m.matches(&rec), want, "record {:?}, predicates {:?}", rec,
                model.values().map(Predicate::as_str).collect::<Vec<_>>());
        }
    }
}
