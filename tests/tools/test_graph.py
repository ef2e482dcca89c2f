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


def test_bytes_at_the_memory_peak_land_on_the_instructions_xla_says_hold_them(tmp_path):
    """libtpu's buffer assignment of the catalog's spmd_mlp_train_step (no loops: every
    value live at the peak has a node): each node's value is what XLA's file states for its
    instruction, and shapes x element sizes of the dump say the same."""
    dump = os.path.join(MEMORY, "tpu_spmd_mlp_train_step.hlo")
    out = tmp_path / "view"
    assert main(["view", dump, "--memory", os.path.join(MEMORY, "tpu_spmd_mlp_train_step-buffer-assignment.txt"),
                 "--out-dir", str(out), "--no-server"]) == 0
    stated = stated_peak(open(os.path.join(MEMORY, "tpu_spmd_mlp_train_step-live-range.txt")).read())
    assert stated == {"all-reduce": 512, "fusion": 512, "fusion.4": 512, "param.1": 512, "param.2": 512,
                      "convolution_tanh_fusion": 256, "param": 128}
    text = open(dump, encoding="utf-8").read()
    # The same from the dump's shapes: every value live at the peak is an f32 array (tiling
    # padding is not counted: ShapeUtil::ByteSizeOf), 4 bytes an element.
    for name, nbytes in stated.items():
        dims = re.search(rf"^\s*(?:ROOT )?%{re.escape(name)} = f32\[([\d,]*)\]", text, re.M).group(1)
        assert 4 * math.prod(int(d) for d in dims.split(",")) == nbytes, name
    data = load_node_data(out / "tpu_spmd_mlp_train_step.memory.nodedata.json")
    graphs = adapter_graphs(str(out / "tpu_spmd_mlp_train_step.mlir"))
    nodes = {(g["id"], n["id"]): n for g in graphs for n in g["nodes"]}
    # Where each instruction's bytes must land, known from the dump and the module, not from
    # the tool: a parameter on the adapter's input node for its parameter number; a fusion
    # on the op converted from its fused computation's root (its location's name); anything
    # else on the op converted from it.
    mlir = open(out / "tpu_spmd_mlp_train_step.mlir", encoding="utf-8").read()
    landed = {(gid, nid): r.value for gid, gd in data.graphsData.items() for nid, r in gd.results.items()}
    expected: dict[tuple[str, str], float] = {}
    for name, nbytes in stated.items():
        m = re.search(rf"^\s*(?:ROOT )?%{re.escape(name)} = \S+ ([\w-]+)\((.*)$", text, re.M)
        assert m is not None, name
        if m.group(1) == "parameter":
            number = int(re.match(r"(\d+)\)", m.group(2)).group(1))
            # @main's %argN carries the parameter's name in its location.
            loc = re.search(rf"%arg{number}: [^\n]*? loc\(fused\[(#loc\d+)", mlir).group(1)
            assert re.search(rf"^{loc} = loc\(\"{re.escape(name)}\"", mlir, re.M), (name, loc)
            expected[("main", f"arg{number}")] = nbytes
            continue
        target = name
        if m.group(1) == "fusion":
            called = re.search(r"calls=%([\w.-]+)", m.group(2)).group(1)
            body = text.split(f"\n%{called} (", 1)[1].split("\n}\n", 1)[0]
            target = re.search(r"ROOT %([\w.-]+) =", body).group(1)
        keys = [k for k, n in nodes.items() if n["namespace"] == target]
        assert keys, (name, target)
        expected.update({k: nbytes for k in keys})
    # Exactly XLA's live set is on the graph, each instruction's bytes on its nodes.
    assert landed == expected
    assert len(expected) >= len(stated)
