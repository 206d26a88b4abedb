"""Lowerings, one small function per aten op (or overload family), grouped by family.

Each is registered for the aten op(s) it implements with core/registry.py's `@lowering`; importing this
package registers them all, and `REGISTRY` here is the filled registry (aten op -> Lowering). A lowering
imports only the core (registry, layout policy, capture hooks, generator) and the device API (device/):
never a feature or a tool."""
from . import (  # noqa: F401
    activation,
    attention,
    batchnorm,
    complex,
    conv,
    backward,
    dropout,
    elementwise,
    embedding,
    factory,
    fft,
    fused,
    indexing,
    loss,
    matmul,
    math,
    normalization,
    padding,
    pooling,
    reduction,
    sampling,
    scatter,
    search,
    upsample,
    views,
)
from ..core.registry import REGISTRY  # noqa: E402,F401  (filled by the imports above)
