"""Shared fixtures: every job runs without its REST server (no banner, no port)."""

import os

import pytest

os.environ.setdefault("SPATE_REST", "off")


@pytest.fixture
def env():
    from spate import StreamExecutionEnvironment
    e = StreamExecutionEnvironment.get_execution_environment()
    e.set_rest(False)
    return e
