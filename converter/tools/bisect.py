"""`hlo-roundtrip bisect DUMP --check CMD | --find-nonfinite -o OUT.hlo`: shrink a dump to a
small module on which a check still fails, and write it with its inputs.

The strategy is that of XLA's hlo_bisect (xla/tools/hlo_bisect/hlo_bisect_state.cc): move
the root earlier (a binary search over the instructions in order, keeping the failure),
then replace what the root no longer needs to recompute with values of the run (there:
constants; here: parameters, whose values go to OUT.inputs.npz).  Every candidate is
`extract`'s module (converter/tools/extract.py: plain HLO XLA's CPU compiler runs) of one
instruction with N levels of its producers, its operands' values taken from one run of
the dump with every instruction tapped.  A fusion or call chosen as the root is entered
and its own instructions searched the same way; a while loop with a known trip count is
entered at the first iteration by which its body's result shows the failure (a binary
search over iterations, with the body's values at every iteration from a second run tapped
as --tap-iterations taps).  The search assumes that once the check
fails at an instruction it fails at those after it that read it (as hlo_bisect does); the
module written always failed the check.

Checks: `--check CMD` runs CMD in a shell with `{hlo}` and `{inputs}` replaced by the
candidate's files (appended when CMD names neither) and counts a non-zero exit as a
failure, as hlo_bisect's script does.  `--find-nonfinite` fails a module whose result XLA
computes with a NaN or Inf from inputs that hold none: the origin of the non-finite value
(the definition of `run --find-nonfinite`) stays in the module.  `--diverges-from B` fails a
module whose result differs (compare's tolerance) from B's value of the instruction matched
with its root, while every parameter holds a matched instruction whose values agree in A
and B: what changed between the dumps stays in the module.

A multi-device (SPMD or replicated) dump is bisected on one device's program (`--device D`):
the values are that device's, and a collective (or replica-id/partition-id) is never
computed in a candidate (its value depends on the other devices) but cut at: a candidate
that would hold one computes its root from the collectives' values on device D instead.
"""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from converter.common.errors import ConverterError, SourceLocation, UsageError, diagnostic
from converter.hlo.ir import Computation, Module, split_operand
from converter.tools.extract import (DEVICE_DEPENDENT, ExtractError, cut_between, cut_instructions, extract_module,
                                     inputs_path_for)

if TYPE_CHECKING:  # annotations only: NumPy loads where arrays are made, not at the CLI's start-up
    import numpy as np

# Computation-valued attributes whose computation bisect enters when it is the root.
ENTERED = {("fusion", "calls"), ("call", "to_apply")}
# How many instructions from the end are tried for a failure before the search starts.
LAST_TRIES = 16


@dataclass
class Candidate:
    text: str
    inputs: list[np.ndarray]
    root: str
    producers: int
    size: int  # instructions of the cut
    held: list[str] = field(default_factory=list)  # what each parameter holds: an instruction (leaf `#k`)


@dataclass
class BisectResult:
    best: Candidate
    original_size: int
    checks: int
    trail: list[str] = field(default_factory=list)
    # The while bodies the result is inside, outer first, with the iteration chosen in each.
    iterations: list[tuple[str, int]] = field(default_factory=list)


class Check:
    """Whether a candidate module still shows the failure."""

    # Whether bisect may enter a while loop at an iteration of its choice (the check reads
    # nothing but the candidate).
    enters_loops = True

    def prepare(self, hlo: Module, values: dict[str, list[np.ndarray]], arrays: list[np.ndarray]) -> None:
        """Called once with the dump's run (every instruction's value, and the inputs)."""

    def fails(self, candidate: Candidate) -> bool:
        raise NotImplementedError

    def failed_by(self, candidate: Candidate) -> bool:
        """Whether the failure has happened by this candidate's iteration (bisect's search for
        the iteration to enter a loop at assumes this stays true once true): the check itself,
        for a failure that stays in the values."""
        return self.fails(candidate)


class CommandCheck(Check):
    def __init__(self, command: str, workdir: str):
        self.command = command
        self.workdir = workdir

    def fails(self, candidate: Candidate) -> bool:
        import shlex
        import subprocess

        import numpy as np

        hlo_path = os.path.join(self.workdir, "candidate.hlo")
        npz_path = inputs_path_for(hlo_path)
        with open(hlo_path, "w", encoding="utf-8") as f:
            f.write(candidate.text)
        np.savez(npz_path, **{f"arg{i}": a for i, a in enumerate(candidate.inputs)})
        command = self.command
        if "{hlo}" in command or "{inputs}" in command:
            command = command.replace("{hlo}", shlex.quote(hlo_path)).replace("{inputs}", shlex.quote(npz_path))
        else:
            command = f"{command} {shlex.quote(hlo_path)} {shlex.quote(npz_path)}"
        return subprocess.run(command, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0


def _nonfinite(arrays) -> bool:
    import numpy as np

    for a in arrays:
        a = np.asarray(a)
        if a.dtype.kind == "c" or a.dtype.kind == "f" or a.dtype.name.startswith(("bfloat", "float")):
            if not np.isfinite(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)).all():
                return True
    return False


class NonfiniteCheck(Check):
    """XLA's result holds a NaN or Inf and the inputs (there are some) hold none."""

    def fails(self, candidate: Candidate) -> bool:
        from converter.runtime.xla_oracle import run_with_xla

        # Computed from constants alone (a max-reduce's -inf start): the program's own
        # value, not an origin (as in `run --find-nonfinite`).
        if not candidate.inputs or _nonfinite(candidate.inputs):
            return False
        return _nonfinite(run_with_xla(candidate.text, candidate.inputs))

    def failed_by(self, candidate: Candidate) -> bool:
        # A NaN in a loop's state stays there, but the iterations after its origin read it in
        # their inputs (no origin there): by iteration k is a non-finite result, whatever the inputs.
        from converter.runtime.xla_oracle import run_with_xla

        return _nonfinite(run_with_xla(candidate.text, candidate.inputs))


class DivergesCheck(Check):
    """XLA's result of the candidate differs (compare's tolerance) from B's value of the
    instruction matched with its root (matched as `compare` matches them), while every
    parameter holds a matched instruction whose values agree in A and B: the change
    between the dumps is inside the module, not upstream of it."""

    # B's values are those of its loops' last iterations.
    enters_loops = False

    def __init__(self, path_b: str, program_loader_b=None, device: int = 0):
        self.path_b = path_b
        self.program_loader_b = program_loader_b
        self.device = device

    def prepare(self, hlo: Module, values: dict[str, list[np.ndarray]], arrays: list[np.ndarray]) -> None:
        from converter.hlo.parser import parse_hlo_file
        from converter.tools.compare import flatten, keyed

        hlo_b = parse_hlo_file(self.path_b)
        keyed_a, keyed_b = keyed(hlo, flatten(hlo)), keyed(hlo_b, flatten(hlo_b))
        self.match = {keyed_a[k].name: keyed_b[k].name for k in keyed_a if k in keyed_b}
        self.values_a = values
        self.values_b, _, _ = tapped_run(self.path_b, hlo_b, arrays, 0, None, self.program_loader_b, self.device)

    def _agree(self, a: list[np.ndarray], b: list[np.ndarray]) -> bool:
        import numpy as np

        from converter.runtime.compare import compare

        return len(a) == len(b) and all(
            x.size == y.size and compare(np.asarray(x), np.asarray(y).reshape(np.shape(x)), scale_floor=True).ok
            for x, y in zip(a, b))

    def fails(self, candidate: Candidate) -> bool:
        import numpy as np

        from converter.runtime.xla_oracle import run_with_xla

        b_root = self.match.get(candidate.root)
        if b_root is None or b_root not in self.values_b:
            return False
        for held in dict.fromkeys(h.split("#")[0] for h in candidate.held):
            b = self.match.get(held)
            if b is None or b not in self.values_b or not self._agree(self.values_a[held], self.values_b[b]):
                return False
        got = [np.asarray(g) for g in run_with_xla(candidate.text, candidate.inputs)]
        return not self._agree(got, self.values_b[b_root])


def tapped_run(path: str, hlo: Module, arrays: list[np.ndarray] | None, seed: int, inputs_path: str | None,
                program_loader=None, device: int = 0,
                request=None) -> tuple[dict[str, list[np.ndarray]], list[np.ndarray], int]:
    """Every instruction's value (array leaves) in one run of the dump (of a multi-device
    one: on `device`), its inputs, and how many devices it runs on."""
    import numpy as np

    from converter.importer.core import ImportOptions
    from converter.importer.taps import TapRequest, resolve

    if request is None:
        request = TapRequest(names=resolve(TapRequest(regex="."), hlo).names)
    if program_loader is not None:
        program = program_loader(ImportOptions(taps=request))
    else:
        from converter.runtime.convert import convert_module
        from converter.runtime.program import program_from_module

        program = program_from_module(convert_module(hlo, import_options=ImportOptions(taps=request)), hlo, path)
    devices = program.num_devices
    if not 0 <= device < devices:
        raise UsageError(f"--device {device}: the module runs on devices 0..{devices - 1}")
    if arrays is None:
        from converter.runtime.inputs import build_inputs

        arrays, _ = build_inputs(program, [], inputs_path, seed, False)
    outputs = program.execute(arrays)
    values: dict[str, list[np.ndarray]] = {}
    for spec, out in zip(program.results, outputs):
        if spec.name.startswith("tap:"):
            value = np.asarray(out)
            # A multi-device run's taps have a leading axis per device.
            values.setdefault(spec.name[4:].split("#")[0], []).append(value[device] if devices > 1 else value)
    return values, list(arrays), devices


def _device_frontier(comp: Computation, name: str) -> list[str]:
    """The device-dependent instructions (collectives, replica/partition ids) that `name`
    reaches walking back through operands without passing another one: where a one-device
    candidate of a multi-device module is cut (their values on the device become parameters)."""
    seen, frontier, todo = {name}, [], [name]
    while todo:
        for operand in comp.by_name[todo.pop()].operands:
            base = split_operand(operand)[0]
            if base in seen:
                continue
            seen.add(base)
            if comp.by_name[base].opcode in DEVICE_DEPENDENT:
                frontier.append(base)
            else:
                todo.append(base)
    return frontier


def _loop_values(path: str, hlo: Module, arrays: list[np.ndarray], program_loader, device: int,
                 bodies: list[str], chosen: list[int], trips: int) -> dict[str, list[np.ndarray]]:
    """The values of the instructions inside the innermost of `bodies` (outer first; what it
    inlines too, not deeper loops) at every one of its `trips` iterations, the loops around
    it at their `chosen` iterations: per instruction, its leaves with a leading iteration
    axis (the --tap-iterations machinery)."""
    from converter.importer.taps import TapRequest, resolve, tap_path

    names = []
    for comp in hlo.computations:
        ok, _, around = tap_path(hlo, comp, False)
        if ok and list(reversed(around)) == bodies:
            names += [i.name for i in comp.instructions]
    plan = resolve(TapRequest(regex="."), hlo)
    names = [n for n in names if n in plan.instructions]
    request = TapRequest(names=names, iterations=[(k, 1) for k in chosen] + [(0, trips)])
    values, _, _ = tapped_run(path, hlo, arrays, 0, None, program_loader, device, request)
    depth = len(chosen)
    return {n: [v.reshape(v.shape[depth:]) for v in leaves] for n, leaves in values.items()}


def bisect(path: str, check: Check, *, hlo: Module | None = None, arrays: list[np.ndarray] | None = None,
           seed: int = 0, inputs_path: str | None = None, program_loader=None,
           progress: Callable[[str], None] | None = None, device: int = 0) -> BisectResult:
    if hlo is None:
        from converter.hlo.parser import parse_hlo_file

        hlo = parse_hlo_file(path)
    values, arrays, devices = tapped_run(path, hlo, arrays, seed, inputs_path, program_loader, device)
    check.prepare(hlo, values, arrays)
    checks = 0
    # Inside while bodies: the loops entered, outer first, and the iteration chosen in each
    # (candidates there take the instructions' values at those iterations).
    bodies: list[str] = []
    loops: list[str] = []  # the while instruction of each body
    chosen: list[int] = []
    cache: dict[tuple[str, int, tuple[int, ...]], Candidate | None] = {}

    def candidate(comp: Computation, name: str, producers: int) -> Candidate | None:
        key = (name, producers, tuple(chosen))
        if key not in cache:
            try:
                instr = comp.by_name[name]
                cut = cut_instructions(comp, instr, producers)
                cut_from = None
                if devices > 1 and any(i.opcode in DEVICE_DEPENDENT for i in cut):
                    if instr.opcode in DEVICE_DEPENDENT:
                        raise ExtractError(f"%{name} depends on the other devices")
                    # Its producers reach a collective: cut there (its value on the device),
                    # whatever the levels asked (more levels cut at the same place).
                    cut_from = _device_frontier(comp, name)
                    cut = cut_between(comp, instr, cut_from, path)
                text, inputs, held = extract_module(hlo, name, values, producers=producers, cut_from=cut_from)
                cache[key] = Candidate(text, inputs, name, producers, len(cut), held)
            except (ExtractError, KeyError):  # not extractable, or an operand without a value
                cache[key] = None
        return cache[key]

    verdicts: dict[tuple[str, int, tuple[int, ...]], bool] = {}

    def fails(comp: Computation, name: str, producers: int) -> bool:
        nonlocal checks
        key = (name, producers, tuple(chosen))
        if key not in verdicts:
            c = candidate(comp, name, producers)
            if c is None:
                verdicts[key] = False
            else:
                checks += 1
                verdicts[key] = check.fails(c)
                if progress:
                    at = "".join(f" (iteration {k} of %{w})" for w, k in zip(loops, chosen))
                    progress(f"check {checks}: %{name}{at} with {producers} level(s) of producers "
                             f"({c.size} instruction(s)): {'fails' if verdicts[key] else 'passes'}")
        return verdicts[key]

    comp = hlo.entry
    everything = len(comp.instructions)
    roots = [i.name for i in comp.instructions if i.opcode != "parameter"]
    trail: list[str] = []
    # The last instruction on which the check fails: the root, or (a check about matched
    # instructions: the root tuple is none) one of the last few before it.
    last = next((k for k in range(len(roots) - 1, max(-1, len(roots) - 1 - LAST_TRIES), -1)
                 if fails(comp, roots[k], everything)), None)
    if last is None:
        raise ConverterError(diagnostic(SourceLocation(path),
                                        f"the check passes on the whole module (root %{comp.root.name} and the "
                                        f"{LAST_TRIES - 1} instruction(s) before it): there is no failure to keep"
                                        + (f" (device {device}'s program of {devices}, computed from its collectives' "
                                           "values: a failure only a collective itself shows is not one bisect can keep)"
                                           if devices > 1 else "")))
    best = candidate(comp, roots[last], everything)
    while True:
        everything = len(comp.instructions)
        # The root moved earlier: the first instruction (binary search) that still fails
        # with all its producers in the module.
        lo, hi = 0, last
        while lo < hi:
            mid = (lo + hi) // 2
            if fails(comp, roots[mid], everything):
                hi = mid
            else:
                lo = mid + 1
        root = roots[hi]
        # The fewest levels of producers that still fail (binary search; the rest become
        # parameters holding the run's values).
        lo, hi = 0, everything
        while lo < hi:
            mid = (lo + hi) // 2
            if fails(comp, root, mid):
                hi = mid
            else:
                lo = mid + 1
        found = candidate(comp, root, hi)
        assert found is not None and verdicts[(root, hi, tuple(chosen))]
        best = found
        at = "".join(f", iteration {k} of %{w}" for w, k in zip(loops, chosen))
        trail.append(f"%{root} in {comp.name}{at} with {hi} level(s) of producers: {found.size} instruction(s)")
        instr = comp.by_name[root]
        inner = [c for key, c in _called(instr, hlo) if (instr.opcode, key) in ENTERED]
        if not inner and instr.opcode == "while":
            body = next(c for key, c in _called(instr, hlo) if key == "body")
            trips = trip_count(hlo, comp, instr)
            if not check.enters_loops:
                trail.append(f"%{root} not entered: the check compares with B's values at the last iteration")
                break
            if not trips:
                trail.append(f"%{root} not entered: its trip count is not in the dump (XLA's known_trip_count or a "
                             "counter < constant condition)" if trips is None else f"%{root} runs no iteration")
                break
            loop_values = _loop_values(path, hlo, arrays, program_loader, device, bodies + [body], chosen, trips)
            inner_comp = hlo.by_name[body]
            inner_roots = [i.name for i in inner_comp.instructions if i.opcode != "parameter"]
            bodies.append(body)
            loops.append(root)

            def failed_by(k: int) -> bool:
                nonlocal checks
                chosen.append(k)
                values.update({n: [v[k] for v in leaves] for n, leaves in loop_values.items()})
                c = candidate(inner_comp, inner_roots[-1], len(inner_comp.instructions)) if inner_roots else None
                chosen.pop()
                checks += c is not None
                return c is not None and check.failed_by(c)

            # The first iteration by which the body's result shows the failure (binary
            # search, the failure assumed to stay once there, as along the instructions).
            if not failed_by(trips - 1):
                bodies.pop()
                loops.pop()
                trail.append(f"%{root} not entered: its body's result passes the check at its last iteration")
                break
            lo, hi = 0, trips - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if failed_by(mid):
                    hi = mid
                else:
                    lo = mid + 1
            chosen.append(hi)
            values.update({n: [v[hi] for v in leaves] for n, leaves in loop_values.items()})
            if not fails(inner_comp, inner_roots[-1], len(inner_comp.instructions)):
                chosen.pop()
                bodies.pop()
                loops.pop()
                trail.append(f"%{root} not entered: its body's result at iteration {hi}, the first showing the "
                             "failure, does not fail the check")
                break
            comp, roots = inner_comp, inner_roots
            last = len(roots) - 1
            continue
        if not inner:
            break
        # Enter the fusion or call: its root computes the same value from the same operands.
        comp = hlo.by_name[inner[0]]
        roots = [i.name for i in comp.instructions if i.opcode != "parameter"]
        everything = len(comp.instructions)
        if not roots or not fails(comp, roots[-1], everything):
            break
        last = len(roots) - 1
    original = sum(len(c.instructions) for c in hlo.computations)
    return BisectResult(best, original, checks, trail, list(zip(bodies, chosen)))


def trip_count(hlo: Module, caller: Computation, loop) -> int | None:
    from converter.importer.taps import trip_count as count

    return count(hlo, caller, loop)


def _called(instr, hlo: Module) -> list[tuple[str, str]]:
    from converter.importer.taps import called_computations

    return called_computations(instr, hlo)


def add_bisect_parser(sub) -> None:
    p = sub.add_parser("bisect", help="shrink a dump to a small module on which a check still fails "
                                      "(as XLA's hlo_bisect), written with its inputs",
                       description="Move the root earlier and cut producers away while the check still fails; "
                                   "write OUT.hlo (plain HLO XLA runs on CPU) and OUT.inputs.npz (arg0..argN, "
                                   "the values of the run).  Exit 0 written; 1 the check passes on the whole "
                                   "module.")
    p.add_argument("dump", help="HLO text dump (or XLA proto)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", metavar="CMD",
                   help="shell command run on each candidate ({hlo}, {inputs}: its files; appended when absent); "
                        "a non-zero exit means the failure is still there")
    g.add_argument("--diverges-from", metavar="B",
                   help="built-in check: XLA's result differs from B's value of the matched instruction (as "
                        "compare matches them) while the module's inputs agree in A and B")
    g.add_argument("--find-nonfinite", action="store_true",
                   help="built-in check: XLA's result holds a NaN or Inf while the module's inputs hold none")
    p.add_argument("--inputs", metavar="IN.npz", help="the dump's inputs keyed arg0..argN (default: random from --seed)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("-o", "--output", required=True, metavar="OUT.hlo", help="the module; its inputs go to OUT.inputs.npz")
    p.add_argument("--device", type=int, default=0, metavar="D",
                   help="of a multi-device dump: bisect device D's program (its values; collectives are cut at)")
    p.add_argument("--verbose", action="store_true", help="print each check")


def cmd_bisect(args) -> int:
    import tempfile

    import numpy as np

    from converter.common.files import write_atomic
    from converter.hlo.parser import parse_hlo
    from converter.hlo.proto import read_hlo_text
    from converter.tools.extract_command import tapped_program_loader

    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise UsageError(f"-o {args.output}: folder {folder} does not exist")
    hlo = parse_hlo(read_hlo_text(args.dump), args.dump, allow_unknown_attributes=args.allow_unknown_attributes)

    progress = (lambda line: print(line, file=sys.stderr)) if args.verbose else None
    with tempfile.TemporaryDirectory(prefix="hlo-roundtrip-bisect-") as tmp:
        check: Check
        if args.check:
            check = CommandCheck(args.check, tmp)
        elif args.diverges_from:
            check = DivergesCheck(args.diverges_from, device=args.device)
        else:
            check = NonfiniteCheck()
        result = bisect(args.dump, check, hlo=hlo, seed=args.seed, inputs_path=args.inputs, program_loader=tapped_program_loader(args),
                        progress=progress, device=args.device)
    npz_path = inputs_path_for(args.output)
    buffer = io.BytesIO()
    np.savez(buffer, **{f"arg{i}": a for i, a in enumerate(result.best.inputs)})
    write_atomic(npz_path, buffer.getvalue())
    write_atomic(args.output, result.best.text)
    for line in result.trail:
        print(f"  {line}")
    print(f"wrote {args.output} (root %{result.best.root}: {result.best.size} instruction(s) of its computation, a "
          f"fusion counted once; the dump has {result.original_size} in all; {len(result.best.inputs)} input(s)) and "
          f"{npz_path} after {result.checks} check(s)")
    return 0
