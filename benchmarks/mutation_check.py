"""A small mutation check over the rules and passes (issue 28, item 14): does the default test
run catch a wrong number?

Each mutation changes one token of converter/ or passes/ source at a place where a slip
would change results (an epilogue's constant, an attention scale, a chain_id match, the
replica-group mapping, a bitcast's transpose, a comparison, a rotation constant, ...).  For
each, a copy of the checkout is mutated and the test files that cover that code run with
`-x` (slow tests left out, as in the default run); a failing run catches the mutation.

    python benchmarks/mutation_check.py [--only NAME,...] [--root CHECKOUT] [--list]

Not a test: it prints a table (caught / survived, seconds) and exits 1 if any mutation
survived.  The copy lives under a temporary directory; the checkout is never modified.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Mutation:
    name: str
    path: str          # relative to the checkout
    old: str           # occurs exactly once in the file
    new: str
    tests: tuple[str, ...]
    why: str           # what the mutation gets wrong


GEMM_TESTS = ("tests/passes/test_gemm_epilogue_ulps.py", "tests/passes/test_cublas_gemm.py")
ATTENTION_TESTS = ("tests/passes/attention/test_cudnn_dumps.py", "tests/passes/attention/test_te_fused_attention.py")

MUTATIONS = [
    Mutation("gelu-cubic-constant", "passes/cublas_gemm.py", "const(0.044715)", "const(0.0447)", GEMM_TESTS,
             "GELU epilogue's cubic coefficient (issue 28's survivor)"),
    Mutation("gelu-half", "passes/cublas_gemm.py", 'builders.binary("multiply", const(0.5), x)',
             'builders.binary("multiply", const(0.4999), x)', GEMM_TESTS, "GELU's 0.5·x, off by 2e-4 relative"),
    Mutation("gelu-sqrt-2-over-pi", "passes/cublas_gemm.py", "const(math.sqrt(2 / math.pi))",
             "const(math.sqrt(2 / 3.1416))", GEMM_TESTS, "GELU's √(2/π) from a 5-digit π (1e-6 relative)"),
    Mutation("neuron-gelu-cubic-constant", "passes/kernels/neuron.py", "(y + 0.044715 * y * y * y)",
             "(y + 0.0447 * y * y * y)", ("tests/passes/plugins/test_shipped_kernels.py",),
             "AWS Neuron GELU (tanh) plug-in's cubic coefficient"),
    Mutation("silu-sigmoid", "passes/cublas_gemm.py", 'builders.unary("logistic", x)', 'builders.unary("tanh", x)',
             GEMM_TESTS, "SiLU epilogue with tanh for the sigmoid"),
    Mutation("relu-direction", "passes/cublas_gemm.py", 'builders.binary("maximum", x, const(0.0))',
             'builders.binary("minimum", x, const(0.0))', GEMM_TESTS, "RELU epilogue's max → min"),
    Mutation("gemm-beta-skipped", "passes/cublas_gemm.py", "        if spec.beta != 1:\n",
             "        if spec.beta == 1:\n", GEMM_TESTS, "beta·C not scaled (beta ≠ 1)"),
    Mutation("gemm-fp8-scales-added", "passes/cublas_gemm.py",
             'scale = builders.binary("multiply", builders.convert(v["a_scale"], scale_t)',
             'scale = builders.binary("add", builders.convert(v["a_scale"], scale_t)', GEMM_TESTS,
             "fp8 a_scale and b_scale added, not multiplied"),
    Mutation("conv-backward-input-padding", "passes/cudnn_conv.py",
             "high = n + dilated - 2 - (m - 1) * d.stride - low", "high = n + dilated - 1 - (m - 1) * d.stride - low",
             ("tests/passes/test_cudnn_conv.py",), "backward-input convolution's high padding off by one"),
    Mutation("attention-forward-scale", "passes/lib/attention.py", "s = _scalar_mul(s, cfg.scale)",
             "s = _scalar_mul(s, 1.0)", ATTENTION_TESTS, "attention logits not scaled"),
    Mutation("attention-dq-scale", "passes/lib/attention.py",
             "dq_blk = _scalar_mul(builders.dot_general(ds, k_blk, _f32(), [0, 1], [0, 1], [3], [2]), cfg.scale)",
             "dq_blk = builders.dot_general(ds, k_blk, _f32(), [0, 1], [0, 1], [3], [2])", ATTENTION_TESTS,
             "attention backward's dQ without the scale"),
    Mutation("te-pre-scale-bias", "passes/te_fused_attention.py",
             "bias = builders.binary(\"multiply\", bias, builders.scalar_constant(scale,",
             "bias = builders.binary(\"add\", bias, builders.scalar_constant(scale,",
             ("tests/passes/attention/test_te_fused_attention.py",), "TE pre-scale bias added to, not scaled"),
    Mutation("chain-id-ignored", "passes/tpu_async_collectives.py",
             "same_chain = _chain_id(c) is None or _chain_id(start_coll) is None or _chain_id(c) == _chain_id(start_coll)",
             "same_chain = True", ("tests/passes/test_tpu_async_collectives.py",),
             "AsyncCollectiveDone chooses its collective without chain_id (issue 28's survivor)"),
    Mutation("chain-id-inverted", "passes/tpu_async_collectives.py", "_chain_id(c) == _chain_id(start_coll)",
             "_chain_id(c) != _chain_id(start_coll)", ("tests/passes/test_tpu_async_collectives.py",),
             "chain_id match inverted"),
    Mutation("cross-replica-groups", "converter/hlo/collectives.py",
             "return [[r * partitions + p for r in g] for p in range(partitions) for g in gs]",
             "return [[p * replicas + r for r in g] for p in range(partitions) for g in gs]",
             ("tests/passes/test_partitions_to_replicas.py", "tests/importer/test_rules_collectives.py"),
             "cross-replica groups flattened partition-major"),
    Mutation("cross-partition-pairs-swapped", "converter/hlo/collectives.py",
             "return [[r * partitions + s, r * partitions + t] for r in range(replicas) for s, t in pairs]",
             "return [[r * partitions + t, r * partitions + s] for r in range(replicas) for s, t in pairs]",
             ("tests/passes/test_partitions_to_replicas.py", "tests/importer/test_rules_collectives.py"),
             "collective-permute source and target swapped (cross-partition)"),
    Mutation("bitcast-inverse-transpose", "converter/importer/rules/shapes.py", "    return builders.transpose(y, inverse)",
             "    return builders.transpose(y, dst_order)", ("tests/importer/test_rules_bitcast_layouts.py",),
             "bitcast permutes back by the order, not its inverse"),
    Mutation("bitcast-layout-order", "converter/importer/rules/shapes.py",
             "return list(reversed(shape.layout.minor_to_major))", "return list(shape.layout.minor_to_major)",
             ("tests/importer/test_rules_bitcast_layouts.py",), "layout read minor-to-major as major-to-minor"),
    # A cache looked up without the direction: the first compare of a type gives every later
    # one its direction.  (Changing only the key of the lookup is an equivalent mutant: the
    # lookup then always misses and every compare builds its own attributes.)
    Mutation("compare-direction-cache", "converter/importer/rules/elementwise.py",
             'attrs = ctx.module_importer.attribute_cache.get(("compare", direction, compare_type))',
             'attrs = next((v for k, v in ctx.module_importer.attribute_cache.items() '
             'if k[0] == "compare" and k[2] == compare_type), None)',
             ("tests/importer/test_compare_directions_in_one_module.py", "tests/importer/test_rules_elementwise.py"),
             "compares of one type share the first direction"),
    Mutation("threefry-rotation", "passes/threefry.py", "ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))",
             "ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 23))", ("tests/passes/test_threefry.py",),
             "one Threefry rotation constant"),
    Mutation("stochastic-convert-threshold", "converter/importer/rules/elementwise.py",
             'round_up = builders.compare(random, threshold, "LT", "UNSIGNED")',
             'round_up = builders.compare(random, threshold, "LE", "UNSIGNED")',
             ("tests/importer/test_rules_elementwise.py",), "stochastic rounding's < as <="),
    Mutation("ordered-fold-skips-first", "passes/lib/collective_folds.py", "acc = part(0)\n", "acc = part(1)\n",
             ("tests/passes/test_ordered_reductions.py",), "the group-order fold starts at the wrong member"),
    Mutation("ordered-reductions-limit", "passes/ordered_reductions.py", "if moved > ORDERED_LIMIT_BYTES:",
             "if moved >= 0:", ("tests/passes/test_ordered_reductions.py",),
             "every reduction left native (unordered)"),
]


def copy_checkout(root: pathlib.Path, dest: pathlib.Path) -> None:
    for part in ("converter", "passes", "tests", "samples", "pyproject.toml"):
        src = root / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dest / part)


def run_one(m: Mutation, work: pathlib.Path, timeout: int) -> tuple[str, float, str]:
    target = work / m.path
    original = target.read_text()
    if original.count(m.old) != 1:
        return "not applied", 0.0, f"'{m.old[:40]}...' occurs {original.count(m.old)} times in {m.path}"
    target.write_text(original.replace(m.old, m.new))
    tests = [t for t in m.tests if (work / t).exists()]  # an older checkout may lack some
    start = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-m", "not slow", "-p", "no:cacheprovider",
                            *tests], cwd=work, env=dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1"),
                           capture_output=True, text=True, timeout=timeout)
        seconds = time.monotonic() - start
        last = (r.stdout.strip().splitlines() or [""])[-1]
        if r.returncode == 0:
            return "SURVIVED", seconds, last
        if r.returncode == 1:
            failed = next((line for line in r.stdout.splitlines() if line.startswith("FAILED")), last)
            return "caught", seconds, failed
        return f"error (pytest exit {r.returncode})", seconds, last
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, f"over {timeout} s"
    finally:
        target.write_text(original)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated mutation names")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per mutation's test run")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--root", type=pathlib.Path, default=ROOT,
                        help="the checkout to mutate (a copy of it; default: this one), e.g. an older commit's "
                             "`git archive` to see which mutations its tests let through")
    args = parser.parse_args()
    chosen = MUTATIONS
    if args.only:
        names = set(args.only.split(","))
        chosen = [m for m in MUTATIONS if m.name in names]
        if unknown := names - {m.name for m in MUTATIONS}:
            parser.error(f"unknown mutation(s): {', '.join(sorted(unknown))}")
    if args.list:
        for m in chosen:
            print(f"{m.name:32} {m.path}: {m.why}")
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="mutation_check.") as tmp:
        work = pathlib.Path(tmp)
        copy_checkout(args.root, work)
        for m in chosen:
            verdict, seconds, detail = run_one(m, work, args.timeout)
            rows.append((m, verdict, seconds, detail))
            print(f"{m.name:32} {verdict:10} {seconds:6.1f} s  {detail[:110]}", flush=True)
    caught = sum(v == "caught" for _, v, _, _ in rows)
    print(f"\n{caught} of {len(rows)} mutations caught")
    for m, verdict, _, _ in rows:
        if verdict != "caught":
            print(f"  {verdict}: {m.name} ({m.path}): {m.why}")
    return 0 if caught == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
