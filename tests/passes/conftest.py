"""Fixtures of the pass tests."""

from __future__ import annotations

import pytest

from passes.lib import walks as walks_module


@pytest.fixture
def walk_count(monkeypatch) -> list[int]:
    """One entry per walk of a module by the pass manager's tracker (an index derived from
    another is no walk)."""
    count: list[int] = []

    class CountedIndex(walks_module.OpIndex):
        def __init__(self, module, ops=None, kinds=None, *, keep=None):
            if ops is None:
                count.append(1)
            super().__init__(module, ops, kinds, keep=keep)

    monkeypatch.setattr(walks_module, "OpIndex", CountedIndex)
    return count
