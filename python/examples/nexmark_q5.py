"""Nexmark q5 in Python, natively: the auctions with the most bids in 10 s windows sliding by
2 s. The window counts are the engine's sliced windows, in Rust; the top auctions per window
are picked in Python from the window results (one record per auction and window).

    python python/examples/nexmark_q5.py --events 1000000
"""

import argparse

from spate import Duration, StreamExecutionEnvironment, WatermarkStrategy, agg, col
from spate.connectors import NexmarkSource
from spate.window import SlidingEventTimeWindows


def build(events, workers=1):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
    counts = (env.from_source(NexmarkSource(events=events),
                              WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(0)))
              .filter(col("event_type") == 2).map(col("bid"))
              .key_by("auction")
              .window(SlidingEventTimeWindows.of(Duration.of_seconds(10), Duration.of_seconds(2)))
              .aggregate(agg.count().alias("num")))
    return env, counts


def hot_items(counts):
    best = {}
    for r in counts:
        best[r.window_start] = max(best.get(r.window_start, 0), r.num)
    return sorted((r.window_start, r.auction, r.num) for r in counts
                  if r.num == best[r.window_start])


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args()
    env, counts = build(a.events, a.workers)
    for start, auction, num in hot_items(list(counts.execute_and_collect("nexmark q5"))):
        print(f"{start}\t{auction}\t{num}")
