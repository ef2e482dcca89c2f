"""Command-line options several commands share (the pipeline, plug-ins, distributed runs)
and the option objects built from them."""

from __future__ import annotations

import argparse


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


def pass_options_from_args(args):
    from passes import PassOptions

    return PassOptions(allow_custom_calls=set(args.allow_custom_call), strict_portable=args.strict_portable,
                       path=getattr(args, "dump", None) or getattr(args, "input", ""),
                       verify_each=getattr(args, "verify_each", False),
                       reduction_order=getattr(args, "reduction_order", "group"))


def import_options_from_args(args):
    from converter.importer.core import ImportOptions

    from converter.importer.taps import request_from_args

    return ImportOptions(keep_fusions=args.keep_fusions, elided_constants=args.elided_constants,
                         seed=getattr(args, "seed", 0), taps=request_from_args(args),
                         report_callbacks=getattr(args, "command", "") == "run")


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
