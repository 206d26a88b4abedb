"""Row-major gaps, measured: every TT-NN op the lowerings use, called with ROW_MAJOR inputs through ttnn's
real validation (on a mock device, or on hardware), next to the same call with TILE inputs.

Each op gets one of:
    accepts       runs with ROW_MAJOR inputs and returns ROW_MAJOR
    auto-tilize   runs with ROW_MAJOR inputs and returns TILE (ttnn converted on its own)
    rejects       raises; the first line of ttnn's message is kept
`docs/layouts.md` is generated from this (`ttnn-eager docs`), with a drafted upstream issue for each gap.
"""
from __future__ import annotations

import math

import torch

from ..device import api

SHAPE = (2, 40, 64)  # neither 40 nor the batch is a multiple of 32


def _t(layout, shape=SHAPE, dtype=api.BFLOAT16, kind="float"):
    g = torch.Generator().manual_seed(math.prod(shape))
    if kind == "index":
        value = torch.randint(0, shape[-1] if len(shape) > 1 else 8, shape, generator=g)
    elif kind == "mask":
        value = (torch.rand(shape, generator=g) > 0.5).float()
    else:
        value = torch.randn(shape, generator=g)
    return api.upload(value, dtype, layout, 0)


# op -> function(layout) -> (args, kwargs) for api.run
PROBES = {
    "add": lambda L: ((_t(L), _t(L)), {}),
    "subtract": lambda L: ((_t(L), _t(L)), {}),
    "multiply": lambda L: ((_t(L), _t(L)), {}),
    "divide": lambda L: ((_t(L), _t(L)), {}),
    "rsub": lambda L: ((_t(L), 1.0), {}),
    "eq": lambda L: ((_t(L), _t(L)), {}),
    "logical_and": lambda L: ((_t(L, kind="mask"), _t(L, kind="mask")), {}),
    "bitwise_and": lambda L: ((_t(L, dtype=api.INT32, kind="index"), _t(L, dtype=api.INT32, kind="index")), {}),
    "where": lambda L: ((_t(L, kind="mask"), _t(L), _t(L)), {}),
    "neg": lambda L: ((_t(L),), {}),
    "tanh": lambda L: ((_t(L),), {}),
    "exp": lambda L: ((_t(L),), {}),
    "gelu": lambda L: ((_t(L),), {}),
    "trunc": lambda L: ((_t(L),), {}),
    "clamp": lambda L: ((_t(L),), {"min": -0.5, "max": 0.5}),
    "matmul": lambda L: ((_t(L), _t(L, (64, 48))), {}),
    "linear": lambda L: ((_t(L), _t(L, (48, 64))), {"bias": _t(L, (48,)), "transpose_b": True}),
    "layer_norm": lambda L: ((_t(L),), {"weight": _t(L, (64,)), "bias": _t(L, (64,)), "epsilon": 1e-12}),
    "softmax": lambda L: ((_t(L),), {"dim": -1}),
    "transformer.scaled_dot_product_attention": lambda L: (
        (_t(L, (1, 2, 40, 64)), _t(L, (1, 2, 40, 64)), _t(L, (1, 2, 40, 64))),
        {"attn_mask": _t(L, (1, 1, 40, 40)), "is_causal": False}),
    "embedding": lambda L: ((_t(L, (2, 40), api.UINT32, "index"), _t(L, (64, 32))), {}),
    "gather": lambda L: ((_t(L), 2), {"index": _t(L, (2, 40, 8), api.UINT32, "index")}),
    "reshape": lambda L: ((_t(L), (80, 64)), {}),
    "permute": lambda L: ((_t(L), (1, 0, 2)), {}),
    "expand": lambda L: ((_t(L, (2, 1, 64)), (2, 40, 64)), {}),
    "slice": lambda L: ((_t(L), [0, 3, 0], [2, 37, 64], [1, 1, 1]), {}),
    "concat": lambda L: (([_t(L), _t(L)],), {"dim": 1}),
    "typecast": lambda L: ((_t(L, dtype=api.INT32, kind="index"), api.UINT32), {}),
    "sum": lambda L: ((_t(L),), {"dim": -1, "keepdim": True}),
    "mean": lambda L: ((_t(L),), {"dim": -1, "keepdim": True}),
    "max": lambda L: ((_t(L),), {"dim": -1, "keepdim": True}),
    "cumsum": lambda L: ((_t(L), 1), {}),
}


def probe(op: str, layout) -> tuple:
    """(verdict, output layout or error line) for one op with inputs in `layout`."""
    try:
        args, kwargs = PROBES[op](layout)
        out = api.run(op, *args, **kwargs)
        out = out[0] if isinstance(out, list) else out
    except Exception as e:  # ttnn's validation said no
        line = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        return "rejects", line.replace("|", "/")[:220]
    if layout == api.TILE:
        return "runs", str(out.layout)
    return ("accepts" if out.layout == api.ROW_MAJOR else "auto-tilize"), str(out.layout)


def measure() -> list:
    """[(op, row-major verdict, detail, tile verdict)] for every probed op."""
    rows = []
    for op in PROBES:
        verdict, detail = probe(op, api.ROW_MAJOR)
        tile_verdict, _ = probe(op, api.TILE)
        rows.append((op, verdict, detail, tile_verdict))
    return rows
