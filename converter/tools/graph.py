"""`hlo-roundtrip view DUMP [--compare B | --nonfinite] [--memory BUFFER_ASSIGNMENT.txt]`: the converted module in Model
Explorer (the `graph` extra: ai-edge-model-explorer) with per-instruction data on its nodes.

Model Explorer's MLIR adapter (ai_edge_model_explorer_adapter.ConvertMlirToJson, what its
`builtin_mlir` adapter runs on a .mlir file) numbers the ops of @main "0", "1", ... in
order and puts each in the namespace of its location's first name, which the importer
sets to the HLO instruction's name (fused ones included: fusions are inlined).  Node
data (model_explorer.node_data_builder) is keyed by node id, so the data of instruction
NAME goes to every node the adapter put in namespace NAME: the ops converted from it.
The ids are read from the adapter's own graph of the same file, never guessed.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from converter.common.errors import UsageError

MODEL_EXPLORER_HINT = "install the `graph` extra: pip install 'hlo-roundtrip[graph]' (ai-edge-model-explorer)"


def adapter_graphs(mlir_path: str) -> list[dict]:
    """The graphs Model Explorer's MLIR adapter builds from a .mlir file."""
    import json

    try:
        import ai_edge_model_explorer_adapter as adapter
    except ImportError:
        raise UsageError(f"view: Model Explorer is not installed: {MODEL_EXPLORER_HINT}") from None
    collections = json.loads(adapter.ConvertMlirToJson(adapter.VisualizeConfig(), mlir_path))
    return [g for c in collections for g in c.get("subgraphs", [])]


def node_ids(graphs: list[dict], entry_parameters: list[str] | None = None) -> dict[str, list[tuple[str, str]]]:
    """Per HLO instruction name, the (graph id, node id) of the nodes converted from it.

    The adapter draws @main's arguments as nodes `input_N` of namespace `Inputs`, without
    their names; the converter keeps the entry's parameters in order as @main's arguments,
    so `entry_parameters` (the entry's parameter names by parameter number) name them, when
    the graph has exactly that many (a signature the converter changed is left unnamed)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for graph in graphs:
        inputs = {}
        for node in graph.get("nodes", []):
            namespace = node.get("namespace", "")
            name = namespace.rsplit("/", 1)[-1]
            if namespace == "Inputs":
                inputs[node.get("label", "")] = node["id"]
            elif name and name not in ("Inputs", "Outputs"):
                out.setdefault(name, []).append((graph["id"], node["id"]))
        if graph.get("id") == "main" and entry_parameters is not None and \
                sorted(inputs) == sorted(f"input_{n}" for n in range(len(entry_parameters))):
            for n, parameter in enumerate(entry_parameters):
                out.setdefault(parameter, []).append((graph["id"], inputs[f"input_{n}"]))
    return out


def entry_parameter_names(hlo) -> list[str]:
    """The entry computation's parameters' names, by parameter number."""
    params = [i for i in hlo.entry.instructions if i.opcode == "parameter"] if hlo.entry is not None else []
    return [i.name for i in sorted(params, key=lambda i: i.parameter_number)]


@dataclass
class Overlay:
    """One data set: a value per HLO instruction, and the instructions to mark."""

    name: str
    values: dict[str, float]
    marked: list[str] = field(default_factory=list)


def graph_name(hlo, name: str) -> str:
    """The instruction whose converted ops carry `name`'s value in the graph: a fusion's or
    call's is its computation's root (fusions and calls are inlined), recursively."""
    from converter.importer.taps import called_computations

    where = {i.name: i for c in hlo.computations for i in c.instructions}
    instr = where.get(name)
    while instr is not None and instr.opcode in ("fusion", "call"):
        called = [c for key, c in called_computations(instr, hlo) if key in ("calls", "to_apply")]
        if not called:
            break
        instr = hlo.by_name[called[0]].root
    return instr.name if instr is not None else name


def on_graph(overlay: Overlay, hlo) -> Overlay:
    """The overlay keyed by the instructions the graph shows (see graph_name); where several
    map to one (a fusion and its root) the fusion's value, as compare and taps see it, wins."""
    values: dict[str, float] = {}
    for name, value in overlay.values.items():
        target = graph_name(hlo, name)
        if target == name and target in values:
            continue
        values[target] = value
    return Overlay(overlay.name, values, [graph_name(hlo, n) for n in overlay.marked])


def node_data(overlay: Overlay, ids: dict[str, list[tuple[str, str]]]):
    """Model Explorer node data (model_explorer.node_data_builder.ModelNodeData): values by
    node id on a white→red gradient, the marked instructions' nodes red whatever their value."""
    from model_explorer import node_data_builder as ndb

    per_graph: dict[str, dict] = {}
    for instr, value in overlay.values.items():
        for graph_id, node_id in ids.get(instr, []):
            marked = instr in overlay.marked
            per_graph.setdefault(graph_id, {})[node_id] = ndb.NodeDataResult(
                value=value, bgColor="#d32f2f" if marked else None, textColor="white" if marked else None)
    gradient = [ndb.GradientItem(stop=0, bgColor="#ffffff"), ndb.GradientItem(stop=1, bgColor="#ff8a65")]
    return ndb.ModelNodeData(graphsData={g: ndb.GraphNodeData(results=r, name=overlay.name, gradient=gradient)
                                         for g, r in per_graph.items()})


def nonfinite_overlay(path: str, hlo, seed: int, inputs_path: str | None, program_loader) -> Overlay:
    """NaN/Inf count of every instruction's value (loop bodies: the last iteration), from
    one run with every instruction tapped; the first instruction holding some whose
    operands hold none is marked (`run --find-nonfinite` names it with its iteration)."""
    import numpy as np

    from converter.tools.bisect import tapped_run

    values, _, _ = tapped_run(path, hlo, None, seed, inputs_path, program_loader)
    counts: dict[str, float] = {}
    for name, leaves in values.items():
        n = 0
        for leaf in leaves:
            a = np.asarray(leaf)
            if a.dtype.kind in "fc" or a.dtype.name.startswith(("bfloat", "float")):
                a = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
                n += int(a.size - np.isfinite(a).sum())
        counts[name] = float(n)
    from converter.tools.compare import flatten

    flat = flatten(hlo)
    marked = []
    for instr in flat.order:  # dependency order, fused instructions included
        operands = flat.operands.get(instr.name, instr.operands)
        if counts.get(instr.name, 0) > 0 and instr.opcode not in ("parameter", "constant") and not any(
                counts.get(o.split("#")[0].lstrip("%"), 0) > 0 for o in operands):
            marked.append(instr.name)
            break
    return Overlay("NaN/Inf elements", counts, marked)


def compare_overlay(report) -> Overlay:
    """compare's largest relative error of every matched instruction of A; the first
    divergence marked."""
    import numpy as np

    values = {p.a: float(p.diff.max_rel) if np.isfinite(p.diff.max_rel) else 1e30 for p in report.pairs}
    return Overlay(f"max relative error vs {os.path.basename(report.path_b)}", values,
                   [p.a for p in report.pairs if p.first])


def memory_overlay(buffer_assignment: str, hlo) -> tuple[Overlay, list[str]]:
    """Bytes each instruction holds live at the module's memory peak, from XLA's buffer
    assignment of the dump (`memory` reads the same file): the sizes of the values it
    defines (tuple indices summed) that are live at the peak of the schedule, as
    converter.tools.memory recomputes them from the live ranges.  Also the lines saying
    which named instructions the dump does not have (another module's file)."""
    from converter.tools.filekind import BUFFER_ASSIGNMENT, HLO, check_kind
    from converter.tools.memory import load_buffer_assignment, summarize

    check_kind(buffer_assignment, "view --memory", (BUFFER_ASSIGNMENT,),
               {HLO: "; the dump itself is view's first argument"})
    dump = load_buffer_assignment(buffer_assignment)
    shapes = {i.name: i.shape for c in hlo.computations for i in c.instructions}
    summary = summarize(dump, shapes)
    if summary.peak_time is None:
        raise UsageError(f"view: {buffer_assignment} has no live ranges (XLA's HloLiveRange section, or the "
                         "-live-range file beside it), so it says nothing of the peak")
    values: dict[str, float] = {}
    for buffer in summary.live_at_peak:
        values[buffer.key[0]] = values.get(buffer.key[0], 0.0) + float(buffer.bytes)
    strangers = sorted(n for n in values if n not in shapes)
    warnings = [f"{buffer_assignment} names {', '.join(strangers[:3])}{' ...' if len(strangers) > 3 else ''}, "
                f"which {hlo.path} does not have: is it the buffer "
                "assignment of this module?"] if strangers else []
    return Overlay(f"bytes live at the memory peak (position {summary.peak_time})", values), warnings


def add_view_parser(sub) -> None:
    p = sub.add_parser("view", help="open the converted module in Model Explorer with compare's errors or NaN/Inf "
                                    "counts on its nodes (the `graph` extra)")
    p.add_argument("dump", help="HLO text dump")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--compare", metavar="B", help="overlay compare DUMP B: each matched instruction's largest "
                                                  "relative error, the first divergence in red")
    g.add_argument("--nonfinite", action="store_true",
                   help="overlay each instruction's NaN/Inf count, the first origin in red")
    p.add_argument("--memory", metavar="BUFFER_ASSIGNMENT.txt",
                   help="also overlay the bytes each instruction holds live at the memory peak, from XLA's buffer "
                        "assignment of DUMP (written to DUMP.memory.nodedata.json)")
    p.add_argument("--inputs", metavar="IN.npz", help="inputs keyed arg0..argN (default: random from --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", metavar="DIR", help="where to write DUMP.mlir and the node data (default: a folder "
                                                    "beside nothing: a temporary one)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--no-browser", action="store_true", help="print the URL instead of opening a browser")
    p.add_argument("--no-server", action="store_true", help="write the files and exit")


def cmd_view(args) -> int:
    import tempfile

    from converter.common.files import write_atomic
    from converter.hlo.parser import parse_hlo
    from converter.hlo.proto import read_hlo_text
    from converter.mlir.serialize import module_text
    from converter.runtime.convert import convert_module
    from converter.tools.options import convert_options_from_args

    try:
        import model_explorer
    except ImportError:
        raise UsageError(f"view: Model Explorer is not installed: {MODEL_EXPLORER_HINT}") from None
    out_dir = args.out_dir or tempfile.mkdtemp(prefix="hlo-roundtrip-view-")
    os.makedirs(out_dir, exist_ok=True)
    hlo = parse_hlo(read_hlo_text(args.dump), args.dump, allow_unknown_attributes=args.allow_unknown_attributes)
    # Before converting: a wrong file is refused at once.
    memory = memory_overlay(args.memory, hlo) if args.memory else None
    base = os.path.splitext(os.path.basename(args.dump))[0]
    mlir_path = os.path.join(out_dir, base + ".mlir")
    module = convert_module(hlo, convert_options_from_args(args))
    write_atomic(mlir_path, module_text(module))
    overlay = None
    if args.compare:
        from converter.tools.compare import compare_dumps

        overlay = on_graph(compare_overlay(compare_dumps(args.dump, args.compare, args.inputs, args.seed,
                                                         options=convert_options_from_args(args))), hlo)
    elif args.nonfinite:
        from converter.tools.extract_command import tapped_program_loader

        overlay = on_graph(nonfinite_overlay(args.dump, hlo, args.seed, args.inputs, tapped_program_loader(args)),
                           hlo)
    overlays = [(base + ".nodedata.json", overlay)] if overlay is not None else []
    if memory is not None:
        memory, warnings = memory
        for line in warnings:
            print(f"warning: {line}", file=sys.stderr)
        overlays.append((base + ".memory.nodedata.json", on_graph(memory, hlo)))
    config = model_explorer.config().add_model_from_path(mlir_path)
    print(f"wrote {mlir_path}")
    ids = node_ids(adapter_graphs(mlir_path), entry_parameter_names(hlo)) if overlays else {}
    for file_name, shown in overlays:
        data_path = os.path.join(out_dir, file_name)
        node_data(shown, ids).save_to_file(data_path)
        config.add_node_data_from_path(data_path)
        print(f"wrote {data_path} ({shown.name}: {sum(1 for n in shown.values if n in ids)} instruction(s) on "
              "the graph)")
        for name in shown.marked:
            where = ", ".join(f"node {n} of {g}" for g, n in ids.get(name, [])) or "no node (not in the graph)"
            print(f"marked: %{name}: {where}")
        off = sorted(n for n in shown.values if n not in ids)
        if off and not shown.marked:
            print(f"  not on the graph (Model Explorer names no node after them: ops inside loop and conditional "
                  f"bodies, parameters of called computations): {', '.join(off[:6])}"
                  f"{' ...' if len(off) > 6 else ''}")
    if args.no_server:
        return 0
    print(f"starting Model Explorer on localhost:{args.port}: open the URL it prints (with the module and the "
          "data); Ctrl-C stops it", file=sys.stderr)
    model_explorer.visualize_from_config(config, port=args.port, no_open_in_browser=args.no_browser)
    return 0
