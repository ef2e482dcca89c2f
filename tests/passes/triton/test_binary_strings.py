"""Binary MLIR string attributes in backend configs (a Triton call's `ir` is MLIR bytecode)
come back from the HLO parser as their exact bytes; jaxlib's MLIR parser is the oracle."""

from __future__ import annotations

import pathlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.hlo.escapes import EscapeError, mlir_unescape_bytes
from converter.hlo.mlir_dicts import parse_mlir_dict
from converter.hlo.parser import parse_hlo

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps"


def _mlir_printed(data: bytes) -> str:
    """How MLIR prints a string attribute holding `data` (its own escaping)."""
    from jax._src.lib.mlir import ir

    with ir.Context():
        return str(ir.StringAttr.get(data))


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=24))
def test_any_bytes_printed_by_mlir_come_back_exactly(data):
    printed = _mlir_printed(data)
    value = parse_mlir_dict("{ir = " + printed + ", n = 3 : i32}")
    expected = data.decode("utf-8") if _is_utf8(data) else data
    assert value == {"ir": expected, "n": 3}
    assert mlir_unescape_bytes(printed[1:-1]) == data


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


_PIECES = [r"\0A", r"\EF", r"\e9", r"\n", r"\t", r"\"", r"\\", r"\q", r"\x41", r"\4", "a", "é", r"\00"]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=6).map("".join))
def test_escapes_are_read_and_refused_as_mlir_s_lexer_does(escaped):
    from jax._src.lib.mlir import ir

    with ir.Context() as ctx:
        try:
            attr = ir.StringAttr(ir.Attribute.parse(f'"{escaped}"', ctx))
        except Exception:  # MLIR's parser refuses it (an MLIRError, by jaxlib version)
            with pytest.raises(EscapeError):
                mlir_unescape_bytes(escaped)
            return
        assert mlir_unescape_bytes(escaped) == attr.value_bytes


@pytest.mark.parametrize("folder", ["jax010", "jax012"])
def test_triton_bytecode_in_a_real_dump_is_exact(folder):
    """The kernel bytecode the parser reads from a dump is the bytes jaxlib's MLIR parser
    reads from the same dictionary text (MLIR bytecode starts `ML\\xefR`)."""
    from jax._src.lib.mlir import ir

    text = (DUMPS / folder / "layer_norm.hlo").read_text()
    module = parse_hlo(text)
    configs = [i.attrs["backend_config"] for c in module.computations for i in c.instructions
               if i.attrs.get("custom_call_target") == "__gpu$xla.gpu.triton"]
    assert configs
    for config in configs:
        assert config.form == "mlir"
        ours = config.value["ir"]
        assert isinstance(ours, bytes) and ours.startswith(b"ML\xefR")
        with ir.Context() as ctx:
            ctx.allow_unregistered_dialects = True
            theirs = ir.StringAttr(ir.DictAttr(ir.Attribute.parse(config.raw, ctx))["ir"]).value_bytes
        assert ours == theirs
        assert isinstance(config.value["name"], str)
    assert re.search(r"ir = \"ML\\EFR", text)
