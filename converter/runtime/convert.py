"""The conversion API under the CLI: read a dump (HLO text, one of XLA's protos, or a
StableHLO file), parse, import, and run a pass pipeline.  Everything that turns a file
into a module comes through `load_module_file`, and every pipeline runs through
`run_passes`."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from dataclasses import dataclass, field
from typing import Iterator, TextIO

from jaxlib.mlir import ir

from converter.hlo.ir import Module
from converter.hlo.parser import parse_hlo
from converter.hlo.proto import hlo_text_of
from converter.importer.core import ImportOptions, import_hlo
from converter.mlir.serialize import is_hlo_text, load_module
from passes import PassError, PassOptions, run_pipeline
from passes.lib.manager import merge_before_cse


def run_passes(module: ir.Module, pipeline: str | list[str] | None, pass_options: PassOptions | None = None, *,
               path: str = "", timings: dict[str, float] | None = None, dump_dir: str | None = None,
               print_ir_after_all: TextIO | None = None, verified_input: bool = True) -> None:
    """Run `pipeline` over `module` in place; with `timings`, add the time of the whole
    pipeline under "passes" and of each pass under "pass:NAME"."""
    from converter.mlir.module_attributes import module_devices
    from converter.runtime.program import reserve_cpu_devices

    replicas, partitions = module_devices(module)
    reserve_cpu_devices(replicas * partitions)  # before a pass (a plug-in's JAX lowering) starts JAX
    start = time.perf_counter()
    report = run_pipeline(module, pipeline, pass_options or PassOptions(path=path), dump_dir=dump_dir,
                          print_ir_after_all=print_ir_after_all, verified_input=verified_input)
    if timings is not None:
        timings["passes"] = timings.get("passes", 0.0) + time.perf_counter() - start
        for name, t in report.timings:
            timings[f"pass:{name}"] = timings.get(f"pass:{name}", 0.0) + t


def convert_module(
    hlo: Module,
    *,
    pipeline: str | list[str] | None = "default",
    keep_fusions: bool = False,
    import_options: ImportOptions | None = None,
    pass_options: PassOptions | None = None,
    dump_dir: str | None = None,
    print_ir_after_all: TextIO | None = None,
    timings: dict[str, float] | None = None,
    context: ir.Context | None = None,
) -> ir.Module:
    """Import a parsed module and run a pass pipeline over it."""
    options = import_options or ImportOptions()
    if keep_fusions:
        options.keep_fusions = True
    if options.merge_duplicates is None and dump_dir is None and print_ir_after_all is None and options.taps is None:
        # The import builds no op that cse would erase (the same module, sooner); a
        # pipeline written out pass by pass shows cse's work as it was.
        merge = merge_before_cse(pipeline)
        if merge is not None:
            options = dataclasses.replace(options, merge_duplicates=merge)
    from converter.runtime.program import reserve_cpu_devices

    reserve_cpu_devices(hlo.num_devices)  # before anything (a rule, a plug-in's lowering) starts JAX
    start = time.perf_counter()
    # Verified by the pipeline's first verification, not on its own: verifying a large
    # module costs as much as a pass.
    module = import_hlo(hlo, options, context, verify=False)
    if timings is not None:
        timings["import"] = time.perf_counter() - start
    try:
        run_passes(module, pipeline, pass_options, path=hlo.path, timings=timings, dump_dir=dump_dir,
                   print_ir_after_all=print_ir_after_all, verified_input=False)
    except PassError as e:
        if e.input_unverified:  # whose fault: an import that does not verify says so (an importer bug)
            import_hlo(hlo, options, context)
        raise
    return module


def convert_text(text: str, path: str = "<string>", *, allow_unknown_attributes: bool = False, **kwargs) -> ir.Module:
    """HLO text → StableHLO module (default pipeline unless `pipeline=` says otherwise);
    `allow_unknown_attributes` as in `parse_hlo`."""
    timings = kwargs.get("timings")
    with _cyclic_gc_paused():
        start = time.perf_counter()
        hlo = parse_hlo(text, path, allow_unknown_attributes=allow_unknown_attributes)
        if timings is not None:
            timings["parse"] = time.perf_counter() - start
        return convert_module(hlo, **kwargs)


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
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


@dataclass
class LoadedModule:
    """A converted file: the module, and for an HLO dump its text and parsed IR."""

    module: ir.Module
    hlo: Module | None = None
    hlo_text: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


def load_module_file(path: str, *, pipeline: str | list[str] | None = "default",
                     mlir_pipeline: str | list[str] | None = None, allow_unknown_attributes: bool = False,
                     context: ir.Context | None = None, **kwargs) -> LoadedModule:
    """An HLO dump (text, or one of XLA's module protos or snapshots), converted with
    `pipeline`, or a StableHLO file (.mlir text, bytecode or portable artifact) run through
    `mlir_pipeline` (default: `pipeline`, a no-op for a module that is already portable).
    Other keywords go to `convert_module`."""
    with _cyclic_gc_paused():
        return _load_module_file(path, pipeline, mlir_pipeline, allow_unknown_attributes, context, **kwargs)


def _load_module_file(path: str, pipeline, mlir_pipeline, allow_unknown_attributes: bool,
                      context: ir.Context | None, **kwargs) -> LoadedModule:
    with open(path, "rb") as f:
        data = f.read()
    timings: dict[str, float] = kwargs.pop("timings", None) or {}
    start = time.perf_counter()
    proto_text = hlo_text_of(data, path)  # XLA's module protos and snapshots: as HLO text
    if proto_text is not None:
        data = proto_text.encode()
        timings["decode proto"] = time.perf_counter() - start
    if is_hlo_text(data):
        text = proto_text if proto_text is not None else data.decode("utf-8", errors="replace")
        start = time.perf_counter()
        hlo = parse_hlo(text, path, allow_unknown_attributes=allow_unknown_attributes)
        timings["parse"] = time.perf_counter() - start
        module = convert_module(hlo, pipeline=pipeline, timings=timings, context=context, **kwargs)
        return LoadedModule(module, hlo, text, timings)
    start = time.perf_counter()
    module = load_module(data, path, context)
    timings["parse"] = time.perf_counter() - start
    run_passes(module, pipeline if mlir_pipeline is None else mlir_pipeline, kwargs.get("pass_options"),
               path=path, timings=timings, dump_dir=kwargs.get("dump_dir"),
               print_ir_after_all=kwargs.get("print_ir_after_all"))
    return LoadedModule(module, None, None, timings)


def convert_file(path: str, **kwargs) -> ir.Module:
    """A dump file (HLO text, one of XLA's protos, or StableHLO) → StableHLO; keywords as
    in `load_module_file`."""
    return load_module_file(path, **kwargs).module
