//! The dynamic record: a JSON-like value that can also cross process boundaries.
//!
//! Jobs whose schema is only known at run time (JSON files read without a Rust type, and
//! later Python and SQL jobs) carry [`Value`]s. `serde_json::Value` cannot be used for that:
//! between processes records travel as bincode, which is not self-describing. So `Value`
//! serializes in two shapes: as plain JSON for human-readable formats (JSON files, stdout), and
//! as a tagged enum for compact binary formats (exchange, state snapshots).

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, Serializer};

/// A dynamic, JSON-like record.
#[derive(Debug, Clone, Default)]
pub enum Value {
    /// JSON `null`.
    #[default]
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    List(Vec<Value>),
    /// An object, with keys in sorted order.
    Map(BTreeMap<String, Value>),
}

impl Value {
    /// The field `name` of an object, or `None` (also for non-objects).
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Map(m) => m.get(name),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The number as a float, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            // Bitwise, so that `Eq` and `Hash` agree (NaN equals itself, 0.0 differs from -0.0).
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::List(a), Value::List(b)) => a == b,
            (Value::Map(a), Value::Map(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Value::Null => {}
            Value::Bool(b) => b.hash(state),
            Value::Int(i) => i.hash(state),
            Value::Float(f) => f.to_bits().hash(state),
            Value::Str(s) => s.hash(state),
            Value::List(l) => l.hash(state),
            Value::Map(m) => m.hash(state),
        }
    }
}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => Value::Str(s),
            serde_json::Value::Array(a) => Value::List(a.into_iter().map(Value::from).collect()),
            serde_json::Value::Object(o) => {
                Value::Map(o.into_iter().map(|(k, v)| (k, Value::from(v))).collect())
            }
        }
    }
}

impl From<Value> for serde_json::Value {
    fn from(v: Value) -> Self {
        match v {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(b),
            Value::Int(i) => serde_json::Value::from(i),
            Value::Float(f) => serde_json::Number::from_f64(f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Str(s) => serde_json::Value::String(s),
            Value::List(l) => serde_json::Value::Array(l.into_iter().map(Into::into).collect()),
            Value::Map(m) => {
                serde_json::Value::Object(m.into_iter().map(|(k, v)| (k, v.into())).collect())
            }
        }
    }
}

macro_rules! from_scalar {
    ($($t:ty => $variant:ident as $conv:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Self { Value::$variant(<$conv>::from(v)) }
        }
    )*};
}
from_scalar!(bool => Bool as bool, i32 => Int as i64, i64 => Int as i64, u32 => Int as i64,
             f64 => Float as f64, String => Str as String, &str => Str as String);

impl fmt::Display for Value {
    /// Formats as compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => Err(fmt::Error),
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            match self {
                Value::Null => s.serialize_unit(),
                Value::Bool(b) => s.serialize_bool(*b),
                Value::Int(i) => s.serialize_i64(*i),
                Value::Float(f) => s.serialize_f64(*f),
                Value::Str(v) => s.serialize_str(v),
                Value::List(l) => l.serialize(s),
                Value::Map(m) => m.serialize(s),
            }
        } else {
            match self {
                Value::Null => s.serialize_unit_variant("Value", 0, "Null"),
                Value::Bool(b) => s.serialize_newtype_variant("Value", 1, "Bool", b),
                Value::Int(i) => s.serialize_newtype_variant("Value", 2, "Int", i),
                Value::Float(f) => s.serialize_newtype_variant("Value", 3, "Float", f),
                Value::Str(v) => s.serialize_newtype_variant("Value", 4, "Str", v),
                Value::List(l) => s.serialize_newtype_variant("Value", 5, "List", l),
                Value::Map(m) => s.serialize_newtype_variant("Value", 6, "Map", m),
            }
        }
    }
}

/// The compact (binary) shape of [`Value`]; its variant order is the wire format.
#[derive(serde::Deserialize)]
#[serde(rename = "Value")]
enum Compact {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    Map(BTreeMap<String, Value>),
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            serde_json::Value::deserialize(d).map(Value::from)
        } else {
            Ok(match Compact::deserialize(d)? {
                Compact::Null => Value::Null,
                Compact::Bool(b) => Value::Bool(b),
                Compact::Int(i) => Value::Int(i),
                Compact::Float(f) => Value::Float(f),
                Compact::Str(s) => Value::Str(s),
                Compact::List(l) => Value::List(l),
                Compact::Map(m) => Value::Map(m),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_is_plain_json() {
        let text = r#"{"a":1,"b":[true,null,2.5,"x"],"c":{"d":-7}}"#;
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(v.get("a").and_then(Value::as_i64), Some(1));
        assert_eq!(serde_json::to_string(&v).unwrap(), text);
    }
}
