"""Command-line options several commands share (the pipeline, plug-ins, distributed runs)
and the option objects built from them."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any


def add_plugin_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--custom-calls", action="append", default=[], metavar="FILE.py",
                   help="a Python file registering custom-call plug-ins (converter.custom_calls.register; repeatable)")
    p.add_argument("--custom-call", action="append", default=[], metavar="TARGET=pkg.module:function",
                   help="give custom-call TARGET the meaning of a JAX function (repeatable)")
    p.add_argument("--callback", action="append", default=[], metavar="KEY=pkg.module:function",
                   help="give the host callback (pure_callback / io_callback) with op_name KEY, or source "
                        "location KEY=file.py:LINE, the meaning of a JAX function of its operands (repeatable)")
    p.add_argument("--custom-call-override", action="store_true",
                   help="let these plug-ins replace built-in rewrites and installed plug-ins of the same target")


def load_plugins(args) -> None:
    from passes.lib.plugins import load_file, register_spec

    for path in getattr(args, "custom_calls", []):
        load_file(path, override=args.custom_call_override)
    for item in getattr(args, "custom_call", []):
        target, _, spec = item.partition("=")
        register_spec(target, spec, override=args.custom_call_override)
    for item in getattr(args, "callback", []):
        from passes.lib.callback_plugins import register_callback_spec

        key, _, spec = item.rpartition("=")
        register_callback_spec(key, spec)


def add_pipeline_args(p: argparse.ArgumentParser) -> None:
    add_plugin_args(p)
    p.add_argument("--pipeline", default="default",
                   help="'default' (portable module), 'none' (faithful import) or pass names, comma-separated")
    p.add_argument("--keep-fusions", action="store_true",
                   help="keep each fused computation as a private function called with func.call")
    p.add_argument("--allow-custom-call", action="append", default=[], metavar="TARGET",
                   help="keep custom-calls to TARGET as they are (repeatable)")
    p.add_argument("--strict-portable", action="store_true",
                   help="also reject custom-calls only jaxlib's CPU runtime runs (LAPACK, DUCC FFT)")
    p.add_argument("--elided-constants", choices=["mark", "error", "zeros", "random"], default="mark",
                   help="constants the dump elided as {...}: 'mark' imports zeros and makes `run` refuse "
                        "unless told (default); 'error' fails; 'zeros'/'random' run with made-up values")
    p.add_argument("--dump-dir", metavar="DIR", help="write the module after the import and after each pass")
    p.add_argument("--print-ir-after-all", action="store_true", help="print the module after each pass (stderr)")
    p.add_argument("--verify-each", action="store_true",
                   help="verify the module after every pass, not once before MLIR's own passes or at the end "
                        "(names the pass that broke it)")
    add_unknown_attributes_arg(p)


def add_unknown_attributes_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-unknown-attributes", action="store_true",
                   help="keep attributes XLA's parser would reject (e.g. ones a newer XLA added) as raw text, "
                        "with a warning naming each, instead of failing; they are not interpreted")


def add_distributed_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("several processes (jax.distributed; each owns devices/P of the module's devices)")
    g.add_argument("--processes", type=int, metavar="P", help="start P local processes on loopback and run across them")
    g.add_argument("--coordinator", metavar="HOST:PORT", help="coordinator address (process 0 listens there)")
    g.add_argument("--num-processes", type=int, metavar="P", help="how many processes run the module, on all hosts")
    g.add_argument("--process-id", type=int, metavar="I", help="this process's id, 0..P-1")
    g.add_argument("--cluster", choices=["auto"], help="read coordinator, count and id from SLURM / Open MPI "
                                                        "the way jax.distributed.initialize does")
    g.add_argument("--outputs-per-process", action="store_true",
                   help="each process writes OUT.p<i>.npz with its devices' rows and device_ids "
                        "instead of gathering every output to process 0")
    g.add_argument("--heartbeat-timeout", type=int, default=30, metavar="S",
                   help="seconds after which a silent process is taken for dead and every process stops (default 30)")
    g.add_argument("--timeout", type=float, metavar="S", help="with --processes: stop every process after S seconds")
    p.add_argument("--reduction-order", choices=["group", "native"], default="group",
                   help="how float all-reduces/reduce-scatters sum across devices: group (default) folds in group "
                        "order, the same bits in one process or several, which may differ from XLA's own order in the "
                        "last bits; native runs XLA's own collectives (XLA's bits; one process only)")


def refuse_native_reductions_across_processes(args) -> str | None:
    """Why --reduction-order native cannot be used with these arguments, or None."""
    if getattr(args, "reduction_order", "group") != "native":
        return None
    several = [f for f in ("processes", "num_processes", "coordinator", "cluster") if getattr(args, f, None)]
    if several:
        return (f"--reduction-order native with --{several[0].replace('_', '-')}: XLA's own order is that of one "
                "process's collectives; across processes gloo sums in its own order (use the default, group)")
    return None


def add_tap_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tap", action="append", default=[], metavar="NAME[,NAME...]",
                   help="also return the value of these HLO instructions (fused ones included; inside a while "
                        "loop the last iteration's value), written as tap:NAME (repeatable)")
    p.add_argument("--tap-regex", metavar="REGEX", help="tap every instruction whose name matches REGEX")
    p.add_argument("--tap-all", action="store_true", help="tap every instruction of the entry computation")
    p.add_argument("--tap-iterations", metavar="all|N|A:B",
                   help="record taps inside while loops at every iteration (all: the trip count must be known), "
                        "iteration N, or iterations A..B-1, stacked on a leading axis per enclosing loop")


def add_input_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", dest="input_values", action="append", default=[], metavar="ARG=VALUE",
                   help="one argument: argN=@x.npy, argN=2x3xf32=1,2,3,4,5,6 (one value: every element), "
                        "or @in.npz for several (by parameter index argN or name); others from --inputs or random")
    p.add_argument("--save-inputs", metavar="IN.npz",
                   help="write the inputs the run used (random or given), keyed arg0..argN as --inputs reads them "
                        "(per device; whole arrays with --global), so that `run --inputs IN.npz` repeats it exactly")
    p.add_argument("--print-literals", nargs="?", const="summary", choices=["summary", "full"],
                   help="print the output values: numpy's summary (default) or every element ('full')")
    p.add_argument("--iterations", type=int, default=1, metavar="N",
                   help="execute N times and print timing statistics (min, median, mean, max)")


# What the option builders read from a command's arguments, with the value a command that
# does not have the option means (`convert` has no --seed, `compare` no --tap, ...).
_ABSENT: dict[str, object] = {
    "tap": [], "tap_regex": None, "tap_all": False, "tap_iterations": None, "seed": 0, "verify_each": False,
    "reduction_order": "group", "dump_dir": None, "print_ir_after_all": False, "dump": None, "input": "",
    "command": "", "keep_fusions": False, "elided_constants": "mark", "allow_custom_call": [],
    "strict_portable": False, "allow_unknown_attributes": False, "pipeline": "default",
}


def _arg(args: argparse.Namespace, name: str):
    return vars(args).get(name, _ABSENT[name])


def taps_from_args(args: argparse.Namespace):
    """The TapRequest that --tap, --tap-regex, --tap-all and --tap-iterations name, or None."""
    from converter.common.errors import UsageError
    from converter.importer.taps import TapRequest, parse_tap_iterations

    names = [n for group in _arg(args, "tap") or [] for n in group.split(",") if n.strip()]
    request = TapRequest(names, _arg(args, "tap_regex"), bool(_arg(args, "tap_all")))
    selection = _arg(args, "tap_iterations")
    if selection is not None:
        if not request:
            raise UsageError("--tap-iterations: give the instructions too (--tap, --tap-regex or --tap-all)")
        request.iterations = parse_tap_iterations(selection)
    return request or None


def process_group_from_args(args: argparse.Namespace):
    """The process group that `run`'s options name, or None for a run in one process."""
    from converter.common.errors import UsageError
    from converter.runtime.distributed import ProcessGroup, detect_cluster

    given = [args.coordinator is not None, args.num_processes is not None, args.process_id is not None]
    if args.cluster == "auto":
        if any(given):
            raise UsageError("--cluster auto reads the coordinator, count and id itself; give none of them")
        return detect_cluster()
    if not any(given):
        return None
    if not all(given):
        raise UsageError("a run over several processes needs --coordinator, --num-processes and --process-id together")
    return ProcessGroup(args.coordinator, args.num_processes, args.process_id)


def convert_options_from_args(args: argparse.Namespace):
    """The one ConvertOptions value a command's arguments name (the layers below never see
    the arguments themselves)."""
    from converter.importer.core import ImportOptions
    from converter.runtime.convert import ConvertOptions
    from passes import PassOptions

    imports = ImportOptions(keep_fusions=_arg(args, "keep_fusions"), elided_constants=_arg(args, "elided_constants"),
                            seed=_arg(args, "seed"), taps=taps_from_args(args),
                            report_callbacks=_arg(args, "command") == "run")
    passes = PassOptions(allow_custom_calls=set(_arg(args, "allow_custom_call")),
                         strict_portable=_arg(args, "strict_portable"),
                         path=_arg(args, "dump") or _arg(args, "input"), verify_each=_arg(args, "verify_each"),
                         reduction_order=_arg(args, "reduction_order"))
    return ConvertOptions(pipeline=_arg(args, "pipeline"), import_options=imports, pass_options=passes,
                          allow_unknown_attributes=_arg(args, "allow_unknown_attributes"),
                          dump_dir=_arg(args, "dump_dir"),
                          print_ir_after_all=sys.stderr if _arg(args, "print_ir_after_all") else None)


@dataclass(frozen=True)
class RunOptions:
    """Everything `run` was asked to do, as one value (built from the command line by
    `run_options_from_args`, or by a Python caller)."""

    input: str
    convert: Any  # ConvertOptions
    # Inputs: an .npz (--inputs), single arguments (--input ARG=VALUE), random ones from `seed`.
    inputs: str | None = None
    input_values: tuple[str, ...] = ()
    seed: int = 0
    # Whole arrays in and out, split and assembled by the dump's shardings (--global).
    global_arrays: bool = False
    shardings_from: str | None = None
    engine: str = "jaxlib"  # or "iree"
    compile_only: bool = False
    skip_memory_check: bool = False
    iterations: int = 1
    outputs: str | None = None
    save_inputs: str | None = None
    print_literals: str | None = None
    # `--find-nonfinite[=MODE]`: None, or the search's mode (converter.tools.nonfinite.MODES).
    find_nonfinite: str | None = None
    # Several processes: launched here (`processes`, `timeout`), or joined (`group`).
    processes: int | None = None
    timeout: float | None = None
    group: Any = None  # converter.runtime.distributed.ProcessGroup
    heartbeat_timeout: int = 30
    outputs_per_process: bool = False
    # The command line (what launched processes run) and whether this process is the
    # command's own (then the work runs in a child Ctrl-C stops at once).
    argv: tuple[str, ...] = ()
    own_process: bool = False


def run_options_from_args(args: argparse.Namespace) -> RunOptions:
    from converter.common.errors import UsageError

    if args.iterations < 1:
        raise UsageError(f"--iterations {args.iterations}: give a count of 1 or more")
    group = process_group_from_args(args)
    if args.save_inputs and (args.processes or group is not None):
        raise UsageError("--save-inputs runs in one process (each of several holds only its devices' rows)")
    return RunOptions(
        input=args.input, convert=convert_options_from_args(args), inputs=args.inputs,
        input_values=tuple(args.input_values), seed=args.seed, global_arrays=args.global_arrays,
        shardings_from=args.shardings_from, engine=args.engine, compile_only=args.compile_only,
        skip_memory_check=args.skip_memory_check, iterations=args.iterations, outputs=args.outputs,
        save_inputs=args.save_inputs, print_literals=args.print_literals, find_nonfinite=args.find_nonfinite,
        processes=args.processes, timeout=args.timeout, group=group, heartbeat_timeout=args.heartbeat_timeout,
        outputs_per_process=args.outputs_per_process, argv=tuple(getattr(args, "argv", ())),
        own_process=bool(getattr(args, "own_process", False)))


# Every flag naming a file or folder a command writes: (attribute, flag, is a folder).
OUTPUT_FLAGS = (("output", "-o/--output", False), ("outputs", "--outputs", False), ("save_inputs", "--save-inputs", False),
                ("plot", "--plot", False), ("html", "--html", False), ("dump_dir", "--dump-dir", True))


def check_output_args(args) -> None:
    """Refuse, before any work, an output path that cannot be written (a bad command line):
    a run of minutes must not end in 'no such directory'."""
    from converter.common.errors import UsageError
    from converter.common.files import output_path_problem

    for attr, flag, folder in OUTPUT_FLAGS:
        path = getattr(args, attr, None)
        if not path or path == "-" and not folder:
            continue
        problem = output_path_problem(path, directory_ok=folder)
        if problem:
            raise UsageError(f"{flag} {path}: cannot write there: {problem}")
