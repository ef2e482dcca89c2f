"""How many CPU devices JAX starts with in this process: conversion reserves a module's
device count as soon as it knows it (before a pass or plug-in can start JAX's CPU backend),
without importing JAX or numpy when nothing else needs them."""

from __future__ import annotations

from typing import Callable

# The most CPU devices a module may ask for: jaxlib starts threads per device, and above
# about 2000 thread creation fails and XLA aborts the whole process (SIGABRT).
MAX_CPU_DEVICES = 1024


# Set by a run over several processes: joins the process group (which fixes this process's
# share of CPU devices) as soon as conversion knows the module's device count.
device_setup: Callable[[int], None] | None = None


def reserve_cpu_devices(n: int) -> None:
    """Make JAX's CPU backend have at least `n` devices whenever it starts in this process,
    without starting it.  Conversion calls this as soon as it knows the module's device
    count: a plug-in's JAX lowering, a lapack helper or the custom-call policy start JAX's
    CPU backend during the passes, and JAX fixes the device count when it starts (a run
    would then find 1 device for a module of n).  Before JAX is imported, its
    `JAX_NUM_CPU_DEVICES` variable (the default of `jax_num_cpu_devices`) is set, so that a
    conversion that never needs JAX does not pay for importing it."""
    import os
    import sys

    if device_setup is not None:
        device_setup(n)
        return
    if n <= 1 or n > MAX_CPU_DEVICES:  # above the maximum, compile() refuses by name
        return
    if "jax" not in sys.modules:
        current = os.environ.get("JAX_NUM_CPU_DEVICES", "")
        if not current.lstrip("-").isdigit() or int(current) < n:
            os.environ["JAX_NUM_CPU_DEVICES"] = str(n)
        return
    import jax
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        current = jax.config.jax_num_cpu_devices
        if current is None or current < n:
            jax.config.update("jax_num_cpu_devices", n)
