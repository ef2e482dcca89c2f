"""`view DUMP --compare B | --nonfinite --no-server`: the node data it writes loads into Model
Explorer's own classes (model_explorer.node_data_builder) and lands on the nodes Model
Explorer's own MLIR adapter builds for the ops converted from the instruction it belongs to.

Where the data should land is known independently of the tool: B is A with one constant
scaled by 1.25 (so the multiply that reads it is the first divergence, relative error
0.25), or A with a planted sqrt of a negative number (the first NaN)."""

from __future__ import annotations

import json
import os

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
