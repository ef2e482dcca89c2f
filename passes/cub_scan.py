"""cub-scan: XLA GPU's `xla.gpu.ext.cub_scan` (and its pre-scratch-size form
`xla.gpu.ext.cub_scan_unassigned_scratch_size`), a `scan` of a plain sum run by CUB →
`stablehlo.reduce_window` (a cumulative sum).

Form (XLA's xla/backends/gpu/transforms/scan_rewriter.cc, the FFI handler in
xla/stream_executor/cuda/cub_scan_kernel_cuda.cc and its kernel test): one operand d_in,
results (d_out of d_in's shape, u8 scratch); attributes vector_length, row_length,
column_length, kind (SUM), is_reverse. The kernel views the buffer in its physical order as
column_length rows of row_length contiguous elements (vector_length = 1: the scan dimension
is the most minor one) and writes each row's inclusive prefix sums.

Refused by name, each a call the GPU program does not run either: a second (init)
operand — every version of the rewriter read (XLA's scan_rewriter.cc, and the zml and
ROCm-era forks) passes the input alone and applies a non-zero init as a plain `add` of the
broadcast seed after the call, and the FFI handler binds one argument, d_in; is_reverse and
vector_length ≠ 1 (the dispatch in xla/stream_executor/cuda/cub_scan_kernel_cuda_impl.cu.cc
returns "Only forward scan is supported." / "Only vector_length = 1 is supported."); a kind
other than SUM ("Unsupported scan operation."); an element type outside bf16, f16, f32, f64
and the 8- to 64-bit integers ("Unsupported element type for CUB scan"); lengths that do not
cover the operand.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

CUB_SCAN = "xla.gpu.ext.cub_scan"
CUB_SCAN_UNASSIGNED = "xla.gpu.ext.cub_scan_unassigned_scratch_size"
SUM_KINDS = (1, "1", "SUM", "kSum")  # CubScanOptions.Kind / CubScanKind: 0 invalid, 1 sum
# the element types the handler dispatches on (cub_scan_kernel_cuda_impl.cu.cc)
SCAN_TYPES = ("bf16", "f16", "f32", "f64", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64")
HANDLER = "XLA's CUB scan handler (xla/stream_executor/cuda/cub_scan_kernel_cuda_impl.cu.cc)"


@register_pass("cub-scan", "CUB inclusive-sum scan calls → reduce_window (cumulative sum)",
               targets=(CUB_SCAN, CUB_SCAN_UNASSIGNED), preserves={Fact.CALL_TARGETS, Fact.USES})
def lower_cub_scan(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls((CUB_SCAN, CUB_SCAN_UNASSIGNED)):
        lower_cub_scan_call(op)


def _int(op: ir.Operation, cfg: dict, key: str) -> int:
    try:
        return int(cfg[key])
    except (KeyError, TypeError, ValueError):
        raise rewrite.op_error(op, f"backend_config.{key} is missing or not an integer: {cfg.get(key)!r}") from None


def lower_cub_scan_call(op: ir.Operation) -> None:
    operands, results = list(op.operands), list(op.results)
    if len(operands) != 1:
        raise rewrite.op_error(op, f"a CUB scan with {len(operands)} operands: XLA's scan rewriter "
                                   "(xla/backends/gpu/transforms/scan_rewriter.cc) writes the input alone and adds a "
                                   "non-zero init after the call, and the FFI handler binds one argument (d_in), so a "
                                   "call with an init operand is no form XLA writes or runs; re-dump with the XLA that "
                                   "runs the program, or give the scan as the `scan` opcode")
    x = operands[0]
    shape = builders.shape_of(x)
    if not results or ir.RankedTensorType(results[0].type).shape != shape:
        raise rewrite.op_error(op, "expected results (d_out of the operand's shape, scratch)")
    cfg = rewrite.backend_config(op)
    kind = cfg.get("kind")
    if kind not in SUM_KINDS:
        raise rewrite.op_error(op, f"backend_config.kind {kind!r}: {HANDLER} runs SUM only (\"Unsupported scan "
                                   f"operation.\")")
    if cfg.get("is_reverse") not in (None, False, "false", 0):
        raise rewrite.op_error(op, f"backend_config.is_reverse=true: {HANDLER} fails it (\"Only forward scan is "
                                   f"supported.\")")
    element = str(builders.element_type_of(x))
    if element not in SCAN_TYPES:
        raise rewrite.op_error(op, f"element type {element}: {HANDLER} takes {', '.join(SCAN_TYPES)} "
                                   f"(\"Unsupported element type for CUB scan\")")
    vector, row, column = (_int(op, cfg, k) for k in ("vector_length", "row_length", "column_length"))
    total = 1
    for d in shape:
        total *= d
    if vector != 1 or row * column != total:
        raise rewrite.op_error(op, f"vector_length={vector}, row_length={row}, column_length={column} do not describe "
                              f"rows of an operand of {total} elements (vector_length must be 1: {HANDLER} "
                                   f"fails others)")
    rank = len(shape)
    major_to_minor = list(reversed(rewrite.dump_layout(op, "operand", 0, rank)))
    inverse = [major_to_minor.index(d) for d in range(rank)]
    with rewrite.at(op):
        physical = builders.transpose(x, major_to_minor) if major_to_minor != list(range(rank)) else x
        physical_shape = builders.shape_of(physical)
        rows = builders.reshape(physical, [column, row])
        summed = _inclusive_sum_along_rows(rows)
        y = builders.reshape(summed, physical_shape)
        if major_to_minor != list(range(rank)):
            y = builders.transpose(y, inverse)
    rest = [None if not rewrite.has_uses(r) else _zeros(op, r) for r in results[1:]]
    rewrite.replace(op, [y] + rest)


def _inclusive_sum_along_rows(x: ir.Value) -> ir.Value:
    """y[c, j] = Σ_{i ≤ j} x[c, i]: a window of the whole row, padded on the left."""
    column, row = builders.shape_of(x)
    et = builders.element_type_of(x)
    scalar = ir.RankedTensorType.get([], et)
    window = builders.op("stablehlo.reduce_window", [x.type], [x, builders.scalar_constant(0, et)], {
        "window_dimensions": builders.i64_array([1, row]),
        "padding": builders.i64_elements([[0, 0], [row - 1, 0]], shape=(2, 2))}, regions=1)
    block = window.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        builders.op("stablehlo.return", [], [builders.binary("add", block.arguments[0], block.arguments[1])])
    return window.result


def _zeros(op: ir.Operation, result: ir.Value) -> ir.Value:
    with rewrite.at(op):
        return builders.zeros_like_type(result.type)
