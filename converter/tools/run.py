"""`hlo-roundtrip run`: the table a user reads after running a dump."""

from __future__ import annotations

import sys
import time

import numpy as np

from converter.runtime import distributed
from converter.runtime import program as runtime
from converter.common.textfmt import human_bytes, table


class _Progress:
    """Where a long run is: one status line on a terminal; elsewhere (a log, a CI job) a
    line with the elapsed time every HLO_ROUNDTRIP_PROGRESS_SECONDS (default 10) while a
    stage lasts, so that a long compile does not read as a hang, and nothing for quick
    runs."""

    def __init__(self) -> None:
        import os
        import threading

        self.tty = sys.stderr.isatty()
        self.start = time.perf_counter()
        self.stage = ""
        self.interval = float(os.environ.get("HLO_ROUNDTRIP_PROGRESS_SECONDS", "10"))
        self._stop = threading.Event()
        self._thread = None
        if not self.tty and self.interval > 0:
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            sys.stderr.write(f"hlo-roundtrip: {self.stage or 'working'}… {time.perf_counter() - self.start:.1f} s elapsed\n")
            sys.stderr.flush()

    def __call__(self, stage: str) -> None:
        self.stage = stage
        if self.tty:
            sys.stderr.write(f"\r\033[K{stage}… {time.perf_counter() - self.start:.0f} s")
            sys.stderr.flush()

    def done(self) -> None:
        self._stop.set()
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _stats(arr: np.ndarray) -> list[str]:
    if arr.size == 0:
        return ["-", "-", "-", "0", "0"]
    a = np.asarray(arr)
    if a.dtype.kind == "V" or a.dtype.kind == "f" and a.dtype.itemsize < 4 or a.dtype.name.startswith(("bfloat", "float8", "float4")):
        a = a.astype(np.float32)
    if a.dtype.kind == "c":
        a = np.abs(a)
    if a.dtype.kind == "b":
        a = a.astype(np.int8)
    if a.dtype.kind in "iu":
        return [str(a.min()), str(a.max()), f"{a.mean():.6g}", "0", "0"]
    finite = np.isfinite(a)
    nan = int(np.isnan(a).sum())
    inf = int(np.isinf(a).sum())
    if finite.any():
        vals = a[finite]
        return [f"{vals.min():.6g}", f"{vals.max():.6g}", f"{vals.mean():.6g}", str(nan), str(inf)]
    return ["-", "-", "-", str(nan), str(inf)]


def run_command(args) -> int:
    from converter.tools.options import import_options_from_args, pass_options_from_args
    from converter.runtime.sharding import assemble_global, before_optimizations_sibling, shardings_with_fallback, split_global

    from converter.tools.options import refuse_native_reductions_across_processes

    if refused := refuse_native_reductions_across_processes(args):
        print(f"hlo-roundtrip run: error: {refused}", file=sys.stderr)
        return 2
    if args.processes:
        return distributed.launch_local(distributed.worker_argv(args.argv), args.processes, args.timeout)
    group = distributed.group_from_args(args)
    from converter.hlo.proto import read_snapshot
    from converter.runtime.inputs import build_inputs, format_iterations, format_literals

    if args.iterations < 1:
        print(f"hlo-roundtrip run: error: --iterations {args.iterations}: give a count of 1 or more", file=sys.stderr)
        return 2

    progress = _Progress()
    try:
        progress("convert")
        snapshot = read_snapshot(args.input)
        program = runtime.load(args.input, pipeline=args.pipeline, import_options=import_options_from_args(args),
                               pass_options=pass_options_from_args(args), allow_unknown_attributes=args.allow_unknown_attributes)
        n = program.num_devices
        if group is not None:
            if args.engine == "iree":
                raise runtime.RuntimeInputError("--engine iree runs in one process")
            distributed.prepare(program, group, args.heartbeat_timeout)
        from passes.ordered_reductions import ordered_reduction_count, unordered_reductions

        if (folded := ordered_reduction_count(program.module)) and (group is None or group.process_id == 0):
            print(f"note: {folded} float all-reduce(s)/reduce-scatter(s) summed in group order (the same bits in one "
                  "process or several); XLA's own order may differ in the last bits (--reduction-order native)",
                  file=sys.stderr)
        native = unordered_reductions(program.module)
        if native and (group is None or group.process_id == 0):
            print(f"warning: {len(native)} float all-reduce(s) too large to fold in group order run as XLA's own "
                  f"collectives, whose summation order depends on the runtime (one process or several): "
                  f"{', '.join(native[:4])}{' …' if len(native) > 4 else ''}", file=sys.stderr)
        engine = program
        if getattr(args, "engine", "jaxlib") == "iree":
            from converter.runtime.iree_engine import IreeProgram

            engine = IreeProgram(program)
        outputs = None
        times: list[float] = []
        param_shardings = result_shardings = []
        if args.global_arrays and n > 1:
            source = getattr(args, "shardings_from", None) or before_optimizations_sibling(args.input)
            param_shardings, result_shardings = shardings_with_fallback(program, source)
        if args.compile_only:
            engine.compile(progress)
        else:
            if engine is program and not args.skip_memory_check:
                runtime.check_memory_fits(program, group.num_processes if group else 1)
            if snapshot is not None and not args.inputs and not args.input_values:
                arrays = snapshot_arguments(snapshot, program, args.input)
            else:
                whole = args.global_arrays and n > 1
                arrays, given = build_inputs(program, args.input_values, args.inputs, args.seed, whole)
                if whole:
                    arrays = [split_global(a, spec.shape, sh, n, f"arg{spec.index} ({spec.name})",
                                           devices=program.local)
                              if spec.index in given else a
                              for a, spec, sh in zip(arrays, program.params, param_shardings)]
            outputs = engine.execute(arrays, progress)
            times.append(engine.timings["execute"])
            for _ in range(args.iterations - 1):
                engine.execute(arrays, progress)
                times.append(engine.timings["execute"])
    finally:
        progress.done()
    if group is not None:
        outputs = distributed.finish(outputs, program, group, args.outputs if args.outputs_per_process else None)
        if outputs is None:  # this process's share is written, or process 0 has it
            return 0
    if outputs is not None and args.global_arrays and n > 1:
        assembled = []
        for o, spec, sh in zip(outputs, program.results, result_shardings):
            whole = assemble_global(o, sh)
            if whole is None and spec.name.startswith("tap:"):
                whole = o  # an instruction's value has no sharding of its own: per device
            elif whole is None:
                print(f"warning: out{spec.index}: the dump gives no sharding for this output; it is written "
                      f"per device (leading axis of {n})", file=sys.stderr)
                whole = o
            assembled.append(whole)
        outputs = assembled
    if outputs is not None and args.outputs:
        runtime.write_outputs(args.outputs, outputs, [spec.name for spec in program.results])

    print(f"{args.input}: {n} device(s)" + (", engine IREE llvm-cpu" if engine is not program else ""))
    t = {**program.timings, **engine.timings}
    rows = [[stage, f"{t[stage]:.3f} s"] for stage in ("decode proto", "parse", "import", "passes", "compile", "execute")
            if stage in t]
    print(table(rows, ["stage", "time"]))
    if engine is program:
        mem = program.memory()
        print(f"\nmemory per device: arguments {human_bytes(mem['argument_bytes'])}, outputs {human_bytes(mem['output_bytes'])}, "
              f"temp {human_bytes(mem['temp_bytes'])}, aliased {human_bytes(mem['alias_bytes'])}")
    if outputs is not None:
        rows = []
        for spec, arr in zip(program.results, outputs):
            rows.append([spec.name, "x".join(map(str, arr.shape)) or "scalar", spec.element_type, *_stats(arr)])
        print()
        print(table(rows, ["output", "shape", "dtype", "min", "max", "mean", "nan", "inf"]))
        if len(times) > 1:
            print("\n" + format_iterations(times))
        if args.print_literals:
            print()
            print(format_literals([spec.name for spec in program.results], outputs, args.print_literals))
        if args.outputs:
            print(f"\nwrote {args.outputs}")
    if outputs is not None and snapshot is not None and not args.inputs:
        return compare_with_snapshot(snapshot, program, outputs, args.input)
    return 0


def snapshot_arguments(snapshot, program, path: str) -> list[np.ndarray]:
    """The recorded arguments, checked against the module's parameters."""
    from converter.common.errors import ConverterError

    if program.num_devices > 1:
        raise ConverterError(f"{path}: error: a snapshot records one device's arguments; the module runs on "
                             f"{program.num_devices} devices (give --inputs with every device's values)")
    return program.check_inputs(snapshot.arguments)


def compare_with_snapshot(snapshot, program, outputs, path: str) -> int:
    """Outputs against the result the snapshot recorded: a table, exit 0 when they
    agree within the dtype's tolerance, 1 otherwise."""
    from converter.runtime.compare import compare

    own = [o for spec, o in zip(program.results, outputs) if not spec.name.startswith("tap:")]
    if len(own) != len(snapshot.result):
        print(f"\n{path}: the snapshot records {len(snapshot.result)} result(s), the module returns {len(own)}")
        return 1
    rows, bad = [], []
    for i, (o, r) in enumerate(zip(own, snapshot.result)):
        d = compare(o, r)
        rows.append([f"out{i}", f"{d.max_abs:.3g}", f"{d.max_rel:.3g}", str(d.mismatches), "ok" if d.ok else "DIFFERS"])
        if not d.ok:
            bad.append(f"out{i}")
    platform = f" ({snapshot.platform})" if snapshot.platform else ""
    print(f"\nagainst the result recorded in the snapshot{platform}:")
    print(table(rows, ["output", "max abs", "max rel", "mismatches", "verdict"]))
    print("verdict: " + ("the outputs agree with the recorded result" if not bad else
                         "outputs differ from the recorded result beyond the dtype tolerance: " + ", ".join(bad)))
    return 0 if not bad else 1
