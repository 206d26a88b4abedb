"""Issue 23 item 7 (the torchvision zoo, docs/zoo_vision.json): the ops torchvision families fell back on,
each against PyTorch float32 on the CPU (Pearson and max error), in strict mode (a CPU fallback fails)."""
import pytest
import torch

import ttnn_eager
from conftest import pcc
from ttnn_eager import counters

DEV = "ttnn:0"
aten = torch.ops.aten


def _close(out, ref, pearson=0.999, rel=0.03):
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, ref.shape, out.dtype, ref.dtype)
    got = out.cpu()
    assert pcc(got, ref) >= pearson, pcc(got, ref)
    assert (got - ref).abs().max().item() <= rel * max(ref.abs().max().item(), 1.0), (got - ref).abs().max()


# ------------------------------------------------------------------------------------------- multi-head attention
# nn.MultiheadAttention's fast path (no_grad, eval, batch_first) calls the fused _native_multi_head_attention:
# torchvision's ViT. core/attention.py decomposes it into projections, (masked) softmax attention and the
# output projection on the device.
MHA_CASES = {
    "self, no weights (ViT)": dict(need_weights=False),
    "self, averaged weights": dict(need_weights=True),
    "self, per-head weights": dict(need_weights=True, average_attn_weights=False),
    "key padding mask": dict(key_padding_mask="kp", need_weights=False),
    "causal src mask": dict(attn_mask="causal", need_weights=False),
}


@pytest.mark.parametrize("case", sorted(MHA_CASES))
@pytest.mark.parametrize("embed,heads", [(64, 2), (64, 4)])  # head_dim 32 (fused sdpa), 16 (decomposed)
def test_native_multi_head_attention_runs_on_the_device(case, embed, heads):
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(embed, heads, batch_first=True).eval()
    x = torch.randn(2, 7, embed)
    kw = dict(MHA_CASES[case])
    if kw.get("key_padding_mask") == "kp":
        kp = torch.zeros(2, 7, dtype=torch.bool)
        kp[1, 4:] = True
        kw["key_padding_mask"] = kp
    if kw.get("attn_mask") == "causal":
        kw["attn_mask"] = torch.triu(torch.ones(7, 7, dtype=torch.bool), 1)
    with torch.no_grad():
        ref = m(x, x, x, **kw)
        md = m.to(DEV)
        xd = x.to(DEV)
        kwd = {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        ttnn_eager.reset_stats()
        with ttnn_eager.strict():
            out = md(xd, xd, xd, **kwd)
    assert counters.aten_by_op()[aten._native_multi_head_attention.default] == 1  # (the fast path was taken)
    _close(out[0], ref[0])
    if ref[1] is None:
        assert out[1] is None
    else:
        _close(out[1], ref[1])


def test_native_multi_head_attention_cross_attention():
    """query, key and value distinct tensors: three projections by the packed weight's thirds."""
    torch.manual_seed(1)
    m = torch.nn.MultiheadAttention(64, 2, batch_first=True).eval()
    q, k, v = torch.randn(2, 5, 64), torch.randn(2, 9, 64), torch.randn(2, 9, 64)
    with torch.no_grad():
        ref = m(q, k, v, need_weights=False)[0]
        md = m.to(DEV)
        with ttnn_eager.strict():
            out = md(q.to(DEV), k.to(DEV), v.to(DEV), need_weights=False)[0]
    _close(out, ref)


def test_vit_encoder_block_runs_on_the_device():
    """torchvision's ViT encoder block (LayerNorm, MultiheadAttention, MLP) with no CPU fallback."""
    from torchvision.models.vision_transformer import EncoderBlock
    torch.manual_seed(0)
    block = EncoderBlock(num_heads=4, hidden_dim=128, mlp_dim=256, dropout=0.0, attention_dropout=0.0).eval()
    x = torch.randn(2, 17, 128)
    with torch.no_grad():
        ref = block(x)
        bd = block.to(DEV)
        with ttnn_eager.strict():
            out = bd(x.to(DEV))
    _close(out, ref)


# ------------------------------------------------------------------------------------------------ as_strided_
def test_as_strided_in_place_restrides_without_killing_the_process():
    """as_strided_ (the CPU kernel crashed the process: SIGSEGV) -- adaptive_avg_pool2d to 1x1 of a
    channels-last-strided input (the head of torchvision's Swin and MaxViT) restrides its mean so."""
    x = torch.randn(2, 5, 5, 8)
    ref = torch.nn.functional.adaptive_avg_pool2d(x.permute(0, 3, 1, 2), 1)
    with ttnn_eager.strict():
        out = torch.nn.functional.adaptive_avg_pool2d(x.to(DEV).permute(0, 3, 1, 2), 1)
    assert out.stride() == ref.stride()
    _close(out, ref)
    for size, stride, offset in [((3, 2), (2, 1), 0), ((2, 3), (1, 2), 0), ((2, 2), (3, 1), 1)]:
        t, td = torch.arange(6.0), torch.arange(6.0).to(DEV)
        t.as_strided_(size, stride, offset)
        td.as_strided_(size, stride, offset)
        assert td.shape == t.shape and td.stride() == t.stride() and td.storage_offset() == t.storage_offset()
        assert torch.equal(td.cpu(), t), (size, stride, td.cpu(), t)


# ------------------------------------------------------------------------------------------ 3-D convolutions
# core/convolution.py: conv3d (refused by the convolution lowering) as one conv2d over the stacked depth windows
# (torchvision r3d_18, mc3_18, r2plus1d_18, the Swin3D patch embedding).
CONV3D = [  # in, out, kernel, stride, padding, dilation, groups, input shape
    (3, 8, (3, 7, 7), (1, 2, 2), (1, 3, 3), 1, 1, (2, 3, 8, 20, 20)),  # r3d/mc3 stem
    (8, 8, (3, 1, 1), (2, 1, 1), (1, 0, 0), 1, 1, (1, 8, 5, 6, 6)),    # r2plus1d's temporal conv, strided
    (4, 6, (2, 4, 4), (2, 4, 4), 0, 1, 1, (1, 4, 8, 16, 16)),          # Swin3D's patch embedding
    (8, 8, 3, 1, 1, (2, 1, 1), 2, (1, 8, 7, 6, 6)),                    # dilated in depth, grouped
    (6, 6, (1, 3, 3), 1, (0, 1, 1), 1, 6, (1, 6, 3, 5, 5)),            # depthwise
]


@pytest.mark.parametrize("case", CONV3D, ids=[f"conv3d{i}" for i in range(len(CONV3D))])
def test_conv3d_runs_on_the_device_as_conv2d(case):
    cin, cout, k, s, p, d, g, shape = case
    torch.manual_seed(0)
    conv = torch.nn.Conv3d(cin, cout, k, s, p, d, g)
    x = torch.randn(*shape)
    with torch.no_grad():
        ref = conv(x)
        cd = conv.to(DEV)
        ttnn_eager.reset_stats()
        with ttnn_eager.strict():  # (a CPU fallback raises)
            out = cd(x.to(DEV))
    assert counters.fallback_by_op == {}
    _close(out, ref)


def test_conv3d_refusals_still_fall_back_counted():
    """A transposed 3-D convolution is not decomposed: the counted CPU fallback, the right values."""
    conv = torch.nn.ConvTranspose3d(4, 4, 2, stride=2)
    x = torch.randn(1, 4, 2, 3, 3)
    with torch.no_grad():
        ref = conv(x)
        ttnn_eager.reset_stats()
        out = conv.to(DEV)(x.to(DEV))
    assert counters.fallback_by_op[aten.convolution.default] == 1
    _close(out, ref, pearson=0.9999)


# ------------------------------------------------------------------------------------------------ 3-D pools
# core/convolution.py: max_pool3d_with_indices and avg_pool3d as the 2-D pool of every frame, then the same pool
# over each temporal window's frames (torchvision S3D's max and average pools).
POOL3D = [  # input shape, kernel, stride, padding, ceil_mode
    ((2, 3, 8, 12, 12), (1, 3, 3), (1, 2, 2), (0, 1, 1), False),  # S3D's spatial max pools
    ((1, 4, 7, 9, 9), (3, 3, 3), 1, 1, False),                     # S3D's inception branch pool
    ((1, 4, 7, 14, 14), (2, 7, 7), 1, 0, False),                   # S3D's final average pool
    ((1, 2, 7, 9, 10), (2, 3, 3), 2, (1, 1, 0), True),             # strided, padded, ceil_mode
    ((2, 5, 6, 8), (2, 2, 2), None, 0, True),                      # unbatched
]


@pytest.mark.parametrize("case", POOL3D, ids=[f"pool3d{i}" for i in range(len(POOL3D))])
def test_3d_pools_run_on_the_device_as_2d_pools(case):
    import torch.nn.functional as F
    shape, k, s, p, ceil = case
    torch.manual_seed(0)
    x = torch.randn(*shape).to(torch.bfloat16).float()  # (bfloat16-exact: the max pool is exact)
    xd = x.to(DEV)
    with ttnn_eager.strict():  # (a CPU fallback raises)
        values, index = F.max_pool3d(xd, k, s, p, ceil_mode=ceil, return_indices=True)
        ref_values, ref_index = F.max_pool3d(x, k, s, p, ceil_mode=ceil, return_indices=True)
        assert torch.equal(values.cpu(), ref_values) and torch.equal(index.cpu(), ref_index)
        for include in (True, False):
            _close(F.avg_pool3d(xd, k, s, p, ceil_mode=ceil, count_include_pad=include),
                   F.avg_pool3d(x, k, s, p, ceil_mode=ceil, count_include_pad=include), pearson=0.9999, rel=0.01)
        _close(F.avg_pool3d(xd, k, s, p, ceil_mode=ceil, divisor_override=5),
               F.avg_pool3d(x, k, s, p, ceil_mode=ceil, divisor_override=5), pearson=0.9999, rel=0.01)


def test_3d_pools_pass_their_opinfo_samples_on_the_device():
    """op_db's samples of max_pool3d and avg_pool3d (every 6th of their 584: each kernel, stride, padding,
    dilation and ceil_mode variant is among them), in strict mode (no CPU fallback)."""
    from torch.testing._internal.common_methods_invocations import op_db

    from ttnn_eager.tools import opinfo
    ran = 0
    for op in op_db:
        if opinfo.full_name(op) not in ("nn.functional.max_pool3d", "nn.functional.avg_pool3d"):
            continue
        for sample in list(op.sample_inputs("cpu", torch.float32))[::6]:
            x = sample.input.to(torch.bfloat16).float()
            ref = op(x, *sample.args, **sample.kwargs)
            with ttnn_eager.strict():
                out = op(x.to(DEV), *sample.args, **sample.kwargs)
            for o, r in zip(*(v if isinstance(v, tuple) else (v,) for v in (out, ref))):
                assert o.device.type == "ttnn" and o.shape == r.shape and o.dtype == r.dtype
                if r.is_floating_point() and r.numel():
                    _close(o, r, pearson=0.9999, rel=0.01)
                else:
                    assert torch.equal(o.cpu(), r), (opinfo.full_name(op), sample)
            ran += 1
    assert ran >= 8


# ------------------------------------------------------------------------------------------------ log2, log10
def test_log2_log10_match_the_cpu():
    """log2 (torchvision detection's LevelMapper: the FPN level of each box) and log10, on the device."""
    x = torch.rand(3, 40) * 100 + 0.01
    for f in (torch.log2, torch.log10):
        with ttnn_eager.strict():
            out = f(x.to(DEV))
        _close(out, f(x), pearson=0.9999, rel=0.005)
    powers = torch.tensor([1.0, 2.0, 4.0, 1024.0, 0.25])  # exact where the CPU is exact
    with ttnn_eager.strict():
        assert torch.equal(torch.log2(powers.to(DEV)).cpu(), torch.log2(powers))
    i = torch.arange(1, 9)
    with ttnn_eager.strict():
        out = torch.log2(i.to(DEV))
    assert out.dtype == torch.float32
    _close(out, torch.log2(i), rel=0.01)
