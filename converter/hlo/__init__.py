"""HLO text format: typed IR, parser, printer.

Names are imported on first use: the IR alone (`converter.hlo.ir`) does not load the
parser, NumPy or the attribute grammars (the command line's start-up reads the IR's
types only)."""

from __future__ import annotations

from converter.common.lazy import lazy_exports

_EXPORTS = {
    "Computation": "converter.hlo.ir", "Instruction": "converter.hlo.ir", "Layout": "converter.hlo.ir",
    "Metadata": "converter.hlo.ir", "Module": "converter.hlo.ir", "Shape": "converter.hlo.ir",
    "HloParseError": "converter.hlo.parser", "parse_hlo": "converter.hlo.parser",
    "parse_hlo_file": "converter.hlo.parser",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
