"""`hlo-roundtrip compare A B`: where two dumps of one program part ways.

Two dumps of the same program (before and after optimizations, two backends, two XLA
versions, a dump and a snapshot's module) run on the same inputs, each converted with
taps (converter.importer.taps) on the instructions that can be matched across them.  Instructions
are matched by what survives compilation: the framework's op_name, the source location
(stack frame or source_file/line) and the logical shape.  When several instructions of a
dump share a key (an op lowered to a chain of HLO ops, or copied), the last one in
dependency order stands for it: the value the source op finally produced.  Constants and
get-tuple-elements sharing a key are different values, not a chain (a region's constants
all carry its op_name, a loop's results the loop's): where a dump has several under one key,
each is keyed by its literal or tuple index as well, so only equal ones pair.  A fusion whose
root names another op than the fusion does is keyed by its root.

The report names the first diverging instructions in dependency order — diverging
instructions none of whose matched ancestors diverge — then a table of the error of
every matched pair.  Inside a while loop the values compared are the last iteration's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import sys
from typing import TYPE_CHECKING, Any

from converter.common.errors import ConverterError
from converter.hlo.ir import Instruction, Module
from converter.importer.taps import INLINED, ITERATIONS, LOOP_BODY, TapRequest, called_computations, tap_path

if TYPE_CHECKING:  # annotations only: NumPy loads where arrays are made, not at the CLI's start-up
    import numpy as np

    from converter.runtime.compare import Difference

Key = tuple[str, str, str, str]


@dataclass
class Flat:
    """A dump's instructions that have one value per execution, in dependency order,
    with each one's operands resolved through inlined computations' parameters."""

    order: list[Instruction] = field(default_factory=list)
    operands: dict[str, list[str]] = field(default_factory=dict)
    # The op_name of the `call` instructions an instruction sits in: a called function's
    # ops carry names relative to the call, which XLA's call inliner composes with the
    # call's own (`jit(f)/while/body/closed_call` + `sin`).
    op_name_prefix: dict[str, str] = field(default_factory=dict)


def flatten(hlo: Module) -> Flat:
    flat = Flat()

    def walk(comp_name: str, params: dict[str, list[str]], prefix: str) -> None:
        comp = hlo.by_name[comp_name]
        for instr in comp.instructions:
            if prefix:
                flat.op_name_prefix[instr.name] = prefix
            if instr.opcode == "parameter" and not comp.is_entry:
                flat.operands[instr.name] = params.get(instr.name, [])
                continue
            deps = [op.split("#")[0] for op in instr.operands]
            for key, callee in called_computations(instr, hlo):
                inner = hlo.by_name[callee]
                if (instr.opcode, key) in INLINED or (instr.opcode, key) == LOOP_BODY:
                    if instr.opcode in ("async-update", "async-done"):
                        continue
                    if (instr.opcode, key) == LOOP_BODY:
                        # The body's state comes from the init (and from the previous
                        # iteration: a back edge left out, so that order within the body
                        # decides what comes first).
                        mapping = {p.name: list(deps) for p in inner.parameters}
                    else:
                        mapping = {p.name: [deps[p.parameter_number]] if p.parameter_number < len(deps) else []
                                   for p in inner.parameters}
                    inner_prefix = prefix
                    if instr.opcode == "call" and instr.metadata is not None and instr.metadata.op_name:
                        inner_prefix = compose_op_name(prefix, instr.metadata.op_name)
                    walk(callee, mapping, inner_prefix)
                    deps = deps + [inner.root.name]
            flat.operands[instr.name] = deps
            flat.order.append(instr)

    walk(hlo.entry.name, {}, "")
    return flat


def compose_op_name(prefix: str, op_name: str) -> str:
    if not prefix or op_name == prefix or op_name.startswith(prefix + "/"):
        return op_name
    return f"{prefix}/{op_name}"


def logical_shape(shape) -> str:
    """Element type and dimensions without the size-1 ones, which optimizations add and
    drop freely (a reduction's kept dimension, a bitcast to rank 1)."""
    return f"{shape.element_type}[{','.join(str(d) for d in shape.dims if d != 1)}]"


def match_key(hlo: Module, instr: Instruction, loop_depth: int, prefix: str = "") -> Key | None:
    """(op_name, source location, logical shape, while-loop depth), or None without an
    op_name.  The depth keeps a loop counter read in the body apart from the loop's
    final count."""
    md = instr.metadata
    if md is None or not md.op_name:
        return None
    source = ""
    if md.stack_frame_id:
        frame = hlo.stack_frames.location(md.stack_frame_id)
        if frame is not None:
            source = f"{frame[0]}:{frame[1]}:{frame[2]}"
    if not source and md.source_file:
        source = f"{md.source_file}:{md.source_line}"
    shape = instr.shape
    if not shape.is_array:
        return None
    return compose_op_name(prefix, md.op_name), source, logical_shape(shape), str(loop_depth)


def keyed(hlo: Module, flat: Flat, keep_fusions: bool = False) -> dict[Key, Instruction]:
    """The instruction standing for each key, among those a tap can return: the last one
    of the key in dependency order (the value the source op finally produced).  A key
    whose instruction feeds a later instruction of the same op_name and source under
    another shape is an intermediate of that op (the sum inside a softmax's division,
    or the reciprocal that replaced it): what optimizations make of those differs, so
    only the op's outputs are matched."""
    ok_comps: dict[str, bool] = {}
    depth: dict[str, int] = {}
    where = {i.name: c for c in hlo.computations for i in c.instructions}
    candidates: list[tuple[Key, Instruction]] = []
    for instr in flat.order:
        comp = where[instr.name]
        if comp.name not in ok_comps:
            ok_comps[comp.name] = tap_path(hlo, comp, keep_fusions)[0]
            depth[comp.name] = len(tap_path(hlo, comp, keep_fusions)[2])
        if not ok_comps[comp.name]:
            continue
        if instr.opcode == "fusion" and not keep_fusions and _root_is_another_op(hlo, instr):
            continue
        key = match_key(hlo, instr, depth[comp.name], flat.op_name_prefix.get(instr.name, ""))
        if key is not None:
            candidates.append((key, instr))
    last: dict[Key, Instruction] = {}
    for key, instr in _told_apart(candidates):
        last[key] = instr
    position = {i.name: n for n, i in enumerate(flat.order)}
    groups: dict[tuple[str, str, str], list[Key]] = {}
    for key in last:
        groups.setdefault((key[0], key[1], key[3]), []).append(key)
    out = {}
    for keys in groups.values():
        for key in keys:
            instr = last[key]
            later = [last[k].name for k in keys if k != key and position[last[k].name] > position[instr.name]]
            if not later or not _feeds(flat, position, instr.name, later):
                out[key] = instr
    return out


def _root_is_another_op(hlo: Module, fusion: Instruction) -> bool:
    """Whether a fusion's value is its root's and the root names another op than the
    fusion does (XLA names a fusion after one of the ops it fuses: a GPU GEMM fusion is
    named for its dot while its root is the tanh applied to the dot's result).  The fused
    root, keyed by its own op_name, then stands for the value; the fusion's op_name
    would pair tanh(dot) with the other dump's plain dot."""
    calls = fusion.attrs.get("calls")
    callee = calls[0] if isinstance(calls, (list, tuple)) else calls
    comp = hlo.by_name.get(callee) if callee else None
    if comp is None or not fusion.shape.is_array or fusion.metadata is None:
        return False
    root = comp.root
    return bool(root.metadata is not None and root.metadata.op_name
                and root.metadata.op_name != fusion.metadata.op_name)


def _identity(instr: Instruction) -> str | None:
    """What tells apart different values an instruction kind can carry under one key:
    a constant's literal, a get-tuple-element's index (XLA gives every constant a
    region's ops share, and every result of a while loop, the region's or the loop's
    op_name and source).  None where it cannot be told (an elided literal)."""
    if instr.literal is not None or instr.literal_elided:
        if instr.literal_elided:
            return None
        import numpy as np

        value = np.asarray(instr.literal)
        if value.size <= 4:
            return "= " + np.array2string(value.reshape(-1), separator=",") if value.ndim else f"= {value.item()!r}"
        import hashlib

        return "= #" + hashlib.sha1(value.tobytes()).hexdigest()[:10]
    if "index" in instr.attrs:  # get-tuple-element's
        return f"#{instr.attrs['index']}"
    return None


def _told_apart(candidates: list[tuple[Key, Instruction]]) -> list[tuple[Key, Instruction]]:
    """The keys, with the constants (or get-tuple-elements) of a key that holds several
    different ones told apart by their literal (index): such instructions are not a chain
    of one op's lowering whose last stands for the op, but different values, and the
    last of each dump would pair unrelated ones (a loop's step `1` with a loop-hoisted
    `7`, the loop's result 1 with its result 2).  A key that holds one keeps its plain
    form, so a constant changed between the dumps is still paired and reported; an
    ambiguous one whose constants cannot be told apart (elided literals) is left
    unmatched rather than paired by position."""
    def told(instr: Instruction) -> bool:
        return instr.literal is not None or instr.literal_elided or "index" in instr.attrs

    seen: dict[Key, set[str | None]] = {}
    for key, instr in candidates:
        if told(instr):
            seen.setdefault(key, set()).add(f"{'index' in instr.attrs}{_identity(instr)}")
    out: list[tuple[Key, Instruction]] = []
    for key, instr in candidates:
        if told(instr) and len(seen[key]) > 1:
            identity = _identity(instr)
            if identity is None:
                continue
            key = (key[0], key[1], f"{key[2]} {identity}", key[3])
        out.append((key, instr))
    return out


def _feeds(flat: Flat, position: dict[str, int], source: str, targets: list[str]) -> bool:
    """Whether `source` is an ancestor of any of `targets` (searching back from them,
    never past `source`'s position)."""
    limit = position[source]
    seen: set[str] = set()
    todo = list(targets)
    while todo:
        name = todo.pop()
        for op in flat.operands.get(name, []):
            if op == source:
                return True
            # Parameters of inlined computations have no position: pass through them.
            if op not in seen and position.get(op, limit + 1) > limit:
                seen.add(op)
                todo.append(op)
    return False


@dataclass
class Pair:
    key: Key
    a: str
    b: str
    diff: Difference
    first: bool = False
    healed: bool = False
    # For a first divergence: the structural changes (diff.py's) at it or just before it.
    structure: list[str] = field(default_factory=list)


class NotComparable(ConverterError):
    """The two dumps' values cannot be lined up (a side's sharding is unknown, a global
    array does not split by it): the comparison asked for is not made (exit 4)."""


@dataclass
class CompareReport:
    path_a: str
    path_b: str
    pairs: list[Pair]
    outputs: list[tuple[str, Difference]]
    unmatched_a: int
    unmatched_b: int
    # Outputs whose values could not be lined up, with the reason: never read as agreeing.
    not_compared: list[tuple[str, str]] = field(default_factory=list)
    # Matched instructions left out in global form: a partitioned side's per-device values
    # that are not one replicated value (a shard, or a partial sum before its all-reduce).
    skipped: int = 0
    # How the two sides' inputs and values were lined up ("" when per device, as given).
    global_form: str = ""
    tolerance: str = ""

    @property
    def differs(self) -> bool:
        return any(not p.diff.ok and not p.healed for p in self.pairs) or any(not d.ok for _, d in self.outputs)

    @property
    def ok(self) -> bool:
        """The values agree: nothing differs and every output was compared."""
        return not self.differs and not self.not_compared and bool(self.outputs)

    @property
    def exit_status(self) -> int:
        """0 agree, 3 differ, 4 an output could not be compared (DESIGN §4)."""
        return 3 if self.differs else 0 if self.ok else 4

    @property
    def first(self) -> list[Pair]:
        return [p for p in self.pairs if p.first]

    @property
    def within_tolerance(self) -> list[Pair]:
        """Matched pairs that are not bit-identical but within tolerance."""
        return [p for p in self.pairs if p.diff.ok and p.diff.max_abs > 0]


def is_unpartitioned(hlo: Module, num_devices: int) -> bool:
    """Whether a module computes on whole (global) arrays: one device, or a module for
    several partitions that XLA's SPMD partitioner has not run on (the partitioner renames
    the entry computation `<name>_spmd`: xla/service/spmd/spmd_partitioner.cc), such as
    `*.before_optimizations.txt` of a sharded jit."""
    return num_devices == 1 or (hlo.num_partitions > 1 and not hlo.entry.name.endswith("_spmd"))


@dataclass
class Side:
    """One dump's program as the global form sees it."""

    program: Any
    path: str
    whole: bool  # computes on global shapes (every device the whole program)
    param_shardings: list[str | None]
    result_shardings: list[str | None]

    @property
    def n(self) -> int:
        return self.program.num_devices

    def inputs(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        import numpy as np

        from converter.runtime.sharding import split_global

        out = []
        for g, spec, sh in zip(arrays, self.program.params, self.param_shardings):
            what = f"{self.path}: arg{spec.index} ({spec.name})"
            if self.whole:
                if tuple(g.shape) != tuple(spec.shape):
                    raise NotComparable(f"error: {what} takes the whole array {spec.describe()}, the global input "
                                        f"is {g.dtype}{list(g.shape)}")
                out.append(np.broadcast_to(g, (self.n, *spec.shape)).copy() if self.n > 1 else g)
            else:
                try:
                    out.append(split_global(g, spec.shape, sh, self.n, what))
                except ConverterError as e:
                    raise NotComparable(f"error: {e}") from None
        return out

    def value(self, per_device: np.ndarray, sharding: str | None, tap: bool) -> tuple[np.ndarray | None, bool]:
        """(the value in global form, whether it is a stack of per-device copies of one
        replicated value), or (None, False) when it cannot be assembled."""
        from converter.runtime.sharding import _parse, assemble_global

        if self.n == 1:
            return per_device, False
        if self.whole:
            return per_device[0], False  # every device computed the whole program
        if tap:
            return per_device, True  # an instruction's value: one copy per device
        sh = _parse(sharding)
        if sh is None or sh.kind in ("replicated", "maximal") or (sh.kind == "tiled" and all(
                t == 1 for t in sh.data_tile_dims)):
            if sh is not None and sh.kind == "maximal":
                return per_device[sh.device], False
            return per_device, True  # replicated (or unknown: judged by its shape below)
        return assemble_global(per_device, sharding), False


def _line_up(va: tuple[np.ndarray | None, bool],
             vb: tuple[np.ndarray | None, bool]) -> tuple[np.ndarray, np.ndarray] | str:
    """The two sides' values as arrays of one shape, or why they cannot be lined up.
    A stack of per-device copies is compared copy by copy with the other side's global
    value; it stands for one global value only when its copies are identical (else it is a
    shard or a partial sum that happens to have the global shape)."""
    import numpy as np

    (a, stack_a), (b, stack_b) = va, vb
    if a is None or b is None:
        return "the dump gives no sharding for it, so its per-device values cannot be assembled"
    if stack_a and stack_b:
        return (a, b.reshape(a.shape)) if a.size == b.size else "per-device shapes differ"
    if stack_a or stack_b:
        stack, other = (a, b) if stack_a else (b, a)
        if stack[0].size != other.size:
            return (f"per-device shape {list(stack.shape[1:])} against the global {list(other.shape)}, and neither "
                    "dump gives the sharding to assemble it (XLA chose it: a jit without out_shardings; its "
                    "optimized dump does not record it)")
        if not all(np.array_equal(stack[0], s, equal_nan=True) for s in stack[1:]):
            return "the devices hold different values of the global shape (a shard or a partial sum)"
        other = np.broadcast_to(other.reshape(stack.shape[1:]), stack.shape)
        return (stack, other) if stack_a else (other, stack)
    if a.size != b.size:
        return f"global shapes differ ({list(a.shape)} vs {list(b.shape)})"
    return a, b.reshape(a.shape)


def compare_dumps(path_a: str, path_b: str, inputs_path: str | None = None, seed: int = 0,
                  rtol: float | None = None, atol: float | None = None, options=None,
                  global_arrays: bool | None = None, ulps: float | None = None) -> CompareReport:
    """Run both dumps on the same inputs and compare every matched instruction and the
    outputs.  `global_arrays`: inputs are whole arrays split by each side's shardings and
    values are compared in global form (None: when the two sides' parameters differ in
    shape and one runs on several devices, a module before and after SPMD partitioning).
    `options`: the ConvertOptions both dumps convert with (taps added)."""
    from converter.runtime.convert import ConvertOptions, convert_module
    from converter.hlo.parser import parse_hlo
    from converter.hlo.proto import read_hlo_text
    from converter.runtime.program import program_from_module, read_inputs
    from converter.runtime.compare import compare, ulp_tolerance

    options = options or ConvertOptions()

    hlos = [parse_hlo(read_hlo_text(p), p) for p in (path_a, path_b)]
    keep = options.import_options.keep_fusions
    flats = [flatten(h) for h in hlos]
    keyed_a, keyed_b = (keyed(h, f, keep) for h, f in zip(hlos, flats))
    common = [k for k in keyed_a if k in keyed_b]
    chosen = {k: (keyed_a[k], keyed_b[k]) for k in common}
    programs = []
    for side, hlo in enumerate(hlos):
        names = list(dict.fromkeys(chosen[k][side].name for k in common))
        tapped = options.replace(taps=TapRequest(names=names) if names else None)
        module = convert_module(hlo, tapped)
        programs.append(program_from_module(module, hlo, hlo.path, options=tapped))
    a, b = programs
    describe = f"({', '.join(p.describe() for p in a.params)} vs {', '.join(p.describe() for p in b.params)})"
    n_outs = [sum(1 for s in p.results if not s.name.startswith(("tap:", ITERATIONS))) for p in programs]
    if len(a.params) != len(b.params) or [p.element_type for p in a.params] != [p.element_type for p in b.params] \
            or n_outs[0] != n_outs[1]:
        raise ConverterError(f"error: {path_a} and {path_b} take or return different values {describe}, "
                             f"{n_outs[0]} vs {n_outs[1]} output(s): not two dumps of one program")
    same_shapes = [p.shape for p in a.params] == [p.shape for p in b.params] and a.num_devices == b.num_devices
    whole = [is_unpartitioned(h, p.num_devices) for h, p in zip(hlos, programs)]
    if global_arrays is None:
        # Also when the shapes agree (every parameter replicated): the partitioned side may
        # still split the work across devices, assuming each holds the same value.
        global_arrays = (not same_shapes or whole[0] != whole[1]) and max(a.num_devices, b.num_devices) > 1
    if not global_arrays and not same_shapes:
        raise ConverterError(f"error: {path_a} and {path_b} take different parameters {describe} on "
                             f"{a.num_devices} and {b.num_devices} device(s): not two dumps of one program")
    sides = [Side(p, path, w, [s.sharding for s in p.params],
                  [s.sharding for s in p.results if not s.name.startswith(("tap:", ITERATIONS))])
             for p, path, w in zip(programs, (path_a, path_b), whole)]
    global_form = ""
    if global_arrays:
        _fill_shardings(sides)
        arrays = _global_inputs(sides, inputs_path, seed)
        inputs = [s.inputs(arrays) for s in sides]
        global_form = "; ".join(f"{'A' if i == 0 else 'B'} " + (
            "computes on whole arrays" if s.whole else f"is partitioned over {s.n} devices (inputs split by its "
            "shardings, outputs assembled)") for i, s in enumerate(sides))
    else:
        if inputs_path:
            shared = read_inputs(inputs_path, a)
        else:
            # A snapshot brings the arguments it recorded: compare on those.
            from converter.hlo.proto import read_snapshot

            snapshots = [s for s in (read_snapshot(path_a), read_snapshot(path_b)) if s is not None]
            shared = a.check_inputs(snapshots[0].arguments) if snapshots and a.num_devices == 1 \
                else a.random_inputs(seed)
        inputs = [shared, shared]
    outs_a = dict(zip((s.name for s in a.results), a(*inputs[0])))
    outs_b = dict(zip((s.name for s in b.results), b(*inputs[1])))

    def diff(actual: np.ndarray, expected: np.ndarray) -> Difference:
        default_rtol, _ = ulp_tolerance(expected.dtype, ulps)
        return compare(actual, expected, default_rtol if rtol is None else rtol, 0.0 if atol is None else atol,
                       scale_floor=True)

    pairs = []
    skipped = 0
    for k in common:
        name_a, name_b = chosen[k][0].name, chosen[k][1].name
        value_a, value_b = outs_a[f"tap:{name_a}"], outs_b[f"tap:{name_b}"]
        if global_arrays:
            lined = _line_up(sides[0].value(value_a, None, True), sides[1].value(value_b, None, True))
            if isinstance(lined, str):
                skipped += 1
                continue
            value_a, value_b = lined
        elif value_a.size != value_b.size:
            skipped += 1
            continue
        pairs.append(Pair(k, name_a, name_b, diff(value_b.reshape(value_a.shape), value_a)))
    outputs, not_compared = [], []
    out_names = [s.name for s in a.results if not s.name.startswith(("tap:", ITERATIONS))]
    for index, name in enumerate(out_names):
        value_a, value_b = outs_a[name], outs_b[name]
        if global_arrays:
            lined = _line_up(sides[0].value(value_a, sides[0].result_shardings[index], False),
                             sides[1].value(value_b, sides[1].result_shardings[index], False))
            if isinstance(lined, str):
                not_compared.append((name, lined))
                continue
            value_a, value_b = lined
        if value_a.shape != value_b.shape:
            not_compared.append((name, f"shapes differ ({list(value_a.shape)} vs {list(value_b.shape)})"))
            continue
        outputs.append((name, diff(value_b, value_a)))
    _mark_first_and_healed(pairs, flats[0], hlos[0], outputs, out_names)
    if any(p.first for p in pairs):
        from converter.tools.diff import changes_reaching, diff_modules

        structure = diff_modules(hlos[0], hlos[1])
        matched_a, matched_b = {p.a for p in pairs}, {p.b for p in pairs}
        for p in pairs:
            if p.first:
                p.structure = changes_reaching(structure, hlos[0], hlos[1], flats[0], flats[1], p.a, p.b,
                                               matched_a, matched_b)
    report = CompareReport(path_a, path_b, pairs, outputs, len(keyed_a) - len(common), len(keyed_b) - len(common),
                           not_compared, skipped, global_form)
    report.tolerance = _describe_tolerance(a, rtol, atol, ulps)
    return report


def _describe_tolerance(program, rtol: float | None, atol: float | None, ulps: float | None) -> str:
    from converter.runtime.compare import DUMP_ULPS, ulp_tolerance

    dtypes = sorted({s.dtype for s in program.results if s.dtype.kind in "fcV" or "float" in s.dtype.name},
                    key=lambda d: d.name)
    measure = "of max(|A's value|, the RMS of both tensors)"
    if rtol is None and atol is None:
        parts = [f"{d.name} {ulp_tolerance(d, ulps)[0]:.2g}" for d in dtypes]
        count = f"{ulps:g} ulps" if ulps is not None else "each dtype's default ulps (" + ", ".join(
            f"{d.name} {DUMP_ULPS.get(d.name, DUMP_ULPS['default'])}" for d in dtypes) + ")"
        return f"{count} {measure}" + (f": rtol {', '.join(parts)}" if parts else "") + "; integers exactly"
    return f"rtol {rtol if rtol is not None else 'by dtype'} {measure}, atol {atol or 0:g}; integers exactly"


def _output_instructions(hlo: Module, out_names: list[str]) -> dict[str, str]:
    """The entry instruction each output's value comes from (the root, or the root
    tuple's operand)."""
    root = hlo.entry.root
    if root.opcode == "tuple" and len(root.operands) == len(out_names):
        return {n: op.split("#")[0] for n, op in zip(out_names, root.operands)}
    return {n: root.name for n in out_names}


def _mark_first_and_healed(pairs: list[Pair], flat: Flat, hlo: Module, outputs: list[tuple[str, Difference]],
                           out_names: list[str]) -> None:
    """Sort `pairs` in A's dependency order and mark the first divergences (diverging
    pairs with no diverging matched ancestor in A) and the healed ones."""
    operands = flat.operands
    users: dict[str, list[str]] = {}
    for name, ops in operands.items():
        for op in ops:
            users.setdefault(op, []).append(name)
    matched = {p.a: p for p in pairs}
    position = {i.name: n for n, i in enumerate(flat.order)}
    pairs.sort(key=lambda p: position[p.a])
    out_instr = _output_instructions(hlo, out_names)
    differing_outputs = {out_instr[n] for n, d in outputs if not d.ok and n in out_instr}
    # A difference that no matched instruction computed from it shows again, and that
    # reaches no differing output, is most likely two compilations computing different
    # intermediates under one op_name (a division became a multiplication by a broadcast
    # reciprocal): "healed".  One whose effect reaches an output that differs never is.
    for p in reversed(pairs):  # descendants first: a healed one counts as agreeing
        if p.diff.ok:
            continue
        seen, todo, later = {p.a}, list(users.get(p.a, [])), []
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in matched:
                later.append(matched[name])
            todo.extend(users.get(name, []))
        p.healed = bool(later) and all(q.diff.ok or q.healed for q in later) and not (seen & differing_outputs)
    bad = {p.a for p in pairs if not p.diff.ok and not p.healed}
    memo: dict[str, bool] = {}

    def bad_ancestor(name: str) -> bool:
        """Whether a strict ancestor of `name` is a diverging matched instruction."""
        if name in memo:
            return memo[name]
        memo[name] = False  # loops through while bodies: cut the cycle
        result = any(op in bad or bad_ancestor(op) for op in operands.get(name, []))
        memo[name] = result
        return result

    for p in pairs:
        p.first = not p.diff.ok and not p.healed and not bad_ancestor(p.a)


def _fill_shardings(sides: list[Side]) -> None:
    """Each partitioned side's missing shardings: from its before-optimizations sibling
    (`--xla_dump_to` writes it beside the optimized dump), then from the other side (one
    program's entry: jit's in/out shardings are the same before and after partitioning)."""
    from converter.runtime.sharding import before_optimizations_sibling, shardings_with_fallback

    for side in sides:
        if side.whole:
            continue
        try:
            params, results = shardings_with_fallback(side.program, before_optimizations_sibling(side.path))
        except ConverterError:
            params, results = side.param_shardings, side.result_shardings
        side.param_shardings = list(params)
        side.result_shardings = list(results)[: len(side.result_shardings)]
    for side, other in (sides, sides[::-1]):
        side.param_shardings = [s if s is not None else o for s, o in zip(side.param_shardings, other.param_shardings)]
        side.result_shardings = [s if s is not None else o
                                 for s, o in zip(side.result_shardings, other.result_shardings)]


def _global_inputs(sides: list[Side], inputs_path: str | None, seed: int) -> list[np.ndarray]:
    """Whole arrays, one per parameter: from `inputs_path` (keyed arg0..argN), or random
    from `seed` in the global shape (a whole side's parameter shape, or a partitioned
    side's per-device shape times its sharding's tile counts)."""
    import numpy as np

    from converter.runtime.program import _random_values, read_inputs
    from converter.runtime.sharding import _parse

    ref = next((s for s in sides if s.whole), sides[0])
    shapes = []
    for i, spec in enumerate(ref.program.params):
        shape = tuple(spec.shape)
        if not ref.whole:
            sh = _parse(ref.param_shardings[i])
            if sh is not None and sh.kind == "tiled" and len(sh.data_tile_dims) == len(shape):
                shape = tuple(d * t for d, t in zip(shape, sh.data_tile_dims))
        shapes.append(shape)
    if inputs_path:
        arrays = read_inputs(inputs_path, ref.program, per_device=False)
        out = []
        for arr, spec, shape in zip(arrays, ref.program.params, shapes):
            if arr.dtype.kind == "V" and arr.dtype.itemsize == spec.dtype.itemsize:
                arr = arr.view(spec.dtype)
            if tuple(arr.shape) != shape or arr.dtype != spec.dtype:
                raise ConverterError(f"error: {inputs_path}: arg{spec.index} ({spec.name}) is {arr.dtype}"
                                     f"{list(arr.shape)}; the whole array is {spec.dtype}{list(shape)}")
            out.append(arr)
        return out
    return [_random_values(np.random.default_rng([seed, spec.index]), spec, shape)
            for spec, shape in zip(ref.program.params, shapes)]


def format_report(report: CompareReport, max_rows: int = 60) -> str:
    from converter.common.textfmt import table

    lines = [f"A: {report.path_a}", f"B: {report.path_b}"]
    if report.global_form:
        lines.append(f"global form: {report.global_form}")
    lines.append(f"{len(report.pairs)} instruction(s) matched by op_name, source location and shape "
                 f"({report.unmatched_a} of A and {report.unmatched_b} of B without a counterpart)")
    if report.skipped:
        lines.append(f"{report.skipped} more matched instruction(s) not compared: on the partitioned side their "
                     "per-device values are not one replicated value (a shard, or a partial sum before its "
                     "all-reduce); the outputs are compared whole")
    if report.tolerance:
        lines.append(f"tolerance: {report.tolerance}")
    first = report.first
    if first:
        lines.append("\nfirst divergence (in dependency order; nothing before it that is matched diverges):")
        if any(p.key[3] != "0" for p in first):
            lines.append("  (inside a while loop the values are the last iteration's: the divergence may have "
                         "started in an earlier iteration at any of the loop's instructions listed)")
        for p in first:
            lines.append(f"  A %{p.a}  ~  B %{p.b}   {p.key[0]}  {p.key[1] or '(no source)'}  {p.key[2]}")
            lines.append(f"      max abs {p.diff.max_abs:.3g}, max rel {p.diff.max_rel:.3g}, "
                         f"{p.diff.mismatches} element(s) beyond tolerance")
            if p.structure:
                shown_changes = "; ".join(p.structure[:4]) + (f"; … {len(p.structure) - 4} more"
                                                              if len(p.structure) > 4 else "")
                lines.append(f"      structural change at the first divergence: {shown_changes}")
            else:
                lines.append("      no structural change at the first divergence (a numerical difference)")
    rows = []
    shown = report.pairs if len(report.pairs) <= max_rows else \
        [p for p in report.pairs if not p.diff.ok][:max_rows] or report.pairs[:max_rows]
    for p in shown:
        rows.append([p.a, p.b, p.key[0][-48:], p.key[2], f"{p.diff.max_abs:.3g}", f"{p.diff.max_rel:.3g}",
                     "ok" if p.diff.ok else "FIRST" if p.first else "healed*" if p.healed else "differs"])
    if rows:
        lines.append("")
        if len(shown) < len(report.pairs):
            lines.append(f"(showing {len(shown)} of {len(report.pairs)} rows; --max-rows to see more)")
        lines.append(table(rows, ["A", "B", "op_name", "shape", "max abs", "max rel", "verdict"]))
    if any(p.healed for p in shown):
        lines.append("* differs, but every matched instruction computed from it agrees and no output it reaches "
                     "differs: most likely the two compilations compute different intermediates under one op_name")
    if report.outputs or report.not_compared:
        lines.append("")
        lines.append(table([[n, f"{d.max_abs:.3g}", f"{d.max_rel:.3g}", "ok" if d.ok else "DIFFERS"]
                            for n, d in report.outputs]
                           + [[n, "-", "-", "NOT COMPARED"] for n, _ in report.not_compared],
                           ["output", "max abs", "max rel", "verdict"]))
        for name, why in report.not_compared:
            lines.append(f"{name} not compared: {why}")
    near = report.within_tolerance
    if near and not report.differs:
        worst = max(near, key=lambda p: p.diff.max_rel)
        lines.append(f"note: {len(near)} matched instruction(s) differ within tolerance (largest: A %{worst.a}, "
                     f"max rel {worst.diff.max_rel:.3g}); --ulps 0 reports every difference")
    status = report.exit_status
    if status == 3:
        verdict = "the dumps differ" + (f", first at A %{first[0].a} / B %{first[0].b}" if first else
                                        " (at the outputs only)")
    elif status == 4:
        verdict = ("not established: " + (f"{len(report.not_compared)} output(s) could not be compared"
                                          if report.not_compared else "no output to compare")
                   + (", and everything compared agrees" if report.outputs or report.pairs else ""))
    else:
        verdict = "the dumps agree within tolerance"
    lines.append(f"verdict: {verdict}")
    return "\n".join(lines)


def add_compare_parser(sub) -> None:
    p = sub.add_parser(
        "compare", help="run two dumps of one program on the same inputs and show where they diverge",
        description="Run two dumps of one program (before/after optimizations, two backends or XLA versions) on "
                    "the same inputs and name the first matched instruction whose values differ.  Exit status: "
                    "0 the values agree, 3 they differ, 4 an output could not be compared (which and why is "
                    "printed), 1 bad input, 2 bad command line.  Floats differ when an element is more than "
                    "--ulps units in the last place of its dtype (default 64 for f32/f64, 8 for f16/bf16, 4 for "
                    "fp8) away, measured at max(|A's value|, the RMS of both tensors); integers must be equal.")
    p.add_argument("dump_a", metavar="A")
    p.add_argument("dump_b", metavar="B")
    p.add_argument("--inputs", metavar="IN.npz", help="inputs keyed arg0..argN (default: random from --seed); "
                   "whole arrays with --global")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--global", dest="global_arrays", action="store_true", default=None,
                   help="inputs are whole arrays, split by each side's shardings; outputs are compared assembled "
                        "(the default when one side runs on global shapes and the other is partitioned, as "
                        "before and after SPMD partitioning)")
    p.add_argument("--ulps", type=float, help="tolerance in units in the last place of each dtype (see above)")
    p.add_argument("--rtol", type=float, help="relative tolerance, at max(|A's value|, the tensors' RMS) "
                   "(default: --ulps of each dtype)")
    p.add_argument("--atol", type=float, help="absolute tolerance added to it (default 0)")
    p.add_argument("--max-rows", type=int, default=60, help="rows of the table (default 60)")


def cmd_compare(args) -> int:
    from converter.tools.options import convert_options_from_args

    try:
        report = compare_dumps(args.dump_a, args.dump_b, args.inputs, args.seed, args.rtol, args.atol,
                               convert_options_from_args(args),
                               global_arrays=args.global_arrays, ulps=args.ulps)
    except NotComparable as e:
        print(f"{e}\nverdict: not established: the two dumps' values cannot be lined up", file=sys.stderr)
        return 4
    print(format_report(report, args.max_rows))
    return report.exit_status
