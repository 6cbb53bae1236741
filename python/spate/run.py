"""``python -m spate.run [-p PROCESSES] [-w WORKERS] TARGET``: runs a job on several processes.

TARGET is ``package.module:factory``, a function that returns a
:class:`~spate.StreamExecutionEnvironment` with the job built on it (or that builds and
executes it itself and returns ``None``), or a script path ``job.py``. Each process of the job
runs this same command again and rebuilds the same job; the first process supervises them
and restarts them from the latest checkpoint if one dies. This is the way to run a
multi-process job from code that is not a plain script (tests, notebooks): the factory's
module is imported in every process, as with Bytewax's ``python -m bytewax.run``.
"""

from __future__ import annotations

import argparse
import importlib
import runpy
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spate.run", description=__doc__.split("\n")[0])
    parser.add_argument("target", help="package.module:factory, or a script path")
    parser.add_argument("-p", "--processes", type=int, default=None)
    parser.add_argument("-w", "--workers", type=int, default=None)
    parser.add_argument("--name", default=None, help="the job's name")
    args, rest = parser.parse_known_args(argv)
    if args.target.endswith(".py"):
        sys.argv = [args.target, *rest]
        runpy.run_path(args.target, run_name="__main__")
        return 0
    module_name, sep, factory_name = args.target.partition(":")
    if not sep or not factory_name:
        parser.error(f"the target {args.target!r} is not module:factory or a .py script")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        parser.error(f"cannot import {module_name!r}: {e}")
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        parser.error(f"{module_name!r} has no function {factory_name!r}")
    env = factory()
    if env is None:
        return 0
    if args.processes is not None:
        env.set_processes(args.processes)
    if args.workers is not None:
        env.set_parallelism(args.workers)
    result = env.execute(args.name or factory_name)
    if result.role in ("single", "leader", "supervisor"):
        print(f"job {result.job_name}: {result.net_runtime_ms:.0f} ms", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
