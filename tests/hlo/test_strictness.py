"""Strict where XLA is strict: attributes an opcode does not take, header values and
shapes that cannot mean anything, each a located error (exit 1, no traceback), checked
against XLA's own parser (jaxlib) where it has an opinion."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.tools.cli import main
from converter.common.errors import ConverterWarning
from converter.hlo import attrs
from converter.hlo.parser import HloParseError, parse_hlo
from converter.mlir.serialize import is_hlo_text
from converter.runtime.xla_parser import XlaParseError
from tests.hlo.xla_view import our_view, xla_module, xla_view

ALL_REDUCE = """HloModule m, num_partitions=2

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %a = f32[] add(%x, %y)
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  ROOT %r = f32[4] all-reduce(%p), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add
}
"""

# (misspelling, what it misspells, where): each changes what the module computes if dropped.
TYPOS = [
    ("num_p4rtitions", "num_partitions", "header"),
    ("replica_gruops", "replica_groups", "all-reduce"),
    ("chanel_id", "channel_id", "all-reduce"),
    ("use_global_device_idz", "use_global_device_ids", "all-reduce"),
    ("to_aply", "to_apply", "all-reduce"),
]


def _spell(wrong: str, right: str) -> str:
    return ALL_REDUCE.replace(right + "=", wrong + "=", 1)


@pytest.mark.parametrize("wrong,right,where", TYPOS)
def test_misspelled_attribute_is_a_located_error_with_a_suggestion(wrong, right, where):
    text = _spell(wrong, right)
    with pytest.raises(Exception, match=f'unexpected attribute "{wrong}"'):
        xla_module(text)  # XLA's parser rejects it too
    with pytest.raises(HloParseError) as e:
        parse_hlo(text, "m.hlo")
    line = next(i for i, s in enumerate(text.split("\n"), 1) if wrong in s)
    assert (e.value.line, e.value.col) == (line, text.split("\n")[line - 1].index(wrong) + 1)
    what = "the module header" if where == "header" else where
    assert e.value.message == f"unknown attribute '{wrong}' for {what}; did you mean '{right}'?"


def test_unknown_attribute_without_a_near_name_points_at_the_option():
    text = ALL_REDUCE.replace("num_partitions=2", "num_partitions=2, frobnicate_level=9")
    with pytest.raises(HloParseError, match="unknown attribute 'frobnicate_level' for the module header; "
                                            "if a newer XLA added it, --allow-unknown-attributes"):
        parse_hlo(text)


def test_attribute_of_another_opcode_is_an_error_as_in_xla():
    text = ALL_REDUCE.replace("ROOT %a = f32[] add(%x, %y)", "ROOT %a = f32[] add(%x, %y), dimensions={0}")
    with pytest.raises(Exception, match='unexpected attribute "dimensions"'):
        xla_module(text)
    with pytest.raises(HloParseError, match="attribute 'dimensions' does not apply to add"):
        parse_hlo(text)


def test_allow_unknown_attributes_keeps_them_raw_and_warns_naming_each():
    text = ALL_REDUCE.replace("num_partitions=2", "num_partitions=2, frobnicate_level=9").replace(
        "to_apply=%add", "to_apply=%add, schedule_hint={a, b}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = parse_hlo(text, "m.hlo", allow_unknown_attributes=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConverterWarning)]
    assert messages == module.warnings
    assert [re.search(r"'(\w+)'", m).group(1) for m in messages] == ["frobnicate_level", "schedule_hint"]
    assert messages[1].startswith("m.hlo:11:117: warning: unknown attribute 'schedule_hint' for all-reduce")
    assert module.entry.root.attrs["schedule_hint"] == attrs.Raw("{a, b}")
    assert module.attrs["frobnicate_level"] == attrs.Raw("9")


def test_cli_refuses_a_typo_and_accepts_it_only_when_told(tmp_path, capsys):
    path = tmp_path / "typo.hlo"
    path.write_text(_spell("replica_gruops", "replica_groups"))
    assert main(["convert", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:11:50: error: unknown attribute 'replica_gruops' for all-reduce" in err
    assert "Traceback" not in err
    # Kept raw, the groups are gone: what is left is an all-reduce XLA refuses too.
    assert main(["convert", "--allow-unknown-attributes", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:11:50: warning: unknown attribute 'replica_gruops'" in err
    assert f"{path}:11:74: error: use_global_device_ids=true needs replica_groups" in err
    path.write_text(ALL_REDUCE.replace("num_partitions=2", "num_partitions=2, frobnicate_level=9"))
    assert main(["convert", "--allow-unknown-attributes", "-o", str(tmp_path / "out.mlir"), str(path)]) == 0
    assert capsys.readouterr().err.startswith(f"{path}:1:32: warning: unknown attribute 'frobnicate_level'")


# Metadata: what XLA's metadata reader lists as its attributes, each once, with its kind of
# value (a misspelt or repeated item would otherwise leave the source location it names out
# or change it).  (text, the error, the column it points at).
_METADATA_CASES = [
    ('op_nmae="jit(f)/add"', "unknown attribute 'op_nmae' in metadata; did you mean 'op_name'?", 42),
    ('op_name="a" source_lin=3', "unknown attribute 'source_lin' in metadata; did you mean 'source_line'?", 54),
    ('op_name="a" op_name="b"', "metadata attribute 'op_name' given twice", 54),
    ('source_line="3"', "expected an integer, found '\"3\"'", 54),
    ('op_name=add', "expected a quoted string, found 'add'", 50),
    ('stack_frame_id=2147483648', "metadata attribute 'stack_frame_id' out of int32's range", 57),
    ('"op_name=" scheduling_name=""', "expected a metadata attribute `key=value` or '}', found '\"op_name'", 42),
    ('op_name="a",', "expected a metadata attribute `key=value`, found '}'", 54),
    ('op_name="\\x41a"', "value of \\x41a exceeds 0xff", 51),
]


@pytest.mark.parametrize("items,message,col", _METADATA_CASES)
def test_metadata_xla_refuses_is_a_located_error(items, message, col):
    text = ALL_REDUCE.replace("ROOT %a = f32[] add(%x, %y)", f"ROOT %a = f32[] add(%x, %y), metadata={{{items}}}")
    with pytest.raises(Exception, match="INVALID_ARGUMENT"):
        xla_module(text)
    with pytest.raises(HloParseError) as e:
        parse_hlo(text, "m.hlo")
    assert (e.value.line, e.value.col) == (6, col)
    assert message in str(e.value)


def test_unknown_metadata_items_are_kept_only_when_told():
    """allow_unknown_attributes keeps an item XLA does not know (a newer XLA's) and warns
    once per name; the items XLA knows are read as before."""
    text = ALL_REDUCE.replace("ROOT %a = f32[] add(%x, %y)",
                              'ROOT %a = f32[] add(%x, %y), metadata={op_name="a" future_id=7 source_line=3}')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = parse_hlo(text, "m.hlo", allow_unknown_attributes=True)
    assert [str(w.message) for w in caught] == [
        "m.hlo:6:54: warning: unknown attribute 'future_id' in metadata; kept as raw text, not interpreted"]
    md = module.computation("add").root.metadata
    assert (md.op_name, md.source_line, md.extra) == ("a", 3, {"future_id": 7})


_BRACED = """HloModule m
ENTRY main {
  x = f32[4]{0} parameter(0)
  c = f32[4]{0} custom-call(x), custom_call_target="foo", backend_config=%s
  ROOT n = f32[4]{0} negate(c), metadata={op_name="q"}
}
"""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(['"', '"a"', "{", "}", ":", ",", "1", "[", "]", "\\", "'", " "]), max_size=8))
def test_a_braced_value_ends_where_xla_s_lexer_ends_it(pieces):
    """A free-form `{...}` value (backend_config) with its quotes and braces in any
    number: where XLA's lexer reads it we read the same value and the same instructions
    after it; where a quote opens a string that never closes (its braces would pair up
    differently, and the value could swallow the instructions after it: the negate
    here), both refuse the module."""
    config = "{" + "".join(pieces) + "}"
    text = _BRACED % config
    try:
        theirs = xla_view(text)
    except XlaParseError:
        with pytest.raises(HloParseError):
            parse_hlo(text, "m.hlo")
        return
    module = parse_hlo(text, "m.hlo")
    assert our_view(module) == theirs
    assert module.entry.instructions[1].attrs["backend_config"].raw == config


# ------------------------------------------------------------ the table vs XLA
def _xla_allowed(opcode: str) -> set[str] | None:
    """The attribute names jaxlib's XLA parser lists for `opcode` when given one it does
    not know (None when no probe reaches its attributes)."""
    # XLA's parser reads these operands before the attributes and aborts the process
    # (CHECK failure) on made-up ones: give it what it needs, or skip.
    if opcode in ("async-update", "async-done"):
        return None
    if opcode == "conditional":  # what it takes depends on the index's type
        return _probe("conditional", ["s32[] %a0"]) | _probe("conditional", ["pred[] %a0"])
    return _probe(opcode, [])


def _probe(opcode: str, firsts: list[str]) -> set[str] | None:
    for n in range(len(firsts), 6):
        for shape in ("f32[]", "s32[]", "pred[]", "((f32[]), f32[], u32[])"):
            if opcode == "parameter":
                text = "%r = f32[] parameter(0), zzz_probe=1"
            elif opcode == "constant":
                text = "%r = f32[] constant(1), zzz_probe=1"
            elif opcode == "tuple":
                text = "%r = (f32[]) tuple(f32[] %a0), zzz_probe=1"
            else:
                ops = firsts + [f"{shape} %a{i}" for i in range(len(firsts), n)]
                text = f"%r = {shape} {opcode}({', '.join(ops)}), zzz_probe=1"
            try:
                xla_module(text)
            except Exception as e:  # noqa: BLE001 - XLA's message is the datum
                m = re.search(r'unexpected attribute "zzz_probe"\. Allowed attributes: ([^\n]*)', str(e))
                if m:
                    return {x.strip() for x in m.group(1).split(",")}
                if "Unknown opcode" in str(e):
                    return None
    return None


# Names the table takes beyond jaxlib 0.10.2's parser, with why: printed by newer XLA,
# or by older XLA.
BEYOND_JAXLIB = {
    "collective-broadcast": {"has_dynamic_root"}, "topk": {"is_stable"}, "compare": {"order"},
    "convolution": {"algorithm", "block_scaling_config", "conv_kind"},
    "copy-start": {"is_cross_program_prefetch"},
    "async-start": {"async_group_id"},
    "all-reduce-start": {"output_to_operand_aliasing"},  # jax 0.12's in-place GPU all-reduce-start
    # collective-reduce: jaxlib 0.12 no longer takes mode (older XLA wrote it); dot: configs jaxlib 0.12 added.
    "collective-reduce": {"mode"}, "dot": {"block_scaling_config", "sparsity_config"},
}
@pytest.mark.parametrize("opcode", sorted(attrs.OPCODE_ATTRS))
def test_opcode_table_takes_what_xla_takes(opcode):
    theirs = _xla_allowed(opcode)
    if theirs is None:
        pytest.skip(f"jaxlib 0.10.2 has no probe-able '{opcode}'")
    ours = attrs.OPCODE_ATTRS[opcode]
    assert theirs <= ours, sorted(theirs - ours)
    assert ours - theirs <= BEYOND_JAXLIB.get(opcode, set()), sorted(ours - theirs)


def test_every_typed_attribute_belongs_to_some_opcode():
    used = set().union(*attrs.OPCODE_ATTRS.values())
    assert set(attrs.INSTRUCTION_ATTRS) <= used
    assert used - set(attrs.INSTRUCTION_ATTRS) == {"metadata"}  # read by its own grammar rule


def test_async_sugar_takes_the_wrapped_opcodes_attributes():
    assert "dimensions" in attrs.attributes_of("all-to-all-start")
    assert "async_execution_thread" in attrs.attributes_of("all-to-all-start")
    assert "dimensions" not in attrs.attributes_of("all-to-all-done")
    assert attrs.attributes_of("all-gather-done") == attrs.COMMON_ATTRS  # a dedicated async pair
    assert attrs.attributes_of("no-such-op") is None


# ------------------------------------------------------------ header and shapes
@pytest.mark.parametrize("header,message", [
    ("replica_count=0", "replica_count=0: a module has at least one replica"),
    ("replica_count=-4", "replica_count=-4: a module has at least one replica"),
    ("num_partitions=0", "num_partitions=0: a module has at least one partition"),
    # Past 2^20 devices: a typo (the module's i32 count wrapped: 4294967297 read as 1).
    ("replica_count=4294967297", "replica_count=4294967297: more devices than any module has (at most 1048576)"),
    ("num_partitions=2147483648", "num_partitions=2147483648: more devices than any module has (at most 1048576)"),
])
def test_device_counts_below_one_are_located_errors(header, message):
    text = ALL_REDUCE.replace("num_partitions=2", header)
    with pytest.raises(HloParseError) as e:
        parse_hlo(text)
    assert e.value.message == message and (e.value.line, e.value.col) == (1, text.index(header.split("=")[1]) + 1)


def test_more_devices_than_cpu_runs_is_refused_before_compiling(tmp_path, capsys):
    path = tmp_path / "big.hlo"
    path.write_text(ALL_REDUCE.replace("num_partitions=2", "num_partitions=1000000"))
    assert main(["run", "--compile-only", str(path)]) == 1
    assert "would hold 1000000 of the module's 1000000 devices; jaxlib's CPU runtime runs at most 1024" in capsys.readouterr().err


def test_use_global_device_ids_without_channel_id_is_an_error_as_in_xla():
    text = ALL_REDUCE.replace("channel_id=1, ", "")
    with pytest.raises(Exception):
        xla_module(text)
    with pytest.raises(HloParseError, match="use_global_device_ids=true needs a channel_id"):
        parse_hlo(text)


def test_shape_beyond_int64_is_a_located_error():
    text = "HloModule m\nENTRY e {\n  p = bf16[99999999999999999999999,32] parameter(0)\n  ROOT r = bf16[99999999999999999999999,32] negate(p)\n}\n"
    with pytest.raises(HloParseError) as e:
        parse_hlo(text)
    assert (e.value.line, e.value.col) == (3, 7) and "more elements than an int64 counts" in e.value.message


ELIDED = "HloModule m\nENTRY e {\n  c = {t}[200000,200000] constant({...})\n  ROOT r = {t}[200000,200000] negate(c)\n}\n"


@pytest.mark.parametrize("etype", ["f32", "c64"])
def test_huge_elided_constant_converts_as_a_splat_and_running_it_is_refused(tmp_path, capsys, etype):
    path = tmp_path / "elided.hlo"
    path.write_text(ELIDED.replace("{t}", etype))
    out = tmp_path / "out.mlir"
    assert main(["convert", "-o", str(out), str(path)]) == 0  # 149+ GiB of zeros never materialized
    assert re.search(r"dense<[^>]*> : tensor<200000x200000x", out.read_text())
    capsys.readouterr()
    assert main(["run", "--elided-constants=zeros", str(path)]) == 1
    err = capsys.readouterr().err
    assert re.search(r"constant 'c' \(\w+\[200000,200000\], elided in the dump\) made up as zeros needs \d+ GiB", err)


def test_random_inputs_beyond_memory_are_refused(tmp_path, capsys):
    path = tmp_path / "param.hlo"
    path.write_text("HloModule m\nENTRY e {\n  p = f32[200000,200000] parameter(0)\n  ROOT r = f32[200000,200000] negate(p)\n}\n")
    assert main(["run", str(path)]) == 1  # the preflight of the compiled module's memory
    err = capsys.readouterr().err
    assert "executing needs about 596" in err and "even one device's share" in err
    assert main(["run", "--skip-memory-check", str(path)]) == 1  # then before drawing the inputs
    assert re.search(r"making random inputs needs \d+ GiB", capsys.readouterr().err)


@pytest.mark.parametrize("line,message", [
    ("ROOT r = f32[4] add(f32[3] p, f32[3] p)", "operand 0 is f32[3], the result f32[4]"),
    ("ROOT r = f32[3] add(p, q)", "operand 1 is f32[4], the result f32[3]"),
    ("ROOT r = f32[3,2] broadcast(p), dimensions={1}", "broadcast of f32[3] to f32[3,2]"),
    ("ROOT r = f32[7] reshape(p)", "reshape of f32[3] (3 elements) to f32[7] (7)"),
    ("ROOT r = f32[2] slice(p), slice={[0:3]}", "slice of f32[3] gives dimensions [3]"),
    ("ROOT r = f32[3] dot(p, p), lhs_contracting_dims={0}, rhs_contracting_dims={0}", "operands give dimensions []"),
    ("ROOT r = f32[] dot(p, q), lhs_contracting_dims={0}, rhs_contracting_dims={0}",
     "contracting dimensions [0] of f32[3] and [0] of f32[4] differ in size"),
    ("ROOT r = f32[3] dynamic-update-slice(q, p, i)", "the result f32[3] is not the operand's f32[4]"),
    ("ROOT r = f32[2] dynamic-slice(p, i), dynamic_slice_sizes={1}", "dynamic_slice_sizes={1} but the result is f32[2]"),
    ("ROOT r = (f32[4]) tuple(p)", "operand 0 is f32[3], element 0 of the result is written f32[4]"),
    ("ROOT r = (f32[3], f32[4]) tuple(p)", "1 operands, the result is written with 2 elements"),
    ("ROOT r = f32[3] transpose(p), dimensions={1}", "dimensions={1} is not a permutation of the operand's 1 dimensions"),
])
def test_shapes_written_inconsistently_are_located_errors(line, message):
    text = ("HloModule m\nENTRY e {\n  p = f32[3] parameter(0)\n  q = f32[4] parameter(1)\n  i = s32[] parameter(2)\n"
            f"  {line}\n}}\n")
    with pytest.raises(HloParseError) as e:
        parse_hlo(text)
    assert e.value.line == 6 and message in e.value.message, e.value.message


@pytest.mark.parametrize("valid,line,message", [
    ("v = f32[3,2] broadcast(p), dimensions={0}", "ROOT r = f32[3,2] broadcast(p), dimensions={1}",
     "broadcast of f32[3] to f32[3,2]"),
    ("v = f32[2] slice(p), slice={[0:2]}", "ROOT r = f32[2] slice(p), slice={[0:3]}", "slice of f32[3] gives dimensions [3]"),
    ("v = f32[1] dynamic-slice(p, i), dynamic_slice_sizes={1}", "ROOT r = f32[1] dynamic-slice(p, i), dynamic_slice_sizes={2}",
     "dynamic_slice_sizes={2} but the result is f32[1]"),
    ("v = f32[3,2] broadcast(p), dimensions={0}, statistics={visualizing_index=1,stat-0=0.5}",
     "ROOT r = f32[3,2] broadcast(p), dimensions={1}, statistics={visualizing_index=1,stat-0=0.5}",
     "broadcast of f32[3] to f32[3,2]"),
])
def test_a_check_that_passed_before_does_not_pass_another_instruction(valid, line, message):
    """The parser makes each shape check once per opcode, shapes and attributes: the same
    shapes with other attributes (or attributes it cannot key by value) are checked again."""
    text = ("HloModule m\nENTRY e {\n  p = f32[3] parameter(0)\n  q = f32[4] parameter(1)\n  i = s32[] parameter(2)\n"
            f"  {valid}\n  w = {valid.split(' = ', 1)[1]}\n  {line}\n}}\n")
    with pytest.raises(HloParseError) as e:
        parse_hlo(text)
    assert e.value.line == 8 and message in e.value.message, e.value.message


@pytest.mark.parametrize("groups,message", [
    ("{{0,99999999999999999999999}}", "attribute 'replica_groups' holds a number beyond int64"),
    ("{{0,0}}", "device 0 appears more than once in the replica groups"),
])
def test_replica_groups_xla_refuses_are_located_errors(groups, message):
    with pytest.raises(HloParseError) as e:
        parse_hlo(ALL_REDUCE.replace("{{0,1}}", groups))
    assert (e.value.line, e.value.message) == (11, message)


def test_copy_start_and_variadic_reduce_window_shapes_are_checked():
    head = "HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
    copy = head + ("ENTRY e {\n  p = f32[3] parameter(0)\n  s = (f32[4], f32[4], u32[]) copy-start(p)\n"
                   "  ROOT d = f32[4] copy-done(s)\n}\n")
    with pytest.raises(HloParseError, match=re.escape("element 0 of the result is f32[4], the operand f32[3]")):
        parse_hlo(copy)
    window = head + ("ENTRY e {\n  p = f32[4] parameter(0)\n  q = f32[3] parameter(1)\n  z = f32[] constant(0)\n"
                     "  ROOT r = (f32[2], f32[2]) reduce-window(p, q, z, z), window={size=2 stride=2}, to_apply=add\n}\n")
    with pytest.raises(HloParseError, match=re.escape("input 1 is f32[3], input 0 f32[4]")):
        parse_hlo(window)
    parse_hlo(window.replace("f32[3] parameter(1)", "f32[4] parameter(1)"))
    with pytest.raises(HloParseError, match=re.escape("give dimensions [[2], [2]], the results are written [[2], [3]]")):
        parse_hlo(window.replace("f32[3] parameter(1)", "f32[4] parameter(1)").replace("(f32[2], f32[2])", "(f32[2], f32[3])"))


def test_convolution_written_with_shapes_xla_would_not_infer():
    conv = ("HloModule m\nENTRY e {{\n  a = f32[1,8,8,2] parameter(0)\n  w = f32[3,3,{i},4] parameter(1)\n"
            "  ROOT c = {out} convolution(a, w), window={{size=3x3 stride=2x2 pad=1_1x-1_2 rhs_dilate=1x2}}, "
            "dim_labels=b01f_01io->b01f\n}}\n")
    inferred = xla_module(conv.format(i=2, out="")).to_string()
    assert "f32[1,4,3,4]{3,2,1,0} convolution" in inferred  # what XLA infers, and so do we:
    parse_hlo(conv.format(i=2, out="f32[1,4,3,4]"))
    with pytest.raises(HloParseError, match=r"its operands give dimensions \[1, 4, 3, 4\]"):
        parse_hlo(conv.format(i=2, out="f32[1,4,4,4]"))
    with pytest.raises(HloParseError, match="the input's 2 features are not the kernel's 3 input features"):
        parse_hlo(conv.format(i=3, out="f32[1,4,3,4]"))


def test_negative_channel_id_is_a_located_error():
    with pytest.raises(HloParseError, match="channel_id=-4: channel ids are not negative"):
        parse_hlo(ALL_REDUCE.replace("channel_id=1", "channel_id=-4"))


def test_operands_must_match_the_called_computations_parameters():
    text = ("HloModule m\nf {\n  a = f32[3] parameter(0)\n  ROOT n = f32[3] negate(a)\n}\n"
            "ENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[3] fusion(p), kind=kLoop, calls=f\n}\n")
    with pytest.raises(HloParseError) as e:
        parse_hlo(text)
    assert e.value.line == 8 and "operand 0 of 'r' is f32[4], parameter 0 of 'f' is f32[3]" in e.value.message


# ------------------------------------------------------------ forms XLA accepts
def test_module_name_with_a_trailing_colon():
    text = "HloModule convolution.167:\n\nENTRY %e (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2] parameter(0)\n}\n"
    assert parse_hlo(text).name == xla_module(text).name == "convolution.167"


def test_index_comments_inside_array_literals():
    text = ("HloModule m\nENTRY e {\n  ROOT c = s32[2,2,2] constant({ /*i0=0*/ { /*i1=0*/ {1, 2}, /*i1=1*/ {3, 4} },"
            " /*i0=1*/ { {5, 6}, {7, 8} } })\n}\n")
    ours = parse_hlo(text).entry.root.literal
    theirs = xla_module(text).to_string()  # XLA prints the values it read
    assert ours.tolist() == [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]
    assert re.sub(r"/\*.*?\*/|\s", "", theirs).count("{{1,2},{3,4}},{{5,6},{7,8}}") == 1


# ------------------------------------------------------------ HLO or MLIR
HEADERLESS = [
    # XLA's tests write modules as computations without the header ...
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT a = f32[] add(x, y)\n}\n\n"
    "ENTRY main {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add\n}\n",
    "// a pasted snippet\nfused_computation.1 {\n  p0 = f32[4] parameter(0)\n"
    "  ROOT n = f32[4] negate(p0)\n}\nENTRY %main.2 (a: f32[4]) -> f32[4] {\n  %a = f32[4] parameter(0)\n"
    "  ROOT %f = f32[4] fusion(%a), kind=kLoop, calls=fused_computation.1\n}\n",
    # ... as XLA's own GPU tests write them, attributes running over lines ...
    "ENTRY e {\n  p0 = bf16[32,32] parameter(0)\n  p1 = bf16[32,32] parameter(1)\n  ROOT d = f32[32,32] dot(p0, p1),\n"
    "    lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}",
    "ENTRY e {\n  p0 = f32[33,33] parameter(0)\n  s = f32[33,33] sine(p0)\n  p1 = f32[33,33] parameter(1)\n"
    "  c = f32[33,33] cosine(p1)\n  ROOT dot = f32[33,33] dot(s, c),\n    lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}",
    # ... or a single instruction, whose undefined operands become parameters
    "%r = f32[4] negate(f32[4] %p)\n",
    # and a header can spread over lines, after comments
    "/* dumped */ // by hand\nHloModule m,\n  is_scheduled=true,\n  entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\n"
    "ENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] negate(p)\n}\n",
]


@pytest.mark.parametrize("index", range(len(HEADERLESS)))
def test_run_takes_hlo_without_header_as_hlo_and_computes_what_xla_does(tmp_path, index, capsys):
    from converter.runtime.xla_oracle import run_with_xla

    from converter.runtime.program import load
    from tests.helpers import assert_close

    text = HEADERLESS[index]
    assert is_hlo_text(text.encode())
    path = tmp_path / "m.txt"
    path.write_text(text)
    inputs = load(str(path)).random_inputs(0)
    np.savez(tmp_path / "in.npz", **{f"arg{i}": x for i, x in enumerate(inputs)})
    assert main(["run", "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"), str(path)]) == 0
    with np.load(tmp_path / "out.npz") as out:
        # The same ops through the same CPU compiler: equal up to f32 dot accumulation order.
        assert_close(out["out0"], run_with_xla(text, inputs)[0], rtol=1e-5, atol=1e-5)


def test_mlir_in_every_form_is_not_taken_for_hlo(tmp_path):
    from converter.runtime.convert import convert_text
    from converter.mlir.serialize import module_to_bytes

    module = convert_text(HEADERLESS[2])
    for emit in ("mlir", "bytecode", "portable"):
        data = module_to_bytes(module, emit)
        assert not is_hlo_text(data if isinstance(data, bytes) else data.encode()), emit
    for text in ("module {\n}\n", "#loc = loc(unknown)\nmodule {}", "// c\nfunc.func @main() {\n  return\n}",
                 '"builtin.module"() ({}) : () -> ()', "{-#\n#-}\n", "sdy.mesh @mesh = <[\"x\"=2]>"):
        assert not is_hlo_text(text.encode()), text
    for text in ("", "\x00\x01garbage", "HloModule", "ENTRY e {", "FileNames\n1 \"a.py\""):
        assert is_hlo_text(text.encode()), text


# A size of 0 or a typo'd huge size in a device list (mesh, iota tile assignment, iota
# replica groups): a located error, not a division by zero or an exhausted memory while
# the ids are expanded.
@pytest.mark.parametrize("attribute,message", [
    ("replica_groups=mesh['x'=0] {'x'}", "mesh axis sizes [0]: a size below 1"),
    ("replica_groups=mesh['x'=2,'y'=2147483648] {'x'}",
     "mesh axis sizes [2, 2147483648]: 4294967296 devices, more than 1048576"),
    ("replica_groups=[1,2147483648]<=[2147483648]",
     "iota device list [1, 2147483648]: 2147483648 devices, more than 1048576"),
    ("replica_groups=[1,0]<=[0]", "iota device list [1, 0]: a size below 1"),
])
def test_device_lists_of_no_size_or_absurd_size_are_located_errors(attribute, message):
    text = ALL_REDUCE.replace("replica_groups={{0,1}}", attribute)
    with pytest.raises(HloParseError) as e:
        parse_hlo(text, "m.hlo")
    assert e.value.message == message and e.value.line == 11


def test_a_typo_d_device_id_does_not_imply_a_module_of_that_many_devices():
    """Without a header count, the largest id a collective names implies the count: one
    past 2^20 is named at its instruction (it had made a module of 2^31 replicas)."""
    from converter.importer.core import HloImportError
    from converter.runtime.convert import convert_text

    text = ALL_REDUCE.replace("HloModule m, num_partitions=2", "HloModule m").replace(
        "replica_groups={{0,1}}, use_global_device_ids=true", "replica_groups={{0,2147483647}}")
    with pytest.raises(HloImportError) as e:
        convert_text(text, "m.hlo", pipeline="none")
    assert str(e.value).startswith("m.hlo:11:3: error: %r (all-reduce): all-reduce names device id 2147483647: "
                                   "more devices than any module has (at most 1048576)")


@pytest.mark.parametrize("constraints,message", [
    ("{f32[4]{0}, f32[5]{0}}", "operand layout constraint f32[5]{0} for operand 1 is not compatible with its shape f32[4]{0}"),
    ("{f32[4]{0}}", "1 operand layout constraints for 2 operands of 'c'"),
    ("{f32[4]{0}, s32[4]{0}}", "operand layout constraint s32[4]{0} for operand 1 is not compatible with its shape f32[4]{0}"),
])
def test_operand_layout_constraints_must_fit_the_operands_as_in_xla(constraints, message):
    """A custom call reads its operands laid out as the constraints say: one per operand,
    of its type and dimensions (a constraint that does not fit was taken silently)."""
    text = ("HloModule m\nENTRY main {\n  x = f32[4]{0} parameter(0)\n  ROOT c = f32[4]{0} custom-call(x, x), "
            f'custom_call_target="t", operand_layout_constraints={constraints}\n}}\n')
    with pytest.raises(Exception, match="INVALID_ARGUMENT"):
        xla_module(text)
    with pytest.raises(HloParseError) as e:
        parse_hlo(text, "m.hlo")
    assert e.value.message == message and e.value.line == 4
    parse_hlo(text.replace(constraints, "{f32[4]{0}, f32[4]{0}}"), "m.hlo")  # what fits is read
