//! From the plan that the Python objects describe to a [`StreamEnv`] of engine operators.
//!
//! `spate.datastream` records each operation as a node: a `dict` with its `id`, `op`,
//! `inputs`, optional `name` and `uid`, and the operation's arguments. [`build`] walks the nodes
//! in order (every node's inputs come before it) and calls the Rust DataStream API: a Python
//! job runs on the same operators as a Rust one. Three rules keep Python off the per-record
//! path:
//!
//! * An operation given a native spec (a field name, an [`Expr`], a built-in aggregate)
//!   compiles to a Rust closure; no Python runs for it.
//! * Consecutive Python `map` / `filter` / `flat_map` functions on a forward edge, each
//!   the only consumer of the one before, are *fused* into one [`PyStage`]: one operator that
//!   enters the interpreter once per batch, converts each record once on the way in and once
//!   on the way out, and passes Python objects between the functions.
//! * A Python key selector runs in such a stage too (it pairs each record with its key), so
//!   the key is hashed in Rust.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use spate_connectors::files::json::RowDecoder;
use spate_connectors::{
    CollectHandle, CollectSink, CollectionSource, CsvSource, FileSink, JsonLinesSource,
    RollingPolicy, SequenceSource, SocketTextSource,
};
use spate_dataflow::{
    DataStream, EventTimeSessionWindows, KeyedStream, ProcessingTimeSessionWindows,
    SlidingEventTimeWindows, SlidingProcessingTimeWindows, StreamEnv, TimeWindow,
    TumblingEventTimeWindows, TumblingProcessingTimeWindows, WatermarkStrategy, WindowAssigner,
    WindowContext, WindowedStream,
};
use spate_types::{BadRecordPolicy, DataType, Field, Schema, Value};

use crate::agg::{AggSpec, Aggregates};
use crate::expr::Expr;
use crate::record::{from_py, intern, into_py, to_py, Names, Rec};
use crate::sinks::PrintSink;

/// Python functions called by the running job (a job metric: 0 on an all-native plan).
pub static PYTHON_CALLS: AtomicU64 = AtomicU64::new(0);

/// The first Python exception of the running job, re-raised by `execute` as the cause.
pub static FIRST_ERROR: Mutex<Option<PyErr>> = Mutex::new(None);

/// Formats a Python exception with its traceback, keeps the first one for `execute`, and
/// returns the text that fails the job.
pub fn python_error(py: Python<'_>, err: PyErr) -> String {
    // The traceback belongs to the exception object too, so that `__cause__` shows it.
    let tb = err.traceback(py);
    let value = err.value(py).clone();
    if let Some(tb) = &tb {
        let _ = value.setattr("__traceback__", tb);
    }
    let text = py
        .import("traceback")
        .and_then(|m| m.call_method1("format_exception", (value.get_type(), &value, tb)))
        .and_then(|lines| lines.extract::<Vec<String>>())
        .map(|lines| lines.concat())
        .unwrap_or_else(|_| err.to_string());
    let mut first = FIRST_ERROR.lock().unwrap_or_else(|p| p.into_inner());
    if first.is_none() {
        *first = Some(PyErr::from_value(value.into_any()));
    }
    format!("Python exception\n{}", text.trim_end())
}

/// A Python function or a native spec.
enum Fun {
    Py(Arc<Py<PyAny>>),
    Native(Arc<Expr>),
}

fn fun(args: &Bound<'_, PyDict>, op: &str) -> PyResult<Fun> {
    if let Some(e) = args.get_item("expr")? {
        if !e.is_none() {
            return Ok(Fun::Native(Arc::new(Expr::compile(&e)?)));
        }
    }
    match args.get_item("fn")? {
        Some(f) if f.is_callable() => Ok(Fun::Py(Arc::new(f.unbind()))),
        _ => Err(PyTypeError::new_err(format!(
            "{op} takes a function or a native expression"
        ))),
    }
}

/// One step of a fused Python stage.
#[derive(Clone)]
enum PyStep {
    Map(Arc<Py<PyAny>>),
    Filter(Arc<Py<PyAny>>),
    FlatMap(Arc<Py<PyAny>>),
    /// Pairs the record with its key: `(key, record)`.
    Key(Arc<Py<PyAny>>),
}

/// Runs `steps` on one Python object, pushing the results.
fn run_steps<'py>(
    steps: &[PyStep],
    obj: Bound<'py, PyAny>,
    ts: i64,
    out: &mut Vec<(i64, Rec)>,
) -> PyResult<()> {
    let Some((step, rest)) = steps.split_first() else {
        out.push((ts, from_py(&obj)?));
        return Ok(());
    };
    let py = obj.py();
    PYTHON_CALLS.fetch_add(1, Ordering::Relaxed);
    match step {
        PyStep::Map(f) => run_steps(rest, f.bind(py).call1((obj,))?, ts, out),
        PyStep::Filter(f) => {
            if f.bind(py).call1((&obj,))?.is_truthy()? {
                run_steps(rest, obj, ts, out)
            } else {
                Ok(())
            }
        }
        PyStep::FlatMap(f) => {
            let items = f.bind(py).call1((obj,))?;
            if items.is_none() {
                return Ok(());
            }
            for item in items.try_iter()? {
                run_steps(rest, item?, ts, out)?;
            }
            Ok(())
        }
        PyStep::Key(f) => {
            let key = from_py(&f.bind(py).call1((&obj,))?)?;
            let value = from_py(&obj)?;
            if rest.is_empty() {
                out.push((ts, Rec::Tuple(vec![key, value])));
                Ok(())
            } else {
                Err(PyValueError::new_err("a key selector ends its stage"))
            }
        }
    }
}

/// A fused stage that has not become an operator yet.
struct PyStage {
    input: DataStream<Rec>,
    steps: Vec<PyStep>,
    names: Vec<String>,
}

impl PyStage {
    fn materialize(self) -> DataStream<Rec> {
        let steps = self.steps;
        self.input
            .try_flat_map_batches(move |batch, out| {
                Python::attach(|py| {
                    let r: PyResult<()> = (|| {
                        for (ts, rec) in batch.drain(..) {
                            let obj = into_py(py, rec)?;
                            run_steps(&steps, obj, ts, out)?;
                        }
                        Ok(())
                    })();
                    r.map_err(|e| python_error(py, e))
                })
            })
            .name(&self.names.join(" -> "))
    }
}

/// How a keyed stream finds its key.
#[derive(Clone)]
enum KeyOf {
    /// By a native spec on the record.
    Native,
    /// The records are `(key, record)` pairs made by a Python key selector.
    Paired,
}

/// A keyed stream of the plan.
#[derive(Clone)]
struct Keyed {
    stream: KeyedStream<Rec, Rec>,
    key: KeyOf,
}

impl KeyOf {
    /// The record itself, without the pair of a Python key.
    fn value<'a>(&self, r: &'a Rec) -> &'a Rec {
        match (self, r) {
            (KeyOf::Paired, Rec::Tuple(p)) if p.len() == 2 => &p[1],
            _ => r,
        }
    }

    /// `r` with its record replaced by `v`.
    fn rewrap(&self, r: &Rec, v: Rec) -> Rec {
        match (self, r) {
            (KeyOf::Paired, Rec::Tuple(p)) if p.len() == 2 => Rec::Tuple(vec![p[0].clone(), v]),
            _ => v,
        }
    }
}

impl Keyed {
    /// A stream of keyed results back to plain records.
    fn unwrap(&self, s: DataStream<Rec>) -> DataStream<Rec> {
        match self.key {
            KeyOf::Paired => s
                .map(|r: Rec| match r {
                    Rec::Tuple(mut p) if p.len() == 2 => p.pop().unwrap_or_default(),
                    other => other,
                })
                .name("unpair"),
            KeyOf::Native => s,
        }
    }
}

/// What a node has become.
enum Built {
    Stream(DataStream<Rec>),
    Stage(PyStage),
    Keyed(Keyed),
    Window(Py<PyDict>, Keyed),
    Sink,
}

/// Handles of the `collect` sinks, by node id.
pub type Collected = Vec<(usize, CollectHandle<Rec>)>;

/// The plan's nodes, read into the engine.
pub struct Builder<'py> {
    py: Python<'py>,
    env: StreamEnv,
    built: HashMap<usize, Built>,
    /// Each node's consumers.
    consumers: HashMap<usize, Vec<usize>>,
    /// What the job reads of each JSON-lines source's records, when less than everything.
    reads: HashMap<usize, crate::prune::Reads>,
    /// The `collect` sinks' handles.
    pub collected: Collected,
}

fn get<'py, T>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<T>
where
    T: for<'a> FromPyObject<'a, 'py>,
{
    d.get_item(key)?
        .ok_or_else(|| PyValueError::new_err(format!("the plan node has no `{key}`")))?
        .extract()
        .map_err(Into::into)
}

fn opt<'py, T>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>>
where
    T: for<'a> FromPyObject<'a, 'py>,
{
    match d.get_item(key)? {
        Some(v) if !v.is_none() => Ok(Some(v.extract().map_err(Into::into)?)),
        _ => Ok(None),
    }
}

fn ms(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<Duration>> {
    Ok(opt::<i64>(d, key)?.map(|v| Duration::from_millis(v.max(0) as u64)))
}

/// A declared type (`spate.Types`) as a field type.
fn data_type(t: &Bound<'_, PyAny>) -> PyResult<DataType> {
    let kind: String = t.getattr("kind")?.extract()?;
    Ok(match kind.as_str() {
        "BOOLEAN" => DataType::Bool,
        "INT" | "LONG" | "BIGINT" | "SHORT" | "BYTE" => DataType::Int64,
        "FLOAT" | "DOUBLE" => DataType::Float64,
        "STRING" => DataType::String,
        "TIMESTAMP" => DataType::Timestamp,
        "ROW" => DataType::Row(schema(t)?),
        other => {
            return Err(PyTypeError::new_err(format!(
                "a file schema cannot hold a field of type {other}"
            )))
        }
    })
}

/// A `Types.ROW_NAMED(...)` as a schema.
fn schema(t: &Bound<'_, PyAny>) -> PyResult<Schema> {
    let names: Vec<String> = t.getattr("names")?.extract()?;
    let types = t.getattr("types")?;
    let mut fields = Vec::with_capacity(names.len());
    for (name, ty) in names.into_iter().zip(types.try_iter()?) {
        fields.push(Field::new(name, data_type(&ty?)?));
    }
    Schema::try_new(fields).map_err(PyValueError::new_err)
}

/// Decodes JSON lines of a declared row type straight into records: rows whose field names
/// are interned once per (nested) schema and shared by every record.
struct RecRows;

impl spate_connectors::files::json::RowBuilder for RecRows {
    type Value = Rec;
    type Shape = Names;
    fn shape(schema: &Schema) -> Names {
        intern(schema.fields().iter().map(|f| f.name.clone()).collect())
    }
    fn null() -> Rec {
        Rec::None
    }
    fn is_null(value: &Rec) -> bool {
        matches!(value, Rec::None)
    }
    fn bool(b: bool) -> Rec {
        Rec::Bool(b)
    }
    fn int(i: i64) -> Rec {
        Rec::Int(i)
    }
    fn float(f: f64) -> Rec {
        Rec::Float(f)
    }
    fn string(s: String) -> Rec {
        Rec::Str(s)
    }
    fn row(names: &Names, values: Vec<Rec>) -> Rec {
        Rec::Row(Some(Arc::clone(names)), values)
    }
}

/// The names of a schema and its nested rows, shared by every record.
#[derive(Clone)]
struct RowShape {
    names: Names,
    nested: Vec<Option<RowShape>>,
}

impl RowShape {
    fn of(schema: &Schema) -> Self {
        RowShape {
            names: intern(schema.fields().iter().map(|f| f.name.clone()).collect()),
            nested: schema
                .fields()
                .iter()
                .map(|f| match &f.data_type {
                    DataType::Row(s) => Some(RowShape::of(s)),
                    _ => None,
                })
                .collect(),
        }
    }

    fn rec(&self, values: Vec<Value>) -> Rec {
        Rec::Row(
            Some(Arc::clone(&self.names)),
            values
                .into_iter()
                .zip(&self.nested)
                .map(|(v, shape)| match (v, shape) {
                    (Value::List(inner), Some(shape)) => shape.rec(inner),
                    (v, _) => Rec::from_value_owned(v),
                })
                .collect(),
        )
    }
}

fn policy(d: &Bound<'_, PyDict>) -> PyResult<Option<BadRecordPolicy>> {
    Ok(match opt::<String>(d, "bad_records")?.as_deref() {
        None | Some("fail") => None,
        Some("drop") => Some(BadRecordPolicy::Drop),
        Some(other) => match other.strip_prefix("dead_letter:") {
            Some(path) => Some(BadRecordPolicy::DeadLetter(path.into())),
            None => {
                return Err(PyValueError::new_err(format!(
                    "unknown bad-record policy `{other}` (fail, drop or dead_letter(path))"
                )))
            }
        },
    })
}

impl<'py> Builder<'py> {
    /// A builder of a job with `config`; `nodes` is the whole plan (for each node's
    /// consumers, and what they read of the sources).
    pub fn new(
        py: Python<'py>,
        config: spate_dataflow::JobConfig,
        nodes: &Bound<'py, PyList>,
    ) -> PyResult<Self> {
        let mut consumers: HashMap<usize, Vec<usize>> = HashMap::new();
        for node in nodes.iter() {
            let node = node.cast_into::<PyDict>()?;
            let id: usize = get(&node, "id")?;
            for i in get::<Vec<usize>>(&node, "inputs")? {
                consumers.entry(i).or_default().push(id);
            }
        }
        let reads = crate::prune::source_reads(nodes, &consumers)?;
        Ok(Builder {
            py,
            env: StreamEnv::new(config),
            built: HashMap::new(),
            consumers,
            reads,
            collected: Vec::new(),
        })
    }

    /// The environment, once every node is built.
    pub fn finish(self) -> (StreamEnv, Collected) {
        (self.env, self.collected)
    }

    fn take(&mut self, id: usize) -> PyResult<Built> {
        self.built.remove(&id).ok_or_else(|| {
            PyValueError::new_err(format!("plan node {id} is used before it is built"))
        })
    }

    /// The stream of node `id` (a pending stage becomes its operator).
    fn stream(&mut self, id: usize) -> PyResult<DataStream<Rec>> {
        let s = match self.take(id)? {
            Built::Stream(s) => s,
            Built::Stage(stage) => stage.materialize(),
            Built::Keyed(_) => {
                return Err(PyTypeError::new_err(
                    "a keyed stream needs a keyed operation (reduce, sum, window, process, ...) before this one",
                ))
            }
            Built::Window(..) => {
                return Err(PyTypeError::new_err(
                    "a windowed stream needs a window function (reduce, aggregate, process) before this one",
                ))
            }
            Built::Sink => return Err(PyTypeError::new_err("a sink has no output")),
        };
        self.built.insert(id, Built::Stream(s.clone()));
        Ok(s)
    }

    fn keyed(&mut self, id: usize) -> PyResult<Keyed> {
        match self.built.get(&id) {
            Some(Built::Keyed(k)) => Ok(k.clone()),
            _ => Err(PyTypeError::new_err(
                "this operation needs a keyed stream (key_by first)",
            )),
        }
    }

    /// Builds one node.
    pub fn node(&mut self, node: &Bound<'py, PyDict>) -> PyResult<()> {
        let id: usize = get(node, "id")?;
        let op: String = get(node, "op")?;
        let inputs: Vec<usize> = get(node, "inputs")?;
        let name: Option<String> = opt(node, "name")?;
        let uid: Option<String> = opt(node, "uid")?;
        let label = name.clone().unwrap_or_else(|| op.clone());
        let input = inputs.first().copied();
        let named = |s: DataStream<Rec>| labelled(s, &name, &uid);
        let built = match op.as_str() {
            // --- sources ---------------------------------------------------------------------
            "collection" => {
                let items: Bound<'py, PyList> = get(node, "items")?;
                let recs = items
                    .iter()
                    .map(|x| from_py(&x))
                    .collect::<PyResult<Vec<_>>>()?;
                Built::Stream(named(self.env.from_source(CollectionSource::new(recs))))
            }
            "sequence" => {
                let start: u64 = get(node, "start")?;
                let end: Option<u64> = opt(node, "end")?;
                let mut src = SequenceSource::new(start, end);
                if let Some(rate) = opt::<f64>(node, "rate")? {
                    src = src.rate(rate);
                }
                let s = self.env.from_source(src).map(|v: u64| Rec::Int(v as i64));
                Built::Stream(named(s))
            }
            "nexmark" => {
                let mut config = spate_nexmark::generator::GeneratorConfig {
                    events: opt(node, "events")?,
                    ..Default::default()
                };
                if let Some(seed) = opt(node, "seed")? {
                    config.seed = seed;
                }
                if let Some(rate) = opt(node, "event_rate")? {
                    config.rate = rate;
                }
                config.partitions = opt(node, "partitions")?.unwrap_or(config.partitions);
                let src = spate_nexmark::source::NexmarkSource::new(config, opt(node, "rate")?)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                let s = labelled(self.env.from_source(src), &name, &uid)
                    .map(crate::nexmark::event_row)
                    .name("to rows");
                Built::Stream(s)
            }
            "sensors" => {
                let mut src = spate_connectors::SensorSource::new(opt(node, "seed")?.unwrap_or(7));
                if let Some(n) = opt(node, "sensors")? {
                    src = src.sensors(n);
                }
                if let Some(r) = opt(node, "rounds")? {
                    src = src.rounds(r);
                }
                if let Some(rate) = opt(node, "rate")? {
                    src = src.rate(rate);
                }
                let names = intern(
                    ["sensor_id", "area", "timestamp_ms", "temperature", "smoke"]
                        .map(String::from)
                        .to_vec(),
                );
                let s = labelled(self.env.from_source(src), &name, &uid)
                    .map(move |r: spate_connectors::SensorReading| {
                        Rec::Row(
                            Some(Arc::clone(&names)),
                            vec![
                                Rec::Int(i64::from(r.sensor_id)),
                                Rec::Int(i64::from(r.area)),
                                Rec::Int(r.timestamp_ms),
                                Rec::Float(r.temperature),
                                Rec::Bool(r.smoke),
                            ],
                        )
                    })
                    .name("to rows");
                Built::Stream(s)
            }
            "text_file" => {
                let path: String = get(node, "path")?;
                let src = JsonLinesSource::<Rec>::with_decoder(
                    &path,
                    Arc::new(|line: &[u8]| {
                        std::str::from_utf8(line)
                            .map(|s| Rec::Str(s.trim_end_matches('\r').to_owned()))
                            .map_err(|_| "the line is not UTF-8".to_owned())
                    }),
                );
                let src = match policy(node)? {
                    Some(p) => src.policy(p),
                    None => src,
                };
                Built::Stream(named(self.env.from_source(src)))
            }
            "jsonl" => {
                let path: String = get(node, "path")?;
                let s = match node.get_item("schema")? {
                    Some(t) if !t.is_none() => {
                        let schema = schema(&t)?;
                        // Only the fields the job reads, when it reads them natively.
                        let read = self.reads.get(&id).and_then(|r| r.index_paths(&schema));
                        let mut src = match read {
                            Some(paths) => {
                                let decoder = RowDecoder::<RecRows>::projected(&schema, &|at| {
                                    crate::prune::reads(&paths, at)
                                });
                                JsonLinesSource::with_decoder(
                                    &path,
                                    Arc::new(move |line: &[u8]| decoder.decode_row(line)),
                                )
                            }
                            None => {
                                JsonLinesSource::<Rec>::with_schema_as::<RecRows>(&path, &schema)
                            }
                        };
                        if let Some(p) = policy(node)? {
                            src = src.policy(p);
                        }
                        labelled(self.env.from_source(src), &name, &uid)
                    }
                    _ => {
                        let mut src = JsonLinesSource::<Value>::new(&path);
                        if let Some(p) = policy(node)? {
                            src = src.policy(p);
                        }
                        labelled(self.env.from_source(src), &name, &uid)
                            .map(Rec::from_value_owned)
                            .name("to dicts")
                    }
                };
                Built::Stream(s)
            }
            "csv" => {
                let path: String = get(node, "path")?;
                let schema = schema(&get::<Bound<'_, PyAny>>(node, "schema")?)?;
                let shape = RowShape::of(&schema);
                let delimiter: String = get(node, "delimiter")?;
                let delimiter = match delimiter.as_bytes() {
                    [b] => *b,
                    _ => {
                        return Err(PyValueError::new_err(format!(
                            "a CSV delimiter is one ASCII character, not {delimiter:?}"
                        )))
                    }
                };
                let mut src = CsvSource::<spate_types::Row>::with_schema(&path, &schema)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?
                    .has_headers(get(node, "has_header")?)
                    .delimiter(delimiter);
                if let Some(p) = policy(node)? {
                    src = src.policy(p);
                }
                let s = labelled(self.env.from_source(src), &name, &uid)
                    .map(move |row: spate_types::Row| shape.rec(row.0))
                    .name("to rows");
                Built::Stream(s)
            }
            "socket" => {
                let host: String = get(node, "host")?;
                let port: u16 = get(node, "port")?;
                let s = self
                    .env
                    .from_source(SocketTextSource::new(&host, port))
                    .map(Rec::Str);
                Built::Stream(named(s))
            }
            // --- stateless operations -------------------------------------------------------
            "map" | "filter" | "flat_map" => {
                let input = input.ok_or_else(|| PyValueError::new_err("no input"))?;
                match fun(node, &op)? {
                    Fun::Py(f) => {
                        let step = match op.as_str() {
                            "map" => PyStep::Map(f),
                            "filter" => PyStep::Filter(f),
                            _ => PyStep::FlatMap(f),
                        };
                        self.stage(input, step, label, uid.is_none())?
                    }
                    Fun::Native(e) => {
                        let s = self.stream(input)?;
                        let s = match op.as_str() {
                            "map" => match &*e {
                                // A projection moves the field out instead of copying it.
                                Expr::Col(_, steps) => {
                                    let steps = steps.clone();
                                    s.try_map(move |r: Rec| {
                                        if crate::record::has_path(&r, &steps) {
                                            Ok(r.take_path(&steps).unwrap_or_default())
                                        } else {
                                            e.eval(&r) // the error, naming the field
                                        }
                                    })
                                }
                                _ => s.try_map(move |r: Rec| e.eval(&r)),
                            },
                            "filter" => {
                                s.try_filter(move |r: &Rec| e.eval_ref(r).map(|v| v.truthy()))
                            }
                            _ => s.try_flat_map(move |r: Rec| match e.eval(&r)? {
                                Rec::List(v) | Rec::Tuple(v) => Ok(v),
                                Rec::None => Ok(Vec::new()),
                                other => Err(format!(
                                    "a flat_map expression must give a list, not {}",
                                    other.type_name()
                                )),
                            }),
                        };
                        Built::Stream(named(s.name(&label)))
                    }
                }
            }
            "key_by" => {
                let input = input.ok_or_else(|| PyValueError::new_err("no input"))?;
                match fun(node, "key_by")? {
                    Fun::Native(e) => {
                        let s = self.stream(input)?;
                        let key = Arc::clone(&e);
                        let stream = s.key_by(move |r: &Rec| key.eval(r).unwrap_or(Rec::None));
                        Built::Keyed(Keyed {
                            stream,
                            key: KeyOf::Native,
                        })
                    }
                    Fun::Py(f) => {
                        let staged = self.stage(input, PyStep::Key(f), "key_by".into(), true)?;
                        let Built::Stage(stage) = staged else {
                            unreachable!("a stage step builds a stage")
                        };
                        let s = stage.materialize();
                        let stream = s.key_by(|r: &Rec| r.item(0).cloned().unwrap_or_default());
                        Built::Keyed(Keyed {
                            stream,
                            key: KeyOf::Paired,
                        })
                    }
                }
            }
            "union" => {
                let first = self.stream(inputs[0])?;
                let others = inputs[1..]
                    .iter()
                    .map(|&i| self.stream(i))
                    .collect::<PyResult<Vec<_>>>()?;
                Built::Stream(named(first.union(&others)))
            }
            "rebalance" => {
                let s = self.stream(inputs[0])?;
                Built::Stream(s.rebalance())
            }
            "assign_timestamps" => {
                let s = self.stream(inputs[0])?;
                let strategy = self.strategy(node)?;
                Built::Stream(named(s.assign_timestamps_and_watermarks(strategy)))
            }
            // --- keyed operations -----------------------------------------------------------
            "reduce" => {
                let k = self.keyed(inputs[0])?;
                let f: Py<PyAny> = get(node, "fn")?;
                let f = Arc::new(f);
                let s = k.stream.reduce(py_reduce(k.key.clone(), f));
                Built::Stream(named(k.unwrap(s.name(&label))))
            }
            "rolling" => {
                let k = self.keyed(inputs[0])?;
                let kind: String = get(node, "kind")?;
                let path: Bound<'py, PyAny> = get(node, "field")?;
                let field = Arc::new(Expr::compile(&path)?);
                let slot = field_slot(&path)?;
                let kk = k.key.clone();
                let s = k.stream.reduce(move |a: Rec, b: Rec| {
                    let (va, vb) = (kk.value(&a), kk.value(&b));
                    let (fa, fb) = match (field.eval(va), field.eval(vb)) {
                        (Ok(x), Ok(y)) => (x, y),
                        (Err(e), _) | (_, Err(e)) => std::panic::panic_any(e),
                    };
                    let less = crate::expr::order(&fb, &fa).is_some_and(|o| o.is_lt());
                    let greater = crate::expr::order(&fb, &fa).is_some_and(|o| o.is_gt());
                    let v = match kind.as_str() {
                        "sum" => {
                            let sum = match (&fa, &fb) {
                                (Rec::Int(x), Rec::Int(y)) => Rec::Int(x.wrapping_add(*y)),
                                _ => match (fa.as_f64(), fb.as_f64()) {
                                    (Some(x), Some(y)) => Rec::Float(x + y),
                                    _ => std::panic::panic_any(format!(
                                        "sum: {} and {} are not numbers",
                                        fa.type_name(),
                                        fb.type_name()
                                    )),
                                },
                            };
                            set_slot(va, &slot, sum)
                        }
                        "min" => set_slot(va, &slot, if less { fb } else { fa }),
                        "max" => set_slot(va, &slot, if greater { fb } else { fa }),
                        "min_by" => {
                            if less {
                                vb.clone()
                            } else {
                                va.clone()
                            }
                        }
                        _ => {
                            if greater {
                                vb.clone()
                            } else {
                                va.clone()
                            }
                        }
                    };
                    kk.rewrap(&a, v)
                });
                Built::Stream(named(k.unwrap(s.name(&label))))
            }
            "count" => {
                let k = self.keyed(inputs[0])?;
                // Flink has no keyed count; Spate's gives `(key, count so far)` per record.
                let s = k.stream.process_with_state(
                    |key: &Rec, n: &mut Option<u64>, _r: Rec, out: &mut Vec<Rec>| {
                        let c = n.unwrap_or(0) + 1;
                        *n = Some(c);
                        out.push(Rec::Tuple(vec![key.clone(), Rec::Int(c as i64)]));
                    },
                );
                Built::Stream(named(s.name(&label)))
            }
            "process" => {
                let k = self.keyed(inputs[0])?;
                let f: Py<PyAny> = get(node, "fn")?;
                let s = k.stream.process(crate::process::PyKeyedProcess {
                    f: Arc::new(f),
                    paired: matches!(k.key, KeyOf::Paired),
                });
                Built::Stream(named(s.name(&label)))
            }
            "window" => {
                let k = self.keyed(inputs[0])?;
                Built::Window(node.clone().unbind(), k)
            }
            "window_aggregate" | "window_reduce" | "window_process" | "window_py_aggregate" => {
                let (spec, k) = match self.take(inputs[0])? {
                    Built::Window(spec, k) => (spec, k),
                    _ => {
                        return Err(PyTypeError::new_err(
                            "aggregate needs a window (window(...) first)",
                        ))
                    }
                };
                let spec = spec.bind(self.py).clone();
                let s = self.windowed(&spec, &k, node, &op)?;
                self.built.insert(inputs[0], Built::Sink);
                Built::Stream(named(s.name(&label)))
            }
            // --- sinks -----------------------------------------------------------------------
            "print" => {
                let s = self.stream(inputs[0])?;
                s.sink_to(PrintSink::new(opt(node, "prefix")?));
                Built::Sink
            }
            "collect" => {
                let s = self.stream(inputs[0])?;
                let (sink, handle) = CollectSink::new();
                s.sink_to(sink);
                self.collected.push((id, handle));
                Built::Sink
            }
            "file_sink" => {
                let s = self.stream(inputs[0])?;
                let path: String = get(node, "path")?;
                let encoder: String = get(node, "encoder")?;
                let encode: spate_connectors::files::LineEncoder<Rec> = match encoder.as_str() {
                    "json" => Arc::new(|r: &Rec, out: &mut Vec<u8>| {
                        serde_json::to_writer(&mut *out, &serde_json::Value::from(r.to_value()))
                            .ok();
                    }),
                    _ => Arc::new(|r: &Rec, out: &mut Vec<u8>| {
                        use std::io::Write;
                        let _ = write!(out, "{r}");
                    }),
                };
                let mut policy = RollingPolicy::default();
                if let Some(b) = opt::<u64>(node, "part_size")? {
                    policy = policy.with_max_part_size(b);
                }
                if let Some(d) = ms(node, "rollover_ms")? {
                    policy = policy.with_rollover_interval(d);
                }
                if let Some(d) = ms(node, "inactivity_ms")? {
                    policy = policy.with_inactivity_interval(d);
                }
                let sink = FileSink::with_encoder(
                    &path,
                    opt::<String>(node, "suffix")?.unwrap_or_default(),
                    encode,
                )
                .rolling_policy(policy);
                let node_sink = s.sink_to(sink);
                if let Some(n) = &name {
                    node_sink.name(n);
                }
                Built::Sink
            }
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown operation `{other}` in the plan"
                )))
            }
        };
        self.built.insert(id, built);
        Ok(())
    }

    /// Adds a Python step after node `input`: to its pending stage when it is one and this
    /// is its only consumer, otherwise as a new stage.
    fn stage(
        &mut self,
        input: usize,
        step: PyStep,
        name: String,
        fusable: bool,
    ) -> PyResult<Built> {
        let only = self.consumers.get(&input).map_or(0, Vec::len) <= 1;
        if fusable && only {
            if let Some(Built::Stage(_)) = self.built.get(&input) {
                let Built::Stage(mut stage) = self.take(input)? else {
                    unreachable!("checked above")
                };
                stage.steps.push(step);
                stage.names.push(name);
                return Ok(Built::Stage(stage));
            }
        }
        let s = self.stream(input)?;
        Ok(Built::Stage(PyStage {
            input: s,
            steps: vec![step],
            names: vec![name],
        }))
    }

    /// A `WatermarkStrategy` of the plan.
    fn strategy(&self, node: &Bound<'py, PyDict>) -> PyResult<WatermarkStrategy<Rec>> {
        let kind: String = get(node, "kind")?;
        let mut strategy = match kind.as_str() {
            "monotonous" => WatermarkStrategy::for_monotonous_timestamps(),
            "bounded" => WatermarkStrategy::for_bounded_out_of_orderness(
                ms(node, "bound_ms")?.unwrap_or_default(),
            ),
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown watermark strategy `{other}`"
                )))
            }
        };
        if let Some(idle) = ms(node, "idle_ms")? {
            strategy = strategy.with_idleness(idle);
        }
        if opt::<bool>(node, "ts")?.unwrap_or(false) {
            // A bad assigner is an error, never a silent fall back to the source's times.
            match fun(node, "a timestamp assigner")? {
                Fun::Native(e) => {
                    strategy =
                        strategy.with_timestamp_assigner(move |r: &Rec, _prev| match e.eval(r) {
                            Ok(Rec::Int(t)) => t,
                            Ok(Rec::Float(t)) => t as i64,
                            Ok(other) => std::panic::panic_any(format!(
                                "a timestamp must be an int of milliseconds, not {}",
                                other.type_name()
                            )),
                            Err(e) => std::panic::panic_any(e),
                        })
                }
                Fun::Py(f) => {
                    strategy = strategy.with_timestamp_assigner(move |r: &Rec, prev| {
                        let out = Python::attach(|py| {
                            PYTHON_CALLS.fetch_add(1, Ordering::Relaxed);
                            let r: PyResult<i64> = (|| {
                                let x = to_py(py, r)?;
                                f.bind(py).call1((x, prev))?.extract()
                            })();
                            r.map_err(|e| python_error(py, e))
                        });
                        out.unwrap_or_else(|m| std::panic::panic_any(m))
                    })
                }
            }
        }
        Ok(strategy)
    }

    /// A window function on `k` windowed by `spec`.
    fn windowed(
        &self,
        spec: &Bound<'py, PyDict>,
        k: &Keyed,
        node: &Bound<'py, PyDict>,
        op: &str,
    ) -> PyResult<DataStream<Rec>> {
        let kind: String = get(spec, "kind")?;
        let size = ms(spec, "size_ms")?.unwrap_or_default();
        let slide = ms(spec, "slide_ms")?.unwrap_or_default();
        let gap = ms(spec, "gap_ms")?.unwrap_or_default();
        let offset = ms(spec, "offset_ms")?.unwrap_or_default();
        let lateness = ms(spec, "lateness_ms")?;
        let apply = WindowFn::new(node, op, k)?;
        let key_name: String = opt(spec, "key_name")?.unwrap_or_else(|| "key".to_owned());
        let key_name = key_name.as_str();
        Ok(match kind.as_str() {
            "tumbling_event" => apply.run(
                k,
                TumblingEventTimeWindows::with_offset(size, offset),
                lateness,
                key_name,
            ),
            "sliding_event" => apply.run(
                k,
                SlidingEventTimeWindows::of(size, slide),
                lateness,
                key_name,
            ),
            "session_event" => apply.run(
                k,
                EventTimeSessionWindows::with_gap(gap),
                lateness,
                key_name,
            ),
            "tumbling_processing" => apply.run(
                k,
                TumblingProcessingTimeWindows::of(size),
                lateness,
                key_name,
            ),
            "sliding_processing" => apply.run(
                k,
                SlidingProcessingTimeWindows::of(size, slide),
                lateness,
                key_name,
            ),
            "session_processing" => apply.run(
                k,
                ProcessingTimeSessionWindows::with_gap(gap),
                lateness,
                key_name,
            ),
            "full_partition" => apply.run_full_partition(k, key_name)?,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown window assigner `{other}`"
                )))
            }
        })
    }
}

/// Where a rolling aggregate writes its field: a position or a name.
#[derive(Clone)]
enum Slot {
    Index(usize),
    Name(String),
    /// The record itself is the number.
    Whole,
}

fn field_slot(path: &Bound<'_, PyAny>) -> PyResult<Slot> {
    let tag: String = path.get_item(0)?.extract()?;
    Ok(match tag.as_str() {
        "item" => Slot::Index(path.get_item(1)?.extract::<i64>()?.max(0) as usize),
        "col" => {
            let name: String = path.get_item(1)?.extract()?;
            if name.contains('.') {
                return Err(PyValueError::new_err(
                    "a rolling aggregate reads a top-level field, not a nested path",
                ));
            }
            Slot::Name(name)
        }
        "self" => Slot::Whole,
        _ => {
            return Err(PyValueError::new_err(
                "a rolling aggregate needs a field name or position",
            ))
        }
    })
}

/// `r` with the field at `slot` replaced by `v` (Flink's rolling aggregates keep the other
/// fields of the first record).
fn set_slot(r: &Rec, slot: &Slot, v: Rec) -> Rec {
    let mut r = r.clone();
    match (slot, &mut r) {
        (Slot::Whole, _) => return v,
        (Slot::Index(i), Rec::Tuple(items) | Rec::List(items) | Rec::Row(_, items)) => {
            if let Some(x) = items.get_mut(*i) {
                *x = v;
            }
        }
        (Slot::Name(n), Rec::Row(Some(names), items)) => {
            if let Some(i) = names.iter().position(|x| x == n) {
                items[i] = v;
            }
        }
        (Slot::Name(n), Rec::Dict(items)) => {
            if let Some((_, x)) = items
                .iter_mut()
                .find(|(k, _)| matches!(k, Rec::Str(s) if s == n))
            {
                *x = v;
            }
        }
        _ => {}
    }
    r
}

/// The function of a window: native aggregates, or Python's reduce, `AggregateFunction`
/// (with an optional window function) or `ProcessWindowFunction`.
enum WindowFn {
    Native(Aggregates),
    PyReduce(Arc<Py<PyAny>>),
    PyAggregate(PyAgg, Option<Arc<Py<PyAny>>>),
    PyProcess(Arc<Py<PyAny>>),
}

/// A Python `AggregateFunction` as the engine's: the accumulator crosses into Python for
/// each `add` and is kept as a record between calls.
#[derive(Clone)]
struct PyAgg {
    f: Arc<Py<PyAny>>,
    value: fn(&Rec) -> &Rec,
}

impl PyAgg {
    fn call(
        &self,
        method: &str,
        args: impl FnOnce(Python<'_>) -> PyResult<Vec<Bound<'_, PyAny>>>,
    ) -> Rec {
        let out = Python::attach(|py| {
            PYTHON_CALLS.fetch_add(1, Ordering::Relaxed);
            let r: PyResult<Rec> = (|| {
                let args = pyo3::types::PyTuple::new(py, args(py)?)?;
                from_py(&self.f.bind(py).call_method1(method, args)?)
            })();
            r.map_err(|e| python_error(py, e))
        });
        out.unwrap_or_else(|m| std::panic::panic_any(m))
    }
}

impl spate_dataflow::AggregateFunction<Rec> for PyAgg {
    type Acc = Rec;
    type Out = Rec;

    fn create_accumulator(&self) -> Rec {
        self.call("create_accumulator", |_| Ok(Vec::new()))
    }

    fn add(&self, value: &Rec, acc: &mut Rec) {
        let v = (self.value)(value);
        *acc = self.call("add", |py| Ok(vec![to_py(py, v)?, to_py(py, acc)?]));
    }

    fn get_result(&self, acc: &Rec) -> Rec {
        self.call("get_result", |py| Ok(vec![to_py(py, acc)?]))
    }

    fn merge(&self, a: Rec, b: Rec) -> Rec {
        self.call("merge", |py| Ok(vec![to_py(py, &a)?, to_py(py, &b)?]))
    }
}

/// Calls a window function `wf(key, start, end, watermark, processing_time, elements)`
/// (the Python side wraps PyFlink's `ProcessWindowFunction.process`), pushing its outputs.
fn call_window_fn(
    wf: &Py<PyAny>,
    key: &Rec,
    ctx: &WindowContext<'_, TimeWindow>,
    elements: &mut dyn Iterator<Item = &Rec>,
    out: &mut Vec<Rec>,
) {
    let r = Python::attach(|py| {
        PYTHON_CALLS.fetch_add(1, Ordering::Relaxed);
        let r: PyResult<()> = (|| {
            let items = elements
                .map(|e| to_py(py, e))
                .collect::<PyResult<Vec<_>>>()?;
            let ret = wf.bind(py).call1((
                to_py(py, key)?,
                ctx.window.start,
                ctx.window.end,
                ctx.current_watermark,
                ctx.current_processing_time,
                PyList::new(py, items)?,
            ))?;
            if !ret.is_none() {
                for item in ret.try_iter()? {
                    out.push(from_py(&item?)?);
                }
            }
            Ok(())
        })();
        r.map_err(|e| python_error(py, e))
    });
    if let Err(m) = r {
        std::panic::panic_any(m)
    }
}

impl WindowFn {
    fn new(node: &Bound<'_, PyDict>, op: &str, k: &Keyed) -> PyResult<Self> {
        if op == "window_reduce" {
            let f: Py<PyAny> = get(node, "fn")?;
            return Ok(WindowFn::PyReduce(Arc::new(f)));
        }
        if op == "window_process" {
            let f: Py<PyAny> = get(node, "window_fn")?;
            return Ok(WindowFn::PyProcess(Arc::new(f)));
        }
        if op == "window_py_aggregate" {
            let f: Py<PyAny> = get(node, "fn")?;
            let wf: Option<Py<PyAny>> = opt(node, "window_fn")?;
            let value = match k.key {
                KeyOf::Paired => paired_value,
                KeyOf::Native => same_value,
            };
            return Ok(WindowFn::PyAggregate(
                PyAgg {
                    f: Arc::new(f),
                    value,
                },
                wf.map(Arc::new),
            ));
        }
        let aggs: Bound<'_, PyList> = get(node, "aggs")?;
        let specs = aggs
            .iter()
            .map(|a| AggSpec::from_py(&a))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(WindowFn::Native(Aggregates::new(specs)))
    }

    fn run<A>(
        self,
        k: &Keyed,
        assigner: A,
        lateness: Option<Duration>,
        key_name: &str,
    ) -> DataStream<Rec>
    where
        A: WindowAssigner<Rec, W = TimeWindow>,
    {
        let mut w: WindowedStream<Rec, Rec, TimeWindow> = k.stream.window(assigner);
        if let Some(l) = lateness {
            w = w.allowed_lateness(l);
        }
        let kk = k.key.clone();
        match self {
            WindowFn::Native(aggs) => {
                let names = aggs.output_names(key_name);
                let aggs = aggs.over(match kk {
                    KeyOf::Paired => paired_value,
                    KeyOf::Native => same_value,
                });
                w.aggregate_with(
                    aggs,
                    move |key: &Rec,
                          ctx: &WindowContext<'_, TimeWindow>,
                          vals: Vec<Rec>,
                          out: &mut Vec<Rec>| {
                        let mut row = Vec::with_capacity(vals.len() + 3);
                        row.push(key.clone());
                        row.push(Rec::Int(ctx.window.start));
                        row.push(Rec::Int(ctx.window.end));
                        row.extend(vals);
                        out.push(Rec::Row(Some(Arc::clone(&names)), row));
                    },
                )
            }
            WindowFn::PyAggregate(agg, wf) => w.aggregate_with(
                agg,
                move |key: &Rec,
                      ctx: &WindowContext<'_, TimeWindow>,
                      v: Rec,
                      out: &mut Vec<Rec>| {
                    match &wf {
                        Some(wf) => call_window_fn(wf, key, ctx, &mut std::iter::once(&v), out),
                        None => out.push(v),
                    }
                },
            ),
            WindowFn::PyProcess(wf) => w.process(
                move |key: &Rec,
                      ctx: &WindowContext<'_, TimeWindow>,
                      items: &[Rec],
                      out: &mut Vec<Rec>| {
                    let value = match kk {
                        KeyOf::Paired => paired_value,
                        KeyOf::Native => same_value,
                    };
                    call_window_fn(&wf, key, ctx, &mut items.iter().map(value), out)
                },
            ),
            WindowFn::PyReduce(f) => {
                let s = w.reduce(py_reduce(kk, f));
                k.unwrap(s)
            }
        }
    }
}

impl WindowFn {
    /// The function over each key's whole input (`full_window_partition()`), emitted at its
    /// end: built-in aggregates give rows of the key and the aggregates.
    fn run_full_partition(self, k: &Keyed, key_name: &str) -> PyResult<DataStream<Rec>> {
        let p = k.stream.full_window_partition();
        let kk = k.key.clone();
        Ok(match self {
            WindowFn::Native(aggs) => {
                let names = aggs.output_names_without_window(key_name);
                let aggs = aggs.over(match kk {
                    KeyOf::Paired => paired_value,
                    KeyOf::Native => same_value,
                });
                p.aggregate_with(aggs, move |key: &Rec, vals: Vec<Rec>, out: &mut Vec<Rec>| {
                    let mut row = Vec::with_capacity(vals.len() + 1);
                    row.push(key.clone());
                    row.extend(vals);
                    out.push(Rec::Row(Some(Arc::clone(&names)), row));
                })
            }
            WindowFn::PyAggregate(agg, None) => p.aggregate(agg),
            WindowFn::PyReduce(f) => k.unwrap(p.reduce(py_reduce(kk, f))),
            WindowFn::PyAggregate(_, Some(_)) | WindowFn::PyProcess(_) => {
                return Err(PyTypeError::new_err(
                    "a full window partition takes aggregate(...) or reduce(...), not a window function",
                ))
            }
        })
    }
}

/// A Python reduce function as the engine's: `f(previous, new)` on the records themselves
/// (without the pair of a Python key). An exception fails the job, with its traceback.
fn py_reduce(key: KeyOf, f: Arc<Py<PyAny>>) -> impl Fn(Rec, Rec) -> Rec + Send + Sync + 'static {
    move |a: Rec, b: Rec| {
        let out = Python::attach(|py| {
            PYTHON_CALLS.fetch_add(1, Ordering::Relaxed);
            let r: PyResult<Rec> = (|| {
                let x = to_py(py, key.value(&a))?;
                let y = to_py(py, key.value(&b))?;
                from_py(&f.bind(py).call1((x, y))?)
            })();
            r.map_err(|e| python_error(py, e))
        });
        match out {
            Ok(v) => key.rewrap(&a, v),
            Err(message) => std::panic::panic_any(message),
        }
    }
}

fn paired_value(r: &Rec) -> &Rec {
    match r {
        Rec::Tuple(p) if p.len() == 2 => &p[1],
        other => other,
    }
}

fn same_value(r: &Rec) -> &Rec {
    r
}

/// `s` with the node's name and uid, if it has them.
fn labelled<T: spate_types::Data>(
    s: DataStream<T>,
    name: &Option<String>,
    uid: &Option<String>,
) -> DataStream<T> {
    let s = match name {
        Some(n) => s.name(n),
        None => s,
    };
    match uid {
        Some(u) => s.uid(u),
        None => s,
    }
}
