"""Triton ops the Pallas dumps do not exercise (tt.join/split/reshape, tt.clampf,
tt.precise_*, reverse tt.scan, a two-operand tt.reduce, tt.atomic_cas, unsigned atomics,
split-precision tt.dot), in small hand-written kernels: Triton IR text written as bytecode
by the installed jaxlib, placed in a `__gpu$xla.gpu.triton` call as a GPU dump holds it,
converted, run on CPU and compared with NumPy."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module

HLO_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.int32): "s32"}


def _mlir_string(data: bytes) -> str:
    return "".join(chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\' else f"\\{b:02X}" for b in data)


def _run(ir_text: str, inputs: list[np.ndarray], outputs: list[tuple[tuple[int, ...], type]],
         grid=(1, 1, 1), aliases: dict[int, int] | None = None) -> list[np.ndarray]:
    from jaxlib.mlir import ir

    from passes.triton.kernel import new_context

    with new_context(), ir.Location.unknown():
        buf = io.BytesIO()
        ir.Module.parse(ir_text).operation.write_bytecode(buf)

    def shape(s, dt):
        return f"{HLO_TYPES[np.dtype(dt)]}[{','.join(map(str, s))}]{{{','.join(str(i) for i in reversed(range(len(s))))}}}"

    params = [f"  p{k} = {shape(x.shape, x.dtype)} parameter({k})" for k, x in enumerate(inputs)]
    result = (shape(*outputs[0]) if len(outputs) == 1 else "(" + ", ".join(shape(*o) for o in outputs) + ")")
    config = (f"{{debug = false, grid_x = {grid[0]} : i32, grid_y = {grid[1]} : i32, grid_z = {grid[2]} : i32, "
              f'ir = "{_mlir_string(buf.getvalue())}", name = "k", num_stages = 1 : i32, num_warps = 4 : i32}}')
    alias = ""
    if aliases:
        alias = ", output_to_operand_aliasing={" + ", ".join(
            f"{{{o}}}: ({i}, {{}})" if len(outputs) > 1 else f"{{}}: ({i}, {{}})" for o, i in aliases.items()) + "}"
    text = "\n".join(["HloModule m", "", "ENTRY main {", *params,
                      f"  ROOT c = {result} custom-call({', '.join(f'p{k}' for k in range(len(inputs)))}), "
                      f'custom_call_target="__gpu$xla.gpu.triton", api_version=API_VERSION_TYPED_FFI{alias}, '
                      f"backend_config={config}", "}", ""])
    return program_from_module(convert_text(text, "ops.hlo"))(*inputs)


RANGE8 = """
    %r = tt.make_range {end = 8 : i32, start = 0 : i32} : tensor<8xi32>"""


def _ptrs(name: str, arg: str, t: str = "f32", n: int = 8, offsets: str = "%r") -> str:
    return f"""
    %{name}_s = tt.splat {arg} : !tt.ptr<{t}> -> tensor<{n}x!tt.ptr<{t}>>
    %{name} = tt.addptr %{name}_s, {offsets} : tensor<{n}x!tt.ptr<{t}>>, tensor<{n}xi32>"""


def test_join_split_reshape_clamp_precise():
    x = np.array([-2.0, -0.25, 0.0, 0.3, 0.75, 4.0, 9.0, np.nan], np.float32)
    y = np.array([1, 2, 4, 8, 0.5, 3, 6, 1], np.float32)
    ir = f"""
module {{
  tt.func public @k(%x: !tt.ptr<f32>, %y: !tt.ptr<f32>, %o: !tt.ptr<f32>) {{{RANGE8}{_ptrs("px", "%x")}{_ptrs("py", "%y")}
    %a = tt.load %px : tensor<8x!tt.ptr<f32>>
    %b = tt.load %py : tensor<8x!tt.ptr<f32>>
    %lo = arith.constant dense<-5.000000e-01> : tensor<8xf32>
    %hi = arith.constant dense<5.000000e-01> : tensor<8xf32>
    %c0 = tt.clampf %a, %lo, %hi, propagateNan = none : tensor<8xf32>
    %c1 = tt.clampf %a, %lo, %hi, propagateNan = all : tensor<8xf32>
    %s = tt.precise_sqrt %b : tensor<8xf32>
    %d = tt.precise_divf %a, %b : tensor<8xf32>
    %j = tt.join %s, %d : tensor<8xf32> -> tensor<8x2xf32>
    %f = tt.reshape %j : tensor<8x2xf32> -> tensor<16xf32>
    %g = tt.reshape %f : tensor<16xf32> -> tensor<8x2xf32>
    %p, %q = tt.split %g : tensor<8x2xf32> -> tensor<8xf32>
    %e0 = arith.addf %c0, %p : tensor<8xf32>
    %e1 = arith.addf %c1, %q : tensor<8xf32>
    %r16 = tt.make_range {{end = 16 : i32, start = 0 : i32}} : tensor<16xi32>{_ptrs("po", "%o", n=16, offsets="%r16")}
    %two = tt.join %e0, %e1 : tensor<8xf32> -> tensor<8x2xf32>
    %flat = tt.reshape %two : tensor<8x2xf32> -> tensor<16xf32>
    tt.store %po, %flat : tensor<16x!tt.ptr<f32>>
    tt.return
  }}
}}"""
    got = _run(ir, [x, y], [((16,), np.float32)])[0].reshape(8, 2)
    with np.errstate(invalid="ignore"):
        clamp_none = np.where(np.isnan(x), -0.5, np.clip(x, -0.5, 0.5))
        clamp_all = np.clip(x, -0.5, 0.5)
    np.testing.assert_allclose(got[:, 0], clamp_none + np.sqrt(y), rtol=1e-6)
    np.testing.assert_allclose(got[:, 1], clamp_all + x / y, rtol=1e-6)
    assert np.isnan(got[7, 1]) and not np.isnan(got[7, 0])


def test_reverse_scan_and_two_operand_reduce():
    x = np.array([3, -1, 7, 7, 2, 0, -5, 4], np.float32)
    ir = f"""
module {{
  tt.func public @k(%x: !tt.ptr<f32>, %o: !tt.ptr<f32>, %i: !tt.ptr<i32>) {{{RANGE8}{_ptrs("px", "%x")}{_ptrs("po", "%o")}
    %a = tt.load %px : tensor<8x!tt.ptr<f32>>
    %s = "tt.scan"(%a) <{{axis = 0 : i32, reverse = true}}> ({{
    ^bb0(%l: f32, %rr: f32):
      %t = arith.addf %l, %rr : f32
      tt.scan.return %t : f32
    }}) : (tensor<8xf32>) -> tensor<8xf32>
    tt.store %po, %s : tensor<8x!tt.ptr<f32>>
    %m:2 = "tt.reduce"(%a, %r) <{{axis = 0 : i32}}> ({{
    ^bb0(%v0: f32, %i0: i32, %v1: f32, %i1: i32):
      %gt = arith.cmpf ogt, %v1, %v0 : f32
      %eq = arith.cmpf oeq, %v1, %v0 : f32
      %lt = arith.cmpi slt, %i1, %i0 : i32
      %tie = arith.andi %eq, %lt : i1
      %take = arith.ori %gt, %tie : i1
      %v = arith.select %take, %v1, %v0 : f32
      %ix = arith.select %take, %i1, %i0 : i32
      tt.reduce.return %v, %ix : f32, i32
    }}) : (tensor<8xf32>, tensor<8xi32>) -> (f32, i32)
    tt.store %i, %m#1 : !tt.ptr<i32>
    tt.return
  }}
}}"""
    scan, arg = _run(ir, [x], [((8,), np.float32), ((1,), np.int32)])
    np.testing.assert_array_equal(scan, np.cumsum(x[::-1])[::-1])
    assert int(arg[0]) == int(np.argmax(x)) == 2  # the first of the tied maxima


def test_atomics_in_grid_order():
    """Four programs: each takes a lock with tt.atomic_cas on a counter (the old value is
    its arrival number), and all unsigned-max their values into one accumulator."""
    counter = np.zeros(1, np.int32)
    acc = np.zeros(8, np.int32)
    ir = f"""
module {{
  tt.func public @k(%cnt: !tt.ptr<i32>, %acc: !tt.ptr<i32>, %o_cnt: !tt.ptr<i32>, %o_acc: !tt.ptr<i32>, %seen: !tt.ptr<i32>) {{{RANGE8}
    %pid = tt.get_program_id x : i32
    %old = tt.atomic_cas acq_rel, gpu, %o_cnt, %pid, %pid : (!tt.ptr<i32>, i32, i32) -> i32
    %one = arith.constant 1 : i32
    %next = arith.addi %pid, %one : i32
    %before = tt.atomic_rmw add, acq_rel, gpu, %o_cnt, %one : (!tt.ptr<i32>, i32) -> i32
    %ps = tt.addptr %seen, %pid : !tt.ptr<i32>, i32
    %both = arith.addi %old, %before : i32
    tt.store %ps, %both : !tt.ptr<i32>
    %big = arith.constant dense<-1> : tensor<8xi32>
    %pv = tt.splat %pid : i32 -> tensor<8xi32>
    %v = arith.muli %pv, %r : tensor<8xi32>
    %all = arith.cmpi eq, %pv, %pv : tensor<8xi32>
    %three = arith.constant 3 : i32
    %is3 = arith.cmpi eq, %pid, %three : i32
    %w = arith.select %is3, %big, %v : tensor<8xi32>{_ptrs("pa", "%o_acc", "i32")}
    %u = tt.atomic_rmw umax, acq_rel, gpu, %pa, %w, %all : (tensor<8x!tt.ptr<i32>>, tensor<8xi32>, tensor<8xi1>) -> tensor<8xi32>
    tt.return
  }}
}}"""
    # %u is unused: atomics whose old values are used on tensors are refused (see the pass).
    cnt, out, seen = _run(ir, [counter, acc], [((1,), np.int32), ((8,), np.int32), ((4,), np.int32)],
                          grid=(4, 1, 1), aliases={0: 0, 1: 1})
    # Program p finds the counter at p (each earlier program's cas matched and its add
    # counted), so cas returns p and writes p back, and the add returns p and makes it p + 1.
    np.testing.assert_array_equal(seen, [0, 2, 4, 6])
    assert int(cnt[0]) == 4
    # Unsigned max: program 3's -1 is 0xffffffff, the largest.
    np.testing.assert_array_equal(out, np.full(8, -1, np.int32))


@pytest.mark.parametrize("precision", ["bf16x3", pytest.param("bf16x6", marks=pytest.mark.slow),
                                       pytest.param("tf32x3", marks=pytest.mark.slow)])
def test_split_precision_dots(precision):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal((16, 16)).astype(np.float32)
    ir = f"""
module {{
  tt.func public @k(%a: !tt.ptr<f32>, %b: !tt.ptr<f32>, %o: !tt.ptr<f32>) {{
    %r = tt.make_range {{end = 256 : i32, start = 0 : i32}} : tensor<256xi32>{_ptrs("pa", "%a", n=256)}{_ptrs("pb", "%b", n=256)}{_ptrs("po", "%o", n=256)}
    %fa = tt.load %pa : tensor<256x!tt.ptr<f32>>
    %fb = tt.load %pb : tensor<256x!tt.ptr<f32>>
    %ma = tt.reshape %fa : tensor<256xf32> -> tensor<16x16xf32>
    %mb = tt.reshape %fb : tensor<256xf32> -> tensor<16x16xf32>
    %z = arith.constant dense<0.000000e+00> : tensor<16x16xf32>
    %d = tt.dot %ma, %mb, %z, inputPrecision = {precision} : tensor<16x16xf32> * tensor<16x16xf32> -> tensor<16x16xf32>
    %fd = tt.reshape %d : tensor<16x16xf32> -> tensor<256xf32>
    tt.store %po, %fd : tensor<256x!tt.ptr<f32>>
    tt.return
  }}
}}"""
    got = _run(ir, [a.ravel(), b.ravel()], [((256,), np.float32)])[0].reshape(16, 16)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # Split-precision emulation keeps ~8 (bf16x3: two bf16 parts, 2·8 bits), ~24 (bf16x6)
    # or ~22 (tf32x3) mantissa bits of each product: relative error of Σ|a||b| ≤ 2^-15,
    # 2^-20 and 2^-20 (the dropped low products), plus f32 rounding of the sums.
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    bound = {"bf16x3": 2.0 ** -14, "bf16x6": 2.0 ** -19, "tf32x3": 2.0 ** -19}[precision] * scale + 1e-6
    assert np.all(np.abs(got - exact) <= bound)
    # and coarser than exact f32 for bf16x3 (it is an emulation, not ieee)
    if precision == "bf16x3":
        assert np.abs(got - exact).max() > 2.0 ** -24 * scale.max()


def test_tensor_atomics_whose_old_values_are_used_are_refused():
    from converter.common.errors import ConverterError

    ir = f"""
module {{
  tt.func public @k(%a: !tt.ptr<f32>, %o: !tt.ptr<f32>, %old: !tt.ptr<f32>) {{{RANGE8}{_ptrs("po", "%o")}{_ptrs("pold", "%old")}
    %v = arith.constant dense<1.000000e+00> : tensor<8xf32>
    %prev = tt.atomic_rmw fadd, acq_rel, gpu, %po, %v : (tensor<8x!tt.ptr<f32>>, tensor<8xf32>) -> tensor<8xf32>
    tt.store %pold, %prev : tensor<8x!tt.ptr<f32>>
    tt.return
  }}
}}"""
    with pytest.raises(ConverterError) as e:
        _run(ir, [np.zeros(8, np.float32)], [((8,), np.float32), ((8,), np.float32)], aliases={0: 0})
    assert re.search(r"ops\.hlo:\d+:\d+: error: .*Triton kernel 'k': tt\.atomic_rmw on a tensor of pointers whose "
                     r"returned old values are used is not supported yet", str(e.value))


def test_pointers_through_loops_branches_and_selects():
    """Hand-written Triton style: a pointer advanced in an scf.for, chosen by an scf.if
    and an arith.select (Pallas itself indexes with offsets instead)."""
    x = np.arange(32, dtype=np.float32) * 0.5 - 3.0
    ir = f"""
module {{
  tt.func public @k(%x: !tt.ptr<f32>, %o: !tt.ptr<f32>) {{{RANGE8}{_ptrs("p0", "%x")}
    %zero = arith.constant dense<0.000000e+00> : tensor<8xf32>
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %step = arith.constant dense<8> : tensor<8xi32>
    %res:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%a = %zero, %p = %p0) -> (tensor<8xf32>, tensor<8x!tt.ptr<f32>>) : i32 {{
      %v = tt.load %p : tensor<8x!tt.ptr<f32>>
      %a2 = arith.addf %a, %v : tensor<8xf32>
      %p2 = tt.addptr %p, %step : tensor<8x!tt.ptr<f32>>, tensor<8xi32>
      scf.yield %a2, %p2 : tensor<8xf32>, tensor<8x!tt.ptr<f32>>
    }}
    %pid = tt.get_program_id x : i32
    %is0 = arith.cmpi eq, %pid, %c0 : i32
    %q = scf.if %is0 -> (tensor<8x!tt.ptr<f32>>) {{
      scf.yield %p0 : tensor<8x!tt.ptr<f32>>
    }} else {{
      %pb = tt.addptr %p0, %step : tensor<8x!tt.ptr<f32>>, tensor<8xi32>
      scf.yield %pb : tensor<8x!tt.ptr<f32>>
    }}
    %w = tt.load %q : tensor<8x!tt.ptr<f32>>
    %sel = arith.select %is0, %q, %p0 : tensor<8x!tt.ptr<f32>>
    %u = tt.load %sel : tensor<8x!tt.ptr<f32>>
    %ten = arith.constant dense<1.000000e+01> : tensor<8xf32>
    %hundred = arith.constant dense<1.000000e+02> : tensor<8xf32>
    %w10 = arith.mulf %w, %ten : tensor<8xf32>
    %u100 = arith.mulf %u, %hundred : tensor<8xf32>
    %s1 = arith.addf %res#0, %w10 : tensor<8xf32>
    %s2 = arith.addf %s1, %u100 : tensor<8xf32>
    %c8 = arith.constant 8 : i32
    %base = arith.muli %pid, %c8 : i32
    %bs = tt.splat %base : i32 -> tensor<8xi32>
    %off = arith.addi %r, %bs : tensor<8xi32>{_ptrs("po", "%o", offsets="%off")}
    tt.store %po, %s2 : tensor<8x!tt.ptr<f32>>
    tt.return
  }}
}}"""
    got = _run(ir, [x], [((16,), np.float32)], grid=(2, 1, 1))[0].reshape(2, 8)
    blocks = x.reshape(4, 8)
    total = blocks.sum(axis=0)
    np.testing.assert_allclose(got[0], total + 10 * blocks[0] + 100 * blocks[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], total + 10 * blocks[1] + 100 * blocks[0], rtol=1e-6)


def test_pointers_through_scf_while():
    """A pointer advanced in an scf.while (carried, and forwarded by scf.condition) until
    the running sum passes a bound."""
    x = np.arange(64, dtype=np.float32) * 0.25
    ir = f"""
module {{
  tt.func public @k(%x: !tt.ptr<f32>, %o: !tt.ptr<f32>) {{{RANGE8}{_ptrs("p0", "%x")}
    %zero = arith.constant dense<0.000000e+00> : tensor<8xf32>
    %bound = arith.constant 3.000000e+01 : f32
    %step = arith.constant dense<8> : tensor<8xi32>
    %res:2 = scf.while (%a = %zero, %p = %p0) : (tensor<8xf32>, tensor<8x!tt.ptr<f32>>) -> (tensor<8xf32>, tensor<8x!tt.ptr<f32>>) {{
      %s = "tt.reduce"(%a) <{{axis = 0 : i32}}> ({{
      ^bb0(%l: f32, %r2: f32):
        %m = arith.addf %l, %r2 : f32
        tt.reduce.return %m : f32
      }}) : (tensor<8xf32>) -> f32
      %go = arith.cmpf olt, %s, %bound : f32
      scf.condition(%go) %a, %p : tensor<8xf32>, tensor<8x!tt.ptr<f32>>
    }} do {{
    ^bb0(%a1: tensor<8xf32>, %p1: tensor<8x!tt.ptr<f32>>):
      %v = tt.load %p1 : tensor<8x!tt.ptr<f32>>
      %a2 = arith.addf %a1, %v : tensor<8xf32>
      %p2 = tt.addptr %p1, %step : tensor<8x!tt.ptr<f32>>, tensor<8xi32>
      scf.yield %a2, %p2 : tensor<8xf32>, tensor<8x!tt.ptr<f32>>
    }}
    %last = tt.load %res#1 : tensor<8x!tt.ptr<f32>>
    %out = arith.addf %res#0, %last : tensor<8xf32>{_ptrs("po", "%o")}
    tt.store %po, %out : tensor<8x!tt.ptr<f32>>
    tt.return
  }}
}}"""
    got = _run(ir, [x], [((8,), np.float32)])[0]
    blocks, acc, k = x.reshape(8, 8), np.zeros(8, np.float32), 0
    while acc.sum() < 30.0:
        acc, k = acc + blocks[k], k + 1
    np.testing.assert_allclose(got, acc + blocks[k], rtol=1e-6)


@pytest.mark.parametrize("fp8,rounding", [("f8E4M3FN", "rtne"), ("f8E5M2", "rtne"), ("f8E4M3FN", "rtz"),
                                          ("f8E5M2", "rtz")])
def test_fp_to_fp_fp8_round_trip(fp8: str, rounding: str):
    """f32 → fp8 (rtne: saturating, as Triton's cvt.rn.satfinite on SM90; rtz) → f32,
    against ml_dtypes' rounding of the same values, clamped to the fp8 range first."""
    import ml_dtypes

    dtype = {"f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2}[fp8]
    big = float(ml_dtypes.finfo(dtype).max)
    x = np.array([0.0, -0.0, 0.3, -1.7, 3.14159, 17.3, -250.0, 1e6, -1e6, np.nan, 2.0 ** -9, 1.0625,
                  big * 1.01, -big * 0.999, 0.1, -0.1], np.float32)
    ir = f"""
module {{
  tt.func public @k(%x: !tt.ptr<f32>, %o: !tt.ptr<f32>) {{
    %r = tt.make_range {{end = 16 : i32, start = 0 : i32}} : tensor<16xi32>{_ptrs("px", "%x", n=16)}
    %a = tt.load %px : tensor<16x!tt.ptr<f32>>
    %b = tt.fp_to_fp %a, rounding = {rounding} : tensor<16xf32> -> tensor<16x{fp8}>
    %c = tt.fp_to_fp %b : tensor<16x{fp8}> -> tensor<16xf32>{_ptrs("po", "%o", n=16)}
    tt.store %po, %c : tensor<16x!tt.ptr<f32>>
    tt.return
  }}
}}"""
    got = _run(ir, [x], [((16,), np.float32)])[0]
    clamped = np.clip(x, -big, big)
    nearest = clamped.astype(dtype).astype(np.float32)
    if rounding == "rtne":
        want = nearest
    else:  # the neighbour toward zero where rounding to nearest went away from zero
        away = np.abs(nearest) > np.abs(clamped)
        bits = nearest.astype(dtype).view(np.uint8)
        want = np.where(away, (bits - away.astype(np.uint8)).view(dtype).astype(np.float32), nearest)
        assert np.all(np.abs(want[~np.isnan(x)]) <= np.abs(clamped[~np.isnan(x)]))
    np.testing.assert_array_equal(got, want)


def test_approx_tanh_inline_asm_is_exact_tanh_and_other_asm_is_refused():
    from converter.common.errors import ConverterError

    x = np.linspace(-4, 4, 8).astype(np.float32)

    def kernel(asm: str) -> str:
        return f"""
module {{
  tt.func public @k(%x: !tt.ptr<f32>, %o: !tt.ptr<f32>) {{{RANGE8}{_ptrs("px", "%x")}
    %a = tt.load %px : tensor<8x!tt.ptr<f32>>
    %b = tt.elementwise_inline_asm "{asm}" {{constraints = "=r,r", packed_element = 1 : i32, pure = true}} %a : tensor<8xf32> -> tensor<8xf32>{_ptrs("po", "%o")}
    tt.store %po, %b : tensor<8x!tt.ptr<f32>>
    tt.return
  }}
}}"""
    got = _run(kernel("tanh.approx.f32 $0, $1;"), [x], [((8,), np.float32)])[0]
    # CPU computes the exact tanh (the GPU's tanh.approx.f32 is within ~2^-11 of it).
    np.testing.assert_allclose(got, np.tanh(x), rtol=2e-6, atol=1e-7)
    with pytest.raises(ConverterError) as e:
        _run(kernel("ex2.approx.f32 $0, $1;"), [x], [((8,), np.float32)])
    assert "tt.elementwise_inline_asm 'ex2.approx.f32 $0, $1;': inline PTX has no StableHLO equivalent" in str(e.value)


def test_fp8_dot_inputs():
    """tt.dot of an e4m3 by an e5m2 operand (made in-kernel by tt.fp_to_fp), f32 accumulator:
    fp8 products are exact in f32, so only the f32 sums round."""
    import ml_dtypes

    rng = np.random.default_rng(3)
    a = (rng.standard_normal((16, 16)) * 4).astype(np.float32)
    b = (rng.standard_normal((16, 16)) * 4).astype(np.float32)
    ir = f"""
module {{
  tt.func public @k(%a: !tt.ptr<f32>, %b: !tt.ptr<f32>, %o: !tt.ptr<f32>) {{
    %r = tt.make_range {{end = 256 : i32, start = 0 : i32}} : tensor<256xi32>{_ptrs("pa", "%a", n=256)}{_ptrs("pb", "%b", n=256)}
    %va = tt.load %pa : tensor<256x!tt.ptr<f32>>
    %vb = tt.load %pb : tensor<256x!tt.ptr<f32>>
    %ma = tt.reshape %va : tensor<256xf32> -> tensor<16x16xf32>
    %mb = tt.reshape %vb : tensor<256xf32> -> tensor<16x16xf32>
    %qa = tt.fp_to_fp %ma, rounding = rtne : tensor<16x16xf32> -> tensor<16x16xf8E4M3FN>
    %qb = tt.fp_to_fp %mb, rounding = rtne : tensor<16x16xf32> -> tensor<16x16xf8E5M2>
    %zero = arith.constant dense<0.000000e+00> : tensor<16x16xf32>
    %d = tt.dot %qa, %qb, %zero, inputPrecision = tf32 : tensor<16x16xf8E4M3FN> * tensor<16x16xf8E5M2> -> tensor<16x16xf32>
    %flat = tt.reshape %d : tensor<16x16xf32> -> tensor<256xf32>{_ptrs("po", "%o", n=256)}
    tt.store %po, %flat : tensor<256x!tt.ptr<f32>>
    tt.return
  }}
}}"""
    got = _run(ir, [a.ravel(), b.ravel()], [((256,), np.float32)])[0].reshape(16, 16)
    qa = a.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    qb = b.astype(ml_dtypes.float8_e5m2).astype(np.float64)
    want = qa @ qb
    # 16 exact products summed in f32: ≤ 16·2^-24 of the sum of their magnitudes.
    np.testing.assert_array_less(np.abs(got - want), 16 * 2.0 ** -24 * (np.abs(qa) @ np.abs(qb)) + 1e-30)


def test_calls_early_return_and_poison():
    """What Triton's frontend writes before its inliner runs (jax-triton's `ttir`, tokamax's
    kernels): helper functions called by tt.call (one returning a value, one storing, the
    latter inside an scf.for), an early `return` as cf.cond_br, and the unreachable block
    after a helper's return with ub.poison.  Programs 2 and 3 return before any store: their
    part of the output (which aliases input 1) keeps that input."""
    ir = f"""
module {{
  tt.func private @scaled(%p: !tt.ptr<f32>, %s: f32) -> tensor<8xf32> {{{RANGE8}{_ptrs("pp", "%p")}
    %v = tt.load %pp : tensor<8x!tt.ptr<f32>>
    %s8 = tt.splat %s : f32 -> tensor<8xf32>
    %m = arith.mulf %v, %s8 : tensor<8xf32>
    tt.return %m : tensor<8xf32>
  ^bb1:
    %u = ub.poison : tensor<8xf32>
    tt.return %u : tensor<8xf32>
  }}
  tt.func private @store_add(%p: !tt.ptr<f32>, %v: tensor<8xf32>) {{{RANGE8}{_ptrs("pp", "%p")}
    %old = tt.load %pp : tensor<8x!tt.ptr<f32>>
    %new = arith.addf %old, %v : tensor<8xf32>
    tt.store %pp, %new : tensor<8x!tt.ptr<f32>>
    tt.return
  }}
  tt.func public @k(%x: !tt.ptr<f32>, %o_in: !tt.ptr<f32>, %o: !tt.ptr<f32>) {{
    %pid = tt.get_program_id x : i32
    %c2 = arith.constant 2 : i32
    %early = arith.cmpi sge, %pid, %c2 : i32
    cf.cond_br %early, ^bb1, ^bb2
  ^bb1:
    tt.return
  ^bb2:
    %c8 = arith.constant 8 : i32
    %off = arith.muli %pid, %c8 : i32
    %xp = tt.addptr %x, %off : !tt.ptr<f32>, i32
    %op = tt.addptr %o, %off : !tt.ptr<f32>, i32
    %two = arith.constant 2.000000e+00 : f32
    %lb = arith.constant 0 : i32
    %ub = arith.constant 3 : i32
    %st = arith.constant 1 : i32
    scf.for %i = %lb to %ub step %st : i32 {{
      %v = tt.call @scaled(%xp, %two) : (!tt.ptr<f32>, f32) -> tensor<8xf32>
      tt.call @store_add(%op, %v) : (!tt.ptr<f32>, tensor<8xf32>) -> ()
    }}
    tt.return
  }}
}}"""
    rng = np.random.default_rng(0)
    x, o = (rng.standard_normal(32).astype(np.float32) for _ in range(2))
    got = _run(ir, [x, o], [((32,), np.float32)], grid=(4, 1, 1), aliases={0: 1})[0]
    want = o.copy()
    for _ in range(3):
        want[:16] += np.float32(2) * x[:16]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("body,message", [
    ("""cf.br ^bb1
  ^bb1:
    cf.br ^bb1""", "cf.br back to an earlier block (a loop of blocks, unstructured control flow) is not supported"),
    ("""tt.call @k(%x, %o) : (!tt.ptr<f32>, !tt.ptr<f32>) -> ()
    tt.return""", "tt.call of 'k' is recursive (through k): not supported"),
])
def test_loops_of_blocks_and_recursion_are_refused(body: str, message: str):
    from converter.common.errors import ConverterError

    ir = f"""
module {{
  tt.func public @k(%x: !tt.ptr<f32>, %o: !tt.ptr<f32>) {{
    {body}
  }}
}}"""
    with pytest.raises(ConverterError) as e:
        _run(ir, [np.zeros(8, np.float32)], [((8,), np.float32)])
    assert re.match(r"ops\.hlo:\d+:\d+: error: ", str(e.value)) and message in str(e.value)


def test_device_assertions_are_named_in_a_warning_not_dropped_silently():
    """`tt.assert` (tl.device_assert, Pallas' checks) stops the GPU program where it fails;
    the converted kernel cannot stop, so one warning names the kernel and each message, and
    the kernel computes as it would past a holding assertion."""
    from passes.gpu_assert import UncheckedAssertWarning

    x = np.linspace(-1, 2, 8).astype(np.float32)
    text = f"""
module {{
  tt.func public @k(%x: !tt.ptr<f32>, %o: !tt.ptr<f32>) {{{RANGE8}{_ptrs("px", "%x")}
    %a = tt.load %px : tensor<8x!tt.ptr<f32>>
    %zero = arith.constant dense<0.000000e+00> : tensor<8xf32>
    %ok = arith.cmpf oge, %a, %zero : tensor<8xf32>
    tt.assert %ok, "x must be >= 0" : tensor<8xi1>
    %b = arith.addf %a, %a : tensor<8xf32>{_ptrs("po", "%o")}
    tt.store %po, %b : tensor<8x!tt.ptr<f32>>
    tt.return
  }}
}}"""
    with pytest.warns(UncheckedAssertWarning) as caught:
        got = _run(text, [x], [((8,), np.float32)])[0]
    (message,) = [str(w.message) for w in caught if issubclass(w.category, UncheckedAssertWarning)]
    assert "Triton kernel 'k': 1 device assertion(s) not checked" in message and "'x must be >= 0'" in message
    np.testing.assert_array_equal(got, x + x)
