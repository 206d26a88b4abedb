"""Matrix products: linear (bias fused, weight used as stored: ttnn.linear transpose_b), addmm, mm, bmm, matmul,
the grouped matmul of mixture-of-experts layers (_grouped_mm), and triangular solves (linalg_solve_triangular:
gated delta-net attention's chunk system) as products of matrices.

Inference keeps `linear` and `matmul` whole (see _registration.KEEP_WHOLE), so a Linear layer is one
ttnn.linear with no transposed copy of its weight. With autograd active they decompose (t + addmm, or
view + bmm) and those ops are lowered here too.
"""
from __future__ import annotations

import builtins
import math

import torch

from ..core import layout as policy
from ..core.layout import TILE, TILE_FLOAT
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import EXACT_FLOAT32, check_broadcast
from .views import expand, reshape

aten = torch.ops.aten


def _vector_as_matrix(x, front: bool):
    """matmul's 1-D rule: a vector is a 1-row (first operand) or 1-column (second operand) matrix."""
    return reshape(x, (1, x.shape[0]) if front else (x.shape[0], 1))


def _broadcast_batch(a, b, transpose_b: bool):
    """PyTorch broadcasts matmul's batch dimensions; ttnn.matmul takes equal batch dimensions, or a second
    operand with no batch (rank 2). Anything else is expanded here to the broadcast batch shape."""
    ba, bb = tuple(a.shape[:-2]), tuple(b.shape[:-2])
    if ba == bb or not bb:
        return a, b
    if math.prod(bb) == 1 and len(bb) <= len(ba):  # the result's batch is a's: b as a plain matrix
        return a, reshape(b, b.shape[-2:])
    batch = list(torch.broadcast_shapes(ba, bb))
    return expand(a, batch + list(a.shape[-2:])), expand(b, batch + list(b.shape[-2:]))


def _as_float32(h):
    out = policy.to_float32(h)
    out.dtype = torch.float32
    return out


def _fusable_bias(bias, n: int) -> bool:
    """ttnn.linear adds a bias of one row of n features; another bias (a matrix, one value) is added after."""
    return bias.shape.numel() == n and (not bias.shape or bias.shape[-1] == n)


INTEGER_OPERAND_MAX = 1 << 10  # integers the matrix engine multiplies exactly (HiFi4: 10 significant bits of SrcA)


def _exact_integer_product(a, b, bias) -> None:
    """An integer matmul runs on the matrix engine as float32 (numerics.py): exact when every operand is within
    INTEGER_OPERAND_MAX in magnitude and every partial sum below 2**24 (inner size x |a| x |b| + |bias|), from
    known bounds or one read of the extremes. Else Unfit: the CPU's exact int64 product."""
    from .reduction import largest_magnitude
    if not a.shape.numel() or not b.shape.numel():
        return
    largest_a, largest_b = largest_magnitude(a), largest_magnitude(b)
    largest_bias = largest_magnitude(bias) if bias is not None and bias.shape.numel() and \
        not bias.dtype.is_floating_point else 0
    k = a.shape[-1]
    if builtins.max(largest_a, largest_b) > INTEGER_OPERAND_MAX or \
            k * largest_a * largest_b + largest_bias >= EXACT_FLOAT32:
        raise Unfit(f"an integer product of values up to {largest_a} and {largest_b} over {k} terms (exact on "
                    f"the matrix engine within {INTEGER_OPERAND_MAX} and sums below 2**24)")


def matmul_handles(a, b, transpose_b: bool = False, bias=None, activation=None):
    if not a.shape or not b.shape:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {len(a.shape)}D and "
                           f"{len(b.shape)}D")
    int_dtype = None
    if not a.dtype.is_floating_point or not b.dtype.is_floating_point:
        if a.dtype != b.dtype:
            raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}")
        # ttnn.matmul takes floating tensors: integers are multiplied as float32, where exact (else Unfit)
        _exact_integer_product(a, b, bias)
        int_dtype, a, b = a.dtype, _as_float32(a), _as_float32(b)
        bias = _as_float32(bias) if bias is not None else None
    squeeze_front = squeeze_back = False
    if len(a.shape) == 1:
        a, squeeze_front = _vector_as_matrix(a, True), True
    if len(b.shape) == 1:
        b, squeeze_back = _vector_as_matrix(b, transpose_b), True
    k_a, k_b = a.shape[-1], b.shape[-1 if transpose_b else -2]
    if k_a != k_b:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, a.shape))} and "
                           f"{'x'.join(map(str, b.shape))})")
    ckc = policy.compute_config("matmul" if int_dtype is None else "exact", a.index)
    a, b = _broadcast_batch(a, b, transpose_b)
    n = b.shape[-2 if transpose_b else -1]
    late_bias = None
    if bias is not None and not _fusable_bias(bias, n):
        check_broadcast(tuple(a.shape[:-1]) + (n,), tuple(bias.shape))
        bias, late_bias = None, bias
    if activation is not None and (late_bias is not None or int_dtype is not None):
        raise RuntimeError("matmul_handles: an activation is fused only after a row bias of float operands")
    parts = None if int_dtype is not None else _float32_parts(a, b)
    if parts is None:
        out = _product(a, b, transpose_b, bias, activation, ckc)
    else:  # the small products first, then the large one (with the bias) added to their sum
        (a_hi, b_hi), *small = parts
        rest = None
        for x, y in reversed(small):
            term = _product(x, y, transpose_b, None, None, ckc, api.FLOAT32)
            rest = term if rest is None else api.run("add", rest, term)
        out = api.run("add", rest, _product(a_hi, b_hi, transpose_b, bias, None, ckc, api.FLOAT32))
        if activation is not None:
            out = api.run(activation, out)
    if late_bias is not None:
        out = api.run("add", out, late_bias)
    if int_dtype is not None:
        from .factory import cast
        out = cast(out, int_dtype)
    if squeeze_front or squeeze_back:
        shape = list(out.shape)
        if squeeze_back:
            shape.pop(-1)
        if squeeze_front:
            shape.pop(-1 if squeeze_back else -2)
        out = reshape(out, shape)
    return out


def _product(a, b, transpose_b, bias, activation, ckc, dtype=None):
    """One ttnn.matmul (or ttnn.linear, with a bias or an activation); `dtype`: the result's device dtype."""
    kw = {} if dtype is None else {"dtype": dtype}
    if bias is None and not transpose_b and activation is None:
        return api.run("matmul", a, b, compute_kernel_config=ckc, **kw)
    if activation is None:
        return api.run("linear", a, b, bias=bias, transpose_b=transpose_b, compute_kernel_config=ckc, **kw)
    return api.run("linear", a, b, bias=bias, transpose_b=transpose_b, activation=activation,
                   compute_kernel_config=ckc, **kw)


def _float32_parts(a, b):
    """The operand pairs whose products sum to a @ b at float32's precision, or None (one product is that).

    The matrix engine holds a float32 operand as TF32 (SrcA/SrcB keep 10 of its 23 mantissa bits, and HiFi4's
    phases read 9 of SrcA's: device/numerics.py), so one ttnn.matmul of float32 operands is a TF32 product
    (relative error ~1e-3: kolibri1's router and xclip's prompt decoder amplify it past Pearson 0.999), while
    PyTorch's float32 matmul is computed in float32 unless `torch.set_float32_matmul_precision` allows less
    ("highest", its default). With float32 storage and math_fidelity HiFi4 -- the settings that ask for
    PyTorch's precision -- a float32 operand x is split into hi (bfloat16: exact in SrcA and SrcB at HiFi4) and
    lo = x - hi (float32, |lo| <= 2**-8 |x|), and a @ b = a_hi @ b_hi + a_hi @ b_lo + a_lo @ b_hi + a_lo @ b_lo:
    the products with a lo operand lose TF32's share of a part 2**-8 smaller, about 2**-18 of the result. (Left
    out, a_lo @ b_lo -- up to 2**-16 of the result, as large as that loss in the mean -- doubled the error of a
    random product (3.1e-6 against 1.3e-6, test_numerics) and kept rf_detr's top-300 proposals from the CPU's:
    Pearson 0.997 with three products, clean with four.) A bfloat16 operand (a parameter under
    "mixed") is its own hi: two products. Under precision "high" or "medium", or another fidelity, one product
    as the engine computes it."""
    fp32 = api.FLOAT32
    if (a.tt_dtype != fp32 and b.tt_dtype != fp32) or torch.get_float32_matmul_precision() != "highest" or \
            policy.compute_settings("matmul")["math_fidelity"] != "HiFi4":
        return None
    a_hi, a_lo = policy.float32_split(a) if a.tt_dtype == fp32 else (a, None)
    b_hi, b_lo = policy.float32_split(b) if b.tt_dtype == fp32 else (b, None)
    return [(a_hi, b_hi)] + [(x, y) for x, y in ((a_hi, b_lo), (a_lo, b_hi), (a_lo, b_lo))
                             if x is not None and y is not None]


@lowering(aten.linear.default, ttnn=["linear"], needs=TILE, notes="bias fused; the weight is not transposed")
def linear(x, weight, bias=None):
    return matmul_handles(x, weight, transpose_b=True, bias=bias)


@lowering(aten.addmm.default, ttnn=["linear"], needs=TILE, notes="beta/alpha other than 1 are scaled on device")
def addmm(bias, a, b, *, beta=1, alpha=1):
    if beta != 1 or alpha != 1:
        prod = api.run("multiply", matmul_handles(a, b), float(alpha))
        return api.run("add", prod, api.run("multiply", bias, float(beta)) if beta != 1 else bias)
    return matmul_handles(a, b, bias=bias)


@lowering(aten.mm.default, ttnn=["matmul"], needs=TILE)
def mm(a, b):
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise RuntimeError(f"{'self' if len(a.shape) != 2 else 'mat2'} must be a matrix")
    return matmul_handles(a, b)


@lowering(aten.bmm.default, ttnn=["matmul"], needs=TILE)
def bmm(a, b):
    if len(a.shape) != 3 or len(b.shape) != 3:
        raise RuntimeError(f"{'batch1' if len(a.shape) != 3 else 'batch2'} must be a 3D tensor")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError("batch1 and batch2 must have same number of batches, got "
                           f"{a.shape[0]} and {b.shape[0]}")
    return matmul_handles(a, b)


@lowering(aten.matmul.default, ttnn=["matmul"], needs=TILE, notes="batch dimensions broadcast as in PyTorch")
def matmul(a, b):
    return matmul_handles(a, b)


@lowering(aten._euclidean_dist.default, ttnn=["typecast", "matmul", "multiply", "sum", "add", "relu", "sqrt"],
          needs=TILE_FLOAT,
          notes="torch.cdist's p=2 form as PyTorch computes it (|x|^2 + |y|^2 - 2 x.y, clamped at 0, sqrt), all in "
                "float32 on the device: the product at HiFi4 with a float32 accumulator, the result kept in float32 "
                "storage (a nearest-codebook argmin after it: Mimi's, EnCodec's quantizers)")
def euclidean_dist(x1, x2):
    from .reduction import _reduce
    if len(x1.shape) < 2 or len(x2.shape) < 2 or x1.shape[-1] != x2.shape[-1]:
        raise Unfit(f"shapes {list(x1.shape)} and {list(x2.shape)}")
    a, b = _as_float32(x1), _as_float32(x2)
    a, b = _broadcast_batch(a, b, True)
    ckc = policy.compute_config("distance", a.index)
    products = api.run("matmul", a, b, transpose_b=True, dtype=api.FLOAT32, compute_kernel_config=ckc)
    rows = _reduce("sum", api.run("multiply", a, a), -1, True, torch.float32)       # [..., n, 1]
    cols = _reduce("sum", api.run("multiply", b, b), -1, True, torch.float32)       # [..., m, 1]
    cols = reshape(cols, tuple(cols.shape[:-2]) + (1, cols.shape[-2]))              # [..., 1, m]
    squares = api.run("add", api.run("add", rows, cols), api.run("multiply", products, -2.0))
    return api.run("sqrt", api.run("relu", squares))


@lowering(aten._grouped_mm.default, ttnn=["arange", "typecast", "ge", "sum", "eq", "matmul", "permute", "multiply"],
          needs=TILE,
          notes="2-D x 3-D with offs (rows grouped by expert, as transformers' MoE layers call it): every row times "
                "every group's matrix (one batched matmul), each row keeping its own group's product (a 0/1 "
                "mask from offs, made on the device: no read); rows past offs[-1] are zeros. 3-D x 3-D is bmm. "
                "E times the products of the rows' own groups: fine for a few experts")
def grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    from .reduction import _reduce
    if bias is not None:
        raise Unfit("a bias")
    if out_dtype is not None and out_dtype != a.dtype:
        raise Unfit(f"out_dtype {out_dtype}")
    if not a.dtype.is_floating_point or a.dtype != b.dtype:
        raise RuntimeError(f"Expected inputs of the same floating dtype, got {a.dtype} and {b.dtype}")
    if len(a.shape) == 3 and len(b.shape) == 3 and offs is None:
        return bmm(a, b)
    if len(a.shape) != 2 or len(b.shape) != 3 or offs is None:
        raise Unfit("grouped matmuls other than 2-D x 3-D with offs (or 3-D x 3-D)")
    rows, k = a.shape
    groups, k_b, n = b.shape
    if k != k_b:
        raise RuntimeError(f"contraction dimension of mat_a and mat_b must match, got {k} and {k_b}")
    if tuple(offs.shape) != (groups,):
        raise RuntimeError(f"matrix batch sizes have to match, got {offs.shape[0]} offsets for {groups} groups")
    # group of row s: how many groups end at or before it (offs[g] is the end of group g)
    position = reshape(api.create("arange", (0, rows, 1), api.FLOAT32, api.TILE, a.index, torch.float32), (rows, 1))
    ends = reshape(policy.to_float32(offs), (1, groups))
    past = api.run("ge", position, ends, dtype=api.FLOAT32, out_dtype=torch.float32)              # [rows, groups]
    group = _reduce("sum", past, 1, True, torch.float32)                                          # [rows, 1]
    span = reshape(api.create("arange", (0, groups, 1), api.FLOAT32, api.TILE, a.index, torch.float32), (1, groups))
    mine = api.run("eq", group, span, dtype=api.FLOAT32, out_dtype=torch.float32)                 # [rows, groups]
    mine = reshape(api.run("permute", mine, (1, 0)), (groups, rows, 1))
    products = matmul_handles(a, b)                                                                # [groups, rows, n]
    mine = policy.like(mine, products)
    picked = api.run("multiply", products, mine)
    return _reduce("sum", picked, 0, False)


@lowering(aten.linalg_solve_triangular.default, ttnn=["tril", "triu", "gather", "divide", "matmul", "add", "neg"],
          needs=TILE,
          notes="A = D (I - N) with N strictly triangular, so nilpotent: A^-1 = (I + N)(I + N^2)(I + N^4)... D^-1, "
                "applied to B as ceil(log2 n) steps X += P X, P = P P (2 matmuls each; left=False: the transposed "
                "system). bfloat16 products: for well-conditioned systems (unit or dominant diagonals, as gated "
                "delta-net's chunk of 64); entries of N^(2^k) that grow past bfloat16's range give inf as a "
                "singular A does")
def linalg_solve_triangular(a, b, *, upper, left=True, unitriangular=False):
    from .elementwise import neg
    from .math import tril, triu
    from .views import diagonal, transpose, unsqueeze
    if a.dtype != torch.float32 or b.dtype != torch.float32:  # (PyTorch's CPU kernel: float32/64, complex)
        raise Unfit(f"{a.dtype} and {b.dtype} operands (PyTorch's own answer)")
    meta = aten.linalg_solve_triangular.default(  # PyTorch's shape checks, errors and result shape
        torch.empty(a.shape, dtype=a.dtype, device="meta"), torch.empty(b.shape, dtype=b.dtype, device="meta"),
        upper=upper, left=left, unitriangular=unitriangular)
    if not left:  # X A = B  <=>  A^T X^T = B^T (A^T triangular the other way)
        x = linalg_solve_triangular(transpose(a, -2, -1), transpose(b, -2, -1), upper=not upper,
                                    unitriangular=unitriangular)
        return transpose(x, -2, -1)
    n = a.shape[-1]
    if not meta.numel() or n == 0:
        return policy.to_device(torch.empty(meta.shape, dtype=meta.dtype), a.index)
    strict = triu(a, 1) if upper else tril(a, -1)
    if unitriangular:
        nil, x = neg(strict), b.shared()
    else:  # A = D + S = D (I + D^-1 S): rows scaled by the diagonal
        d = unsqueeze(policy.ensure(diagonal(a, 0, -2, -1), TILE), -1)  # [..., n, 1]
        nil = neg(api.run("divide", strict, d))
        x = api.run("divide", b, d)
    power = nil  # N^(2^k)
    reach = 1    # the products so far sum N^j for j < 2 reach
    while reach < n:
        x = api.run("add", x, matmul_handles(power, x))
        reach *= 2
        if reach < n:
            power = matmul_handles(power, power)
    if tuple(x.shape) != tuple(meta.shape):
        x = expand(x, meta.shape)
    return x
