"""Pallas GPU (Triton) kernels: reading the kernel out of a `__gpu$xla.gpu.triton` call
(kernel) and translating its body to StableHLO (translate)."""
