"""Dispatch: strict mode, the CPU fallback, stats, generated docs."""
import warnings

import pytest
import torch

import ttnn_eager
from ttnn_eager.tools import docs

DEV = "ttnn:0"


def test_fallback_runs_on_cpu_warns_once_and_counts():
    x = torch.rand(3, 5) + 0.5
    d = x.to(DEV)
    ref = torch.cumprod(x.to(torch.bfloat16).float(), dim=1)
    ttnn_eager.reset_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [torch.cumprod(d, dim=1) for _ in range(3)]
    named = [w for w in caught if "aten.cumprod.default" in str(w.message)]
    assert len(named) <= 1  # once per process: an earlier test may have warned already
    assert ttnn_eager.stats()["fallbacks"] == 3
    for o in outs:
        assert o.device == torch.device(DEV)
        assert torch.allclose(o.cpu(), ref, rtol=2e-2)


def test_fallback_keeps_in_place_semantics():
    x = torch.rand(4, 6)
    d = x.to(DEV)
    same = torch.ops.aten.cumprod_(d, 1)
    assert same is d
    assert torch.allclose(d.cpu(), torch.cumprod(x.to(torch.bfloat16).float(), 1), rtol=2e-2)


def test_strict_mode_raises_naming_the_op():
    d = torch.rand(3, 5).to(DEV)
    with ttnn_eager.strict(), pytest.raises(ttnn_eager.FallbackError, match=r"aten\.cumprod\.default"):
        torch.cumprod(d, dim=1)
    torch.cumprod(d, dim=1)  # outside the block: falls back again


def test_strict_mode_from_environment():
    from conftest import run_python
    r = run_python("import torch, ttnn_eager\nd = torch.rand(3).to('ttnn:0')\ntry:\n    torch.cumprod(d, 0)\n"
                   "except ttnn_eager.FallbackError as e:\n    print('raised', e)\n", env={"TTNN_EAGER_STRICT": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("raised") and "aten.cumprod" in r.stdout


def test_stats_count_and_reset():
    ttnn_eager.reset_stats()
    assert set(ttnn_eager.stats().values()) == {0}
    x = torch.randn(2, 40).to(DEV)
    y = (x * 2).sum()
    y.item()
    s = ttnn_eager.stats()
    assert s["host_to_device"] == 1 and s["device_to_host"] == 1
    assert s["aten_ops"] >= 4 and s["ttnn_ops"] >= 2


def test_in_place_and_out_variants_match_cpu():
    x = torch.randn(3, 40)
    d = x.to(DEV)
    alias = d.detach()  # shares the device tensor: sees in-place updates
    d.add_(1.0).mul_(2.0)
    ref = (x.to(torch.bfloat16).float() + 1) * 2
    assert torch.allclose(d.cpu(), ref, atol=0.05) and torch.equal(alias.cpu(), d.cpu())
    out = torch.empty(3, 40, device=DEV)
    torch.add(d, d, out=out)
    assert torch.allclose(out.cpu(), 2 * d.cpu(), atol=0.05)


def test_out_variants_of_unary_ops_run_their_lowering():
    """tanh.out and the other unary .out overloads are their .default lowering and a write (they ran on the
    CPU fallback: the out= argument made their arguments differ from .default's); out= keeps PyTorch's
    casting rule (a float result into an integer out= tensor raises its error)."""
    x = torch.rand(4, 40) * 0.9
    d = x.to(DEV)
    with ttnn_eager.record_ops() as rec:
        for f in (torch.tanh, torch.atanh, torch.log1p, torch.erfinv, torch.exp):
            out = torch.empty(4, 40, device=DEV)
            assert f(d, out=out) is out
            assert torch.allclose(out.cpu(), f(x), rtol=0.02, atol=0.02), f.__name__
    assert not rec.fallbacks
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.tanh(d, out=torch.empty(4, 40, dtype=torch.long, device=DEV))


def test_an_in_place_op_whose_functional_is_the_default_overload_runs_on_the_device():
    """floor_divide_.Tensor's functional is floor_divide.default (DAB-DETR's position embedding): lowered, so
    the in-place op is that lowering and a write, not the CPU fallback; an overload with other arguments
    (bernoulli_.float against bernoulli.default) is not taken for it."""
    from ttnn_eager.core import dispatch
    x, y = torch.arange(-20, 20).float(), torch.full((40,), 3.0)
    d = x.to(DEV)
    with ttnn_eager.record_ops() as rec:
        d.floor_divide_(y.to(DEV))
    assert not rec.fallbacks and torch.equal(d.cpu(), x.floor_divide_(y))
    assert dispatch.functional_of(torch.ops.aten.bernoulli_.float) is None


def test_ops_doc_is_current():
    assert docs.ops_md() == open(f"{docs.DOCS}/ops.md").read(), "docs/ops.md is stale: run `ttnn-eager docs`"


def test_bert_checklist_doc_is_current():
    """docs/bert.md (written from 24-layer bert-large forwards) against the same counts from a 1- and a 2-layer
    forward (docs.bert_inventories_by_layers): a stale doc, or a count not linear in the layers, fails."""
    inventories = docs.bert_inventories_by_layers(24)
    assert all(not inv["fallbacks"] for inv in inventories.values())
    assert docs.bert_md(inventories) == open(f"{docs.DOCS}/bert.md").read(), \
        "docs/bert.md is stale: run `ttnn-eager docs`"


def test_in_place_writes_through_reshaped_views_reach_the_base():
    x = torch.zeros(3, 4).to(DEV)
    ref = torch.zeros(3, 4)
    for t in (x, ref):
        t[0].add_(1)
        t.view(12)[5:].add_(2)
        t.t().mul_(2)
    assert torch.equal(x.cpu(), ref)
    x.detach().add_(1)  # same-shape alias: shares the device tensor, so the write is seen by both
    assert torch.equal(x.cpu(), ref + 1)


# ----------------------------------------------------------------------------------------------- fast paths
_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool]


def _operand(dtype, shape, negative=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    v = torch.randint(-6 if negative else 0, 7, shape, generator=g)
    return (v % 2).bool() if dtype == torch.bool else v.to(dtype)


@pytest.mark.parametrize("op", [torch.add, torch.sub, torch.mul])
def test_mixed_dtype_operands_promote_like_pytorch(op):
    """Every pairing of operand dtypes (integers with and without negative values, so both uint32 and int32
    storage meet floats) gives PyTorch's result dtype and exact values: the inline argument path may only
    skip work when the operands already share a device dtype."""
    for i, a_dtype in enumerate(_DTYPES):
        for j, b_dtype in enumerate(_DTYPES):
            if op is torch.sub and torch.bool in (a_dtype, b_dtype):
                continue  # PyTorch refuses bool subtraction
            for negative in (False, True):
                a = _operand(a_dtype, (3, 5), negative, seed=i)
                b = _operand(b_dtype, (5,), negative, seed=10 + j)
                want = op(a, b)
                got = op(a.to(DEV), b.to(DEV))
                assert got.dtype == want.dtype, (op, a_dtype, b_dtype)
                assert torch.equal(got.cpu(), want), (op, a_dtype, b_dtype, negative)


def test_cached_type_promotion_matches_torch_result_type():
    from ttnn_eager.device import api as api
    from ttnn_eager.lowerings._common import result_dtype
    handles = {(dt, zero_dim): api.Handle(None, None, dt, () if zero_dim else (2,), 0)
               for dt in _DTYPES + [torch.float16] for zero_dim in (False, True)}
    probes = {k: torch.zeros(() if k[1] else (2,), dtype=k[0]) for k in handles}
    scalars = [True, 3, -2, 2.5]
    for ka, ha in handles.items():
        for kb, hb in handles.items():
            assert result_dtype(ha, hb) == torch.result_type(probes[ka], probes[kb]), (ka, kb)
        for s in scalars:
            assert result_dtype(ha, s) == torch.result_type(probes[ka], s), (ka, s)
            assert result_dtype(s, ha) == torch.result_type(s, probes[ka]), (s, ka)


def test_fallback_warning_points_at_the_callers_line():
    d = torch.rand(3, 4).to(DEV)
    from ttnn_eager.core import dispatch
    dispatch._warned.discard(torch.ops.aten.cumprod.default)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cumprod(d, dim=1)
    named = [w for w in caught if "aten.cumprod.default" in str(w.message)]
    assert len(named) == 1 and named[0].filename == __file__


def test_shadows_off_gives_unknown_values_never_wrong_ones():
    """device_api.shadows_off (benchmarks' hardware-like mode) must not turn into silent zeros: a value
    computed inside is unknown, downloading it raises, and so does anything computed from it later."""
    from ttnn_eager.device import api as api
    x = torch.rand(4, 32).to(DEV)
    with api.shadows_off():
        y = torch.nn.functional.gelu(x) + 1
        uploaded = torch.arange(4.0).to(DEV)  # an upload's value is known
    assert torch.equal(uploaded.cpu(), torch.arange(4.0))
    z = y * 2  # shadow execution is back on, but y's value is unknown
    for t in (y, z):
        with pytest.raises(RuntimeError, match="unknown"):
            t.cpu()
    assert torch.allclose((x * 2).cpu(), x.cpu() * 2)  # values made outside are unaffected


def test_whole_ops_reach_the_backend_directly_and_dispatch_modes_still_see_them():
    """linear / layer_norm / sdpa go from their autograd kernel straight to the backend (no second trip
    through PyTorch's dispatcher) -- unless a TorchDispatchMode is active, which must see them as usual."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from ttnn_eager import counters

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func)
            return func(*args, **(kwargs or {}))

    x, w, b = torch.rand(4, 64) - 0.5, torch.rand(32, 64) - 0.5, torch.rand(32)
    ref = torch.nn.functional.linear(*(t.to(torch.bfloat16).float() for t in (x, w, b)))
    d = [t.to(DEV) for t in (x, w, b)]
    with torch.no_grad():
        ttnn_eager.reset_stats()
        direct = torch.nn.functional.linear(*d)
        assert counters.aten_by_op() == {torch.ops.aten.linear.default: 1}
        with Seen() as mode:
            seen = torch.nn.functional.linear(*d)
    assert mode.ops == [torch.ops.aten.linear.default]
    for out in (direct, seen):
        assert (out.cpu() - ref).abs().max() < 0.05


def test_allowlisted_decompositions_run_on_the_device_not_the_fallback():
    """PyTorch's decompositions (decompositions.ALLOWLIST) turn unlowered ops into lowered ones: strict mode
    allows them, and the values are PyTorch's."""
    from ttnn_eager.core import decompositions
    x = torch.randn(3, 40).to(torch.bfloat16).float()
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        y = torch.nn.functional.leaky_relu(x.to("ttnn:0"), 0.1)
        z = torch.nn.functional.hardtanh(x.to("ttnn:0"), -0.5, 0.5)
    assert torch.ops.aten.leaky_relu.default in decompositions.table()
    assert {"aten.leaky_relu.default", "aten.where.self", "aten.clamp.default"} <= set(rec.aten)
    assert rec.fallbacks == {}
    torch.testing.assert_close(y.cpu(), torch.nn.functional.leaky_relu(x, 0.1), atol=0.02, rtol=0.02)
    torch.testing.assert_close(z.cpu(), torch.nn.functional.hardtanh(x, -0.5, 0.5), atol=0.01, rtol=0.01)


def test_weight_norm_runs_on_the_device():
    """torch.nn.utils.parametrizations.weight_norm (wav2vec2-style positional convolutions, every forward):
    _weight_norm_interface and norm decompose into lowered ops (issue 23's zoo found them on the fallback)."""
    torch.manual_seed(0)
    for d in (0, 1, -1):
        conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(8, 16, 5), dim=d)
        g, v = conv.parametrizations.weight.original0.detach(), conv.parametrizations.weight.original1.detach()
        ref = torch._weight_norm(v, g, d)
        with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
            out = torch._weight_norm(v.to("ttnn:0"), g.to("ttnn:0"), d)
        assert rec.fallbacks == {} and "aten.linalg_vector_norm.default" in rec.aten
        assert out.shape == ref.shape and out.dtype == ref.dtype
        torch.testing.assert_close(out.cpu(), ref, atol=0.01, rtol=0.01)
    x = torch.randn(3, 40)
    with ttnn_eager.strict():
        for args in [(), (2, 1, True), (1, 0)]:
            torch.testing.assert_close(torch.norm(x.to("ttnn:0"), *args).cpu(), torch.norm(x, *args), rtol=0.01,
                                       atol=0.02)


def test_fallback_writes_lists_written_in_place_back_through_views():
    """An op that writes a list of tensors in place and returns nothing (_foreach_copy_, on the CPU fallback)
    writes each back, into views too (FSDP2's copy into split views of a flat buffer): o was left zero."""
    for dev in ("cpu", "ttnn:0"):
        o = torch.zeros(16).to(dev)
        a, b = torch.ones(4).to(dev), torch.full((4,), 2.0).to(dev)
        torch._foreach_copy_(torch.split(o.narrow(0, 8, 8), [4, 4]), [a, b])
        if dev == "cpu":
            want = o
    assert torch.equal(o.cpu(), want)
    assert float(want.sum()) == 12.0


def test_factories_asked_for_another_device_give_it_as_pytorch_does():
    """zeros_like(x, device="cpu") of a ttnn tensor is a CPU tensor (it was made on ttnn:0), counted as the
    CPU's work; without device= it stays on the device."""
    x = torch.randn(3, 4).to(DEV)
    ttnn_eager.reset_stats()
    for make, want in ((lambda: torch.zeros_like(x, device="cpu"), torch.zeros(3, 4)),
                       (lambda: torch.full_like(x, 3.0, device="cpu"), torch.full((3, 4), 3.0)),
                       (lambda: x.new_ones((2, 2), device="cpu"), torch.ones(2, 2))):
        got = make()
        assert got.device.type == "cpu" and torch.equal(got, want)
    assert ttnn_eager.stats()["fallbacks"] == 3
    assert torch.zeros_like(x).device == torch.device(DEV)
