"""Types, durations, watermark strategies and the rest of PyFlink's ``pyflink.common``."""

from __future__ import annotations

from typing import Any, Sequence

from spate._native import Row

__all__ = ["Duration", "Time", "Types", "TypeInformation", "Row", "WatermarkStrategy",
           "TimestampAssigner"]


class Duration:
    """A span of time, as PyFlink's ``Duration`` (``Duration.of_seconds(5)``)."""

    __slots__ = ("_ms",)

    def __init__(self, millis: int):
        self._ms = int(millis)

    @staticmethod
    def of_millis(ms: int) -> "Duration":
        return Duration(ms)

    @staticmethod
    def of_seconds(s: float) -> "Duration":
        return Duration(round(s * 1000))

    @staticmethod
    def of_minutes(m: float) -> "Duration":
        return Duration(round(m * 60_000))

    @staticmethod
    def of_hours(h: float) -> "Duration":
        return Duration(round(h * 3_600_000))

    @staticmethod
    def of_days(d: float) -> "Duration":
        return Duration(round(d * 86_400_000))

    def to_milliseconds(self) -> int:
        return self._ms

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other._ms == self._ms

    def __hash__(self) -> int:
        return hash(self._ms)

    def __repr__(self) -> str:
        return f"Duration.of_millis({self._ms})"


class Time(Duration):
    """PyFlink's older ``Time`` (``Time.seconds(5)``), the same as a :class:`Duration`."""

    @staticmethod
    def milliseconds(ms: int) -> "Time":
        return Time(ms)

    @staticmethod
    def seconds(s: float) -> "Time":
        return Time(round(s * 1000))

    @staticmethod
    def minutes(m: float) -> "Time":
        return Time(round(m * 60_000))

    @staticmethod
    def hours(h: float) -> "Time":
        return Time(round(h * 3_600_000))


def millis(d: Any, what: str = "a duration") -> int:
    """A duration in milliseconds from a :class:`Duration`, a ``datetime.timedelta`` or an int."""
    if isinstance(d, Duration):
        return d.to_milliseconds()
    if isinstance(d, bool):
        raise TypeError(f"{what} must be a Duration or milliseconds, not bool")
    if isinstance(d, int):
        return d
    if hasattr(d, "total_seconds"):
        return round(d.total_seconds() * 1000)
    raise TypeError(f"{what} must be a Duration or milliseconds, not {type(d).__name__}")


class TypeInformation:
    """A declared type (PyFlink's ``TypeInformation``). Rows carry their field names and
    types; files read with a row type are decoded in Rust, field by field."""

    __slots__ = ("kind", "names", "types")

    def __init__(self, kind: str, names: Sequence[str] | None = None,
                 types: Sequence["TypeInformation"] | None = None):
        self.kind = kind
        self.names = list(names) if names is not None else None
        self.types = list(types) if types is not None else None

    def __repr__(self) -> str:
        if self.kind == "ROW" and self.names is not None:
            inner = ", ".join(f"{n}: {t!r}" for n, t in zip(self.names, self.types or []))
            return f"ROW<{inner}>"
        return self.kind

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TypeInformation) and other.kind == self.kind
                and other.names == self.names and other.types == self.types)

    def __hash__(self) -> int:
        return hash((self.kind, tuple(self.names or ()), ))


class Types:
    """The declared types of PyFlink's ``Types``."""

    @staticmethod
    def STRING() -> TypeInformation:
        return TypeInformation("STRING")

    @staticmethod
    def BOOLEAN() -> TypeInformation:
        return TypeInformation("BOOLEAN")

    @staticmethod
    def BYTE() -> TypeInformation:
        return TypeInformation("BYTE")

    @staticmethod
    def SHORT() -> TypeInformation:
        return TypeInformation("SHORT")

    @staticmethod
    def INT() -> TypeInformation:
        return TypeInformation("INT")

    @staticmethod
    def LONG() -> TypeInformation:
        return TypeInformation("LONG")

    @staticmethod
    def FLOAT() -> TypeInformation:
        return TypeInformation("FLOAT")

    @staticmethod
    def DOUBLE() -> TypeInformation:
        return TypeInformation("DOUBLE")

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:
        """A timestamp: read from ``yyyy-MM-dd HH:mm:ss[.SSS]`` text (or epoch
        milliseconds) as an int of epoch milliseconds, UTC."""
        return TypeInformation("TIMESTAMP")

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:
        return TypeInformation("PICKLED")

    @staticmethod
    def ROW_NAMED(names: Sequence[str], types: Sequence[TypeInformation]) -> TypeInformation:
        names, types = list(names), list(types)
        if len(names) != len(types):
            raise ValueError(f"ROW_NAMED needs one type per name ({len(names)} names, "
                             f"{len(types)} types)")
        for t in types:
            if not isinstance(t, TypeInformation):
                raise TypeError(f"ROW_NAMED types must be Types.X(), not {t!r}")
        return TypeInformation("ROW", names, types)

    @staticmethod
    def ROW(types: Sequence[TypeInformation]) -> TypeInformation:
        return TypeInformation("ROW", None, list(types))

    @staticmethod
    def TUPLE(types: Sequence[TypeInformation]) -> TypeInformation:
        return TypeInformation("TUPLE", None, list(types))

    @staticmethod
    def LIST(element: TypeInformation) -> TypeInformation:
        return TypeInformation("LIST", None, [element])

    @staticmethod
    def MAP(key: TypeInformation, value: TypeInformation) -> TypeInformation:
        return TypeInformation("MAP", None, [key, value])


class TimestampAssigner:
    """Extracts an event timestamp (epoch milliseconds) from a record (PyFlink's
    ``TimestampAssigner``). Runs Python per record; a native expression
    (``col("ts")``) given to :meth:`WatermarkStrategy.with_timestamp_assigner` does not."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        raise NotImplementedError


class WatermarkStrategy:
    """How a stream's event timestamps and watermarks are made (PyFlink's
    ``WatermarkStrategy``)."""

    __slots__ = ("kind", "bound_ms", "idle_ms", "assigner")

    def __init__(self, kind: str, bound_ms: int = 0):
        self.kind = kind
        self.bound_ms = bound_ms
        self.idle_ms: int | None = None
        self.assigner: Any = None

    @staticmethod
    def for_monotonous_timestamps() -> "WatermarkStrategy":
        return WatermarkStrategy("monotonous")

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Any) -> "WatermarkStrategy":
        return WatermarkStrategy("bounded", millis(max_out_of_orderness, "the bound"))

    @staticmethod
    def no_watermarks() -> "WatermarkStrategy":
        return WatermarkStrategy("none")

    def _copy(self) -> "WatermarkStrategy":
        w = WatermarkStrategy(self.kind, self.bound_ms)
        w.idle_ms, w.assigner = self.idle_ms, self.assigner
        return w

    def with_idleness(self, idle_timeout: Any) -> "WatermarkStrategy":
        w = self._copy()
        w.idle_ms = millis(idle_timeout, "the idle timeout")
        return w

    def with_timestamp_assigner(self, assigner: Any) -> "WatermarkStrategy":
        """``assigner``: a :class:`TimestampAssigner`, a function ``(value,
        record_timestamp) -> int``, or a native expression such as ``col("ts")``."""
        w = self._copy()
        w.assigner = assigner
        return w

    def _node(self) -> dict:
        from spate.expr import Expr
        node: dict = {"kind": self.kind, "bound_ms": self.bound_ms, "idle_ms": self.idle_ms}
        a = self.assigner
        if a is None:
            pass
        elif isinstance(a, Expr):
            node["ts"], node["expr"] = True, a._tree
        elif isinstance(a, TimestampAssigner):
            node["ts"], node["fn"] = True, a.extract_timestamp
        elif callable(a):
            node["ts"], node["fn"] = True, a
        else:
            raise TypeError("a timestamp assigner is a TimestampAssigner, a function or an "
                            f"expression, not {type(a).__name__}")
        return node

    def __repr__(self) -> str:
        return f"WatermarkStrategy({self.kind}, bound={self.bound_ms} ms)"


