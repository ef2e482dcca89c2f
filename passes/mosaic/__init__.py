"""Reading and translating Mosaic TPU kernels (the bodies of Pallas `tpu_custom_call`s).

`kernel` decodes and parses a kernel into its own MLIR context; `translate` runs its body
op by op into StableHLO on tensors (memory windows become SSA state), with the op
families in `arith`, `vector` and `memory` registered into one table when `translate` is
imported (registering the passes that read kernels does not load them).
"""
