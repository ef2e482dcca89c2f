"""HLO IR → StableHLO."""

from converter.importer.core import HloImportError, ImportOptions, import_hlo

__all__ = ["HloImportError", "ImportOptions", "import_hlo"]
