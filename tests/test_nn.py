"""torch.nn families on ttnn:0 (issue 15): convolution, pooling, batch/group norm, activations, padding,
recurrent cells. Per-op cases (CASES, gathered by tests/test_ops.py), property-based tests (hypothesis,
strict mode: no CPU fallback) against PyTorch on the CPU, and the module-level contracts: conv weights
prepared once, channels-last and non-contiguous images, refusals that name the op and argument."""
import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ttnn_eager

from conftest import covers, pcc, run_python
from ttnn_eager.device import api

DEV = "ttnn:0"
aten = torch.ops.aten
# Sliding-window ops build one program per configuration (about a second each on the mock device, then
# cached): few examples, from small sets of sizes, the same ones every run.
FEW = settings(max_examples=6, deadline=None, derandomize=True, database=None,
               suppress_health_check=list(HealthCheck))
MANY = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def bf(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16).float()


def close(got, ref, atol=0.03, rtol=0.03):
    """Every element within bfloat16 tolerance of the CPU's float32 result (shape and dtype equal)."""
    assert got.device.type == "ttnn" and got.shape == ref.shape and got.dtype == ref.dtype, \
        (got.shape, ref.shape, got.dtype, ref.dtype)
    got = got.cpu()
    if not ref.dtype.is_floating_point:
        assert torch.equal(got, ref)
        return
    scale = max(float(ref.abs().max()) if ref.numel() else 0.0, 1.0)
    err = (got - ref).abs()
    assert bool((err <= atol * scale + rtol * ref.abs()).all()), float(err.max())


def on_device(fn, *inputs, **tol):
    """fn on the CPU and, in strict mode (a CPU fallback raises), on ttnn:0: compared output by output."""
    ref = fn(*inputs)
    with torch.no_grad(), ttnn_eager.strict():
        out = fn(*[x.to(DEV) if isinstance(x, torch.Tensor) else x for x in inputs])
    for o, r in zip(out if isinstance(out, tuple) else (out,), ref if isinstance(ref, tuple) else (ref,)):
        close(o, r, **tol)
    return out


# ----------------------------------------------------------------------------------------------- cases
CASES = {
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [(bf(1, 3, 17, 19), bf(8, 3, 3, 3), bf(8))]),
    "conv1d": (lambda x, w: F.conv1d(x, w, padding=1), [(bf(2, 4, 10), bf(6, 4, 3))]),
    # the causal depthwise conv1d of linear-attention layers (Qwen3-Next: kernel 4, padding 3, cut to the input)
    "conv1d_causal_depthwise": (lambda x, w: F.conv1d(x, w, padding=3, groups=x.shape[1])[..., :x.shape[-1]],
                                [(bf(2, 40, 24), bf(40, 1, 4, scale=0.5))]),
    "conv2d_depthwise_stride2": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=2, groups=6),
                                 [(bf(1, 6, 11, 9), bf(6, 1, 5, 5, scale=0.3), bf(6))]),
    "conv2d_grouped": (lambda x, w: F.conv2d(x, w, padding=1, groups=4), [(bf(1, 8, 7, 6), bf(12, 2, 3, 3))]),
    "conv1d_grouped_1x1": (lambda x, w, b: F.conv1d(x, w, b, groups=4), [(bf(2, 16, 9), bf(16, 4, 1), bf(16))]),
    "conv_transpose2d": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
                         [(bf(1, 4, 6, 7), bf(4, 8, 3, 3), bf(8))]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1), [(bf(1, 8, 16, 16),)]),
    "max_pool2d_indices": (lambda x: F.max_pool2d(x, 2, return_indices=True), [(bf(2, 3, 8, 6),)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [(bf(2, 5, 11, 11),)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [(bf(2, 6, 9, 8),)]),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (2, 3), return_indices=True), [(bf(1, 4, 8, 9),)]),
    "native_batch_norm": (lambda x, m, v, w, b: aten.native_batch_norm(x, w, b, m, v, False, 0.1, 1e-5)[0],
                          [(bf(2, 5, 7, 6), bf(5), bf(5).abs() + 0.5, bf(5), bf(5))]),
    "batch_norm_no_training": (lambda x, m, v: aten._native_batch_norm_legit_no_training(x, None, None, m, v, 0.1,
                                                                                          1e-5)[0],
                               [(bf(3, 4), bf(4), bf(4).abs() + 0.5)]),
    "batch_norm_legit": (lambda x, m, v: aten._native_batch_norm_legit(x, None, None, m, v, True, 0.1, 1e-5)[0],
                         [(bf(3, 4, 5), bf(4), bf(4).abs() + 0.5)]),
    "batch_norm_no_stats": (lambda x: aten._native_batch_norm_legit.no_stats(x, None, None, True, 0.1, 1e-5)[0],
                            [(bf(3, 4, 5),)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), [(bf(2, 6, 5, 4), bf(6), bf(6))]),
    "elu": (F.elu, [(bf(5, 33),)]),
    "celu": (lambda x: F.celu(x, 0.5), [(bf(5, 33),)]),
    "selu": (F.selu, [(bf(5, 33),)]),
    "hardswish": (F.hardswish, [(bf(5, 33, scale=4),)]),
    "hardsigmoid": (F.hardsigmoid, [(bf(5, 33, scale=4),)]),
    "mish": (F.mish, [(bf(5, 33),)]),
    "softplus": (lambda x: F.softplus(x, beta=2, threshold=3), [(bf(5, 33),)]),
    "hardshrink": (F.hardshrink, [(bf(5, 33),)]),
    "softshrink": (F.softshrink, [(bf(5, 33),)]),
    "threshold": (lambda x: F.threshold(x, 0.2, -1.0), [(bf(5, 33),)]),
    "logsigmoid": (F.logsigmoid, [(bf(5, 33),)]),
    "prelu": (lambda x, w: F.prelu(x, w), [(bf(2, 3, 5), bf(3).abs())]),
    "glu": (lambda x: F.glu(x, 1), [(bf(3, 8, 5),)]),
    "log_softmax": (lambda x: F.log_softmax(x, -1), [(bf(3, 33),)]),
    "sign": (torch.sign, [(bf(3, 33),)]),
    "log1p": (lambda x: torch.log1p(x.abs()), [(bf(3, 33),)]),
    "expm1": (torch.expm1, [(bf(3, 33),)]),
    "maximum": (torch.maximum, [(bf(3, 33), bf(33, seed=1))]),
    "minimum": (torch.minimum, [(bf(3, 33), bf(33, seed=1))]),
    "xlogy": (lambda x, y: torch.xlogy(x, y), [(bf(3, 33).relu(), bf(3, 33).abs() + 0.1)]),
    "upsample_nearest1d": (lambda x: F.interpolate(x, scale_factor=3), [(bf(2, 3, 5),)]),
    "upsample_nearest2d": (lambda x: F.interpolate(x, size=(10, 21)), [(bf(2, 3, 5, 7),)]),
    "upsample_nearest3d": (lambda x: F.interpolate(x, scale_factor=2), [(bf(1, 2, 3, 4, 5),)]),
    "upsample_bilinear2d": (lambda x: F.interpolate(x, size=(10, 21), mode="bilinear"), [(bf(2, 3, 5, 7),)]),
    "upsample_bilinear2d_corners": (lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=True),
                                    [(bf(1, 2, 6, 5),)]),
    "upsample_bicubic2d": (lambda x: F.interpolate(x, size=(4, 9), mode="bicubic"), [(bf(2, 3, 5, 7),)]),
    # antialiased downscaling (Cosmos3's vision tower): a wider filter, still one matmul per axis
    "upsample_aa": (lambda x: (F.interpolate(x, size=(12, 17), mode="bilinear", antialias=True),
                               F.interpolate(x, scale_factor=0.37, mode="bicubic", antialias=True),
                               F.interpolate(x, size=(74, 20), mode="bilinear", antialias=True, align_corners=True)),
                    [(bf(2, 3, 37, 50),)]),
    "upsample_linear1d": (lambda x: F.interpolate(x, scale_factor=2.5, mode="linear", align_corners=True),
                          [(bf(2, 3, 9),)]),
    "roll": (lambda x: torch.roll(x, (2, -1), (1, 3)), [(bf(2, 5, 7, 3),)]),
    "roll_flat": (lambda x: torch.roll(x, 4), [(bf(3, 5),)]),
    "im2col": (lambda x: F.unfold(x, 3, dilation=(1, 2), padding=1, stride=2), [(bf(2, 3, 7, 9),)]),
    "col2im": (lambda x: F.fold(x, (7, 9), 3, padding=1), [(bf(2, 27, 63),)]),
    "adaptive_avg_pool2d_uneven": (lambda x: F.adaptive_avg_pool2d(x, (3, 4)), [(bf(2, 3, 5, 7),)]),
    "constant_pad": (lambda x: F.pad(x, (1, 2, -1, 3), value=0.5), [(bf(2, 3, 5, 4),)]),
    "reflection_pad1d": (lambda x: F.pad(x, (2, 1), mode="reflect"), [(bf(2, 3, 5),)]),
    "reflection_pad2d": (lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"), [(bf(1, 3, 5, 4),)]),
    "reflection_pad3d": (lambda x: F.pad(x, (1, 1, 1, 0, 0, 1), mode="reflect"), [(bf(1, 2, 3, 4, 3),)]),
    "replication_pad1d": (lambda x: F.pad(x, (2, 1), mode="replicate"), [(bf(2, 3, 5),)]),
    "replication_pad2d": (lambda x: F.pad(x, (2, 1, 1, 2), mode="replicate"), [(bf(1, 3, 5, 4),)]),
    "replication_pad3d": (lambda x: F.pad(x, (1, 1, 1, 0, 0, 1), mode="replicate"), [(bf(1, 2, 3, 4, 3),)]),
}


def test_cases_match_the_cpu():
    for name, (fn, sets) in CASES.items():
        for inputs in sets:
            ref = fn(*inputs)
            with torch.no_grad():
                out = fn(*[x.to(DEV) for x in inputs])
            outs, refs = (out, ref) if isinstance(ref, tuple) else ((out,), (ref,))
            for o, r in zip(outs, refs):
                try:
                    close(o, r)
                except AssertionError as e:
                    raise AssertionError(f"{name}: {e}") from e


# ----------------------------------------------------------------------------------------------- properties
@covers(aten.convolution.default)
@FEW
@given(n=st.sampled_from([1, 2]), c=st.sampled_from([1, 3, 8]), o=st.sampled_from([4, 16]),
       hw=st.sampled_from([(7, 9), (16, 16)]), k=st.sampled_from([1, 3]), stride=st.sampled_from([1, 2]),
       pad=st.sampled_from([0, 1]), grouping=st.sampled_from(["none", "depthwise", "groups"]),
       one_d=st.booleans(), bias=st.booleans(), transposed=st.booleans(), dilation=st.sampled_from([1, 2]),
       extra=st.booleans())
def test_convolution(n, c, o, hw, k, stride, pad, grouping, one_d, bias, transposed, dilation, extra):
    # depthwise: a sum of shifted windows; other groups (here 2 or the channel count with a multiplier of 2):
    # TT-NN's groups=; transposed ones with groups or dilation: the same, as the convolution of the mirrored
    # kernel over the input spread by the stride and padded (`extra`: a transposed one's output_padding)
    groups = 1 if grouping == "none" else c if grouping == "depthwise" or c % 2 else 2
    o = c if grouping == "depthwise" else 2 * c if groups == c else o
    f = {(False, False): F.conv2d, (False, True): F.conv1d, (True, False): F.conv_transpose2d,
         (True, True): F.conv_transpose1d}[transposed, one_d]
    spatial = (hw[1],) if one_d else hw
    w_shape = (c, o // groups) if transposed else (o, c // groups)
    x, w = bf(n, c, *spatial), bf(*w_shape, *[k] * len(spatial))
    b = bf(o) if bias else None
    kw = dict(stride=stride, padding=pad, groups=groups, dilation=dilation)
    if transposed:
        kw["output_padding"] = int(extra) * (max(stride, dilation) - 1)
    ref = f(x, w, b, **kw)
    with torch.no_grad(), ttnn_eager.strict():
        out = f(x.to(DEV), w.to(DEV), b.to(DEV) if bias else None, **kw)
    assert out.shape == ref.shape and pcc(out.cpu(), ref) >= 0.999
    assert (out.cpu() - ref).abs().max() <= 0.02 * ref.abs().max() + 1e-3


@pytest.mark.parametrize("one_d, cin, cout, groups, size, k, stride, pad, out_pad, dilation, bias", [
    (True, 64, 64, 64, 10, 4, 2, 0, 0, 1, False),  # mimi's / pocket-tts' depthwise upsampler: shifted windows
    (True, 16, 16, 16, 7, 6, 3, 1, 2, 1, True),
    (True, 8, 8, 8, 9, 3, 1, 2, 0, 2, True),
    (False, 8, 8, 8, (5, 6), 3, 2, 1, 1, 1, True),
    (False, 4, 4, 4, (4, 5), (2, 3), (2, 1), (0, 2), (1, 0), (2, 1), False),
    (True, 5, 5, 5, 6, 3, 2, 3, 1, 1, True),  # padding beyond the kernel: the spread input cropped
    (True, 128, 64, 64, 10, 4, 2, 0, 0, 1, True),  # grouped: TT-NN conv2d's groups= of the mirrored kernel
    (True, 8, 12, 4, 9, 3, 2, 1, 1, 1, False),
    (False, 6, 4, 2, (5, 6), 3, 2, 1, 1, 1, True),
    (False, 4, 6, 1, (4, 5), 3, 1, 1, 0, 2, True),  # dilated, groups 1
    (True, 4, 5, 1, 7, 2, 3, 2, 2, 3, False),
    (False, 8, 8, 2, (5, 5), (2, 3), (2, 1), (2, 0), (1, 0), (1, 2), True),
])
def test_transposed_convolution_with_groups_or_dilation(one_d, cin, cout, groups, size, k, stride, pad, out_pad,
                                                        dilation, bias):
    """Transposed convolutions with groups (depthwise included) or dilation run on the device, as the
    convolution of the mirrored kernel over the input spread by the stride: PyTorch's semantics (stride,
    padding, output_padding, dilation, groups, bias), against CPU float32."""
    torch.manual_seed(0)
    f = F.conv_transpose1d if one_d else F.conv_transpose2d
    spatial = (size,) if one_d else size
    kernel = (k,) if one_d else ((k, k) if isinstance(k, int) else k)
    x, w = bf(2, cin, *spatial), bf(cin, cout // groups, *kernel)
    b = bf(cout) if bias else None
    kw = dict(stride=stride, padding=pad, output_padding=out_pad, groups=groups, dilation=dilation)
    ref = f(x, w, b, **kw)
    with torch.no_grad(), ttnn_eager.strict():
        out = f(x.to(DEV), w.to(DEV), b.to(DEV) if bias else None, **kw).cpu()
    assert out.shape == ref.shape
    assert pcc(out, ref) >= 0.9999 and (out - ref).abs().max() <= 0.01 * ref.abs().max()


@pytest.mark.parametrize("storage", ["float32", "bfloat16"])
@pytest.mark.parametrize("one_d, n, c, o, size, k, bias", [
    (False, 2, 16, 8, (5, 7), 2, True),       # a U-Net's 2x2 upsampler
    (False, 1, 256, 128, (24, 24), 2, False),  # depth_pro's (TT-NN's conv_transpose2d clashed in L1 at float32)
    (False, 2, 3, 5, (4, 4), 4, True),
    (True, 2, 8, 4, (30,), 3, True),
])
def test_transposed_convolutions_whose_kernel_is_the_stride_are_a_matmul(restore_config, monkeypatch, storage, one_d,
                                                                         n, c, o, size, k, bias):
    """A transposed convolution whose kernel is its stride (no padding, one group) writes one block of the output
    per input pixel: the matmul of the pixels by the kernel [C, kh*kw*O], the blocks permuted into place
    (conv._blocks_matmul, taken once a call), of a computed kernel and of a module's staged one (packed). Strict,
    against float32 on the CPU; the result read again by another op."""
    from ttnn_eager.lowerings import conv
    ttnn_eager.configure(float32_storage=storage, math_fidelity="HiFi4" if storage == "float32" else None)
    calls = []
    real = conv._blocks_matmul
    monkeypatch.setattr(conv, "_blocks_matmul", lambda *a: calls.append(1) or real(*a))
    torch.manual_seed(0)
    f = F.conv_transpose1d if one_d else F.conv_transpose2d
    x, w = torch.randn(n, c, *size), torch.randn(c, o, *((k,) if one_d else (k, k))) / c ** 0.5
    b = torch.randn(o) if bias else None
    ref = f(x, w, b, stride=k)
    module = (nn.ConvTranspose1d if one_d else nn.ConvTranspose2d)(c, o, k, stride=k, bias=bias)
    with torch.no_grad():
        module.weight.copy_(w)
        if bias:
            module.bias.copy_(b)
    d = copy.deepcopy(module).to(DEV)  # (staged parameters: a packed kernel)
    with torch.no_grad(), ttnn_eager.strict():
        out = f(x.to(DEV), w.to(DEV), b.to(DEV) if bias else None, stride=k)  # (a computed kernel, permuted)
        twice = (out * 2).cpu()
        staged = d(x.to(DEV)).cpu()
    out = out.cpu()
    assert len(calls) == 2 and out.shape == ref.shape and staged.shape == ref.shape
    exact = storage == "float32"  # (with HiFi4: float32 operands keep their low bits)
    for result in (out, staged):
        assert pcc(result, ref) >= (0.999999 if exact else 0.9999)
        assert (result - ref).abs().max() <= (2e-3 if exact else 0.02) * ref.abs().max()
    assert torch.equal(twice, out * 2)


def test_opinfo_samples_of_the_transposed_convolutions_run_on_the_device():
    """Every op_db sample of conv_transpose1d/2d (not only tools/opinfo.py's first CAP: the later ones have
    groups and dilation) passes on the device within the OpInfo bfloat16 tolerance, with no CPU fallback."""
    import warnings

    from torch.testing._internal.common_methods_invocations import op_db

    from ttnn_eager.tools import opinfo
    ran = grouped = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in op_db:
            if op.name not in ("nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d"):
                continue
            for i, sample in enumerate(opinfo._samples(op, torch.float32, 100)):
                status, detail = opinfo.run_sample(op, sample)
                assert (status, detail) == ("pass", ""), (op.name, i, sample.kwargs, status, detail)
                ran += 1
                dilation = sample.kwargs.get("dilation", 1)
                grouped += sample.kwargs.get("groups", 1) != 1 or dilation not in (1, (1,), (1, 1))
    assert ran >= 20 and grouped >= 8, (ran, grouped)


@covers(aten.max_pool2d.default, aten.max_pool2d_with_indices.default, aten.avg_pool2d.default,
        aten._adaptive_avg_pool2d.default, aten.adaptive_max_pool2d.default)
@FEW
@given(n=st.sampled_from([1, 2]), c=st.sampled_from([3, 32]), hw=st.sampled_from([(8, 8), (9, 12)]),
       k=st.sampled_from([2, 3]), stride=st.sampled_from([1, 2]), pad=st.sampled_from([0, 1]),
       ceil=st.booleans(), count_pad=st.booleans())
def test_pooling(n, c, hw, k, stride, pad, ceil, count_pad):
    x = bf(n, c, *hw)
    pad = min(pad, k // 2)
    on_device(lambda x: F.max_pool2d(x, k, stride, pad, ceil_mode=ceil), x)
    out, _ = F.max_pool2d(x, k, stride, pad, ceil_mode=ceil, return_indices=True)
    with torch.no_grad(), ttnn_eager.strict():
        dv, di = F.max_pool2d(x.to(DEV), k, stride, pad, ceil_mode=ceil, return_indices=True)
    close(dv, out)
    # indices point at a maximum of the (bfloat16-exact) input: the CPU's, up to ties
    assert di.dtype == torch.int64 and di.shape == out.shape
    assert torch.equal(x.flatten(-2).gather(-1, di.cpu().flatten(-2)), out.flatten(-2))
    on_device(lambda x: F.avg_pool2d(x, k, stride, pad, ceil_mode=ceil, count_include_pad=count_pad), x)
    size = {(8, 8): (4, 2), (9, 12): (3, 4)}[hw]  # TT-NN's adaptive pools take sizes that divide the input
    on_device(lambda x: F.adaptive_avg_pool2d(x, size), x)
    on_device(lambda x: F.adaptive_max_pool2d(x, size), x)


@pytest.mark.parametrize("kw", [dict(kernel_size=2560, ceil_mode=True), dict(kernel_size=(32, 9), ceil_mode=True),
                                dict(kernel_size=11, padding=0, ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=10, stride=3, padding=1, ceil_mode=True, divisor_override=7)],
                         ids=["efficientnet", "rect", "no_pad_count", "divisor"])
def test_pool_windows_wider_than_the_input_are_a_global_reduction(kw):
    """EfficientNet/ALIGN's AvgPool2d(2560, ceil_mode=True) over a 7x7 map: ceil_mode's single window covers
    the input. TT-NN's sliding-window setup never returns on these, or crashes the process (SIGSEGV for a
    kernel of 32 over 7x7): they are sums (avg, PyTorch's divisor) or maxima over H and W instead."""
    x = bf(2, 64, 7, 7)
    on_device(lambda x: F.avg_pool2d(x, **kw), x)
    on_device(lambda x: F.avg_pool2d(x, **kw), x[0])  # unbatched
    kw = {k: v for k, v in kw.items() if k in ("kernel_size", "stride", "padding", "ceil_mode")}
    on_device(lambda x: F.max_pool2d(x, **kw), x)


@covers(aten.native_batch_norm.default, aten._native_batch_norm_legit_no_training.default,
        aten._native_batch_norm_legit.default, aten._native_batch_norm_legit.no_stats,
        aten.native_group_norm.default)
@MANY
@given(shape=st.sampled_from([(4, 3), (2, 5, 7), (2, 6, 5, 4), (1, 4, 33, 2)]), affine=st.booleans(),
       training=st.booleans(), eps=st.sampled_from([1e-5, 0.1]))
def test_batch_and_group_norm(shape, affine, training, eps):
    c = shape[1]
    x, w, b = bf(*shape), bf(c) if affine else None, bf(c) if affine else None
    mean, var = bf(c, seed=1), bf(c, seed=2).abs() + 0.5

    def bn(x, m, v, w, b):
        out = F.batch_norm(x, m, v, w, b, training, 0.1, eps)
        return out, m, v  # running statistics are updated in place in training

    ref = bn(x, mean.clone(), var.clone(), w, b)
    with torch.no_grad(), ttnn_eager.strict():
        dev = [t.to(DEV) if t is not None else None for t in (x, mean, var, w, b)]
        out = bn(*dev)
    for o, r in zip(out, ref):
        close(o, r)
    wb = (w, b) if affine else ()
    unpack = (lambda w, b: (w, b)) if affine else (lambda: (None, None))  # noqa: E731
    on_device(lambda x, m, v, *wb: aten._native_batch_norm_legit_no_training(x, *unpack(*wb), m, v, 0.1, eps)[0],
              x, mean, var, *wb)
    on_device(lambda x, *wb: aten._native_batch_norm_legit.no_stats(x, *unpack(*wb), True, 0.1, eps), x, *wb)
    if c % 2 == 0:
        on_device(lambda x, *wb: aten.native_group_norm(x, *unpack(*wb), shape[0], c, math.prod(shape[2:]), 2,
                                                        eps), x, *wb)


ACTIVATIONS = {
    aten.elu.default: lambda x: F.elu(x, 0.7), aten.celu.default: lambda x: F.celu(x, 1.5),
    aten.hardswish.default: F.hardswish, aten.hardsigmoid.default: F.hardsigmoid, aten.mish.default: F.mish,
    aten.softplus.default: lambda x: F.softplus(x, 1.5, 2.0), aten.hardshrink.default: F.hardshrink,
    aten.softshrink.default: lambda x: F.softshrink(x, 0.3), aten.threshold.default: lambda x: F.threshold(x, 0.1, 2.0),
    aten.log_sigmoid_forward.default: F.logsigmoid, aten.sign.default: torch.sign,
    aten.log1p.default: lambda x: torch.log1p(x.abs()), aten.expm1.default: torch.expm1,
    aten._log_softmax.default: lambda x: F.log_softmax(x, 0),
}


@covers(*ACTIVATIONS, aten._prelu_kernel.default, aten.glu.default, aten.maximum.default, aten.minimum.default,
        aten.xlogy.Tensor)
@MANY
@given(shape=st.lists(st.sampled_from([1, 2, 31, 33]), min_size=1, max_size=3).map(tuple),
       scale=st.sampled_from([0.5, 3.0]))
def test_activations(shape, scale):
    x = bf(*shape, scale=scale)
    for op, fn in ACTIVATIONS.items():
        on_device(fn, x)
    y = bf(*shape, seed=3)
    on_device(torch.maximum, x, y)
    on_device(torch.minimum, x, y)
    on_device(torch.xlogy, x.relu(), y.abs() + 0.1)
    if len(shape) >= 2:
        on_device(F.prelu, x, bf(shape[1], seed=4))
    on_device(F.prelu, x, torch.tensor([0.25]))
    if shape[-1] % 2 == 0:
        on_device(F.glu, x)


@covers(aten.constant_pad_nd.default, aten.reflection_pad1d.default, aten.reflection_pad2d.default,
        aten.reflection_pad3d.default, aten.replication_pad1d.default, aten.replication_pad2d.default,
        aten.replication_pad3d.default)
@MANY
@given(dims=st.sampled_from([1, 2, 3]), pads=st.lists(st.integers(0, 2), min_size=6, max_size=6),
       value=st.sampled_from([0.0, -1.5]), crop=st.booleans())
def test_padding(dims, pads, value, crop):
    x = bf(*[2, 3, 4, 5, 6][:2 + dims])
    pad = tuple(pads[:2 * dims])
    on_device(lambda x: F.pad(x, pad, mode="reflect"), x)
    on_device(lambda x: F.pad(x, pad, mode="replicate"), x)
    constant = tuple(-p if crop and i % 2 else p for i, p in enumerate(pad))
    on_device(lambda x: F.pad(x, constant, value=value), x)


@covers(aten.upsample_bilinear2d.default, aten.upsample_bicubic2d.default, aten.upsample_linear1d.default,
        aten._upsample_bilinear2d_aa.default, aten._upsample_bicubic2d_aa.default)
@FEW
@given(mode=st.sampled_from(["linear", "bilinear", "bicubic"]), corners=st.booleans(),
       size=st.sampled_from([(2, 5), (6, 4), (9, 33)]), scale=st.sampled_from([0.37, 0.5, 1.0, 1.7, 3.0]),
       by_size=st.booleans(), antialias=st.booleans())
def test_upsample_interpolating(mode, corners, size, scale, by_size, antialias):
    x = bf(2, 3, *(size[1:] if mode == "linear" else size))
    spatial = x.shape[2:]
    kw = dict(size=tuple(max(1, int(s * scale)) for s in spatial)) if by_size else dict(scale_factor=scale)
    antialias = antialias and mode != "linear"  # (PyTorch's antialiasing: bilinear and bicubic)
    if any(max(1, int(s * scale)) < 2 for s in spatial) and (antialias or scale < 0.5):
        return  # (an antialiased output of size 1 runs on the CPU fallback: test_antialiased_size_1_falls_back)
    on_device(lambda x: F.interpolate(x, mode=mode, align_corners=corners, antialias=antialias, **kw), x)


def test_antialiased_size_1_falls_back():
    """PyTorch's CPU antialiased kernels give every output row the first row's weights when the output width is
    1 (not separable there): such calls run on the counted CPU fallback, which is PyTorch's answer."""
    x = bf(2, 3, 6, 4)
    ttnn_eager.reset_stats()
    for size in ((2, 1), (1, 3)):
        close(F.interpolate(x.to(DEV), size=size, mode="bilinear", antialias=True),
              F.interpolate(x, size=size, mode="bilinear", antialias=True))
    assert ttnn_eager.stats()["fallbacks"] == 2


@covers(aten.roll.default)
@MANY
@given(shape=st.sampled_from([(5,), (3, 33), (2, 4, 7)]), shifts=st.lists(st.integers(-40, 40), min_size=1, max_size=3),
       flat=st.booleans())
def test_roll(shape, shifts, flat):
    x = bf(*shape)
    if flat:
        on_device(lambda x: torch.roll(x, shifts[0]), x)
    else:
        dims = list(range(len(shape)))[:len(shifts)]
        on_device(lambda x: torch.roll(x, shifts[:len(dims)], dims), x, atol=0, rtol=0)


@covers(aten.im2col.default, aten.col2im.default)
@FEW
@given(c=st.sampled_from([1, 3]), hw=st.sampled_from([(5, 6), (8, 8)]), k=st.sampled_from([1, 2, 3]),
       stride=st.sampled_from([1, 2]), pad=st.sampled_from([0, 1]), dilation=st.sampled_from([1, 2]),
       unbatched=st.booleans())
def test_unfold_and_fold(c, hw, k, stride, pad, dilation, unbatched):
    x = bf(*([] if unbatched else [2]), c, *hw)
    kw = dict(kernel_size=k, stride=stride, padding=pad, dilation=dilation)
    cols = on_device(lambda x: F.unfold(x, **kw), x, atol=0, rtol=0)
    on_device(lambda y: F.fold(y, hw, **kw), cols.cpu())


@covers(aten.upsample_nearest1d.default, aten.upsample_nearest2d.default, aten.upsample_nearest3d.default,
        aten.upsample_nearest1d.vec, aten.upsample_nearest2d.vec, aten.upsample_nearest3d.vec)
@MANY
@given(dims=st.sampled_from([1, 2, 3]), sizes=st.lists(st.sampled_from([1, 2, 5, 33]), min_size=3, max_size=3),
       factors=st.lists(st.sampled_from([1, 2, 3]), min_size=3, max_size=3), by_size=st.booleans())
def test_upsample_nearest(dims, sizes, factors, by_size):
    x = bf(2, 3, *sizes[:dims])
    with torch.inference_mode():  # F.interpolate's .vec overloads arrive whole
        ref = F.interpolate(x, scale_factor=tuple(float(f) for f in factors[:dims]))
        with ttnn_eager.strict():
            close(F.interpolate(x.to(DEV), scale_factor=tuple(float(f) for f in factors[:dims])), ref)
    if by_size:
        out = tuple(s * f for s, f in zip(sizes[:dims], factors[:dims]))
        on_device(lambda x: F.interpolate(x, size=out), x)
    else:
        on_device(lambda x: F.interpolate(x, scale_factor=tuple(float(f) for f in factors[:dims])), x)


# ----------------------------------------------------------------------------------------------- modules
class SmallCNN(nn.Module):
    """The ResNet families in miniature: conv-bn-relu, max pool, a residual block, global average pool."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.block = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                   nn.Conv2d(16, 16, 3, 1, 1), nn.BatchNorm2d(16))
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16), nn.Hardswish())
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = F.relu(x + self.block(x))
        x = self.dw(x)
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


def _small_cnn():
    torch.manual_seed(0)
    m = SmallCNN().eval()
    for bn in m.modules():
        if isinstance(bn, nn.BatchNorm2d):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    return m


def test_cnn_steady_state_converts_nothing():
    m = _small_cnn()
    x = bf(2, 3, 32, 32)
    with torch.no_grad():
        ref = m(x)
        d = copy.deepcopy(m).to(DEV)
        with ttnn_eager.strict():
            first = d(x.to(DEV))
            before = ttnn_eager.stats()
            second = d(x.to(DEV))
            after = ttnn_eager.stats()
    delta = {k: after[k] - before[k] for k in after}
    assert pcc(first.cpu(), ref) >= 0.999 and pcc(second.cpu(), ref) >= 0.999
    # conv weights and batch-norm scale/shift were prepared in the first forward: the second one converts
    # nothing and reads nothing from the device; it uploads only its input
    assert delta["layout_conversions"] == 0 and delta["device_to_host"] == 0 and delta["host_to_device"] == 1, delta
    assert delta["fallbacks"] == 0


def test_channels_last_and_non_contiguous_images():
    m = _small_cnn()
    x = bf(2, 3, 32, 32)
    with torch.no_grad():
        ref = m(x)
        d = copy.deepcopy(m).to(DEV)
        with ttnn_eager.strict():
            cl = d(x.to(memory_format=torch.channels_last).to(DEV))
            nc = d(bf(2, 3, 32, 32).transpose(-1, -2).contiguous().transpose(-1, -2).to(DEV))
            view = d(x.to(DEV).transpose(-1, -2).transpose(-1, -2))
            d_cl = copy.deepcopy(m).to(memory_format=torch.channels_last).to(DEV)
            cl_model = d_cl(x.to(DEV))
    for out in (cl, nc, view, cl_model):
        assert pcc(out.cpu(), ref) >= 0.999


def test_prepared_weights_follow_a_write():
    """A conv weight written in place (load_state_dict) is prepared again: no stale prepared form."""
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3, padding=1)
    x = bf(1, 3, 9, 9)
    d = copy.deepcopy(conv).to(DEV)
    with torch.no_grad():
        d(x.to(DEV))
        conv.weight.mul_(-2.0)
        d.load_state_dict(conv.state_dict())
        close(d(x.to(DEV)), conv(x))


@pytest.mark.parametrize("one_d, n, c, o, size, bias", [
    (False, 1, 16, 8, (1, 1), True),      # squeeze-excitation: a 1x1 image (MobileNetV3, EfficientNet)
    (False, 3, 576, 144, (1, 1), True),
    (False, 2, 144, 576, (1, 1), False),
    (False, 2, 40, 240, (7, 7), False),   # pointwise convolutions of odd widths
    (False, 1, 72, 24, (5, 9), True),
    (True, 2, 24, 40, (11,), True),       # conv1d of kernel 1 (in_channels < 32: a staged kernel)
])
def test_small_1x1_convolutions_are_matmuls_of_packed_kernels(one_d, n, c, o, size, bias):
    """A 1x1 convolution (stride 1, no padding, one group) whose prepared conv2d weight would take more than
    1.1x its packed block is a ttnn.linear (or matmul) of the pixels by the kernel and bias read from packs
    (lowerings/conv.py, layout.packs_matrix): values as float32 on the CPU, the bias staged back on the host
    (its reads exact), the kernel packed again after a write."""
    torch.manual_seed(0)
    conv = (nn.Conv1d if one_d else nn.Conv2d)(c, o, 1, bias=bias)
    x = bf(n, c, *size)
    d = copy.deepcopy(conv).to(DEV)
    with torch.no_grad(), ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        first, second = d(x.to(DEV)).cpu(), d(x.to(DEV)).cpu()
    assert rec.ttnn["linear"] + rec.ttnn["matmul"] == 2 and rec.ttnn["conv2d"] == 0, dict(rec.ttnn)
    ref = conv(x).detach()
    assert first.shape == ref.shape and torch.equal(first, second)
    assert pcc(first, ref) >= 0.9999 and (first - ref).abs().max() <= 0.01 * ref.abs().max()
    if bias:
        from ttnn_eager.core.tensor import handle_of
        assert handle_of(d.bias).tt is None and torch.equal(d.bias.cpu(), conv.bias.detach().bfloat16().float())
    with torch.no_grad():
        conv.weight.mul_(-2.0)
        d.load_state_dict(conv.state_dict())
        close(d(x.to(DEV)), conv(x))


@pytest.mark.parametrize("call, arg", [
    # (a conv3d runs on the device as one conv2d: core/convolution.py, tests/test_vision_zoo.py; its transpose not)
    (lambda x, w: F.conv_transpose3d(x.unsqueeze(2), w.unsqueeze(2)), "3-d convolution"),
])
def test_unsupported_convolutions_fall_back_or_name_the_argument(call, arg):
    x, w = bf(1, 4, 6, 6), bf(4, 4, 3, 3)
    ref = call(x, w)
    with torch.no_grad():
        before = ttnn_eager.stats()["fallbacks"]
        out = call(x.to(DEV), w.to(DEV))
        assert ttnn_eager.stats()["fallbacks"] == before + 1  # counted
        close(out, ref)
        with ttnn_eager.strict(), pytest.raises(NotImplementedError, match=f"convolution.*{arg}"):
            call(x.to(DEV), w.to(DEV))


def test_recurrent_modules_run_on_the_device():
    torch.manual_seed(0)
    x = bf(2, 5, 4)
    for m in (nn.LSTM(4, 8, num_layers=2, batch_first=True), nn.GRU(4, 8), nn.LSTMCell(4, 8), nn.GRUCell(4, 8),
              nn.RNN(2, 2, num_layers=2, batch_first=True, bias=False, nonlinearity="relu")):
        inp = x[:, :, :2] if isinstance(m, nn.RNN) else (x[0] if isinstance(m, (nn.LSTMCell, nn.GRUCell)) else x)
        with torch.no_grad():
            ref = m(inp)
            d = copy.deepcopy(m).to(DEV)
            with ttnn_eager.strict():
                got = d(inp.to(DEV))
        flat = lambda t: [t] if isinstance(t, torch.Tensor) else [y for z in t for y in flat(z)]  # noqa: E731
        for g, r in zip(flat(got), flat(ref)):
            close(g, r)


def test_rnn_unbatched_input_keeps_its_shape():
    """nn.RNN(batch_first=True) on an unbatched [3, 2] input returns [3, 2] (it returned [3, 1, 2]): the
    in-place transpose_ inside PyTorch's RNN changes the tensor's shape."""
    torch.manual_seed(0)
    m = nn.RNN(input_size=2, hidden_size=2, num_layers=2, batch_first=True, bias=False, nonlinearity="relu")
    x = bf(3, 2)
    with torch.no_grad():
        ref = m(x)
        got = copy.deepcopy(m).to(DEV)(x.to(DEV))
    close(got[0], ref[0])
    close(got[1], ref[1])


def test_in_place_view_ops_change_the_shape():
    x = bf(2, 3, 4)
    for fn in (lambda t: t.transpose_(0, 1), lambda t: t.unsqueeze_(1), lambda t: t[:, :1].squeeze_(1),
               lambda t: t.reshape(6, 4).t_()):
        ref = fn(x.clone())
        got = fn(x.to(DEV))
        close(got, ref.contiguous())


def test_vision_compare_reports_accuracy_counts_and_peak_memory():
    """`ttnn-eager vision`'s measurement (vision.compare), on the small CNN (the torchvision models take
    minutes to build their programs on the mock device; docs/vision.md has their figures)."""
    from ttnn_eager.tools import vision
    r = vision.compare(_small_cnn(), bf(1, 3, 32, 32))
    assert r["pcc_logits"] >= 0.999 and r["top1_agreement"] == 1.0
    assert r["fallbacks"] == 0 and r["layout_conversions"] == 0 and r["ttnn_ops"] > r["aten_ops"] > 10
    assert r["peak_device_memory_mib"] > 0


def test_in_place_ops_whose_functional_is_decomposed_run_on_the_device():
    """ReLU6(inplace=True) is hardtanh_: its functional hardtanh is on the decompositions allowlist."""
    x = bf(3, 40, scale=4)
    with torch.no_grad(), ttnn_eager.strict():
        d = x.to(DEV)
        nn.ReLU6(inplace=True)(d)
        F.leaky_relu_(d, 0.1)
    close(d, F.leaky_relu(F.relu6(x), 0.1))


def test_binary_ops_with_an_empty_operand():
    """RMSNorm on a [0, 5] input multiplies an empty tensor by its weight: an empty result, not a ttnn
    broadcast error (TT-NN sees the empty operand's padded tile)."""
    a, b = torch.randn(0, 5), bf(5)
    with ttnn_eager.strict():
        for fn in (lambda a, b: a * b, lambda a, b: a + b, lambda a, b: a - 1.5, lambda a, b: a > b):
            close(fn(a.to(DEV), b.to(DEV)), fn(a, b))
        close(nn.RMSNorm([5], 1e-3).to(DEV)(a.to(DEV)), nn.RMSNorm([5], 1e-3)(a))


@pytest.mark.parametrize("hw, k, stride, pad, dilation, ceil", [
    ((9, 11), 3, 2, 1, 1, True), ((224, 224), 3, 2, 1, 1, False), ((8, 8), 2, 2, 0, 1, False),
    ((10, 7), (3, 2), (2, 1), (1, 0), (2, 1), True), ((7, 7), 3, 1, 1, 1, False)])
def test_float32_storage_pools_are_their_windows_exactly(restore_config, hw, k, stride, pad, dilation, ceil):
    """With float32 storage TT-NN's pools (bfloat16 only) are not called and nothing falls back: a pool is its
    windows reduced over the taps. max_pool2d's values and its indices (int64, PyTorch's first-wins tap on
    ties: a constant image) equal the CPU's bit for bit -- a 224 x 224 image's positions need float32, not
    bfloat16 -- and so does a window of -inf; avg_pool2d's, with and without counting the padding and with a
    divisor_override, agree to float32's rounding; convolutions stay on the device. Values as float32 on the
    CPU (bfloat16 would not hold them)."""
    ttnn_eager.configure(float32_storage="float32")
    torch.manual_seed(0)
    x = torch.randn(2, 3, *hw)
    x[0, 0, :3, :3] = float("-inf")
    x[1, 2] = 0.5  # a constant channel: every window ties
    kw = dict(stride=stride, padding=pad, ceil_mode=ceil)
    with torch.no_grad(), ttnn_eager.strict():
        d = x.to(DEV)
        values, indices = F.max_pool2d(d, k, dilation=dilation, return_indices=True, **kw)
        want, want_indices = F.max_pool2d(x, k, dilation=dilation, return_indices=True, **kw)
        assert torch.equal(values.cpu(), want) and indices.dtype == torch.int64
        assert torch.equal(indices.cpu(), want_indices)
        assert torch.equal(F.max_pool2d(d, k, dilation=dilation, **kw).cpu(), want)
        x[0, 0, :3, :3] = 1.0  # (an average of -inf is -inf on both sides; close() takes finite values)
        d = x.to(DEV)
        if dilation == 1:
            for extra in (dict(count_include_pad=True), dict(count_include_pad=False), dict(divisor_override=5)):
                close(F.avg_pool2d(d, k, **kw, **extra), F.avg_pool2d(x, k, **kw, **extra), atol=1e-6, rtol=1e-6)
        close(F.adaptive_avg_pool2d(d, (2, 1)), F.adaptive_avg_pool2d(x, (2, 1)), atol=1e-6, rtol=1e-6)
        w = torch.randn(8, 3, 3, 3)
        assert pcc(F.conv2d(d, w.to(DEV), padding=1).cpu(), F.conv2d(x, w, padding=1)) >= 0.99999


@pytest.mark.parametrize("storage, n, c, o, size, k, stride, groups, transposed", [
    ("float32", 286, 256, 256, 7, 3, 1, 1, False),  # the detectors' box head (fasterrcnn_resnet50_fpn_v2)
    ("float32", 300, 128, 256, 14, 3, 2, 1, False),
    ("float32", 260, 256, 256, 7, 3, 1, 2, False),  # grouped: batch chunks times group chunks
    ("float32", 300, 256, 256, 7, 3, 2, 1, True),
    ("bfloat16", 600, 256, 256, 7, 3, 1, 1, False),
])
def test_convolutions_of_large_batches_run_in_batch_chunks(restore_config, storage, n, c, o, size, k, stride, groups,
                                                             transposed):
    """TT-NN's DRAM slicing never splits the batch: a conv whose one output row of every image does not fit
    L1 was a TT_FATAL ("DRAM Auto slice could not find valid slice configuration"; float32 storage halves the
    batch that fits). It runs in chunks of the batch (conv._batches), exact: float32 storage against float32
    on the CPU to float32's rounding, no fallback."""
    from ttnn_eager.lowerings import conv
    ttnn_eager.configure(float32_storage=storage)
    torch.manual_seed(0)
    x, b = torch.randn(n, c, size, size), torch.randn(o)
    w = torch.randn(*((c, o // groups) if transposed else (o, c // groups)), k, k) / (c * k * k) ** 0.5
    f = F.conv_transpose2d if transposed else F.conv2d
    kw = dict(stride=stride, padding=1, groups=groups)
    assert len(conv._batches(n, c, o, (k, k), (stride, stride), (1, 1), (1, 1),
                             api.FLOAT32 if storage == "float32" else api.BFLOAT16)) > 1
    with torch.no_grad(), ttnn_eager.strict():
        out = f(x.to(DEV), w.to(DEV), b.to(DEV), **kw).cpu()
    ref = f(x, w, b, **kw)
    assert out.shape == ref.shape
    if storage == "float32":
        assert pcc(out, ref) >= 0.999999 and (out - ref).abs().max() <= 1e-4 * ref.abs().max()
    else:
        assert pcc(out, ref) >= 0.9999 and (out - ref).abs().max() <= 0.02 * ref.abs().max()


@pytest.mark.parametrize("shape, weight, kw", [
    ((64, 64, 1, 1), (64, 64, 3, 3), dict(padding=1)),             # ResNet's layer4 at CIFAR's 32x32
    ((32, 256, 2, 2), (256, 256, 3, 3), dict(padding=1)),
    ((8, 64, 8, 1), (64, 64, 3, 3), dict(padding=1)),
    ((16, 64, 4, 4), (128, 64, 3, 3), dict(padding=1, stride=2)),  # a 2x2 output of stride 2
    ((64, 64, 1, 1), (64, 32, 3, 3), dict(padding=1, groups=2)),
    ((64, 64, 5), (64, 64, 5), dict(padding=0)),                  # conv1d with a 1-long output
    ((32, 128, 4, 4), (256, 128, 1, 1), dict(stride=2)),           # ResNet-18's layer4 downsample at 32x32
])
def test_convolutions_with_outputs_one_or_two_columns_wide_run_widened(shape, weight, kw):
    """TT-NN conv2d stopped in TT_FATAL "reader_indices_actual_page_size <= reader_indices_worst_case_page_size"
    for a kernel wider than 1 and an output 1 or 2 columns wide once the batch grew (1x1 from batch 16, 2x2 from
    8): such convolutions run on the input with zero columns added, their output cropped back (conv.py,
    MIN_OUTPUT_WIDTH). Strict mode, against float32 on the CPU."""
    torch.manual_seed(0)
    x, w, b = torch.randn(shape), torch.randn(weight) / (weight[1] * weight[-1] ** 2) ** 0.5, torch.randn(weight[0])
    f = F.conv2d if len(shape) == 4 else F.conv1d
    with torch.no_grad(), ttnn_eager.strict():
        out = f(x.to(DEV), w.to(DEV), b.to(DEV), **kw).cpu()
    ref = f(x, w, b, **kw)
    assert out.shape == ref.shape and pcc(out, ref) >= 0.9999 and (out - ref).abs().max() <= 0.02 * ref.abs().max()


@pytest.mark.parametrize("shape, weight, kw", [
    ((2, 128, 2304), (256, 128, 1), {}),                            # pocket_tts' decoder: a 1x1 kernel, a matmul
    ((2, 128, 2304), (64, 128, 3), dict(padding=1)),                # a sliding window of the same long input
])
def test_long_conv1d_inputs_whose_one_high_image_would_pad_to_tiles(shape, weight, kw):
    """A conv1d's [N, C, L] is the image [N, C, 1, L]; for a long L that reshape's tile padding (32x) is 16 MiB
    or more, and the reshape comes back ROW_MAJOR (layout.permute_layout); the 1x1 kernel's matmul then stopped
    in TT_FATAL "Inputs to matmul must be tilized" (pocket_tts_audio_tokenizer_decoder, xcodec2 in the zoo).
    Strict mode, against float32 on the CPU."""
    torch.manual_seed(0)
    conv, x = torch.nn.Conv1d(shape[1], weight[0], weight[2], **kw).eval(), torch.randn(shape)
    with torch.no_grad():
        ref = conv(x)
        with ttnn_eager.strict():  # (the module's weight: staged, as a model's)
            out = conv.to(DEV)(x.to(DEV)).cpu()
    assert out.shape == ref.shape and pcc(out, ref) >= 0.9999 and (out - ref).abs().max() <= 0.02 * ref.abs().max()


# One-row convolutions whose kernel row TT-NN's DRAM slicing cannot fit (conv._kernel_pieces): (storage, n, c, o, length,
# kernel, groups, stride, padding). Each reached ttnn and stopped in its TT_FATAL or TT_THROW before the kernel
# pieces (a dead process on the device); they run in a subprocess, so that a regression cannot take pytest down.
WIDE_ROWS = [
    ("float32", 1, 64, 64, 200, 128, 16, 1, 64),    # width slicing's circular buffers: 1682848 B (wav2vec2's, shrunk)
    ("float32", 2, 64, 64, 40, 128, 16, 1, 64),     # the same, 41 columns (refused: "no configuration fits L1")
    ("float32", 2, 768, 768, 40, 128, 16, 1, 64),   # wav2vec2-base's positional conv1d
    ("bfloat16", 1, 1024, 1024, 200, 184, 1, 1, 0),  # 368 bytes a channel at 1024 channels: DRAM auto slice
    ("float32", 2, 64, 64, 3840, 63, 1, 64, 0),     # 252 bytes, but stride 64 at 64 channels: DRAM auto slice
    ("float32", 2, 64, 64, 3840, 127, 1, 64, 0),    # moonshine's kernel at 64 channels (refused before)
    ("float32", 2, 1, 16, 1984, 127, 1, 64, 0),     # 30 columns: width slicing could not cut it (refused before)
    ("mixed", 2, 1, 64, 3840, 127, 1, 64, 0),       # moonshine's first convolution
    ("float32", 2, 1, 512, 3840, 92, 1, 5, 0),      # 368 bytes at a stride to 512 outputs: DRAM auto slice
]


def test_wide_kernel_rows_are_sums_of_kernel_pieces_in_a_subprocess():
    """A one-row convolution (conv1d) whose kernel row is wider than TT-NN's DRAM slicing fits for its channels
    and stride is the sum of the convolutions of its kernel's pieces (conv._kernel_pieces): every WIDE_ROWS case
    in strict mode (no fallback), with bias, against float32 on the CPU, in a fresh interpreter that must exit
    normally."""
    code = f"""
import torch, torch.nn.functional as F, ttnn_eager
from ttnn_eager.tools.compare import pcc
for storage, n, c, o, length, k, groups, stride, pad in {WIDE_ROWS!r}:
    ttnn_eager.configure(float32_storage=storage)
    g = torch.Generator().manual_seed(k)
    x, b = torch.randn(n, c, length, generator=g), torch.randn(o, generator=g)
    w = torch.randn(o, c // groups, k, generator=g) / (c // groups * k) ** 0.5
    ref = F.conv1d(x, w, b, stride=stride, padding=pad, groups=groups)
    with torch.no_grad(), ttnn_eager.strict():
        out = F.conv1d(x.to("ttnn:0"), w.to("ttnn:0"), b.to("ttnn:0"), stride=stride, padding=pad, groups=groups).cpu()
    print("CASE", storage, c, k, out.shape == ref.shape, pcc(out, ref), ((out - ref).abs().max() / ref.abs().max()).item())
print("survived")
"""
    r = run_python(code)
    assert r.returncode == 0 and "survived" in r.stdout, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("CASE")]
    assert len(rows) == len(WIDE_ROWS)
    for (_, storage, c, k, same, p, rel), case in zip(rows, WIDE_ROWS):
        assert same == "True", case
        exact = storage != "bfloat16"
        assert float(p) >= (0.999999 if exact else 0.9999) and float(rel) <= (1e-5 if exact else 0.02), (case, p, rel)


@pytest.mark.parametrize("c, o, kw, stride, dtype, pieces", [
    (48, 48, 128, 1, api.FLOAT32, [(0, 64), (64, 128)]),          # 96 taps the widest at <= 256 channels
    (1024, 1024, 184, 1, api.BFLOAT16, [(0, 92), (92, 184)]),     # 128 at <= 2048
    (64, 64, 63, 64, api.FLOAT32, [(0, 32), (32, 63)]),           # 32 at a stride, from 64 channels
    (1, 64, 92, 64, api.FLOAT32, [(0, 92)]),                      # 368 bytes fit at a stride to 256 outputs
    (1, 512, 92, 5, api.FLOAT32, [(0, 31), (31, 62), (62, 92)]),  # not beyond
    (4096, 4096, 46, 1, api.BFLOAT16, [(0, 46)]),
])
def test_kernel_pieces_are_as_wide_as_measured_to_fit(c, o, kw, stride, dtype, pieces):
    """conv._kernel_pieces: nearly equal pieces covering the kernel, each within the measured bytes; a
    convolution of more than one output row is never cut (TT-NN slices its rows)."""
    from ttnn_eager.lowerings import conv
    assert conv._kernel_pieces(1, kw, c, o, stride, dtype) == pieces
    assert conv._kernel_pieces(2, kw, c, o, stride, dtype) == [(0, kw)]


def test_pools_of_many_small_images_run_in_batch_chunks():
    """TT-NN's pools never slice the batch: 2048 windows of 4x4 x 256 channels (Hiera's query pooling in SAM2)
    stopped in TT_FATAL "DRAM Auto slice could not find valid slice configuration". Pooled in chunks of whole
    images (pooling.POOL_BATCH_CHANNELS): strict mode, the CPU's values (bfloat16 input), indices pointing at
    the maxima."""
    from ttnn_eager.lowerings import pooling
    x = torch.randn(2048, 256, 4, 4).to(torch.bfloat16).float()
    assert x.shape[0] * x.shape[1] > pooling.POOL_BATCH_CHANNELS
    d = x.to(DEV)
    with torch.no_grad(), ttnn_eager.strict():
        values, indices = F.max_pool2d(d, 2, 2, return_indices=True)
        avg = F.avg_pool2d(d, 3, 1, padding=1).cpu()
    ref, _ = F.max_pool2d(x, 2, 2, return_indices=True)
    assert torch.equal(values.cpu(), ref)
    assert torch.equal(x.flatten(2).gather(2, indices.cpu().flatten(2)).view_as(ref), ref)
    assert (avg - F.avg_pool2d(x, 3, 1, padding=1)).abs().max() <= 0.02


def test_a_pool_that_ttnn_writes_unflattened_keeps_its_values():
    """TT-NN's max pool writes [N, OH, OW, C] rather than its flat [1, 1, N*OH*OW, C] when it slices the input
    through DRAM (1024 8x8 images of 128 channels, as a chunk of SAM2 Hiera's query pooling: an AssertionError
    in the channels-last record before); 512 come flat. Strict mode, the CPU's values, both sizes."""
    for n in (512, 1024):
        x = torch.randn(n, 128, 8, 8).to(torch.bfloat16).float()
        with torch.no_grad(), ttnn_eager.strict():
            y = F.max_pool2d(x.to(DEV), 2, 2)
            z = (y * 2).cpu()  # (an op after it: the channels-last record read)
        assert torch.equal(y.cpu(), F.max_pool2d(x, 2, 2)) and torch.equal(z, F.max_pool2d(x, 2, 2) * 2)


# ------------------------------------------------------------------------------------------------ embedding bags
def test_embedding_bag_sums_and_means_on_the_device():
    """aten._embedding_bag (and _forward_only, F.embedding_bag without grad) as a lookup and a per-bag sum
    (core/embedding_bag.py): sum and mean, per_sample_weights, include_last_offset, empty bags; the auxiliary
    outputs equal the CPU kernel's; bad offsets raise PyTorch's error; max mode stays on the counted fallback."""
    torch.manual_seed(0)
    w = bf(50, 16)
    for mode, weighted, last in [(0, False, False), (0, True, True), (1, False, False), (1, False, True)]:
        idx = torch.randint(0, 50, (20,))
        off = torch.tensor([0, 3, 3, 10, 20] if last else [0, 3, 3, 10])  # (an empty bag: 3..3)
        psw = bf(20).abs() if weighted else None
        for op in (aten._embedding_bag.default, aten._embedding_bag_forward_only.default):
            ref = op(w, idx, off, False, mode, False, psw, last, -1)
            with ttnn_eager.strict():
                out = op(w.to(DEV), idx.to(DEV), off.to(DEV), False, mode, False,
                         None if psw is None else psw.to(DEV), last, -1)
            close(out[0], ref[0])
            for o, r in zip(out[1:], ref[1:]):
                assert o.device.type == "ttnn" and o.dtype == r.dtype and torch.equal(o.cpu(), r)
    i2, p2 = torch.randint(0, 50, (6, 16)), bf(6, 16).abs()  # Kimi-K2.5's form: 2-D bags, weighted taps
    on_device(lambda i, t, p: F.embedding_bag(i, t, per_sample_weights=p, mode="sum"), i2, w, p2)
    bag = nn.EmbeddingBag(50, 16, mode="mean")
    ref = bag(i2)
    with torch.no_grad(), ttnn_eager.strict():
        close(bag.to(DEV)(i2.to(DEV)), ref.detach())
    with pytest.raises(RuntimeError, match=r"offsets\[0\] has to be 0"):
        F.embedding_bag(i2.flatten().to(DEV), w.to(DEV), torch.tensor([1, 3], device=DEV))
    ttnn_eager.reset_stats()
    close(F.embedding_bag(i2.to(DEV), w.to(DEV), mode="max"), F.embedding_bag(i2, w, mode="max"))
    assert ttnn_eager.stats()["fallbacks"] >= 1  # (max bags: the CPU fallback, counted)
