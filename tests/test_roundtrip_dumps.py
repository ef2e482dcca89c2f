"""The round trip HLO → StableHLO → HLO (jaxlib's exporter) → StableHLO, and the portable
artifacts (versioned StableHLO, VHLO), over the real dumps.

Default run: the round-tripped program, and the program deserialized from its portable
artifact, compute JAX's own results for the catalog program behind the dump
(tests/test_real_dumps.py: jax_case / assert_like_jax) — an oracle independent of the
converter — for one dump per backend directory and a few more feature classes.

Slow run (`-m slow`): the exhaustive sweeps over every dump and sample, which compare the
converter with itself (`check`: the second conversion's outputs against the first's; each
artifact printed against the module it came from).  They catch any drift of the round
trip, but the converter is their only oracle, so they do not stand alone."""

from __future__ import annotations

import pathlib
import re

import pytest

from converter.runtime.convert import convert_file, convert_text
from converter.tools.check import check_dump, format_report
from converter.tools.export import export_hlo_text
from converter.runtime.program import program_from_module
from converter.mlir.serialize import load_module, module_to_bytes
from tests.test_real_dumps import KNOWN_GAPS, assert_like_jax, jax_case

ROOT = pathlib.Path(__file__).resolve().parents[1]
DUMPS = ROOT / "tests" / "dumps"

# One dump per backend directory, each chosen for what its backend writes, then classes
# the round trip must carry through HLO text: LAPACK calls kept for jaxlib's CPU runtime,
# loops, FFT, sorting, scatter, sub-32-bit integers, complex numbers, multi-device
# collectives (one and two mesh axes), a sign-ambiguous decomposition (canonicalized).
REPRESENTATIVE = [
    ("cpu", "linalg_solve_lu"),  # LAPACK custom-calls (cpu_only) through the exporter
    ("cpu_jax012", "scan_rnn"),  # while loops
    ("gpu", "attention_grad"),  # cuDNN/cuBLAS rewrites, then exported
    ("gpu_h100", "conv_grad"),  # cuDNN convolutions
    ("gpu_jax012", "sm2d_ppermute_a2a"),  # 2-D mesh permutes and all-to-all
    ("gpu_triton", "spmd_splitk_dp_grads"),  # Triton split-K GEMMs, 4 devices
    ("tpu", "sm_psum_pmean_pmax"),  # TPU collectives, 4 devices
    ("tpu_jax012", "fft_family"),  # FFTs
    ("tpu", "linalg_svd"),  # TPU's own SVD, compared up to signs
    ("cpu", "sort_stable_ties"),  # comparators with ties
    ("gpu", "scatter_advanced"),  # scatter regions
    ("cpu", "int_narrow_types"),  # s8/u8/s16/u16 arithmetic
    ("tpu", "complex_math"),  # complex numbers
]
ARTIFACT_REPRESENTATIVE = [("cpu", "cumulative_more"), ("gpu_h100", "layernorm_grad"), ("tpu", "spmd_mlp_2d")]

DUMP_FILES = sorted(p for p in DUMPS.glob("*/*.hlo") if (p.parent / "manifest.json").exists())  # the catalog's
# Full-size samples take minutes and GBs; the MaxText one elides constants, so it is
# round-tripped as text and artifacts only (its outputs would be made up).
SAMPLES = ["gpu_torchxla_qwen_decode_cublas", "tpu_mlp_allreduce_4_replicas", "tpu_spmd_mlp_async_collective_fusion"]

SLOW = pytest.mark.slow
# Marks given at collection (a mark applied inside the test would not deselect it).
ALL_DUMPS = [pytest.param(p, id=f"{p.parent.name}-{p.stem}", marks=SLOW) for p in DUMP_FILES
             if (p.parent.name, p.stem) not in KNOWN_GAPS]


def _case(backend: str, name: str):
    assert (DUMPS / backend / f"{name}.hlo").exists(), f"{backend}/{name}: no such dump"
    return pytest.param(backend, name, id=f"{backend}-{name}")


@pytest.mark.parametrize("backend, name", [_case(b, n) for b, n in REPRESENTATIVE])
def test_round_trip_through_hlo_computes_jaxs_results(backend, name):
    first = convert_file(str(DUMPS / backend / f"{name}.hlo"))
    exported = export_hlo_text(first)
    assert exported.startswith("HloModule")
    second = program_from_module(convert_text(exported, f"{backend}/{name} (exported)"))
    inputs, want = jax_case(backend, name)
    assert_like_jax(backend, name, second(*inputs), want)


@pytest.mark.parametrize("backend, name", [_case(b, n) for b, n in ARTIFACT_REPRESENTATIVE])
def test_portable_artifact_deserializes_to_a_module_computing_jaxs_results(backend, name):
    data = module_to_bytes(convert_file(str(DUMPS / backend / f"{name}.hlo")), "portable")
    assert isinstance(data, bytes) and data[:4] == b"ML\xefR"  # MLIR bytecode (VHLO inside)
    program = program_from_module(load_module(data, f"{backend}/{name}.mlirbc"))
    inputs, want = jax_case(backend, name)
    assert_like_jax(backend, name, program(*inputs), want)


def _check(path: pathlib.Path) -> None:
    report = check_dump(str(path))
    assert report.ok, format_report(report)


@pytest.mark.parametrize("path", ALL_DUMPS)
def test_dump_round_trips_through_hlo_with_the_same_outputs(path):
    _check(path)


@pytest.mark.parametrize("name", [pytest.param(n, marks=SLOW, id=n) for n in SAMPLES])
def test_sample_round_trips_through_hlo_with_the_same_outputs(name):
    _check(ROOT / "samples" / f"{name}.hlo")


def _without_channel_types(text: str) -> str:
    # VHLO does not carry a channel handle's type (every StableHLO version reads it back as
    # 0); XLA ignores it for collectives, which are the only ops here that have one.
    return re.sub(r"(#stablehlo\.channel_handle<handle = \d+), type = \d+>", r"\1, type = _>", text)


@pytest.mark.parametrize("path", ALL_DUMPS + [pytest.param(p, id=f"sample-{p.stem}", marks=SLOW)
                                              for p in sorted((ROOT / "samples").glob("*.hlo"))])
def test_portable_artifact_deserializes_to_an_identical_module(path):
    module = convert_file(str(path))
    text = str(load_module(module_to_bytes(module, "mlir").encode()))
    again = load_module(module_to_bytes(module, "portable"))
    assert _without_channel_types(str(again)) == _without_channel_types(text)
