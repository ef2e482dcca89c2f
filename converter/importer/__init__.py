"""HLO IR → StableHLO: the importer (`core`) and its rules, one module per opcode family
(`rules`), registered in one table (`registry`)."""

from converter.importer import rules  # noqa: F401  (fills the rule table)
from converter.importer.core import HloImportError, ImportOptions, import_hlo

__all__ = ["HloImportError", "ImportOptions", "import_hlo"]
