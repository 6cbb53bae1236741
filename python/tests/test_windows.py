"""Event-time windows with built-in aggregates against a plain-Python oracle."""

from collections import defaultdict

import pytest

import spate.expr

from spate import Duration, Row, StreamExecutionEnvironment, WatermarkStrategy, agg, col
from spate.window import (EventTimeSessionWindows, SlidingEventTimeWindows,
                          TumblingEventTimeWindows)


def events(n=500):
    # Out of order by up to 400 ms, keys 0..4.
    out = []
    for i in range(n):
        ts = i * 37 + (i * 7919) % 400
        out.append(Row(key=i % 5, price=(i * 31) % 97, ts=ts))
    return out


def tumbling_oracle(rows, size):
    acc = defaultdict(list)
    for r in rows:
        start = r.ts - r.ts % size
        acc[(r.key, start)].append(r.price)
    return sorted((k, s, s + size, len(v), sum(v), max(v)) for (k, s), v in acc.items())


@pytest.mark.parametrize("workers", [1, 2])
def test_tumbling_count_sum_max(workers):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
    env.set_rest(False)
    rows = events()
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500))
                .with_timestamp_assigner(col("ts")))
    out = (env.from_collection(rows)
           .assign_timestamps_and_watermarks(strategy)
           .key_by("key")
           .window(TumblingEventTimeWindows.of(Duration.of_seconds(1)))
           .aggregate(agg.count().alias("n"), agg.sum("price"), agg.max("price"))
           .execute_and_collect())
    got = sorted((r.key, r.window_start, r.window_end, r.n, r.sum_price, r.max_price) for r in out)
    assert got == tumbling_oracle(rows, 1000)


def test_sliding_windows_with_a_python_timestamp_assigner(env):
    rows = events(200)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500))
                .with_timestamp_assigner(lambda r, _ts: r.ts))
    out = (env.from_collection(rows)
           .assign_timestamps_and_watermarks(strategy)
           .key_by("key")
           .window(SlidingEventTimeWindows.of(Duration.of_seconds(2), Duration.of_seconds(1)))
           .aggregate(agg.count())
           .execute_and_collect())
    acc = defaultdict(int)
    for r in rows:
        last = r.ts - r.ts % 1000
        for start in (last, last - 1000):
            acc[(r.key, start)] += 1
    assert sorted((r.key, r.window_start, r.count) for r in out) == sorted(
        (k, s, n) for (k, s), n in acc.items())


def test_window_reduce_in_python(env):
    rows = events(100)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(col("ts"))
    sorted_rows = sorted(rows, key=lambda r: r.ts)
    out = (env.from_collection(sorted_rows)
           .assign_timestamps_and_watermarks(strategy)
           .key_by(lambda r: r.key)
           .window(TumblingEventTimeWindows.of(Duration.of_seconds(1)))
           .reduce(lambda a, b: Row(key=a.key, price=a.price + b.price, ts=max(a.ts, b.ts)))
           .execute_and_collect())
    acc = defaultdict(int)
    for r in rows:
        acc[(r.key, r.ts // 1000)] += r.price
    assert sorted((r.key, r.price) for r in out) == sorted((k, v) for (k, _), v in acc.items())




def test_a_python_aggregate_function_with_a_window_function(env):
    from spate.functions import AggregateFunction, ProcessWindowFunction

    class Average(AggregateFunction):
        def create_accumulator(self):
            return (0, 0)

        def add(self, value, acc):
            return (acc[0] + value.price, acc[1] + 1)

        def get_result(self, acc):
            return acc[0] / acc[1]

        def merge(self, a, b):
            return (a[0] + b[0], a[1] + b[1])

    class Label(ProcessWindowFunction):
        def process(self, key, context, elements):
            (avg,) = elements
            w = context.window()
            yield (key, w.start, w.end, round(avg, 6))

    rows = events(300)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500))
                .with_timestamp_assigner(col("ts")))
    out = (env.from_collection(rows).assign_timestamps_and_watermarks(strategy)
           .key_by(lambda r: r.key)
           .window(TumblingEventTimeWindows.of(Duration.of_seconds(1)))
           .aggregate(Average(), window_function=Label())
           .execute_and_collect())
    acc = defaultdict(list)
    for r in rows:
        acc[(r.key, r.ts - r.ts % 1000)].append(r.price)
    assert sorted(out) == sorted((k, s, s + 1000, round(sum(v) / len(v), 6))
                                 for (k, s), v in acc.items())


def test_a_process_window_function_sees_every_element(env):
    from spate.functions import ProcessWindowFunction
    from spate.window import EventTimeSessionWindows

    class Spans(ProcessWindowFunction):
        def process(self, key, context, elements):
            ts = sorted(e.ts for e in elements)
            yield (key, context.window().start, context.window().end, ts)

    rows = [Row(key=k, price=0, ts=t) for k, t in
            [("a", 0), ("a", 400), ("b", 100), ("a", 3000), ("b", 5000), ("b", 5200)]]
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)) \
        .with_timestamp_assigner(col("ts"))
    out = (env.from_collection(rows).assign_timestamps_and_watermarks(strategy)
           .key_by("key")
           .window(EventTimeSessionWindows.with_gap(Duration.of_seconds(1)))
           .process(Spans())
           .execute_and_collect())
    assert sorted(out) == [("a", 0, 1400, [0, 400]), ("a", 3000, 4000, [3000]),
                           ("b", 100, 1100, [100]), ("b", 5000, 6200, [5000, 5200])]


def test_processing_time_windows_fire_on_the_wall_clock(env):
    from spate.connectors import NumberSequenceSource
    from spate.window import TumblingProcessingTimeWindows
    out = list(env.from_source(NumberSequenceSource(0, 1199, rate=1000))
               .key_by(lambda i: i % 2)
               .window(TumblingProcessingTimeWindows.of(Duration.of_millis(200)))
               .aggregate(agg.count().alias("n"))
               .execute_and_collect())
    # About 1.2 s of input: several windows fired while it ran (as in Flink, the windows
    # still open when the input ends do not fire).
    assert len({r.window_start for r in out}) >= 3
    assert all(r.window_end - r.window_start == 200 and r.window_start % 200 == 0 for r in out)
    assert 0 < sum(r.n for r in out) <= 1200


@pytest.mark.parametrize("workers", [1, 2])
def test_a_full_window_partition_counts_each_word_once_at_the_end(workers, tmp_path):
    from collections import Counter
    from spate.connectors import Encoder, FileSink, FileSource
    lines = [f"w{i % 13} w{i % 7} x{i % 3}" for i in range(400)]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n")

    def counts(env):
        return (env.from_source(FileSource.text_lines(str(src)))
                .flat_map(col("*").split(" "))
                .key_by(col("*"))
                .full_window_partition()
                .aggregate(agg.count().alias("n")))
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
    env.set_rest(False)
    got = sorted((r.key, r.n) for r in counts(env).execute_and_collect())
    want = sorted(Counter(w for line in lines for w in line.split(" ")).items())
    assert got == want
    # Native from end to end: no Python per record.
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
    env.set_rest(False)
    out = tmp_path / "out"
    counts(env).map(spate.expr.format_string("%s=%d", col("key"), col("n"))).sink_to(
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build())
    assert env.execute("words").python_calls == 0
    rows = sorted(line for f in out.iterdir() if not f.name.startswith(".")
                  for line in f.read_text().splitlines())
    assert rows == sorted(f"{w}={n}" for w, n in want)


def test_a_full_window_partition_reduces_and_aggregates_in_python(env):
    from spate.functions import AggregateFunction

    class Spread(AggregateFunction):
        def create_accumulator(self):
            return None

        def add(self, value, acc):
            lo, hi = (value.price, value.price) if acc is None else acc
            return (min(lo, value.price), max(hi, value.price))

        def get_result(self, acc):
            return acc[1] - acc[0]

        def merge(self, a, b):
            return (min(a[0], b[0]), max(a[1], b[1]))

    rows = events(300)
    keyed = env.from_collection(rows).key_by(lambda r: r.key)
    spreads = keyed.full_window_partition().aggregate(Spread()).execute_and_collect()
    prices = defaultdict(list)
    for r in rows:
        prices[r.key].append(r.price)
    assert sorted(spreads) == sorted(max(v) - min(v) for v in prices.values())
    last = (env.from_collection(rows).key_by(lambda r: r.key).full_window_partition()
            .reduce(lambda a, b: b).execute_and_collect())
    # Each key's last record, once.
    assert sorted((r.key, r.ts) for r in last) == sorted(
        (k, max(r.ts for r in rows if r.key == k)) for k in prices)


def mixed_rows(n=240):
    # Integers, floats and booleans, with nulls, on 4 keys.
    out = []
    for i in range(n):
        out.append(Row(key=i % 4, n=(i * 37) % 101 - 50,
                       x=None if i % 5 == 0 else ((i * 13) % 7 if i % 3 else (i % 11) / 4),
                       b=i % 3 == 0, ts=(i * 7919) % 5000))
    return out


AGGS = [agg.count().alias("c"), agg.sum("n"), agg.sum("x"), agg.sum("b"), agg.min("n"),
        agg.max("x"), agg.avg("n"), agg.avg("x"), agg.collect_list("n")]


def oracle(rows):
    xs = [r.x for r in rows if r.x is not None]
    return (len(rows), sum(r.n for r in rows), sum(xs) if xs else None,
            sum(r.b for r in rows), min(r.n for r in rows), max(xs) if xs else None,
            round(sum(r.n for r in rows) / len(rows), 9),
            round(sum(xs) / len(xs), 9) if xs else None, sorted(r.n for r in rows))


def result(r):
    return (r.c, r.sum_n, r.sum_x, r.sum_b, r.min_n, r.max_x, round(r.avg_n, 9),
            None if r.avg_x is None else round(r.avg_x, 9), sorted(r.collect_list_n))


def test_built_in_aggregates_over_a_full_partition_match_python(env):
    rows = mixed_rows()
    out = (env.from_collection(rows).key_by("key").full_window_partition()
           .aggregate(*AGGS, agg.first("n"), agg.last("n"), agg.arg_max("n"))
           .execute_and_collect())
    got = {r.key: result(r) + (r.first_n, r.last_n, r.arg_max_n) for r in out}
    want = {}
    for k in range(4):
        mine = [r for r in rows if r.key == k]
        best = max(mine, key=lambda r: r.n)  # the first of the greatest
        want[k] = oracle(mine) + (mine[0].n, mine[-1].n, best)
    assert got == want
    # A sum of integers stays an integer, with a float it is a float, as in Python.
    assert all(isinstance(r[1], int) and isinstance(r[3], int) for r in got.values())
    assert all(isinstance(r[2], float) for r in got.values())


@pytest.mark.parametrize("workers", [1, 2])
def test_built_in_aggregates_merge_with_session_windows(workers):
    # Out of order, so sessions merge and their accumulators with them.
    rows = mixed_rows()
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
    env.set_rest(False)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(10))
                .with_timestamp_assigner(col("ts")))
    gap = 60
    out = (env.from_collection(rows).assign_timestamps_and_watermarks(strategy)
           .key_by("key").window(EventTimeSessionWindows.with_gap(Duration.of_millis(gap)))
           .aggregate(*AGGS).execute_and_collect())
    got = sorted((r.key, r.window_start, r.window_end) + result(r) for r in out)
    want = []
    for k in range(4):
        mine = sorted((r for r in rows if r.key == k), key=lambda r: r.ts)
        session = [mine[0]]
        for r in mine[1:] + [None]:
            if r is not None and r.ts < session[-1].ts + gap:
                session.append(r)
                continue
            want.append((k, session[0].ts, session[-1].ts + gap) + oracle(session))
            session = [r]
    assert len(want) < len(rows)  # sessions did merge records
    assert got == sorted(want)
