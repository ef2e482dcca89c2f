"""XLA's own HLO parser runs in a worker process (converter.runtime.xla_parser): what it reads comes
back intact, its rejections come back as XLA's message, and a crash of jaxlib's parser is a
clear error in this process instead of the end of it."""

from __future__ import annotations

import jaxlib
import jaxlib._hlo as xla_hlo
import numpy as np
import pytest

from converter.common.errors import ConverterError
from converter.runtime.xla_oracle import run_with_xla
from converter.runtime.xla_parser import XlaParseError, XlaParserCrashed, xla_parse

GOOD = """HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (p: f32[4]) -> f32[] {
  %p = f32[4]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add
}
"""

# jaxlib 0.12's parser dereferences a null pointer on an unknown attribute of a generic
# async `*-start` (the wrapped op's attribute table); jaxlib 0.10.2 reports it.
CRASHES_0_12 = """HloModule m

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %s = ((f32[4]{0}), f32[4]{0}, u32[]) negate-start(%p), bogus_attr=7
  ROOT %d = f32[4]{0} negate-done(%s)
}
"""
JAXLIB = tuple(int(x) for x in jaxlib.__version__.split(".")[:2])


def test_what_xla_reads_comes_back_as_its_proto_and_its_printed_instructions():
    module = xla_parse(GOOD)
    assert sorted(c.name for c in module.computations) == ["add", "main"]
    main = next(c for c in module.computations if c.name == "main")
    assert [i.split(" = ")[0].split()[-1].lstrip("%") for i in main.instructions] == ["p", "z", "r"]
    # The proto is XLA's own module: jaxlib rebuilds it and prints the same instructions.
    rebuilt = xla_hlo.HloModule.from_serialized_hlo_module_proto(module.proto)
    assert {c.name: [i.to_string() for i in c.instructions()] for c in rebuilt.computations()} == \
        {c.name: c.instructions for c in module.computations}


def test_a_rejection_is_xlas_message():
    # `oops` reads as the name of the next instruction, which then lacks its '='
    with pytest.raises(XlaParseError, match=r"was parsing 12:3: error: expects '=' in instruction"):
        xla_parse(GOOD.replace("%z = f32[] constant(0)", "%z = f32[] constant(0) oops"))


def test_a_crash_of_xlas_parser_is_an_error_here_and_the_next_parse_works():
    if JAXLIB >= (0, 12):
        with pytest.raises(XlaParserCrashed, match=r"jaxlib 0\.12.*crashed.*SIGSEGV"):
            xla_parse(CRASHES_0_12)
    else:
        with pytest.raises(XlaParseError, match="bogus_attr"):
            xla_parse(CRASHES_0_12)
    assert [c.name for c in xla_parse(GOOD).computations]  # a fresh worker took over


def test_xla_oracle_reports_the_crash_as_a_converter_error():
    with pytest.raises(ConverterError):
        run_with_xla(CRASHES_0_12, [np.ones(4, np.float32)])
    # and still runs what XLA can run
    np.testing.assert_array_equal(run_with_xla(GOOD, [np.arange(4, dtype=np.float32)])[0], np.float32(6))
