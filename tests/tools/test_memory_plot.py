"""`memory --plot`: the peak marker says which definition of peak it marks (and the
curve's own maximum is marked apart where they differ), the y ticks sit at round binary
values, and memory colors holding no bytes stay out of the legend."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("matplotlib")

from converter.tools.memory import load_buffer_assignment, summarize  # noqa: E402
from converter.tools.memory.plot import binary_tick_step, build_figure  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "samples", "tpu_spmd_mlp_async_collective_fusion.buffer_assignment.txt")


@pytest.fixture(scope="module")
def summary():
    return summarize(load_buffer_assignment(SAMPLE))


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts] + [t.get_text() for t in ax.get_legend().get_texts()]


def test_peak_marker_names_its_definition(summary):
    import matplotlib.pyplot as plt

    fig, ax = build_figure(summary)
    try:
        texts = "\n".join(_texts(ax))
        t = summary.peak_time
        name = summary.dump.live_range.sequence[t]
        assert "XLA's peak moment" in texts and f"position {t}, the definition of {name}" in texts
        highest = max(range(len(summary.curve)), key=summary.curve.__getitem__)
        if highest != t:  # the sample's case: XLA's moment is not the curve's maximum
            assert f"maximum of this curve (live bytes by buffer size), not XLA's peak: position {highest}" in texts
    finally:
        plt.close(fig)


def test_ticks_at_round_binary_values(summary):
    import matplotlib.pyplot as plt

    fig, ax = build_figure(summary)
    try:
        ticks = [v for v in ax.get_yticks() if 0 <= v <= max(summary.curve)]
        step = binary_tick_step(max(summary.curve))
        assert step & (step - 1) == 0 and len(ticks) >= 3
        assert all(int(v) % step == 0 for v in ticks)
        assert ax.get_yticks()[1] - ax.get_yticks()[0] == step
    finally:
        plt.close(fig)
    assert binary_tick_step(1000) == 128 and binary_tick_step(3 * 2**30) == 2**29


def test_colors_without_bytes_are_not_in_the_legend(summary):
    import copy

    import matplotlib.pyplot as plt

    s = copy.copy(summary)
    s.curve_by_color = dict(summary.curve_by_color)
    s.curve_by_color[7] = [0] * len(summary.curve)
    s.curve_by_color.setdefault(0, list(summary.curve))
    fig, ax = build_figure(s)
    try:
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "color 7" not in legend
        holding = [c for c, row in s.curve_by_color.items() if any(row)]
        if len(holding) > 1:
            assert all(f"color {c}" in legend for c in holding)
    finally:
        plt.close(fig)
