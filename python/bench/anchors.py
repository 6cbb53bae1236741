#!/usr/bin/env python3
"""Spate's Python API on the Python-front anchors W1-W3 (../shared/anchors/py_workloads.py).

Usage: anchors.py W1|W2|W3 --input FILE_OR_DIR --out FILE [--variant native|concat|udf]
                  [--workers N] [--processes P] [--sep a] [--wait-ms 10000]

It takes py_workloads.py's arguments (``--engine spate`` is accepted and the only engine),
writes the same rows (tab-separated, one per line, any order: compare with py_compare.py)
and prints one JSON line with the same keys (events, wall_s, startup_s, events_per_s, cpu_s,
events_per_cpu_s, peak_rss_mb, rows, late for W2), plus variant and python_calls.

Every variant decodes the JSON lines in Rust into rows of a declared type (event_type and
the bid's fields; persons and auctions give a null ``bid`` and are filtered out natively).

  W1 native   q1's row built by one native ``format_string`` (no Python per record:
              python_calls must be 0, and is asserted)
  W1 concat   the same row from ``concat`` / ``str`` / ``lpad`` (also no Python)
  W1 udf      q1's row formatted by a Python ``map`` per bid, fields read by name
  W1 udf_pos  the same, fields read by position
  W2 native   event time from ``to_timestamp`` on dateTime, watermark max - --wait-ms;
              sliding windows of 10 s every 2 s counting bids per auction natively; a second
              stage keys the counts by window start and collects, per window, the maximum
              and the (auction, count) pairs in a 2 s tumbling window (a window's results
              carry its last instant, so each first-stage window lands in one); the ties are
              picked by a Python flat_map once per window (python_calls = windows, not bids)
  W3 native   flat_map of ``col("bid.extra").split(sep)``, empty tokens dropped, keyed by the
              word, counted by ``agg.count()`` in a ``full_window_partition()`` (Flink 1.20's:
              one count per word, emitted at the end of the input)
  W3 udf      the same with the splitter in a Python flat_map (udf_pos: fields by position)
  W3 kpf      the native splitter, then a Python KeyedProcessFunction counting each word in a
              ValueState and emitting it from an event-time timer at the final watermark

Output goes through a FileSink (simple string encoder) into OUT.parts/, whose part files are
concatenated into OUT after the timed run (as py_workloads.py does for Bytewax's parts).
"""
import argparse
import json
import os
import resource
import shutil
import sys
import time

SIZE_MS, SLIDE_MS = 10_000, 2_000

VARIANTS = {"W1": ["native", "concat", "udf", "udf_pos"], "W2": ["native"],
            "W3": ["native", "udf", "udf_pos", "kpf"]}


def input_files(path):
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".jsonl"))
    return [path]


def count_lines(files):
    n = 0
    for p in files:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                n += chunk.count(b"\n")
    return n


def startup_s():
    """Seconds since this process started (Linux /proc), or None."""
    try:
        with open("/proc/self/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            return round(float(f.read().split()[0]) - start, 3)
    except (OSError, ValueError, IndexError):
        return None


def cpu_now():
    """User+sys seconds of this process (all its threads) and its finished children."""
    t = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        t += r.ru_utime + r.ru_stime
    return t


def bid_schema():
    from spate import Types
    bid = Types.ROW_NAMED(["auction", "bidder", "price", "dateTime", "extra"],
                          [Types.LONG(), Types.LONG(), Types.LONG(), Types.STRING(),
                           Types.STRING()])
    return Types.ROW_NAMED(["event_type", "bid"], [Types.LONG(), bid])


def w1_row_udf(r):
    """py_workloads.w1_row on a decoded row (fields read lazily, by attribute)."""
    b = r.bid
    v = b.price * 908
    price = "%s%d.%03d" % ("-" if v < 0 else "", abs(v) // 1000, abs(v) % 1000)
    return "%d\t%d\t%s\t%s\t%s" % (b.auction, b.bidder, price, b.dateTime, b.extra)


def w1_row_pos(r):
    """The same by position (``r[1]`` is the bid): a Row's field read by name costs an
    AttributeError inside PyO3's ``__getattr__`` fallback, by position it does not."""
    auction, bidder, p, dt, extra = r[1]
    v = p * 908
    price = "%s%d.%03d" % ("-" if v < 0 else "", abs(v) // 1000, abs(v) % 1000)
    return "%d\t%d\t%s\t%s\t%s" % (auction, bidder, price, dt, extra)


def _word_count_class():
    from spate.functions import KeyedProcessFunction
    from spate.state import ValueStateDescriptor

    END = (1 << 63) - 1  # the final watermark

    class WordCount(KeyedProcessFunction):
        def open(self, ctx):
            self.n = ctx.get_state(ValueStateDescriptor("n"))

        def process_element(self, word, ctx):
            n = self.n.value()
            if n is None:
                ctx.timer_service().register_event_time_timer(END)
                n = 0
            self.n.update(n + 1)
            return ()

        def on_timer(self, timestamp, ctx):
            yield "%s\t%d" % (ctx.get_current_key(), self.n.value())
    return WordCount


def build(a, env):
    """Adds the workload's job to ``env``; returns the number of Python calls allowed
    (None: any)."""
    from spate import Duration, WatermarkStrategy, agg, col
    from spate.connectors import Encoder, FileSink, FileSource
    from spate.expr import concat, format_string, tuple_
    from spate.window import SlidingEventTimeWindows, TumblingEventTimeWindows

    src = FileSource.jsonl(a.input, bid_schema())
    bids = env.from_source(src, source_name="nexmark").filter(~col("bid").is_null()).name("bids")

    def event_time(s):
        strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(a.wait_ms))
                    .with_timestamp_assigner(col("bid.dateTime").to_timestamp()))
        return s.assign_timestamps_and_watermarks(strategy)

    global WordCount
    WordCount = _word_count_class()
    allowed = 0
    if a.workload == "W1":
        v = col("bid.price") * 908
        sign = ((v < 0) & "-") | ""  # Python's and/or: "-" when negative, else ""
        if a.variant == "native":
            rows = bids.map(format_string("%d\t%d\t%s%d.%03d\t%s\t%s", col("bid.auction"),
                                          col("bid.bidder"), sign, v.abs() // 1000,
                                          v.abs() % 1000, col("bid.dateTime"),
                                          col("bid.extra")))
        elif a.variant == "concat":
            rows = bids.map(concat(col("bid.auction"), "\t", col("bid.bidder"), "\t", sign,
                                   v.abs() // 1000, ".", (v.abs() % 1000).str().lpad(3, "0"),
                                   "\t", col("bid.dateTime"), "\t", col("bid.extra")))
        else:
            rows, allowed = bids.map(w1_row_udf if a.variant == "udf" else w1_row_pos), None
    elif a.workload == "W2":
        counts = (event_time(bids).key_by("bid.auction")
                  .window(SlidingEventTimeWindows.of(Duration.of_millis(SIZE_MS),
                                                     Duration.of_millis(SLIDE_MS)))
                  .aggregate(agg.count()).name("bids per auction and window"))
        per_window = (counts.key_by("window_start")
                      .window(TumblingEventTimeWindows.of(Duration.of_millis(SLIDE_MS)))
                      .aggregate(agg.max("count").alias("top"),
                                 agg.collect_list(tuple_(col("bid_auction"), col("count")))
                                 .alias("pairs"))
                      .name("per window"))

        def ties(w):
            s = w.window_start
            return ["%d\t%d\t%d\t%d" % (s, s + SIZE_MS, auction, n)
                    for auction, n in w.pairs if n == w.top]
        rows, allowed = per_window.flat_map(ties).name("ties"), None
    else:
        if a.variant == "native":
            words = bids.flat_map(col("bid.extra").split(a.sep)).filter(col("*") != "")
        elif a.variant == "udf":
            sep = a.sep
            words = bids.flat_map(lambda r: [w for w in r.bid.extra.split(sep) if w])
            allowed = None
        else:
            sep = a.sep
            words = bids.flat_map(lambda r: [w for w in r[1][4].split(sep) if w])
            allowed = None
        if a.variant == "kpf":
            # The count in a Python KeyedProcessFunction's ValueState, emitted by an
            # event-time timer at the end of the input (the final watermark fires it).
            rows = words.key_by(lambda w: w).process(WordCount())
        else:
            # Each word's count once, at the end of the input (Flink's fullWindowPartition).
            counts = words.key_by(col("*")).full_window_partition().aggregate(agg.count())
            rows = counts.map(format_string("%s\t%d", col("key"), col("count")))
    rows.sink_to(FileSink.for_row_format(a.parts, Encoder.simple_string_encoder()).build())
    return allowed


def late_of(result):
    """Late records the engine dropped, from the job's counters (0 when none is named)."""
    n = 0
    for source in (result.totals, result.metrics):
        if isinstance(source, dict):
            for k, v in source.items():
                if "late" in str(k).lower() and isinstance(v, (int, float)):
                    n += v
    return int(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=["W1", "W2", "W3"])
    ap.add_argument("--engine", choices=["spate"], default="spate")
    ap.add_argument("--variant", default="native",
                    help="native | concat | udf (see the module's doc for each workload)")
    ap.add_argument("--input", required=True, help="Nexmark JSON lines file, or a dir of *.jsonl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=1, help="worker threads per process")
    ap.add_argument("--processes", type=int, default=1, help="processes")
    ap.add_argument("--sep", default="a", help="W3 word separator (default 'a')")
    ap.add_argument("--wait-ms", type=int, default=10_000, help="W2 watermark bound")
    a = ap.parse_args()
    if a.variant not in VARIANTS[a.workload]:
        ap.error(f"{a.workload} has the variants {', '.join(VARIANTS[a.workload])}")
    if not a.sep:
        ap.error("--sep must not be empty")
    os.environ.setdefault("SPATE_REST", "off")
    import spate  # imports count as start-up, not as the run
    import spate.connectors, spate.window  # noqa: F401,E401

    su = startup_s()
    files = input_files(a.input)
    a.parts = os.path.abspath(a.out + ".parts")
    # A process of a supervised job re-runs this script inside the supervisor's timed run:
    # only the supervisor counts the input and clears the output (a process clearing it
    # could delete what another process has begun to write).
    child = os.environ.get("SPATE_PROCESS_INDEX") is not None
    events = 0 if child else count_lines(files)  # outside the timed run (also warms the cache)
    if not child:
        shutil.rmtree(a.parts, ignore_errors=True)

    env = spate.StreamExecutionEnvironment.get_execution_environment()
    env.set_rest(False).set_parallelism(a.workers)
    if a.processes > 1:
        env.set_processes(a.processes)
    t0, c0 = time.perf_counter(), cpu_now()
    allowed = build(a, env)
    result = env.execute(f"anchors {a.workload} {a.variant}")
    wall, cpu = time.perf_counter() - t0, cpu_now() - c0
    if result.role in ("leader", "follower"):
        return  # a process of a supervised job: the supervisor reports (its CPU counts ours)
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
           + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    if allowed is not None and result.python_calls > allowed:
        sys.exit(f"the {a.variant} variant made {result.python_calls} Python calls "
                 f"(expected at most {allowed})")

    with open(a.out, "wb") as o:  # concatenate the part files (not timed)
        for root, dirs, names in os.walk(a.parts):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                if not name.startswith("."):
                    with open(os.path.join(root, name), "rb") as f:
                        shutil.copyfileobj(f, o)
    shutil.rmtree(a.parts, ignore_errors=True)

    rep = {"workload": a.workload, "engine": "spate", "variant": a.variant,
           "workers": a.workers, "processes": a.processes, "input": a.input, "events": events,
           "wall_s": round(wall, 3), "events_per_s": round(events / wall),
           "cpu_s": round(cpu, 2), "events_per_cpu_s": round(events / cpu) if cpu else None,
           "peak_rss_mb": round(rss, 1), "startup_s": su, "rows": count_lines([a.out]),
           "python_calls": result.python_calls}
    if a.workload == "W2":
        rep["late"] = late_of(result)
        if rep["late"]:
            print("warning: %d late bids dropped (input not in event-time order?)" % rep["late"],
                  file=sys.stderr)
    print(json.dumps(rep))


if __name__ == "__main__":
    main()
