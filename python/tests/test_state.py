"""Python KeyedProcessFunctions: keyed state and timers against plain-Python oracles."""

from collections import Counter, defaultdict

import pytest

from spate import Duration, Row, StreamExecutionEnvironment, WatermarkStrategy, col
from spate.functions import KeyedProcessFunction
from spate.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor


class CountPerKey(KeyedProcessFunction):
    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield (ctx.get_current_key(), n)


def words(n=3000):
    return [f"w{(i * 7919) % 97}" for i in range(n)]


@pytest.mark.parametrize("workers", [1, 2])
def test_value_state_counts_per_key(workers):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
    env.set_rest(False)
    data = words()
    out = list(env.from_collection(data).key_by(lambda w: w).process(CountPerKey())
               .execute_and_collect())
    final = {}
    for k, n in out:
        final[k] = max(final.get(k, 0), n)
    assert final == dict(Counter(data))
    assert len(out) == len(data)
    # Every key's counts are 1..n, each once.
    per_key = defaultdict(list)
    for k, n in out:
        per_key[k].append(n)
    assert all(sorted(v) == list(range(1, len(v) + 1)) for v in per_key.values())


def test_field_keys_reach_the_function_as_the_key(env):
    rows = [Row(user=u, amount=a) for u, a in [("a", 1), ("b", 2), ("a", 3)]]
    out = list(env.from_collection(rows).key_by("user").process(CountPerKey())
               .execute_and_collect())
    assert sorted(out) == [("a", 1), ("a", 2), ("b", 1)]


class Everything(KeyedProcessFunction):
    """List and map state: the values seen per key, and how often each came."""

    def open(self, ctx):
        self.seen = ctx.get_list_state(ListStateDescriptor("seen"))
        self.freq = ctx.get_map_state(MapStateDescriptor("freq"))

    def process_element(self, value, ctx):
        k, v = value
        self.seen.add(v)
        self.freq.put(v, (self.freq.get(v) or 0) + 1)
        if v == "end":
            yield (k, list(self.seen.get()), sorted(self.freq.items()),
                   self.freq.contains("x"), self.freq.is_empty())
            self.seen.clear()
            self.freq.clear()


def test_list_and_map_state(env):
    data = [(1, "x"), (2, "y"), (1, "y"), (1, "x"), (2, "end"), (1, "end"), (2, "z"), (2, "end")]
    out = list(env.from_collection(data).key_by(lambda p: p[0]).process(Everything())
               .execute_and_collect())
    assert sorted(out) == sorted([
        (2, ["y", "end"], [("end", 1), ("y", 1)], False, False),
        (1, ["x", "y", "x", "end"], [("end", 1), ("x", 2), ("y", 1)], True, False),
        (2, ["z", "end"], [("end", 1), ("z", 1)], False, False),
    ])


class SessionTotals(KeyedProcessFunction):
    """Sums per key until 1 s of event time passes without a record (an event-time timer)."""

    def open(self, ctx):
        self.total = ctx.get_state(ValueStateDescriptor("total"))
        self.timer = ctx.get_state(ValueStateDescriptor("timer"))

    def process_element(self, value, ctx):
        self.total.update((self.total.value() or 0) + value.amount)
        old = self.timer.value()
        if old is not None:
            ctx.timer_service().delete_event_time_timer(old)
        t = ctx.timestamp() + 1000
        ctx.timer_service().register_event_time_timer(t)
        self.timer.update(t)
        return None

    def on_timer(self, timestamp, ctx):
        assert ctx.time_domain() == "EVENT_TIME"
        yield (ctx.get_current_key(), timestamp, self.total.value())
        self.total.clear()
        self.timer.clear()


def test_event_time_timers_fire_once_the_watermark_passes(env):
    rows = [Row(user=u, amount=a, ts=t) for u, a, t in [
        ("a", 1, 0), ("b", 5, 100), ("a", 2, 500), ("a", 4, 2000), ("b", 1, 2500), ("a", 8, 2600)]]
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(col("ts"))
    out = list(env.from_collection(rows).assign_timestamps_and_watermarks(strategy)
               .key_by("user").process(SessionTotals()).execute_and_collect())
    # Watermarks are periodic (every 200 ms, as in Flink), so how many sessions a fast source
    # shows depends on when they come; what every timing agrees on:
    by_key = defaultdict(list)
    for k, t, total in out:
        by_key[k].append((t, total))
    for k in ("a", "b"):
        mine = [r for r in rows if r.user == k]
        fired = by_key[k]
        assert sum(total for _, total in fired) == sum(r.amount for r in mine)
        assert [t for t, _ in fired] == sorted(t for t, _ in fired)
        assert all(t - 1000 in {r.ts for r in mine} for t, _ in fired)
        assert fired[-1][0] == mine[-1].ts + 1000


def test_state_outside_a_call_is_refused(env):
    class Leaky(KeyedProcessFunction):
        def open(self, ctx):
            self.v = ctx.get_state(ValueStateDescriptor("v"))
            with pytest.raises(RuntimeError, match="only available inside"):
                self.v.value()

        def process_element(self, value, ctx):
            yield value

    assert list(env.from_collection([1]).key_by(lambda x: x).process(Leaky())
                .execute_and_collect()) == [1]


def test_an_exception_in_process_element_fails_the_job(env):
    import spate

    class Bad(KeyedProcessFunction):
        def process_element(self, value, ctx):
            raise ValueError(f"bad {value}")

    env.from_collection([7]).key_by(lambda x: x).process(Bad()).name("checker").print()
    with pytest.raises(spate.JobExecutionError, match="checker") as info:
        env.execute()
    assert "ValueError: bad 7" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)


@pytest.mark.parametrize("before,after", [(2, 1), (1, 2)])
def test_python_state_restores_onto_another_number_of_workers(tmp_path, before, after):
    first = [f"k{i % 13}" for i in range(500)]
    second = [f"k{i % 17}" for i in range(300)]

    def job(workers, data, uid):
        env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
        env.set_rest(False)
        env.enable_checkpointing(100)
        env.set_checkpoint_dir(str(tmp_path / f"ckpt-{uid}"))
        return env, env.from_collection(data).uid(uid).key_by(lambda w: w) \
            .process(CountPerKey()).uid("count")

    env, s = job(before, first, "source-1")
    env.set_savepoint_dir(str(tmp_path / "savepoint"))
    list(s.execute_and_collect())
    env, s = job(after, second, "source-2")
    env.set_restore(str(tmp_path / "savepoint"), allow_non_restored_state=True)
    out = list(s.execute_and_collect())
    final = {}
    for k, n in out:
        final[k] = max(final.get(k, 0), n)
    want = Counter(first) + Counter(second)
    assert final == {k: want[k] for k in set(second)}
