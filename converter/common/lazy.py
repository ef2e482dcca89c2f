"""Packages that name what they export and import it on first use (PEP 562), so that
importing one light module of a package does not load its heavy siblings."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """The package's module-level `__getattr__`: `exports` maps each exported name to the
    module defining it, imported when the name is first read."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        return getattr(importlib.import_module(module), name)

    return __getattr__
