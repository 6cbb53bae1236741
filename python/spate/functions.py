"""PyFlink's function classes (``pyflink.datastream.functions``).

Every operation also takes a plain function (``map(lambda x: x + 1)``) or a native spec; a
class is only needed for ``open`` / ``close``. ``open(runtime_context)`` runs once per
process before the job's first record, ``close()`` once after its last, in the process that
runs ``execute``.
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["Function", "RuntimeContext", "MapFunction", "FlatMapFunction", "FilterFunction",
           "KeySelector", "ReduceFunction", "KeyedProcessFunction", "AggregateFunction",
           "ProcessWindowFunction", "CoMapFunction", "CoFlatMapFunction",
           "KeyedCoProcessFunction"]


class RuntimeContext:
    """What ``open`` learns about the job, and where a ``KeyedProcessFunction`` gets its
    keyed state (``get_state``, ``get_list_state``, ``get_map_state``)."""

    def __init__(self, job_name: str, parallelism: int, max_parallelism: int):
        self._job, self._p, self._maxp = job_name, parallelism, max_parallelism
        self._states: dict = {}

    def _state(self, descriptor: Any, kind: str, cls: Any) -> Any:
        from spate.state import StateDescriptor
        if not isinstance(descriptor, StateDescriptor) or descriptor.kind != kind:
            raise TypeError(f"get_{kind}_state takes a {kind.capitalize()}StateDescriptor"
                            if kind != "value" else "get_state takes a ValueStateDescriptor")
        known = self._states.get(descriptor.name)
        if known is not None:
            if known[0] != kind:
                raise ValueError(f"the state {descriptor.name!r} is already a {known[0]} state")
            return known[1]
        handle = cls(len(self._states))
        self._states[descriptor.name] = (kind, handle)
        return handle

    def get_state(self, state_descriptor: Any) -> Any:
        """The function's ``ValueState`` named by the descriptor (one value per key)."""
        from spate._native import ValueState
        return self._state(state_descriptor, "value", ValueState)

    def get_list_state(self, state_descriptor: Any) -> Any:
        """The function's ``ListState`` (a list per key)."""
        from spate._native import ListState
        return self._state(state_descriptor, "list", ListState)

    def get_map_state(self, state_descriptor: Any) -> Any:
        """The function's ``MapState`` (a map per key)."""
        from spate._native import MapState
        return self._state(state_descriptor, "map", MapState)

    def get_job_name(self) -> str:
        return self._job

    def get_number_of_parallel_subtasks(self) -> int:
        return self._p

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._maxp


class Function:
    """The base of the function classes: ``open`` and ``close`` hooks."""

    def open(self, runtime_context: RuntimeContext) -> None:
        pass

    def close(self) -> None:
        pass


class MapFunction(Function):
    def map(self, value: Any) -> Any:
        raise NotImplementedError


class FlatMapFunction(Function):
    def flat_map(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError


class FilterFunction(Function):
    def filter(self, value: Any) -> bool:
        raise NotImplementedError


class KeySelector(Function):
    def get_key(self, value: Any) -> Any:
        raise NotImplementedError


class ReduceFunction(Function):
    def reduce(self, value1: Any, value2: Any) -> Any:
        raise NotImplementedError


class KeyedProcessFunction(Function):
    """A function of a keyed stream with keyed state and timers (PyFlink's
    ``KeyedProcessFunction``).

    ``open(runtime_context)`` gets the states (``runtime_context.get_state(...)``).
    ``process_element(value, ctx)`` runs per record and *yields* its outputs; the state
    handles act on the current key's state; ``ctx.get_current_key()``, ``ctx.timestamp()`` and
    ``ctx.timer_service()`` (``register_event_time_timer(t)``, ``current_watermark()``, ...)
    are PyFlink's. ``on_timer(timestamp, ctx)`` runs when a timer fires and yields too.

    The state lives in the engine, per key: it is checkpointed with the job and moves with
    its key groups when a job restores onto another number of workers.
    """

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        return ()


class AggregateFunction(Function):
    """An incremental aggregate of a window (PyFlink's ``AggregateFunction``). Runs Python
    per record; the built-in aggregates of :mod:`spate.agg` do not. The accumulator is kept
    by the engine between calls (so it is checkpointed): return it from ``add`` and
    ``merge``."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def add(self, value: Any, accumulator: Any) -> Any:
        raise NotImplementedError

    def get_result(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        raise NotImplementedError


class ProcessWindowFunction(Function):
    """A function of a fired window's elements (PyFlink's ``ProcessWindowFunction``):
    ``process(key, context, elements)`` yields the window's outputs; ``context.window()``
    is its :class:`~spate.window.TimeWindow`."""

    class Context:
        """What ``process`` learns about the window."""

        def __init__(self, window: Any, watermark: int, processing_time: int):
            self._window, self._wm, self._pt = window, watermark, processing_time

        def window(self) -> Any:
            return self._window

        def current_watermark(self) -> int:
            return self._wm

        def current_processing_time(self) -> int:
            return self._pt

    def process(self, key: Any, context: "ProcessWindowFunction.Context",
                elements: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError


class CoMapFunction(Function):
    """A map of two connected streams: ``map1`` for the first's records, ``map2`` for the
    second's."""

    def map1(self, value: Any) -> Any:
        raise NotImplementedError

    def map2(self, value: Any) -> Any:
        raise NotImplementedError


class CoFlatMapFunction(Function):
    """A flat map of two connected streams."""

    def flat_map1(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError

    def flat_map2(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError


class KeyedCoProcessFunction(Function):
    """A process function of two connected keyed streams with shared keyed state and
    timers (PyFlink's ``KeyedCoProcessFunction``)."""

    def process_element1(self, value: Any, ctx: Any) -> Iterable[Any]:
        raise NotImplementedError

    def process_element2(self, value: Any, ctx: Any) -> Iterable[Any]:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        return ()
