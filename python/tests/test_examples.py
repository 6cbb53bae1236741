"""The examples in python/examples, against plain-Python oracles."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))


@pytest.mark.parametrize("workers", [1, 2])
def test_temperature_alerts_equal_a_plain_python_run(workers):
    import temperature_alert
    from spate import StreamExecutionEnvironment
    from spate.connectors import SensorSource

    env, alerts = temperature_alert.build(rounds=60, sensors=200, workers=workers)
    env.set_rest(False)
    got = sorted((a["sensor_id"], a["timestamp_ms"]) for a in alerts.execute_and_collect())
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_rest(False)
    readings = list(env.from_source(SensorSource(seed=7, sensors=200, rounds=60))
                    .execute_and_collect())
    last, want = {}, []
    for r in sorted(readings, key=lambda r: (r.sensor_id, r.timestamp_ms)):
        prev = last.get(r.sensor_id)
        if prev is not None and abs(r.temperature - prev) > 1.7:
            want.append((r.sensor_id, r.timestamp_ms))
        last[r.sensor_id] = r.temperature
    assert got == sorted(want) and got


def test_q1_native_and_python_agree():
    import nexmark_q1
    env, native = nexmark_q1.build(5000, native=True)
    env.set_rest(False)
    rows = list(native.execute_and_collect())
    env, py = nexmark_q1.build(5000, native=False)
    env.set_rest(False)
    lines = list(py.execute_and_collect())
    assert len(rows) == len(lines) > 0
    from collections import Counter
    from datetime import datetime, timezone
    native_rows = Counter(
        (str(r.auction), str(r.bidder),
         f"{r.price_milli_eur // 1000}.{r.price_milli_eur % 1000:03d}",
         datetime.fromtimestamp(r.dateTime / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S"))
        for r in rows)
    assert native_rows == Counter(tuple(line.split("\t")[:4]) for line in lines)


def test_the_wordcount_example_runs(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("b a b\nc b a\n")
    r = subprocess.run([sys.executable, str(EXAMPLES / "wordcount.py"), str(text)],
                       capture_output=True, text=True, timeout=60,
                       env={"SPATE_REST": "off", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3", "b", "2", "a", "1", "c"]


def test_the_readme_python_job_runs(tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("```python\n", readme.index("### A job in Python")) + len("```python\n")
    code = readme[start:readme.index("```", start)]
    assert "NexmarkSource(events=1_000_000)" in code
    code = code.replace("NexmarkSource(events=1_000_000)", "NexmarkSource(events=20_000)")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120, env={"SPATE_REST": "off", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    windows = [l for l in lines if "window_start=" in l]
    jumps = [l for l in lines if l.lstrip("0123456789> ").startswith("(")]
    assert windows and jumps, r.stdout[:2000]
    assert any((tmp_path / "checkpoints").iterdir())
