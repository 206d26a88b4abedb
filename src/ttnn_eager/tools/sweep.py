"""The lowering sweep of `ttnn-eager validate`: every lowering in the registry, run on the device at bert-large
shapes and compared with float32 PyTorch on the CPU; one row per aten overload, none left out.

Where the calls come from. PyTorch's OpInfo samples (`op_db`) give each aten overload its argument structure:
the first SCAN_CAP samples of every OpInfo (float32, int64, bool) run on the CPU under a TorchDispatchMode that
copies the calls of lowered overloads (the forward, and for float32 samples the backward), and each OpInfo's
own aten overloads are also called with its samples directly (composites such as linear, layer_norm or
scaled_dot_product_attention decompose before a dispatch mode sees them). An overload no sample reaches
borrows a sibling overload's call, its arguments matched by schema name (bitwise_and.Scalar from
bitwise_and.Tensor: a tensor argument becomes its first element; randn.generator from randn.default); the
few that have no sibling either are called as written in UNREACHED (bert-large's dropout in training, rand,
randperm, ...), and a lowering added later with none of these gets a row that says so. Up to
CANDIDATES calls are kept per overload, best first (from its own OpInfo, no empty tensor, most dimensions);
the first one the lowering accepts is measured. The scan takes ~7 s, cached per torch version and lowerings.

How a call is scaled to bert-large (Dims: batch B, seq S 384, hidden H 1024, 16 heads of 64, intermediate I
4096, vocab V 30522; tests divide all but B and the head size by 4):
  * matmul-like ops take the shapes of bert-large's own (BERT_SHAPES: linear, matmul, mm, addmm, bmm,
    scaled_dot_product_attention, embedding), the other arguments from the sample;
  * every other op is scaled by rank: each tensor, and each `normalized_shape`, is right-aligned against the
    bert-large activation of the highest rank among the call's tensors and size lists -- [H], [B*S, H],
    [B, S, H], [B, 16, S, 64] -- in each dimension > 1 (1 and 0 stay); a `size` or `shape` list (views,
    factories) becomes the activation of its own rank the same way. This keeps broadcasting, reductions over
    `dim`, softmax, trailing normalized shapes, and views between ranks (all of B*S*H elements) valid;
  * the OpInfo sample is kept, and the row says why, where shapes are structural: index tensors
    (STRUCTURAL_TENSORS: gather, scatter, index_*), STRUCTURAL_FAMILIES (convolution, batch norm), ranks above
    4, nothing to scale (factories sized by a number: arange, eye, linspace), scaled calls PyTorch itself
    refuses on the CPU (a size list that no longer matches, split sizes) or with results above MAX_NUMEL, and
    scaled calls the lowering refuses (an output size or padding relative to the sample's sizes).
Scaled tensors resample the sample tensor's own values (seeded; floats shrunk toward 0 by a random factor in
[0.5, 1]), so they keep its domain: positive for log, 0/1 for masks, in range for indices.

How a row is compared (the device's inputs are downloaded first, so that what is measured is the op):
  * floating results: max abs error and Pearson against PyTorch in float32; the row passes at Pearson >=
    PEARSON_MIN (a constant or single value has none) and max abs error <= REL_ERR_MAX * max(1, max
    |reference|): the bound catches a wrong scale or offset, which Pearson does not;
  * integer and bool results: exact (mismatching elements counted), also beside floating ones (max.dim's
    indices);
  * random ops (tagged nondeterministic_seeded, unless dropout_p is 0): shape and dtype, and with at least
    DISTRIBUTION_MIN values a two-sample Kolmogorov-Smirnov test against a CPU draw of the same call
    (significance 0.001);
  * undefined values (empty*, UNDEFINED_OUTPUTS): shape and dtype only;
  * refused: the lowering refuses every candidate call (its Unfit: the arguments do not fit the TT-NN op), said
    with its reason -- such a call runs on the CPU fallback; the row is not a measurement.
Rows run under strict mode, so that a refusal is said rather than run on the CPU. EXCEPTIONS is the one list
of exceptions to the tolerance, each with its reason.
"""
from __future__ import annotations

import dataclasses
import math
import time

import torch
from torch.utils._pytree import tree_flatten, tree_map

from . import opinfo
from .compare import as_float32, compare, fmt, to_cpu
from ..lowerings import fused as _fused  # noqa: E402  (the fused ops torch.compile puts in graphs)

PEARSON_MIN = 0.999
REL_ERR_MAX = 0.02        # of max(1, max |reference|): measured <= 0.0074 (addmm), sdpa aside (EXCEPTIONS)
DISTRIBUTION_MIN = 1000  # random results with fewer values are checked for shape and dtype only
MAX_NUMEL = 1 << 26       # results beyond this keep the sample (the CPU reference would take too long)
SCAN_CAP = 16             # OpInfo samples scanned per dtype (their backward: the first opinfo.CAP)
CANDIDATES = 8            # calls kept per overload: the first the lowering accepts is measured
STRUCTURAL_TENSORS = {"index": "holds positions", "indices": "holds positions",
                      "buffer": "is the forward's scratch output, consistent with `self`",
                      "boundaries": "must stay sorted (resampled values are not)"}  # by schema name
UNDEFINED_OUTPUTS = {  # outputs left unwritten by design (the lowering's notes): not compared
    torch.ops.aten.log_sigmoid_forward.default: 1,  # the CPU kernel's buffer, for its own backward
}
KS_C = 1.949              # two-sample Kolmogorov-Smirnov bound at significance 0.001
STRUCTURAL_FAMILIES = {"conv": "convolution: kernel sizes are structural",
                       "batchnorm": "per-channel tensors align with dim 1"}
SIZE_LISTS = ("size", "shape", "normalized_shape")  # SymInt[] arguments that are shapes (scaled as above)

# The one list of exceptions to the tolerance: op -> (its bound on max abs error / max(1, max |reference|),
# or None: the row may fail; why). tests/test_numerics.py fails when a row fails that is not listed as such.
EXCEPTIONS: dict = {
    "aten.scaled_dot_product_attention.default": (
        0.1, "peaked softmax: the sample's values (uniform in +-9) give logits of +-30 and more, where one "
             "bfloat16 rounding of a logit moves weight between keys (7% of max |out| measured; Pearson 0.99994)"),
    "aten.logsumexp.default": (
        None, "fails Pearson by its output's storage, not its arithmetic (computed in float32): the log-sum-exps "
              "of 256 values each lie within ~1 of one another (9.7-10.8), where bfloat16's step is 0.0625; "
              "rounding PyTorch's exact float32 result to bfloat16 alone gives Pearson 0.9970 on the CPU (0.9973 "
              "here, max error 0.03 = half a step). float32_storage='float32' keeps float32 results"),
}


@dataclasses.dataclass(frozen=True)
class Dims:
    batch: int = 2
    seq: int = 384
    hidden: int = 1024
    heads: int = 16
    intermediate: int = 4096
    vocab: int = 30522

    def activation(self, rank: int) -> list | None:
        b, s, h, n = self.batch, self.seq, self.hidden, self.heads
        return {1: [h], 2: [b * s, h], 3: [b, s, h], 4: [b, n, s, h // n]}.get(rank)


def bert_large(batch: int = 2, scale: int = 1) -> Dims:
    """bert-large's dimensions, all but the batch and the head size divided by `scale` (tests: 4)."""
    d = Dims()
    return Dims(batch, d.seq // scale, d.hidden // scale, d.heads // scale, d.intermediate // scale,
                d.vocab // scale)


# the tensor arguments of bert-large's matmul-like ops, in order (an absent optional one is skipped)
BERT_SHAPES = {
    torch.ops.aten.linear.default: lambda d: [[d.batch, d.seq, d.hidden], [d.intermediate, d.hidden],
                                              [d.intermediate]],
    torch.ops.aten.matmul.default: lambda d: [d.activation(4), [d.batch, d.heads, d.hidden // d.heads, d.seq]],
    torch.ops.aten.mm.default: lambda d: [d.activation(2), [d.hidden, d.intermediate]],
    torch.ops.aten.addmm.default: lambda d: [[d.intermediate], d.activation(2), [d.hidden, d.intermediate]],
    torch.ops.aten.bmm.default: lambda d: [[d.batch * d.heads, d.seq, d.hidden // d.heads],
                                           [d.batch * d.heads, d.hidden // d.heads, d.seq]],
    torch.ops.aten.scaled_dot_product_attention.default: lambda d: [d.activation(4)] * 3 + [[d.batch, 1, 1, d.seq]],
    torch.ops.aten.embedding.default: lambda d: [[d.vocab, d.hidden], [d.batch, d.seq]],
}


def _randn(*shape) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(0))


_CPU = {"device": torch.device("cpu")}


def _paged(d):
    """A paged KV cache of 8 blocks of 32 rows (2 key/value heads of bert-large's head size) and 4 users' page
    table and positions (the last row of a block, the first of the next), as continuous batching decodes."""
    hd = d.hidden // d.heads
    return (_randn(8, 2, 32, hd), torch.tensor([0, 31, 32, 63], dtype=torch.int32),
            torch.arange(8, dtype=torch.int32).reshape(4, 2), hd)
# calls written here for the overloads no OpInfo sample reaches (at bert-large's own shapes where it has them)
UNREACHED = {
    torch.ops.aten.native_dropout.default: lambda d: ((_randn(*d.activation(3)), 0.1, True), {}),  # training
    torch.ops.aten.rand.default: lambda d: ((d.activation(3),), _CPU),
    torch.ops.aten.rand.generator: lambda d: ((d.activation(3),), {"generator": None, **_CPU}),
    torch.ops.aten.randperm.default: lambda d: ((d.vocab,), _CPU),
    torch.ops.aten.randperm.generator: lambda d: ((d.vocab,), {"generator": None, **_CPU}),
    torch.ops.aten._unsafe_index_put.default: lambda d: (  # rows of an embedding table
        (_randn(d.vocab, d.hidden), [torch.arange(d.seq)], _randn(d.seq, d.hidden)), {}),
    torch.ops.aten.index_copy_.default: lambda d: (  # a KV cache's decode step: one position of [B, 16, S, 64]
        (_randn(d.batch, d.heads, d.seq, d.hidden // d.heads), 2, torch.tensor([d.seq // 2]),
         _randn(d.batch, d.heads, 1, d.hidden // d.heads)), {}),
    torch.ops.aten._grouped_mm.default: lambda d: (  # a mixture-of-experts layer: 2 * seq rows over 4 experts
        (_randn(2 * d.seq, d.hidden), _randn(4, d.hidden, d.intermediate // 4)),
        {"offs": torch.tensor([d.seq // 2, d.seq, 3 * d.seq // 2, 2 * d.seq], dtype=torch.int32)}),
    torch.ops.aten._is_all_true.default: lambda d: ((_randn(*d.activation(3)) > -9,), {}),  # torch._check_tensor_all
    # torch.cdist's p=2 form (over 25 rows): a nearest-codebook search, as Mimi's quantizer (per-head width)
    torch.ops.aten._euclidean_dist.default: lambda d: (
        (_randn(d.batch, d.seq, d.hidden // d.heads), _randn(d.batch, d.intermediate, d.hidden // d.heads)), {}),
    # an antialiased bicubic downscale of a [1, 4, 96, 64] image (OpInfo's antialiased samples are bilinear)
    torch.ops.aten._upsample_bicubic2d_aa.default: lambda d: ((_randn(1, 4, d.seq, 64), [d.seq // 3, 40], False), {}),
    # what only torch.compile's graphs contain (features/compile): a tensor constant, the fused ops
    torch.ops.aten.lift_fresh_copy.default: lambda d: ((_randn(*d.activation(3)),), {}),
    # a functionalized x.copy_(y) (an out= into a view): y [H] broadcast into an activation
    torch.ops.aten.copy.default: lambda d: ((_randn(*d.activation(3)), _randn(d.hidden)), {}),
    _fused.ops.linear_activation.default: lambda d: (
        (_randn(*d.activation(3)), _randn(d.intermediate, d.hidden), _randn(d.intermediate), "gelu"), {}),
    _fused.ops.add_layer_norm.default: lambda d: (
        (_randn(*d.activation(3)), _randn(*d.activation(3)), [d.hidden], _randn(d.hidden), _randn(d.hidden), 1e-12), {}),
    _fused.ops.qkv_heads.default: lambda d: (
        (_randn(*d.activation(3)), [_randn(d.hidden, d.hidden) for _ in range(3)], [_randn(d.hidden) for _ in range(3)],
         d.heads, d.heads), {}),
    _fused.ops.concat_heads.default: lambda d: ((_randn(*d.activation(4)),), {}),
    # the output projection of heads zero-padded from 48 to 64 columns (padded_heads: Phi-2-like head sizes)
    _fused.ops.heads_linear.default: lambda d: (
        (_randn(d.batch, d.seq, d.heads * 64), _randn(d.hidden, d.heads * 48), _randn(d.hidden), d.heads), {}),
    _fused.ops.linear_add.default: lambda d: (  # a projection and its residual
        (_randn(*d.activation(3)), _randn(d.hidden, d.hidden), _randn(*d.activation(3))), {}),
    _fused.ops.matmul_bias.default: lambda d: (  # GPT-2's Conv1D: a [in, out] weight
        (_randn(*d.activation(3)), _randn(d.hidden, 3 * d.hidden), _randn(3 * d.hidden), None), {}),
    _fused.ops.split_qkv_heads.default: lambda d: ((_randn(d.batch, d.seq, 3 * d.hidden), d.heads), {}),
    _fused.ops.rms_norm.default: lambda d: ((_randn(*d.activation(3)), _randn(d.hidden), 1e-6), {}),
    _fused.ops.rotary_embedding.default: lambda d: (  # the heads' rotary embedding, one position per row
        (_randn(*d.activation(4)), _randn(1, 1, d.seq, d.hidden // d.heads), _randn(1, 1, d.seq, d.hidden // d.heads)),
        {}),
    _fused.ops.paged_update_cache.default: lambda d: (
        lambda c, p, t, hd: ((c, _randn(1, 4, 2, hd), p, t), {}))(*_paged(d)),
    _fused.ops.paged_update_cache_functional.default: lambda d: (
        lambda c, p, t, hd: ((c, _randn(1, 4, 2, hd), p, t), {}))(*_paged(d)),
    _fused.ops.qkv_heads_decode.default: lambda d: (  # a continuous-batching decode step: 8 users' tokens
        (_randn(1, 8, d.hidden), [_randn(d.hidden, d.hidden) for _ in range(3)], [_randn(d.hidden) for _ in range(3)],
         d.heads, d.heads), {}),
    _fused.ops.paged_attention_decode.default: lambda d: (
        lambda c, p, t, hd: ((_randn(1, 4, 4, hd), c, c * 0.5, p, t, hd ** -0.5), {}))(*_paged(d)),
    _fused.ops.cache_update.default: lambda d: (  # a static cache's decode-step row at a 0-d position
        (_randn(d.batch, d.heads, d.seq, d.hidden // d.heads), _randn(d.batch, d.heads, 1, d.hidden // d.heads),
         torch.tensor(d.seq // 3)), {}),
    torch.ops.aten._native_batch_norm_legit_no_training.default: lambda d: (
        (_randn(*d.activation(4)), _randn(d.heads), _randn(d.heads), _randn(d.heads), _randn(d.heads).abs() + 0.5,
         0.1, 1e-5), {}),
    # compiled vision (features/compile/vision.py): a ResNet bottleneck's 3x3 conv -> eval batch norm -> relu on a
    # [1, 64, 28, 28] image, and its residual add -> relu
    _fused.ops.conv_bn_act.default: lambda d: (
        (_randn(1, 64, 28, 28), _randn(64, 64, 3, 3) / 24, None, [1, 1], [1, 1], [1, 1], 1, _randn(64).abs() + 0.5,
         _randn(64), _randn(64) / 4, _randn(64).abs() + 0.5, 1e-5, "relu"), {}),
    _fused.ops.add_act.default: lambda d: ((_randn(*d.activation(3)), _randn(*d.activation(3)), "relu"), {}),
    # a float32 activation's bits (its values bfloat16's, which the device stores exactly)
    torch.ops.aten.view.dtype: lambda d: ((_randn(*d.activation(3)).bfloat16().float(), torch.int32), {}),
}


# ----------------------------------------------------------------------------------------------- the calls
def _rank(func, args, kwargs, lists=SIZE_LISTS) -> int:
    """The highest rank among the call's tensors and size lists (of those names)."""
    return max([t.dim() for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)] +
               [len(v) for n, v in _schema_names(func, args, kwargs) if n in lists and isinstance(v, (list, tuple))],
               default=0)  # (unfold's `size` is a number)


def _scan() -> dict:
    """op -> [(OpInfo name, args, kwargs)], best first, of each lowered overload the OpInfo samples reach."""
    import warnings

    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils._python_dispatch import TorchDispatchMode

    from ..lowerings import REGISTRY
    best: dict = {}  # op -> [(score, name, args, kwargs)], best first

    def offer(func, name, own, args, kwargs):
        score = (own, all(t.numel() for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor)),
                 min(_rank(func, args, kwargs), 4))
        kept = best.setdefault(func, [])
        if (len(kept) < CANDIDATES or score > kept[-1][0]) and _device_dtypes((args, kwargs)):
            copy = tree_map(lambda x: x.detach().clone() if isinstance(x, torch.Tensor) else x, (args, kwargs))
            kept.append((score, name, *copy))
            kept.sort(key=lambda c: c[0], reverse=True)  # (stable: the earlier of equals first)
            del kept[CANDIDATES:]

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in REGISTRY:
                offer(func, name, func.overloadpacket.__name__.strip("_") in names, args, kwargs or {})
            return func(*args, **(kwargs or {}))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in op_db:
            name = opinfo.full_name(op)
            names = {n.strip("_") for n in (op.name.split(".")[-1], op.aten_name)}
            packets = [getattr(torch.ops.aten, n, None) for n in names]
            own = [getattr(p, o) for p in packets if p is not None for o in p.overloads()]
            own = [func for func in own if func in REGISTRY]
            for dtype in opinfo._dtypes(op):
                try:
                    samples = opinfo._samples(op, dtype, SCAN_CAP)
                except Exception:  # noqa: BLE001 - a sample generator that does not run on this build
                    continue
                for i, sample in enumerate(samples):
                    for func in own:  # composites decompose before Record sees them
                        params = {a.name for a in func._schema.arguments}
                        args = (sample.input, *sample.args)
                        kwargs = {k: v for k, v in sample.kwargs.items() if k in params}  # not requires_grad
                        try:
                            func(*args, **kwargs)
                        except Exception:  # noqa: BLE001 - not this overload's arguments
                            continue
                        offer(func, name, True, args, kwargs)
                    try:
                        with Record():
                            opinfo._call(op, sample)
                            if dtype == torch.float32 and op.supports_autograd and i < opinfo.CAP:
                                _backward(op, sample)
                    except Exception:  # noqa: BLE001
                        continue
    found = {op: [c[1:] for c in kept] for op, kept in best.items()}
    for func in REGISTRY:
        if func not in found:
            found.update(_from_sibling(func, found))
    return found


def _from_sibling(func, found: dict) -> dict:
    """{func: call} made from a sibling overload's call (bitwise_and.Scalar from bitwise_and.Tensor,
    rand.generator from rand.default), its arguments matched by name and converted where the types differ (a
    tensor becomes its first element, a number a 0-d tensor); {} if no sibling's call fits."""
    packet = func.overloadpacket
    for sibling in [getattr(packet, o) for o in packet.overloads()]:
        if sibling not in found or sibling is func:
            continue
        name, args, kwargs = found[sibling][0]
        values = dict(_schema_names(sibling, args, kwargs))
        for a, b in (("input", "self"), ("self", "input")):  # (schemas name their first tensor either way)
            if a in values:
                values.setdefault(b, values[a])
        new_args, new_kwargs, skipped = [], {}, False
        for param in func._schema.arguments:
            optional = isinstance(param.type, torch.OptionalType)
            if param.name not in values and optional and not param.has_default_value():
                values[param.name] = None  # (an optional without a default: a generator, scale_factors)
            if param.name not in values:
                if param.has_default_value():
                    skipped = True  # (the arguments after it go by name)
                    continue
                break
            value, wants_tensor = values[param.name], "Tensor" in str(param.type)
            if wants_tensor and not isinstance(value, torch.Tensor) and isinstance(value, (int, float, bool)):
                value = torch.tensor(value)
            elif not wants_tensor and isinstance(value, torch.Tensor):
                if not value.numel():
                    break
                value = value.flatten()[0].item()
            if param.kwarg_only or skipped:
                new_kwargs[param.name] = value
            else:
                new_args.append(value)
        else:
            try:
                func(*new_args, **new_kwargs)
            except Exception:  # noqa: BLE001 - the sibling's arguments do not make a call of this overload
                continue
            return {func: [(f"{name} (via {sibling.overloadpacket.__name__}.{sibling._overloadname})",
                            tuple(new_args), new_kwargs)]}
    return {}


def _device_dtypes(call) -> bool:
    """No float64 or complex in the call (the device refuses them by design; opinfo checks the refusal)."""
    dtypes = [x.dtype if isinstance(x, torch.Tensor) else x for x in tree_flatten(call)[0]]
    return not any(isinstance(d, torch.dtype) and (d == torch.float64 or d.is_complex) for d in dtypes)


def _backward(op, sample) -> None:
    """Run the sample's backward (its leaves made to require grad), so that backward ops are recorded."""
    grad = sample.transform(lambda x: x.detach().requires_grad_() if isinstance(x, torch.Tensor)
                            and x.is_floating_point() else x)
    outs = [o for o in tree_flatten(opinfo._call(op, grad))[0] if isinstance(o, torch.Tensor) and o.requires_grad]
    if outs:
        sum(o.sum() for o in outs).backward()


def calls() -> dict:
    """_scan(), cached per torch version and set of lowerings (as opinfo.select is)."""
    import hashlib
    import inspect
    import os

    from ..lowerings import REGISTRY
    from ..device.runtime import cache_dir
    source = "".join(inspect.getsource(f) for f in (_scan, _from_sibling, _rank))  # (how calls are chosen)
    key = hashlib.sha1(" ".join([torch.__version__, *sorted(map(str, REGISTRY)), source]).encode()).hexdigest()
    path = os.path.join(cache_dir(), f"sweep-calls-{key[:16]}.pt")
    by_name = {str(op): op for op in REGISTRY}
    formats = {str(f): f for f in (torch.contiguous_format, torch.preserve_format, torch.channels_last)}
    try:  # (memory formats do not pickle: saved by name)
        saved = torch.load(path, weights_only=False)
        return {by_name[k]: tree_map(lambda x: formats.get(x, x), v) for k, v in saved.items()}
    except Exception:  # noqa: BLE001 - none yet, or unreadable: scan again
        pass
    found = _scan()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save({str(op): tree_map(lambda x: str(x) if isinstance(x, torch.memory_format) else x, v)
                for op, v in found.items()}, path + f".tmp{os.getpid()}")
    os.replace(path + f".tmp{os.getpid()}", path)
    return found


# ----------------------------------------------------------------------------------------------- scaling
def _resample(t: torch.Tensor, shape: list, gen: torch.Generator) -> torch.Tensor:
    """A tensor of `shape` drawn from t's own values (floats shrunk toward 0 by a factor in [0.5, 1])."""
    if list(t.shape) == list(shape) or not t.numel():
        return t
    out = t.flatten()[torch.randint(t.numel(), shape, generator=gen)]
    if out.is_floating_point():
        out = out * (0.5 + 0.5 * torch.rand(shape, generator=gen))
    return out


def _schema_names(func, args, kwargs) -> list:
    """[(argument name, value)] of the call, positional then keyword."""
    params = func._schema.arguments
    return [(params[i].name, a) for i, a in enumerate(args)] + list(kwargs.items())


def _structural(func, args, kwargs) -> str:
    """Why this call's shapes must stay the sample's ("" if they may be scaled)."""
    from ..lowerings import REGISTRY
    family = REGISTRY[func].fn.__module__.rsplit(".", 1)[-1]
    if family in STRUCTURAL_FAMILIES:
        return STRUCTURAL_FAMILIES[family]
    for name, value in _schema_names(func, args, kwargs):
        if name in STRUCTURAL_TENSORS and any(isinstance(t, torch.Tensor) for t in tree_flatten(value)[0]):
            return f"`{name}` {STRUCTURAL_TENSORS[name]}"
    rank = _rank(func, args, kwargs)
    if rank > 4:
        return f"rank {rank}"
    if rank == 0:
        return "nothing to scale"
    return ""


def scale(func, args, kwargs, dims: Dims) -> tuple:
    """(args, kwargs, how): the call at bert-large shapes, or the sample itself and why."""
    gen = torch.Generator().manual_seed(0)
    if func in BERT_SHAPES:
        shapes = iter(BERT_SHAPES[func](dims))
        how = "bert-large (its matmul shapes)"
        new = tree_map(lambda x: _resample(x, next(shapes, x.shape), gen) if isinstance(x, torch.Tensor) else x,
                       (list(args), kwargs))
    else:
        why = _structural(func, args, kwargs)
        if why:
            return args, kwargs, f"OpInfo sample: {why}"
        rank = _rank(func, args, kwargs, lists=("normalized_shape",))
        target = dims.activation(rank) or []

        def shape(s, own=False):
            aligned = dims.activation(len(s)) if own else target[rank - len(s):]
            return [t if n > 1 else n for n, t in zip(s, aligned or s)]

        names = [n for n, _ in _schema_names(func, args, kwargs)]
        values = [tree_map(lambda x: _resample(x, shape(x.shape), gen) if isinstance(x, torch.Tensor) else x, v)
                  if n not in SIZE_LISTS or not isinstance(v, (list, tuple)) else shape(v, own=n != "normalized_shape")
                  for n, v in _schema_names(func, args, kwargs)]
        new = (values[:len(args)], dict(zip(names[len(args):], values[len(args):])))
        how = "bert-large (by rank)"
    try:
        out = func(*new[0], **new[1])
    except Exception as e:  # noqa: BLE001 - PyTorch refuses the scaled call: the sample's shapes are structural
        return args, kwargs, f"OpInfo sample: scaled call refused by PyTorch ({type(e).__name__})"
    if sum(o.numel() for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)) > MAX_NUMEL:
        return args, kwargs, "OpInfo sample: scaled result too large"
    return tuple(new[0]), new[1], how


# ----------------------------------------------------------------------------------------------- one row
def _on_device(x):
    if isinstance(x, torch.Tensor):
        return x.to(opinfo.DEV)
    return torch.device(opinfo.DEV) if isinstance(x, torch.device) else x


def _shapes(func, args, kwargs) -> str:
    """The call's tensor shapes and size lists ("scalar": a 0-d tensor; "[..]": a size)."""
    out = []
    for name, value in _schema_names(func, args, kwargs):
        if name in SIZE_LISTS and isinstance(value, (list, tuple)):
            out.append(f"[{'x'.join(map(str, value))}]")
        out += ["x".join(map(str, t.shape)) or "scalar" for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]
    return ", ".join(out) or "-"


def _spec(x):
    """What must match exactly whatever the values: a tensor's shape and dtype, a number's type."""
    return (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else type(x).__name__


def _ks(got: torch.Tensor, ref: torch.Tensor) -> tuple:
    """(gap, bound): the two-sample Kolmogorov-Smirnov statistic -- the largest gap between the empirical
    distribution functions -- of two draws (both rounded to bfloat16, as the device stores them), and the gap
    above which they are not draws of one distribution at significance 0.001."""
    a, b = [x.flatten().to(torch.bfloat16).double().sort().values for x in (got, ref)]
    at = torch.cat([a, b])
    cdf_a = torch.searchsorted(a, at, right=True) / len(a)
    cdf_b = torch.searchsorted(b, at, right=True) / len(b)
    return float((cdf_a - cdf_b).abs().max()), KS_C * math.sqrt((len(a) + len(b)) / (len(a) * len(b)))


def _as_real(values: list) -> list:
    return [torch.view_as_real(v) if isinstance(v, torch.Tensor) and v.is_complex() else v for v in values]


def check(func, args, kwargs) -> dict:
    """One call on the device against PyTorch on the CPU: a row (see the module docstring)."""
    from .. import counters
    from ..config import strict
    from ..core.dispatch import FallbackError
    name = func.name().split("::")[1].split(".")[0]
    random = torch.Tag.nondeterministic_seeded in func.tags and \
        dict(_schema_names(func, args, kwargs)).get("dropout_p") != 0  # (attention without dropout is not)
    kind = "shape" if name in opinfo.UNDEFINED_VALUES else "distribution" if random else "values"
    row = {"shapes": _shapes(func, args, kwargs), "compare": kind}
    dev_args, dev_kwargs = tree_map(_on_device, (list(args), kwargs))
    if "device" in dev_kwargs:  # (factories: as a torch.device, or a string)
        dev_kwargs["device"] = torch.device(opinfo.DEV)
    held = as_float32(to_cpu((dev_args, dev_kwargs)))  # the inputs as the device holds them (before in-place ops)
    ttnn_ops, uploads = counters.ttnn_by_op.copy(), counters.counts["host_to_device"]
    try:
        with strict():  # a lowering that refuses these arguments (Unfit) says why, instead of falling back
            out = func(*dev_args, **dev_kwargs)
    except FallbackError as e:
        row.update(compare="refused", note=str(e).split("(", 1)[-1].split("), and strict")[0])
        return row
    row["ttnn_ops"] = sorted(counters.ttnn_by_op - ttnn_ops) + \
        (["from_torch"] if counters.counts["host_to_device"] > uploads else [])  # made on the host
    got, ref = tree_flatten(to_cpu(out))[0], tree_flatten(func(*args, **kwargs))[0]
    if [_spec(g) for g in got] != [_spec(r) for r in ref]:
        row["note"] = f"got {[_spec(g) for g in got]}, expected {[_spec(r) for r in ref]}"
        return row
    if func in UNDEFINED_OUTPUTS:
        del got[UNDEFINED_OUTPUTS[func]], ref[UNDEFINED_OUTPUTS[func]]
    if kind == "distribution" and min(r.numel() for r in ref) >= DISTRIBUTION_MIN:
        row["ks"], row["ks_bound"] = max((_ks(g, r) for g, r in zip(got, ref)), key=lambda t: t[0] / t[1])
        return row
    if kind == "values":  # PyTorch in float32 on the inputs as the device held them
        ref = tree_flatten(func(*held[0], **held[1]))[0]
        got, ref = _as_real(got), _as_real(ref)  # complex values: their (real, imaginary) pairs
        row["exact"] = not any(r.is_floating_point() if isinstance(r, torch.Tensor) else isinstance(r, float)
                               for r in ref)
    else:
        row["compare"] = "shape" + (f" (< {DISTRIBUTION_MIN} values)" if kind == "distribution" else "")
        return row
    results = [compare(torch.as_tensor(g), torch.as_tensor(r)) for g, r in zip(got, ref)
               if isinstance(r, (torch.Tensor, int, float, bool))]  # a Python number: .item()
    if results:
        row["max_abs_err"] = max(r["max_abs_err"] for r in results)
        row["pearson"] = min(r["pearson"] for r in results)
        row["scale"] = max(r.get("scale", 0.0) for r in results)
        if any("mismatches" in r for r in results):
            row["mismatches"] = sum(r.get("mismatches", 0) for r in results)
        notes = [r["note"] for r in results if "note" in r]
        if notes:
            row["note"] = notes[0]
    return row


def _checked(func, args, kwargs) -> dict:
    try:
        return check(func, args, kwargs)
    except Exception as e:  # noqa: BLE001 - a lowering that raises is a failing row
        return {"shapes": _shapes(func, args, kwargs), "compare": "values",
                "error": f"{type(e).__name__}: {str(e)[:160]}"}


def _first_accepted(func, candidates: list, dims: Dims) -> dict:
    """The row of the first candidate call the lowering accepts: scaled, else as the OpInfo sample (a
    lowering may refuse an argument relative to the sample's sizes: an output size, a padding)."""
    refused = []
    for source, args, kwargs in candidates:
        scaled = scale(func, args, kwargs, dims)
        row = {"source": source, "how": scaled[2], **_checked(func, *scaled[:2])}
        if row["compare"] == "refused" and row["how"].startswith("bert-large"):
            row["how"] = f"OpInfo sample: the lowering refuses the scaled call ({row.pop('note')})"
            row.update(_checked(func, args, kwargs))
        if row["compare"] != "refused":
            return row
        refused.append(row)
    return refused[0]


def failure(row: dict) -> str:
    """Why a measured row fails the tolerance of the module docstring ("" when it passes)."""
    if "error" in row:
        return "raises " + row["error"]
    if row.get("note", "").startswith(("got", "shape [", "non-finite")):
        return row["note"]
    if row["compare"] == "refused" or row["compare"].startswith("shape"):
        return ""
    if row["compare"] == "distribution":
        return f"KS {row['ks']:.4f} > {row['ks_bound']:.4f}" if row["ks"] > row["ks_bound"] else ""
    if row.get("mismatches"):  # (integer and bool outputs, also beside floating ones: max.dim's indices)
        return f"{row['mismatches']} integer or bool elements differ"
    if row.get("exact"):
        return ""
    if "pearson" not in row:
        return "no result compared"
    bound = (EXCEPTIONS.get(row["op"], (None,))[0] or REL_ERR_MAX) * max(1.0, row["scale"])
    if row["max_abs_err"] > bound:
        return f"max abs error {row['max_abs_err']:.3g} > {bound:.3g}"
    if row["pearson"] < PEARSON_MIN:  # (nan: a constant or single value, judged by the error alone)
        return f"Pearson {row['pearson']:.6f} < {PEARSON_MIN}"
    return ""


def run(dims: Dims | None = None, ops=None) -> list:
    """The sweep: one row per registered lowering (or per op of `ops`), in the order of their names."""
    import warnings

    from ..lowerings import REGISTRY
    dims = dims or bert_large()
    found = calls()
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for func in sorted(ops or REGISTRY, key=str):
            start = time.perf_counter()
            row = {"op": str(func)}
            if func in UNREACHED and func not in found:
                row.update(source="sweep.UNREACHED", how="bert-large (written here: no OpInfo sample reaches it)",
                           **_checked(func, *UNREACHED[func](dims)))
                row["failure"] = failure(row)
            elif func not in found:
                row.update(shapes="-", how="not exercised: no OpInfo sample reaches this overload")
            else:
                row.update(_first_accepted(func, found[func], dims))
                row["failure"] = failure(row)
            row["seconds"] = round(time.perf_counter() - start, 3)
            rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------------- the report
def summary(rows: list) -> dict:
    """Counts: lowerings, measured (values, exact, distribution, shape), refused, not exercised, failing."""
    out = {"lowerings": len(rows), "at bert-large shapes": sum(r["how"].startswith("bert-large") for r in rows),
           "on the OpInfo sample": sum(r["how"].startswith("OpInfo") for r in rows)}
    for r in rows:
        kind = ("not exercised" if "compare" not in r else "refused" if r["compare"] == "refused" else
                "exact" if r.get("exact") else r["compare"].split(" ")[0])
        out[kind] = out.get(kind, 0) + 1
    out["failing"] = sum(bool(r.get("failure")) for r in rows)
    return out


def markdown(rows: list, dims: dict) -> list:
    """The sweep's section of the validation report (lines)."""
    d = Dims(**dims)
    lines = ["## Every lowering at bert-large shapes", "",
             f"Each registered aten overload, on a call from PyTorch's OpInfo samples scaled to bert-large "
             f"(batch {d.batch}, seq {d.seq}, hidden {d.hidden}, {d.heads} heads, intermediate {d.intermediate}, "
             f"vocab {d.vocab}) where its semantics allow, against float32 PyTorch on the CPU "
             f"(src/ttnn_eager/tools/sweep.py). Tolerance: Pearson >= {PEARSON_MIN}, max abs error <= {REL_ERR_MAX} x "
             f"max(1, max |reference|); integers and bools exact; random ops by a two-sample KS test.", "",
             "; ".join(f"{k}: {v}" for k, v in summary(rows).items()), "",
             "| aten op | input shapes | inputs | ttnn ops | compare | max abs error | Pearson | note |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        note = r.get("failure") and "FAIL: " + r["failure"] or r.get("note", "") or \
            (f"KS {r['ks']:.4f} <= {r['ks_bound']:.4f}" if "ks" in r else "")
        lines.append(f"| {r['op']} | {r['shapes']} | {r['how']}{' from ' + r['source'] if 'source' in r else ''} | "
                     f"{', '.join(r.get('ttnn_ops', [])) or '-'} | {r.get('compare', '-')} | "
                     f"{fmt(r.get('max_abs_err'))} | {fmt(r.get('pearson'))} | {note} |")
    return lines + [""]
