"""Sources and sinks (PyFlink's ``pyflink.datastream.connectors``), read and written by the
engine's Rust connectors.

Sources: :class:`FileSource` (text lines, JSON lines with or without a declared row type),
:class:`NumberSequenceSource` and :class:`SocketSource`. Sinks: :class:`FileSink` with
rolling part files (exactly once under checkpoints). Bad input follows the source's
``bad_records`` policy: ``"fail"`` (the default: the job fails naming the file and line),
``"drop"`` (counted), or :func:`dead_letter` (the line and its reason go to a file).
"""

from __future__ import annotations

import os
from typing import Any

from spate.common import TypeInformation, millis

__all__ = ["Source", "FileSource", "StreamFormat", "CsvReaderFormat", "NumberSequenceSource", "SocketSource",
           "NexmarkSource", "SensorSource",
           "FileSink", "Encoder", "RollingPolicy", "OutputFileConfig", "dead_letter"]


def dead_letter(path: str) -> str:
    """The bad-record policy that writes each malformed line, with its reason and origin,
    to the file ``path``."""
    return "dead_letter:" + os.fspath(path)


def _policy(p: str) -> str:
    if p in ("fail", "drop") or p.startswith("dead_letter:"):
        return p
    raise ValueError(f"unknown bad-record policy {p!r} (fail, drop or dead_letter(path))")


class Source:
    """A source of the plan."""

    def _node(self) -> dict:
        raise NotImplementedError


class StreamFormat:
    """How a :class:`FileSource` reads its files (PyFlink's ``StreamFormat``)."""

    __slots__ = ("kind", "schema")

    def __init__(self, kind: str, schema: TypeInformation | None = None):
        self.kind, self.schema = kind, schema

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> "StreamFormat":
        if charset_name.upper().replace("-", "") != "UTF8":
            raise ValueError("text files are read as UTF-8")
        return StreamFormat("text")

    @staticmethod
    def json_lines(row_type: TypeInformation | None = None) -> "StreamFormat":
        """JSON lines: with a ``Types.ROW_NAMED`` type, decoded into rows in Rust (fields
        not in the type are skipped); without one, into ``dict``s."""
        if row_type is not None and row_type.kind != "ROW":
            raise TypeError("json_lines takes a Types.ROW_NAMED(...) type")
        return StreamFormat("jsonl", row_type)


class CsvReaderFormat(StreamFormat):
    """CSV with a declared row type (PyFlink's ``CsvReaderFormat``), decoded in Rust: with a
    header row (the default) each field is the column of its name, in any order; without one,
    the columns in order. Missing or empty columns are ``None`` in nullable fields (an empty
    string column is ``""``); a column that does not parse as its type is a bad record."""

    __slots__ = ("has_header", "delimiter")

    def __init__(self, row_type: TypeInformation, has_header: bool = True, delimiter: str = ","):
        if row_type is None or row_type.kind != "ROW":
            raise TypeError("a CSV format takes a Types.ROW_NAMED(...) type")
        if len(delimiter) != 1 or not delimiter.isascii():
            raise ValueError(f"a CSV delimiter is one ASCII character, not {delimiter!r}")
        super().__init__("csv", row_type)
        self.has_header, self.delimiter = has_header, delimiter

    @staticmethod
    def for_schema(row_type: TypeInformation, has_header: bool = True,
                   delimiter: str = ",") -> "CsvReaderFormat":
        return CsvReaderFormat(row_type, has_header, delimiter)


class FileSource(Source):
    """Files read line by line, split across workers, replayed exactly from their positions
    after a restore."""

    __slots__ = ("path", "format", "bad_records")

    def __init__(self, path: str, fmt: StreamFormat, bad_records: str = "fail"):
        self.path, self.format, self.bad_records = os.fspath(path), fmt, _policy(bad_records)

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> "FileSourceBuilder":
        if len(paths) != 1:
            raise ValueError("a FileSource reads one path (a file or a directory)")
        return FileSourceBuilder(paths[0], stream_format)

    @staticmethod
    def text_lines(path: str, bad_records: str = "fail") -> "FileSource":
        return FileSource(path, StreamFormat.text_line_format(), bad_records)

    @staticmethod
    def jsonl(path: str, row_type: TypeInformation | None = None,
              bad_records: str = "fail") -> "FileSource":
        return FileSource(path, StreamFormat.json_lines(row_type), bad_records)

    @staticmethod
    def csv(path: str, row_type: TypeInformation, has_header: bool = True, delimiter: str = ",",
            bad_records: str = "fail") -> "FileSource":
        """CSV rows of ``row_type``: see :class:`CsvReaderFormat`."""
        return FileSource(path, CsvReaderFormat(row_type, has_header, delimiter), bad_records)

    def _node(self) -> dict:
        if self.format.kind == "text":
            return {"op": "text_file", "path": self.path, "bad_records": self.bad_records}
        if self.format.kind == "csv":
            return {"op": "csv", "path": self.path, "schema": self.format.schema,
                    "has_header": self.format.has_header, "delimiter": self.format.delimiter,
                    "bad_records": self.bad_records}
        return {"op": "jsonl", "path": self.path, "schema": self.format.schema,
                "bad_records": self.bad_records}


class FileSourceBuilder:
    """PyFlink's builder of a :class:`FileSource`."""

    def __init__(self, path: str, fmt: StreamFormat):
        self._path, self._fmt, self._bad = path, fmt, "fail"

    def bad_records(self, policy: str) -> "FileSourceBuilder":
        self._bad = _policy(policy)
        return self

    def build(self) -> FileSource:
        return FileSource(self._path, self._fmt, self._bad)


class NumberSequenceSource(Source):
    """The integers ``start..=end`` (PyFlink's ``NumberSequenceSource``), optionally at
    ``rate`` records per second."""

    __slots__ = ("start", "end", "rate")

    def __init__(self, start: int, end: int | None, rate: float | None = None):
        if start < 0 or (end is not None and end < start):
            raise ValueError("a number sequence needs 0 <= start <= end")
        self.start, self.end, self.rate = start, end, rate

    def _node(self) -> dict:
        # The engine's sequence ends before `end`; PyFlink's includes it.
        end = None if self.end is None else self.end + 1
        return {"op": "sequence", "start": self.start, "end": end, "rate": self.rate}


class SocketSource(Source):
    """Text lines from a TCP server (Flink's ``socketTextStream``); at most once."""

    __slots__ = ("host", "port")

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port

    def _node(self) -> dict:
        return {"op": "socket", "host": self.host, "port": self.port}


class NexmarkSource(Source):
    """Nexmark's auction events from the deterministic generator (the one the Nexmark
    benchmark and ``spate nexmark gen`` use), spread over the workers.

    Each event is a row shaped as the generator's JSON lines: ``event_type`` (0 person, 1
    auction, 2 bid) and the rows ``person``, ``auction`` and ``bid`` (the two others
    ``None``), with camelCase field names and ``dateTime`` in epoch milliseconds. The event
    time is the event's ``dateTime``: a watermark strategy given to ``from_source`` without
    a timestamp assigner uses it. ``rate`` paces the source (events per second, wall clock);
    ``event_rate`` is the generator's own event-time rate.
    """

    __slots__ = ("events", "seed", "rate", "event_rate")

    def __init__(self, events: int | None = None, seed: int | None = None,
                 rate: float | None = None, event_rate: float | None = None):
        if events is not None and events < 0:
            raise ValueError("the number of events cannot be negative")
        self.events, self.seed, self.rate, self.event_rate = events, seed, rate, event_rate

    @staticmethod
    def event_time():
        """The native expression of an event's time."""
        from spate.expr import col
        return col("bid.dateTime") | col("auction.dateTime") | col("person.dateTime")

    def _node(self) -> dict:
        return {"op": "nexmark", "events": self.events, "seed": self.seed, "rate": self.rate,
                "event_rate": self.event_rate}


class SensorSource(Source):
    """The forest-sensor generator: ``sensors`` sensors (50 per area), one reading each
    every 5 s of event time for ``rounds`` rounds, as rows of ``sensor_id``, ``area``,
    ``timestamp_ms``, ``temperature`` (°C) and ``smoke``. Deterministic for a seed, whatever
    the number of workers; each sensor's readings come in event-time order. Its event time
    is ``timestamp_ms``."""

    __slots__ = ("seed", "sensors", "rounds", "rate")

    def __init__(self, seed: int = 7, sensors: int | None = None, rounds: int | None = None,
                 rate: float | None = None):
        self.seed, self.sensors, self.rounds, self.rate = seed, sensors, rounds, rate

    @staticmethod
    def event_time():
        from spate.expr import col
        return col("timestamp_ms")

    def _node(self) -> dict:
        return {"op": "sensors", "seed": self.seed, "sensors": self.sensors,
                "rounds": self.rounds, "rate": self.rate}


class Encoder:
    """How a :class:`FileSink` writes a record as a line."""

    __slots__ = ("kind",)

    def __init__(self, kind: str):
        self.kind = kind

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> "Encoder":
        """``str(record)``, one per line."""
        return Encoder("string")

    @staticmethod
    def json() -> "Encoder":
        """One JSON value per line (a row as an object of its fields)."""
        return Encoder("json")


class RollingPolicy:
    """When a part file is finished and a new one started."""

    __slots__ = ("part_size", "rollover_ms", "inactivity_ms")

    def __init__(self, part_size: int | None, rollover_ms: int | None,
                 inactivity_ms: int | None):
        self.part_size, self.rollover_ms, self.inactivity_ms = (part_size, rollover_ms,
                                                                 inactivity_ms)

    @staticmethod
    def default_rolling_policy(part_size: int = 128 * 1024 * 1024,
                               rollover_interval: Any = 60_000,
                               inactivity_interval: Any = 60_000) -> "RollingPolicy":
        return RollingPolicy(part_size, millis(rollover_interval, "the rollover interval"),
                             millis(inactivity_interval, "the inactivity interval"))

    @staticmethod
    def on_checkpoint_rolling_policy() -> "RollingPolicy":
        return RollingPolicy(None, None, None)


class OutputFileConfig:
    """The part files' suffix (PyFlink's ``OutputFileConfig``)."""

    def __init__(self, part_prefix: str = "part", part_suffix: str = ""):
        if part_prefix != "part":
            raise ValueError("part files are named part-<worker>-<n>")
        self.part_suffix = part_suffix

    @staticmethod
    def builder() -> "OutputFileConfig":
        return OutputFileConfig()

    def with_part_prefix(self, prefix: str) -> "OutputFileConfig":
        return OutputFileConfig(prefix, self.part_suffix)

    def with_part_suffix(self, suffix: str) -> "OutputFileConfig":
        return OutputFileConfig("part", suffix)

    def build(self) -> "OutputFileConfig":
        return self


class FileSink:
    """Rolling part files in a directory; exactly once under checkpoints (unfinished parts
    are hidden until their checkpoint completes)."""

    __slots__ = ("path", "encoder", "policy", "suffix")

    def __init__(self, path: str, encoder: Encoder, policy: RollingPolicy | None = None,
                 suffix: str = ""):
        self.path, self.encoder, self.policy, self.suffix = (os.fspath(path), encoder, policy,
                                                             suffix)

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> "FileSinkBuilder":
        return FileSinkBuilder(base_path, encoder)

    def _node(self) -> dict:
        p = self.policy
        return {"op": "file_sink", "path": self.path, "encoder": self.encoder.kind,
                "suffix": self.suffix.lstrip("."),
                "part_size": p.part_size if p else None,
                "rollover_ms": p.rollover_ms if p else None,
                "inactivity_ms": p.inactivity_ms if p else None}


class FileSinkBuilder:
    """PyFlink's builder of a :class:`FileSink`."""

    def __init__(self, path: str, encoder: Encoder):
        self._path, self._encoder = path, encoder
        self._policy: RollingPolicy | None = None
        self._suffix = ""

    def with_rolling_policy(self, policy: RollingPolicy) -> "FileSinkBuilder":
        self._policy = policy
        return self

    def with_output_file_config(self, config: OutputFileConfig) -> "FileSinkBuilder":
        self._suffix = config.part_suffix
        return self

    def build(self) -> FileSink:
        return FileSink(self._path, self._encoder, self._policy, self._suffix)
