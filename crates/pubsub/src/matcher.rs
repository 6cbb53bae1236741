//! [`Matcher`]: many content subscriptions, matched with the counting algorithm.
//!
//! Each subscription's predicate is in DNF; each conjunction gets a slot. The atoms that can
//! be indexed are indexed per attribute:
//!
//! * `=` and `IN` in hash maps (numbers by [`NumKey`], so `5` finds `5.0`; strings; booleans),
//! * `<`, `<=`, `>`, `>=` as thresholds in sorted vectors, one per operator and type: the
//!   thresholds a value satisfies are a prefix or a suffix found by binary search,
//! * `PREFIX` in a hash map probed with the value's prefixes of the lengths present,
//! * `EXISTS` in a list.
//!
//! For a record, every indexed attribute is looked up once and the slots of the atoms it
//! satisfies are counted; a conjunction is a candidate when its count reaches its number of
//! counted atoms. The other atoms are the conjunction's residue, evaluated directly on the
//! candidates only: those that cannot be indexed (`!=`, `NOT IN`, `NOT PREFIX`, `SUFFIX`,
//! `CONTAINS`, `NOT EXISTS`), and, in a conjunction that has an `=` or `IN`, everything but
//! its equalities (a range is satisfied by about half the records, so counting it costs a
//! counter update per record while the equality already makes the conjunction a rare
//! candidate). A conjunction with nothing counted is always a candidate. A subscription
//! matches when one of its conjunctions does. Negations need no special case: the DNF has them
//! inside the atoms already (see [`crate::predicate`]).

use std::cmp::Ordering;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::attrs::{AttrRef, Attributes, Num, NumKey};
use crate::predicate::{Atom, CmpOp, Literal, Predicate, StrOp, Test};
use crate::SubId;

/// A conjunction slot.
#[derive(Clone, Debug)]
struct Conj {
    sub: SubId,
    /// The atoms evaluated directly, each with its attribute's id.
    residual: Vec<(u32, Atom)>,
}

#[derive(Clone, Debug)]
struct Entry {
    predicate: Predicate,
    /// The slot of each of the predicate's conjunctions, in order.
    conjs: SmallVec<[u32; 2]>,
}

/// The range operators, as indices into the threshold vectors.
const LT: usize = 0;
const LE: usize = 1;
const GT: usize = 2;
const GE: usize = 3;

/// The index of one attribute's atoms.
#[derive(Clone, Debug, Default)]
struct AttrIndex {
    /// How many atoms are counted here.
    counted: u32,
    eq_num: FxHashMap<NumKey, Vec<u32>>,
    eq_str: FxHashMap<Box<str>, Vec<u32>>,
    eq_bool: [Vec<u32>; 2],
    /// Per range operator.
    num_ranges: [Thresholds<Num>; 4],
    str_ranges: [Thresholds<Box<str>>; 4],
    prefix: FxHashMap<Box<str>, Vec<u32>>,
    /// The distinct prefix lengths in bytes, ascending, with how many prefixes have each.
    prefix_lens: Vec<(usize, u32)>,
    exists: Vec<u32>,
}

/// Thresholds are literals, which are never NaN, so this order is total on them.
fn num_order(a: &Num, b: &Num) -> Ordering {
    a.cmp(*b).unwrap_or(Ordering::Equal)
}

fn edit_list(list: &mut Vec<u32>, slot: u32, add: bool) {
    if add {
        list.push(slot);
    } else if let Some(i) = list.iter().position(|&s| s == slot) {
        list.swap_remove(i);
    }
}

fn edit_map<K: std::hash::Hash + Eq>(
    map: &mut FxHashMap<K, Vec<u32>>,
    key: K,
    slot: u32,
    add: bool,
) {
    if add {
        map.entry(key).or_default().push(slot);
    } else if let Some(list) = map.get_mut(&key) {
        edit_list(list, slot, false);
        if list.is_empty() {
            map.remove(&key);
        }
    }
}

/// Range thresholds, ascending, with the slot of each in a parallel vector: the slots that a
/// value satisfies are one contiguous run of `slots`, counted without touching `keys`.
#[derive(Clone, Debug)]
struct Thresholds<T> {
    keys: Vec<T>,
    slots: Vec<u32>,
}

impl<T> Default for Thresholds<T> {
    fn default() -> Self {
        Thresholds {
            keys: Vec::new(),
            slots: Vec::new(),
        }
    }
}

impl<T> Thresholds<T> {
    fn edit(&mut self, t: T, slot: u32, add: bool, order: impl Fn(&T, &T) -> Ordering) {
        let start = self.keys.partition_point(|c| order(c, &t).is_lt());
        if add {
            self.keys.insert(start, t);
            self.slots.insert(start, slot);
        } else if let Some(i) = (start..self.keys.len())
            .take_while(|&i| order(&self.keys[i], &t).is_eq())
            .find(|&i| self.slots[i] == slot)
        {
            self.keys.remove(i);
            self.slots.remove(i);
        }
    }

    /// How many thresholds `t` satisfy `pred`, which holds for a prefix of them.
    fn count_while(&self, pred: impl Fn(&T) -> bool) -> usize {
        self.keys.partition_point(pred)
    }
}

/// Whether the counting index can take `atom` (otherwise it is evaluated directly).
fn indexable(atom: &Atom) -> bool {
    !atom.negated && !matches!(atom.test, Test::Str(StrOp::Suffix | StrOp::Contains, _))
}

/// Whether `atom` is an equality (`=` or `IN`), found by one hash probe per record.
fn is_equality(atom: &Atom) -> bool {
    !atom.negated && matches!(atom.test, Test::Cmp(CmpOp::Eq, _) | Test::In(_))
}

/// Which of a conjunction's atoms are counted. If it has an equality, only its equalities
/// are: the others (ranges above all, which a record satisfies by the thousand) are checked
/// directly on the few conjunctions whose equalities all hold. Otherwise every indexable
/// atom is counted.
fn counted(atoms: &[Atom]) -> impl Fn(&Atom) -> bool {
    let by_equality = atoms.iter().any(is_equality);
    move |a| {
        if by_equality {
            is_equality(a)
        } else {
            indexable(a)
        }
    }
}

impl AttrIndex {
    /// Adds or removes an indexable atom's slot.
    fn edit(&mut self, test: &Test, slot: u32, add: bool) {
        match test {
            Test::Cmp(op, lit) => match (range_index(*op), lit) {
                (None, lit) => self.edit_eq(lit, slot, add),
                (Some(i), Literal::Num(n)) => self.num_ranges[i].edit(*n, slot, add, num_order),
                (Some(i), Literal::Str(s)) => {
                    self.str_ranges[i].edit(s.clone(), slot, add, |a, b| a.cmp(b))
                }
                (Some(_), Literal::Bool(_)) => {
                    debug_assert!(false, "the parser rejects ordering booleans")
                }
            },
            Test::In(list) => {
                for lit in list {
                    self.edit_eq(lit, slot, add);
                }
            }
            Test::Str(_, p) => {
                edit_map(&mut self.prefix, p.clone(), slot, add);
                let at = self.prefix_lens.partition_point(|(l, _)| *l < p.len());
                match self.prefix_lens.get_mut(at) {
                    Some((l, n)) if *l == p.len() => {
                        if add {
                            *n += 1;
                        } else {
                            *n -= 1;
                            if *n == 0 {
                                self.prefix_lens.remove(at);
                            }
                        }
                    }
                    _ if add => self.prefix_lens.insert(at, (p.len(), 1)),
                    _ => {}
                }
            }
            Test::Exists => edit_list(&mut self.exists, slot, add),
        }
        if add {
            self.counted += 1;
        } else {
            self.counted -= 1;
        }
    }

    fn edit_eq(&mut self, lit: &Literal, slot: u32, add: bool) {
        match lit {
            Literal::Num(n) => {
                let key = n.key().expect("literals are never NaN");
                edit_map(&mut self.eq_num, key, slot, add);
            }
            Literal::Str(s) => edit_map(&mut self.eq_str, s.clone(), slot, add),
            Literal::Bool(b) => edit_list(&mut self.eq_bool[usize::from(*b)], slot, add),
        }
    }

    /// Counts the slots of the atoms that `v` satisfies.
    fn count(&self, v: AttrRef<'_>, c: &mut Counters) {
        c.bump(&self.exists);
        match v {
            AttrRef::Bool(b) => c.bump(&self.eq_bool[usize::from(b)]),
            AttrRef::Str(s) => {
                if let Some(slots) = self.eq_str.get(s) {
                    c.bump(slots);
                }
                count_ranges(&self.str_ranges, c, |t| &**t < s, |t| &**t <= s);
                for &(len, _) in &self.prefix_lens {
                    if len > s.len() {
                        break;
                    }
                    if let Some(slots) = s.get(..len).and_then(|p| self.prefix.get(p)) {
                        c.bump(slots);
                    }
                }
            }
            AttrRef::Int(_) | AttrRef::Float(_) => {
                let Some(n) = v.num() else { return };
                // NaN compares with nothing.
                let Some(key) = n.key() else { return };
                if let Some(slots) = self.eq_num.get(&key) {
                    c.bump(slots);
                }
                count_ranges(
                    &self.num_ranges,
                    c,
                    |t| num_order(t, &n).is_lt(),
                    |t| num_order(t, &n).is_le(),
                );
            }
        }
    }
}

fn range_index(op: CmpOp) -> Option<usize> {
    match op {
        CmpOp::Eq => None,
        CmpOp::Lt => Some(LT),
        CmpOp::Le => Some(LE),
        CmpOp::Gt => Some(GT),
        CmpOp::Ge => Some(GE),
    }
}

/// Counts the thresholds `v` satisfies, given `below(t)` = `t < v` and `at_most(t)` = `t <= v`.
fn count_ranges<T>(
    lists: &[Thresholds<T>; 4],
    c: &mut Counters,
    below: impl Fn(&T) -> bool,
    at_most: impl Fn(&T) -> bool,
) {
    let [lt, le, gt, ge] = lists;
    c.bump(&lt.slots[lt.count_while(&at_most)..]);
    c.bump(&le.slots[le.count_while(&below)..]);
    c.bump(&gt.slots[..gt.count_while(&below)]);
    c.bump(&ge.slots[..ge.count_while(&at_most)]);
}

/// A slot's counter: the epoch it was last counted in, its count in that epoch, and the
/// count at which its conjunction is complete (its number of counted atoms). One 12-byte
/// entry, so that a count is one memory access.
#[derive(Clone, Copy, Debug, Default)]
struct Counter {
    epoch: u32,
    count: u32,
    need: u32,
}

/// Per-slot counters, reset by bumping an epoch instead of clearing. A slot whose count
/// reaches its `need` is pushed to `complete`.
#[derive(Clone, Debug, Default)]
struct Counters {
    epoch: u32,
    slots: Vec<Counter>,
    complete: Vec<u32>,
}

impl Counters {
    fn start(&mut self) {
        self.complete.clear();
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.slots.iter_mut().for_each(|c| c.epoch = 0);
            self.epoch = 1;
        }
    }

    fn bump(&mut self, slots: &[u32]) {
        let epoch = self.epoch;
        for &s in slots {
            let c = &mut self.slots[s as usize];
            c.count = if c.epoch == epoch { c.count + 1 } else { 1 };
            c.epoch = epoch;
            if c.count == c.need {
                self.complete.push(s);
            }
        }
    }
}

/// An attribute mentioned by `uses` atoms (counted or residual); at zero its id is free.
#[derive(Clone, Debug, Default)]
struct Attr {
    name: Box<str>,
    uses: u32,
    index: AttrIndex,
}

/// Content subscriptions by id, matched with the counting algorithm (see the module docs).
///
/// Matching takes `&mut self` because it reuses the counters and buffers held inside, so that
/// a record allocates nothing once the matcher is warm.
#[derive(Clone, Debug, Default)]
pub struct Matcher {
    subs: FxHashMap<SubId, Entry>,
    conjs: Vec<Conj>,
    free: Vec<u32>,
    /// Every attribute that some atom mentions, by id: a record's value of each is looked up
    /// once per match, counted, and kept for the residues.
    attrs: Vec<Attr>,
    attr_ids: FxHashMap<Box<str>, u32>,
    free_attrs: Vec<u32>,
    /// Slots with no counted atom.
    always: Vec<u32>,
    counters: Counters,
}

impl Matcher {
    /// An empty matcher.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many subscriptions are held.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    /// Whether no subscription is held.
    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// The predicate of `id`.
    pub fn get(&self, id: SubId) -> Option<&Predicate> {
        self.subs.get(&id).map(|e| &e.predicate)
    }

    /// The `(id, predicate)` pairs held, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (SubId, &Predicate)> + '_ {
        self.subs.iter().map(|(id, e)| (*id, &e.predicate))
    }

    /// Subscribes `id` with `predicate`, replacing and returning its previous predicate.
    pub fn insert(&mut self, id: SubId, predicate: Predicate) -> Option<Predicate> {
        let previous = self.remove(id);
        let conjs = predicate
            .dnf()
            .iter()
            .map(|atoms| self.add_conj(id, atoms))
            .collect();
        self.subs.insert(id, Entry { predicate, conjs });
        previous
    }

    /// Unsubscribes `id`, returning its predicate.
    pub fn remove(&mut self, id: SubId) -> Option<Predicate> {
        let entry = self.subs.remove(&id)?;
        for (atoms, &slot) in entry.predicate.dnf().iter().zip(&entry.conjs) {
            let counted = counted(atoms);
            for atom in atoms {
                let attr = *self
                    .attr_ids
                    .get(&atom.attr)
                    .expect("a mentioned attribute has an id");
                if counted(atom) {
                    self.attrs[attr as usize]
                        .index
                        .edit(&atom.test, slot, false);
                }
                self.release_attr(attr);
            }
            if self.counters.slots[slot as usize].need == 0 {
                edit_list(&mut self.always, slot, false);
            }
            self.conjs[slot as usize].residual = Vec::new();
            self.free.push(slot);
        }
        Some(entry.predicate)
    }

    fn acquire_attr(&mut self, name: &str) -> u32 {
        let id = match self.attr_ids.get(name) {
            Some(&id) => id,
            None => {
                let id = match self.free_attrs.pop() {
                    Some(id) => id,
                    None => {
                        self.attrs.push(Attr::default());
                        u32::try_from(self.attrs.len() - 1).expect("fewer than 2^32 attributes")
                    }
                };
                self.attrs[id as usize].name = name.into();
                self.attr_ids.insert(name.into(), id);
                id
            }
        };
        self.attrs[id as usize].uses += 1;
        id
    }

    fn release_attr(&mut self, id: u32) {
        let attr = &mut self.attrs[id as usize];
        attr.uses -= 1;
        if attr.uses == 0 {
            debug_assert_eq!(attr.index.counted, 0);
            self.attr_ids.remove(&attr.name);
            *attr = Attr::default();
            self.free_attrs.push(id);
        }
    }

    fn add_conj(&mut self, sub: SubId, atoms: &[Atom]) -> u32 {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.conjs.push(Conj {
                    sub,
                    residual: Vec::new(),
                });
                self.counters.slots.push(Counter::default());
                u32::try_from(self.conjs.len() - 1).expect("fewer than 2^32 conjunctions")
            }
        };
        let mut need = 0;
        let mut residual = Vec::new();
        let counted = counted(atoms);
        for atom in atoms {
            let attr = self.acquire_attr(&atom.attr);
            if counted(atom) {
                self.attrs[attr as usize].index.edit(&atom.test, slot, true);
                need += 1;
            } else {
                residual.push((attr, atom.clone()));
            }
        }
        if need == 0 {
            self.always.push(slot);
        }
        self.conjs[slot as usize] = Conj { sub, residual };
        self.counters.slots[slot as usize].need = need;
        slot
    }

    /// The ids of the subscriptions that `attrs` matches, ascending.
    pub fn matches<A: Attributes + ?Sized>(&mut self, attrs: &A) -> Vec<SubId> {
        let mut out = Vec::new();
        self.matches_into(attrs, &mut out);
        out
    }

    /// Like [`Matcher::matches`], into `out` (cleared first), to reuse one buffer.
    pub fn matches_into<A: Attributes + ?Sized>(&mut self, attrs: &A, out: &mut Vec<SubId>) {
        self.match_dyn(&attrs, out);
    }

    fn match_dyn(&mut self, attrs: &dyn Attributes, out: &mut Vec<SubId>) {
        out.clear();
        let c = &mut self.counters;
        c.start();
        let values: SmallVec<[Option<AttrRef<'_>>; 16]> = self
            .attrs
            .iter()
            .map(|a| if a.uses > 0 { attrs.get(&a.name) } else { None })
            .collect();
        for (attr, v) in self.attrs.iter().zip(&values) {
            if let (Some(v), true) = (v, attr.index.counted > 0) {
                attr.index.count(*v, c);
            }
        }
        for &slot in c.complete.iter().chain(&self.always) {
            let conj = &self.conjs[slot as usize];
            if conj
                .residual
                .iter()
                .all(|(attr, a)| a.truth(values[*attr as usize]) == Some(true))
            {
                out.push(conj.sub);
            }
        }
        out.sort_unstable();
        out.dedup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn matcher(preds: &[&str]) -> Matcher {
        let mut m = Matcher::new();
        for (i, p) in preds.iter().enumerate() {
            m.insert(SubId(i as u64), Predicate::parse(p).unwrap());
        }
        m
    }

    fn ids(v: Vec<SubId>) -> Vec<u64> {
        v.into_iter().map(|s| s.0).collect()
    }

    #[test]
    fn counting_matches_each_kind() {
        let mut m = matcher(&[
            "class = 'stock' AND price > 100",         // 0
            "price <= 100",                            // 1
            "symbol IN ('IBM', 'MSFT')",               // 2
            "symbol PREFIX 'IB'",                      // 3
            "NOT EXISTS volume",                       // 4: always a candidate
            "class != 'stock'",                        // 5: residual only
            "price >= 120.5 OR price < 0",             // 6
            "EXISTS symbol AND symbol NOT PREFIX 'M'", // 7: indexed + residual
            "flag = true",                             // 8
            "price = 120",                             // 9
        ]);
        let r = json!({"class": "stock", "price": 120.0, "symbol": "IBM", "flag": true});
        assert_eq!(ids(m.matches(&r)), [0, 2, 3, 4, 7, 8, 9]);
        let r = json!({"class": "bond", "price": 99, "symbol": "MSFT", "volume": 1});
        assert_eq!(ids(m.matches(&r)), [1, 2, 5]);
        let r = json!({"price": -1});
        assert_eq!(ids(m.matches(&r)), [1, 4, 6]);
        assert_eq!(ids(m.matches(&json!({"price": "x"}))), [4]);
        m.remove(SubId(4));
        m.remove(SubId(1));
        assert_eq!(ids(m.matches(&json!({"price": -1}))), [6]);
        assert_eq!(m.len(), 8);
        for i in 0..10 {
            m.remove(SubId(i));
        }
        assert!(m.attr_ids.is_empty() && m.always.is_empty() && m.is_empty());
        assert!(m.attrs.iter().all(|a| a.uses == 0 && a.index.counted == 0));
    }

    #[test]
    fn a_subscription_matches_once_and_slots_are_reused() {
        let mut m = matcher(&["a = 1 OR a < 5 OR EXISTS a"]);
        assert_eq!(ids(m.matches(&json!({"a": 1}))), [0]);
        m.insert(SubId(0), Predicate::parse("a = 2").unwrap());
        assert_eq!(m.conjs.len(), 3);
        assert!(m.matches(&json!({"a": 1})).is_empty());
        assert_eq!(ids(m.matches(&json!({"a": 2}))), [0]);
    }

    #[test]
    fn ranges_on_equal_thresholds_and_strings() {
        let mut m = matcher(&[
            "a > 5", "a >= 5", "a < 5", "a <= 5", "a > 5", "s < 'm'", "s >= 'm'",
        ]);
        assert_eq!(ids(m.matches(&json!({"a": 5}))), [1, 3]);
        assert_eq!(ids(m.matches(&json!({"a": 5.5}))), [0, 1, 4]);
        assert_eq!(ids(m.matches(&json!({"a": 4}))), [2, 3]);
        assert_eq!(ids(m.matches(&json!({"s": "l"}))), [5]);
        assert_eq!(ids(m.matches(&json!({"s": "m"}))), [6]);
        m.remove(SubId(0));
        assert_eq!(ids(m.matches(&json!({"a": 6}))), [1, 4]);
    }

    #[test]
    fn prefixes_respect_char_boundaries() {
        let mut m = matcher(&["s PREFIX 'é'", "s PREFIX ''", "s PREFIX 'a'"]);
        assert_eq!(ids(m.matches(&json!({"s": "été"}))), [0, 1]);
        assert_eq!(ids(m.matches(&json!({"s": "a"}))), [1, 2]);
        m.remove(SubId(1));
        assert_eq!(ids(m.matches(&json!({"s": "b"}))), Vec::<u64>::new());
    }
}
