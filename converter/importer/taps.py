"""Taps: the values of chosen HLO instructions as extra results of the converted program.

`run --tap NAME` asks for the value an instruction computes — in the entry, inside a
fused computation, a called computation or a while body — as the converted program
computes it.  The importer records each tapped instruction's value where it imports it
and appends it to the entry's results; a tap inside a while body is threaded through the
loop as extra loop-carried values, so the program returns the value of the **last
iteration** (the zero-initialized carry when the loop runs no iteration).

Values that exist once per element or per branch — inside a reduce, sort, scatter or map
region, a conditional branch, a while condition, a custom-call's computation — have no
single value to return; tapping one is an error naming why.  The same holds for a
computation reached from two call sites (which of its values would the tap be?).

With `--tap-iterations all|N|A:B` a tap inside a loop is recorded at every (or the chosen)
iteration instead: each enclosing while loop adds a leading axis holding the selected
iterations, outer loop first (length 1 for N).  The loop carries an iteration counter and a
buffer of that many values, written in place at the counter; `all` needs the trip count
(the while's backend_config known_trip_count, or a condition `counter < constant` over a
counter the body adds 1 to and the loop starts from a constant), otherwise it is refused
and A:B asked for.  Iterations selected but never run stay zero.

Every while loop that carries taps and whose trip count the dump does not give (see
`trip_count`) also returns how many iterations it ran, as the extra result
`iterations:WHILE` (an s32; for a loop inside another loop, that of the outer loop's last
or selected iterations): a tap of a loop that ran no iteration holds zeros, not a value,
and the count says so (extract refuses such a cut).

The extra results are named in the module attribute `hlo.taps` (one string per extra
result, in order: `NAME`, or `NAME#i` for leaf i of a tuple-shaped instruction,
`iterations:WHILE`) and written by `run --outputs` as `tap:NAME` after `out0..outM`
(`iterations:WHILE` as it is).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from converter.common.errors import ConverterError, SourceLocation, diagnostic
from converter.common.suggest import did_you_mean
from converter.hlo.ir import Computation, Instruction, Module, Shape

# Computation-valued attributes whose computation is imported in line with the caller
# (its values are values of the caller's block) and those that are a while body.
INLINED = {("fusion", "calls"), ("call", "to_apply"), ("async-start", "calls")}
LOOP_BODY = ("while", "body")
# The label prefix of a loop's iteration count among the tap results.
ITERATIONS = "iterations:"
TAPS_ATTR = "hlo.taps"


class TapError(ConverterError):
    pass


@dataclass
class TapRequest:
    """What the command line asked for: names, a regular expression over names, or every
    instruction of the entry computation."""

    names: list[str] = field(default_factory=list)
    regex: str | None = None
    all_entry: bool = False
    # --tap-iterations: None (the last iteration), "all", or (first, count); or a list
    # of (first, count), one per loop depth, outer first (extract --iteration).
    iterations: str | tuple[int, int] | list[tuple[int, int]] | None = None

    def __bool__(self) -> bool:
        return bool(self.names or self.regex or self.all_entry)


@dataclass
class TapPlan:
    """The resolved taps: instruction names in result order, and for each while body the
    taps its loop must carry out (those in the body or anything it inlines or loops)."""

    names: list[str]
    instructions: dict[str, Instruction]
    in_loop_body: dict[str, list[str]]
    keep_fusions: bool = False
    # --tap-iterations: per while body, (first iteration, how many) recorded; and per tap
    # the while bodies around it, outer to inner.
    stacked: dict[str, tuple[int, int]] = field(default_factory=dict)
    bodies_of: dict[str, list[str]] = field(default_factory=dict)

    def wanted(self, name: str) -> bool:
        return name in self.instructions

    def stack_dims(self, name: str, inside: str | None = None) -> list[int]:
        """The leading axes of tap `name`'s value as the block of while body `inside`
        (None: the entry) sees it: one per stacked loop between that block and the tap."""
        if not self.stacked:
            return []
        bodies = self.bodies_of.get(name, [])
        if inside is not None:
            bodies = bodies[bodies.index(inside) + 1:]
        return [self.stacked[b][1] for b in bodies if b in self.stacked]


def called_computations(instr: Instruction, hlo: Module) -> list[tuple[str, str]]:
    """(attribute, computation name) for every computation an instruction calls."""
    out = []
    for key, value in instr.attrs.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, str) and v in hlo.by_name:
                out.append((key, v))
    return out


def _callers(hlo: Module) -> dict[str, list[tuple[Computation, Instruction, str]]]:
    callers: dict[str, list[tuple[Computation, Instruction, str]]] = {}
    for comp in hlo.computations:
        for instr in comp.instructions:
            if instr.opcode in ("async-update", "async-done"):
                continue  # the same wrapped computation as its async-start: one call site
            for key, name in called_computations(instr, hlo):
                callers.setdefault(name, []).append((comp, instr, key))
    return callers


def resolve(request: TapRequest, hlo: Module, keep_fusions: bool = False) -> TapPlan:
    """Check that each requested instruction exists and has one value per execution."""
    where: dict[str, Computation] = {}
    for comp in hlo.computations:
        for instr in comp.instructions:
            where[instr.name] = comp
    names: list[str] = []
    explicit = {raw.strip().lstrip("%") for raw in request.names}
    for raw in request.names:
        name = raw.strip().lstrip("%")
        if name.startswith(ITERATIONS):
            continue  # a loop's count: made again below for every loop that carries taps
        if name not in where:
            hint = did_you_mean(name, where)
            if not hint:
                close = [n for n in where if n.startswith(name.split(".")[0])][:5]
                hint = f" (instructions with that prefix: {', '.join(close)})" if close else ""
            raise TapError(diagnostic(SourceLocation(hlo.path), f"--tap {raw}: no instruction of that name{hint}"))
        names.append(name)
    if request.regex is not None:
        try:
            pattern = re.compile(request.regex)
        except re.error as e:
            raise TapError(diagnostic(None, f"--tap-regex {request.regex!r}: {e}")) from None
        matched = [i.name for c in hlo.computations for i in c.instructions
                   if pattern.search(i.name) and tap_path(hlo, c, keep_fusions)[0]]
        if not matched:
            raise TapError(diagnostic(SourceLocation(hlo.path), f"--tap-regex {request.regex!r} matches no instruction "
                           "that has one value per execution"))
        names.extend(matched)
    if request.all_entry:
        names.extend(i.name for i in hlo.entry.instructions)
    names = list(dict.fromkeys(names))

    instructions: dict[str, Instruction] = {}
    in_loop_body: dict[str, list[str]] = {}
    for name in names:
        comp = where[name]
        instr = comp.by_name[name]
        ok, why, bodies = tap_path(hlo, comp, keep_fusions)
        if not ok:
            raise TapError(diagnostic(hlo.location_of(instr), f"cannot tap %{name}: {why}"))
        if not any(not leaf.is_token for leaf in instr.shape.leaves()):
            if name not in explicit:
                continue
            raise TapError(diagnostic(hlo.location_of(instr), f"cannot tap %{name}: it has no array value"))
        if bodies and instr.shape.is_dynamic:
            raise TapError(diagnostic(hlo.location_of(instr), f"cannot tap %{name}: a dynamic shape "
                                      "inside a while loop cannot be carried out of it"))
        instructions[name] = instr
        for body in bodies:
            in_loop_body.setdefault(body, []).append(name)
    # Each loop that carries taps returns its iteration count, carried out of the loops
    # around it as a tap of theirs (hence in-loop bodies are visited inner to outer).
    callers = _callers_cached(hlo)
    counted: list[str] = []
    pending = list(in_loop_body)
    while pending:
        body = pending.pop(0)
        caller_comp, loop, _ = callers[body][0]
        name = ITERATIONS + loop.name
        if name in instructions or trip_count(hlo, caller_comp, loop) is not None:
            continue  # a loop of known trip count runs it whenever it runs: nothing to return
        instructions[name] = Instruction(name, "while-iterations", Shape("s32"), [], {}, loop.line, loop.col)
        where[name] = caller_comp
        counted.append(name)
        for outer in tap_path(hlo, caller_comp, keep_fusions)[2]:
            in_loop_body.setdefault(outer, []).append(name)
            if outer not in pending:
                pending.append(outer)
    plan = TapPlan([n for n in names if n in instructions] + counted, instructions, in_loop_body, keep_fusions)
    if request.iterations is not None:
        for name in plan.names:
            plan.bodies_of[name] = list(reversed(tap_path(hlo, where[name], keep_fusions)[2]))
        for body in in_loop_body:
            selection = request.iterations
            if isinstance(selection, list):  # one (first, count) per loop depth, outer first
                depth = len(tap_path(hlo, hlo.by_name[body], keep_fusions)[2]) - 1
                if depth >= len(selection):
                    continue
                selection = selection[depth]
            plan.stacked[body] = _selected_iterations(hlo, body, selection)
    return plan


def _selected_iterations(hlo: Module, body: str, selection: str | tuple[int, int]) -> tuple[int, int]:
    caller_comp, loop, _ = _callers_cached(hlo)[body][0]
    if selection != "all":
        return selection
    trips = trip_count(hlo, caller_comp, loop)
    if trips is None:
        raise TapError(diagnostic(hlo.location_of(loop), "--tap-iterations all: the trip count of "
                                  f"%{loop.name} is not known from the dump (no known_trip_count in its backend_config, "
                                  "and its condition is not `counter < constant` over a counter from a constant stepping "
                                  "by 1); give a range: --tap-iterations A:B"))
    return 0, trips


def trip_count(hlo: Module, caller: Computation, loop: Instruction) -> int | None:
    """The number of iterations of while `loop` where the dump says it (XLA's
    known_trip_count) or its condition and body show it: `gte(p, k) < constant(N)` with
    element k of the loop's init a constant c and the body's element k `gte(p, k) + 1`."""
    config = loop.attrs.get("backend_config")
    value = getattr(config, "value", None)
    if isinstance(value, dict):
        n = value.get("known_trip_count", {}).get("n") if isinstance(value.get("known_trip_count"), dict) else None
        if n is not None:
            try:
                return int(n)
            except ValueError:
                pass
    cond = hlo.by_name.get(loop.attrs.get("condition"))
    body = hlo.by_name.get(loop.attrs.get("body"))
    if cond is None or body is None or cond.root.opcode != "compare" or cond.root.attrs.get("direction") != "LT":
        return None

    def through_copies(comp: Computation, name: str) -> Instruction | None:
        # TPU dumps start loop counters from copies of constants (`copy(constant(0))`).
        instr = comp.by_name.get(name)
        while instr is not None and instr.opcode == "copy":
            instr = comp.by_name.get(instr.operands[0])
        return instr

    def constant(comp: Computation, name: str) -> int | None:
        instr = through_copies(comp, name)
        if instr is None or instr.opcode != "constant" or instr.literal is None:
            return None
        import numpy as np

        arr = np.asarray(instr.literal)
        return int(arr.reshape(())) if arr.size == 1 and arr.dtype.kind in "iu" else None

    def element(comp: Computation, name: str) -> int | None:
        instr = through_copies(comp, name)
        if instr is None or instr.opcode != "get-tuple-element" or comp.by_name.get(instr.operands[0]) is None \
                or comp.by_name[instr.operands[0]].opcode != "parameter":
            return None
        return instr.attrs.get("index")

    k = element(cond, cond.root.operands[0])
    limit = constant(cond, cond.root.operands[1])
    init = caller.by_name.get(loop.operands[0])
    if k is None or limit is None or init is None or init.opcode != "tuple" or body.root.opcode != "tuple":
        return None
    start = constant(caller, init.operands[k])
    step = body.by_name.get(body.root.operands[k])
    if start is None or step is None or step.opcode != "add":
        return None
    a, b = step.operands
    if not ((element(body, a) == k and constant(body, b) == 1) or (element(body, b) == k and constant(body, a) == 1)):
        return None
    return max(0, limit - start)


def parse_tap_iterations(text: str) -> str | tuple[int, int]:
    """`all`, `N` or `A:B` (B exclusive) as TapRequest.iterations; a UsageError otherwise."""
    from converter.common.errors import UsageError

    text = text.strip()
    if text == "all":
        return "all"
    try:
        if ":" in text:
            a, b = (int(x) for x in text.split(":"))
        else:
            a = int(text)
            b = a + 1
    except ValueError:
        raise UsageError(f"--tap-iterations {text!r}: give all, N or A:B (iterations A to B-1, counting from 0)") from None
    if a < 0 or b <= a:
        raise UsageError(f"--tap-iterations {text!r}: give 0 <= A < B")
    return a, b - a


def tap_path(hlo: Module, comp: Computation, keep_fusions: bool) -> tuple[bool, str, list[str]]:
    """Whether `comp`'s values exist once per execution of the entry: reached from the
    entry along exactly one chain of inlined calls and while bodies.  Returns (ok, why
    not, the while bodies on the chain)."""
    callers = _callers_cached(hlo)
    bodies: list[str] = []
    seen: set[str] = set()
    while not comp.is_entry:
        if comp.name in seen:
            return False, f"computation {comp.name} calls itself", []
        seen.add(comp.name)
        sites = callers.get(comp.name, [])
        if not sites:
            return False, f"computation {comp.name} is never called from the entry", []
        if len(sites) > 1:
            where = ", ".join(f"%{i.name}" for _, i, _ in sites[:4])
            return False, (f"computation {comp.name} runs at {len(sites)} call sites ({where}); "
                           "tap the caller's result instead"), []
        caller_comp, caller, key = sites[0]
        if (caller.opcode, key) == LOOP_BODY:
            bodies.append(comp.name)
        elif (caller.opcode, key) in INLINED:
            if caller.opcode == "fusion" and keep_fusions:
                return False, "with --keep-fusions a fused computation is a separate function", []
        else:
            return False, (f"it is inside computation {comp.name}, the {key} of %{caller.name} "
                           f"({caller.opcode}), which has no single value per execution"), []
        comp = caller_comp
    return True, "", bodies


_CALLERS_CACHE: dict[int, tuple[Module, dict]] = {}


def _callers_cached(hlo: Module) -> dict[str, list[tuple[Computation, Instruction, str]]]:
    cached = _CALLERS_CACHE.get(id(hlo))
    if cached is None or cached[0] is not hlo:
        cached = (hlo, _callers(hlo))
        _CALLERS_CACHE.clear()
        _CALLERS_CACHE[id(hlo)] = cached
    return cached[1]


def leaf_labels(instr: Instruction) -> list[str]:
    """The result label of each array leaf of a tapped instruction (tokens dropped)."""
    leaves = instr.shape.leaves()
    if not instr.shape.is_tuple:
        return [instr.name]
    return [f"{instr.name}#{i}" for i, leaf in enumerate(leaves) if not leaf.is_token]


def array_leaf_mask(instr: Instruction) -> list[bool]:
    return [not leaf.is_token for leaf in instr.shape.leaves()]


def tap_labels(module) -> list[str]:
    """The labels of a converted module's tap results (last results of @main)."""
    from jaxlib.mlir import ir

    attrs = module.operation.attributes
    if TAPS_ATTR not in attrs:
        return []
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(attrs[TAPS_ATTR])]


def output_keys(num_results: int, labels: list[str]) -> list[str]:
    """`out0..outM` for the program's own results, then `tap:LABEL` for each tap (a host
    callback's value is labelled `callback:NAME` already: converter.importer.callbacks)."""
    base = num_results - len(labels)
    return [f"out{i}" for i in range(base)] + [label if label.startswith(("callback:", ITERATIONS)) else f"tap:{label}"
                                               for label in labels]


def truncated_module(hlo: Module, name: str) -> str:
    """HLO text of `hlo` cut at instruction `name`, which becomes the entry's ROOT: the
    module whose result is the tapped value, for XLA itself to run (the taps' oracle, and
    a by-hand bisection step).  `name` is in the entry or in a computation that entry
    fusions and calls inline.  Every fusion and call on the way is inlined (their
    parameters replaced by the caller's operands), so that the result is plain unfused
    HLO, which XLA's CPU compiler takes whatever backend the dump came from."""
    import copy
    import dataclasses

    from converter.hlo.printer import module_to_text

    m = copy.deepcopy(hlo)
    entry = m.entry
    rename: dict[str, str] = {}
    kept: list[Instruction] = []

    def emit(instructions: list[Instruction], params: dict[str, str]) -> bool:
        """Append instructions (inlining fusions and calls); True once `name` is placed."""
        for instr in instructions:
            if instr.opcode == "parameter" and instr.name in params:
                rename[instr.name] = params[instr.name]
                if instr.name == name:
                    return True
                continue
            called = [c for key, c in called_computations(instr, m) if (instr.opcode, key) in INLINED]
            operands = [rename.get(o, o) for o in instr.operands]
            if called and instr.opcode != "async-start":
                inner = m.by_name[called[0]]
                if emit(inner.instructions, {p.name: operands[p.parameter_number] for p in inner.parameters}):
                    return True
                rename[instr.name] = rename.get(inner.root.name, inner.root.name)
                if instr.name == name:
                    return True
                continue
            instr = copy.copy(instr)
            instr.operands = operands
            if params:
                instr.operand_shapes = None
            kept.append(instr)
            if instr.name == name:
                return True
        return False

    if not emit(entry.instructions, {}):
        raise TapError(f"error: {name} is neither in the entry nor in a computation its fusions and calls inline")
    target = rename.get(name, name)
    root = next(i for i in kept if i.name == target)
    # Entry parameters stay (the signature the inputs follow) even when the cut drops
    # their uses.
    kept_names = {i.name for i in kept}
    kept = [p for p in entry.parameters if p.name not in kept_names] + [i for i in kept if i is not root] + [root]
    for instr in kept:
        instr.is_root = instr is root
    new_entry = dataclasses.replace(entry, instructions=kept, signature=None, root=root,
                                    by_name={i.name: i for i in kept})
    # Only the computations the cut entry still calls: the inlined ones would repeat the
    # names now in the entry.
    reachable, todo = set(), [new_entry]
    while todo:
        for instr in todo.pop().instructions:
            for _, callee in called_computations(instr, m):
                if callee not in reachable:
                    reachable.add(callee)
                    todo.append(m.by_name[callee])
    m.computations = [c for c in m.computations if c.name in reachable] + [new_entry]
    m.by_name = {c.name: c for c in m.computations}
    m.entry = new_entry
    m.attrs.pop("entry_computation_layout", None)
    m.attrs.pop("input_output_alias", None)
    return module_to_text(m)
