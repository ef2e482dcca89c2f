"""`hlo-roundtrip memory`: buffer-assignment dumps read, summarized and checked against
independent figures.

Oracles: the figures XLA itself prints in the file (`Total bytes used`, the live set at
the peak), which the tool recomputes from the allocations and live ranges rather than
copying; and jaxlib's memory analysis of the very executable whose buffer assignment XLA
dumped (argument, output, alias and temp bytes must be equal, byte for byte: both are
sums of the same allocations).

`data/cpu_loop*` is XLA's split dump (jax 0.10.2, CPU) of a fori_loop program from
`tests/tools/memory/xla_dumps.py`; `test_fresh_cpu_dumps` regenerates such dumps with the
installed jaxlib, so a format change in XLA shows up here.  `data/tpu_spmd_mlp_train_step*`
is libtpu's (jax[tpu] 0.10.2, deviceless v5e 2x2) for the catalog's spmd_mlp_train_step:
memory colors, tiled layouts, async copies.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from converter.tools.cli import main
from converter.tools.memory import BufferAssignmentParseError, load_buffer_assignment, parse_buffer_assignment, summarize
from converter.tools.memory.analysis import byte_size_of
from converter.hlo.parser import parse_shape_prefix
from tests.tools.memory.xla_dumps import buffer_assignment_path, generate

ROOT = pathlib.Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "samples" / "tpu_spmd_mlp_async_collective_fusion.buffer_assignment.txt"
SAMPLE_HLO = ROOT / "samples" / "tpu_spmd_mlp_async_collective_fusion.hlo"
DATA = pathlib.Path(__file__).parent / "data"
CPU_LOOP = DATA / "cpu_loop-buffer-assignment.txt"
# jaxlib's memory_analysis() of the executable XLA dumped as data/cpu_loop*.
CPU_LOOP_ANALYSIS = {"argument_bytes": 24576, "output_bytes": 8212, "alias_bytes": 0, "temp_bytes": 8352}


def _stated(text: str, pattern: str) -> int:
    m = re.search(pattern, text, re.M)
    assert m is not None, pattern
    return int(m.group(1))


# ------------------------------------------------------------------------ the TPU sample
def test_sample_totals_and_peak_equal_the_files_own_figures():
    text = SAMPLE.read_text()
    s = summarize(load_buffer_assignment(str(SAMPLE)))
    allocation_sizes = [int(x) for x in re.findall(r"^allocation \d+: size (\d+)", text, re.M)]
    assert s.dump.total_bytes == sum(allocation_sizes) == _stated(text, r"^Total bytes used: (\d+)")
    assert len(s.dump.allocations) == len(allocation_sizes)

    # The peak position XLA prints, found again from the live ranges by XLA's rule.
    assert s.recomputed_peak_time == s.peak_time == _stated(text, r"^  Live ranges at (\d+) \(peak\):")
    stated_peak_bytes = sum(int(b) for b in re.findall(r"^    \S+: (\d+) bytes$", text, re.M))
    assert s.xla_peak_bytes == s.recomputed_xla_peak_bytes == stated_peak_bytes
    assert s.mismatches == [] and s.unsized == []

    # Every allocation counted under each of its kinds; colors partition the total.
    assert sum(t.bytes for t in s.by_color.values()) == s.dump.total_bytes
    params = [a for a in s.dump.allocations if a.parameter is not None]
    assert s.by_kind["parameter"].bytes == s.argument_bytes == sum(a.size for a in params)
    assert sorted(a.parameter for a in params) == [0, 1, 2, 3]
    assert s.by_kind["preallocated-temp"].count == len(re.findall(r"preallocated-temp:$", text, re.M))


def test_sample_live_set_by_buffer_size():
    """The live set at the peak, sized by each value's own shape: the two f32[32,512,14336]
    fusion outputs dominate (XLA's old listing counts them as 136-byte tuple tables)."""
    s = summarize(load_buffer_assignment(str(SAMPLE)))
    top = s.live_at_peak[0]
    assert top.bytes == 32 * 512 * 14336 * 4
    assert {b.key for b in s.live_at_peak[:2]} == {("fusion.10", (0,)), ("fusion.17", (0,))}
    assert top.assigned is not None and top.assigned[0].index == 6
    assert top.definition is not None and top.definition.opcode == "fusion"
    # By hand from the file: at 78 live are fusion.10{0} and fusion.17{0} (f32[32,512,14336]),
    # fusion and param (f32[32,512,4096]), async-collective-done.1 (bf16[4096,14336]) and
    # param.1, param.2, param.3 (f32[3584,4096] and [4096,3584]).
    by_hand = 2 * 939_524_096 + 2 * 268_435_456 + 117_440_512 + 3 * 58_720_256
    assert s.live_bytes_at_peak == s.curve[s.peak_time] == by_hand == 2_709_520_384


def test_sample_cli_report(capsys):
    assert main(["memory", str(SAMPLE), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "total bytes used: 2,885,767,252" in out and "as the file states" in out
    # Both maxima, each named: XLA's peak (78) and the plotted curve's maximum (59, fusion.17).
    assert "XLA's peak: schedule position 78 of 80 (fusion)" in out
    assert ("maximum of the plotted curve (live bytes by buffer size): 2,852,127,104 (2.66 GiB) at position 59 "
            "(fusion.17), not XLA's peak") in out
    assert "830,472,464" in out and "recomputed from the live ranges: the same" in out
    assert "fusion.10{0}" in out and "preallocated-temp" in out and "color" in out


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_renders(tmp_path, suffix, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"live{suffix}"
    assert main(["memory", str(SAMPLE), "--plot", str(out)]) == 0
    data = out.read_bytes()
    assert len(data) > 5000
    if suffix == ".png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert b"<svg" in data[:2000] and b"at position 78" in data


def test_plot_rejects_unknown_extension(tmp_path, capsys):
    assert main(["memory", str(SAMPLE), "--plot", str(tmp_path / "live.gif")]) == 2  # a bad command line
    assert ".png, .svg or .pdf" in capsys.readouterr().err


def test_sample_beside_recompiled_module(capsys):
    """--dump: the sample HLO converted and compiled for 4 CPU devices (compile only: the
    full-size shapes are never allocated); the arguments are the same per-device shards."""
    assert main(["memory", str(SAMPLE), "--dump", str(SAMPLE_HLO), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "the original buffer assignment and the module recompiled for CPU" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("arguments"))
    assert row.split()[1] == row.split()[4] == "444,596,224"  # bytes, then human units


# ------------------------------------------------------------------ XLA's CPU dumps
@pytest.mark.parametrize("path", [CPU_LOOP, DATA / "cpu_loop_jax012-buffer-assignment.txt"], ids=["jax0.10", "jax0.12"])
def test_committed_cpu_dump_matches_jaxlib_memory_analysis(path):
    """The same program dumped by jaxlib 0.10.2 and by 0.12.0.1 (whose allocation lines carry
    `page N`); both versions' memory analysis of it gave the same figures."""
    s = summarize(load_buffer_assignment(str(path)))
    assert len(s.dump.paths) == 3  # the -values and -live-range siblings were read too
    got = {"argument_bytes": s.argument_bytes, "output_bytes": s.output_bytes,
           "alias_bytes": s.alias_bytes, "temp_bytes": s.temp_bytes}
    assert got == CPU_LOOP_ANALYSIS
    assert s.peak_time == s.recomputed_peak_time
    assert s.xla_peak_bytes == s.recomputed_xla_peak_bytes == s.dump.live_range.stated_stack_trace_bytes
    assert s.mismatches == [] and s.unsized == []


@pytest.mark.parametrize("name", ["values", "live-range"])
def test_any_split_file_finds_its_siblings(name):
    dump = load_buffer_assignment(str(DATA / f"cpu_loop-{'buffer-assignment-values' if name == 'values' else name}.txt"))
    assert len(dump.paths) == 3 and dump.allocations and dump.used_values and dump.live_range


def test_fresh_cpu_dumps_match_jaxlib_memory_analysis(tmp_path):
    """Programs with donation (aliased bytes), a while loop, sort and bf16, compiled now by
    the installed jaxlib: each buffer assignment's figures equal jaxlib's memory analysis
    of that executable, and the peak is found again."""
    analysis = generate(tmp_path)
    for program, expected in analysis.items():
        s = summarize(load_buffer_assignment(str(buffer_assignment_path(tmp_path / "xla", program))))
        got = {"argument_bytes": s.argument_bytes, "output_bytes": s.output_bytes,
               "alias_bytes": s.alias_bytes, "temp_bytes": s.temp_bytes}
        assert got == expected, program
        assert s.mismatches == [] and s.unsized == [], program
        assert s.peak_time == s.recomputed_peak_time, program
    assert analysis["donated"]["alias_bytes"] > 0 and analysis["loop"]["temp_bytes"] > 0


def test_cpu_dump_beside_recompiled_module(capsys):
    """A CPU dump converted and recompiled on CPU: arguments and outputs are the same arrays."""
    assert main(["memory", str(CPU_LOOP), "--dump", str(DATA / "cpu_loop.hlo")]) == 0
    out = capsys.readouterr().out
    for label in ("arguments", "outputs"):
        row = next(line for line in out.splitlines() if line.strip().startswith(label)).split()
        assert row[1] == row[4], row  # bytes, then human units


def test_page_clause_of_newer_xla():
    """jaxlib 0.12 prints `page N` after the color on every allocation line.  data/tpu_step_jax012*:
    jax[tpu] 0.12.0.1 with --xla_dump_to, compiled devicelessly for v5e 2x2: one SGD step of
    mean(tanh(x @ w)**2), w f32[256,256] replicated, x f32[512,256] split 4 ways by rows."""
    dump = load_buffer_assignment(str(DATA / "tpu_step_jax012-buffer-assignment.txt"))
    text = (DATA / "tpu_step_jax012-buffer-assignment.txt").read_text()
    assert [a.page for a in dump.allocations] == [int(p) for p in re.findall(r"^allocation \d+: .*?, page (\d+)", text, re.M)]
    assert {a.color for a in dump.allocations} == {0, 1, 2}
    assert load_buffer_assignment(str(CPU_LOOP)).allocations[0].page is None


@pytest.mark.parametrize("name", ["tpu_spmd_mlp_train_step", "tpu_step_jax012"])
def test_tpu_dump_of_todays_libtpu(name):
    s = summarize(load_buffer_assignment(str(DATA / f"{name}-buffer-assignment.txt")))
    assert set(s.by_color) == {0, 1, 2}
    assert s.peak_time == s.recomputed_peak_time == s.dump.live_range.stated_peak_time
    assert s.xla_peak_bytes == s.recomputed_xla_peak_bytes == s.dump.live_range.stated_stack_trace_bytes
    assert s.mismatches == [] and s.unsized == []
    # Tiled TPU layouts pad: the buffers are larger than their logical bytes.
    padded = [(a, v) for a in s.dump.allocations for v in a.values if v.size > byte_size_of(v.shape)]
    assert padded


@pytest.mark.parametrize("name", ["tpu_spmd_mlp_train_step", "tpu_step_jax012"])
def test_tpu_dump_beside_recompiled_module(capsys, name):
    hlo = DATA / f"{name}.hlo"
    assert main(["memory", str(DATA / f"{name}-live-range.txt"), "--dump", str(hlo)]) == 0
    out = capsys.readouterr().out
    assert "memory per device" in out  # a 4-device SPMD module
    row = next(line for line in out.splitlines() if line.strip().startswith("arguments")).split()
    # The CPU holds the same per-device shards without TPU tile padding.
    assert 0 < int(row[4].replace(",", "")) <= int(row[1].replace(",", ""))


def test_dump_of_another_module_is_flagged(capsys):
    assert main(["memory", str(CPU_LOOP), "--dump", str(DATA / "tpu_spmd_mlp_train_step.hlo")]) == 0
    assert "is it the dump of the same module?" in capsys.readouterr().err


# ------------------------------------------------------------------------ sizes
@pytest.mark.parametrize("text,size", [
    ("f32[32,512,14336]{2,1,0:T(8,128)}", 32 * 512 * 14336 * 4),  # tiling padding is not counted
    ("bf16[3,5]{1,0}", 30),
    ("pred[7]", 7),
    ("s4[10]{0:E(4)}", 5),  # packed when the layout says so
    ("s4[10]", 10),
    ("(f32[4], s32[], (u8[2]))", 24),  # a tuple is its table of 8-byte pointers
    ("token[]", 0),
])
def test_byte_size_of_follows_xla(text, size):
    assert byte_size_of(parse_shape_prefix(text)[0]) == size


# ------------------------------------------------------------------------ bad input
def _mutations(text: str) -> dict[str, tuple[str, int]]:
    """Broken variants of the sample, and the line each error must point at."""
    lines = text.split("\n")
    total_line = next(i for i, l in enumerate(lines) if l.startswith("Total bytes used")) + 1
    used_line = next(i for i, l in enumerate(lines) if l == "Used values:") + 1
    live_line = next(i for i, l in enumerate(lines) if l.startswith("HloLiveRange")) + 1

    def cut(n_lines: int, chars: int = 0) -> str:
        return "\n".join(lines[:n_lines]) + ("\n" + lines[n_lines][:chars] if chars else "\n")

    def replace(line_no: int, new: str) -> str:
        return "\n".join(lines[: line_no - 1] + [new] + lines[line_no:])

    return {
        "cut inside an allocation line": (cut(8, 20), 9),
        "cut inside a value line": (cut(5, 30), 6),
        "cut before the total (allocations missing)": (cut(12) + "\n" + lines[total_line - 1] + "\n", 14),
        "cut inside the used values": (cut(used_line + 4), used_line + 4),  # at the end of the last line
        "cut inside the schedule": (cut(live_line + 10), live_line + 10),
        "cut before the peak": (cut(len(lines) - 12), len(lines) - 12),
        "unknown allocation attribute": (replace(2, "allocation 0: size 32, shiny, maybe-live-out:"), 2),
        "value outside its allocation": (replace(3, lines[2].replace("offset=0", "offset=8")), 3),
        "bad value shape": (replace(3, lines[2].replace("(f32[32,512,4096]", "(f33[32")), 3),
        "bad live range": (replace(live_line + 83, "    param.2{}:0-"), live_line + 83),
        "garbage line": (replace(total_line + 1, "hello"), total_line + 1),
    }


@pytest.mark.parametrize("case", list(_mutations(SAMPLE.read_text())))
def test_malformed_dump_is_a_located_error(case, tmp_path, capsys):
    text, line = _mutations(SAMPLE.read_text())[case]
    path = tmp_path / "ba.txt"
    path.write_text(text)
    with pytest.raises(BufferAssignmentParseError) as info:
        parse_buffer_assignment(text, str(path))
    assert info.value.line == line, info.value.format()
    assert main(["memory", str(path)]) == 1
    captured = capsys.readouterr()
    assert re.match(rf"{re.escape(str(path))}:{line}:\d+: error: expected ", captured.err), captured.err
    assert "Traceback" not in captured.err + captured.out


def test_empty_and_missing_files(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert main(["memory", str(empty)]) == 1
    assert f"{empty}:1:1: error: expected 'BufferAssignment:'" in capsys.readouterr().err
    assert main(["memory", str(tmp_path / "nope.txt")]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_memory_usage_report_is_not_a_buffer_assignment(tmp_path, capsys):
    report = tmp_path / "x-memory-usage-report.txt"
    report.write_text("Memory Space: default (color=0)\nTotal bytes: 132124 (129.0KiB)\n")
    assert main(["memory", str(report)]) == 1
    assert f"{report}:1:1: error: expected" in capsys.readouterr().err
