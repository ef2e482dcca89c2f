"""cub-sort: XLA's CUB radix-sort calls in the forms XLA's SortRewriter and
EstimateCubScratchSize write them (`__cub$DeviceRadixSort` with SortOptions JSON,
`xla.gpu.ext.cub_sort_keys/pairs` with {descending, batch_size}), against two oracles:
- NumPy: a stable argsort of each row by CUB's radix key (the key's bits made unsigned and
  order-preserving: integers with the sign bit flipped, floats with negatives' bits all
  flipped and positives' sign bit flipped, −0 as +0; all bits flipped for descending);
- XLA on CPU running the plain `sort` the rewriter replaced (a TOTALORDER comparator), on
  keys without ±0 (where CUB and a total-order sort differ by design).
Sorting moves values without arithmetic: results must be equal bit for bit."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from converter.runtime.convert import convert_text
from tests.helpers import convert_program, run_xla

HLO_TYPE = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int32": "s32", "uint8": "u8",
            "int64": "s64", "uint32": "u32", "int8": "s8", "uint16": "u16"}


def cub_module(form: str, key: str, value: str | None, shape: tuple[int, ...], descending: bool) -> str:
    dims = ",".join(map(str, shape))
    layout = "{" + ",".join(map(str, reversed(range(len(shape))))) + "}"
    k, v = f"{key}[{dims}]{layout}", f"{value}[{dims}]{layout}" if value else None
    batch = int(np.prod(shape[:-1], dtype=np.int64))
    if form == "legacy":
        target, config = "__cub$DeviceRadixSort", '{"descending":true}' if descending else "{}"
        api = ""
    else:
        target = "xla.gpu.ext.cub_sort_pairs" if value else "xla.gpu.ext.cub_sort_keys"
        config, api = f"{{descending = {str(descending).lower()}, batch_size = {batch} : i64}}", \
            ", api_version=API_VERSION_TYPED_FFI"
    params = f"  keys = {k} parameter(0)\n" + (f"  values = {v} parameter(1)\n" if value else "")
    results = [k] + ([v] if value else [])
    operands = "keys, values" if value else "keys"
    gtes = "".join(f"  r{i} = {t} get-tuple-element(s), index={i}\n" for i, t in enumerate(results))
    return f"""HloModule cub_sort
ENTRY main {{
{params}  s = ({", ".join(results)}, u8[1024]{{0}}) custom-call({operands}), custom_call_target="{target}"{api}, backend_config={config}
{gtes}  ROOT t = ({", ".join(results)}) tuple({", ".join(f"r{i}" for i in range(len(results)))})
}}
"""


def plain_module(key: str, value: str | None, shape: tuple[int, ...], descending: bool) -> str:
    """The sort SortRewriter replaces: one key operand, a plain TOTALORDER comparison."""
    dims = ",".join(map(str, shape))
    k, v = f"{key}[{dims}]", f"{value}[{dims}]" if value else None
    params = [f"  keys = {k} parameter(0)"] + ([f"  values = {v} parameter(1)"] if value else [])
    cmp_params = [f"  a = {key}[] parameter(0)", f"  b = {key}[] parameter(1)"]
    if value:
        cmp_params += [f"  c = {value}[] parameter(2)", f"  d = {value}[] parameter(3)"]
    order = "TOTALORDER" if key[0] in "fb" else ("UNSIGNED" if key[0] == "u" else "SIGNED")
    results = [k] + ([v] if value else [])
    return f"""HloModule plain_sort
less {{
{chr(10).join(cmp_params)}
  ROOT lt = pred[] compare(a, b), direction={"GT" if descending else "LT"}, type={order}
}}
ENTRY main {{
{chr(10).join(params)}
  ROOT s = ({", ".join(results)}) sort({"keys, values" if value else "keys"}), dimensions={{{len(shape) - 1}}}, is_stable=true, to_apply=less
}}
"""


def radix_key(keys: np.ndarray, descending: bool) -> np.ndarray:
    """CUB's unsigned radix key of each key (see the module docstring)."""
    bits = keys.dtype.itemsize * 8
    unsigned = np.dtype(f"uint{bits}")
    sign = unsigned.type(1 << (bits - 1))
    raw = keys.view(unsigned)
    if keys.dtype.kind == "u":
        key = raw.copy()
    elif keys.dtype.kind == "i":
        key = raw ^ sign
    else:
        raw = np.where(raw == sign, unsigned.type(0), raw)  # −0 → +0
        key = np.where(raw & sign, ~raw, raw ^ sign)
    return ~key if descending else key


def numpy_sort(keys: np.ndarray, values: np.ndarray | None, descending: bool) -> list[np.ndarray]:
    order = np.argsort(radix_key(keys, descending), axis=-1, kind="stable")
    out = [np.take_along_axis(keys, order, -1)]
    if values is not None:
        out.append(np.take_along_axis(values, order, -1))
    return out


def special_keys(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...], signed_zeros: bool) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, 1, info.min + 1, 7], dtype=dtype)
        keys = rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64 if dtype.kind == "i" or
                            dtype.itemsize < 8 else np.uint64).astype(dtype)
    else:
        pool = np.array([np.inf, -np.inf, np.nan, -np.nan, 1.5, -1.5, 0.0] + ([-0.0] if signed_zeros else []),
                        np.float32).astype(dtype)
        keys = rng.standard_normal(shape).astype(np.float32).astype(dtype)
    pick = rng.random(shape) < 0.4  # many ties and special values
    return np.where(pick, rng.choice(pool, shape), keys).astype(dtype)


FORMS = ["legacy", "ffi"]
KEY_TYPES = ["float32", "float64", "float16", "bfloat16", "int32", "uint8", "int64", "uint32", "int8", "uint16"]


@settings(max_examples=25, deadline=None)
@given(form=st.sampled_from(FORMS), key=st.sampled_from(KEY_TYPES), pairs=st.booleans(), descending=st.booleans(),
       shape=st.sampled_from([(17,), (3, 9), (2, 2, 5), (1, 1)]), seed=st.integers(0, 2**31 - 1))
def test_cub_sort_matches_cubs_order(form, key, pairs, descending, shape, seed):
    rng = np.random.default_rng(seed)
    dtype = ml_dtypes.bfloat16 if key == "bfloat16" else np.dtype(key)
    keys = special_keys(rng, dtype, shape, signed_zeros=True)
    values = rng.integers(-1000, 1000, shape).astype(np.int32) if pairs else None
    text = cub_module(form, HLO_TYPE[key], "s32" if pairs else None, shape, descending)
    got = convert_program(text)(*([keys] + ([values] if pairs else [])))
    want = numpy_sort(keys, values, descending)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), w.view(np.uint8))


@pytest.mark.parametrize("key", ["float32", "int32", "uint16", "bfloat16"])
@pytest.mark.parametrize("descending", [False, True])
def test_cub_sort_matches_the_plain_sort_on_xla(key, descending):
    """The custom-call and the sort it replaced, XLA on CPU running the latter: the same bits
    (keys without −0, which CUB ties with +0 and a total order puts first)."""
    rng = np.random.default_rng(4)
    shape = (4, 33)
    dtype = ml_dtypes.bfloat16 if key == "bfloat16" else np.dtype(key)
    keys = special_keys(rng, dtype, shape, signed_zeros=False)
    values = rng.standard_normal(shape).astype(np.float32)
    got = convert_program(cub_module("ffi", HLO_TYPE[key], "f32", shape, descending))(keys, values)
    want = run_xla(plain_module(HLO_TYPE[key], "f32", shape, descending), [keys, values])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))


def test_rewrite_leaves_no_custom_call_and_refuses_what_it_cannot_mean():
    assert "custom_call" not in str(convert_text(cub_module("ffi", "f32", None, (4, 8), False)))
    used_scratch = cub_module("ffi", "f32", None, (4, 8), False).replace(
        "  ROOT t = (f32[4,8]{1,0}) tuple(r0)", "  ROOT w = u8[1024]{0} get-tuple-element(s), index=1")
    with pytest.raises(Exception, match=r":4:\d+: error: .*xla.gpu.ext.cub_sort_keys.*scratch result"):
        convert_text(used_scratch)
    column_major = cub_module("legacy", "f32", None, (4, 8), False).replace("f32[4,8]{1,0} parameter(0)",
                                                                             "f32[4,8]{0,1} parameter(0)")
    column_major = column_major.replace('custom_call_target="__cub$DeviceRadixSort"',
                                        'custom_call_target="__cub$DeviceRadixSort", '
                                        'operand_layout_constraints={f32[4,8]{0,1}}')
    with pytest.raises(Exception, match=r"error: .*__cub\$DeviceRadixSort.*not row-major"):
        convert_text(column_major)
