"""`hlo-roundtrip inspect` and the CLI contract (exit codes, messages, no tracebacks)."""

import collections
import json
import re

import pytest

from converter.tools.cli import main
from converter.runtime.xla_parser import xla_parse
from tests.conftest import SAMPLE_DUMPS, SAMPLES


def _xla_opcode_counts(text: str) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for comp in xla_parse(text).computations:
        for instr in comp.instructions:
            counts[re.match(r".*? = .*? ([a-z][a-z0-9\-]*)\(", instr, re.S).group(1)] += 1
    return counts


def _inspect_json(capsys, path) -> dict:
    assert main(["inspect", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", SAMPLE_DUMPS)
def test_inspect_json_counts_agree_with_xla(capsys, name):
    summary = _inspect_json(capsys, SAMPLES / name)
    theirs = _xla_opcode_counts((SAMPLES / name).read_text())
    ours = collections.Counter(summary["opcodes"])
    # XLA prints an async op that wraps one instruction as `<op>-start`/`-done`; the dump
    # may spell it `async-start`/`async-done`: compare those as one family.
    for counter in (ours, theirs):
        for op in list(counter):
            for suffix in ("-start", "-update", "-done"):
                if op.endswith(suffix) and not op.startswith(("async-", "copy-")):
                    count = counter.pop(op)
                    counter["async" + suffix] += count
    assert ours == theirs
    assert summary["instructions"] == sum(theirs.values())


def test_inspect_summary_of_the_spmd_sample(capsys):
    s = _inspect_json(capsys, SAMPLES / "tpu_spmd_mlp_async_collective_fusion.hlo")
    assert (s["devices"], s["replica_count"], s["num_partitions"]) == (4, 1, 4)
    assert [p["sharding"] for p in s["parameters"]] == [
        "{devices=[1,4]0,1,2,3}", "{devices=[4,1]0,1,2,3}", "{devices=[4,1,1]0,1,2,3}", "{devices=[4,1]0,1,2,3}"]
    assert s["custom_call_targets"]["AsyncCollectiveStart"]["count"] == 2
    assert s["custom_call_targets"]["AsyncCollectiveStart"]["support"] == "rewritten by tpu-async-collectives"
    gathers = [c for c in s["collectives"] if c["opcode"] == "all-gather"]
    assert len(gathers) == 7 and all(c["mode"] == "flattened-ids" for c in gathers)
    assert gathers[0]["replica_groups"] == [[0, 1, 2, 3]]


def test_inspect_table_names_what_a_user_looks_for(capsys):
    assert main(["inspect", str(SAMPLES / "gpu_maxtext_train_step_te_fused_attention.hlo")]) == 0
    out = capsys.readouterr().out
    for needle in ("16 = 1 replica(s) x 16 partition(s)", "te_fused_attn_forward_ffi", "__cublas$lt$matmul",
                   "collective-permute-start", "cross-partition", "flattened-ids", "fusion (kLoop)"):
        assert needle in out, needle


def test_parse_error_exit_status_and_message(tmp_path, capsys):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  ROOT a = f32[2]{0} ad(p, p\n}\n")
    assert main(["inspect", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(str(bad) + ":5:1: error: expected ',' or ')' after an operand, found '}'")
    assert "error: expected" in err and "Traceback" not in err


def test_import_error_names_instruction_and_line(tmp_path, capsys):
    dump = tmp_path / "feed.hlo"
    dump.write_text("HloModule m\nENTRY e {\n  t = token[] after-all()\n"
                    "  ROOT i = ((f32[2]{0}), token[]) infeed(t)\n}\n")
    assert main(["convert", str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}:4:3: error: %i (infeed):" in err and "Traceback" not in err


def test_bad_command_line_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["convert"])
    assert e.value.code == 2
    assert main([]) == 2


def test_missing_file_exits_1(capsys):
    assert main(["inspect", "/nonexistent/dump.hlo"]) == 1
    assert "no such file" in capsys.readouterr().err


def test_convert_writes_output_whole(tmp_path, capsys):
    out = tmp_path / "out.mlir"
    assert main(["convert", str(SAMPLES / "tpu_mlp_allreduce_4_replicas.hlo"), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("#loc") or text.startswith("module")
    assert "stablehlo.all_reduce" in text and "custom_call" not in text
    # A failing conversion leaves no file behind.
    bad_out = tmp_path / "bad.mlir"
    dump = tmp_path / "feed.hlo"
    dump.write_text("HloModule m\nENTRY e {\n  t = token[] after-all()\n"
                    "  ROOT i = ((f32[2]{0}), token[]) infeed(t)\n}\n")
    assert main(["convert", str(dump), "-o", str(bad_out)]) == 1
    assert not bad_out.exists()
