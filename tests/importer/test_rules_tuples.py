"""Tuple import rules (rules/tuples.py): tuple and get-tuple-element, nested, against XLA."""

from __future__ import annotations

import numpy as np

from tests.importer.hlo_snippets import differential_by_output


def test_nested_tuples_and_get_tuple_element():
    hlo = """HloModule tuples
ENTRY main {
  a = f32[2] parameter(0)
  b = s32[] parameter(1)
  c = pred[3] parameter(2)
  inner = (s32[], pred[3]) tuple(b, c)
  outer = (f32[2], (s32[], pred[3]), f32[2]) tuple(a, inner, a)
  x = (s32[], pred[3]) get-tuple-element(outer), index=1
  y = pred[3] get-tuple-element(x), index=1
  z = f32[2] get-tuple-element(outer), index=2
  w = s32[] get-tuple-element(inner), index=0
  one = (f32[2]) tuple(a)
  two = (s32[], (f32[2])) tuple(w, one)
  ROOT r = (pred[3], f32[2], (s32[], (f32[2]))) tuple(y, z, two)
}
"""
    a = np.array([1.5, -2], np.float32)
    b = np.int32(7)
    c = np.array([True, False, True])
    # Results are the flattened leaves in order.
    outs = differential_by_output(hlo, [a, b, c], ["pred", "f32", "s32", "nested f32"], [True] * 4)
    for out, want in zip(outs, [c, a, np.array(7, np.int32), a]):
        np.testing.assert_array_equal(out, want)


def test_value_only_rules_build_no_op():
    """Rules registered with builds_ops=False get no location of their own (the importer
    skips making one): each must hand on existing values and build nothing, which the
    imported module shows by holding no op of theirs however tuples nest."""
    from converter.hlo.parser import parse_hlo
    from converter.importer.core import import_hlo
    from converter.importer.registry import VALUE_ONLY

    assert VALUE_ONLY == {"tuple", "get-tuple-element"}
    hlo = parse_hlo("""HloModule t
ENTRY main {
  a = f32[2] parameter(0)
  p = (f32[2], (s32[], f32[2])) parameter(1)
  inner = (s32[], f32[2]) get-tuple-element(p), index=1
  x = f32[2] get-tuple-element(inner), index=1
  y = f32[2] add(a, x)
  ROOT r = (f32[2], (s32[], f32[2])) tuple(y, inner)
}
""", "t.hlo")
    module = import_hlo(hlo)
    ops = [op.name for op in module.body.operations[0].regions[0].blocks[0].operations]
    assert ops == ["stablehlo.add", "func.return"]
