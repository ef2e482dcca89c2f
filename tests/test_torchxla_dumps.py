"""Optimized dumps torch-xla 2.9 wrote on CPU for ordinary torch programs
(tests/programs/torchxla_programs.py: MLP/SGD, decoder block forward and AdamW step, conv net
with BatchNorm, Embedding+LSTM, a KV-cache decode step, sort/topk/cumsum/int/bool ops, bf16
autocast, torch.compile's openxla backend, SPMD on 4 devices), converted and run on CPU.
Oracles: torch's own eager CPU result of the same program from the same initial values
(no XLA), and XLA itself running the same dump through jaxlib.  No torch is needed: the
inputs and torch's results are committed beside each dump."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from converter.runtime.program import load
from converter.runtime.sharding import assemble_global, split_global
from converter.runtime.xla_oracle import run_dump_with_xla
from tests.helpers import assert_close, tolerance

FOLDER = pathlib.Path(__file__).parent / "dumps" / "torchxla_cpu"
MANIFEST = json.loads((FOLDER / "programs.json").read_text())
NAMES = sorted(MANIFEST["programs"])

# Where torch-xla 2.9 itself computes something else than torch eager, the dump holds
# torch-xla's meaning: that output is compared with torch-xla's own result of the run that
# wrote the dump (NAME.torchxla.npz), and eager's is required to differ, so the entry goes
# when a regenerated dump follows eager.
TORCHXLA_DIFFERS = {
    # BatchNorm2d in training mode: torch-xla updates running_var with the biased batch
    # variance; eager uses the unbiased one (x n/(n-1)).  Output 8: running_var.
    ("convnet_bn_train_step", 8): "running_var from the biased variance",
    # n >> 1 on negative int64: torch-xla shifts |n| and negates (rounds toward zero, the
    # dump's shift-right-logical/negate/select); eager shifts arithmetically (floor).
    ("sort_topk_cumsum_int_bool", 18): "right shift of negative integers rounds toward zero",
}

# (rtol, atol) of the converter's result against torch eager, beyond the dtype's table in
# tests/helpers.py: eager's CPU kernels (MKL GEMMs, ATen's GELU/softmax/LSTM cell) and XLA's
# CPU code (its own dot emitter and polynomial exp/tanh/erf) round differently along chains
# of up to a few hundred ops (a backward pass, an optimizer step).  Measured: torch-xla
# itself against eager stays under 1e-6 absolute for every float32 output here (programs.json
# torchxla_vs_eager_max_error), so the float32 table's 2e-5/1e-5 applies unchanged.
# bfloat16 autocast: eager rounds each matmul's f32 accumulation to bf16 once, XLA may keep
# the GELU between the two matmuls in f32 before rounding: two bf16 roundings apart, 2 ulps
# of 2^-8 of the output's scale.
EAGER_TOLERANCE = {"bf16_autocast_mlp": (2 * 2.0 ** -8, 2e-2)}

# The training steps of the decoder, the conv net and the LSTM are 1,000-2,400 line dumps
# whose compiles (ours and XLA's) take 10-30 s on a shared 2-core machine: run with -m slow.
SLOW = {"decoder_adamw_step", "embedding_lstm_grads", "convnet_bn_train_step"}


def _arrays(path: pathlib.Path, prefix: str) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[f"{prefix}{i}"] for i in range(len(data.files))]


def _run_both(name: str):
    """(ours, XLA's, torch eager's, torch-xla's) outputs of dump `name`, as whole arrays."""
    entry = MANIFEST["programs"][name]
    program = load(str(FOLDER / f"{name}.hlo"))
    hlo_text = (FOLDER / f"{name}.hlo").read_text()
    inputs = _arrays(FOLDER / f"{name}.inputs.npz", "arg")
    shardings = entry.get("output_shardings")
    if shardings:  # SPMD: the committed values are global; the dump takes each device's shard
        n = program.num_devices
        inputs = [split_global(a, spec.shape, spec.sharding, n, f"arg{spec.index}")
                  for a, spec in zip(inputs, program.params)]
    ours, xla = program(*inputs), run_dump_with_xla(hlo_text, inputs, name).outputs
    if shardings:
        ours = [assemble_global(np.asarray(o), sh) for o, sh in zip(ours, shardings)]
        xla = [assemble_global(np.asarray(o), sh) for o, sh in zip(xla, shardings)]
    return (ours, xla, _arrays(FOLDER / f"{name}.expected.npz", "out"),
            _arrays(FOLDER / f"{name}.torchxla.npz", "out"))


def _as_stored(array: np.ndarray, dtype: str) -> np.ndarray:
    """bfloat16 results as the generator stores them (float32, exactly)."""
    array = np.asarray(array)
    return array.astype(np.float32) if dtype == "bfloat16" else array


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in NAMES])
def test_torchxla_dump_matches_torch_eager_and_xla(name):
    entry = MANIFEST["programs"][name]
    ours, xla, eager, torchxla = _run_both(name)
    assert len(ours) == len(xla) == len(eager) == len(entry["outputs"])
    for i, (o, x, e, t, dtype) in enumerate(zip(ours, xla, eager, torchxla, entry["output_dtypes"])):
        o, x = _as_stored(o, dtype), _as_stored(x, dtype)
        rtol, atol = tolerance(np.dtype("float32") if dtype == "bfloat16" else o.dtype)
        if dtype == "bfloat16":
            rtol, atol = tolerance("bfloat16")
        # XLA on the same dump: the same ops, so the dtype's table.
        assert_close(o, x, rtol=rtol, atol=atol, what=f"{name} out{i} vs XLA")
        reason = TORCHXLA_DIFFERS.get((name, i))
        if reason:
            assert_close(o, t, rtol=rtol, atol=atol, what=f"{name} out{i} vs torch-xla ({reason})")
            assert not np.allclose(e, t, rtol=rtol, atol=atol), f"{name} out{i}: eager now agrees: drop the entry"
            continue
        rtol, atol = EAGER_TOLERANCE.get(name, (rtol, atol))
        assert_close(o, e, rtol=rtol, atol=atol, what=f"{name} out{i} vs torch eager")


def test_every_program_of_the_generator_has_a_committed_dump():
    """The manifest lists the programs the generator writes; each has its four files."""
    assert {"mlp_sgd_step", "decoder_adamw_step", "convnet_bn_train_step", "embedding_lstm_grads",
            "kv_cache_decode_step", "spmd_mlp_sgd_step"} <= set(NAMES)
    for name in NAMES:
        for suffix in (".hlo", ".inputs.npz", ".expected.npz", ".torchxla.npz"):
            assert (FOLDER / f"{name}{suffix}").is_file(), f"{name}{suffix}"


def test_check_takes_whole_arrays_of_an_spmd_dump(capsys):
    """`check --global --inputs`: the SPMD dump's whole-array inputs are split by its
    parameter shardings (as `run --global`), and the round trip and XLA itself agree."""
    from converter.tools.cli import main

    dump = FOLDER / "spmd_mlp_sgd_step.hlo"
    assert main(["check", str(dump), "--inputs", str(FOLDER / "spmd_mlp_sgd_step.inputs.npz"), "--global",
                 "--against-xla"]) == 0
    assert "verdict: the outputs agree (round trip and XLA)" in capsys.readouterr().out
