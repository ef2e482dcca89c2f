"""Digests of what the parser and the converter make of every dump, to show that a change
meant to keep the output (a speed-up, a restructuring) keeps it.

    python benchmarks/parse_identity.py OUT.json [--convert] [--mutations N] [paths...]

For every .hlo file under samples/ and tests/ (or the paths given): the sha256 of the
printed HLO (converter.hlo.printer) or of the parse error's text, and with --convert the
sha256 of the MLIR text `convert` writes (with locations) under the default pipeline (and
with --keep-fusions) and of the faithful import (`--pipeline none`), or of the error;
with --mutations N, the same for N seeded random edits of each dump (characters deleted,
inserted or replaced), so that parse errors and their `file:line:col` are compared too.
Run it before and after a change and compare the two files (`--compare A.json B.json`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import sys
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def dump_paths() -> list[pathlib.Path]:
    return sorted(p for d in ("samples", "tests") for p in (ROOT / d).rglob("*.hlo"))


def ir_text(module) -> str:
    """Every field of the parsed IR, positions and unparsed metadata text included (what
    printing drops)."""
    import numpy as np

    def literal(value) -> str:
        if isinstance(value, np.ndarray):
            return f"{value.dtype}{value.shape}:{hashlib.sha256(value.tobytes()).hexdigest()}"
        if isinstance(value, tuple):
            return "(" + ",".join(literal(v) for v in value) + ")"
        return repr(value)

    lines = [repr((module.name, module.attrs, module.stack_frames, module.warnings, module.entry.name))]
    for comp in module.computations:
        lines.append(repr((comp.name, comp.line, comp.col, comp.is_entry, comp.signature, comp.execution_thread,
                           comp.root.name, [p.name for p in comp.parameters], list(comp.by_name))))
        for i in comp.instructions:
            lines.append(repr((i.name, i.opcode, i.shape, i.operands, i.attrs, i.line, i.col, i.is_root,
                               i.metadata_text, i._metadata, i.literal_elided, i.parameter_number,
                               i.operand_shapes)) + literal(i.literal))
    return "\n".join(lines)


# What the mutations insert: the grammar's punctuation and tokens.
_PIECES = [*'%{}()[],=:"\' \n\t/*#-.0123456789abxyz', "metadata=", "calls=", ", ", "/*index=5*/", "f32[2]{0}",
           "ROOT ", "constant(", '\\"']


def mutations(text: str, count: int, seed: str) -> list[str]:
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(count):
        t = text
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(t) + 1)
            op = rng.random()
            if op < 0.4:
                t = t[:pos] + t[pos + rng.randint(1, 4):]
            else:
                t = t[:pos] + rng.choice(_PIECES) + t[pos + (op >= 0.8):]
        out.append(t)
    return out


def digests(path: pathlib.Path, convert: bool, n_mutations: int = 0) -> dict[str, str]:
    from converter.common.errors import ConverterError
    from converter.hlo.parser import parse_hlo
    from converter.hlo.printer import module_to_text

    rel = str(path.relative_to(ROOT))
    text = path.read_text(encoding="utf-8", errors="replace")
    out: dict[str, str] = {}
    for i, mutated in enumerate(mutations(text, n_mutations, rel)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out[f"mutation{i}"] = digest(module_to_text(parse_hlo(mutated, rel)))
            except ConverterError as e:
                out[f"mutation{i}"] = "error:" + digest(str(e))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            module = parse_hlo(text, rel)
        except ConverterError as e:
            out["parse"] = "error:" + digest(str(e))
            return out
        out["print"] = digest(module_to_text(module))
        out["ir"] = digest(ir_text(module))
        if convert:
            from converter.mlir.serialize import module_to_bytes
            from converter.runtime.convert import convert_module

            for key, pipeline, keep_fusions in (("mlir", "default", False), ("mlir-faithful", "none", False),
                                                ("mlir-keep-fusions", "default", True)):
                try:
                    out[key] = digest(module_to_bytes(convert_module(parse_hlo(text, rel), pipeline=pipeline,
                                                                     keep_fusions=keep_fusions)))
                except Exception as e:  # any failure is part of the behaviour to keep
                    out[key] = f"error:{type(e).__name__}:" + digest(str(e))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?")
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--convert", action="store_true", help="also digest the converted MLIR")
    parser.add_argument("--mutations", type=int, default=0, metavar="N", help="also N mutated copies of each dump")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = parser.parse_args()
    if args.compare:
        a, b = (json.loads(pathlib.Path(x).read_text()) for x in args.compare)
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        for k in differ:
            print(f"differs: {k}: {a.get(k)} != {b.get(k)}")
        print(f"{len(a.keys() & b.keys())} dumps in both, {len(differ)} differ")
        sys.exit(1 if differ else 0)
    paths = [pathlib.Path(p).resolve() for p in args.paths] or dump_paths()
    result = {}
    for i, path in enumerate(paths):
        result[str(path.relative_to(ROOT))] = digests(path, args.convert, args.mutations)
        print(f"{i + 1}/{len(paths)} {path.relative_to(ROOT)}", file=sys.stderr, flush=True)
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
