#!/usr/bin/env python3
"""Nexmark next to Flink on the same machine, in one run.

For every query and round: Flink 2.3 (``../shared/anchors/flink_nexmark.py``, parallelism
``-p``, reading the input as ``-p`` shards made by ``shard_jsonl.py``, since its JSON source does
not split a file), then each given Spate binary (``spate nexmark run --json --input FILE
--workers P``, or for ``LABEL=sql:BINARY`` the suite's SQL text of the query through
``spate bench nexmark --front sql``) on the unsplit file. Each result is one JSON line appended to ``--results``; the
table at the end gives per query the medians and Spate's ratios to Flink (events/s, and
Flink's peak memory over Spate's).

    benches/nexmark_vs_flink.py --spate new=target/release/spate --spate old=/tmp/spate-old \\
        --input nx10m.jsonl --shards nx10m_s2 --queries all --rounds 1 --results out.jsonl

Flink's figure is ``events_per_s_net`` (events over its net job runtime, without the JVM start
and the job submission); Spate's is events over its whole job. Peak memory is the VmHWM of
Flink's JVM and of Spate's process.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ANCHORS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "anchors"))
ALL = ["q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q9", "q10", "q11", "q12", "q13",
       "q14", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22"]


def last_json(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON result line in:\n" + text[-2000:])


def load_avg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run_flink(python, query, shards, p, events):
    cmd = [python, os.path.join(ANCHORS, "flink_nexmark.py"), "--query", query,
           "--input", shards, "-p", str(p), "--events", str(events)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    r = last_json(out.stdout)
    return dict(events_per_s=r.get("events_per_s_net"), peak_rss_mb=r.get("jvm_peak_rss_mb"))


def run_spate(binary, query, path, workers):
    if binary.startswith("sql:"):
        # The suite's SQL text of the query, through `spate sql`.
        repo = os.path.normpath(os.path.join(HERE, ".."))
        cmd = [binary[4:], "bench", "nexmark", "--front", "sql", "--query", query,
               "--input", path, "--workers", str(workers),
               "--sql-dir", os.path.join(repo, "..", "shared", "nexmark", "flink-sql"),
               "--sql-source", os.path.join(repo, "examples", "sql", "nexmark_file.sql")]
    else:
        cmd = [binary, "nexmark", "run", "--json", "--no-progress", "--query", query,
               "--input", path, "--workers", str(workers)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    r = last_json(out.stdout)
    return dict(events_per_s=r.get("events_per_s"), peak_rss_mb=r.get("peak_rss_mb"))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spate", action="append", required=True, metavar="LABEL=BINARY")
    ap.add_argument("--input", required=True, help="the JSON-lines file Spate reads")
    ap.add_argument("--shards", required=True, help="the same events as P files, for Flink")
    ap.add_argument("--queries", default="all")
    ap.add_argument("-p", "--parallelism", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--spate-repeat", type=int, default=2, help="Spate runs per round")
    ap.add_argument("--flink-python",
                    default=os.path.expanduser("~/.cache/spate-anchors/flink-venv/bin/python"))
    ap.add_argument("--no-flink", action="store_true", help="only the Spate binaries")
    ap.add_argument("--results", required=True)
    args = ap.parse_args()

    spates = [s.split("=", 1) for s in args.spate]
    queries = ALL if args.queries == "all" else args.queries.split(",")
    with open(args.input, "rb") as f:
        events = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
    rows = []
    with open(args.results, "a") as res:
        for rnd in range(args.rounds):
            for q in queries:
                runs = []
                if not args.no_flink:
                    runs.append(("flink", lambda: run_flink(args.flink_python, q, args.shards,
                                                            args.parallelism, events)))
                for label, binary in spates:
                    for _ in range(args.spate_repeat):
                        runs.append((label, lambda b=binary: run_spate(b, q, args.input,
                                                                       args.parallelism)))
                for engine, run in runs:
                    before = load_avg()
                    r = run()
                    r.update(engine=engine, query=q, round=rnd, load_before=before,
                             load_after=load_avg(), events=events, p=args.parallelism)
                    res.write(json.dumps(r) + "\n")
                    res.flush()
                    rows.append(r)
                    print(json.dumps(r), file=sys.stderr)

    labels = ([] if args.no_flink else ["flink"]) + [l for l, _ in spates]
    head = ["query"] + [f"{l} ev/s" for l in labels] + [f"{l} RSS MB" for l in labels]
    if not args.no_flink:
        head += [f"{l}/flink" for l, _ in spates] + [f"flink RSS/{l}" for l, _ in spates]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for q in queries:
        med = {}
        for l in labels:
            rs = [r for r in rows if r["query"] == q and r["engine"] == l]
            med[l] = (statistics.median(r["events_per_s"] for r in rs),
                      statistics.median(r["peak_rss_mb"] for r in rs))
        cells = [q] + [f"{med[l][0] / 1e6:.2f} M" for l in labels] + \
                [f"{med[l][1]:.0f}" for l in labels]
        if not args.no_flink:
            cells += [f"{med[l][0] / med['flink'][0]:.1f}×" for l, _ in spates]
            cells += [f"{med['flink'][1] / med[l][1]:.0f}×" for l, _ in spates]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
