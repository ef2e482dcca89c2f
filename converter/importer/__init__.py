"""HLO IR → StableHLO: the importer (`core`) and its rules, one module per opcode family
(`rules`), registered in one table (`registry`).

Names are imported on first use, so that a light module of this package (`taps`: the
tap requests the command line parses) does not load MLIR and every rule; `core` fills
the rule table when it is imported."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"HloImportError": "converter.importer.core", "ImportOptions": "converter.importer.core",
            "import_hlo": "converter.importer.core"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'converter.importer' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)
