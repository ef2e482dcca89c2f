"""HLO IR → HLO text that XLA's parser accepts (`module_to_text`)."""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np

from converter.hlo import attrs
from converter.hlo.escapes import c_escape
from converter.hlo.ir import Computation, Instruction, Layout, Metadata, Module, Shape, StackFrames, shape_to_text  # noqa: F401  (shape_to_text: the printer's, as callers import it)


# ----------------------------------------------------------------------- literals
def _scalar_text(v: Any, etype: str) -> str:
    if etype == "pred":
        return "true" if bool(v) else "false"
    if etype in ("c64", "c128"):
        return f"({_scalar_text(v.real, 'f64')}, {_scalar_text(v.imag, 'f64')})"
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return str(int(v))
    f = float(v)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f == int(f) and abs(f) < 1e16:
        return str(int(f))
    return repr(f)


_NAN_MANTISSA = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}


def _nan_texts(arr: np.ndarray, etype: str) -> dict[int, str]:
    """`nan`, `-nan` or `nan(0x<payload>)` for each NaN of a float array, by flat index
    (XLA writes the sign, and the payload when it is not the default quiet NaN's)."""
    mantissa = _NAN_MANTISSA.get(etype)
    flat = arr.reshape(-1)
    with np.errstate(invalid="ignore"):
        nans = np.flatnonzero(np.isnan(flat.astype(np.float64)))
    out: dict[int, str] = {}
    if not len(nans):
        return out
    width = flat.dtype.itemsize * 8
    bits = flat.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[flat.dtype.itemsize]) if mantissa else None
    for i in nans:
        if bits is None:
            out[int(i)] = "nan"
            continue
        b = int(bits[i])
        payload = b & ((1 << mantissa) - 1)
        text = "nan" if payload == 1 << (mantissa - 1) else f"nan(0x{payload:x})"
        out[int(i)] = ("-" if b >> (width - 1) else "") + text
    return out


def literal_to_text(value: Any, shape: Shape, elided: bool = False) -> str:
    if elided:
        return "{...}"
    if shape.is_tuple:
        return "( " + ", ".join(literal_to_text(v, s) for v, s in zip(value, shape.tuple_shapes)) + " )"
    if shape.is_token or value is None:
        return ""
    arr = np.asarray(value)
    etype = shape.element_type
    nan_texts = _nan_texts(arr, etype) if arr.dtype.kind not in "biuc" else {}
    if arr.dtype.kind not in "biufc":  # ml_dtypes (bf16, fp8, int4, ...): print via float64/int64
        arr = arr.astype(np.int64 if etype.startswith(("s", "u")) else np.float64)
    if shape.rank == 0:
        if nan_texts:
            return nan_texts[0]
        return _scalar_text(arr.reshape(()).item() if arr.dtype.kind != "c" else arr.reshape(())[()], etype)
    if etype == "pred":  # XLA writes predicate arrays as 1/0
        texts = ["1" if x else "0" for x in arr.reshape(-1)]
    else:
        texts = [_scalar_text(x, etype) for x in arr.reshape(-1)]
        for i, t in nan_texts.items():
            texts[i] = t
    dims = shape.dims

    def nested(start: int, depth: int) -> str:
        if depth == len(dims) - 1:
            return "{" + ", ".join(texts[start : start + dims[depth]]) + "}"
        stride = int(np.prod(dims[depth + 1:]))
        return "{ " + ", ".join(nested(start + k * stride, depth + 1) for k in range(dims[depth])) + " }"

    return nested(0, 0)


# --------------------------------------------------------------------- attributes
def _groups_text(groups: attrs.ReplicaGroups) -> str:
    if groups.iota is not None:
        return _iota_text(groups.iota)
    return "{" + ",".join("{" + ",".join(str(d) for d in g) + "}" for g in groups.groups) + "}"


def _iota_text(iota: attrs.IotaDeviceList) -> str:
    text = "[" + ",".join(map(str, iota.shape)) + "]<=[" + ",".join(map(str, iota.reshape_dims)) + "]"
    if iota.transpose:
        text += "T(" + ",".join(map(str, iota.transpose)) + ")"
    return text


def _quoted_single(name: str) -> str:
    return "'" + c_escape(name).replace("'", "\\'") + "'"


def _axis_ref_text(ref: attrs.MeshAxisRef) -> str:
    return _quoted_single(ref.name) + (f":({ref.pre_size}){ref.size}" if ref.is_sub_axis else "")


def _axis_refs_text(refs: tuple[attrs.MeshAxisRef, ...]) -> str:
    return "{" + ", ".join(_axis_ref_text(r) for r in refs) + "}"


def mesh_to_text(mesh: attrs.Mesh) -> str:
    text = "mesh[" + ",".join(f"{_quoted_single(a)}={n}" for a, n in mesh.axes) + "]"
    if mesh.device_iota is not None:
        iota = mesh.device_iota
        text += ", device_ids=([" + ",".join(map(str, iota.reshape_dims)) + "]"
        if iota.transpose:
            text += "T(" + ",".join(map(str, iota.transpose)) + ")"
        text += ")"
    elif mesh.device_ids:
        text += ", device_ids=(" + ",".join(map(str, mesh.device_ids)) + ")"
    return text


def _named_sharding_text(ns: attrs.NamedSharding, metadata: str) -> str:
    if ns.kind == "maximal":
        parts = [f"maximal_mesh[device_id={ns.maximal_device}]"]
    else:
        parts = [mesh_to_text(ns.mesh)]
        if ns.kind:
            parts.append(ns.kind)
        else:
            parts.append("[" + ", ".join(
                "{" + ", ".join([_axis_ref_text(r) for r in refs] + (["?"] if is_open else [])) + "}"
                for refs, is_open in ns.dims) + "]")
        for key, refs in (("replicated", ns.replicated_axes), ("unreduced", ns.unreduced_axes),
                          ("manual", ns.manual_axes)):
            if refs:
                parts.append(f"{key}={_axis_refs_text(refs)}")
    if metadata:
        parts.append("metadata=" + metadata)
    return "{" + ", ".join(parts) + "}"


def sharding_to_text(sh: attrs.Sharding) -> str:
    if sh.named is not None:
        return _named_sharding_text(sh.named, sh.metadata)
    if sh.kind == "tuple":
        return "{" + ", ".join(sharding_to_text(e) for e in sh.elements) + "}"
    if sh.kind == "maximal":
        text = "{maximal device=" + str(sh.device)
    elif sh.kind != "tiled":
        text = "{" + sh.kind
    else:
        text = "{devices=[" + ",".join(map(str, sh.tile_dims)) + "]"
        if sh.iota is not None:
            text += "<=[" + ",".join(map(str, sh.iota.reshape_dims)) + "]"
            if sh.iota.transpose:
                text += "T(" + ",".join(map(str, sh.iota.transpose)) + ")"
        else:
            text += ",".join(map(str, sh.devices))
        if sh.last_tile_dim_replicate:
            text += " last_tile_dim_replicate"
        if sh.last_tile_dims:
            text += " last_tile_dims={" + ", ".join(sh.last_tile_dims) + "}"
    if sh.shard_group[0]:
        text += f" shard_{sh.shard_group[0]} {sh.shard_group[1]}"
    if sh.metadata:
        text += " metadata=" + sh.metadata
    return text + "}"


def _number_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e16 else repr(float(v))


def _statistics_text(st: attrs.Statistics) -> str:
    if st.visualizing_index < 0:
        return "{}"
    return "{" + ",".join([f"visualizing_index={st.visualizing_index}"] + [f"{k}={_number_text(v)}" for k, v in st.stats]) + "}"


def _result_accuracy_text(ra: attrs.ResultAccuracy) -> str:
    if ra.mode:
        return "{mode=" + ra.mode + "}"
    return "{tolerance={" + ",".join(f"{k}={_number_text(v)}" for k, v in ra.tolerance) + "}}"


def _origin_tree_text(tree: Any) -> str:
    if isinstance(tree, tuple):
        return "(" + ", ".join(_origin_tree_text(t) for t in tree) + ")"
    if tree is None:
        return "{}"
    index = (" {" + ",".join(map(str, tree.shape_index)) + "}") if tree.shape_index else ""
    return '{"' + c_escape(tree.instruction) + '"' + index + "}"


def _origin_text(origin: attrs.Origin) -> str:
    if origin.synthetic_call:
        return "{[synthetic_call]}"
    text = _origin_tree_text(origin.tree)
    if origin.call_names is not None:
        text += ",[" + ",".join('"' + c_escape(n) + '"' for n in origin.call_names) + "]"
    return "{" + text + "}"


def _domain_text(d: attrs.Domain) -> str:
    parts = [f'kind="{c_escape(d.kind)}"']
    if d.entry is not None:
        parts.append("entry=" + sharding_to_text(d.entry))
    if d.exit is not None:
        parts.append("exit=" + sharding_to_text(d.exit))
    return "{" + ", ".join(parts) + "}"


def _operand_configs_text(configs: dict) -> str:
    return "{" + " ".join(f"{k}={_operand_configs_text(v) if isinstance(v, dict) else v}" for k, v in configs.items()) + "}"


def _literal_attr_text(lit: attrs.LiteralAttr) -> str:
    if lit.shape.is_tuple:
        return "( " + ", ".join(_literal_attr_text(e) for e in lit.value) + " )"
    shape = lit.shape
    if shape.rank and shape.layout is None:
        # Without a layout XLA would read the `{` of the values as one.
        shape = Shape(shape.element_type, shape.dims, shape.dynamic, Layout(tuple(range(shape.rank - 1, -1, -1))))
    return shape_to_text(shape) + " " + literal_to_text(lit.value, shape, lit.value is None)


def _window_text(w: attrs.Window) -> str:
    if not w.dims:
        return "{}"
    parts = ["size=" + "x".join(str(d.size) for d in w.dims)]
    if any(d.stride != 1 for d in w.dims):
        parts.append("stride=" + "x".join(str(d.stride) for d in w.dims))
    if any(d.pad_low or d.pad_high for d in w.dims):
        parts.append("pad=" + "x".join(f"{d.pad_low}_{d.pad_high}" for d in w.dims))
    if any(d.lhs_dilation != 1 for d in w.dims):
        parts.append("lhs_dilate=" + "x".join(str(d.lhs_dilation) for d in w.dims))
    if any(d.rhs_dilation != 1 for d in w.dims):
        parts.append("rhs_dilate=" + "x".join(str(d.rhs_dilation) for d in w.dims))
    if any(d.reversal for d in w.dims):
        parts.append("rhs_reversal=" + "x".join(str(int(d.reversal)) for d in w.dims))
    return "{" + " ".join(parts) + "}"


def _index_text(index: tuple[int, ...]) -> str:
    return "{" + ",".join(map(str, index)) + "}"


def _frontend_text(fa: dict) -> str:
    def key(k: str) -> str:  # keys are identifiers; anything else was written quoted
        return k if re.fullmatch(r"[A-Za-z_][\w.\-]*", k) else '"' + c_escape(k) + '"'

    return "{" + ",".join(f"{key(k)}={v.text}" if isinstance(v, attrs.Raw) else f'{key(k)}="{c_escape(v)}"'
                          for k, v in fa.items()) + "}"


ATTR_PRINTERS: dict[str, Callable[[Any], str]] = {
    attrs.INT: str,
    attrs.FLOAT: repr,
    attrs.BOOL: lambda v: "true" if v else "false",
    attrs.IDENT: str,
    attrs.STRING: lambda v: '"' + c_escape(v) + '"',
    attrs.INTS: lambda v: "{" + ",".join(map(str, v)) + "}",
    attrs.IDENTS: lambda v: "{" + ",".join(v) + "}",
    attrs.NAMES: lambda v: "{" + ", ".join("%" + n for n in v) + "}",
    attrs.COMP: lambda v: "%" + v,
    attrs.COMPS: lambda v: "{" + ", ".join("%" + n for n in v) + "}",
    attrs.SLICE: lambda v: "{" + ", ".join(
        f"[{d.start}:{d.limit}" + (f":{d.stride}]" if d.stride != 1 else "]") for d in v) + "}",
    attrs.PADDING: lambda v: "x".join(
        f"{d.low}_{d.high}" + (f"_{d.interior}" if d.interior else "") for d in v),
    attrs.WINDOW: _window_text,
    attrs.DIM_LABELS: lambda v: v.text,
    attrs.GROUPS: _groups_text,
    attrs.PAIRS: lambda v: "{" + ",".join("{" + f"{a},{b}" + "}" for a, b in v) + "}",
    attrs.SHARDING: sharding_to_text,
    attrs.FRONTEND: _frontend_text,
    attrs.BACKEND: lambda v: v.raw,
    attrs.SHAPES: lambda v: "{" + ", ".join(shape_to_text(s) for s in v) + "}",
    attrs.OUT_ALIAS: lambda v: "{" + ", ".join(
        f"{_index_text(a.output_index)}: ({a.operand}, {_index_text(a.operand_index)})" for a in v) + "}",
    attrs.SHAPE: shape_to_text,
    attrs.BOOLS: lambda v: "{" + ",".join("true" if b else "false" for b in v) + "}",
    attrs.INTS_OR_LISTS: lambda v: "{" + ",".join(
        "{" + ",".join(map(str, x)) + "}" if isinstance(x, (list, tuple)) else str(x) for x in v) + "}",
    attrs.STATISTICS: _statistics_text,
    attrs.RESULT_ACCURACY: _result_accuracy_text,
    attrs.ORIGIN: _origin_text,
    attrs.DOMAIN: _domain_text,
    attrs.LITERAL: _literal_attr_text,
    attrs.OPERAND_CONFIGS: _operand_configs_text,
    attrs.RAW_BRACED: lambda v: v.text,
    "shardings": lambda v: "{" + ", ".join(sharding_to_text(s) for s in v) + "}",
    "io_alias": lambda v: "{ " + ", ".join(
        f"{_index_text(a.output_index)}: ({a.parameter}, {_index_text(a.parameter_index)}"
        + (f", {a.kind})" if a.kind else ")") for a in v) + " }",
    "buffer_donor": lambda v: "{ " + ", ".join(f"({d.parameter}, {_index_text(d.parameter_index)})" for d in v) + " }",
    "program_shape": lambda v: "{(" + ", ".join(shape_to_text(s) for s in v.parameters) + ")->"
    + shape_to_text(v.result) + "}",
}


def attr_to_text(key: str, value: Any, table: dict[str, str]) -> str:
    if isinstance(value, attrs.Raw):
        return f"{key}={value.text}"
    kind = table[key]
    if kind == attrs.COMPS and key == "calls" and len(value) == 1:
        return f"calls=%{value[0]}"
    return f"{key}={ATTR_PRINTERS[kind](value)}"


def metadata_to_text(md: Metadata) -> str:
    parts = []
    if md.op_type:
        parts.append(f'op_type="{c_escape(md.op_type)}"')
    if md.op_name:
        parts.append(f'op_name="{c_escape(md.op_name)}"')
    if md.source_file:
        parts.append(f'source_file="{c_escape(md.source_file)}"')
    if md.source_line:
        parts.append(f"source_line={md.source_line}")
    for k, v in md.extra.items():
        parts.append(f'{k}="{c_escape(v)}"' if isinstance(v, str) else f"{k}={v.text if isinstance(v, attrs.Raw) else v}")
    if md.stack_frame_id:
        parts.append(f"stack_frame_id={md.stack_frame_id}")
    return "{" + " ".join(parts) + "}"


# ------------------------------------------------------------------------- module
def instruction_to_text(instr: Instruction) -> str:
    head = ("ROOT " if instr.is_root else "") + f"%{instr.name} = {shape_to_text(instr.shape)} {instr.opcode}("
    if instr.opcode == "constant":
        body = literal_to_text(instr.literal, instr.shape, instr.literal_elided)
    elif instr.opcode == "parameter":
        body = str(instr.parameter_number)
    else:
        shapes = instr.operand_shapes or [None] * len(instr.operands)
        body = ", ".join((shape_to_text(s) + " " if s is not None else "") + "%" + n
                         for n, s in zip(instr.operands, shapes))
    parts = [head + body + ")"]
    for key, value in instr.attrs.items():
        parts.append(attr_to_text(key, value, attrs.INSTRUCTION_ATTRS))
    if instr.metadata is not None:
        parts.append("metadata=" + metadata_to_text(instr.metadata))
    return ", ".join(parts)


def computation_to_text(comp: Computation) -> str:
    head = ("ENTRY " if comp.is_entry else "") + "%" + comp.name
    if comp.signature is not None:
        params, result = comp.signature
        head += " (" + ", ".join(f"{n}: {shape_to_text(s, False)}" for n, s in params) + ") -> " + shape_to_text(result, False)
    lines = [head + " {"]
    lines.extend("  " + instruction_to_text(i) for i in comp.instructions)
    closer = "}"
    if comp.execution_thread:
        closer += f', execution_thread="{comp.execution_thread}"'
    lines.append(closer)
    return "\n".join(lines)


def stack_frames_to_text(sf: StackFrames) -> str:
    out = []
    if sf.file_names:
        out.append("FileNames\n" + "\n".join(f'{k} "{c_escape(v)}"' for k, v in sf.file_names.items()))
    if sf.function_names:
        out.append("FunctionNames\n" + "\n".join(f'{k} "{c_escape(v)}"' for k, v in sf.function_names.items()))
    if sf.file_locations:
        out.append("FileLocations\n" + "\n".join(
            f"{k} {{" + " ".join(f"{a}={b}" for a, b in v.items()) + "}" for k, v in sf.file_locations.items()))
    if sf.frames:
        out.append("StackFrames\n" + "\n".join(
            f"{k} {{" + " ".join(f"{a}={b}" for a, b in v.items()) + "}" for k, v in sf.frames.items()))
    return "\n\n".join(out)


def module_to_text(module: Module) -> str:
    header = "HloModule " + module.name
    for key, value in module.attrs.items():
        header += ", " + attr_to_text(key, value, attrs.MODULE_ATTRS)
    parts = [header]
    if not module.stack_frames.is_empty():
        parts.append(stack_frames_to_text(module.stack_frames))
    parts.extend(computation_to_text(c) for c in module.computations)
    return "\n\n".join(parts) + "\n"
