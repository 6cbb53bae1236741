//! Spate's Python API: the native extension module `spate._native`.
//!
//! maturin builds this crate into `python/spate/_native*.so` (see the root `pyproject.toml`);
//! the pure-Python package `spate` (in `python/spate`) imports it. The module declares
//! `gil_used = true`: it is not audited for free-threaded Python.

use pyo3::prelude::*;

/// The version of the `spate-python` crate (the Cargo workspace's version).
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The native half of the `spate` Python package.
#[pymodule(gil_used = true)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
