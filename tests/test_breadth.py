"""Issue 23 item 9: the single ops transformer families fell back on (acos, erfinv, floor, round, powers with a
tensor exponent, clamp with tensor bounds, logsumexp, var/std, flip, nonzero, repeat_interleave, advanced
indexing after ':' and of integer tables, argmax of integers; then linalg_solve_triangular, unfold, as_strided
aliases, bucketize, scatter_reduce amax/amin/prod, nearest upsampling to any size, unique), each against PyTorch on
the CPU: CASES (read by tests/test_ops.py's guard), hypothesis properties (@covers), and the patterns the
models use."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import ttnn_eager

from conftest import pcc, covers
from hypothesis import settings

from test_fuzz import FUZZ, check, shapes, values

FEW = settings(FUZZ, max_examples=6)
from test_ops import bf, ints, mask

DEV = "ttnn:0"
aten = torch.ops.aten

def _delta_system(batch: int, n: int) -> torch.Tensor:
    """Gated delta-net's chunk system (transformers' qwen3_next torch_chunk_gated_delta_rule): unit lower
    triangular, I minus the decayed, beta-scaled key products below the diagonal."""
    g = torch.Generator().manual_seed(n)
    k = F.normalize(torch.randn(batch, n, 32, generator=g), dim=-1)
    beta = torch.rand(batch, n, generator=g)
    decay = -torch.rand(batch, n, generator=g).cumsum(-1) * 0.1
    decay = (decay.unsqueeze(-1) - decay.unsqueeze(-2)).tril().exp().tril()
    attn = ((k * beta[..., None]) @ k.mT * decay).tril(-1)
    return (torch.eye(n) + attn).to(torch.bfloat16).float()


def _chunk(h: torch.Tensor, w: int) -> torch.Tensor:
    """Longformer's _chunk: overlapping chunks of 2w rows every w, an as_strided alias of h."""
    h = h.view(h.size(0), h.size(1) // (2 * w), 2 * w, h.size(2))
    size, stride = list(h.size()), list(h.stride())
    size[1], stride[1] = size[1] * 2 - 1, stride[1] // 2
    return h.as_strided(size=size, stride=stride)


def _deformable(value, locations, weights, shapes=((8, 10), (4, 5))):
    """transformers' multi_scale_deformable_attention (RT-DETR, D-FINE, DEIMv2, PP-DocLayout): each level's
    values sampled at 2 * locations - 1 by grid_sample (bilinear, zeros, align_corners=False), weighted, summed."""
    b, _, heads, d = value.shape
    _, q, _, levels, points, _ = locations.shape
    values = value.split([h * w for h, w in shapes], dim=1)
    grids = 2 * locations - 1
    samples = []
    for level, (h, w) in enumerate(shapes):
        v = values[level].flatten(2).transpose(1, 2).reshape(b * heads, d, h, w)
        g = grids[:, :, :, level].transpose(1, 2).flatten(0, 1)
        samples.append(F.grid_sample(v, g, mode="bilinear", padding_mode="zeros", align_corners=False))
    weights = weights.transpose(1, 2).reshape(b * heads, 1, q, levels * points)
    out = (torch.stack(samples, dim=-2).flatten(-2) * weights).sum(-1).view(b, heads * d, q)
    return out.transpose(1, 2).contiguous()


def _grid(*shape, seed=0, spread=1.2):
    """Sampling positions in [-spread, spread] (beyond [-1, 1]: outside the input), exact in bfloat16."""
    g = torch.Generator().manual_seed(seed)
    return ((torch.rand(*shape, generator=g) * 2 - 1) * spread).to(torch.bfloat16).float()


def _grid_samples(x, g):
    return tuple(F.grid_sample(x, g, mode=m, padding_mode=p, align_corners=a)
                 for m in ("bilinear", "nearest", "bicubic") for p in ("zeros", "border", "reflection")
                 for a in (False, True))


def _roi_align(x, boxes, *args):
    """torchvision.ops.roi_align (imported here: torchvision is slow to import)."""
    import torchvision
    return torchvision.ops.roi_align(x, boxes, *args)


def _boxes(k, width, height, batch=2, seed=0):
    """k boxes [batch index, x1, y1, x2, y2] in a 4x larger image (spatial_scale 0.25), some beyond it, exact in
    bfloat16."""
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(k, 2, generator=g) * torch.tensor([width, height]) * 4.4 - 8
    wh = torch.rand(k, 2, generator=g) * torch.tensor([width, height]) * 2
    b = torch.randint(0, batch, (k, 1), generator=g).float()
    return torch.cat([b, xy, xy + wh], 1).to(torch.bfloat16).float()


# atanh: +-inf at +-1, NaN beyond; acosh: 0 at 1, NaN below; asinh: odd, log(2|x|) for large |x|
HYPERBOLIC_EDGES = [-3e38, -1e20, -5000.0, -4096.0, -2.0, -1.0, -0.99609375, -0.5, -1e-3, -0.0, 0.0, 1e-6, 0.3,
                    0.99609375, 1.0, 1.0078125, 1.5, 2.0, 100.0, 4096.0, 5000.0, 1e20, 3e38, float("nan"), float("inf"),
                    float("-inf")]


def _classes(y):
    """y as exactly compared classes (NaN, infinite, sign) and its finite values (so an infinity does not make
    the tolerance infinite)."""
    return y.isnan(), y.isinf(), torch.sign(y).nan_to_num(0.0), y.nan_to_num(0.0, 0.0, 0.0)


CASES = {
    # transposed convolutions with groups (depthwise: mimi's and pocket-tts' upsamplers) or dilation: the
    # convolution of the mirrored kernel over the input spread by the stride (lowerings/conv.py)
    "conv_transpose1d_groups": (lambda x, w, v, b: (
        F.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1, groups=8),
        F.conv_transpose1d(x, v, stride=3, groups=4, dilation=2)),
        [(bf(2, 8, 9), bf(8, 1, 4, seed=1), bf(8, 3, 3, seed=2), bf(8, seed=3))]),
    "conv_transpose2d_groups": (lambda x, w, v: (
        F.conv_transpose2d(x, w, stride=2, groups=6),
        F.conv_transpose2d(x, v, padding=1, dilation=(2, 1), groups=2)),
        [(bf(1, 6, 5, 7), bf(6, 1, 3, 3, seed=1), bf(6, 2, 2, 3, seed=2))]),
    # deformable attention (RT-DETR, D-FINE, PP-DocLayout): the H*W of its levels
    "prod_levels": (lambda s, a: (s.prod(1), s.prod(0, keepdim=True), a.prod(-1), (a > 0).prod(0)),
                    [(torch.tensor([[12, 16], [6, 8], [3, 4]]), bf(3, 4))]),
    "logs": (lambda a: (torch.log2(a.abs() + 0.5), torch.log10(a.abs() + 0.5), torch.nan_to_num(torch.log(a)),
                        torch.nan_to_num(a / 0, nan=1.0, posinf=2.0, neginf=-2.0)), [(bf(3, 33),)]),
    "acos_erfinv": (lambda a: torch.stack([torch.acos(a * 0.9), torch.erfinv(a * 0.9)]), [(bf(3, 33).tanh(),)]),
    # inverse hyperbolics: the interior, relative accuracy near 0 (x 1e3), integer and bool inputs, and the edges
    "hyperbolic": (lambda a: (torch.atanh(a.tanh() * 0.99), torch.asinh(a * 30), torch.acosh(a.abs() + 1.5),
                              torch.atanh(a * 1e-3) * 1e3, torch.asinh(a * 1e-3) * 1e3), [(bf(3, 33),), (bf(2, 5),)]),
    "hyperbolic_edges": (lambda e, i: tuple(c for f in (torch.atanh, torch.asinh, torch.acosh)
                                            for c in (*_classes(f(e)), *_classes(f(i)), *_classes(f(i > 0)))),
                         [(torch.tensor(HYPERBOLIC_EDGES), ints(3, 7, lo=-3, hi=4))]),
    "floor_round": (lambda a: torch.stack([torch.floor(a * 4), torch.round(a * 4), torch.round(a, decimals=1)]),
                    [(bf(3, 33),), (bf(2, 5),)]),
    "floor_round_int": (lambda i: torch.stack([torch.floor(i), torch.round(i), torch.ceil(i)]), [(ints(3, 7, lo=-9),)]),
    "ceil": (lambda a: torch.ceil(a * 4), [(bf(3, 33),)]),
    "is_all_true": (lambda m: torch.stack([aten._is_all_true(m), aten._is_all_true(m | True)]), [(mask(3, 33),)]),
    "pow_scalar_base": (lambda a: 10000.0 ** (a.abs() / 4), [(bf(2, 33),)]),  # rotary tables' inverse frequencies
    "pow_tensors": (lambda a, b: torch.pow(a.abs() + 0.5, b), [(bf(3, 33), bf(3, 33, seed=1)), (bf(5, 1), bf(7))]),
    "pow_int": (lambda i, j: torch.stack([torch.pow(i, j), 2 ** j]), [(ints(3, 5, lo=-4, hi=5), ints(3, 5, hi=6, seed=1))]),
    "clamp_tensor": (lambda a, lo, hi: torch.stack([torch.clamp(a, lo, hi), torch.clamp(a, min=lo), torch.clamp(a, max=hi)]),
                     [(bf(3, 33), -bf(3, 33, seed=1).abs(), bf(33, seed=2).abs())]),
    "logsumexp": (lambda a: torch.cat([torch.logsumexp(a * 8, -1), torch.logsumexp(a, (0, 1)).reshape(1)]),
                  [(bf(4, 33),), (bf(2, 1000),)]),
    "var_std": (lambda a: torch.cat([torch.var(a + 50, -1), torch.std(a, 0), torch.var(a, correction=0).reshape(1),
                                     torch.std(a, -1, keepdim=True).flatten()]), [(bf(4, 33),), (bf(7, 3),)]),
    "flip": (lambda a, i, m: (torch.flip(a, (0, -1)), torch.flip(i, (1,)), torch.flip(m, (0,))),
             [(bf(3, 5, 7), ints(4, 6, lo=-9), mask(5, 2))]),
    "nonzero": (lambda m, a: (torch.nonzero(m), torch.argwhere(a)), [(mask(3, 33), ints(4, 5, hi=2).float())]),
    "repeat_interleave": (lambda r, a: (torch.repeat_interleave(r), torch.repeat_interleave(a, r, dim=0)),
                          [(torch.tensor([2, 0, 3, 1]), bf(4, 33))]),
    "index_after_colon": (lambda a: (a[..., [-2], :], a[:, torch.tensor([[0, 2], [1, -1]])],
                                     a[:, torch.tensor([0, 2]), torch.tensor([1, 0])]), [(bf(2, 3, 6, 16),)]),
    "index_int_table": (lambda t: (t[torch.arange(2).view(2, 1, 1), torch.arange(5).view(1, 5, 1)],
                                   t[torch.tensor([1, 0, 1])]), [(ints(2, 5, lo=-70000, hi=70000),)]),
    "scatter_reduce": (lambda a, i, s: tuple(a.scatter_reduce(1, i, s, r, include_self=inc) for r in ("sum", "mean")
                                             for inc in (True, False)),
                       [(bf(4, 40), ints(4, 33, hi=40), bf(4, 33, seed=1))]),
    "index_mask": (lambda a, m, c, i: (a[m], a[:, c], i[m]),  # (VITS' spline: outputs[mask] = inputs[mask])
                   [(bf(2, 3, 24), mask(2, 3, 24), mask(3, seed=1), ints(2, 3, 24, hi=9))]),
    "argmax_int": (lambda i, m: (i.argmax(-1), m.int().argmax(-1)), [(ints(3, 40, hi=1000), mask(3, 40))]),
    # the second round (issue 23 item 9): gated delta-net's chunk solve, inkling2's causal-conv windows,
    # SmolVLM's position buckets, TAPAS's segment extremes, ViLT's mask resize and unique rows
    "solve_triangular": (lambda a, b: tuple(torch.linalg.solve_triangular(a if not up else a.mT, b if left else b.mT,
                                                                          upper=up, left=left, unitriangular=unit)
                                            for up, left, unit in ((False, True, True), (True, True, False),
                                                                   (False, False, False), (True, False, True))),
                         [(_delta_system(2, 64), bf(2, 64, 16)), (_delta_system(3, 7), bf(3, 7, 5))]),
    "unfold": (lambda a: (a.unfold(-1, 4, 1), a.unfold(1, 3, 2), a.unfold(-1, 33, 33), a.unfold(0, 1, 1)),
               [(bf(2, 6, 40),)]),
    "bucketize": (lambda x, b: (torch.bucketize(x, b), torch.bucketize(x, b, right=True, out_int32=True),
                                torch.bucketize(x.round(), b.round())),
                  [(bf(3, 40), torch.linspace(-2, 2, 17)), (bf(5), torch.tensor([0.0]))]),
    "bucketize_int": (lambda i, b: (torch.bucketize(i, b), torch.bucketize(i, b, right=True)),
                      [(ints(4, 9, lo=-20, hi=20), torch.arange(-10, 11, 4))]),
    "scatter_extremes": (lambda a, i, s: tuple(a.scatter_reduce(1, i, s, r, include_self=inc) for r in ("amax", "amin")
                                               for inc in (True, False)),
                         [(bf(4, 40), ints(4, 33, hi=40), bf(4, 33, seed=1)),
                          (ints(4, 40, lo=-99, hi=99), ints(4, 33, hi=40), ints(4, 33, lo=-300, hi=300, seed=1))]),
    "scatter_prod": (lambda a, i, s: tuple(a.scatter_reduce(1, i, s, "prod", include_self=inc) for inc in (True, False)),
                     [(bf(4, 40), ints(4, 12, hi=40), bf(4, 12, seed=1)), (bf(3, 5), ints(3, 5, hi=5), bf(3, 5, seed=2))]),
    "segment_extremes": (lambda a, i, s: tuple(a.scatter_reduce(0, i, s, r, include_self=False) for r in ("amax", "amin")),
                         [(torch.zeros(12), ints(30, hi=12, seed=2), bf(30, seed=3))]),
    # deformable attention's sampling (issue 23): grid_sample, every mode the lowering takes
    "grid_sample": (_grid_samples, [(bf(2, 3, 7, 10), _grid(2, 5, 6, 2)), (bf(1, 33, 1, 40), _grid(1, 3, 2, 2, seed=1)),
                                    (bf(3, 2, 5, 1), _grid(3, 4, 1, 2, seed=2, spread=3.0))]),
    "deformable_attention": (_deformable, [(bf(2, 100, 2, 32), _grid(2, 7, 2, 2, 4, 2, seed=3) / 2 + 0.5,
                                            torch.rand(2, 7, 2, 2, 4, generator=torch.Generator().manual_seed(4))
                                            .to(torch.bfloat16).float())]),
    # torchvision's roi_align (R-CNN box, mask and keypoint heads): a library op lowered by name
    "roi_align": (lambda x, b: (_roi_align(x, b, 7, 0.25, 2, False), _roi_align(x, b, (14, 5), 0.25, 2, True),
                                _roi_align(x, b, 3, 0.5, 1, False), _roi_align(x, [b[:4, 1:], b[4:, 1:]], 4, 0.25, 3)),
                  [(bf(2, 16, 25, 34), _boxes(30, 34, 25))]),
    "upsample_nearest_sizes": (lambda a: (F.interpolate(a, size=(12, 15)), F.interpolate(a, size=(5, 4)),
                                          F.interpolate(a, scale_factor=1.7), F.interpolate(a[:, :, 0], size=13)),
                               [(bf(2, 3, 7, 10),)]),
    "unique": (lambda i: (torch.unique(i), *torch.unique(i, return_inverse=True, return_counts=True)),
               [(ints(3, 17, hi=9),)]),
    # Qwen2.5-VL's window boundaries (cu_window_seqlens): runs of equal values
    "unique_consecutive": (lambda i: (torch.unique_consecutive(i), *torch.unique_consecutive(
        i, return_inverse=True, return_counts=True), *torch.unique_consecutive(i, return_counts=True, dim=1)),
                           [(ints(3, 17, hi=3),), (torch.tensor([[0, 0, 4, 4, 4, 9, 0]]),)]),
    "longformer_chunks": (lambda h: _chunk(h, 8), [(bf(4, 64, 16),)]),
    "strided_aliases": (lambda h: (h.as_strided((3, 5), (2, 1), 1), h.as_strided((2, 3, 4), (0, 16, 1)),
                                   h.as_strided((16, 64), (1, 16)), h.as_strided((4, 1, 64, 4), (4, 1024, 16, 1)),
                                   h.as_strided((4, 10, 7), (1024, 3, 5), 2)), [(bf(4, 64, 16),)]),
    # torchvision users: masked_select, rot90, var_mean/std_mean
    "masked_select": (lambda a, m, i: (torch.masked_select(a, m), torch.masked_select(i, m[0])),
                      [(bf(3, 5, 33), mask(5, 33), ints(5, 33, lo=-9))]),
    "rot90": (lambda a, i: tuple(torch.rot90(t, k, dims) for t in (a, i) for k in (1, 2, 3) for dims in ((0, 1), (2, 0))),
              [(bf(3, 5, 33), ints(2, 4, 6, lo=-9))]),
    "var_mean": (lambda a: (*torch.var_mean(a, -1), *torch.std_mean(a, (0, 2), keepdim=True),
                            *torch.var_mean(a + 20, correction=0)), [(bf(3, 5, 33),)]),
    # FFTs as DFT matrix products (lowerings/fft.py; more in tests/test_fft.py): FNet's fftn, WavTokenizer's irfft
    "fft": (lambda a, c: (torch.view_as_real(torch.fft.rfft(a)), torch.fft.fftn(a, dim=(1, 2)).real,
                          torch.fft.irfft(c, 24, dim=-1, norm="ortho"), torch.view_as_real(torch.fft.fft(c, dim=1)),
                          torch.view_as_real(torch.fft.ifft(c, norm="forward").resolve_conj())),
            [(bf(2, 6, 33), torch.complex(bf(2, 5, 13), bf(2, 5, 13, seed=1)))]),
    # Grounding DINO's phrase blocks (generate_masks_with_special_tokens_and_transfer_map): the previous and
    # next delimiter position by cummax / flipped cummin of int64 positions; float ties take the last index
    "cummax_cummin": (lambda a, i, m: (*torch.cummax(a.round(), 1), *torch.cummin(a, 0), *torch.cummax(i, -1),
                                       *torch.cummin(torch.flip(i, [1]), 1), *torch.cummax(m, 1)),
                      [(bf(3, 40), torch.where(ints(2, 37, hi=5) == 0, torch.arange(37), -1), mask(4, 40)),
                       (bf(5, 1), ints(5, 1, lo=-3), mask(5, 1))]),
    # Mimi's and EnCodec's codebook lookup: torch.cdist (p=2, over 25 rows: aten._euclidean_dist), then argmin
    "cdist": (lambda a, b: (torch.cdist(a, b), torch.cdist(a, b).argmin(-1), torch.cdist(a[0], b[0, :7])),
              [(bf(2, 30, 16), bf(2, 40, 16, seed=1)), (bf(1, 64, 33), bf(1, 27, 33, seed=2))]),
    # torch.equal (torch.istft's window check): a Python bool, here scaling tensors so the check compares it
    "equal": (lambda a, b, i: (a * torch.equal(a, b) + 2 * torch.equal(a, a * 1), a * torch.equal(a, a[:1]),
                               i * torch.equal(i, i.float()), i * torch.equal(i, i + 1)),
              [(bf(3, 33), bf(3, 33).index_fill(1, torch.tensor([5]), 9.0), ints(4, 6, lo=-9))]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_the_cpu(name):
    fn, sets = CASES[name]
    for inputs in sets:
        ttnn_eager.reset_stats()
        check(fn, *inputs, atol=0.03)  # (strict: a fallback fails)


@covers(aten.acos.default, aten.erfinv.default, aten.floor.default, aten.ceil.default, aten._is_all_true.default,
        aten.round.default, aten.round.decimals, aten.log2.default, aten.log10.default, aten.nan_to_num.default,
        aten.pow.Scalar, aten.pow.Tensor_Tensor, aten.clamp.Tensor)
@FEW
@given(shape=shapes(), data=st.data())
def test_elementwise_math(shape, data):
    x, y = values(shape, data.draw), values(shape, data.draw)
    check(lambda a, b: torch.stack([torch.acos(a.tanh()), torch.erfinv(a.tanh() * 0.9), torch.floor(a),
                                    torch.ceil(a), aten._is_all_true(a > -9).float().expand(a.shape),
                                    torch.round(a * 2), torch.round(a, decimals=1), 2.0 ** a,
                                    torch.pow(a.abs() + 0.5, b), torch.clamp(a, -b.abs(), b.abs()),
                                    torch.log2(a.abs() + 1), torch.log10(a.abs() + 1),
                                    torch.nan_to_num(torch.log(a), neginf=-5.0)]), x, y)


@covers(aten.atanh.default, aten.asinh.default, aten.acosh.default)
@FEW
@given(shape=shapes(), data=st.data())
def test_inverse_hyperbolic(shape, data):
    x, i = values(shape, data.draw), values(shape, data.draw, "int")
    check(lambda a: (torch.atanh(a.tanh() * 0.9), torch.asinh(a * 100), torch.acosh(a.abs() + 1.5),
                     torch.asinh(a * 1e-3) * 1e3), x)
    check(lambda t: (torch.asinh(t), torch.acosh(t.abs() + 1), *_classes(torch.atanh(t % 3 - 1))), i)


@covers(aten.logsumexp.default, aten.var.correction, aten.std.correction, aten.flip.default, aten.argmax.default,
        aten.prod.dim_int)
@FEW
@given(shape=shapes(), keepdim=st.booleans(), data=st.data())
def test_reductions_and_flips(shape, keepdim, data):
    x, i = values(shape, data.draw), values(shape, data.draw, "int")
    d = data.draw(st.integers(0, len(shape) - 1))
    check(lambda a: (torch.logsumexp(a, d, keepdim=keepdim), torch.flip(a, (d,))), x)
    check(lambda t: (torch.flip(t, (d,)), t.argmax(d, keepdim=keepdim)), i)
    if shape[d] > 1:
        check(lambda a: (torch.var(a, d, keepdim=keepdim), torch.std(a, d, correction=0)), x, atol=0.05)
    if shape[d] <= 4:  # (a product of more random terms leaves bfloat16's relative precision behind)
        check(lambda a, t: (a.prod(d, keepdim=keepdim), (t % 5).prod(d)), x, i, atol=0.05)


@covers(aten.nonzero.default, aten.repeat_interleave.Tensor, aten.index.Tensor)
@FEW
@given(shape=shapes(max_dims=2), data=st.data())
def test_value_dependent_shapes_and_indexing(shape, data):
    m, r, t = values(shape, data.draw, "bool"), values(shape[:1], data.draw, "nonneg") % 4, values(shape, data.draw, "int")
    check(torch.nonzero, m)
    check(torch.repeat_interleave, r)
    idx = torch.tensor([shape[-1] - 1, 0])
    check(lambda a: (a[..., idx], a[idx.clamp(max=shape[0] - 1)]), t)


def test_falcons_split_of_fused_qkv_and_gits_block_ids_run_on_the_device():
    """The two patterns of index.Tensor that fell back (issue 23): Falcon's fused_qkv[..., [-2], :] and GIT's
    masking_utils block_sequence_ids[batch_idx, q_idx] (an int64 table, exact)."""
    qkv = bf(2, 24, 6, 16)
    ids = torch.randint(-2**30, 2**30, (2, 24))
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        a = qkv.to(DEV)[..., [-2], :]
        b = ids.to(DEV)[torch.arange(2).view(2, 1, 1, 1).to(DEV), torch.arange(24).view(1, 1, 24, 1).to(DEV)]
    assert torch.equal(a.cpu(), qkv[..., [-2], :])
    assert torch.equal(b.cpu(), ids[torch.arange(2).view(2, 1, 1, 1), torch.arange(24).view(1, 1, 24, 1)])
    assert "gather" in rec.ttnn and "embedding" in rec.ttnn


def test_value_dependent_shapes_read_the_device_once_and_graph_capture_refuses_them():
    m = (torch.arange(64).reshape(2, 32) % 3 == 0).to(DEV)
    ttnn_eager.reset_stats()
    assert torch.equal(torch.nonzero(m).cpu(), torch.nonzero(m.cpu()))
    assert ttnn_eager.stats()["device_to_host"] == 3  # nonzero's read of the mask, then the test's two .cpu()
    r = torch.tensor([1, 2]).to(DEV)
    for region in (lambda: torch.nonzero(m), lambda: torch.repeat_interleave(r + 1), lambda: r[m[0, :2]]):
        g = torch.ttnn.TTNNGraph()
        with pytest.raises(RuntimeError, match="device-to-host read"):
            with torch.ttnn.graph(g):
                region()


def test_refused_arguments_fall_back_counted():
    """What the lowerings refuse runs on the CPU fallback (counted), with PyTorch's values."""
    i = torch.tensor([3, 1, 2])
    for fn, x in ((lambda t: (-2.0) ** t, i.float()), (lambda t: torch.var(t, 0), torch.ones(1)),
                  (lambda t: t.argmax(), i.to(DEV) * 2 ** 23 - 5)):  # integers beyond float32's exact 2**24
        ttnn_eager.reset_stats()
        ref = fn(x.cpu())
        out = fn(x.to(DEV))
        assert ttnn_eager.stats()["fallbacks"] == 1
        assert torch.allclose(out.cpu(), ref, equal_nan=True)


def test_an_l1_circular_buffer_clash_is_a_refusal_that_falls_back(monkeypatch):
    """lara_mini's causal depthwise conv1d: ttnn's program build raises "Statically allocated circular buffers
    ... clash with L1 buffers": a CoreMemoryError (not retried: no cache holds the op's own L1), which the
    dispatcher turns into the counted CPU fallback, with PyTorch's values."""
    from ttnn_eager.device import api
    real = api._resolve

    def resolve(op):
        if op != "gelu":
            return real(op)

        def clash(*args, **kwargs):
            raise RuntimeError("TT_THROW @ program.cpp:2624: tt::exception\ninfo:\nStatically allocated circular "
                               "buffers in program 120 clash with L1 buffers on core range [0-0 - 1-0]. L1 buffer "
                               "allocated at 892928 and static circular buffer region ends at 1170784")
        return clash
    monkeypatch.setattr(api, "_resolve", resolve)
    x = bf(3, 33)
    ttnn_eager.reset_stats()
    out = torch.nn.functional.gelu(x.to(DEV))
    assert ttnn_eager.stats()["fallbacks"] == 1
    assert torch.allclose(out.cpu(), torch.nn.functional.gelu(x), atol=0.01)  # (stored as bfloat16)
    with ttnn_eager.strict(), pytest.raises(RuntimeError, match="clash with L1 buffers"):
        torch.nn.functional.gelu(x.to(DEV))


@covers(aten.linalg_solve_triangular.default, aten.unfold.default, aten.bucketize.Tensor, aten._unique2.default,
        aten.unique_consecutive.default)
@FEW
@given(n=st.sampled_from([1, 2, 5, 33, 64]), cols=st.sampled_from([1, 7, 32]), upper=st.booleans(),
       left=st.booleans(), unit=st.booleans(), data=st.data())
def test_solves_windows_and_buckets(n, cols, upper, left, unit, data):
    a = _delta_system(2, n)
    a = a.mT if upper else a
    if not unit:  # a diagonal of either sign away from zero
        diag = values((2, n), data.draw).sign().add(0.5).sign() * (1 + values((2, n), data.draw).abs())
        a = a - torch.diag_embed(a.diagonal(0, -2, -1)) + torch.diag_embed(diag.to(torch.bfloat16).float())
    b = values((2, n, cols) if left else (2, cols, n), data.draw)
    check(lambda m, r: torch.linalg.solve_triangular(m, r, upper=upper, left=left, unitriangular=unit), a, b, atol=0.05)
    size, step = data.draw(st.integers(1, n)), data.draw(st.integers(1, 40))
    check(lambda t: t.unfold(1, size, step), b if left else b.mT)
    x, bounds = values((n, cols), data.draw), values((cols,), data.draw).sort().values
    check(lambda v, e: (torch.bucketize(v, e), torch.bucketize(v, e, right=True)), x, bounds)
    check(lambda i: torch.unique(i, return_counts=True), values((n, cols), data.draw, "int") % 7)
    check(lambda i: torch.unique_consecutive(i, return_inverse=True, return_counts=True),
          values((n, cols), data.draw, "int") % 3)


@covers(aten.scatter_reduce.two, aten.upsample_nearest2d.default, aten.upsample_nearest1d.default)
@FEW
@given(shape=shapes(min_dims=2, max_dims=2), out=st.sampled_from([1, 3, 31, 45]), data=st.data())
def test_scatter_extremes_and_nearest_sizes(shape, out, data):
    x, src = values(shape, data.draw), values(shape, data.draw)
    index = values(shape, data.draw, "nonneg") % shape[-1]
    for reduce in ("amax", "amin") + (("prod",) if shape[-1] <= 16 else ()):
        include = data.draw(st.booleans())
        check(lambda a, i, s: a.scatter_reduce(-1, i, s, reduce, include_self=include), x, index, src)
    check(lambda a: (F.interpolate(a[None, None], size=(out, shape[1] + 1)), F.interpolate(a[None], size=out)), x)


def test_the_new_lowerings_run_the_models_patterns_on_the_device():
    """qwen3_next's chunk solve (64 x 64, unit lower), inkling2's window of 4 over the sequence, Longformer's
    chunks: on the device, no fallback, and against float32 on the CPU as numbers (Pearson, max error)."""
    a, b = _delta_system(4, 64), bf(4, 64, 32)
    h, ctx = bf(6, 128, 16), bf(2, 8, 67)
    ttnn_eager.reset_stats()
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        x = torch.linalg.solve_triangular(a.to(DEV), b.to(DEV), upper=False, unitriangular=True).cpu()
        w = ctx.to(DEV).unfold(-1, 4, 1).flip(-1).transpose(1, 2).cpu()
        c = _chunk(h.to(DEV), 16).cpu()
    ref = torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True)
    pearson = torch.corrcoef(torch.stack([x.flatten(), ref.flatten()]))[0, 1].item()
    assert pearson >= 0.9999 and (x - ref).abs().max().item() <= 0.02 * ref.abs().max().item(), pearson
    assert torch.equal(w, ctx.unfold(-1, 4, 1).flip(-1).transpose(1, 2))
    assert torch.equal(c, _chunk(h, 16))
    assert ttnn_eager.stats()["fallbacks"] == 0 and "matmul" in rec.ttnn and "concat" in rec.ttnn


def test_a_wrong_solve_is_told_apart():
    """The accuracy check can fail: the solve of the transposed system (upper for lower) is far off."""
    a, b = _delta_system(2, 64), bf(2, 64, 16)
    ref = torch.linalg.solve_triangular(a, b, upper=False)
    wrong = torch.linalg.solve_triangular(a.mT.to(DEV), b.to(DEV), upper=True).cpu()  # = (a^T)^-1 b
    assert (wrong - ref).abs().max().item() > 0.1 * ref.abs().max().item()


def test_writes_through_unfold_and_strided_aliases_reach_the_base():
    """unfold into disjoint windows writes back through its inverse; into overlapping windows a write raises
    (one element in several windows: no single value to write back). A write into Longformer's chunks (an
    as_strided alias cut on the device) raises as well; into a strided alias of disjoint elements it takes the
    host route, counted."""
    x = bf(2, 5, 12)
    for d, size, step in ((2, 3, 3), (1, 2, 3), (2, 12, 12)):
        cpu, dev = x.clone(), x.to(DEV)
        cpu.unfold(d, size, step).mul_(2)
        dev.unfold(d, size, step).mul_(2)
        assert torch.equal(dev.cpu(), cpu)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.to(DEV).unfold(2, 3, 1).add_(1)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        _chunk(bf(2, 32, 4).to(DEV), 4)[:, 1].zero_()
    cpu, dev = x.clone(), x.to(DEV)
    cpu.as_strided((2, 3, 4), (60, 3, 14), 1).zero_()
    ttnn_eager.reset_stats()
    dev.as_strided((2, 3, 4), (60, 3, 14), 1).zero_()
    assert torch.equal(dev.cpu(), cpu) and ttnn_eager.stats()["fallbacks"] >= 1


def test_refused_forms_fall_back_counted():
    """What these lowerings refuse runs on the CPU fallback, counted, with PyTorch's values: a scatter_reduce
    prod of integers or of more than 16 entries along dim, bucketize of values and boundaries of two dtypes, a 3-D
    nearest resize by a non-integer factor."""
    x, i, s = bf(3, 8), ints(3, 5, hi=8), bf(3, 5, seed=1)
    for fn, args in ((lambda a, j, t: a.scatter_reduce(1, j, t, "prod"), (ints(3, 8, lo=-3, hi=4), i, ints(3, 5, lo=-3, hi=4))),
                     (lambda a, j, t: a.scatter_reduce(1, j, t, "prod"), (x, ints(3, 17, hi=8), bf(3, 17, seed=1) * 0.1 + 1)),
                     (lambda a, b: torch.bucketize(a, b), (x, torch.tensor([0, 1]))),
                     (lambda a: F.interpolate(a, size=(3, 5, 7)), (bf(1, 2, 2, 3, 4),))):
        ttnn_eager.reset_stats()
        out = fn(*[t.to(DEV) for t in args])
        assert ttnn_eager.stats()["fallbacks"] == 1
        assert torch.allclose(out.cpu(), fn(*args), atol=0.03)


@covers(aten.equal.default)
@FEW
@given(shape=shapes(), data=st.data())
def test_equal(shape, data):
    """torch.equal of a tensor and itself, a copy with one element changed, and another shape."""
    x = values(shape, data.draw)
    y = x.clone().flatten()
    y[data.draw(st.integers(0, y.numel() - 1))] += data.draw(st.sampled_from([1.0, -0.5, 100.0]))
    y = y.reshape(shape)
    check(lambda a, b: (a * torch.equal(a, a.clone()), a * torch.equal(a, b), a * torch.equal(a, a.unsqueeze(0)),
                        a * torch.equal(a, a.int())), x, y)


@covers(aten.cummax.default, aten.cummin.default)
@FEW
@given(shape=shapes(), data=st.data())
def test_cummax_cummin(shape, data):
    """Values and indices exactly as the CPU's, along any dimension: floats with many ties (rounded to
    halves: ties take the last index), integers and bools."""
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    x, i, m = values(shape, data.draw), values(shape, data.draw, "int"), values(shape, data.draw, "bool")
    check(lambda a: (*torch.cummax(a, d), *torch.cummin(a, d), *torch.cummax((a * 2).round(), d)), x)
    check(lambda t, b: (*torch.cummax(t, d), *torch.cummin(t, d), *torch.cummin(b, d)), i, m)


def test_cummax_cummin_nan_inf_and_signed_zeros_as_the_cpu():
    """PyTorch's rule: a NaN sticks from where it appears, its index that of the latest NaN; ties (+-0 and
    infinities too) take the last index."""
    nan, inf = float("nan"), float("inf")
    rows = torch.tensor([[nan, 1.0, nan, 2.0, 3.0, nan, -inf, 0.0],
                         [1.0, 1.0, 0.0, nan, 5.0, 5.0, nan, 9.0],
                         [-inf, -inf, 1.0, inf, inf, -0.0, 0.0, inf],
                         [0.0, -0.0, 0.0, -0.0, -inf, -inf, inf, inf]])
    for f in (torch.cummax, torch.cummin):
        for d in (0, 1):
            for got, want in zip(f(rows.to(DEV), d), f(rows, d)):
                with ttnn_eager.strict():
                    got = got.cpu()
                assert got.dtype == want.dtype and torch.equal(got.isnan(), want.isnan())
                assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(want))
    assert torch.equal(torch.cummax(torch.tensor([1.0, 1.0, 0.0]).to(DEV), 0).indices.cpu(), torch.tensor([0, 1, 1]))
    scalar = torch.tensor(2.5)
    assert [t.cpu().item() for t in torch.cummin(scalar.to(DEV), 0)] == [2.5, 0]
    empty = torch.cummax(torch.empty(0, 3).to(DEV), 1)
    assert empty.values.shape == (0, 3) and empty.indices.dtype == torch.int64


def test_cummax_cummin_of_integers_beyond_bfloat16_are_exact():
    """Integers up to 2**24 are compared as float32 keys, not bfloat16 ones (where 1001 is 1000): the CPU's
    values and indices, on the device."""
    x = torch.tensor([[1000, 1001, 999, 1003, 1002, 70001, 70000, 70003]])
    for f in (torch.cummax, torch.cummin):
        with ttnn_eager.strict():
            values_, indices = f(x.to(DEV), 1)
        assert torch.equal(values_.cpu(), f(x, 1).values) and torch.equal(indices.cpu(), f(x, 1).indices)


def test_cummax_of_integers_beyond_float32_falls_back_counted():
    """Integers compared as float32 keys must be exact: values beyond 2**24 run on the CPU fallback."""
    big = torch.tensor([[2 ** 24 + 1, 2 ** 24 + 3, 2 ** 24 + 2]])
    ttnn_eager.reset_stats()
    values_, indices = torch.cummax(big.to(DEV), 1)
    assert ttnn_eager.stats()["fallbacks"] == 1
    assert torch.equal(values_.cpu(), torch.cummax(big, 1).values) and torch.equal(indices.cpu(), torch.tensor([[0, 1, 1]]))


@covers(aten._euclidean_dist.default)
@FEW
@given(n=st.integers(1, 70), m=st.integers(26, 90), d=st.integers(1, 70), data=st.data())
def test_euclidean_dist(n, m, d, data):
    x, y = values((n, d), data.draw), values((m, d), data.draw)
    check(lambda a, b: (torch.cdist(a, b), torch.cdist(b, a).argmin(-1), aten._euclidean_dist(a, b)), x, y,
          atol=1e-4, rtol=1e-4)


def test_cdist_argmin_of_near_ties_as_the_cpu():
    """A nearest-codebook search (Mimi's quantizer) between bfloat16-valued points: the distances in float32 on
    the device pick the CPU's entry for points midway between two entries, where the decomposition with a
    bfloat16 product would not (62% of these agree on the CPU), nor distances rounded to bfloat16 (53%)."""
    g = torch.Generator().manual_seed(1)
    book = torch.randn(512, 64, generator=g).to(torch.bfloat16).float()
    i, j = torch.randint(0, 512, (300,), generator=g), torch.randint(0, 512, (300,), generator=g)
    x = ((book[i] + book[j]) / 2 + 1e-3 * torch.randn(300, 64, generator=g)).to(torch.bfloat16).float()
    want = torch.cdist(x[None], book[None])[0]
    with ttnn_eager.strict():
        got = torch.cdist(x[None].to(DEV), book[None].to(DEV))[0]
        assert torch.equal(got.argmin(-1).cpu(), want.argmin(-1))
    assert (got.cpu() - want).abs().max() < 1e-3


@covers(aten.masked_select.default, aten.rot90.default, aten.var_mean.correction, aten.std_mean.correction)
@FEW
@given(shape=shapes(min_dims=2), k=st.integers(-2, 5), data=st.data())
def test_masked_select_rot90_and_moments(shape, k, data):
    x, m = values(shape, data.draw), values(shape[1:], data.draw, "bool")
    check(torch.masked_select, x, m)
    check(lambda a: torch.rot90(a, k, (0, -1)), x)
    d = data.draw(st.integers(0, len(shape) - 1))
    if shape[d] > 1:
        check(lambda a: (*torch.var_mean(a, d), *torch.std_mean(a, d, correction=0, keepdim=True)), x, atol=0.05)


@covers(aten.grid_sampler_2d.default)
@FEW
@given(n=st.integers(1, 3), c=st.sampled_from([1, 3, 32, 40]), h=st.integers(1, 40), w=st.integers(1, 40),
       ho=st.integers(1, 9), wo=st.integers(1, 9), mode=st.sampled_from(["bilinear", "nearest", "bicubic"]),
       padding=st.sampled_from(["zeros", "border", "reflection"]), align=st.booleans(), data=st.data())
def test_grid_sample(n, c, h, w, ho, wo, mode, padding, align, data):
    x, g = values((n, c, h, w), data.draw), _grid(n, ho, wo, 2, seed=data.draw(st.integers(0, 99)), spread=1.5)
    check(lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding, align_corners=align), x, g)


def test_grid_sample_positions_are_float32():
    """The sampling positions and weights are computed in float32: with inputs exact in bfloat16 the device is
    float32 PyTorch on the CPU rounded once to bfloat16 (PyTorch's decomposition in bfloat16 was 5% off);
    with float32 storage it is float32 PyTorch. On random float32 grids (a quarter of the positions outside
    the input) it is closer to float32 PyTorch than PyTorch's own bfloat16 kernel is."""
    x, g = bf(8, 32, 20, 20), _grid(8, 300, 4, 2, seed=4)
    for mode, padding, align in (("bilinear", "zeros", False), ("bilinear", "reflection", True),
                                 ("nearest", "border", False), ("bicubic", "zeros", True), ("bicubic", "border", False),
                                 ("bicubic", "reflection", False), ("bicubic", "reflection", True)):
        ref = F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)
        with ttnn_eager.strict():
            out = F.grid_sample(x.to(DEV), g.to(DEV), mode=mode, padding_mode=padding, align_corners=align).cpu()
        assert ((out - ref).abs() <= ref.abs() * 2 ** -8 + 1e-6).all(), (mode, (out - ref).abs().max())
    x, g = torch.randn(8, 32, 20, 20, generator=torch.Generator().manual_seed(5)), torch.rand(8, 300, 4, 2) * 2.5 - 1.25
    for mode, padding in (("bilinear", "zeros"), ("bicubic", "border")):  # bicubic: GLM-4V's position tables
        ref = F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=False)
        cpu_bf16 = F.grid_sample(x.bfloat16(), g.bfloat16(), mode=mode, padding_mode=padding, align_corners=False)
        with ttnn_eager.strict():
            out = F.grid_sample(x.to(DEV), g.to(DEV), mode=mode, padding_mode=padding, align_corners=False).cpu()
        assert pcc(out, ref) >= 0.9995 and pcc(out, ref) > pcc(cpu_bf16.float(), ref), mode
        assert (out - ref).abs().max() < (cpu_bf16.float() - ref).abs().max(), mode


def test_grid_sample_float32_storage_is_float32_pytorch(restore_config):
    ttnn_eager.configure(float32_storage="float32")
    x, g = torch.randn(2, 3, 7, 10), torch.rand(2, 5, 6, 2) * 2.4 - 1.2
    for mode in ("bilinear", "nearest", "bicubic"):
        ref = F.grid_sample(x, g, mode=mode, padding_mode="reflection", align_corners=False)
        with ttnn_eager.strict():
            out = F.grid_sample(x.to(DEV), g.to(DEV), mode=mode, padding_mode="reflection", align_corners=False)
        assert (out.cpu() - ref).abs().max() <= 1e-5


def test_grid_sample_non_finite_positions_as_the_cpu():
    """NaN positions: NaN under zeros padding (bilinear: its weights), clamped to 0 under border/reflection,
    as PyTorch's CPU kernel; +-inf and 1e30 positions read nothing (zeros) or the border (bicubic: NaN, the
    fraction x - floor(x) of an infinite x being NaN, under every padding)."""
    x, g = bf(2, 3, 7, 10), _grid(2, 5, 6, 2, seed=6)
    g[0, 0, 0, 0], g[0, 0, 1, 1], g[1, 2, 2, 0], g[1, 3, 3] = float("nan"), float("inf"), -float("inf"), 1e30
    for mode in ("bilinear", "nearest", "bicubic"):
        for padding in ("zeros", "border", "reflection"):
            ref = F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=False)
            out = F.grid_sample(x.to(DEV), g.to(DEV), mode=mode, padding_mode=padding, align_corners=False).cpu()
            assert torch.equal(out.isnan(), ref.isnan()), (mode, padding)
            assert torch.allclose(out, ref, atol=0.02, equal_nan=True), (mode, padding)


def test_grid_sample_bicubic_pads_each_tap():
    """bicubic runs on the device (no fallback) and pads each of its 4x4 taps, not the position (PyTorch's
    get_value_bounded): padding the position first, as bilinear does, would be told apart near the border; so
    would a grid sample of the wrong rows (x and y swapped)."""
    x, g = bf(2, 3, 7, 10), _grid(2, 5, 6, 2, spread=1.1)
    for padding in ("border", "reflection"):
        ref = F.grid_sample(x, g, mode="bicubic", padding_mode=padding, align_corners=False)
        ttnn_eager.reset_stats()
        with ttnn_eager.strict():
            out = F.grid_sample(x.to(DEV), g.to(DEV), mode="bicubic", padding_mode=padding, align_corners=False).cpu()
        assert ttnn_eager.stats()["fallbacks"] == 0
        assert ((out - ref).abs() <= ref.abs() * 2 ** -8 + 1e-5).all(), (padding, (out - ref).abs().max())
        size = torch.tensor([10, 7])
        pixel = ((g + 1) * size / 2 - 0.5).clamp(min=0) if padding == "border" else None
        if pixel is not None:  # the position clamped first, then sampled: other values near the border
            pixel = torch.minimum(pixel, size - 1)
            clamped_first = F.grid_sample(x, (pixel + 0.5) * 2 / size - 1, mode="bicubic", padding_mode=padding,
                                          align_corners=False)
            assert (clamped_first - ref).abs().max() > 0.05
        flipped = F.grid_sample(x.to(DEV), g.flip(-1).to(DEV), mode="bicubic", padding_mode=padding,
                                align_corners=False).cpu()
        assert (flipped - ref).abs().max() > 0.5


@FEW
@given(c=st.sampled_from([1, 3, 32, 40]), h=st.integers(1, 30), w=st.integers(1, 30), k=st.integers(1, 12),
       pooled=st.integers(1, 8), ratio=st.integers(1, 3), aligned=st.booleans(), data=st.data())
def test_roi_align(c, h, w, k, pooled, ratio, aligned, data):
    x = values((2, c, h, w), data.draw)
    check(lambda a, b: _roi_align(a, b, pooled, 0.25, ratio, aligned), x, _boxes(k, w, h, seed=data.draw(st.integers(0, 99))))


def test_roi_align_runs_on_the_device_as_torchvisions_poolers_call_it():
    """MultiScaleRoIAlign (Faster R-CNN's box head: 7x7 bins, 2x2 samples, boxes mapped to two FPN levels) on
    the device with no fallback, against float32 torchvision on the CPU as numbers; an adaptive sampling
    ratio (0: per box, from its size) is refused and runs on the counted CPU fallback; the late lowering is
    made the first time the op is dispatched and stays out of REGISTRY."""
    import torchvision
    from ttnn_eager.core import registry
    feats = {"0": bf(2, 32, 32, 40), "1": bf(2, 32, 16, 20, seed=1)}
    boxes = [_boxes(40, 40, 32, batch=1, seed=s)[:, 1:].abs() for s in (2, 3)]
    pool = torchvision.ops.MultiScaleRoIAlign(["0", "1"], 7, 2)
    ref = pool(feats, boxes, [(128, 160)] * 2)
    ttnn_eager.reset_stats()
    with ttnn_eager.strict():
        out = pool({k: v.to(DEV) for k, v in feats.items()}, [b.to(DEV) for b in boxes], [(128, 160)] * 2).cpu()
    assert pcc(out, ref) >= 0.9999 and (out - ref).abs().max() <= 0.01 * ref.abs().max(), pcc(out, ref)
    op = torch.ops.torchvision.roi_align.default
    assert registry.late_entry(op).fn.__name__ == "roi_align" and op not in registry.REGISTRY
    x, b = bf(2, 8, 12, 15), _boxes(5, 15, 12)
    ttnn_eager.reset_stats()
    out = torchvision.ops.roi_align(x.to(DEV), b.to(DEV), 4, 0.25, 0)
    assert ttnn_eager.stats()["fallbacks"] == 1
    assert torch.allclose(out.cpu(), torchvision.ops.roi_align(x, b, 4, 0.25, 0), atol=0.03)
    wrong = torchvision.ops.roi_align(x.to(DEV), b[:, [0, 2, 1, 4, 3]].to(DEV), 4, 0.25, 2).cpu()  # x and y swapped
    assert (wrong - torchvision.ops.roi_align(x, b, 4, 0.25, 2)).abs().max() > 0.3


# ----------------------------------------------------------------------------------------------- issue 37
@covers(aten.copy.default)
@FEW
@given(shape=shapes(1, 3), data=st.data(), dtype=st.sampled_from([torch.float32, torch.int32, torch.bool]))
def test_functional_copy_broadcasts_and_casts_like_the_cpu(shape, data, dtype):
    """aten.copy (aot_autograd's functional copy_): src broadcast to self's shape, cast to its dtype; self
    unchanged."""
    x = values(shape, data.draw)
    src = values(shape[-1:], data.draw) * 4
    check(lambda a, b: (aten.copy(a.to(dtype), b), a), x, src)
    check(lambda a, b: aten.copy(a, b.to(dtype)), x, src)


@pytest.mark.parametrize("storage", ["float32", "mixed", "bfloat16"])
def test_a_wide_kernel_conv1d_runs_in_kernel_pieces(restore_config, storage):
    """Moonshine's first convolution (1 -> 64 channels, kernel 127, stride 64) under float32 activations reached
    ttnn's TT_FATAL "DRAM Auto slice could not find valid slice configuration" (a one-row output cannot be cut
    into rows): it is the sum of the convolutions of two pieces of its kernel (conv._kernel_pieces; more shapes,
    that stopped the process, in tests/test_nn.py's WIDE_ROWS). On the device, strict."""
    from ttnn_eager.device import api
    from ttnn_eager.lowerings import conv
    ttnn_eager.configure(float32_storage=storage)
    dtype = api.BFLOAT16 if storage == "bfloat16" else api.FLOAT32
    assert len(conv._kernel_pieces(1, 127, 1, 64, 64, dtype)) == (1 if storage == "bfloat16" else 2)
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(2, 1, 3840, generator=g), torch.randn(64, 1, 127, generator=g) / 11, torch.randn(64, generator=g)
    ref = F.conv1d(x, w, b, stride=64)
    with ttnn_eager.strict():
        out = F.conv1d(x.to(DEV), w.to(DEV), b.to(DEV), stride=64).cpu()
    assert out.shape == ref.shape and pcc(out, ref) >= (0.99999 if storage != "bfloat16" else 0.9999)


@pytest.mark.parametrize("storage", ["float32", "mixed"])
def test_float32_rows_gathered_keep_the_largest_magnitudes_and_infinities(restore_config, storage):
    """A float32 table is looked up as three bfloat16 parts (layout.table_parts): float32's largest magnitudes
    (a mask's finfo.min) rounded to an infinite first part and ±inf rows became NaN (-inf + inf) -- informer's
    ProbSparse attention mask indexed by its top queries gave a NaN output under mixed storage. Exact now."""
    ttnn_eager.configure(float32_storage=storage)
    f = torch.finfo(torch.float32)
    t = torch.tensor([f.min, f.max, -3.3e38, 1.0 + 2 ** -20, float("inf"), -float("inf"), float("nan"), 1e-30,
                      3.14159265]).reshape(-1, 1).repeat(1, 3)
    idx = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 0])
    with ttnn_eager.strict():
        outs = [t.to(DEV)[idx.to(DEV)].cpu(), F.embedding(idx.to(DEV), t.to(DEV)).cpu()]
    for out in outs:
        assert torch.equal(out.isnan(), t[idx].isnan()) and torch.equal(out.nan_to_num(0), t[idx].nan_to_num(0))


def test_a_reshape_to_tiny_trailing_dims_runs_row_major(restore_config):
    """FalconH1's Mamba2 einsum 'bclhn,bcshn->bclsh' first unsqueezes C [b, c, l, s, h] to [..., h, 1]: under
    float32 storage 2 GiB in TILE (each [h, 1] plane padded to whole tiles) for 64 MiB of values, out of the mock's
    DRAM. Such a reshape runs ROW_MAJOR, as a permute does (layout.permute_layout): exact, its elements' size."""
    from ttnn_eager.core.tensor import handle_of
    from ttnn_eager.device import api
    ttnn_eager.configure(float32_storage="float32")
    x = torch.randn(4, 64, 64, 64)
    y = x.to(DEV).unsqueeze(-1)
    h = handle_of(y)
    assert h.layout == api.ROW_MAJOR and api.device_bytes(h) < 8 << 20
    assert torch.equal(y.cpu(), x.unsqueeze(-1))
    assert handle_of(torch.randn(2, 24, 4, 16).to(DEV).unsqueeze(-1)).layout == api.TILE  # small: stays TILE
    c, b = torch.randn(2, 1, 64, 16, 32), torch.randn(2, 1, 64, 16, 32, generator=torch.Generator().manual_seed(1))
    with ttnn_eager.strict():
        out = torch.einsum("bclhn,bcshn->bclsh", c.to(DEV), b.to(DEV)).cpu()
    assert pcc(out, torch.einsum("bclhn,bcshn->bclsh", c, b)) > 0.99999
