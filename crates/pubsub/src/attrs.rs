//! Records as seen by content predicates: a lookup from attribute name to a scalar value.
//!
//! [`Attributes`] is the one thing the predicates and the matcher need from a record, so the
//! engine can adapt its own rows without copying them. It is implemented here for JSON objects
//! (`serde_json::Value` and `serde_json::Map`, where a dotted name such as `quote.price` also
//! reaches into nested objects), and for maps of [`AttrValue`].
//!
//! Only scalars are attributes: JSON `null`, arrays and objects are reported as absent.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use serde::{Deserialize, Serialize};

/// A borrowed attribute value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AttrRef<'a> {
    /// A signed integer.
    Int(i64),
    /// A float; it compares with integers by value (`5 = 5.0`). NaN compares with nothing.
    Float(f64),
    /// A string; strings compare by bytes.
    Str(&'a str),
    /// A boolean; booleans only compare for equality.
    Bool(bool),
}

/// An owned attribute value. Serialized untagged: `5`, `5.5`, `"x"`, `true`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AttrValue {
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
}

impl AttrValue {
    /// Borrows the value.
    pub fn as_attr(&self) -> AttrRef<'_> {
        match self {
            AttrValue::Bool(b) => AttrRef::Bool(*b),
            AttrValue::Int(i) => AttrRef::Int(*i),
            AttrValue::Float(f) => AttrRef::Float(*f),
            AttrValue::Str(s) => AttrRef::Str(s),
        }
    }
}

impl From<i64> for AttrValue {
    fn from(v: i64) -> Self {
        AttrValue::Int(v)
    }
}
impl From<f64> for AttrValue {
    fn from(v: f64) -> Self {
        AttrValue::Float(v)
    }
}
impl From<bool> for AttrValue {
    fn from(v: bool) -> Self {
        AttrValue::Bool(v)
    }
}
impl From<&str> for AttrValue {
    fn from(v: &str) -> Self {
        AttrValue::Str(v.to_owned())
    }
}
impl From<String> for AttrValue {
    fn from(v: String) -> Self {
        AttrValue::Str(v)
    }
}

/// A record's attributes, by name.
pub trait Attributes {
    /// The value of attribute `name`, or `None` if the record lacks it (or it is not a scalar).
    fn get(&self, name: &str) -> Option<AttrRef<'_>>;
}

impl<T: Attributes + ?Sized> Attributes for &T {
    fn get(&self, name: &str) -> Option<AttrRef<'_>> {
        (**self).get(name)
    }
}

impl<S: BuildHasher> Attributes for HashMap<String, AttrValue, S> {
    fn get(&self, name: &str) -> Option<AttrRef<'_>> {
        HashMap::get(self, name).map(AttrValue::as_attr)
    }
}

impl Attributes for BTreeMap<String, AttrValue> {
    fn get(&self, name: &str) -> Option<AttrRef<'_>> {
        BTreeMap::get(self, name).map(AttrValue::as_attr)
    }
}

impl Attributes for [(&str, AttrValue)] {
    fn get(&self, name: &str) -> Option<AttrRef<'_>> {
        self.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_attr())
    }
}

fn json_scalar(v: &serde_json::Value) -> Option<AttrRef<'_>> {
    use serde_json::Value;
    match v {
        Value::Bool(b) => Some(AttrRef::Bool(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Some(AttrRef::Int(i)),
            None => n.as_f64().map(AttrRef::Float),
        },
        Value::String(s) => Some(AttrRef::Str(s)),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

impl Attributes for serde_json::Map<String, serde_json::Value> {
    /// A top-level key first; failing that, a dotted name walks nested objects.
    fn get(&self, name: &str) -> Option<AttrRef<'_>> {
        if let Some(v) = serde_json::Map::get(self, name) {
            return json_scalar(v);
        }
        let (head, rest) = name.split_once('.')?;
        match serde_json::Map::get(self, head)? {
            serde_json::Value::Object(inner) => Attributes::get(inner, rest),
            _ => None,
        }
    }
}

impl Attributes for serde_json::Value {
    /// An object's attributes; any other JSON value has none.
    fn get(&self, name: &str) -> Option<AttrRef<'_>> {
        match self {
            serde_json::Value::Object(map) => Attributes::get(map, name),
            _ => None,
        }
    }
}

/// A number, for comparisons across integers and floats.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

/// 2^63 as a float: the first float above every `i64`.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// Compares an integer with a float exactly (no rounding of the integer); `None` for NaN.
fn cmp_int_float(i: i64, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    if f >= TWO_POW_63 {
        return Some(Ordering::Less);
    }
    if f < -TWO_POW_63 {
        return Some(Ordering::Greater);
    }
    let whole = f.trunc();
    // `whole` is in [-2^63, 2^63), so the cast is exact.
    Some(match i.cmp(&(whole as i64)) {
        Ordering::Equal => 0.0f64.partial_cmp(&(f - whole))?,
        o => o,
    })
}

impl Num {
    /// The exact order of two numbers, `None` if either is NaN.
    pub(crate) fn cmp(self, other: Num) -> Option<Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
            (Num::Float(a), Num::Float(b)) => a.partial_cmp(&b),
            (Num::Int(a), Num::Float(b)) => cmp_int_float(a, b),
            (Num::Float(a), Num::Int(b)) => cmp_int_float(b, a).map(Ordering::reverse),
        }
    }

    /// A hash key such that two numbers have the same key exactly when they compare equal:
    /// integral floats in `i64` range become integers, `-0.0` becomes `0`. `None` for NaN.
    pub(crate) fn key(self) -> Option<NumKey> {
        match self {
            Num::Int(i) => Some(NumKey::Int(i)),
            Num::Float(f) if f.is_nan() => None,
            Num::Float(f) if f.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&f) => {
                Some(NumKey::Int(f as i64))
            }
            Num::Float(f) => Some(NumKey::Float(f.to_bits())),
        }
    }
}

/// See [`Num::key`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NumKey {
    Int(i64),
    Float(u64),
}

impl AttrRef<'_> {
    pub(crate) fn num(self) -> Option<Num> {
        match self {
            AttrRef::Int(i) => Some(Num::Int(i)),
            AttrRef::Float(f) => Some(Num::Float(f)),
            AttrRef::Str(_) | AttrRef::Bool(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int_float_comparison_is_exact() {
        let c = |a: Num, b: Num| a.cmp(b);
        assert_eq!(c(Num::Int(5), Num::Float(5.0)), Some(Ordering::Equal));
        assert_eq!(c(Num::Int(5), Num::Float(5.5)), Some(Ordering::Less));
        assert_eq!(c(Num::Int(-5), Num::Float(-5.5)), Some(Ordering::Greater));
        assert_eq!(c(Num::Float(-5.5), Num::Int(-5)), Some(Ordering::Less));
        // 2^53 + 1 is not a float; it must not compare equal to 2^53.
        let big = (1i64 << 53) + 1;
        assert_eq!(
            c(Num::Int(big), Num::Float((1i64 << 53) as f64)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            c(Num::Int(i64::MAX), Num::Float(TWO_POW_63)),
            Some(Ordering::Less)
        );
        assert_eq!(
            c(Num::Int(i64::MIN), Num::Float(-TWO_POW_63)),
            Some(Ordering::Equal)
        );
        assert_eq!(c(Num::Int(0), Num::Float(f64::NAN)), None);
        assert_eq!(
            c(Num::Int(0), Num::Float(f64::NEG_INFINITY)),
            Some(Ordering::Greater)
        );
        assert_eq!(Num::Float(-0.0).key(), Num::Int(0).key());
        assert_eq!(Num::Float(7.0).key(), Num::Int(7).key());
        assert_ne!(Num::Float(7.5).key(), Num::Int(7).key());
        assert_eq!(Num::Float(f64::NAN).key(), None);
    }

    #[test]
    fn json_attributes() {
        let v = json!({"a": 1, "b": 2.5, "s": "x", "t": true, "n": null, "o": {"p": {"q": 3}}, "o.p": 4, "l": [1]});
        assert_eq!(Attributes::get(&v, "a"), Some(AttrRef::Int(1)));
        assert_eq!(Attributes::get(&v, "b"), Some(AttrRef::Float(2.5)));
        assert_eq!(Attributes::get(&v, "s"), Some(AttrRef::Str("x")));
        assert_eq!(Attributes::get(&v, "t"), Some(AttrRef::Bool(true)));
        assert_eq!(Attributes::get(&v, "n"), None);
        assert_eq!(Attributes::get(&v, "l"), None);
        assert_eq!(Attributes::get(&v, "o"), None);
        assert_eq!(Attributes::get(&v, "o.p.q"), Some(AttrRef::Int(3)));
        assert_eq!(
            Attributes::get(&v, "o.p"),
            Some(AttrRef::Int(4)),
            "a literal key wins"
        );
        assert_eq!(Attributes::get(&v, "missing.x"), None);
        assert_eq!(Attributes::get(&json!([1]), "a"), None);
        let big = json!({"u": u64::MAX});
        assert_eq!(
            Attributes::get(&big, "u"),
            Some(AttrRef::Float(u64::MAX as f64))
        );
    }

    #[test]
    fn map_attributes() {
        let m: HashMap<String, AttrValue> =
            serde_json::from_str(r#"{"a": 1, "b": 1.5, "c": "x", "d": false}"#).unwrap();
        assert_eq!(Attributes::get(&m, "a"), Some(AttrRef::Int(1)));
        assert_eq!(Attributes::get(&m, "b"), Some(AttrRef::Float(1.5)));
        assert_eq!(Attributes::get(&m, "c"), Some(AttrRef::Str("x")));
        assert_eq!(Attributes::get(&m, "d"), Some(AttrRef::Bool(false)));
        let pairs: &[(&str, AttrValue)] = &[("a", 1i64.into())];
        assert_eq!(Attributes::get(pairs, "a"), Some(AttrRef::Int(1)));
    }
}
