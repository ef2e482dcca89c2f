"""HLO IR → StableHLO `ir.Module`.

One `ModuleImporter` per module (context, type cache, functions, locations) and one
`ComputationImporter` per imported body (a map from HLO instruction to the MLIR values of
its flattened leaves), whose loop hands each instruction to its opcode's rule with a
fresh `RuleContext`.  Each opcode's rule lives in `converter.importer.rules` and is found
through the table in `converter.importer.registry`.  Beside the loop, each in its module:
instruction locations (`locations`), the element types an op computes in where the
dump's differ (`type_correction`), and merging an instruction into an equal earlier one
(`merging`, when the pipeline runs cse first).
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from jaxlib.mlir import ir, passmanager
from jaxlib.mlir.dialects import func, stablehlo

from converter.hlo import dtypes
from converter.common.errors import ConverterError, SourceLocation, diagnostic
from converter.hlo import attrs as hlo_attrs
from converter.hlo.ir import Computation, Instruction, Module, Shape, split_operand
from converter.hlo.printer import shape_to_text, sharding_to_text
from converter.mlir.builders import bounded_type, integer_attr, op as build_op
from converter.importer.locations import InstructionLocations
from converter.importer.merging import BlockMergers, DuplicateMerger
from converter.importer.registry import PURE, RULES, UNLOCATED, ImportRule, find_rule
from converter.importer.type_correction import CORRECTED, NOT_ARRAYS, computed_shape, to_dump_types
from converter.mlir.module_attributes import set_elided_constants, set_module_devices
from converter.mlir.context import NoMlirTypeError, make_context, mlir_element_type

Values = list[ir.Value]


def _no_rule_message(opcode: str) -> str:
    """What to say of an opcode no rule reads.  One XLA knows is named as such; one it
    does not (its parser refuses it, ours reads any) is most likely a misspelling of the
    nearest opcode."""
    if hlo_attrs.attributes_of(opcode) is not None:
        return f"no import rule for opcode '{opcode}' (an XLA opcode this importer does not read)"
    close = difflib.get_close_matches(opcode, sorted(hlo_attrs.OPCODE_ATTRS), n=1, cutoff=0.7)
    return f"'{opcode}' is no XLA opcode" + (f"; did you mean '{close[0]}'?" if close else "")


class HloImportError(ConverterError):
    """An instruction the importer cannot express: names it, its opcode and its line."""

    def __init__(self, message: str, instr: Instruction | None = None, path: str = ""):
        self.instr = instr
        self.path = path
        self.message = message
        where = None
        if path:
            where = SourceLocation(path) if instr is None else SourceLocation(path, instr.line, instr.col)
        super().__init__(diagnostic(where, message if instr is None else f"%{instr.name} ({instr.opcode}): {message}"))


@dataclass
class ImportOptions:
    # Keep each fused computation as a private func.func called with func.call.
    keep_fusions: bool = False
    # What to do with constants whose values the dump elided as `{...}`:
    # "mark" (default): import zeros and list them in the module attribute
    # `hlo.elided_constants`, which execution refuses unless told otherwise;
    # "error": fail; "zeros" / "random" (seeded): made-up values, knowingly.
    elided_constants: str = "mark"
    seed: int = 0
    # Instructions whose values become extra results of @main (a converter.importer.taps.TapRequest).
    taps: Any = None
    # Return the operands of host callbacks without results (jax.debug.print, ...) as extra
    # results `callback:NAME` after the taps (converter.importer.callbacks).
    report_callbacks: bool = False
    # Not None: an instruction of a PURE opcode equal to an earlier one of the same block
    # (same operand values and shapes, result shape, attributes and literal) takes that
    # one's values instead of building equal ops, where a use that none of these tests
    # says a pass may drop keeps those alive (converter.importer.merging).  The module is then what MLIR's
    # CSE makes of the faithful import, built without the ops CSE would erase: for a
    # pipeline that runs cse before anything else reads the module (convert sets it then,
    # from passes.lib.manager.merge_before_cse).  None: every instruction builds its ops.
    merge_duplicates: tuple[Callable[[ir.Operation, ir.Value], bool], ...] | None = None
    # Not None: count NaN/Inf per instruction as it is computed and return where they first
    # appear (`run --find-nonfinite`), within this converter.importer.nonfinite_monitor.MonitorScope
    # (which fusion instances are checked instruction by instruction; True: all of them).
    find_nonfinite: Any = None


class ModuleImporter:
    def __init__(self, hlo: Module, options: ImportOptions | None = None, context: ir.Context | None = None):
        self.hlo = hlo
        self.options = options or ImportOptions()
        self.context = context or make_context()
        self._types: dict[Shape, list[ir.Type]] = {}
        # The same, by the Shape object's id (most lookups are of an instruction's own
        # shape object, and hashing a Shape hashes all of its fields): id -> (shape, types).
        self._types_by_id: dict[int, tuple[Shape, list[ir.Type]]] = {}
        # id(tuple shape) -> (shape, leaf_starts(shape)).
        self._leaf_starts: dict[int, tuple[Shape, list[int]]] = {}
        # An instruction's location (its name at its line:col, fused with its metadata's
        # source): converter.importer.locations, looked up once (several calls per instruction).
        self.location: Callable[[Instruction], ir.Location] = InstructionLocations(hlo).location
        # One-element constants' attributes: (element type, dims, dtype, bytes) -> attribute.
        self.splat_constants: dict[tuple, ir.Attribute] = {}
        # Attributes (or attribute dictionaries, or facts of shapes) that rules make once per
        # module, by a key of their own.
        self.attribute_cache: dict[tuple, Any] = {}
        self._fusion_funcs: dict[str, tuple[str, list[ir.Type]]] = {}
        self.uses_chlo = False
        self.elided_constants: list[str] = []
        # How many times each stateful instruction was imported (a computation inlined
        # at two call sites imports its instructions twice): rules that must know
        # whether an instruction runs once per execution read it.
        self.imports_of: dict[str, int] = {}
        self.module: ir.Module | None = None
        # Taps (converter.importer.taps): the plan, and one {instruction: leaves} per block being
        # imported whose values can leave it (the entry's, each while body's).
        self.tap_plan = None
        self.tap_collectors: list[dict[str, Values]] = []
        # The non-finite monitor (converter.importer.nonfinite_monitor.MonitorRecorder) or None.
        self.monitor = None
        # merge_duplicates: the PURE instructions imported so far, per block (converter.importer.merging).
        merge = self.options.merge_duplicates
        self._mergers: BlockMergers | None = BlockMergers(merge) if merge is not None else None

    @functools.cached_property
    def _rng(self) -> np.random.Generator:
        """The generator of the made-up values of elided constants: made when the first
        one is (numpy.random is not loaded for the modules that have none)."""
        return np.random.default_rng(self.options.seed)

    def duplicate_merger(self) -> DuplicateMerger | None:
        """The merger of the block being built; None when instructions are not merged (the
        option is off, taps are taken, the non-finite monitor counts, or ops are not being
        appended at the end of a block)."""
        if self._mergers is None or self.tap_plan is not None or self.monitor is not None:
            return None
        return self._mergers.current()

    # ---------------------------------------------------------------------- types
    def leaf_types(self, shape: Shape) -> list[ir.Type]:
        known = self._types_by_id.get(id(shape))
        if known is not None and known[0] is shape:
            return known[1]
        types = self._types.get(shape)
        if types is None:
            if shape.is_tuple:
                types = [t for s in shape.tuple_shapes for t in self.leaf_types(s)]
            elif shape.is_token:
                types = [stablehlo.TokenType.get()]
            else:
                types = [self._tensor_type(shape)]
            self._types[shape] = types
        self._types_by_id[id(shape)] = (shape, types)  # holds the shape: its id stays its own
        return types

    def leaf_starts(self, shape: Shape) -> list[int]:
        """Where each element of a tuple shape starts among its flattened leaves, and their
        count last: made once per Shape object (a loop's state tuple of hundreds of
        elements is read by as many get-tuple-elements)."""
        known = self._leaf_starts.get(id(shape))
        if known is not None and known[0] is shape:
            return known[1]
        starts = [0]
        for element in shape.tuple_shapes:
            starts.append(starts[-1] + element.leaf_count())
        self._leaf_starts[id(shape)] = (shape, starts)  # holds the shape: its id stays its own
        return starts

    def tensor_type(self, shape: Shape) -> ir.Type:
        return self.leaf_types(shape)[0]

    def _tensor_type(self, shape: Shape) -> ir.Type:
        element = mlir_element_type(shape.element_type)
        if not shape.is_dynamic:
            return ir.RankedTensorType.get(shape.dims, element)
        return bounded_type(list(shape.dims), list(shape.dynamic), element)

    def error(self, message: str, instr: Instruction | None = None) -> HloImportError:
        return HloImportError(message, instr, self.hlo.path)

    # --------------------------------------------------------------------- module
    def run(self) -> ir.Module:
        hlo = self.hlo
        entry = hlo.entry
        request, callback_sites = self.options.taps, []
        if self.options.report_callbacks:
            from converter.importer import callbacks

            callback_sites = callbacks.find_callbacks(hlo, self.options.keep_fusions)
            request = callbacks.with_callback_operands(request, callback_sites)
        if request:
            from converter.importer.taps import resolve

            self.tap_plan = resolve(request, hlo, self.options.keep_fusions)
        scope = self.options.find_nonfinite
        if scope is not None and scope is not False:
            from converter.importer.nonfinite_monitor import EXHAUSTIVE, MonitorRecorder, monitor_plan

            if scope is True:
                scope = EXHAUSTIVE

            keep = self.options.keep_fusions
            self.monitor = MonitorRecorder(monitor_plan(hlo, scope, keep), scope, keep)
        with self.context, ir.Location.file(hlo.path, entry.line, entry.col):
            module = ir.Module.create()
            self.module = module
            attrs = module.operation.attributes
            attrs["sym_name"] = ir.StringAttr.get(_symbol(hlo.name))
            set_module_devices(module, hlo.replica_count, hlo.num_partitions)
            # Layouts and aliasing are metadata of the dump: kept as text so that no
            # consumer mistakes them for constraints on the portable module.
            for key in ("entry_computation_layout", "input_output_alias", "buffer_donor"):
                if key in hlo.attrs:
                    from converter.hlo.printer import attr_to_text

                    text = attr_to_text(key, hlo.attrs[key], hlo_attrs.MODULE_ATTRS).split("=", 1)[1]
                    attrs[f"hlo.{key}"] = ir.StringAttr.get(text)
            if hlo.attrs.get("is_scheduled"):
                # After XLA's layout assignment: instruction layouts are physical (a
                # backend call reads its buffers laid out so); before it they are not.
                attrs["hlo.is_scheduled"] = ir.BoolAttr.get(True)
            if "frontend_attributes" in hlo.attrs:
                attrs["mhlo.frontend_attributes"] = frontend_attributes(hlo.attrs["frontend_attributes"])
            try:
                self._import_entry(entry)
            except NoMlirTypeError as e:
                raise self._no_type_error(hlo, e) from None
            if callback_sites:
                with self.context, ir.Location.unknown():
                    callbacks.relabel_results(module, callback_sites, callbacks.user_tap_labels(
                        self.options.taps, hlo, self.options.keep_fusions))
            if self.elided_constants:
                set_elided_constants(module, self.elided_constants)
            if self.uses_chlo:
                passmanager.PassManager.parse("builtin.module(func.func(chlo-legalize-to-stablehlo))").run(module.operation)
        return module

    def _no_type_error(self, hlo: Module, e: NoMlirTypeError) -> HloImportError:
        """An element type with no MLIR form, located at the first instruction whose shape
        holds it (the type is made where the shape is first used: a parameter, a region's
        arguments, a result; finding which only when it fails costs nothing otherwise)."""
        what = f"element type '{e.element_type}' has no MLIR equivalent"
        if e.element_type == "buffer":
            what = "a buffer shape b(...) (XLA's in-place buffer) has no StableHLO type"
        for comp in hlo.computations:
            for instr in comp.instructions:
                if any(leaf.element_type == e.element_type for leaf in instr.shape.leaves()):
                    return self.error(f"cannot import: {what}", instr)
        return self.error(f"cannot import: {what}")

    def _import_entry(self, entry: Computation) -> None:
        arg_types: list[ir.Type] = []
        arg_attrs: list[dict[str, ir.Attribute]] = []
        arg_locs: list[ir.Location] = []
        groups: list[list[int]] = []
        for p in entry.parameters:
            types = self.leaf_types(p.shape)
            groups.append(list(range(len(arg_types), len(arg_types) + len(types))))
            arg_types.extend(types)
            shardings = _leaf_shardings(p.attrs.get("sharding"), len(types))
            for sh in shardings:
                d: dict[str, ir.Attribute] = {}
                if sh is not None:
                    d["mhlo.sharding"] = ir.StringAttr.get(sharding_to_text(sh))
                arg_attrs.append(d)
            arg_locs.extend([self.location(p)] * len(types))
        root = entry.root
        result_types = self.leaf_types(root.shape)
        num_results = len(result_types)
        if self.tap_plan is not None:
            result_types = result_types + self.tap_types(self.tap_plan.names)
        if self.monitor is not None:
            result_types = result_types + [ir.RankedTensorType.get(
                [len(self.monitor.plan.items), self.monitor.plan.depth + 1], ir.IntegerType.get_signless(32))]
        with ir.InsertionPoint(self.module.body):
            fn = func.FuncOp("main", ir.FunctionType.get(arg_types, result_types))
            fn.attributes["sym_visibility"] = ir.StringAttr.get("public")
            if any(arg_attrs):
                fn.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in arg_attrs])
            res_shardings = _leaf_shardings(root.attrs.get("sharding"), num_results)
            if any(s is not None for s in res_shardings):
                fn.res_attrs = ir.ArrayAttr.get([
                    ir.DictAttr.get({"mhlo.sharding": ir.StringAttr.get(sharding_to_text(s))} if s else {})
                    for s in res_shardings] + [ir.DictAttr.get({})] * (len(result_types) - num_results))
            self._mark_donated_arguments(fn, entry, groups, arg_attrs)
            block = fn.add_entry_block(arg_locs=arg_locs)
            args = [[block.arguments[i] for i in g] for g in groups]
            with ir.InsertionPoint(block):
                self.tap_collectors.append({})
                if self.monitor is not None:
                    self.monitor.push_block()
                results = ComputationImporter(self, entry, args).run()
                taps = self.tap_collectors.pop()
                labels: list[str] = []
                if self.tap_plan is not None:
                    results = list(results) + self.tap_values(self.tap_plan.names, taps)
                    from converter.importer.taps import leaf_labels

                    labels = [label for name in self.tap_plan.names
                              for label in leaf_labels(self.tap_plan.instructions[name])]
                if self.monitor is not None:
                    from converter.importer.nonfinite_monitor import MONITOR_LABEL

                    results = list(results) + [self.monitor.rows(0, len(self.monitor.plan.items), -1)]
                    labels.append(MONITOR_LABEL)
                if labels:
                    from converter.importer.taps import TAPS_ATTR

                    self.module.operation.attributes[TAPS_ATTR] = ir.ArrayAttr.get(
                        [ir.StringAttr.get(label) for label in labels])
                with self.location(root):
                    func.ReturnOp(results)

    def _mark_donated_arguments(self, fn: func.FuncOp, entry: Computation, groups: list[list[int]],
                                arg_attrs: list[dict[str, ir.Attribute]]) -> None:
        """The dump's `input_output_alias` as `tf.aliasing_output` on the flattened entry
        arguments (how JAX marks donated buffers): XLA then writes each aliased output into
        its parameter's buffer, so the converted module needs no more memory than the dump.
        Values are unchanged; a pair whose leaves do not match is refused."""
        aliases = self.hlo.attrs.get("input_output_alias") or []
        if not aliases:
            return
        root_shape = entry.root.shape
        i32 = ir.IntegerType.get_signless(32)
        for alias in aliases:
            what = (f"input_output_alias {{{','.join(map(str, alias.output_index))}}}: "
                    f"(parameter {alias.parameter}, {{{','.join(map(str, alias.parameter_index))}}})")
            try:
                if alias.parameter >= len(entry.parameters):
                    raise IndexError
                param_shape = entry.parameters[alias.parameter].shape
                out_start, out_end = root_shape.leaf_span(alias.output_index)
                arg_start = param_shape.leaf_span(alias.parameter_index)[0]
                out_leaves = root_shape.subshape(alias.output_index).leaves()
                arg_leaves = param_shape.subshape(alias.parameter_index).leaves()
            except IndexError:
                raise self.error(f"{what} names an output or parameter the entry computation does not have") from None
            # XLA requires an aliased pair to have the same byte size, not the same shape
            # (its HloInputOutputAliasConfig::Verify): torch-xla donates a parameter to an
            # output of another shape with as many bytes (an f32[16,64] weight's buffer for
            # an f32[64,16] result).  The buffer is reused; the values are the output's.
            if len(out_leaves) != len(arg_leaves) or any(
                    o.byte_size() != a.byte_size() or o.is_token != a.is_token for o, a in zip(out_leaves, arg_leaves)):
                raise self.error(f"{what}: the output and the parameter have different shapes and sizes "
                                 f"({', '.join(map(str, out_leaves))} vs. {', '.join(map(str, arg_leaves))})")
            for k in range(out_end - out_start):
                arg = groups[alias.parameter][arg_start + k]
                arg_attrs[arg]["tf.aliasing_output"] = ir.IntegerAttr.get(i32, out_start + k)
        fn.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in arg_attrs])
    # ----------------------------------------------------------------------- taps
    def tap_types(self, names: Sequence[str]) -> list[ir.Type]:
        """The result types of taps `names`: their array leaves, tokens dropped."""
        out = []
        for name in names:
            shape = self.tap_plan.instructions[name].shape
            prefix = self.tap_plan.stack_dims(name)
            for leaf in shape.leaves():
                if not leaf.is_token:
                    out.extend(_stacked(t, prefix) for t in self.leaf_types(leaf))
        return out

    def tap_values(self, names: Sequence[str], recorded: dict[str, Values]) -> Values:
        from converter.importer.taps import array_leaf_mask

        out = []
        for name in names:
            instr = self.tap_plan.instructions[name]
            if name not in recorded:
                raise self.error("the tapped instruction was not imported where its value can be returned "
                                 "(an importer bug; please report it)", instr)
            out.extend(v for v, keep in zip(recorded[name], array_leaf_mask(instr)) if keep)
        return out

    def record_tap(self, name: str, leaves: Values) -> None:
        if self.tap_plan is not None and self.tap_plan.wanted(name):
            self.tap_collectors[-1][name] = leaves

    # ------------------------------------------------------------------- fusions
    def fusion_function(self, comp: Computation, arg_types: list[ir.Type]) -> tuple[str, list[ir.Type]]:
        """A private func.func for a fused computation (--keep-fusions), built once."""
        cached = self._fusion_funcs.get(comp.name)
        if cached is not None:
            return cached
        name = _symbol(comp.name)
        result_types = self.leaf_types(comp.root.shape)
        with ir.InsertionPoint(self.module.body), ir.Location.file(self.hlo.path, comp.line, comp.col):
            fn = func.FuncOp(name, ir.FunctionType.get(arg_types, result_types))
            fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
            block = fn.add_entry_block()
        groups, i = [], 0
        arguments = list(block.arguments)
        for p in comp.parameters:
            n = len(self.leaf_types(p.shape))
            groups.append(arguments[i : i + n])
            i += n
        with ir.InsertionPoint(block):
            results = ComputationImporter(self, comp, groups).run()
            with self.location(comp.root):
                func.ReturnOp(results)
        self._fusion_funcs[comp.name] = (name, result_types)
        return name, result_types


def _stacked(t: ir.Type, prefix: list[int]) -> ir.Type:
    """A tap's type with --tap-iterations' leading axes."""
    if not prefix:
        return t
    rt = ir.RankedTensorType(t)
    return ir.RankedTensorType.get(list(prefix) + list(rt.shape), rt.element_type)


def _symbol(name: str) -> str:
    return name.replace("%", "")


def _leaf_shardings(sharding: Any, count: int) -> list[hlo_attrs.Sharding | None]:
    if not isinstance(sharding, hlo_attrs.Sharding):
        return [None] * count
    if sharding.kind == "tuple":
        leaves = list(sharding.elements)
        return leaves + [None] * (count - len(leaves)) if len(leaves) <= count else leaves[:count]
    return [sharding] * count


class ComputationImporter:
    """Imports one computation's instructions at the current insertion point."""

    def __init__(self, module_importer: ModuleImporter, comp: Computation, args: Sequence[Values]):
        self.module_importer = module_importer
        self.comp = comp
        if len(args) != len(comp.parameters):
            raise module_importer.error(f"computation '{comp.name}' takes {len(comp.parameters)} parameters, called with {len(args)}")
        self.args = args
        self.values: dict[str, Values] = {}

    def value(self, name: str) -> Values:
        """The leaves of an operand: an instruction's, or for a compact tuple-element
        operand `x#1#0` (newer XLA dumps) the leaves of that element of x's tuple."""
        leaves = self.values.get(name)
        if leaves is None:
            base, index = split_operand(name)
            start, stop = self.comp.by_name[base].shape.leaf_span(index)
            leaves = self.values[base][start:stop]
            self.values[name] = leaves
        return leaves

    def run(self) -> Values:
        """Import the instructions in order, each by its opcode's rule (see build), and
        return the root's leaves.  A PURE instruction equal to an earlier one of the block
        takes its values where the block has a duplicate merger (converter.importer.merging)."""
        values = self.values
        module_importer = self.module_importer
        comp = self.comp
        by_name = comp.by_name
        taps = module_importer.tap_plan is not None
        rules_get = RULES.get
        merger = module_importer.duplicate_merger()
        pure = PURE if merger is not None else frozenset()
        monitor = module_importer.monitor
        frame = monitor.enter(comp) if monitor is not None else None
        if frame is not None and frame.path is None:
            frame = None  # not monitored here; the frame stays on the stack for nested ones
        for position, instr in enumerate(comp.instructions):
            opcode = instr.opcode
            if frame is not None:
                frame.position, frame.instr = position, instr
            if opcode == "parameter":
                values[instr.name] = list(self.args[instr.parameter_number])
                if taps:
                    module_importer.record_tap(instr.name, values[instr.name])
                if frame is not None and comp.is_entry:
                    monitor.record(frame, instr, [], values[instr.name])
                continue
            rule = rules_get(opcode) or find_rule(opcode)
            if rule is None:
                raise module_importer.error(_no_rule_message(opcode), instr)
            # The operands as rules take them (a tuple-shaped one as its list of leaves), and their shapes.
            operands: list[Any] = []
            shapes: list[Shape] = []
            for name in instr.operands:
                leaves = values.get(name)
                producer = by_name.get(name)
                if leaves is None or producer is None:  # a compact `x#1` operand
                    leaves = self.value(name)
                    shape = comp.operand_shape(name)
                else:
                    shape = producer.shape
                shapes.append(shape)
                operands.append(leaves if shape.element_type == "tuple" else leaves[0])
            key = None
            if opcode in pure:
                key, earlier = merger.find(instr, instr.shape, shapes, operands)  # type: ignore[union-attr]
                if earlier is not None:
                    values[instr.name] = earlier
                    continue
            out = values[instr.name] = self.build(rule, instr, operands, shapes)
            if key is not None:
                merger.record(key, out, instr, operands, shapes, instr.shape)  # type: ignore[union-attr]
            if taps:
                module_importer.record_tap(instr.name, out)
            if frame is not None:
                out = values[instr.name] = monitor.record(
                    frame, instr, [v for x in operands for v in (x if type(x) is list else [x])], out)
        if monitor is not None:
            monitor.leave()
        return values[comp.root.name]

    def build(self, rule: ImportRule, instr: Instruction, operands: list[Any], shapes: list[Shape]) -> Values:
        """The result leaves of `instr`, built by its `rule` with a fresh RuleContext at the
        instruction's location (none for an UNLOCATED opcode).  Where the op computes in
        other element types than the dump's (converter.importer.type_correction), the rule
        builds it in those and its results are converted to the dump's."""
        module_importer = self.module_importer
        opcode = instr.opcode
        shape = instr.shape
        computed = computed_shape(opcode, shape, shapes) if opcode in CORRECTED else None
        ctx = RuleContext(module_importer, self, instr, computed or shape)
        try:
            if opcode in UNLOCATED and computed is None:
                out = rule(ctx, *operands)
                return out if type(out) is list else list(out)
            with module_importer.location(instr):
                out = rule(ctx, *operands)
                if isinstance(out, ir.Value):
                    out = [out]
                elif isinstance(out, (ir.OpView, ir.Operation)):
                    out = list(out.results)
                elif type(out) is not list:
                    out = list(out)
                if computed is not None:
                    out = to_dump_types(out, module_importer.leaf_types(shape))
                return out
        except HloImportError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, ir.MLIRError) as e:
            raise module_importer.error(f"cannot import: {e}", instr) from e


class RuleContext:
    """What an import rule sees besides its operands: the instruction and the importer.
    A fresh one per instruction (ComputationImporter.build), as JAX's lowering rules get one
    per equation: what a rule keeps of it (a closure, a nested import) stays its own."""

    __slots__ = ("module_importer", "computation_importer", "instr", "attrs", "shape")

    def __init__(self, module_importer: ModuleImporter, computation_importer: ComputationImporter,
                 instr: Instruction, shape: Shape):
        self.module_importer = module_importer
        self.computation_importer = computation_importer
        self.instr = instr
        self.attrs: dict[str, Any] = instr.attrs
        # The result shape the rule builds: the instruction's, in the element types its op
        # computes in (converter.importer.type_correction).
        self.shape = shape

    def with_shape(self, shape: Shape) -> RuleContext:
        """A context for the same instruction whose rule builds a result of `shape` (a
        rule that hands part of its work to another opcode's rule)."""
        return RuleContext(self.module_importer, self.computation_importer, self.instr, shape)

    @property
    def opcode(self) -> str:
        return self.instr.opcode

    def error(self, message: str) -> HloImportError:
        return self.module_importer.error(message, self.instr)

    def operand_shape(self, i: int) -> Shape:
        return self.computation_importer.comp.operand_shape(self.instr.operands[i])

    def operand_instruction(self, i: int) -> Instruction:
        """The instruction producing operand i (for a compact `x#1` operand: x, whose
        tuple element 1 the operand is; see operand_shape for the operand's own shape)."""
        return self.computation_importer.comp.producer(self.instr.operands[i])

    def result_type(self, shape: Shape | None = None) -> ir.Type:
        shape = shape or self.shape
        if shape.element_type in NOT_ARRAYS:
            raise self.error(f"expected an array result, got {shape_to_text(shape)}")
        return self.module_importer.leaf_types(shape)[0]

    def result_types(self, shape: Shape | None = None) -> list[ir.Type]:
        return self.module_importer.leaf_types(shape or self.shape)

    def tensor_type(self, shape: Shape) -> ir.Type:
        return self.module_importer.tensor_type(shape)

    def computation(self, name: str) -> Computation:
        comp = self.module_importer.hlo.by_name.get(name)
        if comp is None:
            raise self.error(f"calls unknown computation '{name}'")
        return comp

    def inline(self, comp_name: str, args: Sequence[Values]) -> Values:
        """Import computation `comp_name` here with `args` (leaves per parameter)."""
        return ComputationImporter(self.module_importer, self.computation(comp_name), args).run()

    def region(self, region: ir.Region, comp_name: str, arg_types: Sequence[Sequence[ir.Type]]) -> None:
        """Fill `region` with one block importing `comp_name`; block arguments have
        `arg_types` grouped per computation parameter."""
        comp = self.computation(comp_name)
        flat = [t for group in arg_types for t in group]
        block = region.blocks.append(*flat)
        args, i = [], 0
        arguments = list(block.arguments)  # once: a loop carries hundreds of values
        for group in arg_types:
            args.append(arguments[i : i + len(group)])
            i += len(group)
        with ir.InsertionPoint(block):
            results = ComputationImporter(self.module_importer, comp, args).run()
            with self.module_importer.location(comp.root):
                build_op("stablehlo.return", [], results)

    def scalar_region_types(self, comp_name: str) -> list[list[ir.Type]]:
        """Block argument types for a reducer-like computation, from its parameters."""
        comp = self.computation(comp_name)
        return [self.module_importer.leaf_types(p.shape) for p in comp.parameters]

    def constant(self, value: Any, element_type: str, shape: Sequence[int] = ()) -> ir.Value:
        """A splat or dense constant of an HLO element type."""
        arr = np.asarray(value)
        t = ir.RankedTensorType.get(list(shape), mlir_element_type(element_type))
        if arr.size == 1 and element_type not in ("c64", "c128"):
            scalar = np.asarray(arr.reshape(()), dtype=dtypes.numpy_dtype(element_type)).reshape(1)
            attr = ir.DenseElementsAttr.get_splat(t, dense_scalar_attr(scalar, element_type))
        else:
            values = np.asarray(arr, dtype=dtypes.numpy_dtype(element_type))
            values = np.broadcast_to(values.reshape(()), shape) if values.size == 1 else values.reshape(shape)
            attr = dense_elements(values, element_type)
        return stablehlo.ConstantOp(attr).result


def dense_elements(arr: np.ndarray, element_type: str, splat_dims: tuple[int, ...] | None = None) -> ir.DenseElementsAttr:
    """DenseElementsAttr for a numpy array of an HLO element type (splat when uniform);
    with `splat_dims`, `arr` is one value splatted to that shape, never materialized."""
    t = mlir_element_type(element_type)
    if splat_dims is not None:
        one = np.asarray(arr).reshape(1)
        if element_type in ("c64", "c128"):  # one element's data given for a shape is a splat
            return ir.DenseElementsAttr.get(one, type=t, shape=list(splat_dims))
        shaped = ir.RankedTensorType.get(list(splat_dims), t)
        return ir.DenseElementsAttr.get_splat(shaped, dense_scalar_attr(one, element_type))
    shape = list(np.shape(arr))
    arr = np.ascontiguousarray(arr).reshape(shape)  # ascontiguousarray makes 0-d arrays 1-d
    flat = arr.reshape(-1)
    if element_type in ("c64", "c128"):
        # No Python binding makes a complex element attribute for get_splat; the array
        # form takes complex data of any shape (MLIR stores a uniform one as a splat).
        return ir.DenseElementsAttr.get(arr, type=t, shape=shape)
    if flat.size == 1 or (flat.size > 1 and _all_same_bits(flat)):
        shaped = ir.RankedTensorType.get(shape, t)
        return ir.DenseElementsAttr.get_splat(shaped, dense_scalar_attr(flat[:1], element_type))
    if element_type == "pred":
        return ir.DenseElementsAttr.get(arr.astype(np.bool_), type=t, shape=shape)
    return ir.DenseElementsAttr.get(arr, type=t, shape=shape)


def _all_same_bits(flat: np.ndarray) -> bool:
    size = flat.dtype.itemsize
    bits = flat.view(np.uint64).reshape(-1, 2) if size == 16 else flat.view(f"u{size}")
    return bool((bits == bits[0]).all())


def dense_scalar_attr(one: np.ndarray, element_type: str) -> ir.Attribute:
    """The element attribute of a one-element array, for splats."""
    t = mlir_element_type(element_type)
    v = one.reshape(-1)[0]
    if element_type == "pred":
        return ir.IntegerAttr.get(t, int(bool(v)))
    if isinstance(t, ir.IntegerType):
        return integer_attr(t, int(v))
    if isinstance(t, ir.ComplexType):
        return ir.DenseElementsAttr.get(np.asarray(one).reshape(()), type=t).get_splat_value()
    return ir.FloatAttr.get(t, float(v))


def operand_leaves(x: Any) -> list[ir.Value]:
    """A rule's operand as its list of leaf values (a tuple-shaped operand already is one)."""
    return x if isinstance(x, list) else [x]


def flat_leaves(operands: Any) -> list[ir.Value]:
    """The leaf values of all of a rule's operands, in order."""
    return [v for x in operands for v in operand_leaves(x)]


def frontend_attributes(values: dict[str, Any]) -> ir.DictAttr:
    """`frontend_attributes={...}` as the dictionary XLA's importer attaches (braced MLIR
    values such as Shardy meshes stay as their text)."""
    return ir.DictAttr.get({k: ir.StringAttr.get(v.text if isinstance(v, hlo_attrs.Raw) else v) for k, v in values.items()})


def import_hlo(hlo: Module, options: ImportOptions | None = None, context: ir.Context | None = None, *,
               verify: bool = True) -> ir.Module:
    """Import a parsed HLO module into a new StableHLO module (a faithful import),
    verified unless `verify=False` (for a caller whose next step verifies it anyway)."""
    module = ModuleImporter(hlo, options, context).run()
    if not verify:
        return module
    try:
        module.operation.verify()
    except ir.MLIRError as e:  # a rule wrote something StableHLO rejects: say where, not which pass
        raise HloImportError(f"the imported module does not verify (an importer bug; please report it):\n{e}",
                             None, hlo.path) from None
    return module


# The rules register themselves in the table `find_rule` reads; they import this module's
# helpers, so they are imported once those exist (the package's __init__ is kept light).
from converter.importer import rules  # noqa: E402,F401
