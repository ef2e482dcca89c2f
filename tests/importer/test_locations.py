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
