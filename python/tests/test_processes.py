"""Jobs on several processes (script mode and ``python -m spate.run``), kill -9 of a child
with Python state in the job, and Ctrl-C: all in child interpreters."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EVENTS = 20000


def oracle(events=EVENTS):
    """The counting job's rows, computed in plain Python."""
    seen = Counter()
    rows = []
    for i in range(events):
        w = f"k{(i * 7919) % 101}"
        seen[w] += 1
        rows.append((w, i, seen[w]))
    return rows


def read_rows(out: Path):
    rows = []
    for f in sorted(out.iterdir()):
        if f.name.startswith("."):
            continue
        for line in f.read_text().splitlines():
            k, v, n = line.split("\t")
            rows.append((k, int(v), int(n)))
    return rows


def check(rows, events=EVENTS):
    # Each key's records arrive in the source's order (one source per worker splits the
    # sequence, so the per-key counts depend on the split): compare per key what every
    # split agrees on, the set of values and the counts 1..n.
    want = oracle(events)
    assert len(rows) == len(want)
    assert sorted((k, v) for k, v, _ in rows) == sorted((k, v) for k, v, _ in want)
    per_key = {}
    for k, _, n in rows:
        per_key.setdefault(k, []).append(n)
    for k, ns in per_key.items():
        assert sorted(ns) == list(range(1, len(ns) + 1)), k


def run(args, env, timeout=120, **kw):
    e = dict(os.environ, PYTHONPATH=str(HERE), SPATE_REST="off", **env)
    return subprocess.run([sys.executable, *args], env=e, timeout=timeout, capture_output=True,
                          text=True, **kw)


@pytest.mark.parametrize("processes,workers", [(1, 1), (1, 2), (2, 1), (2, 2)])
def test_script_mode_on_processes_and_workers(tmp_path, processes, workers):
    out = tmp_path / "out"
    r = run([str(HERE / "jobs.py")], {"JOB_OUT": str(out), "JOB_PROCESSES": str(processes),
                                       "JOB_WORKERS": str(workers)})
    assert r.returncode == 0, r.stderr
    check(read_rows(out))
    role = "supervisor" if processes > 1 else "single"
    assert f"done role={role}" in r.stdout


def test_target_mode(tmp_path):
    out = tmp_path / "out"
    r = run(["-m", "spate.run", "jobs:build", "-p", "2"], {"JOB_OUT": str(out)})
    assert r.returncode == 0, r.stderr
    check(read_rows(out))


def test_several_processes_are_refused_from_an_interpreter_without_a_script(tmp_path):
    code = ("from spate import StreamExecutionEnvironment as E\n"
            "e = E.get_execution_environment(); e.set_processes(2); e.set_rest(False)\n"
            "e.from_collection([1]).print()\n"
            "try:\n    e.execute()\nexcept RuntimeError as x:\n    print('refused:', x)\n")
    r = run(["-c", code], {})
    assert "refused:" in r.stdout and "spate.run" in r.stdout, r.stdout + r.stderr


def children_of(pid):
    kids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(p.name))
    return kids


def pid_alive(pid):
    """Whether process ``pid`` runs (a zombie waiting for its parent does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_kill_9_of_a_child_with_python_state_gives_the_failure_free_output(tmp_path):
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    env = dict(os.environ, PYTHONPATH=str(HERE), SPATE_REST="off", JOB_OUT=str(out),
               JOB_PROCESSES="2", JOB_CHECKPOINTS=str(ckpt), JOB_EVENTS=str(EVENTS),
               JOB_RATE="5000")
    sup = subprocess.Popen([sys.executable, str(HERE / "jobs.py")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Wait for a complete checkpoint, then kill one child.
        deadline = time.time() + 60
        while time.time() < deadline and not any(ckpt.rglob("*manifest*")):
            time.sleep(0.1)
        time.sleep(0.5)
        kids = children_of(sup.pid)
        assert kids, "the supervisor has no children"
        os.kill(kids[-1], signal.SIGKILL)
        stdout, stderr = sup.communicate(timeout=120)
    finally:
        if sup.poll() is None:
            sup.kill()
    assert sup.returncode == 0, stderr
    # The supervisor restarted the processes from the checkpoint; the output is still every
    # row exactly once.
    assert "restarts=1" in stdout, stdout + stderr
    rows = read_rows(out)
    check(rows)


def test_ctrl_c_drains_and_a_second_execute_runs(tmp_path):
    out = tmp_path / "out"
    code = f"""
import os, sys
from spate import StreamExecutionEnvironment as E
from spate.connectors import NumberSequenceSource, FileSink, Encoder
e = E.get_execution_environment(); e.set_rest(False)
e.from_source(NumberSequenceSource(0, None, rate=2000)).map(lambda x: x * 2) \\
 .sink_to(FileSink.for_row_format({str(out)!r}, Encoder.simple_string_encoder()).build())
print("started", flush=True)
r = e.execute("endless")
print("stopped", r.stopped, flush=True)
print("second", list(e.from_collection([1, 2]).map(lambda x: x + 1).execute_and_collect()),
      flush=True)
"""
    env = dict(os.environ, SPATE_REST="off")
    # A test run started in the background (`cmd &` without job control) ignores SIGINT, and
    # Python keeps an inherited SIG_IGN: the child gets the default back, as from a terminal.
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "started"
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 0, stderr
    assert "stopped True" in stdout and "second [2, 3]" in stdout, stdout + stderr
    values = [int(line) for f in out.iterdir() if not f.name.startswith(".")
              for line in f.read_text().splitlines()]
    # Drained and flushed: every record the source emitted, in order, none twice.
    assert len(values) > 100
    assert sorted(values) == [2 * i for i in range(len(values))]


def test_an_exception_in_one_of_several_processes_fails_the_job(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("""
from spate import StreamExecutionEnvironment
import spate
env = StreamExecutionEnvironment.get_execution_environment()
env.set_processes(2).set_rest(False)
def boom(x):
    if x == 77:
        raise KeyError("seventy-seven")
    return x
env.from_sequence(0, 1000).map(boom).name("boomer").print()
try:
    env.execute("fails")
except spate.JobExecutionError as e:
    print("RAISED", e)
""")
    r = run([str(script)], {}, timeout=60)
    assert "RAISED" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    # The failing process names itself, the operator and the Python exception.
    assert "process" in r.stderr and "boomer" in r.stderr and "KeyError" in r.stderr, r.stderr


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_the_processes_of_a_job_end_when_their_supervisor_dies(tmp_path, how):
    script = tmp_path / "endless.py"
    script.write_text("""
from spate import StreamExecutionEnvironment
from spate.connectors import NumberSequenceSource
env = StreamExecutionEnvironment.get_execution_environment()
env.set_processes(2).set_rest(False)
env.from_source(NumberSequenceSource(0, None, rate=1000)).map(lambda x: x + 1) \\
   .filter(lambda x: x < 0).print()
env.execute("endless")
""")
    sup = subprocess.Popen([sys.executable, str(script)], env=dict(os.environ, SPATE_REST="off"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids = []
    try:
        deadline = time.time() + 60
        while time.time() < deadline and len(kids) < 2:
            time.sleep(0.2)
            kids = children_of(sup.pid)
        assert len(kids) == 2, "the supervisor did not start its two processes"
        time.sleep(1.0)
        # SIGTERM: Python's default action ends the interpreter without running any handler.
        os.kill(sup.pid, how)
        sup.wait(timeout=30)
        deadline = time.time() + 30
        alive = kids
        while time.time() < deadline and alive:
            time.sleep(0.2)
            alive = [k for k in kids if pid_alive(k)]
        assert not alive, f"processes {alive} outlived their supervisor"
    finally:
        if sup.poll() is None:
            sup.kill()
        for k in kids:
            if pid_alive(k):
                os.kill(k, signal.SIGKILL)
