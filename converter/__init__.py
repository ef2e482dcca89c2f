"""hlo-roundtrip: XLA HLO text dumps → portable StableHLO that recompiles and runs on CPU.

    import converter
    module = converter.convert_file("dump.hlo")          # jaxlib.mlir ir.Module
    hlo = converter.parse_hlo_file("dump.hlo")           # typed HLO IR
"""

from converter.api import convert_file, convert_module, convert_text
from converter.errors import ConverterError
from converter.hlo.parser import HloParseError, parse_hlo, parse_hlo_file
from converter.importer.core import HloImportError, ImportOptions, import_hlo

__all__ = [
    "ConverterError", "HloImportError", "HloParseError", "ImportOptions", "convert_file",
    "convert_module", "convert_text", "import_hlo", "parse_hlo", "parse_hlo_file",
]
