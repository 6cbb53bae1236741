//! Spate's Python API: the native extension module `spate._native`.
//!
//! maturin builds this crate into `python/spate/_native*.so` (see the root `pyproject.toml`);
//! the pure-Python package `spate` (in `python/spate`) describes a job as a plan of plain
//! Python objects and hands it to [`run::execute`] once. The job then runs on the engine's
//! operators, as a Rust job does:
//!
//! - [`record`]: the records on the engine's edges ([`record::Rec`], pure Rust, so the
//!   interpreter is never needed to move, clone or serialize one) and the lazy `Row`;
//! - [`plan`]: the plan's nodes as DataStream operators, fusing consecutive Python functions
//!   into one operator that enters Python once per batch;
//! - [`expr`] and [`agg`]: native expressions and built-in aggregates, which run no Python;
//! - [`process`]: Python `KeyedProcessFunction`s with keyed state and timers;
//! - [`nexmark`]: the Nexmark generator as a source;
//! - [`sinks`]: the `print()` sink;
//! - [`run`]: `execute`, on a job thread, with Ctrl-C handled by Python's own handler.
//!
//! The module declares `gil_used = true`: it is not audited for free-threaded Python.

mod agg;
mod expr;
mod nexmark;
mod plan;
mod process;
mod prune;
mod record;
mod run;
mod sinks;

use pyo3::prelude::*;

/// mimalloc for the engine's own allocations (records, window state; Python's objects keep
/// CPython's allocator): with glibc's, malloc and free were a third of the W3 word-count
/// profile (a keyed window per word) and a sixth of W1's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The version of the `spate-python` crate (the Cargo workspace's version).
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The native half of the `spate` Python package.
#[pymodule(gil_used = true)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(run::execute, m)?)?;
    m.add_function(wrap_pyfunction!(record::_row, m)?)?;
    m.add_class::<record::Row>()?;
    m.add_class::<process::ValueState>()?;
    m.add_class::<process::ListState>()?;
    m.add_class::<process::MapState>()?;
    m.add_class::<process::Context>()?;
    m.add(
        "JobExecutionError",
        m.py().get_type::<run::JobExecutionError>(),
    )?;
    Ok(())
}
