"""Mosaic op rules (passes/mosaic) one by one against NumPy.

Each case is a small Mosaic function in MLIR's generic form: vector/scalar arguments are
inputs, memref arguments are buffers (given as inputs, their final contents returned after
the function's results).  The translator turns its body into a StableHLO `main` that
jaxlib compiles for CPU; NumPy computes the expected values.  This covers the rules that
the kernel dumps in tests/passes/pallas do not reach.
"""

from __future__ import annotations

import numpy as np
import pytest
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_d

from converter.mlir.context import make_context
from converter.runtime.program import program_from_module
from passes.mosaic import translate as tr
from passes.mosaic.kernel import KernelError

F = "vector<8x128xf32>"
I = "vector<8x128xi32>"
B = "vector<8x128xi1>"


def run_mosaic(body: str, args: list[str], results: list[str], inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Translate `func @k(args) -> results { body }` and run it on `inputs`."""
    import jax._src.tpu_custom_call  # noqa: F401
    from jaxlib.mlir._mlir_libs import _tpu_ext

    # Only the TPU dialect is registered: the function and the other ops in generic form.
    *lines, last = body.strip().splitlines()
    names, types = last.removeprefix("return ").split(" : ")
    lines.append(f'"func.return"({names}) : ({types}) -> ()')
    signature = ", ".join(f"%a{i}: {t}" for i, t in enumerate(args))
    text = ('"func.func"() ({\n' + f"^bb0({signature}):\n" + "\n".join(lines) + "\n}) "
            + f'{{function_type = ({", ".join(args)}) -> ({", ".join(results)}), sym_name = "k"}} : () -> ()')
    kctx = ir.Context()
    _tpu_ext.register_dialect(kctx)
    kctx.allow_unregistered_dialects = True
    with kctx:
        kmodule = ir.Module.parse(text)
        kfunc = kmodule.body.operations[0].operation
        block = kfunc.regions[0].blocks[0]
        with make_context(), ir.Location.unknown():
            module = ir.Module.create()
            t = tr.Translator()
            value_types = [tr.tensor_type(ir.Type.parse(a, kctx)) if not a.startswith("memref") else
                           _memref_tensor(a, kctx) for a in args]
            memrefs = [i for i, a in enumerate(args) if a.startswith("memref")]
            out_types = [tr.tensor_type(ir.Type.parse(r, kctx)) for r in results] + [value_types[i] for i in memrefs]
            with ir.InsertionPoint(module.body):
                main = func_d.FuncOp("main", (value_types, out_types))
                entry = main.add_entry_block()
                with ir.InsertionPoint(entry):
                    bound = []
                    for i, a in enumerate(entry.arguments):
                        if i in memrefs:
                            shape = list(ir.MemRefType(ir.Type.parse(args[i], kctx)).shape)
                            bound.append(tr.Ref(t.new_buffer(a), [0] * len(shape), shape, list(range(len(shape)))))
                        else:
                            bound.append(a)
                    outs = t.run_block(block, bound)
                    func_d.ReturnOp(list(outs) + [t.buffers[bound[i].buffer] for i in memrefs])
            assert module.operation.verify()
            return program_from_module(module)(*inputs)


def _memref_tensor(text: str, kctx) -> ir.Type:
    mt = ir.MemRefType(ir.Type.parse(text, kctx))
    return ir.RankedTensorType.get(list(mt.shape), tr.element_type(mt.element_type))


RNG = np.random.default_rng(7)
X = RNG.standard_normal((8, 128)).astype(np.float32) * 3
Y = RNG.standard_normal((8, 128)).astype(np.float32) * 3
X[0, :4] = [np.nan, 0.0, -0.0, np.inf]
Y[0, :4] = [1.0, np.nan, 0.0, np.nan]
P = RNG.integers(-1000, 1000, (8, 128), dtype=np.int32)
Q = RNG.integers(1, 50, (8, 128), dtype=np.int32) * np.where(RNG.random((8, 128)) < 0.5, -1, 1).astype(np.int32)


def _binary(op: str, t: str) -> str:
    return f'%0 = "{op}"(%a0, %a1) : ({t}, {t}) -> {t}\nreturn %0 : {t}'


def _unary(op: str, t: str, out: str | None = None) -> str:
    return f'%0 = "{op}"(%a0) : ({t}) -> {out or t}\nreturn %0 : {out or t}'


def _u32(x):
    return x.view(np.uint32)


FLOAT_BINARY = {
    "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin, "arith.remf": np.fmod,
    "math.powf": lambda x, y: np.power(np.abs(x), y), "math.atan2": np.arctan2,
    "math.copysign": np.copysign,
}


@pytest.mark.parametrize("name", sorted(FLOAT_BINARY))
def test_float_binary(name):
    x, y = X, Y
    if name == "math.powf":
        x = np.abs(X)
    got = run_mosaic(_binary(name, F), [F, F], [F], [x, y])[0]
    # NaN handling is part of the semantics (maxnumf returns the number, ...); the inputs
    # hold NaN, inf and zeros on purpose.
    with np.errstate(all="ignore"):
        want = FLOAT_BINARY[name](x, y)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, equal_nan=True)


INT_BINARY = {
    "arith.floordivsi": lambda p, q: p // q,
    "arith.ceildivsi": lambda p, q: -((-p) // q),
    "arith.remui": lambda p, q: (_u32(p) % _u32(q)).view(np.int32),
    "arith.divui": lambda p, q: (_u32(p) // _u32(q)).view(np.int32),
    "arith.maxui": lambda p, q: np.maximum(_u32(p), _u32(q)).view(np.int32),
    "arith.minui": lambda p, q: np.minimum(_u32(p), _u32(q)).view(np.int32),
    "arith.shrsi": lambda p, q: p >> (np.abs(q) % 32),
    "arith.shrui": lambda p, q: (_u32(p) >> (np.abs(q) % 32).astype(np.uint32)).view(np.int32),
    "arith.remsi": lambda p, q: np.fmod(p, q),
    "arith.divsi": lambda p, q: (np.sign(p) * np.sign(q) * (np.abs(p) // np.abs(q))).astype(np.int32),
}


@pytest.mark.parametrize("name", sorted(INT_BINARY))
def test_int_binary(name):
    q = np.abs(Q) % 32 if "shr" in name else Q
    got = run_mosaic(_binary(name, I), [I, I], [I], [P, q])[0]
    np.testing.assert_array_equal(got, INT_BINARY[name](P, Q))


FLOAT_UNARY = {
    "math.absf": np.abs, "math.cbrt": np.cbrt, "math.expm1": np.expm1, "math.log1p": lambda x: np.log1p(np.abs(x)),
    "math.log2": lambda x: np.log2(np.abs(x)), "math.exp2": np.exp2, "math.round": lambda x: np.where(
        x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)), "math.roundeven": np.round, "math.tan": np.tan,
    "arith.negf": np.negative, "math.rsqrt": lambda x: 1 / np.sqrt(np.abs(x)),
    "tpu.reciprocal": lambda x: 1 / x,
}


@pytest.mark.parametrize("name", sorted(FLOAT_UNARY))
def test_float_unary(name):
    x = np.abs(X) if name in ("math.log1p", "math.log2", "math.rsqrt") else X
    x = np.where(np.isfinite(x), x, 1.5).astype(np.float32) if name == "math.tan" else x
    got = run_mosaic(_unary(name, F), [F], [F], [x])[0]
    with np.errstate(all="ignore"):  # zeros and infinities in the inputs on purpose
        want = FLOAT_UNARY[name](x)
    np.testing.assert_allclose(got, want, rtol=5e-6, atol=1e-6, equal_nan=True)


def test_math_fma_and_absi():
    body = ('%0 = "math.fma"(%a0, %a1, %a1) : (' + f"{F}, {F}, {F}) -> {F}\n"
            f'%1 = "math.absi"(%a2) : ({I}) -> {I}\nreturn %0, %1 : {F}, {I}')
    got = run_mosaic(body, [F, F, I], [F, I], [X, Y, P])
    np.testing.assert_allclose(got[0], X * Y + Y, rtol=2e-6, atol=1e-6, equal_nan=True)
    np.testing.assert_array_equal(got[1], np.abs(P))


# arith.cmpf predicates 0..15 against NumPy's IEEE comparisons (NaN included).
CMPF = [lambda x, y: np.zeros_like(x, bool), np.equal, np.greater, np.greater_equal, np.less, np.less_equal,
        lambda x, y: (x < y) | (x > y), lambda x, y: ~(np.isnan(x) | np.isnan(y)),
        lambda x, y: ~((x < y) | (x > y)), lambda x, y: ~(x <= y), lambda x, y: ~(x < y),
        lambda x, y: ~(x >= y), lambda x, y: ~(x > y), np.not_equal, lambda x, y: np.isnan(x) | np.isnan(y),
        lambda x, y: np.ones_like(x, bool)]


@pytest.mark.parametrize("predicate", range(16))
def test_cmpf_matches_ieee(predicate):
    y = Y.copy()
    y[1] = X[1]  # some equal pairs
    body = f'%0 = "arith.cmpf"(%a0, %a1) {{predicate = {predicate} : i64}} : ({F}, {F}) -> {B}\nreturn %0 : {B}'
    got = run_mosaic(body, [F, F], [B], [X, y])[0]
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got, CMPF[predicate](X, y))


CMPI = [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal,
        lambda p, q: _u32(p) < _u32(q), lambda p, q: _u32(p) <= _u32(q), lambda p, q: _u32(p) > _u32(q),
        lambda p, q: _u32(p) >= _u32(q)]


@pytest.mark.parametrize("predicate", range(10))
def test_cmpi(predicate):
    q = np.where(RNG.random((8, 128)) < 0.3, P, Q).astype(np.int32)
    body = f'%0 = "arith.cmpi"(%a0, %a1) {{predicate = {predicate} : i64}} : ({I}, {I}) -> {B}\nreturn %0 : {B}'
    got = run_mosaic(body, [I, I], [B], [P, q])[0]
    np.testing.assert_array_equal(got, CMPI[predicate](P, q))


def test_casts():
    body = (f'%0 = "arith.uitofp"(%a0) : ({I}) -> {F}\n'
            f'%1 = "arith.fptoui"(%a1) : ({F}) -> {I}\n'
            f'%2 = "arith.trunci"(%a0) : ({I}) -> vector<8x128xi8>\n'
            f'%3 = "arith.extsi"(%2) : (vector<8x128xi8>) -> {I}\n'
            f'%4 = "arith.bitcast"(%a1) : ({F}) -> {I}\n'
            f'return %0, %1, %3, %4 : {F}, {I}, {I}, {I}')
    pos = np.abs(np.nan_to_num(Y, nan=1.0)) * 100  # fptoui of NaN is undefined
    got = run_mosaic(body, [I, F], [F, I, I, I], [P, pos])
    np.testing.assert_array_equal(got[0], _u32(P).astype(np.float32))
    np.testing.assert_array_equal(got[1], pos.astype(np.uint32).view(np.int32))
    np.testing.assert_array_equal(got[2], P.astype(np.int8).astype(np.int32))  # wraps modulo 2^8
    np.testing.assert_array_equal(got[3], pos.view(np.int32))


def test_index_castui_of_scalar():
    body = ('%0 = "arith.index_castui"(%a0) : (i32) -> index\n'
            '%1 = "arith.index_cast"(%0) : (index) -> i32\nreturn %1 : i32')
    assert run_mosaic(body, ["i32"], ["i32"], [np.int32(41)])[0] == 41


def test_vector_shape_ops():
    body = (f'%0 = "vector.transpose"(%a0) {{permutation = array<i64: 1, 0>}} : ({F}) -> vector<128x8xf32>\n'
            f'%1 = "vector.extract_strided_slice"(%a0) {{offsets = [1, 4], sizes = [3, 8], strides = [2, 1]}}'
            f' : ({F}) -> vector<3x8xf32>\n'
            f'%2 = "vector.insert_strided_slice"(%1, %a1) {{offsets = [2, 100], strides = [1, 1]}}'
            f' : (vector<3x8xf32>, {F}) -> {F}\n'
            f'%3 = "vector.extract"(%a0) {{static_position = array<i64: 5>}} : ({F}) -> vector<128xf32>\n'
            f'%s = "arith.constant"() {{value = 2.5 : f32}} : () -> f32\n'
            f'%4 = "vector.splat"(%s) : (f32) -> {F}\n'
            f'%5 = tpu.reshape %a0 : {F} -> vector<4x256xf32>\n'
            f'%6 = tpu.dynamic_rotate %a0 by %a2 dim 1 : {F}, i32 -> {F}\n'
            f'return %0, %2, %3, %4, %5, %6 : vector<128x8xf32>, {F}, vector<128xf32>, {F}, vector<4x256xf32>, {F}')
    got = run_mosaic(body, [F, F, "i32"], ["vector<128x8xf32>", F, "vector<128xf32>", F, "vector<4x256xf32>", F],
                     [X, Y, np.int32(133)])
    np.testing.assert_array_equal(got[0], X.T)
    want = Y.copy()
    want[2:5, 100:108] = X[1:6:2, 4:12]
    np.testing.assert_array_equal(got[1], want)
    np.testing.assert_array_equal(got[2], X[5])
    np.testing.assert_array_equal(got[3], np.full((8, 128), 2.5, np.float32))
    np.testing.assert_array_equal(got[4], X.reshape(4, 256))
    np.testing.assert_array_equal(got[5], np.roll(X, 133, axis=1))


M = "memref<16x128xf32, #tpu.memory_space<vmem>>"


def test_memory_ops():
    """vector.store at dynamic indices, tpu.store with a sublane mask, tpu.strided_store,
    tpu.load, and an add-store."""
    body = (f'%c0 = "arith.constant"() {{value = 0 : index}} : () -> index\n'
            f'%c4 = "arith.constant"() {{value = 4 : index}} : () -> index\n'
            f'%c8 = "arith.constant"() {{value = 8 : index}} : () -> index\n'
            f'"vector.store"(%a1, %a0, %c8, %c0) : ({F}, {M}, index, index) -> ()\n'
            f'%v = "tpu.load"(%a0, %c4, %c0) {{sublane_mask = array<i1: true, true, true, true, true, true, true, true>}}'
            f' : ({M}, index, index) -> {F}\n'
            f'"tpu.store"(%a1, %a0, %c0, %c0) {{sublane_mask = array<i1: true, false, true, false, true, false, true, false>,'
            f' operandSegmentSizes = array<i32: 1, 1, 2, 0>}} : ({F}, {M}, index, index) -> ()\n'
            f'%h = "vector.extract_strided_slice"(%a1) {{offsets = [0, 0], sizes = [4, 128], strides = [1, 1]}}'
            f' : ({F}) -> vector<4x128xf32>\n'
            f'"tpu.strided_store"(%h, %a2, %c0, %c0) {{strides = array<i32: 2, 1>}}'
            f' : (vector<4x128xf32>, {M}, index, index) -> ()\n'
            f'"tpu.vector_store"(%a1, %a2, %c8, %c0) {{add = true, strides = array<i32>, '
            f'operandSegmentSizes = array<i32: 1, 1, 2, 0>}} : ({F}, {M}, index, index) -> ()\n'
            f'return %v : {F}')
    a = RNG.standard_normal((16, 128)).astype(np.float32)
    c = RNG.standard_normal((16, 128)).astype(np.float32)
    loaded, a_out, c_out = run_mosaic(body, [M, F, M], [F], [a, Y, c])
    want_a = a.copy()
    want_a[8:16] = Y
    np.testing.assert_array_equal(loaded, want_a[4:12])
    want_a[0:8:2] = Y[0:8:2]
    np.testing.assert_array_equal(a_out, want_a)
    want_c = c.copy()
    want_c[0:8:2] = Y[:4]
    want_c[8:16] += Y
    np.testing.assert_array_equal(c_out, want_c)


def test_unknown_op_is_a_kernel_error():
    with pytest.raises(KernelError, match="math.erfc"):
        run_mosaic(_unary("math.erfc", F), [F], [F], [X])


def test_index_switch_and_assume_multiple():
    """scf.index_switch: the region of the matching case value, the default (first
    region) otherwise; the cases write a memref too."""
    def region(scale: str, store: bool) -> str:
        write = (f'"vector.store"(%v{scale}, %a2, %c0, %c0) : ({F}, {M8}, index, index) -> ()\n' if store else "")
        return (f'{{\n%k{scale} = "arith.constant"() {{value = {scale} : f32}} : () -> f32\n'
                f'%b{scale} = "vector.broadcast"(%k{scale}) : (f32) -> {F}\n'
                f'%v{scale} = "arith.mulf"(%a1, %b{scale}) : ({F}, {F}) -> {F}\n{write}'
                f'"scf.yield"(%v{scale}) : ({F}) -> ()\n}}')
    body = (f'%c0 = "arith.constant"() {{value = 0 : index}} : () -> index\n'
            f'%m = "tpu.assume_multiple"(%a0) {{multiple = 1 : i32}} : (i32) -> i32\n'
            f'%r = "scf.index_switch"(%m) ({region("1.0", False)}, {region("2.0", True)}, {region("3.0", False)})'
            f' {{cases = array<i64: 4, 9>}} : (i32) -> {F}\n'
            f'return %r : {F}')
    for selector, scale, stored in ((4, 2.0, True), (9, 3.0, False), (5, 1.0, False)):
        old = np.zeros((8, 128), np.float32)
        got, buffer = run_mosaic(body, ["i32", F, M8], [F], [np.int32(selector), X, old])
        np.testing.assert_array_equal(got, X * np.float32(scale))
        np.testing.assert_array_equal(buffer, X * np.float32(scale) if stored else old)


M8 = "memref<8x128xf32, #tpu.memory_space<vmem>>"


@pytest.mark.parametrize("precision", ["", "precision = #tpu.contract_precision<fp32>, ",
                                       "precision = #tpu.contract_precision<bf16>, "])
def test_matmul_precision_and_batch_order(precision):
    """A batched tpu.matmul contracting the minor dims; bf16 precision rounds the f32
    operands to bf16 first."""
    import ml_dtypes

    lhs = RNG.standard_normal((2, 8, 128)).astype(np.float32)
    rhs = RNG.standard_normal((2, 16, 128)).astype(np.float32)
    acc = RNG.standard_normal((2, 8, 16)).astype(np.float32)
    body = (f'%0 = "tpu.matmul"(%a0, %a1, %a2) {{{precision}dimension_numbers = '
            f'#tpu.dot_dimension_numbers<[2], [2], [1], [1], [0, 0, 0, 1, 1, 1], [0], [0]>, transpose_lhs_hint = false}}'
            f' : (vector<2x8x128xf32>, vector<2x16x128xf32>, vector<2x8x16xf32>) -> vector<2x8x16xf32>\n'
            f'return %0 : vector<2x8x16xf32>')
    got = run_mosaic(body, ["vector<2x8x128xf32>", "vector<2x16x128xf32>", "vector<2x8x16xf32>"],
                     ["vector<2x8x16xf32>"], [lhs, rhs, acc])[0]
    if "bf16" in precision:
        lhs, rhs = (x.astype(ml_dtypes.bfloat16).astype(np.float64) for x in (lhs, rhs))
    want = acc + np.einsum("bqd,bkd->bqk", lhs.astype(np.float64), rhs.astype(np.float64))
    # f32 accumulation over 128 products of unit-normal terms: a few f32 ulps of ~11.
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)


@pytest.mark.parametrize("acc_map, want", [("(d0, d1)", "qk"), ("(d1, d0)", "kq")])
def test_vector_contract(acc_map, want):
    """vector.contract by indexing maps: q·kᵀ contracting d2, the result in either order."""
    lhs = RNG.standard_normal((8, 128)).astype(np.float32)
    rhs = RNG.standard_normal((16, 128)).astype(np.float32)
    out = "vector<8x16xf32>" if want == "qk" else "vector<16x8xf32>"
    acc = RNG.standard_normal((8, 16) if want == "qk" else (16, 8)).astype(np.float32)
    maps = (f"[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
            f"affine_map<(d0, d1, d2) -> {acc_map}>]")
    iterators = "[#vector.iterator_type<parallel>, #vector.iterator_type<parallel>, #vector.iterator_type<reduction>]"
    body = (f'%0 = "vector.contract"(%a0, %a1, %a2) {{indexing_maps = {maps}, iterator_types = {iterators}, '
            f'kind = #vector.kind<add>}} : (vector<8x128xf32>, vector<16x128xf32>, {out}) -> {out}\n'
            f'return %0 : {out}')
    got = run_mosaic(body, ["vector<8x128xf32>", "vector<16x128xf32>", out], [out], [lhs, rhs, acc])[0]
    product = lhs.astype(np.float64) @ rhs.astype(np.float64).T
    # f32 accumulation of 128 unit-normal products: a few ulps of values ~11.
    np.testing.assert_allclose(got, acc + (product if want == "qk" else product.T), rtol=0, atol=2e-5)
