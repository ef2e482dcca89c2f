"""The grammar notes' snippets (copied to tests/hlo/snippets/), against XLA's parser.

- accepted/: XLA (jaxlib 0.10.2) reads them; we read the same computations, opcodes and
  shapes, and XLA reads our printed text (`module_to_text`) exactly as it read the original.
- rejected/: XLA rejects them; so do we, with an HloParseError at the offending token.
- newer_xla/: what newer XLA prints; jaxlib 0.10.2 rejects them, jaxlib 0.12 reads them as
  we do (their typed values are checked in test_newer_xla.py).
- older_xla/: forms older XLA printed that jaxlib 0.10.2 rejects; we read them, because
  their meaning is unambiguous (async_group_id, metadata preserve_layout, stack-frame
  tables after the computations).
"""

from __future__ import annotations

import pathlib
import re

import jaxlib
import pytest

from converter.hlo.parser import HloParseError, parse_hlo
from converter.runtime.xla_parser import XlaParseError
from converter.hlo.printer import module_to_text
from tests.hlo.xla_view import our_view, xla_module, xla_named_view, xla_view

SNIPPETS = pathlib.Path(__file__).parent / "snippets"
ACCEPTED = sorted(p.name for p in (SNIPPETS / "accepted").glob("*.hlo"))


def _read(kind: str, name: str) -> str:
    return (SNIPPETS / kind / name).read_text()


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_snippet_reads_as_xla_reads_it(name):
    text = _read("accepted", name)
    ours = parse_hlo(text, name)
    assert not ours.warnings, ours.warnings  # every attribute in the snippets is typed
    theirs = xla_view(text)
    # XLA wraps an async op written as `<op>-start` (sugar) in a computation of its own;
    # the IR keeps the sugar (the importer unwraps it).
    theirs = {name: v for name, v in theirs.items() if name in ours.by_name or not name.startswith("async_wrapped")}
    assert our_view(ours) == theirs
    assert ours.entry.name == next(c.name for c in xla_module(text).computations if c.name == ours.entry.name)


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_snippet_prints_back_to_what_xla_reads_the_same(name):
    text = _read("accepted", name)
    printed = module_to_text(parse_hlo(text, name))
    assert xla_named_view(printed) == xla_named_view(text)
    # Printing is stable: our reading of our own output prints the same text.
    assert module_to_text(parse_hlo(printed, "printed")) == printed


# Where each rejected snippet fails: the token XLA's parser stops at.
REJECTED = {
    "attr_with_spaces_around_equals.hlo": (5, 42, "no space before '='"),
    "canonical_fingerprint_form.hlo": (2, 11, "expected a name"),
    "compact_operands.hlo": (5, 89, "expected an operand name"),
    "conditional_pred_with_branch_computations.hlo": (10, 44, "not branch_computations"),
    "dot_sparsity.hlo": (6, 88, "sparse dot"),
    "empty_layout_braces.hlo": (4, 21, "expected an opcode"),
    "float_leading_dot.hlo": (4, 28, "literal value, found '.'"),
    "forward_reference.hlo": (4, 26, "uses 'p', which is defined after it"),
    "headerless_first_comp_with_signature.hlo": (3, 9, "expected '=' after the instruction name"),
    "hex_integer.hlo": (4, 28, "s32 literal value"),
    "layout_fields_out_of_order.hlo": (4, 32, "in the order D T L # * E S SC P M"),
    "literal_attr_brace_ambiguity.hlo": (5, 79, "permutation of 1 dimensions in the layout"),
    "mesh_replica_groups_unquoted.hlo": (10, 59, "expected a quoted string"),
    "name_then_equals_no_space.hlo": (5, 3, "reads as an attribute name"),
    "primitive_type_as_instruction_name.hlo": (5, 3, "illegal instruction name 's2'"),
    "sig_space_before_colon.hlo": (3, 14, "expected a parameter 'name:'"),
    "tuple_constant_elided.hlo": (4, 37, "cannot be elided"),
}


def test_every_rejected_snippet_has_an_expected_error():
    assert sorted(REJECTED) == sorted(p.name for p in (SNIPPETS / "rejected").glob("*.hlo"))


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejected_snippet_is_an_error_where_xla_stops(name):
    text = _read("rejected", name)
    with pytest.raises(Exception) as xla_error:
        xla_module(text)
    xla_lines = [int(line) for line, _ in re.findall(r"was parsing (\d+):(\d+):", str(xla_error.value))]
    line, col, message = REJECTED[name]
    with pytest.raises(HloParseError) as ours:
        parse_hlo(text, name)
    e = ours.value
    assert (e.line, e.col) == (line, col), str(e)
    assert message in e.message
    assert line in xla_lines  # the line XLA reports too
    # The message shows the line and a caret under the column.
    shown, caret = str(e).split("\n")[1:3]
    assert shown == text.split("\n")[line - 1] and caret == " " * (col - 1) + "^"


# What XLA's own parser does with the newer forms depends on the jaxlib installed: 0.10.x
# rejects every one of them, 0.12 reads every one (0.11 was not tested: either is allowed,
# but what it reads must be what we read).
JAXLIB = tuple(int(x) for x in jaxlib.__version__.split(".")[:2])


@pytest.mark.parametrize("name", sorted(p.name for p in (SNIPPETS / "newer_xla").glob("*.hlo")))
def test_newer_xla_form_is_read_and_as_this_jaxlib_reads_it(name):
    text = _read("newer_xla", name)
    module = parse_hlo(text, name)
    assert not module.warnings, module.warnings
    # Printing keeps the form: reading the print gives the same module text again.
    assert module_to_text(parse_hlo(module_to_text(module))) == module_to_text(module)
    try:
        theirs = xla_view(text)
    except XlaParseError:
        assert JAXLIB < (0, 12), f"jaxlib {jaxlib.__version__} reads {name}"
        return
    assert JAXLIB >= (0, 11), f"jaxlib {jaxlib.__version__} is expected to reject {name}"
    theirs = {c: v for c, v in theirs.items() if c in module.by_name or not c.startswith("async_wrapped")}
    ours = our_view(module)
    if re.search(r"%[\w.\-]+#\d", text):
        # A compact `%x#i` operand is a get-tuple-element that XLA's parser materialises as
        # an instruction and our IR keeps in the operand: compare the rest.
        for view in (ours, theirs):
            for counts in view.values():
                for key in [k for k in counts if k[0] == "get-tuple-element"]:
                    del counts[key]
    assert ours == theirs


@pytest.mark.parametrize("name", sorted(p.name for p in (SNIPPETS / "older_xla").glob("*.hlo")))
def test_older_xla_form_is_read_leniently(name):
    text = _read("older_xla", name)
    with pytest.raises(Exception):
        xla_module(text)
    module = parse_hlo(text, name)
    root = module.entry.root
    if name == "async_group_id.hlo":
        assert root.attrs["async_group_id"] == 1 and root.opcode == "negate-done"
    elif name == "metadata_preserve_layout.hlo":
        assert module.entry.parameters[0].metadata.extra["preserve_layout"].text == "true"
    else:  # the stack-frame tables after the computations
        assert module.stack_frames.location(1) == ("a.py", 10, 2)
