"""`hlo-roundtrip check`: convert → run → export to HLO → convert again → run again, and
compare; optionally also run the original dump through XLA itself."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from converter.runtime.convert import convert_text, load_module_file
from converter.runtime.compare import Difference, compare
from converter.common.errors import ConverterError
from converter.tools.export import export_hlo_text
from converter.runtime.program import program_from_module, read_inputs
from converter.runtime.xla_oracle import run_with_xla


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
    xla_note: str = ""
    outputs: list[np.ndarray] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)


def check_dump(path: str, inputs_path: str | None = None, seed: int = 0, against_xla: bool = False,
               pipeline: str = "default", import_options=None, pass_options=None,
               rtol: float | None = None, atol: float | None = None,
               allow_unknown_attributes: bool = False) -> CheckReport:
    """The report; its `outputs` are the first conversion's outputs.  `path` is an HLO dump
    (text or one of XLA's protos) or a StableHLO file."""
    loaded = load_module_file(path, pipeline=pipeline, import_options=import_options,
                              pass_options=pass_options, allow_unknown_attributes=allow_unknown_attributes)
    first = loaded.module
    exported = export_hlo_text(first)
    program = program_from_module(first, path=path)
    inputs = read_inputs(inputs_path, program) if inputs_path else program.random_inputs(seed)
    out_first = program(*inputs)
    second = program_from_module(convert_text(exported, path + " (exported)", pipeline=pipeline,
                                              import_options=import_options, pass_options=pass_options))
    out_second = second(*inputs)
    report = CheckReport()
    xla_out = None
    if against_xla and loaded.hlo_text is None:
        report.xla_note = "the input is StableHLO, not an HLO dump: XLA was not run on it"
    elif against_xla:
        try:
            xla_out = run_with_xla(loaded.hlo_text, inputs, num_replicas=program.num_devices)
        except ConverterError as e:
            report.xla_note = f"XLA cannot run this dump itself, so it was not compared: {e}"
    for spec, a, b in zip(program.results, out_first, out_second):
        row = CheckRow(f"out{spec.index}", np.asarray(a).dtype.name, tuple(np.shape(a)), compare(b, a, rtol, atol))
        if xla_out is not None:
            row.xla = compare(a, xla_out[spec.index], rtol, atol)
        report.rows.append(row)
    report.outputs = list(out_first)
    return report


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
    if report.xla_note:
        out.append(report.xla_note)
    out.append("verdict: " + ("the outputs agree" if report.ok else
                              "outputs differ beyond the dtype tolerance: " +
                              ", ".join(r.name for r in report.rows if not r.ok)))
    return "\n".join(out)
