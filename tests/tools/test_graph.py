"""`view DUMP --compare B | --nonfinite --no-server`: the node data it writes loads into Model
Explorer's own classes (model_explorer.node_data_builder) and lands on the nodes Model
Explorer's own MLIR adapter builds for the ops converted from the instruction it belongs to.

Where the data should land is known independently of the tool: B is A with one constant
scaled by 1.25 (so the multiply that reads it is the first divergence, relative error
0.25), or A with a planted sqrt of a negative number (the first NaN)."""

from __future__ import annotations

import json
import math
import os
import re

import pytest

pytest.importorskip("model_explorer", reason="Model Explorer is the `graph` extra (pip install '.[graph]')")

from model_explorer import node_data_builder as ndb  # noqa: E402

from converter.tools.cli import main  # noqa: E402
from converter.tools.graph import adapter_graphs  # noqa: E402
from tests.tools.test_bisect import plant  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "tests", "dumps", "cpu", "mlp_grad.hlo")


def load_node_data(path) -> ndb.ModelNodeData:
    """The file, through Model Explorer's own dataclasses."""
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    graphs = {}
    for graph_id, data in raw.items():
        results = {k: ndb.NodeDataResult(**v) for k, v in data.pop("results").items()}
        gradient = [ndb.GradientItem(**g) for g in data.pop("gradient", [])]
        graphs[graph_id] = ndb.GraphNodeData(results=results, gradient=gradient, **data)
    return ndb.ModelNodeData(graphsData=graphs)


def marked_nodes(data: ndb.ModelNodeData, graphs: list[dict]) -> list[dict]:
    nodes = {(g["id"], n["id"]): n for g in graphs for n in g["nodes"]}
    return [nodes[(gid, nid)] for gid, gd in data.graphsData.items() for nid, r in gd.results.items()
            if r.bgColor is not None]


def test_the_first_divergence_lands_on_the_multiply_that_reads_the_changed_constant(tmp_path):
    text = open(MLP, encoding="utf-8").read()
    assert "%constant.1 = f32[] constant(2)\n" in text  # mul.2 = param * broadcast(constant.1), in a fusion
    b = tmp_path / "b.hlo"
    b.write_text(text.replace("%constant.1 = f32[] constant(2)\n", "%constant.1 = f32[] constant(2.5)\n"))
    out = tmp_path / "view"
    assert main(["view", MLP, "--compare", str(b), "--out-dir", str(out), "--no-server"]) == 0
    data = load_node_data(out / "mlp_grad.nodedata.json")
    graphs = adapter_graphs(str(out / "mlp_grad.mlir"))
    (node,) = marked_nodes(data, graphs)
    assert node["namespace"] == "mul.2" and node["label"] == "stablehlo.multiply"
    value = next(r.value for gd in data.graphsData.values() for r in gd.results.values() if r.bgColor)
    assert value == pytest.approx(0.25, rel=1e-5)
    # Every keyed node is a node of the adapter's graph.
    ids = {(g["id"], n["id"]) for g in graphs for n in g["nodes"]}
    assert all((gid, nid) in ids for gid, gd in data.graphsData.items() for nid in gd.results)


def test_the_first_nan_lands_on_the_planted_sqrt(tmp_path):
    dump = tmp_path / "planted.hlo"
    dump.write_text(plant(open(MLP, encoding="utf-8").read(), "mul.0"))
    out = tmp_path / "view"
    assert main(["view", str(dump), "--nonfinite", "--out-dir", str(out), "--no-server"]) == 0
    data = load_node_data(out / "planted.nodedata.json")
    (node,) = marked_nodes(data, adapter_graphs(str(out / "planted.mlir")))
    assert node["namespace"] == "mul.0" and node["label"] == "stablehlo.sqrt"


MEMORY = os.path.join(ROOT, "tests", "tools", "memory", "data")


def stated_peak(live_range_text: str) -> dict[str, int]:
    """XLA's own statement of the live set at the peak (`Live ranges at T (peak):` lines
    `name{index}: N bytes`), summed per instruction: read here with a regex, not with the
    tool's parser, and not recomputed."""
    block = live_range_text.split("(peak):\n", 1)[1]
    out: dict[str, int] = {}
    for m in re.finditer(r"^ {4}([^\s{]+)\{[\d,]*\}: (\d+) bytes", block, re.M):
        out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def expected_landing(text: str, mlir: str, graphs: list[dict], stated: dict[str, int]) -> dict:
    """Where each instruction's bytes must land, known from the dump and the converted
    module's text, not from the tool: an entry parameter on the adapter's input node for its
    parameter number (@main's %argN carries its name in its location); a fusion on the ops
    converted from its fused computation's root; anything else on the ops converted from it.
    Also checks XLA's bytes against the dump's shapes x 4 (all f32 here; ByteSizeOf counts no
    tiling padding)."""
    nodes = {(g["id"], n["id"]): n for g in graphs for n in g["nodes"]}
    expected: dict[tuple[str, str], float] = {}
    for name, nbytes in stated.items():
        m = re.search(rf"^\s*(?:ROOT )?%{re.escape(name)} = f32\[([\d,]*)\]\S* ([\w-]+)\((.*)$", text, re.M)
        assert m is not None, name
        assert 4 * math.prod(int(d) for d in m.group(1).split(",") if d) == nbytes, name
        if m.group(2) == "parameter":
            number = int(re.match(r"(\d+)\)", m.group(3)).group(1))
            loc = re.search(rf"%arg{number}: [^\n]*? loc\(fused\[(#loc\d+)", mlir).group(1)
            assert re.search(rf"^{loc} = loc\(\"{re.escape(name)}\"", mlir, re.M), (name, loc)
            expected[("main", f"arg{number}")] = nbytes
            continue
        target = name
        if m.group(2) == "fusion":
            called = re.search(r"calls=%([\w.-]+)", m.group(3)).group(1)
            body = text.split(f"\n%{called} (", 1)[1].split("\n}\n", 1)[0]
            target = re.search(r"ROOT %([\w.-]+) =", body).group(1)
        keys = [k for k, n in nodes.items() if n["namespace"] == target]
        assert keys, (name, target)
        expected.update({k: nbytes for k in keys})
    return expected


def check_memory_overlay(dump: str, buffer_assignment: str, live_range: str, out) -> dict[str, int]:
    assert main(["view", dump, "--memory", buffer_assignment, "--out-dir", str(out), "--no-server"]) == 0
    stated = stated_peak(open(live_range, encoding="utf-8").read())
    base = os.path.splitext(os.path.basename(dump))[0]
    data = load_node_data(out / f"{base}.memory.nodedata.json")
    mlir = open(out / f"{base}.mlir", encoding="utf-8").read()
    landed = {(gid, nid): r.value for gid, gd in data.graphsData.items() for nid, r in gd.results.items()}
    expected = expected_landing(open(dump, encoding="utf-8").read(), mlir, adapter_graphs(str(out / f"{base}.mlir")),
                                stated)
    # Exactly XLA's live set is on the graph, each instruction's bytes on its nodes.
    assert landed == expected
    return stated


def test_bytes_at_the_memory_peak_on_a_tpu_dump(tmp_path):
    """libtpu's buffer assignment of the catalog's spmd_mlp_train_step (no loops: every
    value live at the peak has a node)."""
    stated = check_memory_overlay(os.path.join(MEMORY, "tpu_spmd_mlp_train_step.hlo"),
                                  os.path.join(MEMORY, "tpu_spmd_mlp_train_step-buffer-assignment.txt"),
                                  os.path.join(MEMORY, "tpu_spmd_mlp_train_step-live-range.txt"), tmp_path / "view")
    assert stated == {"all-reduce": 512, "fusion": 512, "fusion.4": 512, "param.1": 512, "param.2": 512,
                      "convolution_tanh_fusion": 256, "param": 128}


def test_bytes_at_the_memory_peak_of_a_module_the_installed_xla_compiles(tmp_path):
    """XLA's buffer assignment of a CPU module compiled now by the installed jaxlib (the mlp
    of tests/tools/memory/xla_dumps.py), with the optimized HLO it dumped beside it."""
    from tests.tools.memory.xla_dumps import buffer_assignment_path, generate

    generate(tmp_path)
    ba = buffer_assignment_path(tmp_path / "xla", "mlp")
    stem = str(ba)[: -len("-buffer-assignment.txt")]
    live_range = stem + "-live-range.txt" if os.path.exists(stem + "-live-range.txt") else str(ba)
    stated = check_memory_overlay(stem + ".txt", str(ba), live_range, tmp_path / "view")
    assert len(stated) >= 3  # x, w and the fusions computing from them at least


def test_bytes_in_loop_bodies_are_listed_not_misplaced(tmp_path, capsys):
    """Model Explorer names no node inside a while body after its instruction: the loop's
    values live at the peak are listed as not on the graph, and only the entry parameters,
    which XLA's file says hold f32[32,64] and f32[64,64], are coloured."""
    dump = os.path.join(MEMORY, "cpu_loop.hlo")
    stated = stated_peak(open(os.path.join(MEMORY, "cpu_loop-live-range.txt"), encoding="utf-8").read())
    assert (stated["x.1"], stated["w.1"]) == (32 * 64 * 4, 64 * 64 * 4)
    out = tmp_path / "view"
    assert main(["view", dump, "--memory", os.path.join(MEMORY, "cpu_loop-buffer-assignment.txt"),
                 "--out-dir", str(out), "--no-server"]) == 0
    data = load_node_data(out / "cpu_loop.memory.nodedata.json")
    landed = {(gid, nid): r.value for gid, gd in data.graphsData.items() for nid, r in gd.results.items()}
    assert landed == {("main", "arg0"): stated["x.1"], ("main", "arg1"): stated["w.1"]}
    listed = capsys.readouterr().out.split("not on the graph", 1)[1]
    # The fusions' roots (ynn_fusion -> dot_general.5, broadcast_add_fusion -> add.28) and the rest.
    for name in ("dot_general.5", "add.28", "copy.3"):
        assert name in listed


def test_memory_refuses_a_file_that_is_not_a_buffer_assignment(tmp_path, capsys):
    dump = os.path.join(MEMORY, "cpu_loop.hlo")
    assert main(["view", dump, "--memory", dump, "--out-dir", str(tmp_path), "--no-server"]) == 1
    err = capsys.readouterr().err
    assert "this is an HLO text dump; `view --memory` reads XLA's buffer assignment" in err
    assert "Traceback" not in err and not os.listdir(tmp_path)  # refused before converting
