"""Meanings for host callbacks with results (`jax.pure_callback`, `io_callback`): the
Python function lived in the process that made the dump, so only the user can give it
back.  A callback plug-in is a JAX function of the callback's array operands (tokens and
descriptors left out) returning its array results — often the very function JAX was
given, when that is written with jax.numpy — keyed by the call's op_name
(`jit(f)/pure_callback`) or its source location (`model.py:42`, matched against the end of
the dump's `source_file:source_line`).  The host-callbacks pass lowers it with JAX and
inlines it, as custom-call plug-ins are (passes.lib.plugins).

From Python `register_callback(KEY, fn)`; on the command line `--callback KEY=pkg.module:function`.
"""

from __future__ import annotations

import re
from typing import Callable

from passes.lib.plugins import Plugin, PluginError, _import_object


# key (op_name or file:line) -> plug-in (a custom-call Plugin whose `target` is the key)
CALLBACK_PLUGINS: dict[str, Plugin] = {}


def register_callback(key: str, fn: Callable | None = None) -> Callable:
    """Give the host callback named `key` (its op_name, or `file.py:LINE` of its source)
    a CPU meaning: `fn(*operands)`, a JAX function returning its results.  Usable as a
    decorator."""
    def add(f: Callable) -> Callable:
        _add(Plugin(key, f"{getattr(f, '__module__', '?')}:{getattr(f, '__qualname__', repr(f))}",
                            lambda: f, f))
        return f

    return add if fn is None else add(fn)


def register_callback_spec(key: str, spec: str) -> None:
    """`--callback KEY=pkg.module:function`: imported when a call first needs it."""
    if not re.fullmatch(r"[\w.]+:[\w.]+", spec):
        raise PluginError(f"--callback {key}={spec}: '{spec}' is not of the form pkg.module:function")
    _add(Plugin(key, spec, lambda: _import_object(spec)))


def unregister_callback(key: str) -> None:
    CALLBACK_PLUGINS.pop(key, None)


def _add(plugin: Plugin) -> None:
    if not plugin.target.strip():
        raise PluginError(f"callback plug-in {plugin.source}: an empty key (give the op_name or file.py:LINE)")
    CALLBACK_PLUGINS[plugin.target] = plugin


def find_callback_plugin(op_name: str, source: str) -> Plugin | None:
    """The plug-in for a call with this op_name and `file:line` source: by op_name first,
    then by source location (a key `model.py:42` matches `.../pkg/model.py:42`)."""
    if op_name and op_name in CALLBACK_PLUGINS:
        return CALLBACK_PLUGINS[op_name]
    if source:
        for key, plugin in CALLBACK_PLUGINS.items():
            if re.fullmatch(r".+:\d+", key) and (source == key or source.endswith("/" + key)):
                return plugin
    return None
