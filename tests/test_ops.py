"""Per-op tests: every lowering against PyTorch on the CPU, at BERT-large shapes and at small shapes that
are not multiples of 32. Inputs are rounded to bfloat16 first, so what is measured is the op itself."""
import math

import pytest
import torch
import torch.nn.functional as F

import ttnn_eager
from ttnn_eager.lowerings import REGISTRY

from conftest import pcc, all_test_modules

DEV = "ttnn:0"
aten = torch.ops.aten


def bf(*shape, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16).float()


def ints(*shape, hi=10, lo=0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g)


def mask(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) > 0.3


H, S, NH = 1024, 100, 16  # BERT-large hidden size, a sequence length, heads

# name -> (function of tensors, list of input makers at (BERT-large shapes, small odd shapes))
CASES = {
    "add": (lambda a, b: a + b, [(bf(2, S, H), bf(2, S, H)), (bf(3, 33), bf(33))]),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=-0.5), [(bf(2, S, H), bf(H)), (bf(1, 31), bf(5, 1))]),
    "add_scalar": (lambda a: a + 1.25, [(bf(2, S, H),), (bf(7),)]),
    "sub": (lambda a, b: a - b, [(bf(2, S, H), bf(2, S, 1)), (bf(3, 1, 5), bf(4, 1))]),
    "rsub": (lambda a: 1.0 - a, [(bf(2, 1, 1, S),), (bf(33, 2),)]),
    "mul": (lambda a, b: a * b, [(bf(2, NH, S, 64), bf(2, 1, 1, S).transpose(-1, -2)), (bf(3, 5), bf(3, 5))]),
    "mul_scalar": (lambda a: a * 0.125, [(bf(2, NH, S, S),), (bf(2, 3),)]),
    # aten.mul.Scalar itself (a Python `a * 0.125` arrives as mul.Tensor; decompositions emit the .Scalar form)
    "mul_scalar_overload": (lambda a: torch.ops.aten.mul.Scalar(a, 0.125), [(bf(2, 3),)]),
    "div": (lambda a, b: a / b, [(bf(2, S, H), bf(H).abs() + 0.5), (bf(5, 3), bf(5, 3).abs() + 1)]),
    "div_scalar": (lambda a: a / 8.0, [(bf(2, NH, S, S),), (bf(1),)]),
    "neg": (lambda a: -a, [(bf(S, H),), (bf(3, 3),)]),
    "tanh": (torch.tanh, [(bf(2, H),), (bf(7, 3),)]),
    "gelu": (F.gelu, [(bf(2, S, 4 * H),), (bf(5, 33),)]),
    "gelu_tanh": (lambda a: F.gelu(a, approximate="tanh"), [(bf(2, S, 4 * H),), (bf(5, 33),)]),
    "relu": (torch.relu, [(bf(2, S, H),), (bf(5),)]),
    "exp": (torch.exp, [(bf(S, H),), (bf(3, 31),)]),
    "sqrt": (lambda a: torch.sqrt(a.abs() + 0.1), [(bf(S, H),), (bf(3, 31),)]),
    "pow2": (lambda a: a ** 2, [(bf(S, H),), (bf(3, 31),)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(bf(2, S, H), bf(H, H, scale=0.03), bf(H)),
                                                    (bf(3, 7, 33), bf(17, 33, scale=0.2), bf(17))]),
    "linear_nobias": (lambda x, w: F.linear(x, w), [(bf(2, S, H), bf(4 * H, H, scale=0.03)), (bf(5, 33), bf(3, 33))]),
    "addmm": (lambda b, x, w: torch.addmm(b, x, w.t()), [(bf(H), bf(2 * S, H), bf(H, H, scale=0.03)),
                                                          (bf(17), bf(7, 33), bf(17, 33))]),
    "mm": (torch.mm, [(bf(S, H), bf(H, S, scale=0.03)), (bf(7, 33), bf(33, 5))]),
    "bmm": (torch.bmm, [(bf(2 * NH, S, 64), bf(2 * NH, 64, S)), (bf(3, 7, 33), bf(3, 33, 5))]),
    "matmul_4d": (torch.matmul, [(bf(2, NH, S, 64), bf(2, NH, 64, S)), (bf(2, 3, 7, 33), bf(2, 3, 33, 5))]),
    "matmul_vec": (torch.matmul, [(bf(S, H), bf(H, scale=0.03)), (bf(33), bf(33, 5))]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-12),
                   [(bf(2, S, H), bf(H), bf(H)), (bf(3, 7, 33), bf(33), bf(33))]),
    "layer_norm_2d": (lambda x: F.layer_norm(x, x.shape[-2:]), [(bf(2, 4, 8),), (bf(3, 5, 7),)]),
    "native_layer_norm": (lambda x, w, b: aten.native_layer_norm(x, [x.shape[-1]], w, b, 1e-5),
                          [(bf(2, S, H), bf(H), bf(H)), (bf(3, 7, 33), bf(33), bf(33))]),
    "softmax": (lambda x: torch.softmax(x, -1), [(bf(2, NH, S, S, scale=3),), (bf(3, 33, scale=3),)]),
    "_softmax": (lambda x: aten._softmax(x, 1, False), [(bf(2, NH, S, S),), (bf(3, 33),)]),
    "safe_softmax": (lambda x: aten._safe_softmax(x, -1), [(bf(2, NH, S, S),), (bf(3, 33),)]),
    "sdpa": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
             [(bf(2, NH, S, 64), bf(2, NH, S, 64), bf(2, NH, S, 64), mask(2, 1, S, S)),
              (bf(1, 3, 7, 32), bf(1, 3, 7, 32), bf(1, 3, 7, 32), mask(1, 1, 1, 7))]),
    "sdpa_small_head": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
                        [(bf(1, 2, 9, 16), bf(1, 2, 9, 16), bf(1, 2, 9, 16))]),
    "embedding": (lambda w, i: F.embedding(i, w), [(bf(30522, H), ints(2, S, hi=30522)), (bf(50, 33), ints(7, hi=50))]),
    "gather": (lambda x, i: torch.gather(x, 1, i), [(ints(1, 512, hi=2).float(), ints(1, S, hi=512)),
                                                     (bf(3, 40), ints(3, 5, hi=40))]),
    "index": (lambda x, i, j: x[i, j], [(mask(2, S), torch.arange(2).view(2, 1, 1, 1), torch.arange(S).view(1, 1, 1, S)),
                                        (bf(5, 6, 3), torch.tensor([[0, -1], [4, 2]]), torch.tensor([1, 5]))]),
    "view": (lambda x: x.view(2, S, NH, 64), [(bf(2, S, H),)]),
    "reshape": (lambda x: x.reshape(-1, 5), [(bf(3, 10),), (bf(2, 3, 5),)]),
    "transpose": (lambda x: x.transpose(1, 2), [(bf(2, S, NH, 64),), (bf(3, 5, 7),)]),
    "permute": (lambda x: x.permute(2, 0, 1), [(bf(S, 2, H),), (bf(3, 5, 7),)]),
    "t": (lambda x: x.t(), [(bf(H, 4 * H),), (bf(3, 5),)]),
    "expand": (lambda x: x.expand(2, NH, S, S), [(bf(2, 1, 1, S),)]),
    "expand_new_dims": (lambda x: x.expand(3, -1, 5), [(bf(4, 1),)]),
    "unsqueeze_squeeze": (lambda x: x.unsqueeze(1).unsqueeze(-1).squeeze(1), [(bf(2, S),), (bf(3),)]),
    "slice": (lambda x: x[:, 3:-2], [(bf(2, S, H),), (bf(3, 7),)]),
    "slice_step": (lambda x: x[:, ::3], [(bf(2, S),), (bf(3, 7),)]),
    "select": (lambda x: x[:, 0], [(bf(2, S, H),), (bf(3, 7, 5),)]),
    "clone_contiguous": (lambda x: x.transpose(0, 1).contiguous().clone(), [(bf(S, 2),)]),
    "where": (lambda c, a, b: torch.where(c, a, b), [(mask(2, 1, S, S), bf(2, NH, S, S), bf(2, NH, S, S)),
                                                     (mask(3, 5), bf(3, 5), bf(5))]),
    "where_scalar": (lambda c, a: torch.where(c, a, -1e4), [(mask(2, 1, 1, S), bf(2, 1, 1, S)), (mask(5), bf(5))]),
    "masked_fill": (lambda x, m: x.masked_fill(m, -3.0), [(bf(2, NH, S, S), mask(2, 1, 1, S)), (bf(3, 5), mask(5))]),
    "eq_ge_lt": (lambda a, b: torch.stack([a == b, a >= b, a < b, a != b, a > 0, a <= 0.5]),
                 [(ints(2, S, hi=3).float(), ints(2, S, hi=3, seed=1).float()), (bf(3, 5), bf(3, 5))]),
    "bool_logic": (lambda a, b: torch.stack([a & b, a | b, ~a]), [(mask(2, S), mask(2, S, seed=1))]),
    "int_bitwise_and": (lambda a, b: a & b, [(ints(2, S, hi=16), ints(2, S, hi=16, seed=3))]),
    "int_arith": (lambda a, b: (a + b) * 3 - b, [(ints(2, S, hi=1000), ints(2, S, hi=1000, seed=2))]),
    "int_float_promotion": (lambda a: a * 0.5 + 1, [(ints(2, S, hi=100),)]),
    "all_any": (lambda m: torch.stack([m.all(), m.any(), (m | True).all(), (m & False).any()]),
                [(mask(2, S),), (mask(3, 5, seed=4),)]),
    "sum_mean_amax": (lambda x: torch.cat([x.sum(-1), x.mean(-1), x.amax(-1), x.amin(0)[:1].expand(x.shape[0])]),
                      [(bf(2, H),), (bf(3, 5),)]),
    "cumsum": (lambda x: torch.cumsum(x, 1), [(ints(2, S, hi=2),), (ints(3, 7, hi=5),)]),
    "to_dtype": (lambda x: torch.stack([x.to(torch.int32).float(), x.to(torch.bool).float()]), [(bf(2, S, scale=4),)]),
    "split_unbind": (lambda x: torch.cat(list(x.split(3, 1)), 1) + torch.stack(x.unbind(0), 0)
                     + torch.cat(list(x.split([1, 2, 4], 1)), 1), [(bf(2, 7),)]),
    "clamp_min_max": (lambda x: torch.stack([x.clamp_min(0.1), x.clamp_max(-0.2)]), [(bf(2, S),)]),
    "vector_norm": (lambda x: torch.cat([torch.linalg.vector_norm(x, dim=-1), torch.linalg.vector_norm(x, 1, dim=-1),
                                         torch.linalg.vector_norm(x, float("inf"), dim=-1), torch.linalg.vector_norm(x).reshape(1)]),
                    [(bf(3, 384),), (bf(5, 7),)]),
    "normalize": (lambda x: F.normalize(x, dim=-1), [(bf(8, 384),)]),
    # overloads that Python-level calls rarely reach, called by name
    "scalar_overloads": (lambda a: torch.stack([aten.add.Scalar(a, 2), aten.sub.Scalar(a, 1.5), aten.div.Scalar(a, 4),
                                                aten.rsub.Tensor(a, a * 2)]),
                         [(bf(2, S),), (bf(3, 5),)]),
    "div_rounding": (lambda a, b: torch.stack([aten.div.Tensor_mode(a, b, rounding_mode="trunc"),
                                               aten.div.Scalar_mode(a, 3, rounding_mode="floor")]),
                     [(ints(2, S, lo=-200, hi=200).float(), ints(2, S, lo=1, hi=9, seed=1).float())]),
    "unary_more": (lambda a: torch.stack([torch.erf(a), torch.log(a.abs() + 1), torch.rsqrt(a.abs() + 1),
                                          torch.sigmoid(a), F.silu(a), torch.reciprocal(a.abs() + 1),
                                          torch.clamp(a, -0.5, 0.5)]), [(bf(2, S),), (bf(3, 5),)]),
    "compare_more": (lambda a, b: torch.stack([aten.eq.Scalar(a, 1), aten.ge.Scalar(a, 1), aten.gt.Tensor(a, b),
                                               aten.le.Tensor(a, b), aten.lt.Scalar(a, 1), aten.ne.Scalar(a, 0)]),
                     [(ints(2, S, hi=3).float(), ints(2, S, hi=3, seed=5).float())]),
    "logical_more": (lambda a, b: torch.stack([torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_not(a)]),
                     [(mask(2, S), mask(2, S, seed=2))]),
    "where_more": (lambda c, a: torch.stack([aten.where.Scalar(c, 1.0, 0.0), aten.where.ScalarSelf(c, 2.0, a),
                                             aten.where.ScalarOther(c, a, -1.0), aten.masked_fill.Tensor(a, c, torch.tensor(5.0))]),
                   [(mask(2, S), bf(2, S))]),
    "reduce_more": (lambda m, x: torch.cat([aten.all.dim(m, 1).float(), aten.all.dims(m, [1]).float(),
                                           aten.any.dim(m, 1).float(), aten.any.dims(m, [1]).float(),
                                           x.mean().reshape(1), x.sum().reshape(1)]),
                    [(mask(3, S), bf(3, S))]),
    "view_more": (lambda x: torch.stack([aten._unsafe_view(x, [2, 3]), aten.alias(x).view(2, 3),
                                         aten.contiguous(x).view(2, 3), aten.detach(x).view(2, 3),
                                         aten.lift_fresh(x).view(2, 3), aten.squeeze.dims(x.view(1, 2, 1, 3), [0, 2]),
                                         aten.squeeze.default(x.view(1, 2, 1, 3))]),
                  [(bf(6),)]),
}


def _run(fn, inputs):
    ttnn_eager.reset_stats()
    with ttnn_eager.strict():
        out = fn(*[x.to(DEV) for x in inputs])
    outs = out if isinstance(out, tuple) else (out,)
    refs = fn(*inputs)
    refs = refs if isinstance(refs, tuple) else (refs,)
    assert ttnn_eager.stats()["fallbacks"] == 0
    for o, r in zip(outs, refs):
        assert o.device == torch.device(DEV) and o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype, o.shape, r.shape)
        got = o.cpu()
        if not r.dtype.is_floating_point:
            assert torch.equal(got, r)
            continue
        scale = r.abs().max().item() or 1.0
        err = (got - r).abs().max().item()
        assert err <= 0.02 * scale + 1e-3, f"max error {err} vs scale {scale}"
        if r.numel() > 8 and r.std() > 0.05 * scale:  # PCC means little for near-constant values
            assert pcc(got, r) >= 0.999


@pytest.mark.parametrize("case,shape_set", [(name, i) for name, (_, sets) in CASES.items() for i in range(len(sets))])
def test_op_matches_cpu(case, shape_set):
    fn, sets = CASES[case]
    _run(fn, sets[shape_set])


def test_every_lowering_is_exercised():
    """A lowering without a test here (or in test_device's factory/copy tests) fails this check."""
    seen = set()
    cases = [c for m in all_test_modules() for c in getattr(m, "CASES", {}).values()]  # every file's CASES
    for fn, sets in cases:
        for grad_mode in (torch.no_grad, torch.inference_mode):  # inference_mode: composites arrive whole
            with grad_mode(), ttnn_eager.record_ops() as rec:
                for inputs in sets:
                    fn(*[x.to(DEV) for x in inputs])
            seen |= set(rec.aten)
    elsewhere = {"factory"}  # factories and copies: tests/test_device.py
    missing = sorted(str(op) for op, e in REGISTRY.items()
                     if str(op) not in seen and e.fn.__module__.rsplit(".", 1)[-1] not in elsewhere)
    # ops that only a grad mode or a CIA path reaches, each tested by name below
    indirect = {"aten.softmax.int", "aten.reshape.default", "aten.layer_norm.default", "aten.linear.default",
                "aten.matmul.default", "aten.scaled_dot_product_attention.default"}
    missing = [m for m in missing if m not in indirect]
    assert not missing, " ".join(missing)


def test_inference_mode_reaches_composites_whole():
    """linear and layer_norm (registration.KEEP_WHOLE) reach the backend whole under inference_mode; other
    composite ops decompose in PyTorch's C++ as for any device (softmax.int -> _softmax, reshape -> view)."""
    x, w, b = bf(2, 7, 33), bf(17, 33), bf(17)
    with torch.inference_mode(), ttnn_eager.record_ops() as rec:
        y = F.linear(x.to(DEV), w.to(DEV), b.to(DEV))
        z = torch.softmax(y, -1).reshape(14, 17)
        n = F.layer_norm(z, (17,))
    assert {"aten.linear.default", "aten._softmax.default", "aten.view.default", "aten.layer_norm.default"} <= set(rec.aten)
    assert not {"aten.softmax.int", "aten.reshape.default", "aten.native_layer_norm.default"} & set(rec.aten)
    ref = F.layer_norm(torch.softmax(F.linear(x, w, b), -1).reshape(14, 17), (17,))
    assert pcc(n.cpu(), ref) >= 0.999


def test_max_and_min_along_a_dimension_of_integers_on_the_device():
    """max.dim / min.dim of int64 (TimesFM's min over its 0/1 padding) as exact float32 keys: the CPU's values
    (int64) and indices, ties to the first index, no fallback."""
    torch.manual_seed(0)
    x = torch.randint(-50, 50, (4, 7, 9))
    x[0, 0, :] = 3
    x[1, 2, :] = torch.arange(1000, 1009)  # (not bfloat16 values: float32 keys)
    d = x.to("ttnn:0")
    with ttnn_eager.strict():
        for dim in (0, 1, -1):
            for keepdim in (False, True):
                for fn in (torch.max, torch.min):
                    values, indices = fn(d, dim, keepdim)
                    ref_values, ref_indices = fn(x, dim, keepdim)
                    assert values.dtype == torch.int64 and torch.equal(values.cpu(), ref_values)
                    assert torch.equal(indices.cpu(), ref_indices)


@pytest.mark.parametrize("head, value_head", [(32, 32), (16, 16), (16, 8)])  # ttnn's sdpa; padded; decomposed
def test_sdpa_drops_a_mask_known_to_mask_nothing(head, value_head):
    """A bool mask uploaded with no False (a padding mask without padding) is dropped, as transformers' eager
    mode drops it on the host: the TT-NN ops of no mask, in the lowering and in the decomposition
    (Unfit.replaced: values of another head size); the result is the CPU's with the mask. One False and the
    mask is applied."""
    q, k, v = bf(2, 4, 16, head, seed=1), bf(2, 4, 16, head, seed=2), bf(2, 4, 16, value_head, seed=3)
    ones = torch.ones(2, 1, 1, 16, dtype=torch.bool)
    some = ones.clone()
    some[1, ..., 5] = False
    ops = {}
    for name, mask in (("none", None), ("ones", ones), ("some", some)):
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)
        with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
            got = F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV),
                                                 attn_mask=None if mask is None else mask.to(DEV)).cpu()
        assert pcc(got.float(), want) > 0.999 and float((got.float() - want).abs().max()) < 0.05, name
        ops[name] = rec.ttnn
    assert ops["ones"] == ops["none"] and sum(ops["some"].values()) > sum(ops["none"].values()), ops


@pytest.mark.parametrize("b, heads, kv_heads, s, head", [(2, 4, 2, 40, 16), (2, 4, 2, 40, 48), (2, 4, 2, 40, 80),
                                                        (1, 32, 32, 512, 80)])  # (the last: Phi-2's attention)
def test_sdpa_of_a_head_size_not_of_whole_tiles_is_ttnns_padded(b, heads, kv_heads, s, head):
    """TT-NN's sdpa takes a head_dim of whole tiles only (TT_FATAL "Padding is not supported on the head_dim
    dimension"): q, k and v are zero-padded to the next multiple of 32, the result sliced back -- 5 TT-NN ops,
    where the decomposition took some 15 -- with grouped key/value heads and a padding mask, causal or not,
    against float32 on the CPU, and bit for bit the kernel's own result on inputs zero-padded on the host. The
    scale stays 1/sqrt(head), not the padded width's (a wrong scale or non-zero padding would move the numbers
    past the bounds). The max error bound is the small shapes': at 512 tokens the kernel's own bfloat16 error is
    0.033-0.036 at heads of 64, 80 and 96 alike, so there the comparison with the whole-tile kernel stands for it."""
    q, k, v = bf(b, heads, s, head, seed=1), bf(b, kv_heads, s, head, seed=2), bf(b, kv_heads, s, head, seed=3)
    mask = torch.ones(b, 1, 1, s, dtype=torch.bool)
    mask[-1, ..., s * 3 // 4:] = False
    for kw in ({"is_causal": True}, {"attn_mask": mask}):
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=True, **kw)
        dkw = {n: a.to(DEV) if isinstance(a, torch.Tensor) else a for n, a in kw.items()}
        with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
            got = F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), enable_gqa=True, **dkw).cpu()
        ops = {op: n for op, n in rec.ttnn.items() if op not in ("expand", "where")}  # (the mask made additive)
        assert ops == {"pad": 3, "transformer.scaled_dot_product_attention": 1, "slice": 1}, rec.ttnn
        assert got.shape == want.shape and pcc(got.float(), want) >= 0.9999, kw
        assert s > 40 or float((got.float() - want).abs().max()) < 0.03, kw
        whole = [F.pad(t, (0, -head % 32)).to(DEV) for t in (q, k, v)]
        kernel = F.scaled_dot_product_attention(*whole, enable_gqa=True, scale=head ** -0.5, **dkw).cpu()
        assert torch.equal(got, kernel[..., :head]), kw


def test_a_replay_of_a_dropped_mask_refuses_one_that_masks():
    """The drop is a host decision: a captured graph replayed with a mask that now masks a key refuses to
    re-decide (as for aten.all of a mask), instead of silently leaving the mask out."""
    q, k, v = (bf(1, 2, 16, 32, seed=s).to(DEV) for s in (1, 2, 3))
    mask = torch.ones(1, 1, 1, 16, dtype=torch.bool).to(DEV)
    F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (a warm-up)
    g = torch.ttnn.TTNNGraph()
    with torch.ttnn.graph(g):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    g.replay()
    masked = torch.ones(1, 1, 1, 16, dtype=torch.bool)
    masked[..., 3] = False
    mask.copy_(masked.to(DEV))
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention's mask"):
        g.replay()
    assert out.shape == (1, 2, 16, 32)
