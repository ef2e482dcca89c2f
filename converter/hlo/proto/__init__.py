"""XLA's protobuf dumps as inputs: HloModuleProto, HloProto (`--xla_dump_hlo_as_proto`
writes `*.hlo.pb` files holding one) and HloSnapshot (`--xla_dump_hlo_snapshots`: the
module with the arguments of one execution and its result), binary or text protos.

The module is turned into HLO text by XLA itself — jaxlib's HloModuleProto parser and
HLO printer (constants printed whole) — and that text goes through this tool's parser:
exact by construction, with no second reader of the ~90 instruction fields to keep in
step with XLA.  Arguments and results (LiteralProto) are decoded with the `protobuf`
package from the schema in `schema.py`.

Which kind a file is comes from its bytes: protobuf's wire format is checked over the
whole file (HLO text or MLIR fails within a few bytes), then the nesting tells the
three messages apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from converter.hlo import dtypes
from converter.common.errors import ConverterError, SourceLocation, diagnostic


class ProtoError(ConverterError):
    pass


# ----------------------------------------------------------------- wire format
def _varint(data: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[i]
        value |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, bytes | None]] | None:
    """Top-level (field number, wire type, payload of length-delimited fields) of a
    serialized message, or None when `data` is not one."""
    out = []
    i, n = 0, len(data)
    try:
        while i < n:
            key, i = _varint(data, i)
            number, wire = key >> 3, key & 7
            if number == 0:
                return None
            if wire == 0:
                _, i = _varint(data, i)
                payload = None
            elif wire == 1:
                i += 8
                payload = None
            elif wire == 5:
                i += 4
                payload = None
            elif wire == 2:
                length, i = _varint(data, i)
                payload = data[i : i + length]
                i += length
            else:
                return None
            if i > n:
                return None
            out.append((number, wire, payload))
    except ValueError:
        return None
    return out


def _only(fields, allowed: set[int]) -> bool:
    return all(number in allowed and wire == 2 for number, wire, _ in fields)


def _is_module(fields) -> bool:
    """HloModuleProto: name (1) and computations (3), length-delimited."""
    numbers = {(number, wire) for number, wire, _ in fields}
    return (1, 2) in numbers and (3, 2) in numbers


def _is_hlo_proto(fields) -> bool:
    """HloProto: hlo_module (1) holding a module, maybe buffer_assignment (3)."""
    if not fields or not _only(fields, {1, 3}):
        return False
    module = next((p for number, _, p in fields if number == 1), None)
    inner = _fields(module) if module else None
    return inner is not None and _is_module(inner)


def proto_kind(data: bytes) -> str | None:
    """'snapshot', 'hlo_proto', 'module' or None (not one of XLA's module protos).  All
    three start with field 1, length-delimited (byte 0x0a): XLA writes fields in
    number order."""
    if not data or data[0] != 0x0A:
        return None
    fields = _fields(data)
    if fields is None:
        return None
    first = fields[0][2]
    inner = _fields(first) if first else None
    if inner is not None and _is_hlo_proto(inner) and _only(fields, {1, 2, 3, 4}):
        return "snapshot"
    if _is_hlo_proto(fields):
        return "hlo_proto"
    if _is_module(fields):
        return "module"
    return None


def _module_bytes(data: bytes, kind: str) -> bytes:
    fields = _fields(data)
    if kind == "module":
        return data
    if kind == "hlo_proto":
        return next(p for number, _, p in fields if number == 1)
    hlo = next(p for number, _, p in fields if number == 1)
    return next(p for number, _, p in _fields(hlo) if number == 1)


def module_text(module_proto: bytes, path: str) -> str:
    """HLO text of a serialized HloModuleProto, printed by XLA (constants whole)."""
    import jaxlib._hlo as hlo

    try:
        module = hlo.HloModule.from_serialized_hlo_module_proto(module_proto)
    except Exception as e:  # XlaRuntimeError: its message is the useful part
        raise ProtoError(diagnostic(SourceLocation(path), f"XLA cannot read the HloModuleProto: {e}")) from None
    options = hlo.HloPrintOptions()
    options.print_large_constants = True
    return module.to_string(options)


# A text proto of a module, an HloProto or a snapshot starts (after # comments) with one
# of their fields; HLO text starts with `HloModule`, MLIR with `module`, `#loc`, `func`.
_TEXT_START = re.compile(rb"\A(?:\s*#[^\n]*\n)*\s*(name|entry_computation_name|entry_computation_id|computations|"
                         rb"host_program_shape|id|hlo_module|hlo|arguments)\s*[:{]")


def text_proto_binary(data: bytes, path: str) -> tuple[str, bytes] | None:
    """(kind, the binary form) of a text proto, or None when `data` is not one."""
    match = _TEXT_START.match(data[:4096])
    if match is None:
        return None
    first = match.group(1)
    kind, message = (("snapshot", "HloSnapshotText") if first in (b"hlo", b"arguments") else
                     ("hlo_proto", "HloProtoText") if first == b"hlo_module" else ("module", "HloModuleProto"))
    from google.protobuf import text_format

    from converter.hlo.proto.schema import message_class

    msg = message_class(message)()
    try:
        text_format.Parse(data.decode("utf-8"), msg)
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise ProtoError(diagnostic(SourceLocation(path),
                                    f"not a readable text proto of an {message.replace('Text', '')}: {e}")) from None
    return kind, msg.SerializeToString()


def _binary(data: bytes, path: str) -> tuple[str, bytes] | None:
    kind = proto_kind(data)
    if kind is not None:
        return kind, data
    return text_proto_binary(data, path)


def hlo_text_of(data: bytes, path: str) -> str | None:
    """The HLO text of a module proto, an HloProto or a snapshot (binary or text
    proto); None for other files."""
    found = _binary(data, path)
    if found is None:
        return None
    kind, binary = found
    return module_text(_module_bytes(binary, kind), path)


def read_hlo_text(path: str) -> str:
    """HLO text of a dump file: HLO text itself, or one of XLA's protos."""
    with open(path, "rb") as f:
        data = f.read()
    text = hlo_text_of(data, path)
    return text if text is not None else data.decode("utf-8", errors="replace")


# -------------------------------------------------------------------- literals
# PrimitiveType name -> (HLO element type, LiteralProto field holding the values)
_LITERAL_FIELDS = {
    "PRED": ("pred", "preds"), "S8": ("s8", "s8s"), "U8": ("u8", "u8s"), "S16": ("s16", "s16s"),
    "U16": ("u16", "u16s"), "S32": ("s32", "s32s"), "U32": ("u32", "u32s"), "S64": ("s64", "s64s"),
    "U64": ("u64", "u64s"), "F16": ("f16", "f16s"), "BF16": ("bf16", "bf16s"), "F32": ("f32", "f32s"),
    "F64": ("f64", "f64s"), "C64": ("c64", "c64s"), "C128": ("c128", "c128s"),
    "S4": ("s4", "s4s"), "U4": ("u4", "u4s"), "S2": ("s2", "s2s"), "U2": ("u2", "u2s"),
    "F8E5M2": ("f8e5m2", "f8e5m2s"), "F8E4M3FN": ("f8e4m3fn", "f8e4m3fns"), "F8E4M3": ("f8e4m3", "f8e4m3s"),
    "F8E4M3B11FNUZ": ("f8e4m3b11fnuz", "f8e4m3b11fnuzs"), "F8E5M2FNUZ": ("f8e5m2fnuz", "f8e5m2fnuzs"),
    "F8E4M3FNUZ": ("f8e4m3fnuz", "f8e4m3fnuzs"), "F8E3M4": ("f8e3m4", "f8e3m4s"),
    "F4E2M1FN": ("f4e2m1fn", "f4e2m1fns"), "F8E8M0FNU": ("f8e8m0fnu", "f8e8m0fnus"),
}


def literal_leaves(literal, what: str) -> list[np.ndarray]:
    """A LiteralProto as numpy arrays, one per leaf of its (tuple) shape, in logical
    index order (the values are stored in the shape's layout, minor dimension fastest)."""
    from converter.hlo.proto.schema import PRIMITIVE_TYPE_NAMES

    shape = literal.shape
    kind = PRIMITIVE_TYPE_NAMES.get(shape.element_type, str(shape.element_type))
    if kind == "TUPLE":
        return [leaf for i, t in enumerate(literal.tuple_literals) for leaf in literal_leaves(t, f"{what}#{i}")]
    if kind == "TOKEN":
        return []
    if kind not in _LITERAL_FIELDS:
        raise ProtoError(f"{what}: literals of element type {kind} are not supported")
    element_type, field = _LITERAL_FIELDS[kind]
    dtype = dtypes.numpy_dtype(element_type)
    dims = list(shape.dimensions)
    count = int(np.prod(dims, dtype=np.int64))
    raw = getattr(literal, field)
    if kind in ("C64", "C128"):
        flat = np.asarray(raw, dtype=np.float32 if kind == "C64" else np.float64).view(dtype)
    elif isinstance(raw, bytes):
        if dtype.itemsize * count == len(raw):
            flat = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype)
        else:
            flat = np.frombuffer(raw, dtype=np.uint8)
            if element_type in ("s4", "u4", "s2", "u2") and len(raw) == count:
                # Sub-byte literals: one element per byte, the value in the low bits.
                flat = flat.astype(np.int8 if element_type[0] == "s" else np.uint8).astype(dtype)
    else:
        flat = np.asarray(list(raw), dtype=dtype)
    if flat.size != count:
        raise ProtoError(f"{what}: the literal holds {flat.size} {element_type} value(s), its shape "
                         f"{element_type}[{','.join(map(str, dims))}] needs {count}")
    m2m = list(shape.layout.minor_to_major) if shape.HasField("layout") else []
    if len(m2m) != len(dims):
        m2m = list(range(len(dims) - 1, -1, -1))
    major_to_minor = m2m[::-1]
    physical = flat.reshape([dims[d] for d in major_to_minor])
    return [physical.transpose(np.argsort(major_to_minor)).copy()]  # copy: C order, 0-d kept 0-d


@dataclass
class Snapshot:
    """An HloSnapshot: the module (as HLO text), the arguments of one execution and the
    result the device computed (flattened leaves)."""

    hlo_text: str
    arguments: list[np.ndarray]
    result: list[np.ndarray]
    platform: str


def read_snapshot(path: str) -> Snapshot | None:
    """The snapshot in `path`, or None when the file is not one."""
    with open(path, "rb") as f:
        data = f.read()
    found = _binary(data, path)
    if found is None or found[0] != "snapshot":
        return None
    data = found[1]
    from converter.hlo.proto.schema import message_class

    snapshot = message_class("HloSnapshot")()
    try:
        snapshot.ParseFromString(data)
    except Exception as e:  # google.protobuf.message.DecodeError
        raise ProtoError(diagnostic(SourceLocation(path), f"not a readable HloSnapshot: {e}")) from None
    arguments = []
    for i, literal in enumerate(snapshot.arguments):
        leaves = literal_leaves(literal, f"{path}: argument {i}")
        if len(leaves) != 1:
            raise ProtoError(diagnostic(SourceLocation(path),
                                        f"argument {i} is a tuple; entry parameters of tuple shape "
                                        "are not supported"))
        arguments.append(leaves[0])
    result = literal_leaves(snapshot.result, f"{path}: result") if snapshot.HasField("result") else []
    text = module_text(snapshot.hlo.hlo_module, path)
    return Snapshot(text, arguments, result, snapshot.execution_platform)
