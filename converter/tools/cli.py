"""The `hlo-roundtrip` command line: a thin layer over the Python API."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Callable

# jaxlib's C++ logging (device lists at INFO) is noise on a command line; it reads this
# when jaxlib loads, which happens only after this module is imported.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

EXIT_OK, EXIT_INPUT, EXIT_USAGE = 0, 1, 2

from converter.tools.options import (  # noqa: E402  (argparse only; no jaxlib import)
    add_distributed_args,
    add_input_args,
    add_pipeline_args,
    add_plugin_args,
    add_tap_args,
    add_unknown_attributes_arg,
    check_output_args,
    convert_options_from_args,
    load_plugins,
    taps_from_args,
)


def _version() -> str:
    # The installed distribution's directory names its version (PEP 376/627), which is what
    # importlib.metadata would read first on sys.path; importing that module (its e-mail
    # header parser, pathlib, zipfile) costs more than the rest of `--version`.
    import glob

    for entry in sys.path:
        for found in glob.glob(os.path.join(glob.escape(entry or "."), "hlo_roundtrip-*.dist-info")):
            return os.path.basename(found)[len("hlo_roundtrip-"):-len(".dist-info")]
    from importlib import metadata

    try:
        return metadata.version("hlo-roundtrip")
    except metadata.PackageNotFoundError:  # run from a checkout without installing
        return "0.1.0 (not installed)"


class _Parser(argparse.ArgumentParser):
    """argparse with a suggestion for a misspelled choice (Python's own `suggest_on_error`
    is 3.14+); subcommands' parsers are of this class too (add_subparsers copies it)."""

    @property
    def version(self) -> str:
        """What `--version` prints (argparse's version action reads it when the option is
        given): the installed metadata is read then, not at every start."""
        return f"hlo-roundtrip {_version()}"

    def error(self, message: str):  # type: ignore[override]
        from converter.common.suggest import did_you_mean

        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            message += did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(2)))
        super().error(message)


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [o for o in parser._option_string_actions if o.startswith("--")]  # noqa: SLF001


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> None:
    """Refuse the arguments no option took, from the parser of the subcommand they were given
    to (its usage line), suggesting the option each misspelled one was meant to be; exit 2."""
    from converter.common.suggest import close_names

    command = getattr(args, "command", None)
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    owner = subparsers[0].choices[command] if command and subparsers else parser
    known = _option_strings(owner) + [o for o in _option_strings(parser) if o not in ("--help", "--version")]
    hints = []
    for arg in extras:
        if arg.startswith("-"):
            flag = arg.split("=", 1)[0]
            close = close_names(flag, known, n=1, cutoff=0.6)
            hints.append(f"{flag}: did you mean {' or '.join(close)}?" if close
                         else f"{flag}: `hlo-roundtrip {command or ''} --help` lists the options".replace("  ", " "))
    owner.error(f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else ""))


def _unknown_options(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[str | None, list[str]]:
    """The subcommand named in argv and the `--options` it has none of (nor abbreviates): found
    before parsing, so that a misspelled option is named even where argparse would first
    complain of a required one it then lacks (`extract x.hlo --orot`)."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    choices = subparsers[0].choices if subparsers else {}
    command = next((a for a in argv if a in choices), None)
    owner = choices[command] if command else parser
    known = _option_strings(owner) + _option_strings(parser)
    words = argv[:argv.index("--")] if "--" in argv else argv
    return command, [a for a in words if a.startswith("--") and len(a) > 2
                     and not any(k.startswith(a.split("=", 1)[0]) for k in known)]


# The subcommands whose options live beside their code (modules that import the HLO IR): a
# command line naming another command does not import them (see `build_parser`).
# command -> (its module, the function adding its parser, whether it takes the pipeline options).
_DEFINED_BESIDE_THEIR_CODE = {
    "compare": ("converter.tools.compare", "add_compare_parser", True),
    "extract": ("converter.tools.extract_command", "add_extract_parser", True),
    "diff": ("converter.tools.diff", "add_diff_parser", False),
    "bisect": ("converter.tools.bisect", "add_bisect_parser", True),
    "view": ("converter.tools.graph", "add_view_parser", True),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the `command` a command line names, the other commands
    whose options are defined beside their code get a bare entry (their name only), so that
    starting one command does not import every other's module."""
    parser = _Parser(
        prog="hlo-roundtrip",
        description="Turn XLA HLO text dumps (TPU, GPU, CPU; optimized, fused, laid out) into portable "
                    "StableHLO that recompiles and runs on CPU.")
    parser.add_argument("--debug", action="store_true",
                        help="show Python tracebacks on errors (accepted anywhere on the command line)")
    parser.add_argument("--version", action="version")  # the text: _Parser.version
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("convert", help="HLO text → StableHLO (.mlir, bytecode or portable artifact)")
    p.add_argument("dump", help="HLO text dump")
    p.add_argument("-o", "--output", help="output file (default, or '-': stdout)")
    p.add_argument("--emit", choices=["mlir", "bytecode", "portable"], default="mlir")
    p.add_argument("--target-version", help="StableHLO version of a portable artifact (default: what consumers of the last 12 weeks read)")
    p.add_argument("--no-debug-info", action="store_true", help="print without locations")
    add_pipeline_args(p)

    p = sub.add_parser("run", help="convert (if HLO), compile with jaxlib for CPU, execute, report")
    p.add_argument("input", help="HLO text dump, XLA's HloModuleProto / HloProto / HloSnapshot (.pb), "
                                 "or .mlir / .mlirbc / portable artifact")
    p.add_argument("--inputs", metavar="IN.npz", help="inputs keyed arg0..argN (default: random from --seed)")
    p.add_argument("--outputs", metavar="OUT.npz", help="write outputs keyed out0..outM")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--compile-only", action="store_true", help="compile, report memory, do not execute")
    p.add_argument("--engine", choices=["jaxlib", "iree"], default="jaxlib",
                   help="compile and run with jaxlib's XLA CPU client (default) or IREE's llvm-cpu target "
                        "(the `iree` extra; single-device modules)")
    p.add_argument("--global", dest="global_arrays", action="store_true",
                   help="inputs are whole arrays: split them per device by each parameter's sharding, "
                        "and assemble outputs by the root's sharding")
    p.add_argument("--shardings-from", metavar="BEFORE_OPT.txt",
                   help="with --global: the shardings the dump lacks, from the same module before optimizations "
                        "(default: its *.before_optimizations.txt sibling, when there)")
    p.add_argument("--skip-memory-check", action="store_true",
                   help="execute even when the compiled module's memory estimate exceeds the memory available")
    add_distributed_args(p)
    add_tap_args(p)
    from converter.tools.nonfinite import add_nonfinite_args

    add_nonfinite_args(p)
    add_input_args(p)
    add_pipeline_args(p)

    p = sub.add_parser("inspect", help="summarize a dump: devices, parameters, opcodes, custom-calls, collectives")
    p.add_argument("dump")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    add_plugin_args(p)
    add_unknown_attributes_arg(p)

    p = sub.add_parser("passes", help="list the passes with a line each and their files, and the custom-call plug-ins")
    p.add_argument("--targets", action="store_true",
                   help="list instead every custom-call target the converter rewrites, with the pass or plug-in "
                        "that does ('*': any target with that prefix)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also what each pass declares it keeps of the module (passes/lib/facts.py)")
    p.add_argument("--markdown", action="store_true",
                   help="with --targets: a Markdown table (target, what it becomes, where), as docs/backend_calls.md")
    add_plugin_args(p)

    sub.add_parser("rules", help="list every HLO opcode the importer reads, with the file of its import rule")

    for name, (module, adder, pipeline) in _DEFINED_BESIDE_THEIR_CODE.items():
        if command is None or command == name:
            import importlib

            getattr(importlib.import_module(module), adder)(sub)
            if pipeline:
                add_pipeline_args(sub.choices[name])
        else:
            sub.add_parser(name)

    p = sub.add_parser("export", help="StableHLO → HLO text through jaxlib; with --emit jax, a module (taps as "
                                      "extra results) that plain JAX runs on a TPU/GPU")
    p.add_argument("input")
    p.add_argument("-o", "--output", help="output file (default, or '-': stdout)")
    p.add_argument("--emit", choices=["hlo", "portable", "jax"], default="hlo",
                   help="hlo: HLO text (default); portable: StableHLO portable artifact; jax: a serialized "
                        "jax.export.Exported (jax.export.deserialize(...).call(*inputs) returns a dict keyed "
                        "out0.., tap:NAME)")
    p.add_argument("--target-version", help="StableHLO version of a portable artifact (portable, jax)")
    add_unknown_attributes_arg(p)
    add_tap_args(p)

    p = sub.add_parser("check", help="convert → run → export → convert → run, and compare")
    p.add_argument("dump")
    p.add_argument("--inputs", metavar="IN.npz", help="inputs keyed arg0..argN (default: random from --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--against-xla", action="store_true",
                   help="also run the original dump through XLA itself on CPU and compare (exit 4 when XLA cannot run it)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default: fitted to each dtype)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default: fitted to each dtype)")
    p.add_argument("--global", dest="global_arrays", action="store_true",
                   help="of a multi-device dump: --inputs holds whole arrays, split into each device's piece by "
                        "the dump's parameter shardings (as `run --global`)")
    p.add_argument("--outputs", metavar="OUT.npz", help="write the outputs of the first conversion, keyed out0..outM")
    add_pipeline_args(p)

    p = sub.add_parser("memory", help="read an XLA buffer-assignment dump: totals, the peak and what is live there",
                       description="Summarize XLA's buffer assignment (`*buffer-assignment*.txt`; newer XLA's "
                                   "split -values and -live-range files beside it are read too): bytes by kind "
                                   "and memory color, the peak of the schedule and its largest live buffers.")
    p.add_argument("buffer_assignment", metavar="BUFFER_ASSIGNMENT.txt")
    p.add_argument("--dump", metavar="DUMP.hlo",
                   help="the HLO dump it belongs to: converted, compiled for CPU by jaxlib, and its memory "
                        "analysis printed beside the original's figures")
    p.add_argument("--plot", metavar="OUT.png|OUT.svg", help="draw live bytes over the schedule, the peak marked")
    p.add_argument("--top", type=int, default=10, help="how many of the largest live buffers to list (default 10)")
    add_pipeline_args(p)
    return parser


from converter.common.files import describe_os_error, write_atomic  # noqa: E402,F401  (the CLI's writers use it)


def cmd_convert(args) -> int:
    from converter.runtime.convert import convert_file
    from converter.mlir.serialize import module_to_bytes

    if args.target_version and args.emit != "portable":
        # Only a portable artifact is versioned; MLIR text and bytecode are what this jaxlib writes.
        from converter.common.errors import UsageError

        raise UsageError(f"--target-version applies to --emit portable only (got --emit {args.emit}); add "
                         "--emit portable, or leave --target-version out")
    module = convert_file(args.dump, convert_options_from_args(args))
    _warn_elided(module)
    data = module_to_bytes(module, args.emit, debug_info=not args.no_debug_info, target_version=args.target_version)
    if args.output and args.output != "-":
        write_atomic(args.output, data)
    elif isinstance(data, bytes):
        sys.stdout.buffer.write(data)
    else:
        sys.stdout.write(data)
    return EXIT_OK


def _warn_elided(module) -> None:
    from converter.mlir.module_attributes import elided_constants

    names = elided_constants(module)
    if names:
        print(f"warning: the dump elides the values of {len(names)} constant(s) ({', '.join(names[:5])}"
              f"{', …' if len(names) > 5 else ''}); they were imported as zeros and `run` refuses to execute "
              "the module unless given --elided-constants=zeros|random", file=sys.stderr)


def cmd_inspect(args) -> int:
    import json

    from converter.hlo.parser import parse_hlo
    from converter.hlo.proto import read_hlo_text
    from converter.tools.inspect import format_summary, summarize

    summary = summarize(parse_hlo(read_hlo_text(args.dump), args.dump,
                                  allow_unknown_attributes=args.allow_unknown_attributes))
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(format_summary(summary))
    return EXIT_OK


def _source_file(fn: Callable) -> str:
    """The file defining `fn`, relative to the directory holding the packages."""
    module = sys.modules[fn.__module__]
    root = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["converter"].__file__)))
    return os.path.relpath(os.path.abspath(module.__file__), root)


def cmd_passes(args) -> int:
    import passes

    if args.targets:
        return _print_targets(markdown=args.markdown)
    default = set(passes.DEFAULT_PIPELINE)
    width = max(len(n) for n in passes.PASSES)
    for name, p in sorted(passes.PASSES.items()):
        mark = "*" if name in default else " "
        print(f"{mark} {name.ljust(width)}  {p.doc}  [{_source_file(p.run)}]")
        if args.verbose:
            print(f"  {''.ljust(width)}  {p.contract()}")
    print(f"\n* in the default pipeline: {','.join(n for n in passes.DEFAULT_PIPELINE if n in passes.PASSES)}")
    if args.verbose:
        print("(what each fact means, and who relies on it: passes/lib/facts.py)")
    from passes.lib.plugins import PLUGINS, coverage, discover

    discover()
    print("\ncustom-call plug-ins:" if PLUGINS else "\ncustom-call plug-ins: none")
    for target in sorted(PLUGINS):
        print(f"  {target}: {coverage(target)}")
    return EXIT_OK


def backend_call_rows(installed: bool = True) -> list[tuple[str, str, str]]:
    """(target, what the converter does with it, where) for every custom-call target a pass,
    a shipped plug-in or a refusal by name covers; with `installed`, also the plug-ins of
    installed packages and of this command line."""
    import passes
    from passes.lib.plugins import PLUGINS, coverage, discover

    discover()
    rows = []
    for name, p in passes.PASSES.items():
        refusals = getattr(sys.modules[p.run.__module__], "REASONS", None)
        for target in p.targets:
            if isinstance(refusals, dict) and target in refusals:
                rows.append((target, f"refused: {refusals[target]}", f"{name} ({_source_file(p.run)})"))
            else:
                rows.append((target, p.doc, f"{name} ({_source_file(p.run)})"))
    for target, plugin in PLUGINS.items():
        if passes.pass_for_target(target) is not None or not (installed or plugin.shipped):
            continue
        rows.append((target, coverage(target) or "", plugin.source))
    return sorted(rows)


def _print_targets(markdown: bool = False) -> int:
    """Every custom-call target a pass or an installed / loaded plug-in rewrites or refuses."""
    rows = backend_call_rows(installed=not markdown)
    if markdown:
        print(backend_calls_markdown(rows), end="")
        return EXIT_OK
    width = max(len(t) for t, _, _ in rows)
    for target, what, where in rows:
        print(f"{target.ljust(width)}  {where}: {what}")
    return EXIT_OK


def backend_calls_markdown(rows: list[tuple[str, str, str]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["# Backend calls the converter knows", "",
             "Every custom-call target a pass rewrites, a shipped plug-in gives a CPU meaning, or the converter",
             "refuses by name with the reason (`*`: any target with that prefix).  A target not listed is refused",
             "as unknown, naming it and its line, unless a plug-in is given (README: plug-ins).  Generated by",
             "`hlo-roundtrip passes --targets --markdown` (tests/tools/test_backend_calls_table.py keeps it current).",
             "", "| target | what the converter does | where |", "|---|---|---|"]
    lines += [f"| `{cell(t)}` | {cell(what)} | {cell(where)} |" for t, what, where in rows]
    return "\n".join(lines) + "\n"


def cmd_rules(args) -> int:
    """Every opcode the importer reads, with the file and function of its rule."""
    import converter.importer.rules  # noqa: F401  (fills the table)
    from converter.importer.registry import RULE_FACTORIES, RULES

    rows = [(opcode, _source_file(rule), rule.__name__) for opcode, rule in sorted(RULES.items())]
    width = max(len(r[0]) for r in rows)
    path_width = max(len(r[1]) for r in rows)
    for opcode, path, name in rows:
        print(f"{opcode.ljust(width)}  {path.ljust(path_width)}  {name}")
    for factory in RULE_FACTORIES:
        print(f"\n+ made by {factory.__name__} ({_source_file(factory)}): {(factory.__doc__ or '').strip().splitlines()[0]}")
    return EXIT_OK


def cmd_run(args) -> int:
    from converter.tools.run import run_command

    if args.processes:
        _check_process_count(args.input, args.processes)
    return run_command(args)


def _check_process_count(path: str, processes: int) -> None:
    """Refuse, once and before any process starts, a process count that does not divide the
    module's devices (each worker would otherwise refuse it, and print it, on its own).
    The count is the header's; a header that does not give both counts is parsed whole (the
    collectives imply the rest).  StableHLO inputs are left to the workers."""
    from converter.runtime.distributed import devices_per_process
    from converter.tools.filekind import HLO, sniff

    kind = sniff(path)
    if kind is None or kind.name != HLO:
        return
    from converter.hlo.proto import read_hlo_text

    text = read_hlo_text(path)
    header = re.match(r"\s*HloModule\b[^\n]*", text)
    counts = dict(re.findall(r"\b(replica_count|num_partitions)=(\d+)", header.group(0))) if header else {}
    if len(counts) == 2:
        num_devices = int(counts["replica_count"]) * int(counts["num_partitions"])
    else:
        from converter.hlo.parser import parse_hlo

        num_devices = parse_hlo(text, path).num_devices
    from converter.common.errors import ConverterError, SourceLocation, diagnostic

    try:
        devices_per_process(num_devices, processes)
    except ConverterError as e:
        raise ConverterError(diagnostic(SourceLocation(path), f"--processes {processes}: {e}")) from None


def cmd_export(args) -> int:
    """HLO text of a StableHLO file (.mlir, bytecode, portable artifact), or of a dump
    after conversion (the round trip's second half)."""
    from converter.runtime.convert import convert_file
    from converter.tools.export import export_for_device, export_hlo_text

    # A StableHLO file is exported as it is; a dump is converted first (with its taps).
    module = convert_file(args.input, mlir_pipeline="none", allow_unknown_attributes=args.allow_unknown_attributes,
                          taps=taps_from_args(args))
    if args.emit != "hlo":
        data = export_for_device(module, args.emit, args.target_version)
        if args.output and args.output != "-":
            write_atomic(args.output, data)
        else:
            sys.stdout.buffer.write(data)
        return EXIT_OK
    text = export_hlo_text(module)
    if args.output and args.output != "-":
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_check(args) -> int:
    from converter.tools.check import check_dump, format_report

    report = check_dump(args.dump, args.inputs, args.seed, args.against_xla, convert_options_from_args(args),
                        args.rtol, args.atol, global_arrays=args.global_arrays)
    print(format_report(report))
    if args.outputs:
        from converter.runtime.program import write_outputs

        write_outputs(args.outputs, report.outputs)
        print(f"wrote {args.outputs}")
    return report.exit_status  # 0 agree, 3 differ, 4 a comparison asked for not made (DESIGN.md §4)


def cmd_compare(args) -> int:
    from converter.tools.compare import cmd_compare as run_compare

    return run_compare(args)


def cmd_extract(args) -> int:
    from converter.tools.extract_command import cmd_extract as run_extract

    return run_extract(args)


def cmd_diff(args) -> int:
    from converter.tools.diff import cmd_diff as run_diff

    return run_diff(args)


def cmd_bisect(args) -> int:
    from converter.tools.bisect import cmd_bisect as run_bisect

    return run_bisect(args)


def cmd_view(args) -> int:
    from converter.tools.graph import cmd_view as run_view

    return run_view(args)


def cmd_memory(args) -> int:
    from converter.tools.memory import load_buffer_assignment, summarize
    from converter.tools.memory.report import format_comparison, format_summary

    if args.plot:
        from converter.tools.memory.plot import check_plot_path

        check_plot_path(args.plot)
    dump = load_buffer_assignment(args.buffer_assignment)
    program = None
    shapes = None
    if args.dump:
        from converter.runtime import program as runtime

        program = runtime.load(args.dump, convert_options_from_args(args))
        if program.hlo is not None:
            shapes = {i.name: i.shape for c in program.hlo.computations for i in c.instructions}
            named = dump.live_range.sequence if dump.live_range else [k[0] for k in dump.assigned()]
            strangers = [n for n in named if n not in shapes]
            if strangers:
                print(f"warning: {args.dump} has no instruction named {', '.join(strangers[:3])}"
                      f"{' ...' if len(strangers) > 3 else ''} ({len(strangers)} of {len(named)} in the buffer "
                      "assignment): is it the dump of the same module?", file=sys.stderr)
    summary = summarize(dump, shapes)
    print(format_summary(summary, args.top))
    if args.plot:
        from converter.tools.memory.plot import plot_live_bytes

        plot_live_bytes(summary, args.plot)
        print(f"\nplot written to {args.plot}")
    if program is not None:
        print()
        print(format_comparison(summary, program.compile_only(), program.num_devices))
    return EXIT_OK


def _native_stdout_to_stderr() -> None:
    """In a process of a multi-process run, what native code writes to stdout (gloo's
    `[Gloo] Rank i is connected to ...` lines, through std::cout) goes to stderr, and only
    Python's own output (the result table) to stdout: file descriptor 1 becomes a copy of 2,
    and sys.stdout writes to a duplicate of the original stdout."""
    sys.stdout.flush()
    results = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = open(results, "w", buffering=1, encoding=sys.stdout.encoding or "utf-8",  # noqa: SIM115
                      errors=sys.stdout.errors or "strict", closefd=True)


def _check_file_kinds(args: argparse.Namespace) -> None:
    """Refuse up front a file of a kind its command does not read (a README, an npz, an HLO
    dump given to `memory`), saying what it is and what was expected."""
    from converter.tools.filekind import BUFFER_ASSIGNMENT, HLO, MLIR, check_kind

    to_memory = {HLO: "; give it to `memory` with --dump, beside its buffer assignment"}
    files: dict[str, list[tuple[str, tuple[str, ...], dict[str, str]]]] = {
        "convert": [("dump", (HLO, MLIR), {})],
        "inspect": [("dump", (HLO,), {})],
        "check": [("dump", (HLO, MLIR), {})],
        "run": [("input", (HLO, MLIR), {})],
        "export": [("input", (HLO, MLIR), {})],
        "compare": [("dump_a", (HLO, MLIR), {}), ("dump_b", (HLO, MLIR), {})],
        "memory": [("buffer_assignment", (BUFFER_ASSIGNMENT,), to_memory), ("dump", (HLO, MLIR), {})],
        "extract": [("dump", (HLO,), {})],
        "diff": [("dump_a", (HLO,), {}), ("dump_b", (HLO,), {})],
    }
    for attr, accepted, hints in files.get(args.command, []):
        path = getattr(args, attr, None)
        if path and path != "-" and os.path.isfile(path):
            check_kind(path, args.command, accepted, hints)


def _command_named(argv: list[str]) -> str | None:
    """The command a command line names, as far as `build_parser` needs to know it: None
    (build every command's options) unless a command is named, or only `--version` is asked."""
    named = next((a for a in argv if a in COMMANDS), None)
    if named is None and argv == ["--version"]:
        return "--version"  # no command's options are needed to print the version
    return named


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "convert": cmd_convert,
    "run": cmd_run,
    "inspect": cmd_inspect,
    "passes": cmd_passes,
    "rules": cmd_rules,
    "export": cmd_export,
    "check": cmd_check,
    "memory": cmd_memory,
    "compare": cmd_compare,
    "extract": cmd_extract,
    "diff": cmd_diff,
    "bisect": cmd_bisect,
    "view": cmd_view,
}


def main(argv: list[str] | None = None) -> int:
    argv_given = argv
    argv = list(sys.argv[1:] if argv is None else argv)
    if _command_named(argv) == "run":
        # `run --find-nonfinite DUMP`: the option's value is optional (=MODE), so argparse
        # would take DUMP for it; written bare it means the default mode, whatever follows.
        argv = ["--find-nonfinite=exhaustive" if a == "--find-nonfinite" else a for a in argv]
    parser = build_parser(_command_named(argv))
    # --debug after the command (`run x.hlo --debug`) means the same as before it.
    debug = "--debug" in argv
    command, unknown = _unknown_options(parser, [a for a in argv if a != "--debug"])
    if unknown:
        _unrecognized(parser, argparse.Namespace(command=command), unknown)
    args, extras = parser.parse_known_args([a for a in argv if a != "--debug"])
    if extras:
        _unrecognized(parser, args, extras)
    args.debug = debug
    args.argv = argv
    args.own_process = argv_given is None  # the process is this command: its work may run in a stoppable child
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    import warnings

    from converter.common.errors import ConverterError, ConverterWarning, UsageError

    show = warnings.showwarning

    def show_warning(message, category, *rest, **kw):  # ours are complete messages
        if issubclass(category, ConverterWarning):
            print(str(message), file=sys.stderr)
        else:
            show(message, category, *rest, **kw)

    warnings.showwarning = show_warning
    warnings.simplefilter("always", ConverterWarning)

    for item in getattr(args, "custom_call", []):
        if not re.fullmatch(r"[^=\s]+=[\w.]+:[\w.]+", item):
            parser.error(f"--custom-call {item!r}: expected TARGET=pkg.module:function")
    for item in getattr(args, "callback", []):
        if not re.fullmatch(r".+=[\w.]+:[\w.]+", item):
            parser.error(f"--callback {item!r}: expected KEY=pkg.module:function (KEY: op_name or file.py:LINE)")
    if getattr(args, "process_id", None) is not None or getattr(args, "cluster", None):
        _native_stdout_to_stderr()
    try:
        check_output_args(args)  # before any work: a bad output path is a bad command line
        _check_file_kinds(args)
        if getattr(args, "custom_calls", None) or getattr(args, "custom_call", None) or getattr(args, "callback", None):
            load_plugins(args)
        return COMMANDS[args.command](args)
    except UsageError as e:
        if args.debug:
            raise
        print(f"hlo-roundtrip {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ConverterError as e:
        if args.debug:
            raise
        print(str(e), file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:
        # The reader went away (`inspect ... | head -1`): stop quietly, and keep Python
        # from reporting the failed flush of stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("hlo-roundtrip: output closed early (broken pipe)", file=sys.stderr)
        return EXIT_INPUT
    except OSError as e:
        if args.debug:
            raise
        print(f"error: {describe_os_error(e)}", file=sys.stderr)
        return EXIT_INPUT
    except MemoryError:
        if args.debug:
            raise
        print("error: out of memory (the input asks for more than this machine has)", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - a bug of ours: one line, the traceback under --debug
        if args.debug:
            raise
        print(f"error: internal error ({type(e).__name__}: {e}); rerun with --debug for the traceback and "
              "please report it", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
