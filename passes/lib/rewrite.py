"""Rewriting helpers shared by every pass: finding ops, reading their attributes,
building replacements at an op's location, replacing results.

Builders for StableHLO op sequences live in `converter.mlir.builders` (one place for
both the importer and the passes); this module re-exports it as `build`.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import numpy as np
from jaxlib.mlir import ir

from converter.common.errors import diagnostic
from converter.mlir import builders as build  # noqa: F401  (re-exported for passes)
from converter.mlir.locations import first_file_location, op_location
from passes.lib.errors import PassError
from passes.lib.registry import target_matches


def walk(module: ir.Module, names: str | Sequence[str] | None = None) -> list[ir.Operation]:
    """All ops (optionally only those named `names`) in pre-order.  Returns a list, so
    callers may rewrite while iterating.  A pass's first walk goes through the WalkTracker
    it is handed (passes.lib.walks), which may answer it without walking."""
    wanted = {names} if isinstance(names, str) else set(names) if names else None
    found: list[ir.Operation] = []
    append = found.append
    advance = ir.WalkResult.ADVANCE

    def visit(op: ir.Operation) -> ir.WalkResult:
        if wanted is None or op.name in wanted:
            append(op)
        return advance

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def custom_calls(module: ir.Module, targets: str | Sequence[str] | None = None) -> list[ir.Operation]:
    """`stablehlo.custom_call` ops whose target is in `targets` (exact, or prefix*), for
    tests and tools.  A pass looks its calls up through its WalkTracker, which leaves out
    the targets the user keeps (--allow-custom-call)."""
    pats = [targets] if isinstance(targets, str) else list(targets or [])
    return [op for op in walk(module, "stablehlo.custom_call")
            if not pats or any(target_matches(p, call_target(op)) for p in pats)]


# StableHLO's collectives.
COLLECTIVE_OPS = ("stablehlo.all_gather", "stablehlo.all_reduce", "stablehlo.reduce_scatter",
                  "stablehlo.collective_permute", "stablehlo.all_to_all", "stablehlo.collective_broadcast")


def call_target(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["call_target_name"]).value


def attr_to_python(attr: ir.Attribute) -> Any:
    """A Python value for an MLIR attribute (dicts, arrays, numbers, strings, bools)."""
    if isinstance(attr, ir.DictAttr):
        return {a.name: attr_to_python(a.attr) for a in attr}
    if isinstance(attr, ir.ArrayAttr):
        return [attr_to_python(a) for a in attr]
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        return int(attr.value)
    if isinstance(attr, ir.FloatAttr):
        return float(attr.value)
    if isinstance(attr, ir.StringAttr):
        try:
            return attr.value
        except (RuntimeError, UnicodeDecodeError):  # binary bytes (an opaque struct)
            return attr.value_bytes.decode("utf-8", errors="replace")
    if isinstance(attr, (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr, ir.DenseBoolArrayAttr)):
        return list(attr)
    if isinstance(attr, ir.DenseIntElementsAttr) and ir.ShapedType(attr.type).rank == 1:
        # a typed-FFI array attribute (`dense<[12, 8, 4]> : tensor<3xi64>`, splats included)
        n = ir.ShapedType(attr.type).shape[0]
        return [int(attr.get_splat_value().value)] * n if attr.is_splat else [int(v) for v in ir.DenseIntElementsAttr(attr)]
    if isinstance(attr, ir.UnitAttr):
        return True
    return str(attr)


def backend_config(op: ir.Operation) -> dict[str, Any]:
    """A custom-call's backend_config as a dict: a typed-FFI dictionary, or a JSON string
    (or `mhlo.backend_config` where the importer kept JSON beside an FFI call)."""
    attrs = op.attributes
    if "backend_config" in attrs:
        value = attr_to_python(attrs["backend_config"])
        if isinstance(value, dict) and value:
            return value
        if isinstance(value, str) and value.strip():
            try:
                parsed = json.loads(value)
            except ValueError:
                raise op_error(op, "backend_config is not JSON") from None
            return parsed if isinstance(parsed, dict) else {}
    if "mhlo.backend_config" in attrs:
        text = attr_to_python(attrs["mhlo.backend_config"])
        if isinstance(text, dict):  # a typed-FFI call's attribute dictionary
            return text
        try:
            return json.loads(text) if text else {}
        except ValueError:
            raise op_error(op, "backend_config is not JSON") from None
    return {}


def location_text(op: ir.Operation) -> str:
    """`file:line:col: %name` from an op's location, for messages (the printed location where
    it names no dump instruction)."""
    where = op_location(op.location)
    return f"{where.at}: %{where.instruction}" if where.at is not None else str(op.location)


def error_location(op: ir.Operation) -> str:
    """`file:line:col: error: %name`: how every error message about an op begins (the
    importer's and the parser's begin so too)."""
    where = op_location(op.location)
    return diagnostic(where.at, f"%{where.instruction}") if where.at is not None else diagnostic(None, str(op.location))


def op_error(op: ir.Operation, message: str) -> PassError:
    what = op.name
    if op.name == "stablehlo.custom_call":
        what = f"custom-call {call_target(op)}"
    return PassError(f"{error_location(op)} ({what}): {message}")


@contextmanager
def at(op: ir.Operation) -> Iterator[None]:
    """Build before `op`, at its location."""
    with op.location, ir.InsertionPoint(op):
        yield


def replace(op: ir.Operation, values: Sequence[ir.Value | None]) -> None:
    """Replace each result of `op` by a value (None: the result must be unused), erase op."""
    if len(values) != len(op.results):
        raise op_error(op, f"replacement has {len(values)} values for {len(op.results)} results")
    for result, value in zip(op.results, values):
        if value is None:
            if has_uses(result):
                raise op_error(op, "a result that the rewrite drops is still used")
            continue
        if value.type != result.type:
            raise op_error(op, f"replacement type {value.type} differs from result type {result.type}")
        result.replace_all_uses_with(value)
    op.erase()


def unspecified(op: ir.Operation, index: int, what: str) -> ir.Value | None:
    """The replacement of result `index` of `op`, whose contents the backend leaves
    unspecified (`what` says which: a destroyed input, a buffer the kernel never writes):
    None where nothing reads it; where something does (a tap of the call, extract's cut of
    it) a NaN of its type, so the value says it holds none instead of inventing numbers.
    A non-float result has no such value: reading it is an error naming it."""
    result = op.results[index]
    if not has_uses(result):
        return None
    element = ir.RankedTensorType(result.type).element_type
    if isinstance(element, (ir.ComplexType, ir.FloatType)):
        with at(op):
            nan = complex(float("nan"), float("nan")) if isinstance(element, ir.ComplexType) else float("nan")
            return build.scalar_constant(nan, element, ir.RankedTensorType(result.type).shape)
    raise op_error(op, f"result {index} ({what}) is read, but its contents are unspecified and its type "
                       f"{result.type} has no NaN to say so; read (tap) the other results instead")


def dump_layout(op: ir.Operation, which: str, index: int, rank: int) -> list[int]:
    """minor_to_major of operand/result leaf `index` as the dump printed it (row-major
    when the dump printed none).  `which` is "operand" or "result"; the importer keeps
    layouts as `hlo.<which>_layouts`, or as `<which>_layouts` where the call had layout
    constraints."""
    for key in (f"hlo.{which}_layouts", f"{which}_layouts"):
        if key in op.attributes:
            layouts = ir.ArrayAttr(op.attributes[key])
            if index < len(layouts):
                attr = ir.DenseElementsAttr(layouts[index])
                m2m = [int(x) for x in np.array(attr).reshape(-1)] if attr.type.shape[0] else []
                if sorted(m2m) == list(range(rank)):
                    return m2m
    return list(range(rank - 1, -1, -1))


def lookup_function(module: ir.Module, name: str) -> ir.Operation:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op.operation
    raise PassError(f"the module has no function @{name}")


def clone_function_body(fn: ir.Operation, args: Sequence[ir.Value]) -> list[ir.Value]:
    """Clone the single-block body of `fn` at the current insertion point with its
    arguments replaced by `args`; returns the values it returns.  (MLIR's inliner will
    not inline StableHLO: jaxlib registers no inliner interface for it.)"""
    block = fn.regions[0].blocks[0]
    mapping: dict[ir.Value, ir.Value] = dict(zip(block.arguments, args))
    for op in block.operations:
        op = op.operation
        if op.name in ("func.return", "stablehlo.return"):
            return [mapping.get(v, v) for v in op.operands]
        new = op.clone().operation
        _remap(new, mapping)
        for old, fresh in zip(op.results, new.results):
            mapping[old] = fresh
    raise PassError(f"function {ir.StringAttr(fn.attributes['sym_name']).value} has no return")


def _remap(op: ir.Operation, mapping: dict[ir.Value, ir.Value]) -> None:
    """Point `op` and the ops nested in its regions (which may capture outer values) at
    the mapped values."""
    def visit(inner: ir.Operation) -> ir.WalkResult:
        for old in list(inner.operands):
            new = mapping.get(old)
            if new is not None:
                inner.replace_uses_of_with(old, new)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)


def inline_calls(module: ir.Module) -> int:
    """Replace every func.call to a function of the module by a copy of its body.
    Returns the number of calls inlined (dead functions are left to symbol-dce)."""
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                 for op in module.body.operations if op.operation.name == "func.func"}
    count = 0
    while True:
        calls = walk(module, "func.call")
        if not calls:
            break
        for call in calls:
            callee = functions.get(ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
            if callee is None or len(callee.regions[0].blocks) != 1:
                raise PassError(f"{error_location(call)}: cannot inline a call to an external or multi-block function")
            with call.location, ir.InsertionPoint(call):
                results = clone_function_body(callee, list(call.operands))
            replace(call, results)
            count += 1
    return count


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that produces `value`, or None for a block argument."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation


def has_uses(value: ir.Value) -> bool:
    return any(True for _ in value.uses)


def tensor_shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def lapack_layout(rank: int) -> ir.Attribute:
    """Column-major in the two minor dimensions (LAPACK's), batch dimensions major."""
    if rank < 2:
        return build.layout_attr(range(rank - 1, -1, -1))
    return build.layout_attr([rank - 2, rank - 1] + list(range(rank - 3, -1, -1)))


def kernel_source_location(op: ir.Operation) -> str:
    """The Python source line a kernel compiler (Pallas' Mosaic or Triton lowering) recorded
    in a kernel op's location (`file:line`), if any."""
    found = first_file_location(op.location)
    return f"{found.file}:{found.line}" if found is not None else ""


def output_operand_aliases(op: ir.Operation) -> dict[int, int]:
    """A custom-call's `output_operand_aliases`: result index → aliased operand index."""
    if "output_operand_aliases" not in op.attributes:
        return {}
    found = {}
    for a in ir.ArrayAttr(op.attributes["output_operand_aliases"]):
        m = re.search(r"output_tuple_indices = \[(\d*)\], operand_index = (\d+)", str(a))
        if m:
            found[int(m.group(1) or 0)] = int(m.group(2))
    return found
