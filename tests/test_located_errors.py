"""Located messages (issue 30): the one formatter of `file:line:col: error: ...`
(converter.common.errors) and the reader of the locations the importer writes
(converter.mlir.locations), which passes use instead of regexes over printed locations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from jaxlib.mlir import ir

from converter.common.errors import SourceLocation, diagnostic
from converter.hlo.lexer import HloParseError
from converter.hlo.parser import parse_hlo
from converter.importer.core import HloImportError, import_hlo
from converter.mlir.context import make_context
from converter.mlir.locations import OpLocation, first_file_location, location_name, op_location
from passes.host_callbacks import callback_source
from passes.lib import rewrite
from tests.helpers import stack_frame_tables

DUMPS = Path(__file__).parent / "dumps"

# ----------------------------------------------------------------------------- formatter


@pytest.mark.parametrize("where, text", [
    (SourceLocation("d.hlo", 3, 7), "d.hlo:3:7"),
    (SourceLocation("kernel.py", 12), "kernel.py:12"),
    (SourceLocation("d.hlo"), "d.hlo"),
])
def test_source_location_text(where, text):
    assert str(where) == text


def test_diagnostic_forms():
    assert diagnostic(SourceLocation("d.hlo", 3, 7), "%x (add): bad") == "d.hlo:3:7: error: %x (add): bad"
    assert diagnostic(SourceLocation("d.hlo", 3, 7), "kept", "warning") == "d.hlo:3:7: warning: kept"
    assert diagnostic(SourceLocation("d.hlo"), "no entry", "note") == "d.hlo: note: no entry"
    assert diagnostic(None, "no place") == "error: no place"


# What editors and CI log parsers read from a compiler's message (GCC/Clang's form).
_COMPILER_LINE = re.compile(r"^(.+?):(\d+):(\d+): (error|warning|note): (.*)$", re.S)


@settings(max_examples=60, deadline=None)
@given(file=st.text(st.characters(blacklist_characters=":\n", blacklist_categories=("Cs",)), min_size=1),
       line=st.integers(1, 10**7), col=st.integers(1, 10**4), severity=st.sampled_from(["error", "warning", "note"]),
       message=st.text(min_size=0, max_size=40))
def test_diagnostic_reads_back_as_a_compiler_message(file, line, col, severity, message):
    m = _COMPILER_LINE.match(diagnostic(SourceLocation(file, line, col), message, severity))
    assert m is not None and m.groups() == (file, str(line), str(col), severity, message)


def test_parser_and_importer_errors_begin_alike():
    """A parse error and an import error about the same line both begin `path:line:col: error: `."""
    with pytest.raises(HloParseError) as parsed:
        parse_hlo("HloModule m\n\nENTRY %e {\n  ROOT %x = f32[] bogus-shape\n}\n", "d.hlo")
    assert str(parsed.value).startswith(f"d.hlo:4:{parsed.value.col}: error: ")
    hlo = parse_hlo("HloModule m\n\nENTRY %e {\n  ROOT %x = f32[] constant(1)\n}\n", "d.hlo")
    instr = hlo.entry.root
    assert str(HloImportError("no rule", instr, "d.hlo")) == "d.hlo:4:3: error: %x (constant): no rule"
    assert str(HloImportError("no entry", None, "d.hlo")) == "d.hlo: error: no entry"
    assert str(HloImportError("no entry")) == "error: no entry"


# ------------------------------------------------------- the locations the importer writes

# Every source shape the importer writes: none, op_name and file:line, op_name alone,
# file:line alone, and a stack frame (file:line:col of its innermost frame) with op_name.
_HLO = """HloModule shapes

{frames}ENTRY %main (p0: f32[4], p1: f32[4]) -> f32[4] {{
  %p0 = f32[4]{{0}} parameter(0)
  %p1 = f32[4]{{0}} parameter(1), metadata={{op_name="y"}}
  %a = f32[4]{{0}} add(f32[4]{{0}} %p0, f32[4]{{0}} %p1), metadata={{op_name="jit(f)/add" source_file="src/f.py" source_line=12}}
  %b = f32[4]{{0}} multiply(%a, %a), metadata={{op_name="jit(f)/mul"}}
  %c = f32[4]{{0}} subtract(%b, %a), metadata={{source_file="g.py" source_line=3}}
  %e = f32[4]{{0}} exponential(%c), metadata={{op_name="jit(f)/exp" stack_frame_id=1}}
  ROOT %d = f32[4]{{0}} negate(%e)
}}
"""
_TEXT = _HLO.format(frames=stack_frame_tables(["src/h.py"], ["h"], [(1, 1, 40, 40, 9, 20)], [(1, 1)]))

# What each instruction's metadata says, as the test wrote it above.
_SOURCES = {"p0": ("", None), "p1": ("y", None), "a": ("jit(f)/add", SourceLocation("src/f.py", 12, 0)),
            "b": ("jit(f)/mul", None), "c": ("", SourceLocation("g.py", 3, 0)),
            "e": ("jit(f)/exp", SourceLocation("src/h.py", 40, 9)), "d": ("", None)}


def _dump_place(text: str, path: str, name: str) -> SourceLocation:
    """Where `%name = ...` is written in the dump text: its line, and the column where the
    line's text (`ROOT` included) begins."""
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*(ROOT )?%{re.escape(name)} = ", line):
            return SourceLocation(path, number, len(line) - len(line.lstrip()) + 1)
    raise AssertionError(f"%{name} is not in the dump")


def _ops(module: ir.Module):
    def visit(op):
        yield op
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    yield from visit(inner.operation)
    yield from visit(module.operation)


@pytest.fixture(scope="module")
def imported():
    hlo = parse_hlo(_TEXT, "dumps/shapes.hlo")
    return hlo, import_hlo(hlo)


def test_each_op_reads_back_its_instruction_and_source(imported):
    hlo, module = imported
    seen = set()
    for op in _ops(module):
        if not op.name.startswith("stablehlo."):
            continue
        where = op_location(op.location)
        op_name, source = _SOURCES[where.instruction]
        assert where == OpLocation(where.instruction, _dump_place(_TEXT, "dumps/shapes.hlo", where.instruction),
                                   op_name, source), str(op.location)
        seen.add(where.instruction)
    assert seen == {"a", "b", "c", "e", "d"}


def test_entry_parameters_are_named_by_their_instructions(imported):
    _, module = imported
    main = next(op for op in _ops(module) if op.name == "func.func")
    args = main.regions[0].blocks[0].arguments
    assert [location_name(a.location) for a in args] == ["p0", "p1"]
    assert [op_location(a.location).at for a in args] == [_dump_place(_TEXT, "dumps/shapes.hlo", n) for n in ("p0", "p1")]


def test_module_and_function_are_at_the_entry_computation(imported):
    hlo, module = imported
    entry_line = next(i for i, l in enumerate(_TEXT.splitlines(), 1) if l.startswith("ENTRY"))
    for op in (module.operation, next(op for op in _ops(module) if op.name == "func.func")):
        assert op_location(op.location) == OpLocation()  # no instruction
        assert first_file_location(op.location) == SourceLocation("dumps/shapes.hlo", entry_line, hlo.entry.col)
        assert rewrite.location_text(op) == str(op.location)  # the printed location, as before


def test_messages_about_an_op(imported):
    _, module = imported
    add = next(op for op in _ops(module) if op.name == "stablehlo.add")
    line = _dump_place(_TEXT, "dumps/shapes.hlo", "a").line
    assert rewrite.location_text(add) == f"dumps/shapes.hlo:{line}:3: %a"
    assert str(rewrite.op_error(add, "bad")) == f"dumps/shapes.hlo:{line}:3: error: %a (stablehlo.add): bad"
    assert callback_source(add) == ("jit(f)/add", "src/f.py:12")
    assert rewrite.kernel_source_location(add) == f"dumps/shapes.hlo:{line}"


def test_locations_passes_wrap_around_the_importers():
    """MLIR keeps an instruction's location inside a call site (the inliner) and fuses the
    locations of ops it merges (a flat list): the first instruction and its own source."""
    with make_context():
        first = ir.Location.fused([ir.Location.name("a", childLoc=ir.Location.file("d.hlo", 6, 3)),
                                   ir.Location.name("jit(f)/add", childLoc=ir.Location.file("f.py", 12, 0))])
        bare = ir.Location.name("b", childLoc=ir.Location.file("d.hlo", 7, 3))
        a = OpLocation("a", SourceLocation("d.hlo", 6, 3), "jit(f)/add", SourceLocation("f.py", 12, 0))
        assert op_location(ir.Location.callsite(first, [ir.Location.file("d.hlo", 9, 3)])) == a
        assert op_location(ir.Location.fused([first, bare])) == a
        assert op_location(ir.Location.fused([bare, first])) == OpLocation("b", SourceLocation("d.hlo", 7, 3))
        assert op_location(ir.Location.unknown()) == OpLocation()
        kernel_op = ir.Location.name("tt.dot", childLoc=ir.Location.callsite(
            ir.Location.file("kernel.py", 30, 11), [ir.Location.file("main.py", 5, 1)]))
        assert first_file_location(kernel_op) == SourceLocation("kernel.py", 30, 11)
        assert location_name(ir.Location.file("d.hlo", 1, 1)) is None


# ------------------------------------------------------ the same text as the printed-location regexes
# How passes read locations before issue 30: regexes over `str(op.location)`.  The reader
# must give the same text wherever they found something (it finds more: an op_name without
# a source, a source without an op_name, names with escaped quotes).
def _regex_location_text(loc: str) -> str:
    m = re.search(r'"([^"]+)"\("([^"]+)":(\d+):(\d+)\)', loc)
    return f"{m.group(2)}:{m.group(3)}:{m.group(4)}: %{m.group(1)}" if m else loc


def _regex_kernel_source(loc: str) -> str:
    m = re.search(r'"([^"]+)":(\d+)', loc)
    return f"{m.group(1)}:{m.group(2)}" if m else ""


def _regex_callback_source(loc: str) -> tuple[str, str]:
    named = re.findall(r'"((?:[^"\\]|\\.)*)"\((?:"((?:[^"\\]|\\.)*)":(\d+):(\d+))?', loc)
    if len(named) < 2:
        return "", ""
    op_name, file, line, _ = named[1]
    return op_name, f"{file}:{line}" if file else ""


def _assert_as_before(op: ir.Operation) -> None:
    printed = str(op.location)
    assert rewrite.location_text(op) == _regex_location_text(printed), printed
    assert rewrite.kernel_source_location(op) == _regex_kernel_source(printed), printed
    before = _regex_callback_source(printed)
    if before[0] and before[1]:
        assert callback_source(op) == before, printed


@pytest.mark.parametrize("dump", ["tpu_jax012/conv_grad.hlo", "callbacks/pure_io_callback_jax010.hlo",
                                  "callbacks/debug_print_loop_jax012.hlo"])
def test_committed_dumps_read_as_before(dump):
    hlo = parse_hlo((DUMPS / dump).read_text(), f"tests/dumps/{dump}")
    sourced = 0
    for op in _ops(import_hlo(hlo)):
        _assert_as_before(op)
        sourced += all(callback_source(op))
    assert sourced > 2  # ops whose metadata names an op_name and a source line


_NAMES = st.text("abcxyz_./()0123456789", min_size=1, max_size=8)


@st.composite
def _locations(draw, depth: int = 0):
    kinds = ["file", "name_file", "name", "unknown"] + (["fused", "callsite", "name_of"] if depth < 3 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "file":
        return ir.Location.file(draw(_NAMES), draw(st.integers(0, 500)), draw(st.integers(0, 80)))
    if kind == "name_file":
        return ir.Location.name(draw(_NAMES), childLoc=ir.Location.file(draw(_NAMES), draw(st.integers(0, 500)),
                                                                         draw(st.integers(0, 80))))
    if kind == "name":
        return ir.Location.name(draw(_NAMES))
    if kind == "unknown":
        return ir.Location.unknown()
    if kind == "fused":
        return ir.Location.fused(draw(st.lists(_locations(depth + 1), min_size=1, max_size=3)))
    if kind == "callsite":
        return ir.Location.callsite(draw(_locations(depth + 1)), [draw(_locations(depth + 1))])
    return ir.Location.name(draw(_NAMES), childLoc=draw(_locations(depth + 1)))


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_any_location_reads_as_before(data):
    with make_context():
        loc = data.draw(_locations())
        printed = str(loc)
        where = op_location(loc)
        text = f"{where.at}: %{where.instruction}" if where.at is not None else printed
        assert text == _regex_location_text(printed), printed
        found = first_file_location(loc)
        assert (f"{found.file}:{found.line}" if found else "") == _regex_kernel_source(printed), printed


def test_located_messages_are_formatted_in_one_place():
    """`file:line:col: error:` is written by `diagnostic` only: a message assembled by hand
    elsewhere drifts from the form editors jump on (a missing column, `Error:`, no space).
    A bad command line is the exception: it reads as argparse's own `hlo-roundtrip CMD: error:`."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parent.parent
    hand_built = re.compile(r"""f["'][^"']*\}: (error|warning|note): """)
    found = [f"{path.relative_to(root)}:{n}" for package in ("converter", "passes")
             for path in sorted((root / package).rglob("*.py")) if path.name != "errors.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if hand_built.search(line) and "hlo-roundtrip {" not in line]
    assert found == [], f"format these with converter.common.errors.diagnostic: {found}"
