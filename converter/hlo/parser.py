"""HLO text → HLO IR.

A scannerless recursive-descent parser: each grammar element is read by a compiled
regex anchored at the current position, so the per-character work happens in C.  Shapes
are cached by their text (a dump repeats a few hundred shapes thousands of times) and
JSON backend configs are delimited and decoded by `json.JSONDecoder.raw_decode`.

It reads what XLA's own parser (jaxlib 0.10.2) reads, and what newer XLA prints
(compact get-tuple-element operands `%x#1`, compare `order=`, ...); the grammar is
written down in the team's HLO grammar notes.  Every error is an `HloParseError`
carrying `path:line:col`, what was expected, and what was found there.
"""

from __future__ import annotations

import gc
import re
from typing import Any

import numpy as np

from converter.hlo import attrs as hlo_attrs
from converter.hlo.escapes import EscapeError, c_unescape
from converter.hlo.shape_inference import (
    CHECKED_SHAPES as _CHECKED_SHAPES,
    SAME_DIMS as _SAME_DIMS,
    check_written_shape,
)
from converter.hlo.attribute_grammar import AttributeGrammar, _CALL_KINDS
from converter.hlo.lexer import (
    HloParseError,
    _CALLS_WITH_OPERANDS,
    _FILE_LOCATION_FIELDS,
    _FRAME_FIELDS,
    _ILLEGAL_NAMES,
    _NAME,
    _RE_COMMA_OR_CLOSE,
    _RE_COMPUTATION_START,
    _RE_ENTRY,
    _RE_EXEC_THREAD,
    _RE_IDENT,
    _RE_INSTR_FAST,
    _RE_INSTR_HEAD,
    _RE_INT_TOKEN,
    _RE_OPCODE,
    _RE_OPERANDS_FAST,
    _RE_OPERAND_ITEM,
    _RE_OPERAND_NAME,
    _RE_SECTION_ENTRY,
    _RE_SHORT_LITERAL,
    _RE_SIGNATURE_FAST,
    _RE_SIGNATURE_ITEM,
    _RE_SIGNATURE_PARAM,
    _SECTIONS,
    _SKIP,
    _W,
)
from converter.hlo.literals import parse_literal
from converter.hlo.ir import ELEMENT_BITS, Computation, Instruction, Module, Shape, StackFrames, split_operand


# The attributes that name computations.
_CALL_KEYS = frozenset(key for key, kind in hlo_attrs.INSTRUCTION_ATTRS.items() if kind in _CALL_KINDS)
# The attributes `_Parser.check_instruction_attrs` looks at (besides a conditional's).
_CHECKED_ATTRS = frozenset({"channel_id", "use_global_device_ids", "control-predecessors",
                            "operand_layout_constraints"})


class _Parser(AttributeGrammar):
    """The module grammar: computations, instructions, operands and their attributes."""

    # ------------------------------------------------------------------ top level
    def module(self) -> Module:
        """`HloModule name, attrs...` then computations; or computations without the
        header (XLA names the module `module_<entry>`); or a single instruction."""
        p = self.skip(0)
        s = self.s
        header: dict[str, Any] = {}
        name = None
        head = _RE_IDENT.match(s, p)
        if p >= len(s):
            raise self.error("an HLO module ('HloModule name', then computations)", p)
        if head is not None and head.group(0) == "HloModule":
            self.p = p + len("HloModule")
            name = self.name()
            if s.startswith(":", self.p):
                # XLA's lexer reads `name:` as a name (the form of signature parameters),
                # and older dumps print `HloModule convolution.167:`.
                self.p += 1
            while self.peek() == ",":
                self.p = self.skip(self.p) + 1
                key_pos = self.skip(self.p)
                key = self.key("a module attribute ('name=value')")
                if key in header:
                    raise self.error("", key_pos, f"module attribute '{key}' is given twice")
                header[key] = self.module_attr(key, key_pos)
        elif not (_RE_ENTRY.match(s, p) or _RE_COMPUTATION_START.match(s, p)):
            # XLA reads text that is neither a module nor starts like a computation
            # (`name {`) as one instruction.
            return self.single_instruction_module()
        module = Module(name=name or "", computations=[], attrs=header, path=self.path)
        self.computations = module.by_name
        while True:
            p = self.skip(self.p)
            if p >= len(s):
                break
            section = next((k for k in _SECTIONS if s.startswith(k, p)), None)
            if section is not None:
                after = self.skip(p + len(section))
                if after >= len(s) or s[after] not in "({" and not s.startswith("->", after):
                    # XLA reads the tables only between the header and the first
                    # computation; they are accepted after computations too (where a flag
                    # of newer XLA prints them) since they cannot mean anything else.
                    self.p = p + len(section)
                    self.section(section, module.stack_frames)
                    continue
            comp = self.computation()
            for inline in self.inline:
                self.add_computation(module, inline)
            self.inline = []
            self.add_computation(module, comp)
            if comp.is_entry:
                if module.entry is not None:
                    raise self.error_at(comp, "a second ENTRY computation")
                module.entry = comp
        if not module.computations:
            raise self.error("a computation", len(s))
        if module.entry is None:
            # XLA takes the last computation as the entry when none is marked.
            module.entry = module.computations[-1]
            module.entry.is_entry = True
        if name is None:
            module.name = "module_" + module.entry.name
        self.check_computation_refs(module)
        module.warnings = self.warnings.messages
        return module

    def add_computation(self, module: Module, comp: Computation) -> None:
        if comp.name in module.by_name:
            raise self.error_at(comp, f"computation '{comp.name}' is defined twice")
        module.computations.append(comp)
        module.by_name[comp.name] = comp

    def single_instruction_module(self) -> Module:
        """One instruction (`%r = f32[4] negate(f32[4] %p)`), as XLA reads it: operands
        it does not define become parameters, typed by the shapes written in front of
        them; the module and its one computation are named `_`."""
        self.p = 0
        instr = self.instruction()
        if self.skip(self.p) < len(self.s):
            raise self.error("the end of a single-instruction text")
        instructions: list[Instruction] = []
        by_name: dict[str, Instruction] = {}
        for item in [*self.pending, instr]:
            for i, operand in enumerate(item.operands):
                base = split_operand(operand)[0]
                if base in by_name:
                    continue
                shape = (item.operand_shapes or [None] * len(item.operands))[i]
                if shape is None:
                    raise self.error_at(item, f"operand '{operand}' is not defined and has no shape to make it a parameter")
                param = Instruction(base, "parameter", shape, [], {}, item.line, item.col,
                                    parameter_number=sum(1 for x in instructions if x.opcode == "parameter"))
                instructions.append(param)
                by_name[base] = param
            instructions.append(item)
            by_name[item.name] = item
        instr.is_root = True
        comp = Computation("_", instructions, instr.line, instr.col, True, None, "", by_name, instr)
        self.finish_computation(comp)
        module = Module("_", [comp], {}, path=self.path, by_name={"_": comp}, entry=comp)
        module.warnings = self.warnings.messages
        return module

    def section(self, section: str, tables: StackFrames) -> None:
        """One stack-frame table.  Entries are numbered by position: XLA ignores the
        numbers printed in front of them."""
        s = self.s
        names = {"FileNames": tables.file_names, "FunctionNames": tables.function_names,
                 "FileLocations": tables.file_locations, "StackFrames": tables.frames}[section]
        while True:
            p = self.skip(self.p)
            m = _RE_SECTION_ENTRY.match(s, p)
            if m is None:
                return
            value = m.group(2)
            value_pos = p + m.group(0).index(value)
            key = len(names) + 1
            if section in ("FileNames", "FunctionNames"):
                if not value.startswith('"'):
                    raise self.error("a quoted name", value_pos)
                try:
                    names[key] = c_unescape(value[1:-1])
                except EscapeError as e:
                    raise self.error("", value_pos + 1 + e.offset, e.message) from None
            else:
                if not value.startswith("{"):
                    raise self.error("'{'", value_pos)
                required = _FILE_LOCATION_FIELDS if section == "FileLocations" else _FRAME_FIELDS
                fields = self.table_fields(section, value_pos, required)
                missing = [f for f in required if f not in fields]
                if missing:
                    raise self.error("", value_pos, f"{section} entry lacks {', '.join(missing)}")
                names[key] = {f: fields[f] for f in required}
            self.p = m.end()

    def table_fields(self, section: str, start: int, known: tuple[str, ...]) -> dict[str, int]:
        """The `key=integer` fields of the stack-frame table entry `{...}` at `start`,
        read as XLA reads them (`braced_items`): known fields, each once, int32 values."""
        def value_of(key: str, pos: int) -> tuple[re.Pattern, str]:
            if key not in known:
                raise self.error("", pos, f"unknown field '{key}' in a {section} entry (XLA's are {', '.join(known)})")
            return _RE_INT_TOKEN, "an integer"

        self.p = start
        fields: dict[str, int] = {}
        for key, pos, value in self.braced_items(f"{section} field", value_of):
            fields[key] = int(value.group(0))
            if not -(1 << 31) <= fields[key] < 1 << 31:
                raise self.error("", pos, f"{section} field '{key}' out of int32's range")
        return fields

    def computation(self) -> Computation:
        p = self.skip(self.p)
        is_entry = False
        if _RE_ENTRY.match(self.s, p):
            is_entry = True
            self.p = p + 5
        start = self.skip(self.p)
        name = self.name()
        line, col = self.line_col(start)
        signature = None
        fast = _RE_SIGNATURE_FAST.match(self.s, self.p)
        if fast is not None:
            params_fast = [(item.group(1), self.shape_at(item.group(2), item.start(2)))
                           for item in _RE_SIGNATURE_ITEM.finditer(self.s, fast.start(1), fast.end(1))]
            signature = (params_fast, self.shape_at(fast.group(2), fast.start(2)))
            self.p = fast.end()
        elif self.peek() == "(":
            self.p = self.skip(self.p) + 1
            params: list[tuple[str, Shape]] = []
            if not self.accept(")"):
                while True:
                    # `p: f32[]`: the name and ':' are one token (no '%', no space).
                    pname = self.regex(_RE_SIGNATURE_PARAM, "a parameter 'name:' (no '%', no space before ':')").group(1)
                    params.append((pname, self.shape()))
                    if self.accept(")"):
                        break
                    self.expect(",")
            self.expect("->")
            signature = (params, self.shape())
        comp = self.computation_body(name, line, col, is_entry, signature)
        m = _RE_EXEC_THREAD.match(self.s, self.p)
        if m is not None:
            self.p = m.end()
            comp.execution_thread = self.string()
        if signature is not None and not signature[1].compatible(comp.root.shape):
            from converter.hlo.printer import shape_to_text

            raise self.error_at(comp, f"computation '{name}' says it returns {shape_to_text(signature[1], False)}, "
                                      f"its root is {shape_to_text(comp.root.shape, False)}")
        return comp

    def computation_body(self, name: str, line: int, col: int, is_entry: bool = False,
                         signature: tuple[list[tuple[str, Shape]], Shape] | None = None) -> Computation:
        """`{ instructions }`; instruction names are scoped to the computation."""
        self.expect("{")
        outer_scope, outer_pending = self.scope, self.pending
        instructions: list[Instruction] = []
        by_name: dict[str, Instruction] = {}
        self.scope, self.pending = by_name, []
        root = None
        s = self.s
        n = len(s)
        instruction = self.instruction
        try:
            while True:
                p = self.p
                if p >= n or s[p] in " \t\r\n/":  # skip(), inlined
                    p = _SKIP.match(s, p).end()
                if s.startswith("}", p):
                    self.p = p + 1
                    break
                if p >= n:
                    raise self.error(f"an instruction or '}}' closing computation '{name}'", p)
                instr = instruction()
                if self.pending:
                    for nested in self.pending:
                        by_name[nested.name] = nested
                        instructions.append(nested)
                    self.pending = []
                if instr.name in by_name:
                    raise self.error_at(instr, f"instruction '{instr.name}' is defined twice in computation '{name}'")
                by_name[instr.name] = instr
                instructions.append(instr)
                if instr.is_root:
                    if root is not None:
                        raise self.error_at(instr, f"a second ROOT in computation '{name}'")
                    root = instr
        finally:
            self.scope, self.pending = outer_scope, outer_pending
        if not instructions:
            raise HloParseError(self.path, line, col, f"computation '{name}' has no instructions")
        if root is None:
            root = instructions[-1]
            root.is_root = True
        comp = Computation(name, instructions, line, col, is_entry, signature, "", by_name, root)
        self.finish_computation(comp)
        return comp

    def finish_computation(self, comp: Computation) -> None:
        """What XLA's parser checks once a computation is read: operands defined before
        their use (and `x#i` naming a tuple element), shapes written in front of operands
        compatible with them, parameter numbers 0..n-1."""
        params: dict[int, Instruction] = {}
        defined: set[str] = set()
        by_name = comp.by_name
        operand_shape = comp.operand_shape
        checked_shapes = self.checked_shapes
        for instr in comp.instructions:
            operands = instr.operands
            opcode = instr.opcode
            for operand in operands if not defined.issuperset(operands) else ():
                if operand in defined:
                    continue
                base, index = split_operand(operand)
                if base not in defined:
                    where = "which is defined after it" if base in by_name else f"which computation '{comp.name}' does not define"
                    raise self.error_at(instr, f"instruction '{instr.name}' uses '{base}', {where}", operand)
                shape = by_name[base].shape
                for depth, i in enumerate(index):
                    if not shape.is_tuple or i >= len(shape.tuple_shapes):
                        raise self.error_at(instr, f"operand '{operand}': '{base}{''.join(f'#{j}' for j in index[:depth])}' "
                                                   f"has no tuple element {i}", operand)
                    shape = shape.tuple_shapes[i]
            if instr.operand_shapes is not None:
                for operand, written in zip(instr.operands, instr.operand_shapes):
                    if written is not None and not written.compatible(comp.operand_shape(operand)):
                        from converter.hlo.printer import shape_to_text

                        raise self.error_at(instr, f"operand '{operand}' of '{instr.name}' is written as "
                                                   f"{shape_to_text(written)} but has shape {shape_to_text(comp.operand_shape(operand))}",
                                            operand)
            attrs = instr.attrs
            if attrs and (opcode == "conditional" or not _CHECKED_ATTRS.isdisjoint(attrs)):
                self.check_instruction_attrs(comp, instr, defined)
            if operands and opcode in _CHECKED_SHAPES:
                shape = instr.shape
                shapes = [operand_shape(o) for o in operands]
                # What check_written_shape accepts first, without the call: elementwise
                # operands of the result's dimensions, a tuple element that is the result.
                checked = False
                if opcode in _SAME_DIMS:
                    dims = shape.dims
                    for operand_shape_ in shapes:
                        if operand_shape_ is not shape and operand_shape_.dims != dims:
                            break
                    else:
                        checked = True
                elif opcode == "get-tuple-element" and shapes[0].element_type == "tuple":
                    elements = shapes[0].tuple_shapes
                    index = attrs.get("index", -1)
                    checked = type(index) is int and 0 <= index < len(elements) and elements[index] is shape
                elif opcode == "tuple":
                    elements = shape.tuple_shapes
                    checked = len(elements) == len(shapes) and all(e is o for e, o in zip(elements, shapes))
                if not checked:
                    # Dumps repeat these checks (a broadcast of one shape to another, in
                    # every fusion): one that passed is not made again.  The key names the
                    # shapes by id; the entry holds them, so no other takes those ids.
                    key = (opcode, id(shape), *map(id, shapes), hlo_attrs.value_key(attrs) if attrs else ())
                    if key[-1] is None or key not in checked_shapes:
                        problem = check_written_shape(opcode, shape, shapes, attrs)
                        if problem is not None:
                            raise self.error_at(instr, f"'{instr.name}' ({opcode}): {problem}")
                        if key[-1] is not None:
                            checked_shapes[key] = (shape, shapes)
            defined.add(instr.name)
            if opcode == "parameter":
                if instr.parameter_number in params:
                    raise self.error_at(instr, f"parameter number {instr.parameter_number} appears twice in computation '{comp.name}'")
                params[instr.parameter_number] = instr
        if sorted(params) != list(range(len(params))):
            raise self.error_at(comp, f"computation '{comp.name}' has parameters {sorted(params)}, not 0..{len(params) - 1}")
        comp.parameters = [params[i] for i in range(len(params))]

    def check_instruction_attrs(self, comp: Computation, instr: Instruction, defined: set[str]) -> None:
        if isinstance(instr.attrs.get("channel_id"), int) and instr.attrs["channel_id"] < 0:
            raise self.error_at(instr, f"channel_id={instr.attrs['channel_id']}: channel ids are not negative",
                                "channel_id")
        if instr.attrs.get("use_global_device_ids") is True:
            # XLA refuses both: its parser (GetCollectiveOpGroupMode) the first, the
            # flattened-id mode (GetParticipatingDevices) the second.
            if not instr.attrs.get("channel_id"):
                raise self.error_at(instr, f"use_global_device_ids=true needs a channel_id on '{instr.name}'",
                                    "use_global_device_ids")
            groups = instr.attrs.get("replica_groups")
            if not isinstance(groups, hlo_attrs.ReplicaGroups) or not groups.groups:
                raise self.error_at(instr, f"use_global_device_ids=true needs replica_groups on '{instr.name}'",
                                    "use_global_device_ids")
        constraints = instr.attrs.get("operand_layout_constraints")
        if isinstance(constraints, list):
            # XLA's parser: one constraint per operand, each of the operand's type and
            # dimensions (a custom call reads its operands laid out so).
            if len(constraints) != len(instr.operands):
                raise self.error_at(instr, f"{len(constraints)} operand layout constraints for {len(instr.operands)} "
                                           f"operands of '{instr.name}'", "operand_layout_constraints")
            for i, (operand, constraint) in enumerate(zip(instr.operands, constraints)):
                if not constraint.compatible(comp.operand_shape(operand)):
                    from converter.hlo.printer import shape_to_text

                    raise self.error_at(instr, f"operand layout constraint {shape_to_text(constraint)} for operand {i} "
                                               f"is not compatible with its shape "
                                               f"{shape_to_text(comp.operand_shape(operand))}", "operand_layout_constraints")
        preds = instr.attrs.get("control-predecessors")
        if isinstance(preds, list):
            for pred in preds:
                if pred not in comp.by_name:
                    raise self.error_at(instr, f"control predecessor '{pred}' of '{instr.name}' is not an instruction of computation '{comp.name}'",
                                        "control-predecessors")
        if instr.opcode == "conditional" and instr.operands:
            index_type = comp.operand_shape(instr.operands[0]).element_type
            if index_type == "pred" and "branch_computations" in instr.attrs:
                raise self.error_at(instr, "a conditional on a pred takes true_computation= and false_computation=, not branch_computations=",
                                    "branch_computations")
            if index_type != "pred" and ("true_computation" in instr.attrs or "false_computation" in instr.attrs):
                raise self.error_at(instr, "a conditional on an integer index takes branch_computations=, not true_/false_computation=",
                                    "true_computation" if "true_computation" in instr.attrs else "false_computation")

    def check_computation_refs(self, module: Module) -> None:
        """Called computations exist and come before their callers (XLA reads a module
        in one pass, so a reference to a later computation is an error)."""
        defined: set[str] = set()
        for comp in module.computations:
            for instr in comp.instructions:
                attrs = instr.attrs
                if not attrs or _CALL_KEYS.isdisjoint(attrs):
                    continue  # neither calls nor (see _CALLS_WITH_OPERANDS) takes its callee's parameters
                for key, value in attrs.items():
                    kind = hlo_attrs.INSTRUCTION_ATTRS.get(key)
                    if kind == hlo_attrs.COMP:
                        refs = [value]
                    elif kind == hlo_attrs.COMPS:
                        refs = value
                    else:
                        continue
                    for ref in refs:
                        if ref not in defined:
                            where = "which is defined after it" if ref in module.by_name else "which the module does not define"
                            raise self.error_at(instr, f"instruction '{instr.name}' calls computation '{ref}' ({key}=), {where}", ref)
                if instr.opcode in _CALLS_WITH_OPERANDS:
                    self.check_call_operands(comp, instr, module)
            defined.add(comp.name)

    def check_call_operands(self, comp: Computation, instr: Instruction, module: Module) -> None:
        """The operands of a fusion, call, async-start or while are the called
        computation's parameters, shape for shape (XLA's verifier)."""
        from converter.hlo.printer import shape_to_text

        key = _CALLS_WITH_OPERANDS[instr.opcode]
        names = [instr.attrs[k] for k in key if isinstance(instr.attrs.get(k), str)]
        if not names and isinstance(instr.attrs.get("calls"), list) and len(instr.attrs["calls"]) == 1:
            names = instr.attrs["calls"]
        for name in names:
            called = module.by_name.get(name)
            if called is None:
                continue
            params = called.parameters
            if len(params) != len(instr.operands):
                raise self.error_at(instr, f"'{instr.name}' passes {len(instr.operands)} operand(s) to '{name}', "
                                           f"which takes {len(params)}")
            for i, (operand, param) in enumerate(zip(instr.operands, params)):
                shape = comp.operand_shape(operand)
                if not shape.compatible(param.shape):
                    raise self.error_at(instr, f"operand {i} of '{instr.name}' is {shape_to_text(shape, False)}, "
                                               f"parameter {i} of '{name}' is {shape_to_text(param.shape, False)}",
                                        operand)

    # --------------------------------------------------------------- instructions
    def instruction(self) -> Instruction:
        s = self.s
        fast = _RE_INSTR_FAST.match(s, self.p)
        if fast is not None:
            root, name, space, shape_text, opcode, simple_operands, number, metadata, line_end = fast.groups()
            if name[0] == "%":
                name = name[1:]
            elif not space:
                self.bad_name(fast.start(2), name)
            if name in _ILLEGAL_NAMES:
                self.bad_name(fast.start(2), fast.group(2))
            pos = fast.start(1) if root is not None else fast.start(2)
            line_pos = self._line_pos
            if pos >= line_pos:  # line_col, inlined: the common case
                line = self._line_no = self._line_no + s.count("\n", line_pos, pos)
                self._line_pos = pos
                col = pos - s.rfind("\n", 0, pos)
            else:
                line, col = self.line_col(pos)
            shape = self.shape_cache.get(shape_text)
            if shape is None:
                shape = self.shape_at(shape_text, fast.start(4))
            instr = Instruction(name, opcode, shape, [], {}, line, col, root is not None)
            end = fast.end()
            after_paren = fast.end(5) + 1
            if opcode == "constant":
                self.p = after_paren
                self.literal_operand(instr)
            elif end != after_paren and (number is not None) == (opcode == "parameter"):
                if number is not None:
                    instr.parameter_number = int(number)
                elif simple_operands:
                    operands = simple_operands.replace("%", "").split(", ")
                    if "/" in simple_operands:  # `/*index=5*/%x`: XLA numbers every fifth operand
                        operands = [x[x.index("/", 2) + 1:] if x[0] == "/" else x for x in operands]
                    instr.operands = operands
                instr.metadata_text = metadata
                if metadata is not None and "\\" in metadata:
                    self.check_escapes(fast.start(8), fast.end(8))
                self.p = end
                if line_end is not None:
                    return instr
            elif opcode == "parameter":
                self.p = after_paren
                instr.parameter_number = self.int_()
                self.expect(")")
            else:
                self.p = after_paren
                self.operands(instr)
            self.attributes(instr)
            return instr
        m = _RE_INSTR_HEAD.match(s, self.p)
        if m is None:
            nm = re.compile(_W + r"(?:ROOT\s+)?" + _NAME, re.S).match(s, self.p)
            if nm is not None and nm.end() > self.skip(self.p):
                raise self.error("'=' after the instruction name", nm.end())
            raise self.error("an instruction ('name = shape opcode(...)')")
        name = m.group(2)
        if (not m.group(3) and name[0] != "%") or name.lstrip("%") in _ILLEGAL_NAMES:
            self.bad_name(m.start(2), name)
        line, col = self.line_col(m.start(1) if m.group(1) else m.start(2))
        self.p = m.end()
        return self.instruction_rhs(name.lstrip("%"), line, col, m.group(1) is not None, allow_attributes=True)

    def bad_name(self, pos: int, name: str) -> None:
        bare = name.lstrip("%")
        if bare in _ILLEGAL_NAMES:
            raise self.error("", pos, f"illegal instruction name '{bare}' (an element type); rename it, e.g. to '{bare}_'")
        raise self.error("", pos, f"'{name}=' reads as an attribute name: an instruction name without '%' needs a space before '='")

    def instruction_rhs(self, name: str, line: int, col: int, is_root: bool, allow_attributes: bool,
                        shape: Shape | None = None) -> Instruction:
        """`shape? opcode(operands), attributes`: everything after `name =` (or, for a
        nested operand instruction, whose shape the caller read, after the shape).
        Nested instructions have no attributes."""
        s = self.s
        p = self.skip(self.p)
        om = _RE_OPCODE.match(s, p)
        if shape is None and (om is None or om.group(1) == "b"):  # `b(` is a buffer shape
            shape = self.shape()
            om = _RE_OPCODE.match(s, self.skip(self.p))
            if om is None:
                raise self.error("an opcode followed by '('")
        opcode = om.group(1)
        self.p = om.end()
        instr = Instruction(name, opcode, shape or Shape("tuple"), [], {}, line, col, is_root=is_root)
        if opcode in ("constant", "parameter") and shape is None:
            raise self.error("", p, f"'{opcode}' needs its shape written before it")
        if opcode == "constant":
            self.literal_operand(instr)
        elif opcode == "parameter":
            instr.parameter_number = self.int_()
            self.expect(")")
        else:
            self.operands(instr)
        if allow_attributes:
            self.attributes(instr)
        if shape is None:
            instr.shape = self.infer(instr, p)
        return instr

    def infer(self, instr: Instruction, pos: int) -> Shape:
        from converter.hlo.shape_inference import INFERABLE, infer_shape

        if instr.opcode not in INFERABLE:
            raise self.error("", pos, f"'{instr.opcode}' needs its shape written before it")
        shapes = []
        for i, operand in enumerate(instr.operands):
            written = instr.operand_shapes[i] if instr.operand_shapes else None
            base, index = split_operand(operand)
            producer = self.scope.get(base) or next((x for x in self.pending if x.name == base), None)
            if producer is None:
                if written is None:
                    raise self.error("", pos, f"cannot infer the shape of '{instr.name}': operand '{operand}' is not defined yet")
                shapes.append(written)
            else:
                shapes.append(producer.shape.subshape(index))
        try:
            return infer_shape(instr.opcode, shapes, instr.attrs, self.computations.__getitem__)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise self.error("", pos, f"cannot infer the shape of '{instr.name}' ({instr.opcode}): "
                                      f"{e if isinstance(e, ValueError) else 'write it'}") from None

    def operands(self, instr: Instruction) -> None:
        s = self.s
        fast = _RE_OPERANDS_FAST.match(s, self.p)
        if fast is not None:
            body = fast.group(1)
            items = [item for item in _RE_OPERAND_ITEM.findall(body) if item[1]]
            instr.operands = [name.lstrip("%") for _, name in items]
            if any(shape for shape, _ in items):
                offset = fast.start(1)
                instr.operand_shapes = [self.array_shape(shape, offset) if shape else None for shape, _ in items]
            self.p = fast.end()
            return
        names = instr.operands
        shapes: list[Shape | None] = []
        any_shape = False
        p = self.skip(self.p)
        if s.startswith(")", p):
            self.p = p + 1
            return
        while True:
            p = self.skip(self.p)
            shape: Shape | None = None
            ident = _RE_IDENT.match(s, p)
            if s.startswith("(", p) or s.startswith("b(", p) or (ident is not None and ident.group(0) in ELEMENT_BITS):
                # A shape in front of the operand (instruction names cannot be element types).
                shape = self.shape()
                any_shape = True
                p = self.skip(self.p)
            if _RE_OPCODE.match(s, p):
                names.append(self.nested_instruction(p, shape))
            else:
                m = _RE_OPERAND_NAME.match(s, p)
                if m is None:
                    raise self.error("an operand name", p)
                names.append(m.group(0).lstrip("%"))
                self.p = m.end()
            shapes.append(shape)
            c = _RE_COMMA_OR_CLOSE.match(s, self.p)
            if c is None:
                raise self.error("',' or ')' after an operand")
            self.p = c.end()
            if c.group(1) == ")":
                break
        if any_shape:
            instr.operand_shapes = shapes

    def nested_instruction(self, pos: int, shape: Shape | None) -> str:
        """`add(f32[4] negate(%p), %q)`: an operand written as an instruction, which XLA
        adds in front of the one using it under the name `<opcode>.anon`."""
        opcode = _RE_OPCODE.match(self.s, pos).group(1)
        base = f"{opcode}.anon"
        name, n = base, 0
        while name in self.scope or any(x.name == name for x in self.pending):
            n += 1
            name = f"{base}.{n}"
        line, col = self.line_col(pos)
        self.p = pos
        instr = self.instruction_rhs(name, line, col, False, allow_attributes=False, shape=shape)
        self.pending.append(instr)
        return name

    def literal_operand(self, instr: Instruction) -> None:
        shape = instr.shape
        if shape.element_type != "tuple":
            # A short array literal (`constant(0)`, `constant({0, 1})`): dumps repeat a
            # few, so each is read once per element type, dimensions and text, and copied.
            m = _RE_SHORT_LITERAL.match(self.s, self.p)
            if m is not None:
                key = (shape.element_type, shape.dims, m.group(1))
                value = self.literal_cache.get(key)
                if value is None:
                    self.literal_text(instr)
                    if isinstance(instr.literal, np.ndarray) and self.p == m.end():
                        self.literal_cache[key] = instr.literal.copy()
                    return
                instr.literal = value.copy()
                self.p = m.end()
                return
        self.literal_text(instr)

    def literal_text(self, instr: Instruction) -> None:
        start = self.skip(self.p)
        # The literal runs to the ')' that closes `constant(`.
        self.p = start - 1
        text = self.balanced("a literal")[1:-1]
        try:
            value, elided = parse_literal(text, instr.shape)
        except ValueError as e:
            raise self.error("", start, str(e)) from None
        instr.literal = value
        instr.literal_elided = elided


# ---------------------------------------------------------------------- shardings
def parse_sharding(text: str) -> hlo_attrs.Sharding:
    """Parse the braces of `sharding={...}` (HloSharding::ToString); ValueError when bad."""
    parser = _Parser(text, "<sharding>")
    try:
        sharding = parser.v_sharding()
        if parser.skip(parser.p) != len(text):
            raise parser.error("the end of the sharding")
    except HloParseError as e:
        raise ValueError(e.message) from None
    return sharding


def parse_shape_prefix(text: str, pos: int = 0) -> tuple[Shape, int]:
    """Parse the HLO shape (with layout) that starts at `pos`; returns it and where it
    ends.  ValueError when there is none: for tools that read shapes out of other dumps."""
    parser = _Parser(text, "<shape>")
    parser.p = pos
    try:
        shape = parser.shape()
    except HloParseError as e:
        raise ValueError(e.message) from None
    return shape, parser.p


def parse_window(text: str) -> hlo_attrs.Window:
    """Parse the braces of `window={...}` (Window ToString); ValueError when bad."""
    parser = _Parser(text, "<window>")
    try:
        window = parser.v_window()
        if parser.skip(parser.p) != len(text):
            raise parser.error("the end of the window")
    except HloParseError as e:
        raise ValueError(e.message) from None
    return window


# ---------------------------------------------------------------------- public API
def parse_hlo(text: str, path: str = "<string>", *, allow_unknown_attributes: bool = False) -> Module:
    """Parse HLO module text into the typed IR; raises HloParseError.

    An attribute XLA's parser does not take on its opcode (or in the module header) is
    an error unless `allow_unknown_attributes`, which keeps it as raw text (`attrs.Raw`,
    not interpreted) and warns (ConverterWarning, and `Module.warnings`) naming each:
    for attributes a newer XLA added."""
    parser = _Parser(text, path, allow_unknown_attributes)
    # The parser allocates millions of small objects and frees none of them until it is
    # done: the cyclic garbage collector's passes over them cost a third of the time on
    # large dumps and find nothing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return parser.module()
    except HloParseError:
        raise
    except RecursionError:
        raise parser.error("", found="nesting too deep") from None
    except (ValueError, IndexError, KeyError, TypeError) as e:
        # Last resort for malformed input no grammar rule anticipated: still a located error.
        raise parser.error("", found=f"malformed input ({type(e).__name__}: {e})") from None
    finally:
        if collecting:
            gc.enable()


def parse_hlo_file(path: str, *, allow_unknown_attributes: bool = False) -> Module:
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return parse_hlo(text, path, allow_unknown_attributes=allow_unknown_attributes)
