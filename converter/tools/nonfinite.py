"""`run DUMP --find-nonfinite`: the first instruction whose value holds a NaN or Inf while
its operands hold none, with its iteration inside while loops (see
converter.importer.nonfinite_monitor for how the converted program checks as it goes).

Exit status (a verdict, as DESIGN's comparisons): 0 no instruction produced a non-finite
value from finite operands; 3 one did (the first is printed); 1/2 as every command.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from converter.common.errors import ConverterError, SourceLocation, diagnostic

if TYPE_CHECKING:  # annotations only: NumPy loads where arrays are made, not at the CLI's start-up
    import numpy as np

EXIT_NONE, EXIT_FOUND = 0, 3


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
                          item.time_key(iterations)))
    out.sort(key=lambda o: o.key)
    return _innermost(out)


def _innermost(found: list[Origin]) -> list[Origin]:
    """Drop a fusion, call or while whose NaN/Inf comes from an origin inside it (its own
    value is its root's): the inner instruction is the one to report."""
    from converter.importer.nonfinite_monitor import AFTER

    inner_prefixes = {o.key[:k] for o in found for k in range(1, len(o.key)) if o.key[-1] != AFTER or k < len(o.key) - 1}
    return [o for o in found if not (o.key and o.key[-1] == AFTER and o.key[:-1] in inner_prefixes)]


def find_nonfinite(program, arrays, keep_fusions: bool = False) -> list[Origin]:
    """Run a program converted with ImportOptions(find_nonfinite=True) and return the
    origins, first first (per device for a multi-device module: the earliest device's
    first, then the others)."""
    import numpy as np

    from converter.importer.nonfinite_monitor import monitor_plan

    hlo = program.hlo
    outputs = program.execute(arrays)
    rows = np.asarray(outputs[-1])
    plan = monitor_plan(hlo, keep_fusions)
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


def format_report(path: str, found: list[Origin], num_devices: int, limit: int = 5) -> str:
    if not found:
        return f"{path}: no NaN or Inf: every instruction's value is finite (or non-finite only where an operand is)"
    first = found[0]
    lines = [f"{SourceLocation(path, first.line, first.col)}: first non-finite value: %{first.name} ({first.opcode})"
             + (f", {first.where()}" if first.loops else "")
             + (f" on device {first.device}" if num_devices > 1 else "")]
    lines.append(f"  {first.count} of {first.elements} element(s) NaN or Inf; its operands hold none")
    if first.op_name:
        lines.append(f"  op_name: {first.op_name}")
    if first.source:
        lines.append(f"  source: {first.source}")
    rest = found[1:]
    if rest:
        lines.append(f"{len(rest)} other instruction(s) also made NaN/Inf from finite operands, next:")
        for o in rest[:limit]:
            lines.append(f"  %{o.name} ({o.opcode}) at {SourceLocation(path, o.line, o.col)}"
                         + (f", {o.where()}" if o.loops else "")
                         + (f" on device {o.device}" if num_devices > 1 else "") + f": {o.count} element(s)")
    return "\n".join(lines)


def run_find_nonfinite(o) -> int:
    """The `run --find-nonfinite` command (`o`: its RunOptions)."""
    from converter.common.errors import UsageError
    from converter.hlo.proto import read_snapshot
    from converter.runtime import program as runtime
    from converter.runtime.inputs import build_inputs

    for option, given in (("--processes", o.processes), ("--engine iree", o.engine == "iree"),
                          ("--compile-only", o.compile_only),
                          ("--tap/--tap-regex/--tap-all", o.convert.import_options.taps)):
        if given:
            raise UsageError(f"--find-nonfinite does not combine with {option}")
    options = o.convert.replace(find_nonfinite=True)
    program = runtime.load(o.input, options)
    if program.hlo is None:
        raise ConverterError(diagnostic(SourceLocation(o.input),
                                        "--find-nonfinite reads an HLO dump (or XLA proto), "
                                        "not a StableHLO file: it checks the dump's instructions"))
    snapshot = read_snapshot(o.input)
    if snapshot is not None and not o.inputs and not o.input_values:
        from converter.tools.run import snapshot_arguments

        arrays = snapshot_arguments(snapshot, program, o.input)
    else:
        arrays, _ = build_inputs(program, list(o.input_values), o.inputs, o.seed, False)
    if not o.skip_memory_check:
        runtime.check_memory_fits(program)
    found = find_nonfinite(program, arrays, options.import_options.keep_fusions)
    print(format_report(o.input, found, program.num_devices))
    sys.stdout.flush()
    return EXIT_FOUND if found else EXIT_NONE


def add_nonfinite_args(p) -> None:
    p.add_argument("--find-nonfinite", action="store_true",
                   help="report the first instruction (in dependency order; inside while loops with its "
                        "iteration) whose value holds a NaN or Inf while its operands hold none; "
                        "exit 0 when there is none, 3 when there is")
