"""hlo-roundtrip: XLA HLO text dumps → portable StableHLO that recompiles and runs on CPU.

    import converter
    module = converter.convert_file("dump.hlo")          # jaxlib.mlir ir.Module
    hlo = converter.parse_hlo_file("dump.hlo")           # typed HLO IR
    prog = converter.load("dump.hlo"); prog(*inputs)     # compile and run on CPU

Names are imported on first use, so that `python -m converter` can configure jaxlib's
logging before jaxlib loads.
"""

from __future__ import annotations

import os

# jaxlib's C++ logging (its device list at INFO, each time a CPU client starts) is noise in a
# user's program and on the command line; jaxlib reads this when it loads, so it is set
# before any of our modules imports jaxlib.  A value the user set is kept.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from converter.common.lazy import lazy_exports  # noqa: E402  (imports nothing of jaxlib)

_EXPORTS = {
    "convert_file": "converter.runtime.convert", "convert_module": "converter.runtime.convert", "convert_text": "converter.runtime.convert",
    "ConverterError": "converter.common.errors",
    "HloParseError": "converter.hlo.parser", "parse_hlo": "converter.hlo.parser",
    "parse_hlo_file": "converter.hlo.parser",
    "HloImportError": "converter.importer.core", "ImportOptions": "converter.importer.core",
    "import_hlo": "converter.importer.core",
    "load": "converter.runtime.program", "Program": "converter.runtime.program",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
