"""Bitcasts between layouts (rules/shapes.py: import_bitcast).  After layout assignment a
bitcast reinterprets its operand's bytes, laid out by the operand's layout, as the
result shape laid out by the result's layout.

Oracle (NumPy, from that definition): write the operand in its physical order (dims
major-to-minor, i.e. the layout's minor_to_major reversed), read those bytes as the
result's element type in the result's physical order, and permute back to the result's
logical order.  Tiling (`T(8,128)(2,1)`) and memory spaces (`S(1)`) do not move elements
for the bitcasts XLA forms; a second oracle that lays the bytes out tile by tile (XLA's
tiled layout: pad to whole tiles, tiles major, repeated tilings applied to the minor
dimensions) agrees on every tiled case here, and on the tiled bitcasts of the TPU dumps under
tests/dumps/tpu (the last test).

XLA is no oracle here: its HLO→MHLO import keeps a bitcast as mhlo.bitcast with both
layouts, which jaxlib then fails to compile (even for row-major reshapes: "layout
minor_to_major field contains 2 elements, but shape has 3 dimensions").  Bitcasts move
bits: every check is exact, on bit patterns."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from converter.hlo import dtypes
from converter.runtime.convert import convert_text
from converter.hlo.parser import parse_hlo
from converter.importer.core import HloImportError
from tests.helpers import run_ours


def _shape(text):
    """The parsed Shape of an HLO shape text, e.g. 'f32[2,3]{0,1}' (a Shape passes)."""
    if not isinstance(text, str):
        return text
    module = parse_hlo(f"HloModule s\nENTRY main {{\n  ROOT p = {text} parameter(0)\n}}\n")
    return module.entry.root.shape


def _major_to_minor(shape) -> list[int]:
    if shape.layout is None or not shape.layout.minor_to_major:
        return list(range(shape.rank))
    return list(reversed(shape.layout.minor_to_major))


def reinterpret(x: np.ndarray, source_text: str, result_text: str) -> np.ndarray:
    """The bitcast by definition: operand bytes in physical order, read as the result
    in its physical order."""
    source, result = _shape(source_text), _shape(result_text)
    physical_bytes = np.ascontiguousarray(np.transpose(x, _major_to_minor(source))).tobytes()
    order = _major_to_minor(result)
    physical_dims = [result.dims[d] for d in order]
    values = np.frombuffer(physical_bytes, dtype=dtypes.numpy_dtype(result.element_type)).reshape(physical_dims)
    return np.transpose(values, np.argsort(order))


def _tiled_buffer(x: np.ndarray, shape) -> np.ndarray:
    """Elements of `x` in the order XLA's tiled layout stores them (0 in tile padding)."""
    arr = np.transpose(x, _major_to_minor(shape))
    for tile in (t.dims for t in (shape.layout.tiles if shape.layout is not None else ())):
        k = len(tile)
        if k > arr.ndim:
            arr = arr.reshape((1,) * (k - arr.ndim) + arr.shape)
        lead, dims = arr.shape[:-k], arr.shape[-k:]
        padded = [-(-d // t) * t for d, t in zip(dims, tile)]
        arr = np.pad(arr, [(0, 0)] * len(lead) + [(0, p - d) for p, d in zip(padded, dims)])
        split = list(lead)
        for p, t in zip(padded, tile):
            split += [p // t, t]
        arr = arr.reshape(split)
        n = len(lead)
        arr = arr.transpose(list(range(n)) + [n + 2 * i for i in range(k)] + [n + 2 * i + 1 for i in range(k)])
    return arr.reshape(-1)


def reinterpret_tiled(x: np.ndarray, source_text: str, result_text: str) -> tuple[np.ndarray, np.ndarray]:
    """The bitcast with tiles laid out: (result values, mask of result elements that
    landed on operand data rather than tile padding)."""
    source, result = _shape(source_text), _shape(result_text)
    flat_index = np.arange(1, x.size + 1).reshape(x.shape)
    source_positions = _tiled_buffer(flat_index, source)          # buffer slot -> operand element + 1
    count = int(np.prod(result.dims))
    result_positions = _tiled_buffer(np.arange(1, count + 1).reshape(result.dims), result)
    size = min(len(source_positions), len(result_positions))
    out = np.zeros(count, x.dtype)
    landed = np.zeros(count, bool)
    slots = np.nonzero((result_positions[:size] > 0) & (source_positions[:size] > 0))[0]
    out[result_positions[slots] - 1] = x.reshape(-1)[source_positions[slots] - 1]
    landed[result_positions[slots] - 1] = True
    return out.reshape(result.dims), landed.reshape(result.dims)


def _module(source_text: str, result_text: str) -> str:
    return f"""HloModule bitcast
ENTRY main {{
  x = {source_text} parameter(0)
  ROOT b = {result_text} bitcast(x)
}}
"""


def _values(shape_text: str, seed: int = 0) -> np.ndarray:
    shape = _shape(shape_text)
    dtype = dtypes.numpy_dtype(shape.element_type)
    count = int(np.prod(shape.dims))
    # Distinct values, so that any misplaced element shows.
    return (np.random.default_rng(seed).permutation(count) - count // 2).astype(dtype).reshape(shape.dims)


def _assert_same_bits(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, what
    np.testing.assert_array_equal(actual.view(f"u{actual.dtype.itemsize}"),
                                  expected.view(f"u{expected.dtype.itemsize}"), err_msg=what)


TRANSPOSING_AND_RESHAPING = [
    ("f32[2,3]{1,0}", "f32[3,2]{0,1}"),
    ("f32[32,1,1024]{2,0,1}", "f32[32,1024]{1,0}"),
    ("f32[4,1,8]{2,0,1}", "f32[4,8]{1,0}"),
    ("f32[2,3,4]{0,1,2}", "f32[4,3,2]{2,1,0}"),
    ("f32[2,3,4]{1,2,0}", "f32[6,4]{0,1}"),
    ("f32[2,3,4]{2,0,1}", "f32[3,8]{1,0}"),
    ("s32[2,3,4,5]{3,1,2,0}", "s32[5,4,6]{0,2,1}"),
    ("f32[2,1,3,4]{2,3,0,1}", "f32[3,8]{0,1}"),
    ("bf16[4,6]{0,1}", "bf16[2,2,6]{0,2,1}"),
    ("f32[1,1]{0,1}", "f32[]"),
    ("f32[]", "f32[1,1,1]{1,2,0}"),
    ("f32[4]{0:S(1)}", "f32[2,2]{0,1:S(1)}"),
]


@pytest.mark.parametrize("source,result", TRANSPOSING_AND_RESHAPING)
def test_transposing_and_reshaping_bitcasts_match_the_byte_oracle(source, result):
    x = _values(source)
    (out,) = run_ours(_module(source, result), [x])
    _assert_same_bits(out, reinterpret(x, source, result))


def test_default_layout_bitcasts_are_reshapes():
    hlo = """HloModule bitcast_default
ENTRY main {
  x = f32[2,3,4]{2,1,0} parameter(0)
  a = f32[6,4]{1,0} bitcast(x)
  b = f32[24]{0} bitcast(x)
  c = f32[2,1,12]{2,1,0} bitcast(x)
  ROOT r = (f32[6,4]{1,0}, f32[24]{0}, f32[2,1,12]{2,1,0}) tuple(a, b, c)
}
"""
    x = _values("f32[2,3,4]{2,1,0}")
    outs = run_ours(hlo, [x])
    for out, result in zip(outs, ["f32[6,4]{1,0}", "f32[24]{0}", "f32[2,1,12]{2,1,0}"]):
        _assert_same_bits(out, reinterpret(x, "f32[2,3,4]{2,1,0}", result))
        _assert_same_bits(out, x.reshape(out.shape))


TILED = [
    ("bf16[16,256]{1,0:T(8,128)(2,1)}", "bf16[16,256,1]{1,0,2:T(8,128)(2,1)}"),
    ("bf16[16,256,1]{1,0,2:T(8,128)(2,1)}", "bf16[16,256]{1,0:T(8,128)(2,1)}"),
    ("f32[4,8,128]{2,1,0:T(8,128)}", "f32[32,128]{1,0:T(8,128)}"),
    ("f32[32,128]{1,0:T(8,128)}", "f32[2,16,128]{2,1,0:T(8,128)}"),
    ("bf16[1,16,384]{2,1,0:T(8,128)(2,1)}", "bf16[16,384]{1,0:T(8,128)(2,1)}"),
    ("s8[64,128]{1,0:T(32,128)(4,1)}", "s8[2,32,128]{2,1,0:T(32,128)(4,1)}"),
]


@pytest.mark.parametrize("source,result", TILED)
def test_tiled_bitcasts_match_both_oracles(source, result):
    x = _values(source)
    (out,) = run_ours(_module(source, result), [x])
    _assert_same_bits(out, reinterpret(x, source, result), "untiled oracle")
    tiled, landed = reinterpret_tiled(x, source, result)
    assert landed.all()
    _assert_same_bits(out, tiled, "tiled oracle")


# Bitcasts whose tiles order elements unlike the untiled reading: a tile row (128) wider
# than the minor dim it cuts, so whole tiles interleave (the TPU's all-reduce-scatter
# fusion of a Megatron layer bitcasts f32[8,64,256] to f32[128,8,128] and back); pairs of
# bf16 rows packed by (2,1) against a layout without them.
TILE_REORDERING = [
    ("f32[8,64,256]{2,1,0:T(8,128)}", "f32[128,8,128]{2,1,0:T(8,128)}"),
    ("f32[32,8,128]{2,1,0:T(8,128)}", "f32[2,64,256]{2,1,0:T(8,128)}"),
    ("f32[16,256]{1,0:T(8,128)}", "f32[4,8,128]{2,1,0:T(8,128)}"),
    ("bf16[16,128]{1,0:T(8,128)(2,1)}", "bf16[16,128]{1,0:T(8,128)}"),
    ("bf16[16,256]{1,0:T(8,128)(2,1)}", "bf16[4,8,128]{2,1,0:T(8,128)(2,1)}"),
]


@pytest.mark.parametrize("source,result", TILE_REORDERING)
def test_bitcasts_whose_tiles_reorder_elements_follow_the_tiled_oracle(source, result):
    x = _values(source)
    (out,) = run_ours(_module(source, result), [x])
    tiled, landed = reinterpret_tiled(x, source, result)
    assert landed.all()
    assert not np.array_equal(tiled, reinterpret(x, source, result)), "the case must tell the readings apart"
    _assert_same_bits(out, tiled)


def test_the_large_tpu_weight_bitcast_is_one_reshape_and_moves_nothing():
    """bf16[4096,14336]{1,0:T(8,128)(2,1)} → bf16[4096,14336,1]{1,0,2:T(8,128)(2,1)}: the
    unit dimension goes major-most physically, so the bytes are a reshape; the faithful
    import says so with a single reshape (no 117 MB transpose).  Its values are checked
    on the same layouts at bf16[16,256] (TILED above): running 58M elements here would
    cost seconds and show nothing more."""
    source, result = "bf16[4096,14336]{1,0:T(8,128)(2,1)}", "bf16[4096,14336,1]{1,0,2:T(8,128)(2,1)}"
    text = str(convert_text(_module(source, result), "<test>", pipeline="none"))
    body = text[text.index("func.func"):]
    assert body.count("stablehlo.reshape") == 1 and "stablehlo.transpose" not in body
    assert "tensor<4096x14336xbf16>) -> tensor<4096x14336x1xbf16>" in body


def test_tile_padding_bitcasts_slice_or_pad_within_the_tiles():
    """f32[8,5] and f32[7,5] under T(8,128) occupy the same tile: element (i, j) sits at
    the same offset in both, so the bitcast to fewer rows is a slice, and to more rows
    keeps every existing element (the extra row is tile padding: undefined, not compared)."""
    x = _values("f32[8,5]{1,0:T(8,128)}")
    hlo = """HloModule tile_padding
ENTRY main {
  x = f32[8,5]{1,0:T(8,128)} parameter(0)
  s = f32[7,5]{1,0:T(8,128)} bitcast(x)
  g = f32[8,5]{1,0:T(8,128)} bitcast(s)
  ROOT r = (f32[7,5]{1,0:T(8,128)}, f32[8,5]{1,0:T(8,128)}) tuple(s, g)
}
"""
    shrunk, grown = run_ours(hlo, [x])
    tiled, landed = reinterpret_tiled(x, "f32[8,5]{1,0:T(8,128)}", "f32[7,5]{1,0:T(8,128)}")
    assert landed.all()
    _assert_same_bits(shrunk, tiled)
    _assert_same_bits(shrunk, x[:7])
    tiled_back, landed_back = reinterpret_tiled(shrunk, "f32[7,5]{1,0:T(8,128)}", "f32[8,5]{1,0:T(8,128)}")
    _assert_same_bits(grown[landed_back], tiled_back[landed_back])
    _assert_same_bits(grown[:7], x[:7])


ELEMENT_TYPE_CHANGING = [
    ("f32[2,3]{1,0}", "s32[3,2]{0,1}"),
    ("bf16[4,2]{0,1}", "f16[8]{0}"),
    ("u32[2,4]{1,0}", "f32[4,2]{0,1}"),
    ("s16[2,3,2]{0,2,1}", "bf16[12]{0}"),
    ("f64[3,2]{0,1}", "s64[2,3]{1,0}"),
    ("bf16[16,256]{1,0:T(8,128)(2,1)}", "s16[16,256,1]{1,0,2:T(8,128)(2,1)}"),
]


@pytest.mark.parametrize("source,result", ELEMENT_TYPE_CHANGING)
def test_element_type_changing_bitcasts_of_equal_width(source, result):
    x = _values(source)
    (out,) = run_ours(_module(source, result), [x])
    _assert_same_bits(out, reinterpret(x, source, result))


WIDTH_CHANGING = [
    ("f32[12]{0}", "u16[12,2]{1,0}"),  # XLA GPU's bitcast of jax.lax.bitcast_convert_type(f32, u16)
    ("f32[3,4]{0,1}", "u8[4,3,4]{2,0,1}"),
    ("u16[6,2]{1,0}", "f32[6]{0}"),
    ("s8[2,4,3]{1,2,0}", "s32[2,3]{1,0}"),
    ("f64[5]{0}", "bf16[20]{0}"),
]


@pytest.mark.parametrize("source,result", WIDTH_CHANGING)
def test_bitcasts_between_element_widths_read_the_bytes_in_memory_order(source, result):
    x = _values(source)
    (out,) = run_ours(_module(source, result), [x])
    _assert_same_bits(out, reinterpret(x, source, result))


def test_bitcasts_that_change_the_byte_count_are_rejected():
    hlo = _module("f32[2,3]{1,0}", "f32[7]{0}")
    with pytest.raises(HloImportError, match=r"%b \(bitcast\): bitcast from .* changes the number of bytes"):
        convert_text(hlo, "<test>", pipeline="none")
    hlo = _module("f32[2,3]{1,0}", "f16[6]{0}")
    with pytest.raises(HloImportError, match=r"%b \(bitcast\): bitcast from .* changes the number of bytes"):
        convert_text(hlo, "<test>", pipeline="none")


def test_the_tpu_dumps_tiled_bitcasts_follow_the_tiled_oracle():
    """Every tiled bitcast in the bundled TPU dumps (up to 2^16 elements, for time), one
    module of them all, against the oracle that lays the bytes out tile by tile.  Most
    read the same without their tiles; some (all-reduce-scatter fusions) do not."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "dumps" / "tpu"
    pairs: dict[tuple[str, str], None] = {}
    for path in sorted(root.glob("*.hlo")):
        module = parse_hlo(path.read_text(), str(path))
        for comp in module.computations:
            for instr in comp.instructions:
                if instr.opcode != "bitcast":
                    continue
                source, result = comp.by_name[instr.operands[0]].shape, instr.shape
                tiled = any(s.layout is not None and s.layout.tiles for s in (source, result))
                if not tiled or source.num_elements() != result.num_elements() or source.num_elements() > 1 << 16:
                    continue
                if source.element_type != result.element_type:
                    continue
                # The element mapping does not depend on the element type: s32 indices
                # (the dump's tiles kept) make every element distinct.
                pairs[(str(dataclasses.replace(source, element_type="s32")),
                       str(dataclasses.replace(result, element_type="s32")))] = None
    assert len(pairs) > 20
    params, lines, inputs, wants = [], [], [], []
    reordering = 0
    for i, (source, result) in enumerate(pairs):
        x = np.arange(_shape(source).num_elements(), dtype=np.int32).reshape(_shape(source).dims)
        tiled, landed = reinterpret_tiled(x, source, result)
        assert landed.all(), (source, result)
        reordering += not np.array_equal(tiled, reinterpret(x, source, result))
        params.append(f"  x{i} = {source} parameter({i})")
        lines.append(f"  b{i} = {result} bitcast(x{i})")
        inputs.append(x)
        wants.append(tiled)
    hlo = (f"HloModule tpu_bitcasts\nENTRY main {{\n" + "\n".join(params + lines) +
           f"\n  ROOT t = ({', '.join(r for _, r in pairs)}) tuple({', '.join(f'b{i}' for i in range(len(pairs)))})\n}}\n")
    outs = run_ours(hlo, inputs)
    for (source, result), out, want in zip(pairs, outs, wants):
        np.testing.assert_array_equal(out, want, err_msg=f"{source} -> {result}")
    assert reordering >= 1  # the dumps hold at least one bitcast the untiled reading gets wrong
