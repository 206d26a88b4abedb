"""The layout and dtype policy: the one place that decides how a tensor is stored on the device.

TT-NN computes on TILE tensors: 32x32 tiles, the last two dimensions padded to multiples of 32, the logical
shape kept beside the padded one. ttnn 0.81.1 also accepts ROW_MAJOR for its data-movement ops and, as
docs/layouts.md measures, for embedding indices, typecast and gather. So every tensor is uploaded TILE and
stays TILE; the ROW_MAJOR tensors are an embedding table (converted once, in place, at its first lookup) and
convolution kernels (parameters of 3+ dims whose last two are under 32: TILE would pad each 3x3 plane to
32x32; a use that needs TILE converts them like any other tensor).

Convolution kernels are *staged* (api.stage): `.to("ttnn:0")` keeps their value on the host, and their
device form is the one conv2d consumes, made by ttnn.prepare_conv_weights (which reads a host tensor) at the
first convolution -- so a conv kernel takes its bfloat16 size once on the device, not its stored ROW_MAJOR
form (one 32-byte-aligned DRAM page per kernel row: 5.3x for 3x3, 16x for 1x1) plus its prepared form. So
is a 0-d integer whose value is known (BatchNorm's num_batches_tracked: one tile in each of the 12 DRAM
banks, 48 KiB). Any other use uploads it first (`materialize`, counted in host_to_device); a write from the
host into a staged tensor (load_state_dict) stays staged.

Storage (at upload, `storage_for`):
    torch.float32    bfloat16 TILE   (float32 with configure(float32_storage="float32"); the torch dtype
                                      PyTorch sees stays float32, like a TF32 switch. With "mixed": an
                                      uploaded nn.Parameter bfloat16, everything else float32, and an op's
                                      float32 result made of parameters alone -- an embedding lookup -- is
                                      widened to float32 (`widened`, by the dispatcher), so activations are
                                      float32 while weights keep their bfloat16 bytes; so do the forms made
                                      of parameters: packs, conv2d's prepared weights (parameter_storage))
    torch.bfloat16   bfloat16 TILE
    torch.float16    bfloat16 TILE   (TT-NN has no float16)
    torch.bool       bfloat16 TILE   (0.0 / 1.0; comparisons on the device produce the same)
    integer dtypes   uint32 TILE when every value is >= 0 (token ids, positions, masks), else int32 TILE;
                     uint32 storage is how the backend knows a tensor is non-negative: embedding and gather
                     take it as indices without any conversion, and subtraction (which could wrap around)
                     first converts it to int32
    wide int64       int64 values beyond int32 (checked at upload): no device storage; the exact value is
                     kept on the host (api.keep_on_host, warned once) and every op on it runs on the CPU
                     fallback, whose results go back to the device when they fit (a hash taken modulo a
                     table size)
    matmul weights   with configure(weight_dtype="bfloat8_b"): 2-D parameters (both sizes >= 32) are
                     stored bfloat8_b TILE at upload; an embedding table among them is widened back to
                     bfloat16 once, at its first lookup
    torch.complex64  a real pair tensor: its view_as_real value ([*shape, 2], real and imaginary parts
                     last) stored as float32 is; the Handle keeps torch's view (complex64, the complex
                     shape) and its device tensor is the pair's (as_pair / as_complex: the same device
                     tensor seen either way). Only the complex lowerings (lowerings/complex.py) compute
                     on it: dispatch sends every op with a complex argument there, or to the CPU fallback
    float64          refused (TypeError naming a dtype to use), or with configure(float64="float32"):
                     float32 TILE (exact float32 whatever float32_storage says), torch dtype float64,
                     a one-time warning at the first one
    complex128, complex32: refused (TypeError naming a dtype to use)
    float constants  a finite constant or uploaded float32 value beyond bfloat16's range
                     (torch.finfo(torch.float32).min, the usual "masked" score) is stored as bfloat16's largest
                     finite value, not rounded to infinity: a softmax over a row masked entirely with it then
                     stays finite, as in float32 on the CPU

Training (configure(train_dtype=...), docs/training.md). bfloat16 has an 8-bit mantissa: an update smaller
than ~2^-8 of a weight (lr * grad, a momentum's (1 - beta) * g) rounds away, and Adam's second moment would
never decay (v * 0.999 == v in bfloat16). So with train_dtype="float32" (the default):
    trainable parameters   a float32 tensor that requires grad and is written in place (an optimizer update:
                           PyTorch allows in-place writes into such leaves only under no_grad) is widened to
                           float32 storage first, exactly, and stays float32; the update is then computed in
                           float32 (PROMOTE meets a float32 operand). Until its first update a parameter keeps
                           its upload storage, so inference (model.to("ttnn:0") with no optimizer) is unchanged
    optimizer states       tensors made like a trainable parameter (zeros_like / ones_like / full_like /
                           empty_like: Adam's exp_avg and exp_avg_sq, SGD's momentum buffer made from it) are
                           float32
    gradients              as the backward computes them: bfloat16 storage of a float32 tensor (the backward
                           is bfloat16 matmuls); the states and parameters they update are float32
train_dtype="bfloat16" keeps everything bfloat16 (half the memory; small updates are lost).

Needs (declared by each lowering per argument, applied by `ensure` before the lowering runs):
    ANY         as it is
    TILE        TILE layout, dtype kept
    TILE_FLOAT  TILE layout, floating dtype (integer/bool tensors are converted to bfloat16)
    PROMOTE     TILE layout; all PROMOTE arguments of one call share a device dtype (floating if any is)
    SIGNED      TILE layout; uint32 converted to int32 (ops that may produce negative values)
    (scatter)   ttnn.scatter takes TILE, but float32 only ROW_MAJOR (scatter_layout)
    INDEX       uint32, any layout (embedding and gather indices)
    TABLE       ROW_MAJOR bfloat16 (embedding tables; converted in place, so once; a float32 table -- a trained
                one -- is copied to bfloat16 at each lookup)
    STAGED      as it is, and a staged tensor stays on the host (conv weights: their consumer prepares them
                from the host value; views, clones and copies of a staged tensor are staged too)
    ...|SHARDED as the need, taking decode-layout heads height-sharded in L1 as they are (TILE_SHARDED,
                TILE_FLOAT_SHARDED: TT-NN's decode ops); every other need gets them in DRAM ("Decode-layout
                residency" below)
Compute-kernel configs (`compute_config(kind, index)`, passed by every lowering whose ttnn op takes one):
    kind        ttnn ops                          math_fidelity  fp32_dest_acc  math_approx
    matmul      matmul, linear                    HiFi2          True           False
    sdpa        transformer.scaled_dot_product_attention  HiFi2  True           False
    softmax     softmax                           HiFi4          True           False
    layer_norm  layer_norm                        HiFi4          True           False
    reduce      sum, mean, max, min               HiFi4          True           False
    distance    matmul (cdist's x @ y^T)          HiFi4          True           False
    integer     matmul of integer tensors         HiFi4          True           False   (not overridden)
    HiFi2 takes all 7 mantissa bits of a bfloat16 (or bfloat8_b) weight, which enters SrcA, and the top 6 of
    the activation in SrcB (numerics.py); a 32-bit Dst keeps the long (K up to 4096) accumulations of
    bert-large from being rounded to bfloat16 after every 16 products. Normalizations and reductions run
    at full fidelity as TT-NN's own models do. math_approx stays off: the approximations are not documented,
    so the shadow could not model them. configure(math_fidelity=, fp32_dest_acc=, math_approx=) overrides
    a column for every kind. The same config class serves Wormhole B0 and Blackhole in ttnn 0.81.1
    (WormholeComputeKernelConfig, built by ttnn.init_device_compute_kernel_config for the device's arch);
    ARCH_CHOICES lists what each architecture accepts, and anything else is refused before ttnn is called.
Prepared forms (`prepared`): a parameter re-laid out into the private form one TT-NN op consumes -- conv2d's
weights and bias (ttnn.prepare_conv_weights / prepare_conv_bias), whose form depends on the input's size,
the kernel and the sharding conv2d picks -- is made once per (parameter, op configuration) and kept on the
parameter's handle (Handle.forms) while it lives and is not written; a steady-state forward prepares
(converts) nothing. The forms die with the handle (no module-level cache holds them). Small per-channel
forms (batch-norm folds, depthwise taps and biases, small 1x1 convolution kernels and biases: pack_matrix)
and per-channel parameters [C, 1, 1] are kept in shared packs (`pack`, `unpack`: see "packed vectors"
below), where alone TILE would pad them 32x to 1024x.

Transfers (`transfer_layout`, used by `to_device` and `download`): a tensor crosses PCIe in its own layout,
except a TILE tensor whose tile padding would at least double the bytes moved and add 64 KiB or more -- a
1-D tensor is one row padded to 32 (32x), e.g. DDP's flat gradient buckets and the staging buffers of
torch.distributed collectives: it moves ROW_MAJOR and is converted on the device (ttnn.to_layout, counted
as a ttnn op, not a layout conversion: the stored layout is unchanged). Floating dtypes only (bfloat16,
float32); smaller tensors keep one transfer and no device op. `transfer_bytes` is the bytes one moves.

`ensure` changes a handle's layout in place -- the converted form replaces the old one, so a weight
converted once stays converted and no second copy is kept -- while a dtype change that may lose information
gives a new handle. Each conversion is counted in `layout_conversions`.
"""
from __future__ import annotations

import dataclasses
import functools
import weakref

import torch

from .. import config, counters
from ..device import api

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
BFLOAT16_MAX = float(torch.finfo(torch.bfloat16).max)


@dataclasses.dataclass(frozen=True)
class Need:
    name: str
    layout: object = None   # api.TILE / api.ROW_MAJOR / None (keep)
    dtype: str = "keep"     # "keep" | "float" | "promote" | "signed" | "uint32" | "bfloat16"
    channels_last: bool = False  # a channels-last image is taken as it is (see "Channels-last residency")
    sharded: bool = False        # decode-layout heads are taken sharded as they are (see "Decode-layout residency")

    def __repr__(self):
        return self.name


ANY = Need("ANY")
TILE = Need("TILE", api.TILE)
TILE_FLOAT = Need("TILE_FLOAT", api.TILE, "float")
PROMOTE = Need("PROMOTE", api.TILE, "promote")
SIGNED = Need("SIGNED", api.TILE, "signed")
INDEX = Need("INDEX", None, "uint32")
TABLE = Need("TABLE", api.ROW_MAJOR, "bfloat16")
STAGED = Need("STAGED")
# the same, taking a channels-last image as it is (the lowering reads it through `flat`): convolutions, pools,
# eval batch norm, pointwise ops (`keeps_channels_last`)
TILE_CL = Need("TILE|NHWC", api.TILE, channels_last=True)
TILE_FLOAT_CL = Need("TILE_FLOAT|NHWC", api.TILE, "float", True)
PROMOTE_CL = Need("PROMOTE|NHWC", api.TILE, "promote", True)
ANY_CL = Need("ANY|NHWC", channels_last=True)  # permute: a channels-last image to NHWC is a reshape (views.py)
# the same, taking decode-layout heads height-sharded in L1 as they are: TT-NN's decode ops (lowerings/fused.py)
TILE_SHARDED = Need("TILE|SHARDED", api.TILE, sharded=True)
TILE_FLOAT_SHARDED = Need("TILE_FLOAT|SHARDED", api.TILE, "float", sharded=True)

_FLOAT_DEVICE = {torch.float32: None, torch.bfloat16: api.BFLOAT16, torch.float16: api.BFLOAT16,
                 torch.bool: api.BFLOAT16}
_FLOAT64_DEVICE = api.FLOAT32  # float64 with configure(float64="float32") (check_dtype refuses it otherwise)
_INT = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
_FLOAT_TT = (api.BFLOAT16, api.FLOAT32, api.BFLOAT8_B)


COMPUTE = {  # kind -> (math_fidelity, fp32_dest_acc, math_approx); see the module docstring
    "matmul": ("HiFi2", True, False),
    "sdpa": ("HiFi2", True, False),
    "softmax": ("HiFi4", True, False),
    "layer_norm": ("HiFi4", True, False),
    "reduce": ("HiFi4", True, False),
    "distance": ("HiFi4", True, False),  # float32 operands: a nearest-codebook argmin reads the last bits
    "exact": ("HiFi4", True, False),     # products that must be exact -- integer matmuls, the rotary's half turn
                                         # (a signed permutation) -- which configure() does not override
}
_BOTH = (False, True)
ARCH_CHOICES = {  # arch -> what its compute-kernel config accepts (ttnn 0.81.1)
    "WORMHOLE_B0": {"math_fidelity": config.FIDELITIES, "fp32_dest_acc": _BOTH, "math_approx": _BOTH},
    "BLACKHOLE": {"math_fidelity": config.FIDELITIES, "fp32_dest_acc": _BOTH, "math_approx": _BOTH},
}
_configs: dict = {}


def compute_settings(kind: str) -> dict:
    """The compute-kernel settings of op kind `kind` after configure()'s overrides."""
    fidelity, fp32, approx = COMPUTE[kind]
    if kind == "exact":  # exactness is not a precision preference
        return {"math_fidelity": fidelity, "fp32_dest_acc": fp32, "math_approx": approx}
    s = config.settings
    return {"math_fidelity": s["math_fidelity"] or fidelity,
            "fp32_dest_acc": fp32 if s["fp32_dest_acc"] is None else s["fp32_dest_acc"],
            "math_approx": approx if s["math_approx"] is None else s["math_approx"]}


def compute_config(kind: str, index: int):
    """The ttnn compute-kernel config for op kind `kind` on device `index` (built once per setting)."""
    s = config.settings
    key = (kind, index, s["math_fidelity"], s["fp32_dest_acc"], s["math_approx"])
    ckc = _configs.get(key)
    if ckc is None:
        chosen = compute_settings(kind)
        arch = api.arch(index)
        choices = ARCH_CHOICES.get(arch)
        if choices is None:
            raise ValueError(f"no compute-kernel config is known for architecture {arch} "
                             f"(known: {', '.join(ARCH_CHOICES)})")
        for name, value in chosen.items():
            if value not in choices[name]:
                raise ValueError(f"{name}={value!r} is not available on {arch}; choices: {choices[name]}")
        ckc = _configs[key] = api.compute_kernel_config(index, *chosen.values())
    return ckc


def float_device_dtype():
    return api.BFLOAT16 if config.settings["float32_storage"] == "bfloat16" else api.FLOAT32


def check_dtype(dtype: torch.dtype) -> None:
    if dtype in _FLOAT_DEVICE or dtype in _INT or dtype is torch.complex64:
        return
    if dtype is torch.float64 and config.settings["float64"] == "float32":
        _warn_float64()
        return
    hint = "torch.complex64" if dtype.is_complex else "torch.float32" if dtype.is_floating_point else "torch.int32"
    also = (" or ttnn_eager.configure(float64=\"float32\") to keep it float64 stored as float32"
            if dtype is torch.float64 else "")
    raise TypeError(f"ttnn devices do not support {dtype}; convert the tensor first, e.g. x.to({hint}){also} "
                    f"(supported: float32, bfloat16, float16, bool, int64, int32, int16, int8, uint8, complex64)")


FLOAT64_WARNING = ("ttnn devices have no float64: float64 tensors are stored and computed as float32 "
                   "(PyTorch still reports float64; about 7 significant digits, float32's range)")
_float64_warned = False


def _warn_float64() -> None:
    """configure(float64="float32"): the first float64 tensor of the process says what it gets, once."""
    global _float64_warned
    if not _float64_warned:
        _float64_warned = True
        import warnings
        warnings.warn(FLOAT64_WARNING, UserWarning, stacklevel=4)


# ----------------------------------------------------------------------------------------------- complex
def as_pair(h: api.Handle) -> api.Handle:
    """A complex64 tensor's device value as the real tensor it is stored as: float32, shape [*shape, 2] (what
    torch.view_as_real gives), the same device tensor (no device op)."""
    if h.dtype is not torch.complex64:
        raise TypeError(f"ttnn_eager: as_pair expects a complex64 tensor, got {h.dtype}")
    if h.tt is None and h.host is None:
        materialize(h)
    p = api.Handle(h.tt, h.shadow, torch.float32, (*h.shape, 2), h.index)
    p.host, p.root = h.host, h.root
    return p


def as_complex(p: api.Handle) -> api.Handle:
    """A real pair tensor ([..., 2], floating) as the complex64 tensor it stores (the same device tensor)."""
    if not p.shape or p.shape[-1] != 2:
        raise RuntimeError(f"Tensor must have a last dimension of size 2 (got shape {list(p.shape)})")
    if p.tt is not None and not is_float(p.tt_dtype):
        p = _typecast(ensure(p, TILE), float_device_dtype())
    h = api.Handle(p.tt, p.shadow, torch.complex64, p.shape[:-1], p.index)
    h.host, h.root = p.host, p.root
    return h


def finite_constant(value, tt_dtype=None):
    """A Python float constant as a bfloat16 device tensor (tt_dtype None: the float storage) can hold it:
    finite values beyond bfloat16's range saturate instead of becoming +-inf."""
    if type(value) is float and abs(value) > BFLOAT16_MAX and value == value and abs(value) != float("inf") \
            and (tt_dtype or float_device_dtype()) != api.FLOAT32:
        return BFLOAT16_MAX if value > 0 else -BFLOAT16_MAX
    return value


def storage_for(dtype: torch.dtype, nonnegative: bool = False):
    """(device dtype, layout) for a tensor of torch dtype `dtype` (complex64: of its real pair tensor)."""
    check_dtype(dtype)
    if dtype is torch.complex64:
        return float_device_dtype(), api.TILE
    if dtype in _INT:
        return (api.UINT32 if nonnegative else api.INT32), api.TILE
    if dtype is torch.float64:
        return _FLOAT64_DEVICE, api.TILE
    return (_FLOAT_DEVICE[dtype] or float_device_dtype()), api.TILE


def _int_range(value: torch.Tensor):
    if not value.numel():
        return 0, 0
    return int(value.min()), int(value.max())  # (bool tensors: 0/1)


def fits_int32(value) -> bool:
    """A Python number the device's int32 integers hold (a float or bool always: it becomes a float or 0/1)."""
    return not isinstance(value, int) or isinstance(value, bool) or INT32_MIN <= value <= INT32_MAX


def is_matmul_weight(value: torch.Tensor) -> bool:
    return (isinstance(value, torch.nn.Parameter) and value.dim() == 2 and value.dtype.is_floating_point
            and min(value.shape) >= api.TILE_SIZE)


def is_kernel_weight(value: torch.Tensor) -> bool:
    """A convolution kernel ([out, in, kh, kw] with small kh, kw; a conv1d's [out, in, k] with a small k, any
    in): TILE would pad each kh x kw plane to 32x32 (a 3x3 kernel takes 114x its size; SqueezeBERT's kernel-1
    conv1d [768, 192, 1] 32x), and its consumer, conv2d's weight preparation, reads it once."""
    return (isinstance(value, torch.nn.Parameter) and value.dim() >= 3 and value.shape[-1] < api.TILE_SIZE
            and (value.dim() == 3 or value.shape[-2] < api.TILE_SIZE))


_TRAINABLE = weakref.WeakSet()  # handles of parameters that require grad (uploaded, or written in place)


def is_trainable(value: torch.Tensor) -> bool:
    return isinstance(value, torch.nn.Parameter) and value.requires_grad and value.dtype == torch.float32


def train_storage(h: api.Handle) -> api.Handle:
    """A trainable parameter about to be updated in place: widened to float32 storage (exact, in place) under
    train_dtype="float32", so that the update is computed and kept in float32."""
    _TRAINABLE.add(h)
    if h.host is not None:
        materialize(h)
    if config.settings["train_dtype"] == "float32" and h.tt is not None and h.tt_dtype != api.FLOAT32 \
            and h.dtype == torch.float32:
        _relayout(h, api.TILE)
        new = _typecast(h, api.FLOAT32)
        h.tt, h.shadow = new.tt, new.shadow
    return h


def storage_like(h: api.Handle, dtype: torch.dtype, nonnegative: bool = False):
    """(device dtype, layout) of a tensor of `dtype` made like h (zeros_like, ...): float32 for float32
    tensors made like a trainable parameter (optimizer states) under train_dtype="float32", else
    storage_for(dtype)."""
    if dtype == torch.float32 and h in _TRAINABLE and config.settings["train_dtype"] == "float32":
        return api.FLOAT32, api.TILE
    return storage_for(dtype, nonnegative)


def to_device(value: torch.Tensor, index: int, into: api.Handle | None = None) -> api.Handle:
    """Upload a CPU tensor under the storage policy (the torch dtype PyTorch sees is kept); a convolution
    kernel (is_kernel_weight) and a 0-d integer or bool tensor (its value known: bounds) are staged on the
    host instead (api.stage), and so is a value written into a staged tensor `into` (copy_: load_state_dict),
    in its layout. A complex64 value is uploaded as its real pair (view_as_real)."""
    if value.dtype is torch.complex64:
        return as_complex(to_device(torch.view_as_real(value.detach().resolve_conj()).contiguous(), index))
    bounds = None
    if value.dtype in _INT or value.dtype == torch.bool:
        bounds = (*_int_range(value), True) if value.numel() else None
        if bounds is not None and not (fits_int32(bounds[0]) and fits_int32(bounds[1])):
            # int64 values beyond int32 (what the device stores int64 as): kept exactly on the host, not wrapped
            # or refused; the dispatcher sends every op on them to the counted CPU fallback
            return api.keep_on_host(value, index, bounds)
    tt_dtype, layout = storage_for(value.dtype, bounds is not None and bounds[0] >= 0)
    if config.settings["weight_dtype"] == "bfloat8_b" and is_matmul_weight(value):
        tt_dtype = api.BFLOAT8_B
    elif isinstance(value, torch.nn.Parameter):  # (float32_storage="mixed": bfloat16)
        tt_dtype = parameter_storage(value.dtype, tt_dtype)
    kernel = value.numel() > 0 and is_kernel_weight(value)
    if value.numel() == 0 or kernel:
        layout = api.ROW_MAJOR
    elif value.dtype == torch.float32 and tt_dtype != api.FLOAT32:
        value = _saturated(value)
    if into is not None and into.host is not None and not api.is_host_only(into) and value.numel():
        h = api.stage(value, tt_dtype, into.host[2], index, bounds=bounds)
    elif kernel or (value.dim() == 0 and bounds is not None):  # (a known 0-d integer: num_batches_tracked)
        h = api.stage(value, tt_dtype, layout, index, bounds=bounds)
    else:
        h = api.upload(value, tt_dtype, layout, index, bounds=bounds,
                       via=transfer_layout(value.shape, tt_dtype, layout))
    if is_trainable(value):
        _TRAINABLE.add(h)
    return h


_STAGED_TT = (api.BFLOAT16, api.FLOAT32)
STAGING_MIN_SAVING = 64 << 10  # bytes: below this one more device op costs more than the PCIe bytes saved


def transfer_layout(shape, tt_dtype, layout):
    """The layout a tensor of `shape` stored as (tt_dtype, layout) crosses PCIe in (see the module docstring)."""
    if layout != api.TILE or tt_dtype not in _STAGED_TT:
        return layout
    tile = api.buffer_bytes(shape, tt_dtype, api.TILE)
    rows = api.buffer_bytes(shape, tt_dtype, api.ROW_MAJOR)
    return api.ROW_MAJOR if tile >= 2 * rows and tile - rows >= STAGING_MIN_SAVING else layout


def transfer_bytes(h: api.Handle) -> int:
    """Bytes an upload or download of h moves across PCIe (0 for a handle with no device tensor)."""
    if h.tt is None:
        return 0
    return api.buffer_bytes(h.shape, h.tt_dtype, transfer_layout(h.shape, h.tt_dtype, h.layout))


def download(h: api.Handle) -> torch.Tensor:
    """h's value on the host (.cpu(), copy_ into a CPU tensor), moved in its transfer layout."""
    via = transfer_layout(h.shape, h.tt_dtype, h.layout) if h.tt is not None else None
    return api.download(h, via=via)


def _saturated(value: torch.Tensor) -> torch.Tensor:
    """A float32 tensor stored as bfloat16: finite values beyond bfloat16's range (a mask made on the host
    with torch.finfo(torch.float32).min) become its largest finite value, as constants do (finite_constant);
    infinities stay infinite. One pass (aminmax) when every value is in range."""
    lo, hi = torch.aminmax(value)
    if lo >= -BFLOAT16_MAX and hi <= BFLOAT16_MAX:
        return value
    beyond = value.isfinite() & (value.abs() > BFLOAT16_MAX)
    return torch.where(beyond, value.sign() * BFLOAT16_MAX, value) if beyond.any() else value


def materialize(h: api.Handle) -> api.Handle:
    """Give a staged handle its device tensor (its host value, uploaded), an unwritten (torch.empty) one
    zeros."""
    if api.is_host_only(h):  # (dispatch sends every op on it to the CPU fallback: this is a lowering's own use)
        lo, hi, _ = h.bounds
        raise RuntimeError(f"int64 values in [{lo}, {hi}] do not fit the device's int32 integers "
                           f"[{INT32_MIN}, {INT32_MAX}], so this tensor is kept on the host, and this operation "
                           f"cannot take it on the device; compute with it on the CPU")
    if h.tt is None and h.host is not None:
        api.upload_staged(h)
    elif h.tt is None and h.dtype is torch.complex64:  # zeros as its real pair
        h.assign(as_complex(api.create("zeros", ((*h.shape, 2),), float_device_dtype(), api.TILE, h.index,
                                       torch.float32)))
    elif h.tt is None:
        tt_dtype, layout = storage_for(h.dtype)
        h.assign(api.create("zeros", (tuple(h.shape),), tt_dtype, layout, h.index, h.dtype))
    return h


def _relayout(h: api.Handle, layout) -> None:
    """Change h's layout in place (lossless, so every user of h may share the converted form)."""
    if layout is not None and h.layout != layout and h.shape.numel():
        new = api.run("to_layout", h, layout)
        counters.counts["layout_conversions"] += 1
        h.tt, h.shadow = new.tt, new.shadow


def _typecast(h: api.Handle, tt_dtype) -> api.Handle:
    """h converted to device dtype `tt_dtype`: a new handle (the original stays as it is). Block-float
    dtypes exist only in TILE, so a conversion to one tilizes first."""
    if h.tt_dtype == tt_dtype:
        return h
    if not h.shape.numel():  # ttnn.typecast of a zero-size tensor divides by zero (SIGFPE: the process dies)
        return api.upload(torch.empty(tuple(h.shape), dtype=h.dtype), tt_dtype, api.ROW_MAJOR, h.index, h.dtype)
    if tt_dtype == api.BFLOAT8_B:
        _relayout(h, api.TILE)
    counters.counts["layout_conversions"] += 1
    out = api.run("typecast", h, tt_dtype)
    out.bounds = h.bounds  # the values, where representable, are unchanged (negative ones are checked by users)
    return out


def is_float(tt_dtype) -> bool:
    return tt_dtype in _FLOAT_TT


def satisfies(tt, need: Need) -> bool:
    """The device tensor `tt` is already in the form `need` asks for, so `ensure` has nothing to do (for
    PROMOTE: its layout; one dtype across the arguments is ensure_promoted's to check)."""
    if need.layout is not None and tt.layout != need.layout:
        return False
    kind = need.dtype
    return (kind == "keep" or kind == "promote" or kind == "float" and is_float(tt.dtype)
            or kind == "signed" and tt.dtype != api.UINT32 or kind == "uint32" and tt.dtype == api.UINT32
            or kind == "bfloat16" and tt.dtype == api.BFLOAT16)


def ensure(h: api.Handle, need: Need) -> api.Handle:
    """h in the form `need` asks for: layout changes and lossless widenings happen in place (and stay),
    other dtype changes give a new handle."""
    if h.tt is None:
        if need is STAGED and h.host is not None:
            return h
        if need.layout is api.TILE and is_packed_column(h):
            return ensure(_unpacked_column(h), need)
        materialize(h)
    elif not need.channels_last and len(h.shape) == 4 and is_channels_last(h):
        to_nchw(h)
    if not need.sharded and sharded_made:
        interleaved(h)
    if satisfies(h.tt, need):
        return h  # the common case
    if need.dtype == "float" and not is_float(h.tt_dtype):
        h = _typecast(h, api.BFLOAT16)
    elif need.dtype == "signed" and h.tt_dtype == api.UINT32:
        h = _typecast(h, api.INT32)
    elif need.dtype == "uint32" and h.tt_dtype != api.UINT32:
        h = _typecast(h, api.UINT32)
    elif need.dtype == "bfloat16" and h.tt_dtype == api.BFLOAT8_B:  # widening: exact, so in place
        new = _typecast(h, api.BFLOAT16)
        h.tt, h.shadow = new.tt, new.shadow
    elif need.dtype == "bfloat16" and h.tt_dtype != api.BFLOAT16:  # a float32 table (trained): a bfloat16 copy
        h = _typecast(ensure(h, TILE), api.BFLOAT16)
    _relayout(h, need.layout)
    return h


def like(h: api.Handle, other: api.Handle) -> api.Handle:
    """h (TILE) in other's device dtype (a new handle when it differs), e.g. a bool condition for an integer op."""
    return _typecast(ensure(h, TILE), other.tt_dtype)


_TABLE_PARTS: "weakref.WeakKeyDictionary" = None


def table_parts(h: api.Handle) -> list:
    """An embedding table as ttnn.embedding takes it (ROW_MAJOR bfloat16), as a list of tables whose rows sum
    to the table's rows: [h] itself (converted in place, see TABLE) -- or, for a float32 table (float32
    storage), three bfloat16 tables hi + mid + lo that add up to the float32 values exactly (each part holds
    the next 8 bits of the mantissa), built once and kept while h holds the same device tensor."""
    global _TABLE_PARTS
    if h.tt is None or h.tt_dtype != api.FLOAT32:
        return [ensure(h, TABLE)]
    if _TABLE_PARTS is None:
        import weakref
        _TABLE_PARTS = weakref.WeakKeyDictionary()
    cached = _TABLE_PARTS.get(h)
    if cached is not None and cached[0] is h.tt:
        return cached[1]
    # The first part is the value clamped to bfloat16's range: float32's largest magnitudes (a mask's
    # finfo(float32).min) round to an infinite bfloat16, and the remainder x - (-inf) to +inf (-inf + inf: NaN in
    # the sum; informer's ProbSparse mask under mixed storage). An infinite value is whole in the first two parts
    # (BFLOAT16_MAX and the infinity), its third part 0 (inf - inf: NaN, zeroed); a NaN stays NaN in every part.
    parts, rest = [], ensure(h, TILE)
    for i in range(3):
        if i < 2:
            part, rest = float32_split(rest, clamp=i == 0)
        else:
            part = _typecast(rest, api.BFLOAT16)
        if i == 1:
            rest = api.run("where", api.run("logical_and", api.run("isnan", rest), api.run("isinf", part)), 0.0, rest)
        _relayout(part, api.ROW_MAJOR)
        parts.append(part)
    _TABLE_PARTS[h] = (h.tt, parts)
    return parts


def float32_split(h: api.Handle, clamp: bool = True) -> tuple:
    """A float32 tensor as hi + lo, exactly: hi its value rounded to bfloat16 (TILE; with `clamp`, within
    bfloat16's range first, so that float32's largest magnitudes give a finite hi and a finite lo), lo the rest
    x - hi in float32 (exact: the bits bfloat16 drops). table_parts' step; matmul's float32 products
    (lowerings/matmul.py) multiply the parts."""
    rest = ensure(h, TILE)
    hi = _typecast(api.run("clamp", rest, min=-BFLOAT16_MAX, max=BFLOAT16_MAX) if clamp else rest, api.BFLOAT16)
    return hi, api.run("subtract", rest, _typecast(hi, api.FLOAT32))


def widened(result):
    """float32_storage="mixed": an op's float32 result computed from bfloat16-stored parameters alone (an
    embedding lookup, `1 + weight`) stored as float32 like every other float32 value (a list or tuple of
    results: each)."""
    if type(result) is api.Handle:
        if result.dtype == torch.float32 and result.tt is not None and result.tt_dtype == api.BFLOAT16:
            return to_float32(result)
        return result
    if type(result) in (list, tuple):
        return type(result)(widened(r) for r in result)
    return result


# Ops whose result holds its inputs' values (moved, selected, compared): from bfloat16 parameters alone they
# are exact in bfloat16 and `widened` after them is enough (from_parameters leaves them).
_EXACT_ON_VALUES = frozenset((
    "embedding", "cat", "stack", "index_select", "gather", "index", "clone", "_to_copy", "copy", "slice",
    "select", "constant_pad_nd", "repeat", "flip", "roll", "narrow", "split", "split_with_sizes", "unbind",
    "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "squeeze", "unsqueeze", "expand", "alias",
    "detach", "lift_fresh", "contiguous", "where", "masked_fill", "max", "min", "amax", "amin", "maximum",
    "minimum", "eq", "ne", "lt", "le", "gt", "ge", "sort", "topk", "argmax", "argmin", "relu", "neg", "abs",
    "sign", "isnan", "isinf", "isfinite", "zeros_like", "ones_like", "empty_like", "full_like", "fill",
    "_local_scalar_dense", "tril", "triu", "diagonal", "unfold", "repeat_interleave"))


def from_parameters(op_name: str, handles: list) -> bool:
    """float32_storage="mixed": whether an op computes its float32 result from bfloat16-stored parameters
    alone -- every floating handle among `handles` a float32 tensor stored bfloat16 in TILE -- with arithmetic
    whose bfloat16 result would round what PyTorch computes in float32 from the same bfloat16 values (a
    weight norm, F.normalize of a codebook, `1 + weight`): its inputs are then given to it in float32
    (`to_float32`, copies), as `widened` would give its result. Ops that only move, select or compare values
    (_EXACT_ON_VALUES) are exact in bfloat16 and keep the parameters' bytes."""
    if op_name in _EXACT_ON_VALUES:
        return False
    found = False
    for h in handles:
        if type(h) is not api.Handle or not h.dtype.is_floating_point:
            continue
        if h.dtype != torch.float32 or h.tt is None or h.tt_dtype != api.BFLOAT16 or h.tt.layout != api.TILE:
            return False
        found = True
    return found


def parameter_storage(dtype: torch.dtype, otherwise=None):
    """The device dtype of a parameter of torch dtype `dtype` and of the forms made from parameters (a pack's
    blocks: folded batch norms, tap kernels; conv2d's prepared weights): bfloat16 for float32 under
    float32_storage="mixed", else `otherwise` (default: storage_for's)."""
    if dtype == torch.float32 and config.settings["float32_storage"] == "mixed":
        return api.BFLOAT16
    return otherwise if otherwise is not None else storage_for(dtype)[0]


def to_float32(h: api.Handle) -> api.Handle:
    """h computed in float32 on the device (a new handle), for ops whose result bfloat16 would change."""
    return _typecast(ensure(h, TILE), api.FLOAT32)


def stored(h: api.Handle) -> api.Handle:
    """h in the device dtype its torch dtype is stored in (e.g. back to bfloat16 after a float32 computation
    made by to_float32): a new handle when it differs."""
    target = storage_for(h.dtype)[0]
    return h if h.tt is None or h.tt_dtype == target else _typecast(h, target)


def as_integer(h: api.Handle, tt_dtype=api.INT32) -> api.Handle:
    """h (bool, stored bfloat16 0/1, or integer) in integer device dtype `tt_dtype` (int32 or uint32), TILE:
    for bitwise ops and integer results of index ops (ttnn's uint16 indices)."""
    return _typecast(ensure(h, TILE), tt_dtype)


def int32_rows(h: api.Handle) -> api.Handle:
    """h as int32 ROW_MAJOR, how TT-NN's paged ops take their page table and positions: made once per h while
    it is not written (prepared)."""
    def make(x):
        x = _typecast(ensure(x, TILE), api.INT32)
        return api.run("to_layout", x, api.ROW_MAJOR)
    if h.tt is not None and h.tt_dtype == api.INT32 and h.layout == api.ROW_MAJOR:
        return h
    return prepared(h, ("int32_rows",), make)


def signed(h: api.Handle) -> api.Handle:
    return ensure(h, SIGNED)


# ----------------------------------------------------------------------------------------------- channels-last residency
# TT-NN's sliding-window ops (conv2d, max_pool2d, ...) read an image channels-last, flattened to [1, 1, N*H*W, C],
# and write [1, 1, N*OH*OW, O]. Their result stays so on the device while PyTorch sees the NCHW tensor
# [N, O, OH, OW]: the handle's torch shape is NCHW, its device tensor the flat NHWC one. That is the whole
# record -- a 4-d handle whose device tensor is [1, 1, N*H*W, C] where its shape is [N, C, H, W] (and the two
# differ; where they do not, both readings are the same values) -- so it travels with the device tensor:
# Handle.shared, assign and retag keep it, an in-place write replaces it. Nothing else makes a 4-d handle
# whose device shape differs from its own.
#
# Who takes it as it is: lowerings whose Need says channels_last (convolution, max/avg pooling, eval batch
# norm, and the pointwise ops wrapped by `keeps_channels_last`: relu, add, ... of channels-last operands of
# one shape give a channels-last result). Every other use gets the NCHW tensor: `ensure` permutes it once,
# in place (to_nchw, counted in nchw_conversions: the handle then stays NCHW, and so every later reader,
# a view's re-derivation included, sees NCHW), and the device API's download reads it back to NCHW on the
# host (a user's .cpu(), the CPU fallback: no device op).

# Whether any channels-last handle was made in this process (channels_last, the one place that makes them; a
# handle derived from one -- shared, assigned, replayed -- comes after it): until then no handle is, and
# is_channels_last answers without reading the device tensor's shape (a ttnn.Shape and four index reads,
# ~0.6 us, on every 4-d argument of every op: a transformer's attention is all 4-d).
channels_last_made = False


def is_channels_last(h: api.Handle) -> bool:
    """h (a 4-d handle with a device tensor) is stored channels-last: see above."""
    if not channels_last_made:
        return False
    s = h.tt.shape
    hs = h.shape
    if len(s) != 4 or (s[2] == hs[2] and s[3] == hs[3] and s[0] == hs[0] and s[1] == hs[1]):
        return False
    n, c, height, width = hs
    return s[0] == 1 and s[1] == 1 and s[2] == n * height * width and s[3] == c


def channels_last(flat_h: api.Handle, shape) -> api.Handle:
    """The flat channels-last result `flat_h` ([1, 1, N*H*W, C], from a sliding-window op) as the NCHW
    tensor [N, C, H, W] PyTorch sees (the same device tensor)."""
    global channels_last_made
    n, c, height, width = shape
    assert tuple(flat_h.tt.shape) == (1, 1, n * height * width, c), (tuple(flat_h.tt.shape), shape)
    channels_last_made = True
    flat_h.shape = torch.Size(shape)
    return flat_h


def flat(h: api.Handle) -> api.Handle:
    """A channels-last handle as its device tensor's own shape [1, 1, N*H*W, C] (a new handle, same tensor)."""
    f = h.shared()
    f.shape = api.shape_of(h.tt)
    return f


def nhwc(h: api.Handle) -> api.Handle:
    """An NCHW image h [N, C, H, W] (TILE) as the flat channels-last [1, 1, N*H*W, C] sliding-window ops
    read (h itself, flat, when it is stored so; else one permute and one reshape)."""
    if is_channels_last(h):
        return flat(h)
    n, c, height, width = h.shape
    if c == 1 or height * width == 1:  # the same values in either order
        return api.run("reshape", h, (1, 1, n * height * width, c))
    return api.run("reshape", api.run("permute", h, (0, 2, 3, 1)), (1, 1, n * height * width, c))


def to_nchw(h: api.Handle) -> api.Handle:
    """A channels-last h stored NCHW, in place (a reshape and a permute on the device: counted in
    nchw_conversions; a 1x1 image or a single channel is a reshape only)."""
    n, c, height, width = h.shape
    f = flat(h)
    if c == 1 or height * width == 1:
        new = api.run("reshape", f, (n, c, height, width))
    else:
        new = api.run("permute", api.run("reshape", f, (n, height, width, c)), (0, 3, 1, 2))
    counters.counts["nchw_conversions"] += 1
    h.tt, h.shadow, h.root = new.tt, new.shadow, new.root
    return h


# ----------------------------------------------------------------------------------------------- decode-layout residency
# TT-NN's decode ops keep a decode step's heads [1, users, heads, d] height-sharded in L1, one user a core (a
# shard of [heads padded to 32, d] each): ttnn.experimental.nlp_create_qkv_heads_decode writes them so, the
# rotary embedding in decode mode (rotary_embedding_hf(is_decode_mode=True)) takes and gives them so, with its
# cos and sin [1, users, 1, d] sharded the same way (`decode_rows`), and the paged cache update and paged
# attention read them so -- the layout of tt-metal's hand-written decoders (models/tt_transformers). Such a
# result stays sharded on its handle.
#
# Who takes it as it is: lowerings whose Need says sharded (the rotary embedding's input, the paged ops' new rows
# and query). Every other use gets it in DRAM, interleaved: `ensure` moves it once, in place (`interleaved`, one
# ttnn.to_memory_config, counted in layout_conversions; the handle then stays interleaved for every later
# reader), since other TT-NN ops may not take a height-sharded tensor (ttnn.sum stops in a TT_FATAL on these
# heads, fill_pad's `N_slices == 1`, measured on ttnn 0.81.1). Downloads read sharded tensors as they are.

# Whether any sharded handle was made in this process (`decode_resident`, called by the lowerings that make one):
# until then none is, and the dispatcher's fast path skips the check (a ttnn call, ~0.1 us, on every argument).
sharded_made = False


def decode_resident(handles):
    """The lowerings' results that are decode-layout heads, sharded (see above): returned as they are."""
    global sharded_made
    sharded_made = True
    return handles


def is_sharded(h: api.Handle) -> bool:
    """h's device tensor is sharded (in L1): see "Decode-layout residency"."""
    return sharded_made and h.tt is not None and h.tt.is_sharded()


def interleaved(h: api.Handle) -> api.Handle:
    """h in DRAM, interleaved, in place (nothing to do unless it is sharded): see "Decode-layout residency"."""
    if is_sharded(h):
        new = api.run("to_memory_config", h, memory_config=api.enum("DRAM_MEMORY_CONFIG"))
        h.tt, h.shadow, h.root = new.tt, new.shadow, new.root
        counters.counts["layout_conversions"] += 1
    return h


def decode_heads(h: api.Handle) -> api.Handle:
    """Heads h [1, users, heads, d] (TILE) height-sharded one user a core, as TT-NN's decode ops read them: h as
    it is when it is so (the result of nlp_create_qkv_heads_decode or of a decode-mode rotary embedding), else a
    sharded copy (a step of the caller's computation, not a conversion of h)."""
    _, users, heads, d = h.shape
    config = api.height_sharded(h.index, users, -(-heads // api.TILE_SIZE) * api.TILE_SIZE, d)
    if is_sharded(h) and h.tt.memory_config() == config:
        return h
    return decode_resident(api.run("to_memory_config", interleaved(h), memory_config=config))


def decode_rows(h: api.Handle) -> api.Handle:
    """A decode step's cos or sin [1, users, 1, d] (TILE) height-sharded one user a core, as the rotary embedding
    in decode mode reads it: made once per h while it is not written (prepared), so every layer of a graph run
    that shares the step's cos and sin shares this form."""
    _, users, _, d = h.shape
    return prepared(h, ("decode_rows",), lambda x: decode_resident(
        api.run("to_memory_config", interleaved(x), memory_config=api.height_sharded(x.index, users, api.TILE_SIZE, d))))


# Sliding windows cut by slices -- the taps of depthwise and narrow grouped convolutions (lowerings/conv.py) --
# are cut from a ROW_MAJOR image [B, H, W, C]: ttnn.pad pads the front of a ROW_MAJOR tensor in one op, where a
# TILE one takes end padding only (TT_FATAL "front_padding_is_zero", measured on ttnn 0.81.1), so that zero
# padding was four ttnn.full blocks and two concats; and ROW_MAJOR does not pad W to 32 (a 7x7 image's rows:
# 4.6x in TILE). The stacked windows go back to TILE for the multiply as [kk, 1, B*OH*OW, C], the pixels as
# rows (no OW padding either). Each change is one ttnn.to_layout of a new tensor -- a step of the lowering's
# computation, like a permute, not a conversion of a stored tensor (layout_conversions does not count it).

def windows_input(h: api.Handle) -> api.Handle:
    """An image [B, H, W, C] whose windows are cut by slices, as a ROW_MAJOR tensor (see above; h keeps its
    layout)."""
    return h if h.layout == api.ROW_MAJOR else api.run("to_layout", h, api.ROW_MAJOR)


def windows_output(h: api.Handle) -> api.Handle:
    """The stacked windows as the TILE tensor the multiply by the kernel takes (see above)."""
    return h if h.layout == api.TILE else api.run("to_layout", h, api.TILE)


def keeps_channels_last(fn):
    """A pointwise lowering (unary, or binary of operands of one shape) that keeps the channels-last storage:
    when its handle operands are channels-last images of one shape (the others Python numbers), it computes on
    their flat form and its result is channels-last too. So it does when the other operands are per-channel
    (_per_channel: [N or 1, C or 1, 1, 1], e.g. squeeze-excitation's scale, ConvNeXt's layer scale [C, 1, 1]):
    they broadcast over the flat image's pixels as rows. When only some operands are channels-last otherwise,
    those are made NCHW first (one permute each, to_nchw). Registered with a channels_last Need (TILE_CL,
    TILE_FLOAT_CL, PROMOTE_CL)."""
    @functools.wraps(fn)
    def lower(*args, **kwargs):
        marked = [type(a) is api.Handle and a.tt is not None and len(a.shape) == 4 and is_channels_last(a)
                  for a in args]
        if not any(marked):
            return fn(*args, **kwargs)
        handles = [a for a in args if type(a) is api.Handle]
        shape = max((a.shape for a, m in zip(args, marked) if m), key=lambda s: s.numel())
        if sum(marked) == len(handles) and all(a.shape == shape for a in handles):
            out = fn(*(flat(a) if m else a for a, m in zip(args, marked)), **kwargs)
            return channels_last(out, shape)
        images = [m and a.shape == shape for a, m in zip(args, marked)]
        if all(i or type(a) is not api.Handle or _per_channel(a, shape) for a, i in zip(args, images)):
            return _broadcast_channels_last(fn, args, kwargs, images, shape)
        return fn(*(to_nchw(a) if m else a for a, m in zip(args, marked)), **kwargs)
    return lower


def _per_channel(h: api.Handle, shape) -> bool:
    """h broadcasts against an image of `shape` [N, C, H, W] with one value per image and channel (or fewer):
    its shape, aligned right, is [N or 1, C or 1, 1, 1] (of at most 4 dimensions)."""
    s = (1,) * (4 - len(h.shape)) + tuple(h.shape) if len(h.shape) <= 4 else None
    return (s is not None and h.tt is not None and s[2] == s[3] == 1 and s[0] in (1, shape[0])
            and s[1] in (1, shape[1]))


def _broadcast_channels_last(fn, args, kwargs, images, shape):
    """fn on channels-last images of `shape` and per-channel operands (_per_channel): the images flat, each other
    operand as rows [1, C] over their pixels -- or, per image ([N, C, 1, 1] with N > 1), the images as [N, H*W, C]
    and the operand as [N, 1, C] -- one reshape each (none for a channels-last [1, C, 1, 1]: its flat form is the
    row); the result channels-last."""
    n, c, height, width = shape
    per_image = n > 1 and any(type(a) is api.Handle and not i and
                              ((1,) * 4 + tuple(a.shape))[-4] == n for a, i in zip(args, images))

    def operand(a, image):
        if type(a) is not api.Handle:
            return a
        if image:
            f = flat(a)
            return api.run("reshape", f, (n, height * width, c)) if per_image else f
        s = ((1,) * 4 + tuple(a.shape))[-4:]
        value = flat(a) if len(a.shape) == 4 and is_channels_last(a) else a
        target = (s[0], 1, s[1]) if per_image else (1, s[1])
        if len(value.shape) == 4 and tuple(value.shape) == (1, 1, 1, s[1]) and not per_image:
            return value
        return api.run("reshape", value, target)
    out = fn(*(operand(a, i) for a, i in zip(args, images)), **kwargs)
    if per_image:
        out = api.run("reshape", out, (1, 1, n * height * width, c))
    return channels_last(out, shape)


def from_nhwc(h: api.Handle) -> api.Handle:
    """An NHWC image h [N, H, W, C] permuted to NCHW ([0, 3, 1, 2]: ConvNeXt after its block's linears) as a
    channels-last handle -- its values as they are, flattened to [1, 1, N*H*W, C]: one reshape, where the
    permute would be one op and the next convolution's or pointwise op's NHWC form another."""
    n, height, width, c = h.shape
    out = api.run("reshape", h, (1, 1, n * height * width, c))
    return channels_last(out, (n, c, height, width))


def ensure_promoted(handles: list) -> list:
    """PROMOTE: TILE, and one device dtype for all -- floating if any is floating, else int32 (uint32 when
    all are uint32). A channels-last image among them stays so (the dispatcher made NCHW those whose lowering
    does not take channels-last images: PROMOTE_CL)."""
    first = handles[0].tt.dtype if handles[0].tt is not None else None
    if all(h.tt is not None and satisfies(h.tt, PROMOTE) and h.tt.dtype == first for h in handles):
        return handles  # the common case: nothing to do
    resident = [h.tt is not None and len(h.shape) == 4 and is_channels_last(h) for h in handles]
    handles = [ensure(h, TILE_CL if r else TILE) for h, r in zip(handles, resident)]
    first = handles[0].tt.dtype
    if any(h.tt.dtype != first for h in handles[1:]):
        dtypes = [h.tt_dtype for h in handles]
        floats = [d for d in dtypes if is_float(d)]
        target = api.FLOAT32 if api.FLOAT32 in floats else (api.BFLOAT16 if floats else api.INT32)
        handles = [channels_last(_typecast(h, target), h.shape) if r and h.tt_dtype != target else _typecast(h, target)
                   for h, r in zip(handles, resident)]
    return handles


def for_write(base: api.Handle, value: api.Handle) -> tuple:
    """(base, value) both TILE in one device dtype, for writing `value` into part of `base` (a scatter): the
    value takes the base's storage (a float value is rounded as the base stores it), except that a signed
    value makes an unsigned base signed (uint32 storage promises non-negative values)."""
    base, value = ensure(base, TILE), ensure(value, TILE)
    if base.tt_dtype == value.tt_dtype:
        return base, value
    if base.tt_dtype == api.UINT32 and not is_float(value.tt_dtype) and not (value.bounds and value.bounds[0] >= 0):
        return _typecast(base, api.INT32), _typecast(value, api.INT32)
    return base, _typecast(value, base.tt_dtype)


def scatter_layout(h: api.Handle, d: int | None = None, source: api.Handle | None = None):
    """The layout ttnn.scatter/scatter_add take for a tensor like h and its source (of h's device dtype),
    scattered along d: TILE, except float32, which ttnn 0.81.1's scatter refuses in TILE ("!(input_dtype ==
    FLOAT32 && input_layout == TILE)", the same for the source), and a 32-bit integer input or source longer
    than 256 along d ("Scatter doesn't work for int32 tensors that have scatter row longer than 256 elements",
    checked for the input, the index and the source alike: one_hot over 260 classes, LongCat-Flash's router;
    GLM-5-Next's count of 2063 top-k picks into a short row): ROW_MAJOR then."""
    if h.tt_dtype == api.FLOAT32:
        return api.ROW_MAJOR
    if d is not None and h.tt_dtype in (api.INT32, api.UINT32):
        longest = max(h.shape[d], source.shape[d] if source is not None else 0)
        if longest > SCATTER_I32_TILE_MAX:
            return api.ROW_MAJOR
    return api.TILE


SCATTER_I32_TILE_MAX = 256  # ttnn 0.81.1: a 32-bit TILE index refused beyond this many along the scatter axis


def scatter_index_layout(index: api.Handle, d: int, base_layout):
    """The layout of ttnn.scatter's index: the base's, except a 32-bit TILE index longer than 256 along the
    scatter axis, which ttnn 0.81.1 refuses ("!(is_i32(index_dtype) && index_layout == TILE && index_shape[dim]
    > ...)"; e.g. top-p sampling's scatter over the vocabulary): ROW_MAJOR then, which it takes."""
    if base_layout == api.TILE and index.shape[d] > SCATTER_I32_TILE_MAX:
        return api.ROW_MAJOR
    return base_layout


# A ROW_MAJOR page is one row of the last dimension, and TT-NN's data-movement kernels hold whole pages in one
# core's L1: ttnn.slice keeps two rows (slice_program_factory_rm.cpp: 2 * row bytes <= the core's L1 budget, about
# 1.3 MiB on a Wormhole core), ttnn.concat one page of its output per core (concat_program_factory.cpp:
# single_page_size <= l1_capacity). Measured on ttnn 0.81.1 (mock n150): slices and concats of rows of 680 KiB run,
# rows of 1 MiB stop in those TT_FATALs -- a 1-D buffer of 500k bfloat16 elements (DDP's flat gradient bucket,
# a default-vocabulary embedding flattened). Rows longer than this are refused before ttnn is called (Unfit).
ROW_BYTES_MAX = 512 << 10


def row_fits(shape, tt_dtype) -> bool:
    """Whether one row (the last dimension) of a tensor of `shape` in `tt_dtype` fits the pages TT-NN's slice and
    concat kernels hold in a core's L1 (ROW_BYTES_MAX); a 0-d tensor is one element."""
    return api.buffer_bytes(list(shape)[-1:] or [1], tt_dtype, api.ROW_MAJOR) <= ROW_BYTES_MAX


PERMUTE_ROW_MAJOR_MIN_SAVING = 16 << 20  # bytes: a permute result padded by less stays TILE (no conversions)
_ROW_MAJOR_TT = (api.BFLOAT16, api.FLOAT32, api.INT32, api.UINT32)


def permute_layout(h: api.Handle, out_shape) -> api.Handle:
    """h in the layout ttnn.permute should take it in to give a result of `out_shape` (the result keeps it):
    its own, except a TILE tensor whose result's tile padding would at least quadruple its bytes and add
    16 MiB or more -- tiny last two dimensions of a high-rank result, e.g. Mamba2's chunked scan (FalconH1)
    einsum 'bclhn,bcshn->bclsh' permuting B to [b, h, l, n, 1, 1]: 32 GiB in TILE for 32 MiB of elements.
    Such a permute runs ROW_MAJOR (h converted in place, lossless); whoever needs the result TILE converts it,
    usually after the reshape that folds the size-1 dimensions away (einsum's bmm). A reshape takes the same
    rule: the same einsum first unsqueezes C [b, c, l, s, h] (TILE: 64 MiB in float32) to [b, c, l, s, h, 1],
    2 GiB in TILE (FalconH1 out of the mock's DRAM under float32 storage), 64 MiB ROW_MAJOR.
    Rows are pages a core holds (ROW_BYTES_MAX): a tensor goes ROW_MAJOR only when its rows and the result's
    fit, and a ROW_MAJOR one whose rows or result's rows do not goes TILE (ttnn.reshape of a ROW_MAJOR
    [n, 2] to [2 n] with n in the millions -- a paged cache's bytes viewed as bfloat16 -- stops in a TT_THROW:
    "statically allocated dataflow buffers ... beyond max L1 size")."""
    tt = h.tt
    if tt is None:
        return h
    dtype, tt_layout = tt.dtype, tt.layout
    # (ttnn's dtypes and layouts are Python enums, whose hash is a Python call: keyed by id, as members are
    # singletons)
    key = (h.shape, tuple(out_shape), id(dtype), id(tt_layout), ROW_BYTES_MAX, PERMUTE_ROW_MAJOR_MIN_SAVING)
    want = _permute_layouts.get(key, False)
    if want is False:  # (decided once per key: the decision reads only the key)
        if len(_permute_layouts) >= 4096:
            _permute_layouts.clear()
        want = _permute_layouts[key] = _permute_layout(h.shape, out_shape, dtype, tt_layout)
    if want is not None:
        _relayout(h, want)
    return h


_permute_layouts: dict = {}  # permute_layout's decisions: (shapes, device dtype, layout, limits) -> layout or None


def _permute_layout(shape, out_shape, tt_dtype, layout):
    """The layout permute_layout converts a tensor of `shape`, `tt_dtype` and `layout` to, or None."""
    if tt_dtype not in _ROW_MAJOR_TT:
        return None
    rows_fit = row_fits(shape, tt_dtype) and row_fits(out_shape, tt_dtype)
    if layout == api.ROW_MAJOR:
        return None if rows_fit else api.TILE
    if layout != api.TILE or not rows_fit:
        return None
    tile = api.buffer_bytes(out_shape, tt_dtype, api.TILE)
    rows = api.buffer_bytes(out_shape, tt_dtype, api.ROW_MAJOR)
    return api.ROW_MAJOR if tile >= 4 * rows and tile - rows >= PERMUTE_ROW_MAJOR_MIN_SAVING else None


def partition_layout(h: api.Handle, dim: int, parts: int) -> api.Handle:
    """h in the layout ttnn.mesh_partition can cut into `parts` along `dim` (mesh mode: a shard per chip): its
    own, except a TILE tensor whose part is not whole tiles (its last two dimensions, a 1-D tensor's being
    [1, n], multiples of 32), which ttnn's slice refuses (TT_FATAL): it is cut ROW_MAJOR (converted in place,
    lossless)."""
    if h.layout == api.TILE:
        part = list(h.shape)
        part[dim] //= parts
        if any(d % api.TILE_SIZE for d in ([1, 1] + part)[-2:]):
            _relayout(h, api.ROW_MAJOR)
    return h


def relayout(h: api.Handle, layout) -> api.Handle:
    """h in `layout` (changed in place: lossless, so every user of h may share the converted form)."""
    _relayout(h, layout)
    return h


def retag(h: api.Handle, dtype: torch.dtype) -> api.Handle:
    """The same value as torch dtype `dtype` (a new handle; the device tensor is converted when the
    storage policy stores `dtype` differently, e.g. an integer result written into a float tensor)."""
    if h.dtype == dtype:
        return h
    if dtype is torch.complex64 or h.dtype is torch.complex64:
        return _complex_retag(h, dtype)
    new = api.Handle(h.tt, h.shadow, dtype, h.shape, h.index, None if dtype.is_floating_point else h.bounds)
    if h.tt is None or dtype == torch.bool:
        return new
    if dtype in _INT:
        if is_float(new.tt_dtype):
            new = _typecast(new, api.INT32)
    elif new.tt_dtype != storage_for(dtype)[0]:
        new = _typecast(new, storage_for(dtype)[0])
    new.dtype = dtype
    return new


# ----------------------------------------------------------------------------------------------- prepared forms
def prepared(h: api.Handle, key: tuple, make, stale=None, conversion: bool = True) -> api.Handle:
    """`make(h)` -- h in the form an op consumes -- made once per (h, key) and kept on h (Handle.forms) while
    h lives and is not written (a write drops h's forms: Handle.assign, and h.version), nor `stale(form)`
    (a form that also depends on other tensors: it is then made again, in its place). Counted in
    layout_conversions when made (conversion=True). A staged h is passed as it is (make reads its host value). The forms die
    with h: nothing else holds them."""
    forms = h.forms
    if forms is None or forms.get("version") != h.version:
        forms = h.forms = {"version": h.version}
    form = forms.get(key)
    if form is not None and stale is not None and stale(form):
        form = forms[key] = None
    if form is None:
        form = forms[key] = make(h if h.host is not None else materialize(h))
        if conversion:  # (else a form computed by ops of its own, e.g. sdpa's additive mask)
            counters.counts["layout_conversions"] += 1
    return form


def _complex_retag(h: api.Handle, dtype: torch.dtype) -> api.Handle:
    """A real value as complex64 (imaginary parts 0), or a complex64 value as a real dtype (its real parts:
    PyTorch's cast, which discards the imaginary parts)."""
    check_dtype(dtype)
    if h.dtype is torch.complex64:  # -> its real parts
        p = ensure(as_pair(h), TILE)
        n = len(p.shape)
        re = api.run("slice", p, [0] * n, list(p.shape[:-1]) + [1], [1] * n) if p.shape.numel() else p
        re = api.run("reshape", re, tuple(h.shape) or (1,)) if p.shape.numel() else re
        re.shape = h.shape
        return retag(re, dtype) if dtype is not torch.float32 else re
    re = retag(h, torch.float32)
    if not h.shape.numel():
        return to_device(torch.empty(tuple(h.shape), dtype=dtype), h.index)
    re = ensure(re, TILE)
    col = api.run("reshape", re, (*h.shape, 1))
    zeros = api.create("zeros", ((*h.shape, 1),), col.tt_dtype, api.TILE, h.index, torch.float32)
    p = api.run("concat", [col, zeros], dim=len(h.shape))
    p.shape = torch.Size((*h.shape, 2))
    return as_complex(p)


# ----------------------------------------------------------------------------------------------- packed vectors
# A small per-channel tensor alone on the device costs far more than its bytes: TILE pads a [1, C, 1] column
# vector (a batch norm's folded scale) to [1, C, 32], 32x, and a depthwise kernel's [kk, C] taps to 32 rows;
# and every DRAM buffer takes at least one page in each DRAM bank (12 on a Wormhole n150: 24 KiB for one
# bfloat16 tile). So such tensors are kept as blocks [C, k] (k <= 32 columns: a column vector, or a
# depthwise kernel's kk taps as columns) of a shared pack: one [rows, 32] TILE tensor per (device, dtype)
# whose 32 columns are filled top to bottom (a block goes where its columns are lowest), read back by one
# ttnn.slice where it is used (`unpack`). A block wider than 32 columns (a small matrix: pack_matrix; a
# bias row [1, C]: pack_row) goes to a pack as wide as the block rounded up to whole tiles, one per such
# width, filled the same way: only its columns are padded (to a multiple of 32), not its rows, and the pack
# is whole pages in every bank together. A pack is made again (re-uploaded from its host copy) when a block
# is added -- only while forms are being prepared, at a first forward -- and grows to PACK_ROWS rows; it
# lives while a form refers to it (forms hold their pack, the open pack is held weakly), so it dies with the
# last model that uses it. A pack read during a graph capture takes no more blocks (its buffer stays the one
# the graph recorded).
PACK_ROWS = 4096  # rows of a pack (256 KiB of bfloat16 at 32 columns) before the next block starts a new one


class _Pack:
    __slots__ = ("blocks", "heights", "handle", "__weakref__")

    def __init__(self, width: int):
        self.blocks, self.heights, self.handle = [], [0] * width, None


_OPEN_PACKS: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


def pack(value: torch.Tensor, index: int, dtype: torch.dtype, width: int = 0) -> tuple:
    """Store the host tensor `value` -- a vector [C] (read back as [C, 1]) or a block [C, k] -- in the open
    pack of device `index` for its width (32 columns, or k rounded up to whole tiles), in the storage of
    torch dtype `dtype` (see above). Returns the entry (pack, row, column, shape) for `unpack`; the entry
    keeps its pack alive."""
    value = value.detach().float().reshape(value.shape[0], -1)
    rows, cols = value.shape
    width = max(api.TILE_SIZE, _whole_tiles(cols), width)  # (width: rows of many widths side by side, ROWS_WIDTH)
    tt_dtype = parameter_storage(dtype)
    key = (index, tt_dtype, width)
    p = _OPEN_PACKS.get(key)
    place = None
    if p is not None:
        place = min(range(width - cols + 1), key=lambda j: max(p.heights[j:j + cols]))
        if max(p.heights[place:place + cols]) + rows > max(PACK_ROWS, rows) and any(p.heights):
            p = None
    if p is None:
        p = _OPEN_PACKS[key] = _Pack(width)
        place = 0
    row = max(p.heights[place:place + cols])
    p.heights[place:place + cols] = [row + rows] * cols
    p.blocks.append((row, place, value))
    host = torch.zeros(max(p.heights), width)
    for r, c, block in p.blocks:
        host[r:r + block.shape[0], c:c + block.shape[1]] = block
    p.handle = api.upload(host, tt_dtype, api.TILE, index, dtype=dtype)
    return p, row, place, (rows, cols)


# Rows [1, C] of per-channel vectors (eval batch norm's folded scale and shift for a channels-last input) share
# packs this wide, side by side: in a pack as wide as each C, a model's few rows of a width would pad to 32 rows
# each (mobilenet_v2 at 224x224: 1.118x its bfloat16 bytes instead of 1.06x).
ROWS_WIDTH = 2048


def _whole_tiles(n: int) -> int:
    return -(-n // api.TILE_SIZE) * api.TILE_SIZE


def is_packed_column(h: api.Handle) -> bool:
    """A staged floating tensor [C, 1, ..., 1] (a per-channel parameter such as ConvNeXt's layer scale,
    staged as a kernel-shaped parameter: is_kernel_weight): alone in TILE its unit dimensions would be
    padded to 32x32 (1024x its bytes), so every computing use reads it from a packed column instead."""
    shape = h.shape
    return (h.host is not None and len(shape) >= 2 and shape[0] > 1 and h.dtype.is_floating_point
            and h.dtype is not torch.complex64 and all(d == 1 for d in shape[1:]))


def _unpacked_column(h: api.Handle) -> api.Handle:
    """A packed-column tensor (is_packed_column) as a device tensor of its shape, for one use (a slice of
    its pack and a reshape; the pack entry is made once and kept as a prepared form)."""
    entry = prepared(h, ("column",), lambda s: pack(s.host[0].reshape(-1), s.index, s.dtype))
    out = api.run("reshape", unpack(entry), tuple(h.shape))
    out.shape = h.shape
    return out


def unpack(entry: tuple) -> api.Handle:
    """A packed entry (pack()) as its own device tensor [C, k]: one slice of its pack."""
    p, row, col, (rows, cols) = entry
    if api.recording is not None:  # a captured graph reads this pack's buffer: no block is added to it now
        for key, open_pack in list(_OPEN_PACKS.items()):
            if open_pack is p:
                del _OPEN_PACKS[key]
    return api.run("slice", p.handle, [row, col], [row + rows, col + cols], [1, 1])


# ----------------------------------------------------------------------------------------------- small matrices
# A 1x1 convolution's kernel [O, I] prepared for conv2d is [I, O] padded to whole tiles in both dimensions and
# to whole pages in every DRAM bank: MobileNetV3's and EfficientNet's squeeze-excitation kernels (8 to 144
# channels one way: [16, 8] took 24 KiB for 256 bytes) and their pointwise kernels of odd widths (40, 72, 88,
# 120: [240, 40] took 2.56x); its prepared bias [1, 1, 32, O] TILE 32x. Where that form would take more
# than PACKED_MATRIX_RATIO times the packed one, the convolution is a matmul (lowerings/conv.py) whose kernel
# is a block of a pack (only its columns padded, stored [O, I] or transposed, whichever pads fewer) and whose
# bias is a row of one: one slice each per use. The ratio is below the 1.1x the weights of a whole model may take
# (docs/vision.md) because what is not packed adds up beside it: at 1.1, regnet_y_400mf's 13 prepared [448, 448]
# kernels (1.06x each: whole pages in every bank) and its classifier's [32, 1000] bias made 1.1003x; at 1.05 they
# are packed and it takes 1.07x, for 11 more TT-NN ops a forward (0.7%).
PACKED_MATRIX_RATIO = 1.05


@functools.lru_cache(maxsize=None)
def packs_matrix(out_channels: int, in_channels: int, bias: bool, index: int) -> bool:
    """Whether a 1x1 convolution's kernel [O, I] (and bias [O]) is kept packed (pack_matrix, pack_row) rather
    than as conv2d's prepared weight and bias (see above)."""
    o, i = out_channels, in_channels

    def pages(nbytes):
        return _pages(nbytes, index)
    prepared_form = pages(api.buffer_bytes((i, o), api.BFLOAT16, api.TILE))
    packed = min(o * _whole_tiles(i), i * _whole_tiles(o)) * 2
    if bias:
        prepared_form += pages(api.buffer_bytes((1, 1, 1, o), api.BFLOAT16, api.TILE))
        packed += _whole_tiles(o) * 2
    return prepared_form > PACKED_MATRIX_RATIO * packed


def _pages(nbytes: int, index: int) -> int:
    """The bytes a buffer of its own takes: whole tiles in every DRAM bank."""
    banks = api.memory_views(index)["dram"]["banks"]
    tile = api.buffer_bytes((api.TILE_SIZE, api.TILE_SIZE), api.BFLOAT16, api.TILE)
    return -(-nbytes // (tile * banks)) * tile * banks


# Eager fusion (lowerings/conv.py) folds a batch norm into a conv2d's prepared weight and a prepared bias
# [1, 1, 32, O], in whole pages of every bank (at least 24 KiB) -- a buffer the unfused convolution does not
# have when it has no bias of its own (the norm's scale and shift are packed rows). Beside a small kernel, a
# stem's over 3 input channels, that doubles its bytes: mobilenet_v3_small's 16x3x3x3 stem took the model from
# 1.097x to 1.102x its bfloat16 bytes at 64x64. Eager mode folds a convolution into conv2d only when the
# prepared weight and bias take at most FOLD_RATIO times its prepared weight alone (ResNet's 3x3 kernels of 64
# channels: 1.25x; any 3-channel stem: 2x, unfused).
FOLD_RATIO = 1.5


@functools.lru_cache(maxsize=None)
def folds_into_conv2d(out_channels: int, kernel_elements: int, bias: bool, index: int) -> bool:
    """Whether a convolution of `out_channels` kernels of `kernel_elements` each (in channels x kh x kw), with
    or without a bias of its own, folds a batch norm into conv2d's prepared weight and bias (see above)."""
    if bias:  # (its prepared bias is made either way)
        return True
    weight = _pages(api.buffer_bytes((kernel_elements, out_channels), api.BFLOAT16, api.TILE), index)
    return weight + _pages(api.buffer_bytes((1, 1, 1, out_channels), api.BFLOAT16, api.TILE), index) \
        <= FOLD_RATIO * weight


def matrix_transposed(o: int, i: int) -> bool:
    """Whether a matrix [O, I] is packed transposed ([I, O]): whichever pads fewer columns to whole tiles."""
    return (_whole_tiles(i) - i) * o > (_whole_tiles(o) - o) * i


def pack_matrix(h: api.Handle) -> tuple:
    """A matrix h [O, I, 1, ...] (a 1x1 convolution's kernel, staged) as (device tensor, transpose_b) for the
    matmul x @ h^T: a block of a pack (packed), stored [O, I] (transpose_b=True) or [I, O], whichever pads
    fewer columns to whole tiles."""
    o, i = h.shape[0], h.shape[1:].numel()
    transposed = matrix_transposed(o, i)
    form = packed(h, ("matrix",), lambda v: v.reshape(o, i).t() if transposed else v.reshape(o, i))
    return form, not transposed


def pack_row(h: api.Handle, dtype: torch.dtype | None = None) -> api.Handle:
    """A vector h [C] (a 1x1 convolution's bias) as the device row [1, C] a matmul adds: a row of a pack
    (packed); h is staged back on the host (api.release: the row replaces it on the device). During a graph
    capture a bias still on the device is read as it is (its value cannot be read back to the host then)."""
    if api.recording is not None and h.tt is not None:
        return ensure(h, TILE_FLOAT)
    row = packed(h, ("row",), lambda v: v.reshape(1, -1), dtype)
    if h.tt is not None:
        api.release(h)
    return row


def packed(h: api.Handle, key: tuple, block, dtype: torch.dtype | None = None) -> api.Handle:
    """h's host value as `block(value)`, kept (made once: prepared) in a pack and read back by one slice --
    or, made during a graph capture (no pack takes a block then), alone in TILE; stored as torch dtype
    `dtype` (default h's: an integer convolution's kernel is packed as bfloat16, its compute dtype)."""
    dtype = dtype or h.dtype

    form = prepared(h, key, lambda s: pack_form(block(api.host_value(s).float()), s.index, dtype))
    return unpacked(form)


def pack_form(value: torch.Tensor, index: int, dtype: torch.dtype, width: int = 0):
    """The host tensor `value` stored for a later read: a pack entry (pack()), or -- during a graph capture, when
    no pack takes a block -- a device tensor of its own in TILE. `unpacked` reads either back."""
    if api.recording is not None:
        return api.upload(value.contiguous(), parameter_storage(dtype), api.TILE, index, dtype=dtype)
    return pack(value, index, dtype, width)


def unpacked(form) -> api.Handle:
    """pack_form's result as a device tensor: a pack entry's slice, or the tensor itself."""
    return form if type(form) is api.Handle else unpack(form)
