"""Write tests/passes/rnn/dumps/<jax version>/*.hlo: optimized GPU HLO of the programs in
cases.py (jax.experimental.rnn's cuDNN LSTM), compiled devicelessly for one H100
(jax.experimental.topologies), so the tests need no CUDA packages.

    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 HLO_ROUNDTRIP_GPU_TARGET=.../gpu_target_h100.txtpb \\
        <venv with jax[cuda12]>/bin/python tests/passes/rnn/generate_dumps.py [--only NAME,...]

(jax 0.10.2 writes dumps/jax010, jax 0.12 dumps/jax012.)

What differs from a dump made on a GPU: jaxlib/gpu_rnn.py and jax/experimental/rnn.py ask cuDNN
for the workspace and reserve-space sizes (`compute_rnn_workspace_reserve_space_sizes`, which
creates a cuDNN handle and fails without a GPU: CUDNN_STATUS_NOT_INITIALIZED).  Here that one
function is replaced by `stand_in_sizes` below; everything else is jaxlib's own: the lowering,
and the opaque descriptor packed by jaxlib's `build_rnn_descriptor` (jaxlib/gpu/rnn_kernels.h
RnnDescriptor) with these sizes in its last two fields.  So the workspace/reserve result shapes
and those two descriptor fields are not cuDNN's numbers; the rewrite reads neither.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def stand_in_sizes(input_size, hidden_size, num_layers, batch_size, max_seq_length, dropout, bidirectional,
                   cudnn_allow_tf32):
    """(workspace, reserve space) element counts in place of cuDNN's: a small workspace and a
    reserve of 8 values per hidden unit, step, layer and direction (gates, cell and output)."""
    directions = 2 if bidirectional else 1
    return 256, 8 * hidden_size * batch_size * max_seq_length * num_layers * directions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated case names")
    args = parser.parse_args()

    import jax
    from jax.sharding import SingleDeviceSharding
    from jax._src.lib import gpu_rnn as jax_gpu_rnn
    from jaxlib import gpu_rnn

    sys.path.insert(0, str(ROOT))
    from tests.passes.rnn.cases import cases, lstm_program
    from tests.programs.generate import compiled_hlo_text, h100_devices, versioned_dump_folder

    gpu_rnn.compute_rnn_workspace_reserve_space_sizes = stand_in_sizes
    jax_gpu_rnn.compute_rnn_workspace_reserve_space_sizes = stand_in_sizes
    sharding = SingleDeviceSharding(h100_devices(1)[0])
    out = versioned_dump_folder(HERE)
    only = set(args.only.split(",")) if args.only else None
    for case in cases().values():
        if only and case.name not in only:
            continue
        specs = [jax.ShapeDtypeStruct(shape, dtype, sharding=sharding) for shape, dtype in case.input_shapes()]
        compiled = jax.jit(lstm_program(case)).lower(*specs).compile()
        text = compiled_hlo_text(compiled)
        for target in ("cudnn_rnn_ffi",) + (("cudnn_rnn_bwd_ffi",) if case.grad else ()):
            if f'custom_call_target="{target}"' not in text:
                raise SystemExit(f"{case.name}: the dump has no {target} call")
        (out / f"{case.name}.hlo").write_text(text)
        print(f"{case.name}: {len(text)} bytes")


if __name__ == "__main__":
    main()
