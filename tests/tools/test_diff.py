"""`diff A B`: a change planted in a copy of a committed dump (the generator knows what
it changed: the oracle) is reported on the op it was planted in, and nothing else is;
a dump against itself is the same structure (exit 0); two backends' dumps of one
program differ (exit 3)."""

from __future__ import annotations

import copy
import dataclasses
import os

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
