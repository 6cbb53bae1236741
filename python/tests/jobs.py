"""Jobs that the process tests run in child interpreters (script and target mode)."""

import os
import sys

from spate import RestartStrategies, StreamExecutionEnvironment
from spate.connectors import Encoder, FileSink, NumberSequenceSource
from spate.functions import KeyedProcessFunction
from spate.state import ValueStateDescriptor

EVENTS = int(os.environ.get("JOB_EVENTS", "20000"))
RATE = float(os.environ.get("JOB_RATE", "0")) or None


class Count(KeyedProcessFunction):
    def open(self, ctx):
        self.n = ctx.get_state(ValueStateDescriptor("n"))

    def process_element(self, value, ctx):
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        yield f"{ctx.get_current_key()}\t{value[1]}\t{n}"


def word_of(i):
    return f"k{(i * 7919) % 101}"


def build():
    """The counting job, configured from the environment (JOB_*)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_rest(False)
    env.set_parallelism(int(os.environ.get("JOB_WORKERS", "1")))
    env.set_processes(int(os.environ.get("JOB_PROCESSES", "1")))
    if os.environ.get("JOB_CHECKPOINTS"):
        env.enable_checkpointing(200)
        env.set_checkpoint_dir(os.environ["JOB_CHECKPOINTS"])
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 100))
    (env.from_source(NumberSequenceSource(0, EVENTS - 1, rate=RATE))
        .map(lambda i: (word_of(i), i))
        .key_by(lambda p: p[0])
        .process(Count()).uid("count")
        .sink_to(FileSink.for_row_format(os.environ["JOB_OUT"],
                                         Encoder.simple_string_encoder()).build()))
    return env


if __name__ == "__main__":
    result = build().execute("counting")
    if result.role in ("single", "supervisor"):
        print(f"done role={result.role} stopped={result.stopped} "
              f"restarts={result.metrics.get('numRestarts', 0)}", flush=True)
    sys.exit(0)
