"""Spate's Python API: stream processing on Spate's Rust engine, shaped like PyFlink.

The engine runs in the native module ``spate._native`` (the Rust crate ``crates/python``,
built by maturin); this package is its Python face.
"""

from spate import _native

__version__: str = _native.version()
"""The version of Spate (the Cargo workspace's version)."""

__all__ = ["__version__"]
