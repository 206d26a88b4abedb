"""Channels-last residency (issue 36, item 1; core/layout.py "Channels-last residency"): a convolution's or a
pool's result stays on the device as TT-NN wrote it, [1, 1, N*H*W, C], while PyTorch sees NCHW; convolutions,
pools, eval batch norm and pointwise ops take it as it is, and anything else gets NCHW once (counted in
nchw_conversions), or NCHW on the host when the user reads it. Values are checked against float32 PyTorch on
the CPU (Pearson and max error), counts from ttnn_eager.stats().
"""
import copy
import os

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")

import pytest  # noqa: E402
import torch  # noqa: E402

import ttnn_eager  # noqa: E402
from conftest import pcc  # noqa: E402
from ttnn_eager import counters  # noqa: E402
from ttnn_eager.core import layout  # noqa: E402
from ttnn_eager.core.tensor import handle_of  # noqa: E402

DEV = "ttnn:0"


def _bn(c: int, seed: int) -> torch.nn.BatchNorm2d:
    g = torch.Generator().manual_seed(seed)
    bn = torch.nn.BatchNorm2d(c).eval()
    with torch.no_grad():
        bn.running_mean.copy_(torch.rand(c, generator=g) * 0.2 - 0.1)
        bn.running_var.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
        bn.weight.copy_(torch.rand(c, generator=g) + 0.5)
        bn.bias.copy_(torch.rand(c, generator=g) - 0.5)
    return bn


class Chain(torch.nn.Module):
    """conv-bn-relu, conv (1x1, the packed matmul route), a view and an in-place op in the middle, a residual add,
    a max pool, a 3x3 conv of stride 2, an average pool: every channels-last consumer and two NCHW ones."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = torch.nn.Conv2d(3, 32, 3, padding=1)
        self.bn1 = _bn(32, 1)
        self.conv2 = torch.nn.Conv2d(32, 32, 1, bias=False)
        self.bn2 = _bn(32, 2)
        self.conv3 = torch.nn.Conv2d(32, 64, 3, stride=2, padding=1)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        z = self.bn2(self.conv2(y))
        z.mul_(0.5)                             # in place, channels-last kept
        half = z[:, :16]                        # a view: NCHW from here (one conversion)
        half.add_(1.0)                          # a write through the view reaches z
        z = torch.relu(z + y)                   # residual add
        p = torch.nn.functional.max_pool2d(z, 2)
        out = self.conv3(p)
        return torch.nn.functional.avg_pool2d(out, 2), half


def _ops(model, x):
    with torch.no_grad():
        model(x)  # programs built, weights prepared
        ttnn_eager.reset_stats()
        out = model(x)
    return out, ttnn_eager.stats(), dict(counters.ttnn_by_op)


def test_conv_chain_channels_last_values():
    x = torch.randn(2, 3, 64, 64)
    model = Chain().eval()
    with torch.no_grad():
        ref, ref_half = copy.deepcopy(model)(x)
    out, stats, by_op = _ops(model.to(DEV), x.to(DEV))
    dev, half = (t.cpu() for t in out)
    assert dev.shape == ref.shape and half.shape == ref_half.shape
    assert pcc(dev, ref) >= 0.999 and pcc(half, ref_half) >= 0.999
    assert (dev - ref).abs().max() < 0.1 * ref.abs().max()
    assert stats["fallbacks"] == 0
    # permutes: the input image into conv1; z made NCHW for the view (z[:, :16]); y then made NCHW for the
    # residual add with that NCHW z; the max pool's NCHW input into NHWC. None around any convolution's output.
    assert by_op.get("permute", 0) == 4, by_op
    assert stats["nchw_conversions"] == 2


def test_nhwc_permute_of_a_resident_image_is_a_reshape():
    """ConvNeXt's permute(0, 2, 3, 1) after its depthwise convolution: the image is already stored NHWC, so the
    permute is one reshape of that storage (no ttnn.permute, no NCHW conversion); other permutes convert first."""
    conv = torch.nn.Conv2d(8, 16, 3, padding=1).eval()
    x = torch.randn(2, 8, 20, 24)
    with torch.no_grad():
        ref = conv(x)
        dev = conv.to(DEV)(x.to(DEV))
        assert layout.is_channels_last(handle_of(dev))
        ttnn_eager.reset_stats()
        nhwc = dev.permute(0, 2, 3, 1)
        stats, by_op = ttnn_eager.stats(), dict(counters.ttnn_by_op)
        assert by_op == {"reshape": 1} and stats["nchw_conversions"] == 0, by_op
        assert nhwc.shape == (2, 20, 24, 16) and torch.equal(nhwc.cpu(), dev.cpu().permute(0, 2, 3, 1))
        assert pcc(nhwc.cpu(), ref.permute(0, 2, 3, 1)) >= 0.999
        other = dev.permute(0, 3, 2, 1)  # not NHWC: made NCHW once, then permuted
        assert ttnn_eager.stats()["nchw_conversions"] == 1
        assert pcc(other.cpu(), ref.permute(0, 3, 2, 1)) >= 0.999


def test_resident_result_is_read_as_nchw():
    conv = torch.nn.Conv2d(8, 16, 3, padding=1).eval()
    x = torch.randn(1, 8, 64, 64)
    with torch.no_grad():
        ref = conv(x)
        dev = conv.to(DEV)(x.to(DEV))
    h = handle_of(dev)
    assert tuple(h.shape) == (1, 16, 64, 64) and layout.is_channels_last(h)  # stored [1, 1, 4096, 16]
    # the device API reads a channels-last tensor back as NCHW on the host (the CPU fallback's path)
    from ttnn_eager.device import api
    before = ttnn_eager.stats()["ttnn_ops"]
    assert pcc(api.download(h), ref) >= 0.999
    assert ttnn_eager.stats()["ttnn_ops"] == before and layout.is_channels_last(h)
    # an op that needs NCHW (a view; the user's .cpu()) converts once, counted, and the tensor stays NCHW after
    conversions = ttnn_eager.stats()["nchw_conversions"]
    flat = dev.flatten(2)
    assert ttnn_eager.stats()["nchw_conversions"] == conversions + 1
    assert not layout.is_channels_last(h)
    assert pcc(flat.cpu(), ref.flatten(2)) >= 0.999
    assert pcc(dev.cpu(), ref) >= 0.999
    assert pcc(dev.sum(dim=(2, 3)).cpu(), ref.sum(dim=(2, 3))) >= 0.999
    assert ttnn_eager.stats()["nchw_conversions"] == conversions + 1


def test_mixed_operands_convert_and_fallback_reads_nchw():
    conv = torch.nn.Conv2d(4, 4, 3, padding=1).eval()
    x, other = torch.randn(1, 4, 64, 64), torch.randn(1, 4, 64, 64)
    with torch.no_grad():
        ref = conv(x)
        dev = conv.to(DEV)(x.to(DEV))
        mixed = dev * other.to(DEV)              # one channels-last operand, one NCHW: NCHW result
        per_channel = dev + torch.arange(4.0).reshape(1, 4, 1, 1).to(DEV)
        # an op with no lowering (the CPU fallback) reads the channels-last tensor as NCHW
        with pytest.warns(UserWarning):
            cpu_side = torch.ops.aten._cdist_forward(dev.flatten(2)[0], dev.flatten(2)[0], 2.0, None)
    assert pcc(mixed.cpu(), ref * other) >= 0.999
    assert pcc(per_channel.cpu(), ref + torch.arange(4.0).reshape(1, 4, 1, 1)) >= 0.999
    assert pcc(cpu_side.cpu(), torch.cdist(ref.flatten(2)[0], ref.flatten(2)[0])) >= 0.999


def test_resnet50_op_count():
    """ResNet-50 at 96x96 (the op count is that of 224x224: at 64x64 layer4's 2x2 maps take the narrow-output
    route, conv.MIN_OUTPUT_WIDTH): the TT-NN ops of a forward by kind."""
    torchvision = pytest.importorskip("torchvision")
    from ttnn_eager.tools import vision
    model = vision.load("resnet50")
    x = vision.make_input(1, 96)
    with torch.no_grad():
        ref = copy.deepcopy(model)(x)
    out, stats, by_op = _ops(model.to(DEV), x.to(DEV))
    assert pcc(out.cpu(), ref) >= 0.999
    assert stats["fallbacks"] == 0
    assert by_op["conv2d"] + by_op.get("linear", 0) == 53 + 1  # every convolution one op (+ the classifier)
    assert by_op.get("permute", 0) <= 2, by_op  # the input image, the pooled features
    assert stats["ttnn_ops"] <= 360, by_op      # 777 with a permute in and out of every convolution
