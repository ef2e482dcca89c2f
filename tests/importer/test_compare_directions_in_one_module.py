"""Several compares of one element type but different directions (and orders) in one module:
each keeps its own direction.  (mutation_check's survivor: the importer caches a compare's
attributes per module, and a cache keyed without the direction gave every compare of a type
the first one's direction; every other test had one direction per type and module.)
Against NumPy (tests/importer/test_rules_elementwise.py compares each direction with XLA's);
a comparison has one right answer: exact."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from tests.helpers import run_ours

DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
              "GE": np.greater_equal}
TYPES = {"f32": np.float32, "s32": np.int32, "u8": np.uint8}


def _module(compares: list[tuple[str, str]]) -> str:
    lines = [f"  x.{t} = {t}[6]{{0}} parameter({2 * i})\n  y.{t} = {t}[6]{{0}} parameter({2 * i + 1})"
             for i, t in enumerate(TYPES)]
    for k, (t, d) in enumerate(compares):
        lines.append(f"  c{k} = pred[6]{{0}} compare(x.{t}, y.{t}), direction={d}")
    outs = ", ".join(f"c{k}" for k in range(len(compares)))
    types = ", ".join("pred[6]{0}" for _ in compares)
    return "HloModule compares\n\nENTRY main {\n" + "\n".join(lines) + f"\n  ROOT t = ({types}) tuple({outs})\n}}\n"


def _inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for dtype in TYPES.values():
        x = rng.integers(0, 3, 6).astype(dtype)  # few values: equal pairs are common
        y = rng.integers(0, 3, 6).astype(dtype)
        out += [x, y]
    return out


@settings(max_examples=5, deadline=None)
@given(compares=st.lists(st.tuples(st.sampled_from(sorted(TYPES)), st.sampled_from(sorted(DIRECTIONS))),
                         min_size=2, max_size=8), seed=st.integers(0, 1000))
def test_each_compare_keeps_its_own_direction(compares, seed):
    text = _module(compares)
    inputs = _inputs(seed)
    ours = run_ours(text, inputs)
    names = list(TYPES)
    for k, (t, d) in enumerate(compares):
        i = names.index(t)
        np.testing.assert_array_equal(ours[k], DIRECTIONS[d](inputs[2 * i], inputs[2 * i + 1]), err_msg=f"c{k} {t} {d}")

