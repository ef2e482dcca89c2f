"""Command-line start-up, side by side with the conversion it wraps and XLA's own parser.

    python benchmarks/cli_startup.py [--repeat 9] [--dump samples/gpu_maxtext_...hlo] [--baseline CHECKOUT]

Each row is the median of `--repeat` runs (min and max beside it); the command lines run in
turn, one of each per round, so that a machine whose speed drifts slows them alike.  Wall
time is a monotonic clock around the whole process; CPU time is the finished child's user +
system seconds (the operating system's accounting), which a busy shared machine inflates
less than the wall time.  Rows:

- `python -c pass`: the interpreter's own start (site, the installed packages' path hooks);
  what no change of ours can take away;
- `--version`, `--help`, `convert --help`: the CLI's start-up (import and argument parsing);
- `convert DUMP -o OUT`: the whole command, start-up, reading and writing included;
- in process: `convert_file` + `module_to_bytes` as `cmd_convert` calls them, in this process
  after a warm-up (the lazy imports of the first call not counted);
- XLA parse: jaxlib's C++ HLO text parser (`jaxlib._hlo.hlo_module_from_text`) on the same
  text, in this process: the yardstick of what reading the dump costs natively.

The command lines run this checkout (`python -m converter`, the checkout first on
PYTHONPATH), with the interpreter running this script unless `--python` names another, and
with Python's bytecode cache on (as an installed package has it).  `--baseline CHECKOUT`
(say `git worktree add /tmp/base HEAD~3`) runs the same command lines of another checkout in
turn with these, in columns of their own.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "gpu_maxtext_train_step_te_fused_attention.hlo"


def checkout_env(checkout: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    # An installed package has its bytecode cached (pip compiles it); with this set, every run
    # would compile each module from source (~3x the start-up here).  The warm-up round writes
    # the caches (__pycache__, ignored by git).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_timed(argv: list[str], checkout: pathlib.Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system of the child) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=checkout_env(checkout), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=checkout)
    stderr = proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} (in {checkout}) exited {code}:\n{stderr.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def in_process(fn, repeat: int) -> list[float]:
    fn()  # warm-up: the first call's lazy imports and caches are start-up, not conversion
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=9, help="runs of each row (the median is reported)")
    parser.add_argument("--dump", default=str(SAMPLE), help="the dump `convert` reads (default: the MaxText sample)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the command lines")
    parser.add_argument("--baseline", metavar="CHECKOUT",
                        help="another checkout whose command lines run in turn with this one's")
    args = parser.parse_args()
    dump = str(pathlib.Path(args.dump).resolve())
    checkouts = [ROOT] + ([pathlib.Path(args.baseline).resolve()] if args.baseline else [])

    cli = [args.python, "-m", "converter"]
    with tempfile.TemporaryDirectory() as tmp:
        commands = {
            "python -c pass": [args.python, "-c", "pass"],
            "hlo-roundtrip --version": [*cli, "--version"],
            "hlo-roundtrip --help": [*cli, "--help"],
            "hlo-roundtrip convert --help": [*cli, "convert", "--help"],
            "hlo-roundtrip convert DUMP -o OUT": [*cli, "convert", dump, "-o", os.path.join(tmp, "out.mlir")],
        }
        runs = [(name, argv, checkout) for name, argv in commands.items() for checkout in checkouts]
        walls: dict[tuple[str, pathlib.Path], list[float]] = {(name, c): [] for name, _, c in runs}
        cpus: dict[tuple[str, pathlib.Path], list[float]] = {(name, c): [] for name, _, c in runs}
        for _, argv, checkout in runs:  # warm-up round: the file system's caches, .pyc files
            run_timed(argv, checkout)
        for _ in range(args.repeat):
            for name, argv, checkout in runs:
                wall, cpu = run_timed(argv, checkout)
                walls[name, checkout].append(wall)
                cpus[name, checkout].append(cpu)

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import jaxlib
    import jaxlib._hlo as xla_hlo

    from converter.mlir.serialize import module_to_bytes
    from converter.runtime.convert import convert_file

    text = pathlib.Path(dump).read_text()
    t_convert = in_process(lambda: module_to_bytes(convert_file(dump), "mlir"), args.repeat)
    t_xla = in_process(lambda: xla_hlo.hlo_module_from_text(text), args.repeat)

    print(f"{pathlib.Path(dump).name} ({len(text.encode()) / 1e6:.1f} MB), Python {sys.version.split()[0]}, "
          f"jaxlib {jaxlib.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
          f"median of {args.repeat} (min-max)" + (f"; baseline: {checkouts[1]}" if args.baseline else "") + "\n")
    columns = ["what", "wall", "CPU (user + system)"] + (["baseline wall", "baseline CPU"] if args.baseline else [])
    print("| " + " | ".join(columns) + " |")
    print("|---" * len(columns) + "|")
    for name in commands:
        cells = [f"{spread(walls[name, c])} | {spread(cpus[name, c])}" for c in checkouts]
        print(f"| `{name}` | " + " | ".join(cells) + " |")
    rest = " |" * (len(columns) - 2)
    print(f"| `convert` in process (convert_file + module_to_bytes) | {spread(t_convert)} |{rest}")
    print(f"| XLA's parse in process (hlo_module_from_text) | {spread(t_xla)} |{rest}")


if __name__ == "__main__":
    main()
