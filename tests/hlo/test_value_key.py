"""attrs.value_key: the key under which the parser reuses a shape check and the importer
merges equal instructions.  Equal keys must mean identical values: the same types all
the way down and, for floats, the same bits (-0.0 is not 0.0, NaN payloads differ).
Oracle: a plain recursive comparison of types and bits (hypothesis)."""

from __future__ import annotations

import math
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from converter.hlo import attrs

SCALARS = st.one_of(st.integers(-3, 3), st.booleans(), st.sampled_from(["a", "b", "1"]),
                    st.sampled_from([0.0, -0.0, 1.0, math.inf, math.nan, struct.unpack("<d", b"\x01\x00\x00\x00\x00\x00\xf8\x7f")[0]]),
                    st.none(), st.sampled_from([attrs.SliceDim(0, 2), attrs.SliceDim(0, 2, 2), attrs.PaddingDim(1, 0)]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["x", "y"]), inner, max_size=2)), max_leaves=6)


def identical(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b)
    if type(a) is list:
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=400, deadline=None)
@given(VALUES, VALUES)
def test_equal_keys_are_identical_values(a, b):
    ka, kb = attrs.value_key(a), attrs.value_key(b)
    assert ka is not None and kb is not None
    hash(ka)
    assert (ka == kb) == identical(a, b), (a, b)


def test_a_value_of_an_unknown_kind_has_no_key():
    assert attrs.value_key({"statistics": attrs.Statistics(1, (("stat-0", 0.5),))}) is None
    assert attrs.value_key([object()]) is None
    assert attrs.value_key({"dimensions": [0, 1]}) == attrs.value_key({"dimensions": [0, 1]})
