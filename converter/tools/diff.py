"""`hlo-roundtrip diff A B [--html OUT.html]`: the structural difference of two dumps of one
program, as text (and as a self-contained HTML page).

Instructions are matched as `compare` matches them (converter.tools.compare.keyed: the
framework's op_name, source location, logical shape and while-loop depth; the last
instruction of a key stands for the op).  The report lists, for the matched ops whose
structure changed, what changed — opcode, element type and dimensions, layout, the
fusion holding it (and that fusion's kind), sharding — then the ops only one dump has
(removed: only in A; added: only in B), the opcode counts that differ and the
collectives of each (opcode, replica groups).  Nothing is executed.

Exit status (a verdict, as DESIGN's comparisons): 0 the two structures are the same by
these measures, 3 they differ.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from converter.hlo.ir import Instruction, Module

EXIT_SAME, EXIT_DIFFERENT = 0, 3


@dataclass
class Change:
    key: tuple
    a: str
    b: str
    what: list[str]


@dataclass
class DiffReport:
    path_a: str
    path_b: str
    changed: list[Change] = field(default_factory=list)
    removed: list[tuple[tuple, str]] = field(default_factory=list)  # (key, instruction in A)
    added: list[tuple[tuple, str]] = field(default_factory=list)    # (key, instruction in B)
    matched: int = 0
    opcodes: list[tuple[str, int, int]] = field(default_factory=list)
    collectives: list[tuple[str, list[str], list[str]]] = field(default_factory=list)
    sizes: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))  # (instructions, fusions) of A, B
    # Each instruction's line in its dump (the HTML page and compare name them with it).
    lines_a: dict[str, int] = field(default_factory=dict)
    lines_b: dict[str, int] = field(default_factory=dict)

    @property
    def same(self) -> bool:
        return not (self.changed or self.removed or self.added or self.opcodes or self.collectives)


def _fusion_of(hlo: Module) -> dict[str, Instruction]:
    """The fusion instruction whose computation (directly or through nested fusions)
    holds each fused instruction."""
    callers: dict[str, Instruction] = {}
    for comp in hlo.computations:
        for instr in comp.instructions:
            if instr.opcode == "fusion":
                calls = instr.attrs.get("calls")
                callers[calls[0] if isinstance(calls, (list, tuple)) else calls] = instr
    out: dict[str, Instruction] = {}
    for comp in hlo.computations:
        if comp.name in callers:
            for instr in comp.instructions:
                out[instr.name] = callers[comp.name]
    return out


def _layout(instr: Instruction) -> str:
    layout = instr.shape.layout
    if layout is None or not instr.shape.is_array:
        return ""
    from converter.hlo.printer import shape_to_text

    text = shape_to_text(instr.shape)
    return text[text.index("{"):] if "{" in text else ""


def _sharding(instr: Instruction) -> str:
    sharding = instr.attrs.get("sharding")
    if sharding is None:
        return ""
    from converter.hlo.printer import sharding_to_text

    try:
        return sharding_to_text(sharding)
    except (AttributeError, TypeError):
        return str(sharding)


def _fusion_text(fusion: Instruction | None) -> str:
    if fusion is None:
        return "unfused"
    return f"in a {fusion.attrs.get('kind', 'fusion')} fusion"


def _named(fusion: Instruction | None) -> str:
    return f" %{fusion.name}" if fusion is not None else ""


COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
               "collective-broadcast", "all-reduce-start", "all-gather-start", "collective-permute-start",
               "ragged-all-to-all")


def _collectives(hlo: Module) -> Counter:
    out: Counter = Counter()
    for comp in hlo.computations:
        for instr in comp.instructions:
            if instr.opcode in COLLECTIVES:
                groups = instr.attrs.get("replica_groups")
                out[f"{instr.opcode} {_groups_text(groups)}"] += 1
    return out


def _groups_text(groups) -> str:
    if groups is None:
        return "replica_groups={}"
    from converter.hlo.printer import attr_to_text
    from converter.hlo import attrs

    try:
        return attr_to_text("replica_groups", groups, attrs.INSTRUCTION_ATTRS)
    except (AttributeError, TypeError, KeyError):
        return f"replica_groups={groups}"


def _describe(key: tuple) -> str:
    op_name, source, shape, depth = key
    where = f" at {source}" if source else ""
    loop = f", loop depth {depth}" if depth != "0" else ""
    return f"{op_name}{where} [{shape}{loop}]"


def diff_modules(a: Module, b: Module) -> DiffReport:
    from converter.tools.compare import flatten, keyed

    report = DiffReport(a.path, b.path)
    keys_a, keys_b = keyed(a, flatten(a)), keyed(b, flatten(b))
    fusion_a, fusion_b = _fusion_of(a), _fusion_of(b)
    for key, ia in keys_a.items():
        ib = keys_b.get(key)
        if ib is None:
            report.removed.append((key, ia.name))
            continue
        report.matched += 1
        what = []
        if ia.opcode != ib.opcode:
            what.append(f"opcode {ia.opcode} → {ib.opcode}")
        from converter.hlo.printer import shape_to_text

        sa, sb = shape_to_text(ia.shape.without_layout()), shape_to_text(ib.shape.without_layout())
        if sa != sb:
            what.append(f"shape {sa} → {sb}")
        la, lb = _layout(ia), _layout(ib)
        if la != lb:
            what.append(f"layout {la or 'none'} → {lb or 'none'}")
        fa, fb = fusion_a.get(ia.name), fusion_b.get(ib.name)
        if _fusion_text(fa) != _fusion_text(fb):
            what.append(f"{_fusion_text(fa)}{_named(fa)} → {_fusion_text(fb)}{_named(fb)}")
        ha, hb = _sharding(ia), _sharding(ib)
        if ha != hb:
            what.append(f"sharding {ha or 'none'} → {hb or 'none'}")
        if what:
            report.changed.append(Change(key, ia.name, ib.name, what))
    report.added = [(key, ib.name) for key, ib in keys_b.items() if key not in keys_a]
    count_a = Counter(i.opcode for c in a.computations for i in c.instructions)
    count_b = Counter(i.opcode for c in b.computations for i in c.instructions)
    report.opcodes = sorted((op, count_a[op], count_b[op]) for op in set(count_a) | set(count_b)
                            if count_a[op] != count_b[op])
    ca, cb = _collectives(a), _collectives(b)
    for kind in sorted(set(ca) | set(cb)):
        if ca[kind] != cb[kind]:
            report.collectives.append((kind, [str(ca[kind])], [str(cb[kind])]))
    report.sizes = ((sum(count_a.values()), count_a["fusion"]), (sum(count_b.values()), count_b["fusion"]))
    report.lines_a = {i.name: i.line for c in a.computations for i in c.instructions}
    report.lines_b = {i.name: i.line for c in b.computations for i in c.instructions}
    return report


def format_report(report: DiffReport, max_rows: int = 40) -> str:
    (na, fa), (nb, fb) = report.sizes
    lines = [f"A: {report.path_a}: {na} instructions, {fa} fusions",
             f"B: {report.path_b}: {nb} instructions, {fb} fusions",
             f"matched ops (op_name, source, logical shape, loop depth): {report.matched}; "
             f"changed {len(report.changed)}, only in A {len(report.removed)}, only in B {len(report.added)}"]

    def listing(title: str, rows: list[str]) -> None:
        if not rows:
            return
        lines.append("")
        lines.append(title)
        lines.extend("  " + r for r in rows[:max_rows])
        if len(rows) > max_rows:
            lines.append(f"  … {len(rows) - max_rows} more")

    listing("changed:", [f"{_describe(c.key)}: %{c.a} → %{c.b}: " + "; ".join(c.what) for c in report.changed])
    listing("only in A (removed):", [f"{_describe(k)}: %{n}" for k, n in report.removed])
    listing("only in B (added):", [f"{_describe(k)}: %{n}" for k, n in report.added])
    width = max((len(op) for op, _, _ in report.opcodes), default=0)
    listing("opcode counts that differ (A → B):", [f"{op.ljust(width)}  {x} → {y}" for op, x, y in report.opcodes])
    listing("collectives that differ (A → B):", [f"{kind}: {x[0]} → {y[0]}" for kind, x, y in report.collectives])
    lines.append("")
    lines.append("verdict: " + ("the same structure" if report.same else "the structures differ"))
    return "\n".join(lines)


def changes_reaching(report: DiffReport, hlo_a: Module, hlo_b: Module, flat_a, flat_b, name_a: str, name_b: str,
                     matched_a: set[str], matched_b: set[str]) -> list[str]:
    """The structural changes at a matched pair (A's `name_a`, B's `name_b`) or just before
    it: the pair's own change, and those of the instructions each side computes it from
    back to the nearest matched instructions (`matched_a`/`matched_b`, whose values were
    compared; `flat_*` are compare's flattened graphs, fused and called instructions
    included): changed ones, ops only A computes there (removed) and ops only B does (added)."""

    def back(flat, start: str, matched: set[str]) -> set[str]:
        seen, todo = {start}, list(flat.operands.get(start, []))
        while todo:
            name = todo.pop()
            if name in seen or name in matched:
                continue
            seen.add(name)
            todo.extend(flat.operands.get(name, []))
        return seen

    region_a, region_b = back(flat_a, name_a, matched_a), back(flat_b, name_b, matched_b)
    out = [f"%{c.a} → %{c.b}: " + "; ".join(c.what) for c in report.changed if c.a in region_a or c.b in region_b]
    out += [f"%{n} only in A ({report.path_a}:{report.lines_a.get(n, '?')}: {k[0]})"
            for k, n in report.removed if n in region_a]
    out += [f"%{n} only in B ({report.path_b}:{report.lines_b.get(n, '?')}: {k[0]})"
            for k, n in report.added if n in region_b]
    if not out:
        # The op-level matching sees one instruction per op (the last of its key: a fusion
        # stands for what it fuses): compare the instructions themselves in the region.
        out = _region_difference(_with_called(hlo_a, flat_a, region_a), _with_called(hlo_b, flat_b, region_b))
    return out


def _with_called(hlo: Module, flat, region: set[str]) -> dict[str, Instruction]:
    """The region's instructions, and those of the computations they call that compare's
    flattened graph does not walk (a reduce's reducer, a sort's comparator): a change
    there changes the region's value."""
    from converter.importer.taps import called_computations

    walked = {i.name for i in flat.order}
    out = {i.name: i for i in flat.order if i.name in region}
    todo, seen = list(out.values()), set()
    while todo:
        for _, callee in called_computations(todo.pop(), hlo):
            if callee in seen or callee not in hlo.by_name:
                continue
            seen.add(callee)
            for inner in hlo.by_name[callee].instructions:
                if inner.name not in walked and inner.name not in out:
                    out[inner.name] = inner
                    todo.append(inner)
    return out


def _region_difference(by_a: dict[str, Instruction], by_b: dict[str, Instruction]) -> list[str]:
    """How the instructions computing a pair differ between A and B: a fusion only one
    side has (named with what the other side computes unfused), else the opcodes only
    one side uses there."""

    def names(instrs) -> str:
        shown = [f"%{i.name}" for i in instrs[:4]]
        return ", ".join(shown) + (f" and {len(instrs) - 4} more" if len(instrs) > 4 else "")

    def computing(by: dict) -> list:  # what computes values: no wrappers, parameters, tuples
        return [i for i in by.values() if i.opcode not in ("parameter", "fusion", "tuple", "get-tuple-element")]

    out = []
    fusions_a = [i for i in by_a.values() if i.opcode == "fusion"]
    fusions_b = [i for i in by_b.values() if i.opcode == "fusion"]
    if fusions_b and not fusions_a and computing(by_a):
        out.append(f"{names(fusions_b)} (B) fuses what A computes unfused as {names(computing(by_a))}")
    elif fusions_a and not fusions_b and computing(by_b):
        out.append(f"{names(fusions_a)} (A) fuses what B computes unfused as {names(computing(by_b))}")
    count_a = Counter(i.opcode for i in computing(by_a))
    count_b = Counter(i.opcode for i in computing(by_b))
    if count_a != count_b:
        parts = []
        for side, mine, other, by, by_other in (("A", count_a, count_b, by_a, by_b), ("B", count_b, count_a, by_b, by_a)):
            for op in sorted(mine):
                if mine[op] > other[op]:
                    # Name first those whose namesake on the other side (a planted or
                    # rewritten instruction keeps its name) has another opcode.
                    ops = [i for i in by.values() if i.opcode == op]
                    ops.sort(key=lambda i: i.name in by_other and by_other[i.name].opcode == op)
                    parts.append(f"{side} {op} ×{mine[op] - other[op]} more ({names(ops)})")
        out.append("the instructions computing it differ: " + ", ".join(parts))
    return out


_PAGE_STYLE = """body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #bbb;padding:2px 6px;text-align:left;vertical-align:top}th{background:#eee}
code{font-family:monospace}h2{margin-top:1.2em}"""


def format_html(report: DiffReport) -> str:
    """The report as one self-contained HTML page (inline style, no script, no link out):
    a table per category, every instruction named with its dump line."""
    from html import escape

    def where(path: str, lines: dict[str, int], name: str) -> str:
        line = lines.get(name)
        return escape(f"%{name}") + (f" <small>({escape(path)}:{line})</small>" if line else "")

    def table(title: str, cls: str, head: list[str], rows: list[list[str]]) -> list[str]:
        out = [f"<h2>{escape(title)} ({len(rows)})</h2>"]
        if not rows:
            return out + ["<p>none</p>"]
        out.append(f'<table class="{cls}"><tr>' + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>")
        out.extend("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
        return out + ["</table>"]

    (na, fa), (nb, fb) = report.sizes
    a, b = report.path_a, report.path_b
    body = [f"<h1>hlo-roundtrip diff</h1><p>A: <code>{escape(a)}</code>: {na} instructions, {fa} fusions<br>"
            f"B: <code>{escape(b)}</code>: {nb} instructions, {fb} fusions<br>"
            f"matched ops (op_name, source, logical shape, loop depth): {report.matched}; "
            f"changed {len(report.changed)}, only in A {len(report.removed)}, only in B {len(report.added)}<br>"
            f"verdict: <b>{'the same structure' if report.same else 'the structures differ'}</b></p>"]
    body += table("changed", "changed", ["op", "A", "B", "what changed"],
                  [[escape(_describe(c.key)), where(a, report.lines_a, c.a), where(b, report.lines_b, c.b),
                    "<br>".join(escape(w) for w in c.what)] for c in report.changed])
    body += table("only in A (removed)", "only-a", ["op", "A"],
                  [[escape(_describe(k)), where(a, report.lines_a, n)] for k, n in report.removed])
    body += table("only in B (added)", "only-b", ["op", "B"],
                  [[escape(_describe(k)), where(b, report.lines_b, n)] for k, n in report.added])
    body += table("opcode counts that differ", "opcodes", ["opcode", "A", "B", "delta"],
                  [[escape(op), str(x), str(y), f"{y - x:+d}"] for op, x, y in report.opcodes])
    body += table("collectives that differ", "collectives", ["collective", "A", "B"],
                  [[escape(kind), escape(x[0]), escape(y[0])] for kind, x, y in report.collectives])
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>diff " + escape(f"{a} {b}")
            + f"</title><style>{_PAGE_STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def add_diff_parser(sub) -> None:
    p = sub.add_parser("diff", help="the structural difference of two dumps of one program (text; nothing runs)",
                       description="Match the instructions of two dumps as `compare` does (op_name, source, "
                                   "logical shape, loop depth) and list what changed: opcode, shape, layout, "
                                   "fusion, sharding; the ops only one has; opcode and collective counts. "
                                   "Exit 0 when nothing differs, 3 when something does.")
    p.add_argument("dump_a", metavar="A")
    p.add_argument("dump_b", metavar="B")
    p.add_argument("--max-rows", type=int, default=40, help="rows per section (default 40)")
    p.add_argument("--html", metavar="OUT.html", help="also write the difference as a self-contained HTML page "
                                                      "(every row, each instruction with its dump line)")
    from converter.tools.options import add_unknown_attributes_arg

    add_unknown_attributes_arg(p)


def cmd_diff(args) -> int:
    from converter.hlo.parser import parse_hlo
    from converter.hlo.proto import read_hlo_text

    a = parse_hlo(read_hlo_text(args.dump_a), args.dump_a, allow_unknown_attributes=args.allow_unknown_attributes)
    b = parse_hlo(read_hlo_text(args.dump_b), args.dump_b, allow_unknown_attributes=args.allow_unknown_attributes)
    report = diff_modules(a, b)
    print(format_report(report, args.max_rows))
    if args.html:
        from converter.common.files import write_atomic

        write_atomic(args.html, format_html(report))
        print(f"wrote {args.html}")
    return EXIT_SAME if report.same else EXIT_DIFFERENT
