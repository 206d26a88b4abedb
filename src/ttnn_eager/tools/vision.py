"""Vision models on ttnn:0: torchvision classifiers (seeded random weights) against float32 PyTorch on the
CPU -- `ttnn-eager vision`, the sibling of `ttnn-eager bert`.

Batch-norm running statistics are drawn at random too (torchvision initializes them to mean 0, variance 1,
which would make every BatchNorm an affine no-op and test nothing).
"""
from __future__ import annotations

import copy
import time

import torch

from .compare import pcc

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "convnext_tiny", "efficientnet_b0",
          "regnet_y_400mf", "resnext50_32x4d")
# TT-NN ops by kind (benchmarks/vision.py, `ttnn-eager vision --json`): the rest is "other"
KINDS = {"conv2d": ("conv2d", "conv_transpose2d", "linear", "matmul"), "permute": ("permute",),
         "reshape": ("reshape",), "slice": ("slice", "concat"),
         "elementwise": ("add", "multiply", "mul", "subtract", "relu", "relu6", "silu", "sigmoid", "hardswish",
                         "hardsigmoid", "gelu", "clamp", "sum")}


def load(name: str, seed: int = 0) -> torch.nn.Module:
    import torchvision
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
    return model


def make_input(batch: int, size: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))


class _PeakMemory:
    """A counters.profile stand-in that reads ttnn's allocator after every ttnn op and keeps the largest
    figure: the peak of what is allocated between ops (buffers an op allocates and frees inside itself are
    not seen). Each read costs ~0.1 ms, so it is used for one measured forward only."""

    def __init__(self, index: int):
        from ..device import api as device_api
        self.index, self.read, self.peak = index, device_api.memory_allocated, 0

    def run(self, func, fn, args, kwargs):
        return fn(func, args, kwargs)

    def on_ttnn(self, op: str) -> None:
        self.peak = max(self.peak, self.read(self.index))

    def __enter__(self):
        from .. import counters
        self.saved, counters.profile = counters.profile, self
        self.peak = self.read(self.index)
        return self

    def __exit__(self, *exc):
        from .. import counters
        counters.profile = self.saved


def by_kind(ttnn_by_op: dict) -> dict:
    """TT-NN ops of a forward by kind (KINDS: conv2d and matmuls, permute, reshape, slice/concat, elementwise,
    other)."""
    kinds = dict.fromkeys((*KINDS, "other"), 0)
    for op, n in ttnn_by_op.items():
        kinds[next((k for k, names in KINDS.items() if op in names), "other")] += n
    return kinds


def compare(model: torch.nn.Module, x: torch.Tensor, device: str = "ttnn:0", forwards: int = 2,
            compiled: bool = False, weights: bool = False) -> dict:
    """Run `model` on the CPU in float32, then `forwards` times on `device` (compiled: torch.compile(backend=
    "ttnn"), at least 3 forwards: eager, captured, replayed); accuracy, counts and timings are those of the
    last device forward (the first one also builds the programs and prepares weights); peak device memory is
    measured in one more forward, and the host time of one with shadow execution off. weights: the device
    DRAM the model holds after its forwards, ttnn's program cache emptied, against its parameters' bfloat16
    bytes (eager only: a compiled graph keeps its captured buffers), the input freed first."""
    import gc

    import ttnn_eager

    from .. import counters
    from ..device import api as device_api
    with torch.no_grad():
        ref = copy.deepcopy(model).float()(x)
    index = torch.device(device).index or 0
    base = None
    if weights:
        gc.collect()
        torch.ttnn.empty_cache()
        base = device_api.memory_used(index, "DRAM")
    model.to(device)
    run = torch.compile(model, backend="ttnn") if compiled else model
    forwards = max(forwards, 3) if compiled else forwards
    dx = x.to(device)
    seconds = []
    for _ in range(forwards):
        ttnn_eager.reset_stats()
        start = time.perf_counter()
        with torch.no_grad():
            out = run(dx).cpu()
        seconds.append(time.perf_counter() - start)
    stats = ttnn_eager.stats()
    kinds = by_kind(counters.ttnn_by_op)
    with torch.no_grad(), _PeakMemory(index) as mem:
        run(dx)
    with torch.no_grad(), device_api.shadows_off():
        start = time.perf_counter()
        run(dx)
        device_api.synchronize(index)
        host = time.perf_counter() - start
    extra = {}
    if weights:
        del dx  # the input image is not a weight (mobilenet_v2 at 224: 0.045x of its bfloat16 weight bytes)
        gc.collect()
        torch.ttnn.empty_cache()
        bf16 = sum(p.numel() for p in model.parameters()) * 2
        extra = {"weights_over_bf16": (device_api.memory_used(index, "DRAM") - base) / bf16}
    top1 = float((out.argmax(-1) == ref.argmax(-1)).float().mean())
    return {
        "device": f"{device_api.device_name(index)}, arch {device_api.arch_name()}",
        "pcc_logits": pcc(out, ref),
        "max_abs_err_logits": float((out - ref).abs().max()),
        "top1_agreement": top1,
        **stats,
        "ttnn_ops_by_kind": kinds,
        "compiled": compiled,
        **extra,
        "host_seconds_shadows_off": host,
        "peak_device_memory_mib": mem.peak / 2**20,
        "seconds": seconds[-1],
        "seconds_first_forward": seconds[0],
    }
