"""`run DUMP --find-nonfinite[=exhaustive|escaping]`: the first instruction whose value holds
a NaN or Inf while its operands hold none, with its iteration inside while loops (see
converter.importer.nonfinite_monitor for how the converted program checks as it goes).

Two searches.  `exhaustive` (bare `--find-nonfinite`) checks every instruction, fused ones
included, in one run: the first origin, also one whose NaN a later instruction of its
fusion masks (`where(x > 0, log(x), 0)`).  Its price is XLA's compile: a reduction per
fused instruction breaks XLA's own fusion (several times the plain compile).  `escaping`
runs twice: first with each fusion's result checked as one value (a row per value outside
fusions), which finds the first such value that holds a NaN/Inf from finite operands, and
its iterations; when that value is a fusion's, again with only that fusion instance's
instructions checked, at those iterations (a compile about a plain run's), to name the
instruction inside it that made the NaN/Inf.  It does not see a NaN/Inf made and masked
inside a fusion.

Exit status (a verdict, as DESIGN's comparisons): 0 no instruction produced a non-finite
value from finite operands; 3 one did (the first is printed); 1/2 as every command.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from converter.common.errors import ConverterError, SourceLocation, diagnostic

if TYPE_CHECKING:  # annotations only: NumPy loads where arrays are made, not at the CLI's start-up
    import numpy as np

EXIT_NONE, EXIT_FOUND = 0, 3
EXHAUSTIVE_MODE, ESCAPING_MODE = "exhaustive", "escaping"
MODES = (EXHAUSTIVE_MODE, ESCAPING_MODE)
# Above this many fused instructions to check one by one, the exhaustive search says that
# the escaping one compiles faster (benchmarks/README.md: complex_linear's 164 already cost
# 5-8x a plain compile, the escaping search's 19 rows under 2x).
SLOW_FUSED_INSTRUCTIONS = 150
ESCAPING_NOTE = ("escaping mode: the first NaN/Inf to leave a fusion (fusions checked as whole values), then the "
                 "instruction inside that fusion that made it; a NaN/Inf made and masked inside a fusion is not "
                 "reported (bare --find-nonfinite checks every fused instruction)")


@dataclass
class Origin:
    """An instruction that made a NaN/Inf from finite operands, and when it first did."""

    name: str
    opcode: str
    line: int
    col: int
    count: int
    elements: int
    loops: list[str]          # while instructions, outer to inner
    iterations: list[int]     # the iteration of each, counting from 0
    op_name: str
    source: str               # file:line, "" when the metadata has none
    device: int = 0
    key: tuple[int, ...] = ()
    path: tuple[int, ...] = ()  # its MonitorItem.path: where it is in the call tree
    loop_paths: tuple[tuple[int, ...], ...] = ()  # the paths of `loops`
    fusion: str = ""          # the fusion instruction whose computation holds it ("": not fused)

    def where(self) -> str:
        return ", ".join(f"iteration {i} of %{loop}" for loop, i in zip(self.loops, self.iterations))


def origins(plan, rows: np.ndarray, hlo, device: int = 0) -> list[Origin]:
    """Every origin the rows record, in the order they happened."""
    import numpy as np

    out = []
    for i in np.flatnonzero(rows[:, -1] > 0):
        item = plan.items[int(i)]
        iterations = [int(v) for v in rows[i, : len(item.loops)]]
        md = item.instr.metadata
        op_name = md.op_name if md is not None else ""
        source = ""
        if md is not None and md.source_file:
            source = f"{md.source_file}:{md.source_line}"
        elif md is not None and md.stack_frame_id:
            loc = hlo.stack_frames.location(md.stack_frame_id)
            source = f"{loc[0]}:{loc[1]}" if loc else ""
        elements = sum(leaf.num_elements() for leaf in item.instr.shape.leaves()
                       if not leaf.is_token and not leaf.is_tuple)
        out.append(Origin(item.instr.name, item.instr.opcode, item.instr.line, item.instr.col, int(rows[i, -1]),
                          elements, list(item.loops), iterations, op_name, source, device,
                          item.time_key(iterations), item.path, item.loop_paths(),
                          item.fusion.name if item.fusion is not None else ""))
    out.sort(key=lambda o: o.key)
    return _innermost(out)


def _innermost(found: list[Origin]) -> list[Origin]:
    """Drop a fusion, call or while whose NaN/Inf comes from an origin inside it (its own
    value is its root's): the inner instruction is the one to report."""
    from converter.importer.nonfinite_monitor import AFTER

    inner_prefixes = {o.key[:k] for o in found for k in range(1, len(o.key)) if o.key[-1] != AFTER or k < len(o.key) - 1}
    return [o for o in found if not (o.key and o.key[-1] == AFTER and o.key[:-1] in inner_prefixes)]


def find_nonfinite(program, arrays, keep_fusions: bool = False, scope=None) -> list[Origin]:
    """Run a program converted with ImportOptions(find_nonfinite=scope, keep_fusions=...)
    (scope None: EXHAUSTIVE) and return the origins, first first (per device for a
    multi-device module: the earliest device's first, then the others)."""
    import numpy as np

    from converter.importer.nonfinite_monitor import EXHAUSTIVE, monitor_plan

    hlo = program.hlo
    outputs = program.execute(arrays)
    rows = np.asarray(outputs[-1])
    plan = monitor_plan(hlo, EXHAUSTIVE if scope is None else scope, keep_fusions)
    if rows.ndim == 2:
        rows = rows[None]
    found = []
    for device, device_rows in enumerate(rows):
        if device_rows.shape[0] != len(plan.items):
            raise ConverterError(diagnostic(SourceLocation(program.path),
                                            "--find-nonfinite: the program returns "
                                            f"{device_rows.shape[0]} rows for {len(plan.items)} instructions (a bug; please report it)"))
        found.extend(origins(plan, device_rows, hlo, device))
    found.sort(key=lambda o: (o.key, o.device))
    return found


def find_escaping_nonfinite(program, arrays, converted_with: Callable, keep_fusions: bool = False) -> list[Origin]:
    """The escaping search: `program` converted with fusions checked whole (FUSIONS_WHOLE)
    gives the first origin outside fusions; when that is a fusion's value,
    `converted_with(scope)` (the same dump converted with another MonitorScope) enters
    that fusion instance and the first origin inside it at the same iterations and on the
    same device takes its place (the fusion itself stays when none inside is one: a NaN/Inf
    constant of its computation passed through).  The second run records rows at those
    iterations only: an instruction of the fusion that made a NaN/Inf masked at an earlier
    iteration is not the one that made this one.  The other origins are the first run's."""
    from converter.importer.nonfinite_monitor import AFTER, FUSIONS_WHOLE, MonitorScope

    found = find_nonfinite(program, arrays, keep_fusions, FUSIONS_WHOLE)
    if not found or found[0].opcode != "fusion" or keep_fusions:
        return found
    first = found[0]
    scope = MonitorScope.inside(first.path, first.loop_paths, first.iterations)
    again = find_nonfinite(converted_with(scope), arrays, keep_fusions, scope)
    depth = len(first.path)
    inside = [o for o in again if o.path[:depth] == first.path and o.path[depth:] != (AFTER,)
              and o.iterations == first.iterations and o.device == first.device]
    return inside[:1] + found[1:] if inside else found


def fused_instruction_count(hlo, keep_fusions: bool = False) -> int:
    """How many rows the exhaustive search checks inside fusions (what slows its compile)."""
    from converter.importer.nonfinite_monitor import EXHAUSTIVE, monitor_plan

    return sum(item.fusion is not None for item in monitor_plan(hlo, EXHAUSTIVE, keep_fusions).items)


def format_report(path: str, found: list[Origin], num_devices: int, limit: int = 5,
                  mode: str = EXHAUSTIVE_MODE) -> str:
    escaping = mode == ESCAPING_MODE
    if not found:
        if escaping:
            return (f"{path}: no NaN or Inf leaves a fusion or an unfused instruction from finite operands\n"
                    f"  {ESCAPING_NOTE}")
        return f"{path}: no NaN or Inf: every instruction's value is finite (or non-finite only where an operand is)"
    first = found[0]
    lines = [f"{SourceLocation(path, first.line, first.col)}: first non-finite value: %{first.name} ({first.opcode})"
             + (f", {first.where()}" if first.loops else "")
             + (f" on device {first.device}" if num_devices > 1 else "")]
    lines.append(f"  {first.count} of {first.elements} element(s) NaN or Inf; its operands hold none")
    if first.fusion:
        lines.append(f"  inside %{first.fusion}")
    if first.op_name:
        lines.append(f"  op_name: {first.op_name}")
    if first.source:
        lines.append(f"  source: {first.source}")
    if escaping:
        lines.append(f"  {ESCAPING_NOTE}")
    rest = found[1:]
    if rest:
        what = "value(s) outside fusions" if escaping else "instruction(s)"
        lines.append(f"{len(rest)} other {what} also made NaN/Inf from finite operands, next:")
        for o in rest[:limit]:
            lines.append(f"  %{o.name} ({o.opcode}) at {SourceLocation(path, o.line, o.col)}"
                         + (f", {o.where()}" if o.loops else "")
                         + (f" on device {o.device}" if num_devices > 1 else "") + f": {o.count} element(s)")
    return "\n".join(lines)


def run_find_nonfinite(o) -> int:
    """The `run --find-nonfinite[=MODE]` command (`o`: its RunOptions)."""
    from converter.common.errors import UsageError
    from converter.hlo.proto import read_snapshot
    from converter.importer.nonfinite_monitor import EXHAUSTIVE, FUSIONS_WHOLE
    from converter.runtime import program as runtime
    from converter.runtime.convert import convert_module
    from converter.runtime.inputs import build_inputs

    for option, given in (("--processes", o.processes), ("--engine iree", o.engine == "iree"),
                          ("--compile-only", o.compile_only),
                          ("--tap/--tap-regex/--tap-all", o.convert.import_options.taps)):
        if given:
            raise UsageError(f"--find-nonfinite does not combine with {option}")
    mode = o.find_nonfinite if o.find_nonfinite in MODES else EXHAUSTIVE_MODE
    escaping = mode == ESCAPING_MODE
    keep_fusions = o.convert.import_options.keep_fusions
    options = o.convert.replace(find_nonfinite=FUSIONS_WHOLE if escaping else EXHAUSTIVE)
    program = runtime.load(o.input, options)
    hlo = program.hlo
    if hlo is None:
        raise ConverterError(diagnostic(SourceLocation(o.input),
                                        "--find-nonfinite reads an HLO dump (or XLA proto), "
                                        "not a StableHLO file: it checks the dump's instructions"))
    if not escaping and not keep_fusions:
        fused = fused_instruction_count(hlo)
        if fused > SLOW_FUSED_INSTRUCTIONS:
            print(f"hlo-roundtrip run: note: --find-nonfinite checks {fused:,} fused instructions one by one, "
                  "which makes XLA's compile several times slower; --find-nonfinite=escaping checks "
                  "fusions as whole values first (see --help)", file=sys.stderr)
            sys.stderr.flush()
    snapshot = read_snapshot(o.input)
    if snapshot is not None and not o.inputs and not o.input_values:
        from converter.tools.run import snapshot_arguments

        arrays = snapshot_arguments(snapshot, program, o.input)
    else:
        arrays, _ = build_inputs(program, list(o.input_values), o.inputs, o.seed, False)
    if not o.skip_memory_check:
        runtime.check_memory_fits(program)
    if escaping:
        def converted_with(scope):
            scoped = options.replace(find_nonfinite=scope)
            entered = runtime.program_from_module(convert_module(hlo, scoped), hlo, o.input, options=scoped)
            if not o.skip_memory_check:
                runtime.check_memory_fits(entered)
            return entered

        found = find_escaping_nonfinite(program, arrays, converted_with, keep_fusions)
    else:
        found = find_nonfinite(program, arrays, keep_fusions, EXHAUSTIVE)
    print(format_report(o.input, found, program.num_devices, mode=mode))
    sys.stdout.flush()
    return EXIT_FOUND if found else EXIT_NONE


def add_nonfinite_args(p) -> None:
    p.add_argument("--find-nonfinite", nargs="?", const=EXHAUSTIVE_MODE, choices=MODES, metavar="MODE",
                   help="report the first instruction (in dependency order; inside while loops with its "
                        "iteration) whose value holds a NaN or Inf while its operands hold none; "
                        "exit 0 when there is none, 3 when there is.  MODE exhaustive (the default): every "
                        "instruction, fused ones included, also a NaN/Inf a fusion makes and masks itself "
                        "(where(x > 0, log(x), 0)); compiles several times slower than a plain run.  "
                        "escaping: fusions checked as whole values, then the one the first NaN/Inf left is "
                        "entered to name the instruction in it: faster on big dumps, but a NaN/Inf made and "
                        "masked inside a fusion is not reported.  A mode is written "
                        "--find-nonfinite=MODE")
