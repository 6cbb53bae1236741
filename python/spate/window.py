"""Window assigners under PyFlink's names (``pyflink.datastream.window``)."""

from __future__ import annotations

from typing import Any

from spate.common import millis

__all__ = ["TimeWindow", "WindowAssigner", "TumblingEventTimeWindows", "SlidingEventTimeWindows",
           "EventTimeSessionWindows", "TumblingProcessingTimeWindows",
           "SlidingProcessingTimeWindows", "ProcessingTimeSessionWindows"]


class TimeWindow:
    """A window of time ``[start, end)``, epoch milliseconds (PyFlink's ``TimeWindow``)."""

    __slots__ = ("start", "end")

    def __init__(self, start: int, end: int):
        self.start, self.end = start, end

    def max_timestamp(self) -> int:
        return self.end - 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimeWindow) and (other.start, other.end) == (self.start, self.end)

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __repr__(self) -> str:
        return f"TimeWindow(start={self.start}, end={self.end})"


class WindowAssigner:
    """Assigns each record to windows of time ``[start, end)``."""

    __slots__ = ("kind", "size_ms", "slide_ms", "gap_ms", "offset_ms")

    def __init__(self, kind: str, size_ms: int = 0, slide_ms: int = 0, gap_ms: int = 0,
                 offset_ms: int = 0):
        if kind.startswith("session") and gap_ms <= 0:
            raise ValueError("a session window's gap must be positive")
        if not kind.startswith("session") and size_ms <= 0:
            raise ValueError("a window's size must be positive")
        if kind.startswith("sliding") and slide_ms <= 0:
            raise ValueError("a sliding window's slide must be positive")
        self.kind, self.size_ms, self.slide_ms = kind, size_ms, slide_ms
        self.gap_ms, self.offset_ms = gap_ms, offset_ms

    def _spec(self) -> dict:
        return {"kind": self.kind, "size_ms": self.size_ms, "slide_ms": self.slide_ms,
                "gap_ms": self.gap_ms, "offset_ms": self.offset_ms}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._spec()})"


class TumblingEventTimeWindows(WindowAssigner):
    @staticmethod
    def of(size: Any, offset: Any = 0) -> "TumblingEventTimeWindows":
        return TumblingEventTimeWindows("tumbling_event", millis(size, "the size"),
                                        offset_ms=millis(offset, "the offset"))


class SlidingEventTimeWindows(WindowAssigner):
    @staticmethod
    def of(size: Any, slide: Any) -> "SlidingEventTimeWindows":
        return SlidingEventTimeWindows("sliding_event", millis(size, "the size"),
                                       millis(slide, "the slide"))


class EventTimeSessionWindows(WindowAssigner):
    @staticmethod
    def with_gap(gap: Any) -> "EventTimeSessionWindows":
        return EventTimeSessionWindows("session_event", gap_ms=millis(gap, "the gap"))


class TumblingProcessingTimeWindows(WindowAssigner):
    @staticmethod
    def of(size: Any) -> "TumblingProcessingTimeWindows":
        return TumblingProcessingTimeWindows("tumbling_processing", millis(size, "the size"))


class SlidingProcessingTimeWindows(WindowAssigner):
    @staticmethod
    def of(size: Any, slide: Any) -> "SlidingProcessingTimeWindows":
        return SlidingProcessingTimeWindows("sliding_processing", millis(size, "the size"),
                                            millis(slide, "the slide"))


class ProcessingTimeSessionWindows(WindowAssigner):
    @staticmethod
    def with_gap(gap: Any) -> "ProcessingTimeSessionWindows":
        return ProcessingTimeSessionWindows("session_processing", gap_ms=millis(gap, "the gap"))
