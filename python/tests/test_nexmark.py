"""Nexmark from Python on the generator's source, against Flink's results
(``../shared/nexmark/expected/seed7-20k``, the golden files of the Rust queries' tests)."""

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from spate import Duration, StreamExecutionEnvironment, WatermarkStrategy, agg, col
from spate.connectors import NexmarkSource
from spate.window import SlidingEventTimeWindows

SHARED = Path(__file__).resolve().parents[3] / "shared"
EXPECTED = SHARED / "nexmark" / "expected" / "seed7-20k"


def ts(ms):
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def compare(rows, query, tmp_path):
    out = tmp_path / f"{query}.jsonl"
    out.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                           for r in rows))
    r = subprocess.run([sys.executable, str(SHARED / "anchors" / "nexmark_canon.py"), "--compare",
                        str(out), str(EXPECTED / f"{query}.canon")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def source(env, strategy=None):
    return env.from_source(NexmarkSource(events=20_000, seed=7, event_rate=200), strategy)


@pytest.mark.parametrize("workers", [1, 2])
def test_q1_equals_flink(tmp_path, workers):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
    env.set_rest(False)

    def q1(b):
        p = b.price * 908
        return [b.auction, b.bidder, f"{p // 1000}.{p % 1000:03d}", ts(b.dateTime), b.extra]

    rows = list(source(env).filter(col("event_type") == 2).map(col("bid")).map(q1)
                .execute_and_collect())
    compare(rows, "q1", tmp_path)


def test_q5_hot_items_native_windows(tmp_path, env):
    # q5's first half natively: bids per auction in 10 s windows sliding by 2 s; the top
    # auctions per window (ties kept) in Python, from the window results.
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(0))
    counts = list(source(env, strategy).filter(col("event_type") == 2).map(col("bid"))
                  .key_by("auction")
                  .window(SlidingEventTimeWindows.of(Duration.of_seconds(10), Duration.of_seconds(2)))
                  .aggregate(agg.count().alias("num"))
                  .execute_and_collect())
    best = {}
    for r in counts:
        best[r.window_start] = max(best.get(r.window_start, 0), r.num)
    rows = [[r.auction, r.num] for r in counts if r.num == best[r.window_start]]
    compare(rows, "q5", tmp_path)
