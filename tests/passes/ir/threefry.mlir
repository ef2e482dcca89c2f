// PASSES: threefry
// threefry replaces JAX's GPU Threefry-2x32 kernels (cu_threefry2x32[_ffi],
// hip_threefry2x32[_ffi]; operands key0, key1, x0, x1 and results y0, y1, all ui32 of one
// shape) by the same hash in ui32 StableHLO ops, as jax/_src/prng.py defines it: key schedule
// ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA), 20 rounds of v0 += v1; v1 = rotl(v1, r) ^ v0, a key
// injection plus the group number after every 4 rounds.  Other shapes or types are refused.

// The key schedule, the first injection and round (rotation 13 = shl 13 | shr 19), the
// rotations of the first two groups of rounds (15, 26, 6, then 17, 29, 16, 24), and, after
// the fourth group's injection (+ 4), the last one: y0 = v0 + ks[2], y1 = v1 + ks[0] + 5.
// The results keep their places (the function returns y1 before y0).
module {
  func.func @main(%k0: tensor<3xui32>, %k1: tensor<3xui32>, %x0: tensor<3xui32>, %x1: tensor<3xui32>) -> (tensor<3xui32>, tensor<3xui32>) {
    %0:2 = stablehlo.custom_call @cu_threefry2x32_ffi(%k0, %k1, %x0, %x1) {api_version = 4 : i32} : (tensor<3xui32>, tensor<3xui32>, tensor<3xui32>, tensor<3xui32>) -> (tensor<3xui32>, tensor<3xui32>)
    return %0#1, %0#0 : tensor<3xui32>, tensor<3xui32>
  }
}
// CHECK-LABEL: func.func @main(%arg0: tensor<3xui32>, %arg1: tensor<3xui32>, %arg2: tensor<3xui32>, %arg3: tensor<3xui32>)
// CHECK-NOT:   custom_call
// CHECK:       %[[K01:.+]] = stablehlo.xor %arg0, %arg1
// CHECK-NEXT:  %[[PARITY:.+]] = stablehlo.constant dense<466688986> : tensor<3xui32>
// CHECK-NEXT:  %[[KS2:.+]] = stablehlo.xor %[[K01]], %[[PARITY]]
// CHECK-NEXT:  %[[V0:.+]] = stablehlo.add %arg2, %arg0
// CHECK-NEXT:  %[[V1:.+]] = stablehlo.add %arg3, %arg1
// CHECK-NEXT:  %[[R0:.+]] = stablehlo.add %[[V0]], %[[V1]]
// CHECK-NEXT:  %[[C13:.+]] = stablehlo.constant dense<13>
// CHECK-NEXT:  %[[SHL:.+]] = stablehlo.shift_left %[[V1]], %[[C13]]
// CHECK-NEXT:  %[[C19:.+]] = stablehlo.constant dense<19>
// CHECK-NEXT:  %[[SHR:.+]] = stablehlo.shift_right_logical %[[V1]], %[[C19]]
// CHECK-NEXT:  %[[ROT:.+]] = stablehlo.or %[[SHL]], %[[SHR]]
// CHECK-NEXT:  stablehlo.xor %[[ROT]], %[[R0]]
// CHECK:       stablehlo.constant dense<15> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_left
// CHECK-NEXT:  stablehlo.constant dense<17> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_right_logical
// CHECK:       stablehlo.constant dense<26> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_left
// CHECK-NEXT:  stablehlo.constant dense<6> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_right_logical
// CHECK:       stablehlo.constant dense<6> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_left
// CHECK-NEXT:  stablehlo.constant dense<26> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_right_logical
// CHECK:       stablehlo.constant dense<17> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_left
// CHECK-NEXT:  stablehlo.constant dense<15> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_right_logical
// CHECK:       stablehlo.constant dense<29> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_left
// CHECK-NEXT:  stablehlo.constant dense<3> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_right_logical
// CHECK:       stablehlo.constant dense<16> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_left
// CHECK-NEXT:  stablehlo.constant dense<16> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_right_logical
// CHECK:       stablehlo.constant dense<24> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_left
// CHECK-NEXT:  stablehlo.constant dense<8> : tensor<3xui32>
// CHECK-NEXT:  stablehlo.shift_right_logical
// CHECK:       stablehlo.constant dense<4> : tensor<3xui32>
// CHECK:       %[[Y0:.+]] = stablehlo.add {{%[0-9]+}}, %[[KS2]] :
// CHECK-NEXT:  %[[V1LAST:.+]] = stablehlo.add {{%[0-9]+}}, %arg0 :
// CHECK-NEXT:  %[[FIVE:.+]] = stablehlo.constant dense<5> : tensor<3xui32>
// CHECK-NEXT:  %[[Y1:.+]] = stablehlo.add %[[V1LAST]], %[[FIVE]]
// CHECK-NEXT:  return %[[Y1]], %[[Y0]]

// -----

// The ROCm kernel is the same hash; a call to another target stays.
module {
  func.func @main(%k0: tensor<2xui32>, %k1: tensor<2xui32>, %x0: tensor<2xui32>, %x1: tensor<2xui32>) -> (tensor<2xui32>, tensor<2xui32>, tensor<2xui32>) {
    %0:2 = stablehlo.custom_call @hip_threefry2x32(%k0, %k1, %x0, %x1) : (tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>) -> (tensor<2xui32>, tensor<2xui32>)
    %1 = stablehlo.custom_call @threefry_like(%x0) : (tensor<2xui32>) -> tensor<2xui32>
    return %0#0, %0#1, %1 : tensor<2xui32>, tensor<2xui32>, tensor<2xui32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   @hip_threefry2x32
// CHECK:       stablehlo.constant dense<466688986> : tensor<2xui32>
// CHECK:       stablehlo.custom_call @threefry_like(%arg2)
// CHECK-NOT:   @hip_threefry2x32

// -----

// Refused: the kernel hashes ui32 words; an i32 call is not the kernel's contract.
module {
  func.func @main(%k0: tensor<2xi32>, %k1: tensor<2xi32>, %x0: tensor<2xi32>, %x1: tensor<2xi32>) -> (tensor<2xi32>, tensor<2xi32>) {
    %0:2 = stablehlo.custom_call @cu_threefry2x32(%k0, %k1, %x0, %x1) : (tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> (tensor<2xi32>, tensor<2xi32>)
    return %0#0, %0#1 : tensor<2xi32>, tensor<2xi32>
  }
}
// ERROR: cu_threefry2x32
// ERROR: expects u32 operands and results of one shape, found ['tensor<2xi32>']

// -----

// Refused: three operands are not (key0, key1, x0, x1).
module {
  func.func @main(%k0: tensor<2xui32>, %x0: tensor<2xui32>, %x1: tensor<2xui32>) -> (tensor<2xui32>, tensor<2xui32>) {
    %0:2 = stablehlo.custom_call @cu_threefry2x32_ffi(%k0, %x0, %x1) : (tensor<2xui32>, tensor<2xui32>, tensor<2xui32>) -> (tensor<2xui32>, tensor<2xui32>)
    return %0#0, %0#1 : tensor<2xui32>, tensor<2xui32>
  }
}
// ERROR: expected (key0, key1, x0, x1) → (y0, y1), found 3 operands and 2 results
