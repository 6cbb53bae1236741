//! General JSON decoding of one line: into any serde type, or into a [`Row`] of a declared
//! [`Schema`].
//!
//! Both paths read JSON objects with fields in any order and any whitespace, decode escapes
//! (`\uXXXX` surrogate pairs too), and skip fields they do not take without building them
//! (they are still checked to be valid JSON): a type or schema with fewer fields than the
//! data is a projection.
//!
//! # How
//!
//! Lines are parsed by this module's own `serde` deserializer ([`de`]): general (the whole
//! serde data model, as `serde_json` maps it), and measured faster than `serde_json` and
//! `sonic-rs` on Nexmark lines (see BENCHMARKS.md, "General JSON decoding"). It accepts
//! exactly the texts `serde_json::from_str` accepts, and gives the same values, with one
//! difference, where it is the one that is right:
//!
//! * floats are correctly rounded (`str::parse::<f64>`); `serde_json`'s default parser is off
//!   by a unit or a few in the last place on some inputs (such as `2.2250738585072011e-308`,
//!   or `1.0251341954610321e121`, which the property tests found).
//!
//! A line it rejects is decoded again by `serde_json` ([`decode_reference`]), which gives the
//! reason of the rejection in its wording (serde's for type errors), with its column; so the
//! reasons of bad records are `serde_json`'s, and the second parse is paid by bad lines only.
//!
//! Both reject invalid UTF-8 anywhere in the line (also in skipped fields), control
//! characters in strings, invalid escapes, trailing characters after the value, trailing
//! commas, `NaN` and numbers out of a float's range; both accept lone surrogates (`\ud800`)
//! in skipped strings and reject them in strings they decode; both refuse to build values
//! nested deeper than 127 levels, and skip values of any depth (without recursion). A key
//! given twice is the type's business: serde's derived structs reject it (`duplicate
//! field`), maps and [`Value`] keep the last one, and so does the schema path.
//!
//! [`decode_json_prefix`] decodes the value at the start of a text that goes on past the
//! line (the JSON-lines source's fast path: no search for the line end first).
//!
//! # The schema path
//!
//! [`RowDecoder`] decodes a line into a [`Row`] of a [`Schema`]: the line must be an object;
//! each declared field is taken from the key of its name (compared exactly, after unescaping),
//! checked against its type and converted to the type's [`Value`] (see [`spate_types::row`]);
//! undeclared keys are skipped. A field that is missing or `null` is [`Value::Null`] when it
//! is nullable (Flink's JSON format reads a missing field as `null` too) and a bad record when
//! it is not. There is no silent conversion: a string is not a number, a float is not an
//! integer (an integer is a float, though), and a timestamp is a
//! `YYYY-MM-DD HH:MM:SS[.fff]` string or integer epoch milliseconds.

pub mod de;

#[cfg(test)]
mod proptests;

use std::fmt;
use std::sync::Arc;

use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use spate_types::{DataType, Row, Schema, Value};

pub use de::{from_slice, Deserializer, Error};

/// Decodes `line` into `T` with [`de`]; a line it rejects goes to `serde_json` for the
/// reason ([`decode_reference`]).
pub(crate) fn decode<T: DeserializeOwned>(line: &[u8]) -> Result<T, String> {
    match de::from_slice(line) {
        Ok(record) => Ok(record),
        Err(_) => decode_reference(line),
    }
}

/// Decodes one JSON value from the start of `text`, a line start, where the text goes on past
/// the line's end: returns the value and the number of bytes consumed, up to and including
/// the line's `\n`. `None` when the value does not end its line (only spaces, tabs or `\r`
/// may follow it before the `\n`; a value that goes on past the `\n`, a line without `\n`
/// in `text`, and a blank line are `None` too), or the line is not valid JSON of a `T`: the
/// line then goes the line decoder's way ([`decode_json_line`](super::decode_json_line)),
/// which says why. Whatever it returns, the line decoder returns for the same line.
///
/// ```
/// # use spate_connectors::files::json::decode_json_prefix;
/// let text = b"{\"a\":1} \n{\"a\":2}\n";
/// let (v, n): (serde_json::Value, usize) = decode_json_prefix(text).unwrap();
/// assert_eq!((v["a"].as_i64(), n), (Some(1), 9));
/// assert!(decode_json_prefix::<serde_json::Value>(b"{\"a\":\n1}\n").is_none());
/// ```
#[inline]
pub fn decode_json_prefix<T: DeserializeOwned>(text: &[u8]) -> Option<(T, usize)> {
    de::from_line_prefix(text)
}

/// Decodes `line` into `T` with `serde_json` alone: the reference that
/// [`decode_json_line`](super::decode_json_line) falls back to for the reason of a bad line.
pub fn decode_reference<T: DeserializeOwned>(line: &[u8]) -> Result<T, String> {
    let text = std::str::from_utf8(line).map_err(|e| format!("invalid UTF-8: {e}"))?;
    serde_json::from_str(text).map_err(|e| json_reason(&e))
}

/// A `serde_json` error without its "at line 1" (the line is always 1 within one line).
fn json_reason(err: &serde_json::Error) -> String {
    let msg = err.to_string();
    match msg.rfind(" at line ") {
        Some(at) if err.line() > 0 => format!("{} at column {}", &msg[..at], err.column()),
        _ => msg,
    }
}

/// Decodes JSON lines into [`Row`]s of a [`Schema`] (see the [module docs](self)).
///
/// Cheap to clone: the schema, prepared once, is shared.
///
/// ```
/// # use spate_connectors::files::json::RowDecoder;
/// # use spate_types::{DataType, Field, Row, Schema, Value};
/// let schema = Schema::new(vec![
///     Field::not_null("auction", DataType::Int64),
///     Field::new("dateTime", DataType::Timestamp),
/// ]);
/// let decoder = RowDecoder::new(&schema);
/// let row = decoder
///     .decode(br#"{"price":7, "dateTime":"1970-01-01 00:00:01.500", "auction":3}"#)
///     .unwrap();
/// assert_eq!(row, Row(vec![Value::Int(3), Value::Int(1500)]));
/// assert_eq!(
///     decoder.decode(br#"{"price":7}"#).unwrap_err(),
///     "missing field `auction` at column 11"
/// );
/// ```
pub struct RowDecoder<B: RowBuilder = Values> {
    root: Arc<Prepared<B>>,
}

impl<B: RowBuilder> Clone for RowDecoder<B> {
    fn clone(&self) -> Self {
        RowDecoder {
            root: Arc::clone(&self.root),
        }
    }
}

/// What the schema path builds: the values of a field type, and a row of them.
///
/// [`Values`] builds [`spate_types::Value`]s (a nested row is a [`Value::List`]); a front
/// with its own record type implements this to decode straight into it, without building
/// `Value`s first.
pub trait RowBuilder: Send + Sync + 'static {
    /// A decoded value.
    type Value;
    /// What building a row of one (nested) schema needs, prepared once per schema (its field
    /// names, for example).
    type Shape: Send + Sync;
    /// Prepares a schema's shape.
    fn shape(schema: &Schema) -> Self::Shape;
    /// A missing or `null` field.
    fn null() -> Self::Value;
    /// Whether a value is the one [`null`](Self::null) gives.
    fn is_null(value: &Self::Value) -> bool;
    /// A boolean.
    fn bool(b: bool) -> Self::Value;
    /// An integer (or a timestamp's epoch milliseconds, unless
    /// [`timestamp`](Self::timestamp) says otherwise).
    fn int(i: i64) -> Self::Value;
    /// A timestamp, as epoch milliseconds: [`int`](Self::int) unless the builder has values
    /// of its own for timestamps.
    fn timestamp(ms: i64) -> Self::Value {
        Self::int(ms)
    }
    /// A float.
    fn float(f: f64) -> Self::Value;
    /// A `DECIMAL` of `scale` digits after the point, as its unscaled value (`1.25` at scale
    /// 2 is 125): [`float`](Self::float) of it, unless the builder keeps exact decimals.
    fn decimal(unscaled: i64, scale: u8) -> Self::Value {
        Self::float(unscaled as f64 / 10f64.powi(i32::from(scale)))
    }
    /// A string.
    fn string(s: String) -> Self::Value;
    /// A string borrowed from the line (one without escapes): [`string`](Self::string) of a
    /// copy, unless the builder keeps strings its own way and saves that copy.
    fn str(s: &str) -> Self::Value {
        Self::string(s.to_owned())
    }
    /// A row of `shape` from its fields' values, in schema order.
    fn row(shape: &Self::Shape, values: Vec<Self::Value>) -> Self::Value;
    /// A nested row of `shape` from its fields' values, in schema order, taken out of a
    /// buffer the decoder reuses: [`row`](Self::row) of a `Vec` of them, unless the builder
    /// makes its rows another way and saves that `Vec` (an `Arc<[_]>` collects the values
    /// into its own allocation).
    fn nested_row(shape: &Self::Shape, values: &mut [Self::Value]) -> Self::Value {
        Self::row(
            shape,
            values
                .iter_mut()
                .map(|v| std::mem::replace(v, Self::null()))
                .collect(),
        )
    }
}

/// The [`RowBuilder`] of [`spate_types::Value`]s, the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct Values;

impl RowBuilder for Values {
    type Value = Value;
    type Shape = ();
    fn shape(_: &Schema) {}
    fn null() -> Value {
        Value::Null
    }
    fn is_null(value: &Value) -> bool {
        value.is_null()
    }
    fn bool(b: bool) -> Value {
        Value::Bool(b)
    }
    fn int(i: i64) -> Value {
        Value::Int(i)
    }
    fn float(f: f64) -> Value {
        Value::Float(f)
    }
    fn string(s: String) -> Value {
        Value::Str(s)
    }
    fn row(_: &(), values: Vec<Value>) -> Value {
        Value::List(values)
    }
}

/// A schema prepared for decoding: each field with its dotted path for error messages.
struct Prepared<B: RowBuilder> {
    fields: Vec<PreparedField<B>>,
    shape: B::Shape,
    /// Room left in a decoded row's values for the caller's own (computed) columns.
    spare: usize,
}

struct PreparedField<B: RowBuilder> {
    name: Box<str>,
    /// `parent.child` for a field of a nested row.
    path: Box<str>,
    kind: Kind<B>,
    nullable: bool,
    /// Not read (a projection left it out): its value is skipped, not built, and the row
    /// holds a null in its place.
    skip: bool,
}

enum Kind<B: RowBuilder> {
    Bool,
    Int64,
    Float64,
    String,
    Timestamp,
    Decimal { precision: u8, scale: u8 },
    Row(Prepared<B>),
}

impl<B: RowBuilder> Prepared<B> {
    /// `reads(at)`: whether the field at index path `at` (its position, in each enclosing
    /// row from the outermost) is read.
    fn new(
        schema: &Schema,
        prefix: &str,
        at: &mut Vec<usize>,
        reads: &dyn Fn(&[usize]) -> bool,
    ) -> Prepared<B> {
        let fields = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let path = format!("{prefix}{}", f.name);
                at.push(i);
                let skip = !reads(at);
                let kind = match &f.data_type {
                    DataType::Bool => Kind::Bool,
                    DataType::Int64 => Kind::Int64,
                    DataType::Float64 => Kind::Float64,
                    DataType::String => Kind::String,
                    DataType::Timestamp => Kind::Timestamp,
                    DataType::Decimal { precision, scale } => Kind::Decimal {
                        precision: *precision,
                        scale: *scale,
                    },
                    DataType::Row(nested) => {
                        Kind::Row(Prepared::new(nested, &format!("{path}."), at, reads))
                    }
                };
                at.pop();
                PreparedField {
                    name: f.name.as_str().into(),
                    path: path.into(),
                    kind,
                    nullable: f.nullable,
                    skip,
                }
            })
            .collect();
        Prepared {
            fields,
            shape: B::shape(schema),
            spare: 0,
        }
    }

    #[inline]
    fn index_of(&self, key: &str) -> Option<usize> {
        self.fields.iter().position(|f| *f.name == *key)
    }
}

impl RowDecoder {
    /// A decoder of rows of `schema`.
    pub fn new(schema: &Schema) -> Self {
        RowDecoder::with_builder(schema)
    }

    /// Decodes one line (without its line end) into a row, or says in one line why not.
    pub fn decode(&self, line: &[u8]) -> Result<Row, String> {
        self.decode_fields(line).map(Row)
    }
}

impl<B: RowBuilder> RowDecoder<B> {
    /// A decoder of rows of `schema` into `B`'s values.
    pub fn with_builder(schema: &Schema) -> Self {
        RowDecoder::projected(schema, &|_| true)
    }

    /// A decoder that reads only the fields `reads` accepts (a projection pushed down into
    /// the format, as Flink's JSON format does), by their index path: `[2]` is the schema's
    /// third field, `[2, 5]` the sixth field of that nested row. The others are skipped as
    /// unknown fields are (checked to be JSON, never built) and read as null, whether
    /// nullable or not; a nested row that is read has its own fields chosen the same way.
    ///
    /// ```
    /// # use spate_connectors::files::json::{RowDecoder, Values};
    /// # use spate_types::{DataType, Field, Schema, Value};
    /// let bid = Schema::new(vec![
    ///     Field::new("price", DataType::Int64),
    ///     Field::not_null("url", DataType::String),
    /// ]);
    /// let schema = Schema::new(vec![
    ///     Field::new("id", DataType::Int64),
    ///     Field::new("bid", DataType::Row(bid)),
    /// ]);
    /// let decoder = RowDecoder::<Values>::projected(&schema, &|at| at != [1, 1]);
    /// let bid = |price| Value::List(vec![Value::Int(1), Value::List(vec![price, Value::Null])]);
    /// let row = decoder.decode_row(br#"{"id":1,"bid":{"price":7,"url":"http://"}}"#);
    /// assert_eq!(row.unwrap(), bid(Value::Int(7)));
    /// // `url` is not read, so a line without it is no error.
    /// let row = decoder.decode_row(br#"{"bid":{"price":null},"id":1}"#);
    /// assert_eq!(row.unwrap(), bid(Value::Null));
    /// ```
    pub fn projected(schema: &Schema, reads: &dyn Fn(&[usize]) -> bool) -> Self {
        RowDecoder {
            root: Arc::new(Prepared::new(schema, "", &mut Vec::new(), reads)),
        }
    }

    /// Leaves room for `n` more values in each row [`decode_fields`](Self::decode_fields)
    /// returns (columns the caller appends), so that appending them does not reallocate.
    pub fn spare(mut self, n: usize) -> Self {
        if let Some(root) = Arc::get_mut(&mut self.root) {
            root.spare = n;
        }
        self
    }

    /// Decodes one line into a row of `B` (of the schema's shape), or says why not.
    pub fn decode_row(&self, line: &[u8]) -> Result<B::Value, String> {
        self.decode_fields(line)
            .map(|values| B::row(&self.root.shape, values))
    }

    /// Decodes one line into the values of the schema's fields, in schema order (the row
    /// [`decode_row`](Self::decode_row) makes of them, unmade).
    pub fn decode_fields(&self, line: &[u8]) -> Result<Vec<B::Value>, String> {
        let mut de = de::Deserializer::new(line);
        let fast = RowSeed(&self.root)
            .deserialize(&mut de)
            .and_then(|values| de.end().map(|()| values));
        match fast {
            Ok(values) => Ok(values),
            Err(_) => match std::str::from_utf8(line) {
                Ok(text) => self.decode_reference(text),
                Err(e) => Err(format!("invalid UTF-8: {e}")),
            },
        }
    }

    /// Decodes one line with `serde_json` (the reason of a rejection, with its column).
    fn decode_reference(&self, text: &str) -> Result<Vec<B::Value>, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        RowSeed(&self.root)
            .deserialize(&mut de)
            .and_then(|values| de.end().map(|()| values))
            .map_err(|e| json_reason(&e))
    }
}

/// Deserializes a JSON object into the values of a prepared schema.
struct RowSeed<'a, B: RowBuilder>(&'a Prepared<B>);

impl<'de, B: RowBuilder> DeserializeSeed<'de> for RowSeed<'_, B> {
    type Value = Vec<B::Value>;
    fn deserialize<D: serde::de::Deserializer<'de>>(self, d: D) -> Result<Vec<B::Value>, D::Error> {
        d.deserialize_map(RowVisitor(self.0))
    }
}

struct RowVisitor<'a, B: RowBuilder>(&'a Prepared<B>);

impl<'de, B: RowBuilder> Visitor<'de> for RowVisitor<'_, B> {
    type Value = Vec<B::Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Vec<B::Value>, A::Error> {
        let fields = &self.0.fields;
        let mut values: Vec<B::Value> = Vec::with_capacity(fields.len() + self.0.spare);
        values.extend(fields.iter().map(|_| B::null()));
        fill(self.0, map, &mut values)?;
        Ok(values)
    }
}

/// Decodes a JSON object's fields into `values` (one per field of `prepared`, all null).
fn fill<'de, B: RowBuilder, A: MapAccess<'de>>(
    prepared: &Prepared<B>,
    mut map: A,
    values: &mut [B::Value],
) -> Result<(), A::Error> {
    let fields = &prepared.fields;
    // Writers mostly keep one order: the field after the last one is tried first.
    let mut next = 0;
    while let Some(key) = map.next_key_seed(KeySeed(prepared, next))? {
        match key {
            Some(i) => {
                next = i + 1;
                if fields[i].skip {
                    map.next_value::<IgnoredAny>()?;
                } else {
                    values[i] = map.next_value_seed(FieldSeed(&fields[i]))?;
                }
            }
            None => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    // A `null` in a field that is not nullable was refused where it stood: a `Null` left
    // here is a missing field.
    for (field, value) in fields.iter().zip(values.iter()) {
        if !field.nullable && !field.skip && B::is_null(value) {
            return Err(serde::de::Error::custom(format_args!(
                "missing field `{}`",
                field.path
            )));
        }
    }
    Ok(())
}

/// Deserializes a key into the position of its field, or `None` for a key not declared;
/// the field at `.1` is tried first.
struct KeySeed<'a, B: RowBuilder>(&'a Prepared<B>, usize);

impl<'de, B: RowBuilder> DeserializeSeed<'de> for KeySeed<'_, B> {
    type Value = Option<usize>;
    fn deserialize<D: serde::de::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de, B: RowBuilder> Visitor<'de> for KeySeed<'_, B> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        match self.0.fields.get(self.1) {
            Some(f) if *f.name == *key => Ok(Some(self.1)),
            _ => Ok(self.0.index_of(key)),
        }
    }
}

/// Deserializes the value of one field into its type's [`Value`].
struct FieldSeed<'a, B: RowBuilder>(&'a PreparedField<B>);

impl<'de, B: RowBuilder> DeserializeSeed<'de> for FieldSeed<'_, B> {
    type Value = B::Value;
    fn deserialize<D: serde::de::Deserializer<'de>>(self, d: D) -> Result<B::Value, D::Error> {
        match self.0.kind {
            // The number's text, for an exact value.
            Kind::Decimal { .. } => d.deserialize_newtype_struct(de::NUMBER_TEXT, self),
            _ => d.deserialize_any(self),
        }
    }
}

impl<B: RowBuilder> FieldSeed<'_, B> {
    fn wrong<E: serde::de::Error>(&self, found: &str) -> E {
        let expected = match self.0.kind {
            Kind::Bool => "a boolean",
            Kind::Int64 => "an integer",
            Kind::Float64 => "a number",
            Kind::String => "a string",
            Kind::Timestamp => "a timestamp (a string or epoch milliseconds)",
            Kind::Decimal { .. } => "a decimal number",
            Kind::Row(_) => "an object",
        };
        E::custom(format_args!(
            "wrong type for field `{}`: expected {expected}, found {found}",
            self.0.path
        ))
    }

    fn int<E: serde::de::Error>(&self, v: i64) -> Result<B::Value, E> {
        match self.0.kind {
            Kind::Int64 => Ok(B::int(v)),
            Kind::Timestamp => Ok(B::timestamp(v)),
            Kind::Float64 => Ok(B::float(v as f64)),
            Kind::Decimal { .. } => self.decimal(&v.to_string()),
            _ => Err(self.wrong("a number")),
        }
    }

    /// A DECIMAL field's value from the text of a number (`NULL` when it has more digits
    /// than the field's precision, as Flink's JSON format reads it).
    fn decimal<E: serde::de::Error>(&self, text: &str) -> Result<B::Value, E> {
        let Kind::Decimal { precision, scale } = self.0.kind else {
            return Err(self.wrong("a number"));
        };
        match parse_decimal(text, precision, scale) {
            Ok(Some(unscaled)) => Ok(B::decimal(unscaled, scale)),
            Ok(None) if self.0.nullable => Ok(B::null()),
            Ok(None) => Err(E::custom(format_args!(
                "field `{}`: {text} has more digits than DECIMAL({precision}, {scale}) holds",
                self.0.path
            ))),
            Err(NotADecimal) => Err(E::custom(format_args!(
                "field `{}`: {text:?} is not a decimal number",
                self.0.path
            ))),
        }
    }
}

impl<'de, B: RowBuilder> Visitor<'de> for FieldSeed<'_, B> {
    type Value = B::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "the value of field `{}`", self.0.path)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<B::Value, E> {
        if self.0.nullable {
            Ok(B::null())
        } else {
            Err(E::custom(format_args!(
                "field `{}` is null but not nullable",
                self.0.path
            )))
        }
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<B::Value, E> {
        self.visit_unit()
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<B::Value, E> {
        match self.0.kind {
            Kind::Bool => Ok(B::bool(v)),
            _ => Err(self.wrong("a boolean")),
        }
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<B::Value, E> {
        self.int(v)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<B::Value, E> {
        match (i64::try_from(v), &self.0.kind) {
            (Ok(v), _) => self.int(v),
            (Err(_), Kind::Float64) => Ok(B::float(v as f64)),
            (Err(_), Kind::Int64 | Kind::Timestamp) => Err(E::custom(format_args!(
                "field `{}`: {v} is out of the range of a 64-bit signed integer",
                self.0.path
            ))),
            _ => Err(self.wrong("a number")),
        }
    }

    fn visit_newtype_struct<D: serde::de::Deserializer<'de>>(
        self,
        d: D,
    ) -> Result<B::Value, D::Error> {
        // A deserializer that does not know `NUMBER_TEXT` (`serde_json`, for the reasons of
        // bad lines).
        d.deserialize_any(self)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<B::Value, E> {
        match self.0.kind {
            Kind::Float64 => Ok(B::float(v)),
            Kind::Decimal { .. } => self.decimal(&format!("{v:?}")),
            _ => Err(self.wrong("a float")),
        }
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<B::Value, E> {
        match self.0.kind {
            Kind::String => Ok(B::str(v)),
            Kind::Decimal { .. } => self.decimal(v),
            Kind::Timestamp => parse_timestamp_ms(v).map(B::timestamp).ok_or_else(|| {
                E::custom(format_args!(
                    "field `{}`: invalid timestamp {v:?}, expected YYYY-MM-DD HH:MM:SS.mmm",
                    self.0.path
                ))
            }),
            _ => Err(self.wrong("a string")),
        }
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<B::Value, E> {
        match self.0.kind {
            Kind::String => Ok(B::string(v)),
            _ => self.visit_str(&v),
        }
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _seq: A) -> Result<B::Value, A::Error> {
        Err(self.wrong("an array"))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<B::Value, A::Error> {
        match &self.0.kind {
            Kind::Row(nested) => {
                // A nested row's values wait on the stack (most nested rows have a few
                // fields), and the builder takes them from there.
                let mut values: smallvec::SmallVec<[B::Value; 12]> =
                    nested.fields.iter().map(|_| B::null()).collect();
                fill(nested, map, &mut values)?;
                Ok(B::nested_row(&nested.shape, &mut values))
            }
            _ => Err(self.wrong("an object")),
        }
    }
}

/// What [`parse_decimal`] says of a text that is not a decimal number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotADecimal;

/// The unscaled value at `scale` of a decimal number's text (`-12.5`, `1e3`, `0.125E-1`, as
/// JSON and Java's `BigDecimal` write them), rounded half up (away from zero), as Flink reads a
/// `DECIMAL(precision, scale)`: `Ok(None)` when it has more than `precision` digits (or does
/// not fit an `i64`), `Err` when the text is not a number.
pub fn parse_decimal(text: &str, precision: u8, scale: u8) -> Result<Option<i64>, NotADecimal> {
    let b = text.trim().as_bytes();
    let (negative, b) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, b),
    };
    let (mantissa, exponent) = match b.iter().position(|&c| c == b'e' || c == b'E') {
        Some(i) => {
            let e = std::str::from_utf8(&b[i + 1..]).map_err(|_| NotADecimal)?;
            (&b[..i], e.parse::<i32>().map_err(|_| NotADecimal)?)
        }
        None => (b, 0),
    };
    let (whole, fraction) = match mantissa.iter().position(|&c| c == b'.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, &[][..]),
    };
    if (whole.is_empty() && fraction.is_empty())
        || !whole.iter().chain(fraction).all(u8::is_ascii_digit)
    {
        return Err(NotADecimal);
    }
    // The digits d stand for d * 10^(exponent - fraction.len()); at `scale`, for
    // d * 10^shift.
    // The significant digits, read again where needed rather than collected (this runs once
    // per decoded value).
    let digits = || {
        whole
            .iter()
            .chain(fraction)
            .skip_while(|&&c| c == b'0')
            .map(|c| c - b'0')
    };
    let len = digits().count();
    let shift = i64::from(exponent) - fraction.len() as i64 + i64::from(scale);
    let (keep, round_up) = if shift >= 0 {
        (len, false)
    } else {
        let dropped = usize::try_from(-shift).unwrap_or(usize::MAX);
        match len.checked_sub(dropped) {
            Some(keep) => (keep, digits().nth(keep).is_some_and(|d| d >= 5)),
            None => (0, false),
        }
    };
    // Digits beyond 19 cannot fit an i64 (nor a precision of up to 18).
    let zeros = if shift > 0 { shift as usize } else { 0 };
    if keep > 0 && keep + zeros > 19 {
        return Ok(None);
    }
    let mut unscaled: i128 = 0;
    for d in digits().take(keep) {
        unscaled = unscaled * 10 + i128::from(d);
    }
    if keep > 0 {
        unscaled *= 10i128.pow(zeros as u32);
    }
    unscaled += i128::from(round_up);
    let limit = 10i128.pow(u32::from(precision.min(38)));
    if unscaled >= limit {
        return Ok(None);
    }
    let unscaled = if negative { -unscaled } else { unscaled };
    Ok(i64::try_from(unscaled).ok())
}

/// Parses `YYYY-MM-DD HH:MM:SS[.f...]` (or with a `T` between date and time) as UTC epoch
/// milliseconds; digits after the milliseconds are truncated.
pub fn parse_timestamp_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b' ' | b'T') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        b[range].iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut millis = 0;
    if b.len() > 19 {
        let frac = &b[20..];
        if b[19] != b'.' || frac.is_empty() || frac.len() > 9 {
            return None;
        }
        let mut scale = 100;
        for &c in frac {
            if !c.is_ascii_digit() {
                return None;
            }
            millis += i64::from(c - b'0') * scale;
            scale /= 10;
        }
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day < 1 || day > days_in_month || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use spate_types::Field;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct R {
        a: Option<String>,
        n: Option<i64>,
        u: Option<u64>,
        f: Option<f64>,
    }

    /// Lines on which a SIMD parser and `serde_json` could plausibly differ.
    const EDGE_CASES: &[&[u8]] = &[
        br#"{"a":"x\ud83d\ude00y"}"#,
        br#"{"a":"\uD83D\uDE00"}"#,
        br#"{"a":"\ud800"}"#,
        br#"{"z":"\ud800"}"#,
        br#"{"a":"\udc00x"}"#,
        br#"{"z":"\udc00x"}"#,
        br#"{"a":"\ud83d\u0041"}"#,
        br#"{"z":"\ud83d\u0041"}"#,
        br#"{"a":"\ud83dx"}"#,
        br#"{"z":"\u12"}"#,
        br#"{"z":"\q"}"#,
        br#"{"a":"\/\b\f\n\r\t\"\\"}"#,
        br#"{"a":"\u0000"}"#,
        br#"{"n":9223372036854775807}"#,
        br#"{"n":9223372036854775808}"#,
        br#"{"n":-9223372036854775808}"#,
        br#"{"n":-9223372036854775809}"#,
        br#"{"u":18446744073709551615}"#,
        br#"{"u":18446744073709551616}"#,
        br#"{"z":123456789012345678901234567890}"#,
        br#"{"n":1.0}"#,
        br#"{"n":1e2}"#,
        br#"{"f":1}"#,
        br#"{"f":-0.0}"#,
        br#"{"f":1e400}"#,
        br#"{"z":1e400}"#,
        br#"{"f":0.1e-400}"#,
        br#"{"f":1.7976931348623157e308}"#,
        br#"{"n":1,"n":2}"#,
        br#"{"z":1,"z":2}"#,
        br#"{"a":"x"} x"#,
        br#"{"a":"x"}}"#,
        br#"{"a":"x"} "#,
        br#" {"a":"x"}"#,
        br#"{"a":"x"}{"a":"y"}"#,
        b"{\"a\":\"x\ty\"}",
        b"{\"z\":\"x\ty\"}",
        b"{\"z\":\"x\x01y\"}",
        b"{\"z\":\"x\x7fy\"}",
        b"{\"z\":\"x\xffy\"}",
        b"{\"a\":\"x\xffy\"}",
        b"{\"a\":\"x\"}\xff",
        b"{\"a\":\"\xed\xa0\x80\"}",
        b"{\"z\":\"\xc0\xaf\"}",
        b"{\"a\"\t:\"x\"}",
        b"{\"a\"\x0c:\"x\"}",
        br#"{"a":"x",}"#,
        br#"{"z":[1,]}"#,
        br#"{"z":[1 2]}"#,
        br#"{"z":{"q":1,}}"#,
        br#"{"z":{"q" 1}}"#,
        br#"{"z":{1:2}}"#,
        br#"{"z":01}"#,
        br#"{"n":01}"#,
        br#"{"z":1.}"#,
        br#"{"z":-}"#,
        br#"{"z":+1}"#,
        br#"{"z":.5}"#,
        br#"{"z":1e}"#,
        br#"{"z":tru}"#,
        br#"{"z":nul}"#,
        br#"{"z":NaN}"#,
        br#"{"z":Infinity}"#,
        br#"{"z":"\/"}"#,
        br#"{"a":null,"n":null}"#,
        br#"[null,1,2,3.5]"#,
        br#"{"z":[[[[[{}]]]]]}"#,
        br#"{"z":"unterminated}"#,
        br#"{"a":"x""#,
        br#"{"a":1}"#,
        br#"{"n":"1"}"#,
        br#"{"\u0061":"escaped key"}"#,
        br#"{}"#,
        br#"null"#,
        br#"42"#,
        br#""#,
    ];

    /// What a line decodes to, without the reasons (whose wording differs between libraries).
    fn outcome<T: DeserializeOwned>(
        decode: fn(&[u8]) -> Result<T, String>,
        line: &[u8],
    ) -> Option<T> {
        decode(line).ok()
    }

    /// The deserializer alone, without the fallback to `serde_json`.
    fn fast<T: DeserializeOwned>(line: &[u8]) -> Result<T, String> {
        de::from_slice(line).map_err(|e| e.to_string())
    }

    #[test]
    fn the_deserializer_and_serde_json_agree_on_edge_cases() {
        for &line in EDGE_CASES {
            let shown = String::from_utf8_lossy(line);
            assert_eq!(
                outcome::<R>(fast, line),
                outcome::<R>(decode_reference, line),
                "{shown}"
            );
            assert_eq!(
                outcome::<serde_json::Value>(fast, line),
                outcome::<serde_json::Value>(decode_reference, line),
                "{shown}"
            );
            assert_eq!(
                outcome::<Value>(fast, line),
                outcome::<Value>(decode_reference, line),
                "{shown}"
            );
            assert_eq!(
                fast::<IgnoredAny>(line).is_ok(),
                decode_reference::<IgnoredAny>(line).is_ok(),
                "{shown}"
            );
            assert_eq!(
                outcome::<R>(decode, line),
                outcome::<R>(decode_reference, line),
                "{shown}"
            );
        }
    }

    #[test]
    fn the_documented_differences() {
        // Correct rounding, where serde_json's default parser is one unit off.
        let line = br#"{"f":2.2250738585072011e-308}"#;
        let exact: f64 = "2.2250738585072011e-308".parse().unwrap();
        assert_eq!(decode::<R>(line).unwrap().f, Some(exact));
        assert_ne!(decode_reference::<R>(line).unwrap().f, Some(exact));
    }

    #[test]
    fn negative_zeros_keep_their_sign() {
        for line in [&br#"{"f":-0}"#[..], br#"{"f":-0.0}"#, br#"{"f":-0.000e5}"#] {
            let f = fast::<R>(line).unwrap().f.unwrap();
            assert_eq!(f.to_bits(), (-0.0f64).to_bits());
            let v = fast::<Value>(line).unwrap();
            assert_eq!(v.get("f"), Some(&Value::Float(-0.0)));
            let v = fast::<serde_json::Value>(line).unwrap();
            assert_eq!(v, decode_reference::<serde_json::Value>(line).unwrap());
            assert!(v["f"].is_f64());
        }
    }

    #[test]
    fn skipped_values_nest_freely_built_ones_127_levels() {
        // A skipped field nested far deeper than any stack would take recursion: skipped
        // without recursion (as serde_json does); a value built that deep is refused past
        // 127 levels, serde_json's recursion limit, with an error, not a stack overflow.
        let nested = |depth: usize| format!("{{\"z\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
        let deep = nested(100_000);
        assert!(fast::<R>(deep.as_bytes()).is_ok());
        assert!(fast::<IgnoredAny>(deep.as_bytes()).is_ok());
        assert!(decode_reference::<R>(deep.as_bytes()).is_ok());
        let err = fast::<Value>(deep.as_bytes()).unwrap_err();
        assert!(err.starts_with("recursion limit exceeded"), "{err}");
        assert!(fast::<serde_json::Value>(deep.as_bytes()).is_err());
        for depth in [125, 126, 127, 128] {
            let line = nested(depth);
            assert_eq!(
                fast::<serde_json::Value>(line.as_bytes()).is_ok(),
                decode_reference::<serde_json::Value>(line.as_bytes()).is_ok(),
                "{depth}"
            );
        }
        assert!(fast::<Value>(nested(126).as_bytes()).is_ok());
        assert!(fast::<Value>(nested(127).as_bytes()).is_err());
        // Mismatched brackets in a skipped value.
        assert!(fast::<R>(br#"{"z":[[1}]}"#).is_err());
        assert!(fast::<R>(br#"{"z":{"a":[}]}"#).is_err());
        let decoder = RowDecoder::new(&Schema::new(vec![Field::new("a", DataType::Int64)]));
        assert!(decoder.decode(deep.as_bytes()).is_ok());
        assert!(decoder.decode(br#"{"a":[[[[[1]]]]]}"#).is_err());
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Bid {
        auction: u64,
        bidder: i64,
        price: f64,
        channel: String,
        tags: Vec<String>,
        kind: Option<Kind>,
        #[serde(default)]
        extra: String,
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    enum Kind {
        Plain,
        Rated(u8),
        Named { name: String },
    }

    /// The issue's test: the same records with fields reordered, extra whitespace and extra
    /// unknown fields decode identically, by both decoders and into a declared schema.
    #[test]
    fn reordered_fields_whitespace_and_unknown_fields_decode_identically() {
        let plain = br#"{"auction":7,"bidder":-3,"price":1.5,"channel":"Google","tags":["a","b"],"kind":{"Rated":4},"extra":"x"}"#;
        let shuffled = b"  {\t\"kind\" : { \"Rated\" :4 } ,\"zz\":{\"deep\":[1,[2,{\"q\":\"\\\"}\"}]]},\r\n \"tags\":[ \"a\" , \"b\" ], \"price\" :1.5e0,\"unknown\":null, \"channel\":\"Goo\\u0067le\",\"bidder\" : -3,\"auction\":7 , \"extra\":\"x\", \"more\":[true,false,-0.0e-1]}  ";
        let expected = Bid {
            auction: 7,
            bidder: -3,
            price: 1.5,
            channel: "Google".into(),
            tags: vec!["a".into(), "b".into()],
            kind: Some(Kind::Rated(4)),
            extra: "x".into(),
        };
        for line in [&plain[..], &shuffled[..]] {
            assert_eq!(decode::<Bid>(line).unwrap(), expected);
            assert_eq!(fast::<Bid>(line).unwrap(), expected);
            assert_eq!(decode_reference::<Bid>(line).unwrap(), expected);
            let mut text = line.to_vec();
            text.extend_from_slice(b"\n{\"next\":1}\n");
            if line.contains(&b'\n') {
                // A value that goes on past its line is not the prefix path's.
                assert!(decode_json_prefix::<Bid>(&text).is_none());
                let one_line: Vec<u8> = line
                    .iter()
                    .map(|&b| if b == b'\n' { b' ' } else { b })
                    .collect();
                text = one_line;
                text.extend_from_slice(b"\n{\"next\":1}\n");
            }
            let (bid, n) = decode_json_prefix::<Bid>(&text).unwrap();
            assert_eq!((bid, n), (expected_again(), line.len() + 1));
        }
        // A projection: a type with fewer fields.
        #[derive(Debug, serde::Deserialize, PartialEq)]
        struct Projected {
            price: f64,
            auction: u64,
        }
        for line in [&plain[..], &shuffled[..]] {
            assert_eq!(
                fast::<Projected>(line).unwrap(),
                Projected {
                    price: 1.5,
                    auction: 7
                }
            );
        }
        let decoder = RowDecoder::new(&Schema::new(vec![
            Field::not_null("auction", DataType::Int64),
            Field::new("channel", DataType::String),
            Field::new("price", DataType::Float64),
        ]));
        let row = Row(vec![
            Value::Int(7),
            Value::Str("Google".into()),
            Value::Float(1.5),
        ]);
        assert_eq!(decoder.decode(plain).unwrap(), row);
        assert_eq!(decoder.decode(shuffled).unwrap(), row);
        // A unit and a struct variant, `#[serde(default)]` missing.
        let line = br#"{"kind":"Plain","tags":[],"channel":"","price":0,"bidder":0,"auction":0}"#;
        assert_eq!(fast::<Bid>(line).unwrap().kind, Some(Kind::Plain));
        assert_eq!(fast::<Bid>(line).unwrap().extra, "");
        let line = br#"{"kind":{"Named":{"name":"n"}},"tags":[],"channel":"","price":0,"bidder":0,"auction":0}"#;
        assert_eq!(
            fast::<Bid>(line).unwrap().kind,
            Some(Kind::Named { name: "n".into() })
        );
    }

    fn expected_again() -> Bid {
        Bid {
            auction: 7,
            bidder: -3,
            price: 1.5,
            channel: "Google".into(),
            tags: vec!["a".into(), "b".into()],
            kind: Some(Kind::Rated(4)),
            extra: "x".into(),
        }
    }

    #[test]
    fn escapes_decode_as_serde_json_does() {
        let cases: &[&[u8]] = &[
            br#""\"\\\/\b\f\n\r\t""#,
            br#""\u0041\u00e9\u65e5\uD83D\uDE00\ud83d\ude00""#,
            "\"é日本😀 plain\"".as_bytes(),
            br#""x\u0000y""#,
            br#""\ud800""#,
            br#""\udc00""#,
            br#""\ud83d\u0041""#,
            br#""\ud83dx""#,
            br#""\ud83d\n""#,
            br#""\u12""#,
            br#""\u12G4""#,
            br#""\x""#,
            b"\"a\tb\"",
            b"\"\xe9\"",
            b"\"\xed\xa0\x80\"",
            br#""a"#,
            br#""a\"#,
        ];
        for &text in cases {
            let shown = String::from_utf8_lossy(text);
            let ours = fast::<String>(text).ok();
            let reference = decode_reference::<String>(text).ok();
            assert_eq!(ours, reference, "{shown}");
            // Skipped, lone surrogates are fine (as in serde_json); the rest is the same.
            assert_eq!(
                fast::<IgnoredAny>(text).is_ok(),
                decode_reference::<IgnoredAny>(text).is_ok(),
                "{shown}"
            );
        }
        assert_eq!(
            fast::<String>(br#""\ud83d\ude00\t""#).unwrap(),
            "\u{1f600}\t"
        );
        assert!(fast::<IgnoredAny>(br#""\ud800""#).is_ok());
        // Byte strings take lone surrogates as WTF-8, as serde_json's do.
        let bytes: serde_bytes_like::Bytes = de::from_slice(br#""a\ud801""#).unwrap();
        assert_eq!(bytes.0, b"a\xed\xa0\x81");
    }

    /// A byte buffer deserialized with `deserialize_byte_buf`.
    mod serde_bytes_like {
        pub struct Bytes(pub Vec<u8>);
        impl<'de> serde::Deserialize<'de> for Bytes {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = Bytes;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("bytes")
                    }
                    fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                        Ok(Bytes(v.to_vec()))
                    }
                }
                d.deserialize_byte_buf(V)
            }
        }
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        #[derive(serde::Deserialize)]
        struct B<'a> {
            #[serde(borrow)]
            plain: std::borrow::Cow<'a, str>,
            #[serde(borrow)]
            escaped: std::borrow::Cow<'a, str>,
            s: &'a str,
        }
        let line = br#"{"plain":"abc","escaped":"a\nc","s":"x"}"#;
        let b: B = de::from_slice(line).unwrap();
        assert!(matches!(b.plain, std::borrow::Cow::Borrowed("abc")));
        assert!(matches!(b.escaped, std::borrow::Cow::Owned(ref s) if s == "a\nc"));
        assert_eq!(b.s, "x");
        // A `&str` cannot take an escaped string: an error, as in serde_json.
        assert!(de::from_slice::<B>(br#"{"plain":"","escaped":"","s":"\n"}"#).is_err());
    }

    #[test]
    fn duplicate_fields_are_the_types_business() {
        let line = br#"{"n":1,"a":"x","n":2}"#;
        assert_eq!(
            fast::<R>(line).unwrap_err(),
            "duplicate field `n` at column 19"
        );
        assert_eq!(
            decode::<R>(line).unwrap_err(),
            decode_reference::<R>(line).unwrap_err()
        );
        let v = fast::<serde_json::Value>(line).unwrap();
        assert_eq!(v, decode_reference::<serde_json::Value>(line).unwrap());
        assert_eq!(v["n"], 2);
    }

    #[test]
    fn numbers_at_the_edges() {
        let v = fast::<serde_json::Value>(
            br#"[0,-0,18446744073709551615,18446744073709551616,-9223372036854775808,-9223372036854775809,1e2,-1.5E-3]"#,
        )
        .unwrap();
        assert!(v[0].is_u64() && v[1].is_f64() && v[2].is_u64() && v[3].is_f64());
        assert!(v[4].is_i64() && v[5].is_f64() && v[6].is_f64());
        assert_eq!(v[2].as_u64(), Some(u64::MAX));
        assert_eq!(v[4].as_i64(), Some(i64::MIN));
        assert_eq!(
            fast::<i128>(b"-170141183460469231731687303715884105728").unwrap(),
            i128::MIN
        );
        assert_eq!(
            fast::<u128>(b"340282366920938463463374607431768211455").unwrap(),
            u128::MAX
        );
        assert!(fast::<u128>(b"340282366920938463463374607431768211456").is_err());
        assert!(fast::<u128>(b"-1").is_err());
        assert!(fast::<i128>(b"1.5").is_err());
        assert!(fast::<u8>(b"256").is_err());
        assert!(fast::<i64>(b"1.0").is_err());
        assert_eq!(fast::<f64>(b"1").unwrap(), 1.0);
        assert!(fast::<f64>(b"1e400").is_err());
        assert_eq!(fast::<f64>(b"1e-400").unwrap(), 0.0);
        for bad in [
            &b"01"[..],
            b"-",
            b"1.",
            b".5",
            b"+1",
            b"1e",
            b"1e+",
            b"NaN",
            b"--1",
        ] {
            assert!(fast::<serde_json::Value>(bad).is_err(), "{bad:?}");
            assert!(fast::<IgnoredAny>(bad).is_err(), "{bad:?}");
        }
        // Map keys that are numbers, in quotes, as serde_json reads them.
        let m: std::collections::BTreeMap<i64, bool> =
            de::from_slice(br#"{"-1":true,"2":false}"#).unwrap();
        assert_eq!(
            m.into_iter().collect::<Vec<_>>(),
            vec![(-1, true), (2, false)]
        );
        assert!(de::from_slice::<std::collections::BTreeMap<i64, bool>>(br#"{"x":true}"#).is_err());
    }

    #[test]
    fn prefixes_end_at_their_line_end() {
        let text = b"{\"n\":1} \t\r\n{\"n\":2}\n";
        let (r, n) = decode_json_prefix::<R>(text).unwrap();
        assert_eq!((r.n, n), (Some(1), 11));
        let (r, n) = decode_json_prefix::<R>(&text[n..]).unwrap();
        assert_eq!((r.n, n), (Some(2), 8));
        for text in [
            // The value ends before the line does.
            &b"{\"n\":1} x\n{\"n\":2}\n"[..],
            b"{\"n\":1}{\"n\":2}\n",
            // It goes on past the line end.
            b"{\"n\":\n1}\n",
            b"{\"n\":1\n}\n",
            b"{\"a\":\"x\ny\"}\n",
            b"\n{\"n\":1}\n",
            // No line end at all, or a blank line, or no valid record.
            b"{\"n\":1}",
            b"   \n",
            b"{\"n\":\"1\"}\n",
            b"{\"n\":1,\"n\":2}\n",
            b"{\"a\":\"\xff\"}\n",
        ] {
            assert!(
                decode_json_prefix::<R>(text).is_none(),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        // Scalars and arrays are values too.
        assert_eq!(decode_json_prefix::<u32>(b"42\n7\n"), Some((42, 3)));
        assert_eq!(
            decode_json_prefix::<Vec<u8>>(b"[1, 2]\n"),
            Some((vec![1, 2], 7))
        );
    }

    #[test]
    fn reasons_come_from_serde_json() {
        let err = decode::<R>(br#"{"n":"x"}"#).unwrap_err();
        assert_eq!(err, r#"invalid type: string "x", expected i64 at column 8"#);
        let err = decode::<R>(b"{\"z\":\"\xff\"}").unwrap_err();
        assert!(err.starts_with("invalid UTF-8"), "{err}");
        let err = decode::<R>(br#"{"a":"x"} x"#).unwrap_err();
        assert_eq!(err, "trailing characters at column 11");
    }

    /// A [`RowBuilder`] of another type decodes the same lines into the same values, and
    /// refuses the same lines for the same reasons.
    #[test]
    fn a_row_builder_decodes_what_the_value_path_decodes() {
        struct Text;
        impl RowBuilder for Text {
            type Value = String;
            type Shape = usize;
            fn shape(schema: &Schema) -> usize {
                schema.fields().len()
            }
            fn null() -> String {
                "null".into()
            }
            fn is_null(v: &String) -> bool {
                v == "null"
            }
            fn bool(b: bool) -> String {
                format!("b{b}")
            }
            fn int(i: i64) -> String {
                format!("i{i}")
            }
            fn float(f: f64) -> String {
                format!("f{f}")
            }
            fn string(s: String) -> String {
                format!("s{s:?}")
            }
            fn row(n: &usize, values: Vec<String>) -> String {
                assert_eq!(*n, values.len());
                format!("[{}]", values.join(","))
            }
        }
        fn text(v: &Value) -> String {
            match v {
                Value::Null => "null".into(),
                Value::Bool(b) => format!("b{b}"),
                Value::Int(i) => format!("i{i}"),
                Value::Float(f) => format!("f{f}"),
                Value::Str(s) => format!("s{s:?}"),
                Value::List(items) => {
                    format!("[{}]", items.iter().map(text).collect::<Vec<_>>().join(","))
                }
                Value::Map(_) => unreachable!("rows are lists"),
            }
        }
        let schema = bid_schema();
        let (values, texts) = (
            RowDecoder::new(&schema),
            RowDecoder::<Text>::with_builder(&schema),
        );
        let lines: &[&[u8]] = &[
            br#"{"event_type":2,"bid":{"auction":1,"bidder":2,"price":3,"dateTime":"2024-01-01 00:00:01.000","extra":"x"}}"#,
            br#"{"event_type":0,"person":{"id":1},"bid":null}"#,
            br#"{"bid":{"auction":1}}"#,
            br#"{"event_type":"two"}"#,
        ];
        for line in lines.iter().chain(EDGE_CASES) {
            let want = values.decode(line).map(|row| text(&Value::List(row.0)));
            assert_eq!(
                texts.decode_row(line),
                want,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    fn bid_schema() -> Schema {
        Schema::new(vec![
            Field::not_null("event_type", DataType::Int64),
            Field::new(
                "bid",
                DataType::Row(Schema::new(vec![
                    Field::not_null("auction", DataType::Int64),
                    Field::new("price", DataType::Float64),
                    Field::new("channel", DataType::String),
                    Field::new("dateTime", DataType::Timestamp),
                    Field::new("ok", DataType::Bool),
                ])),
            ),
        ])
    }

    #[test]
    fn rows_take_declared_fields_in_any_order() {
        let decoder = RowDecoder::new(&bid_schema());
        let a = br#"{"event_type":2,"person":null,"bid":{"auction":7,"price":12,"channel":"Go\u006fgle","dateTime":"2024-01-01 00:00:00.250","ok":true,"extra":"xyz"}}"#;
        let b = br#" { "bid" : { "ok" : true , "dateTime" : 1704067200250 , "extra":{"q":[1,{"r":"\""}]}, "channel" : "Google" , "price" : 12.0 , "auction" : 7 } , "zzz":[], "event_type" : 2 } "#;
        let expected = Row(vec![
            Value::Int(2),
            Value::List(vec![
                Value::Int(7),
                Value::Float(12.0),
                Value::Str("Google".into()),
                Value::Int(1_704_067_200_250),
                Value::Bool(true),
            ]),
        ]);
        assert_eq!(decoder.decode(a).unwrap(), expected);
        assert_eq!(decoder.decode(b).unwrap(), expected);
        // Missing nullable fields are null; the last of a key given twice wins.
        let c = br#"{"event_type":1,"event_type":2,"bid":{"auction":1}}"#;
        assert_eq!(
            decoder.decode(c).unwrap(),
            Row(vec![
                Value::Int(2),
                Value::List(vec![
                    Value::Int(1),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null
                ])
            ])
        );
        assert_eq!(
            decoder.decode(br#"{"event_type":0,"bid":null}"#).unwrap(),
            Row(vec![Value::Int(0), Value::Null])
        );
    }

    #[test]
    fn rows_refuse_what_does_not_fit() {
        let decoder = RowDecoder::new(&bid_schema());
        let cases: &[(&[u8], &str)] = &[
            (br#"{"bid":null}"#, "missing field `event_type` at column 12"),
            (br#"{"event_type":null}"#, "field `event_type` is null but not nullable at column 18"),
            (br#"{"event_type":"2"}"#, "wrong type for field `event_type`: expected an integer, found a string at column 17"),
            (br#"{"event_type":2.5}"#, "wrong type for field `event_type`: expected an integer, found a float at column 17"),
            (br#"{"event_type":9223372036854775808}"#, "field `event_type`: 9223372036854775808 is out of the range of a 64-bit signed integer at column 33"),
            (br#"{"event_type":2,"bid":{"price":1}}"#, "missing field `bid.auction` at column 33"),
            (br#"{"event_type":2,"bid":[]}"#, "wrong type for field `bid`: expected an object, found an array at column 24"),
            (br#"{"event_type":2,"bid":{"auction":1,"ok":1}}"#, "wrong type for field `bid.ok`: expected a boolean, found a number at column 41"),
            (br#"{"event_type":2,"bid":{"auction":1,"dateTime":"2024-13-01 00:00:00"}}"#, "field `bid.dateTime`: invalid timestamp \"2024-13-01 00:00:00\", expected YYYY-MM-DD HH:MM:SS.mmm at column 67"),
            (br#"[1]"#, "invalid type: sequence, expected a JSON object at column 0"),
            (br#"{"event_type":2} x"#, "trailing characters at column 18"),
            (b"{\"event_type\":2,\"z\":\"\xff\"}", "invalid UTF-8: invalid utf-8 sequence of 1 bytes from index 21"),
        ];
        for (line, reason) in cases {
            assert_eq!(
                decoder.decode(line).unwrap_err(),
                *reason,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn rows_agree_with_serde_json_on_edge_cases() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::String),
            Field::new("n", DataType::Int64),
            Field::new("f", DataType::Float64),
        ]);
        let decoder = RowDecoder::new(&schema);
        for &line in EDGE_CASES {
            let fast = decoder.decode(line).ok();
            let reference = std::str::from_utf8(line)
                .ok()
                .and_then(|text| decoder.decode_reference(text).ok().map(Row));
            assert_eq!(fast, reference, "{}", String::from_utf8_lossy(line));
        }
    }

    /// Decimal texts at a scale, rounded half up, against an oracle: exact rational arithmetic
    /// on the text's digits (i128), for every text of a grid of mantissas and exponents.
    #[test]
    fn decimals_are_exact_and_round_half_up() {
        type Parsed = Result<Option<i64>, NotADecimal>;
        let cases: &[(&str, u8, u8, Parsed)] = &[
            ("1.25", 10, 2, Ok(Some(125))),
            ("-1.25", 10, 1, Ok(Some(-13))),
            ("1.24", 10, 1, Ok(Some(12))),
            ("0.005", 10, 2, Ok(Some(1))),
            ("0.0049", 10, 2, Ok(Some(0))),
            ("12", 5, 3, Ok(Some(12_000))),
            ("1e3", 10, 2, Ok(Some(100_000))),
            ("125E-2", 10, 2, Ok(Some(125))),
            ("0.125e1", 10, 2, Ok(Some(125))),
            ("-0", 5, 2, Ok(Some(0))),
            ("0e999999999", 5, 2, Ok(Some(0))),
            // More digits than the precision: NULL, as Flink's `fromBigDecimal`.
            ("1234", 3, 0, Ok(None)),
            ("99.995", 4, 2, Ok(None)),
            ("99.994", 4, 2, Ok(Some(9999))),
            ("1e999999999", 18, 0, Ok(None)),
            ("9223372036854775807", 19, 0, Ok(Some(i64::MAX))),
            ("9223372036854775808", 19, 0, Ok(None)),
            (" 7 ", 3, 1, Ok(Some(70))),
            ("+7", 3, 1, Ok(Some(70))),
            ("", 3, 1, Err(NotADecimal)),
            (".", 3, 1, Err(NotADecimal)),
            ("1.2.3", 3, 1, Err(NotADecimal)),
            ("abc", 3, 1, Err(NotADecimal)),
            ("1e", 3, 1, Err(NotADecimal)),
            ("--1", 3, 1, Err(NotADecimal)),
        ];
        for (text, p, s, want) in cases {
            assert_eq!(
                parse_decimal(text, *p, *s),
                *want,
                "{text} at DECIMAL({p}, {s})"
            );
        }
        // The oracle: value = m * 10^e exactly; at scale s, m * 10^(e + s) rounded half up.
        for m in [
            0i128, 1, 5, 9, 15, 125, 994, 995, 12_345, 999_999, 1_000_001,
        ] {
            for e in -6i32..=4 {
                for s in 0u8..=4 {
                    let text = format!("{m}e{e}");
                    let k = e + i32::from(s);
                    let want = if k >= 0 {
                        m * 10i128.pow(k as u32)
                    } else {
                        let d = 10i128.pow((-k) as u32);
                        (m + d / 2) / d
                    };
                    let got = parse_decimal(&text, 18, s).unwrap();
                    assert_eq!(got, Some(want as i64), "{text} at scale {s}");
                    let neg = parse_decimal(&format!("-{text}"), 18, s).unwrap();
                    assert_eq!(neg, Some(-(want as i64)), "-{text} at scale {s}");
                }
            }
        }
    }

    /// A DECIMAL field reads a number's text exactly (not through a float), or a numeric
    /// string; too many digits is null in a nullable field; a non-number is a bad record.
    #[test]
    fn decimal_fields() {
        let schema = Schema::new(vec![
            Field::new(
                "m",
                DataType::Decimal {
                    precision: 18,
                    scale: 2,
                },
            ),
            Field::new(
                "p",
                DataType::Decimal {
                    precision: 3,
                    scale: 0,
                },
            ),
        ]);
        struct Exact;
        impl RowBuilder for Exact {
            type Value = Option<i64>;
            type Shape = ();
            fn shape(_: &Schema) {}
            fn null() -> Option<i64> {
                None
            }
            fn is_null(v: &Option<i64>) -> bool {
                v.is_none()
            }
            fn bool(_: bool) -> Option<i64> {
                None
            }
            fn int(i: i64) -> Option<i64> {
                Some(i)
            }
            fn float(_: f64) -> Option<i64> {
                None
            }
            fn string(_: String) -> Option<i64> {
                None
            }
            fn decimal(unscaled: i64, _: u8) -> Option<i64> {
                Some(unscaled)
            }
            fn row(_: &(), _: Vec<Option<i64>>) -> Option<i64> {
                None
            }
        }
        let decoder = RowDecoder::<Exact>::with_builder(&schema);
        let fields = |line: &str| decoder.decode_fields(line.as_bytes());
        // 0.1 + 2^53 is not a float: the text is read, not a double.
        assert_eq!(
            fields(r#"{"m": 90071992547409.93, "p": 12}"#),
            Ok(vec![Some(9_007_199_254_740_993), Some(12)])
        );
        assert_eq!(
            fields(r#"{"m": "-1.255", "p": "7"}"#),
            Ok(vec![Some(-126), Some(7)])
        );
        assert_eq!(
            fields(r#"{"m": 1e2, "p": 999.4}"#),
            Ok(vec![Some(10_000), Some(999)])
        );
        assert_eq!(fields(r#"{"m": null, "p": 999.5}"#), Ok(vec![None, None]));
        assert_eq!(
            fields(r#"{"m": "abc"}"#).unwrap_err(),
            "field `m`: \"abc\" is not a decimal number at column 11"
        );
        assert_eq!(
            fields(r#"{"m": true}"#).unwrap_err(),
            "wrong type for field `m`: expected a decimal number, found a boolean at column 10"
        );
        // The default builder's values are floats.
        let values = RowDecoder::new(&schema).decode(br#"{"m": 1.25, "p": 3}"#);
        assert_eq!(values, Ok(Row(vec![Value::Float(1.25), Value::Float(3.0)])));
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp_ms("1970-01-01 00:00:00"), Some(0));
        assert_eq!(parse_timestamp_ms("1970-01-01T00:00:01.5"), Some(1500));
        assert_eq!(parse_timestamp_ms("1969-12-31 23:59:59.999"), Some(-1));
        assert_eq!(
            parse_timestamp_ms("2024-02-29 12:34:56.789123456"),
            Some(1_709_210_096_789)
        );
        for bad in [
            "2023-02-29 00:00:00",
            "2024-01-01 24:00:00",
            "2024-01-01 00:00:00.",
            "2024-01-01 00:00:00.1234567890",
            "2024-01-01 00:00:00Z",
            "2024-1-01 00:00:00",
            "2024-01-01",
            "",
        ] {
            assert_eq!(parse_timestamp_ms(bad), None, "{bad}");
        }
    }
}
