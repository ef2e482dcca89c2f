"""`diff A B`: a change planted in a copy of a committed dump (the generator knows what
it changed: the oracle) is reported on the op it was planted in, and nothing else is;
a dump against itself is the same structure (exit 0); two backends' dumps of one
program differ (exit 3)."""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
import sys
from html.parser import HTMLParser

from hypothesis import HealthCheck, given, settings, strategies as st

from converter.hlo.ir import Layout
from converter.hlo.parser import parse_hlo_file
from converter.tools.compare import flatten, keyed
from converter.tools.diff import diff_modules, format_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DUMPS = ["mlp_grad", "reductions", "attention_block", "fori_loop", "conv_grad"]


def parsed(dump: str, backend: str = "cpu"):
    return parse_hlo_file(os.path.join(ROOT, "tests", "dumps", backend, dump + ".hlo"))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_planted_change_is_reported_on_its_op_and_nothing_else(data):
    dump = data.draw(st.sampled_from(DUMPS))
    a = parsed(dump)
    keys = keyed(a, flatten(a))
    key = data.draw(st.sampled_from(sorted(keys)))
    b = copy.deepcopy(a)
    b.path = a.path + ".changed"
    name = keys[key].name
    target = next(c.by_name[name] for c in b.computations if name in c.by_name)
    from converter.importer.taps import called_computations

    # Renaming a fusion's or loop's opcode would also hide what it calls (those ops go).
    kinds = ["sharding"] + ([] if called_computations(target, b) else ["opcode"])
    if target.shape.is_array and len(target.shape.dims) >= 2:
        kinds.append("layout")
    kind = data.draw(st.sampled_from(kinds))
    if kind == "opcode":
        target.opcode = "planted-op"
    elif kind == "layout":
        old = target.shape.layout.minor_to_major if target.shape.layout else tuple(range(len(target.shape.dims) - 1, -1, -1))
        target.shape = dataclasses.replace(target.shape, layout=Layout(tuple(reversed(old))))
    else:
        from converter.hlo.parser import parse_hlo

        sharding = parse_hlo("HloModule s\nENTRY e {\n  ROOT p = f32[2] parameter(0), sharding={maximal device=1}\n}\n").entry.root.attrs["sharding"]
        target.attrs = {**target.attrs, "sharding": sharding}
    report = diff_modules(a, b)
    assert [c.key for c in report.changed] == [key], format_report(report)
    change = report.changed[0]
    assert change.a == change.b == name
    word = {"opcode": "opcode ", "layout": "layout {", "sharding": "sharding "}[kind]
    assert any(w.startswith(word) for w in change.what), change.what
    assert not report.removed and not report.added
    assert not report.same


def test_removing_an_op_reports_it_only_in_a():
    a = parsed("mlp_grad")
    keys = keyed(a, flatten(a))
    counts: dict[tuple, int] = {}
    for instr in (i for c in a.computations for i in c.instructions):
        md = instr.metadata
        if md is not None and md.op_name:
            counts[(md.op_name, md.stack_frame_id)] = counts.get((md.op_name, md.stack_frame_id), 0) + 1
    # An op that one instruction alone carries: without its metadata nothing stands for it.
    key, instr = next((k, i) for k, i in keys.items() if counts[(i.metadata.op_name, i.metadata.stack_frame_id)] == 1)
    b = copy.deepcopy(a)
    target = next(c.by_name[instr.name] for c in b.computations if instr.name in c.by_name)
    target.metadata = None
    report = diff_modules(a, b)
    assert report.removed == [(key, instr.name)] and not report.added and not report.changed


def test_cli_verdicts(capsys):
    from converter.tools.cli import main

    same = os.path.join(ROOT, "tests", "dumps", "cpu", "mlp_grad.hlo")
    other = os.path.join(ROOT, "tests", "dumps", "gpu", "mlp_grad.hlo")
    assert main(["diff", same, same]) == 0
    assert "verdict: the same structure" in capsys.readouterr().out
    assert main(["diff", same, other]) == 3
    printed = capsys.readouterr().out
    # The GPU dump calls cuBLAS where the CPU one has dots and fusions.
    assert "custom-call        0 → 5" in printed and "opcode fusion → get-tuple-element" in printed


class _Tables(HTMLParser):
    """The page's tables as {class: [[cell text, ...], ...]}, and every attribute value that
    could load something (src, href, url(...) in a style), for the no-network check."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.external: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._style = False

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href", "action", "data", "srcset") and value:
                self.external.append(f"{tag} {name}={value}")
        if tag in ("script", "link", "iframe", "img", "object", "embed"):
            self.external.append(tag)
        if tag == "style":
            self._style = True
        if tag == "table":
            self._table = dict(attrs).get("class", "")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "style":
            self._style = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._style and ("url(" in data or "@import" in data):
            self.external.append("style " + data)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_html_page_has_the_planted_change_on_its_row_and_loads_nothing(tmp_path_factory, data):
    """`diff --html`: a planted opcode or layout change shows in the 'changed' table on the
    row of the instruction it was planted in (A and B cells name it with its dump line), the
    counts table has the opcode delta, and the page refers to nothing outside itself."""
    dump = data.draw(st.sampled_from(DUMPS))
    a = parsed(dump)
    keys = keyed(a, flatten(a))
    from converter.importer.taps import called_computations

    # A parameter renamed would leave its computation with a hole in its parameter numbers.
    candidates = sorted(k for k, i in keys.items() if not called_computations(i, a) and i.opcode != "parameter")
    key = data.draw(st.sampled_from(candidates))
    b = copy.deepcopy(a)
    name = keys[key].name
    target = next(c.by_name[name] for c in b.computations if name in c.by_name)
    old_opcode = target.opcode
    target.opcode = "planted-op"
    out = tmp_path_factory.mktemp("html")
    path_b = str(out / "b.hlo")
    from converter.hlo.printer import module_to_text

    with open(path_b, "w") as f:
        f.write(module_to_text(b))
    page = str(out / "d.html")
    from converter.tools.cli import main

    assert main(["diff", a.path, path_b, "--html", page]) == 3
    parser = _Tables()
    with open(page, encoding="utf-8") as f:
        parser.feed(f.read())
    assert parser.external == []
    from converter.hlo.parser import parse_hlo_file as reparse

    line_b = next(i.line for c in reparse(path_b).computations for i in c.instructions if i.name == name)
    rows = parser.tables["changed"][1:]
    hits = [r for r in rows if r[1].startswith(f"%{name} ") and r[2].startswith(f"%{name} ")]
    assert len(hits) == 1, rows
    assert f"{a.path}:{target.line}" in hits[0][1] and f"{path_b}:{line_b}" in hits[0][2]
    assert f"opcode {old_opcode} → planted-op" in hits[0][3]
    counts = {r[0]: r[1:] for r in parser.tables["opcodes"][1:]}
    assert counts["planted-op"][0] == "0" and counts["planted-op"][2] == "+1"


def test_html_output_path_is_checked_before_work(tmp_path):
    a = os.path.join(ROOT, "tests", "dumps", "cpu", "mlp_grad.hlo")
    proc = subprocess.run([sys.executable, "-m", "converter", "diff", a, a, "--html", str(tmp_path / "no" / "d.html")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 2 and "--html" in proc.stderr, proc.stderr
