"""Literal values of `constant(...)` and literal attributes: nested braces of numbers,
NaN payloads, complex pairs, tuples, elided `{...}`."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

import numpy as np

from converter.hlo import dtypes
from converter.hlo.lexer import (
    _INT64_MAX,
    _RE_BRACE_SPLIT,
    _RE_COMMENT,
    _RE_COMPLEX_TOKEN,
    _RE_LITERAL_SHAPE,
    _RE_LITERAL_TOKEN,
)
from converter.hlo.ir import ELEMENT_BITS, Shape


def _fits_int64(value: Any) -> bool:
    """Every integer in `value` (nested lists, tuples and attribute records) fits int64."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -(1 << 63) <= value <= _INT64_MAX
    if isinstance(value, (list, tuple)):
        return all(_fits_int64(v) for v in value)
    if dataclasses.is_dataclass(value):
        return all(_fits_int64(getattr(value, f.name)) for f in dataclasses.fields(value))
    return True


def _index(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


# ----------------------------------------------------------------------- literals
def parse_literal(text: str, shape: Shape) -> tuple[Any, bool]:
    """The values of `constant(text)` for `shape`: (numpy array or tuple, elided?)."""
    if "/*" in text:  # index comments XLA prints in large literals: `{ /*i0=0*/ {1, 2}, ...}`
        text = _RE_COMMENT.sub(" ", text)
    body = text.strip()
    if shape.is_tuple:
        if body == "{...}":
            raise ValueError("a tuple-shaped constant cannot be elided as '{...}' (XLA elides arrays only)")
        value, end = _tuple_literal(body, 0, shape)
        if body[end:].strip():
            raise ValueError(f"text after the tuple literal: '{body[end:end + 20].strip()}'")
        return value, False
    if body == "{...}":
        return None, True
    if shape.is_token or shape.element_type == "opaque":
        raise ValueError(f"a {shape.element_type}[] constant has no literal")
    etype = shape.element_type
    count = shape.num_elements()
    if etype in ("c64", "c128"):
        pairs = _RE_COMPLEX_TOKEN.findall(body)
        stripped = _RE_COMPLEX_TOKEN.sub("0", body)
        if not _RE_LITERAL_SHAPE.fullmatch(stripped) or len(pairs) != len(_RE_LITERAL_TOKEN.findall(stripped)):
            raise ValueError(f"expected {etype} values '(re, im)', found '{body[:30]}'")
        if shape.rank >= 2:
            _check_nesting(body, shape.dims, lambda piece: len(_RE_COMPLEX_TOKEN.findall(piece)))
        if len(pairs) != count:
            raise ValueError(f"literal has {len(pairs)} values, shape {shape} holds {count}")
        re_part = _float_array([a for a, _ in pairs])
        im_part = _float_array([b for _, b in pairs])
        # Assign the parts separately: `re + 1j * im` turns an infinite imaginary part
        # into a NaN real part (1j * inf is nan+infj).
        values = np.empty(count, dtype=dtypes.numpy_dtype(etype))
        values.real, values.imag = re_part, im_part
        return values.reshape(shape.dims), False
    if not _RE_LITERAL_SHAPE.fullmatch(body):
        bad = re.search(r"[^\s{},]+", _RE_LITERAL_TOKEN.sub(" ", body))
        raise ValueError(f"expected a {etype} literal value, found '{bad.group(0)[:30] if bad else body[:30]}'")
    tokens = _RE_LITERAL_TOKEN.findall(body)
    if shape.rank >= 1 and len(tokens) == 1 and "{" not in body and count >= 1:
        # XLA reads a bare scalar for an array as its first element, the others zero.
        tokens = tokens + ["0"] * (count - 1)
    elif shape.rank >= 2:
        _check_nesting(body, shape.dims, lambda piece: len(_RE_LITERAL_TOKEN.findall(piece)))
    elif shape.rank == 1 and (not body.startswith("{") or not body.endswith("}") or body.count("{") != 1):
        raise ValueError(f"expected a rank-1 literal '{{...}}' for {etype}{list(shape.dims)}")
    if len(tokens) != count:
        raise ValueError(f"literal has {len(tokens)} values, shape {etype}{list(shape.dims)} holds {count}")
    dtype = dtypes.numpy_dtype(etype)
    if etype == "pred":
        try:
            arr = np.array([t == "true" or (t != "false" and int(t) != 0) for t in tokens], dtype=np.bool_)
        except ValueError:
            raise ValueError(f"expected pred values (true, false or integers), found '{next(t for t in tokens if not re.fullmatch(r'-?[0-9]+|true|false', t))}'") from None
    elif "true" in tokens or "false" in tokens:
        raise ValueError(f"'true'/'false' in a {etype} literal")
    elif dtype.kind in "iu" or etype in ("s4", "u4", "s2", "u2"):
        try:
            ints = [int(t) for t in tokens]
        except ValueError:
            raise ValueError(f"expected {etype} integers, found '{next(t for t in tokens if not re.fullmatch(r'-?[0-9]+', t))}'") from None
        bits = ELEMENT_BITS[etype]
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if etype.startswith("s") else (0, (1 << bits) - 1)
        if etype == "s64":
            hi = (1 << 64) - 1  # XLA's lexer reads up to 2^64-1 and bit-casts to int64
        if ints and (min(ints) < lo or max(ints) > hi):
            bad = next(v for v in ints if v < lo or v > hi)
            raise ValueError(f"{bad} is out of range for {etype}")
        if etype == "s64":
            ints = [v - (1 << 64) if v >= 1 << 63 else v for v in ints]
        # A fixed 64-bit type: left to infer, NumPy promotes a mix of u64-only and int64
        # values to float64 and loses u64's upper range (and any odd value above 2^53).
        wide = np.uint64 if etype.startswith("u") else np.int64
        arr = np.array(ints, dtype=wide).astype(dtype)
    else:
        wide64 = _float_array(tokens)
        arr = wide64.astype(dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            overflow = np.isfinite(wide64) & ~np.isfinite(arr.astype(np.float64))
        if overflow.any():
            raise ValueError(f"{tokens[int(np.argmax(overflow))]} is out of range for {etype}")
        _set_nan_payloads(arr, tokens, etype)
    return arr.reshape(shape.dims), False


def _check_nesting(body: str, dims: tuple[int, ...], count: Callable[[str], int]) -> None:
    """A rank-r literal is nested exactly r deep, with dims[k] entries at depth k."""
    rank = len(dims)
    depth = 0
    children = [0] * (rank + 1)
    tops = 0
    for piece in _RE_BRACE_SPLIT.split(body):
        if piece == "{":
            if depth >= rank:
                raise ValueError(f"literal is nested deeper than its rank {rank}")
            if depth == 0:
                tops += 1
            else:
                children[depth] += 1
            depth += 1
            children[depth] = 0
        elif piece == "}":
            if depth == 0:
                raise ValueError("unbalanced '}' in the literal")
            if children[depth] != dims[depth - 1]:
                raise ValueError(f"literal dimension {depth - 1} has {children[depth]} entries, the shape {dims[depth - 1]}")
            depth -= 1
        else:
            n = count(piece)
            if n:
                if depth != rank:
                    raise ValueError(f"values at nesting depth {depth} of a rank-{rank} literal")
                children[depth] += n
    if depth or tops != 1:
        raise ValueError("literal braces do not balance")


def _tuple_literal(text: str, pos: int, shape: Shape) -> tuple[tuple, int]:
    """`( 1, ( {2, 3}, true ) )` for a tuple shape: elements in order, commas optional."""
    ws = re.compile(r"\s*")
    pos = ws.match(text, pos).end()
    if not text.startswith("(", pos):
        raise ValueError("expected a tuple literal '( ... )' for a tuple-shaped constant")
    pos += 1
    values = []
    for i, sub in enumerate(shape.tuple_shapes):
        pos = ws.match(text, pos).end()
        if i and text.startswith(",", pos):
            pos = ws.match(text, pos + 1).end()
        if sub.is_tuple:
            value, pos = _tuple_literal(text, pos, sub)
            values.append(value)
            continue
        if text.startswith(("{", "("), pos):
            closer = "}" if text[pos] == "{" else ")"
            depth, end = 0, pos
            for m in re.compile(r"[{}()]").finditer(text, pos):
                depth += 1 if m.group(0) in "{(" else -1
                if depth == 0:
                    end = m.end()
                    break
            else:
                raise ValueError(f"'{closer}' missing in the tuple literal")
        else:
            m = _RE_LITERAL_TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"expected element {i} of the tuple literal, found '{text[pos:pos + 20]}'")
            end = m.end()
        value, elided = parse_literal(text[pos:end], sub)
        values.append(None if elided else value)
        pos = end
    pos = ws.match(text, pos).end()
    if text.startswith(",", pos):
        pos = ws.match(text, pos + 1).end()
    if not text.startswith(")", pos):
        raise ValueError(f"tuple literal has more elements than its shape's {len(shape.tuple_shapes)}")
    return tuple(values), pos + 1


# Float types whose NaNs carry a payload XLA writes as `nan(0x...)`: mantissa bits.
_NAN_MANTISSA = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}
_UINT_OF_WIDTH = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _set_nan_payloads(arr: np.ndarray, tokens: list[str], etype: str) -> None:
    """`-nan` and `nan(0x...)` set the sign and payload bits XLA would set."""
    special = [i for i, t in enumerate(tokens) if "nan" in t and (t[0] == "-" or "(" in t)]
    if not special:
        return
    mantissa = _NAN_MANTISSA.get(etype)
    width = ELEMENT_BITS[etype]
    for i in special:
        t = tokens[i]
        negative = t.startswith("-")
        payload = int(t[t.index("(") + 3 : -1], 16) if "(" in t else None
        if mantissa is None:
            if payload is not None:
                raise ValueError(f"{etype} NaNs carry no payload: '{t}'")
            if negative:
                arr[i] = -arr[i]
            continue
        if payload is not None and not 0 < payload < (1 << mantissa):
            raise ValueError(f"NaN payload {hex(payload)} does not fit {etype}'s {mantissa} mantissa bits")
        if payload is None:
            payload = 1 << (mantissa - 1)  # the default quiet NaN
        bits = (((1 << (width - mantissa - 1)) - 1) << mantissa) | payload | (int(negative) << (width - 1))
        arr.reshape(-1).view(_UINT_OF_WIDTH[width])[i] = bits


def _float_array(tokens: list[str]) -> np.ndarray:
    try:
        return np.array(tokens, dtype=np.float64)
    except ValueError:
        out = []
        for t in tokens:
            t2 = t.lstrip("-")
            if t2.startswith("nan"):
                out.append(float("nan"))
            else:
                out.append(float(t))
        return np.array(out, dtype=np.float64)


