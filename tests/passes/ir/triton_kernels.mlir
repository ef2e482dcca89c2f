// PASSES: triton-kernels
// triton-kernels rewrites GPU Triton kernels (Pallas' __gpu$xla.gpu.triton with Triton IR as
// bytecode, jax-triton's triton_kernel_call(_ffi) with Triton IR as text) as the grid run on
// CPU: one stablehlo.while over grid_x * grid_y * grid_z programs, each program's Triton ops
// translated to StableHLO over one flat buffer per kernel argument (the call's operands, then
// its results, which start as zeros unless aliased to an operand).  Pallas Mosaic GPU
// kernels (mosaic_gpu, mosaic_gpu_v2) are refused by name with the routes that work.
// (Pallas' own Triton bytecode is readable only by the jaxlib that wrote it; the numeric
// tests in tests/passes/triton cover it per jax version.  The jax-triton call below carries
// its kernel as text, which both jax versions read.)

// tests/passes/triton/generate_jax_triton.py scaled_add: o = x + 2.5 * y on the first 100
// elements, grid (4,), BLOCK 32 (a ragged last block, masked).  The call as jax-triton 0.4.1
// wrote it (its compressed opaque kept as is).  The 4 programs run as a loop whose carried
// buffers are x, y and the output (zeros at first), each with one spare element past the end
// where masked-off lanes read and write; program id = the loop index mod 4; each program
// gathers x and y under the mask offs < 100, computes x + 2.5 * y, and scatters it into the
// output buffer, which is cut back to 100 elements after the loop.
module {
  func.func @main(%arg0: tensor<100xf32>, %arg1: tensor<100xf32>) -> tensor<100xf32> {
    %0 = stablehlo.custom_call @triton_kernel_call_ffi(%arg0, %arg1) {mhlo.backend_config = {opaque = "x\9C\ADY\DDr\DB6\16n:\D9\0B\F1*\97\BD\C4f\EBY;\95i\02$%Ju2q\DB\B4\E9\8C\D3t\D2l\BB\B3\1D\0F\87\12!\85\1B\8ATI(\95\EA\F1Cu\F6i\F6\15\F6)\F6\00 )\82?2M\C7\17\B6\85\83\EF;\DF988\00E\ED\BF/\B5\FF\BC\D4\B4t\EE\85\D4w=\DF\7F\F4\F0\F1\9F\7F?;\D3\CE\CE\D0w4\A2\89\C7\A8\8Ff;ty\F9\F3+\F4\C3\CF?\BE\FD'\FA\CA\9B\BF?}\11\F90G\D3\F4\0F4I\838B\8E\EEh:\F3\92%e(]\B9\13\C3\D3t\E0Kh\9A\BAi\F0\07E#K\D3\06@\AB/\C3x\16\0E\F6.\91\F2\033NO\D1Wt\19Dh\B1\89\E6\8C\93\EF'k\A8\E3\0F\F0</\C1\F4\0FA\1A\CCB\8At\1A\B1dWb<\D6\06\FA\DAK\BC\15\D27#\0B\E9k\96H\8D^\88t/\0C\96\11\C2\A5\E9\AE\98\EB\1A\C3^0\\\86\99\A4>\81\94&,\9A&\98\FD\1C[\FD`v?\D8H;\D1\F4\84\FE\16\B1\C0G\988\DA5\D0$t\09\F8\04\EAip\B4>\B7\9E}\99\8F\CD \CE\C1Qr\8EIi\0C\9C\C1\98\7F\EE\88\B10\9E\0F02md\1C\\\F1eV\B2\EE\BF\BD\AD\CB\92\80\C5\91\BE\DEMM{jh\9F_\BA./(w\C6k\CB\98~\1CV\BEQ\8Ef3\9D\F3\85\BELU!\DE\1A\A2_\EB\95s\F5e\C3T\BBi*\86\A9\\6[\AD\CBz\C7\08\DB}\F4\8E\A7\D8\D6\06\AB\F8\83(=\F0\0A\FA\8E\E6\CC\0B|}[J\B2\83\F0\A8\0F\BD3\C5#m\90\BE\0B\F3\05\85\98\84\0F[\09X\DAFM\F1\92\AB\86\99\E3\A6\99\E6\95\22\D8l_\C0\83\82MC\C9\87\03\82Y\96\0D/\F2s\05\13\1E\07\D8L\DC\B4r\8D\91XW\1F-\A1q\92\EB\C0\06\17\22\B2:)\D1Oz\D2O\E4zQ\B6\D6C\A6\A7\C2\C7\1Asv\E9h\B4\F7a\19\88\E0\1E>,cJ0\A4x\13\EA\BF\07>\CD\9C$\FE8\F7b\F1L\FB\BE\9Ef\C9\14\EE\F9\BE\E1\93\14\FF\D8\EC\E7\1F\9B\E2\D4\11\9B\1E\05Q\18D\14y\E9\EAcQ\E7\D5\03\E1\0C\91\B15@\F3s\C8\22\822\91]R,\DE5\B7\A3\1B\A8\14\1E\18F_@\C7\81\0A\11\CAh\E47\EA\C2=S\8EE\CA\CBI%\22\9Dv-\A9\B8g\E4\F8\F6\A4\DE\8Fz\9FTrKRI\91T\D2)\A9\04a\A7\8F.2\C5\8E\9ATS\A4sTK*A \AD\97\07\93h\83\C5\CA\D3\93H\9C\FC\E0D\F8\10{E,!V\DCLZ\BD\1Cv3Qz\1B\C6Ys\9B\F0\ED.\9A\01\FD-3\AE\85\7F>\C3\C8\1Ab~zs9\C2\BA\E6\9A\1A+\01\16\0Cn/\AC\BC`b\9DL\B9NC\B1|&\BA9\BC`p6\B7\1Fu\87\CFf8\EA\12\CA\8A\03\14O\F77\00p\06\E7i;o\CD\0B\DCH\E1\C2[\DCG\B5\1B\10\B8\08B\0A\0A\1F3\9A\B2\F4l\ED\A5)M\CF\A4\82\B3fU\8F\01\95R\C10\D0}:\DB,]o6K\E8\07mp\AD\E938&\BA\A9\B9\10\A0\C0\13W\E3\AFc\9FJ\F0\B8\13\F8\9B_\DC\B7\17\DF\B9\F3x\B5\86\00\DCM\140\01?p\05\AA\C0\BF~\F9\FD\E57o^\FC\E0F\B1@\9A\9D\1D_\BCu\D7I\ECo\E64\11\C8\F6\ADXE~\FB\FA\CD+7\85LFK\19\EC\81\EA\AF\F9\0C\BDh\B9\F1\962M\07\CA\A9\C9\A7\EF1\8F\C80;\03\C1e\E4\AD\E8}Cl?\D4\EB\FER\B6bn\18\A4r-; \AB1Z\02H\EE\B2\94\BC\84\\?\B8\EFRv,\BC\17\AF_\1D\E3\93\BB\22\C8\9D\11\E6\896\B8\A9o\D4 Z\C4r\9BB#s\DA;|\89\ED\92FK\F6\0E\C5\0B\F4\8F|\93\DD\8E\CB\B2t\F1\E6[\94?YG\9B\D5,\DB0\86\F4\AF4\8FV\96\D7\8B\05\F4s\F4}\C4\E2\ACe\E8\E8'\19\D5]\96\ECB>\C4\A3\9F\F8C\FC1t\F9\D9\0EZ\DE\C9\DD\1B\16\FA\15_\C1i>\9B\1A[k\D6\DA\87p\87\BAo\EE&\18\CB\22\C6\86\9D3e\7Fq\F6\D7(\92x\87\A5\A8u\10#\F3r{C\A8\B7\03l\A8Z\F6\9F\A5\F6\C9X\95\9E\99'YD\C6H\99E\0C\C5Z\C4\DB-\0FV>L26\DCPc\E2D\BE-<\B5\FBX\BD\9B\08\C6\93\8A\D2<\92q\C6\\\996R\86\0D9\DB\96\E1\D9\F2\93\95\A7\AE\8D\1A\AB\D4j\E21\AE\E6\D0V\A7\13u\D9l\F5o\85\A5\EA\A4s\C16u\A4\957\E7Mip\0D\C6'\FFC\7F\83\0B\13z\8A\E0\F7\F1]\AE$\E2\A6t\A2q4\DC\D83\FC\D6]\B3\E4\F11\1F<\C9lVn\DB\D5mvn\8B\D4\F1Q>.\1E\8FU\DB8\B7\C5\0A\DF\0A\F6sH\D15\\\CE\18\D3\F9}\0B\AD7\B30\98\97\BF\CC;>\12\02\A7\E8\AF0\07\FE9\87\EB\F23t\0D\1F\FC@|\CD\17\84\01\DB\81\03P0E\81In\1A\C2\82\CB\EB\AE\17\CB\AE\C2\12\09c%\010.\F4N\D1\22\B7)I\00{\DC\CB\BB\92\AE\13\E41X\CA\D9\06\16\1C]Gqv\81~\8A\16^\98\D2\1B\91F\04\97\F4\C0\871\A0^R\C6[\E6\92\7FC\01c[\B4\97.\16\C59\91\80\18N\0E@xP%\EF\F4y\1C\A5\CC\8B\18\7F\AE\A9\CC\9F\94\E6\BBF\81\A0[\96\06\D2\AD\04\C0\01\14\C0cS3\0EWq\C2{\07 )\80\ABM\18\E4*\86\05\ED\F4\00\D6\AC\87G\B05\B6\1Cs\04\ED\EB\10\D2\AA#O\0B\A8s\10j\EF\A1p\E8\A14\A4\B9X2,t\1D\22\18U\08\96u\02\EB \C1\B8 \80\A7\B9<e\F6\B0\A0\07,n\81:\95l\C3\EA\0E\95\B5j\86Md\E5\AD\BC\F7\D4M\E0\14\85\BD\CD\1F\F5\9E\16\D54\84\87D/a0b\E4\85>E\8CFi\9C\9C\9Bd\1B\F0m\91S\13C)\1CCr\A7\EB\D0c\85J)\E6\F4Y\1BG\A5\F8\1A\AB\8FS\D7D@-\96FFV+%i\A4\9C\DC\83q_\AD\D0\FD\0A\8Dx\B8\F78\ED\C8\D4P\BD\1D\EB\1E\DB\FD\0B\1F\8F\EAX\1F\F4\D2\F3\BD\F3g\9Dc\18\B7n#l\0E\F7\1E\BB\D29m\DAJ\D1u\177i\DD\A2%qNW:b4mX<\1E\EE\DD)L\B8\95\087\96P\D1-\1B\AA\B3F\B4\F2\D2\F7\CA\8E\8Bn\DDl\04\97\B0.!\D5\95cE\FF\E2\C5,\1C\B4o\FE\9Ck\AB\88\10\87:\AA\9C\A3\8A\A2\B2\A5DGr:\97\98\92\112\C3\B9\8E\B6{U\8A\1C\85h\D8\AA\B3DlI\E20\F6|\E9h\B8OE+\F3\9E\C9\CC\98vJ\C4\BB\BE\11[9\9DKl5\E2\DD\FD\22.\11\8F\CA\11sGw\8B\D8\CE\98*\AD\BDg\C4y\E5b5Z\E3^\D1\E6\A4D\91(nwH^\F7\14e\0Be/\E5\07\98Y>M\17@6\CC\B27\BD\15j\95w\F2B\96\D9\903\B6C\B3\9D\C3\D5\B28\A1\90\10\00XwZ\19L\0A\8E\84\B2M\12\15\16>~S\FAT\FE_ {=\95\F0w\95\12Oz\E1\F9\BB3\897{\E2MC\E2\AD^\F8I\E1\DF\EE\83\17/\CE$~\D4\13\8FM\89\1F\F7\C2\E3\C2\BF\D3\13\9F\FB\9F\F4\C2\F3\17.Y\FD\18=\09\CCl\01p\AF\0A\14/d2\82^%\C8_\B5d\F8\22\85pi\96\CFn8\7F\0E.\B2\C3\1B\92\B4\91\CCF\8C\BA\CD\CCmEL|\0BK\9B\95\DB\0A\B9[i\B0s\83Y1\8Cr\C3\FE\E9^\1A\C6\B9\C1\AE\18\1C0\18\FF\FA\F1\C1\A3\87\9F=@\0F\9E<\D4>}\F4(\FB\FD\E9g\FE\93\BF<\FD\E4\13\F4\\\0E\FC\1FPM\AC\A4"}} : (tensor<100xf32>, tensor<100xf32>) -> tensor<100xf32>
    return %0 : tensor<100xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   custom_call
// CHECK:       %[[X:.+]] = stablehlo.pad %arg0, {{.*}} -> tensor<101xf32>
// CHECK:       %[[Y:.+]] = stablehlo.pad %arg1, {{.*}} -> tensor<101xf32>
// CHECK:       %[[ZEROS:.+]] = stablehlo.constant dense<0.000000e+00> : tensor<100xf32>
// CHECK:       %[[O:.+]] = stablehlo.pad %[[ZEROS]], {{.*}} -> tensor<101xf32>
// CHECK:       %[[GRID:.+]]:4 = stablehlo.while(%[[I:.+]] = %{{.+}}, %[[XB:.+]] = %[[X]], %[[YB:.+]] = %[[Y]], %[[OB:.+]] = %[[O]])
// CHECK:       %[[FOUR:.+]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK-NEXT:  stablehlo.compare LT, %[[I]], %[[FOUR]]
// CHECK:       %[[PID:.+]] = stablehlo.remainder %[[I]], {{.*}}
// CHECK:       %[[N:.+]] = stablehlo.constant dense<100> : tensor<i32>
// CHECK:       %[[SCALE:.+]] = stablehlo.constant dense<2.500000e+00> : tensor<f32>
// CHECK:       %[[BLOCK:.+]] = stablehlo.constant dense<32> : tensor<i32>
// CHECK:       stablehlo.multiply %[[PID]], %[[BLOCK]] : tensor<i32>
// CHECK:       %[[IN_RANGE:.+]] = stablehlo.compare LT, {{.*}} : (tensor<32xi32>, tensor<32xi32>) -> tensor<32xi1>
// CHECK:       %[[XV:.+]] = "stablehlo.gather"(%[[XB]], {{.*}}) {{.*}} -> tensor<32xf32>
// CHECK:       %[[XM:.+]] = stablehlo.select %[[IN_RANGE]], %[[XV]], {{.*}}
// CHECK:       %[[YV:.+]] = "stablehlo.gather"(%[[YB]], {{.*}}) {{.*}} -> tensor<32xf32>
// CHECK:       %[[YM:.+]] = stablehlo.select %[[IN_RANGE]], %[[YV]], {{.*}}
// CHECK:       %[[SCALES:.+]] = stablehlo.broadcast_in_dim %[[SCALE]]
// CHECK-NEXT:  %[[SY:.+]] = stablehlo.multiply %[[SCALES]], %[[YM]]
// CHECK-NEXT:  %[[SUM:.+]] = stablehlo.add %[[XM]], %[[SY]]
// CHECK:       %[[STORED:.+]] = "stablehlo.scatter"(%[[OB]], {{.*}}, %[[SUM]])
// CHECK:       stablehlo.return {{.*}}, %[[XB]], %[[YB]], %[[STORED]]
// CHECK:       %[[OUT:.+]] = stablehlo.slice %[[GRID]]#3 [0:100]
// CHECK-NEXT:  return %[[OUT]]

// -----

// Refused: a Pallas Mosaic GPU kernel (its body is already lowered for the CUDA plug-in),
// with the routes that work.
module {
  func.func @main(%arg0: tensor<128xf32>) -> tensor<128xf32> {
    %0 = stablehlo.custom_call @mosaic_gpu_v2(%arg0) {api_version = 4 : i32} : (tensor<128xf32>) -> tensor<128xf32>
    return %0 : tensor<128xf32>
  }
}
// ERROR: Pallas Mosaic GPU kernel
// ERROR: (mosaic_gpu_v2): its body is a GPU module already lowered for the CUDA plug-in
// ERROR: register the kernel's reference implementation as a plug-in
// ERROR: re-dump the program with Pallas' Triton backend
