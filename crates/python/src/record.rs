//! The records of Python jobs: what travels on the engine's edges, and how it meets Python.
//!
//! No Python object ever sits on a timely edge. A record is a [`Rec`]: pure Rust data that
//! mirrors Python's plain values (`None`, `bool`, `int`, `float`, `str`, `bytes`, `list`,
//! `tuple`, `dict`) and Spate's [`Row`]. Exchange, clone, drop and serialization never need the
//! interpreter, so records cross workers and processes as any Rust record does. A value of any
//! other type (a dataclass, a `set`, an `int` beyond 64 bits, a subclass of a plain type such
//! as a `namedtuple`) is pickled, and unpickled when it reaches Python again.
//!
//! Keys compare and hash by value *and* type (`1` and `1.0` are different keys, unlike in
//! Python); they are hashed in Rust, never with Python's per-process salted `hash()`, so every
//! process routes a key to the same worker.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use pyo3::exceptions::{PyAttributeError, PyIndexError, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyAny, PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::{Deserialize, Serialize};
use spate_types::Value;

/// The field names of a row; shared by every row of a stream.
pub type Names = Arc<Vec<String>>;

/// One record of a Python job.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub enum Rec {
    /// `None`.
    #[default]
    None,
    /// A `bool`.
    Bool(bool),
    /// An `int` that fits 64 bits.
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// A `bytes`.
    Bytes(Vec<u8>),
    /// A `list`.
    List(Vec<Rec>),
    /// A `tuple`.
    Tuple(Vec<Rec>),
    /// A `dict`, in insertion order.
    Dict(Vec<(Rec, Rec)>),
    /// A [`Row`]: its field names (none for a positional row) and values.
    Row(Option<Names>, Vec<Rec>),
    /// Any other Python object, pickled.
    Pickled(Vec<u8>),
}

impl Rec {
    /// A short name of the record's Python type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Rec::None => "None",
            Rec::Bool(_) => "bool",
            Rec::Int(_) => "int",
            Rec::Float(_) => "float",
            Rec::Str(_) => "str",
            Rec::Bytes(_) => "bytes",
            Rec::List(_) => "list",
            Rec::Tuple(_) => "tuple",
            Rec::Dict(_) => "dict",
            Rec::Row(..) => "Row",
            Rec::Pickled(_) => "a pickled object",
        }
    }

    /// The number as a float, for numeric aggregates.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Rec::Int(i) => Some(*i as f64),
            Rec::Float(f) => Some(*f),
            Rec::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }

    /// The field `name` of a row or the value of a `dict` under the string key `name`.
    pub fn field(&self, name: &str) -> Option<&Rec> {
        match self {
            Rec::Row(Some(names), values) => names
                .iter()
                .position(|n| n == name)
                .and_then(|i| values.get(i)),
            Rec::Dict(items) => items
                .iter()
                .find(|(k, _)| matches!(k, Rec::Str(s) if s == name))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The element at `index` of a row, tuple or list (negative counts from the end).
    pub fn item(&self, index: i64) -> Option<&Rec> {
        let items = match self {
            Rec::Row(_, v) | Rec::Tuple(v) | Rec::List(v) => v,
            _ => return None,
        };
        let i = if index < 0 {
            items.len().checked_sub(index.unsigned_abs() as usize)?
        } else {
            index as usize
        };
        items.get(i)
    }

    /// The engine's dynamic [`Value`] of this record (rows and tuples become lists).
    pub fn to_value(&self) -> Value {
        match self {
            Rec::None => Value::Null,
            Rec::Bool(b) => Value::Bool(*b),
            Rec::Int(i) => Value::Int(*i),
            Rec::Float(f) => Value::Float(*f),
            Rec::Str(s) => Value::Str(s.clone()),
            Rec::Bytes(b) => Value::List(b.iter().map(|x| Value::Int(i64::from(*x))).collect()),
            Rec::List(v) | Rec::Tuple(v) | Rec::Row(None, v) => {
                Value::List(v.iter().map(Rec::to_value).collect())
            }
            Rec::Row(Some(names), v) => Value::Map(
                names
                    .iter()
                    .cloned()
                    .zip(v.iter().map(Rec::to_value))
                    .collect(),
            ),
            Rec::Dict(items) => Value::Map(
                items
                    .iter()
                    .map(|(k, v)| (k.key_string(), v.to_value()))
                    .collect(),
            ),
            Rec::Pickled(_) => Value::Null,
        }
    }

    /// A record from the engine's dynamic [`Value`] (objects become `dict`s).
    pub fn from_value_owned(v: Value) -> Rec {
        match v {
            Value::Null => Rec::None,
            Value::Bool(b) => Rec::Bool(b),
            Value::Int(i) => Rec::Int(i),
            Value::Float(f) => Rec::Float(f),
            Value::Str(s) => Rec::Str(s),
            Value::List(items) => Rec::List(items.into_iter().map(Rec::from_value_owned).collect()),
            Value::Map(m) => Rec::Dict(
                m.into_iter()
                    .map(|(k, v)| (Rec::Str(k), Rec::from_value_owned(v)))
                    .collect(),
            ),
        }
    }

    /// The value at a field path, moved out of the record (the rest is dropped): what a
    /// projection such as `map(col("bid"))` gives, without a copy.
    pub fn take_path(self, path: &[crate::expr::Step]) -> Option<Rec> {
        let mut cur = self;
        for step in path {
            cur = match (step, cur) {
                (_, Rec::None) => return Some(Rec::None),
                (crate::expr::Step::Name(n), Rec::Row(Some(names), mut values)) => {
                    let i = names.iter().position(|x| x == n)?;
                    std::mem::take(values.get_mut(i)?)
                }
                (crate::expr::Step::Name(n), Rec::Dict(items)) => {
                    items
                        .into_iter()
                        .find(|(k, _)| matches!(k, Rec::Str(s) if s == n))?
                        .1
                }
                (
                    crate::expr::Step::Index(i),
                    Rec::Row(_, mut v) | Rec::Tuple(mut v) | Rec::List(mut v),
                ) => {
                    let j = if *i < 0 {
                        v.len().checked_sub(i.unsigned_abs() as usize)?
                    } else {
                        *i as usize
                    };
                    std::mem::take(v.get_mut(j)?)
                }
                _ => return None,
            };
        }
        Some(cur)
    }

    /// The record as a JSON object key: a string as it is, anything else as its text.
    fn key_string(&self) -> String {
        match self {
            Rec::Str(s) => s.clone(),
            other => other.to_string(),
        }
    }

    /// Whether the record is truthy in Python's sense (for filters given an expression).
    pub fn truthy(&self) -> bool {
        match self {
            Rec::None => false,
            Rec::Bool(b) => *b,
            Rec::Int(i) => *i != 0,
            Rec::Float(f) => *f != 0.0,
            Rec::Str(s) => !s.is_empty(),
            Rec::Bytes(b) => !b.is_empty(),
            Rec::List(v) | Rec::Tuple(v) | Rec::Row(_, v) => !v.is_empty(),
            Rec::Dict(v) => !v.is_empty(),
            Rec::Pickled(_) => true,
        }
    }
}

/// A float's bits for equality and hashing, with `-0.0` equal to `0.0`.
fn float_bits(f: f64) -> u64 {
    if f == 0.0 {
        0
    } else {
        f.to_bits()
    }
}

impl PartialEq for Rec {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Rec::None, Rec::None) => true,
            (Rec::Bool(a), Rec::Bool(b)) => a == b,
            (Rec::Int(a), Rec::Int(b)) => a == b,
            (Rec::Float(a), Rec::Float(b)) => float_bits(*a) == float_bits(*b),
            (Rec::Str(a), Rec::Str(b)) => a == b,
            (Rec::Bytes(a), Rec::Bytes(b)) | (Rec::Pickled(a), Rec::Pickled(b)) => a == b,
            (Rec::List(a), Rec::List(b)) | (Rec::Tuple(a), Rec::Tuple(b)) => a == b,
            (Rec::Dict(a), Rec::Dict(b)) => a == b,
            (Rec::Row(na, a), Rec::Row(nb, b)) => na == nb && a == b,
            _ => false,
        }
    }
}

impl Eq for Rec {}

impl Hash for Rec {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Rec::None => {}
            Rec::Bool(b) => b.hash(state),
            Rec::Int(i) => i.hash(state),
            Rec::Float(f) => float_bits(*f).hash(state),
            Rec::Str(s) => s.hash(state),
            Rec::Bytes(b) | Rec::Pickled(b) => b.hash(state),
            Rec::List(v) | Rec::Tuple(v) => v.hash(state),
            Rec::Dict(v) => v.hash(state),
            Rec::Row(n, v) => {
                n.hash(state);
                v.hash(state);
            }
        }
    }
}

/// Python's `repr` of a float: always with a fraction or an exponent.
fn write_float(f: &mut fmt::Formatter<'_>, x: f64) -> fmt::Result {
    if x.is_nan() {
        f.write_str("nan")
    } else if x.is_infinite() {
        f.write_str(if x > 0.0 { "inf" } else { "-inf" })
    } else if x.fract() == 0.0 && x.abs() < 1e16 {
        write!(f, "{x:.1}")
    } else {
        let s = format!("{x}");
        if s.len() > 17 && x.abs() >= 1e16 {
            write!(f, "{x:e}")
        } else {
            f.write_str(&s)
        }
    }
}

/// Python's `repr` of a string (single quotes unless the text holds one and no double).
fn write_str_repr(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    write!(f, "{quote}")?;
    for c in s.chars() {
        match c {
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if c == quote => write!(f, "\\{c}")?,
            c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(f, "\\x{:02x}", c as u32)?,
            c => write!(f, "{c}")?,
        }
    }
    write!(f, "{quote}")
}

/// A record's Python `repr` (what `print` shows for it inside a container).
pub struct Repr<'a>(pub &'a Rec);

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seq = |f: &mut fmt::Formatter<'_>, items: &[Rec]| -> fmt::Result {
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{}", Repr(x))?;
            }
            Ok(())
        };
        match self.0 {
            Rec::None => f.write_str("None"),
            Rec::Bool(b) => f.write_str(if *b { "True" } else { "False" }),
            Rec::Int(i) => write!(f, "{i}"),
            Rec::Float(x) => write_float(f, *x),
            Rec::Str(s) => write_str_repr(f, s),
            Rec::Bytes(b) => {
                f.write_str("b'")?;
                for &c in b {
                    match c {
                        b'\\' => f.write_str("\\\\")?,
                        b'\'' => f.write_str("\\'")?,
                        b'\n' => f.write_str("\\n")?,
                        b'\r' => f.write_str("\\r")?,
                        b'\t' => f.write_str("\\t")?,
                        0x20..=0x7e => write!(f, "{}", c as char)?,
                        c => write!(f, "\\x{c:02x}")?,
                    }
                }
                f.write_str("'")
            }
            Rec::List(v) => {
                f.write_str("[")?;
                seq(f, v)?;
                f.write_str("]")
            }
            Rec::Tuple(v) => {
                f.write_str("(")?;
                seq(f, v)?;
                f.write_str(if v.len() == 1 { ",)" } else { ")" })
            }
            Rec::Dict(items) => {
                f.write_str("{")?;
                for (i, (k, v)) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}: {}", Repr(k), Repr(v))?;
                }
                f.write_str("}")
            }
            Rec::Row(names, v) => {
                f.write_str("Row(")?;
                match names {
                    Some(names) => {
                        for (i, (n, x)) in names.iter().zip(v).enumerate() {
                            if i > 0 {
                                f.write_str(", ")?;
                            }
                            write!(f, "{n}={}", Repr(x))?;
                        }
                    }
                    None => seq(f, v)?,
                }
                f.write_str(")")
            }
            Rec::Pickled(bytes) => Python::attach(|py| {
                match unpickle(py, bytes).and_then(|o| o.repr().map(|r| r.to_string())) {
                    Ok(s) => f.write_str(&s),
                    Err(_) => f.write_str("<unprintable object>"),
                }
            }),
        }
    }
}

/// A record's Python `str`: a string as it is, anything else as its `repr`.
impl fmt::Display for Rec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rec::Str(s) => f.write_str(s),
            Rec::Pickled(bytes) => Python::attach(|py| {
                match unpickle(py, bytes).and_then(|o| o.str().map(|r| r.to_string())) {
                    Ok(s) => f.write_str(&s),
                    Err(_) => f.write_str("<unprintable object>"),
                }
            }),
            other => Repr(other).fmt(f),
        }
    }
}

static DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static OBJECT_GETATTRIBUTE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn pickle(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let py = obj.py();
    let dumps = DUMPS.import(py, "pickle", "dumps")?;
    let bytes = dumps.call1((obj, 5))?;
    Ok(bytes.cast::<PyBytes>()?.as_bytes().to_vec())
}

fn unpickle<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let loads = LOADS.import(py, "pickle", "loads")?;
    loads.call1((PyBytes::new(py, bytes),))
}

/// Converts a Python object into a record.
pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Rec> {
    if obj.is_none() {
        return Ok(Rec::None);
    }
    if let Ok(b) = obj.cast_exact::<PyBool>() {
        return Ok(Rec::Bool(b.is_true()));
    }
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        return Ok(match i.extract::<i64>() {
            Ok(v) => Rec::Int(v),
            Err(_) => Rec::Pickled(pickle(obj)?),
        });
    }
    if let Ok(x) = obj.cast_exact::<PyFloat>() {
        return Ok(Rec::Float(x.value()));
    }
    if let Ok(s) = obj.cast_exact::<PyString>() {
        return Ok(Rec::Str(s.to_str()?.to_owned()));
    }
    if let Ok(t) = obj.cast_exact::<PyTuple>() {
        return Ok(Rec::Tuple(
            t.iter().map(|x| from_py(&x)).collect::<PyResult<_>>()?,
        ));
    }
    if let Ok(l) = obj.cast_exact::<PyList>() {
        return Ok(Rec::List(
            l.iter().map(|x| from_py(&x)).collect::<PyResult<_>>()?,
        ));
    }
    if let Ok(d) = obj.cast_exact::<PyDict>() {
        let mut items = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            items.push((from_py(&k)?, from_py(&v)?));
        }
        return Ok(Rec::Dict(items));
    }
    if let Ok(row) = obj.cast_exact::<Row>() {
        let row = row.get();
        return Ok(Rec::Row(row.names.clone(), row.values.clone()));
    }
    if let Ok(b) = obj.cast_exact::<PyBytes>() {
        return Ok(Rec::Bytes(b.as_bytes().to_vec()));
    }
    Ok(Rec::Pickled(pickle(obj)?))
}

/// Whether `path` leads somewhere in `r` (through `None`, it does: to `None`).
pub fn has_path(r: &Rec, path: &[crate::expr::Step]) -> bool {
    let mut cur = r;
    for step in path {
        if matches!(cur, Rec::None) {
            return true;
        }
        let next = match step {
            crate::expr::Step::Name(n) => cur.field(n),
            crate::expr::Step::Index(i) => cur.item(*i),
        };
        match next {
            Some(x) => cur = x,
            None => return false,
        }
    }
    true
}

/// Moves a record into a Python object (a row's values move into the lazy [`Row`]).
pub fn into_py(py: Python<'_>, rec: Rec) -> PyResult<Bound<'_, PyAny>> {
    match rec {
        Rec::Row(names, values) => Ok(Bound::new(py, Row { names, values })?.into_any()),
        Rec::Str(s) => Ok(PyString::new(py, &s).into_any()),
        other => to_py(py, &other),
    }
}

/// Converts a record into a Python object (a row becomes a lazy [`Row`]).
pub fn to_py<'py>(py: Python<'py>, rec: &Rec) -> PyResult<Bound<'py, PyAny>> {
    Ok(match rec {
        Rec::None => py.None().into_bound(py),
        Rec::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Rec::Int(i) => i.into_pyobject(py)?.into_any(),
        Rec::Float(x) => PyFloat::new(py, *x).into_any(),
        Rec::Str(s) => PyString::new(py, s).into_any(),
        Rec::Bytes(b) => PyBytes::new(py, b).into_any(),
        Rec::List(v) => PyList::new(
            py,
            v.iter()
                .map(|x| to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any(),
        Rec::Tuple(v) => PyTuple::new(
            py,
            v.iter()
                .map(|x| to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any(),
        Rec::Dict(items) => {
            let d = PyDict::new(py);
            for (k, v) in items {
                d.set_item(to_py(py, k)?, to_py(py, v)?)?;
            }
            d.into_any()
        }
        Rec::Row(names, values) => Bound::new(
            py,
            Row {
                names: names.clone(),
                values: values.clone(),
            },
        )?
        .into_any(),
        Rec::Pickled(bytes) => unpickle(py, bytes)?,
    })
}

/// A row of named (or positional) fields, as PyFlink's `Row`.
///
/// `Row(auction=1, price=20)` builds a named row and `Row(1, 20)` a positional one. Fields
/// read as attributes (`row.price`), by name (`row["price"]`) or by position (`row[1]`); a
/// row is also a sequence of its values. Rows that come from the engine convert each field
/// when it is read, not before, and a row handed back unchanged goes back without conversion.
#[pyclass(module = "spate._native", name = "Row", frozen)]
pub struct Row {
    pub(crate) names: Option<Names>,
    pub(crate) values: Vec<Rec>,
}

impl Row {
    fn index(&self, key: &Bound<'_, PyAny>) -> PyResult<usize> {
        // A type check first: a failed `extract` builds an exception, per field read.
        if key.is_instance_of::<PyInt>() {
            let i: i64 = key.extract()?;
            let n = self.values.len() as i64;
            let j = if i < 0 { i + n } else { i };
            if j < 0 || j >= n {
                return Err(PyIndexError::new_err("row index out of range"));
            }
            return Ok(j as usize);
        }
        if let Ok(name) = key.extract::<&str>() {
            return self
                .names
                .as_ref()
                .and_then(|ns| ns.iter().position(|n| n == name))
                .ok_or_else(|| PyKeyError::new_err(name.to_owned()));
        }
        Err(PyTypeError::new_err(
            "a row is indexed by a field name or a position",
        ))
    }
}

#[pymethods]
impl Row {
    #[new]
    #[pyo3(signature = (*args, **kwargs))]
    fn new(args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        match kwargs {
            Some(kw) if !kw.is_empty() => {
                if !args.is_empty() {
                    return Err(PyTypeError::new_err(
                        "a Row takes either positional values or named fields, not both",
                    ));
                }
                let mut names = Vec::with_capacity(kw.len());
                let mut values = Vec::with_capacity(kw.len());
                for (k, v) in kw.iter() {
                    names.push(k.extract::<String>()?);
                    values.push(from_py(&v)?);
                }
                Ok(Row {
                    names: Some(intern(names)),
                    values,
                })
            }
            _ => Ok(Row {
                names: None,
                values: args.iter().map(|x| from_py(&x)).collect::<PyResult<_>>()?,
            }),
        }
    }

    fn __getattribute__<'py>(
        slf: &Bound<'py, Self>,
        name: &Bound<'py, PyString>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // Fields first: the normal lookup would fail, building an `AttributeError`, before
        // `__getattr__` ran (500 ns per field read instead of 50).
        let row = slf.get();
        if let Some(names) = &row.names {
            let n = name.to_str()?;
            if let Some(i) = names.iter().position(|x| x == n) {
                return to_py(slf.py(), &row.values[i]);
            }
        }
        OBJECT_GETATTRIBUTE
            .import(slf.py(), "builtins", "object")?
            .getattr(pyo3::intern!(slf.py(), "__getattribute__"))?
            .call1((slf, name))
    }

    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let i = self
            .names
            .as_ref()
            .and_then(|ns| ns.iter().position(|n| n == name))
            .ok_or_else(|| PyAttributeError::new_err(format!("the row has no field `{name}`")))?;
        to_py(py, &self.values[i])
    }

    fn __getitem__<'py>(&self, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let i = self.index(key)?;
        to_py(key.py(), &self.values[i])
    }

    fn __len__(&self) -> usize {
        self.values.len()
    }

    fn __contains__(&self, name: &str) -> bool {
        self.names
            .as_ref()
            .is_some_and(|ns| ns.iter().any(|n| n == name))
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let items = self
            .values
            .iter()
            .map(|x| to_py(py, x))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)?
            .into_any()
            .try_iter()
            .map(Bound::into_any)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast_exact::<Row>() {
            Ok(o) => {
                let o = o.get();
                self.names == o.names && self.values == o.values
            }
            Err(_) => false,
        }
    }

    fn __hash__(&self) -> u64 {
        spate_types::keygroup::stable_hash(&(&self.names, &self.values))
    }

    fn __repr__(&self) -> String {
        Repr(&Rec::Row(self.names.clone(), self.values.clone())).to_string()
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        // Pickles as `_row(names, values)`, so rows inside pickled objects survive.
        let py = slf.py();
        let row = slf.get();
        let names = match &row.names {
            Some(ns) => PyList::new(py, ns.iter())?.into_any(),
            None => py.None().into_bound(py),
        };
        let values = PyList::new(
            py,
            row.values
                .iter()
                .map(|x| to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?,
        )?;
        let make = py.import("spate._native")?.getattr("_row")?;
        PyTuple::new(
            py,
            [
                make,
                PyTuple::new(py, [names, values.into_any()])?.into_any(),
            ],
        )
        .map(Bound::into_any)
    }

    /// The field names, or `None` for a positional row (PyFlink's `Row._fields`).
    #[getter]
    fn _fields(&self) -> Option<Vec<String>> {
        self.names.as_ref().map(|ns| ns.to_vec())
    }

    /// The row as a `dict` of its fields (PyFlink's `Row.as_dict`).
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let names = self
            .names
            .as_ref()
            .ok_or_else(|| PyTypeError::new_err("a positional row has no field names"))?;
        let d = PyDict::new(py);
        for (n, v) in names.iter().zip(&self.values) {
            d.set_item(n, to_py(py, v)?)?;
        }
        Ok(d)
    }
}

/// Rebuilds a pickled [`Row`].
#[pyfunction]
pub fn _row(names: Option<Vec<String>>, values: &Bound<'_, PyList>) -> PyResult<Row> {
    Ok(Row {
        names: names.map(intern),
        values: values
            .iter()
            .map(|x| from_py(&x))
            .collect::<PyResult<_>>()?,
    })
}

thread_local! {
    static NAMES: std::cell::RefCell<Vec<Names>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// One shared [`Names`] per list of field names (per thread), so that rows built in Python
/// share their names as engine rows do.
pub fn intern(names: Vec<String>) -> Names {
    NAMES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(n) = cache.iter().find(|n| ***n == names) {
            return Arc::clone(n);
        }
        let n = Arc::new(names);
        if cache.len() < 256 {
            cache.push(Arc::clone(&n));
        }
        n
    })
}
