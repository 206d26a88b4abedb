"""Matrix products: linear (bias fused, weight used as stored: ttnn.linear transpose_b), addmm, mm, bmm, matmul.

Inference keeps `linear` and `matmul` whole (see _registration.KEEP_WHOLE), so a Linear layer is one
ttnn.linear with no transposed copy of its weight. With autograd active they decompose (t + addmm, or
view + bmm) and those ops are lowered here too.
"""
from __future__ import annotations

import torch

from .. import device_api as api
from .. import layout as policy
from ..layout import TILE
from ..registry import lowering
from .views import reshape

aten = torch.ops.aten


def _vector_as_matrix(x, front: bool):
    """matmul's 1-D rule: a vector is a 1-row (first operand) or 1-column (second operand) matrix."""
    return reshape(x, (1, x.shape[0]) if front else (x.shape[0], 1))


def matmul_handles(a, b, transpose_b: bool = False, bias=None):
    squeeze_front = squeeze_back = False
    if len(a.shape) == 1:
        a, squeeze_front = _vector_as_matrix(a, True), True
    if len(b.shape) == 1:
        b, squeeze_back = _vector_as_matrix(b, transpose_b), True
    k_a, k_b = a.shape[-1], b.shape[-1 if transpose_b else -2]
    if k_a != k_b:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, a.shape))} and "
                           f"{'x'.join(map(str, b.shape))})")
    ckc = policy.compute_config("matmul", a.index)
    if bias is None and not transpose_b:
        out = api.run("matmul", a, b, compute_kernel_config=ckc)
    else:
        out = api.run("linear", a, b, bias=bias, transpose_b=transpose_b, compute_kernel_config=ckc)
    if squeeze_front or squeeze_back:
        shape = list(out.shape)
        if squeeze_back:
            shape.pop(-1)
        if squeeze_front:
            shape.pop(-1 if squeeze_back else -2)
        out = reshape(out, shape)
    return out


@lowering(aten.linear.default, ttnn=["linear"], needs=TILE, notes="bias fused; the weight is not transposed")
def linear(x, weight, bias=None):
    return matmul_handles(x, weight, transpose_b=True, bias=bias)


@lowering(aten.addmm.default, ttnn=["linear"], needs=TILE, notes="beta/alpha other than 1 are scaled on device")
def addmm(bias, a, b, *, beta=1, alpha=1):
    if beta != 1 or alpha != 1:
        prod = api.run("multiply", matmul_handles(a, b), float(alpha))
        return api.run("add", prod, api.run("multiply", bias, float(beta)) if beta != 1 else bias)
    return matmul_handles(a, b, bias=bias)


@lowering(aten.mm.default, aten.bmm.default, aten.matmul.default, ttnn=["matmul"], needs=TILE)
def mm(a, b):
    return matmul_handles(a, b)
