"""The `scan` opcode (XLA, 2026): `scan(inputs..., inits...), dimensions={d},
is_reverse=..., [num_carries=C,] to_apply=body`, where body(input slices..., carries...)
returns (output elements..., new carries...) and the result is (outputs..., final carries...),
each output stacking one element per step along d.

Imported as XLA's own ScanExpander (xla/service/scan_expander.cc) lowers it: a
`stablehlo.while` over the steps whose state is (step, carries, inputs, outputs); step i
reads index i (L−1−i when is_reverse) of each input along d and writes each output there.
The number of carries is `num_carries` when the dump prints it; otherwise the one split of
the operands whose shapes fit the body's parameters and the results (ambiguous splits are an
error naming them)."""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.importer.core import ComputationImporter, operand_leaves
from converter.importer.registry import import_rule
from converter.mlir import builders


def _shape(t: ir.Type) -> list[int]:
    return list(ir.RankedTensorType(t).shape)


def _without(shape: list[int], dim: int) -> list[int]:
    return shape[:dim] + shape[dim + 1:]


def _carry_counts(operand_types, param_types, result_types, dim: int, length: int) -> list[int]:
    """Every number of carries the shapes allow."""
    fits = []
    for carries in range(0, min(len(operand_types), len(result_types)) + 1):
        n_inputs, n_outputs = len(operand_types) - carries, len(result_types) - carries
        inputs, inits = operand_types[:n_inputs], operand_types[n_inputs:]
        outputs, finals = result_types[:n_outputs], result_types[n_outputs:]
        ok = all(len(_shape(t)) > dim and _shape(t)[dim] == length and _without(_shape(t), dim) == _shape(p)
                 for t, p in zip(inputs, param_types[:n_inputs]))
        ok = ok and all(_shape(t) == _shape(p) == _shape(f)
                        for t, p, f in zip(inits, param_types[n_inputs:], finals))
        ok = ok and all(len(_shape(t)) > dim and _shape(t)[dim] == length for t in outputs)
        if ok and n_inputs >= 0 and n_outputs >= 0:
            fits.append(carries)
    return fits


@import_rule("scan")
def import_scan(ctx, *operands):
    values = [v for x in operands for v in operand_leaves(x)]
    if len(values) != len(operands):
        raise ctx.error("scan with a tuple-shaped operand is not supported")
    dims = list(ctx.attrs.get("dimensions") or [])
    if len(dims) != 1:
        raise ctx.error(f"scan dimensions={dims}: exactly one scan dimension is supported")
    dim = dims[0]
    comp_name = ctx.attrs["to_apply"]
    comp = ctx.computation(comp_name)
    param_types = [t for p in comp.parameters for t in ctx.module_importer.leaf_types(p.shape)]
    result_types = ctx.result_types()
    if len(param_types) != len(values):
        raise ctx.error(f"scan has {len(values)} operands; its body {comp_name} takes {len(param_types)}")
    first = _shape(values[0].type)
    if dim >= len(first):
        raise ctx.error(f"scan dimension {dim} is outside operand 0 of rank {len(first)}")
    length = first[dim]
    carries = ctx.attrs.get("num_carries")
    if carries is None:
        fits = _carry_counts([v.type for v in values], param_types, result_types, dim, length)
        if len(fits) != 1:
            raise ctx.error(f"scan without num_carries: the shapes allow {fits or 'no'} numbers of carries")
        carries = fits[0]
    n_inputs, n_outputs = len(values) - carries, len(result_types) - carries
    if n_inputs < 1 or n_outputs < 0:
        raise ctx.error(f"scan num_carries={carries} leaves {n_inputs} inputs and {n_outputs} outputs")
    inputs, inits = values[:n_inputs], values[n_inputs:]
    reverse = bool(ctx.attrs.get("is_reverse", False))
    s64 = ir.IntegerType.get_signless(64)
    outputs0 = [builders.zeros_like_type(t) for t in result_types[:n_outputs]]
    state = [builders.scalar_constant(0, s64)] + inits + inputs + outputs0
    types = [v.type for v in state]
    loop = builders.op("stablehlo.while", types, state, regions=2)
    cond = loop.regions[0].blocks.append(*types)
    with ir.InsertionPoint(cond):
        more = builders.compare(cond.arguments[0], builders.scalar_constant(length, s64), "LT", "SIGNED")
        builders.op("stablehlo.return", [], [more])
    body = loop.regions[1].blocks.append(*types)
    with ir.InsertionPoint(body):
        args = list(body.arguments)
        step = args[0]
        accs = args[1:1 + carries]
        ins = args[1 + carries:1 + carries + n_inputs]
        outs = args[1 + carries + n_inputs:]
        index = step
        if reverse:
            index = builders.binary("subtract", builders.scalar_constant(length - 1, s64), step)
        zero = builders.scalar_constant(0, s64)
        slices = []
        for x in ins:
            shape = _shape(x.type)
            starts = [index if d == dim else zero for d in range(len(shape))]
            piece = builders.dynamic_slice(x, starts, [1 if d == dim else n for d, n in enumerate(shape)])
            slices.append(builders.reshape(piece, _without(shape, dim)))
        results = ComputationImporter(ctx.module_importer, comp, [[v] for v in slices + accs]).run()
        results = operand_leaves(results)
        if len(results) != n_outputs + carries:
            raise ctx.error(f"scan body {comp_name} returns {len(results)} values; {n_outputs} outputs and "
                            f"{carries} carries expected")
        new_outs = []
        for out, element in zip(outs, results[:n_outputs]):
            shape = _shape(out.type)
            starts = [index if d == dim else zero for d in range(len(shape))]
            update = builders.reshape(element, [1 if d == dim else n for d, n in enumerate(shape)])
            new_outs.append(builders.dynamic_update_slice(out, update, starts))
        next_step = builders.binary("add", step, builders.scalar_constant(1, s64))
        builders.op("stablehlo.return", [], [next_step] + list(results[n_outputs:]) + ins + new_outs)
    final = list(loop.results)
    return final[1 + carries + n_inputs:] + final[1:1 + carries]
