"""docs/backend_calls.md, the table of every backend call the converter knows (issue 27:
README's table of backend calls), is what the registries say: regenerated here and
compared, so a new pass, plug-in or refusal cannot leave it stale."""

from __future__ import annotations

import pathlib

from converter.tools.cli import backend_call_rows, backend_calls_markdown

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "backend_calls.md"


def test_the_table_is_current():
    assert DOC.read_text() == backend_calls_markdown(backend_call_rows(installed=False)), (
        "docs/backend_calls.md is stale: regenerate it with "
        "`hlo-roundtrip passes --targets --markdown > docs/backend_calls.md`")


def test_the_table_names_the_calls_of_todays_stacks_and_their_refusals():
    rows = {target: (what, where) for target, what, where in backend_call_rows(installed=False)}
    for target in ["__gpu$xla.gpu.triton", "xla_ffi_python_gpu_callback", "cusolver_syrk_ffi", "te_grouped_gemm_v2_ffi",
                   "te_grouped_quantize_ffi", "__cublas$lt$groupedMatmul", "xla.gpu.ext.cub_sort_pairs",
                   "AsyncCollectiveStart", "__cudnn$fmhaSoftmax"]:
        assert target in rows, target
    what, where = rows["te_ep_dispatch_ffi"]
    assert what.startswith("refused: expert-parallel") and where.startswith("te-refused")
