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
        from ttnn_eager.core import dispatch
        dispatch._warned.discard(torch.ops.aten._cdist_forward.default)  # warned once a process
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
    # eager fusion (tests/test_eager_fusion.py): each batch norm and ReLU folded into its convolution, each residual
    # add and ReLU one add; 352 without it, 777 with a permute in and out of every convolution
    assert stats["ttnn_ops"] <= 150, by_op
    # (the 3-channel stem alone runs unfused: layout.folds_into_conv2d)
    assert by_op.get("multiply", 0) == 1 and by_op.get("relu", 0) == 1, by_op


def _resident(t) -> bool:
    return layout.is_channels_last(handle_of(t))


@pytest.mark.parametrize("c, o, groups, kernel, stride, bias, batch", [
    (32, 32, 32, 3, 1, False, 1),   # MobileNet's depthwise
    (24, 24, 24, 5, 2, True, 2),    # EfficientNet's 5x5 of stride 2, two images
    (48, 48, 48, 7, 1, True, 1),    # ConvNeXt's 7x7 with its bias
    (32, 32, 4, 3, 1, True, 1),     # RegNet's groups of 8 channels
    (32, 32, 8, 3, 2, False, 2),    # ResNeXt's groups of 4, stride 2
    (16, 32, 16, 3, 1, False, 1),   # a channel multiplier of 2
])
def test_taps_cut_kh_plus_kw_windows_of_a_channels_last_image(c, o, groups, kernel, stride, bias, batch):
    """A depthwise or narrow grouped convolution of a channels-last image (a 1x1 convolution's result): its
    windows are kernel + kernel slices of the ROW_MAJOR padded image (one ttnn.pad), not kernel * kernel, no
    permute in or out, and its result stays channels-last; values against float32 on the CPU."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, c, 1), torch.nn.Conv2d(c, o, kernel, stride, kernel // 2,
                                                                         groups=groups, bias=bias)).eval()
    x = torch.randn(batch, 8, 19, 21)
    with torch.no_grad():
        ref = copy.deepcopy(model)(x)
        dev = model.to(DEV)
        first = dev[0](x.to(DEV))
        assert _resident(dev[1](first))  # the packs made (read: a deferred convolution runs, test_eager_fusion.py)
        assert _resident(first)
        ttnn_eager.reset_stats()
        out = dev[1](first)
        resident = _resident(out)
        by_op, stats = dict(counters.ttnn_by_op), ttnn_eager.stats()
    grouped = groups < c
    assert resident and stats["nchw_conversions"] == 0, by_op
    assert by_op.get("permute", 0) == grouped, by_op  # grouped: the pixels' channels [c_g, N*H*W, G]
    assert by_op["slice"] == 2 * kernel + 1 + bias, by_op  # the windows, the packed kernel (and bias row)
    assert by_op["pad"] == 1 and by_op["mul"] == 1 and by_op["sum"] == 1, by_op
    # 2 to_layout, 2 concat, 3 reshape; grouped: a permute and a reshape; o_g outputs a group: an expand, a reshape
    assert stats["ttnn_ops"] == 2 * kernel + 11 + 2 * bias + 2 * grouped + 2 * (o // groups > 1), by_op
    assert pcc(out.cpu(), ref) >= 0.999
    assert float((out.cpu() - ref).abs().max()) <= 0.02 * float(ref.abs().max())


@pytest.mark.parametrize("batch", [1, 2])
def test_per_channel_operands_of_a_channels_last_image_broadcast_as_rows(batch):
    """Squeeze-excitation's scale [N, C, 1, 1] (an NCHW one, and a channels-last one: a mean's result), ConvNeXt's
    layer scale [C, 1, 1] and a [1, C, 1, 1] shift against a channels-last image: computed on its flat pixels, the
    result channels-last, no permute (one reshape of the operand at most, and of the image for per-image scales)."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 16, 3, padding=1).eval()
    x = torch.randn(batch, 8, 12, 10)
    scale, ls, shift = torch.rand(batch, 16, 1, 1), torch.rand(16, 1, 1), torch.randn(1, 16, 1, 1)
    with torch.no_grad():
        ref = conv(x)
        want = [ref * scale, ls * ref, ref + shift, ref * ref.mean((2, 3), keepdim=True)]
        img = conv.to(DEV)(x.to(DEV))
        assert _resident(img)  # (read: a deferred convolution runs -- tests/test_eager_fusion.py)
        ttnn_eager.reset_stats()
        got = [img * scale.to(DEV), ls.to(DEV) * img, img + shift.to(DEV), img * img.mean((2, 3), keepdim=True)]
        by_op, stats = dict(counters.ttnn_by_op), ttnn_eager.stats()
    assert all(_resident(g) for g in got) and _resident(img)
    assert "permute" not in by_op and stats["nchw_conversions"] == 0, by_op
    assert by_op.get("reshape", 0) <= (3 if batch == 1 else 12), by_op
    for g, w in zip(got, want):
        assert pcc(g.cpu(), w) >= 0.999 and float((g.cpu() - w).abs().max()) <= 0.02 * float(w.abs().max())


@pytest.mark.parametrize("batch", [1, 3])
def test_spatial_mean_of_a_channels_last_image_reads_its_flat_pixels(batch):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 16, 3, padding=1).eval()
    x = torch.randn(batch, 8, 9, 11)
    with torch.no_grad():
        ref = conv(x)
        img = conv.to(DEV)(x.to(DEV))
        assert _resident(img)  # (read: a deferred convolution runs -- tests/test_eager_fusion.py)
        ttnn_eager.reset_stats()
        kept, flat = img.mean((2, 3), keepdim=True), img.mean((-1, -2))
        by_op, stats = dict(counters.ttnn_by_op), ttnn_eager.stats()
        assert _resident(img) and _resident(kept) and stats["nchw_conversions"] == 0 and "permute" not in by_op
        assert by_op["mean"] == 2, by_op
        other = img.mean(1)  # over the channels: NCHW first (one conversion)
        assert ttnn_eager.stats()["nchw_conversions"] == 1
        assert pcc(kept.cpu(), ref.mean((2, 3), keepdim=True)) >= 0.999
        assert pcc(flat.cpu(), ref.mean((-1, -2))) >= 0.999 and flat.shape == (batch, 16)
        assert pcc(other.cpu(), ref.mean(1)) >= 0.999


def test_nhwc_to_nchw_permute_stays_channels_last():
    """ConvNeXt's permute(0, 3, 1, 2) after its block's linears: the NHWC values flattened to the channels-last
    storage (one reshape, no permute); a convolution then reads it as it is, and a view of it converts once."""
    torch.manual_seed(0)
    lin, conv = torch.nn.Linear(16, 24).eval(), torch.nn.Conv2d(24, 8, 3, padding=1).eval()
    x = torch.randn(2, 7, 9, 16)
    with torch.no_grad():
        ref = lin(x).permute(0, 3, 1, 2)
        lin.to(DEV), conv.to(DEV)
        y = lin(x.to(DEV))
        ttnn_eager.reset_stats()
        nchw = y.permute(0, 3, 1, 2)
        assert dict(counters.ttnn_by_op) == {"reshape": 1} and _resident(nchw)
        out = conv(nchw)
        assert "permute" not in counters.ttnn_by_op, dict(counters.ttnn_by_op)
        flat = nchw.flatten(2)
        assert ttnn_eager.stats()["nchw_conversions"] == 1
        assert pcc(flat.cpu(), ref.flatten(2)) >= 0.999 and pcc(nchw.cpu(), ref) >= 0.999
        assert pcc(out.cpu(), conv.cpu()(ref)) >= 0.999


# issue 36's compiled ceilings at 224x224: ResNet-50 at most 80 TT-NN ops a forward, the others at most half of
# main's count before channels-last residency (777, 1031, 1344, 1388, 1525, 1471)
@pytest.mark.parametrize("name,ceiling", [("resnet50", 80), ("mobilenet_v2", 515), ("efficientnet_b0", 672),
                                          ("convnext_tiny", 694), ("regnet_y_400mf", 762),
                                          ("resnext50_32x4d", 735)])
def test_compiled_op_count_ceilings(name, ceiling):
    pytest.importorskip("torchvision")
    from ttnn_eager.tools import vision
    result = vision.compare(vision.load(name), vision.make_input(1, 224), compiled=True, forwards=3)
    assert result["fallbacks"] == 0 and result["graph_replays"] == 1, result
    assert result["pcc_logits"] >= 0.999, result
    assert result["ttnn_ops"] <= ceiling, result
