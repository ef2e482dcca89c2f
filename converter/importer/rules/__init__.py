"""Import rules, one module per family of opcodes; importing this package fills
`converter.importer.registry.RULES` (`hlo-roundtrip rules` lists each opcode's file)."""

from converter.importer.rules import (  # noqa: F401
    async_ops,
    batchnorm,
    collectives,
    constants,
    control_flow,
    copies,
    custom_call,
    elementwise,
    indexing,
    linalg,
    random,
    reductions,
    scan,
    shapes,
    sorting,
    tuples,
)
