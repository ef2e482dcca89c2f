"""Test-session setup: JAX must get its CPU device count before anything starts it."""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import jax  # noqa: E402

# Multi-device dumps in the tests use up to 16 devices (the MaxText sample).
jax.config.update("jax_num_cpu_devices", 16)

import pytest  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
SAMPLE_DUMPS = sorted(p.name for p in SAMPLES.glob("*.hlo"))


@pytest.fixture(scope="session")
def samples_dir() -> pathlib.Path:
    return SAMPLES
