// PASSES: triton-kernels
// REQUIRES: jax<0.12
// triton-kernels on a Pallas GPU kernel with the Triton backend (__gpu$xla.gpu.triton: Triton
// IR as MLIR bytecode in the backend_config's `ir`, grid_x/y/z).  The bytecode is readable
// only by the jaxlib that wrote it, so this file holds jax 0.10's dump and runs only there
// (triton_kernels_pallas_jax012.mlir holds the other version's); triton_kernels.mlir has the contract
// both versions share.

// tests/passes/triton/kernels.py add: o = x + y over a grid of 4 programs, 64-element blocks
// of 256-element arrays (tests/passes/triton/dumps/jax010/add.hlo, its kernel kept as is).
// The programs run as one loop over the grid carrying one flat buffer per kernel argument
// (x, y, then the output, zeros at first); program p loads x and y at p * 64 + iota(64),
// adds them and stores the sum into the output buffer, which the function returns.
module {
  func.func @main(%arg0: tensor<256xf32>, %arg1: tensor<256xf32>) -> tensor<256xf32> {
    %0 = stablehlo.custom_call @__gpu$xla.gpu.triton(%arg0, %arg1) {mhlo.backend_config = {debug = false, grid_x = 4 : i32, grid_y = 1 : i32, grid_z = 1 : i32, ir = "ML\EFR\0DMLIR23.0.0git\00\011\07\01\05\09\1B\01\03\0F\03\11\13\17\1B\1F#'+/\05\0937;?\03qM\11\01I\07\0F\0F\0F\0F\0F\13\0B\0B\13\0F\0B\0B\0B\17\0B\0F\0B\0B\0F\0F\1B\0F\0F\1B\0F\0B\0F\0B\0F\1B\0B\0F\0B\0F\1B\05\05YY\01\0F\17\0F\17\17\1B\07\0B\03\035\02\0A\03\1F\1D?A\1D\19'\1D\19-\11\03\05\11\03\01\11\03\02\02\05!\05#\03\03\1F!\11\0D\00\05%\05'\05)\01\07\13\13\13\05+\11\03\81\0D\09\05-\1D\1B)\1D\0F+-\11\07c+?\1D\1B/\1D\0F1-\11\07cEY\1D57\05/\1D9;\051\1D\0F=-\11\07c+Y\053\1DCE\055\1D\0FG-\11\07c\11%#arith.overflow<none>\00#arith.fastmath<none>\00\1B\03\02\02\03\01\02\02\1B\03\02\02\0F\1B\03\02\02\0B\05\07\0F\0F\0F\01\0B\01\09!tt.ptr<f32>\00\04\B6\05\05\01P\01\01\07\04\92\05\03\01\05\0BP\01\03\07\04f\05\03_\BB\07\1D\1D\1D\00\0DB\01\05\03\03\13B\01\07\03\03\15F\01\09\03\03\05\07\09\13B\01\07\03\03\15F\01\09\03\03\05\07\0D\13B\01\07\03\03\15F\01\09\03\03\05\07\11\13B\05\05\03\03\03\06\05\03\01\03\15\05B\05\0B\03\01\03\06\05\03\01\03\0B\17F\05\09\03\01\05\19\1B\13B\05\0D\03\03\03\06\05\03\01\03\1F\15F\05\09\03\01\05\1D!\17F\05\09\03\01\05\17#\03\06\05\03\05\03\01\07\06\05\03\05\05'%\09F\05\0F\03\07\03)\13B\07\05\03\03\03\06\07\03\01\03-\05B\07\0B\03\01\03\06\07\03\01\03\0F\17F\07\09\03\01\0513\13B\07\0D\03\03\03\06\07\03\01\037\15F\07\09\03\01\0559\17F\07\09\03\01\05/;\03\06\07\03\05\03\03\07\06\07\03\05\05?=\09F\07\0F\03\07\03A\19F3\11\03\07\05+C\13B\03\05\03\03\03\06\03\03\01\03G\05B\03\0B\03\01\03\06\03\03\01\03\13\17F\03\09\03\01\05KM\13B\03\0D\03\03\03\06\03\03\01\03Q\15F\03\09\03\01\05OS\17F\03\09\03\01\05IU\03\06\03\03\05\03\05\07\06\03\03\05\05YW\09F\03\0F\03\07\03[\0FD\03\13\05[E\11\00\01\06\03\01\05\01\00\E2\037\0B\0D\09\0B\0F!\09\0B\0F?)\0B\0B\0B\13\0F\0D\1F\0B\0B\0F\17\0D\0F\0D\07\11builtin\00tt\00arith\00module\00splat\00make_range\00addptr\00load\00func\00get_program_id\00store\00return\00constant\00muli\00addi\00addf\00add.<locals>.kernel\00tests/passes/triton/kernels.py\00kernel\00get:\00get\00tt.divisibility\00public\00add:\00add\00swap:\00swap\00\08G\15\05/\01\0B;#\01\17K\03\0B\03\0D\03\93\05\0D\0B\03\09\0D\13\13+\07\01\03\05\97\01\07\13\13\01", name = "kernel", num_stages = 1 : i32, num_warps = 4 : i32}} : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
    return %0 : tensor<256xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[X:.+]] = stablehlo.pad %arg0, {{.*}} -> tensor<257xf32>
// CHECK:       %[[Y:.+]] = stablehlo.pad %arg1, {{.*}} -> tensor<257xf32>
// CHECK:       %[[ZEROS:.+]] = stablehlo.constant dense<0.000000e+00> : tensor<256xf32>
// CHECK:       %[[O:.+]] = stablehlo.pad %[[ZEROS]], {{.*}} -> tensor<257xf32>
// CHECK:       %[[GRID:.+]]:4 = stablehlo.while(%[[I:.+]] = %{{.+}}, %[[XB:.+]] = %[[X]], %[[YB:.+]] = %[[Y]], %[[OB:.+]] = %[[O]])
// CHECK:       %[[FOUR:.+]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK-NEXT:  stablehlo.compare LT, %[[I]], %[[FOUR]]
// CHECK:       %[[PID:.+]] = stablehlo.remainder %[[I]], {{.*}}
// CHECK:       %[[C64:.+]] = stablehlo.constant dense<64> : tensor<i32>
// CHECK-NEXT:  stablehlo.multiply %[[PID]], %[[C64]] : tensor<i32>
// CHECK:       %[[XV:.+]] = "stablehlo.gather"(%[[XB]], {{.*}}) {{.*}} -> tensor<64xf32>
// CHECK:       %[[YV:.+]] = "stablehlo.gather"(%[[YB]], {{.*}}) {{.*}} -> tensor<64xf32>
// CHECK-NEXT:  %[[SUM:.+]] = stablehlo.add %[[XV]], %[[YV]] : tensor<64xf32>
// CHECK:       %[[STORED:.+]] = "stablehlo.scatter"(%[[OB]], {{.*}}, %[[SUM]])
// CHECK:       stablehlo.return {{.*}}, %[[XB]], %[[YB]], %[[STORED]]
// CHECK:       %[[OUT:.+]] = stablehlo.slice %[[GRID]]#3 [0:256]
// CHECK-NEXT:  return %[[OUT]]
