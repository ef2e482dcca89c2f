"""Typed values of HLO instruction and module attributes.

`INSTRUCTION_ATTRS` maps each attribute name XLA prints to the kind of value it holds;
the parser reads and the printer writes each kind (one function per kind in each).
`OPCODE_ATTRS` says which of them each opcode takes.  An attribute outside its opcode's
set is an error; the parser's `allow_unknown_attributes` option keeps such attributes
verbatim as `Raw` instead, with a warning naming each.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from converter.hlo.escapes import c_unescape, c_unescape_bytes
from converter.hlo.ir import Raw, Shape  # noqa: F401  (Raw: attrs.Raw, an attribute value kind)


@dataclass(frozen=True, slots=True)
class SliceDim:
    start: int
    limit: int
    stride: int = 1


@dataclass(frozen=True, slots=True)
class PaddingDim:
    """One dimension of `pad`'s `padding=low_high[_interior]` (low/high may be negative)."""

    low: int
    high: int
    interior: int = 0


@dataclass(frozen=True, slots=True)
class WindowDim:
    size: int = 1
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    lhs_dilation: int = 1
    rhs_dilation: int = 1
    reversal: bool = False


@dataclass(frozen=True, slots=True)
class Window:
    dims: tuple[WindowDim, ...]


@dataclass(frozen=True, slots=True)
class ConvDimLabels:
    """`dim_labels=b01f_01io->b01f`: which dimension is batch, feature, spatial."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]
    text: str


@dataclass(frozen=True, slots=True)
class IotaDeviceList:
    """`[G,S]<=[d0,d1,...]T(perm)`: iota(prod d) reshaped to d, transposed, reshaped."""

    shape: tuple[int, ...]
    reshape_dims: tuple[int, ...]
    transpose: tuple[int, ...] = ()

    def device_ids(self) -> list[int]:
        import numpy as np

        n = 1
        for d in self.reshape_dims:
            n *= d
        ids = np.arange(n).reshape(self.reshape_dims)
        if self.transpose:
            ids = ids.transpose(self.transpose)
        return [int(x) for x in ids.reshape(-1)]


@dataclass(frozen=True, slots=True)
class MeshAxisRef:
    """An axis of a mesh, or a sub-axis `'x':(pre_size)size` of one: the axis (of size
    N) seen as `[pre_size, size, N / (pre_size * size)]`, and its middle factor."""

    name: str
    pre_size: int = 0  # 0: the whole axis
    size: int = 0

    @property
    def is_sub_axis(self) -> bool:
        return self.pre_size > 0


@dataclass(frozen=True, slots=True)
class Mesh:
    """`mesh['x'=2,'y'=4]`, optionally `, device_ids=(0,2,1,3)` or `, device_ids=([2,2]T(1,0))`.

    Devices are numbered by the iota over the axis sizes (row-major) unless the mesh
    lists them: `device_ids` explicitly, or `device_iota` as iota(prod(reshape_dims))
    reshaped, transposed and flattened.
    """

    axes: tuple[tuple[str, int], ...]
    device_ids: tuple[int, ...] = ()
    device_iota: IotaDeviceList | None = None

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a for a, _ in self.axes)

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        return tuple(n for _, n in self.axes)

    def devices(self) -> list[int]:
        """Device ids in mesh order (row-major over the axes)."""
        if self.device_iota is not None:
            return self.device_iota.device_ids()
        if self.device_ids:
            return list(self.device_ids)
        n = 1
        for size in self.axis_sizes:
            n *= size
        return list(range(n))


@dataclass(frozen=True, slots=True)
class ReplicaGroups:
    """Replica groups expanded to explicit device lists, whatever syntax the dump used.

    `groups == ()` is XLA's `{}`: one group of all participants.  `iota` is set when the
    dump used the iota form; `mesh` / `mesh_axes` (and `mesh_text`, the exact text,
    which the printer writes back) when it used the mesh-axes form
    `mesh['x'=2,'y'=2] {'y'}`.
    """

    groups: tuple[tuple[int, ...], ...]
    iota: IotaDeviceList | None = None
    mesh_text: str = ""
    mesh: Mesh | None = None
    mesh_axes: tuple[MeshAxisRef, ...] = ()


@dataclass(frozen=True, slots=True)
class NamedSharding:
    """A mesh ("V3") sharding: `{mesh['x'=2,'y'=2], [{'x'}, {'y', ?}], replicated={'z'}}`
    or `{maximal_mesh[device_id=3]}`.

    `dims` holds, per tensor dimension, the axes it is split along (major first) and
    whether it is open (`?`); `kind` is "replicated", "manual" or "unreduced" for the
    whole-array forms (`{mesh[...], manual}`), "maximal" for maximal_mesh, else "".
    """

    mesh: Mesh | None
    dims: tuple[tuple[tuple[MeshAxisRef, ...], bool], ...] = ()
    kind: str = ""
    replicated_axes: tuple[MeshAxisRef, ...] = ()
    unreduced_axes: tuple[MeshAxisRef, ...] = ()
    manual_axes: tuple[MeshAxisRef, ...] = ()
    maximal_device: int = -1


@dataclass(frozen=True, slots=True)
class Sharding:
    """An `HloSharding`.

    kind: replicated | manual | unknown | unreduced | maximal | tiled | tuple.
    For tiled: `tile_dims` is the tile-assignment shape (including any trailing
    replication / subgroup dims) and `devices` the device ids in tile order.
    A mesh sharding (`{mesh[...], [...]}`) is read as the equivalent tiled (or
    replicated, manual, maximal) sharding, as XLA converts it, and keeps its own form in
    `named`, which the printer writes back.
    """

    kind: str
    tile_dims: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()
    iota: IotaDeviceList | None = None
    last_tile_dim_replicate: bool = False
    # Types of trailing subgroup dims (`last_tile_dims={manual, replicated}`).
    last_tile_dims: tuple[str, ...] = ()
    device: int = -1  # maximal
    elements: tuple["Sharding", ...] = ()  # tuple
    # `shard_as N` / `shard_like N`: ("as" | "like", N); ("", -1) when absent.
    shard_group: tuple[str, int] = ("", -1)
    # `metadata={...}` or `metadata={{...}, {...}}`: the exact text of the value.
    metadata: str = ""
    named: NamedSharding | None = None

    @property
    def num_subgroup_dims(self) -> int:
        return len(self.last_tile_dims) + (1 if self.last_tile_dim_replicate else 0)

    @property
    def data_tile_dims(self) -> tuple[int, ...]:
        """Tile counts of the data dimensions only (subgroup dims dropped)."""
        n = self.num_subgroup_dims
        return self.tile_dims[: len(self.tile_dims) - n] if n else self.tile_dims


@dataclass(frozen=True, slots=True)
class OutputOperandAlias:
    output_index: tuple[int, ...]
    operand: int
    operand_index: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class InputOutputAlias:
    output_index: tuple[int, ...]
    parameter: int
    parameter_index: tuple[int, ...]
    kind: str = ""  # "may-alias" / "must-alias" / ""


@dataclass(frozen=True, slots=True)
class BufferDonor:
    parameter: int
    parameter_index: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ProgramShape:
    parameters: tuple[Shape, ...]
    result: Shape


@dataclass(slots=True)
class BackendConfig:
    """`backend_config=`: JSON (`{...}` or an escaped string) or an MLIR dictionary.

    `value` is the parsed dict (or the plain string when it is neither); `raw` is the
    exact text of the dump; `form` is "json", "string" or "mlir".
    """

    value: Any
    raw: str
    form: str

    def text(self) -> str:
        """The config as XLA stores it on the instruction (the string, unquoted)."""
        if self.form == "string":
            return c_unescape(self.raw[1:-1])
        return self.raw

    def data(self) -> bytes:
        """The config's exact bytes.  A string config may be binary (Transformer Engine's
        opaque descriptors: packed structs), which `text()` cannot hold losslessly."""
        if self.form != "string":
            return self.raw.encode("utf-8")
        return c_unescape_bytes(self.raw[1:-1])


@dataclass(frozen=True, slots=True)
class MlirAttr:
    """An MLIR attribute value inside an MLIR dictionary we do not model (`dense<...>`)."""

    text: str


@dataclass(frozen=True, slots=True)
class Statistics:
    """`statistics={visualizing_index=1,stat-0=0.5}`: numbers for XLA's graph viewer."""

    visualizing_index: int = -1  # -1: `statistics={}`
    stats: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class ResultAccuracy:
    """`result_accuracy={mode=highest}` or `{tolerance={atol=..,rtol=..,ulps=..}}` on
    unary transcendental ops: how exact the implementation must be."""

    mode: str = ""  # "default" | "highest" (as written; XLA reads it case-insensitively)
    tolerance: tuple[tuple[str, float], ...] = ()  # (("atol", 1e-3), ...), in written order


@dataclass(frozen=True, slots=True)
class OriginalArray:
    """One leaf of `origin=`: the instruction of the original (pre-optimization) module,
    and the index inside its shape, that this value was."""

    instruction: str
    shape_index: tuple[int, ...] = ()


# A tree of tuples whose leaves are OriginalArray, or None for a leaf with no origin.
OriginTree = Any


@dataclass(frozen=True, slots=True)
class Origin:
    """`origin={...}` (an HloInstruction's original value).

    `tree` mirrors the instruction's shape: a tuple of subtrees per tuple shape, else an
    OriginalArray (or None).  `synthetic_call` is `{[synthetic_call]}`.  Newer XLA
    writes a second part, a bracketed list of strings (`{(),[""]}` for a synthetic
    call); it is kept in `call_names` (None when absent).
    """

    tree: OriginTree = None
    synthetic_call: bool = False
    call_names: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Domain:
    """`domain={kind="sharding", entry={...}, exit={...}}` on a `domain` instruction."""

    kind: str
    entry: Sharding | None = None
    exit: Sharding | None = None


@dataclass(frozen=True, slots=True)
class LiteralAttr:
    """`literal=s32[2]{0} {1, 2}` on a custom-call: a shape and its values (a numpy
    array, or a tuple of LiteralAttr for a tuple literal `( s32[] 1, f32[] 2 )`)."""

    shape: Shape
    value: Any


# Kinds of values the parser knows how to read and the printer how to write.
INT, FLOAT, BOOL, IDENT, STRING = "int", "float", "bool", "ident", "string"
INTS, IDENTS, NAMES, COMP, COMPS = "ints", "idents", "names", "comp", "comps"
SLICE, WINDOW, DIM_LABELS, GROUPS, PAIRS = "slice", "window", "dim_labels", "groups", "pairs"
PADDING = "padding"
SHARDING, FRONTEND, BACKEND, SHAPES, OUT_ALIAS, SHAPE = (
    "sharding", "frontend", "backend", "shapes", "out_alias", "shape",
)
BOOLS, INTS_OR_LISTS, STATISTICS, RESULT_ACCURACY, ORIGIN, DOMAIN, LITERAL = (
    "bools", "ints_or_lists", "statistics", "result_accuracy", "origin", "domain", "literal",
)
# `{lhs={sparsity=1x4 dimension=2 stride=0}}`: per-operand sub-attributes, values kept
# as ints or as their text (`1x4`).
OPERAND_CONFIGS = "operand_configs"
# A known attribute whose value the IR keeps as the exact balanced `{...}` text.
RAW_BRACED = "raw_braced"

INSTRUCTION_ATTRS: dict[str, str] = {
    # integers
    "index": INT, "channel_id": INT, "feature_group_count": INT, "batch_group_count": INT,
    "index_vector_dim": INT, "exponent_bits": INT, "mantissa_bits": INT,
    "feature_index": INT, "k": INT,
    "cross_program_prefetch_index": INT, "iota_dimension": INT, "async_group_id": INT,
    "num_carries": INT, "inferred_dimension": INT, "delta": INT,
    # floats
    "epsilon": FLOAT,
    # booleans
    "use_global_device_ids": BOOL, "constrain_layout": BOOL, "indices_are_sorted": BOOL,
    "unique_indices": BOOL, "is_stable": BOOL, "largest": BOOL,
    "custom_call_has_side_effect": BOOL, "left_side": BOOL, "lower": BOOL,
    "unit_diagonal": BOOL, "is_host_transfer": BOOL, "is_cross_program_prefetch": BOOL,
    "has_dynamic_root": BOOL, "is_reverse": BOOL, "is_associative": BOOL, "is_composite": BOOL,
    # integer lists
    "dimensions": INTS, "lhs_batch_dims": INTS, "rhs_batch_dims": INTS,
    "lhs_contracting_dims": INTS, "rhs_contracting_dims": INTS, "offset_dims": INTS,
    "collapsed_slice_dims": INTS, "start_index_map": INTS,
    "operand_batching_dims": INTS, "start_indices_batching_dims": INTS,
    "update_window_dims": INTS, "inserted_window_dims": INTS,
    "scatter_dims_to_operand_dims": INTS, "input_batching_dims": INTS,
    "scatter_indices_batching_dims": INTS, "fft_length": INTS, "dynamic_slice_sizes": INTS,
    # gather's `slice_sizes={1,2}`; the in-place collective-permute's `{{1,2},{3,4}}`.
    "slice_sizes": INTS_OR_LISTS,
    "lhs_ragged_dims": INTS, "rhs_group_dims": INTS,
    # bare identifiers (enums)
    "kind": IDENT, "direction": IDENT, "type": IDENT, "distribution": IDENT,
    "algorithm": IDENT, "fft_type": IDENT, "padding_type": IDENT, "api_version": IDENT,
    "transpose_a": IDENT, "schedule": IDENT,
    # compare's `order=TOTAL|PARTIAL` (newer XLA's spelling of `type=TOTALORDER`).
    "order": IDENT, "convolution_kind": IDENT, "conv_kind": IDENT, "mode": IDENT,
    # quoted strings
    "custom_call_target": STRING, "infeed_config": STRING, "outfeed_config": STRING,
    "async_execution_thread": STRING,
    # identifier lists
    "operand_precision": IDENTS,
    # instruction names
    "control-predecessors": NAMES,
    # called computations
    "to_apply": COMP, "condition": COMP, "body": COMP, "true_computation": COMP,
    "false_computation": COMP, "select": COMP, "scatter": COMP,
    "calls": COMPS, "branch_computations": COMPS, "called_computations": COMPS,
    # structured
    "slice": SLICE, "padding": PADDING, "window": WINDOW, "dim_labels": DIM_LABELS,
    "replica_groups": GROUPS, "source_target_pairs": PAIRS, "sharding": SHARDING,
    "frontend_attributes": FRONTEND, "backend_config": BACKEND,
    "operand_layout_constraints": SHAPES, "output_to_operand_aliasing": OUT_ALIAS,
    "outfeed_shape": SHAPE,
    # generic
    "parameter_replication": BOOLS, "statistics": STATISTICS, "result_accuracy": RESULT_ACCURACY,
    "origin": ORIGIN, "domain": DOMAIN, "literal": LITERAL,
    "sparsity_config": OPERAND_CONFIGS, "block_scaling_config": OPERAND_CONFIGS,
}

# The values of enum attributes, as XLA's parser takes them (jaxlib 0.10 to 0.12 take the
# same; tests/hlo/test_enums.py probes every one) and spelled as XLA prints them.  Where
# the flag is True XLA takes any case (it looks the value up in upper case), and the
# parser writes the value as printed; elsewhere the case must match.  Anything else is
# an error as in XLA: `direction=LTE` had reached MLIR and aborted the process.
# API_VERSION_UNSPECIFIED, which jaxlib refuses, is what torch-xla's Neuron backend prints.
DOT_ALGORITHMS = (
    "unset", "dot_any_f8_any_f8_f32", "dot_any_f8_any_f8_f32_fast_accum", "dot_f16_f16_f16", "dot_f16_f16_f32",
    "dot_bf16_bf16_bf16", "dot_bf16_bf16_f32", "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6",
    "dot_bf16_bf16_f32_x9", "dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3", "dot_f32_f32_f32", "dot_f64_f64_f64",
)
RNG_ALGORITHMS = ("rng_default", "rng_three_fry", "rng_philox")
_CONVOLUTION_KINDS = (("fprop", "wgrad", "dgrad"), False)
ENUMS: dict[str, tuple[tuple[str, ...], bool]] = {
    "kind": (("kLoop", "kInput", "kOutput", "kCustom"), False),
    "direction": (("EQ", "NE", "GE", "GT", "LE", "LT"), False),
    "type": (("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"), False),
    "order": (("TOTAL", "PARTIAL"), False),
    "distribution": (("rng_uniform", "rng_normal", "rng_invalid"), True),
    "fft_type": (("FFT", "IFFT", "RFFT", "IRFFT"), False),
    "padding_type": (("PADDING_INVALID", "PADDING_VALID", "PADDING_SAME"), False),
    "api_version": (("API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
                     "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"), True),
    "schedule": (("SCHEDULE_NONE", "SCHEDULE_LATEST", "SCHEDULE_EARLIEST"), True),
    "transpose_a": (("TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"), False),
    "mode": (("cross_replica", "cross_partition", "cross_replica_and_partition", "flattened_id"), False),
    "convolution_kind": _CONVOLUTION_KINDS,
    "conv_kind": _CONVOLUTION_KINDS,
    "operand_precision": (("default", "high", "highest"), True),
}


def enum_values(key: str, opcode: str) -> tuple[tuple[str, ...], bool] | None:
    """The values `key` takes on `opcode` and whether in any case (None: no enum)."""
    if key == "algorithm":
        return (RNG_ALGORITHMS if opcode == "rng-bit-generator" else DOT_ALGORITHMS), True
    return ENUMS.get(key)


# Which attributes each opcode takes, as XLA's parser declares them (hlo_parser.cc:
# ParseInstructionRhs adds COMMON_ATTRS to every opcode, CreateInstruction the rest),
# plus the few that newer XLA prints (collective-reduce, collective-broadcast's
# has_dynamic_root, topk's is_stable, compare's order, convolution's algorithm and
# block_scaling_config) and older XLA printed (async_group_id).  An attribute that is
# not in its opcode's set is an error, as in XLA: a misspelled `replica_groups` or
# `channel_id` silently dropped would change what the module computes.
COMMON_ATTRS = frozenset({
    "metadata", "sharding", "frontend_attributes", "backend_config", "statistics", "control-predecessors",
    "origin", "parameter_replication",
})
_COLLECTIVE = ("replica_groups", "channel_id")
_DOT_DIMS = ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims", "operand_precision")
_ALL_REDUCE = ("to_apply", *_COLLECTIVE, "constrain_layout", "use_global_device_ids", "mode")
_ALL_GATHER = (*_COLLECTIVE, "dimensions", "constrain_layout", "use_global_device_ids")
_OPCODE_SPECIFIC: dict[str, tuple[str, ...]] = {
    **{op: () for op in (
        # unary, binary and ternary element-wise ops and other ops without attributes of their own
        "abs", "ceil", "floor", "negate", "not", "sign", "popcnt", "count-leading-zeros", "imag", "real",
        "is-finite", "round-nearest-afz", "round-nearest-even", "bitcast", "copy", "opt-barrier",
        "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "atan2", "complex",
        "and", "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical", "stochastic-convert",
        "clamp", "select", "convert", "bitcast-convert", "add-dependency", "after-all", "dynamic-reshape",
        "dynamic-update-slice", "partition-id", "replica-id", "tuple", "constant", "parameter",
        "all-gather-done", "all-reduce-done", "collective-permute-done", "copy-done",
    )},
    **{op: ("result_accuracy",) for op in (
        "acos", "acosh", "asin", "asinh", "atanh", "exponential", "exponential-minus-one", "log", "log-plus-one",
        "logistic", "sqrt", "cbrt", "rsqrt", "tanh", "erf", "sine", "sinh", "cosine", "cosh", "tan",
    )},
    "all-gather": _ALL_GATHER, "all-gather-start": _ALL_GATHER,
    # Newer XLA (jax 0.12's GPU compiler) reduces in place: the start's results alias its operands.
    "all-reduce": _ALL_REDUCE, "all-reduce-start": (*_ALL_REDUCE, "output_to_operand_aliasing"),
    "reduce-scatter": (*_ALL_REDUCE, "dimensions"),
    "collective-reduce": (*_ALL_REDUCE, "has_dynamic_root"),
    "all-to-all": (*_COLLECTIVE, "dimensions", "constrain_layout"),
    "ragged-all-to-all": (*_COLLECTIVE, "dimensions"),
    "collective-broadcast": (*_COLLECTIVE, "has_dynamic_root"),
    "collective-permute": ("source_target_pairs", "channel_id", "slice_sizes"),
    "collective-permute-start": ("source_target_pairs", "channel_id", "slice_sizes"),
    "copy-start": ("cross_program_prefetch_index", "is_cross_program_prefetch"),
    "send": ("channel_id", "is_host_transfer"), "send-done": ("channel_id", "is_host_transfer"),
    "recv": ("channel_id", "is_host_transfer"), "recv-done": ("channel_id", "is_host_transfer"),
    "async-start": ("calls", "async_execution_thread", "output_to_operand_aliasing", "async_group_id"),
    "async-update": ("calls", "async_execution_thread", "async_group_id"),
    "async-done": ("calls", "async_execution_thread", "async_group_id"),
    "reshape": ("inferred_dimension",),
    "broadcast": ("dimensions",), "concatenate": ("dimensions",), "reverse": ("dimensions",),
    "transpose": ("dimensions",), "get-dimension-size": ("dimensions",), "set-dimension-size": ("dimensions",),
    "reduce": ("to_apply", "dimensions"), "map": ("to_apply", "dimensions"),
    "sort": ("dimensions", "is_stable", "to_apply"),
    "scan": ("to_apply", "dimensions", "num_carries", "is_reverse", "is_associative"),
    "while": ("condition", "body"),
    "conditional": ("true_computation", "false_computation", "branch_computations"),
    "call": ("to_apply", "is_composite"),
    "fusion": ("calls", "kind", "output_to_operand_aliasing"),
    "get-tuple-element": ("index",),
    "reduce-window": ("window", "to_apply"),
    "select-and-scatter": ("select", "scatter", "window"),
    "convolution": ("window", "dim_labels", "feature_group_count", "batch_group_count", "convolution_kind",
                    "conv_kind", "operand_precision", "sparsity_config", "algorithm", "block_scaling_config"),
    "dot": (*_DOT_DIMS, "algorithm", "sparsity_config", "block_scaling_config"),  # the last two: jax 0.12
    "scaled-dot": (*_DOT_DIMS, "algorithm"),
    "ragged-dot": (*_DOT_DIMS, "lhs_ragged_dims", "rhs_group_dims"),
    "gather": ("offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim", "slice_sizes",
               "indices_are_sorted", "operand_batching_dims", "start_indices_batching_dims"),
    "scatter": ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "index_vector_dim",
                "to_apply", "indices_are_sorted", "unique_indices", "input_batching_dims",
                "scatter_indices_batching_dims"),
    "slice": ("slice",), "dynamic-slice": ("dynamic_slice_sizes",), "pad": ("padding",),
    "fft": ("fft_type", "fft_length"),
    "triangular-solve": ("left_side", "lower", "unit_diagonal", "transpose_a"),
    "cholesky": ("lower",),
    "compare": ("direction", "type", "order"),
    "batch-norm-training": ("epsilon", "feature_index"), "batch-norm-inference": ("epsilon", "feature_index"),
    "batch-norm-grad": ("epsilon", "feature_index"),
    "infeed": ("infeed_config",), "outfeed": ("outfeed_config", "outfeed_shape"),
    "rng": ("distribution",), "rng-get-and-update-state": ("delta",), "rng-bit-generator": ("algorithm",),
    "reduce-precision": ("exponent_bits", "mantissa_bits"),
    "iota": ("iota_dimension",),
    "topk": ("k", "largest", "is_stable"),
    "domain": ("domain",),
    "custom-call": ("custom_call_target", "window", "dim_labels", "feature_group_count", "batch_group_count",
                    "operand_layout_constraints", "custom_call_has_side_effect", "to_apply", "called_computations",
                    "output_to_operand_aliasing", "padding_type", "literal", "operand_precision", "schedule",
                    "api_version"),
}
OPCODE_ATTRS: dict[str, frozenset[str]] = {op: COMMON_ATTRS | frozenset(names) for op, names in _OPCODE_SPECIFIC.items()}
# `<op>-start/-update/-done` with their own opcode (the others are XLA's sugar for an
# async op wrapping <op>, whose -start takes <op>'s attributes).
DEDICATED_ASYNC = frozenset({"all-gather", "all-reduce", "collective-permute", "copy"})


def attributes_of(opcode: str) -> frozenset[str] | None:
    """The attribute names `opcode` takes (None for an opcode XLA's parser does not know)."""
    names = OPCODE_ATTRS.get(opcode)
    if names is not None:
        return names
    for suffix in ("-start", "-update", "-done"):
        base = opcode[: -len(suffix)]
        if opcode.endswith(suffix) and base not in DEDICATED_ASYNC and base in OPCODE_ATTRS:
            if suffix == "-start":
                return OPCODE_ATTRS[base] | {"async_execution_thread", "output_to_operand_aliasing", "async_group_id"}
            return COMMON_ATTRS | {"async_execution_thread", "async_group_id"}
    return None


# Module header attributes (`HloModule name, ...`).
MODULE_ATTRS: dict[str, str] = {
    "is_scheduled": BOOL,
    "entry_computation_layout": "program_shape",
    "input_output_alias": "io_alias",
    "buffer_donor": "buffer_donor",
    "alias_passthrough_params": BOOL,
    "num_partitions": INT,
    "replica_count": INT,
    "allow_spmd_sharding_propagation_to_parameters": BOOLS,
    "allow_spmd_sharding_propagation_to_output": BOOLS,
    "frontend_attributes": FRONTEND,
    "spmd_output_sharding": SHARDING,
    "spmd_parameters_shardings": "shardings",
    "use_auto_spmd_partitioning": BOOL,
    "launch_bound": INT,
    # Rare, and no consumer reads them: kept as their exact text.
    "origin_recovery_table": RAW_BRACED,
    "debug_attributes": RAW_BRACED,  # newer XLA only
}


@dataclass(slots=True)
class ParseWarnings:
    """Warnings raised while parsing (unknown attributes, each reported once)."""

    messages: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def once(self, key: str, message: str) -> bool:
        """Record `message` unless one was recorded under `key`; whether it was."""
        if key in self.seen:
            return False
        self.seen.add(key)
        self.messages.append(message)
        return True


# Attribute value types that are immutable and compare by value: frozen dataclasses of
# ints, strings, bools and tuples of them (no floats, whose == holds for -0.0 and 0.0).
_VALUE_KEY_TYPES = frozenset({SliceDim, PaddingDim, WindowDim, Window, ConvDimLabels, Sharding, Raw})


class _NoValueKey(Exception):
    pass


def value_key(value: Any) -> Any:
    """A hashable key for an attribute value (or a dict of them) that is equal only for
    the same value: bools and floats keep their type and exact bits (True is not 1, -0.0
    is not 0.0, a NaN is its bits); None for a value of a kind not known to compare so."""
    try:
        return (_value_key(value),)  # a tuple: the key of None is not None
    except _NoValueKey:
        return None


def _value_key(value: Any) -> Any:
    t = type(value)
    if t is int or t is str or value is None:
        return value
    if t is list or t is tuple:
        return tuple([_value_key(v) for v in value])
    if t is dict:  # marked: not the key of a list of pairs
        return (dict, tuple([(k, _value_key(v)) for k, v in value.items()]))
    if t is BackendConfig:
        return (t, value.form, value.raw)
    if t is bool:
        return (t, value)
    if t is float:
        return (t, struct.pack("<d", value))
    if t in _VALUE_KEY_TYPES:
        return value
    raise _NoValueKey
