"""`hlo-roundtrip inspect`: what a dump holds, without converting it."""

from __future__ import annotations

import collections
from typing import Any

from converter.hlo.collectives import group_mode
from converter.hlo import attrs as hlo_attrs
from converter.hlo.ir import Module
from converter.hlo.printer import shape_to_text, sharding_to_text
from converter.common.textfmt import human_bytes, table

COLLECTIVE_OPCODES = {
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "collective-broadcast", "ragged-all-to-all", "all-reduce-start", "all-gather-start",
    "collective-permute-start", "send", "recv",
}

# How a computation is used, by the attribute that refers to it.
_USE = {
    "calls": "fusion", "to_apply": "to_apply", "condition": "while condition", "body": "while body",
    "true_computation": "branch", "false_computation": "branch", "branch_computations": "branch",
    "select": "select", "scatter": "scatter", "called_computations": "custom-call",
}


def collective_mode(opcode: str, attrs: dict[str, Any]) -> str:
    base = opcode.removesuffix("-start")
    try:
        return group_mode(base, "channel_id" in attrs, bool(attrs.get("use_global_device_ids")))
    except ValueError as e:
        return f"invalid ({e})"


def _groups_text(groups: hlo_attrs.ReplicaGroups | None, limit: int = 4) -> str:
    if groups is None or not groups.groups:
        return "{} (all)"
    shown = ",".join("{" + ",".join(map(str, g)) + "}" for g in groups.groups[:limit])
    more = f",…+{len(groups.groups) - limit}" if len(groups.groups) > limit else ""
    return "{" + shown + more + "}"


def summarize(module: Module) -> dict[str, Any]:
    entry = module.entry
    opcode_counts: collections.Counter[str] = collections.Counter()
    targets: dict[str, dict[str, Any]] = {}
    collectives: list[dict[str, Any]] = []
    kinds: dict[str, set[str]] = collections.defaultdict(set)
    kinds[entry.name].add("entry")
    triton_kernels: list[dict[str, Any]] = []
    for comp in module.computations:
        for instr in comp.instructions:
            opcode_counts[instr.opcode] += 1
            for key, use in _USE.items():
                ref = instr.attrs.get(key)
                if ref is None:
                    continue
                for name in ref if isinstance(ref, list) else [ref]:
                    if key == "calls":
                        label = (f"fusion ({instr.attrs.get('kind', '?')})" if instr.opcode == "fusion"
                                 else "async wrapped" if "start" in instr.opcode else instr.opcode)
                    elif key == "to_apply":
                        label = "called" if instr.opcode == "call" else f"to_apply of {instr.opcode}"
                    else:
                        label = use
                    kinds[name].add(label)
            if instr.opcode == "custom-call":
                target = instr.attrs.get("custom_call_target", "?")
                entry_t = targets.setdefault(target, {"count": 0, "first": f"{instr.line}:{instr.col}"})
                entry_t["count"] += 1
                if target == "__gpu$xla.gpu.triton" and isinstance(instr.attrs.get("backend_config"), hlo_attrs.BackendConfig):
                    triton_kernels.append(_triton_kernel(instr))
                elif target in ("triton_kernel_call_ffi", "triton_kernel_call") \
                        and isinstance(instr.attrs.get("backend_config"), hlo_attrs.BackendConfig):
                    triton_kernels.append(_jax_triton_kernel(instr))
            base = instr.opcode
            if base in COLLECTIVE_OPCODES or (base.endswith("-start") and base[:-6] in COLLECTIVE_OPCODES):
                collectives.append({
                    "name": instr.name, "opcode": instr.opcode, "computation": comp.name,
                    "line": instr.line, "mode": collective_mode(instr.opcode, instr.attrs),
                    "channel_id": instr.attrs.get("channel_id"),
                    "replica_groups": [list(g) for g in instr.attrs["replica_groups"].groups]
                    if "replica_groups" in instr.attrs else None,
                    "source_target_pairs": [list(p) for p in instr.attrs.get("source_target_pairs", [])] or None,
                    "groups_text": _groups_text(instr.attrs.get("replica_groups"))
                    if "source_target_pairs" not in instr.attrs
                    else str(instr.attrs["source_target_pairs"][:4]),
                    "shape": _short(shape_to_text(instr.shape, False)),
                })
    for target, info in targets.items():
        info["support"] = custom_call_support(target)
    params = []
    for p in entry.parameters:
        sh = p.attrs.get("sharding")
        params.append({"index": p.parameter_number, "name": p.name, "shape": shape_to_text(p.shape),
                       "bytes": p.shape.byte_size(),
                       "sharding": sharding_to_text(sh) if isinstance(sh, hlo_attrs.Sharding) else None})
    elided = [{"name": i.name, "computation": c.name, "shape": shape_to_text(i.shape, False),
               "bytes": i.shape.byte_size(), "line": i.line}
              for c in module.computations for i in c.instructions if i.opcode == "constant" and i.literal_elided]
    root = entry.root
    root_sharding = root.attrs.get("sharding")
    leaves = root.shape.leaves()
    results = [{"index": i, "shape": shape_to_text(s)} for i, s in enumerate(leaves)]
    if isinstance(root_sharding, hlo_attrs.Sharding):
        per_leaf = list(root_sharding.elements) if root_sharding.kind == "tuple" else [root_sharding] * len(leaves)
        for r, sh in zip(results, per_leaf):
            r["sharding"] = sharding_to_text(sh)
    by_kind: dict[str, list[str]] = collections.defaultdict(list)
    for comp in module.computations:
        labels = sorted(kinds.get(comp.name, {"unused"}))
        by_kind[", ".join(labels)].append(comp.name)
    return {
        "module": module.name,
        "path": module.path,
        "devices": module.num_devices,
        "replica_count": module.replica_count,
        "num_partitions": module.num_partitions,
        "is_scheduled": bool(module.attrs.get("is_scheduled", False)),
        "computations": len(module.computations),
        "instructions": sum(len(c.instructions) for c in module.computations),
        "parameters": params,
        "parameter_bytes": sum(p["bytes"] for p in params),
        "elided_constants": elided,
        "results": results,
        "opcodes": dict(opcode_counts.most_common()),
        "custom_call_targets": targets,
        "triton_kernels": triton_kernels,
        "collectives": collectives,
        "computations_by_kind": {k: len(v) for k, v in sorted(by_kind.items())},
        "warnings": list(module.warnings),
    }


def _triton_kernel(instr) -> dict[str, Any]:
    """A Pallas GPU (Triton) kernel's name, grid and ops (passes/triton/kernel.py)."""
    from passes.triton.kernel import describe_kernel

    config = instr.attrs["backend_config"].value
    return {"line": instr.line, **describe_kernel(config if isinstance(config, dict) else {})}


def _jax_triton_kernel(instr) -> dict[str, Any]:
    """A jax-triton call's kernel name, grid and ops (passes/triton/jax_triton_call.py):
    the compressed proto is the FFI dictionary's `opaque` or the whole string config."""
    from passes.triton.jax_triton_call import describe

    config = instr.attrs["backend_config"]
    data = config.value.get("opaque") if isinstance(config.value, dict) else config.data()
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, bytes):
        return {"line": instr.line, "name": "?", "grid": "?", "unreadable": "no opaque (compressed kernel proto)"}
    return {"line": instr.line, **describe(data)}


def _short(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def custom_call_support(target: str) -> str:
    """'rewritten by <pass>', '[built-in ]plug-in <source>', 'cpu-only (jaxlib runs it)' or
    'unsupported'."""
    import passes
    from passes.custom_call_policy import cpu_runtime_targets
    from passes.lib.plugins import coverage

    plugin = coverage(target)
    if plugin is not None:
        return plugin
    p = passes.pass_for_target(target)
    if p is not None:
        return f"rewritten by {p.name}"
    if target in cpu_runtime_targets():
        return "cpu-only (jaxlib runs it)"
    return "unsupported"


def format_summary(s: dict[str, Any], max_rows: int = 40) -> str:
    out = [
        f"module {s['module']}  ({s['path']})",
        f"devices: {s['devices']} = {s['replica_count']} replica(s) x {s['num_partitions']} partition(s)"
        f"{'  scheduled' if s['is_scheduled'] else ''}",
        f"{s['computations']} computations, {s['instructions']} instructions",
        "",
        "entry parameters:",
    ]
    rows = [[str(p["index"]), p["name"], p["shape"], human_bytes(p["bytes"]), p["sharding"] or ""]
            for p in s["parameters"]]
    out.append(_indent(table(rows[:max_rows], ["#", "name", "shape", "bytes", "sharding"])))
    if len(rows) > max_rows:
        out.append(f"  … {len(rows) - max_rows} more")
    out.append(f"  total {human_bytes(s['parameter_bytes'])} per device")
    if s["elided_constants"]:
        out += ["", f"elided constants ({len(s['elided_constants'])}; their values are not in the dump: "
                    "re-dump with XLA_FLAGS=--xla_dump_large_constants):"]
        rows = [[c["name"], c["shape"], human_bytes(c["bytes"]), c["computation"], str(c["line"])]
                for c in s["elided_constants"]]
        out.append(_indent(table(rows[:max_rows], ["name", "shape", "bytes", "computation", "line"])))
        if len(rows) > max_rows:
            out.append(f"  … {len(rows) - max_rows} more")
    out += ["", "results:"]
    rows = [[str(r["index"]), r["shape"], r.get("sharding", "")] for r in s["results"]]
    out.append(_indent(table(rows[:max_rows], ["#", "shape", "sharding"])))
    if len(rows) > max_rows:
        out.append(f"  … {len(rows) - max_rows} more")
    out += ["", "opcodes:"]
    rows = [[op, str(n)] for op, n in s["opcodes"].items()]
    out.append(_indent(table(rows, ["opcode", "count"])))
    out += ["", "custom-call targets:"]
    if s["custom_call_targets"]:
        rows = [[t, str(i["count"]), i["support"], i["first"]] for t, i in sorted(s["custom_call_targets"].items())]
        out.append(_indent(table(rows, ["target", "count", "support", "first at"])))
    else:
        out.append("  none")
    if s.get("triton_kernels"):
        out += ["", "Triton kernels (Pallas GPU, jax-triton):"]
        rows = [[k["name"], k["grid"], str(k["line"]), " ".join(k["ops"]) if "ops" in k else k["unreadable"]]
                for k in s["triton_kernels"]]
        out.append(_indent(table(rows[:max_rows], ["kernel", "grid", "line", "ops (or why unreadable)"])))
    out += ["", "collectives:"]
    if s["collectives"]:
        rows = [[c["name"], c["opcode"], c["mode"], str(c["channel_id"] or ""), c["groups_text"], c["shape"], str(c["line"])]
                for c in s["collectives"]]
        out.append(_indent(table(rows[:max_rows], ["name", "opcode", "mode", "channel", "groups", "shape", "line"])))
        if len(rows) > max_rows:
            out.append(f"  … {len(rows) - max_rows} more")
    else:
        out.append("  none")
    out += ["", "computations by kind:"]
    rows = [[k, str(n)] for k, n in s["computations_by_kind"].items()]
    out.append(_indent(table(rows, ["kind", "count"])))
    if s["warnings"]:
        out += ["", "warnings:"] + ["  " + w for w in s["warnings"]]
    return "\n".join(out)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
