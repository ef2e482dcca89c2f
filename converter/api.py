"""The Python API under the CLI: parse, convert, and (in converter.runtime) run."""

from __future__ import annotations

import contextlib
import gc
import time
from typing import Iterator, TextIO

from jaxlib.mlir import ir

from converter.hlo.ir import Module
from converter.hlo.parser import parse_hlo
from converter.importer.core import ImportOptions, import_hlo


def convert_module(
    hlo: Module,
    *,
    pipeline: str | list[str] | None = "default",
    keep_fusions: bool = False,
    import_options: ImportOptions | None = None,
    pass_options=None,
    dump_dir: str | None = None,
    print_ir_after_all: TextIO | None = None,
    timings: dict[str, float] | None = None,
    context: ir.Context | None = None,
) -> ir.Module:
    """Import a parsed module and run a pass pipeline over it."""
    from passes import PassOptions, run_pipeline

    options = import_options or ImportOptions()
    if keep_fusions:
        options.keep_fusions = True
    start = time.perf_counter()
    module = import_hlo(hlo, options, context)
    if timings is not None:
        timings["import"] = time.perf_counter() - start
    if pass_options is None:
        pass_options = PassOptions(path=hlo.path)
    start = time.perf_counter()
    report = run_pipeline(module, pipeline, pass_options, dump_dir=dump_dir, print_ir_after_all=print_ir_after_all)
    if timings is not None:
        timings["passes"] = time.perf_counter() - start
        for name, t in report.timings:
            timings[f"pass:{name}"] = t
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
        gc.enable()


def convert_file(path: str, **kwargs) -> ir.Module:
    """An HLO dump (text, or one of XLA's module protos or snapshots) → StableHLO."""
    from converter.hloproto import read_hlo_text

    return convert_text(read_hlo_text(path), path, **kwargs)
