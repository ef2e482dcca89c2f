"""The MaxText training step (16 H100s, 80 GB each) compiled for CPU must fit in the
memory of the device it ran on: the large GEMMs run in blocks (cublas-gemm) and XLA's CPU
compiler schedules for memory (converter.runtime.program)."""

import pytest

from converter.runtime.program import device_bytes, load
from tests.conftest import SAMPLES

H100_BYTES = 80 * 10**9


@pytest.mark.slow
def test_maxtext_sample_fits_the_h100s_memory_per_device():
    program = load(str(SAMPLES / "gpu_maxtext_train_step_te_fused_attention.hlo"))
    mem = program.compile_only()
    # Measured 2026-11-24 (jaxlib 0.10.2): 69.06 GiB = arguments 7.28 + outputs 7.28 -
    # aliased 7.28 + temporaries 61.78 (before: 104.51 GiB).
    assert device_bytes(mem) < H100_BYTES, mem
    assert mem["alias_bytes"] > 0  # the dump's donated state stays aliased
