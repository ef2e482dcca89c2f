"""HLO IR → StableHLO: the importer (`core`) and its rules, one module per opcode family
(`rules`), registered in one table (`registry`).

Names are imported on first use, so that a light module of this package (`taps`: the
tap requests the command line parses) does not load MLIR and every rule; `core` fills
the rule table when it is imported."""

from __future__ import annotations

from converter.common.lazy import lazy_exports

_EXPORTS = {"HloImportError": "converter.importer.core", "ImportOptions": "converter.importer.core",
            "import_hlo": "converter.importer.core"}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
