"""`hlo-roundtrip run`: the table a user reads after running a dump."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from converter.common.textfmt import human_bytes, table
from converter.runtime import distributed
from converter.importer.taps import ITERATIONS
from converter.tools.options import RunOptions


class _Progress:
    """Where a long run is: one status line on a terminal; elsewhere (a log, a CI job) a
    line with the elapsed time every HLO_ROUNDTRIP_PROGRESS_SECONDS (default 10) while a
    stage lasts, so that a long compile does not read as a hang, and nothing for quick
    runs.  While executing, the line sets the elapsed time against the estimate (`expect`),
    or says that none can be made."""

    def __init__(self) -> None:
        import os
        import threading

        self.tty = sys.stderr.isatty()
        self.start = time.perf_counter()
        self.stage = ""
        self.stage_start = self.start
        self.expected: tuple[float, float] | None = None  # (low, high) seconds of one execution
        self.caveat = ""
        self.interval = float(os.environ.get("HLO_ROUNDTRIP_PROGRESS_SECONDS", "10"))
        self._stop = threading.Event()
        self._thread = None
        if not self.tty and self.interval > 0:
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()

    def expect(self, low: float, high: float, caveat: str = "") -> None:
        self.expected = (low, high)
        self.caveat = caveat

    def line(self) -> str:
        now = time.perf_counter()
        text = f"{self.stage or 'working'}… {now - self.start:.1f} s elapsed"
        if self.stage == "execute" and self.expected is not None:
            low, high = self.expected
            spent = now - self.stage_start
            if spent <= high:
                done_high = min(99, int(100 * spent / max(low, 1e-9)))
                text += (f"; executing for {spent:.0f} s of an estimated {_seconds(low)} to {_seconds(high)} "
                         f"(about {int(100 * spent / high)}–{done_high}% done)")
            else:
                text += f"; executing for {spent:.0f} s, past the estimate of {_seconds(high)}"
            if self.caveat:
                text += f" ({self.caveat})"
        elif self.stage == "execute":
            text += f"; executing for {now - self.stage_start:.0f} s (no estimate)"
        return text

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            sys.stderr.write(f"hlo-roundtrip: {self.line()}\n")
            sys.stderr.flush()

    def __call__(self, stage: str) -> None:
        self.stage = stage
        self.stage_start = time.perf_counter()
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


class _Stages:
    """Wall time of every stage of a run, so that the table's rows add up to its total."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.rows: list[tuple[str, float]] = []

    def add(self, name: str, seconds: float) -> None:
        self.rows.append((name, seconds))

    def span(self, name: str, timings: dict[str, float] | None = None):
        """A block timed under `name`; with `timings`, the parts a conversion timed into it
        (decode proto, parse, import, passes, prepare for CPU) come first as their own rows
        and `name` gets what else the block took."""
        import contextlib

        @contextlib.contextmanager
        def block():
            start = time.perf_counter()
            try:
                yield
            finally:
                spent = time.perf_counter() - start
                parts = [(k, timings[k]) for k in ("decode proto", "parse", "import", "passes", "prepare for CPU")
                         if timings and k in timings]
                self.rows.extend(parts)
                self.add(name, spent - sum(t for _, t in parts))
        return block()

    def timed(self, name: str):
        return self.span(name)


def _seconds(t: float) -> str:
    if t < 1e-3:
        return "<1 ms"
    return f"{t * 1e3:.0f} ms" if t < 1 else f"{t:.1f} s" if t < 120 else f"{t / 60:.1f} min"


def _process_started() -> float | None:
    """When this process (the command, before any fork) started, as time.time() reads it:
    Linux's /proc, with the clock tick's precision; None elsewhere.  The start is counted in
    ticks since boot, and so is /proc/uptime: their difference is the process's age (the
    boot time /proc/stat gives is whole seconds, which would make the start-up row up to a
    second too long)."""
    import os

    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started_since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - (uptime - started_since_boot)
    except (OSError, ValueError, IndexError):
        return None


_RATES: tuple[float, float] | None = None


def machine_rates() -> tuple[float, float]:
    """(FLOP/s, bytes/s) of XLA's CPU code on this machine as it is loaded now, measured
    once per process (a few tenths of a second): a 512x512 f32 matrix product and an
    elementwise pass over 16 MiB (larger outputs measure page faults), compiled by jaxlib like the module itself (NumPy's BLAS
    would measure another library's threading)."""
    global _RATES
    if _RATES is None:
        import jax
        import jax.numpy as jnp

        device = jax.devices("cpu")[0]
        a = jax.device_put(np.ones((512, 512), np.float32), device)
        v = jax.device_put(np.ones(1 << 22, np.float32), device)
        matmul = jax.jit(lambda m: m @ m)
        stream = jax.jit(lambda x: x * jnp.float32(1.5))
        matmul(a).block_until_ready()
        stream(v).block_until_ready()
        best_flops = best_bytes = 0.0
        for _ in range(5):
            t = time.perf_counter()
            matmul(a).block_until_ready()
            best_flops = max(best_flops, 2 * 512 ** 3 / max(time.perf_counter() - t, 1e-9))
            t = time.perf_counter()
            stream(v).block_until_ready()
            best_bytes = max(best_bytes, 2 * v.nbytes / max(time.perf_counter() - t, 1e-9))
        _RATES = (best_flops, best_bytes)
    return _RATES


def _while_loops(program) -> int | None:
    if program.hlo is None:
        return None
    return sum(1 for c in program.hlo.computations for i in c.instructions if i.opcode == "while")


def cost_estimate(program, progress: _Progress) -> str | None:
    """What one execution will cost, from XLA's cost analysis of the compiled module (per
    device: FLOPs and bytes accessed), and how long it should take here at the rates XLA's
    code reaches on this machine now (`machine_rates`; each uses every core, so the devices
    share them): from the slower of compute and memory traffic to three times their sum
    (elementwise and reduction code is slower than a matrix product).  XLA's analysis
    counts a while loop's body once, not once per iteration."""
    try:
        analysis = program.compile().cost_analysis()
    except Exception:  # noqa: BLE001 - jaxlib versions that lack it: no estimate, say so
        return "cost: XLA's cost analysis is not available for this module; no time estimate"
    if isinstance(analysis, list):
        analysis = analysis[0] if analysis else {}
    flops = float(analysis.get("flops", 0.0)) + float(analysis.get("transcendentals", 0.0))
    nbytes = float(analysis.get("bytes accessed", 0.0))
    devices = len(program.local)
    flop_rate, byte_rate = machine_rates()
    t_flops, t_bytes = flops / flop_rate, nbytes / byte_rate
    low = max(t_flops, t_bytes) * devices
    high = (t_flops + t_bytes) * devices * 3
    loops = _while_loops(program)
    caveat = ""
    if loops is None or loops:
        caveat = (f"{loops} while loop(s): counted once each, multiply by their iterations"
                  if loops else "the module may hold while loops, each counted once")
    progress.expect(low, high, "while loops make it longer" if caveat else "")
    per = "per device, " if devices > 1 else ""
    span = _seconds(high) if _seconds(low) == _seconds(high) else f"{_seconds(low)}–{_seconds(high)}"
    return (f"cost: {flops / 1e9:.3g} GFLOP and {human_bytes(nbytes)} accessed {per}by XLA's cost analysis; "
            f"estimated execution {span} on this machine (XLA's CPU code measured here now: "
            f"{flop_rate / 1e9:.1f} GFLOP/s, {byte_rate / 1e9:.1f} GB/s, shared by {devices} device(s))"
            + (f"; {caveat}" if caveat else ""))


def run_command(args) -> int:
    """`hlo-roundtrip run`: its arguments as one RunOptions value, then `run`."""
    from converter.tools.options import refuse_native_reductions_across_processes, run_options_from_args

    if refused := refuse_native_reductions_across_processes(args):
        print(f"hlo-roundtrip run: error: {refused}", file=sys.stderr)
        return 2
    return run(run_options_from_args(args))


def run(options: RunOptions) -> int:
    """A run, where it runs: launching local processes, as one process of a group, here
    (called from Python), or in a child of this command's process that Ctrl-C / SIGTERM
    stops at once (converter.tools.stoppable)."""
    from converter.tools.stoppable import run_stoppable

    if options.find_nonfinite:
        from converter.tools.nonfinite import run_find_nonfinite

        if not options.own_process:
            return run_find_nonfinite(options)
        return run_stoppable(lambda: run_find_nonfinite(options), [], "run")
    if options.processes:
        return distributed.launch_local(distributed.worker_argv(options.argv), options.processes, options.timeout)
    if options.group is not None or not options.own_process:
        return _run(options, None)
    started = _process_started()
    return run_stoppable(lambda: _run(options, started), [options.outputs, options.save_inputs], "run")


@dataclass
class _Outcome:
    """What a run produced, for its report."""

    program: Any = None
    engine: Any = None
    snapshot: Any = None
    outputs: list[np.ndarray] | None = None
    times: list[float] = field(default_factory=list)
    memory: dict[str, int] | None = None
    # With --global on several devices: each parameter's and result's sharding.
    param_shardings: list = field(default_factory=list)
    result_shardings: list = field(default_factory=list)


def _run(o: RunOptions, process_started: float | None) -> int:
    """The stages of a run, in order: load → convert → prepare for CPU → compile → execute →
    write (each below, timed into the table the report prints)."""
    wall_start = time.time()
    stages = _Stages()
    with stages.timed("imports (jax, jaxlib, passes)"):
        from converter.runtime import convert as conversion
        from converter.runtime import devices
        from converter.runtime import program as runtime
        from converter.hlo.proto import read_snapshot
        import jax  # noqa: F401  (imported here, it is not counted as converting)

    progress = _Progress()
    done = _Outcome()
    if o.group is not None:  # joined once conversion knows the device count, before anything starts JAX
        devices.device_setup = lambda count: distributed.join(o.group, count, o.heartbeat_timeout)
    try:
        progress("convert")
        with stages.timed("read snapshot"):
            done.snapshot = read_snapshot(o.input)
        timings: dict[str, float] = {}
        with stages.span("load (read, set up)", timings), conversion.cyclic_gc_paused():
            dump = conversion.load_dump(o.input, o.convert, timings=timings)           # 1. load
            module = conversion.convert(dump, o.convert, timings=timings)            # 2. convert
            conversion.prepare_for_cpu(module, o.convert, path=o.input, timings=timings)  # 3. prepare for CPU
            done.program = runtime.wrap_prepared(module, dump.hlo, o.input, timings)
        _checks(done, o, stages)
        done.engine = _compile(done.program, o, stages, progress)                   # 4. compile
        if not o.compile_only:
            _execute(done, o, stages, progress)                                     # 5. execute
        if not _write(done, o, stages, progress):                                   # 6. write
            return 0
        with stages.timed("memory analysis"):
            done.memory = done.program.memory() if done.engine is done.program else None
    finally:
        progress.done()
    return _report(done, o, stages, wall_start, process_started)


def _checks(done: _Outcome, o: RunOptions, stages: _Stages) -> None:
    """Before compiling: join the process group, say how float collectives sum, and (with
    --global) read the shardings that split inputs and assemble outputs."""
    from converter.runtime.sharding import before_optimizations_sibling, shardings_with_fallback
    from passes.ordered_reductions import ordered_reduction_count, unordered_reductions

    program = done.program
    if o.group is not None:
        if o.engine == "iree":
            from converter.runtime.program import RuntimeInputError

            raise RuntimeInputError("--engine iree runs in one process")
        with stages.timed("join processes"):
            distributed.prepare(program, o.group, o.heartbeat_timeout)
    with stages.timed("checks"):
        folded = ordered_reduction_count(program.module)
        native = unordered_reductions(program.module)
    first = o.group is None or o.group.process_id == 0
    if folded and first:
        print(f"note: {folded} float all-reduce(s)/reduce-scatter(s) summed in group order (the same bits in one "
              "process or several); XLA's own order may differ in the last bits (--reduction-order native)",
              file=sys.stderr)
    if native and first:
        # One instruction may be several collectives (a tuple-shaped reduce-scatter): named once, counted.
        counts = {where: native.count(where) for where in dict.fromkeys(native)}
        named = [where + (f" (x{k})" if k > 1 else "") for where, k in counts.items()]
        print(f"warning: {len(native)} float reduction collective(s) not folded in group order run as XLA's "
              f"own, whose summation order depends on the runtime (one process or several): "
              f"{', '.join(named[:4])}{' …' if len(named) > 4 else ''}", file=sys.stderr)
    if o.global_arrays and program.num_devices > 1:
        with stages.timed("shardings"):
            done.param_shardings, done.result_shardings = shardings_with_fallback(
                program, o.shardings_from or before_optimizations_sibling(o.input))


def _compile(program, o: RunOptions, stages: _Stages, progress: _Progress):
    """Stage 4: compile with jaxlib's XLA CPU client (or IREE), and estimate what executing costs."""
    engine = program
    if o.engine == "iree":
        from converter.runtime.iree_engine import IreeProgram

        engine = IreeProgram(program)
    engine.compile(progress)
    stages.add("compile", engine.timings.get("compile", 0.0))
    if engine is program:
        with stages.timed("cost analysis"):
            cost = cost_estimate(program, progress)
        if cost and (o.group is None or o.group.process_id == 0):
            print(f"hlo-roundtrip: {cost}", file=sys.stderr, flush=True)
    return engine


def _execute(done: _Outcome, o: RunOptions, stages: _Stages, progress: _Progress) -> None:
    """Stage 5: the inputs (given, recorded in a snapshot, or random), then execute."""
    from converter.runtime import program as runtime

    program, engine = done.program, done.engine
    whole = o.global_arrays and program.num_devices > 1
    if engine is program and not o.skip_memory_check:
        with stages.timed("memory check"):
            runtime.check_memory_fits(program, o.group.num_processes if o.group else 1)
    progress("inputs")
    with stages.timed("inputs"):
        arrays, saved = _inputs(o, program, done.snapshot, done.param_shardings, whole)
    if o.save_inputs:
        progress("save inputs")
        with stages.timed("save inputs"):
            runtime.write_outputs(o.save_inputs, saved, [f"arg{i}" for i in range(len(saved))])
    done.outputs = engine.execute(arrays, progress)
    for key in ("to device", "execute", "from device"):
        if key in engine.timings:
            stages.add(key, engine.timings[key])
    done.times.append(engine.timings["execute"])
    if o.iterations > 1:
        with stages.timed(f"execute x {o.iterations - 1} more"):
            for _ in range(o.iterations - 1):
                engine.execute(arrays, progress)
                done.times.append(engine.timings["execute"])


def _write(done: _Outcome, o: RunOptions, stages: _Stages, progress: _Progress) -> bool:
    """Stage 6: gather a process group's outputs, assemble whole arrays (--global), write
    --outputs.  False: this process of a group is done (its share written, or process 0
    reports)."""
    from converter.runtime import program as runtime

    program, n = done.program, done.program.num_devices
    if o.group is not None:
        with stages.timed("gather outputs" if not o.outputs_per_process else "write outputs"):
            done.outputs = distributed.finish(done.outputs, program, o.group,
                                              o.outputs if o.outputs_per_process else None)
        if done.outputs is None:
            return False
    if done.outputs is not None and o.global_arrays and n > 1:
        with stages.timed("assemble whole arrays"):
            done.outputs = _assembled(done.outputs, program, done.result_shardings, n)
    if done.outputs is not None and o.outputs:
        progress("write outputs")
        with stages.timed("write outputs"):
            runtime.write_outputs(o.outputs, done.outputs, [spec.name for spec in program.results])
    return True


def _report(done: _Outcome, o: RunOptions, stages: _Stages, wall_start: float, process_started: float | None) -> int:
    """The report: stages and their times, memory, the outputs' statistics, callbacks and
    asserts, and against a snapshot's recorded result."""
    from converter.runtime.inputs import format_iterations, format_literals

    program, outputs = done.program, done.outputs
    if outputs is not None:
        with stages.timed("statistics"):
            rows = [[spec.name, "x".join(map(str, arr.shape)) or "scalar", spec.element_type, *_stats(arr)]
                    for spec, arr in zip(program.results, outputs)]
    print(f"{o.input}: {program.num_devices} device(s)" + (", engine IREE llvm-cpu" if done.engine is not program else ""))
    print(table(_stage_rows(stages, wall_start, process_started), ["stage", "time"]))
    mem = done.memory
    if mem is not None:
        print(f"\nmemory per device: arguments {human_bytes(mem['argument_bytes'])}, outputs {human_bytes(mem['output_bytes'])}, "
              f"temp {human_bytes(mem['temp_bytes'])}, aliased {human_bytes(mem['alias_bytes'])}")
    if outputs is not None:
        print()
        print(table(rows, ["output", "shape", "dtype", "min", "max", "mean", "nan", "inf"]))
        _print_callbacks(program, outputs)
        _print_asserts(program, outputs)
        if len(done.times) > 1:
            print("\n" + format_iterations(done.times))
        if o.print_literals:
            print()
            print(format_literals([spec.name for spec in program.results], outputs, o.print_literals))
        if o.save_inputs:
            print(f"\nwrote the inputs to {o.save_inputs}")
        if o.outputs:
            print(f"\nwrote {o.outputs}")
    if outputs is not None and done.snapshot is not None and not o.inputs:
        return compare_with_snapshot(done.snapshot, program, outputs, o.input)
    return 0


def _stage_rows(stages: _Stages, wall_start: float, process_started: float | None) -> list[list[str]]:
    """The stages in order, what no stage accounts for, and the total: the wall time since
    the process started (Python's start-up and imports counted), so that the rows add up
    to what `time` measures for the command, less the printing of this report."""
    rows = [(name, t) for name, t in stages.rows if name != "read snapshot" or t >= 5e-4]
    total = time.perf_counter() - stages.start
    if process_started is not None and process_started <= wall_start:
        startup = wall_start - process_started
        rows.insert(0, ("start-up (Python, imports)", startup))
        total += startup
    rows.append(("other", max(0.0, total - sum(t for _, t in rows))))
    total = sum(t for _, t in rows)
    return [[name, f"{t:.3f} s"] for name, t in rows] + [["total", f"{total:.3f} s"]]


def _inputs(o: RunOptions, program, snapshot, param_shardings, whole: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The arguments as the program takes them (per device), and as --save-inputs writes
    them: the same, or with --global the whole arrays (random ones drawn whole, seeded by
    the parameter, and split by its sharding, so that every device of a replicated
    parameter holds the same value, as in the real run)."""
    from converter.common.errors import ConverterError
    from converter.runtime.inputs import build_inputs
    from converter.runtime.program import random_values
    from converter.runtime.sharding import global_shape, split_global

    n = program.num_devices
    if snapshot is not None and not o.inputs and not list(o.input_values):
        arrays = snapshot_arguments(snapshot, program, o.input)
        return arrays, arrays
    if not whole:
        arrays, _ = build_inputs(program, list(o.input_values), o.inputs, o.seed, False)
        return arrays, arrays
    arrays, given = build_inputs(program, list(o.input_values), o.inputs, o.seed, True)
    split, saved = [], []
    for a, spec, sh in zip(arrays, program.params, param_shardings):
        what = f"arg{spec.index} ({spec.name})"
        if spec.index not in given:
            shape = global_shape(spec.shape, sh)
            if shape is None:  # a manual sharding: no whole form; per-device values as drawn
                if o.save_inputs:
                    raise ConverterError(f"{what}: its sharding {sh} has no whole-array form, so --save-inputs "
                                         "cannot write it with --global; run without --global to save per-device inputs")
                split.append(a)
                saved.append(a)
                continue
            a = random_values(np.random.default_rng([o.seed, spec.index]), spec, shape)
        saved.append(a)
        split.append(split_global(a, spec.shape, sh, n, what, devices=program.local))
    return split, saved


def _assembled(outputs, program, result_shardings, n: int) -> list[np.ndarray]:
    from converter.runtime.sharding import assemble_global

    assembled, per_device_taps = [], []
    for o, spec, sh in zip(outputs, program.results, result_shardings):
        whole = assemble_global(o, sh)
        if whole is None and spec.name.startswith(("tap:", "callback:", ITERATIONS)):
            whole = o  # an instruction's value has no sharding of its own: per device
            per_device_taps.append(spec.name)
        elif whole is None:
            print(f"warning: out{spec.index}: the dump gives no sharding for this output; it is written "
                  f"per device (leading axis of {n})", file=sys.stderr)
            whole = o
        assembled.append(whole)
    if per_device_taps:
        print(f"note: {len(per_device_taps)} tap(s) carry no sharding in the dump and are written per device "
              f"(leading axis of {n}): {', '.join(per_device_taps[:4])}{' …' if len(per_device_taps) > 4 else ''}",
              file=sys.stderr)
    return assembled
def _print_asserts(program, outputs) -> None:
    """The dump's __xla_gpu_assert checks (removed: StableHLO cannot stop a program): whether
    each predicate held in this run; a loud warning for each that failed (the exit status
    stays that of the run: its outputs are still computed)."""
    from converter.importer.callbacks import assert_sites_of

    sites = assert_sites_of(program.module)
    if not sites:
        return
    by_key = {spec.name: arr for spec, arr in zip(program.results, outputs)}
    print("\nGPU asserts (__xla_gpu_assert; not enforced here, the GPU program stops where one fails):")
    for site in sites:
        where = ", ".join(x for x in (site.source, site.op_name) if x) or site.name
        arr = by_key.get(site.label)
        if arr is None:
            print(f"  assert {site.message!r} ({where}): {site.label}")
            continue
        loop = " (in a loop: the last iteration's)" if site.in_loop else ""
        if bool(np.all(np.asarray(arr))):
            print(f"  assert {site.message!r} ({where}): held{loop}")
        else:
            print(f"  assert {site.message!r} ({where}): failed (predicate false){loop}")
            print(f"warning: GPU assert {site.message!r} at {where} FAILED (predicate false): the GPU program "
                  "would have stopped here; the outputs above are what runs on past it", file=sys.stderr)


def _print_callbacks(program, outputs) -> None:
    """The host callbacks of the dump (not called): what each would have received."""
    from converter.importer.callbacks import callback_sites_of

    sites = callback_sites_of(program.module)
    if not sites:
        return
    by_key = {spec.name: arr for spec, arr in zip(program.results, outputs)}
    rows = []
    for name, op_name, source, what in sites:
        if what == "has results":  # given by a --callback plug-in (or the run was refused)
            continue
        labels = [w.strip() for w in what.removesuffix(" (in a conditional branch)").split(",")] \
            if what.startswith("callback:") else []
        for label in labels or [""]:
            arr = by_key.get(label)
            values = (["x".join(map(str, arr.shape)) or "scalar", *_stats(arr)[:3]] if arr is not None
                      else [what, "", "", ""])
            rows.append([label or name, op_name + (" (in a branch)" if what.endswith("branch)") else ""), source,
                         *values])
    print("\nhost callbacks, not called (the values they would have received; in a loop, the last iteration's):")
    print(table(rows, ["output", "op_name", "source", "shape", "min", "max", "mean"]))


def snapshot_arguments(snapshot, program, path: str) -> list[np.ndarray]:
    """The recorded arguments, checked against the module's parameters."""
    from converter.common.errors import ConverterError, SourceLocation, diagnostic

    if program.num_devices > 1:
        raise ConverterError(diagnostic(SourceLocation(path), f"a snapshot records one device's arguments; the module runs on "
                             f"{program.num_devices} devices (give --inputs with every device's values)"))
    return program.check_inputs(snapshot.arguments)


def compare_with_snapshot(snapshot, program, outputs, path: str) -> int:
    """Outputs against the result the snapshot recorded: a table, exit 0 when they
    agree within the dtype's tolerance, 1 otherwise."""
    from converter.runtime.compare import compare

    own = [o for spec, o in zip(program.results, outputs) if not spec.name.startswith(("tap:", "callback:", ITERATIONS))]
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
