"""Lowerings, one small function per aten op (or overload family), grouped by family.

Importing this package registers them all (registry.REGISTRY)."""
from . import (  # noqa: F401
    attention,
    elementwise,
    embedding,
    factory,
    indexing,
    matmul,
    math,
    normalization,
    padding,
    reduction,
    scatter,
    search,
    views,
)
