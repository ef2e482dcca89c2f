"""`hlo-roundtrip extract DUMP --root NAME -o OUT.hlo`: a standalone HLO module computing
one instruction of a dump from parameters that hold its operands' values in this run.

The operands' values come from taps on the converted dump (inside while loops at the
iteration `--iteration` names, one index per enclosing loop, outer first; without it the
last iteration, as a tap).  The module is plain HLO for XLA's CPU compiler: a fusion or
call is written as its computation's instructions, fusions and calls inside the
computations it keeps (a reduce's, a while's) are inlined the same way, the dump's
layouts stay on the shapes, backend_config and aliasing (but a custom-call's: its
arguments) and sharding annotations are dropped (they are the dump backend's).  XLA's CPU compiler has none of the GPU/TPU custom-call targets:
a cut holding one (a cuBLAS GEMM, a cuDNN convolution, cuSOLVER, TopK, a TPU call) is
converted whole as `run` converts the dump (importer, conversion pipeline) and written
back as the HLO jaxlib lowers the StableHLO to (converter/runtime/hlo_export.py; the
dump's structure is then XLA's of the converted cut; a jaxlib LAPACK FFI call stays one,
which XLA runs in a jaxlib process only); `--allow-custom-calls` writes them as they are.  The inputs
go to OUT.inputs.npz keyed arg0..argN, one per parameter (a tuple-shaped operand is one
parameter per array leaf, rebuilt with a tuple instruction); constants stay in the text.
A cut holding a TPU op that changes element type in place (float_type_correction), which
XLA's parser refuses as written, takes the converted route too; `as_converted` asks for it
for any cut.  A cut inside a loop that ran too few iterations in this run (its taps hold
the zero carry; taps.py's `iterations:WHILE`) or whose computations hold a collective of a
multi-device module is refused.  `--verify` and its fallbacks (the cut as `run` computes
it, one producer level up) are the command's: converter/tools/extract_command.py.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from converter.common.errors import ConverterError, SourceLocation, UsageError, diagnostic
from converter.hlo.ir import Computation, Instruction, Module, split_operand
from converter.importer.taps import called_computations, tap_path

if TYPE_CHECKING:  # annotations only: NumPy loads where arrays are made, not at the CLI's start-up
    import numpy as np

INLINED_OPCODES = {"fusion": "calls", "call": "to_apply"}
# Annotations of the dump's backend and partitioning that XLA's CPU compiler would read as
# its own (a GPU fusion's backend_config, a TPU sharding) or that name instructions the
# inlined copy no longer has.
DROPPED_ATTRS = ("backend_config", "sharding", "control-predecessors", "output_to_operand_aliasing",
                 "schedule", "statistics")


# Instructions whose value depends on the devices a module runs on: not extracted from a
# multi-device module into a one-device one.
DEVICE_DEPENDENT = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                    "collective-broadcast", "ragged-all-to-all", "replica-id", "partition-id",
                    "all-reduce-start", "all-gather-start", "collective-permute-start"}


class ExtractError(ConverterError):
    pass


@dataclass
class Extracted:
    text: str
    inputs: list[np.ndarray]
    # What each parameter holds: the operand (leaf) it stands for.
    parameters: list[str]
    expected: list[np.ndarray] = field(default_factory=list)  # the tap of NAME (its array leaves)
    iterations: list[int] | None = None
    loops: list[str] = field(default_factory=list)
    converted: ConvertedCalls | None = None  # the backend calls converted (the "convert" route)
    # The same cut written as `run` computes it (extract_module's as_converted), from the
    # same values: (text, inputs, parameters, what was converted).  None where it was.
    as_converted: Callable[[], tuple[str, list[np.ndarray], list[str], ConvertedCalls]] | None = None


def find_instruction(hlo: Module, name: str) -> tuple[Computation, Instruction]:
    name = name.strip().lstrip("%")
    for comp in hlo.computations:
        instr = comp.by_name.get(name)
        if instr is not None:
            return comp, instr
    close = [i.name for c in hlo.computations for i in c.instructions if i.name.startswith(name.split(".")[0])][:5]
    hint = f" (instructions with that prefix: {', '.join(close)})" if close else ""
    raise ExtractError(diagnostic(SourceLocation(hlo.path), f"--root {name}: no instruction of that name{hint}"))


class _Names:
    """Instruction names of the extracted module, unique across it."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, name: str) -> str:
        out, k = name, 1
        while out in self.used:
            out = f"{name}.x{k}"
            k += 1
        self.used.add(out)
        return out


def _copy(instr: Instruction, name: str, operands: list[str]) -> Instruction:
    new = copy.copy(instr)
    new.name = name
    new.operands = operands
    new.attrs = {k: v for k, v in instr.attrs.items() if k not in DROPPED_ATTRS or
                 (k == "backend_config" and instr.opcode == "while")}
    new.is_root = False
    return new


def _rename(operand: str, names: dict[str, str]) -> str:
    base, index = split_operand(operand)
    new = names.get(base, base)
    return new + "".join(f"#{i}" for i in index)


# A custom-call's attributes that are part of what it computes (kept where DROPPED_ATTRS
# drops them from other instructions).
CUSTOM_CALL_ATTRS = ("backend_config", "output_to_operand_aliasing")
# What extract does with a backend custom-call in the cut.
CUSTOM_CALLS = ("convert", "keep", "refuse")


class _Builder:
    """Copies of computations with every fusion and call inlined, and the computations
    the copies call (reduce regions, loop bodies, ...), each once."""

    def __init__(self, hlo: Module, custom_calls: str):
        self.hlo = hlo
        self.custom_calls = custom_calls
        self.names = _Names()
        self.computations: dict[str, Computation] = {}
        self.order: list[str] = []
        self.copy_sources: dict[str, str] = {}  # copy-start -> its operand
        self.backend_calls: list[Instruction] = []  # the dump's custom-calls the module holds
        # Instructions whose dump element type is not the one their op computes in (TPU's
        # float_type_correction: a copy or reduce of f32 values written bf16): XLA's parser
        # refuses them as they are; the conversion computes them (type_correction.py).
        self.type_changes: list[Instruction] = []
        self._comp_of: dict[str, Computation] | None = None

    def check(self, instr: Instruction) -> None:
        if self._changes_element_type(instr):
            self.type_changes.append(instr)
        if instr.opcode == "custom-call":
            if self.custom_calls == "refuse":
                target = instr.attrs.get("custom_call_target", "?")
                raise ExtractError(diagnostic(self.hlo.location_of(instr),
                                              f"cannot extract %{instr.name}'s "
                                              f"computation: it holds the backend custom-call {target!r}, which XLA's CPU "
                                              "compiler does not run (pass --allow-custom-calls to write it anyway)"))
            self.backend_calls.append(instr)
        if instr.opcode.endswith(("-start", "-update", "-done")) and instr.opcode not in ("copy-start", "copy-done"):
            raise ExtractError(diagnostic(self.hlo.location_of(instr),
                                          "cannot extract through "
                                          f"%{instr.name} ({instr.opcode}): an asynchronous pair has no single-instruction "
                                          "form here; extract its -done instruction's operand or a later instruction"))

    def emit(self, instructions: list[Instruction], names: dict[str, str], out: list[Instruction]) -> None:
        """Append copies of `instructions` to `out` (fusions and calls inlined, called
        computations copied); `names` maps the source names to the copies' names (a
        parameter's to its caller's operand where inlined)."""
        for instr in instructions:
            if instr.opcode == "parameter" and instr.name in names:
                continue
            self.check(instr)
            operands = [_rename(o, names) for o in instr.operands]
            key = INLINED_OPCODES.get(instr.opcode)
            callee = instr.attrs.get(key) if key else None
            callee = callee[0] if isinstance(callee, (list, tuple)) else callee
            if callee in self.hlo.by_name:
                inner = self.hlo.by_name[callee]
                inner_names = {p.name: operands[p.parameter_number] for p in inner.parameters}
                self.emit(inner.instructions, inner_names, out)
                names[instr.name] = inner_names.get(inner.root.name, inner.root.name)
                continue
            if instr.opcode == "bitcast":
                names[instr.name] = self.logical_bitcast(instr, operands[0], out)
                continue
            if instr.opcode in ("copy-start", "copy-done"):
                names[instr.name] = self.synchronous_copy(instr, operands[0], out)
                continue
            new = _copy(instr, self.names.fresh(instr.name), operands)
            if instr.opcode == "custom-call":
                # A backend call's backend_config is its arguments (a GEMM's dimension
                # numbers, alpha and beta; a convolution's activation), and its aliasing
                # says which operand a kernel's output starts from (a Triton kernel that
                # adds into its output): kept.
                new.attrs.update({k: instr.attrs[k] for k in CUSTOM_CALL_ATTRS if k in instr.attrs})
            names[instr.name] = new.name
            for attr, comp_name in called_computations(instr, self.hlo):
                self.computation(comp_name)
            out.append(new)

    def logical_bitcast(self, instr: Instruction, operand: str, out: list[Instruction]) -> str:
        """A dump's bitcast (bytes reinterpreted by the layouts, which XLA's layout
        assignment refuses to see in its input) as the ops it means: the operand in its
        physical order (transpose), reshaped to the result's physical dims, permuted back
        to the result's logical order; one reshape where the orders are row-major."""
        from converter.hlo.ir import Shape

        src = self.operand_shape(instr)
        dst = instr.shape
        from converter.hlo.ir import ELEMENT_BITS

        untiled = all(s.layout is None or not s.layout.tiles for s in (src, dst))
        if not untiled and src.num_elements() == dst.num_elements():
            from converter.importer.rules.shapes import _tiles_reorder

            # Tiles that store the elements in the order the untiled layouts do (TPU's
            # (8,128) tiles of a row-major array, mostly): read as if untiled.
            untiled = not _tiles_reorder(src, dst)
        same_width = ELEMENT_BITS.get(src.element_type) == ELEMENT_BITS.get(dst.element_type)
        if not same_width or src.num_elements() != dst.num_elements() or not untiled:
            raise ExtractError(diagnostic(self.hlo.location_of(instr),
                                          f"cannot write %{instr.name} "
                                          f"(bitcast {src} → {dst}) as plain HLO: it changes the element width, the "
                                          "element count or the tiling"))
        retyped = None
        if src.element_type != dst.element_type:
            # Same width: the layout change in the source type, then bitcast-convert.
            retyped = dst
            dst = Shape(src.element_type, dst.dims, dst.dynamic, dst.layout)

        def order(shape) -> list[int]:
            if shape.layout is None or not shape.layout.minor_to_major:
                return list(range(len(shape.dims)))
            return list(reversed(shape.layout.minor_to_major))

        src_order, dst_order = order(src), order(dst)
        dst_phys = [dst.dims[d] for d in dst_order]
        inverse = [0] * len(dst_order)
        for i, d in enumerate(dst_order):
            inverse[d] = i
        name = operand
        if src_order != sorted(src_order):
            t = _copy(instr, self.names.fresh(f"{instr.name}.physical"), [name])
            t.opcode, t.shape, t.operand_shapes = "transpose", Shape(src.element_type, tuple(src.dims[d] for d in src_order)), None
            t.attrs = {"dimensions": src_order}
            out.append(t)
            name = t.name
        final = dst_order == sorted(dst_order)
        last = retyped is None
        r = _copy(instr, self.names.fresh(instr.name if final and last else f"{instr.name}.reshape"), [name])
        r.opcode, r.operand_shapes, r.attrs = "reshape", None, {}
        r.shape = dst if final else Shape(dst.element_type, tuple(dst_phys))
        out.append(r)
        name = r.name
        if not final:
            t = _copy(instr, self.names.fresh(instr.name if last else f"{instr.name}.logical"), [r.name])
            t.opcode, t.operand_shapes, t.attrs, t.shape = "transpose", None, {"dimensions": inverse}, dst
            out.append(t)
            name = t.name
        if retyped is not None:
            c = _copy(instr, self.names.fresh(instr.name), [name])
            c.opcode, c.operand_shapes, c.attrs, c.shape = "bitcast-convert", None, {}, retyped
            out.append(c)
            name = c.name
        return name

    def synchronous_copy(self, instr: Instruction, operand: str, out: list[Instruction]) -> str:
        """A copy between memory spaces (copy-start: (destination, source, context);
        copy-done: the destination) as the plain copy it is on values: copy-done of a
        copy-start in the module is a copy of its source; of a copy-start given as a
        parameter (a tuple), element 0 of it."""
        if instr.opcode == "copy-start":
            self.copy_sources[instr.name] = operand
            return instr.name  # nothing uses it but its copy-done
        source = self.copy_sources.get(operand)
        new = _copy(instr, self.names.fresh(instr.name), [source if source is not None else operand])
        new.operand_shapes = None
        if source is not None:
            new.opcode = "copy"
        else:
            new.opcode, new.attrs = "get-tuple-element", {"index": 0}
        out.append(new)
        return new.name

    def _changes_element_type(self, instr: Instruction) -> bool:
        from converter.importer.type_correction import CORRECTED, computed_shape

        if instr.opcode not in CORRECTED:
            return False
        if self._comp_of is None:
            self._comp_of = {i.name: c for c in self.hlo.computations for i in c.instructions}
        comp = self._comp_of.get(instr.name)
        if comp is None:
            return False
        shapes = [comp.operand_shape(o) for o in instr.operands]
        return computed_shape(instr.opcode, instr.shape, shapes) is not None

    def operand_shape(self, instr: Instruction):
        if instr.operand_shapes and instr.operand_shapes[0] is not None:
            return instr.operand_shapes[0]
        for comp in self.hlo.computations:
            if instr.name in comp.by_name and comp.by_name[instr.name] is instr:
                return comp.operand_shape(instr.operands[0])
        raise ExtractError(diagnostic(self.hlo.location_of(instr), f"no shape for %{instr.name}'s operand"))

    def computation(self, name: str) -> None:
        if name in self.computations:
            return
        source = self.hlo.by_name[name]
        self.computations[name] = None  # being built (a computation does not call itself)
        out: list[Instruction] = []
        names: dict[str, str] = {}
        for p in source.parameters:
            names[p.name] = self.names.fresh(p.name)
        params = [_copy(p, names[p.name], []) for p in source.parameters]
        self.emit([i for i in source.instructions if i.opcode != "parameter"], names, out)
        instructions = params + out
        root_name = names.get(source.root.name, source.root.name)
        root = next((i for i in instructions if i.name == root_name), None)
        if root is None:  # the root is a parameter passed straight through an inlined call
            raise ExtractError(diagnostic(SourceLocation(self.hlo.path),
                                          f"computation {name}'s root is not an instruction of its own"))
        root.is_root = True
        self.computations[name] = Computation(name, instructions, source.line, source.col, False, None,
                                              source.execution_thread, {i.name: i for i in instructions}, root, params)
        self.order.append(name)


def cut_instructions(comp: Computation, instr: Instruction, producers: int) -> list[Instruction]:
    """`instr` and its producers up to `producers` levels up within its computation
    (parameters stay outside: they are inputs), in the computation's order."""
    cut = {instr.name}
    frontier = {instr.name}
    for _ in range(producers):
        nxt = set()
        for name in frontier:
            for operand in comp.by_name[name].operands:
                base = split_operand(operand)[0]
                if base not in cut and comp.by_name[base].opcode != "parameter":
                    nxt.add(base)
        cut |= nxt
        frontier = nxt
    return [i for i in comp.instructions if i.name in cut]


def cut_between(comp: Computation, instr: Instruction, cut_from: list[str], path: str) -> list[Instruction]:
    """`instr` and every instruction of its computation between it and the `cut_from`
    instructions: walking back from `instr` through operands, stopping at a `cut_from`
    instruction (its value becomes a parameter) or at a parameter of the computation. A path
    that reaches no `cut_from` instruction is kept back to the computation's parameters (and
    constants), which become parameters too. A `cut_from` instruction that is not in
    `instr`'s computation, or that `instr` is not computed from, is refused (the cut would
    not be where it was asked for)."""
    stops = []
    for name in cut_from:
        name = name.strip().lstrip("%")
        other = comp.by_name.get(name)
        if other is None:
            raise ExtractError(diagnostic(SourceLocation(path, instr.line, instr.col),
                                          f"--from {name}: no instruction of that name "
                                          f"in %{instr.name}'s computation {comp.name} (a cut stays within one computation)"))
        stops.append(name)
    if instr.name in stops:
        raise ExtractError(diagnostic(SourceLocation(path, instr.line, instr.col),
                                      f"--from {instr.name}: that is the root itself"))
    cut, reached, todo = {instr.name}, set(), [instr.name]
    while todo:
        for operand in comp.by_name[todo.pop()].operands:
            base = split_operand(operand)[0]
            if base in stops:
                reached.add(base)
            elif base not in cut and comp.by_name[base].opcode != "parameter":
                cut.add(base)
                todo.append(base)
    missed = [n for n in stops if n not in reached]
    if missed:
        other = comp.by_name[missed[0]]
        raise ExtractError(diagnostic(SourceLocation(path, other.line, other.col),
                                      f"--from {missed[0]}: %{instr.name} is not "
                                      "computed from it (or only through another --from instruction): nothing to cut there"))
    return [i for i in comp.instructions if i.name in cut]


def choose_cut(comp: Computation, instr: Instruction, producers: int, cut_from: list[str] | None,
               path: str) -> list[Instruction]:
    if cut_from:
        return cut_between(comp, instr, cut_from, path)
    return cut_instructions(comp, instr, producers)


def cut_operands(comp: Computation, cut: list[Instruction]) -> list[str]:
    """The instructions outside `cut` whose values it reads: the extracted module's
    parameters (constants with their literal aside: copied)."""
    inside = {i.name for i in cut}
    out = []
    for i in cut:
        for operand in i.operands:
            base = split_operand(operand)[0]
            if base not in inside:
                out.append(base)
    return list(dict.fromkeys(out))


def extract_module(hlo: Module, name: str, operand_values: dict[str, list[np.ndarray]],
                   allow_custom_calls: bool = False, producers: int = 0,
                   cut_from: list[str] | None = None, *, custom_calls: str | None = None,
                   options=None, converted: ConvertedCalls | None = None,
                   as_converted: bool = False) -> tuple[str, list[np.ndarray], list[str]]:
    """The HLO text computing instruction `name` (with `producers` levels of its producers)
    from parameters, the parameters' values (`operand_values`: per operand instruction
    outside the cut, its array leaves' values), and what each parameter holds.

    A backend custom-call in the cut is, by `custom_calls`: "convert" (the default; "keep"
    where `allow_custom_calls`): the whole cut converted as `run` converts it (the importer
    and the pipeline of `options`, a ConvertOptions: default the default one) and written
    back as the HLO jaxlib lowers that to (`converted`, when given, is told what); "keep":
    written as it is; "refuse": an ExtractError naming it.  `as_converted` takes the
    "convert" route for every cut, calls or not: the module then computes what `run`
    computes (e.g. erf by the polynomial the conversion expands it to, not XLA's own erf)."""
    from converter.hlo.printer import module_to_text

    if custom_calls is None:
        custom_calls = "keep" if allow_custom_calls else "convert"
    if custom_calls not in CUSTOM_CALLS:
        raise ValueError(f"custom_calls={custom_calls!r}: one of {', '.join(CUSTOM_CALLS)}")

    comp, instr = find_instruction(hlo, name)
    if instr.opcode == "parameter":
        raise ExtractError(diagnostic(hlo.location_of(instr),
                                      f"%{instr.name} is a parameter: there is no "
                                      "computation to extract (tap it for its value)"))
    if instr.opcode == "copy-start":
        raise ExtractError(diagnostic(hlo.location_of(instr),
                                      f"%{instr.name} (copy-start) only starts a "
                                      "copy between memory spaces: extract its copy-done"))
    builder = _Builder(hlo, custom_calls)
    entry_instructions: list[Instruction] = []
    names: dict[str, str] = {}
    inputs: list[np.ndarray] = []
    held: list[str] = []
    cut = choose_cut(comp, instr, producers, cut_from, hlo.path)
    for operand in cut_operands(comp, cut):
        producer = comp.by_name[operand]
        if producer.opcode == "constant" and producer.literal is not None and not producer.literal_elided:
            new = _copy(producer, builder.names.fresh(operand), [])
            names[operand] = new.name
            entry_instructions.append(new)
            continue
        leaves = producer.shape.leaves()
        values = operand_values[operand]
        if not producer.shape.is_tuple:
            param = _parameter(builder.names.fresh(operand), producer.shape, len(inputs))
            entry_instructions.append(param)
            names[operand] = param.name
            inputs.append(values[0])
            held.append(operand)
            continue
        if any(leaf.is_tuple for leaf in producer.shape.tuple_shapes):
            raise ExtractError(diagnostic(hlo.location_of(producer),
                                          f"operand %{operand} of %{name} is a "
                                          "nested tuple; extract an instruction that uses its elements"))
        parts, it = [], iter(values)
        for k, leaf in enumerate(leaves):
            if leaf.is_token:
                token = Instruction(builder.names.fresh(f"{operand}.token{k}"), "after-all", leaf, [], {}, 0, 0)
                entry_instructions.append(token)
                parts.append(token.name)
                continue
            param = _parameter(builder.names.fresh(f"{operand}.leaf{k}"), leaf, len(inputs))
            entry_instructions.append(param)
            parts.append(param.name)
            inputs.append(next(it))
            held.append(f"{operand}#{k}")
        tup = Instruction(builder.names.fresh(operand), "tuple", producer.shape, parts, {}, 0, 0)
        entry_instructions.append(tup)
        names[operand] = tup.name
    builder.emit(cut, names, entry_instructions)
    root_name = names[instr.name]
    root = next((i for i in entry_instructions if i.name == root_name), None)
    if root is None:  # a fusion whose root is one of its parameters: copy the operand
        source = next(i for i in entry_instructions if i.name == root_name.split("#")[0])
        root = Instruction(builder.names.fresh(instr.name), "copy" if not source.shape.is_tuple else "tuple",
                           source.shape, [source.name], {}, 0, 0)
        entry_instructions.append(root)
    root.is_root = True
    params = [i for i in entry_instructions if i.opcode == "parameter"]
    entry = Computation(f"extract.{_symbol(instr.name)}", entry_instructions, 0, 0, True, None, "",
                        {i.name: i for i in entry_instructions}, root, params)
    computations = [builder.computations[n] for n in builder.order] + [entry]
    module = Module(f"extract_{_symbol(instr.name)}", computations, {}, hlo.stack_frames, hlo.path,
                    {c.name: c for c in computations}, entry)
    text = module_to_text(module)
    if (builder.backend_calls and custom_calls == "convert") or builder.type_changes or as_converted:
        text = convert_backend_calls(hlo, instr, text, builder.backend_calls, options, converted)
        if converted is not None and builder.type_changes:
            converted.type_changes = [f"%{i.name} ({i.opcode} to {i.shape.element_type})" for i in builder.type_changes]
    return text, inputs, held


@dataclass
class ConvertedCalls:
    """What the "convert" route did: the dump's backend calls it converted (`%name (target)`),
    and the custom-calls of jaxlib's own CPU library the written module holds (LAPACK's
    FFI handlers: XLA runs them in a process that loaded jaxlib, not from a bare `xla` tool)."""

    calls: list[str] = field(default_factory=list)
    jaxlib_targets: list[str] = field(default_factory=list)
    done: bool = False  # the route was taken
    type_changes: list[str] = field(default_factory=list)  # why, when no backend call made it


def convert_backend_calls(hlo: Module, root: Instruction, text: str, calls: list[Instruction], options=None,
                          converted: ConvertedCalls | None = None) -> str:
    """The extracted module `text` (holding the dump's backend `calls`, backend configs kept)
    converted as `run` converts the dump (importer, conversion pipeline) and written back
    as the HLO jaxlib lowers the StableHLO to: its parameters stay in order (arg0..argN),
    its result is the root's value (a tuple of its leaves where it has several).  Anything
    the conversion cannot do is an ExtractError at the root naming the calls and why."""
    from converter.hlo.parser import parse_hlo
    from converter.runtime.convert import convert_module, convert_options
    from converter.runtime.hlo_export import main_result_count, needs_jaxlib, stablehlo_to_hlo_text

    named = [f"%{c.name} ({c.attrs.get('custom_call_target', '?')})" for c in calls]
    what = f"its backend call(s) {', '.join(named)} do not" if named else "the cut does not"
    options = convert_options(options, taps=None, keep_fusions=False, dump_dir=None, print_ir_after_all=None)
    try:
        cut = parse_hlo(text, f"<extracted %{root.name}>", allow_unknown_attributes=options.allow_unknown_attributes)
        module = convert_module(cut, options)
        results, leaves = main_result_count(module), len(root.shape.leaves())
        if results != leaves:
            # The conversion returns more than the root's value (a host callback's
            # arguments become results): the module would not be the root's.
            raise ConverterError(f"the converted cut returns {results} value(s) where %{root.name} has {leaves} "
                                 "(a host callback in the cut adds the values it would have received)")
        out = stablehlo_to_hlo_text(module)
    except ConverterError as e:
        raise ExtractError(diagnostic(hlo.location_of(root),
                                      f"cannot write %{root.name}'s cut as plain HLO: {what} convert as `run` "
                                      f"converts them: {e}")) from None
    if converted is not None:
        converted.done = True
        converted.calls = named
        converted.jaxlib_targets = needs_jaxlib(module)
    return out


def _parameter(name: str, shape, number: int) -> Instruction:
    return Instruction(name, "parameter", shape, [], {}, 0, 0, parameter_number=number)


def _symbol(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name)


def parse_iteration(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"--iteration {text!r}: give one iteration per enclosing while loop, outer first "
                         "(e.g. 3 or 1,4)") from None
    if any(v < 0 for v in values):
        raise UsageError(f"--iteration {text!r}: iterations count from 0")
    return values


def extract(path: str, name: str, arrays: list[np.ndarray] | None = None, iteration: list[int] | None = None, *,
            program_loader=None, seed: int = 0, allow_custom_calls: bool = False, hlo: Module | None = None,
            input_values: list[str] | None = None, inputs_path: str | None = None, producers: int = 0,
            device: int = 0, cut_from: list[str] | None = None, convert_options=None,
            as_converted: bool = False) -> Extracted:
    """Run the dump with taps on NAME's operands (and NAME) and build the module (backend
    calls of the cut converted with `convert_options`, a ConvertOptions, unless
    `allow_custom_calls` keeps them)."""
    import numpy as np

    from converter.importer.core import ImportOptions
    from converter.importer.taps import ITERATIONS, TapRequest, trip_count

    if hlo is None:
        from converter.hlo.parser import parse_hlo_file

        hlo = parse_hlo_file(path)
    comp, instr = find_instruction(hlo, name)
    ok, why, bodies = tap_path(hlo, comp, False)
    if not ok:
        raise ExtractError(diagnostic(hlo.location_of(instr), f"cannot extract %{instr.name}: {why}"))
    bodies = list(reversed(bodies))  # outer first
    callers = {c: (cc, i) for cc in hlo.computations for i in cc.instructions
               for k, c in called_computations(i, hlo) if i.opcode == "while" and k == "body"}
    loops = [callers[b][1] for b in bodies]
    if iteration is not None and len(iteration) != len(bodies):
        where = ", ".join(f"%{w.name}" for w in loops) or "none"
        raise UsageError(f"--iteration {','.join(map(str, iteration))}: %{instr.name} is inside {len(bodies)} while "
                         f"loop(s) ({where}): give one iteration for each, outer first")
    for depth, (caller_comp, loop) in enumerate(callers[b] for b in bodies):
        trips = trip_count(hlo, caller_comp, loop)
        k = iteration[depth] if iteration is not None else 0
        if trips is not None and k >= trips:
            if iteration is None:  # a loop the dump says never runs: nothing to extract at its last iteration
                raise ExtractError(diagnostic(hlo.location_of(instr), f"cannot extract %{instr.name}: %{loop.name} "
                                              "runs no iteration (its trip count is 0)"))
            raise UsageError(f"--iteration: %{loop.name} runs {trips} iteration(s) (0..{trips - 1}); "
                             f"iteration {k} does not exist")
    cut = choose_cut(comp, instr, producers, cut_from, hlo.path)
    operands = [o for o in cut_operands(comp, cut)
                if not (comp.by_name[o].opcode == "constant" and comp.by_name[o].literal is not None
                        and not comp.by_name[o].literal_elided)]
    tapped = list(dict.fromkeys(operands + ([instr.name] if any(not l.is_token for l in instr.shape.leaves()) else [])))
    request = TapRequest(names=tapped, iterations=[(k, 1) for k in iteration] if iteration is not None else None)
    if program_loader is not None:
        program = program_loader(ImportOptions(taps=request))
    else:
        from converter.runtime.convert import convert_module
        from converter.runtime.program import program_from_module

        program = program_from_module(convert_module(hlo, import_options=ImportOptions(taps=request)), hlo, path)
    if arrays is None:
        from converter.runtime.inputs import build_inputs

        arrays, _ = build_inputs(program, input_values or [], inputs_path, seed, False)
    outputs = program.execute(arrays)
    by_key = {spec.name: o for spec, o in zip(program.results, outputs)}
    depth = len(bodies) if iteration is not None else 0
    devices = program.num_devices
    # A loop of unknown trip count returns how often it ran (taps.py): where it ran too few
    # times the taps hold its zero-initialized carry, not values, so there is no cut to make.
    for position, loop in enumerate(loops):
        count = by_key.get(ITERATIONS + loop.name)
        if count is None:
            continue
        count = np.asarray(count)
        ran = int(count.reshape(-1)[device if devices > 1 else 0] if count.ndim else count)
        k = iteration[position] if iteration is not None else 0
        if ran <= k:
            outer = " (in the last iteration of the loops around it)" if position else ""
            raise ExtractError(diagnostic(hlo.location_of(instr), f"cannot extract %{instr.name}: %{loop.name} ran "
                                          f"{ran} iteration(s) in this run{outer}, so the taps hold no value "
                                          f"{'at iteration ' + str(k) if iteration is not None else 'of any iteration'}; "
                                          "give inputs that run it (--inputs, --input)"))
    if devices > 1:
        cross = [i for i in _reachable(hlo, cut) if i.opcode in DEVICE_DEPENDENT]
        if cross:
            raise ExtractError(diagnostic(hlo.location_of(cross[0]),
                                          f"cannot extract %{cross[0].name} "
                                          f"({cross[0].opcode}) of a {devices}-device module as a one-device module: its value "
                                          "depends on the other devices"))
        if not 0 <= device < devices:
            raise UsageError(f"--device {device}: the module runs on devices 0..{devices - 1}")

    def leaves_of(op: str) -> list[np.ndarray]:
        keys = [k for k in by_key if k == f"tap:{op}" or k.startswith(f"tap:{op}#")]
        values = [np.asarray(by_key[k]) for k in keys]
        if devices > 1:  # a leading axis per device
            values = [v[device] for v in values]
        return [v.reshape(v.shape[depth:]) for v in values]

    values = {op: leaves_of(op) for op in operands}
    converted = ConvertedCalls()
    text, inputs, held = extract_module(hlo, instr.name, values, allow_custom_calls, producers, cut_from,
                                        options=convert_options, converted=converted, as_converted=as_converted)
    expected = leaves_of(instr.name) if instr.name in tapped else []

    def rewritten() -> tuple[str, list[np.ndarray], list[str], ConvertedCalls]:
        again = ConvertedCalls()
        out = extract_module(hlo, instr.name, values, allow_custom_calls, producers, cut_from,
                             options=convert_options, converted=again, as_converted=True)
        return (*out, again)

    return Extracted(text, inputs, held, expected, iteration, [w.name for w in loops],
                     converted if converted.done else None, None if converted.done else rewritten)


def _reachable(hlo: Module, instructions: list[Instruction]) -> list[Instruction]:
    """`instructions` and those of every computation they call, at any depth (a while
    body's collective makes the while device-dependent too)."""
    out, seen, todo = [], set(), list(instructions)
    while todo:
        instr = todo.pop(0)
        out.append(instr)
        for _, name in called_computations(instr, hlo):
            if name not in seen:
                seen.add(name)
                todo.extend(hlo.by_name[name].instructions)
    return out


def inputs_path_for(output: str) -> str:
    base = output[:-4] if output.endswith(".hlo") else output
    return base + ".inputs.npz"
