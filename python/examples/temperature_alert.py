"""Forest sensors: Flink's TemperatureAlertFunction(1.7) in Python.

Keyed by sensor, a KeyedProcessFunction keeps each sensor's last temperature in ValueState
and emits an alert when a reading differs from it by more than the threshold. The state is
the engine's: checkpointed, and moved between workers on a rescaled restore.

    python python/examples/temperature_alert.py --rounds 720 --workers 2
"""

import argparse

from spate import StreamExecutionEnvironment
from spate.connectors import SensorSource
from spate.functions import KeyedProcessFunction
from spate.state import ValueStateDescriptor


class TemperatureAlertFunction(KeyedProcessFunction):
    def __init__(self, threshold: float):
        self.threshold = threshold

    def open(self, runtime_context):
        self.last = runtime_context.get_state(ValueStateDescriptor("last-temperature"))

    def process_element(self, reading, ctx):
        last = self.last.value()
        if last is not None and abs(reading.temperature - last) > self.threshold:
            yield {"sensor_id": reading.sensor_id, "timestamp_ms": reading.timestamp_ms,
                   "last_temperature": last, "temperature": reading.temperature}
        self.last.update(reading.temperature)


def build(rounds=720, sensors=1000, threshold=1.7, workers=1, processes=1):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(workers).set_processes(processes)
    alerts = (env.from_source(SensorSource(seed=7, sensors=sensors, rounds=rounds))
              .key_by("sensor_id")
              .process(TemperatureAlertFunction(threshold)).name("temperature alerts"))
    return env, alerts


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=720)
    p.add_argument("--sensors", type=int, default=1000)
    p.add_argument("--threshold", type=float, default=1.7)
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args()
    env, alerts = build(a.rounds, a.sensors, a.threshold, a.workers)
    alerts.print()
    env.execute("temperature alerts")
