"""XLA itself as the oracle: parse HLO text with XLA's C++ parser, import it with XLA's
own HLO→StableHLO importer, compile and run it with jaxlib on CPU.

Two ways in:
- `xla_program` / `run_with_xla`: small test modules, run as the converter's own modules
  run (the runtime's passes applied to XLA's import: collectives in cross-replica form,
  float all-reduces folded in group order), so tests can ask for bit-exact agreement.
- `xla_dump_program` / `run_dump_with_xla`: a real optimized dump, for `check
  --against-xla`, run in XLA's own execution model (R replicas x P partitions, XLA's own
  collectives and reduction order); nothing of the converter touches its ops.  jaxlib
  compiles only MLIR, and XLA's CPU compiler refuses two things its own importer leaves
  in an optimized dump: fusions (its thunk emitter asks each fusion for the backend config
  its own fusion passes write, "Fusion must have backend config"), which are inlined here,
  since a fusion computes exactly its fused computation; and an already partitioned module
  of P > 1 partitions (the CPU compiler runs P partitions only through its SPMD
  partitioner), which gets `{manual}` shardings on the entry's arguments and results, so
  the partitioner leaves every op as the dump wrote it (as for the body of a shard_map).
  The Shardy meshes XLA's importer writes (`sdy.mesh`, referred to by collectives' mesh-axis
  replica groups) are kept: the sdy dialect is registered to read them.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from converter.common.errors import ConverterError
from converter.mlir.module_attributes import module_devices, set_module_devices
from converter.runtime.program import Program, _entry, _specs, configure_cpu_devices


class XlaCannotRun(ConverterError):
    """XLA (through jaxlib, on CPU) cannot import, compile or run the module: the message says why."""


def xla_stablehlo_text(hlo_text: str) -> str:
    """XLA's own import of HLO text (raises ConverterError when XLA rejects it, or when its
    parser crashes: the text is parsed in a separate process, converter.runtime.xla_parser)."""
    import jaxlib._hlo as hlo
    import jaxlib._jax as jax_ext

    from converter.runtime.xla_parser import XlaParserCrashed, xla_parse

    try:
        computation = hlo.XlaComputation(xla_parse(hlo_text).proto)
        return jax_ext.mlir.xla_computation_to_mlir_module(computation)
    except XlaParserCrashed:
        raise
    except Exception as e:
        raise XlaCannotRun(f"XLA cannot import this HLO: {e}") from None


def _load_xla_import(hlo_text: str, changes: list[str] | None = None):
    """XLA's import of the text, parsed into a fresh context (mhlo and sdy registered:
    XLA's importer leaves mhlo ops such as fusion and bitcast, and Shardy meshes)."""
    from jaxlib.mlir.dialects import mhlo, sdy

    from converter.mlir.context import make_context
    from converter.mlir.serialize import load_module

    if changes is not None:
        hlo_text, listed = explicit_listed_mesh_groups(hlo_text)
    text = xla_stablehlo_text(hlo_text)
    if changes is not None:
        text, count = explicit_replica_groups(text)
        count += listed
        if count:
            changes.append(f"{count} mesh-axes replica group(s) written out")
    context = make_context()
    mhlo.register_mhlo_dialect(context)
    sdy.register_dialect(context)
    try:
        return load_module(text.encode(), "<xla import>", context)
    except ConverterError as e:
        raise XlaCannotRun(str(e)) from None


def run_with_xla(hlo_text: str, inputs: Sequence[np.ndarray], num_replicas: int = 1) -> list[np.ndarray]:
    """Outputs of the HLO module as XLA computes them (flattened result leaves).  With
    num_replicas > 1 the inputs and outputs carry a leading per-device axis."""
    return xla_program(hlo_text, num_replicas)(*inputs)


def xla_program(hlo_text: str, num_replicas: int = 1):
    """The HLO module as XLA imports it, ready to compile and run (a
    converter.runtime.program.Program): call it on several inputs to compile once."""
    from converter.runtime.program import program_from_module

    module = _load_xla_import(hlo_text)
    if num_replicas > 1:
        set_module_devices(module, num_replicas, module_devices(module)[1])
    return program_from_module(module)


# ------------------------------------------------------------------ whole dumps

_HEADER_COUNT = {"replicas": re.compile(r"\breplica_count=(\d+)"), "partitions": re.compile(r"\bnum_partitions=(\d+)")}


def dump_device_counts(hlo_text: str) -> tuple[int, int]:
    """(replicas, partitions) that the dump's `HloModule` line gives (1 where it does not):
    a module's config, which its HloModuleProto (what XLA's importer reads) does not carry."""
    header = next((line for line in hlo_text.splitlines() if line.startswith("HloModule")), "")
    counts = [int(m.group(1)) if (m := rx.search(header)) else 1 for rx in _HEADER_COUNT.values()]
    return counts[0], counts[1]


def _walk(op) -> list:
    found = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                found.append(inner.operation)
                found.extend(_walk(inner.operation))
    return found


def inline_fusions(module) -> int:
    """Replace every `mhlo.fusion` by the ops of its region (what it computes); the count."""
    count = 0
    for op in _walk(module.operation):
        if op.name != "mhlo.fusion":
            continue
        block = op.regions[0].blocks[0]
        for argument, operand in zip(block.arguments, op.operands):
            argument.replace_all_uses_with(operand)
        body = list(block.operations)
        for inner in body[:-1]:
            inner.operation.move_before(op)
        for result, value in zip(op.results, body[-1].operands):  # the region's mhlo.return
            result.replace_all_uses_with(value)
        op.erase()
        count += 1
    return count


_LAYOUT_ATTRS = ("result_layout", "source_layout", "xla_shape")


def _minor_to_major(op, name: str, rank: int) -> list[int]:
    from jaxlib.mlir import ir

    if name not in op.attributes:
        return list(range(rank - 1, -1, -1))
    return [int(x) for x in ir.DenseIntElementsAttr(op.attributes[name])]


def _bit_width(element) -> int:
    from converter.hlo.ir import ELEMENT_BITS
    from converter.mlir.context import hlo_element_type

    return ELEMENT_BITS[hlo_element_type(element)]


def logical_bitcasts(module) -> int:
    """Write every `mhlo.bitcast` (a reinterpretation of the bytes under the dump's layouts)
    as what it does to logical values: transpose the operand to its physical (major-to-
    minor) order, reshape to the result's physical dimensions, transpose to the result's
    logical order.  XLA's CPU compiler refuses bitcasts before its own layout assignment;
    the count."""
    from jaxlib.mlir import ir

    from converter.mlir import builders

    count = 0
    for op in _walk(module.operation):
        if op.name != "mhlo.bitcast":
            continue
        source, result = ir.RankedTensorType(op.operands[0].type), ir.RankedTensorType(op.results[0].type)
        retyped = source.element_type != result.element_type
        if retyped and _bit_width(source.element_type) != _bit_width(result.element_type):
            raise XlaCannotRun(f"a bitcast from {source} to {result} changes the element's width")
        source_order = _minor_to_major(op, "source_layout", source.rank)[::-1]
        result_order = _minor_to_major(op, "result_layout", result.rank)[::-1]
        with ir.InsertionPoint(op), op.location:
            physical = builders.transpose(op.operands[0], source_order)
            physical = builders.reshape(physical, [result.shape[d] for d in result_order])
            value = builders.transpose(physical, [result_order.index(d) for d in range(result.rank)])
            if retyped:  # same width: XLA's simplifier writes a bitcast-convert so
                value = builders.op1("stablehlo.bitcast_convert", result, [value])
        op.results[0].replace_all_uses_with(value)
        op.erase()
        count += 1
    return count


_MESH_AXES = re.compile(r"#stablehlo\.replica_group_mesh_axes<mesh = @([\w.$-]+), axes = \[([^\]]*)\]>")
_AXIS_REF = re.compile(r'#stablehlo\.axis_ref<name = "([^"]+)">')
_SDY_MESH = re.compile(r'sdy\.mesh @([\w.$-]+) = <\[([^\]]*)\](?:, device_ids=\[([\d, ]*)\])?>')
# the same, as printed in generic form (XLA prints the module so when a verifier fails)
_SDY_MESH_GENERIC = re.compile(r'"sdy\.mesh"\(\) <\{mesh = #sdy\.mesh<\[([^\]]*)\](?:, device_ids=\[([\d, ]*)\])?>, '
                               r'sym_name = "([\w.$-]+)"\}>')
_MESH_AXIS = re.compile(r'"([^"]+)"=(\d+)')


_HLO_MESH_GROUPS = re.compile(r"replica_groups=(?=mesh\[)")


def explicit_listed_mesh_groups(hlo_text: str) -> tuple[str, int]:
    """Write mesh-axes replica groups whose mesh lists its devices (`replica_groups=mesh['a'=4,
    'b'=2], device_ids=([2,4]T(1,0)) {'b'}`, jax 0.10's 2-D NamedSharding dumps) as the
    explicit groups they stand for, in the HLO text: XLA's importer writes their `sdy.mesh`
    without the device ids, so the groups it runs are those of devices in iota order (wrong
    values, silently).  Groups of meshes without device ids are left to
    `explicit_replica_groups`.  (text, count)."""
    from converter.hlo.sharding_grammar import ShardingGrammar

    pieces: list[str] = []
    end = 0
    for m in _HLO_MESH_GROUPS.finditer(hlo_text):
        if m.start() < end:
            continue
        grammar = ShardingGrammar(hlo_text, "<dump>")
        grammar.p = m.end()
        groups = grammar.mesh_groups()
        if groups.mesh is None or list(groups.mesh.devices()) == list(range(len(groups.mesh.devices()))):
            continue
        rows = ",".join("{" + ",".join(map(str, g)) + "}" for g in groups.groups)
        pieces += [hlo_text[end:m.end()], "{" + rows + "}"]
        end = grammar.p
    return "".join(pieces) + hlo_text[end:], len(pieces) // 2


def explicit_replica_groups(mlir_text: str) -> tuple[str, int]:
    """Write collectives' mesh-axes replica groups (`replica_groups=mesh[...] {...}` in newer
    dumps, which XLA's importer writes as Shardy meshes and mesh-axes groups) as the explicit
    groups they stand for: per index of the other axes, the devices along the named axes,
    first named major.  XLA's CPU compile of the mesh form under its GSPMD partitioner runs
    other groups (wrong values, silently), and mhlo's tuple all-to-all does not accept it.
    Done on the text: mhlo's verifier refuses the form on parsing.  (text, count)."""
    meshes = {}
    found = _SDY_MESH.findall(mlir_text) + [(n, a, i) for a, i, n in _SDY_MESH_GENERIC.findall(mlir_text)]
    for name, axes, ids in found:
        sizes = {a: int(n) for a, n in _MESH_AXIS.findall(axes)}
        count = int(np.prod(list(sizes.values()), dtype=np.int64))
        meshes[name] = (sizes, [int(i) for i in ids.split(",")] if ids.strip() else list(range(count)))

    def groups(m: re.Match) -> str:
        names = _AXIS_REF.findall(m.group(2))
        if m.group(1) not in meshes or len(names) != m.group(2).count("#stablehlo.axis_ref"):
            raise XlaCannotRun(f"replica groups {m.group(0)}: only whole axes of a mesh the module defines are read")
        sizes, ids = meshes[m.group(1)]
        axes = list(sizes)
        grid = np.array(ids, dtype=np.int64).reshape([sizes[a] for a in axes])
        order = [axes.index(a) for a in axes if a not in names] + [axes.index(a) for a in names]
        size = int(np.prod([sizes[a] for a in names], dtype=np.int64))
        rows = np.transpose(grid, order).reshape(-1, size).tolist()
        return f"dense<{rows}> : tensor<{len(rows)}x{size}xi64>"

    return _MESH_AXES.subn(groups, mlir_text)


def drop_layouts_and_inner_shardings(module) -> int:
    """Layouts are how the dump's compiler laid values out, not what they are: XLA's CPU
    compiler assigns its own (it refuses some of the dump's: "layout minor_to_major field
    contains 3 elements, but shape has 2 dimensions").  Shardings inside the entry and on
    other functions are the partitioner's leftovers in a module already partitioned."""
    from jaxlib.mlir import ir

    entry = _entry_function(module)
    layouts = 0
    for op in _walk(module.operation):
        for name in (*_LAYOUT_ATTRS, "mhlo.sharding"):
            if name in op.attributes:
                layouts += name != "mhlo.sharding"
                del op.attributes[name]
    for fn in module.body.operations:
        fn = fn.operation
        if fn.name != "func.func" or fn == entry:
            continue
        for key in ("arg_attrs", "res_attrs"):
            if key in fn.attributes:
                with module.context:
                    kept = []
                    for attrs in ir.ArrayAttr(fn.attributes[key]):
                        attrs = ir.DictAttr(attrs)
                        kept.append(ir.DictAttr.get({attrs[i].name: attrs[i].attr for i in range(len(attrs))
                                                     if attrs[i].name != "mhlo.sharding"}))
                    fn.attributes[key] = ir.ArrayAttr.get(kept)
    return layouts


def split_variadic_all_reduces(module) -> int:
    """Write each all-reduce of several operands (XLA's all-reduce combiner makes them) as
    one all-reduce per operand, over the same groups with the same reducer: each element is
    reduced on its own either way.  XLA's SPMD partitioner refuses them in manual mode
    ("supports only single-operand allreduce in manual partitioning mode"); the count."""
    from jaxlib.mlir import ir

    from passes.lib.rewrite import clone_function_body

    count = 0
    for op in _walk(module.operation):
        if op.name != "stablehlo.all_reduce" or len(op.operands) < 2:
            continue
        reducer = op.regions[0].blocks[0]
        attributes = {op.attributes[i].name: op.attributes[i].attr for i in range(len(op.attributes))}
        singles = []
        for operand, result in zip(op.operands, op.results):
            with op.location, ir.InsertionPoint(op):
                single = ir.Operation.create("stablehlo.all_reduce", results=[result.type], operands=[operand],
                                             attributes=attributes, regions=1)
            with op.location:
                block = single.regions[0].blocks.append(*[a.type for a in reducer.arguments])
            with op.location, ir.InsertionPoint(block):
                returned = clone_function_body(op, list(block.arguments))
                ir.Operation.create("stablehlo.return", operands=returned)
            singles.append(single.results[0])
        for result, value in zip(op.results, singles):
            result.replace_all_uses_with(value)
        op.erase()
        count += 1
    return count


def _entry_function(module):
    from jaxlib.mlir import ir

    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op.operation
    raise XlaCannotRun("XLA's import of the dump has no entry function @main")


def manual_entry_shardings(module) -> None:
    """`{manual}` on every argument and result of the entry: the module is one partition's
    program already, so XLA's SPMD partitioner must leave it as it is."""
    from jaxlib.mlir import ir

    entry = _entry_function(module)
    ftype = ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value)
    with module.context:
        manual = ir.StringAttr.get("{manual}")
        for key, count in (("arg_attrs", len(ftype.inputs)), ("res_attrs", len(ftype.results))):
            old = list(ir.ArrayAttr(entry.attributes[key])) if key in entry.attributes else []
            old += [ir.DictAttr.get({})] * (count - len(old))
            new = []
            for attrs in old:
                attrs = ir.DictAttr(attrs)
                entries = {attrs[i].name: attrs[i].attr for i in range(len(attrs))}
                entries["mhlo.sharding"] = manual
                new.append(ir.DictAttr.get(entries))
            entry.attributes[key] = ir.ArrayAttr.get(new)


@dataclass
class XlaDumpRun:
    """Which module XLA ran (`what`: said to the user) and its outputs."""

    what: str
    outputs: list[np.ndarray]


def xla_dump_program(hlo_text: str, path: str = "<dump>"):
    """(Program running the dump in XLA's own execution model, what was changed for
    XLA's CPU compiler in words).  Raises XlaCannotRun saying why XLA cannot."""
    replicas, partitions = dump_device_counts(hlo_text)
    changes: list[str] = []
    module = _load_xla_import(hlo_text, changes)
    fused = inline_fusions(module)
    if fused:
        changes.append(f"{fused} fusion(s) inlined")
    bitcasts = logical_bitcasts(module)
    if bitcasts:
        changes.append(f"{bitcasts} bitcast(s) written as transpose/reshape")
    if drop_layouts_and_inner_shardings(module):
        changes.append("its layouts left to XLA")
    if partitions > 1 and (split := split_variadic_all_reduces(module)):
        changes.append(f"{split} all-reduce(s) of several operands split")
    if partitions > 1:
        manual_entry_shardings(module)
        changes.append(f"entry shardings made manual ({partitions} partitions already split)")
    params, results = _specs(_entry(module))
    program = _XlaProgram(module, replicas * partitions, params, results, path=path,
                          replicas=replicas, partitions=partitions)
    return program, changes


def run_dump_with_xla(hlo_text: str, inputs: Sequence[np.ndarray], path: str = "<dump>") -> XlaDumpRun:
    """The dump's outputs as XLA computes them (inputs and outputs as `run` takes and
    gives them: a leading per-device axis, device d = replica * P + partition, when the
    module runs on several devices).  Raises XlaCannotRun saying why XLA cannot."""
    program, changes = xla_dump_program(hlo_text, path)
    outputs = program(*inputs)
    what = "the dump itself" if not changes else "a copy of the dump (" + "; ".join(changes) + ")"
    return XlaDumpRun(what, outputs)


@dataclass
class _XlaProgram(Program):
    """A Program compiled as XLA compiles the dump: R replicas x P partitions, the SPMD
    partitioner on when P > 1 (it finds every entry value manual), XLA's own collectives.
    Excess precision is off as in converter.runtime.program (the dump's roundings to
    narrow floats were made by the device)."""

    replicas: int = 1
    partitions: int = 1

    def compile(self, progress=None) -> Any:
        if self._executable is not None:
            return self._executable
        from jax.extend.backend import get_backend
        from jaxlib import xla_client as xc

        if self._devices is None:
            self._devices = configure_cpu_devices(self.num_devices, self.path or "<dump>")
        if "lapack_" in str(self.module):  # as in Program.compile
            from jax._src.lax.linalg import initialize_lapack

            initialize_lapack()
        options = xc.CompileOptions()
        options.num_replicas = self.replicas
        options.num_partitions = self.partitions
        options.executable_build_options.use_spmd_partitioning = self.partitions > 1
        options.env_option_overrides = [("xla_allow_excess_precision", False)]
        ids = np.array([d.id for d in self._devices], dtype=np.int64).reshape(self.replicas, self.partitions)
        options.device_assignment = xc.DeviceAssignment.create(ids)
        buf = io.BytesIO()
        self.module.operation.write_bytecode(buf)
        try:
            self._executable = get_backend("cpu").compile_and_load(
                buf.getvalue(), xc.DeviceList(tuple(self._devices)), options)
        except Exception as e:  # XlaRuntimeError: the message is the useful part
            raise XlaCannotRun(f"XLA's CPU compiler refuses it: {str(e).splitlines()[0]}") from None
        return self._executable
