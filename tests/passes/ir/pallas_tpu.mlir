// PASSES: pallas-tpu
// pallas-tpu rewrites Pallas TPU kernels (tpu_custom_call: a Mosaic kernel, serialized in the
// backend_config) as Pallas runs them: one stablehlo.while over the grid (iteration_bounds,
// last axis fastest); each step slices every input window at its block index x
// window_bounds, runs the kernel body (Mosaic ops translated to StableHLO) on the windows,
// and writes the output windows back into loop-carried outputs.  A kernel it cannot read or
// translate is refused, naming the kernel.

// tests/passes/pallas/kernels.py add_tanh: o = tanh(x + y) over a (2, 2) grid of 8x128
// blocks of 16x256 arrays.  The kernel as jax's Pallas wrote it (body kept as is).
module {
  func.func @main(%arg0: tensor<16x256xf32>, %arg1: tensor<16x256xf32>) -> tensor<16x256xf32> {
    %0 = stablehlo.custom_call @tpu_custom_call(%arg0, %arg1) {backend_config = "{\22flag_configs\22:[],\22scoped_memory_configs\22:[],\22custom_call_config\22:{\22body\22:\22TUzvUgFNTElSMjMuMC4wZ2l0AAEjCQEDBQcBAwkDDwsNDxETFRcD4bsTAbMHEwsLCwsPCwtTCxMPDw8PCwsLCwsLEw8PDxMLD0sLEwuFC1MLCwsLCxcbCxsLGwsbGxsPDw8PGw8PDxsLDwsPCw8bDwsPCw8PCxsPGwsPCw8bIwsPC1MLEwUHkWFNBwNZARMPByMbDwcjHwsCCggfAwMnaQUZBRsFHQUfHZudBSEFIyMJBSEIAAAAAAAAAIAAAAAAAAAADQ8DAydnHSlrHQdvHSlxEQkBBSUFJwUpBSsFLQUvAwN5uR0HhRWRlx0HowMDNzkFMREJPQMRPT8JQUVHSR9LHwtNT7dRUwUzAQWzsw0NYWZmaW5lX21hcDwoZDAsIGQxKSAtPiAoZDAsIGQxKT4ABTUjCQUhAgAAAAAAAAACAAAAAAAAAAU3BTkFOwU9BT8BB1VZXQMFD1cREwkhAwUPWxETCSMDBQ9fERMJJQMFCRULIQMFCRULIwMFCRULJREBAREDAR0rbRUbGy0FB1M9UR0rcxUbdR0Hdy0FB1NXawVBHX1/BUMdgYMFRRUvLy0FB1M9ax2JiwVHHY2PBUkVMTEdk5UFSy0FB2sXLR0HmS0FB1MrbQVNHZ+hBU8VMzMtBQdTESUDB6epq62vsQVREREABVMjAQkhAQAAAAEAAAACAAAAAAAAAAVVIwEBASN0cHUuZGltZW5zaW9uX3NlbWFudGljczxhcmJpdHJhcnk+ACN0cHUubWVtb3J5X3NwYWNlPHZtZW0+ACN0cHUuY29yZV90eXBlPHRjPgAjYXJpdGguZmFzdG1hdGg8bm9uZT4AAQICAxe1BSECBAtDJwUhAgQLAQIECwULAQEFBQUBBQUBAQUBAQEJBA4DBQERATUHAwERBREBOwcDITcLAQEBAQUBBQEFAQMDGQMDAwMDGQMDAwkGGQMHBwULDQMDHQMDAwMDHQMDAwkGHQMHBwcREwsHey0DBwUPFQ0Hhy0DBwMXAwMNAwMDAwMNAwMDCQYNAwcHCRsdDwUNpQkZCRsdBwABBREBYQcDBwsFAQEBAQMDARcDAQcEAQUBAwURAWMHAwcLBQEBAQEDAwEXAwEHBAEFAQMFEQFlBwMHCwUBAQEBAwMBFwMBBwQBBQEDBgMBBQEAughXESkJFQ0TFQ0RCxMdHQ8jISMpLRELDRkZGR0lEx0zPyMVFxkZFR8PDQkdEWJ1aWx0aW4Ac3RhYmxlX21vc2FpYwB0cHUAYXJpdGgAbW9kdWxlAGFyaXRoLmNvbnN0YW50AGZ1bmMuZnVuYwBmdW5jLnJldHVybgB2ZWN0b3IubG9hZABhcml0aC5hZGRmAG1hdGgudGFuaAB0cHUudmVjdG9yX3N0b3JlAHRlc3RzL3Bhc3Nlcy9wYWxsYXMva2VybmVscy5weQBhZGRfdGFuaC48bG9jYWxzPi5rZXJuZWwAZnVuY3Rpb25fdHlwZQBzeW1fbmFtZQB0cmFuc2Zvcm1faW5kaWNlcwB3aW5kb3dfYm91bmRzAHRyYW5zZm9ybV8wAHRyYW5zZm9ybV8xAHRyYW5zZm9ybV8yAHZhbHVlAGdldDoAZ2V0L2dldABzdGFibGVfbW9zYWljLnZlcnNpb24AZGltZW5zaW9uX3NlbWFudGljcwBpdGVyYXRpb25fYm91bmRzAHNjYWxhcl9wcmVmZXRjaABzY3JhdGNoX29wZXJhbmRzAGtlcm5lbAB0cHUuY29yZV90eXBlAHdpbmRvd19wYXJhbXMAZmFzdG1hdGgAYWRkOgBhZGQvYWRkAHRhbmg6AHRhbmgvdGFuaABqbnBfdGFuaABzd2FwOgBzd2FwL3N3YXAAYWRkAG9wZXJhbmRTZWdtZW50U2l6ZXMAc3RyaWRlcwA=\22,\22needs_layout_passes\22:true,\22allow_input_fusion\22:[],\22serialization_format\22:\221\22,\22output_memory_colors\22:[],\22output_memory_space_colors\22:[],\22input_memory_space_colors\22:[]},\22used_scoped_memory_configs\22:[{\22memory_space\22:\221\22,\22offset\22:\220\22,\22size\22:\2224576\22}],\22retry_config\22:{\22retry_count\22:\220\22},\22aliasing_operands\22:{\22lists\22:[]}}"} : (tensor<16x256xf32>, tensor<16x256xf32>) -> tensor<16x256xf32>
    return %0 : tensor<16x256xf32>
  }
}
// CHECK-LABEL: func.func @main
// CHECK-NOT:   tpu_custom_call
// CHECK:       %[[ZEROS:.+]] = stablehlo.constant dense<0.000000e+00> : tensor<16x256xf32>
// CHECK:       %[[GRID:.+]]:4 = stablehlo.while({{.*}}, %[[X:.+]] = %arg0, %[[Y:.+]] = %arg1, %[[OUT:.+]] = %[[ZEROS]])
// CHECK:       stablehlo.compare LT
// CHECK:       %[[XW:.+]] = stablehlo.dynamic_slice %[[X]], {{.*}} sizes = [8, 128]
// CHECK:       %[[YW:.+]] = stablehlo.dynamic_slice %[[Y]], {{.*}} sizes = [8, 128]
// CHECK:       %[[OW:.+]] = stablehlo.dynamic_slice %[[OUT]], %[[OROW:[^,]+]], %[[OCOL:[^,]+]], sizes = [8, 128]
// CHECK:       %[[SUM:.+]] = stablehlo.add {{.*}} : tensor<8x128xf32>
// CHECK-NEXT:  %[[T:.+]] = stablehlo.tanh %[[SUM]] : tensor<8x128xf32>
// CHECK:       %[[BLOCK:.+]] = stablehlo.dynamic_update_slice %[[OW]], %[[T]],
// CHECK-NEXT:  %[[WRITTEN:.+]] = stablehlo.dynamic_update_slice %[[OUT]], %[[BLOCK]], %[[OROW]], %[[OCOL]]
// CHECK:       stablehlo.return {{.*}}, %[[WRITTEN]]
// CHECK:       return %[[GRID]]#3

// -----

// Refused: the same kernel (named "kernel"; three windows: x, y, o) called with one input.
module {
  func.func @main(%arg0: tensor<16x256xf32>) -> tensor<16x256xf32> {
    %0 = stablehlo.custom_call @tpu_custom_call(%arg0) {backend_config = "{\22flag_configs\22:[],\22scoped_memory_configs\22:[],\22custom_call_config\22:{\22body\22:\22TUzvUgFNTElSMjMuMC4wZ2l0AAEjCQEDBQcBAwkDDwsNDxETFRcD4bsTAbMHEwsLCwsPCwtTCxMPDw8PCwsLCwsLEw8PDxMLD0sLEwuFC1MLCwsLCxcbCxsLGwsbGxsPDw8PGw8PDxsLDwsPCw8bDwsPCw8PCxsPGwsPCw8bIwsPC1MLEwUHkWFNBwNZARMPByMbDwcjHwsCCggfAwMnaQUZBRsFHQUfHZudBSEFIyMJBSEIAAAAAAAAAIAAAAAAAAAADQ8DAydnHSlrHQdvHSlxEQkBBSUFJwUpBSsFLQUvAwN5uR0HhRWRlx0HowMDNzkFMREJPQMRPT8JQUVHSR9LHwtNT7dRUwUzAQWzsw0NYWZmaW5lX21hcDwoZDAsIGQxKSAtPiAoZDAsIGQxKT4ABTUjCQUhAgAAAAAAAAACAAAAAAAAAAU3BTkFOwU9BT8BB1VZXQMFD1cREwkhAwUPWxETCSMDBQ9fERMJJQMFCRULIQMFCRULIwMFCRULJREBAREDAR0rbRUbGy0FB1M9UR0rcxUbdR0Hdy0FB1NXawVBHX1/BUMdgYMFRRUvLy0FB1M9ax2JiwVHHY2PBUkVMTEdk5UFSy0FB2sXLR0HmS0FB1MrbQVNHZ+hBU8VMzMtBQdTESUDB6epq62vsQVREREABVMjAQkhAQAAAAEAAAACAAAAAAAAAAVVIwEBASN0cHUuZGltZW5zaW9uX3NlbWFudGljczxhcmJpdHJhcnk+ACN0cHUubWVtb3J5X3NwYWNlPHZtZW0+ACN0cHUuY29yZV90eXBlPHRjPgAjYXJpdGguZmFzdG1hdGg8bm9uZT4AAQICAxe1BSECBAtDJwUhAgQLAQIECwULAQEFBQUBBQUBAQUBAQEJBA4DBQERATUHAwERBREBOwcDITcLAQEBAQUBBQEFAQMDGQMDAwMDGQMDAwkGGQMHBwULDQMDHQMDAwMDHQMDAwkGHQMHBwcREwsHey0DBwUPFQ0Hhy0DBwMXAwMNAwMDAwMNAwMDCQYNAwcHCRsdDwUNpQkZCRsdBwABBREBYQcDBwsFAQEBAQMDARcDAQcEAQUBAwURAWMHAwcLBQEBAQEDAwEXAwEHBAEFAQMFEQFlBwMHCwUBAQEBAwMBFwMBBwQBBQEDBgMBBQEAughXESkJFQ0TFQ0RCxMdHQ8jISMpLRELDRkZGR0lEx0zPyMVFxkZFR8PDQkdEWJ1aWx0aW4Ac3RhYmxlX21vc2FpYwB0cHUAYXJpdGgAbW9kdWxlAGFyaXRoLmNvbnN0YW50AGZ1bmMuZnVuYwBmdW5jLnJldHVybgB2ZWN0b3IubG9hZABhcml0aC5hZGRmAG1hdGgudGFuaAB0cHUudmVjdG9yX3N0b3JlAHRlc3RzL3Bhc3Nlcy9wYWxsYXMva2VybmVscy5weQBhZGRfdGFuaC48bG9jYWxzPi5rZXJuZWwAZnVuY3Rpb25fdHlwZQBzeW1fbmFtZQB0cmFuc2Zvcm1faW5kaWNlcwB3aW5kb3dfYm91bmRzAHRyYW5zZm9ybV8wAHRyYW5zZm9ybV8xAHRyYW5zZm9ybV8yAHZhbHVlAGdldDoAZ2V0L2dldABzdGFibGVfbW9zYWljLnZlcnNpb24AZGltZW5zaW9uX3NlbWFudGljcwBpdGVyYXRpb25fYm91bmRzAHNjYWxhcl9wcmVmZXRjaABzY3JhdGNoX29wZXJhbmRzAGtlcm5lbAB0cHUuY29yZV90eXBlAHdpbmRvd19wYXJhbXMAZmFzdG1hdGgAYWRkOgBhZGQvYWRkAHRhbmg6AHRhbmgvdGFuaABqbnBfdGFuaABzd2FwOgBzd2FwL3N3YXAAYWRkAG9wZXJhbmRTZWdtZW50U2l6ZXMAc3RyaWRlcwA=\22,\22needs_layout_passes\22:true,\22allow_input_fusion\22:[],\22serialization_format\22:\221\22,\22output_memory_colors\22:[],\22output_memory_space_colors\22:[],\22input_memory_space_colors\22:[]},\22used_scoped_memory_configs\22:[{\22memory_space\22:\221\22,\22offset\22:\220\22,\22size\22:\2224576\22}],\22retry_config\22:{\22retry_count\22:\220\22},\22aliasing_operands\22:{\22lists\22:[]}}"} : (tensor<16x256xf32>) -> tensor<16x256xf32>
    return %0 : tensor<16x256xf32>
  }
}
// ERROR: tpu_custom_call
// ERROR: kernel kernel: 3 window parameters for 1 inputs and 1 outputs
