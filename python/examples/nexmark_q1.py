"""Nexmark q1 in Python: bids with their price in euro (price * 0.908).

Two versions of the same query: with native expressions (``--native``: the job runs no
Python per record) and with a Python ``map`` formatting each row.

    python python/examples/nexmark_q1.py --events 1000000 --native
"""

import argparse
import time
from datetime import datetime, timezone

from spate import StreamExecutionEnvironment, col
from spate.connectors import NexmarkSource


def euro(b):
    p = b.price * 908
    when = datetime.fromtimestamp(b.dateTime / 1000, tz=timezone.utc)
    return f"{b.auction}\t{b.bidder}\t{p // 1000}.{p % 1000:03d}\t{when:%Y-%m-%d %H:%M:%S}\t{b.extra}"


def build(events, workers=1, native=False):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
    bids = (env.from_source(NexmarkSource(events=events))
            .filter(col("event_type") == 2).map(col("bid")))
    if native:
        from spate.expr import row
        q1 = bids.map(row(auction=col("auction"), bidder=col("bidder"),
                          price_milli_eur=col("price") * 908, dateTime=col("dateTime")))
    else:
        q1 = bids.map(euro)
    return env, q1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--native", action="store_true")
    p.add_argument("--print", action="store_true", help="print the rows (default: count them)")
    a = p.parse_args()
    env, q1 = build(a.events, a.workers, a.native)
    if a.print:
        q1.print()
        env.execute("nexmark q1")
    else:
        start = time.perf_counter()
        n = sum(1 for _ in q1.execute_and_collect("nexmark q1"))
        s = time.perf_counter() - start
        print(f"{n} rows from {a.events} events in {s:.2f} s: {a.events / s:,.0f} events/s")
