"""`extract` of a backend custom-call (cuBLAS/cuBLASLt GEMMs, cuDNN convolutions,
cuSOLVER/LAPACK, TopK, TPU calls, ...): the cut is converted as `run` converts it and
written back as the HLO jaxlib lowers the StableHLO to, which XLA itself parses and runs
on CPU (jaxlib's LAPACK FFI calls in a jaxlib process).

Oracle: XLA (converter.runtime.xla_oracle.run_with_xla: XLA's own HLO parser and
importer, then jaxlib's CPU compiler) running the written text on the operands' values
of the full run, compared bit for bit with the tap of the call in the full run (`run
--tap`).  No tolerance: the cut is the call alone, and each call converts to the same ops
in the cut as in the full run; a conversion that needs what the cut lacks is a named
refusal, never a verdict.

Every custom-call instruction of a handful of dumps by default; every catalog dump
(tests/dumps/*/*.hlo) in the slow test, which also counts exact / refused / differs
(`python -m tests.tools.test_extract_calls` prints them)."""

from __future__ import annotations

import glob
import os
import sys
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from converter.common.errors import ConverterError
from converter.hlo.parser import parse_hlo_file
from converter.importer.core import ImportOptions
from converter.importer.taps import TapRequest, tap_path
from converter.runtime.convert import convert_module
from converter.runtime.program import program_from_module
from converter.runtime.xla_oracle import run_with_xla
from converter.tools.extract import (DEVICE_DEPENDENT, ConvertedCalls, ExtractError, cut_instructions, cut_operands,
                                     extract_module)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Where the full run's compile folds a producer into the call (a pad into a convolution's
# padding, a transpose into its dimension numbers: another Eigen kernel, another order of
# the sums), the plain cut rounds differently; keeping the producers (--producers) gives
# the compiler the same program around the call.  Up to this many levels are tried.
MAX_PRODUCERS = 2


@dataclass
class CallResult:
    dump: str
    name: str
    target: str
    verdict: str  # "exact", "refused", "differs", "not run" (in a loop that ran no iteration)
    reason: str = ""
    jaxlib_targets: tuple[str, ...] = ()
    producers: int = 0  # the levels of producers kept in the module (--producers) when exact


def _leaves(by_key: dict, name: str, devices: int) -> list[np.ndarray]:
    values = [np.asarray(by_key[k]) for k in by_key if k == f"tap:{name}" or k.startswith(f"tap:{name}#")]
    return [v[0] for v in values] if devices > 1 else values


def extract_every_call(path: str, seed: int = 1) -> list[CallResult]:
    """Extract every custom-call instruction of the dump at `path` (one full run tapping
    all of them and their operands) and run each written module with XLA."""
    hlo = parse_hlo_file(path)
    dump = os.path.relpath(path, ROOT)
    results: list[CallResult] = []
    wanted: list[tuple] = []
    for comp in hlo.computations:
        for instr in comp.instructions:
            if instr.opcode != "custom-call":
                continue
            target = instr.attrs.get("custom_call_target", "?")
            ok, why, _ = tap_path(hlo, comp, False)
            if not ok:
                results.append(CallResult(dump, instr.name, target, "refused", f"no single value per run: {why}"))
                continue
            wanted.append((comp, instr, target))
    if not wanted:
        return results
    names: list[str] = []
    for comp, instr, _ in wanted:
        for producers in range(MAX_PRODUCERS + 1):
            names += [o for o in cut_operands(comp, cut_instructions(comp, instr, producers))
                      if comp.by_name[o].opcode != "constant" and _has_array(comp.by_name[o])]
        names += [instr.name] if _has_array(instr) else []
    try:
        program = program_from_module(
            convert_module(hlo, import_options=ImportOptions(taps=TapRequest(names=list(dict.fromkeys(names))))),
            hlo, path)
        outputs = program(*program.random_inputs(seed))
    except ConverterError as e:  # the dump itself does not run (a callback's dump): every call refused
        first = str(e).splitlines()[0]
        return results + [CallResult(dump, i.name, t, "refused", f"the full run: {first}") for _, i, t in wanted]
    by_key = {spec.name: o for spec, o in zip(program.results, outputs)}
    devices = program.num_devices
    for comp, instr, target in wanted:
        if devices > 1 and instr.opcode in DEVICE_DEPENDENT:
            results.append(CallResult(dump, instr.name, target, "refused", "device-dependent"))
            continue
        expected = _leaves(by_key, instr.name, devices)
        if not expected:
            results.append(CallResult(dump, instr.name, target, "refused", "it has no array value to compare"))
            continue
        first_difference = ""
        for producers in range(MAX_PRODUCERS + 1):
            operands = cut_operands(comp, cut_instructions(comp, instr, producers))
            values = {o: _leaves(by_key, o, devices) for o in operands}
            converted = ConvertedCalls()
            try:
                text, inputs, _ = extract_module(hlo, instr.name, values, producers=producers, converted=converted)
            except ExtractError as e:
                results.append(CallResult(dump, instr.name, target, "refused", str(e).splitlines()[0]))
                break
            got = run_with_xla(text, inputs)
            if len(got) == len(expected) and all(g.shape == e.shape and g.dtype == e.dtype and g.tobytes() == e.tobytes()
                                                 for g, e in zip(got, expected)):
                results.append(CallResult(dump, instr.name, target, "exact", "", tuple(converted.jaxlib_targets),
                                          producers))
                break
            first_difference = first_difference or _difference(got, expected)
        else:
            in_loop = bool(tap_path(hlo, comp, False)[2])
            if in_loop and all(not np.any(v) for v in expected) and all(not np.any(v) for v in inputs):
                # A tap inside a while loop that ran no iteration holds the zero-initialized
                # carry (converter/importer/taps.py), not a value the call computed: the
                # comparison says nothing (tpu/linalg_svd's QDWH Cholesky with these inputs).
                results.append(CallResult(dump, instr.name, target, "not run",
                                          "its while loop ran no iteration: the taps hold the zero carry"))
            else:
                results.append(CallResult(dump, instr.name, target, "differs", first_difference))
    return results


def _has_array(instr) -> bool:
    return any(not leaf.is_token for leaf in instr.shape.leaves())


def _difference(got: list[np.ndarray], expected: list[np.ndarray]) -> str:
    if len(got) != len(expected):
        return f"{len(got)} result leaves, the tap has {len(expected)}"
    parts = []
    for k, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape or g.dtype != e.dtype:
            parts.append(f"leaf {k}: {g.dtype}{list(g.shape)} vs {e.dtype}{list(e.shape)}")
        elif g.tobytes() != e.tobytes():
            diff = np.abs(g.astype(np.float64) - e.astype(np.float64)) if g.dtype.kind in "fiu" else None
            parts.append(f"leaf {k}: max abs {np.nanmax(diff):.3g}" if diff is not None else f"leaf {k} differs")
    return "; ".join(parts)


# A handful: a cuBLASLt GEMM (with its workspace leaf), cuDNN forward and backward
# convolutions, cuSOLVER + cuBLAS triangular solve + LU pivots, CPU LAPACK (FFI calls
# XLA runs in this jaxlib process), TopK on CPU and GPU, a TPU dump's calls.
SMALL = ["dumps/gpu/matmul_batched.hlo", "dumps/gpu/conv_grad.hlo", "dumps/gpu/cholesky_solve.hlo",
         "dumps/cpu/linalg_qr.hlo", "dumps/cpu/argsort_topk.hlo", "dumps/callbacks/gpu_topk_total_order_jax012.hlo",
         "dumps/tpu/cholesky_solve.hlo",
         # A Pallas TPU kernel (Mosaic), a jax-triton kernel, a Triton kernel that adds
         # into its aliased output (the dump of this jax's version: a kernel's Triton IR
         # bytecode is read by the MLIR that wrote it), cuDNN flash attention.
         "passes/pallas/dumps/ragged_blocks.hlo", "passes/triton/dumps/jax_triton/jt_scaled_add.hlo",
         "passes/triton/dumps/jax{version}/atomic_add.hlo", "passes/attention/dumps/inference_causal.hlo"]


@pytest.mark.parametrize("dump", SMALL)
def test_every_backend_call_of_a_dump_extracts_to_a_module_xla_runs_to_the_taps_bits(dump):
    import jax

    version = "".join(jax.__version__.split(".")[:2])  # 0.10.2 -> 010
    results = extract_every_call(os.path.join(ROOT, "tests", dump.format(version=version)))
    assert results, f"{dump} holds no custom-call"
    for r in results:
        assert r.verdict == "exact", f"{r.dump} %{r.name} ({r.target}): {r.verdict}: {r.reason}"
        assert r.producers == 0, f"{r.dump} %{r.name}: exact only with --producers {r.producers}"


def test_lapack_calls_are_written_as_jaxlibs_ffi_calls_and_the_cli_says_so(tmp_path, capsys):
    """A LAPACK call of a CPU dump stays an FFI custom-call after conversion: the written
    module runs in XLA with jaxlib's handlers (this process), and the output says that a
    bare `xla` tool cannot."""
    from converter.tools.cli import main

    dump = os.path.join(ROOT, "tests", "dumps", "cpu", "linalg_qr.hlo")
    hlo = parse_hlo_file(dump)
    call = next(i for c in hlo.computations for i in c.instructions if i.opcode == "custom-call")
    out = tmp_path / "qr.hlo"
    assert main(["extract", dump, "--root", call.name, "--verify", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "verified:" in printed and "lapack_" in printed and "jaxlib" in printed, printed
    assert "lapack_" in out.read_text() and " fusion(" not in out.read_text()


def test_gemm_cut_is_plain_hlo_with_parameters_in_the_npz_order(tmp_path, capsys):
    """The written module of a cuBLASLt GEMM: no backend call left, one parameter per
    arg of OUT.inputs.npz with its shape, --verify equal bit for bit; --allow-custom-calls
    still writes the call as it is."""
    import re

    from converter.tools.cli import main

    dump = os.path.join(ROOT, "tests", "dumps", "gpu", "mlp_forward.hlo")
    out = tmp_path / "gemm.hlo"
    assert main(["extract", dump, "--root", "custom-call.2", "--verify", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "verified:" in printed and "__cublas$lt$matmul" in printed, printed
    text = out.read_text()
    assert " custom-call(" not in text and "__cublas" not in text
    inputs = np.load(tmp_path / "gemm.inputs.npz")
    params = {int(m.group(2)): m.group(1) for m in re.finditer(r"= (\S+) parameter\((\d+)\)", text)}
    assert sorted(params) == list(range(len(inputs.files)))
    for k, shape in params.items():
        dims = re.match(r"\w+\[([\d,]*)\]", shape).group(1)
        assert tuple(int(d) for d in dims.split(",") if d) == inputs[f"arg{k}"].shape
    kept = tmp_path / "kept.hlo"
    assert main(["extract", dump, "--root", "custom-call.2", "--allow-custom-calls", "-o", str(kept)]) == 0
    assert 'custom_call_target="__cublas$lt$matmul"' in kept.read_text()


def test_a_call_that_does_not_convert_is_a_located_refusal():
    """A backend call the converter refuses (a host callback: its Python function is not
    in the dump) is an ExtractError at the dump's line naming the call."""
    dump = os.path.join(ROOT, "tests", "dumps", "callbacks", "pure_io_callback_jax012.hlo")
    hlo = parse_hlo_file(dump)
    comp, call = next((c, i) for c in hlo.computations for i in c.instructions if i.opcode == "custom-call")
    values = {o: [np.zeros(comp.by_name[o].shape.dims, np.float32)] if not comp.by_name[o].shape.is_tuple else []
              for o in cut_operands(comp, cut_instructions(comp, call, 0))}
    with pytest.raises(ExtractError) as e:
        extract_module(hlo, call.name, values)
    message = str(e.value)
    assert "pure_io_callback_jax012.hlo:" in message and call.name in message, message
    assert call.attrs["custom_call_target"] in message, message


@pytest.mark.slow
def test_every_cublas_gemm_of_the_torch_xla_qwen_sample():
    """torch-xla's Qwen decode step on an H100 (its `__cublas$gemm` calls, bf16)."""
    results = extract_every_call(os.path.join(ROOT, "samples", "gpu_torchxla_qwen_decode_cublas.hlo"))
    assert results and all(r.verdict == "exact" for r in results), [r for r in results if r.verdict != "exact"]


def catalog_dumps() -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(ROOT, "tests", "dumps", "*", "*.hlo"))
                  if "custom-call(" in open(p).read())


@pytest.mark.slow
def test_every_backend_call_of_the_catalog():
    """Every custom-call of every catalog dump: exact, or a refusal with its reason; none differs."""
    results = [r for p in catalog_dumps() for r in extract_every_call(p)]
    differs = [r for r in results if r.verdict == "differs"]
    assert not differs, "\n".join(f"{r.dump} %{r.name} ({r.target}): {r.reason}" for r in differs)
    for r in results:
        if r.verdict == "refused":
            assert r.reason and r.target, r


def main() -> None:
    """Print the sweep's counts: exact / refused with reason / differs, per target."""
    paths = sys.argv[1:] or catalog_dumps()
    results: list[CallResult] = []
    for p in paths:
        try:
            found = extract_every_call(p)
        except Exception as e:  # a dump the sweep itself cannot run: reported, the sweep goes on
            print(f"{os.path.relpath(p, ROOT)}: sweep error {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            continue
        for r in found:
            if r.verdict != "exact":
                print(f"{r.dump} %{r.name} ({r.target}): {r.verdict}: {r.reason[:300]}")
        print(f"{os.path.relpath(p, ROOT)}: {sum(r.verdict == 'exact' for r in found)} of {len(found)} exact",
              file=sys.stderr)
        results += found
        sys.stdout.flush()
    counts = Counter(r.verdict for r in results)
    kept = Counter(r.producers for r in results if r.verdict == "exact")
    print("exact with --producers k: " + ", ".join(f"k={k}: {n}" for k, n in sorted(kept.items())))
    print(f"{len(results)} custom-call(s) in {len(paths)} dump(s): {counts['exact']} exact, "
          f"{counts['refused']} refused with a reason, {counts['differs']} differ, "
          f"{counts['not run']} in a loop that ran no iteration")
    by_target = Counter((r.target, r.verdict) for r in results)
    for (target, verdict), n in sorted(by_target.items()):
        print(f"  {target}: {n} {verdict}")


if __name__ == "__main__":
    main()
