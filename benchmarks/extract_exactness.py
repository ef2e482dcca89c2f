"""How often `extract` gives the tap's bits: for a sample of instructions of each dump,
the module extract writes, run by XLA itself on the operands' values of the full run,
against the tap of the instruction in that run (issue 29: "any instruction of a catalog
dump can be extracted into a module XLA runs to the same bits").

    python benchmarks/extract_exactness.py [--per-dump N] [--fma] [--as-converted] DUMP_OR_FOLDER... [--json OUT]

Both compiles run without multiply-add contraction (as `extract --no-fma` does, see
converter/runtime/fp_contraction.py) unless --fma.  One full run per dump taps every
instruction (loop bodies: their last iteration, which is what extract cuts at without
--iteration); each sampled instruction is then extracted with `--producers 0` from those
values and run by XLA.  Multi-device dumps are run on device 0 and instructions whose cut
holds a collective are counted as refused, as extract refuses them.  Each instruction ends
as exact (bit for bit), exact-converted (the dump's own instructions differ or do not run,
the cut as `run` computes it is exact: what `extract --verify` then writes),
exact-producers1 (exact one producer level up: what --verify writes next), differs (every
form tried differs; the plain cut's ulps given), exact-extract-taps (differs with every
instruction tapped, exact as `extract --verify` runs it, tapping only the cut's operands),
error (no form runs), refused (extract's located
refusal: collectives of a multi-device dump, host callbacks...) or error (a crash: a bug).
Values of a loop of unknown trip count that ran no iteration with the random inputs are
its zero carry (extract refuses them; here they show as differs: look at such rows).
`--as-converted` writes every cut as `run` computes it (extract --as-converted).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SKIPPED_OPCODES = {"parameter", "constant", "tuple", "get-tuple-element", "copy-start", "after-all", "partition-id",
                   "replica-id"}


def _dumps(paths: list[str]) -> list[pathlib.Path]:
    out: list[pathlib.Path] = []
    for p in map(pathlib.Path, paths):
        out += sorted(p.glob("*.hlo")) if p.is_dir() else [p]
    return out


def _bits_equal(a, b) -> bool:
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _ulps(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind not in "fc" and "float" not in a.dtype.name:
        return float("inf")
    x, y = a.astype(np.float64), b.astype(np.float64)
    finfo = np.finfo(a.dtype) if a.dtype.kind in "fc" else None
    eps = float(finfo.eps) if finfo is not None else 2.0 ** -7
    scale = np.maximum(np.abs(x), np.finfo(np.float64).tiny)
    with np.errstate(invalid="ignore"):
        err = np.where(np.isnan(x) & np.isnan(y), 0.0, np.abs(x - y) / (scale * eps))
    return float(np.nanmax(err)) if err.size else 0.0


def measure(path: pathlib.Path, per_dump: int, rng: random.Random, as_converted: bool = False) -> list[dict]:
    from converter.common.errors import ConverterError
    from converter.hlo.parser import parse_hlo_file
    from converter.runtime.xla_oracle import run_with_xla
    from converter.tools.bisect import tapped_run
    from converter.tools.compare import flatten
    from converter.tools.extract import DEVICE_DEPENDENT, choose_cut, extract_module, find_instruction

    hlo = parse_hlo_file(str(path))
    try:
        values, _, devices = tapped_run(str(path), hlo, None, 0, None)
    except ConverterError as e:
        return [{"dump": str(path), "instruction": None, "result": "dump-refused", "why": str(e).splitlines()[0]}]
    names = [i.name for i in flatten(hlo).order if i.opcode not in SKIPPED_OPCODES and i.name in values]
    rows = []
    for name in sorted(rng.sample(names, min(per_dump, len(names)))):
        row = {"dump": str(path), "instruction": name}
        comp, instr = find_instruction(hlo, name)
        cross = [i for i in choose_cut(comp, instr, 0, None, hlo.path) if i.opcode in DEVICE_DEPENDENT]
        if devices > 1 and cross:  # as extract refuses it: the value depends on the other devices
            row.update(result="refused", why=f"{cross[0].opcode} of a {devices}-device module")
            rows.append(row)
            continue
        expected = values[name]
        row["result"], row["why"], row["ulps"] = "differs", "", float("inf")
        # As `extract --verify` tries them: the plain cut (the dump's own instructions, then
        # as run computes it), then one producer level up the same two ways.
        for producers, converted, label in ((0, as_converted, "exact"), (0, True, "exact-converted"),
                                            (1, as_converted, "exact-producers1"), (1, True, "exact-producers1")):
            try:
                text, inputs, _ = extract_module(hlo, name, values, producers=producers, as_converted=converted)
            except ConverterError as e:
                if producers == 0 and not converted:
                    row.update(result="refused", why=str(e).splitlines()[0].split("error: ")[-1][:160])
                    break
                continue
            try:
                got = run_with_xla(text, inputs)
            except Exception as e:  # noqa: BLE001 - XLA could not run it: try the next form
                if row["why"] == "":
                    row.update(result="error", why=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                continue
            if len(got) == len(expected) and all(_bits_equal(g, e) for g, e in zip(got, expected)):
                row.update(result=label, why="", ulps=0.0)
                break
            if row["result"] != "error" and producers == 0 and not converted:
                row["ulps"] = max((_ulps(e, g) for g, e in zip(got, expected)), default=float("inf"))
        if row["result"] == "differs":
            row.update(_with_extract_taps(path, hlo, name, row))
        rows.append(row)
    return rows


def _with_extract_taps(path: pathlib.Path, hlo, name: str, row: dict) -> dict:
    """A row that differs when every instruction is tapped, tried as `extract --verify` runs
    it: a full run tapping only the cut's operands and NAME (tapping everything changes how
    XLA compiles the full run, so its values can differ in the last bit)."""
    from converter.runtime.xla_oracle import run_with_xla
    from converter.tools.extract import extract

    for producers in (0, 1):
        try:
            result = extract(str(path), name, hlo=hlo, producers=producers)
        except Exception as e:  # noqa: BLE001 - extract's own refusal (a loop that ran no iteration) or the verdict stands
            first = str(e).splitlines()[0] if str(e) else ""
            return {"result": "refused", "why": first.split("error: ")[-1][:160]} if "error: " in first else {}
        forms = [result.text] + ([result.as_converted()[0]] if result.as_converted is not None else [])
        for text in forms:
            try:
                got = run_with_xla(text, result.inputs)
            except Exception:  # noqa: BLE001 - try the next form
                continue
            if len(got) == len(result.expected) and all(_bits_equal(g, e) for g, e in zip(got, result.expected)):
                return {"result": "exact-extract-taps"}
    return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--per-dump", type=int, default=12)
    parser.add_argument("--fma", action="store_true", help="leave XLA's multiply-add contraction on")
    parser.add_argument("--json", help="write every row here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--as-converted", action="store_true", help="write every cut as `run` computes it")
    args = parser.parse_args()
    if not args.fma:
        from converter.runtime.fp_contraction import turn_contraction_off

        turn_contraction_off("extract_exactness", devices=8)  # the most the catalog's dumps run on
    rng = random.Random(args.seed)
    rows: list[dict] = []
    start = time.perf_counter()
    for path in _dumps(args.paths):
        try:
            got = measure(path, args.per_dump, rng, args.as_converted)
        except Exception as e:  # one dump's crash must not hide the others' numbers
            got = [{"dump": str(path), "instruction": None, "result": "error", "why": f"{type(e).__name__}: {e}"[:200]}]
        rows += got
        bad = [r for r in got if r["result"] in ("differs", "error")]
        print(f"{path}: " + ", ".join(f"{k} {v}" for k, v in Counter(r["result"] for r in got).items())
              + "".join(f"\n    {r['instruction']}: {r['result']} {r.get('ulps', r.get('why', ''))}" for r in bad),
              flush=True)
    counts = Counter(r["result"] for r in rows)
    print(f"\n{len(rows)} rows in {time.perf_counter() - start:.0f} s: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    reasons = Counter(r["why"][:90] for r in rows if r["result"] == "refused")
    for why, n in reasons.most_common(12):
        print(f"  refused {n}: {why}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
