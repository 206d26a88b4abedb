"""The hardware numerics model of the shadow: what a Tensix core computes for the compute-kernel config in use.

Shadow execution (device/mock.py) evaluates TT-NN's golden functions in float32. For the ops that run on
the matrix engine (FPU) with a compute-kernel config -- matmul, linear and the two products inside
scaled_dot_product_attention -- this module instead computes what the published documents say the hardware
computes, with `configure(shadow_numerics="hardware")` (the default); `"exact"` keeps the float32 golden
functions, so both figures can be shown.

Sources (read for this model; the repository is small enough to fetch):
  tenstorrent/tt-isa-documentation  WormholeB0/TensixTile/TensixCoprocessor/MVMUL.md   (`Dst += SrcB @ SrcA`,
        an 8x16 by 16x16 product per instruction: 16-long dot products computed in float, then added to
        Dst and rounded to the Dst format -- RoundToBF16 for a 16-bit Dst, FP32 with fp32_dest_acc_en)
  tenstorrent/tt-isa-documentation  WormholeB0/TensixTile/TensixCoprocessor/ELWMUL.md   (the supporting
        definitions SrcAFidelityBits / SrcBFidelityBits: which mantissa bits each fidelity phase takes)
  tenstorrent/tt-isa-documentation  WormholeB0/TensixTile/TensixCoprocessor/SrcASrcB.md (SrcA/SrcB hold
        at most 19 bits: FP32 becomes TF32 by dropping the low 13 mantissa bits, BF16 and the block formats
        are held exactly; the fidelity-phase table)
  tenstorrent/tt-isa-documentation  WormholeB0/TensixTile/TensixCoprocessor/Dst.md      (Dst formats)
  tt-metal "Achieving FP32 Accuracy for Computation" (docs.tenstorrent.com/tt-metal/latest/tt-metalium/
        tt_metal/advanced_topics/fp32_accuracy.html): the matrix engine computes in BF16/TF32 operands;
        fp32_dest_acc_en keeps the accumulator in FP32.

The model, per product `a @ b` (ttnn.matmul(a, b): a is in0, b is in1):
  * Operands enter SrcB (a: the 8x16 rows of the product) and SrcA (b: the 16x16 block), as MVMUL's
    `Dst += SrcB @ SrcA` implies. Each is held as TF32 (float32 with its low 13 mantissa bits dropped;
    bfloat16 and bfloat8_b values are exact in it). Denormals are flushed to zero.
  * Fidelity phase p takes, of a SrcA value, the implicit 1 and the top 4 mantissa bits (p even) or the
    next 5 bits (p odd; the last TF32 bit is never used); of a SrcB value, the implicit 1 and the top 6
    mantissa bits (p < 2) or the next 4 (p >= 2). LoFi runs phase 0, HiFi2 phases 0-1, HiFi3 phases 0-2,
    HiFi4 phases 0-3 (the fidelity names count the phases: tt-metal's MathFidelity enum). For bfloat16
    operands HiFi4 is exact, HiFi2 drops the last mantissa bit of the SrcB operand (truncation), LoFi
    also the last 3 of the SrcA operand.
  * Each phase of each 16-long slice of the inner dimension is one MVMUL: its dot products are summed in
    float32 and added to Dst. A 16-bit Dst (fp32_dest_acc off) rounds to bfloat16 after every addition
    (the documents name RoundToBF16 without its rounding mode: round-to-nearest-even is used); a 32-bit
    Dst accumulates in float32 (the order of float32 additions is not modelled: MVMUL.md says its model
    is "a rough guide", "precision could be either lower or higher").
  * linear's bias is added in Dst (rounded to its format) and its activation, if any, is computed in float32.
  * The result is then stored in the output's dtype by mock._round (bfloat16, or bfloat8_b through
    ttnn's own conversion), as for every op.
  * scaled_dot_product_attention: Q @ K^T and P @ V are modelled as above; the scale, mask and softmax
    between them in float32, P entering the second product as a SrcB operand (at most TF32).

Where the documents are silent, float32 is kept:
  * math_approx_mode: the ISA documents describe the vector unit's (SFPU) instructions, not the
    approximations tt-metal's kernels build from them (exp, reciprocal, gelu, ...), so no approximate
    function is modelled; ttnn_eager's default is math_approx=False (exact kernels) for that reason.
  * softmax, layer_norm and the reductions: the kernels' algorithms (what stays in Dst, what is packed to
    L1 in which format between steps) are tt-metal software, not documented semantics: golden functions in
    float32, rounded to the output dtype.
  * Eltwise binary ops (ELWMUL, ELWADD) take no compute-kernel config in ttnn 0.81.1; for bfloat16
    operands at HiFi4 (ttnn's choice for them) ELWMUL is exact, so the golden function is the model.
  * Blackhole: the ISA documentation covers Wormhole B0 only. ttnn 0.81.1 configures Blackhole with the same
    class (WormholeComputeKernelConfig; there is no BlackholeComputeKernelConfig in this version) and the
    same MathFidelity values; the Wormhole model is applied to it unchanged.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import torch

from .. import config
from ..config import FIDELITIES  # ("LoFi", "HiFi2", "HiFi3", "HiFi4")

PHASES = {"LoFi": (0,), "HiFi2": (0, 1), "HiFi3": (0, 1, 2), "HiFi4": (0, 1, 2, 3)}
MODES = ("hardware", "exact")
MVMUL_K = 16  # inner-dimension length of one MVMUL (SrcB 8x16 @ SrcA 16x16)

# Bit masks of ELWMUL.md's supporting definitions, as signed int32 (torch has no uint32 bitwise ops).
_TF32 = 0xFFFFE000 - 2**32            # FP32 -> TF32: drop the low 13 mantissa bits (SrcASrcB.md)
_SRCA_HI = 0xFFF80000 - 2**32         # SrcAFidelityBits, even phase: sign, exponent, top 4 mantissa bits
_SRCA_LO_CLEAR = 0xFFF83FFF - 2**32   # odd phase: x minus x with the next 5 mantissa bits cleared
_SRCB_HI = 0xFFFE0000 - 2**32         # SrcBFidelityBits, phase < 2: sign, exponent, top 6 mantissa bits
_SRCB_LO_CLEAR = 0xFFFE1FFF - 2**32   # phase >= 2: x minus x with the next 4 mantissa bits cleared
_FP32_MIN_NORMAL = 2.0 ** -126


@dataclasses.dataclass(frozen=True)
class Numerics:
    """A compute-kernel config as the model reads it."""
    fidelity: str = "LoFi"
    fp32_dest: bool = False
    approx: bool = True


# What ttnn's init_device_compute_kernel_config fills in when given nothing (its signature's defaults).
TTNN_DEFAULT = Numerics("LoFi", False, True)


def of_kernel_config(ckc) -> Numerics:
    """The Numerics of a ttnn compute-kernel config object (None: ttnn's defaults)."""
    if ckc is None:
        return TTNN_DEFAULT
    fidelity = getattr(ckc.math_fidelity, "name", str(ckc.math_fidelity).rsplit(".", 1)[-1])
    return Numerics(fidelity, bool(ckc.fp32_dest_acc_en), bool(ckc.math_approx_mode))


# ------------------------------------------------------------------------------------------ operands
def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32)


def to_src(x: torch.Tensor) -> torch.Tensor:
    """A value as SrcA/SrcB hold it: TF32 (exact for bfloat16 and block formats), denormals flushed."""
    x = x.float()
    x = (_bits(x) & _TF32).view(torch.float32)
    return torch.where(x.abs() < _FP32_MIN_NORMAL, torch.zeros((), dtype=x.dtype), x)


def srca_bits(x: torch.Tensor, phase: int) -> torch.Tensor:
    """SrcAFidelityBits (ELWMUL.md): the part of a SrcA value the multipliers see in `phase`."""
    if phase & 1 == 0:
        return (_bits(x) & _SRCA_HI).view(torch.float32)
    return _low(x, _SRCA_LO_CLEAR)


def srcb_bits(x: torch.Tensor, phase: int) -> torch.Tensor:
    """SrcBFidelityBits (ELWMUL.md): the part of a SrcB value the multipliers see in `phase`."""
    if phase & 2 == 0:
        return (_bits(x) & _SRCB_HI).view(torch.float32)
    return _low(x, _SRCB_LO_CLEAR)


def _low(x: torch.Tensor, clear: int) -> torch.Tensor:
    """x minus x with some mantissa bits cleared: those bits' value (0 for an infinity, not inf - inf)."""
    return (x - (_bits(x) & clear).view(torch.float32)).nan_to_num_(0.0, 0.0, 0.0)


def round_dst(x: torch.Tensor, fp32_dest: bool) -> torch.Tensor:
    """A value written to Dst: FP32 as it is, else RoundToBF16 (round-to-nearest-even)."""
    return x if fp32_dest else x.to(torch.bfloat16).float()


# ------------------------------------------------------------------------------------------ products
def matmul(a: torch.Tensor, b: torch.Tensor, n: Numerics) -> torch.Tensor:
    """a @ b as the matrix engine computes it under `n` (a: SrcB, b: SrcA; float32 result = Dst's value)."""
    a, b = to_src(a), to_src(b)
    phases = PHASES[n.fidelity]
    if not n.fp32_dest and bool(torch.isfinite(a).all()) and bool(torch.isfinite(b).all()):
        # 16-bit Dst: one rounding per MVMUL (a 16-long slice of the inner dimension, one fidelity phase)
        return _dst16(a, b, phases).float()
    # FP32 Dst: the phases' products summed; phases sharing a SrcB part are one product (exact sums).
    # Also, rounded once, a 16-bit Dst's product of operands with infinities or NaN: the hardware is not
    # IEEE 754 there and the documents give no model; phases must not multiply inf by a zero part into NaN.
    out = None
    for b_phase in (0, 2):
        a_parts = [srca_bits(b, p) for p in phases if p & 2 == b_phase]
        if not a_parts:
            continue
        term = srcb_bits(a, b_phase) @ functools.reduce(torch.add, a_parts)
        out = term if out is None else out + term
    return round_dst(out, n.fp32_dest)


_GROUP_ELEMENTS = 1 << 24  # products of this many elements (64 MiB) are made at once


def _dst16(a, b, phases) -> torch.Tensor:
    """Sum over 16-long inner slices and phases, each addition rounded to bfloat16 (the accumulator is a
    bfloat16 tensor: PyTorch adds a float32 term to it in float32 and rounds once, to nearest even)."""
    k = a.shape[-1]
    pad = -k % MVMUL_K
    if pad:  # zero products leave a bfloat16 sum unchanged
        a = torch.nn.functional.pad(a, (0, pad))
        b = torch.nn.functional.pad(b, (0, 0, 0, pad))
    chunks = (k + pad) // MVMUL_K
    m, n = a.shape[-2], b.shape[-1]
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    acc = torch.zeros(*batch, m, n, dtype=torch.bfloat16)
    # [..., chunk, M, 16] and [..., chunk, 16, N] per phase
    a_parts = [srcb_bits(a, p).reshape(*a.shape[:-1], chunks, MVMUL_K).movedim(-2, -3) for p in phases]
    b_parts = [srca_bits(b, p).reshape(*b.shape[:-2], chunks, MVMUL_K, n) for p in phases]
    group = max(1, min(chunks, _GROUP_ELEMENTS // max(1, acc.numel())))
    for g in range(0, chunks, group):
        products = [ap[..., g:g + group, :, :] @ bp[..., g:g + group, :, :] for ap, bp in zip(a_parts, b_parts)]
        for j in range(products[0].shape[-3]):
            for prod in products:
                acc.add_(prod[..., j, :, :])
    return acc


def _matmul_ref(a, b, transpose_a=False, transpose_b=False, *, bias=None, activation=None, numerics=None, **_):
    if transpose_a:
        a = a.transpose(-1, -2)
    if transpose_b:
        b = b.transpose(-1, -2)
    out = matmul(a, b, numerics)
    if bias is not None:
        out = round_dst(out + bias.reshape(-1).float(), numerics.fp32_dest)
    if activation is not None:
        from ttnn.operations.activations import get_golden_function_for_activation
        out = get_golden_function_for_activation(activation)(out)
    return out


_SCORE_ELEMENTS = 1 << 26  # attention scores of more elements (256 MiB) are computed in blocks of query rows


def _sdpa_ref(q, k, v, *, attn_mask=None, is_causal=True, scale=None, numerics=None, **_):
    """The hardware model of TT-NN's attention: softmax(q k^T * scale + mask) v, each matmul as the matrix
    engine computes it. TT-NN's kernel streams the keys in chunks and never holds the scores; the model holds
    them, so beyond _SCORE_ELEMENTS it computes blocks of query rows (rows are independent: softmax is per row)
    rather than take the host's memory (LightGlue's 8464 keypoints: 4.6 GB per copy of the scores)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if k.shape[1] != q.shape[1]:  # grouped key/value heads: query head i reads head i // group
        k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
    sq, sk = q.shape[-2], k.shape[-2]
    rows = max(1, _SCORE_ELEMENTS // max(1, q[..., :1, :1].numel() * sk))
    if rows >= sq:
        return _sdpa_rows(q, k, v, attn_mask, is_causal, scale, numerics, sk - sq, sk)
    blocks = []
    for r in range(0, sq, rows):
        mask = attn_mask
        if mask is not None and mask.shape[-2] > 1:
            mask = mask[..., r:r + rows, :]
        blocks.append(_sdpa_rows(q[..., r:r + rows, :], k, v, mask, is_causal, scale, numerics, r + sk - sq, sk))
    return torch.cat(blocks, dim=-2)


def _sdpa_rows(q, k, v, attn_mask, is_causal, scale, numerics, diagonal: int, sk: int):
    """_sdpa_ref for query rows whose first row may see keys up to `diagonal` (causal)."""
    scores = matmul(q, k.transpose(-1, -2), numerics) * scale
    if is_causal:
        causal = torch.ones(q.shape[-2], sk, dtype=torch.bool).tril(diagonal)
        scores = scores.masked_fill(~causal, -math.inf)
    if attn_mask is not None:
        scores = scores + attn_mask
    return matmul(torch.softmax(scores, dim=-1), v, numerics)


# ttnn op -> hardware reference (called with the golden function's arguments and numerics=...)
REFERENCES = {
    "matmul": _matmul_ref,
    "linear": _matmul_ref,
    "transformer.scaled_dot_product_attention": _sdpa_ref,
}


def reference(op: str, ckc):
    """The hardware model of ttnn.<op> under compute-kernel config `ckc`, or None (golden function in
    float32: shadow_numerics="exact", or an op the documents do not define; see the module docstring)."""
    fn = REFERENCES.get(op)
    if fn is None or config.settings["shadow_numerics"] != "hardware":
        return None
    return functools.partial(fn, numerics=of_kernel_config(ckc))
