"""HLO text format: typed IR, parser, printer.

Names are imported on first use: the IR alone (`converter.hlo.ir`) does not load the
parser, NumPy or the attribute grammars (the command line's start-up reads the IR's
types only)."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Computation": "converter.hlo.ir", "Instruction": "converter.hlo.ir", "Layout": "converter.hlo.ir",
    "Metadata": "converter.hlo.ir", "Module": "converter.hlo.ir", "Shape": "converter.hlo.ir",
    "HloParseError": "converter.hlo.parser", "parse_hlo": "converter.hlo.parser",
    "parse_hlo_file": "converter.hlo.parser",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'converter.hlo' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)
