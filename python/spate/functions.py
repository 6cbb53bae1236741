"""PyFlink's function classes (``pyflink.datastream.functions``).

Every operation also takes a plain function (``map(lambda x: x + 1)``) or a native spec; a
class is only needed for ``open`` / ``close``. ``open(runtime_context)`` runs once per
process before the job's first record, ``close()`` once after its last, in the process that
runs ``execute``.
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["Function", "RuntimeContext", "MapFunction", "FlatMapFunction", "FilterFunction",
           "KeySelector", "ReduceFunction"]


class RuntimeContext:
    """What ``open`` learns about the job."""

    def __init__(self, job_name: str, parallelism: int, max_parallelism: int):
        self._job, self._p, self._maxp = job_name, parallelism, max_parallelism

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
