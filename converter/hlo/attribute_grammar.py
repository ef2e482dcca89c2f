"""The grammar of instruction and module attribute values: one `v_<kind>` reader per kind
of value in `converter.hlo.attrs` (integers, lists, windows, groups, backend configs,
aliasing, literals, ...)."""

from __future__ import annotations

import difflib
import json
import math
import re
import warnings
from typing import Any, Callable

from converter.common.errors import ConverterWarning, SourceLocation, diagnostic
from converter.hlo import attrs as hlo_attrs
from converter.hlo.collectives import MAX_DEVICES
from converter.hlo.lexer import (
    HloParseError,
    _JSON,
    _RE_ATTR_FAST,
    _RE_ATTR_FLAT,
    _RE_ATTR_NAME,
    _RE_COMP_LIST,
    _RE_DIM_LABELS,
    _RE_DONOR,
    _RE_FLOAT,
    _RE_GROUP,
    _RE_GROUPS,
    _RE_IDENT,
    _RE_IDENT_LIST,
    _RE_INLINE_BODY,
    _RE_INT_LIST,
    _RE_IOTA,
    _RE_JSON_OBJECT_START,
    _RE_LINE_END,
    _RE_LITERAL_TOKEN,
    _RE_INT_TOKEN,
    _RE_METADATA,
    _RE_METADATA_ATTR,
    METADATA_ATTRS,
    OLDER_METADATA_ATTRS,
    _RE_NAME,
    _RE_OUT_ALIAS,
    _RE_PADDING,
    _RE_SLICE,
    _RE_SLICE_DIM,
    _RE_STRING_ANY,
    _RE_WINDOW,
    _RE_WINDOW_KV,
    _W,
)
from converter.hlo.literals import _fits_int64, _index, parse_literal
from converter.hlo.mlir_dicts import parse_mlir_dict
from converter.hlo.shape_grammar import ShapeGrammar
from converter.hlo.sharding_grammar import ShardingGrammar, groups_from_iota
from converter.hlo.ir import Instruction, Shape


# Attribute kinds whose values `AttributeGrammar.attributes` reuses for the same text: read by a
# pure function of the text, and immutable or a list of immutable items (copied).  The
# computation kinds only as names: `to_apply={ ... }` defines an inline computation.
_CACHED_KINDS = frozenset({
    hlo_attrs.INT, hlo_attrs.FLOAT, hlo_attrs.BOOL, hlo_attrs.IDENT, hlo_attrs.STRING, hlo_attrs.INTS, hlo_attrs.IDENTS, hlo_attrs.NAMES, hlo_attrs.COMP, hlo_attrs.COMPS,
    hlo_attrs.SLICE, hlo_attrs.PADDING, hlo_attrs.WINDOW, hlo_attrs.DIM_LABELS, hlo_attrs.GROUPS, hlo_attrs.PAIRS, hlo_attrs.SHARDING, hlo_attrs.SHAPE,
    hlo_attrs.SHAPES, hlo_attrs.BOOLS,
})
_CALL_KINDS = frozenset({hlo_attrs.COMP, hlo_attrs.COMPS})
# Attribute kinds holding integers, which XLA reads as int64.
_INTEGER_KINDS = frozenset({hlo_attrs.INT, hlo_attrs.INTS, hlo_attrs.INTS_OR_LISTS, hlo_attrs.GROUPS, hlo_attrs.PAIRS, hlo_attrs.SLICE, hlo_attrs.PADDING, hlo_attrs.WINDOW})


def conv_dim_labels(text: str) -> hlo_attrs.ConvDimLabels:
    m = _RE_DIM_LABELS.fullmatch(text)
    if m is None:
        raise ValueError(f"bad dim_labels '{text}'")
    lhs, rhs, out = m.groups()

    def spatial(labels: str, skip: str) -> tuple[int, ...]:
        digits = sorted((int(c), i) for i, c in enumerate(labels) if c.isdigit())
        if [d for d, _ in digits] != list(range(len(digits))):
            raise ValueError(f"spatial dimensions of '{labels}' are not 0..{len(digits) - 1}")
        if any(c not in skip and not c.isdigit() and c != "?" for c in labels):
            raise ValueError(f"'{labels}' may only hold {skip} and digits")
        return tuple(i for _, i in digits)

    for labels, needed in ((lhs, "bf"), (rhs, "io"), (out, "bf")):
        for c in needed:
            if labels.count(c) != 1:
                raise ValueError(f"'{labels}' must hold exactly one '{c}'")
    ls, rs, os_ = spatial(lhs, "bf"), spatial(rhs, "io"), spatial(out, "bf")
    if not (len(ls) == len(rs) == len(os_)):
        raise ValueError(f"dim_labels '{text}' disagree on the number of spatial dimensions")
    return hlo_attrs.ConvDimLabels(lhs.index("b"), lhs.index("f"), ls, rhs.index("i"), rhs.index("o"), rs,
                           out.index("b"), out.index("f"), os_, text)


# The values of metadata attributes as XLA's parser reads them (`checked_metadata`).
_METADATA_VALUE = {
    "string": _RE_STRING_ANY,
    "int": _RE_INT_TOKEN,
    "bool": re.compile(r"(?:true|false)(?![\w.\-])"),
    "profile": re.compile(r"\{" + _W + r"(?:[0-3](?:" + _W + r"," + _W + r"[0-3])*+)?" + _W + r"\}", re.S),
    # An attribute XLA does not know, kept (allow_unknown_attributes) in a form that
    # parse_metadata reads as one value: quoted, flat braces or a bare word.
    "unknown": re.compile(_RE_STRING_ANY.pattern + r'|\{[^{}]*\}|[^\s"\'{},]+', re.S),
}
_METADATA_EXPECTED = {"string": "a quoted string", "int": "an integer", "bool": "true or false",
                      "profile": "`{...}` of ProfileType numbers (0 to 3)",
                      "unknown": "a quoted string, `{...}` or a word"}


class AttributeGrammar(ShapeGrammar, ShardingGrammar):
    # ----------------------------------------------------------------- attributes
    def attributes(self, instr: Instruction) -> None:
        """The attributes after the operands.  A dump repeats a few thousand attribute
        texts (`index=0`, `dimensions={1}`, `calls=%fused.3`): a value whose extent
        `_RE_ATTR_FLAT` finds is read by its grammar (`attribute`) the first time its
        (opcode, key, text) occurs, and reused (lists copied) after."""
        s = self.s
        attrs = instr.attrs
        cache = self.attr_cache
        opcode = instr.opcode
        p = self.p
        while True:
            if s.startswith(", metadata={", p):
                # Metadata (the longest value of most instructions) as XLA spaces it: read
                # by its own pattern at once, not scanned by _RE_ATTR_FLAT first.
                key = "metadata"
            else:
                m = _RE_ATTR_FLAT.match(s, p)
                if m is None:
                    break
                key, text = m.groups()
            if key == "metadata":
                m = _RE_METADATA_ATTR.match(s, p)
                if m is None or instr.metadata_text is not None:
                    break  # `attribute` reads it, or reports it given twice
                instr.metadata_text = m.group(1)
                if "\\" in instr.metadata_text:
                    self.check_escapes(m.start(1), m.end(1))
                p = m.end()
                continue
            if key not in attrs:
                hit = cache.get((opcode, key, text))
                if hit is not None:
                    value, is_list = hit
                    attrs[key] = value[:] if is_list else value
                    p = m.end()
                    continue
                # `calls=%fused.3`: every fusion calls its own computation, so the text
                # is new each time; what `v_comp` / `v_comps` make of a plain name.
                call_kind = self.call_keys.get((opcode, key))
                if call_kind is not None and _RE_NAME.fullmatch(text):
                    name = text[1:] if text[0] == "%" else text
                    attrs[key] = name if call_kind == hlo_attrs.COMP else [name]
                    p = m.end()
                    continue
            self.p = p
            kind = self.attribute(instr)
            if self.p == m.end() and kind in _CACHED_KINDS:
                if kind in _CALL_KINDS:
                    self.call_keys[(opcode, key)] = kind
                    if "=" in text:
                        p = self.p
                        continue
                value = attrs[key]
                cache[(opcode, key, text)] = (value[:], True) if type(value) is list else (value, False)
            p = self.p
        end = _RE_LINE_END.match(s, p)
        if end is not None:
            self.p = end.end()
            return
        self.p = p
        while self.attribute(instr) is not None:
            pass

    def attribute(self, instr: Instruction) -> str | None:
        """One `, key=value` attribute; returns the kind of value read (None at the end
        of the attributes)."""
        s = self.s
        attrs = instr.attrs
        m = _RE_ATTR_FAST.match(s, self.p)
        if m is None:
            p = self.skip(self.p)
            if not s.startswith(",", p):
                return None
            m = _RE_ATTR_NAME.match(s, p)
            if m is None:
                raise self.error("an attribute ('name=value', no space before '=')", p + 1)
        key = m.group(1)
        if key in attrs or (key == "metadata" and instr.metadata_text is not None):
            raise self.error("", m.start(1), f"attribute '{key}' is given twice")
        self.p = m.end()
        if key == "metadata":
            instr.metadata_text = self.metadata_text()
            return "metadata"
        kind = hlo_attrs.INSTRUCTION_ATTRS.get(key)
        allowed = hlo_attrs.attributes_of(instr.opcode)
        if kind is None or (allowed is not None and key not in allowed):
            if key == "sparsity" and instr.opcode == "dot":
                raise self.error("", m.start(1), "sparse dot (sparsity=, from older XLA) is not supported")
            self.unknown_attribute(key, m.start(1), instr.opcode, allowed)
            attrs[key] = hlo_attrs.Raw(self.raw_value())
            return "raw"
        if key == "parameter_replication" and instr.opcode != "parameter":
            raise self.error("", m.start(1), "parameter_replication= is for parameters only")
        attrs[key] = self.typed_value(kind, key)
        enum = hlo_attrs.enum_values(key, instr.opcode)
        if enum is not None:
            attrs[key] = self.enum_value(key, attrs[key], enum, m.end())
        return kind

    def enum_value(self, key: str, value: str | list[str], enum: tuple[tuple[str, ...], bool],
                   pos: int) -> str | list[str]:
        """`value` (or each of a list) as XLA spells it, where XLA takes it; else an error
        naming the values it takes (the closest first)."""
        values, any_case = enum
        spelled = {v.upper(): v for v in values} if any_case else {v: v for v in values}
        out = []
        for item in value if isinstance(value, list) else [value]:
            canonical = spelled.get(item.upper() if any_case else item)
            if canonical is None:
                close = difflib.get_close_matches(item, values, n=1, cutoff=0.5)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                at = re.compile(r"(?<![\w.\-])" + re.escape(item) + r"(?![\w.\-])").search(self.s, pos)
                raise self.error("", at.start() if at else pos, f"'{item}' is not a value of {key} "
                                 f"(XLA takes {', '.join(values)}){hint}")
            out.append(canonical)
        return out if isinstance(value, list) else out[0]

    def module_attr(self, key: str, pos: int) -> Any:
        kind = hlo_attrs.MODULE_ATTRS.get(key)
        if kind is None:
            self.unknown_attribute(key, pos, None, frozenset(hlo_attrs.MODULE_ATTRS))
            return hlo_attrs.Raw(self.raw_value())
        value = self.typed_value(kind, key)
        if key in ("replica_count", "num_partitions") and not 1 <= value <= MAX_DEVICES:
            # Past MAX_DEVICES: the MLIR module's i32 count would wrap (2147483648 became
            # -2147483648, 4294967297 became 1) where a count is a typo.
            what = "replica" if key == "replica_count" else "partition"
            raise self.error("", self.skip(pos + len(key) + 1), f"{key}={value}: " + (
                f"a module has at least one {what}" if value < 1 else f"more devices than any module has "
                                                                    f"(at most {MAX_DEVICES})"))
        return value

    def unknown_attribute(self, key: str, pos: int, opcode: str | None, allowed: frozenset[str] | None,
                          where: str | None = None) -> None:
        """An attribute XLA's parser would reject here: an error naming the closest known
        name, or (allow_unknown_attributes) a warning, the value then kept as raw text.
        `where` names the place when it is neither an opcode nor the module header."""
        what = where or (f"for {opcode}" if opcode else "for the module header")
        known = hlo_attrs.INSTRUCTION_ATTRS.keys() | {"metadata"} if allowed is None else allowed
        if opcode is not None and key in hlo_attrs.INSTRUCTION_ATTRS:
            message = f"attribute '{key}' does not apply to {opcode}"
        else:
            message = f"unknown attribute '{key}' {what}"
        line, col = self.line_col(pos)
        if self.allow_unknown_attributes:
            text = diagnostic(SourceLocation(self.path, line, col), f"{message}; kept as raw text, not interpreted",
                              "warning")
            if self.warnings.once(f"{where or opcode}:{key}", text):
                warnings.warn(text, ConverterWarning, stacklevel=2)
            return
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        if close:
            message += f"; did you mean '{close[0]}'?"
        else:
            message += ("; if a newer XLA added it, --allow-unknown-attributes (parse_hlo(..., "
                        "allow_unknown_attributes=True)) keeps it as raw text")
        raise self.error("", pos, message)

    def typed_value(self, kind: str, key: str) -> Any:
        start = self.skip(self.p)
        try:
            value = self.VALUE_PARSERS[kind](self)
            if kind in _INTEGER_KINDS and not _fits_int64(value):
                raise self.error("", start, f"attribute '{key}' holds a number beyond int64")
            return value
        except HloParseError:
            raise
        except (ValueError, IndexError, KeyError, TypeError) as e:
            # A value that matched the attribute's lexical form but does not make sense
            # (a number too odd for int(), a list of the wrong length, ...).
            raise self.error("", start, f"bad value for attribute '{key}': {e}") from None

    def v_int(self) -> int:
        return self.int_()

    def v_float(self) -> float:
        return float(self.regex(_RE_FLOAT, "a number").group(0))

    def v_bool(self) -> bool:
        m = self.regex(re.compile(r"true|false"), "'true' or 'false'")
        return m.group(0) == "true"

    def v_bools(self) -> list[bool]:
        if self.peek() != "{":
            return [self.v_bool()]
        self.expect("{")
        out = [self.v_bool()]
        while self.accept(","):
            out.append(self.v_bool())
        self.expect("}")
        return out

    def v_ident(self) -> str:
        return self.regex(_RE_IDENT, "an identifier").group(0)

    def v_string(self) -> str:
        return self.string()

    def v_ints(self) -> list[int]:
        m = self.regex(_RE_INT_LIST, "a list of integers '{...}'")
        body = m.group(1)
        return [int(x) for x in re.split(_W + "," + _W, body)] if body.strip() else []

    def v_ints_or_lists(self) -> list[int] | list[list[int]]:
        """`{1,2}` or `{{1,2},{3}}` (slice_sizes means either, depending on the opcode)."""
        p = self.skip(self.p)
        q = self.skip(p + 1) if self.s.startswith("{", p) else p
        if not self.s.startswith("{", q):
            return self.v_ints()
        self.expect("{")
        out = [self.v_ints()]
        while self.accept(","):
            out.append(self.v_ints())
        self.expect("}")
        return out

    def v_idents(self) -> list[str]:
        m = self.regex(_RE_IDENT_LIST, "a list of names '{...}'")
        return [x.strip() for x in m.group(1).split(",")] if m.group(1).strip() else []

    def v_names(self) -> list[str]:
        m = self.regex(_RE_COMP_LIST, "a list of instruction names '{...}'")
        return [x.lstrip("%") for x in _RE_NAME.findall(m.group(1))]

    def v_comp(self) -> str:
        p = self.skip(self.p)
        if self.s.startswith("{", p):
            return self.inline_computation(p)
        return self.name()

    def inline_computation(self, pos: int) -> str:
        """`to_apply={ instructions }`: a computation written in place, which XLA names `_`
        (`_.1`, ... when there are several) and adds in front of the one using it."""
        name, n = "_", 0
        while name in self.computations or any(c.name == name for c in self.inline):
            n += 1
            name = f"_.{n}"
        line, col = self.line_col(pos)
        self.p = pos
        comp = self.computation_body(name, line, col)
        self.inline.append(comp)
        return name

    def v_comps(self) -> list[str]:
        p = self.skip(self.p)
        if not self.s.startswith("{", p):
            return [self.name()]
        if _RE_INLINE_BODY.match(self.s, p):  # `calls={ %x = ... }`: one inline computation
            return [self.inline_computation(p)]
        return self.v_names()

    def v_slice(self) -> list[hlo_attrs.SliceDim]:
        m = self.regex(_RE_SLICE, "a slice '{[start:limit:stride], ...}'")
        return [hlo_attrs.SliceDim(int(a), int(b), int(c) if c else 1) for a, b, c in _RE_SLICE_DIM.findall(m.group(1))]

    def v_padding(self) -> list[hlo_attrs.PaddingDim]:
        m = self.regex(_RE_PADDING, "a padding config like '0_0x1_1_0'")
        out = []
        for part in m.group(0).split("x"):
            vals = [int(v) for v in re.findall(r"-?\d+", part)]
            out.append(hlo_attrs.PaddingDim(*vals))
        return out

    def v_window(self) -> hlo_attrs.Window:
        start = self.skip(self.p)
        m = self.regex(_RE_WINDOW, "a window '{size=... stride=... pad=...}'")
        fields = dict(_RE_WINDOW_KV.findall(m.group(1)))
        known = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"}
        unknown = set(fields) - known
        if unknown:
            raise self.error("a window field (size stride pad lhs_dilate rhs_dilate rhs_reversal)", start, f"'{sorted(unknown)[0]}'")
        if "size" not in fields:
            return hlo_attrs.Window(())
        try:
            sizes = [int(x) for x in fields["size"].split("x")]
            rank = len(sizes)

            def per_dim(key: str, default: int) -> list[int]:
                if key not in fields:
                    return [default] * rank
                vals = [int(x) for x in fields[key].split("x")]
                if len(vals) != rank:
                    raise ValueError(f"window {key} has {len(vals)} dimensions, size has {rank}")
                return vals

            strides = per_dim("stride", 1)
            lhs = per_dim("lhs_dilate", 1)
            rhs = per_dim("rhs_dilate", 1)
            rev = per_dim("rhs_reversal", 0)
            pads = [(0, 0)] * rank
            if "pad" in fields:
                pad_parts = fields["pad"].split("x")
                if len(pad_parts) != rank:
                    raise ValueError(f"window pad has {len(pad_parts)} dimensions, size has {rank}")
                pads = []
                for part in pad_parts:
                    pm = re.fullmatch(r"(-?\d+)_(-?\d+)", part)
                    if pm is None:
                        raise ValueError(f"window pad '{part}' is not 'low_high'")
                    pads.append((int(pm.group(1)), int(pm.group(2))))
        except ValueError as e:
            raise self.error("", start, str(e)) from None
        return hlo_attrs.Window(tuple(
            hlo_attrs.WindowDim(sizes[i], strides[i], pads[i][0], pads[i][1], lhs[i], rhs[i], bool(rev[i]))
            for i in range(rank)
        ))


    def v_dim_labels(self) -> hlo_attrs.ConvDimLabels:
        start = self.skip(self.p)
        m = self.regex(_RE_DIM_LABELS, "convolution dim_labels like 'b01f_01io->b01f'")
        try:
            return conv_dim_labels(m.group(0))
        except ValueError as e:
            raise self.error("", start, str(e)) from None

    def v_groups(self) -> hlo_attrs.ReplicaGroups:
        p = self.skip(self.p)
        s = self.s
        if s.startswith("[", p):
            m = _RE_IOTA.match(s, p)
            if m is None:
                raise self.error("iota replica groups '[G,S]<=[N]'", p)
            self.p = m.end()
            iota = self.iota_list(m, p)
            if len(iota.shape) != 2:
                raise self.error("", p, "iota replica groups need a 2-D [groups,group_size] shape")
            return groups_from_iota(iota)
        if s.startswith("mesh", p):
            return self.mesh_groups()
        m = self.regex(_RE_GROUPS, "replica groups '{{0,1},{2,3}}'")
        groups = tuple(tuple(int(x) for x in g.split(",") if x.strip()) for g in _RE_GROUP.findall(m.group(1)))
        ids = [i for g in groups for i in g]
        if len(set(ids)) != len(ids):
            # XLA's verifier: a device takes part in one group once.
            repeated = next(i for i in ids if ids.count(i) > 1)
            raise self.error("", p, f"device {repeated} appears more than once in the replica groups")
        return hlo_attrs.ReplicaGroups(groups)

    def iota_list(self, m: re.Match, pos: int) -> hlo_attrs.IotaDeviceList:
        shape = tuple(int(x) for x in m.group(1).split(","))
        reshape = tuple(int(x) for x in m.group(2).split(","))
        perm = tuple(int(x) for x in m.group(3).split(",")) if m.group(3) else ()
        n_shape = self.device_count(shape, pos, "iota device list")
        if n_shape != math.prod(reshape) or (perm and sorted(perm) != list(range(len(reshape)))):
            raise self.error("an iota device list whose sizes agree", pos, f"'{m.group(0)}'")
        return hlo_attrs.IotaDeviceList(shape, reshape, perm)

    # ------------------------------------------------------------ other structured
    def v_frontend(self) -> dict[str, Any]:
        """`{key="value", key={raw braces}, ...}`: quoted values are unescaped strings;
        brace values (MLIR attributes such as Shardy meshes) are kept as Raw text."""
        self.expect("{")
        out: dict[str, Any] = {}
        if self.accept("}"):
            return out
        while True:
            p = self.skip(self.p)
            if self.s.startswith(('"', "'"), p):
                key = self.string()
                self.expect("=")
            else:
                key = self.key("a frontend attribute 'key=\"value\"'")
            if self.peek() == "{":
                out[key] = hlo_attrs.Raw(self.braced("a braced frontend attribute value"))
            else:
                q = self.skip(self.p)
                if self.s.startswith(('"', "'"), q):
                    out[key] = self.string()
                else:
                    out[key] = self.regex(re.compile(r"[^,\s\"'{}]+"), "a frontend attribute value").group(0)
            if self.accept("}"):
                return out
            self.expect(",")

    def v_backend(self) -> hlo_attrs.BackendConfig:
        p = self.skip(self.p)
        s = self.s
        if s.startswith(('"', "'"), p):
            m = _RE_STRING_ANY.match(s, p)
            if m is None:
                raise self.error("a closing quote", p)
            self.p = m.end()
            text = self.unescaped(m)
            raw = m.group(0) if m.group(1) is not None else '"' + m.group(2).replace('"', '\\"') + '"'
            try:
                value = json.loads(text) if text.strip() else {}
            except ValueError:
                return hlo_attrs.BackendConfig(text, raw, "string")
            return hlo_attrs.BackendConfig(value, raw, "string")
        if s.startswith("{", p):
            # Only text that can start a JSON object goes to the JSON decoder: its error
            # counts the lines of the whole dump up to the failure (quadratic in a large
            # dump holding many MLIR-dictionary configs).
            if _RE_JSON_OBJECT_START.match(s, p):
                try:
                    value, end = _JSON.raw_decode(s, p)
                    self.p = end
                    return hlo_attrs.BackendConfig(value, s[p:end], "json")
                except ValueError:
                    pass
            self.p = p
            raw = self.braced("a backend config '{...}'")
            try:
                value = parse_mlir_dict(raw)
            except ValueError:
                # XLA takes any balanced braces; a config that is neither JSON nor an
                # MLIR dictionary stays text.
                return hlo_attrs.BackendConfig(raw, raw, "text")
            return hlo_attrs.BackendConfig(value, raw, "mlir")
        raise self.error("a backend config ('{...}' or a quoted string)", p)

    def v_shapes(self) -> list[Shape]:
        self.expect("{")
        out: list[Shape] = []
        if self.accept("}"):
            return out
        while True:
            out.append(self.shape())
            if self.accept("}"):
                return out
            self.expect(",")

    def v_shape(self) -> Shape:
        return self.shape()

    def aliasing(self, what: str, rx: re.Pattern) -> tuple[list[tuple[str, ...]], int]:
        """The entries of an aliasing attribute, checking nothing else is in the braces."""
        start = self.skip(self.p)
        text = self.balanced(what)
        items = rx.findall(text)
        if rx.sub("", text[1:-1]).replace(",", "").strip():
            raise self.error(what, start)
        return items, start

    def v_out_alias(self) -> list[hlo_attrs.OutputOperandAlias]:
        items, _ = self.aliasing("output-to-operand aliasing like '{{0}: (1, {})}'", _RE_OUT_ALIAS)
        return [hlo_attrs.OutputOperandAlias(_index(o), int(n), _index(i)) for o, n, i, _ in items]

    def v_io_alias(self) -> list[hlo_attrs.InputOutputAlias]:
        items, start = self.aliasing("input-output aliasing like '{ {0}: (0, {}, may-alias) }'", _RE_OUT_ALIAS)
        if any(k not in ("", "may-alias", "must-alias") for *_, k in items):
            raise self.error("", start, "alias kinds are 'may-alias' or 'must-alias'")
        return [hlo_attrs.InputOutputAlias(_index(o), int(n), _index(i), k) for o, n, i, k in items]

    def v_buffer_donor(self) -> list[hlo_attrs.BufferDonor]:
        items, _ = self.aliasing("buffer donors like '{ (0, {}) }'", _RE_DONOR)
        return [hlo_attrs.BufferDonor(int(n), _index(i)) for n, i in items]

    def v_program_shape(self) -> hlo_attrs.ProgramShape:
        self.expect("{")
        self.expect("(")
        params: list[Shape] = []
        if not self.accept(")"):
            while True:
                params.append(self.shape())
                if self.accept(")"):
                    break
                self.expect(",")
        self.expect("->")
        result = self.shape()
        self.expect("}")
        return hlo_attrs.ProgramShape(tuple(params), result)

    def v_raw_braced(self) -> hlo_attrs.Raw:
        return hlo_attrs.Raw(self.braced("'{...}'"))

    def v_statistics(self) -> hlo_attrs.Statistics:
        """`{}` or `{visualizing_index=1,stat-0=0.5}`."""
        self.expect("{")
        if self.accept("}"):
            return hlo_attrs.Statistics()
        if self.key("'visualizing_index='") != "visualizing_index":
            raise self.error("'visualizing_index=' first")
        index = self.int_()
        stats: list[tuple[str, float]] = []
        while self.accept(","):
            stats.append((self.key("a statistic 'name=value'"), self.v_float()))
        self.expect("}")
        return hlo_attrs.Statistics(index, tuple(stats))

    def v_result_accuracy(self) -> hlo_attrs.ResultAccuracy:
        """`{mode=highest}` or `{tolerance={atol=..,rtol=..,ulps=..}}`."""
        self.expect("{")
        pos = self.skip(self.p)
        key = self.key("'mode=' or 'tolerance='")
        if key == "mode":
            mode = self.v_ident()
            if mode.lower() not in ("default", "highest"):
                raise self.error("result accuracy mode 'default' or 'highest'", pos, f"'{mode}'")
            self.expect("}")
            return hlo_attrs.ResultAccuracy(mode=mode)
        if key != "tolerance":
            raise self.error("'mode=' or 'tolerance='", pos)
        self.expect("{")
        tolerance: list[tuple[str, float]] = []
        if not self.accept("}"):
            while True:
                q = self.skip(self.p)
                name = self.key("'atol=', 'rtol=' or 'ulps='")
                if name not in ("atol", "rtol", "ulps") or any(n == name for n, _ in tolerance):
                    raise self.error("'atol=', 'rtol=' or 'ulps=' (each once)", q)
                tolerance.append((name, self.v_float()))
                if self.accept("}"):
                    break
                self.expect(",")
        self.expect("}")
        return hlo_attrs.ResultAccuracy(tolerance=tuple(tolerance))

    def v_origin(self) -> hlo_attrs.Origin:
        """`{{"a"}}`, `{({"x"}, {"y" {1}})}`, `{[synthetic_call]}`, newer XLA's
        `{(),[""]}` (a tree, then a list of strings)."""
        self.expect("{")
        p = self.skip(self.p)
        if self.s.startswith("[", p):
            self.p = p + 1
            word = self.v_ident()
            if word != "synthetic_call":
                raise self.error("'synthetic_call'", p + 1)
            self.expect("]")
            self.expect("}")
            return hlo_attrs.Origin(synthetic_call=True)
        tree = self.origin_tree()
        names = None
        if self.accept(","):
            self.expect("[")
            names_list: list[str] = []
            if not self.accept("]"):
                while True:
                    names_list.append(self.string())
                    if self.accept("]"):
                        break
                    self.expect(",")
            names = tuple(names_list)
        self.expect("}")
        return hlo_attrs.Origin(tree, call_names=names)

    def origin_tree(self) -> hlo_attrs.OriginTree:
        p = self.skip(self.p)
        if self.s.startswith("(", p):
            self.p = p + 1
            elements = []
            if not self.accept(")"):
                while True:
                    elements.append(self.origin_tree())
                    if self.accept(")"):
                        break
                    self.expect(",")
            return tuple(elements)
        self.expect("{")
        if self.accept("}"):
            return None
        name = self.string()
        index: tuple[int, ...] = ()
        if self.peek() == "{":
            index = tuple(self.v_ints())
        self.expect("}")
        return hlo_attrs.OriginalArray(name, index)

    def v_domain(self) -> hlo_attrs.Domain:
        """`{kind="sharding", entry={maximal device=0}, exit={replicated}}`."""
        self.expect("{")
        fields: dict[str, Any] = {}
        while not self.accept("}"):
            if fields:
                self.accept(",")
            q = self.skip(self.p)
            key = self.key("'kind=', 'entry=' or 'exit='")
            if key == "kind":
                fields[key] = self.string()
            elif key in ("entry", "exit"):
                fields[key] = self.v_sharding()
            else:
                raise self.error("'kind=', 'entry=' or 'exit='", q)
        if "kind" not in fields:
            raise self.error("", self.p - 1, "a domain needs kind=")
        return hlo_attrs.Domain(fields["kind"], fields.get("entry"), fields.get("exit"))

    def v_operand_configs(self) -> dict[str, Any]:
        """`{rhs={sparsity=1x4 dimension=2 stride=0}}`: sub-attributes (separated by
        spaces or commas), nested in braces; numbers as ints, `NxM` and names as text."""
        self.expect("{")
        out: dict[str, Any] = {}
        while not self.accept("}"):
            if out:
                self.accept(",")
            key = self.key("a sub-attribute 'name=value'")
            if key in out:
                raise self.error("", self.p - len(key) - 1, f"'{key}' given twice")
            p = self.skip(self.p)
            if self.s.startswith("{", p):
                out[key] = self.v_operand_configs()
            elif self.s.startswith(('"', "'"), p):
                out[key] = self.string()
            else:
                token = self.regex(re.compile(r"-?\d+(?:x\d+)*|[A-Za-z_][\w.\-]*"), "a value").group(0)
                out[key] = int(token) if re.fullmatch(r"-?\d+", token) else token
        return out

    def v_literal(self) -> hlo_attrs.LiteralAttr:
        """`literal=f32[] 1.5`, `literal=s32[2]{0} {1, 2}`, `literal=( s32[] 1, f32[] 2 )`:
        a shape then its literal, or a tuple of those."""
        p = self.skip(self.p)
        if self.s.startswith("(", p):
            self.p = p + 1
            elements: list[hlo_attrs.LiteralAttr] = []
            if not self.accept(")"):
                while True:
                    elements.append(self.v_literal())
                    if self.accept(")"):
                        break
                    self.expect(",")
            shape = Shape("tuple", tuple_shapes=tuple(e.shape for e in elements))
            return hlo_attrs.LiteralAttr(shape, tuple(elements))
        shape = self.shape()
        if not shape.is_array:
            raise self.error("an array shape before the literal's values", p)
        q = self.skip(self.p)
        s = self.s
        if s.startswith("{", q):
            self.p = q
            text = self.balanced("a literal '{...}'")
        elif s.startswith("(", q):
            self.p = q
            text = self.balanced("a complex value '(re, im)'")
        else:
            text = self.regex(_RE_LITERAL_TOKEN, "a literal value").group(0)
        try:
            value, elided = parse_literal(text, shape)
        except ValueError as e:
            raise self.error("", q, str(e)) from None
        return hlo_attrs.LiteralAttr(shape, None if elided else value)

    def metadata_text(self) -> str:
        """The text inside `metadata={...}`, checked against the grammar; it is turned
        into a Metadata record on first use (`parse_metadata`)."""
        p = self.skip(self.p)
        m = _RE_METADATA.match(self.s, p)
        if m is not None:
            if "\\" in m.group(1):
                self.check_escapes(m.start(1), m.end(1))
            self.p = m.end()
            return m.group(1)
        self.p = p
        return self.checked_metadata()

    def checked_metadata(self) -> str:
        """Metadata in any form XLA's parser reads, checked item by item as it does
        (`braced_items`): a known attribute (METADATA_ATTRS), once, with its kind of
        value.  Returns the items joined by single spaces (no comment left for
        `parse_metadata` to find pairs in)."""
        def value_of(key: str, pos: int) -> tuple[re.Pattern, str]:
            kind = METADATA_ATTRS.get(key) or OLDER_METADATA_ATTRS.get(key)
            if kind is None:  # an error, or (allow_unknown_attributes) a warning
                self.unknown_attribute(key, pos, None, frozenset(METADATA_ATTRS), "in metadata")
                kind = "unknown"
            kinds[key] = kind
            return _METADATA_VALUE[kind], _METADATA_EXPECTED[kind]

        kinds: dict[str, str] = {}
        items: list[str] = []
        for key, pos, value in self.braced_items("metadata attribute", value_of):
            kind = kinds[key]
            if kind == "string" or (kind == "unknown" and value.group(0)[0] in "\"'"):
                self.unescaped(value)
            elif kind == "int" and not -(1 << 31) <= int(value.group(0)) < 1 << 31:
                raise self.error("", pos, f"metadata attribute '{key}' out of int32's range")
            items.append(f"{key}={value.group(0)}")
        return " ".join(items)

    VALUE_PARSERS: dict[str, Callable[["AttributeGrammar"], Any]] = {
        hlo_attrs.INT: v_int, hlo_attrs.FLOAT: v_float, hlo_attrs.BOOL: v_bool, hlo_attrs.IDENT: v_ident, hlo_attrs.STRING: v_string,
        hlo_attrs.INTS: v_ints, hlo_attrs.IDENTS: v_idents, hlo_attrs.NAMES: v_names, hlo_attrs.COMP: v_comp, hlo_attrs.COMPS: v_comps,
        hlo_attrs.SLICE: v_slice, hlo_attrs.PADDING: v_padding, hlo_attrs.WINDOW: v_window, hlo_attrs.DIM_LABELS: v_dim_labels, hlo_attrs.GROUPS: v_groups,
        hlo_attrs.PAIRS: ShardingGrammar.v_pairs, hlo_attrs.SHARDING: ShardingGrammar.v_sharding, hlo_attrs.FRONTEND: v_frontend, hlo_attrs.BACKEND: v_backend,
        hlo_attrs.SHAPES: v_shapes, hlo_attrs.OUT_ALIAS: v_out_alias, hlo_attrs.SHAPE: v_shape,
        hlo_attrs.BOOLS: v_bools, hlo_attrs.INTS_OR_LISTS: v_ints_or_lists, hlo_attrs.STATISTICS: v_statistics,
        hlo_attrs.RESULT_ACCURACY: v_result_accuracy, hlo_attrs.ORIGIN: v_origin, hlo_attrs.DOMAIN: v_domain, hlo_attrs.LITERAL: v_literal,
        hlo_attrs.OPERAND_CONFIGS: v_operand_configs, hlo_attrs.RAW_BRACED: v_raw_braced,
        "shardings": ShardingGrammar.v_shardings, "io_alias": v_io_alias,
        "buffer_donor": v_buffer_donor, "program_shape": v_program_shape,
    }
