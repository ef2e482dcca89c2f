"""Dumps with one number edited (a dimension, an index, a device id, a tile, a group size):
whatever the edit makes of the module, converting it ends in MLIR or in a located
error, never in a Python exception of another kind or an abort.  Generated over the
small dumps of every backend under tests/dumps and the accepted snippets: the class of
inputs in which edits found a division by zero (mesh axis 0), exhausted memory (a
2^31-device mesh or iota list), an i32 device count that wrapped, an 'importer bug'
report (a device id implying 2^31 replicas) and a buffer shape's internal error."""

from __future__ import annotations

import pathlib
import re
import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

from converter.common.errors import ConverterError
from converter.mlir.serialize import module_to_bytes
from converter.runtime.convert import convert_text

ROOT = pathlib.Path(__file__).resolve().parent
DUMPS = sorted(p for p in [*(ROOT / "dumps").rglob("*.hlo"), *(ROOT / "hlo" / "snippets" / "accepted").glob("*.hlo")]
               if p.stat().st_size < 6000)
# An integer token outside names, strings and other numbers.
_INT = re.compile(r"(?<![\w.%#\"])-?\d+(?![\w.\"])")


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(DUMPS), st.data())
def test_a_dump_with_one_number_edited_converts_or_is_a_located_error(path, data):
    lines = path.read_text().split("\n")
    candidates = [(i, m) for i, line in enumerate(lines) if " = " in line
                  for m in _INT.finditer(line[:min([line.find(k) for k in ("metadata=", "backend_config=")
                                                    if k in line] or [len(line)])])]
    if not candidates:
        return
    i, m = data.draw(st.sampled_from(candidates))
    value = int(m.group(0))
    new = data.draw(st.sampled_from([value + 1, value - 1, 0, -1, 2 * value, 1 << 31, 1 << 32, 7]))
    lines[i] = lines[i][:m.start()] + str(new) + lines[i][m.end():]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module_to_bytes(convert_text("\n".join(lines), "edited.hlo"), "mlir")
    except ConverterError as e:
        assert "edited.hlo" in str(e) or "error:" in str(e), e  # says where, or at least that it is one
