"""Built-in aggregates for windows, computed incrementally in Rust: no Python per record.

>>> from spate import agg
>>> stream.key_by("auction").window(TumblingEventTimeWindows.of(Duration.of_seconds(10))) \\
...       .aggregate(agg.count().alias("bids"), agg.max("price"))

A window's result is a :class:`~spate.Row` of the key (named after the key field, or
``key``), ``window_start`` and ``window_end`` (epoch milliseconds) and one field per
aggregate, named by its alias (default: ``count``, ``sum_price``, ...). Aggregates other than
``collect_list`` skip ``None`` values, as SQL's do.
"""

from __future__ import annotations

from typing import Any

from spate.expr import Expr, field_of

__all__ = ["Agg", "count", "sum", "min", "max", "avg", "first", "last", "collect_list",
           "arg_max", "arg_min"]


class Agg:
    """One built-in aggregate."""

    __slots__ = ("kind", "arg", "name")

    def __init__(self, kind: str, arg: Expr | None, name: str):
        self.kind, self.arg, self.name = kind, arg, name

    def alias(self, name: str) -> "Agg":
        """The aggregate, with its output field named ``name``."""
        return Agg(self.kind, self.arg, name)

    def _spec(self) -> tuple:
        return (self.kind, None if self.arg is None else self.arg._tree, self.name)

    def __repr__(self) -> str:
        return f"agg.{self.kind}({self.name})"


def _default_name(kind: str, field: Any) -> str:
    if isinstance(field, str):
        return f"{kind}_{field.replace('.', '_')}"
    if isinstance(field, int) and not isinstance(field, bool):
        return f"{kind}_{field}"
    return kind


def _agg(kind: str, field: Any) -> Agg:
    return Agg(kind, field_of(field, f"agg.{kind}"), _default_name(kind, field))


def count() -> Agg:
    """The number of records."""
    return Agg("count", None, "count")


def sum(field: Any) -> Agg:  # noqa: A001 - mirrors SQL's name
    """The sum of ``field`` (an int while every value is one)."""
    return _agg("sum", field)


def min(field: Any) -> Agg:  # noqa: A001
    """The least value of ``field``."""
    return _agg("min", field)


def max(field: Any) -> Agg:  # noqa: A001
    """The greatest value of ``field``."""
    return _agg("max", field)


def avg(field: Any) -> Agg:
    """The mean of ``field``, a float."""
    return _agg("avg", field)


def first(field: Any) -> Agg:
    """The first value of ``field`` to arrive."""
    return _agg("first", field)


def last(field: Any) -> Agg:
    """The last value of ``field`` to arrive."""
    return _agg("last", field)


def collect_list(field: Any) -> Agg:
    """The values of ``field``, in arrival order."""
    return _agg("collect_list", field)


def arg_max(field: Any) -> Agg:
    """The record with the greatest ``field`` (the first to arrive among equals)."""
    return _agg("arg_max", field)


def arg_min(field: Any) -> Agg:
    """The record with the least ``field`` (the first to arrive among equals)."""
    return _agg("arg_min", field)
