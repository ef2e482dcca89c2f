"""torch-xla-style modules, written by hand where torch-xla is not installable
(tests/importer/torch_xla/): `SyncTensorsGraph.N` names, `xla__*` op metadata,
`/*index=5*/` comments in long tuple shapes, the pseudo-token `f32[]` that torch-xla
threads through its collectives (all-reduced beside the tensor, then added times zero
to the next collective's input), coalesced (multi-operand) all-gather and reduce-scatter,
all-to-all and collective-permute, on 4 replicas.

Oracles: NumPy for every output, and XLA on the same module with the coalesced
reduce-scatter written as one reduce-scatter per operand (XLA's importer takes only a
single-operand reduce-scatter; per-operand is what XLA's shape inference says the
coalesced one means).  Inputs are small integers: every sum is exact, in bf16 too."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.common.errors import ConverterError
from converter.runtime.xla_oracle import run_with_xla
from tests.helpers import assert_all_close, convert_program

N = 4
DUMP = pathlib.Path(__file__).parent / "torch_xla" / "SyncTensorsGraph.58.hlo"


def _inputs(program, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-8, 8, program.input_shape(p)).astype(p.dtype) for p in program.params]


def _split_reduce_scatter(text: str) -> str:
    """The coalesced reduce-scatter as one reduce-scatter per operand and a tuple."""
    line = next(l for l in text.splitlines() if " reduce-scatter(" in l)
    attrs = line.split("), ", 1)[1]
    name = re.search(r"%(reduce-scatter\.\d+)", line).group(1)
    split = (f"  %rs.a = bf16[6,32]{{1,0}} reduce-scatter(bf16[24,32]{{1,0}} %p2.3), {attrs}\n"
             f"  %rs.b = bf16[2]{{0}} reduce-scatter(bf16[8]{{0}} %p3.4), {attrs}\n"
             f"  %{name} = (bf16[6,32]{{1,0}}, bf16[2]{{0}}) tuple(%rs.a, %rs.b)")
    return text.replace(line, split)


def test_sync_tensors_graph_matches_numpy_and_xla():
    text = DUMP.read_text()
    program = convert_program(text)
    assert program.num_devices == N
    args = _inputs(program, 0)
    ours = program(*args)
    p0, p1, p2, p3, p4, p5 = args
    zero = np.zeros((), np.float32)
    expected = [
        np.broadcast_to(p0.sum(0) * np.float32(0.25), p0.shape),       # all-reduce of the tensor, scaled
        np.broadcast_to(zero, (N,)),                                   # the pseudo-token, all-reduced
        np.broadcast_to(np.concatenate(list(p1)), (N, 8, 4)),           # coalesced all-gather, operand 0
        np.broadcast_to(np.concatenate([r.reshape(-1)[:2] for r in p0]), (N, 8)),  # operand 1
        p2.astype(np.float32).sum(0).reshape(N, 6, 32),                # coalesced reduce-scatter, operand 0
        p3.astype(np.float32).sum(0).reshape(N, 2),                    # operand 1
        np.stack([p4[:, d] for d in range(N)]),                        # all-to-all: row d of every device
        np.roll(p5, 1, axis=0),                                        # ring permute
    ]
    assert len(ours) == len(expected)
    for i, (got, want) in enumerate(zip(ours, expected)):
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64), err_msg=f"out{i}")
    assert_all_close(ours, run_with_xla(_split_reduce_scatter(text), args, N), rtol=0, atol=0)


@pytest.mark.parametrize("collective,message", [
    ("(f32[2,3], f32[]) all-gather(f32[1,3] %a, f32[] %b), replica_groups={{0,1}}, dimensions={0}",
     r"all-gather dimension 0 is out of range for operand 1 \(f32\[\]\)"),
    ("(f32[2,3], f32[]) reduce-scatter(f32[4,3] %c, f32[] %b), replica_groups={{0,1}}, dimensions={0}, "
     "to_apply=%AddComputation.7", r"reduce-scatter dimension 0 is out of range for operand 1 \(f32\[\]\)"),
    ("(f32[2,3], f32[2]) reduce-scatter(f32[4,3] %c, f32[3] %d), replica_groups={{0,1}}, dimensions={0}, "
     "to_apply=%AddComputation.7", r"operand 1 \(f32\[3\]\): dimension 0 of size 3 does not divide among 2"),
    ("(f32[2,3], f32[5]) all-gather(f32[1,3] %a, f32[3] %d), replica_groups={{0,1}}, dimensions={0}",
     r"result 1 has dims \[5\]; operand 1 \(f32\[3\]\) over 2 participants along dimension 0 gives \[6\]"),
])
def test_collectives_xla_shape_inference_rejects_are_refused_by_line(collective, message):
    """A scalar beside a tensor in a coalesced all-gather / reduce-scatter has no
    dimension to gather or scatter: XLA's shape inference (InferAllGatherShape,
    InferReduceScatterShape) rejects the module, so the converter says so at the line
    rather than reporting an importer bug."""
    text = f"""HloModule SyncTensorsGraph.12, replica_count=2

%AddComputation.7 (x.8: f32[], y.9: f32[]) -> f32[] {{
  %x.8 = f32[] parameter(0)
  %y.9 = f32[] parameter(1)
  ROOT %add.10 = f32[] add(f32[] %x.8, f32[] %y.9)
}}

ENTRY %SyncTensorsGraph.12 {{
  %a = f32[1,3] parameter(0)
  %b = f32[] parameter(1)
  %c = f32[4,3] parameter(2)
  %d = f32[3] parameter(3)
  ROOT %r = {collective}
}}
"""
    with pytest.raises(ConverterError, match=message) as err:
        convert_text(text, "SyncTensorsGraph.12.hlo")
    assert "SyncTensorsGraph.12.hlo:14:" in str(err.value)


def test_scalar_operands_of_all_reduce_are_reduced():
    """all-reduce has no dimension attribute: a scalar beside a tensor is reduced like
    any operand (InferAllReduceShape), as torch-xla's pseudo-token is.  XLA is the oracle."""
    text = """HloModule SyncTensorsGraph.9, replica_count=4

%AddComputation.3 (x.4: f32[], y.5: f32[]) -> f32[] {
  %x.4 = f32[] parameter(0)
  %y.5 = f32[] parameter(1)
  ROOT %add.6 = f32[] add(f32[] %x.4, f32[] %y.5)
}

ENTRY %SyncTensorsGraph.9 (p0.1: f32[8], p1.2: f32[]) -> (f32[8], f32[]) {
  %p0.1 = f32[8]{0} parameter(0)
  %p1.2 = f32[] parameter(1)
  ROOT %all-reduce.7 = (f32[8]{0}, f32[]) all-reduce(f32[8]{0} %p0.1, f32[] %p1.2), replica_groups={{0,1},{2,3}}, to_apply=%AddComputation.3
}
"""
    program = convert_program(text)
    args = _inputs(program, 1)
    assert_all_close(program(*args), run_with_xla(text, args, N), rtol=0, atol=0)


def test_scalar_operands_of_tuple_all_to_all_and_permute_match_xla():
    """The tuple all-to-all (operand i goes to participant i) and collective-permute take
    scalars as they take arrays (InferAllToAllTupleShape, InferCollectivePermuteShape)."""
    text = """HloModule SyncTensorsGraph.5, replica_count=2

ENTRY %SyncTensorsGraph.5 (p0.1: f32[], p1.2: f32[]) -> (f32[], f32[], f32[]) {
  %p0.1 = f32[] parameter(0)
  %p1.2 = f32[] parameter(1)
  %all-to-all.3 = (f32[], f32[]) all-to-all(f32[] %p0.1, f32[] %p1.2), replica_groups={{0,1}}
  %collective-permute.4 = f32[] collective-permute(f32[] %p0.1), source_target_pairs={{0,1},{1,0}}
  %get-tuple-element.5 = f32[] get-tuple-element((f32[], f32[]) %all-to-all.3), index=0
  %get-tuple-element.6 = f32[] get-tuple-element((f32[], f32[]) %all-to-all.3), index=1
  ROOT %tuple.7 = (f32[], f32[], f32[]) tuple(f32[] %get-tuple-element.5, f32[] %get-tuple-element.6, f32[] %collective-permute.4)
}
"""
    args = [np.array([1, 2], np.float32), np.array([3, 4], np.float32)]
    ours = convert_program(text)(*args)
    np.testing.assert_array_equal(ours[0], [1, 3])  # participant d keeps operand d of each sender
    np.testing.assert_array_equal(ours[1], [2, 4])
    np.testing.assert_array_equal(ours[2], [2, 1])
    assert_all_close(ours, run_with_xla(text, args, 2), rtol=0, atol=0)
