"""MLIR attribute dictionaries inside HLO text (`backend_config={...}` in MLIR syntax, Mosaic
and Triton kernel configs)."""

from __future__ import annotations

import re
from typing import Any

from converter.hlo import attrs
from converter.hlo.escapes import mlir_unescape, mlir_unescape_bytes


# ------------------------------------------------------------------ MLIR dictionary
_RE_MLIR_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>[-+]?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?|0x[0-9a-fA-F]+))'
    r"|(?P<id>[A-Za-z_][\w.$\-]*)|(?P<p>[{}\[\],=:<>]))"
)


def _string_value(escaped: str) -> str | bytes:
    """A string attribute's value: text, or its exact bytes where they are not UTF-8
    (MLIR strings hold bytes: a Triton call's `ir` is MLIR bytecode, a Mosaic GPU call's
    `kernel_hash` a digest)."""
    data = mlir_unescape_bytes(escaped)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def parse_mlir_dict(text: str) -> dict[str, Any]:
    """A small reader for MLIR dictionary attributes as XLA prints typed-FFI configs:
    `{name = 48 : i64, flag = true, scale = 1.0e-01 : f64, s = "x", l = [1, 2]}`.
    A string value whose bytes are not UTF-8 comes back as `bytes`, exactly."""
    pos = 0
    toks: list[tuple[str, str]] = []
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _RE_MLIR_TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"unexpected '{text[pos:pos + 10].strip()}'")
        kind = m.lastgroup
        toks.append((kind, m.group(kind)))
        pos = m.end()
    i = 0

    def value() -> Any:
        nonlocal i
        kind, tok = toks[i]
        if tok == "{":
            return dictionary()
        if tok == "[":
            i += 1
            items = []
            if toks[i][1] != "]":
                while True:
                    items.append(value())
                    if toks[i][1] == "]":
                        break
                    expect(",")
            i += 1
            return items
        if kind == "str":
            i += 1
            return _string_value(tok[1:-1])
        if kind == "num":
            i += 1
            v: Any = float(tok) if any(c in tok for c in ".eE") and not tok.startswith("0x") else int(tok, 0)
            if i < len(toks) and toks[i][1] == ":":
                i += 2  # the type: `: i64`, `: f64`
                if toks[i - 1][1] in ("f32", "f64", "f16", "bf16"):
                    v = float(v)
            return v
        if kind == "id":
            i += 1
            if tok in ("true", "false"):
                return tok == "true"
            if tok == "unit":
                return True
            if i < len(toks) and toks[i][1] == "<":  # array<i64: 1, 2>, dense<...>
                depth, start = 0, i
                while i < len(toks):
                    if toks[i][1] == "<":
                        depth += 1
                    elif toks[i][1] == ">":
                        depth -= 1
                        if depth == 0:
                            i += 1
                            break
                    i += 1
                inner = [t for _, t in toks[start + 1 : i - 1]]
                if tok == "array" and inner:
                    nums = [t for t in inner[2:] if t != ","]
                    try:
                        return [int(x) for x in nums]
                    except ValueError:
                        return [float(x) for x in nums]
                return attrs.MlirAttr(tok + "<" + " ".join(inner) + ">")
            return attrs.MlirAttr(tok)
        raise ValueError(f"unexpected '{tok}'")

    def expect(tok: str) -> None:
        nonlocal i
        if i >= len(toks) or toks[i][1] != tok:
            raise ValueError(f"expected '{tok}'")
        i += 1

    def dictionary() -> dict[str, Any]:
        nonlocal i
        expect("{")
        out: dict[str, Any] = {}
        if toks[i][1] == "}":
            i += 1
            return out
        while True:
            kind, key = toks[i]
            if kind == "str":
                key = mlir_unescape(key[1:-1])
            elif kind != "id":
                raise ValueError(f"expected a key, found '{key}'")
            i += 1
            if i < len(toks) and toks[i][1] == "=":
                i += 1
                out[key] = value()
            else:
                out[key] = True  # unit attribute
            if toks[i][1] == "}":
                i += 1
                return out
            expect(",")

    try:
        result = dictionary()
    except IndexError:
        raise ValueError("unexpected end of the dictionary") from None
    if i != len(toks):
        raise ValueError("text after the closing '}'")
    return result


