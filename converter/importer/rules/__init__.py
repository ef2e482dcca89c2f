"""Import rules, one module per family of opcodes; importing this package fills
`converter.importer.registry.RULES`."""

from converter.importer.rules import (  # noqa: F401
    async_ops,
    batchnorm,
    collectives,
    custom_call,
    elementwise,
    linalg,
    random,
    reductions,
    shapes,
    structure,
)
