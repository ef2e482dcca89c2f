"""`hlo-roundtrip check`: convert → run → export to HLO → convert again → run again, and
compare; optionally also run the original dump through XLA itself.

The verdict is what was established (DESIGN.md §4): exit 0 the values agree, 3 they
differ, 4 a comparison asked for (`--against-xla`) could not be made, with the reason;
never "agree" for a comparison not made."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from converter.runtime.convert import ConvertOptions, convert_text, load_module_file
from converter.runtime.compare import Difference, compare
from converter.common.errors import ConverterError
from converter.tools.export import export_hlo_text
from converter.runtime.program import program_from_module, read_inputs
from converter.runtime.sharding import before_optimizations_sibling
from converter.runtime.xla_oracle import XlaDumpRun, run_dump_with_xla, xla_dump_program

EXIT_AGREE, EXIT_DIFFER, EXIT_NOT_COMPARED = 0, 3, 4


@dataclass
class CheckRow:
    name: str
    dtype: str
    shape: tuple[int, ...]
    round_trip: Difference
    xla: Difference | None = None

    @property
    def ok(self) -> bool:
        return self.round_trip.ok and (self.xla is None or self.xla.ok)


@dataclass
class CheckReport:
    rows: list[CheckRow] = field(default_factory=list)
    xla_asked: bool = False
    xla_ran: str = ""  # which module XLA ran, in words, when it ran
    xla_not_compared: str = ""  # why XLA's comparison could not be made, when asked and not made
    outputs: list[np.ndarray] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def exit_status(self) -> int:
        """3 when values differ; else 4 when the comparison with XLA was asked for and not
        made; else 0."""
        if not self.ok:
            return EXIT_DIFFER
        return EXIT_NOT_COMPARED if self.xla_asked and not self.xla_ran else EXIT_AGREE


def check_dump(path: str, inputs_path: str | None = None, seed: int = 0, against_xla: bool = False,
               options: ConvertOptions | None = None, rtol: float | None = None,
               atol: float | None = None, global_arrays: bool = False) -> CheckReport:
    """The report; its `outputs` are the first conversion's outputs.  `path` is an HLO dump
    (text or one of XLA's protos) or a StableHLO file."""
    options = options or ConvertOptions()
    loaded = load_module_file(path, options)
    first = loaded.module
    exported = export_hlo_text(first)
    program = program_from_module(first, path=path, options=options)
    if inputs_path and global_arrays and program.num_devices > 1:
        inputs = _split_whole_inputs(inputs_path, program)
    else:
        inputs = read_inputs(inputs_path, program) if inputs_path else program.random_inputs(seed)
    out_first = program(*inputs)
    second = program_from_module(convert_text(exported, path + " (exported)", options), options=options)
    out_second = second(*inputs)
    report = CheckReport(xla_asked=against_xla)
    xla_out = None
    if against_xla and loaded.hlo_text is None:
        report.xla_not_compared = "the input is StableHLO, not an HLO dump: XLA was not run on it"
    elif against_xla:
        run = xla_run(path, loaded.hlo_text, program, inputs)
        if isinstance(run, str):
            report.xla_not_compared = run
        else:
            report.xla_ran, xla_out = run.what, run.outputs
    for spec, a, b in zip(program.results, out_first, out_second):
        row = CheckRow(f"out{spec.index}", np.asarray(a).dtype.name, tuple(np.shape(a)), compare(b, a, rtol, atol))
        if xla_out is not None:
            row.xla = compare(a, xla_out[spec.index], rtol, atol)
        report.rows.append(row)
    report.outputs = list(out_first)
    return report


def _split_whole_inputs(path: str, program) -> list[np.ndarray]:
    """Whole arrays of an .npz split into each device's piece by the module's parameter
    shardings (`run --global`'s split, converter/runtime/sharding.py)."""
    from converter.runtime.sharding import shardings_with_fallback, split_global

    params, _ = shardings_with_fallback(program, None)
    whole = read_inputs(path, program, per_device=False)
    return [split_global(a, spec.shape, sh, program.num_devices, f"arg{spec.index}")
            for a, spec, sh in zip(whole, program.params, params)]


def xla_run(path: str, hlo_text: str, program, inputs: list[np.ndarray]) -> XlaDumpRun | str:
    """XLA's outputs for the dump (or, when XLA cannot run the dump, for its
    before-optimizations sibling if that takes the same arguments and gives the same
    results), or why neither could be run."""
    try:
        return run_dump_with_xla(hlo_text, inputs, path)
    except ConverterError as e:
        why, reason = str(e), f"XLA cannot run this dump: {e}"
    sibling = before_optimizations_sibling(path)
    if sibling is None:
        return reason
    try:
        with open(sibling, encoding="utf-8") as f:
            sibling_text = f.read()
        oracle, _ = xla_dump_program(sibling_text, sibling)
        signature = lambda specs: [(s.shape, s.element_type) for s in specs]  # noqa: E731
        if (oracle.num_devices, signature(oracle.params), signature(oracle.results)) != \
                (program.num_devices, signature(program.params), signature(program.results)):
            return (f"{reason}; nor its before-optimizations sibling {sibling}, whose entry takes or gives "
                    "other shapes (a module before SPMD partitioning takes whole arrays)")
        return XlaDumpRun(f"the before-optimizations sibling {sibling} (XLA could not run the dump: {why})",
                          oracle(*inputs))
    except ConverterError as e:
        return f"{reason}; nor its before-optimizations sibling {sibling}: {e}"


def format_report(report: CheckReport) -> str:
    header = ["output", "dtype", "shape", "round-trip max abs", "max rel", "xla max abs", "max rel", "verdict"]
    rows = []
    for r in report.rows:
        xla = [f"{r.xla.max_abs:.3g}", f"{r.xla.max_rel:.3g}"] if r.xla is not None else ["-", "-"]
        rows.append([r.name, r.dtype, "x".join(map(str, r.shape)) or "scalar",
                     f"{r.round_trip.max_abs:.3g}", f"{r.round_trip.max_rel:.3g}", *xla,
                     "ok" if r.ok else "DIFFERS"])
    widths = [max(len(x[i]) for x in rows + [header]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]
    if report.xla_ran:
        out.append(f"XLA ran {report.xla_ran}")
    status = report.exit_status
    if status == EXIT_DIFFER:
        verdict = ("outputs differ beyond the dtype tolerance: " + ", ".join(r.name for r in report.rows if not r.ok))
        if report.xla_not_compared:
            verdict += f" (round trip only: XLA was not compared: {report.xla_not_compared})"
    elif status == EXIT_NOT_COMPARED:
        verdict = ("NOT COMPARED with XLA (the round trip agrees): " + report.xla_not_compared)
    else:
        verdict = "the outputs agree" + (" (round trip and XLA)" if report.xla_ran else " (round trip)")
    out.append("verdict: " + verdict)
    return "\n".join(out)
