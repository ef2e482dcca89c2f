"""Instruction locations: the dump's name and line:col, fused with the metadata's op_name
and source position.  The importer makes the source part once per distinct source (keyed
by the metadata's text less its scheduling name); these cases pin what each instruction
gets, written out by hand from its metadata."""

from converter.runtime.convert import convert_text

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
    hlo = """HloModule m

FileNames
1 "g.py"

FunctionNames
1 "fn"

FileLocations
1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=5 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

ENTRY main {
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
    own.  Inside a quoted value (the first pair) or glued to a bare value by '=' (read
    through the balanced-braces form of metadata: the second pair, where the quoted text
    after it holds the stack_frame_id that XLA's item reader finds) it is part of what
    differs between the instructions, whose locations differ."""
    hlo = r"""HloModule m

FileNames
1 "g.py"
2 "h.py"

FunctionNames
1 "fn"

FileLocations
1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=5 end_column=9}
2 {file_name_id=2 function_name_id=1 line=8 end_line=8 column=1 end_column=2}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}

ENTRY main {
  x = f32[4]{0} parameter(0)
  a = f32[4]{0} exponential(x), metadata={op_name="o scheduling_name=" source_file="f1.py" source_line=2}
  b = f32[4]{0} exponential(a), metadata={op_name="o scheduling_name=" other="f1.py" source_line=2}
  c = f32[4]{0} exponential(b), metadata={op_name="p" k=scheduling_name="stack_frame_id=1"}
  ROOT d = f32[4]{0} exponential(c), metadata={op_name="p" k=scheduling_name="stack_frame_id=2"}
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


_PIECES = ['"', "{", "}", "=", " ", "a", "op_name=", "source_file=", "source_line=", "stack_frame_id=",
           "scheduling_name=", '"f.py"', '"g.py"', "7", "8", "x_1"]


def test_texts_with_the_same_key_have_the_same_source():
    """Generated: texts around a `scheduling_name="..."` whose value differs (values
    that are themselves items, braces, '='), and the text without it.  Wherever two
    have the same cache key (_source_key), the fields the location is made from are
    the same (metadata_source, whose agreement with the general reading
    tests/hlo/test_metadata.py checks)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from converter.hlo.ir import metadata_source
    from converter.importer.core import _source_key

    text_part = st.lists(st.sampled_from(_PIECES), max_size=12).map("".join)
    value = st.lists(st.sampled_from([p for p in _PIECES if '"' not in p]), max_size=6).map("".join)

    @settings(max_examples=800, deadline=None)
    @given(text_part, text_part, value, value)
    def check(prefix, suffix, v1, v2):
        texts = [prefix + f'scheduling_name="{v}"' + suffix for v in (v1, v2)] + [prefix + suffix]
        keys = [_source_key(t) for t in texts]
        for i in range(3):
            for j in range(i):
                if keys[i] == keys[j]:
                    assert metadata_source(texts[i]) == metadata_source(texts[j]), (texts[i], texts[j])

    check()


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
