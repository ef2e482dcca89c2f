"""What the importer cannot read is a located error that says what: an opcode no rule
reads (a misspelt one with the nearest XLA opcode), an element type with no MLIR form."""

from __future__ import annotations

import pytest

from converter.importer.core import HloImportError
from converter.runtime.convert import convert_text


def test_an_opcode_no_rule_reads_is_a_located_error_naming_the_near_one():
    """The parser reads any opcode (XLA's refuses one it does not know); the importer
    names the misspelt one at its line and the opcode it is closest to, and an XLA
    opcode it has no rule for as what it is (no suggestion)."""
    hlo = "HloModule m\nENTRY main {\n  x = f32[4]{0} parameter(0)\n  ROOT e = f32[4]{0} c4ompare(x, x), direction=LT\n}\n"
    with pytest.raises(HloImportError) as e:
        convert_text(hlo, "m.hlo", pipeline="none")
    assert str(e.value).startswith("m.hlo:4:3: error: %e (c4ompare): 'c4ompare' is no XLA opcode; "
                                   "did you mean 'compare'?")
    with pytest.raises(HloImportError) as e:
        convert_text(hlo.replace("c4ompare(x, x), direction=LT", "collective-reduce(x), replica_groups={}"),
                     "m.hlo", pipeline="none")
    assert "no import rule for opcode 'collective-reduce' (an XLA opcode this importer does not read)" in str(e.value)


def test_a_buffer_shape_is_a_located_error_at_the_instruction_that_has_it():
    """XLA's buffer type b(...) has no StableHLO type: the error names the parameter (or
    instruction) whose shape holds it, wherever the type is first needed."""
    for line_text, line in (("  p = b(f32[4]{0}) parameter(1)\n", 4), ("  p = (f32[4]{0}, b(f32[4]{0})) parameter(1)\n", 4)):
        hlo = ("HloModule m\nENTRY main {\n  x = f32[4]{0} parameter(0)\n" + line_text
               + "  ROOT e = f32[4]{0} negate(x)\n}\n")
        with pytest.raises(HloImportError) as e:
            convert_text(hlo, "m.hlo", pipeline="none")
        assert str(e.value).startswith(f"m.hlo:{line}:3: error: %p (parameter): cannot import: a buffer shape b(...)")
