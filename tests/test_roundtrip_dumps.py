"""Issue 8's round trip over every real dump and sample: HLO → StableHLO → HLO (jaxlib's
exporter) → StableHLO computes the same outputs on the same inputs (`check`: bitwise for
integers and predicates, the dtype's tolerance for floats), and each portable artifact
(versioned StableHLO, VHLO) deserializes to a module that prints identically."""

from __future__ import annotations

import pathlib
import re

import pytest

from converter.runtime.convert import convert_file
from converter.tools.check import check_dump, format_report
from converter.mlir.serialize import load_module, module_to_bytes

ROOT = pathlib.Path(__file__).resolve().parents[1]
DUMPS = sorted((ROOT / "tests" / "dumps").glob("*/*.hlo"))
# Full-size samples take minutes and GBs (slow); the MaxText one elides constants, so it is
# round-tripped as text and artifacts only (its outputs would be made up).
SAMPLES = {
    "gpu_torchxla_qwen_decode_cublas": (),
    "tpu_mlp_allreduce_4_replicas": (),
    "tpu_spmd_mlp_async_collective_fusion": (pytest.mark.slow,),
}
# Dumps whose import still fails (tests/test_real_dumps.py KNOWN_GAPS): nothing to round-trip.
from tests.test_real_dumps import KNOWN_GAPS  # noqa: E402

CASES = [pytest.param(p, id=f"{p.parent.name}-{p.stem}") for p in DUMPS
         if (p.parent.name, p.stem) not in KNOWN_GAPS]


def _check(path: pathlib.Path) -> None:
    report = check_dump(str(path))
    assert report.ok, format_report(report)


@pytest.mark.parametrize("path", CASES)
def test_dump_round_trips_through_hlo_with_the_same_outputs(path):
    _check(path)


# Marks given at collection (a mark applied inside the test would not deselect it).
@pytest.mark.parametrize("name", [pytest.param(n, marks=m, id=n) for n, m in sorted(SAMPLES.items())])
def test_sample_round_trips_through_hlo_with_the_same_outputs(name):
    _check(ROOT / "samples" / f"{name}.hlo")


def _without_channel_types(text: str) -> str:
    # VHLO does not carry a channel handle's type (every StableHLO version reads it back as
    # 0); XLA ignores it for collectives, which are the only ops here that have one.
    return re.sub(r"(#stablehlo\.channel_handle<handle = \d+), type = \d+>", r"\1, type = _>", text)


@pytest.mark.parametrize("path", CASES + [pytest.param(p, id=f"sample-{p.stem}")
                                          for p in sorted((ROOT / "samples").glob("*.hlo"))])
def test_portable_artifact_deserializes_to_an_identical_module(path):
    module = convert_file(str(path))
    text = str(load_module(module_to_bytes(module, "mlir").encode()))
    again = load_module(module_to_bytes(module, "portable"))
    assert _without_channel_types(str(again)) == _without_channel_types(text)
