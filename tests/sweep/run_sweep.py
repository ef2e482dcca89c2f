"""Run `hlo-roundtrip run` (and, for CPU dumps, `check --against-xla`) on every dump of sweep
folders made by tests/sweep/generate.py, in this process, and tabulate the outcome:

    PYTHONPATH=$PWD PYTHON -m tests.sweep.run_sweep /tmp/breadth-sweep/cpu-010 ... > table.txt

Outcome per dump: ok, mismatch (run's outputs differ from JAX's result beyond the dtype's
tolerance), refused (exit 1 with a located error), crash (a traceback), xla-mismatch (check),
cpu-mismatch (a multi-device TPU/GPU dump whose `compare` against the CPU dump of the same
program and jax version, a folder `cpu-SUFFIX` among the arguments, exits other than 0;
`ref:cpu-SUFFIX` names it for the comparisons alone).
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import sys
import tempfile
import traceback

import numpy as np

TOL = {"float32": (2e-4, 2e-4), "float64": (1e-9, 1e-9), "bfloat16": (1e-2, 1e-2), "float16": (1e-3, 1e-3)}


def cli(argv: list[str]) -> tuple[int, str]:
    from converter.tools.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            rc = main(argv + ["--debug"])
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc(file=buf)
            rc = 99
    return rc, buf.getvalue()


def last_error(text: str) -> str:
    lines = [l for l in text.splitlines() if l.strip()]
    for l in reversed(lines):
        if "error" in l.lower() or "Error" in l:
            return l.strip()[:220]
    return (lines[-1] if lines else "").strip()[:220]


def compare(got: pathlib.Path, want: pathlib.Path) -> str | None:
    g, w = np.load(got), np.load(want)
    if len(g.files) != len(w.files):
        return f"{len(g.files)} outputs, expected {len(w.files)}"
    for k in w.files:
        a, b = np.asarray(g[k]), np.asarray(w[k])
        if b.dtype == np.dtype("V2"):  # np.savez writes bfloat16 as two raw bytes
            import ml_dtypes

            a, b = a.view(ml_dtypes.bfloat16), b.view(ml_dtypes.bfloat16)
        if a.shape != b.shape:
            return f"{k}: shape {a.shape} vs {b.shape}"
        if b.dtype.kind in "fc" or b.dtype.name.startswith(("float8", "bfloat")):
            rtol, atol = TOL.get(b.dtype.name, (1e-3, 1e-3))
            a64, b64 = a.astype(np.complex128 if b.dtype.kind == "c" else np.float64), b.astype(
                np.complex128 if b.dtype.kind == "c" else np.float64)
            if not np.allclose(a64, b64, rtol=rtol, atol=atol * max(1.0, float(np.max(np.abs(b64), initial=0))),
                               equal_nan=True):
                return f"{k}: max abs err {np.max(np.abs(a64 - b64)):.3g}"
        elif not np.array_equal(a, b):
            return f"{k}: {int(np.sum(a != b))} of {a.size} differ"
    return None


def sweep(folder: pathlib.Path, tmp: pathlib.Path, cpu: pathlib.Path | None = None) -> list[tuple[str, str, str]]:
    rows = []
    for dump in sorted(folder.glob("*.hlo")):
        name = dump.stem
        inputs, expected = folder / f"{name}.in.npz", folder / f"{name}.expected.npz"
        out = tmp / f"{folder.name}-{name}.out.npz"
        argv = ["run", str(dump), "--outputs", str(out)] + (["--inputs", str(inputs)] if inputs.exists() else [])
        rc, text = cli(argv)
        if rc != 0:
            # a located error (`file:line:col: error: ...`) is a refusal, whatever class carried it
            refusal = ": error: " in last_error(text) or "Traceback" not in text
            status = "refused" if refusal and rc in (1, 99) else "crash" if "Traceback" in text else f"rc{rc}"
            rows.append((name, status, last_error(text)))
            continue
        if expected.exists():
            bad = compare(out, expected)
            if bad:
                rows.append((name, "mismatch", bad))
                continue
        if folder.name.startswith("cpu"):
            rc, text = cli(["check", str(dump), "--against-xla"])
            if rc != 0:
                rows.append((name, "xla-mismatch" if rc != 99 else "crash", last_error(text)))
                continue
        elif not expected.exists() and cpu is not None and (cpu / dump.name).exists():
            rc, text = cli(["compare", str(cpu / dump.name), str(dump)])
            if rc != 0:
                rows.append((name, "cpu-mismatch" if rc in (3, 4) else "crash" if rc == 99 else f"compare-rc{rc}",
                             last_error(text)))
                continue
        rows.append((name, "ok", ""))
    return rows


def main() -> None:
    import jax

    jax.config.update("jax_num_cpu_devices", 8)  # as the CLI's own process would for 8-device dumps
    with tempfile.TemporaryDirectory() as t:
        # `ref:DIR`: a CPU folder only compared against, not swept itself
        folders = [pathlib.Path(f.removeprefix("ref:")) for f in sys.argv[1:]]
        for folder in [pathlib.Path(f) for f in sys.argv[1:] if not f.startswith("ref:")]:
            suffix = folder.name.rsplit("-", 1)[-1]
            cpu = next((f for f in folders if f.name == f"cpu-{suffix}"), None)
            rows = sweep(folder, pathlib.Path(t), cpu)
            for name, status, why in rows:
                print(f"{folder.name}\t{name}\t{status}\t{why}", flush=True)


if __name__ == "__main__":
    main()
