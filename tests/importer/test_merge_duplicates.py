"""Merging duplicate pure instructions at import (ImportOptions.merge_duplicates).

For a pipeline that runs MLIR's cse before anything else reads the module (the default),
`convert` imports an instruction of a PURE opcode that equals an earlier one of its block
by handing on that one's values instead of building equal ops.  The contract: the module
the pipeline writes is byte for byte the one it writes from the faithful import, in
which MLIR's CSE (the oracle: C++ that knows nothing of the importer) erases those ops.
Generated over the class: every PURE opcode, with instructions taken from the test dumps
(their own shapes, layouts and attributes), merged across fusions; random programs of
pure ops with duplicates, dead copies, fusions and pointwise convolutions (hypothesis;
with matmul-convolutions' may_drop_use removed they fail for 4 of 5 seeds); and, written
out, the cases where CSE does not keep the first of equal ops (the first is unused, or
only a use that a pass before cse drops holds it), blocks of a conditional and a loop.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxlib.mlir import ir

from converter.hlo.parser import parse_hlo
from converter.hlo.printer import instruction_to_text, shape_to_text
from converter.importer.core import ImportOptions, ModuleImporter, import_hlo
from converter.importer.registry import PURE
from converter.mlir.serialize import module_to_bytes
from converter.runtime.convert import convert_text
from passes import PassOptions, run_pipeline
from passes.lib.manager import merge_before_cse
from tests.helpers import run_ours

ROOT = pathlib.Path(__file__).resolve().parents[2]
ALLOW = PassOptions(allow_custom_calls={"__cublas$lt$matmul", "te_fused_attn_forward_ffi", "te_fused_attn_backward_ffi"})


def faithful_then_pipeline(text: str, pipeline: str = "default") -> str:
    """The oracle: every instruction imported, then the pipeline (its cse erases duplicates)."""
    module = import_hlo(parse_hlo(text, "t.hlo"), ImportOptions())
    run_pipeline(module, pipeline, ALLOW)
    return module_to_bytes(module, "mlir")


def merged(text: str, pipeline: str = "default") -> str:
    """What `convert` writes (it merges for this pipeline)."""
    return module_to_bytes(convert_text(text, "t.hlo", pipeline=pipeline, pass_options=ALLOW), "mlir")


def op_count(text: str, merge: bool) -> int:
    hlo = parse_hlo(text, "t.hlo")
    importer = ModuleImporter(hlo, ImportOptions(merge_duplicates=merge_before_cse("default") if merge else None))
    module = importer.run()
    count = [0]

    def visit(op):
        count[0] += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count[0]


# ------------------------------------------------------------------ every PURE opcode
def _harvest() -> dict[str, list]:
    """Per PURE opcode, up to three instructions of the test dumps (distinct texts) whose
    operands and result are arrays."""
    found: dict[str, list] = {op: [] for op in PURE}
    seen: set[str] = set()
    for path in sorted((ROOT / "tests" / "dumps").rglob("*.hlo")) + sorted((ROOT / "samples").glob("*.hlo")):
        try:
            hlo = parse_hlo(path.read_text(), str(path))
        except Exception:  # noqa: BLE001 (dumps that test parse errors)
            continue
        for comp in hlo.computations:
            for instr in comp.instructions:
                if instr.opcode not in found or len(found[instr.opcode]) >= 3 or not instr.shape.is_array:
                    continue
                shapes = [comp.operand_shape(o) for o in instr.operands]
                if not all(s.is_array for s in shapes):
                    continue
                plain = dataclasses.replace(instr, name="x", operands=[f"p{i}" for i in range(len(shapes))],
                                            is_root=True, metadata_text=None, _metadata=None, operand_shapes=None)
                text = instruction_to_text(plain)
                if text in seen or (instr.opcode == "constant" and instr.literal_elided):
                    continue
                seen.add(text)
                found[instr.opcode].append((path.relative_to(ROOT).as_posix(), text, shapes))
    return found


_HARVEST = _harvest()
CASES = [(op, src, text, shapes) for op in sorted(_HARVEST) for src, text, shapes in _HARVEST[op]]


def _two_fusions(text: str, shapes: list, second: bool = True) -> str:
    """A module computing one instruction in two fusions of the same operands (or, with
    `second=False`, in the first only); a reshape, which no pass before cse drops, uses
    the first before the second is imported."""
    result = re.match(r"\s*(?:ROOT\s+)?%x = (\S+) ", text).group(1)
    signature = f"({', '.join(f'p{i}: {shape_to_text(s)}' for i, s in enumerate(shapes))}) -> {result}"
    params = "".join(f"  %p{i} = {shape_to_text(s)} parameter({i})\n" for i, s in enumerate(shapes))
    entry_params = "".join(f"  %a{i} = {shape_to_text(s)} parameter({i})\n" for i, s in enumerate(shapes))
    operands = ", ".join(f"%a{i}" for i in range(len(shapes)))
    fusions = "".join(f"%fused_{k} {signature} {{\n{params}{text}\n}}\n\n" for k in ("a", "b"))
    last = (f"  %f2 = {result} fusion({operands}), kind=kLoop, calls=%fused_b\n"
            f"  ROOT %out = ({result}, {result}) tuple(%keep, %f2)") if second else \
        f"  ROOT %out = ({result}) tuple(%keep)"
    return (f"HloModule merge_{len(shapes)}\n\n{fusions}ENTRY %main {{\n{entry_params}"
            f"  %f1 = {result} fusion({operands}), kind=kLoop, calls=%fused_a\n"
            f"  %keep = {result} reshape(%f1)\n{last}\n}}\n")


@pytest.mark.parametrize("opcode,source,text,shapes", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_every_pure_opcode_merges_as_cse_does(opcode, source, text, shapes):
    module = _two_fusions(text, shapes)
    assert merged(module) == faithful_then_pipeline(module), f"{opcode} from {source}"
    # The merge happened: the second fusion built none of the ops the first built.
    second_builds = op_count(module, merge=False) - op_count(_two_fusions(text, shapes, second=False), merge=False)
    assert op_count(module, merge=True) == op_count(module, merge=False) - second_builds


def test_the_class_is_covered():
    """Every PURE opcode that the test dumps hold has cases (a new PURE opcode with none
    in the dumps shows here)."""
    missing = sorted(op for op in PURE if not _HARVEST[op])
    assert set(missing) <= {"reduce-precision", "round-nearest-afz"}, missing


# ------------------------------------------------------------------ what CSE does not keep
DEAD_FIRST = """HloModule dead_first

%fused (p0: f32[4,2]) -> (f32[8], f32[8]) {
  %p0 = f32[4,2]{1,0} parameter(0)
  %r = f32[8]{0} reshape(%p0)
  %n = f32[8]{0} negate(%r)
  ROOT %t = (f32[8]{0}, f32[8]{0}) tuple(%n, %r)
}

ENTRY %main (a: f32[4,2]) -> f32[8] {
  %a = f32[4,2]{1,0} parameter(0)
  %unused = f32[8]{0} reshape(%a)
  %f = (f32[8]{0}, f32[8]{0}) fusion(%a), kind=kLoop, calls=%fused
  %g = f32[8]{0} get-tuple-element(%f), index=1
  ROOT %s = f32[8]{0} sine(%g)
}
"""


def test_an_unused_first_instruction_is_not_the_one_kept():
    """CSE erases an op nothing uses instead of keeping it for its equals: the reshape in
    the fusion stays, where it stands, with its own location."""
    assert merged(DEAD_FIRST) == faithful_then_pipeline(DEAD_FIRST)
    assert 'loc("r"' in merged(DEAD_FIRST)


SUNK_FIRST = """HloModule sunk_first

ENTRY %main (a: f32[4,2,16], b: f32[4,2,16], w: f32[16,4,1]) -> (f32[8,4,1], f32[8,16,1]) {
  %a = f32[4,2,16]{2,1,0} parameter(0)
  %b = f32[4,2,16]{2,1,0} parameter(1)
  %w = f32[16,4,1]{2,1,0} parameter(2)
  %r1 = f32[8,16,1]{2,1,0} reshape(%a)
  %rb = f32[8,16,1]{2,1,0} reshape(%b)
  %m = f32[8,16,1]{2,1,0} multiply(%r1, %rb)
  %conv = f32[8,4,1]{2,1,0} convolution(%m, %w), window={size=1}, dim_labels=bf0_io0->bf0
  %r2 = f32[8,16,1]{2,1,0} reshape(%a)
  %s = f32[8,16,1]{2,1,0} floor(%r2)
  ROOT %t = (f32[8,4,1]{2,1,0}, f32[8,16,1]{2,1,0}) tuple(%conv, %s)
}
"""


def test_a_use_that_a_pass_before_cse_drops_does_not_keep_the_first():
    """matmul-convolutions sinks the reshapes past the elementwise op that used them, which
    leaves the first reshape unused when cse runs: the second is the one kept.  Merging
    into the first (a merge that ignored what the pass drops) writes another module."""
    assert merged(SUNK_FIRST) == faithful_then_pipeline(SUNK_FIRST)
    module = import_hlo(parse_hlo(SUNK_FIRST, "t.hlo"), ImportOptions(merge_duplicates=()))
    run_pipeline(module, "default", ALLOW)
    assert module_to_bytes(module, "mlir") != faithful_then_pipeline(SUNK_FIRST)


BRANCHES = """HloModule branches

%then (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %c = f32[] constant(2)
  %b = f32[4]{0} broadcast(%c), dimensions={}
  ROOT %m = f32[4]{0} multiply(%x, %b)
}

%else (y: f32[4]) -> f32[4] {
  %y = f32[4]{0} parameter(0)
  %c = f32[] constant(2)
  %b = f32[4]{0} broadcast(%c), dimensions={}
  ROOT %m = f32[4]{0} add(%y, %b)
}

ENTRY %main (p: pred[], a: f32[4]) -> (f32[4], f32[4]) {
  %p = pred[] parameter(0)
  %a = f32[4]{0} parameter(1)
  %c = f32[] constant(2)
  %b = f32[4]{0} broadcast(%c), dimensions={}
  %k = f32[4]{0} reshape(%b)
  %cond = f32[4]{0} conditional(%p, %a, %a), true_computation=%then, false_computation=%else
  %c2 = f32[] constant(2)
  %b2 = f32[4]{0} broadcast(%c2), dimensions={}
  %s = f32[4]{0} subtract(%cond, %b2)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%s, %k)
}
"""


def test_no_value_crosses_a_block():
    """Equal instructions in a branch and outside it are merged within their own block
    only (CSE, which may also reuse the enclosing block's, does the rest); the module
    verifies and is the oracle's."""
    assert merged(BRANCHES) == faithful_then_pipeline(BRANCHES)
    assert op_count(BRANCHES, merge=True) == op_count(BRANCHES, merge=False) - 2  # %c2 and %b2


ATTRIBUTES = """HloModule attributes

ENTRY %main (a: f32[3]) -> (f32[3,3], f32[3,3], f32[3,3]) {
  %a = f32[3]{0} parameter(0)
  %rows = f32[3,3]{1,0} broadcast(%a), dimensions={0}
  %k = f32[3,3]{1,0} reshape(%rows)
  %cols = f32[3,3]{1,0} broadcast(%a), dimensions={1}
  %rows2 = f32[3,3]{1,0} broadcast(%a), dimensions={0}
  ROOT %t = (f32[3,3]{1,0}, f32[3,3]{1,0}, f32[3,3]{1,0}) tuple(%k, %cols, %rows2)
}
"""


def test_attributes_tell_equal_operands_apart():
    """Broadcasts of one operand to one shape along other dimensions stay apart (NumPy
    the oracle); the one equal to the first is merged."""
    a = np.array([1.0, 2.0, 3.0], np.float32)
    k, cols, rows2 = run_ours(ATTRIBUTES, [a], pass_options=ALLOW)
    np.testing.assert_array_equal(k, np.broadcast_to(a[:, None], (3, 3)))
    np.testing.assert_array_equal(cols, np.broadcast_to(a[None, :], (3, 3)))
    np.testing.assert_array_equal(rows2, np.broadcast_to(a[:, None], (3, 3)))
    assert merged(ATTRIBUTES) == faithful_then_pipeline(ATTRIBUTES)
    assert op_count(ATTRIBUTES, merge=True) == op_count(ATTRIBUTES, merge=False) - 1


LOOP = """HloModule loop

%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[4]{0} get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %h = f32[] constant(0.5)
  %hb = f32[4]{0} broadcast(%h), dimensions={}
  %y = f32[4]{0} multiply(%x, %hb)
  %h2 = f32[] constant(0.5)
  %hb2 = f32[4]{0} broadcast(%h2), dimensions={}
  %z = f32[4]{0} add(%y, %hb2)
  ROOT %t = (s32[], f32[4]{0}) tuple(%i1, %z)
}

%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (a: f32[4]) -> (f32[4], f32[4]) {
  %a = f32[4]{0} parameter(0)
  %zero = s32[] constant(0)
  %h = f32[] constant(0.5)
  %hb = f32[4]{0} broadcast(%h), dimensions={}
  %a2 = f32[4]{0} multiply(%a, %hb)
  %init = (s32[], f32[4]{0}) tuple(%zero, %a2)
  %w = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body
  %r = f32[4]{0} get-tuple-element(%w), index=1
  %h3 = f32[] constant(0.5)
  %hb3 = f32[4]{0} broadcast(%h3), dimensions={}
  %out = f32[4]{0} multiply(%r, %hb3)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%out, %a2)
}
"""


def test_loops_merge_within_their_bodies():
    """A while body merges its own duplicates, not the entry's (its block is another);
    the entry merges the constant and broadcast after the loop into those before it.
    NumPy is the oracle of the values: x/2 + 1/2 three times, then halved."""
    assert merged(LOOP) == faithful_then_pipeline(LOOP)
    assert op_count(LOOP, merge=True) == op_count(LOOP, merge=False) - 4  # %h2, %hb2, %h3, %hb3
    a = np.array([1.0, -2.0, 4.0, 0.25], np.float32)
    x = a * np.float32(0.5)
    for _ in range(3):
        x = x * np.float32(0.5) + np.float32(0.5)
    out, a2 = run_ours(LOOP, [a], pass_options=ALLOW)
    np.testing.assert_array_equal(out, x * np.float32(0.5))  # exact: halving and adding 1/2 round alike
    np.testing.assert_array_equal(a2, a * np.float32(0.5))


def test_which_pipelines_merge():
    assert merge_before_cse("default") is not None
    assert merge_before_cse("strip-annotations,cublas-gemm,cse") is not None
    assert merge_before_cse("none") is None
    assert merge_before_cse("cublas-gemm") is None  # no cse: the faithful import stays
    assert merge_before_cse("canonicalize,cse") is None  # canonicalize would see the difference
    assert merge_before_cse("no-such-pass,cse") is None  # running it reports the name


def test_a_pipeline_without_cse_imports_every_instruction():
    assert merged(BRANCHES, pipeline="none") == faithful_then_pipeline(BRANCHES, pipeline="none")
    text = merged(BRANCHES, pipeline="none")
    assert text.count("stablehlo.broadcast_in_dim") == 4


# ------------------------------------------------------------------ random programs
_UNARY = ["negate", "abs", "exponential", "sine", "sqrt"]
_BINARY = ["add", "multiply", "maximum", "subtract"]


@st.composite
def programs(draw):
    """An entry of f32[2,3] values built from two parameters by unary, binary, broadcast
    of constants, reshape round trips, fusions of the same and pointwise convolutions (a
    matmul with a third parameter, which matmul-convolutions rewrites and then sinks the
    reshapes under elementwise ops past them), drawn from small pools so that equal
    instructions recur; some results are left unused."""
    n_fusions = draw(st.integers(0, 3))
    fused = []
    for k in range(n_fusions):
        body = ["  %q0 = f32[2,3]{1,0} parameter(0)", "  %q1 = f32[2,3]{1,0} parameter(1)"]
        names = ["q0", "q1"]
        for i in range(draw(st.integers(1, 4))):
            names.append(_draw_instruction(draw, body, names, f"i{i}"))
        body[-1] = "  ROOT " + body[-1].lstrip()
        fused.append(f"%fused{k} (q0: f32[2,3], q1: f32[2,3]) -> f32[2,3] {{\n" + "\n".join(body) + "\n}")
    entry = ["  %a = f32[2,3]{1,0} parameter(0)", "  %b = f32[2,3]{1,0} parameter(1)",
             "  %w = f32[3,3]{1,0} parameter(2)"]
    names = ["a", "b"]
    for i in range(draw(st.integers(2, 10))):
        what = draw(st.sampled_from(["fusion", "convolution", "other", "other"]))
        if what == "fusion" and fused:
            k = draw(st.integers(0, n_fusions - 1))
            x, y = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            entry.append(f"  %e{i} = f32[2,3]{{1,0}} fusion(%{x}, %{y}), kind=kLoop, calls=%fused{k}")
            names.append(f"e{i}")
        elif what == "convolution":
            entry.append(f"  %e{i} = f32[2,3]{{1,0}} convolution(%{draw(st.sampled_from(names))}, %w), dim_labels=bf_io->bf")
            names.append(f"e{i}")
        else:
            names.append(_draw_instruction(draw, entry, names, f"e{i}"))
    outs = draw(st.lists(st.sampled_from(names[2:]), min_size=1, max_size=3))
    entry.append(f"  ROOT %out = ({', '.join(['f32[2,3]'] * len(outs))}) tuple({', '.join('%' + o for o in outs)})")
    return "HloModule random_merge\n\n" + "\n\n".join(fused) + "\n\nENTRY %main {\n" + "\n".join(entry) + "\n}\n"


def _draw_instruction(draw, lines: list[str], names: list[str], name: str) -> str:
    kind = draw(st.sampled_from(["unary", "binary", "constant", "reshape", "select", "shift", "sink"]))
    x = draw(st.sampled_from(names))
    if kind == "sink":  # an elementwise op of reshapes, which matmul-convolutions sinks past them
        y = draw(st.sampled_from(names))
        lines.append(f"  %{name}_r = f32[3,2]{{1,0}} reshape(%{x})")
        lines.append(f"  %{name}_s = f32[3,2]{{1,0}} reshape(%{y})")
        lines.append(f"  %{name}_m = f32[3,2]{{1,0}} {draw(st.sampled_from(_BINARY))}(%{name}_r, %{name}_s)")
        lines.append(f"  %{name} = f32[2,3]{{1,0}} reshape(%{name}_m)")
        return name
    if kind == "select":  # equal operands, the direction tells them apart
        y = draw(st.sampled_from(names))
        lines.append(f"  %{name}_p = pred[2,3]{{1,0}} compare(%{x}, %{y}), direction={draw(st.sampled_from(['LT', 'GT', 'EQ']))}")
        lines.append(f"  %{name} = f32[2,3]{{1,0}} select(%{name}_p, %{x}, %{y})")
        return name
    if kind == "shift":  # a slice and a pad: the same operand and shapes, other windows
        start = draw(st.integers(0, 1))
        lines.append(f"  %{name}_s = f32[2,2]{{1,0}} slice(%{x}), slice={{[0:2], [{start}:{start + 2}]}}")
        lines.append(f"  %{name}_z = f32[] constant(0)")
        lines.append(f"  %{name} = f32[2,3]{{1,0}} pad(%{name}_s, %{name}_z), padding=0_0x{draw(st.sampled_from(['0_1', '1_0']))}")
        return name
    if kind == "unary":
        lines.append(f"  %{name} = f32[2,3]{{1,0}} {draw(st.sampled_from(_UNARY))}(%{x})")
    elif kind == "binary":
        y = draw(st.sampled_from(names))
        lines.append(f"  %{name} = f32[2,3]{{1,0}} {draw(st.sampled_from(_BINARY))}(%{x}, %{y})")
    elif kind == "constant":
        value = draw(st.sampled_from(["0", "1", "-0", "2.5"]))
        lines.append(f"  %{name}_c = f32[] constant({value})")
        lines.append(f"  %{name} = f32[2,3]{{1,0}} broadcast(%{name}_c), dimensions={{}}")
    else:
        lines.append(f"  %{name}_r = f32[3,2]{{1,0}} reshape(%{x})")
        lines.append(f"  %{name} = f32[2,3]{{1,0}} reshape(%{name}_r)")
    return name


@settings(max_examples=400, deadline=None)
@given(programs())
def test_random_programs_convert_as_cse_makes_them(text):
    assert merged(text) == faithful_then_pipeline(text), text
