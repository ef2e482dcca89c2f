"""Conversion speed, side by side with XLA's own C++ parser.

    python benchmarks/conversion_benchmark.py [--sizes 1,2,4,8,16,38] [--repeat 3]

For the MaxText sample (2.6 MB) and for modules made of k renamed copies of it (to show
that time grows linearly with the dump's size, up to ~100 MB), prints the best of
`--repeat` runs of: XLA's parser (`jaxlib._hlo.hlo_module_from_text`), our parser,
our importer, the default pipeline (GPU custom-calls that no pass rewrites yet are
allowed through), writing the MLIR text, and the whole conversion (all of these in one
go, as `convert` does); and the ratio to XLA's parser.
"""

from __future__ import annotations

import argparse
import gc
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

SAMPLE = ROOT / "samples" / "gpu_maxtext_train_step_te_fused_attention.hlo"


def replicate(text: str, copies: int, path: str = str(SAMPLE)) -> str:
    """A module holding `copies` copies of a dump (every computation and instruction name
    suffixed per copy, the stack-frame tables kept); the new entry calls each copy's
    entry and returns a tuple."""
    import re

    from converter.hlo.parser import parse_hlo
    from converter.hlo.printer import computation_to_text, shape_to_text, stack_frames_to_text

    if copies == 1:
        return text
    base = parse_hlo(text, path)
    for comp in base.computations:
        comp.signature = None  # signatures would need renaming too; they are optional
    body = "\n\n".join(computation_to_text(c) for c in base.computations).replace("ENTRY %", "%")
    name_ref = re.compile(r"%([A-Za-z_][\w.\-]*)")
    parts = [f"HloModule {base.name}_x{copies}, num_partitions={base.num_partitions}"]
    if not base.stack_frames.is_empty():
        # The copies' stack_frame_ids name the dump's frames: without the tables XLA's
        # parser would warn of an invalid id once per instruction (and be slowed by it).
        parts.append(stack_frames_to_text(base.stack_frames))
    params, calls, results = [], [], []
    n_param = 0
    root_shape = shape_to_text(base.entry.root.shape)
    for k in range(copies):
        parts.append(name_ref.sub(lambda m, k=k: f"%{m.group(1)}.k{k}", body))
        args = []
        for p in base.entry.parameters:
            params.append(f"  %p{n_param} = {shape_to_text(p.shape)} parameter({n_param})")
            args.append(f"%p{n_param}")
            n_param += 1
        calls.append(f"  %call{k} = {root_shape} call({', '.join(args)}), to_apply=%{base.entry.name}.k{k}")
        results.append(f"%call{k}")
    entry = ["ENTRY %main {", *params, *calls,
             f"  ROOT %out = ({', '.join([root_shape] * copies)}) tuple({', '.join(results)})", "}"]
    return "\n\n".join(parts) + "\n\n" + "\n".join(entry) + "\n"


def best_of(fn, repeat: int, setup=None, gc_paused: bool = True) -> float:
    """The best time of `repeat` calls of fn(), or of fn(setup()) with setup untimed; with
    Python's cyclic collector paused, as `convert` pauses it (a stage timed on its own
    would otherwise pay for collections that scan the whole parsed module), unless
    `gc_paused` is False (`convert` itself, timed as the CLI runs it)."""
    times = []
    for _ in range(repeat):
        arg = setup() if setup is not None else None
        gc.collect()
        if gc_paused:
            gc.disable()
        try:
            start = time.perf_counter()
            fn() if setup is None else fn(arg)
            times.append(time.perf_counter() - start)
        finally:
            gc.enable()
        del arg
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,2,4,8,16,38", help="copies of the sample per module")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--repeat-large", type=int, default=1, help="repeats for modules of 30 MB or more")
    parser.add_argument("--dump", default=str(SAMPLE), help="the dump to copy (default: the MaxText sample)")
    args = parser.parse_args()

    import jaxlib._hlo as xla_hlo

    from converter.runtime.convert import convert_text
    from converter.hlo.parser import parse_hlo
    from converter.importer.core import ImportOptions, import_hlo
    from converter.mlir.serialize import module_to_bytes
    from passes import PassOptions, run_pipeline
    from passes.lib.manager import merge_before_cse

    allow = PassOptions(allow_custom_calls={"__cublas$lt$matmul", "te_fused_attn_forward_ffi",
                                            "te_fused_attn_backward_ffi"})

    # The import as `convert` does it for the default pipeline (duplicates merged).
    import_options = ImportOptions(merge_duplicates=merge_before_cse("default"))

    def converted(hlo):
        module = import_hlo(hlo, import_options)
        run_pipeline(module, "default", allow)
        return module

    def convert(module_text: str) -> str:  # what `convert` does, less reading and writing the files
        return module_to_bytes(convert_text(module_text, "bench.hlo", pass_options=allow), "mlir")

    text = pathlib.Path(args.dump).read_text()
    print(f"{'copies':>6} {'MB':>7} {'xla parse':>10} {'parse':>8} {'import':>8} {'passes':>8} {'write':>8} "
          f"{'convert':>8} {'s/MB':>6} {'x xla':>6}")
    for k in [int(x) for x in args.sizes.split(",")]:
        module_text = replicate(text, k, args.dump)
        mb = len(module_text.encode()) / 1e6
        repeat = args.repeat if mb < 30 else args.repeat_large
        t_xla = best_of(lambda: xla_hlo.hlo_module_from_text(module_text), repeat)
        t_parse = best_of(lambda: parse_hlo(module_text, "bench.hlo"), repeat)
        hlo = parse_hlo(module_text, "bench.hlo")
        t_import = best_of(lambda: import_hlo(hlo, import_options), repeat)
        t_passes = best_of(lambda m: run_pipeline(m, "default", allow), repeat, setup=lambda: import_hlo(hlo, import_options))
        module = converted(hlo)
        t_write = best_of(lambda: module_to_bytes(module, "mlir"), repeat)
        module = hlo = None  # free the 100 MB module before timing the whole conversion
        t_convert = best_of(lambda: convert(module_text), repeat, gc_paused=False)
        print(f"{k:>6} {mb:>7.1f} {t_xla:>9.3f}s {t_parse:>7.3f}s {t_import:>7.3f}s {t_passes:>7.3f}s "
              f"{t_write:>7.3f}s {t_convert:>7.3f}s {t_convert / mb:>6.3f} {t_convert / t_xla:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
