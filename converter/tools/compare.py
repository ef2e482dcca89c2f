"""`hlo-roundtrip compare A B`: where two dumps of one program part ways.

Two dumps of the same program (before and after optimizations, two backends, two XLA
versions, a dump and a snapshot's module) run on the same inputs, each converted with
taps (converter.importer.taps) on the instructions that can be matched across them.  Instructions
are matched by what survives compilation: the framework's op_name, the source location
(stack frame or source_file/line) and the logical shape.  When several instructions of a
dump share a key (an op lowered to a chain of HLO ops, or copied), the last one in
dependency order stands for it: the value the source op finally produced.

The report names the first diverging instructions in dependency order — diverging
instructions none of whose matched ancestors diverge — then a table of the error of
every matched pair.  Inside a while loop the values compared are the last iteration's.
"""

from __future__ import annotations

from dataclasses import dataclass, field


from converter.runtime.compare import Difference, compare
from converter.hlo.ir import Instruction, Module
from converter.importer.taps import INLINED, LOOP_BODY, TapRequest, called_computations, tap_path

Key = tuple[str, str, str, str]


@dataclass
class Flat:
    """A dump's instructions that have one value per execution, in dependency order,
    with each one's operands resolved through inlined computations' parameters."""

    order: list[Instruction] = field(default_factory=list)
    operands: dict[str, list[str]] = field(default_factory=dict)
    # The op_name of the `call` instructions an instruction sits in: a called function's
    # ops carry names relative to the call, which XLA's call inliner composes with the
    # call's own (`jit(f)/while/body/closed_call` + `sin`).
    op_name_prefix: dict[str, str] = field(default_factory=dict)


def flatten(hlo: Module) -> Flat:
    flat = Flat()

    def walk(comp_name: str, params: dict[str, list[str]], prefix: str) -> None:
        comp = hlo.by_name[comp_name]
        for instr in comp.instructions:
            if prefix:
                flat.op_name_prefix[instr.name] = prefix
            if instr.opcode == "parameter" and not comp.is_entry:
                flat.operands[instr.name] = params.get(instr.name, [])
                continue
            deps = [op.split("#")[0] for op in instr.operands]
            for key, callee in called_computations(instr, hlo):
                inner = hlo.by_name[callee]
                if (instr.opcode, key) in INLINED or (instr.opcode, key) == LOOP_BODY:
                    if instr.opcode in ("async-update", "async-done"):
                        continue
                    if (instr.opcode, key) == LOOP_BODY:
                        # The body's state comes from the init (and from the previous
                        # iteration: a back edge left out, so that order within the body
                        # decides what comes first).
                        mapping = {p.name: list(deps) for p in inner.parameters}
                    else:
                        mapping = {p.name: [deps[p.parameter_number]] if p.parameter_number < len(deps) else []
                                   for p in inner.parameters}
                    inner_prefix = prefix
                    if instr.opcode == "call" and instr.metadata is not None and instr.metadata.op_name:
                        inner_prefix = compose_op_name(prefix, instr.metadata.op_name)
                    walk(callee, mapping, inner_prefix)
                    deps = deps + [inner.root.name]
            flat.operands[instr.name] = deps
            flat.order.append(instr)

    walk(hlo.entry.name, {}, "")
    return flat


def compose_op_name(prefix: str, op_name: str) -> str:
    if not prefix or op_name == prefix or op_name.startswith(prefix + "/"):
        return op_name
    return f"{prefix}/{op_name}"


def logical_shape(shape) -> str:
    """Element type and dimensions without the size-1 ones, which optimizations add and
    drop freely (a reduction's kept dimension, a bitcast to rank 1)."""
    return f"{shape.element_type}[{','.join(str(d) for d in shape.dims if d != 1)}]"


def match_key(hlo: Module, instr: Instruction, loop_depth: int, prefix: str = "") -> Key | None:
    """(op_name, source location, logical shape, while-loop depth), or None without an
    op_name.  The depth keeps a loop counter read in the body apart from the loop's
    final count."""
    md = instr.metadata
    if md is None or not md.op_name:
        return None
    source = ""
    if md.stack_frame_id:
        frame = hlo.stack_frames.location(md.stack_frame_id)
        if frame is not None:
            source = f"{frame[0]}:{frame[1]}:{frame[2]}"
    if not source and md.source_file:
        source = f"{md.source_file}:{md.source_line}"
    shape = instr.shape
    if not shape.is_array:
        return None
    return compose_op_name(prefix, md.op_name), source, logical_shape(shape), str(loop_depth)


def keyed(hlo: Module, flat: Flat, keep_fusions: bool = False) -> dict[Key, Instruction]:
    """The instruction standing for each key, among those a tap can return: the last one
    of the key in dependency order (the value the source op finally produced).  A key
    whose instruction feeds a later instruction of the same op_name and source under
    another shape is an intermediate of that op (the sum inside a softmax's division,
    or the reciprocal that replaced it): what optimizations make of those differs, so
    only the op's outputs are matched."""
    ok_comps: dict[str, bool] = {}
    depth: dict[str, int] = {}
    where = {i.name: c for c in hlo.computations for i in c.instructions}
    last: dict[Key, Instruction] = {}
    for instr in flat.order:
        comp = where[instr.name]
        if comp.name not in ok_comps:
            ok_comps[comp.name] = tap_path(hlo, comp, keep_fusions)[0]
            depth[comp.name] = len(tap_path(hlo, comp, keep_fusions)[2])
        if not ok_comps[comp.name]:
            continue
        key = match_key(hlo, instr, depth[comp.name], flat.op_name_prefix.get(instr.name, ""))
        if key is not None:
            last[key] = instr
    position = {i.name: n for n, i in enumerate(flat.order)}
    groups: dict[tuple[str, str, str], list[Key]] = {}
    for key in last:
        groups.setdefault((key[0], key[1], key[3]), []).append(key)
    out = {}
    for keys in groups.values():
        for key in keys:
            instr = last[key]
            later = [last[k].name for k in keys if k != key and position[last[k].name] > position[instr.name]]
            if not later or not _feeds(flat, position, instr.name, later):
                out[key] = instr
    return out


def _feeds(flat: Flat, position: dict[str, int], source: str, targets: list[str]) -> bool:
    """Whether `source` is an ancestor of any of `targets` (searching back from them,
    never past `source`'s position)."""
    limit = position[source]
    seen: set[str] = set()
    todo = list(targets)
    while todo:
        name = todo.pop()
        for op in flat.operands.get(name, []):
            if op == source:
                return True
            # Parameters of inlined computations have no position: pass through them.
            if op not in seen and position.get(op, limit + 1) > limit:
                seen.add(op)
                todo.append(op)
    return False


@dataclass
class Pair:
    key: Key
    a: str
    b: str
    diff: Difference
    first: bool = False
    healed: bool = False


@dataclass
class CompareReport:
    path_a: str
    path_b: str
    pairs: list[Pair]
    outputs: list[tuple[str, Difference]]
    unmatched_a: int
    unmatched_b: int

    @property
    def ok(self) -> bool:
        return all(p.diff.ok or p.healed for p in self.pairs) and all(d.ok for _, d in self.outputs)

    @property
    def first(self) -> list[Pair]:
        return [p for p in self.pairs if p.first]


def compare_dumps(path_a: str, path_b: str, inputs_path: str | None = None, seed: int = 0,
                  rtol: float | None = None, atol: float | None = None, pipeline: str = "default",
                  import_options=None, pass_options=None) -> CompareReport:
    import dataclasses

    from converter.runtime.convert import convert_module
    from converter.common.errors import ConverterError
    from converter.hlo.parser import parse_hlo
    from converter.hlo.proto import read_hlo_text
    from converter.importer.core import ImportOptions
    from converter.runtime.program import program_from_module, read_inputs

    hlos = [parse_hlo(read_hlo_text(p), p) for p in (path_a, path_b)]
    keep = bool(import_options and import_options.keep_fusions)
    flats = [flatten(h) for h in hlos]
    keyed_a, keyed_b = (keyed(h, f, keep) for h, f in zip(hlos, flats))
    common = [k for k in keyed_a if k in keyed_b]
    chosen = {k: (keyed_a[k], keyed_b[k]) for k in common}
    programs = []
    for side, hlo in enumerate(hlos):
        names = list(dict.fromkeys(chosen[k][side].name for k in common))
        options = dataclasses.replace(import_options or ImportOptions(),
                                      taps=TapRequest(names=names) if names else None)
        module = convert_module(hlo, pipeline=pipeline, import_options=options, pass_options=pass_options)
        programs.append(program_from_module(module, hlo, hlo.path))
    a, b = programs
    if inputs_path:
        inputs = read_inputs(inputs_path, a)
    else:
        # A snapshot brings the arguments it recorded: compare on those.
        from converter.hlo.proto import read_snapshot

        snapshots = [s for s in (read_snapshot(path_a), read_snapshot(path_b)) if s is not None]
        inputs = a.check_inputs(snapshots[0].arguments) if snapshots and a.num_devices == 1 else a.random_inputs(seed)
    if [p.shape for p in a.params] != [p.shape for p in b.params] or \
            [p.element_type for p in a.params] != [p.element_type for p in b.params]:
        raise ConverterError(f"error: {path_a} and {path_b} take different parameters "
                             f"({', '.join(p.describe() for p in a.params)} vs "
                             f"{', '.join(p.describe() for p in b.params)}): not two dumps of one program")
    outs_a = dict(zip((s.name for s in a.results), a(*inputs)))
    outs_b = dict(zip((s.name for s in b.results), b(*inputs)))
    pairs = []
    for k in common:
        name_a, name_b = chosen[k][0].name, chosen[k][1].name
        value_a, value_b = outs_a[f"tap:{name_a}"], outs_b[f"tap:{name_b}"]
        pairs.append(Pair(k, name_a, name_b, compare(value_b.reshape(value_a.shape), value_a, rtol, atol)))
    # First divergences: diverging pairs with no diverging matched ancestor in A.
    bad = {p.a for p in pairs if not p.diff.ok}
    operands = flats[0].operands
    memo: dict[str, bool] = {}

    def bad_ancestor(name: str) -> bool:
        """Whether a strict ancestor of `name` is a diverging matched instruction."""
        if name in memo:
            return memo[name]
        memo[name] = False  # loops through while bodies: cut the cycle
        result = any(op in bad or bad_ancestor(op) for op in operands.get(name, []))
        memo[name] = result
        return result

    # A difference that no matched instruction computed from it shows again is most
    # likely two compilations computing different intermediates under one op_name (a
    # division became a multiplication by a broadcast reciprocal): "healed".
    users: dict[str, list[str]] = {}
    for name, ops in operands.items():
        for op in ops:
            users.setdefault(op, []).append(name)
    matched = {p.a: p for p in pairs}
    position = {i.name: n for n, i in enumerate(flats[0].order)}
    pairs.sort(key=lambda p: position[p.a])
    for p in reversed(pairs):  # descendants first: a healed one counts as agreeing
        if p.diff.ok:
            continue
        seen, todo, later = {p.a}, list(users.get(p.a, [])), []
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in matched:
                later.append(matched[name])
            todo.extend(users.get(name, []))
        p.healed = bool(later) and all(q.diff.ok or q.healed for q in later)
    bad.difference_update(p.a for p in pairs if p.healed)
    memo.clear()
    for p in pairs:
        p.first = not p.diff.ok and not p.healed and not bad_ancestor(p.a)
    outputs = []
    for name in outs_a:
        if name.startswith("out") and name in outs_b:
            outputs.append((name, compare(outs_b[name], outs_a[name], rtol, atol)))
    return CompareReport(path_a, path_b, pairs, outputs, len(keyed_a) - len(common), len(keyed_b) - len(common))


def format_report(report: CompareReport, max_rows: int = 60) -> str:
    from converter.common.textfmt import table

    lines = [f"A: {report.path_a}", f"B: {report.path_b}",
             f"{len(report.pairs)} instruction(s) matched by op_name, source location and shape "
             f"({report.unmatched_a} of A and {report.unmatched_b} of B without a counterpart)"]
    first = report.first
    if first:
        lines.append("\nfirst divergence (in dependency order; nothing before it that is matched diverges):")
        if any(p.key[3] != "0" for p in first):
            lines.append("  (inside a while loop the values are the last iteration's: the divergence may have "
                         "started in an earlier iteration at any of the loop's instructions listed)")
        for p in first:
            lines.append(f"  A %{p.a}  ~  B %{p.b}   {p.key[0]}  {p.key[1] or '(no source)'}  {p.key[2]}")
            lines.append(f"      max abs {p.diff.max_abs:.3g}, max rel {p.diff.max_rel:.3g}, "
                         f"{p.diff.mismatches} element(s) beyond tolerance")
    rows = []
    shown = report.pairs if len(report.pairs) <= max_rows else \
        [p for p in report.pairs if not p.diff.ok][:max_rows] or report.pairs[:max_rows]
    for p in shown:
        rows.append([p.a, p.b, p.key[0][-48:], p.key[2], f"{p.diff.max_abs:.3g}", f"{p.diff.max_rel:.3g}",
                     "ok" if p.diff.ok else "FIRST" if p.first else "healed*" if p.healed else "differs"])
    if rows:
        lines.append("")
        if len(shown) < len(report.pairs):
            lines.append(f"(showing {len(shown)} of {len(report.pairs)} rows; --max-rows to see more)")
        lines.append(table(rows, ["A", "B", "op_name", "shape", "max abs", "max rel", "verdict"]))
    if any(p.healed for p in shown):
        lines.append("* differs, but every matched instruction computed from it agrees: most likely the two "
                     "compilations compute different intermediates under one op_name")
    if report.outputs:
        lines.append("")
        lines.append(table([[n, f"{d.max_abs:.3g}", f"{d.max_rel:.3g}", "ok" if d.ok else "DIFFERS"]
                            for n, d in report.outputs], ["output", "max abs", "max rel", "verdict"]))
    lines.append("verdict: " + ("the dumps agree within tolerance" if report.ok else
                                "the dumps diverge" + (f", first at A %{first[0].a} / B %{first[0].b}" if first else "")))
    return "\n".join(lines)


def add_compare_parser(sub) -> None:
    p = sub.add_parser("compare", help="run two dumps of one program on the same inputs and show where they diverge")
    p.add_argument("dump_a", metavar="A")
    p.add_argument("dump_b", metavar="B")
    p.add_argument("--inputs", metavar="IN.npz", help="inputs keyed arg0..argN (default: random from --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rtol", type=float, help="relative tolerance (default: fitted to each dtype)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default: fitted to each dtype)")
    p.add_argument("--max-rows", type=int, default=60, help="rows of the table (default 60)")


def cmd_compare(args) -> int:
    from converter.tools.options import import_options_from_args, pass_options_from_args

    report = compare_dumps(args.dump_a, args.dump_b, args.inputs, args.seed, args.rtol, args.atol,
                           args.pipeline, import_options_from_args(args), pass_options_from_args(args))
    print(format_report(report, args.max_rows))
    return 0 if report.ok else 1
