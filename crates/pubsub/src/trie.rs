//! [`TopicTrie`]: an index of many topic filters of one dialect, by subscription id.
//!
//! A trie over levels. Each node has literal children (a hash map from the level's text), one
//! single-level wildcard child, and two id lists: the filters that end at the node, and the
//! filters that end at the node with a multi-level wildcard (`sport/#` is stored at `sport`).
//! Matching walks the topic's levels once, branching into the literal and the wildcard child,
//! so its cost grows with the topic's depth and the number of wildcard branches, not with the
//! number of filters.
//!
//! Nodes live in one arena and point to each other by index, so that neither cloning nor
//! dropping a trie recurses (an MQTT filter may have 32 768 levels) and removal can prune
//! emptied branches bottom-up without recursion.

use std::hash::Hash;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::topic::{validate_topic, Dialect, Level, TopicError, TopicFilter};

type Ids<V> = SmallVec<[V; 2]>;

#[derive(Clone, Debug)]
struct Node<V> {
    literal: FxHashMap<Box<str>, u32>,
    single: Option<u32>,
    /// Filters ending here.
    exact: Ids<V>,
    /// Filters ending here with the multi-level wildcard.
    multi: Ids<V>,
}

impl<V> Node<V> {
    fn new() -> Self {
        Node {
            literal: FxHashMap::default(),
            single: None,
            exact: Ids::new(),
            multi: Ids::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.literal.is_empty()
            && self.single.is_none()
            && self.exact.is_empty()
            && self.multi.is_empty()
    }
}

const ROOT: u32 = 0;

/// A subscription index of topic filters, keyed by id `V` (one filter per id).
#[derive(Clone, Debug)]
pub struct TopicTrie<V> {
    dialect: Dialect,
    nodes: Vec<Node<V>>,
    free: Vec<u32>,
    filters: FxHashMap<V, TopicFilter>,
}

impl<V: Copy + Eq + Hash> TopicTrie<V> {
    /// An empty trie for filters of `dialect`.
    pub fn new(dialect: Dialect) -> Self {
        TopicTrie {
            dialect,
            nodes: vec![Node::new()],
            free: Vec::new(),
            filters: FxHashMap::default(),
        }
    }

    /// The dialect of the filters held.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// How many filters are held.
    pub fn len(&self) -> usize {
        self.filters.len()
    }

    /// Whether no filter is held.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// The filter of `id`.
    pub fn get(&self, id: V) -> Option<&TopicFilter> {
        self.filters.get(&id)
    }

    /// The `(id, filter)` pairs held, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (V, &TopicFilter)> + '_ {
        self.filters.iter().map(|(id, f)| (*id, f))
    }

    /// Subscribes `id` to `filter`, replacing and returning its previous filter. Fails if the
    /// filter is of the other dialect.
    pub fn insert(
        &mut self,
        id: V,
        filter: TopicFilter,
    ) -> Result<Option<TopicFilter>, TopicError> {
        if filter.dialect() != self.dialect {
            return Err(TopicError::DialectMismatch {
                text: filter.as_str().to_owned(),
                found: filter.dialect(),
                expected: self.dialect,
            });
        }
        let previous = self.remove(id);
        let mut node = ROOT;
        let mut multi = false;
        for level in filter.levels() {
            let next = match level {
                Level::Multi => {
                    multi = true;
                    break;
                }
                Level::Single => self.nodes[node as usize].single,
                Level::Literal(lit) => self.nodes[node as usize].literal.get(lit).copied(),
            };
            node = match next {
                Some(child) => child,
                None => {
                    let child = self.alloc();
                    let n = &mut self.nodes[node as usize];
                    match level {
                        Level::Literal(lit) => {
                            n.literal.insert(lit.into(), child);
                        }
                        _ => n.single = Some(child),
                    }
                    child
                }
            };
        }
        let n = &mut self.nodes[node as usize];
        if multi {
            n.multi.push(id)
        } else {
            n.exact.push(id)
        }
        self.filters.insert(id, filter);
        Ok(previous)
    }

    fn alloc(&mut self) -> u32 {
        if let Some(i) = self.free.pop() {
            return i;
        }
        let i = u32::try_from(self.nodes.len()).expect("fewer than 2^32 trie nodes");
        self.nodes.push(Node::new());
        i
    }

    /// Unsubscribes `id`, returning its filter.
    pub fn remove(&mut self, id: V) -> Option<TopicFilter> {
        let filter = self.filters.remove(&id)?;
        // The nodes from the root down, each with the level that leads to the next.
        let mut path: Vec<(u32, Level<'_>)> = Vec::new();
        let mut node = ROOT;
        let mut multi = false;
        for level in filter.levels() {
            let n = &self.nodes[node as usize];
            let next = match level {
                Level::Multi => {
                    multi = true;
                    break;
                }
                Level::Single => n.single,
                Level::Literal(lit) => n.literal.get(lit).copied(),
            };
            path.push((node, level));
            node = next.expect("an inserted filter's path exists");
        }
        let ids = if multi {
            &mut self.nodes[node as usize].multi
        } else {
            &mut self.nodes[node as usize].exact
        };
        let at = ids
            .iter()
            .position(|v| *v == id)
            .expect("an inserted filter's id is at its node");
        ids.swap_remove(at);
        // Prune the emptied branch, bottom-up.
        while node != ROOT && self.nodes[node as usize].is_empty() {
            let (parent, level) = path.pop().expect("a non-root node has a parent");
            let p = &mut self.nodes[parent as usize];
            match level {
                Level::Literal(lit) => {
                    p.literal.remove(lit);
                }
                _ => p.single = None,
            }
            self.nodes[node as usize] = Node::new();
            self.free.push(node);
            node = parent;
        }
        Some(filter)
    }

    /// The ids whose filters match `topic`, in no particular order. An invalid topic name
    /// matches nothing.
    pub fn matches(&self, topic: &str) -> Vec<V> {
        let mut out = Vec::new();
        self.matches_into(topic, &mut out);
        out
    }

    /// Like [`TopicTrie::matches`], but appends to `out` (which is not cleared), so that a
    /// caller can reuse one buffer.
    pub fn matches_into(&self, topic: &str, out: &mut Vec<V>) {
        if validate_topic(self.dialect, topic).is_err() {
            return;
        }
        let levels: SmallVec<[&str; 16]> = topic.split(self.dialect.separator()).collect();
        let reserved = self.dialect.is_reserved(topic);
        let min_multi = self.dialect.multi_min_levels();
        let mut stack: SmallVec<[(u32, usize); 16]> = SmallVec::new();
        stack.push((ROOT, 0));
        while let Some((node, depth)) = stack.pop() {
            let n = &self.nodes[node as usize];
            let wildcards = !(reserved && depth == 0);
            let rest = levels.len() - depth;
            if wildcards && rest >= min_multi {
                out.extend_from_slice(&n.multi);
            }
            let Some(level) = levels.get(depth) else {
                out.extend_from_slice(&n.exact);
                continue;
            };
            if let Some(&child) = n.literal.get(*level) {
                stack.push((child, depth + 1));
            }
            if let (true, Some(child)) = (wildcards, n.single) {
                stack.push((child, depth + 1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort_unstable();
        v
    }

    #[test]
    fn mqtt_trie() {
        let mut t = TopicTrie::new(Dialect::Mqtt);
        let filters = [
            "sport/tennis/player1/#",
            "sport/#",
            "+/+",
            "/+",
            "#",
            "$SYS/#",
            "sport/+",
            "+",
        ];
        for (i, f) in filters.iter().enumerate() {
            t.insert(i as u32, TopicFilter::mqtt(f).unwrap()).unwrap();
        }
        assert_eq!(sorted(t.matches("sport/tennis/player1")), [0, 1, 4]);
        assert_eq!(sorted(t.matches("sport")), [1, 4, 7]);
        assert_eq!(sorted(t.matches("sport/")), [1, 2, 4, 6]);
        assert_eq!(sorted(t.matches("/finance")), [2, 3, 4]);
        assert_eq!(sorted(t.matches("$SYS/load")), [5]);
        assert_eq!(sorted(t.matches("$SYS")), [5]);
        assert!(t.matches("sport/+").is_empty());
        assert_eq!(t.remove(1).unwrap().as_str(), "sport/#");
        assert_eq!(sorted(t.matches("sport")), [4, 7]);
        assert!(t.remove(1).is_none());
        // Re-inserting an id replaces its filter.
        t.insert(0, TopicFilter::mqtt("x").unwrap()).unwrap();
        assert_eq!(sorted(t.matches("sport/tennis/player1")), [4]);
        assert_eq!(t.len(), 7);
        for i in 0..8 {
            t.remove(i);
        }
        assert!(t.is_empty());
        assert_eq!(t.nodes.len() - t.free.len(), 1, "every branch is pruned");
    }

    #[test]
    fn nats_trie_and_dialect_mismatch() {
        let mut t = TopicTrie::new(Dialect::Nats);
        t.insert(1, TopicFilter::nats("foo.*.bar").unwrap())
            .unwrap();
        t.insert(2, TopicFilter::nats("foo.>").unwrap()).unwrap();
        t.insert(3, TopicFilter::nats(">").unwrap()).unwrap();
        assert_eq!(sorted(t.matches("foo.x.bar")), [1, 2, 3]);
        assert_eq!(sorted(t.matches("foo")), [3]);
        assert_eq!(sorted(t.matches("$JS.x")), [3]);
        assert!(t.matches("foo..bar").is_empty());
        let err = t.insert(4, TopicFilter::mqtt("a/b").unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "filter `a/b` is a MQTT filter, but this index holds NATS filters"
        );
    }

    #[test]
    fn deep_filters_do_not_recurse() {
        let mut t = TopicTrie::new(Dialect::Mqtt);
        let deep = "+/".repeat(30_000) + "#";
        t.insert(1u8, TopicFilter::mqtt(&deep).unwrap()).unwrap();
        let topic = "a/".repeat(30_001) + "a";
        assert_eq!(t.matches(&topic), [1]);
        let copy = t.clone();
        assert_eq!(copy.matches(&topic), [1]);
        t.remove(1);
        assert!(t.matches(&topic).is_empty());
    }
}
