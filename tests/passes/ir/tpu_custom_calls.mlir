// PASSES: tpu-custom-calls
// tpu-custom-calls rewrites the TPU compiler's own custom-calls into plain StableHLO (or into
// jaxlib's CPU LAPACK calls for the panel kernels of its blocked linear algebra):
// AllocateBuffer -> zeros; AssumeGatherIndicesInBound / GatherScatterIndicesBitpacked -> their
// operand; X64SplitLow/High, X64Combine -> the halves of a 64-bit value (integer words,
// complex parts, f32 high + residual); ConcatBitcast -> the operands' buffers laid end to
// end; Cholesky, diagonal-block inverses -> loops / triangular solves; LU, QR, eigh kernels
// -> lapack_?getrf/geqrf/syevd_ffi.  Calls that do not fit their contract are refused.

// AllocateBuffer (a buffer a loop overwrites) becomes zeros; the gather-index marker is the
// identity, so the gather reads %arg1 directly.
module {
  func.func @main(%arg0: tensor<8x4xf32>, %arg1: tensor<3x1xi32>) -> (tensor<2x4xf32>, tensor<3x4xf32>) {
    %0 = stablehlo.custom_call @AllocateBuffer() : () -> tensor<2x4xf32>
    %1 = stablehlo.custom_call @AssumeGatherIndicesInBound(%arg1) : (tensor<3x1xi32>) -> tensor<3x1xi32>
    %2 = "stablehlo.gather"(%arg0, %1) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 4>}> : (tensor<8x4xf32>, tensor<3x1xi32>) -> tensor<3x4xf32>
    return %0, %2 : tensor<2x4xf32>, tensor<3x4xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK-DAG:   %[[ZEROS:.+]] = stablehlo.constant dense<0.000000e+00> : tensor<2x4xf32>
// CHECK-DAG:   %[[ROWS:.+]] = "stablehlo.gather"(%arg0, %arg1)
// CHECK:       return %[[ZEROS]], %[[ROWS]]

// -----

// An s64 split into its low and high 32-bit words (as bits: bitcast to ui64, shift the high
// word down, convert keeps the low 32 bits) and combined back (or of the low word and the
// high word shifted up); a c64 split into its real and imaginary parts and combined.
module {
  func.func @main(%arg0: tensor<4xi64>, %arg1: tensor<4xcomplex<f32>>) -> (tensor<4xui32>, tensor<4xui32>, tensor<4xi64>, tensor<4xcomplex<f32>>) {
    %0 = stablehlo.custom_call @X64SplitLow(%arg0) : (tensor<4xi64>) -> tensor<4xui32>
    %1 = stablehlo.custom_call @X64SplitHigh(%arg0) : (tensor<4xi64>) -> tensor<4xui32>
    %2 = stablehlo.custom_call @X64Combine(%0, %1) : (tensor<4xui32>, tensor<4xui32>) -> tensor<4xi64>
    %3 = stablehlo.custom_call @X64SplitLow(%arg1) : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
    %4 = stablehlo.custom_call @X64SplitHigh(%arg1) : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
    %5 = stablehlo.custom_call @X64Combine(%3, %4) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xcomplex<f32>>
    return %0, %1, %2, %5 : tensor<4xui32>, tensor<4xui32>, tensor<4xi64>, tensor<4xcomplex<f32>>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[BITS:.+]] = stablehlo.bitcast_convert %arg0 : (tensor<4xi64>) -> tensor<4xui64>
// CHECK-NEXT:  %[[LOW:.+]] = stablehlo.convert %[[BITS]] : (tensor<4xui64>) -> tensor<4xui32>
// CHECK-NEXT:  %[[BITS2:.+]] = stablehlo.bitcast_convert %arg0 : (tensor<4xi64>) -> tensor<4xui64>
// CHECK-NEXT:  %[[C32:.+]] = stablehlo.constant dense<32> : tensor<4xui64>
// CHECK-NEXT:  %[[DOWN:.+]] = stablehlo.shift_right_logical %[[BITS2]], %[[C32]]
// CHECK-NEXT:  %[[HIGH:.+]] = stablehlo.convert %[[DOWN]] : (tensor<4xui64>) -> tensor<4xui32>
// CHECK-NEXT:  %[[LOW64:.+]] = stablehlo.convert %[[LOW]] : (tensor<4xui32>) -> tensor<4xui64>
// CHECK-NEXT:  %[[HIGH64:.+]] = stablehlo.convert %[[HIGH]] : (tensor<4xui32>) -> tensor<4xui64>
// CHECK-NEXT:  %[[C32B:.+]] = stablehlo.constant dense<32> : tensor<4xui64>
// CHECK-NEXT:  %[[UP:.+]] = stablehlo.shift_left %[[HIGH64]], %[[C32B]]
// CHECK-NEXT:  %[[WORD:.+]] = stablehlo.or %[[LOW64]], %[[UP]]
// CHECK-NEXT:  %[[S64:.+]] = stablehlo.bitcast_convert %[[WORD]] : (tensor<4xui64>) -> tensor<4xi64>
// CHECK-NEXT:  %[[RE:.+]] = stablehlo.real %arg1
// CHECK-NEXT:  %[[IM:.+]] = stablehlo.imag %arg1
// CHECK-NEXT:  %[[C:.+]] = stablehlo.complex %[[RE]], %[[IM]]
// CHECK-NEXT:  return %[[LOW]], %[[HIGH]], %[[S64]], %[[C]]

// -----

// ConcatBitcast of two row slices of a weight (row-major layouts): the operands flattened in
// their physical order, concatenated in operand order, and read back as the 4x3 result.
module {
  func.func @main(%arg0: tensor<1x3xf32>, %arg1: tensor<3x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @ConcatBitcast(%arg0, %arg1) {hlo.operand_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>], hlo.result_layouts = [dense<[1, 0]> : tensor<2xindex>]} : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[A:.+]] = stablehlo.reshape {{.*}} -> tensor<3xf32>
// CHECK:       %[[B:.+]] = stablehlo.reshape {{.*}} -> tensor<9xf32>
// CHECK-NEXT:  %[[FLAT:.+]] = stablehlo.concatenate %[[A]], %[[B]], dim = 0 : (tensor<3xf32>, tensor<9xf32>) -> tensor<12xf32>
// CHECK-NEXT:  stablehlo.reshape %[[FLAT]] : (tensor<12xf32>) -> tensor<4x3xf32>

// -----

// The TPU's LU panel kernel becomes LAPACK's getrf: its factors, its 1-based pivots made
// 0-based, and the row permutation the pivots make (a loop of swaps).
module {
  func.func @main(%arg0: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xi32>, tensor<4xi32>) {
    %0:3 = stablehlo.custom_call @LuDecompositionBlock(%arg0) : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xi32>, tensor<4xi32>)
    return %0#0, %0#1, %0#2 : tensor<4x4xf32>, tensor<4xi32>, tensor<4xi32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   @LuDecompositionBlock
// CHECK:       %[[LU:.+]]:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%arg0)
// CHECK:       %[[ONE:.+]] = stablehlo.constant dense<1> : tensor<4xi32>
// CHECK-NEXT:  %[[PIVOTS:.+]] = stablehlo.subtract %[[LU]]#1, %[[ONE]]
// CHECK:       %[[PERM:.+]]:2 = stablehlo.while
// CHECK:       return %[[LU]]#0, %[[PIVOTS]], %[[PERM]]#1

// -----

// Refused: ConcatBitcast whose operands hold 12 elements for a result of 16.
module {
  func.func @main(%arg0: tensor<1x3xf32>, %arg1: tensor<3x3xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.custom_call @ConcatBitcast(%arg0, %arg1) : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}
// ERROR: ConcatBitcast
// ERROR: the operands hold 12 elements, the result 16

// -----

// Refused: a 64-bit split of a 32-bit type.
module {
  func.func @main(%arg0: tensor<4xi32>) -> tensor<4xi16> {
    %0 = stablehlo.custom_call @X64SplitLow(%arg0) : (tensor<4xi32>) -> tensor<4xi16>
    return %0 : tensor<4xi16>
  }
}
// ERROR: a 64-bit split/combine of element type i32
