"""The conversion API under the CLI, as the stages a run goes through:

    dump = load_dump(path, options)              # read: HLO text, one of XLA's protos, or StableHLO
    module = convert(dump, options)              # import and the conversion pipeline (default: portable)
    prepare_for_cpu(module, options)             # the passes XLA's CPU runtime needs (a named pipeline)

(then converter.runtime.program compiles and executes).  Every choice that decides what a
dump converts to is one `ConvertOptions` value; the command line's tools layer builds it
from its arguments, a Python caller from keywords (`convert_file(path, pipeline="none")`).
Every pipeline runs through `run_passes`."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence, TextIO

from jaxlib.mlir import ir

from converter.hlo.ir import Module
from converter.hlo.parser import parse_hlo
from converter.hlo.proto import hlo_text_of
from converter.importer.core import ImportOptions, import_hlo
from converter.mlir.serialize import is_hlo_text, load_module
from passes import PassError, PassOptions, cpu_runtime_pipeline, run_pipeline
from passes.lib.manager import merge_before_cse

Pipeline = str | Sequence[str] | None


@dataclass(frozen=True)
class ConvertOptions:
    """What a dump converts to, and what the conversion shows along the way."""

    # The conversion pipeline: "default" (portable), "none" (the faithful import), or pass names.
    pipeline: Pipeline = "default"
    # For a StableHLO file: the pipeline run over it (None: `pipeline`, a no-op on a portable module).
    mlir_pipeline: Pipeline = None
    import_options: ImportOptions = field(default_factory=ImportOptions)
    pass_options: PassOptions = field(default_factory=PassOptions)
    # Keep attributes XLA's parser would reject as raw text (with a warning) instead of failing.
    allow_unknown_attributes: bool = False
    # Write the module after the import and after each pass (every pipeline, the CPU one included).
    dump_dir: str | None = None
    # Print the module after each pass to this stream.
    print_ir_after_all: TextIO | None = None

    def replace(self, **changes: Any) -> "ConvertOptions":
        """A copy with `changes`: fields of this class, or of its ImportOptions or PassOptions
        (`keep_fusions=True`, `taps=...`, `allow_custom_calls={...}`, ...)."""
        own = {k: v for k, v in changes.items() if k in _FIELDS}
        imports = {k: v for k, v in changes.items() if k in _IMPORT_FIELDS and k not in own}
        passes = {k: v for k, v in changes.items() if k in _PASS_FIELDS and k not in own}
        unknown = set(changes) - set(own) - set(imports) - set(passes)
        if unknown:
            raise TypeError(f"unknown conversion option(s): {', '.join(sorted(unknown))} (fields of ConvertOptions, "
                            "ImportOptions or PassOptions)")
        options = dataclasses.replace(self, **own)
        if imports:
            options = dataclasses.replace(options, import_options=dataclasses.replace(options.import_options, **imports))
        if passes:
            options = dataclasses.replace(options, pass_options=dataclasses.replace(options.pass_options, **passes))
        if options.import_options is None:
            options = dataclasses.replace(options, import_options=ImportOptions())
        if options.pass_options is None:
            options = dataclasses.replace(options, pass_options=PassOptions())
        return options


_FIELDS = {f.name for f in dataclasses.fields(ConvertOptions)}
_IMPORT_FIELDS = {f.name for f in dataclasses.fields(ImportOptions)}
_PASS_FIELDS = {f.name for f in dataclasses.fields(PassOptions)}


def convert_options(options: ConvertOptions | None = None, **changes: Any) -> ConvertOptions:
    """`options` (default: the defaults) with keyword `changes` (see ConvertOptions.replace)."""
    return (options or ConvertOptions()).replace(**changes)


@dataclass
class Dump:
    """A dump as read from its file: HLO (text and parsed IR; a proto or snapshot is read as
    its HLO text) or an already built StableHLO module."""

    path: str
    hlo: Module | None = None
    hlo_text: str | None = None
    mlir: ir.Module | None = None


@dataclass
class LoadedModule:
    """A converted file: the module, and for an HLO dump its text and parsed IR."""

    module: ir.Module
    hlo: Module | None = None
    hlo_text: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------------------- stages
def load_dump(path: str, options: ConvertOptions | None = None, *, timings: dict[str, float] | None = None,
              context: ir.Context | None = None) -> Dump:
    """Stage 1: read a dump file.  HLO text and XLA's module protos and snapshots are parsed
    into the HLO IR; a StableHLO file (.mlir text, bytecode, portable artifact) into a module."""
    options = options or ConvertOptions()
    timings = timings if timings is not None else {}
    with open(path, "rb") as f:
        data = f.read()
    start = time.perf_counter()
    proto_text = hlo_text_of(data, path)  # XLA's module protos and snapshots: as HLO text
    if proto_text is not None:
        data = proto_text.encode()
        timings["decode proto"] = time.perf_counter() - start
    start = time.perf_counter()
    if is_hlo_text(data):
        text = proto_text if proto_text is not None else data.decode("utf-8", errors="replace")
        hlo = parse_hlo(text, path, allow_unknown_attributes=options.allow_unknown_attributes)
        timings["parse"] = time.perf_counter() - start
        return Dump(path, hlo, text)
    module = load_module(data, path, context)
    timings["parse"] = time.perf_counter() - start
    return Dump(path, mlir=module)


def convert(dump: Dump, options: ConvertOptions | None = None, *, timings: dict[str, float] | None = None,
            context: ir.Context | None = None) -> ir.Module:
    """Stage 2: an HLO dump imported and run through the conversion pipeline; a StableHLO
    file run through `mlir_pipeline` (default: `pipeline`)."""
    options = options or ConvertOptions()
    if dump.hlo is not None:
        return convert_module(dump.hlo, options, timings=timings, context=context)
    assert dump.mlir is not None
    pipeline = options.pipeline if options.mlir_pipeline is None else options.mlir_pipeline
    run_passes(dump.mlir, pipeline, options, path=dump.path, timings=timings)
    return dump.mlir


def prepare_for_cpu(module: ir.Module, options: ConvertOptions | None = None, *, path: str = "",
                    timings: dict[str, float] | None = None) -> list[str]:
    """Stage 3: the passes XLA's CPU runtime needs before it can run `module`
    (`passes.cpu_runtime_pipeline`: collectives in cross-replica form and on byte-wide
    types, float sums in group order, entry arrays of static size), run as a pipeline like
    any other (timed, written with --dump-dir, printed with --print-ir-after-all).
    Returns the passes it ran."""
    options = options or ConvertOptions()
    needed = cpu_runtime_pipeline(module, options.pass_options.reduction_order)
    if needed:
        run_passes(module, needed, options, path=path, timings=timings, stage="prepare for CPU")
    return needed


# ---------------------------------------------------------------------------- pipelines
def run_passes(module: ir.Module, pipeline: Pipeline, options: ConvertOptions | PassOptions | None = None, *,
               path: str = "", timings: dict[str, float] | None = None, verified_input: bool = True,
               stage: str = "passes") -> None:
    """Run `pipeline` over `module` in place; with `timings`, add the time of the whole
    pipeline under `stage` and of each pass under "pass:NAME".  A stage other than the
    conversion's own writes its modules (--dump-dir) into a folder of that name."""
    import os

    from converter.mlir.module_attributes import module_devices
    from converter.runtime.devices import reserve_cpu_devices

    if not isinstance(options, ConvertOptions):
        options = ConvertOptions(pass_options=options or PassOptions(path=path))
    pass_options = options.pass_options
    if path and not pass_options.path:
        pass_options = dataclasses.replace(pass_options, path=path)
    replicas, partitions = module_devices(module)
    reserve_cpu_devices(replicas * partitions)  # before a pass (a plug-in's JAX lowering) starts JAX
    dump_dir = options.dump_dir
    if dump_dir and stage != "passes":
        dump_dir = os.path.join(dump_dir, stage.replace(" ", "-"))
    start = time.perf_counter()
    report = run_pipeline(module, pipeline, pass_options, dump_dir=dump_dir,
                          print_ir_after_all=options.print_ir_after_all, verified_input=verified_input)
    if timings is not None:
        timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start
        for name, t in report.timings:
            timings[f"pass:{name}"] = timings.get(f"pass:{name}", 0.0) + t


def convert_module(hlo: Module, options: ConvertOptions | None = None, *, timings: dict[str, float] | None = None,
                   context: ir.Context | None = None, **changes: Any) -> ir.Module:
    """Import a parsed module and run the conversion pipeline over it; keyword `changes` as
    in ConvertOptions.replace (`pipeline="none"`, `keep_fusions=True`, ...)."""
    options = convert_options(options, **changes)
    import_options = options.import_options
    if (import_options.merge_duplicates is None and options.dump_dir is None and options.print_ir_after_all is None
            and import_options.taps is None):
        # The import builds no op that cse would erase (the same module, sooner); a
        # pipeline written out pass by pass shows cse's work as it was.
        merge = merge_before_cse(options.pipeline)
        if merge is not None:
            import_options = dataclasses.replace(import_options, merge_duplicates=merge)
    from converter.runtime.devices import reserve_cpu_devices

    reserve_cpu_devices(hlo.num_devices)  # before anything (a rule, a plug-in's lowering) starts JAX
    start = time.perf_counter()
    # Verified by the pipeline's first verification, not on its own: verifying a large
    # module costs as much as a pass.
    module = import_hlo(hlo, import_options, context, verify=False)
    if timings is not None:
        timings["import"] = time.perf_counter() - start
    try:
        run_passes(module, options.pipeline, options, path=hlo.path, timings=timings, verified_input=False)
    except PassError as e:
        if e.input_unverified:  # whose fault: an import that does not verify says so (an importer bug)
            import_hlo(hlo, import_options, context)
        raise
    return module


def convert_text(text: str, path: str = "<string>", options: ConvertOptions | None = None, *,
                 timings: dict[str, float] | None = None, context: ir.Context | None = None,
                 **changes: Any) -> ir.Module:
    """HLO text → StableHLO module (default pipeline unless `pipeline=` says otherwise);
    keyword `changes` as in ConvertOptions.replace."""
    options = convert_options(options, **changes)
    with cyclic_gc_paused():
        start = time.perf_counter()
        hlo = parse_hlo(text, path, allow_unknown_attributes=options.allow_unknown_attributes)
        if timings is not None:
            timings["parse"] = time.perf_counter() - start
        return convert_module(hlo, options, timings=timings, context=context)


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cycle collector off for a conversion: the parsed IR of a large dump is
    millions of objects, which every full collection scans again (about a second each
    at 100 MB), and conversion makes almost no reference cycles (what it makes is
    collected afterwards)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            # What the conversion made and keeps (the parsed IR of a large dump is millions
            # of objects) goes to the oldest generation without a scan: otherwise the first
            # young collection after this scans all of it (7 ms at 2.6 MB, ~0.3 s at 100 MB).
            # Nobody else's frozen objects are thawed: with some frozen, this step is left out
            # (also on CPython 3.12, which starts with a few hundred frozen objects of its own).
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def load_module_file(path: str, options: ConvertOptions | None = None, *, timings: dict[str, float] | None = None,
                     context: ir.Context | None = None, **changes: Any) -> LoadedModule:
    """Stages 1 and 2 for a file: an HLO dump (text, or one of XLA's module protos or
    snapshots) converted with `pipeline`, or a StableHLO file run through `mlir_pipeline`.
    Keyword `changes` as in ConvertOptions.replace."""
    options = convert_options(options, **changes)
    timings = timings if timings is not None else {}
    with cyclic_gc_paused():
        dump = load_dump(path, options, timings=timings, context=context)
        module = convert(dump, options, timings=timings, context=context)
    return LoadedModule(module, dump.hlo, dump.hlo_text, timings)


def convert_file(path: str, options: ConvertOptions | None = None, **changes: Any) -> ir.Module:
    """A dump file (HLO text, one of XLA's protos, or StableHLO) → StableHLO; keywords as
    in `load_module_file`."""
    return load_module_file(path, options, **changes).module
