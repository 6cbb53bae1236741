"""Spate's Python API: stream processing on Spate's Rust engine, in PyFlink's shape.

>>> from spate import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> words = env.from_collection(["a b", "b c"]).flat_map(str.split)
>>> counts = words.map(lambda w: (w, 1)).key_by(lambda p: p[0]).sum(1)
>>> sorted(counts.execute_and_collect())[-1]
('c', 1)

Building a job records a plan; ``execute()`` runs it on the engine's Rust operators (see
:mod:`spate.datastream`). The engine is the native module ``spate._native`` (the Rust crate
``crates/python``, built by maturin).
"""

from spate import _native
from spate import agg
from spate import functions, state, window, connectors, expr
from spate.common import Duration, Row, Time, TimestampAssigner, TypeInformation, Types, WatermarkStrategy
from spate.datastream import (CheckpointingMode, CloseableIterator, ConnectedStreams, DataStream,
                              JobExecutionError,
                              JobExecutionResult, KeyedStream, RestartStrategies,
                              PartitionWindowedStream, StreamExecutionEnvironment,
                              WindowedStream)
from spate.expr import col, lit

__version__: str = _native.version()
"""The version of Spate (the Cargo workspace's version)."""

__all__ = ["StreamExecutionEnvironment", "DataStream", "KeyedStream", "WindowedStream",
           "PartitionWindowedStream",
           "ConnectedStreams", "JobExecutionResult", "JobExecutionError", "CloseableIterator", "RestartStrategies",
           "CheckpointingMode", "Duration", "Time", "Types", "TypeInformation", "Row",
           "WatermarkStrategy", "TimestampAssigner", "col", "lit", "agg", "functions", "state",
           "window", "connectors", "expr", "__version__"]
