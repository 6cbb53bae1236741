"""Native expressions: ``col("price") * 908 // 1000``, evaluated in Rust per record.

An expression given to ``map``, ``filter``, ``flat_map``, ``key_by``, a timestamp assigner
or an aggregate compiles once to Rust; no Python runs for it per record. Arithmetic follows
Python's (``//`` floors, ``%`` takes the divisor's sign, ``/`` gives a float), and ``None``
in an operand gives ``None``.

>>> from spate.expr import col, lit
>>> price_eur = col("price") * 908 // 1000
>>> big = (col("price") > 1_000) & col("name").starts_with("A")
"""

from __future__ import annotations

from typing import Any

__all__ = ["Expr", "col", "lit", "row", "tuple_", "concat", "format_string", "field_of"]


def _wrap(x: Any) -> "Expr":
    return x if isinstance(x, Expr) else lit(x)


class Expr:
    """A native expression. Build one with :func:`col` and :func:`lit`."""

    __slots__ = ("_tree",)
    __hash__ = None  # type: ignore[assignment]  # == builds an expression

    def __init__(self, tree: tuple):
        self._tree = tree

    def _bin(self, op: str, other: Any, swap: bool = False) -> "Expr":
        a, b = (_wrap(other), self) if swap else (self, _wrap(other))
        return Expr(("bin", op, a._tree, b._tree))

    def _cmp(self, op: str, other: Any) -> "Expr":
        return Expr(("cmp", op, self._tree, _wrap(other)._tree))

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, True)
    def __floordiv__(self, o): return self._bin("//", o)
    def __rfloordiv__(self, o): return self._bin("//", o, True)
    def __mod__(self, o): return self._bin("%", o)
    def __rmod__(self, o): return self._bin("%", o, True)
    def __neg__(self): return Expr(("neg", self._tree))
    def __eq__(self, o): return self._cmp("==", o)  # type: ignore[override]
    def __ne__(self, o): return self._cmp("!=", o)  # type: ignore[override]
    def __lt__(self, o): return self._cmp("<", o)
    def __le__(self, o): return self._cmp("<=", o)
    def __gt__(self, o): return self._cmp(">", o)
    def __ge__(self, o): return self._cmp(">=", o)
    def __and__(self, o): return Expr(("and", self._tree, _wrap(o)._tree))
    def __rand__(self, o): return Expr(("and", _wrap(o)._tree, self._tree))
    def __or__(self, o): return Expr(("or", self._tree, _wrap(o)._tree))
    def __ror__(self, o): return Expr(("or", _wrap(o)._tree, self._tree))
    def __invert__(self): return Expr(("not", self._tree))

    def __bool__(self) -> bool:
        raise TypeError("an expression has no truth value in Python: combine conditions "
                        "with & | ~ instead of and / or / not")

    def _call(self, name: str, *args: Any) -> "Expr":
        return Expr(("call", name, [self._tree, *(_wrap(a)._tree for a in args)]))

    def is_null(self) -> "Expr":
        """Whether the value is ``None``."""
        return Expr(("is_null", self._tree))

    def lower(self) -> "Expr": return self._call("lower")
    def upper(self) -> "Expr": return self._call("upper")
    def strip(self) -> "Expr": return self._call("strip")
    def length(self) -> "Expr": return self._call("length")
    def abs(self) -> "Expr": return self._call("abs")
    def str(self) -> "Expr": return self._call("str")
    def contains(self, s: Any) -> "Expr": return self._call("contains", s)
    def starts_with(self, s: Any) -> "Expr": return self._call("starts_with", s)
    def ends_with(self, s: Any) -> "Expr": return self._call("ends_with", s)

    def lpad(self, width: int, fill: str = " ") -> "Expr":
        """The string padded on the left to ``width`` characters with ``fill`` (repeated,
        as SQL's ``LPAD``; with one character, Python's ``str.rjust``). A longer string
        is kept whole."""
        return self._call("lpad", width, fill)

    def rpad(self, width: int, fill: str = " ") -> "Expr":
        """The string padded on the right (SQL's ``RPAD``; Python's ``str.ljust``)."""
        return self._call("rpad", width, fill)

    def zfill(self, width: int) -> "Expr":
        """The string padded with zeros on the left, after a sign (Python's ``str.zfill``)."""
        return self._call("zfill", width)

    def replace(self, old: Any, new: Any) -> "Expr":
        """Every ``old`` replaced by ``new`` (Python's ``str.replace``)."""
        return self._call("replace", old, new)

    def split(self, sep: str | None = None) -> "Expr":
        """The string split at ``sep`` (at runs of whitespace without one), as a list: in
        ``flat_map``, each part becomes a record."""
        return self._call("split") if sep is None else self._call("split", sep)

    def to_timestamp(self, fmt: str | None = None) -> "Expr":
        """A ``yyyy-MM-dd HH:mm:ss[.SSS]`` string (or digits of epoch milliseconds) as epoch
        milliseconds, UTC."""
        return self._call("to_timestamp") if fmt is None else self._call("to_timestamp", fmt)

    def cast(self, to: Any) -> "Expr":
        """The value converted to ``int``, ``float``, ``str`` or ``bool`` (a Python type or
        its name)."""
        name = to if isinstance(to, str) else getattr(to, "__name__", str(to))
        return Expr(("cast", name, self._tree))

    def __repr__(self) -> str:
        return f"Expr({self._tree!r})"


def col(path: str | int) -> Expr:
    """A field of the record: ``col("price")``, a nested field ``col("bid.price")``, or a
    position ``col(0)`` of a tuple, list or positional row. ``col("*")`` is the record."""
    if isinstance(path, bool):
        raise TypeError("col takes a field name or a position")
    if isinstance(path, int):
        return Expr(("item", path))
    if path == "*":
        return Expr(("col", ""))  # the empty path: the record itself
    if not isinstance(path, str) or not path:
        raise TypeError("col takes a field name or a position")
    return Expr(("col", path))


def lit(value: Any) -> Expr:
    """A constant."""
    if isinstance(value, Expr):
        return value
    return Expr(("lit", value))


def row(**fields: Any) -> Expr:
    """A named row of expressions: ``row(auction=col("auction"), price=col("price") * 2)``."""
    return Expr(("row", list(fields), [_wrap(v)._tree for v in fields.values()]))


def tuple_(*items: Any) -> Expr:
    """A tuple of expressions: ``tuple_(col("word"), 1)``."""
    return Expr(("tuple", [_wrap(v)._tree for v in items]))


def concat(*parts: Any) -> Expr:
    """The parts as one string (non-strings as their ``str``)."""
    return Expr(("call", "concat", [_wrap(v)._tree for v in parts]))


def format_string(fmt: Any, *args: Any) -> Expr:
    """Python's printf-style formatting, ``fmt % (args...)``, in Rust: the conversions
    ``s r d i f F e E g G x X o c %`` with the flags ``-+ 0#``, a width and a precision
    (no ``*`` and no ``%(name)s``).

    >>> format_string("%d\t%s%d.%03d", col("auction"), "", col("v") // 1000, col("v") % 1000)
    """
    return Expr(("call", "format_string", [_wrap(fmt)._tree, *(_wrap(a)._tree for a in args)]))


def field_of(spec: Any, what: str) -> Expr:
    """A field spec (a name, a position or an expression) as an expression."""
    if isinstance(spec, Expr):
        return spec
    if isinstance(spec, (str, int)) and not isinstance(spec, bool):
        return col(spec)
    raise TypeError(f"{what} takes a field name, a position or an expression, "
                    f"not {type(spec).__name__}")
