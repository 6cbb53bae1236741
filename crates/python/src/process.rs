//! Python `KeyedProcessFunction`s on the engine's keyed process operator: per-key
//! `ValueState`, `ListState` and `MapState`, and event- and processing-time timers.
//!
//! A key's state is a [`PyKeyState`]: pure Rust ([`Rec`]s in slots, one slot per state
//! descriptor, in the order the function's `open` asked for them). The engine keeps it per key
//! in its key groups, checkpoints it and moves it between workers on a rescaled restore, as it
//! does the state of a Rust function; no Python runs for that.
//!
//! Around each call into Python, the current key's state is *moved* into a thread-local slot
//! that the state handles (`ValueState.value()`, ...) read and write, and moved back out after
//! the call; timer requests are queued the same way and applied after the call. So a handle
//! never points into the engine (no `unsafe`), and a handle used outside a call fails with
//! a clear message. The operator takes the interpreter's lock once per batch of records or
//! timers ([`KeyedProcessFunction::batch_scope`]), not per record.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde::{Deserialize, Serialize};
use spate_dataflow::{KeyedProcessFunction, ProcessContext, TimeDomain};
use spate_types::SpateError;

use crate::plan::{python_error, PYTHON_CALLS};
use crate::record::{from_py, to_py, Rec};

/// One state of one key.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub enum Slot {
    /// Never set, or cleared.
    #[default]
    Empty,
    /// A `ValueState`'s value.
    Value(Rec),
    /// A `ListState`'s elements.
    List(Vec<Rec>),
    /// A `MapState`'s entries, in insertion order.
    Map(Vec<(Rec, Rec)>),
}

/// The states of one key: one [`Slot`] per state descriptor.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PyKeyState {
    slots: Vec<Slot>,
}

impl PyKeyState {
    fn is_empty(&self) -> bool {
        self.slots.iter().all(|s| matches!(s, Slot::Empty))
    }
}

/// A timer request of a call, applied after it.
enum TimerOp {
    Register(TimeDomain, i64),
    Delete(TimeDomain, i64),
}

thread_local! {
    /// The current key's state during a call into Python.
    static CURRENT: RefCell<Option<PyKeyState>> = const { RefCell::new(None) };
    /// The timer requests of the current call.
    static TIMERS: RefCell<Vec<TimerOp>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on the current key's slot `i`.
fn with_slot<R>(i: usize, f: impl FnOnce(&mut Slot) -> PyResult<R>) -> PyResult<R> {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        let state = c.as_mut().ok_or_else(|| {
            PyRuntimeError::new_err(
                "keyed state is only available inside process_element or on_timer",
            )
        })?;
        if state.slots.len() <= i {
            state.slots.resize(i + 1, Slot::Empty);
        }
        f(&mut state.slots[i])
    })
}

/// PyFlink's `ValueState`: one value per key.
#[pyclass(module = "spate._native", frozen)]
pub struct ValueState {
    slot: usize,
}

#[pymethods]
impl ValueState {
    #[new]
    fn new(slot: usize) -> Self {
        ValueState { slot }
    }

    /// The key's value, or `None`.
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        with_slot(self.slot, |s| match s {
            Slot::Value(v) => to_py(py, v),
            _ => Ok(py.None().into_bound(py)),
        })
    }

    /// Sets the key's value (`None` clears it).
    fn update(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = from_py(value)?;
        with_slot(self.slot, |s| {
            *s = if matches!(v, Rec::None) {
                Slot::Empty
            } else {
                Slot::Value(v)
            };
            Ok(())
        })
    }

    /// Removes the key's value.
    fn clear(&self) -> PyResult<()> {
        with_slot(self.slot, |s| {
            *s = Slot::Empty;
            Ok(())
        })
    }
}

fn list_of(s: &mut Slot) -> &mut Vec<Rec> {
    if !matches!(s, Slot::List(_)) {
        *s = Slot::List(Vec::new());
    }
    match s {
        Slot::List(v) => v,
        _ => unreachable!("set above"),
    }
}

fn map_of(s: &mut Slot) -> &mut Vec<(Rec, Rec)> {
    if !matches!(s, Slot::Map(_)) {
        *s = Slot::Map(Vec::new());
    }
    match s {
        Slot::Map(v) => v,
        _ => unreachable!("set above"),
    }
}

/// PyFlink's `ListState`: a list per key.
#[pyclass(module = "spate._native", frozen)]
pub struct ListState {
    slot: usize,
}

#[pymethods]
impl ListState {
    #[new]
    fn new(slot: usize) -> Self {
        ListState { slot }
    }

    /// The key's elements, as a list.
    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        with_slot(self.slot, |s| {
            let items: Vec<Bound<'py, PyAny>> = match s {
                Slot::List(v) => v.iter().map(|x| to_py(py, x)).collect::<PyResult<_>>()?,
                _ => Vec::new(),
            };
            PyList::new(py, items)
        })
    }

    /// Appends an element.
    fn add(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = from_py(value)?;
        with_slot(self.slot, |s| {
            list_of(s).push(v);
            Ok(())
        })
    }

    /// Appends the elements of an iterable.
    fn add_all(&self, values: &Bound<'_, PyAny>) -> PyResult<()> {
        let vs = values
            .try_iter()?
            .map(|x| from_py(&x?))
            .collect::<PyResult<Vec<_>>>()?;
        with_slot(self.slot, |s| {
            list_of(s).extend(vs);
            Ok(())
        })
    }

    /// Replaces the elements.
    fn update(&self, values: &Bound<'_, PyAny>) -> PyResult<()> {
        let vs = values
            .try_iter()?
            .map(|x| from_py(&x?))
            .collect::<PyResult<Vec<_>>>()?;
        with_slot(self.slot, |s| {
            *s = if vs.is_empty() {
                Slot::Empty
            } else {
                Slot::List(vs)
            };
            Ok(())
        })
    }

    /// Removes every element.
    fn clear(&self) -> PyResult<()> {
        with_slot(self.slot, |s| {
            *s = Slot::Empty;
            Ok(())
        })
    }
}

/// PyFlink's `MapState`: a map per key.
#[pyclass(module = "spate._native", frozen)]
pub struct MapState {
    slot: usize,
}

#[pymethods]
impl MapState {
    #[new]
    fn new(slot: usize) -> Self {
        MapState { slot }
    }

    /// The value under `key`, or `None`.
    fn get<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let k = from_py(key)?;
        with_slot(self.slot, |s| match s {
            Slot::Map(m) => match m.iter().find(|(x, _)| *x == k) {
                Some((_, v)) => to_py(py, v),
                None => Ok(py.None().into_bound(py)),
            },
            _ => Ok(py.None().into_bound(py)),
        })
    }

    /// Sets the value under `key`.
    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (k, v) = (from_py(key)?, from_py(value)?);
        with_slot(self.slot, |s| {
            let m = map_of(s);
            match m.iter_mut().find(|(x, _)| *x == k) {
                Some((_, old)) => *old = v,
                None => m.push((k, v)),
            }
            Ok(())
        })
    }

    /// Sets every entry of a `dict`.
    fn put_all(&self, entries: &Bound<'_, PyDict>) -> PyResult<()> {
        for (k, v) in entries.iter() {
            self.put(&k, &v)?;
        }
        Ok(())
    }

    /// Removes the entry under `key`.
    fn remove(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = from_py(key)?;
        with_slot(self.slot, |s| {
            if let Slot::Map(m) = s {
                m.retain(|(x, _)| *x != k);
                if m.is_empty() {
                    *s = Slot::Empty;
                }
            }
            Ok(())
        })
    }

    /// Whether there is an entry under `key`.
    fn contains(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = from_py(key)?;
        with_slot(self.slot, |s| {
            Ok(matches!(s, Slot::Map(m) if m.iter().any(|(x, _)| *x == k)))
        })
    }

    fn entries<'py>(&self, py: Python<'py>, part: u8) -> PyResult<Bound<'py, PyList>> {
        with_slot(self.slot, |s| {
            let mut out = Vec::new();
            if let Slot::Map(m) = s {
                for (k, v) in m.iter() {
                    out.push(match part {
                        0 => to_py(py, k)?,
                        1 => to_py(py, v)?,
                        _ => (to_py(py, k)?, to_py(py, v)?).into_pyobject(py)?.into_any(),
                    });
                }
            }
            PyList::new(py, out)
        })
    }

    /// The keys, in insertion order.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.entries(py, 0)
    }

    /// The values, in insertion order.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.entries(py, 1)
    }

    /// The `(key, value)` pairs, in insertion order.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.entries(py, 2)
    }

    /// Whether the map has no entry.
    fn is_empty(&self) -> PyResult<bool> {
        with_slot(self.slot, |s| {
            Ok(!matches!(s, Slot::Map(m) if !m.is_empty()))
        })
    }

    /// Removes every entry.
    fn clear(&self) -> PyResult<()> {
        with_slot(self.slot, |s| {
            *s = Slot::Empty;
            Ok(())
        })
    }
}

/// The context of one call of `process_element` or `on_timer`: the key, the record's
/// timestamp, the clocks, and the timer service (PyFlink's `ctx.timer_service()`, which is
/// this object itself).
#[pyclass(module = "spate._native", frozen)]
pub struct Context {
    key: Rec,
    timestamp: i64,
    watermark: i64,
    processing_time: i64,
    domain: Option<TimeDomain>,
}

#[pymethods]
impl Context {
    /// The current key.
    fn get_current_key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.key)
    }

    /// The record's event timestamp (the timer's, in `on_timer`), or `None`.
    fn timestamp(&self) -> Option<i64> {
        (self.timestamp != i64::MIN).then_some(self.timestamp)
    }

    /// The timer service: this context.
    fn timer_service(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// In `on_timer`: `"EVENT_TIME"` or `"PROCESSING_TIME"`.
    fn time_domain(&self) -> Option<&'static str> {
        self.domain.map(|d| match d {
            TimeDomain::EventTime => "EVENT_TIME",
            TimeDomain::ProcessingTime => "PROCESSING_TIME",
        })
    }

    /// The operator's current watermark.
    fn current_watermark(&self) -> i64 {
        self.watermark
    }

    /// The wall clock, in epoch milliseconds.
    fn current_processing_time(&self) -> i64 {
        self.processing_time
    }

    /// Calls `on_timer` once the watermark reaches `timestamp`.
    fn register_event_time_timer(&self, timestamp: i64) {
        TIMERS.with(|t| {
            t.borrow_mut()
                .push(TimerOp::Register(TimeDomain::EventTime, timestamp))
        });
    }

    /// Calls `on_timer` once the wall clock passes `timestamp`.
    fn register_processing_time_timer(&self, timestamp: i64) {
        TIMERS.with(|t| {
            t.borrow_mut()
                .push(TimerOp::Register(TimeDomain::ProcessingTime, timestamp))
        });
    }

    fn delete_event_time_timer(&self, timestamp: i64) {
        TIMERS.with(|t| {
            t.borrow_mut()
                .push(TimerOp::Delete(TimeDomain::EventTime, timestamp))
        });
    }

    fn delete_processing_time_timer(&self, timestamp: i64) {
        TIMERS.with(|t| {
            t.borrow_mut()
                .push(TimerOp::Delete(TimeDomain::ProcessingTime, timestamp))
        });
    }
}

/// A Python `KeyedProcessFunction` as the engine's.
pub struct PyKeyedProcess {
    /// The function object.
    pub f: Arc<Py<PyAny>>,
    /// Whether the records are `(key, record)` pairs of a Python key selector.
    pub paired: bool,
}

impl PyKeyedProcess {
    /// Runs one call with the key's state moved in, then applies its timers and outputs.
    fn call(
        &self,
        ctx: &mut ProcessContext<'_, Rec, PyKeyState, Rec>,
        domain: Option<TimeDomain>,
        timestamp: i64,
        value: Option<Rec>,
    ) {
        Python::attach(|py| {
            PYTHON_CALLS.fetch_add(1, Ordering::Relaxed);
            let state = ctx.state().take().unwrap_or_default();
            CURRENT.with(|c| *c.borrow_mut() = Some(state));
            let pyctx = Context {
                key: ctx.key().clone(),
                timestamp,
                watermark: ctx.current_watermark(),
                processing_time: ctx.current_processing_time(),
                domain,
            };
            let mut out = Vec::new();
            let result: PyResult<()> = (|| {
                let pyctx = Bound::new(py, pyctx)?;
                let f = self.f.bind(py);
                let ret = match value {
                    Some(v) => {
                        let v = match (self.paired, v) {
                            (true, Rec::Tuple(mut p)) if p.len() == 2 => {
                                p.pop().unwrap_or_default()
                            }
                            (_, v) => v,
                        };
                        f.call_method1("process_element", (to_py(py, &v)?, pyctx))?
                    }
                    None => f.call_method1("on_timer", (timestamp, pyctx))?,
                };
                if ret.is_none() {
                    return Ok(());
                }
                for item in ret.try_iter().map_err(|_| {
                    PyTypeError::new_err(
                        "process_element and on_timer yield their outputs (or return an iterable or None)",
                    )
                })? {
                    out.push(from_py(&item?)?);
                }
                Ok(())
            })();
            let state = CURRENT.with(|c| c.borrow_mut().take()).unwrap_or_default();
            *ctx.state() = (!state.is_empty()).then_some(state);
            for op in TIMERS.with(|t| std::mem::take(&mut *t.borrow_mut())) {
                match op {
                    TimerOp::Register(TimeDomain::EventTime, t) => ctx.register_event_time_timer(t),
                    TimerOp::Register(TimeDomain::ProcessingTime, t) => {
                        ctx.register_processing_time_timer(t)
                    }
                    TimerOp::Delete(TimeDomain::EventTime, t) => ctx.delete_event_time_timer(t),
                    TimerOp::Delete(TimeDomain::ProcessingTime, t) => {
                        ctx.delete_processing_time_timer(t)
                    }
                }
            }
            match result {
                Ok(()) => {
                    for r in out {
                        ctx.collect(r);
                    }
                }
                Err(e) => {
                    let name = ctx.operator_name().to_owned();
                    let message = python_error(py, e);
                    ctx.fail(SpateError::function(name, message));
                }
            }
        })
    }
}

impl KeyedProcessFunction<Rec, Rec, Rec> for PyKeyedProcess {
    type State = PyKeyState;

    fn process_element(&self, value: Rec, ctx: &mut ProcessContext<'_, Rec, PyKeyState, Rec>) {
        let ts = ctx.timestamp();
        self.call(ctx, None, ts, Some(value));
    }

    fn on_timer(
        &self,
        timestamp: i64,
        domain: TimeDomain,
        ctx: &mut ProcessContext<'_, Rec, PyKeyState, Rec>,
    ) {
        self.call(ctx, Some(domain), timestamp, None);
    }

    fn batch_scope(&self, body: &mut dyn FnMut()) {
        Python::attach(|_py| body())
    }
}
