"""drop-default-attributes: remove attributes that hold their StableHLO default (precision
DEFAULT, unit strides and dilations, zero padding, unsorted indices, unstable sort, an
empty custom-call config).

Both forms mean the same; a portable artifact (VHLO) writes the short one, so after this
pass a module and its artifact print alike, and the printed module is shorter to read."""

from __future__ import annotations

from typing import Callable

import numpy as np
from jaxlib.mlir import ir

from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker


def _all_equal(value: int | bool) -> Callable[[ir.Attribute], bool]:
    # Empty arrays (a convolution without spatial dims, as TPU dumps write matmuls) stay:
    # VHLO writes them back.
    def check(attr: ir.Attribute) -> bool:
        if isinstance(attr, (ir.DenseI64ArrayAttr, ir.DenseBoolArrayAttr)):
            return len(attr) > 0 and all(v == value for v in attr)
        if isinstance(attr, ir.DenseIntElementsAttr):
            values = np.array(attr)
            return values.size > 0 and bool(np.all(values == value))
        return False
    return check


def _is_false(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.BoolAttr) and not attr.value


def _empty_string(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.StringAttr) and attr.value_bytes == b""


def _default_precision(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.ArrayAttr) and all(str(p) == "#stablehlo<precision DEFAULT>" for p in attr)


_ONES, _ZEROS, _NO_REVERSAL = _all_equal(1), _all_equal(0), _all_equal(False)
_WINDOW = {"window_strides": _ONES, "padding": _ZEROS, "base_dilations": _ONES, "window_dilations": _ONES}
_INDICES = {"indices_are_sorted": _is_false, "unique_indices": _is_false}

DEFAULTS: dict[str, dict[str, Callable[[ir.Attribute], bool]]] = {
    "stablehlo.dot_general": {"precision_config": _default_precision},
    "stablehlo.convolution": {"window_strides": _ONES, "padding": _ZEROS, "lhs_dilation": _ONES,
                              "rhs_dilation": _ONES, "window_reversal": _NO_REVERSAL,
                              "precision_config": _default_precision},
    "stablehlo.reduce_window": _WINDOW,
    "stablehlo.select_and_scatter": {"window_strides": _ONES, "padding": _ZEROS},
    "stablehlo.gather": _INDICES,
    "stablehlo.dynamic_gather": _INDICES,
    "stablehlo.scatter": _INDICES,
    "stablehlo.sort": {"is_stable": _is_false},
    "stablehlo.custom_call": {"backend_config": _empty_string, "has_side_effect": _is_false},
}


@register_pass("drop-default-attributes", "remove attributes that hold their StableHLO default (as portable "
                                          "artifacts do), so a module and its artifact print alike",
               ops=tuple(DEFAULTS), preserves={Fact.CALL_TARGETS, Fact.OPS, Fact.VALID})
def drop_default_attributes(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.walk(tuple(DEFAULTS)):
        defaults = DEFAULTS[op.name]
        for name in [n for n in defaults if n in op.attributes]:
            if defaults[name](op.attributes[name]):
                del op.attributes[name]
