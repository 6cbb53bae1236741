"""State descriptors (PyFlink's ``pyflink.datastream.state``): name a keyed state of a
:class:`~spate.functions.KeyedProcessFunction`, obtained in ``open`` through the runtime
context. Values are stored in the engine (plain values natively, other objects pickled)."""

from __future__ import annotations

from typing import Any

__all__ = ["StateDescriptor", "ValueStateDescriptor", "ListStateDescriptor",
           "MapStateDescriptor"]


class StateDescriptor:
    """A named keyed state."""

    kind = ""

    def __init__(self, name: str, *type_info: Any):
        if not isinstance(name, str) or not name:
            raise ValueError("a state needs a name")
        self.name = name
        self.type_info = type_info

    def get_name(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    """One value per key: ``ValueStateDescriptor("last", Types.LONG())``."""
    kind = "value"


class ListStateDescriptor(StateDescriptor):
    """A list per key."""
    kind = "list"


class MapStateDescriptor(StateDescriptor):
    """A map per key: ``MapStateDescriptor("seen", Types.STRING(), Types.LONG())``."""
    kind = "map"
