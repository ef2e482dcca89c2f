"""MLIR layer: the context with the dialects, op builders, module attributes, serialization."""
