"""Convolutions: conv1d and conv2d as TT-NN conv2d, their transposes as TT-NN conv_transpose2d.

Layout decisions. PyTorch's images are NCHW; TT-NN's conv2d reads a channels-last image flattened to
[1, 1, N*H*W, C] and writes its result the same way, [1, 1, N*OH*OW, O]. So the input is permuted to NHWC
and reshaped (a view of the same values), and the result reshaped and permuted back to NCHW: two permutes
per convolution, the price of keeping PyTorch's NCHW contract on every tensor the user can see.
conv1d is conv2d with a height of 1 (the weight gains a unit kernel height in its prepared form).

Weights. TT-NN re-lays out conv weights and bias into a form that depends on the input's size and the
sharding conv2d picks (ttnn.prepare_conv_weights / prepare_conv_bias); the layout policy makes that form
once per (parameter, configuration) and keeps it (layout.prepared), so a steady-state forward converts
nothing. A kernel parameter is staged on the host until then (core/layout.py), so the prepared form is its
only device copy; the weight arrives as it is (STAGED: not uploaded for this op). So does the bias, which is
staged back on the host once prepared (api.release: its value stays exact for any other reader).

Transposed convolutions (ConvTranspose1d/2d) are TT-NN's conv_transpose2d the same way, their weights
([in, out, kh, kw]) mirrored by their preparation as PyTorch's semantics ask.

Depthwise convolutions (groups == in_channels == out_channels: one filter per channel) are not TT-NN
conv2d: ttnn 0.81 turns a depthwise kernel [C, 1, kh, kw] into a dense block-diagonal [C, C, kh, kw] (C
times its size: mobilenet_v2's depthwise kernels took 634x their bytes) and for wide channel counts its
slicing finds no configuration (TT_FATAL "DRAM Auto slice could not find valid slice configuration": the
kernel-4 causal conv1d of linear-attention layers, C = 8192). A depthwise convolution is a sum over the
kh*kw taps of a shifted (strided) window of the input times one weight per channel, so it is lowered as
that ("taps"): the input NHWC, zero-padded (constant_pad_nd: zeros concatenated; ttnn.pad of a TILE tensor
has no front padding), each tap one ttnn.slice; the kk windows concatenated along a new leading dimension,
multiplied by the weight as [kk, 1, 1, C] (broadcast) and summed over the taps. The weight is kept as a
block [kk, C] of a shared pack (layout.pack: alone, [kk, C] in TILE rounds kk up to 32 rows, 3.6x a 3x3
kernel's bytes, and takes a tile in every DRAM bank; in a pack only C is padded, and the blocks of one
width stack), made once from its staged host value and read back by a slice. A bias is a packed column
too, added as a [1, C] row.

Grouped convolutions whose groups have fewer than 32 input channels c_g, or a number that is not a multiple of
32 (RegNet's 8 or 16, ResNeXt's 4 to 16, a depthwise one with a channel multiplier), are taps too (up to
TAPS_CHANNELS kk * c_g): output channel (g, j) -- the j-th of o_g outputs of group g -- is the sum over taps and
over the group's inputs k of W[(g, j), k, tap] times input channel (g, k)'s window. The input is laid out as
[c_g * N, H, W, O], row block k holding input channel (g, k) in every column (j, g) (a permute, and o_g copies
concatenated), so that the windows, concatenated, are [kk * c_g, N*OH, OW, O]: one multiply by the kernel as
[kk * c_g, 1, 1, O] and one sum make every output channel, in (j, g) order, which the permute back to NCHW
restores to PyTorch's (g, j). The kernel is one packed block [kk * c_g, O]: its own bytes, where TT-NN conv2d's
groups= prepares the block-diagonal [out, in, kh, kw], `groups` times them, and even in chunks of groups
filling 32 channels s = 32 / gcd(c_g, 32) times (below): regnet_y_400mf's groups of 8 took 5.6x their bytes
(its model 1.42x; as taps 1.10x), regnet_x_400mf's of 16 2.75x (1.34x; 1.06x). The price is the windows:
kk * c_g products for each output element, made in DRAM where conv2d keeps its windows in L1 (on the mock,
resnext50_32x4d's forward at 224x224 takes 1.9 s instead of 0.43 s; its op count grows 0.6%).
Grouped 1x1 convolutions (stride 1, no padding) whose groups are a multiple of 32 channels (SqueezeBERT's conv1d:
4 groups of 192) are one batched matmul of the kernel [G, o_g, c_g] by the NCHW input [N, G, c_g, H*W]
(_grouped_pointwise). Other grouped convolutions (ResNeXt's groups of 32 and 64 channels, wide kernels:
wav2vec2's positional conv1d of kernel 128) are TT-NN conv2d's own `groups=`, in chunks of whole groups,
as many as fill a multiple of 32 input channels (_chunks): each chunk one conv2d of its slice of the input
channels with its own prepared weight (s times the chunk's kernel for s groups a chunk), the outputs
concatenated.

Transposed convolutions whose kernel is their stride (no padding, one group: 2x2 upsamplers) are a matmul of the
pixels by the kernel [C, kh*kw*O], each pixel's block of the output permuted into place (_blocks_matmul).

Transposed convolutions with groups or dilation (TT-NN's conv_transpose2d here: groups 1, dilation 1; mimi's
and pocket-tts' depthwise ConvTranspose1d upsamplers) are the convolution, stride 1 and the same dilation, of
the mirrored kernel over the input spread by the stride (stride - 1 zeros after each element: a reshape to
[N, C, H, 1, W, 1] and a pad) and padded by dilation * (kernel - 1) - padding on each side, plus
output_padding at the end (a negative pad crops): PyTorch's transposed convolution exactly. A depthwise one
is then the taps above with the taps reversed; any other its kernel [in, out / groups, kh,
kw] rearranged to [out, in / groups, kh, kw] (each group's block transposed, mirrored: done on the host
value by the weight's preparation, api.prepare's transform) for TT-NN conv2d's groups=. The spread input
is stride times larger per dimension (its zeros multiplied too): the price of one route for every case.

Small 1x1 convolutions (stride 1, no padding, one group: MobileNetV3's and EfficientNet's squeeze-excitation
blocks on a 1x1 image, their pointwise convolutions of 40, 72 or 88 channels) are matmuls of the pixels [N*H*W,
C] by the kernel [O, C]: TT-NN conv2d prepares such a kernel as [C, O] padded to whole tiles both ways and its
bias as [1, 1, 32, O] (32x), each in whole pages of every DRAM bank (at least 24 KiB). Where that would take
more than 1.1x (layout.packs_matrix decides), the kernel is a block of a pack, only its columns padded
(layout.pack_matrix: stored [O, C] or transposed, whichever pads fewer), and the bias a row of one
(pack_row), each read back by one slice and passed to ttnn.linear (the bias fused). A staged kernel only: a
computed one would be packed again at every call.

One-row convolutions (conv1d) whose kernel row is wider than TT-NN's DRAM slicing fits for their channels and
stride (wav2vec2's positional conv1d of kernel 128 under float32 storage, moonshine's kernel 127 of stride 64)
are the sum of the convolutions of their kernel's pieces, each over the columns of the padded input its taps
see (_kernel_pieces, with the measurements).

Large batches (TT-NN's DRAM slicing splits the output's rows or columns, never the batch: TT_FATAL "DRAM Auto
slice could not find valid slice configuration" when its smallest slice of every image does not fit L1; float32
storage halves the batch that fits -- the two-stage detectors' box head, 3x3 convs over the 7x7 regions of
hundreds of proposals) run in chunks of the batch that do (_batches, with the measurements), concatenated.

Refused before ttnn (Unfit: the counted CPU fallback, or a strict-mode error naming op and argument):
3-D convolutions (TT-NN has no route: the dispatcher then decomposes them into one conv2d, core/convolution.py).
"""
from __future__ import annotations

import math

import torch

from .. import config
from ..core import layout as policy
from ..core.layout import PROMOTE_CL, STAGED, TILE_FLOAT, TILE_FLOAT_CL
from ..core.registry import Unfit, fusion, lowering
from ..device import api
from ._common import batch_chunks
from .matmul import matmul_handles
from .padding import constant_pad_nd
from .views import cat, expand, permute_handle, reshape, slice_handle

aten = torch.ops.aten


def _pair(v, n: int) -> tuple:
    v = tuple(v)
    return v * n if len(v) == 1 else v


def _prepared(weight, bias, spec: dict, input_dtype, transposed: bool = False, transform=None, part=None,
              taps=None):
    """The conv weight and bias in conv2d's (or conv_transpose2d's) form for `spec` (made once:
    layout.prepared). `transform`: a transposed convolution's kernel rearranged as a convolution's
    (_as_conv_kernel), for conv2d. `part` = (first, end): output channels first..end-1 only (a chunk of a
    grouped convolution's groups: _chunks). `taps` = (first, end): the kernel's columns first..end-1 only (a
    piece of a wide kernel row: _kernel_pieces)."""
    op = "conv_transpose2d" if transposed else "conv2d"
    key = (op, input_dtype, tuple(sorted(spec.items())), transform is not None, part, taps)
    if part is not None:
        whole = transform
        transform = (lambda w: w[part[0]:part[1]]) if whole is None else (lambda w: whole(w)[part[0]:part[1]])
    if taps is not None:
        whole = transform
        transform = (lambda w: w[..., taps[0]:taps[1]]) if whole is None else \
            (lambda w: whole(w)[..., taps[0]:taps[1]])
    common = dict(input_memory_config=api.enum("DRAM_MEMORY_CONFIG"), input_layout=api.TILE, **spec,
                  device=api.device(weight.index), input_dtype=input_dtype, conv_config=_config(input_dtype))
    prepare_w, prepare_b, extra = "prepare_conv_weights", "prepare_conv_bias", {}
    if transposed:  # weights [in, out / groups, kh, kw], mirrored by the preparation (PyTorch's semantics)
        prepare_w, prepare_b, extra = "prepare_conv_transpose2d_weights", "prepare_conv_transpose2d_bias", \
            {"mirror_kernel": True}

    def weights(h):
        shape = tuple(h.shape) if transform is None else tuple(transform(torch.empty(h.shape)).shape)
        shape = shape if len(shape) == 4 else (shape[0], shape[1], 1, shape[2])  # 1-d
        return api.prepare(prepare_w, "weight_tensor", h, shape, transform=transform,
                           weights_format="IOHW" if transposed else "OIHW", has_bias=bias is not None, **common,
                           **extra)

    w = policy.prepared(weight, key, weights)
    b = None
    if bias is not None:
        bias_kwargs = {k: v for k, v in common.items() if k != "output_padding"}
        lo, hi = part or (0, bias.shape[0])
        b = policy.prepared(bias, key, lambda h: api.prepare(
            prepare_b, "bias_tensor", h, (1, 1, 1, hi - lo), transform=None if part is None else (lambda v: v[lo:hi]),
            **bias_kwargs))
        if api.recording is None and bias.tt is not None:
            api.release(bias)  # its prepared form replaces it on the device (read again from the host)
    return w, b


def _config(input_dtype):
    """One Conv2dConfig for prepare_conv_weights/_bias and conv2d (they must agree): the weights in the
    activations' dtype (prepare_conv_bias needs it stated) -- bfloat16 beside float32 activations under
    float32_storage="mixed", the parameters' own storage -- TT-NN's defaults otherwise."""
    return api.enum("Conv2dConfig")(weights_dtype=policy.parameter_storage(torch.float32, input_dtype))


def _check(x, weight, groups, transposed, dilation):
    nd = len(weight.shape) - 2
    if nd not in (1, 2):
        raise Unfit(f"convolution: {nd}-d convolution has no TT-NN route (conv1d/conv2d only)")
    c_in = x.shape[1]
    if x.shape.numel() == 0:
        raise Unfit("convolution: empty input")


def _depthwise(x, weight, groups) -> bool:
    """One filter per channel, one output channel per filter (no channel multiplier)."""
    return groups > 1 and groups == x.shape[1] == weight.shape[0] and weight.shape[1] == 1


def _tap_block(value: torch.Tensor, groups: int, flipped: bool = False) -> torch.Tensor:
    """A grouped kernel's host value [O, c_g, kh, kw] (depthwise: [C, 1, kh, kw]) as the [kh*kw * c_g, O] block
    the tap lowering multiplies by: its rows (tap, k), its columns the output channels in PyTorch's order --
    row (tap, k) of column g * o_g + j is output channel (g, j)'s weight for its group's k-th input at that tap.
    `flipped`: the kernel mirrored in both spatial dimensions (its row-major taps reversed), for a transposed
    convolution."""
    o, c_g = value.shape[0], value.shape[1]
    value = value.reshape(o, c_g, -1)
    value = value.flip(2) if flipped else value
    return value.permute(2, 1, 0).reshape(-1, o)


def _taps(weight, groups: int, flipped: bool = False):
    """The tap kernel block (_tap_block) as a device tensor [kk * c_g, O]: a block of a shared pack
    (layout.packed: made once from its staged host value; only its columns are padded, and blocks of one width
    stack in one pack), read back by one slice."""
    return policy.packed(weight, ("taps", flipped), lambda v: _tap_block(v, groups, flipped), _pack_dtype(weight))


def _pack_dtype(h) -> torch.dtype:
    """The torch dtype a tap kernel or bias is packed as: its own, bfloat16 for an integer one (an integer
    convolution computes in bfloat16: TILE_FLOAT converts its input)."""
    return h.dtype if h.dtype.is_floating_point else torch.bfloat16


def _tap_input(x, groups: int, o_g: int):
    """x [N, C, H, W] as the ROW_MAJOR image [c_g * N, H, W, O] the taps cut their windows from
    (layout.windows_input): row block k holds, in column g * o_g + j, input channel g * c_g + k (the k-th input
    of output channel (g, j)'s group). Depthwise (c_g = o_g = 1), that is x channels-last: a channels-last x
    (layout.py) is a reshape of its stored form, an NCHW one one permute. Grouped, the pixels' channels
    [N*H*W, G, c_g] are permuted to [c_g, N*H*W, G] and each group's column expanded o_g times."""
    n, c, h, w = x.shape
    c_g = c // groups
    if _resident(x):
        pixels = policy.windows_input(policy.flat(x))  # [1, 1, N*H*W, C] in (g, k) order
    elif c_g == 1:
        pixels = policy.windows_input(permute_handle(x, (0, 2, 3, 1)))
    else:  # [N, G, c_g, H, W] -> [c_g, N, H, W, G]
        grouped = permute_handle(reshape(x, (n, groups, c_g, h, w)), (2, 0, 3, 4, 1))
        pixels = policy.windows_input(reshape(grouped, (c_g, n * h * w, groups)))
    if c_g > 1 and _resident(x):
        pixels = permute_handle(reshape(pixels, (n * h * w, groups, c_g)), (2, 0, 1))
    if o_g > 1:  # [c_g * N*H*W, G, 1] -> [.., G, o_g]
        pixels = expand(reshape(pixels, (c_g * n * h * w, groups, 1)), (c_g * n * h * w, groups, o_g))
    return reshape(pixels, (c_g * n, h, w, groups * o_g))


def _stacked_windows(x, kernel, stride, padding, dilation, oh: int, ow: int):
    """The kh * kw windows of a ROW_MAJOR image x [B, H, W, C] zero-padded by `padding` (one ttnn.pad: ROW_MAJOR
    pads the front), stacked [kh*kw * B, OH, OW, C] in (tap, b) order, the taps row-major: the kw column windows
    are cut first (strided slices along W, concatenated along B), then the kh row windows of that (along H):
    kh + kw slices for kh * kw windows."""
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = kernel, stride, dilation, padding
    if ph or pw:
        x = api.run("pad", x, [(0, 0), (ph, ph), (pw, pw), (0, 0)], 0.0)
    cols = [slice_handle(x, 2, j * dw, j * dw + (ow - 1) * sw + 1, sw) for j in range(kw)]
    x = cat(cols, 0) if kw > 1 else cols[0]
    rows = [slice_handle(x, 1, i * dh, i * dh + (oh - 1) * sh + 1, sh) for i in range(kh)]
    return cat(rows, 0) if kh > 1 else rows[0]


def _conv_taps(x, weight, bias, kernel, stride, padding, dilation, oh: int, ow: int, flipped=False, groups=None,
               folded=None, activation=None):
    """A depthwise or grouped convolution of x [N, C, H, W] as the sum over its kernel's taps and over each
    group's c_g input channels k of the weight times the window of the zero-padded input that tap sees (see
    the module docstring); the result channels-last (layout.py). `flipped`: the kernel mirrored, for a
    transposed convolution. The windows are cut from the input laid out [c_g * N, H, W, O] (_tap_input) and
    stacked [kk * c_g, 1, N*OH*OW, O] (_stacked_windows), so that one multiply by the [kk * c_g, 1, 1, O] taps
    and one sum over the first dimension make every output channel, in PyTorch's order. `folded`: the (taps,
    bias row) to use instead of the weight's and bias's (an eval batch norm folded in: conv_bn_act), and
    `activation` (relu, relu6, silu) applied by the add of that bias row (ttnn.add's activations=)."""
    n, c, h, w = x.shape
    groups = groups or c
    o = weight.shape[0]
    c_g = c // groups
    kk = math.prod(kernel)
    windows_ = _stacked_windows(_tap_input(x, groups, o // groups), kernel, stride, padding, dilation, oh, ow)
    stacked = policy.windows_output(reshape(windows_, (kk * c_g, 1, n * oh * ow, o)))
    taps, row = folded or (_taps(weight, groups, flipped), None if bias is None else _bias_row(bias))
    out = api.run("mul", stacked, reshape(taps, (kk * c_g, 1, 1, o)))
    if kk * c_g > 1:
        out = api.run("sum", out, dim=0, keepdim=True, compute_kernel_config=policy.compute_config("reduce", x.index))
    if row is not None:
        out = api.run("add", out, row, **({} if activation is None else {"activations": [_unary(activation, True)]}))
    return policy.channels_last(out, (n, o, oh, ow))


def _depthwise_transposed(x, weight, bias, kernel, stride, padding, dilation, output_padding, oh, ow):
    """A depthwise transposed convolution as the depthwise convolution (stride 1, the same dilation) of the
    mirrored kernel over the spread and padded input (_spread)."""
    x = _spread(x, stride, kernel, padding, dilation, output_padding)
    return _conv_taps(x, weight, bias, kernel, (1, 1), (0, 0), dilation, oh, ow, flipped=True)


def _pointwise_matmul(x, weight, bias):
    """A 1x1 convolution (stride 1, no padding, one group) of x [N, C, H, W] as the matmul of its pixels
    [N*H*W, C] by its kernel [O, C] plus its bias, both read from packs (layout.pack_matrix, pack_row: see the
    module docstring); the pixels [1, 1, N*H*W, C] channels-last (layout.nhwc: as they are stored, or a 1x1 image --
    squeeze-excitation's -- reshaped), and so is the result (layout.py)."""
    n, c, h, w = x.shape
    o = weight.shape[0]
    kernel, transpose_b = policy.pack_matrix(weight)
    row = None if bias is None else policy.pack_row(bias)
    return policy.channels_last(matmul_handles(policy.nhwc(x), kernel, transpose_b, row), (n, o, h, w))


def _one_d(out, n: int, o: int, length: int):
    """A conv1d's result [N, O, 1, L] as [N, O, L] (made NCHW first when it is channels-last: layout.py)."""
    if _resident(out):
        policy.to_nchw(out)
    return reshape(out, (n, o, length))


def _nchw(x):
    """x stored NCHW (a channels-last x made so, in place: layout.to_nchw)."""
    if _resident(x):
        policy.to_nchw(x)
    return x


def _resident(x) -> bool:
    """x (a 4-d image on the device) is stored channels-last (layout.py: channels-last residency)."""
    return x.tt is not None and len(x.shape) == 4 and policy.is_channels_last(x)


def _grouped_pointwise(x, weight, bias, groups: int):
    """A grouped 1x1 convolution (stride 1, no padding; groups of a multiple of 32 channels: SqueezeBERT's
    conv1d) of x [N, C, H, W] as one batched matmul in NCHW, no permute: the kernel [G, o_g, c_g] (made once
    from its staged host value: its own bytes in TILE) by the input [N, G, c_g, H*W] gives [N, G, o_g, H*W];
    the bias a packed column [O, 1] (as the taps' biases), added per channel. conv2d's groups= would prepare
    chunks of groups, each in whole pages, and a [1, 1, 32, O] bias."""
    n, c, h, w = x.shape
    o = weight.shape[0]
    c_g, o_g = c // groups, o // groups

    def make(hw):
        value = api.host_value(hw).float().reshape(groups, o_g, c_g)
        return api.upload(value.contiguous(), x.tt_dtype, api.TILE, hw.index, dtype=_pack_dtype(hw))
    kernel = policy.prepared(weight, ("grouped_pointwise", x.tt_dtype), make)
    out = matmul_handles(reshape(kernel, (1, groups, o_g, c_g)), reshape(x, (n, groups, c_g, h * w)))
    if bias is not None:
        out = api.run("add", out, reshape(_bias_column(bias), (groups, o_g, 1)))
    return reshape(out, (n, o, h, w))


def _blocks_matmul(x, weight, bias):
    """A transposed convolution whose kernel is its stride (no padding, one group, no dilation: depth_pro's and
    U-Nets' 2x2 upsamplers) of x [N, C, H, W]: every input pixel writes its own kh x kw block of the output, so
    it is the matmul of the pixels [N*H*W, C] by the kernel [C, kh*kw*O] (a block of a pack, made once from its
    staged host value [C, O, kh, kw], its columns in (a, b, o) order; a computed kernel permuted so), the result [N*H, W, kh, kw*O] permuted to
    [N*H, kh, W, kw*O] -- the output channels-last [N, H*kh, W*kw, O] -- plus the bias row. TT-NN's
    conv_transpose2d of float32 activations did not fit L1 (its circular buffers clashed: depth_pro)."""
    n, c, h, w = x.shape
    o, kh, kw = weight.shape[1], *((1, weight.shape[2]) if len(weight.shape) == 3 else weight.shape[2:])
    if weight.host is not None:  # (staged: a parameter)
        kernel = policy.packed(weight, ("blocks",),
                               lambda v: v.reshape(c, o, kh, kw).permute(0, 2, 3, 1).reshape(c, -1), _pack_dtype(weight))
    else:
        kernel = reshape(permute_handle(reshape(weight, (c, o, kh, kw)), (0, 2, 3, 1)), (c, kh * kw * o))
    out = matmul_handles(policy.nhwc(x), kernel)  # [1, 1, N*H*W, kh*kw*O]
    out = permute_handle(reshape(out, (n * h, w, kh, kw * o)), (0, 2, 1, 3))
    out = policy.relayout(reshape(out, (1, 1, n * h * kh * w * kw, o)), api.TILE)
    if bias is not None:
        out = api.run("add", out, _bias_row(bias))
    return policy.channels_last(out, (n, o, h * kh, w * kw))


def _as_conv_kernel(groups: int):
    """A transposed convolution's kernel [in, out / groups, *k] as the convolution's [out, in / groups, *k]
    that computes it over the spread and padded input (_spread): each group's block transposed, mirrored."""
    def transform(w):
        c_in, o_g, *k = w.shape
        w = w.reshape(groups, c_in // groups, o_g, *k).transpose(1, 2).reshape(groups * o_g, c_in // groups, *k)
        return w.flip(list(range(2, w.dim())))
    return transform


def _spread(x, stride, kernel, padding, dilation, output_padding):
    """A transposed convolution's input [N, C, H, W] as the input of the (stride 1) convolution of the
    mirrored kernel that computes it: stride - 1 zeros after each element (reshaped to [N, C, H, 1, W, 1]
    and padded), then padded by dilation * (kernel - 1) - padding on each side, plus output_padding at the
    end (negative: cropped) -- PyTorch's transposed convolution exactly."""
    n, c, h, w = x.shape
    sh, sw = stride
    if sh > 1 or sw > 1:  # the stride's zeros, also sh - 1 (sw - 1) after the last element: cropped below
        x = constant_pad_nd(reshape(x, (n, c, h, 1, w, 1)), (0, sw - 1, 0, 0, 0, sh - 1))
        x = reshape(x, (n, c, h * sh, w * sw))
    (top, bottom), (left, right) = ((d * (k - 1) - p, d * (k - 1) - p + op - (s - 1)) for k, s, p, d, op in
                                    zip(kernel, stride, padding, dilation, output_padding))
    return constant_pad_nd(x, (left, right, top, bottom)) if top or bottom or left or right else x


def _bias_row(bias):
    """A depthwise or grouped convolution's bias [O] as the row [1, O] added to its channels-last result: a row
    of a pack (layout.pack_row: made once from its host value; the original staged back on the host)."""
    return policy.pack_row(bias, _pack_dtype(bias))


def _bias_column(bias):
    """A convolution's bias [O] as a device column [O, 1]: kept as a column of a shared pack (layout.packed:
    made once from its host value, and the original staged back on the host: api.release), read back by a
    slice. During a graph capture (its value cannot be read back to the host then) the bias as it is on the
    device."""
    o = bias.shape[0]
    if api.recording is not None and bias.tt is not None:
        return reshape(policy.ensure(bias, TILE_FLOAT), (o, 1))
    column = policy.packed(bias, ("column",), lambda v: v.reshape(o, 1), _pack_dtype(bias))
    if bias.tt is not None:
        api.release(bias)
    return column


def _out_size(size, k, s, p, d, op, transposed) -> int:
    if transposed:
        return (size - 1) * s - 2 * p + d * (k - 1) + op + 1
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


@lowering(aten.convolution.default, ttnn=["permute", "reshape", "conv2d", "conv_transpose2d", "full", "slice", "concat",
                                         "mul", "sum", "add", "linear", "matmul", "pad", "to_layout", "expand"],
          needs={"input": TILE_FLOAT_CL, "weight": STAGED, "bias": STAGED},
          notes="conv1d/conv2d and their transposes (NCHW in and out; NHWC on the device); weights prepared "
                "once per input size; depthwise and narrow grouped ones (groups of fewer than 32 channels) as a "
                "sum of shifted windows times a packed kernel (ROW_MAJOR pad, kh + kw slices, concat, mul, sum); small 1x1 ones as "
                "a linear of a packed kernel and bias; grouped 1x1 ones of 32-channel groups as a batched matmul; "
                "other groups as TT-NN conv2d's groups= in chunks; "
                "transposed ones with groups or dilation as the convolution of the mirrored kernel over the "
                "input spread by the stride and padded; 3-d convolutions "
                "refused, then decomposed into one conv2d (core/convolution.py); transposed 3-d ones run on the "
                "CPU fallback; large batches in chunks that fit TT-NN's DRAM slicing; one-row outputs of wide kernel "
                "rows as the sum of the convolutions of the kernel's pieces; transposed ones whose kernel is the stride "
                "as a matmul of the pixels by a packed kernel, its blocks permuted into place")
def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _check(x, weight, groups, transposed, dilation)
    if _defers(x, weight, bias, stride, padding, dilation, transposed, groups):
        return _conv_deferred(x, weight, bias, stride, padding, dilation, groups)  # (eager fusion: below)
    return _convolve(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def _convolve(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The convolution, run now (the lowering's work)."""
    one_d = len(weight.shape) == 3
    if _resident(x) and not _takes_channels_last(x, weight, stride, padding, dilation, transposed, groups):
        policy.to_nchw(x)  # (the routes below that permute NCHW themselves)
    if one_d:  # conv1d: [N, C, L] as [N, C, 1, L], TILE as the need asked (a reshape to a 1-high image whose
        # tile padding costs 16 MiB or more comes back ROW_MAJOR -- layout.permute_layout -- and the matmul of a 1x1
        # kernel then stopped in TT_FATAL "Inputs to matmul must be tilized": pocket_tts' and xcodec2's decoders)
        x = policy.relayout(reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2])), api.TILE)
        stride, padding, dilation = (1, *stride), (0, *padding), (1, *dilation)
        output_padding = (0, *output_padding)
    stride, padding, dilation = _pair(stride, 2), _pair(padding, 2), _pair(dilation, 2)
    output_padding = _pair(output_padding, 2)
    n, c, h, w = x.shape
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    kh, kw = (1, weight.shape[2]) if one_d else tuple(weight.shape[2:])
    oh, ow = (_out_size(size, k, s, p, d, op, transposed) for size, k, s, p, d, op in
              zip((h, w), (kh, kw), stride, padding, dilation, output_padding))
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Calculated output size: ({out_channels}x{oh}x{ow}). Output size is too small")
    if transposed and _depthwise(x, weight, groups):
        out = _depthwise_transposed(x, weight, bias, (kh, kw), stride, padding, dilation, output_padding, oh, ow)
        return _one_d(out, n, out_channels, ow) if one_d else out
    if (transposed and groups == 1 and (kh, kw) == stride and padding == (0, 0) and output_padding == (0, 0)
            and all(d == 1 for d in dilation)):
        out = _blocks_matmul(x, weight, bias)
        return _one_d(out, n, out_channels, ow) if one_d else out
    transform = None
    if transposed and (groups != 1 or any(d != 1 for d in dilation)):  # a convolution of the spread input
        x = _spread(x, stride, (kh, kw), padding, dilation, output_padding)
        n, c, h, w = x.shape
        stride, padding, transposed, transform = (1, 1), (0, 0), False, _as_conv_kernel(groups)
    elif not transposed and groups > 1 and (_depthwise(x, weight, groups) or _grouped_taps(c // groups, kh * kw)):
        per_image = kh * kw * (c // groups) * oh * ow * out_channels  # the windows' elements (TAPS_WINDOWS)
        if len(batch_chunks(n, max(1, TAPS_WINDOWS // per_image))) > 1 and _resident(x):
            policy.to_nchw(x)  # (sliced by images)
        parts = [_conv_taps(x if b1 - b0 == n else slice_handle(x, 0, b0, b1), weight, bias, (kh, kw), stride,
                            padding, dilation, oh, ow, groups=groups)
                 for b0, b1 in batch_chunks(n, max(1, TAPS_WINDOWS // per_image))]
        out = parts[0] if len(parts) == 1 else cat([_nchw(p) for p in parts], 0)
        return _one_d(out, n, out_channels, ow) if one_d else out
    elif (not transposed and groups > 1 and _pointwise((kh, kw), stride, padding) and (c // groups) % 32 == 0
          and weight.host is not None):
        out = _grouped_pointwise(x, weight, bias, groups)
        return _one_d(out, n, out_channels, ow) if one_d else out
    elif (not transposed and groups == 1 and _pointwise((kh, kw), stride, padding) and weight.host is not None
          and policy.packs_matrix(out_channels, c, bias is not None, x.index)):
        out = _pointwise_matmul(x, weight, bias)
        return _one_d(out, n, out_channels, ow) if one_d else out
    width = ow  # the output's width: TT-NN's (narrow: widened, then cropped back below)
    if not transposed and not _pointwise((kh, kw), stride, padding) and ow < MIN_OUTPUT_WIDTH:
        width = MIN_OUTPUT_WIDTH
        if _resident(x):
            policy.to_nchw(x)
        x = constant_pad_nd(x, (0, (width - ow) * stride[1], 0, 0))  # zero columns after the last window
        n, c, h, w = x.shape
    chunks = [(0, groups)] if transposed else _chunks(groups, c // groups)
    widest = max(e - f for f, e in chunks)  # (the groups of the widest chunk: its channels decide the pieces)
    pieces = [(0, kw)] if transposed else _kernel_pieces(oh, kw, widest * (c // groups),
                                                         widest * (out_channels // groups), stride[1], x.tt_dtype)
    if len(pieces) > 1:  # a wide kernel row: the sum of the convolutions of its pieces over the padded input
        x = _nchw(x)
        if padding[1]:
            x = constant_pad_nd(x, (padding[1], padding[1], 0, 0))
            padding = (padding[0], 0)
        n, c, h, w = x.shape
    spec = dict(in_channels=c, out_channels=out_channels, batch_size=n, input_height=h, input_width=w,
                kernel_size=(kh, kw), stride=stride, padding=padding, dilation=dilation, groups=groups)
    if transposed:
        spec["output_padding"] = output_padding
    extra = {"mirror_kernel": True} if transposed else {}
    rows = []
    batches = _batches(n, c, out_channels, (kh, kw), stride, padding, dilation, x.tt_dtype)
    if len(batches) > 1 and _resident(x):
        policy.to_nchw(x)  # (sliced by images below)
    for b0, b1 in batches:
        part_x = x if b1 - b0 == n else slice_handle(x, 0, b0, b1)
        nb = b1 - b0
        total = None
        for t0, t1 in pieces:  # (one piece: the whole kernel)
            taps, piece_x, piece_spec, piece_bias = None, part_x, dict(spec, batch_size=nb), bias
            if len(pieces) > 1:  # columns t0 * dw .. of the padded input: the windows of taps t0..t1-1
                start, end = t0 * dilation[1], t0 * dilation[1] + (width - 1) * stride[1] + (t1 - t0 - 1) * dilation[1] + 1
                taps, piece_x = (t0, t1), slice_handle(part_x, 3, start, end)
                piece_spec.update(input_width=end - start, kernel_size=(kh, t1 - t0))
                piece_bias = bias if t0 == 0 else None
            flat = policy.nhwc(piece_x)
            outs = []
            for first, end_ in chunks:  # (one chunk: the whole convolution)
                part, part_spec, part_flat = None, dict(piece_spec), flat
                if len(chunks) > 1:
                    c_g, o_g = c // groups, out_channels // groups
                    part = (first * o_g, end_ * o_g)
                    part_spec.update(in_channels=(end_ - first) * c_g, out_channels=(end_ - first) * o_g,
                                     groups=end_ - first)
                    part_flat = api.run("slice", flat, [0, 0, 0, first * c_g],
                                        [1, 1, nb * h * piece_spec["input_width"], end_ * c_g], [1, 1, 1, 1])
                pw, pb = _prepared(weight, piece_bias, part_spec, x.tt_dtype, transposed, transform, part, taps)
                out = api.run("conv_transpose2d" if transposed else "conv2d", input_tensor=part_flat,
                              weight_tensor=pw, bias_tensor=pb, device=api.device(x.index), dtype=x.tt_dtype,
                              conv_config=_config(x.tt_dtype), **part_spec, **extra)
                if len(batches) == 1 and len(chunks) == 1 and len(pieces) == 1 and width == ow and not one_d:
                    return policy.channels_last(out, (n, out_channels, oh, ow))  # stays channels-last (layout.py)
                outs.append(reshape(out, (nb, oh, width, part_spec["out_channels"])))
            out = outs[0] if len(outs) == 1 else cat(outs, 3)
            total = out if total is None else api.run("add", total, out)
        rows.append(total)
    out = permute_handle(rows[0] if len(rows) == 1 else cat(rows, 0), (0, 3, 1, 2))
    if width != ow:
        out = slice_handle(out, 3, 0, ow)
    return _one_d(out, n, out_channels, ow) if one_d else out


# TT-NN conv2d (its sliding-window path: any convolution but a 1x1 one of stride 1 without padding, which it
# computes as a matmul) whose output is 1 or 2 columns wide stops in TT_FATAL "reader_indices_actual_page_size
# <= reader_indices_worst_case_page_size" (conv2d_op_program_factory_common.cpp) once the batch grows: measured
# on the mock device (3x3, padding 1, 64 channels), a 1x1 output from batch 16, 2x2 from 8, 8x1 from 4, a 2x2
# output of stride 2 from 8, at 16 to 256 channels alike, and ResNet-18's 1x1 stride-2 downsample of a 4x4
# map at batch 32; outputs 3 or more columns wide (3x3, 4x4, 1x8: up to batch 256) pass. ResNets meet it at
# CIFAR's 32x32 (layer4 is 1x1).
# Such a convolution runs on its input with zero columns added after the last window, so that the output is
# MIN_OUTPUT_WIDTH wide; the added columns are cropped (their windows see only padding and zeros, and no
# window of the real output reaches them).
MIN_OUTPUT_WIDTH = 3


# TT-NN conv2d with its input in DRAM (here, always) runs in slices of the output's rows or columns that each
# fit L1 (its "DRAM auto slice"), but never slices the batch: when its L1 estimate of the smallest slice (of
# every image) exceeds the free L1, TT_FATAL "DRAM Auto slice could not find valid slice configuration"
# (op_slicing.cpp), from prepare_conv_weights or conv2d. Measured on the mock device (ttnn 0.81.1's own
# estimate, 1.36 MB of L1 free): the largest batch that passes, for 7x7 images (14x14, 28x28, 7x28: the same;
# 3x3: 938 for 256->256 float32), 3x3 kernel, padding 1, channels in -> out:
#     float32:  16->1024 320, 64->64 960, 64->256 640, 64->1024 232, 128->128 384, 256->64 256,
#               256->256 256 (a 5x5 kernel: 152; stride 2 from 14x14: 168), 256->1024 192, 512->512 120,
#               1024->1024 48
#     bfloat16: 64->1024 576, 256->256 512, 1024->1024 120, 2048->256 64
# So the limit is the batch times the bytes of an input pixel's channels (plus about a ninth of an output
# pixel's), the image's size barely mattering: float32 storage (4 bytes an element) halves the batch that
# fits -- torchvision's two-stage detectors' box head, 3x3 convs of 256 channels over the 7x7 pooled regions
# of every proposal (286 in the zoo's image), no longer fits. conv_transpose2d: not measured apart, the same
# bound (300 x 256->256, 3x3, stride 2 failed before it). Every image's convolution is independent of the
# others', so such a batch runs in chunks (the results concatenated): exact, one conv2d per chunk (and one
# prepared weight per chunk size, at most two). The chunk size below is 0.26-0.73 of every measured limit.
_BATCH_BYTES = 128 * 1024


def _batches(n, c, o, kernel, stride, padding, dilation, tt_dtype) -> list:
    """The batch [0, n) as chunks [b0, b1) of nearly equal size, each small enough for TT-NN's DRAM slicing
    (see above): b * (C + O / 8) * element bytes * max(1, kernel extent / 9) * max(stride) <= _BATCH_BYTES.
    A 1x1 kernel of stride 1 and no padding is TT-NN's matmul route (no sliding window): one chunk."""
    if _pointwise(kernel, stride, padding):
        return [(0, n)]
    extent = math.prod(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    per_image = (c + o / 8) * (4 if tt_dtype == api.FLOAT32 else 2) * max(1.0, extent / 9) * max(stride)
    return batch_chunks(n, max(1, int(_BATCH_BYTES // per_image)))


# A 1-D convolution (one output row) cannot be cut into rows, and TT-NN's DRAM auto slice tries only the rows:
# when the whole row does not fit L1 it stops in TT_FATAL "DRAM Auto slice could not find valid slice
# configuration" (op_slicing.cpp). What decides is the kernel row's bytes an input channel (its width times the
# element's bytes), and the channels, not the length. Measured (mock n150, ttnn 0.81.1; one row of 40 to 400
# outputs, channels in -> out, groups 1; bfloat16 and float32 alike at equal bytes): 368 bytes (float32 kernel
# 92, bfloat16 184) pass at 256 -> 256 and fail at 384 -> 384, 512 -> 512, 256 -> 1024 and 1024 -> 256; 256 bytes
# (float32 64, bfloat16 128) pass up to 2048 -> 2048; 184 bytes 2048 -> 2048; 92 bytes 4096 -> 4096. Wider
# rows fail at one channel (float32 kernel 96, bfloat16 250: moonshine's 127 under float32 storage). A stride
# matters too, from 64 channels (float32, 3840 long): 64 -> 64 of stride 64 passes at kernel 48 and fails at 63,
# of stride 48 fails at 64, of stride 32 passes at 64; 128 bytes (float32 kernel 32, bfloat16 64) pass at
# strides 2 to 128 up to 1024 -> 1024; 368 bytes pass at 32 -> 256 and 1 -> 256 of stride 64 but not at 1 -> 512
# of stride 5. TT-NN's
# width slicing (Conv2dSliceConfig) is no way out: it overflows the circular buffers at 32 channels already
# (float32 kernel 128, 32 -> 32, groups 1 or 8: TT_THROW "circular buffers grow to 1678752 B"; wav2vec2's
# positional conv1d, 64 channels in groups of 4, at 1682848 B).
# So a one-row convolution whose kernel row is wider than its channels allow (_row_bytes) is the sum of the
# convolutions of its kernel's pieces, each as wide as allowed (the pieces nearly equal): piece (t0, t1) convolves
# taps t0..t1-1 with the columns of the zero-padded input those taps see (one slice), the bias added by the
# first. Exact up to the order of the sum; one conv2d, slice and add a piece, and one prepared weight a piece.
def _row_bytes(c: int, o: int, stride: int) -> int:
    """The widest kernel row (bytes an input channel) of a one-row convolution of c -> o channels (a chunk of
    groups: its own) and this stride along the row that TT-NN's DRAM slicing fits (measured: above)."""
    if stride > 1:
        return 368 if c <= 32 and o <= 256 else 128
    widest = max(c, o)
    return 368 if widest <= 256 else 256 if widest <= 2048 else 92


def _kernel_pieces(oh: int, kw: int, c: int, o: int, stride: int, tt_dtype) -> list:
    """A one-row convolution's kernel columns as pieces [t0, t1) each narrow enough for TT-NN's DRAM slicing
    (see above); [(0, kw)] for every other convolution."""
    element = 4 if tt_dtype == api.FLOAT32 else 2
    widest = max(1, _row_bytes(c, o, stride) // element)
    if oh != 1 or kw <= widest:
        return [(0, kw)]
    return batch_chunks(kw, widest)


def _takes_channels_last(x, weight, stride, padding, dilation, transposed, groups) -> bool:
    """Whether the route this convolution takes reads a channels-last input as it is: TT-NN conv2d's own
    (conv2d of one group or in chunks of groups, conv_transpose2d without groups or dilation: layout.nhwc) and
    the pointwise matmul of packed kernels, and the taps (depthwise, narrow groups: _tap_input) of a batch
    whose windows are made at once; not the grouped pointwise matmul (NCHW), the spread transposed
    convolutions nor conv1d."""
    if len(weight.shape) != 4:
        return False
    if transposed:
        return groups == 1 and all(d == 1 for d in _pair(dilation, 2))
    kernel = tuple(weight.shape[2:])
    c = x.shape[1]
    if groups > 1 and (_depthwise(x, weight, groups) or _grouped_taps(c // groups, math.prod(kernel))):
        per_image = math.prod(kernel) * (c // groups) * x.shape[2] * x.shape[3] * weight.shape[0]
        return x.shape[0] <= max(1, TAPS_WINDOWS // per_image)  # taps (many images: sliced NCHW)
    if groups > 1 and _pointwise(kernel, _pair(stride, 2), _pair(padding, 2)) and (c // groups) % 32 == 0 \
            and weight.host is not None:
        return False
    return True


def _pointwise(kernel, stride, padding) -> bool:
    """A 1x1 kernel of stride 1 and no padding: TT-NN conv2d's matmul route (no sliding window)."""
    return tuple(kernel) == (1, 1) and tuple(stride) == (1, 1) and tuple(padding) == (0, 0)


# A grouped convolution whose groups' input channels are not a multiple of 32 runs as taps (see the module
# docstring) when its windows hold at most TAPS_CHANNELS copies of each output element (kk * c_g: a 3x3
# kernel over groups of up to 32 channels); a wider one stays conv2d's groups= in chunks.
TAPS_CHANNELS = 9 * 32
# The windows of a batch are made at once up to TAPS_WINDOWS elements (kk * c_g * OH * OW * O an image: 14.4M for
# resnext50's first grouped layer at 224 x 224), 128 MiB in bfloat16; a larger batch runs in chunks of whole
# images (_common.batch_chunks), the results concatenated: exact, and a batch of 64 never holds 1.8 GB of windows
# (nor the mock's float32 shadow of them, on the host).
TAPS_WINDOWS = 1 << 26


def _grouped_taps(c_g: int, kk: int) -> bool:
    """Whether a grouped convolution (not depthwise) with c_g input channels a group and kk taps runs as taps
    (see above) rather than as conv2d's groups= in chunks."""
    return c_g % 32 != 0 and c_g * kk <= TAPS_CHANNELS


def _chunks(groups: int, c_g: int) -> list:
    """A grouped convolution's groups as chunks [first, end) of whole groups, each of s = 32 / gcd(c_g, 32)
    groups (the last: what is left), so that every chunk's input channels start at a multiple of 32 (a
    tile's width: the slice stays aligned). TT-NN conv2d's groups= prepares a chunk's weight as the
    block-diagonal [out, in, kh, kw], s times its kernel, where the whole convolution's would be `groups`
    times (resnext50_32x4d's 32 groups of 4 channels: 8 instead of 32; its widest, 32 groups of 32: 1
    instead of 32). The price: one slice and one conv2d per chunk, and a concat."""
    s = 32 // math.gcd(c_g, 32)
    if groups == 1 or s >= groups:
        return [(0, groups)]
    return [(j, min(j + s, groups)) for j in range(0, groups, s)]


# ----------------------------------------------------------------------------------------------- unfold / fold
# im2col (F.unfold) and col2im (F.fold) by the same windows as the depthwise lowering, in NCHW: im2col's
# column c * kh * kw + i * kw + j at block position l is the input at tap (i, j) of block l's window, so
# each tap is one strided slice of the zero-padded input, and the kk slices stacked on a new dimension
# after the channel are the result ([N, C, kk, L] read as [N, C * kk, L]). col2im adds each tap's block
# back at its window's place: spread by the stride (zeros between), padded to the canvas, summed; the
# padding is then cut off.

def windows(x, kernel, stride, dilation, oh: int, ow: int, dims=(2, 3)) -> list:
    """The kh * kw windows of a padded x whose spatial dimensions are `dims` (NCHW: (2, 3); NHWC: (1, 2)), in
    row-major tap order: tap (i, j)'s is one strided slice starting at (i * dh, j * dw), OH x OW there
    (the taps, im2col, the float32 pools of lowerings/pooling.py)."""
    (kh, kw), (sh, sw), (dh, dw), (dy, dx) = kernel, stride, dilation, dims
    out = []
    for i in range(kh):
        for j in range(kw):
            begins, ends, steps = [0] * len(x.shape), list(x.shape), [1] * len(x.shape)
            begins[dy], ends[dy], steps[dy] = i * dh, i * dh + (oh - 1) * sh + 1, sh
            begins[dx], ends[dx], steps[dx] = j * dw, j * dw + (ow - 1) * sw + 1, sw
            out.append(api.run("slice", x, begins, ends, steps))
    return out


def _block_counts(size, k, d, p, s) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _unbatched(x, op: str, ndim: int):
    if len(x.shape) == ndim - 1:
        return reshape(x, (1, *x.shape)), True
    if len(x.shape) != ndim or x.shape.numel() == 0:
        raise Unfit(f"{op}: input of shape {list(x.shape)}")
    return x, False


@lowering(aten.im2col.default, ttnn=["full", "concat", "slice", "reshape"], needs=TILE_FLOAT,
          notes="one strided slice of the zero-padded input per kernel tap, concatenated")
def im2col(x, kernel_size, dilation, padding, stride):
    x, unbatched = _unbatched(x, "im2col", 4)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (_pair(v, 2) for v in (kernel_size, dilation, padding, stride))
    n, c, h, w = x.shape
    oh, ow = _block_counts(h, kh, dh, ph, sh), _block_counts(w, kw, dw, pw, sw)
    if oh < 1 or ow < 1:
        raise Unfit(f"im2col: no complete block ({oh}x{ow}) in a {h}x{w} input")
    if ph or pw:
        x = constant_pad_nd(x, (pw, pw, ph, ph))
    taps = [reshape(t, (n, c, 1, oh * ow)) for t in windows(x, (kh, kw), (sh, sw), (dh, dw), oh, ow)]
    out = reshape(cat(taps, 2) if len(taps) > 1 else taps[0], (n, c * kh * kw, oh * ow))
    return reshape(out, out.shape[1:]) if unbatched else out


@lowering(aten.col2im.default, ttnn=["full", "concat", "slice", "reshape", "add"], needs=TILE_FLOAT,
          notes="each tap's blocks spread by the stride and padded into place, summed")
def col2im(x, output_size, kernel_size, dilation, padding, stride):
    x, unbatched = _unbatched(x, "col2im", 3)
    (h, w), (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (_pair(v, 2) for v in
                                                      (output_size, kernel_size, dilation, padding, stride))
    n, ckk, length = x.shape
    oh, ow = _block_counts(h, kh, dh, ph, sh), _block_counts(w, kw, dw, pw, sw)
    if ckk % (kh * kw) or oh < 1 or ow < 1 or oh * ow != length:
        raise Unfit(f"col2im: input {list(x.shape)} for output {[h, w]}, kernel {[kh, kw]}")  # PyTorch's errors
    c, hp, wp = ckk // (kh * kw), h + 2 * ph, w + 2 * pw
    blocks = reshape(x, (n, c, kh * kw, oh, ow))
    canvas = None
    for i in range(kh):
        for j in range(kw):
            t = i * kw + j
            part = reshape(api.run("slice", blocks, [0, 0, t, 0, 0], [n, c, t + 1, oh, ow], [1, 1, 1, 1, 1]),
                           (n, c, oh, ow))
            if sh > 1 or sw > 1:  # zeros between the blocks: [N, C, OH, 1, OW, 1] padded to the stride
                part = constant_pad_nd(reshape(part, (n, c, oh, 1, ow, 1)), (0, sw - 1, 0, 0, 0, sh - 1))
                part = reshape(part, (n, c, oh * sh, ow * sw))
            top, left = i * dh, j * dw
            part = constant_pad_nd(part, (left, wp - left - ow * sw, top, hp - top - oh * sh))
            canvas = part if canvas is None else api.run("add", canvas, part)
    if ph or pw:
        canvas = constant_pad_nd(canvas, (-pw, -pw, -ph, -ph))
    return reshape(canvas, canvas.shape[1:]) if unbatched else canvas


# ----------------------------------------------------------------------------------------------- fused (compile)
# Fused ops of vision graphs, put in place of their patterns by torch.compile's passes
# (features/compile/vision.py); their meaning (CPU and Meta kernels) is PyTorch's composition. Eager mode runs
# the same lowerings when a batch norm and activation fold into a deferred convolution ("eager fusion", at the
# end of this module): in a graph the users of each value are known; eagerly the convolution waits for its first
# reader instead.
#
#   conv_bn_act(x, w, b, stride, padding, dilation, groups, bn_w, bn_b, mean, var, eps, activation)
#       activation(batch_norm_eval(conv2d(x, w, b)))  -> one ttnn.conv2d: the eval batch norm folded into the
#       prepared weight and bias (w * scale, (b - mean) * scale + bn_b, on the host in float32, made once per
#       parameter versions: layout.prepared), the activation (relu, relu6, silu or none) given to conv2d
#       (Conv2dConfig.activation). Other routes (depthwise/narrow-group taps, grouped 1x1, conv1d, many
#       images): the convolution, batch norm and activation lowerings one after the other.
#   add_act(a, b, activation)
#       activation(a + b) (a residual add, ResNet's)  -> one ttnn.add(activations=[...])
LIB = torch.library.Library("ttnn_eager", "FRAGMENT")
LIB.define("conv_bn_act(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
           "int groups, Tensor? bn_weight, Tensor? bn_bias, Tensor running_mean, Tensor running_var, float eps, "
           "str? activation) -> Tensor")
LIB.define("add_act(Tensor input, Tensor other, str activation) -> Tensor")
ACTIVATIONS = {None: lambda t: t, "relu": torch.relu, "relu6": lambda t: torch.nn.functional.hardtanh(t, 0.0, 6.0),
               "silu": torch.nn.functional.silu}
_UNARY = {"relu": "RELU", "relu6": "RELU6", "silu": "SILU"}


def _conv_bn_act_meaning(x, w, b, stride, padding, dilation, groups, bn_w, bn_b, mean, var, eps, activation):
    y = torch.nn.functional.conv2d(x, w, b, stride, padding, dilation, groups)
    return ACTIVATIONS[activation](torch.nn.functional.batch_norm(y, mean, var, bn_w, bn_b, False, 0.0, eps))


def _add_act_meaning(a, b, activation):
    return ACTIVATIONS[activation](a + b)


for _name, _fn in (("conv_bn_act", _conv_bn_act_meaning), ("add_act", _add_act_meaning)):
    LIB.impl(_name, _fn, "CPU")
    LIB.impl(_name, _fn, "Meta")


def _unary(activation, binary: bool = False):
    """The activation as ttnn's UnaryWithParam (a binary op's relu6: RELU_MAX at 6, which ttnn's binary ops
    take where RELU6 is conv2d's)."""
    if binary and activation == "relu6":
        return api.enum("UnaryWithParam")(api.enum("UnaryOpType.RELU_MAX"), 6.0)
    return api.enum("UnaryWithParam")(getattr(api.enum("UnaryOpType"), _UNARY[activation]))


def _activate(out, activation):
    """activation of a convolution's result (NCHW, or channels-last: the same op on its flat form)."""
    if activation is None:
        return out
    op, kwargs = ("relu6", {}) if activation == "relu6" else (activation, {})
    if _resident(out):
        return policy.channels_last(api.run(op, policy.flat(out), **kwargs), out.shape)
    return api.run(op, out, **kwargs)


def _bn_fold(bias, parts, eps):
    """(scale, shift) per output channel of a convolution (bias `bias`) followed by the eval batch norm `parts` =
    (weight, bias, mean, var): conv(x, w * scale) + shift is the pair's result. Host float32, from the values."""
    bn_w, bn_b, mean, var = (None if p is None else api.host_value(p).float().reshape(-1) for p in parts)
    scale = torch.rsqrt(var + float(eps)) * (bn_w if bn_w is not None else 1.0)
    b = api.host_value(bias).float().reshape(-1) if bias is not None else torch.zeros_like(mean)
    return scale, (b - mean) * scale + (bn_b if bn_b is not None else 0.0)


def _folded_taps(weight, bias, parts, eps, groups: int):
    """A tap convolution's kernel block and bias row (_conv_taps' `folded`) with the eval batch norm `parts`
    folded in (the kernel's output columns times the scale, the shift as the bias), each a block of a pack read
    back by one slice (made during a graph capture: alone in TILE), made once per parameter versions."""
    versions = tuple(None if p is None else p.version for p in (bias, *parts))
    dtype = _pack_dtype(weight)

    def make(h):
        scale, shift = _bn_fold(bias, parts, eps)
        block = _tap_block(api.host_value(h).float() * scale.reshape(-1, 1, 1, 1), groups)
        return (policy.pack_form(block, h.index, dtype),
                policy.pack_form(shift.reshape(1, -1), h.index, dtype, policy.ROWS_WIDTH), versions)

    taps, row, _ = policy.prepared(weight, ("taps_bn", groups, float(eps)), make, stale=lambda f: f[2] != versions)
    _release(bias, *parts)
    return policy.unpacked(taps), policy.unpacked(row)


def _folded_matrix(weight, bias, parts, eps):
    """A small 1x1 convolution's kernel (as layout.pack_matrix stores it: [O, I] or transposed) and bias row with
    the eval batch norm `parts` folded in (the kernel's rows times the scale, the shift as the bias), each a block
    of a pack read back by one slice (made during a graph capture: alone in TILE), made once per parameter
    versions. Returns (kernel, row, transpose_b) for matmul_handles."""
    versions = tuple(None if p is None else p.version for p in (bias, *parts))
    dtype = _pack_dtype(weight)
    o, i = weight.shape[0], weight.shape[1:].numel()
    transposed = policy.matrix_transposed(o, i)

    def make(h):
        scale, shift = _bn_fold(bias, parts, eps)
        kernel = api.host_value(h).float().reshape(o, i) * scale.reshape(-1, 1)
        block = kernel.t() if transposed else kernel
        return (policy.pack_form(block, h.index, dtype),
                policy.pack_form(shift.reshape(1, -1), h.index, dtype, policy.ROWS_WIDTH), versions)

    kernel, row, _ = policy.prepared(weight, ("matrix_bn", float(eps)), make, stale=lambda f: f[2] != versions)
    _release(bias, *parts)
    return policy.unpacked(kernel), policy.unpacked(row), not transposed


def _folded(weight, bias, parts, eps, spec: dict, input_dtype, activation):
    """conv2d's prepared weight and bias with the eval batch norm `parts` = (weight, bias, mean, var) folded in,
    made once per (spec, parameter versions); the values read on the host in float32."""
    versions = tuple(None if p is None else p.version for p in (bias, *parts))
    key = ("conv_bn", input_dtype, tuple(sorted(spec.items())), float(eps), activation)
    config = _config(input_dtype)
    config.activation = None if activation is None else _unary(activation)
    common = dict(input_memory_config=api.enum("DRAM_MEMORY_CONFIG"), input_layout=api.TILE, **spec,
                  device=api.device(weight.index), input_dtype=input_dtype, conv_config=config)

    def make(h):
        scale, shift = _bn_fold(bias, parts, eps)
        pw = api.prepare("prepare_conv_weights", "weight_tensor", h, tuple(h.shape),
                         transform=lambda w: w.float() * scale.reshape(-1, 1, 1, 1), weights_format="OIHW",
                         has_bias=True, **common)
        pb = api.prepare("prepare_conv_bias", "bias_tensor", parts[2], (1, 1, 1, shift.numel()),
                         transform=lambda _: shift, **common)
        return pw, pb, versions

    pw, pb, _ = policy.prepared(weight, key, make, stale=lambda form: form[2] != versions)
    _release(bias, *parts)
    return pw, pb, config


def _release(*params):
    """Parameters folded into a prepared form staged back on the host (api.release, as batch norm's own fold
    does): the form replaces them on the device; their values stay exact for any other reader."""
    if api.recording is None:
        for p in params:
            if p is not None and p.tt is not None:
                api.release(p)


def _fused_route(x, weight, stride, padding, dilation, groups):
    """The route on which conv_bn_act folds a batch norm into the convolution x * weight (stride, padding and
    dilation pairs): "taps" (depthwise or narrow grouped taps of one batch: the folded packed kernel and bias
    row), "conv2d" (one group, one batch, an output wide enough: one ttnn.conv2d of the folded prepared weight
    and bias), or None (the convolution, batch norm and activation run one after the other)."""
    if len(weight.shape) != 4 or len(x.shape) != 4:
        return None
    n, c, h, w = x.shape
    o, (kh, kw) = weight.shape[0], tuple(weight.shape[2:])
    if groups > 1:
        taps = _depthwise(x, weight, groups) or _grouped_taps(c // groups, kh * kw)
        return "taps" if taps and _takes_channels_last(x, weight, stride, padding, dilation, False, groups) else None
    oh, ow = (_out_size(size, k, st, p, d, 0, False) for size, k, st, p, d in
              zip((h, w), (kh, kw), stride, padding, dilation))
    if (ow < MIN_OUTPUT_WIDTH and not _pointwise((kh, kw), stride, padding)) \
            or len(_batches(n, c, o, (kh, kw), stride, padding, dilation, x.tt_dtype)) > 1 \
            or len(_kernel_pieces(oh, kw, c, o, stride[1], x.tt_dtype)) > 1:
        return None
    return "conv2d"


@lowering(torch.ops.ttnn_eager.conv_bn_act.default, ttnn=["conv2d", "to_layout", "reshape", "permute", "expand", "pad",
                                                          "slice", "concat", "mul", "sum", "add"],
          needs={"input": TILE_FLOAT_CL, "*": STAGED},
          notes="compile only (features/compile/vision.py): eval batch norm folded into the prepared weight and "
                "bias, relu/relu6/silu as conv2d's activation; depthwise and narrow grouped taps with the norm "
                "folded into their packed kernel and bias row; other routes unfused")
def conv_bn_act(x, weight, bias, stride, padding, dilation, groups, bn_weight, bn_bias, running_mean,
                running_var, eps, activation):
    return _conv_bn_act(x, weight, bias, stride, padding, dilation, groups, bn_weight, bn_bias, running_mean,
                        running_var, eps, activation)


# ttnn.linear's fused activations (of conv_bn_act's: relu6 runs after it)
_LINEAR_ACTIVATION = {"relu": "relu", "silu": "silu"}


def _conv_bn_act(x, weight, bias, stride, padding, dilation, groups, bn_weight, bn_bias, running_mean,
                 running_var, eps, activation, packed: bool = False):
    """conv_bn_act; `packed` (eager fusion): a small 1x1 convolution whose conv2d form would take more than its
    packed kernel (layout.packs_matrix, as the unfused convolution decides) is a linear of the folded packed
    kernel and bias row (two slices and one ttnn.linear, the activation fused but relu6), so that eager fusion
    keeps the unfused weight memory; compiled graphs keep one conv2d each (fewer ops)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"ttnn_eager.conv_bn_act: activation {activation!r} is not one of relu, relu6, silu")
    parts = (bn_weight, bn_bias, running_mean, running_var)
    stride, padding, dilation = _pair(stride, 2), _pair(padding, 2), _pair(dilation, 2)
    n, c, h, w = x.shape
    o, (kh, kw) = weight.shape[0], tuple(weight.shape[2:])
    oh, ow = (_out_size(size, k, s, p, d, 0, False) for size, k, s, p, d in
              zip((h, w), (kh, kw), stride, padding, dilation))
    route = _fused_route(x, weight, stride, padding, dilation, groups)
    if route == "taps":  # one batch
        folded = _folded_taps(weight, bias, parts, eps, groups)
        return _conv_taps(x, weight, None, (kh, kw), stride, padding, dilation, oh, ow, groups=groups, folded=folded,
                          activation=activation)
    if (packed and route == "conv2d" and _pointwise((kh, kw), stride, padding) and weight.host is not None
            and policy.packs_matrix(o, c, True, x.index)):  # (the fused form has a bias)
        kernel, row, transpose_b = _folded_matrix(weight, bias, parts, eps)
        fused = _LINEAR_ACTIVATION.get(activation)
        out = policy.channels_last(matmul_handles(policy.nhwc(x), kernel, transpose_b, row, activation=fused),
                                   (n, o, oh, ow))
        return out if fused is not None else _activate(out, activation)
    if route is None:
        from .batchnorm import native_batch_norm_legit_no_training
        out = _convolve(x, weight, bias, stride, padding, dilation, False, (0, 0), groups)
        out = native_batch_norm_legit_no_training(out, bn_weight, bn_bias, running_mean, running_var, 0.0, eps)[0]
        return _activate(out, activation)
    spec = dict(in_channels=c, out_channels=o, batch_size=n, input_height=h, input_width=w,
                kernel_size=(kh, kw), stride=stride, padding=padding, dilation=dilation, groups=1)
    pw, pb, config = _folded(weight, bias, parts, eps, spec, x.tt_dtype, activation)
    out = api.run("conv2d", input_tensor=policy.nhwc(x), weight_tensor=pw, bias_tensor=pb,
                  device=api.device(x.index), dtype=x.tt_dtype, conv_config=config, **spec)
    return policy.channels_last(out, (n, o, oh, ow))


@lowering(torch.ops.ttnn_eager.add_act.default, ttnn=["add"], needs=PROMOTE_CL,
          notes="compile only: a residual add with its activation fused (ttnn.add activations=)")
@policy.keeps_channels_last
def add_act(a, b, activation):
    if activation not in _UNARY:
        raise ValueError(f"ttnn_eager.add_act: activation {activation!r} is not one of relu, relu6, silu")
    if not (type(a) is api.Handle and type(b) is api.Handle and tuple(a.shape) == tuple(b.shape)
            and a.tt_dtype == b.tt_dtype and a.dtype.is_floating_point):
        raise Unfit("add_act: two floating tensors of one shape and storage")
    return api.run("add", a, b, activations=[_unary(activation, binary=True)])


# ----------------------------------------------------------------------------------------------- eager fusion
# With config "eager_fusion" (the default) and autograd not recording, a convolution whose route conv_bn_act
# folds a batch norm into (_fused_route) is not run by its lowering: its result is a *deferred* handle
# (Handle.pending = a Deferred: the convolution's input and parameters, checked as the lowering checks them).
# An eval batch norm whose input is such a handle returns a new deferred handle, the norm folded in
# (conv_bn_act's fold: one place, made once per parameter versions by layout.prepared); a ReLU, ReLU6 (clamp
# to [0, 6]) or SiLU of that returns one with the activation (conv2d's, or the taps' bias add's). Any other
# reader of a deferred handle -- a lowering, a view, an in-place write, a download, a shadow read, a graph
# capture -- reads its `tt`, which runs it first (base.Handle.force): conv_bn_act, or the plain convolution.
# A residual add of a deferred convolution (alpha 1, the other operand of its shape and storage) is deferred too
# (DeferredAdd), so that a ReLU/ReLU6/SiLU of the sum makes it add_act (one ttnn.add with the activation).
# So conv -> bn -> relu is one ttnn.conv2d, and a convolution's result read again after its batch norm used it
# runs the convolution then as well (one more conv2d: correct, not cheaper). The deferred computation holds its
# own handles: the input as it was (x.shared(): in-place writes replace a device tensor, never modify one
# another handle holds: api.sole_owner), and the parameters with their versions and a snapshot of each, used
# instead if a parameter is written before the computation runs.
class Deferred:
    """A convolution (and the eval batch norm and activation folded into it) not yet run: see above."""

    __slots__ = ("x", "params", "versions", "snapshots", "geometry", "eps", "activation", "shape", "result")

    def __init__(self, x, params, geometry, shape, eps=None, activation=None, versions=(), snapshots=()):
        self.x, self.params, self.geometry, self.shape = x, params, geometry, shape
        self.eps, self.activation = eps, activation
        new = params[len(versions):]  # (the parameters not seen before: snapshots taken now)
        self.versions = versions + tuple(None if p is None else p.version for p in new)
        self.snapshots = snapshots + tuple(None if p is None else p.shared() for p in new)
        self.result = None

    def folded(self, bn=(), eps=None, activation=None) -> "Deferred":
        """This computation with the eval batch norm bn = (weight, bias, mean, var) folded in, or `activation`."""
        return Deferred(self.x, self.params + tuple(bn), self.geometry, self.shape, self.eps if eps is None else eps,
                        activation, self.versions, self.snapshots)

    def run(self) -> api.Handle:
        """The value (computed at the first call; the same Handle after)."""
        if self.result is None:
            weight, bias, *bn = [p if p is None or p.version == v else s
                                 for p, v, s in zip(self.params, self.versions, self.snapshots)]
            self.snapshots = None  # (the parameters' device buffers held by it alone: the fold releases them)
            stride, padding, dilation, groups = self.geometry
            if bn:
                out = _conv_bn_act(self.x, weight, bias, stride, padding, dilation, groups, *bn, self.eps,
                                   self.activation, packed=True)
            else:
                out = _convolve(self.x, weight, bias, stride, padding, dilation, False, (0, 0), groups)
            self.result, self.x, self.params, self.snapshots = out, None, None, None
        return self.result


def _defers(x, weight, bias, stride, padding, dilation, transposed, groups) -> bool:
    """Whether this convolution's result is deferred (see above)."""
    if not config.settings["eager_fusion"] or transposed or api.recording is not None or torch.is_grad_enabled():
        return False
    if not (x.dtype.is_floating_point and weight.dtype.is_floating_point and not x.pinned and len(weight.shape) == 4
            and weight.source is None and (bias is None or bias.source is None)):
        return False
    stride, padding, dilation = _pair(stride, 2), _pair(padding, 2), _pair(dilation, 2)
    sizes = [_out_size(x.shape[2 + i], weight.shape[2 + i], stride[i], padding[i], dilation[i], 0, False) for i in (0, 1)]
    route = _fused_route(x, weight, stride, padding, dilation, groups) if min(sizes) >= 1 else None
    if route != "conv2d":
        return route is not None
    o, c = weight.shape[0], x.shape[1]  # (folded as a packed matrix, or into conv2d where the bias costs little)
    return ((_pointwise(tuple(weight.shape[2:]), stride, padding) and weight.host is not None
             and policy.packs_matrix(o, c, True, x.index))
            or policy.folds_into_conv2d(o, weight.shape[1:].numel(), bias is not None, x.index))


def _deferred(d, like, shape=None) -> api.Handle:
    """A handle whose value is d's (a Deferred's, or `shape` if given), computed at its first reading
    (base.Handle.pending)."""
    return api.Handle(None, None, like.dtype, d.shape if shape is None else shape, like.index).defer(d)


def _conv_deferred(x, weight, bias, stride, padding, dilation, groups) -> api.Handle:
    stride, padding, dilation = _pair(stride, 2), _pair(padding, 2), _pair(dilation, 2)
    shape = (x.shape[0], weight.shape[0],
             *(_out_size(x.shape[2 + i], weight.shape[2 + i], stride[i], padding[i], dilation[i], 0, False) for i in (0, 1)))
    return _deferred(Deferred(x.shared(), (weight, bias), (stride, padding, dilation, groups), shape), x)


def _fold_batch_norm(x, weight, bias, mean, var, eps):
    """An eval batch norm of a deferred convolution (nothing folded into it yet): the norm folded in."""
    d = x.pending
    if type(d) is not Deferred or len(d.params) != 2 or torch.is_grad_enabled() or mean is None or var is None:
        return None
    o = x.shape[1]
    if any(p is not None and (type(p) is not api.Handle or p.shape.numel() != o or not p.dtype.is_floating_point)
           for p in (weight, bias, mean, var)):
        return None  # (the lowering reports what is wrong)
    empty = api.Handle(None, None, x.dtype, (0,), x.index)  # (the saved statistics of an eval batch norm)
    return _deferred(d.folded((weight, bias, mean, var), float(eps)), x), empty, empty


@fusion(aten._native_batch_norm_legit_no_training.default)
def fuse_batch_norm_no_training(x, weight, bias, running_mean, running_var, momentum, eps):
    return _fold_batch_norm(x, weight, bias, running_mean, running_var, eps)


@fusion(aten._native_batch_norm_legit.default, aten.native_batch_norm.default)
def fuse_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    return None if training else _fold_batch_norm(x, weight, bias, running_mean, running_var, eps)


class DeferredAdd:
    """a + b (a deferred convolution's value, a handle of its shape and storage), and the activation of the sum,
    not yet run: add_act, or the add alone."""

    __slots__ = ("a", "b", "activation", "result")

    def __init__(self, a: Deferred, b, activation=None):
        self.a, self.b, self.activation, self.result = a, b, activation, None

    def run(self) -> api.Handle:
        if self.result is None:
            from .elementwise import add
            a = self.a.run()
            out = add(a, self.b) if self.activation is None else add_act(a, self.b, self.activation)
            self.result, self.a, self.b = out, None, None
        return self.result


@fusion(aten.add.Tensor)
def fuse_add(a, b, alpha=1):
    d = a.pending
    if (type(d) is not Deferred or alpha != 1 or type(b) is not api.Handle or b is a or b.shape != a.shape
            or b.dtype != a.dtype or torch.is_grad_enabled()):
        return None
    b = b.shared()  # (its value now: a deferred b is computed here)
    if b.layout != api.TILE or b.tt_dtype != d.x.tt_dtype:
        return None
    return _deferred(DeferredAdd(d, b), a, a.shape)


def _fold_activation(x, activation):
    """activation of a deferred convolution with its batch norm folded in and no activation yet, or of a
    deferred residual add."""
    d = x.pending
    if type(d) is DeferredAdd and d.activation is None:
        return _deferred(DeferredAdd(d.a, d.b, activation), x, x.shape)
    if type(d) is not Deferred or len(d.params) != 6 or d.activation is not None:
        return None
    return _deferred(d.folded(activation=activation), x)


@fusion(aten.relu.default)
def fuse_relu(x):
    return _fold_activation(x, "relu")


@fusion(aten.silu.default)
def fuse_silu(x):
    return _fold_activation(x, "silu")


@fusion(aten.clamp.default)
def fuse_clamp(x, min=None, max=None):  # ReLU6 (hardtanh(0, 6), decomposed to clamp)
    return _fold_activation(x, "relu6") if min == 0 and max == 6 else None
