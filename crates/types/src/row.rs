//! Declared schemas and the rows they describe: the record of the SQL and Python fronts.
//!
//! A [`Schema`] is an ordered list of named, typed [`Field`]s, as a Flink table's columns are.
//! A [`Row`] holds one [`Value`] per field, in the schema's order, so a field is read by its
//! position ([`Schema::index_of`] finds it once, not per record). Each [`DataType`] has one
//! representation, documented on its variant, so that every front reads the same values:
//!
//! | type | value |
//! |---|---|
//! | [`DataType::Bool`] | [`Value::Bool`] |
//! | [`DataType::Int64`] | [`Value::Int`] |
//! | [`DataType::Float64`] | [`Value::Float`] |
//! | [`DataType::String`] | [`Value::Str`] |
//! | [`DataType::Timestamp`] | [`Value::Int`]: milliseconds since the epoch, UTC (Flink's `TIMESTAMP(3)`) |
//! | [`DataType::Decimal`] | [`Value::Float`] (a front with exact decimals of its own, as the SQL front's, keeps the exact value) |
//! | [`DataType::Row`] | [`Value::List`]: the nested row's values in its schema's order |
//!
//! and [`Value::Null`] for a missing or `null` value of a nullable field. Decoders (such as the
//! JSON-lines source's) check every value against its field, so a row never holds a value of
//! another type, nor a `null` in a field that is not nullable.

use serde::{Deserialize, Serialize};

use crate::Value;

/// The type of a [`Field`]. See the [module docs](self) for each type's [`Value`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    /// `BOOLEAN`.
    Bool,
    /// `BIGINT`: a 64-bit signed integer.
    Int64,
    /// `DOUBLE`: a 64-bit float (an integer is taken as a float).
    Float64,
    /// `STRING`.
    String,
    /// `TIMESTAMP(3)`: milliseconds since the epoch, UTC. In JSON, a
    /// `YYYY-MM-DD HH:MM:SS[.fff]` string (Flink's `SQL` timestamp format; a `T` between date
    /// and time, ISO-8601's form, is accepted too, and digits after the milliseconds are
    /// truncated) or an integer of epoch milliseconds.
    Timestamp,
    /// `DECIMAL(precision, scale)`: an exact decimal of at most `precision` digits, `scale`
    /// of them after the point, read from a number or a numeric string, rounded half up to
    /// the scale (as Flink's JSON format reads it); a value with more digits is `null`.
    Decimal {
        /// Digits in all.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// `ROW<...>`: a nested row with its own schema.
    Row(Schema),
}

/// One named, typed field of a [`Schema`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Field {
    /// The field's name (in JSON: the key, compared exactly).
    pub name: String,
    /// The field's type.
    pub data_type: DataType,
    /// Whether the field may be `null` (or missing).
    pub nullable: bool,
}

impl Field {
    /// A nullable field, as Flink's columns are unless declared `NOT NULL`.
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        Field {
            name: name.into(),
            data_type,
            nullable: true,
        }
    }

    /// A field that must be present and not `null` (`NOT NULL`).
    pub fn not_null(name: impl Into<String>, data_type: DataType) -> Self {
        Field {
            nullable: false,
            ..Field::new(name, data_type)
        }
    }
}

/// An ordered list of fields: the columns of a table, or of a nested row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Schema {
    fields: Vec<Field>,
}

impl Schema {
    /// A schema of `fields`, in that order.
    ///
    /// # Panics
    ///
    /// If two fields have the same name (a schema is written by the job's author, so this is
    /// a programming error; see [`Schema::try_new`] for schemas that come from elsewhere).
    pub fn new(fields: Vec<Field>) -> Self {
        Self::try_new(fields).expect("a schema's field names must be unique")
    }

    /// A schema of `fields`, or an error naming a field given twice.
    pub fn try_new(fields: Vec<Field>) -> Result<Self, String> {
        for (i, field) in fields.iter().enumerate() {
            if fields[..i].iter().any(|f| f.name == field.name) {
                return Err(format!("the field `{}` is declared twice", field.name));
            }
        }
        Ok(Schema { fields })
    }

    /// The fields, in order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether the schema has no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The position of the field `name` (in every [`Row`] of this schema).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }
}

/// One record of a [`Schema`]: a value per field, in the schema's order.
///
/// A row does not carry its schema (every row of a stream has the same one, known to the
/// operators that read it). It serializes as the sequence of its values: a JSON array in
/// human-readable formats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Row(pub Vec<Value>);

impl Row {
    /// The value at `index` (a position from [`Schema::index_of`]), or `None` past the end.
    pub fn get(&self, index: usize) -> Option<&Value> {
        self.0.get(index)
    }

    /// The values, in the schema's order.
    pub fn values(&self) -> &[Value] {
        &self.0
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the row has no value.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_fields_and_refuses_duplicates() {
        let schema = Schema::new(vec![
            Field::not_null("id", DataType::Int64),
            Field::new("name", DataType::String),
        ]);
        assert_eq!(schema.index_of("name"), Some(1));
        assert_eq!(schema.index_of("nope"), None);
        assert!(!schema.fields()[0].nullable && schema.fields()[1].nullable);
        let err = Schema::try_new(vec![
            Field::new("a", DataType::Bool),
            Field::new("a", DataType::Int64),
        ])
        .unwrap_err();
        assert_eq!(err, "the field `a` is declared twice");
    }

    #[test]
    fn a_row_is_its_values() {
        let row = Row(vec![Value::Int(1), Value::Str("x".into()), Value::Null]);
        assert_eq!(serde_json::to_string(&row).unwrap(), r#"[1,"x",null]"#);
        assert_eq!(row.get(1), Some(&Value::Str("x".into())));
        assert_eq!(row.get(3), None);
    }
}
