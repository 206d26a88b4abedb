"""FFTs as DFT matrix products: aten._fft_r2c, _fft_c2c and _fft_c2r (everything torch.fft and torch.stft /
istft reach) on the device.

TT-NN has no FFT. A discrete Fourier transform of length n along one dimension is a fixed linear map, so it
is one matmul by a dense table: y = x @ W. Complex tensors are stored as real pairs (core/layout.py: the
view_as_real value [..., n, 2], real and imaginary parts interleaved), so a complex transform along the
pair's own dimension is the pair reshaped to [..., 2n] times a real [2n, 2m] table whose rows and columns are
interleaved the same way -- row 2t + p takes part p of input t, column 2k + q makes part q of output k -- and
the product reshaped back is the result's pair, with no split into parts and no concat:

    c2c  [2n, 2n]   W[2t, 2k] = W[2t+1, 2k+1] = cos(2 pi k t / n),  W[2t+1, 2k] = -W[2t, 2k+1] = -s sin(...)
                    (s = -1 forward, +1 backward: out_k = sum_t x_t e^(s 2 pi i k t / n))
    r2c  [n, 2m]    a real input: the even rows of c2c's; m = n // 2 + 1 bins (onesided) or n
    c2r  [2m, n]    a Hermitian input of m = n // 2 + 1 bins: out_t = sum_k w_k (re_k cos - im_k sin), w_k = 2
                    but 1 at the DC bin and (n even) the Nyquist bin: PyTorch's semantics, in which the
                    imaginary parts of those two bins are ignored (their sin column is 0); bins past m of a
                    longer input are ignored too (sliced off), as PyTorch's CPU kernel does

The normalization (aten's int: 0 none, 1 1/sqrt(n), 2 1/n; n the signal length, c2r's the output's) is folded
into each dimension's table. A transform over several dimensions is one matmul per dimension, the dimension
moved last by a permute (kept before the pair's dimension of 2) and back: r2c transforms the last of `dim`
(onesided: halved) and then runs c2c over the others; c2r runs the inverse c2c over the others first, then
the last. The tables are computed on the host in float64 (the angle from (k t) mod n: exact for any n),
rounded once to the device dtype, uploaded once per (device, kind, n, direction, normalization, dtype) and
kept in the lowerings' cache of constant tables (_common.device_table, least recently used out): a
steady-state forward uploads none; torch.ttnn.empty_cache() (and an out-of-memory retry) drops them.

Numerics. The products run as every matmul does (policy.compute_config("matmul"): HiFi2, float32
accumulation) with the table, in the storage dtype (bfloat16 by default), as the second operand. Measured
against CPU float32 (tests/test_fft.py; bfloat16 inputs): Pearson 0.99999 and a max error of 0.4-0.7% of the
largest output for n = 8 ... 4096 (c2c, r2c, c2r), of which the output's own bfloat16 rounding is 0.4%.
float32 tables do not help alone: with configure(float32_storage="float32") (float32 tables and operands)
HiFi2 still takes 6 mantissa bits of the first operand and the error stays 0.4-0.6%; with
math_fidelity="HiFi4" too it falls to 0.07% (Pearson 1.000000). So the default is bfloat16, and exact
figures are one configure() away.

Refused (Unfit: the counted CPU fallback, which gives PyTorch's own result or error): a transformed length
above MAX_N or a table above MAX_TABLE_BYTES (its device memory and an O(n^2) product per row: a real FFT is
O(n log n)); inputs with no elements (PyTorch's CPU kernel raises for an empty batch); dtypes other than
float32 / complex64 (PyTorch's CPU FFT has no bfloat16 or float16); a c2r input shorter than n // 2 + 1 bins.
"""
from __future__ import annotations

import math

import torch

from ..core import layout as policy
from ..core.layout import TILE, TILE_FLOAT, as_complex, as_pair
from ..core.registry import Unfit, lowering
from ..device import api
from ._common import device_table, dim
from .matmul import matmul_handles
from .views import permute_handle, reshape, slice_handle

aten = torch.ops.aten
C64 = torch.complex64

MAX_N = 4096                   # longest transformed dimension
MAX_TABLE_BYTES = 64 << 20     # largest table on the device (c2c of n: 2n x 2n)


# ----------------------------------------------------------------------------------------------- tables
def _scale(norm: int, n: int) -> float:
    if norm not in (0, 1, 2):
        raise RuntimeError(f"Unknown normalization mode {norm}")
    return (1.0, 1.0 / math.sqrt(n), 1.0 / n)[norm]


def host_table(kind: str, n: int, forward: bool, norm: int, onesided: bool = True) -> torch.Tensor:
    """The DFT table of `kind` ("c2c", "r2c", "c2r") for length n (the module docstring), float64."""
    bins = n // 2 + 1 if kind == "c2r" or (kind == "r2c" and onesided) else n
    k = torch.arange(bins, dtype=torch.int64)
    t = torch.arange(n, dtype=torch.int64)
    theta = (torch.outer(t, k) % n).double() * (2 * math.pi / n)  # [n, bins]; (k t) mod n: exact angles
    cos, sin = torch.cos(theta), torch.sin(theta)
    sin[(torch.outer(t, k) % n) * 2 % n == 0] = 0.0  # angles 0 and pi: exactly 0 (DC and Nyquist)
    s = -1.0 if forward else 1.0
    scale = _scale(norm, n)
    if kind == "r2c":
        w = torch.stack([cos, s * sin], -1).reshape(n, 2 * bins)
    elif kind == "c2c":
        w = torch.empty(n, 2, bins, 2, dtype=torch.float64)
        w[:, 0, :, 0], w[:, 0, :, 1] = cos, s * sin    # re_t -> (re_k, im_k)
        w[:, 1, :, 0], w[:, 1, :, 1] = -s * sin, cos   # im_t -> (re_k, im_k)
        w = w.reshape(2 * n, 2 * bins)
    else:  # c2r (backward): out_t = sum_k w_k (re_k cos - im_k sin)
        weight = torch.full((bins,), 2.0, dtype=torch.float64)
        weight[0] = 1.0
        if n % 2 == 0:
            weight[-1] = 1.0
        w = torch.stack([(cos * weight).t(), (-sin * weight).t()], 1).reshape(2 * bins, n)
    return w * scale


def _table_shape(kind: str, n: int, onesided: bool) -> tuple:
    bins = n // 2 + 1 if kind == "c2r" or (kind == "r2c" and onesided) else n
    return {"c2c": (2 * n, 2 * n), "r2c": (n, 2 * bins), "c2r": (2 * bins, n)}[kind]


def _check_size(kind: str, n: int, onesided: bool, tt_dtype) -> None:
    """Unfit for a length or table too large for a dense product (before any ttnn call)."""
    if n > MAX_N:
        raise Unfit(f"{kind} of length {n}: a dense DFT table beyond MAX_N={MAX_N} (an O(n^2) product per row)")
    rows, cols = _table_shape(kind, n, onesided)
    size = api.buffer_bytes((rows, cols), tt_dtype, api.TILE)
    if size > MAX_TABLE_BYTES:
        raise Unfit(f"{kind} of length {n}: its [{rows}, {cols}] DFT table takes {size >> 20} MiB "
                    f"(MAX_TABLE_BYTES: {MAX_TABLE_BYTES >> 20} MiB)")


def table(kind: str, n: int, forward: bool, norm: int, index: int, tt_dtype, onesided: bool = True) -> api.Handle:
    """The device table (uploaded TILE in `tt_dtype` once, then from the lowerings' table cache)."""
    return device_table(("dft", kind, n, forward, norm, onesided), lambda: host_table(kind, n, forward, norm, onesided),
                        tt_dtype, index)


# ----------------------------------------------------------------------------------------------- one dimension
def _moved_last(x: api.Handle, d: int, keep: int) -> tuple:
    """x with dimension d moved to position -1 - keep (keep: trailing dimensions left in place, the pair's)
    and the permutation that brings it back."""
    n = len(x.shape)
    lead = n - keep
    order = [i for i in range(lead) if i != d] + [d] + list(range(lead, n))
    back = [order.index(i) for i in range(n)]
    return permute_handle(x, order), back


def _product(x: api.Handle, w: api.Handle) -> api.Handle:
    return matmul_handles(policy.ensure(x, TILE), w)


def _c2c(p: api.Handle, d: int, forward: bool, norm: int) -> api.Handle:
    """A pair [..., 2] transformed along its complex dimension d."""
    n = p.shape[d]
    q, back = _moved_last(p, d, 1)
    lead = list(q.shape[:-2])
    w = table("c2c", n, forward, norm, p.index, q.tt_dtype)
    out = _product(reshape(q, lead + [2 * n]), w)
    return permute_handle(reshape(out, lead + [n, 2]), back)


def _r2c(x: api.Handle, d: int, norm: int, onesided: bool) -> api.Handle:
    """A real tensor transformed (forward) along d: its pair [..., bins, 2]."""
    n = x.shape[d]
    q, back = _moved_last(x, d, 0)
    w = table("r2c", n, True, norm, x.index, q.tt_dtype, onesided)
    out = _product(q, w)
    bins = w.shape[1] // 2
    out = reshape(out, list(q.shape[:-1]) + [bins, 2])
    return permute_handle(out, back + [len(back)])


def _c2r(p: api.Handle, d: int, n: int, norm: int) -> api.Handle:
    """A pair (Hermitian along its complex dimension d) transformed back to n real values along d."""
    bins = n // 2 + 1
    q, back = _moved_last(p, d, 1)
    if q.shape[-2] != bins:
        q = slice_handle(q, -2, 0, bins)
    lead = list(q.shape[:-2])
    w = table("c2r", n, False, norm, p.index, q.tt_dtype)
    out = _product(reshape(q, lead + [2 * bins]), w)
    return permute_handle(out, back[:-1])


# ----------------------------------------------------------------------------------------------- the aten ops
def _dims(x, dims, kind: str) -> list:
    r = len(x.shape)
    out = [dim(d, r) for d in dims]
    if not out:
        raise Unfit(f"{kind} over no dimension")
    if len(set(out)) != len(out):
        raise RuntimeError(f"FFT dims must be unique, got {list(dims)}")
    return out


def _checks(kind: str, x, dims, lengths, onesided_last: bool) -> None:
    """Everything refused, before any ttnn call."""
    if not x.shape.numel():
        raise Unfit(f"{kind} of an input with no elements (PyTorch's CPU kernel decides: MKL refuses an empty "
                    f"batch)")
    tt_dtype = policy.storage_for(torch.float32)[0]
    for i, n in enumerate(lengths):
        if n < 1:
            raise Unfit(f"{kind} of length {n}")
        sub = "c2c" if i < len(lengths) - 1 or kind == "c2c" else kind
        _check_size(sub, n, onesided_last, tt_dtype)


@lowering(aten._fft_r2c.default, ttnn=["permute", "reshape", "matmul"], needs=TILE_FLOAT,
          notes="DFT matrix products: one matmul per transformed dimension by a cached [n, 2 bins] (then [2n, 2n]) "
                "table; lengths up to MAX_N=4096, tables up to 64 MiB")
def _fft_r2c(x, dim, normalization, onesided):
    if x.dtype is not torch.float32:
        raise Unfit(f"{x.dtype} input (PyTorch's CPU FFT: float32/float64 only)")
    dims = _dims(x, dim, "r2c")
    _checks("r2c", x, dims, [x.shape[d] for d in dims], onesided)
    p = _r2c(x, dims[-1], normalization, onesided)
    for d in dims[:-1]:
        p = _c2c(p, d, True, normalization)
    return as_complex(p)


@lowering(aten._fft_c2c.default, ttnn=["permute", "reshape", "matmul"], complex=True,
          notes="DFT matrix products: one matmul per transformed dimension by a cached [2n, 2n] table of the "
                "interleaved pair; lengths up to MAX_N, tables up to 64 MiB")
def _fft_c2c(x, dim, normalization, forward):
    if x.dtype is not C64:
        raise RuntimeError(f"Only supports complex dtypes, but found: {str(x.dtype).split('.')[1].capitalize()}")
    dims = _dims(x, dim, "c2c")
    _checks("c2c", x, dims, [x.shape[d] for d in dims], True)
    p = policy.ensure(as_pair(policy.materialize(x)), TILE)
    for d in dims:
        p = _c2c(p, d, forward, normalization)
    return as_complex(p)


@lowering(aten._fft_c2r.default, ttnn=["permute", "reshape", "slice", "matmul"], complex=True,
          notes="DFT matrix products: the inverse c2c over all but the last dimension, then a [2 bins, n] table "
                "(PyTorch's Hermitian semantics: imaginary parts of the DC and Nyquist bins ignored)")
def _fft_c2r(x, dim, normalization, last_dim_size):
    if x.dtype is not C64:
        raise RuntimeError(f"Only supports complex dtypes, but found: {str(x.dtype).split('.')[1].capitalize()}")
    dims = _dims(x, dim, "c2r")
    n = last_dim_size
    if n < 1 or x.shape[dims[-1]] < n // 2 + 1:
        raise Unfit(f"c2r of {x.shape[dims[-1]]} bins to {n} values (PyTorch's own answer)")
    _checks("c2r", x, dims, [x.shape[d] for d in dims[:-1]] + [n], True)
    p = policy.ensure(as_pair(policy.materialize(x)), TILE)
    for d in dims[:-1]:
        p = _c2c(p, d, False, normalization)
    return _c2r(p, dims[-1], n, normalization)
