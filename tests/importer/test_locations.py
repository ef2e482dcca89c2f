"""Instruction locations: the dump's name and line:col, fused with the metadata's op_name
and source position.  The importer makes the source part once per distinct source (keyed
by the metadata's text less its scheduling name); these cases pin what each instruction
gets, written out by hand from its metadata."""

import warnings

from converter.runtime.convert import convert_text
from tests.helpers import stack_frame_tables

HLO = r"""HloModule m
ENTRY main {
  x = f32[4]{0} parameter(0)
  e1 = f32[4]{0} exponential(x), metadata={op_name="jit(f)/exp" source_file="f.py" source_line=3 scheduling_name="e1.1"}
  e2 = f32[4]{0} exponential(e1), metadata={op_name="jit(f)/exp" source_file="f.py" source_line=3 scheduling_name="e2.7"}
  e3 = f32[4]{0} exponential(e2), metadata={op_name="jit(f)/exp" source_file="f.py" source_line=4 scheduling_name="e1.1"}
  e4 = f32[4]{0} exponential(e3), metadata={op_name='a scheduling_name="q"' scheduling_name="z"}
  e5 = f32[4]{0} exponential(e4), metadata={op_name="b scheduling_name=\"q\"" scheduling_name="z"}
  e6 = f32[4]{0} exponential(e5), metadata={op_name="a" scheduling_name="z"}
  e7 = f32[4]{0} exponential(e6), metadata={scheduling_name="only"}
  ROOT e8 = f32[4]{0} exponential(e7), metadata={op_type="exp" op_name="jit(f)/exp" source_file="f.py" source_line=3}
}
"""

EXPECTED = [
    'loc(fused["e1"("m.hlo":4:3), "jit(f)/exp"("f.py":3:0)])',
    'loc(fused["e2"("m.hlo":5:3), "jit(f)/exp"("f.py":3:0)])',
    'loc(fused["e3"("m.hlo":6:3), "jit(f)/exp"("f.py":4:0)])',
    'loc(fused["e4"("m.hlo":7:3), "a scheduling_name=\\22q\\22"])',
    'loc(fused["e5"("m.hlo":8:3), "b scheduling_name=\\22q\\22"])',
    'loc(fused["e6"("m.hlo":9:3), "a"])',
    'loc("e7"("m.hlo":10:3))',
    'loc(fused["e8"("m.hlo":11:3), "jit(f)/exp"("f.py":3:0)])',
]


def test_each_instruction_gets_its_own_source():
    module = convert_text(HLO, "m.hlo", pipeline="none")
    body = module.body.operations[0].regions[0].blocks[0]
    ops = [op for op in body.operations if op.name == "stablehlo.exponential"]
    assert [str(op.location) for op in ops] == EXPECTED


def test_stack_frame_locations():
    """A stack frame names the file, line and column of its file location."""
    hlo = "HloModule m\n\n" + stack_frame_tables(["g.py"], ["fn"], [(1, 1, 7, 7, 5, 9)], [(1, 1)]) + """ENTRY main {
  x = f32[4]{0} parameter(0)
  a = f32[4]{0} exponential(x), metadata={op_name="jit(f)/exp" stack_frame_id=1 scheduling_name="a.1"}
  ROOT b = f32[4]{0} exponential(a), metadata={op_name="jit(f)/exp" stack_frame_id=1 scheduling_name="b.2"}
}
"""
    module = convert_text(hlo, "m.hlo", pipeline="none")
    body = module.body.operations[0].regions[0].blocks[0]
    locs = [str(op.location) for op in body.operations if op.name == "stablehlo.exponential"]
    assert locs == ['loc(fused["a"("m.hlo":17:3), "jit(f)/exp"("g.py":7:5)])',
                    'loc(fused["b"("m.hlo":18:3), "jit(f)/exp"("g.py":7:5)])']


def test_generated_metadata_in_every_item_order_gets_its_own_source():
    """The source part is cached by the metadata's text less its scheduling name, which
    may stand first, between other items or last (XLA prints it last).  Generated: 60
    instructions whose metadata draw op_name, source_file and source_line from small sets
    (so the cache is hit across instructions) with a unique scheduling name, the items in a
    random order; each location is written from the items the test drew."""
    import random

    rng = random.Random(5)
    lines, expected = ["HloModule m", "ENTRY main {", "  v0 = f32[4]{0} parameter(0)"], []
    for i in range(1, 61):
        op_name, source_file, source_line = rng.choice(["jit(f)/a", "jit(f)/b"]), rng.choice(["f.py", "g.py"]), \
            rng.choice([3, 4])
        items = [f'op_name="{op_name}"', f'source_file="{source_file}"', f"source_line={source_line}",
                 f'scheduling_name="s{i}.{rng.randrange(100)}"']
        rng.shuffle(items)
        lines.append(f"  v{i} = f32[4]{{0}} exponential(v{i - 1}), metadata={{{' '.join(items)}}}")
        expected.append(f'loc(fused["v{i}"("m.hlo":{i + 3}:3), "{op_name}"("{source_file}":{source_line}:0)])')
    lines[-1] = lines[-1].replace("  v60 =", "  ROOT v60 =")
    module = convert_text("\n".join(lines + ["}"]) + "\n", "m.hlo", pipeline="none")
    body = module.body.operations[0].regions[0].blocks[0]
    assert [str(op.location) for op in body.operations if op.name == "stablehlo.exponential"] == expected


def test_a_scheduling_name_inside_a_value_is_not_cut_from_the_key():
    """The source cache's key cuts `scheduling_name="..."` only where it is an item of its
    own.  Inside a quoted value (the first pair: cut there, both texts would leave the key
    `op_name="o f1.py" source_line=2`) it is part of what differs between the
    instructions, whose locations differ.  An item glued to the one before it (the second
    pair, as XLA's parser reads it) is read as written, each its own stack frame."""
    hlo = "HloModule m\n\n" + stack_frame_tables(["g.py", "h.py"], ["fn"], [(1, 1, 7, 7, 5, 9), (2, 1, 8, 8, 1, 2)],
                                                [(1, 1), (2, 1)]) + r"""ENTRY main {
  x = f32[4]{0} parameter(0)
  a = f32[4]{0} exponential(x), metadata={op_name="o scheduling_name=" source_file="f1.py" source_line=2}
  b = f32[4]{0} exponential(a), metadata={op_name="o scheduling_name=" op_type="f1.py" source_line=2}
  c = f32[4]{0} exponential(b), metadata={op_name="p"scheduling_name="c.1" stack_frame_id=1}
  ROOT d = f32[4]{0} exponential(c), metadata={op_name="p"scheduling_name="d.1" stack_frame_id=2}
}
"""
    module = convert_text(hlo, "m.hlo", pipeline="none")
    body = module.body.operations[0].regions[0].blocks[0]
    locs = [str(op.location) for op in body.operations if op.name == "stablehlo.exponential"]
    assert locs == ['loc(fused["a"("m.hlo":20:3), "o scheduling_name="("f1.py":2:0)])',
                    'loc(fused["b"("m.hlo":21:3), "o scheduling_name="])',
                    'loc(fused["c"("m.hlo":22:3), "p"("g.py":7:5)])',
                    'loc(fused["d"("m.hlo":23:3), "p"("h.py":8:1)])']


def test_a_fusion_call_kept_as_a_call_has_the_fusion_s_location():
    """Fusions and calls make no location of their own when inlined (each inlined op has
    its instruction's); kept as a call (--keep-fusions) the call op has the fusion's."""
    from converter.importer.registry import UNLOCATED, VALUE_ONLY

    assert UNLOCATED == VALUE_ONLY | {"fusion", "call"}
    hlo = """HloModule m
fused {
  p = f32[4]{0} parameter(0)
  ROOT e = f32[4]{0} exponential(p), metadata={op_name="jit(f)/exp"}
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT f = f32[4]{0} fusion(x), kind=kLoop, calls=fused, metadata={op_name="jit(f)/fusion" source_file="f.py" source_line=9}
}
"""
    kept = convert_text(hlo, "m.hlo", pipeline="none", keep_fusions=True)
    main = [op for op in kept.body.operations if op.attributes["sym_name"].value == "main"][0]
    call = [op for op in main.regions[0].blocks[0].operations if op.name == "func.call"][0]
    assert str(call.location) == 'loc(fused["f"("m.hlo":9:3), "jit(f)/fusion"("f.py":9:0)])'
    inlined = convert_text(hlo, "m.hlo", pipeline="none")
    ops = list(inlined.body.operations[0].regions[0].blocks[0].operations)
    assert [op.name for op in ops] == ["stablehlo.exponential", "func.return"]
    assert str(ops[0].location) == 'loc(fused["e"("m.hlo":4:3), "jit(f)/exp"])'


_PIECES = ['"', "{", "}", "=", " ", ",", "a", "my_", "op_name=", "op_type=", "source_file=", "source_line=",
           "stack_frame_id=", "scheduling_name=", "profile_type={1}", '"f.py"', '"g.py"', "7", "8", "x_1"]
_KEYS = ["op_name", "op_type", "source_file", "source_line", "stack_frame_id", "scheduling_name", "profile_type",
         "my_scheduling_name"]


def test_the_key_is_the_text_less_its_scheduling_name_item():
    """Generated: metadata as the parser hands it to the importer (what it refuses, as
    XLA's parser does, never gets there; unknown attributes kept by
    allow_unknown_attributes do): items of every kind, glued or apart, quoted values that
    hold `scheduling_name="`, '=' and other keys, and texts of random pieces.  The cache
    key (_source_key) is the text itself, or the text less one `scheduling_name` item
    (found by parse_metadata's reading): so texts with the same key have the same
    op_name, source file and line and stack frame."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from converter.hlo.ir import _RE_METADATA_ANY_KV
    from converter.hlo.parser import HloParseError, parse_hlo
    from converter.importer.locations import _source_key

    # Values that end in what looks like an item's start (its closing quote then reads
    # as the opening one) drawn often: random pieces seldom make them.
    quoted = st.one_of(st.lists(st.sampled_from([p for p in _PIECES if '"' not in p]), max_size=5),
                       st.sampled_from(["o scheduling_name=", " scheduling_name=", "x op_name="])).map(lambda v: f'"{v}"')
    values = {"op_name": quoted, "op_type": quoted, "source_file": quoted, "scheduling_name": quoted,
              "my_scheduling_name": quoted, "source_line": st.integers(-3, 99).map(str),
              "stack_frame_id": st.integers(0, 9).map(str), "profile_type": st.sampled_from(["{}", "{1}", "{0,3}"])}
    separator = st.sampled_from([" ", "", ",", " , ", "  "])
    items = st.lists(st.sampled_from(_KEYS), unique=True, max_size=6).flatmap(
        lambda keys: st.tuples(*(st.tuples(separator, values[k].map(lambda v, k=k: f"{k}={v}")) for k in keys))
    ).map(lambda xs: "".join(s + i for s, i in xs))
    pieces = st.lists(st.sampled_from(_PIECES), max_size=12).map("".join)

    def as_read(metadata: str) -> str | None:
        """The metadata text the importer gets, or None where the parser refuses it."""
        hlo = ("HloModule m\nENTRY main {\n  ROOT x = f32[4]{0} parameter(0), metadata={"
               + metadata + "}\n}\n")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return parse_hlo(hlo, "m.hlo", allow_unknown_attributes=True).entry.root.metadata_text
        except HloParseError:
            return None

    read = 0

    @settings(max_examples=1000, deadline=None)
    @given(st.one_of(items, pieces))
    def check(metadata):
        nonlocal read
        text = as_read(metadata)
        if text is None:
            return
        read += 1
        key = _source_key(text)
        cuts = [text[:m.start()] + text[m.end():] for m in _RE_METADATA_ANY_KV.finditer(text)
                if m.group(1) == "scheduling_name"]
        assert key == text or key in cuts, (text, key)

    check()
    assert read > 300  # most drawn texts are ones the parser reads


def test_a_shared_reducer_s_ops_have_its_instructions_locations_in_every_region():
    """The root's location is made once per module and reused: each reduce's region holds
    the reducer's add and return, both at the add instruction's location."""
    hlo = """HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b), metadata={op_name="jit(f)/reduce_sum" source_file="f.py" source_line=2}
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  z = f32[] constant(0)
  r1 = f32[] reduce(x, z), dimensions={0}, to_apply=sum
  r2 = f32[] reduce(x, z), dimensions={0}, to_apply=sum
  ROOT t = (f32[], f32[]) tuple(r1, r2)
}
"""
    module = convert_text(hlo, "m.hlo", pipeline="none")
    body = module.body.operations[0].regions[0].blocks[0]
    reduces = [op for op in body.operations if op.name == "stablehlo.reduce"]
    assert len(reduces) == 2
    want = 'loc(fused["s"("m.hlo":5:3), "jit(f)/reduce_sum"("f.py":2:0)])'
    for op in reduces:
        region_ops = list(op.regions[0].blocks[0].operations)
        assert [o.name for o in region_ops] == ["stablehlo.add", "stablehlo.return"]
        assert [str(o.location) for o in region_ops] == [want, want]
