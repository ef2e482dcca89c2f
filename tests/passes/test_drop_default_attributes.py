"""drop-default-attributes (passes/drop_default_attributes.py) run alone on an imported
module: attributes that hold their StableHLO default go, the others stay, and the module
still computes what XLA computes for the same HLO."""

from __future__ import annotations

import numpy as np

from converter.runtime.program import program_from_module
from passes.drop_default_attributes import DEFAULTS
from tests.helpers import assert_all_close, convert_then, ops_named, run_xla

# Each op twice: once with every listed attribute at its default (`plain` ones), once with
# a non-default value (strided convolution and window, HIGHEST precision, sorted indices,
# stable sort), which must stay.
HLO = """HloModule defaults
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
less {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT lt = pred[] compare(p0, p1), direction=LT
}
ENTRY main {
  x = f32[1,8,8,2]{3,2,1,0} parameter(0)
  w = f32[3,3,2,4]{3,2,1,0} parameter(1)
  m = f32[8,6]{1,0} parameter(2)
  idx = s32[3,1]{1,0} parameter(3)
  plain = f32[1,6,6,4]{3,2,1,0} convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f
  strided = f32[1,4,4,4]{3,2,1,0} convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  d = f32[8,8]{1,0} dot(m, m), lhs_contracting_dims={1}, rhs_contracting_dims={1}, operand_precision={default,default}
  dh = f32[8,8]{1,0} dot(m, m), lhs_contracting_dims={1}, rhs_contracting_dims={1}, operand_precision={highest,highest}
  z = f32[] constant(0)
  rw = f32[7,5]{1,0} reduce-window(m, z), window={size=2x2}, to_apply=add
  rws = f32[4,3]{1,0} reduce-window(m, z), window={size=2x2 stride=2x2}, to_apply=add
  g = f32[3,6]{1,0} gather(m, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}
  gs = f32[3,6]{1,0} gather(m, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}, indices_are_sorted=true
  s = f32[8,6]{1,0} sort(m), dimensions={1}, to_apply=less
  ss = f32[8,6]{1,0} sort(m), dimensions={0}, is_stable=true, to_apply=less
  ROOT t = (f32[1,6,6,4]{3,2,1,0}, f32[1,4,4,4]{3,2,1,0}, f32[8,8]{1,0}, f32[8,8]{1,0}, f32[7,5]{1,0}, f32[4,3]{1,0}, f32[3,6]{1,0}, f32[3,6]{1,0}, f32[8,6]{1,0}, f32[8,6]{1,0}) tuple(plain, strided, d, dh, rw, rws, g, gs, s, ss)
}
"""

# (op, attribute): which of the two ops of that kind holds it after the pass.
EXPECTED = {
    ("stablehlo.convolution", "window_strides"): [False, True],
    ("stablehlo.convolution", "padding"): [False, True],
    ("stablehlo.convolution", "lhs_dilation"): [False, False],
    ("stablehlo.convolution", "rhs_dilation"): [False, False],
    ("stablehlo.convolution", "window_reversal"): [False, False],
    ("stablehlo.dot_general", "precision_config"): [False, True],
    ("stablehlo.reduce_window", "window_strides"): [False, True],
    ("stablehlo.reduce_window", "padding"): [False, False],
    ("stablehlo.reduce_window", "base_dilations"): [False, False],
    ("stablehlo.reduce_window", "window_dilations"): [False, False],
    ("stablehlo.gather", "indices_are_sorted"): [False, True],
    ("stablehlo.sort", "is_stable"): [False, True],
}


def _present(module) -> dict[tuple[str, str], list[bool]]:
    return {(op, name): [name in o.attributes for o in ops_named(module, op)] for op, name in EXPECTED}


def test_the_import_writes_the_defaults_the_pass_then_drops():
    before = _present(convert_then(HLO, []))
    # The import spells every default out (the dot without operand_precision aside, which
    # the test gives one): otherwise the pass would have nothing to do here.
    assert all(before[key] == [True, True] for key in EXPECTED), before
    assert _present(convert_then(HLO, ["drop-default-attributes"])) == EXPECTED


def test_every_op_kind_the_pass_knows_is_covered_or_has_no_hlo_form_here():
    # dynamic_gather and select_and_scatter have no plain HLO instruction of their own
    # form (select-and-scatter is covered by the window ones), custom_call by the policy.
    covered = {op for op, _ in EXPECTED}
    assert set(DEFAULTS) - covered <= {"stablehlo.dynamic_gather", "stablehlo.select_and_scatter",
                                       "stablehlo.scatter", "stablehlo.custom_call"}


def test_dropping_the_defaults_keeps_xlas_numbers():
    module = convert_then(HLO, ["drop-default-attributes"])
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((1, 8, 8, 2)).astype(np.float32),
              rng.standard_normal((3, 3, 2, 4)).astype(np.float32),
              rng.standard_normal((8, 6)).astype(np.float32),
              np.array([[5], [0], [7]], np.int32)]
    assert_all_close(program_from_module(module)(*inputs), run_xla(HLO, inputs))


def test_the_default_pipeline_ends_with_no_default_left():
    """The default pipeline runs the pass last: nothing after it writes a default back."""
    from passes import parse_pipeline

    assert parse_pipeline("default")[-1] == "drop-default-attributes"
    module = convert_then(HLO, [], before="default")
    assert _present(module) == EXPECTED
