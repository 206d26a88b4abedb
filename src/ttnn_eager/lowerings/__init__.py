"""Lowerings, one small function per aten op (or overload family), grouped by family.

Importing this package registers them all (registry.REGISTRY)."""
from . import (  # noqa: F401
    activation,
    attention,
    batchnorm,
    conv,
    backward,
    dropout,
    elementwise,
    embedding,
    factory,
    indexing,
    loss,
    matmul,
    math,
    normalization,
    padding,
    pooling,
    reduction,
    scatter,
    search,
    upsample,
    views,
)
