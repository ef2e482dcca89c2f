"""Give a backend custom-call a CPU meaning (the public face of passes.lib.plugins):

    from converter.custom_calls import register

    @register("my_kernel")
    def my_kernel(x, y, attrs):        # the call's operands as arrays, then its attributes
        return x * attrs.config["scale"] + y

`register(target, impl, override=False, layouts="kernel")`, `register_rewrite` for a rewrite
over the MLIR module, `CallAttributes` for what `attrs` holds.  On the command line:
`--custom-calls FILE.py`, `--custom-call TARGET=pkg.module:function`; installed packages
declare theirs in the entry-point group `hlo_roundtrip.custom_calls`.

Host callbacks with results (jax.pure_callback, io_callback): `register_callback(KEY, fn)`,
KEY the call's op_name or `file.py:LINE`, `fn(*operands)` a JAX function (`--callback KEY=pkg.module:function`).
"""

from passes.lib.callback_plugins import register_callback, unregister_callback  # noqa: F401
from passes.lib.plugins import (  # noqa: F401
    ENTRY_POINT_GROUP,
    CallAttributes,
    PluginError,
    load_file,
    register,
    register_rewrite,
    register_spec,
    rewrite,
    unregister,
)

__all__ = ["ENTRY_POINT_GROUP", "CallAttributes", "PluginError", "load_file", "register", "register_callback",
           "register_rewrite", "register_spec", "rewrite", "unregister", "unregister_callback"]
