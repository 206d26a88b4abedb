"""Mixture-of-experts models on ttnn:0, and what they need of the backend: a CPU fallback that hands the CPU
kernel PyTorch's dtypes (and the dtypes an accelerator kernel takes), tensors that format and hash as
PyTorch's, value bounds that are ranges, and the routing ops (sort, histc, bincount, one_hot, index_add,
grouped matmuls) on the device. Tiny seeded configs (tools/models.py)."""
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ttnn_eager
from ttnn_eager.core import dispatch
from ttnn_eager.core.tensor import handle_of

from conftest import covers, pcc

DEV = "ttnn:0"
aten = torch.ops.aten


def ints(*shape, lo=0, hi=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g)


def bf(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(torch.bfloat16).float()


# ----------------------------------------------------------------------------------------------- fallback fidelity
# (aten op, arguments after the tensor, kwargs): each run through the CPU fallback (dispatch.fallback, whether
# or not the op has a lowering) on int64, bool and float32 tensors, against the same op on the CPU
FALLBACK_TABLE = [
    (aten.cumsum.default, (1,), {}),
    (aten.flip.default, ([1],), {}),
    (aten.roll.default, ([1], [1]), {}),
    (aten.cummax.default, (1,), {}),
    (aten.sort.default, (), {}),
    (aten.argsort.default, (), {}),
    (aten.nonzero.default, (), {}),
    (aten.clone.default, (), {}),
    (aten.t.default, (), {}),
    (aten.view.default, ([-1],), {}),
    (aten.select.int, (0, 1), {}),
    (aten.slice.Tensor, (1, 1, 3), {}),
    (aten.unbind.int, (1,), {}),
    (aten.sum.dim_IntList, ([1],), {}),
    (aten.eq.Scalar, (1,), {}),
    (aten.mul.Tensor, (2,), {}),
    (aten.bitwise_not.default, (), {}),
    (aten.unique_consecutive.default, (), {}),
    (aten.bincount.default, (), {}),
    (aten.histc.default, (), {"bins": 4, "min": 0, "max": 3}),
    (aten.one_hot.default, (4,), {}),
    (aten.count_nonzero.default, (), {}),
]
FALLBACK_INPUTS = {"int64": ints(3, 5, hi=4), "bool": ints(3, 5, hi=2) > 0, "float32": bf(3, 5).abs() * 3}


def _cases():
    for op, args, kwargs in FALLBACK_TABLE:
        for kind, x in FALLBACK_INPUTS.items():
            try:
                op(x, *args, **kwargs)
            except (RuntimeError, NotImplementedError, TypeError):
                continue  # the CPU refuses this dtype too
            yield pytest.param(op, args, kwargs, kind, id=f"{op}-{kind}")


def _flat(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


@pytest.mark.parametrize("op,args,kwargs,kind", list(_cases()))
def test_fallback_hands_the_cpu_pytorchs_dtypes_shapes_and_values(op, args, kwargs, kind):
    x = FALLBACK_INPUTS[kind]
    if op in (aten.bincount.default, aten.one_hot.default):
        x = x.flatten()
    ref = op(x, *args, **kwargs)
    d = x.to(DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = dispatch.fallback(op, (d, *args), kwargs)
    for o, r in zip(_flat(out), _flat(ref)):
        assert o.device == torch.device(DEV) and o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype)
        got = o.cpu()
        assert got.dtype == r.dtype
        if r.dtype.is_floating_point:  # float32 is stored as bfloat16 by default: the input was made exact in it
            assert torch.allclose(got, r, rtol=1e-2, atol=1e-2)
        else:
            assert torch.equal(got, r), (got, r)


def test_int64_stored_as_int32_reaches_the_cpu_as_int64():
    x = ints(40, hi=4)
    d = x.to(DEV)
    assert handle_of(d).tt_dtype != torch.int64 and d.dtype == torch.int64  # stored as 32-bit integers
    for t, r in ((d, x), (d.view(4, 10)[1:], x.view(4, 10)[1:]), (d.reshape(-1) + 1, x + 1),
                 (d.cumsum(0), x.cumsum(0)), ((d > 1).cumsum(0), (x > 1).cumsum(0)),
                 (torch.topk(d.float(), 3).indices, torch.topk(x.float(), 3).indices)):
        assert t.dtype == r.dtype and dispatch.api.download(handle_of(t)).dtype == r.dtype
        if r.dtype != torch.int64 or t.shape[0] != 3:  # (topk of tied values: any of the tied indices)
            assert torch.equal(t.cpu(), r)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool])
def test_fallback_runs_kernels_the_cpu_lacks_for_a_dtype_as_an_accelerator_does(dtype):
    """torch.histc of an int32 tensor works on CUDA but not on the CPU; transformers' MoE layers call it on
    every device but the CPU (`expert_ids.int()`): the fallback computes it with the values widened exactly
    and gives the dtype PyTorch's meta kernel (and CUDA) give."""
    x = ints(64, hi=4).to(dtype)
    with pytest.raises(NotImplementedError):
        torch.histc(x, bins=4, min=0, max=3)  # the CPU itself
    ref = torch.histc(x.double(), bins=4, min=0, max=3).to(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = dispatch.fallback(aten.histc.default, (x.to(DEV),), {"bins": 4, "min": 0, "max": 3})
    assert out.dtype == dtype and torch.equal(out.cpu(), ref)


# ----------------------------------------------------------------------------------------------- tensors as keys
def test_tensors_are_dict_keys_and_set_members_by_identity():
    a, b = torch.tensor(1).to(DEV), torch.tensor(1).to(DEV)
    table = {a: "a", b: "b"}
    assert table[a] == "a" and table[b] == "b" and len({a, b, a}) == 2
    assert hash(a) == id(a)
    assert a in table and torch.tensor(1).to(DEV) not in table


@pytest.mark.parametrize("value", [0, 3, -2, 2.5, True])
def test_zero_dim_tensors_format_as_their_number(value):
    """Switch Transformers looks its experts up by f"expert_{idx}" with idx a 0-d tensor."""
    t = torch.tensor(value)
    d = t.to(DEV)
    assert f"expert_{d}" == f"expert_{t}" and "{:>4}".format(d) == "{:>4}".format(t)
    if isinstance(value, float):
        assert f"{d:.3f}" == f"{t:.3f}"
    one_d = torch.arange(3).to(DEV)
    assert f"{one_d}" == str(one_d)  # other tensors format as their str, as PyTorch's


def test_a_range_of_values_is_no_index_error():
    """A view keeps its base's value bounds as a range only: one column of nonzero()'s [n, 2] result may
    stay inside a dimension the other column overflows. Indexing with it is no IndexError (Switch
    Transformers' routing_weights[top_x, idx, None]; LongCat-Flash's index 45 of a dimension of 2)."""
    m = torch.zeros(2, 40, dtype=torch.bool)
    m[0, 31] = m[1, 5] = m[1, 39] = True
    w = bf(40, 2)
    row, col = torch.where(m)
    ref = w[col, row]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        drow, dcol = torch.where(m.to(DEV))
        out = w.to(DEV)[dcol, drow]
    assert torch.equal(out.cpu(), ref)
    with pytest.raises(IndexError, match="out of bounds"):  # an upload's bounds are exact: still refused
        w.to(DEV)[torch.tensor([0, 40]).to(DEV)]


# ----------------------------------------------------------------------------------------------- routing ops
def check(fn, *inputs, ref=None, rtol=0.02):
    """fn on ttnn:0 in strict mode against `ref` (default fn) on the CPU: dtypes and shapes equal, integers
    exact, floats within bfloat16's rounding of the largest value."""
    expected = (ref or fn)(*inputs)
    with ttnn_eager.strict():
        out = fn(*[x.to(DEV) if isinstance(x, torch.Tensor) else x for x in inputs])
    for o, r in zip(_flat(out), _flat(expected)):
        assert o.device.type == "ttnn" and o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype, o.shape, r.shape)
        got = o.cpu()
        if r.dtype.is_floating_point:
            scale = max(r.abs().max().item(), 1.0) if r.numel() else 1.0
            assert (got - r).abs().max().item() <= rtol * scale if r.numel() else True, (got, r)
            if r.numel() > 8 and r.std() > 0.05 * scale:
                assert pcc(got, r) >= 0.999
        else:
            assert torch.equal(got, r), (got, r)


def histc_as_cuda(x, bins, lo, hi):
    """torch.histc of an integer tensor as CUDA computes it (the CPU kernel takes floats only)."""
    return torch.histc(x.double(), bins=bins, min=lo, max=hi).to(x.dtype)


def offsets(counts):
    return torch.tensor(counts, dtype=torch.int32).cumsum(0, dtype=torch.int32)


EXPERTS = ints(48, hi=4, seed=3)  # a router's top-k expert ids of 24 tokens, 2 each
# name -> (function, [input tuples]); the lowering guards (tests/test_ops.py) gather these
CASES = {
    "sort_int": (lambda e: (*torch.sort(e, stable=True), *torch.sort(e.view(-1, 8), dim=0, descending=True, stable=True)),
                 [(EXPERTS,), (ints(3, 40, lo=-1000, hi=1000),)]),
    "sort_bool": (lambda e: torch.sort(e > 1, stable=True, descending=True), [(EXPERTS,)]),
    "histc": (lambda x: torch.histc(x, bins=7, min=-1, max=1.5), [(bf(500),), (bf(3, 33),)]),
    # min == max: the data's own range (one read of its extremes); all values equal: [v - 1, v + 1]
    # (transformers' MoE layers with one expert call histc(ids, bins=1, min=0, max=0))
    "histc_data_range": (lambda x: (torch.histc(x, bins=9), torch.histc(x, bins=1, min=0, max=0),
                                    torch.histc(x * 0 + 3, bins=4, min=2, max=2)), [(bf(500),), (bf(3, 33),)]),
    "bincount": (lambda e, w: (torch.bincount(e), torch.bincount(e, w, minlength=7)),
                 [(EXPERTS, bf(48).abs()), (ints(1, hi=1), bf(1))]),
    "one_hot": (lambda e: torch.nn.functional.one_hot(e, 5), [(EXPERTS,), (ints(2, 3, hi=5),)]),
    # more than 256 classes: ttnn's int32 scatter refuses a TILE row that long (LongCat-Flash's 260 experts)
    "one_hot_wide": (lambda e: torch.nn.functional.one_hot(e, 260), [(ints(2, 24, hi=260),)]),
    # GLM-5-Next counts 2063 top-k picks into a short int32 row: ttnn checks the source's length too
    "scatter_add_long_source": (lambda i: (i.new_zeros((2, 24), dtype=torch.int32).scatter_add(
        -1, i, torch.ones_like(i, dtype=torch.int32)), i.new_zeros((2, 24)).scatter_add(-1, i, i)),
                                [(ints(2, 300, hi=24),)]),
    "index_add": (lambda x, i, s: (x.index_add(0, i, s, alpha=2), x.t().index_add(1, i, s.t())),
                  [(bf(6, 5), torch.tensor([0, 2, 2, 5]), bf(4, 5, seed=1)),
                   (bf(40, 33), ints(50, hi=40), bf(50, 33, seed=2))]),
    "grouped_mm": (lambda a, w, o: (torch._grouped_mm(a, w, offs=o), torch._grouped_mm(a, w.transpose(-2, -1)
                                                                                          .contiguous().transpose(-2, -1), offs=o)),
                   [(bf(10, 32), bf(4, 32, 48, seed=1), offsets([3, 0, 4, 3])),
                    (bf(48, 64), bf(4, 64, 40, seed=2), offsets([10, 20, 8, 10]))]),
    "grouped_mm_3d": (lambda a, w: torch._grouped_mm(a, w), [(bf(3, 5, 32), bf(3, 32, 8, seed=1))]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_cpu(name):
    fn, sets = CASES[name]
    for inputs in sets:
        check(fn, *inputs)


def test_scatter_refuses_the_shapes_pytorch_refuses():
    """PyTorch's shape rules, with its error type and words (ttnn's own checks are TT_FATALs)."""
    x, i = torch.zeros(3, 4, device=DEV), torch.zeros(3, 3, dtype=torch.long, device=DEV)
    with pytest.raises(RuntimeError, match=r"no larger than self \[3, 4\] apart from dimension 1 and .* src \[3, 2\]"):
        x.scatter(1, i, torch.ones(3, 2, device=DEV))
    with pytest.raises(RuntimeError, match=r"Expected index \[5, 2\] to be no larger than self"):
        x.scatter_add(1, torch.zeros(5, 2, dtype=torch.long, device=DEV), torch.ones(5, 2, device=DEV))
    with pytest.raises(RuntimeError, match=r"apart from dimension 1$"):
        x.scatter(1, torch.zeros(5, 2, dtype=torch.long, device=DEV), 2.0)
    with pytest.raises(RuntimeError, match="same number of dimensions as src"):
        x.scatter(1, i, torch.ones(3, 3, 1, device=DEV))
    # a 0-d source is a 1-element one to PyTorch (it raised IndexError here before)
    one, five = torch.tensor([1], device=DEV), torch.tensor(5.0, device=DEV)
    assert torch.equal(torch.zeros(4, device=DEV).scatter(0, one, five).cpu(), torch.tensor([0.0, 5, 0, 0]))
    assert torch.equal(torch.zeros(4, device=DEV).scatter_add(0, one, five).cpu(), torch.tensor([0.0, 5, 0, 0]))
    with pytest.raises(RuntimeError, match=r"no larger size than src \[\]"):
        torch.zeros(4, device=DEV).scatter(0, torch.tensor([1, 2], device=DEV), five)


def test_histc_of_integers_counts_as_cuda_does():
    for lo, hi, bins in ((0, 3, 4), (0, 4, 4), (1, 2, 3), (-5, 9, 6)):  # expert ids, the edge bin, skipped values
        check(lambda e: torch.histc(e.int(), bins=bins, min=lo, max=hi), EXPERTS,
              ref=lambda e: histc_as_cuda(e.int(), bins, lo, hi))
    many = ints(3000, hi=4, seed=5)  # counts beyond bfloat16's 256: exact
    check(lambda e: torch.histc(e.int(), bins=4, min=0, max=3), many, ref=lambda e: histc_as_cuda(e.int(), 4, 0, 3))
    check(lambda e: torch.histc(e.float(), bins=4, min=0, max=3), many)


def test_histc_and_bincount_refuse_what_pytorch_refuses():
    d = EXPERTS.to(DEV)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(d.float(), bins=0, min=0, max=3)
    with pytest.raises(RuntimeError, match=r"torch.histc: range of \[0, inf\] is not finite"):
        torch.histc(torch.tensor([0.0, float("inf")], device=DEV), bins=3)  # (the data's range)
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(d - 5)
    with pytest.raises(RuntimeError, match="1-d"):
        torch.bincount(d.view(6, 8))


def test_bincount_of_device_computed_ids_reads_its_length():
    e = EXPERTS.to(DEV) * 2  # no known bounds: the length is read from the device, as CUDA does
    ttnn_eager.reset_stats()
    with ttnn_eager.strict():
        out = torch.bincount(e)
    assert torch.equal(out.cpu(), torch.bincount(EXPERTS * 2)) and ttnn_eager.stats()["device_to_host"] >= 1


def test_sort_of_integers_of_unknown_range_reads_their_range():
    """Integers a computation made (no value bounds: PhiMoE's and DeepSeek-V4's routers) are sorted on the
    device after one read of their extremes; beyond float32's exact integers (2**24) they fall back, counted."""
    small = (EXPERTS.to(DEV) * 3).cumsum(0)
    ttnn_eager.reset_stats()
    with ttnn_eager.strict():
        values, idx = torch.sort(small, stable=True)
    assert torch.equal(values.cpu(), torch.sort((EXPERTS * 3).cumsum(0), stable=True).values)
    assert torch.equal(idx.cpu(), torch.sort((EXPERTS * 3).cumsum(0), stable=True).indices)
    assert ttnn_eager.stats()["device_to_host"] >= 1
    big = (EXPERTS.to(DEV) * 2 ** 22).cumsum(0)
    with ttnn_eager.strict(), pytest.raises(ttnn_eager.FallbackError, match="exact within 2"):
        torch.sort(big)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.equal(torch.sort(big).values.cpu(), torch.sort((EXPERTS * 2 ** 22).cumsum(0)).values)


@covers(aten.sort.default, aten.sort.stable, aten.histc.default, aten.bincount.default, aten.index_add.default,
        aten._grouped_mm.default)
@settings(max_examples=10, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(tokens=st.sampled_from([1, 5, 24, 40]), experts=st.sampled_from([2, 4, 8]), top=st.sampled_from([1, 2]),
       seed=st.integers(0, 999))
def test_routing_ops_of_a_mixture_of_experts_layer(tokens, experts, top, seed):
    """The ops of transformers' grouped-matmul experts (integrations/moe.py) on random routings."""
    top = min(top, experts)
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(experts, generator=g)[:top] for _ in range(tokens)]).flatten()
    check(lambda e: torch.sort(e, stable=True), ids)
    check(lambda e: torch.histc(e.int(), bins=experts, min=0, max=experts - 1), ids,
          ref=lambda e: histc_as_cuda(e.int(), experts, 0, experts - 1))
    check(lambda e: torch.bincount(e, minlength=experts), ids)
    counts = torch.bincount(ids, minlength=experts).tolist()
    x, w = bf(tokens * top, 32, seed=seed), bf(experts, 32, 40, seed=seed + 1)
    check(lambda a, b, o: torch._grouped_mm(a, b, offs=o), x, w, offsets(counts))
    out = bf(tokens, 40, seed=seed + 2)
    check(lambda o, i, s: o.index_add(0, i, s), out, ids // experts % tokens, bf(tokens * top, 40, seed=seed + 3))


# ----------------------------------------------------------------------------------------------- models
MOE_FAMILIES = ["mixtral", "qwen3_moe", "deepseek_v3"]


@pytest.mark.parametrize("name", MOE_FAMILIES)
def test_moe_forward_in_strict_mode(name):
    """Router top-k, the experts' sort / histc / grouped matmul and the un-permute, all on ttnn:0."""
    from ttnn_eager.tools import models
    model, fam = models.build(name)
    with ttnn_eager.strict():
        r = models.compare_forward(model, fam)
    assert r["pearson"] >= 0.999 and r["fallbacks"] == {}, r


@pytest.mark.parametrize("cache", ["dynamic", "static"])
@pytest.mark.parametrize("name", MOE_FAMILIES)
def test_moe_greedy_generate_equals_the_cpu(name, cache, restore_config):
    """float32 storage, exact float32 arithmetic in the shadow (as tests/test_generation.py's families):
    the CPU's tokens, strict mode, both caches."""
    from ttnn_eager.tools import models
    ttnn_eager.configure(shadow_numerics="exact", float32_storage="float32")
    model, _ = models.build(name)
    ids = models.prompt_ids(model.config.vocab_size)
    r = models.compare_generate(model, ids, max_new_tokens=8, cache=cache, strict=True)
    assert r["new_tokens"] == 8 and r["exact"], (r["tokens"], r["cpu_tokens"])
    assert r["totals"]["fallbacks"] == 0 and r["min_step_logits_pearson"] > 0.99999


def test_switch_transformers_forward():
    """A tensor used as a dict key (f"expert_{idx}") and a column of nonzero() as an index: Switch
    Transformers runs (its expert loop's nonzero / where are data-dependent: on the fallback, counted)."""
    import copy
    import transformers
    cfg = transformers.SwitchTransformersConfig(
        vocab_size=1024, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
        num_experts=4, expert_capacity=64, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1,
        decoder_start_token_id=0)
    torch.manual_seed(0)
    model = transformers.SwitchTransformersForConditionalGeneration(cfg).eval()
    ids, dec = ints(2, 12, lo=3, hi=1000), ints(2, 5, lo=3, hi=1000, seed=1)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = model(input_ids=ids, decoder_input_ids=dec).logits
        dev = copy.deepcopy(model).to(DEV)
        out = dev(input_ids=ids.to(DEV), decoder_input_ids=dec.to(DEV)).logits.cpu()
    assert pcc(out, ref) >= 0.999
