"""Write tests/passes/linalg/dumps/<jax version>/*.hlo: optimized GPU HLO of the programs in
cases.py, compiled devicelessly for one H100 (jax.experimental.topologies), so the tests need
no CUDA packages.

    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 HLO_ROUNDTRIP_GPU_TARGET=.../gpu_target_h100.txtpb \\
        <venv with jax[cuda12]>/bin/python tests/passes/linalg/generate_dumps.py [--only NAME,...]

(jax 0.10.2 writes dumps/jax010, jax 0.12 dumps/jax012.)

jax.experimental.sparse's cuSPARSE calls carry a descriptor that jaxlib packs at lowering
time (jaxlib/gpu/sparse.cc `build_*_descriptor`), asking cuSPARSE, which needs a GPU, for
the workspace size.  Without one, `PackedDescriptors` packs the same structs
(jaxlib/gpu/sparse_kernels.h: SparseMatDescriptor, DenseVecDescriptor, DenseMatDescriptor,
CsrMatvecDescriptor, ...; native 4-byte ints and enums) and names a workspace of
WORKSPACE_BYTES, the one field that differs from a dump made on a GPU.  The hip twins of these calls
(`hipsolver_*`, `hipsparse_*`, `hip_*`) are the same calls for ROCm; no ROCm compiler
runs here, so the tests rename the targets of these dumps.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]


WORKSPACE_BYTES = 256
# cudaDataType_t and cusparseIndexType_t (CUDA's library_types.h, cusparse.h)
CUDA_DATA_TYPE = {"float16": 2, "float32": 0, "float64": 1, "complex64": 4, "complex128": 5}
CUSPARSE_INDEX_TYPE = {"uint16": 1, "int32": 2, "int64": 3}


class PackedDescriptors:
    """jaxlib's `_cusparse.build_*_descriptor` functions, without cuSPARSE."""

    @staticmethod
    def _sparse(data_dtype, index_dtype, rows, cols, nnz, batch_count=1, batch_stride=0) -> bytes:
        import numpy as np
        import struct
        return struct.pack("=7i", CUDA_DATA_TYPE[np.dtype(data_dtype).name],
                           CUSPARSE_INDEX_TYPE[np.dtype(index_dtype).name], rows, cols, nnz, batch_count, batch_stride)

    @staticmethod
    def _vec(dtype, size) -> bytes:
        import numpy as np
        import struct
        return struct.pack("=2i", CUDA_DATA_TYPE[np.dtype(dtype).name], size)

    @staticmethod
    def _mat(dtype, rows, cols, batch_count=1, batch_stride=0) -> bytes:
        import numpy as np
        import struct
        return struct.pack("=5i", CUDA_DATA_TYPE[np.dtype(dtype).name], rows, cols, batch_count, batch_stride)

    def build_csr_todense_descriptor(self, data_dtype, index_dtype, rows, cols, nnz):
        return WORKSPACE_BYTES, self._sparse(data_dtype, index_dtype, rows, cols, nnz)

    build_coo_todense_descriptor = build_csr_todense_descriptor
    build_csr_fromdense_descriptor = build_csr_todense_descriptor
    build_coo_fromdense_descriptor = build_csr_todense_descriptor

    def build_csr_matvec_descriptor(self, data_dtype, x_dtype, compute_dtype, index_dtype, rows, cols, nnz,
                                    transpose):
        import struct
        return WORKSPACE_BYTES, (self._sparse(data_dtype, index_dtype, rows, cols, nnz)
                                 + self._vec(x_dtype, rows if transpose else cols)
                                 + self._vec(compute_dtype, cols if transpose else rows)
                                 + struct.pack("=i", int(transpose)))

    build_coo_matvec_descriptor = build_csr_matvec_descriptor

    def build_csr_matmat_descriptor(self, data_dtype, b_dtype, compute_dtype, index_dtype, rows, cols, BCcols, nnz,
                                    transpose):
        import struct
        return WORKSPACE_BYTES, (self._sparse(data_dtype, index_dtype, rows, cols, nnz)
                                 + self._mat(b_dtype, rows if transpose else cols, BCcols)
                                 + self._mat(compute_dtype, cols if transpose else rows, BCcols)
                                 + struct.pack("=i", int(transpose)))

    def build_coo_matmat_descriptor(self, data_dtype, b_dtype, compute_dtype, index_dtype, rows, cols, BCcols, nnz,
                                    transpose, batch_count, lhs_batch_stride, rhs_batch_stride):
        import struct
        b_rows = rows if transpose else cols
        c_rows = cols if transpose else rows
        return WORKSPACE_BYTES, (self._sparse(data_dtype, index_dtype, rows, cols, nnz, batch_count, lhs_batch_stride)
                                 + self._mat(b_dtype, b_rows, BCcols, batch_count, rhs_batch_stride)
                                 + self._mat(compute_dtype, c_rows, BCcols, batch_count, c_rows * BCcols)
                                 + struct.pack("=i", int(transpose)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated case names")
    args = parser.parse_args()

    import jax
    from jax.sharding import SingleDeviceSharding

    sys.path.insert(0, str(ROOT))
    from jax.experimental.sparse import _lowerings

    from tests.passes.linalg.cases import cases, random_inputs
    from tests.programs.generate import compiled_hlo_text, h100_devices, versioned_dump_folder

    _lowerings._get_module = lambda prefix: PackedDescriptors()
    sharding = SingleDeviceSharding(h100_devices(1)[0])
    out = versioned_dump_folder(HERE)
    only = set(args.only.split(",")) if args.only else None
    for case in cases().values():
        if only and case.name not in only:
            continue
        specs = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding) for x in random_inputs(case)]
        compiled = jax.jit(case.fn).lower(*specs).compile()
        text = compiled_hlo_text(compiled)
        if f'custom_call_target="{case.target}"' not in text:
            raise SystemExit(f"{case.name}: the dump has no {case.target} call")
        (out / f"{case.name}.hlo").write_text(text)
        print(f"{case.name}: {len(text)} bytes")


if __name__ == "__main__":
    main()
