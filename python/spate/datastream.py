"""The DataStream API in PyFlink's shape: :class:`StreamExecutionEnvironment`,
:class:`DataStream`, :class:`KeyedStream` and :class:`WindowedStream`.

Building a job only records a plan; ``execute()`` hands the plan to the engine once, and
the job runs on the same Rust operators as a job written in Rust. Operations take a Python
function, a PyFlink function object, or a native spec (a field name, an expression from
:mod:`spate.expr`, an aggregate from :mod:`spate.agg`); native specs run no Python per
record. Consecutive Python functions are fused into one operator that enters Python once
per batch.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Iterator

from spate import _native
from spate.common import TypeInformation, WatermarkStrategy, millis
from spate.connectors import FileSink, Source
from spate.expr import Expr, col, field_of
from spate.functions import Function, KeyedProcessFunction, RuntimeContext
from spate.window import WindowAssigner

__all__ = ["StreamExecutionEnvironment", "DataStream", "KeyedStream", "WindowedStream",
           "PartitionWindowedStream",
           "JobExecutionResult", "CloseableIterator", "RestartStrategies",
           "CheckpointingMode", "JobExecutionError"]

JobExecutionError = _native.JobExecutionError


class CheckpointingMode:
    """Spate's checkpoints are always exactly once (aligned on epochs)."""
    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"


class RestartStrategies:
    """How a failed job restarts from its latest checkpoint (PyFlink's
    ``RestartStrategies``)."""

    @staticmethod
    def no_restart() -> dict:
        return {"kind": "none"}

    @staticmethod
    def fixed_delay_restart(restart_attempts: int, delay_between_attempts: Any) -> dict:
        return {"kind": "fixed_delay", "attempts": int(restart_attempts),
                "delay_ms": millis(delay_between_attempts, "the restart delay")}


class JobExecutionResult:
    """What ``execute`` returns: the job's totals, its operators' counters and how many
    Python calls it made (0 for a plan of native specs only)."""

    def __init__(self, job_name: str, raw: dict):
        self.job_name = job_name
        self.net_runtime_ms: float = raw["elapsed_ms"]
        self.totals: dict = raw["totals"]
        self.metrics: dict = raw["metrics"]
        self.python_calls: int = raw["python_calls"]
        self.role: str = raw["role"]
        self.operators: list = raw["operators"]
        self.stopped: bool = raw["stopped"]
        self.canceled: bool = raw["canceled"]

    def get_job_name(self) -> str:
        return self.job_name

    def get_net_runtime(self) -> int:
        """The job's run time in milliseconds."""
        return int(self.net_runtime_ms)

    def __repr__(self) -> str:
        return (f"JobExecutionResult({self.job_name!r}, {self.net_runtime_ms:.0f} ms, "
                f"python_calls={self.python_calls})")


class CloseableIterator:
    """The results of ``execute_and_collect``: an iterator, and a context manager."""

    def __init__(self, items: list):
        self._it: Iterator = iter(items)

    def __iter__(self) -> "CloseableIterator":
        return self

    def __next__(self) -> Any:
        return next(self._it)

    def close(self) -> None:
        self._it = iter(())

    def __enter__(self) -> "CloseableIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _callable(f: Any, method: str, what: str) -> Any:
    """A Python function from a function or a PyFlink function object."""
    if isinstance(f, Function) and hasattr(f, method):
        return getattr(f, method)
    if callable(f):
        return f
    raise TypeError(f"{what} takes a function, a {method}-function object or an expression, "
                    f"not {type(f).__name__}")


class StreamExecutionEnvironment:
    """Where a job is described and run (PyFlink's ``StreamExecutionEnvironment``)."""

    def __init__(self) -> None:
        self._nodes: list[dict] = []
        self._functions: list[Function] = []
        self._config: dict = {"workers": 1}

    @staticmethod
    def get_execution_environment(configuration: Any = None) -> "StreamExecutionEnvironment":
        return StreamExecutionEnvironment()

    # --- configuration ------------------------------------------------------------------
    def set_parallelism(self, parallelism: int) -> "StreamExecutionEnvironment":
        """The number of worker threads (per process)."""
        if int(parallelism) < 1:
            raise ValueError("the parallelism must be at least 1")
        self._config["workers"] = int(parallelism)
        return self

    def get_parallelism(self) -> int:
        return self._config["workers"]

    def set_max_parallelism(self, max_parallelism: int) -> "StreamExecutionEnvironment":
        """The number of key groups: the most workers keyed state can later spread over."""
        if int(max_parallelism) < 1:
            raise ValueError("the max parallelism must be at least 1")
        self._config["max_parallelism"] = int(max_parallelism)
        return self

    def enable_checkpointing(self, interval: int, mode: Any = None) -> "StreamExecutionEnvironment":
        """Takes an exactly-once checkpoint every ``interval`` milliseconds (into
        :meth:`set_checkpoint_dir`, by default ``./checkpoints``)."""
        self._config["checkpoint_interval_ms"] = millis(interval, "the checkpoint interval")
        self._config.setdefault("checkpoint_dir", os.path.abspath("checkpoints"))
        return self

    def set_checkpoint_dir(self, path: str) -> "StreamExecutionEnvironment":
        """Where checkpoints go: a directory (or an object-store URL)."""
        p = os.fspath(path)
        self._config["checkpoint_dir"] = p if "://" in p else os.path.abspath(p)
        return self

    def set_restore(self, what: str, allow_non_restored_state: bool = False) -> "StreamExecutionEnvironment":
        """Restores at start: ``"latest"`` (the newest checkpoint) or a checkpoint or
        savepoint location, onto any parallelism. State belongs to operators' uids; with
        ``allow_non_restored_state`` the state of uids the job no longer has is dropped
        (Flink's ``--allowNonRestoredState``) instead of failing the restore."""
        self._config["restore"] = what if what == "latest" or "://" in what else os.path.abspath(what)
        self._config["allow_non_restored_state"] = bool(allow_non_restored_state)
        return self

    def set_savepoint_dir(self, path: str) -> "StreamExecutionEnvironment":
        """Writes a savepoint there when the job ends (its input ends, or a stop): restore
        it later with :meth:`set_restore`, on any number of workers."""
        p = os.fspath(path)
        self._config["savepoint_dir"] = p if "://" in p else os.path.abspath(p)
        return self

    def set_restart_strategy(self, strategy: dict) -> "StreamExecutionEnvironment":
        self._config["restart"] = strategy
        return self

    def set_processes(self, processes: int) -> "StreamExecutionEnvironment":
        """Runs the job in ``processes`` processes, each with ``parallelism`` workers."""
        if int(processes) < 1:
            raise ValueError("the number of processes must be at least 1")
        self._config["processes"] = int(processes)
        return self

    def set_rest(self, enabled: bool) -> "StreamExecutionEnvironment":
        """Whether the job serves its REST API and dashboard (on by default, on a free
        loopback port printed at start)."""
        self._config["rest"] = bool(enabled)
        return self

    def set_epoch_interval(self, interval: Any) -> "StreamExecutionEnvironment":
        """How often a worker closes an epoch (latency against overhead)."""
        self._config["epoch_interval_ms"] = millis(interval, "the epoch interval")
        return self

    # --- sources ------------------------------------------------------------------------
    def _add(self, node: dict, inputs: list[int]) -> int:
        node = dict(node)
        node["id"] = len(self._nodes)
        node["inputs"] = inputs
        node.setdefault("name", None)
        node.setdefault("uid", None)
        self._nodes.append(node)
        return node["id"]

    def _source(self, node: dict, strategy: WatermarkStrategy | None, name: str | None,
                source: Source | None = None) -> "DataStream":
        s = DataStream(self, self._add(node, []))
        if name:
            s.name(name)
        if strategy is not None and strategy.kind != "none":
            event_time = getattr(source, "event_time", None) if source is not None else None
            if strategy.assigner is None and event_time is not None:
                strategy = strategy.with_timestamp_assigner(event_time())
            s = s.assign_timestamps_and_watermarks(strategy)
        return s

    def from_collection(self, collection: Iterable[Any], type_info: TypeInformation | None = None) -> "DataStream":
        """The elements of ``collection``, in order (plain values, tuples, rows, ...)."""
        return self._source({"op": "collection", "items": list(collection)}, None, None)

    def from_source(self, source: Source, watermark_strategy: WatermarkStrategy | None = None,
                    source_name: str | None = None, type_info: TypeInformation | None = None) -> "DataStream":
        if not isinstance(source, Source):
            raise TypeError(f"from_source takes a source, not {type(source).__name__}")
        return self._source(source._node(), watermark_strategy, source_name, source)

    def read_text_file(self, file_path: str, charset_name: str = "UTF-8") -> "DataStream":
        from spate.connectors import FileSource
        return self.from_source(FileSource.text_lines(file_path))

    def from_sequence(self, start: int, end: int) -> "DataStream":
        """The integers ``start..=end``."""
        from spate.connectors import NumberSequenceSource
        return self.from_source(NumberSequenceSource(start, end))

    def socket_text_stream(self, host: str, port: int) -> "DataStream":
        from spate.connectors import SocketSource
        return self.from_source(SocketSource(host, port))

    # --- running ------------------------------------------------------------------------
    def get_execution_plan(self) -> list[dict]:
        """The plan's nodes, as the engine receives them."""
        return [dict(n) for n in self._nodes]

    def _run(self, job_name: str) -> dict:
        if not any(n["op"] in _SINKS for n in self._nodes):
            raise RuntimeError("no sinks are defined: add print(), sink_to(...) or use "
                               "execute_and_collect()")
        parallelism = self._config["workers"] * self._config.get("processes", 1)
        opened: list[Function] = []
        config = dict(self._config)
        if config.get("processes", 1) > 1:
            config["launch"] = _launch_command()
        try:
            for f in dict.fromkeys(self._functions):  # each object once, in order
                f.open(RuntimeContext(job_name, parallelism,
                                      self._config.get("max_parallelism", 128)))
                opened.append(f)
            return _native.execute(self._nodes, config, job_name)
        finally:
            for f in opened:
                f.close()
            # As in Flink, a job's operators are cleared once it has run.
            self._nodes = []
            self._functions = []

    def execute(self, job_name: str | None = None) -> JobExecutionResult:
        """Runs the job to its end (or a Ctrl-C, which drains it) and returns its result.
        A failure raises :class:`JobExecutionError`."""
        name = job_name or "Spate Streaming Job"
        return JobExecutionResult(name, self._run(name))


_SINKS = {"print", "collect", "file_sink"}


def _launch_command() -> list[str]:
    """How a supervisor starts this program again for each process of the job: this
    interpreter with this process's arguments (``python job.py ...`` re-runs the script,
    ``python -m spate.run pkg.mod:factory`` the factory)."""
    import sys
    main = sys.modules.get("__main__")
    if os.environ.get("SPATE_PROCESS_INDEX") is not None:
        return [sys.executable, *sys.orig_argv[1:]]
    runner = getattr(main, "__spec__", None)
    if runner is not None and runner.name == "spate.run":
        return [sys.executable, *sys.orig_argv[1:]]
    if main is None or not getattr(main, "__file__", None) or "pytest" in sys.modules:
        raise RuntimeError("a job of several processes re-runs its program in each process: "
                           "run it as a script (python job.py) or with "
                           "python -m spate.run module:factory")
    return [sys.executable, *sys.orig_argv[1:]]


class DataStream:
    """A stream of records (PyFlink's ``DataStream``)."""

    def __init__(self, env: StreamExecutionEnvironment, node: int):
        self._env, self._id = env, node

    @property
    def _node(self) -> dict:
        return self._env._nodes[self._id]

    def _then(self, node: dict, cls: type = None, inputs: list[int] | None = None) -> Any:
        nid = self._env._add(node, [self._id] if inputs is None else inputs)
        return (cls or DataStream)(self._env, nid)

    def _fn_node(self, op: str, f: Any, method: str, output_type: Any = None) -> dict:
        if isinstance(f, Expr):
            return {"op": op, "expr": f._tree, "fn": None}
        fn = _callable(f, method, op)
        if isinstance(f, Function):
            self._env._functions.append(f)
        if output_type is not None and op == "map" and getattr(output_type, "kind", None) == "ROW" \
                and output_type.names is not None:
            names, inner = list(output_type.names), fn

            def fn(value: Any, _f: Callable = inner, _n: list = names) -> Any:
                r = _f(value)
                if isinstance(r, _native.Row) and r._fields is not None:
                    return r
                return _native.Row(**dict(zip(_n, r)))
        return {"op": op, "fn": fn, "expr": None}

    def name(self, name: str) -> "DataStream":
        """Names the operator (in metrics, the dashboard and errors)."""
        self._node["name"] = str(name)
        return self

    def uid(self, uid: str) -> "DataStream":
        """The operator's stable id: its checkpointed state belongs to it, so restores keep
        working across edits of the job."""
        self._node["uid"] = str(uid)
        return self

    def set_parallelism(self, parallelism: int) -> "DataStream":
        if int(parallelism) != self._env.get_parallelism():
            raise ValueError("every operator runs on all workers: set the parallelism on "
                             "the environment")
        return self

    def map(self, func: Any, output_type: TypeInformation | None = None) -> "DataStream":
        return self._then(self._fn_node("map", func, "map", output_type))

    def flat_map(self, func: Any, output_type: TypeInformation | None = None) -> "DataStream":
        return self._then(self._fn_node("flat_map", func, "flat_map"))

    def filter(self, func: Any) -> "DataStream":
        return self._then(self._fn_node("filter", func, "filter"))

    def key_by(self, key_selector: Any, key_type: TypeInformation | None = None) -> "KeyedStream":
        """Partitions by key: a function, a ``KeySelector``, a field name, a position or an
        expression. Keys are hashed in Rust, so every process agrees on them."""
        if isinstance(key_selector, (str, int)) and not isinstance(key_selector, bool):
            key_name = key_selector if isinstance(key_selector, str) else "key"
            node = {"op": "key_by", "expr": col(key_selector)._tree, "fn": None}
        elif isinstance(key_selector, Expr):
            key_name, node = "key", {"op": "key_by", "expr": key_selector._tree, "fn": None}
        else:
            key_name = "key"
            fn = _callable(key_selector, "get_key", "key_by")
            if isinstance(key_selector, Function):
                self._env._functions.append(key_selector)
            node = {"op": "key_by", "fn": fn, "expr": None}
        node["key_name"] = key_name.replace(".", "_")
        return self._then(node, KeyedStream)

    def union(self, *streams: "DataStream") -> "DataStream":
        for s in streams:
            if s._env is not self._env:
                raise ValueError("union takes streams of the same environment")
        return self._then({"op": "union"}, inputs=[self._id, *(s._id for s in streams)])

    def connect(self, other: "DataStream") -> "ConnectedStreams":
        """Connects two streams of possibly different types, for a ``CoMapFunction``,
        ``CoFlatMapFunction`` or (keyed) ``KeyedCoProcessFunction``."""
        if not isinstance(other, DataStream) or other._env is not self._env:
            raise ValueError("connect takes a stream of the same environment")
        return ConnectedStreams(self, other)

    def rebalance(self) -> "DataStream":
        return self._then({"op": "rebalance"})

    def assign_timestamps_and_watermarks(self, watermark_strategy: WatermarkStrategy) -> "DataStream":
        node = watermark_strategy._node()
        node["op"] = "assign_timestamps"
        return self._then(node)

    def print(self, sink_identifier: str | None = None) -> "DataStreamSink":
        """Prints each record (its ``str``) on stdout; with several workers each line starts
        with the worker's number, as in Flink."""
        return self._then({"op": "print", "prefix": sink_identifier}, DataStreamSink)

    def sink_to(self, sink: FileSink) -> "DataStreamSink":
        if not isinstance(sink, FileSink):
            raise TypeError(f"sink_to takes a FileSink, not {type(sink).__name__}")
        return self._then(sink._node(), DataStreamSink)

    def execute_and_collect(self, job_execution_name: str | None = None,
                            limit: int | None = None) -> CloseableIterator:
        """Runs the job and returns this stream's records (in one process: a job of several
        processes writes to a sink instead)."""
        if self._env._config.get("processes", 1) > 1:
            raise RuntimeError("execute_and_collect runs a job in one process; a job of "
                               "several processes writes its results to a sink (sink_to)")
        sink = self._then({"op": "collect"}, DataStreamSink)
        name = job_execution_name or "Spate Streaming Job"
        raw = self._env._run(name)
        items = raw["collected"].get(sink._id, [])
        return CloseableIterator(items if limit is None else items[:limit])


class DataStreamSink(DataStream):
    """A sink of the plan."""


class KeyedStream(DataStream):
    """A stream partitioned by key (PyFlink's ``KeyedStream``)."""

    def _field(self, spec: Any) -> tuple:
        if isinstance(spec, int) and not isinstance(spec, bool):
            return ("item", spec)
        if isinstance(spec, str):
            return ("col", spec)
        raise TypeError("a rolling aggregate takes a field name or a position")

    def reduce(self, func: Any) -> DataStream:
        """Combines each record with its key's previous result (``func(previous, new)``)."""
        fn = _callable(func, "reduce", "reduce")
        if isinstance(func, Function):
            self._env._functions.append(func)
        return self._then({"op": "reduce", "fn": fn})

    def _rolling(self, kind: str, spec: Any) -> DataStream:
        return self._then({"op": "rolling", "kind": kind, "field": self._field(spec)})

    def sum(self, position_to_sum: Any = 0) -> DataStream:
        """A running sum of the field: each output is the key's first record with the field
        replaced by the sum (Flink's rolling aggregate)."""
        return self._rolling("sum", position_to_sum)

    def min(self, position_to_min: Any = 0) -> DataStream:
        return self._rolling("min", position_to_min)

    def max(self, position_to_max: Any = 0) -> DataStream:
        return self._rolling("max", position_to_max)

    def min_by(self, position_to_min_by: Any = 0) -> DataStream:
        return self._rolling("min_by", position_to_min_by)

    def max_by(self, position_to_max_by: Any = 0) -> DataStream:
        return self._rolling("max_by", position_to_max_by)

    def count(self) -> DataStream:
        """``(key, count so far)`` per record (a Spate addition)."""
        return self._then({"op": "count"})

    def process(self, keyed_process_function: KeyedProcessFunction,
                output_type: TypeInformation | None = None) -> DataStream:
        """Runs a :class:`~spate.functions.KeyedProcessFunction` with keyed state and
        timers."""
        if not isinstance(keyed_process_function, KeyedProcessFunction):
            raise TypeError("process on a keyed stream takes a KeyedProcessFunction")
        self._env._functions.append(keyed_process_function)
        return self._then({"op": "process", "fn": keyed_process_function})

    def full_window_partition(self) -> "PartitionWindowedStream":
        """Each key's records as one window that ends with the input: see
        :class:`PartitionWindowedStream`."""
        node = {"op": "window", "kind": "full_partition", "size_ms": 0, "slide_ms": 0,
                "gap_ms": 0, "offset_ms": 0, "lateness_ms": None,
                "key_name": self._node.get("key_name", "key")}
        return self._then(node, PartitionWindowedStream)

    def window(self, window_assigner: WindowAssigner) -> "WindowedStream":
        if not isinstance(window_assigner, WindowAssigner):
            raise TypeError("window takes a window assigner (spate.window)")
        node = {"op": "window", **window_assigner._spec(), "lateness_ms": None,
                "key_name": self._node.get("key_name", "key")}
        return self._then(node, WindowedStream)


def _native_aggregate(windowed: DataStream, aggregates: tuple) -> DataStream:
    """The node of built-in aggregates (``spate.agg``) over a window or a full partition."""
    from spate.agg import Agg
    if not aggregates or not all(isinstance(a, Agg) for a in aggregates):
        raise TypeError("aggregate takes built-in aggregates (spate.agg.count(), ...) or "
                        "one AggregateFunction")
    names = [a.name for a in aggregates]
    if len(set(names)) != len(names):
        raise ValueError(f"two aggregates have the same name: {names} (use .alias)")
    return windowed._then({"op": "window_aggregate", "aggs": [a._spec() for a in aggregates],
                           "key_name": windowed._node.get("key_name", "key")})


class PartitionWindowedStream(DataStream):
    """Each key's records as one window that ends with the input (Flink 1.20's
    ``KeyedStream.full_window_partition()``): one result per key, emitted when a bounded
    input ends (an unbounded one never emits). The accumulator is the key's checkpointed
    state; nothing is kept per window or per record."""

    def aggregate(self, *aggregates: Any) -> DataStream:
        """With built-in aggregates (:mod:`spate.agg`) it runs in Rust, and each key's result
        is a row of the key and the aggregates; with one Python
        :class:`~spate.functions.AggregateFunction`, its ``get_result``."""
        from spate.functions import AggregateFunction
        if len(aggregates) == 1 and isinstance(aggregates[0], AggregateFunction):
            self._env._functions.append(aggregates[0])
            return self._then({"op": "window_py_aggregate", "fn": aggregates[0],
                               "window_fn": None})
        return _native_aggregate(self, aggregates)

    def reduce(self, reduce_function: Any) -> DataStream:
        """Each key's records reduced by ``reduce_function(accumulated, new)``, once per key at
        the end of the input."""
        fn = _callable(reduce_function, "reduce", "reduce")
        if isinstance(reduce_function, Function):
            self._env._functions.append(reduce_function)
        return self._then({"op": "window_reduce", "fn": fn})


class WindowedStream(DataStream):
    """A keyed stream cut into windows (PyFlink's ``WindowedStream``)."""

    def allowed_lateness(self, time_ms: Any) -> "WindowedStream":
        self._node["lateness_ms"] = millis(time_ms, "the allowed lateness")
        return self

    def reduce(self, reduce_function: Any) -> DataStream:
        fn = _callable(reduce_function, "reduce", "reduce")
        if isinstance(reduce_function, Function):
            self._env._functions.append(reduce_function)
        return self._then({"op": "window_reduce", "fn": fn})

    def aggregate(self, *aggregates: Any, window_function: Any = None) -> DataStream:
        """Aggregates each window incrementally.

        With built-in aggregates (:mod:`spate.agg`, any number) it runs in Rust, and the
        result is a row of the key, ``window_start``, ``window_end`` and the aggregates. With
        a Python :class:`~spate.functions.AggregateFunction` (PyFlink's form) the result is
        its ``get_result``, or what ``window_function`` (a ``ProcessWindowFunction``) makes
        of it."""
        from spate.agg import Agg
        from spate.functions import AggregateFunction
        if len(aggregates) == 1 and isinstance(aggregates[0], AggregateFunction):
            f = aggregates[0]
            self._env._functions.append(f)
            return self._then({"op": "window_py_aggregate", "fn": f,
                               "window_fn": self._window_fn(window_function)})
        if window_function is not None and all(isinstance(a, Agg) for a in aggregates):
            raise TypeError("a window function goes with an AggregateFunction; built-in "
                            "aggregates give the window's bounds themselves")
        return _native_aggregate(self, aggregates)

    def process(self, process_window_function: Any) -> DataStream:
        """Runs a :class:`~spate.functions.ProcessWindowFunction` on each fired window's
        elements (the window keeps them until it fires)."""
        return self._then({"op": "window_process",
                           "window_fn": self._window_fn(process_window_function)})

    def _window_fn(self, f: Any) -> Any:
        """The engine's form of a ``ProcessWindowFunction``: a callable of the key, the
        window's bounds, the clocks and the elements."""
        from spate.functions import ProcessWindowFunction
        from spate.window import TimeWindow
        if f is None:
            return None
        if not isinstance(f, ProcessWindowFunction):
            raise TypeError("a window function is a ProcessWindowFunction")
        self._env._functions.append(f)
        Context = ProcessWindowFunction.Context

        def call(key: Any, start: int, end: int, wm: int, pt: int, elements: list) -> Any:
            return f.process(key, Context(TimeWindow(start, end), wm, pt), elements)
        return call


class ConnectedStreams:
    """Two connected streams (PyFlink's ``ConnectedStreams``). The engine runs them as one
    stream of tagged records (a union, whose watermark is the lesser of the two), so each
    input keeps its order and a keyed function sees both inputs' records of a key."""

    def __init__(self, first: DataStream, second: DataStream,
                 keys: tuple[Any, Any] | None = None):
        self._first, self._second, self._keys = first, second, keys

    def _tagged(self) -> DataStream:
        from spate.expr import lit, tuple_
        a = self._first.map(tuple_(lit(0), col("*"))).name("connect (first)")
        b = self._second.map(tuple_(lit(1), col("*"))).name("connect (second)")
        return a.union(b).name("connect")

    def map(self, func: Any, output_type: TypeInformation | None = None) -> DataStream:
        from spate.functions import CoMapFunction
        if not isinstance(func, CoMapFunction):
            raise TypeError("map on connected streams takes a CoMapFunction")
        self._first._env._functions.append(func)
        m1, m2 = func.map1, func.map2
        return self._tagged().map(lambda t: m1(t[1]) if t[0] == 0 else m2(t[1])).name("co_map")

    def flat_map(self, func: Any, output_type: TypeInformation | None = None) -> DataStream:
        from spate.functions import CoFlatMapFunction
        if not isinstance(func, CoFlatMapFunction):
            raise TypeError("flat_map on connected streams takes a CoFlatMapFunction")
        self._first._env._functions.append(func)
        f1, f2 = func.flat_map1, func.flat_map2
        return self._tagged().flat_map(
            lambda t: f1(t[1]) if t[0] == 0 else f2(t[1])).name("co_flat_map")

    def key_by(self, key_selector1: Any, key_selector2: Any,
               key_type: TypeInformation | None = None) -> "ConnectedStreams":
        """Keys both inputs (a field name, a position or a function each)."""
        return ConnectedStreams(self._first, self._second, (key_selector1, key_selector2))

    def process(self, func: Any, output_type: TypeInformation | None = None) -> DataStream:
        from spate.functions import KeyedCoProcessFunction
        if self._keys is None:
            raise TypeError("process on connected streams needs key_by(key1, key2) first")
        if not isinstance(func, KeyedCoProcessFunction):
            raise TypeError("process on connected keyed streams takes a KeyedCoProcessFunction")

        def selector(spec: Any) -> Callable[[Any], Any]:
            if isinstance(spec, (str, int)) and not isinstance(spec, bool):
                return lambda v: v[spec]
            if isinstance(spec, Expr):
                raise TypeError("key connected streams by a field name, a position or a function")
            return _callable(spec, "get_key", "key_by")

        k1, k2 = selector(self._keys[0]), selector(self._keys[1])
        if all(isinstance(k, str) for k in self._keys) and self._keys[0] == self._keys[1]:
            keyed = self._tagged().key_by(col(f"1.{self._keys[0]}"))
        else:
            keyed = self._tagged().key_by(lambda t: k1(t[1]) if t[0] == 0 else k2(t[1]))
        return keyed.process(_CoProcess(func)).name("co_process")


class _CoProcess(KeyedProcessFunction):
    """A ``KeyedCoProcessFunction`` over the tagged records of connected streams."""

    def __init__(self, f: Any):
        self._f = f

    def open(self, runtime_context: Any) -> None:
        self._f.open(runtime_context)

    def close(self) -> None:
        self._f.close()

    def process_element(self, value: Any, ctx: Any) -> Any:
        tag, v = value
        return (self._f.process_element1 if tag == 0 else self._f.process_element2)(v, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        return self._f.on_timer(timestamp, ctx)
