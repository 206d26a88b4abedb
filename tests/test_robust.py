"""Issue 11 items 3-6: inputs that used to kill the process or raise from inside the backend, torch.save /
torch.load of device tensors, and ttnn's log lines kept off the terminal.

Every case is compared with PyTorch on the CPU: the same result (bfloat16 tolerance) or the same exception
type. Cases that once killed the process (a signal inside ttnn) run in a fresh interpreter
(conftest.run_python), which must exit normally."""
import io
import math
import textwrap

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils._pytree import tree_flatten

import ttnn_eager

from conftest import covers, run_python

DEV = "ttnn:0"
aten = torch.ops.aten


def same(fn, *inputs, atol=0.05, rtol=0.02):
    """fn on ttnn:0 gives the CPU's result (shape, dtype, values within bfloat16 tolerance) or raises the
    CPU's exception type."""
    try:
        ref = fn(*inputs)
    except Exception as e:  # noqa: BLE001 - PyTorch's exception is the specification
        with pytest.raises(type(e)):
            fn(*[x.to(DEV) if isinstance(x, torch.Tensor) else x for x in inputs])
        return e
    out = fn(*[x.to(DEV) if isinstance(x, torch.Tensor) else x for x in inputs])
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.device.type == "ttnn" and o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype, o.shape, r.shape)
        got = o.cpu()
        if r.dtype.is_floating_point:
            scale = max(r.abs().max().item(), 1.0) if r.numel() and not r.isnan().all() else 1.0
            assert torch.allclose(got, r, atol=atol * scale, rtol=rtol, equal_nan=True), (got, r)
        else:
            assert torch.equal(got, r), (got, r)
    return out


def bf(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(torch.bfloat16).float()


# ----------------------------------------------------------------------------------------------- the listed bugs
def test_logical_not_of_floats_and_integers():
    same(torch.logical_not, torch.tensor([0.0, 1.5, -2.0, 0.0]))
    same(torch.logical_not, torch.tensor([0, 3, -1]))
    same(lambda a, b: torch.logical_and(a, b), torch.tensor([0.0, 1.0, 2.0]), torch.tensor([1.0, 0.0, 3.0]))
    same(lambda a, b: torch.logical_or(a, b), torch.tensor([0, 1, -2]), torch.tensor([0, 0, 1]))
    same(torch.bitwise_not, torch.tensor([1.0, 2.0]))  # PyTorch's NotImplementedError, before ttnn


def test_reductions_of_a_0d_tensor():
    x = torch.tensor(2.5)
    same(torch.amax, x)
    same(torch.amin, x)
    same(lambda t: (t.amax(0), t.amax(-1, keepdim=True), t.sum(0), t.mean(), t.amin(())), x)
    same(lambda t: t.amax(1), x)  # IndexError, as PyTorch
    same(lambda t: (t.all(), t.any(0)), torch.tensor(True))


def test_a_0d_tensor_and_a_one_element_vector_broadcast_to_the_vector():
    """0-d op [1] is [1] in PyTorch (D-FINE's weighting function concatenates such products; a 0-d result
    made torch.cat refuse it)."""
    a, b = torch.tensor(0.5), torch.tensor([4.0])
    same(lambda x, y: (x * y, y * x, x + y, torch.where(x > 0, x, y), x * x, x + 1), a, b)
    same(lambda x, y: torch.cat([-(abs(x) * abs(y)), torch.zeros_like(x[None])]), a, b)


@pytest.mark.parametrize("a,b", [((5,), (2, 5, 3)), ((4, 5), (2, 5, 3)), ((3, 4, 5), (2, 1, 5, 3)),
                                 ((3, 4, 5), (1, 5, 3)), ((4, 5), (1, 5, 3)), ((2, 4, 5), (5,)),
                                 ((2, 1, 4, 5), (3, 5, 2)), ((), (3,)), ((2, 3), (4, 5))])
def test_matmul_broadcasts_the_batch_of_either_operand(a, b):
    same(torch.matmul, bf(*a, seed=1), bf(*b, seed=2))


def test_linear_with_broadcasting_bias_and_vector_weight():
    x, w = bf(2, 3, 5, seed=1), bf(4, 5, seed=2)
    same(F.linear, x, w, bf(3, 4, seed=3))   # a bias that is not one row: added after the product
    same(F.linear, x, w, bf(1, seed=3))
    same(F.linear, x, w, torch.tensor(1.5))
    same(F.linear, x, bf(5, seed=4))          # a 1-D weight
    same(F.linear, bf(5, seed=5), w, bf(4, seed=6))
    same(F.linear, x, w, bf(5, 4, seed=3))   # does not broadcast: PyTorch's RuntimeError


def test_bmm_and_mm_check_their_shapes():
    same(torch.bmm, bf(2, 3, 4), bf(3, 4, 5))
    same(torch.mm, bf(2, 3, 4), bf(4, 5))
    same(torch.matmul, torch.tensor(2.0), torch.tensor(3.0))


def test_an_empty_tensor_is_never_typecast_by_ttnn():
    """A DynamicCache's empty key (bfloat16 on the device) cat with a float32-stored one (Llama training, the
    2nd step): the promotion typecast the empty part, and ttnn.typecast of a zero-size tensor kills the
    process (SIGFPE). Run in a child process, so that a regression fails this test, not the whole suite."""
    r = run_python(
        "import torch, ttnn_eager\n"
        "from ttnn_eager.core import layout\n"
        "from ttnn_eager.device import api\n"
        "e = api.upload(torch.empty(0), api.BFLOAT16, api.ROW_MAJOR, 0, torch.float32)\n"
        "f = api.upload(torch.randn(2, 1, 16, 32), api.FLOAT32, api.TILE, 0, torch.float32)\n"
        "out = layout.ensure_promoted([e, f])\n"
        "assert [h.tt_dtype for h in out] == [api.FLOAT32, api.FLOAT32], out\n"
        "assert tuple(out[0].shape) == (0,)\n"
        "print('ok')\n")
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stderr[-2000:])


def test_cat_and_stack_edge_cases():
    x = bf(3, 4)
    same(lambda a, e: torch.cat([e, a]), x, torch.empty(0))                 # legacy 1-D empty: skipped
    same(lambda a, e: torch.cat([e, a, e]), x, torch.empty(0, 4))
    same(lambda e: torch.cat([e, e]), torch.empty(0))
    same(lambda e: torch.cat([e, e], 1), torch.empty(2, 0))
    same(lambda a, i: torch.cat([i, a]), bf(3), torch.tensor([1, 2]))       # promoted to float
    same(lambda a: torch.cat([a, a]), torch.tensor(1.0))                    # 0-d: PyTorch's error
    same(lambda a, b: torch.cat([a, b]), bf(2, 3), bf(2, 4))                # sizes differ: PyTorch's error
    same(lambda a, b: torch.stack([a, b]), bf(2, 3), bf(2, 4))
    same(lambda a, b: torch.stack([a, b], 1), bf(2, 3), bf(2, 3, seed=1))


# ----------------------------------------------------------------------------------------------- zero-size rule
ZERO_SIZE = {
    "sum": lambda e: (e.sum(), e.sum(0), e.sum(1)),
    "mean": lambda e: e.mean(),
    "amax_all": lambda e: e.amax(),                # PyTorch: RuntimeError (no identity)
    "amax_dim": lambda e: e.amax(1),
    "all_any": lambda e: (e.bool().all(), e.bool().any(0)),
    "cumsum": lambda e: e.cumsum(0),
    "softmax": lambda e: e.softmax(-1),
    "layer_norm": lambda e: F.layer_norm(e, (3,)),
    "add": lambda e: (e + 1, e * e, e - torch.ones(3, device=e.device)),
    "add_": lambda e: e.clone().add_(2),
    "where": lambda e: torch.where(e > 0, e, 0.0),
    "mm": lambda e: e.t() @ e,                     # [3,0] @ [0,3]: zeros, computed without ttnn
    "linear": lambda e: F.linear(e.t(), torch.ones(2, 0, device=e.device), torch.ones(2, device=e.device)),
    "to": lambda e: (e.to(torch.bool), e.to(torch.int32), e.long()),
    "index": lambda e: e[torch.empty(0, dtype=torch.long, device=e.device)],
    "embedding": lambda e: F.embedding(torch.empty(0, 2, dtype=torch.long, device=e.device), torch.ones(4, 3, device=e.device)),
    "gather": lambda e: torch.gather(e, 0, torch.empty(0, 3, dtype=torch.long, device=e.device)),
    "views": lambda e: (e.view(3, 0), e.reshape(-1), e.transpose(0, 1), e.unsqueeze(0), e[:, 1:]),
}


@pytest.mark.parametrize("name", sorted(ZERO_SIZE))
def test_zero_size_inputs_give_pytorchs_result(name):
    same(ZERO_SIZE[name], torch.empty(0, 3))


def test_zero_size_crash_cases_in_a_subprocess():
    """Every crash-prone zero-size / empty-index call, in a fresh interpreter that must exit normally (the
    first, torch.gather with an empty index, used to kill the process with SIGFPE)."""
    code = textwrap.dedent("""
        import torch, torch.nn.functional as F, ttnn_eager
        D = "ttnn:0"
        e, x = torch.empty(0, 3), torch.randn(4, 3)
        idx = torch.empty(0, dtype=torch.long)
        calls = [
            lambda: torch.gather(x.to(D), 0, idx.to(D)),  # issue 11: SIGFPE in ttnn's typecast
            lambda: torch.gather(x.to(D), 0, idx.reshape(0, 1).expand(0, 3).to(D)),
            lambda: torch.gather(x.to(D), 1, torch.empty(4, 0, dtype=torch.long).to(D)),
            lambda: x.to(D)[idx.to(D)],
            lambda: F.embedding(idx.to(D), x.to(D)),
            lambda: e.to(D).sum(), lambda: e.to(D).amax(1), lambda: e.to(D).mean(0),
            lambda: e.to(D).softmax(-1), lambda: F.layer_norm(e.to(D), (3,)),
            lambda: e.to(D).t() @ e.to(D), lambda: e.to(D) @ x.t().to(D),
            lambda: e.to(D).to(torch.bool), lambda: e.to(D).long() + 1, lambda: e.to(D).cumsum(0),
            lambda: torch.cat([e.to(D), x.to(D)]), lambda: torch.stack([e.to(D), e.to(D)]),
            lambda: torch.where(e.to(D) > 0, e.to(D), e.to(D)), lambda: e.to(D).clone().mul_(3),
            lambda: torch.zeros(0, 5, device=D) + 1, lambda: torch.arange(0, device=D) * 2,
        ]
        for i, call in enumerate(calls):
            try:
                out = call()
                if isinstance(out, torch.Tensor):
                    out.cpu()
            except Exception as err:  # a Python error is fine; a signal is not
                print(i, type(err).__name__, err)
        print("survived", len(calls))
    """)
    r = run_python(code)
    assert r.returncode == 0 and "survived 21" in r.stdout, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])


# ----------------------------------------------------------------------------------------------- save / load
def _roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)  # PyTorch's default: weights_only=True


@pytest.mark.parametrize("map_location", [None, "cpu", "ttnn:0", torch.device("ttnn:0")])
def test_save_and_load_a_device_tensor(map_location):
    t = bf(3, 33).to(DEV)
    r = _roundtrip(t, map_location=map_location)
    expected = "ttnn" if map_location is None or "ttnn" in str(map_location) else "cpu"
    assert r.device.type == expected and r.dtype == t.dtype
    assert torch.equal(r.cpu(), t.cpu())
    i = _roundtrip(torch.tensor([[1, -2], [3, 4]]).to(DEV), map_location=map_location)
    assert torch.equal(i.cpu(), torch.tensor([[1, -2], [3, 4]]))


def test_save_and_load_a_state_dict_into_a_model_on_the_device():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.LayerNorm(4)).to(DEV)
    x = bf(2, 8)
    expected = model(x.to(DEV)).cpu()
    for location in ("cpu", "ttnn:0"):
        state = _roundtrip(model.state_dict(), map_location=location)
        assert all(v.device.type == location.split(":")[0] for v in state.values())
        torch.manual_seed(1)
        other = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.LayerNorm(4)).to(DEV)
        assert not torch.equal(other[0].weight.cpu(), model[0].weight.cpu())
        other.load_state_dict(state)
        assert other[0].weight.device.type == "ttnn"
        assert torch.equal(other(x.to(DEV)).cpu(), expected)
    param = _roundtrip(torch.nn.Parameter(bf(3)).to(DEV).detach().requires_grad_())
    assert param.requires_grad and param.device.type == "ttnn"


def test_deepcopy_of_a_model_on_the_device():
    import copy
    model = torch.nn.Linear(4, 3).to(DEV)
    clone = copy.deepcopy(model)
    assert isinstance(clone.weight, torch.nn.Parameter) and clone.weight.requires_grad
    assert clone.weight is not model.weight and torch.equal(clone.weight.cpu(), model.weight.cpu())
    with torch.no_grad():
        clone.weight.add_(1)
    assert not torch.equal(clone.weight.cpu(), model.weight.cpu())


# ----------------------------------------------------------------------------------------------- ttnn's logs
def test_ttnn_log_lines_stay_off_the_terminal_but_the_error_keeps_its_message():
    code = textwrap.dedent("""
        import os
        os.environ.pop("TT_LOGGER_LEVEL", None)  # the backend's default, not the one this test process inherited
        import torch, ttnn_eager
        from ttnn_eager.device import api as api
        from ttnn_eager.core import layout
        a = layout.to_device(torch.randn(4, 5), 0)
        b = layout.to_device(torch.randn(2, 5, 3), 0)
        try:
            api.run("matmul", a, b)   # ttnn's own validation: TT_FATAL, which ttnn also logs as `critical`
        except RuntimeError as err:
            print("raised:", str(err).splitlines()[0])
            assert "When in1 rank greater than in0 rank" in str(err)
        print(torch.ones(2, device="ttnn:0").cpu())
    """)
    r = run_python(code)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "raised: TT_FATAL" in r.stdout            # the exception carries ttnn's message
    printed = r.stderr + r.stdout.replace("raised: TT_FATAL", "")  # ttnn logs to stdout
    assert "critical" not in printed and "TT_FATAL" not in printed, printed[-2000:]


# ----------------------------------------------------------------------------------------------- DeBERTa-v2
def test_deberta_v2_padded_batch_is_finite_and_matches_the_cpu():
    """DeBERTa-v2 masks whole query rows of a padded sequence with torch.finfo(float32).min before a softmax.
    In bfloat16 that constant used to round to -inf (a row of -inf: NaN); it now saturates to bfloat16's
    largest finite value (layout.finite_constant) and the padded sequence matches the CPU."""
    from conftest import pcc
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.DebertaV2Config(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=256, vocab_size=1000, max_position_embeddings=64)
    model = transformers.DebertaV2Model(config).eval()
    ids = torch.randint(0, 1000, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask).last_hidden_state
        out = model.to(DEV)(input_ids=ids.to(DEV), attention_mask=mask.to(DEV)).last_hidden_state.cpu()
    assert torch.isfinite(ref).all() and torch.isfinite(out).all()
    for row in range(2):
        assert pcc(out[row], ref[row]) > 0.999, (row, pcc(out[row], ref[row]))


def test_constants_beyond_bfloat16_range_stay_finite():
    big = torch.finfo(torch.float32).min
    x, m = bf(2, 5), torch.tensor([[True] * 5, [False, True, False, True, False]])
    out = x.to(DEV).masked_fill(m.to(DEV), big)
    assert torch.isfinite(out.cpu()).all() and (out.cpu()[m] < -3e38).all()
    assert torch.isfinite(torch.softmax(out, -1).cpu()).all()
    assert torch.isfinite(torch.full((3,), big, device=DEV).cpu()).all()
    assert torch.isfinite(torch.where(m.to(DEV), big, x.to(DEV)).cpu()).all()
    assert torch.isinf((x.to(DEV) * 0 + float("-inf")).cpu()).all()  # a true infinity stays one
    host = torch.tensor([big, -big, 1.0, float("inf"), float("-inf"), float("nan")])
    up = host.to(DEV).cpu()  # a mask made on the host, uploaded
    assert torch.isfinite(up[:3]).all() and up[0] < -3e38 and up[1] > 3e38
    assert up[3] == float("inf") and up[4] == float("-inf") and up[5].isnan()


# ----------------------------------------------------------------------------------------------- edge shapes
# Zero-size, 0-d and sizes 1, 31, 33 (one either side of a tile) for every lowering: a result equal to the
# CPU's or PyTorch's exception type, never a signal. The property runs in a fresh interpreter
# (test_edge_shapes_in_a_subprocess), which must exit normally and must have reached every lowering.
EDGE_SHAPES = [(), (0,), (1,), (31,), (33,), (0, 3), (3, 0), (1, 33), (31, 1), (33, 31), (2, 0, 33), (1, 1, 31),
               (2, 31, 33)]


def _last(shape):
    return shape[-1] if shape else 1


def _unit_lower_solve(x):
    n = x.shape[-1]
    lower = (x.unsqueeze(-1) * x.unsqueeze(-2) * 0.01).tril(-1) + torch.eye(n, device=x.device)
    return torch.linalg.solve_triangular(lower, x.unsqueeze(-1), upper=False, unitriangular=True)


EDGE_OPS = {  # name -> function of one tensor x (float) and an integer tensor i of the same shape
    "logs": lambda x, i: (torch.log2(x.abs() + 1), torch.log10(x.abs() + 1), torch.nan_to_num(torch.log(x)),
                          torch.nan_to_num(x / 0, posinf=7.0)),
    "buckets": lambda x, i: (torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0], device=x.device)),
                             torch.unique(i), torch.masked_select(x, x > 0), torch.unique_consecutive(i)),
    "cumulative_extremes": lambda x, i: (*torch.cummax(x, 0), *torch.cummin(x, -1), *torch.cummax(i, -1),
                                         *torch.cummin(i > 0, 0)),
    "cdist": lambda x, i: (torch.cdist(x, x), torch.cdist(x, i.float()).argmin(-1)),
    "moments": lambda x, i: (*torch.var_mean(x, -1), *torch.std_mean(x)),
    "unfold": lambda x, i: x.unfold(-1, 2, 1),
    "rot90": lambda x, i: torch.rot90(x, 1, (0, -1)),
    "prod": lambda x, i: (x.prod(-1), (i % 3).prod(0)),
    "solve": lambda x, i: _unit_lower_solve(x),
    "checks": lambda x, i: (torch.isnan(x), torch.isinf(x), torch.isnan(i), aten.lift_fresh_copy(x),
                            x * torch.equal(x, x + 0), i * torch.equal(i, i * 2), aten.mul.Scalar(x, 0.5)),
    "complex": lambda x, i: (torch.view_as_real(torch.polar(x.abs(), x)), torch.view_as_real(torch.complex(x, -x)),
                             torch.view_as_complex(torch.stack([x, i.float()], -1)).abs(),
                             torch.view_as_real(torch.view_as_complex(torch.stack([x, x], -1)) * (1 + 2j))),
    "fft": lambda x, i: (torch.view_as_real(torch.fft.rfft(x)), torch.view_as_real(torch.fft.fft(i)),
                         torch.fft.irfft(torch.fft.fft(x), x.shape[-1]), torch.fft.fftn(x).real),
    "fused": lambda x, i: _fused_edges(x),
    "fused_vision": lambda x, i: _fused_vision_edges(x),
    "dtype_views": lambda x, i: (x.view(torch.int32), x.bfloat16().view(torch.uint8),
                                 (x.view(torch.uint8) + 0).view(torch.float32) * 2),
    "unary": lambda x, i: (torch.tanh(x), torch.relu(x), torch.sigmoid(x), torch.exp(x), torch.log(x.abs() + 1),
                           torch.sqrt(x.abs()), torch.rsqrt(x.abs() + 1), torch.erf(x), F.silu(x), F.gelu(x),
                           F.gelu(x, approximate="tanh"), torch.reciprocal(x.abs() + 1), -x, x.abs(), -i, i.abs(),
                           x ** 2, x.abs() ** 1.5, x.clamp(-0.5, 0.5), x.clamp_min(0.1), x.clamp_max(0.1),
                           i.clamp(-3, 3), torch.exp(i)),
    "binary": lambda x, i: (x + x, x - 1, 2 - x, x * x, x / (x.abs() + 1), x / 4, i // 3, i / 2,
                            torch.div(i, 3, rounding_mode="trunc"), torch.add(x, x, alpha=2), x + i,
                            torch.rsub(x, x), aten.rsub.Scalar(x, 1.0)),
    "compare": lambda x, i: (x == x, x != 0, x > 0, x >= 0, x < 0, x <= 0, i == 3, i > 0, aten.eq.Tensor(x, x),
                             aten.ne.Tensor(x, x), aten.gt.Tensor(x, x), aten.ge.Tensor(x, x),
                             aten.lt.Tensor(x, x), aten.le.Tensor(x, x)),
    "logic": lambda x, i: ((x > 0) & (x < 1), (x > 0) | (x < -1), ~(x > 0), torch.logical_not(x),
                           torch.logical_and(x, i), torch.logical_or(x, i), (i & 3), (i | 1), aten.bitwise_and.Tensor(i, i),
                           aten.bitwise_or.Tensor(i, i), ~i),
    "select": lambda x, i: (torch.where(x > 0, x, -x), torch.where(x > 0, 1.0, x), torch.where(x > 0, x, 0.0),
                            torch.where(x > 0, 1.0, 0.0), x.masked_fill(x > 0, -1.0),
                            aten.masked_fill.Tensor(x, x > 0, torch.tensor(2.0)), i.masked_fill(i > 0, 7),
                            torch.where(i > 0, i, -i)),
    "reduce_all": lambda x, i: (x.sum(), x.mean(), x.amax(), x.amin(), (x > 0).all(), (x > 0).any(), i.sum(),
                                torch.linalg.vector_norm(x), torch.linalg.vector_norm(x, 1),
                                torch.linalg.vector_norm(x, math.inf)),
    "reduce_dim": lambda x, i: (x.sum(-1), x.mean(-1, keepdim=True), x.amax(0), x.amin(-1), (x > 0).all(-1),
                                (x > 0).any(0), aten.all.dims(x > 0, [0]), aten.any.dims(x > 0, [0]), x.cumsum(0),
                                i.cumsum(-1), torch.linalg.vector_norm(x, dim=-1)),
    "views": lambda x, i: (x.view(-1), x.reshape(-1, 1), aten._unsafe_view(x, [-1]), x.unsqueeze(0).squeeze(0),
                           x.squeeze(), aten.squeeze.dims(x, [0]), x.permute(*reversed(range(x.dim()))),
                           x.transpose(0, -1), x.t() if x.dim() <= 2 else x, x.clone(), x.contiguous(), x.detach(),
                           aten.alias(x), aten.lift_fresh(x), x.expand(2, *x.shape), x[..., :1], x[..., 1:],
                           x.select(0, 0) if x.dim() else x, *x.split(2, -1), *x.split([_last(x.shape)], -1),
                           *x.unbind(0)[:2], torch.cat([x, x], -1), torch.stack([x, x], 0)),
    "matmul": lambda x, i: (x @ torch.ones(_last(x.shape), 3, device=x.device),
                            F.linear(x, torch.ones(2, _last(x.shape), device=x.device), torch.ones(2, device=x.device)),
                            torch.mm(x.reshape(-1, _last(x.shape)), torch.ones(_last(x.shape), 2, device=x.device)),
                            torch.bmm(x.reshape(1, -1, _last(x.shape)), torch.ones(1, _last(x.shape), 2, device=x.device)),
                            torch.addmm(torch.ones(2, device=x.device), x.reshape(-1, _last(x.shape)),
                                        torch.ones(_last(x.shape), 2, device=x.device))),
    "scalar_overloads": lambda x, i: (aten.add.Scalar(x, 2), aten.sub.Scalar(x, 1), aten.div.Scalar(x, 4),
                                      aten.div.Scalar_mode(x, 2, rounding_mode="floor"),
                                      x.clone().fill_(torch.tensor(2.0))),
    "whole_composites": lambda x, i: _inference(lambda: (
        x.reshape(-1), aten.contiguous.default(x), torch.softmax(x, -1), torch.softmax(x, -1, dtype=torch.float32),
        aten.where.ScalarSelf(x > 0, 1.0, x), aten.where.ScalarOther(x > 0, x, 0.0),
        aten.where.Scalar(x > 0, 1.0, 0.0))),
    "strided_factories": lambda x, i: (aten.empty_strided(x.shape, [1] * x.dim(), device=x.device).zero_(),
                                       torch.empty_permuted(x.shape, list(range(x.dim())), device=x.device).fill_(1),
                                       aten.new_empty_strided(x, x.shape, [1] * x.dim()).zero_(),
                                       torch.arange(1, x.numel() + 1, device=x.device),
                                       torch.arange(0, x.numel(), 2, device=x.device)),
    "norms": lambda x, i: (F.layer_norm(x, x.shape[-1:]), aten.native_layer_norm(x, x.shape[-1:], None, None, 1e-5),
                           torch.softmax(x, -1), aten._softmax(x, -1, False), aten._safe_softmax(x, -1)),
    "attention": lambda x, i: (F.scaled_dot_product_attention(*(x.reshape(1, 1, -1, _last(x.shape)),) * 3),),
    "indexing": lambda x, i: (F.embedding(i.abs() % 4, torch.ones(4, 3, device=x.device)),
                              torch.gather(x, -1, torch.zeros_like(i).abs()) if x.dim() else x,
                              torch.ones(4, 3, device=x.device)[i.abs() % 4]),
    "factories": lambda x, i: (torch.zeros_like(x), torch.ones_like(i), torch.full_like(x, 2.0), torch.empty_like(x).fill_(1),
                               x.new_zeros(x.shape), x.new_ones(x.shape), x.new_full(x.shape, 3), x.new_empty(x.shape).zero_(),
                               x.to(torch.int32), i.to(torch.float32), x.to(torch.bool), x.clone().copy_(x + 1), aten.copy(x, i),
                               torch.zeros(x.shape, device=x.device), torch.ones(x.shape, device=x.device),
                               torch.full(x.shape, 1.5, device=x.device), torch.arange(x.numel(), device=x.device),
                               torch.empty(x.shape, device=x.device).zero_(), torch.scalar_tensor(2.0, device=x.device),
                               x.sum().item() if x.numel() else 0.0),
    # the families added since (activations, generation's math and search, vision, training, writes)
    "math": lambda x, i: (F.elu(x), F.celu(x), F.selu(x), F.hardswish(x), F.hardsigmoid(x), F.mish(x), F.softplus(x),
                          F.hardshrink(x), F.softshrink(x), F.threshold(x, 0.1, 2.0), F.logsigmoid(x), torch.sign(x),
                          torch.log1p(x.abs()), torch.expm1(x), torch.xlogy(x.abs(), x.abs() + 1), torch.cos(x),
                          torch.sin(x), torch.minimum(x, -x), torch.maximum(x, -x), torch.logical_xor(x, i), i ^ 3,
                          torch.bitwise_xor(i, i), aten.floor_divide.Scalar(i, 3), torch.remainder(i, i.abs() + 1),
                          aten.remainder.Scalar(i, 3),
                          F.prelu(x, torch.full((1,), 0.25, device=x.device)), F.glu(x, -1) if x.dim() else x,
                          torch.tril(x) if x.dim() >= 2 else x, torch.triu(x, 1) if x.dim() >= 2 else x,
                          _inference(lambda: torch.log_softmax(x, -1)), aten.clamp_min.Tensor(x, -x.abs()),
                          aten.clamp_max.Tensor(x, x.abs())),
    "search": lambda x, i: _search(_ramp(x), i),
    "vision": lambda x, i: _vision(_image(x)),
    "norms2d": lambda x, i: _norms(_image(x)),
    "pads": lambda x, i: _pads(_image(x)),
    "upsample": lambda x, i: _upsample(_image(x)),
    "grid_sample": lambda x, i: _grid_sample(_image(x)),
    "training": lambda x, i: (aten.native_dropout(x, 0.0, True)[0],
                              aten.select_backward(x, [2, *x.shape], 0, 1),
                              aten.slice_backward(x, [*x.shape[:-1], _last(x.shape) + 2], -1, 1,
                                                  _last(x.shape) + 1, 1) if x.dim() else x,
                              aten.log_sigmoid_backward(x, x, aten.log_sigmoid_forward(x)[1]),  # (each device's own buffer)
                              *_losses(x.reshape(-1, _last(x.shape)) if x.dim() else x.reshape(1, 1), i)),
    "writes": lambda x, i: _writes(x, i),
    "moe": lambda x, i: _moe(x, i),
    "breadth": lambda x, i: _breadth(x, i),
    "hyperbolic": lambda x, i: (torch.atanh(x.tanh() * 0.9), torch.asinh(x * 30), torch.acosh(x.abs() + 1.5),
                                torch.atanh(i), torch.asinh(i), torch.acosh(i), torch.asinh(i > 0)),
}


def _breadth(x, i):
    """The single ops of issue 23 (tests/test_breadth.py): math, statistics, flips, value-dependent shapes."""
    d = -1 if x.dim() else 0
    return (torch.acos(x.tanh()), torch.erfinv(x.tanh() * 0.9), torch.floor(x), torch.round(x), torch.floor(i),
            torch.ceil(x), torch.ceil(i), aten._is_all_true(x > 0), x[x > 0], i[i > 0],
            torch.round(x, decimals=1), 2.0 ** x, torch.pow(x.abs() + 0.5, x), torch.clamp(x, -x.abs(), x.abs()),
            torch.logsumexp(x, d), torch.var(x, d), torch.std(x, correction=0), torch.flip(x, (d,)),
            torch.flip(i, (0,)), torch.nonzero(i), torch.repeat_interleave(i.flatten().abs() % 3),
            i[..., torch.zeros(1, dtype=torch.long, device=x.device)] if x.dim() and x.shape[-1] else i,
            x.scatter_reduce(-1, i.abs() % x.shape[-1], x, "mean", include_self=False) if x.dim() and x.shape[-1] else x)


def _moe(x, i):
    """A mixture-of-experts layer's routing ops (tests/test_moe.py): sort of ids, histc, bincount, grouped
    matmul by offsets, index_add."""
    ids = i.flatten().abs() % 4
    rows = ids.numel()
    offs = torch.bincount(ids, minlength=4).cumsum(0).to(torch.int32)
    a = (x.flatten()[:, None] * torch.ones(1, 32, device=x.device)).contiguous()
    w = torch.ones(4, 32, 8, device=x.device)
    return (*torch.sort(i, stable=True), *torch.sort(i > 0, descending=True, stable=True), torch.histc(x, 5, -1, 1),
            torch.histc(i.float(), 4, -3, 3), torch.bincount(ids), torch.bincount(ids, x.flatten().abs(), 4),
            torch._grouped_mm(a, w, offs=offs) if rows else a,
            x.index_add(0, ids % x.shape[0], x.flatten()[:rows, None].expand(rows, *x.shape[1:]) if x.dim() > 1 else
                        x.flatten()) if x.dim() and x.shape[0] else x)


def _image(x):
    """x as a one-channel image [1, 1, H, W] (its last dimension the width)."""
    return x.reshape(1, 1, -1, _last(x.shape)) if x.numel() else x.reshape(1, 1, 0, 1)


def _ramp(x):
    """x's shape, values distinct along the last dimension and exact in bfloat16 (no ties for search ops)."""
    n = max(_last(x.shape), 1)
    return (torch.arange(x.numel(), device=x.device) % n).reshape(x.shape).float() * 0.5 - 3


def _search(d, i):
    rows = d.dim() > 0 and _last(d.shape) > 0
    return (d.argmax(-1) if rows else d, d.argmin(-1) if rows else d, d.max() if d.numel() else d,
            d.min() if d.numel() else d, *(d.max(-1) if rows else (d,)), *(d.min(-1) if rows else (d,)),
            *(d.topk(1, -1) if rows else (d,)), *d.sort(-1, descending=True), *torch.sort(d, stable=True),
            torch.isin(i, i.flatten()[:3]), d.index_select(-1, torch.zeros(1, dtype=torch.long, device=d.device))
            if rows else d, torch.multinomial((d == d.amax(-1, keepdim=True)).float(), 1)
            if d.dim() in (1, 2) and rows else d)


def _vision(z):
    one = torch.ones(1, 1, 1, 1, device=z.device)
    return (F.conv2d(z, one), F.conv_transpose2d(z, one), F.conv_transpose2d(z, one, stride=2, dilation=2),
            F.conv_transpose2d(z.expand(-1, 2, -1, -1), one.expand(2, 1, 1, 1), groups=2), F.max_pool2d(z, 1), *F.max_pool2d(z, 1, return_indices=True),
            F.avg_pool2d(z, 1), aten._adaptive_avg_pool2d(z, [1, 1]), F.adaptive_max_pool2d(z, 1))


def _norms(z):
    stats = (torch.zeros(1, device=z.device), torch.ones(1, device=z.device))
    return (aten._native_batch_norm_legit_no_training(z, None, None, *stats, 0.1, 1e-5)[0],
            aten._native_batch_norm_legit.no_stats(z, None, None, True, 0.1, 1e-5)[0],
            aten._native_batch_norm_legit(z, None, None, *(s.clone() for s in stats), True, 0.1, 1e-5)[0],
            aten.native_batch_norm(z, None, None, *stats, False, 0.1, 1e-5)[0],
            F.group_norm(z, 1))


def _pads(z):
    return (F.pad(z, (1, 2)), aten.reflection_pad2d(z, [1, 1, 1, 1]), aten.replication_pad2d(z, [1, 1, 1, 1]),
            aten.reflection_pad1d(z[0], [1, 1]), aten.replication_pad1d(z[0], [1, 1]),
            aten.reflection_pad3d(z[None], [1, 1, 1, 1, 0, 0]), aten.replication_pad3d(z[None], [1, 1, 1, 1, 0, 0]))


def _upsample(z):
    h, w = z.shape[-2:]
    return (*_inference(lambda: (F.interpolate(z, scale_factor=2), F.interpolate(z[0], scale_factor=2),
                                 F.interpolate(z[None], scale_factor=2))),  # the .vec overloads arrive whole
            aten.upsample_nearest1d(z[0], [2 * w]),
            aten.upsample_nearest2d(z, [2 * h, 2 * w]), aten.upsample_nearest3d(z[None], [1, 2 * h, 2 * w]),
            aten.upsample_bilinear2d(z, [2 * h + 1, 2 * w], False), aten.upsample_bicubic2d(z, [h, 2 * w], True),
            aten._upsample_bilinear2d_aa(z, [max(h // 2, 1), 2 * w], False),
            aten._upsample_bicubic2d_aa(z, [h, max(w // 3, 1)], True),
            aten.upsample_linear1d(z[0], [2 * w + 1], False), torch.roll(z, 1, -1), torch.roll(z, (2, -1), (2, 3)),
            torch.roll(z, 3), F.unfold(z, 1), F.fold(z.reshape(1, 1, -1), (1, z.numel()), 1) if z.numel() else z)


def _grid_sample(z):
    """z sampled at positions made of its own values (many beyond [-1, 1]), every mode the lowering takes."""
    g = torch.stack([z[0, 0], -z[0, 0]], -1)[None] if z.numel() else torch.zeros(1, 0, 1, 2, device=z.device)
    return tuple(F.grid_sample(z, g, mode=m, padding_mode=p, align_corners=a)
                 for m, p, a in (("bilinear", "zeros", False), ("nearest", "border", True),
                                 ("bilinear", "reflection", True), ("nearest", "reflection", False),
                                 ("bicubic", "zeros", True), ("bicubic", "border", False),
                                 ("bicubic", "reflection", False)))


def _losses(x2, i):
    target = i.flatten()[:x2.shape[0]].abs() % max(x2.shape[1], 1)
    logp = _inference(lambda: torch.log_softmax(x2, -1))
    ids = i.flatten().abs() % 4
    return (F.nll_loss(logp, target) if x2.shape[1] and target.numel() == x2.shape[0] else x2,
            aten.nll_loss_backward(torch.ones((), device=x2.device), logp, target, None, 1, -100,
                                   torch.tensor(float(x2.shape[0]), device=x2.device))
            if x2.shape[1] and target.numel() == x2.shape[0] else x2,
            aten.embedding_dense_backward(torch.ones(ids.numel(), 3, device=x2.device), ids, 4, -1, False))


def _writes(x, i):
    y = x.clone()
    idx = torch.zeros(1, dtype=torch.long, device=x.device)
    if x.dim():
        y[i > 0] = 1.5
        if x.shape[0]:
            y[idx] = 2.0
            y.index_copy_(0, idx, x[:1] * 3)
            y = torch.index_copy(y, 0, idx, x[:1] * 4)
            y.index_fill_(0, idx, -1.0)
            y.index_fill_(0, idx, torch.tensor(-2.0, device=x.device))
            y.index_put_((idx,), x[:1], accumulate=True)
            y = aten._unsafe_index_put(y, [idx], x[:1])
        y.masked_scatter_(i > 0, x * 2)
        y[..., :1] = 0.5
    z = x.clone()
    ii = (i.abs() % max(_last(x.shape), 1)) if x.dim() else i.abs() * 0
    return (y, torch.slice_scatter(x, x[..., :1] + 1, -1, 0, 1) if x.dim() else x,
            torch.select_scatter(x, x.select(0, 0) * 2, 0, 0) if x.dim() and x.shape[0] else x,
            x.diagonal(0, 0, -1) if x.dim() >= 2 else x,
            torch.diagonal_scatter(x, x.diagonal(0, 0, -1) * 0, 0, 0, -1) if x.dim() >= 2 else x,
            z.scatter(-1, ii, x) if x.dim() else z, z.scatter(-1, ii, 1.0) if x.dim() else z,
            z.scatter_add(-1, ii, x) if x.dim() else z, z.scatter_reduce(-1, ii, x, "sum") if x.dim() else z)


def _fused_edges(x):
    """The fused ops torch.compile puts in graphs (lowerings/fused.py), on the edge shapes they take."""
    import ttnn_eager.lowerings  # noqa: F401  (defines torch.ops.ttnn_eager)
    ops = torch.ops.ttnn_eager
    if not x.dim():
        return (x,)
    k = x.shape[-1]
    w, b = torch.ones(4, k, device=x.device) * 0.1, torch.ones(4, device=x.device)
    g = torch.ones(k, device=x.device)
    out = [ops.linear_activation(x, w, b, "gelu"), ops.linear_activation(x, w, None, "relu"),
           ops.add_layer_norm(x, x, [k], g, g * 0, 1e-5), ops.rms_norm(x, g, 1e-6),
           ops.concat_heads(x.reshape(1, 1, -1, k)), ops.matmul_bias(x, w.t().contiguous(), b, None),
           ops.matmul_bias(x, w.t().contiguous(), b, "gelu_tanh")]
    out.append(ops.linear_add(x, w, out[1]))  # a residual of the product's shape (one row: the linear's bias)
    if x.dim() == 3:  # as heads [1, b, s, d] rotated by cos, sin [1, 1, s, d]
        out.append(ops.rotary_embedding(x[None], x[:1, None], -x[:1, None]))
    if x.dim() == 3 and x.numel():  # as a paged cache [blocks, 1, block, d]: one user at position 0 of block 0
        cache, row = x[:, None], x[:1, :1].reshape(1, 1, 1, k)
        zero = torch.zeros(1, dtype=torch.int32, device=x.device)
        out += [ops.paged_update_cache(cache.clone(), row, zero, zero.reshape(1, 1)),
                ops.paged_update_cache_functional(cache, row, zero, zero.reshape(1, 1)),
                ops.paged_attention_decode(row, cache, cache, zero, zero.reshape(1, 1), 1.0)]
    if x.dim() == 3:  # as a static cache [a, 1, b, d] and one new row a sequence at its last position
        last = torch.tensor(max(x.shape[1] - 1, 0), device=x.device)
        out.append(ops.cache_update(x[:, None], x[:, None, -1:] * 2, last))
    if x.dim() == 3:
        wq = torch.eye(k, device=x.device)
        out += list(ops.qkv_heads(x, [wq, wq * 2, wq * 3], [None] * 3, 1, 1))
        width = k + -k % 32  # (heads zero-padded to whole tiles, and the projection of such heads)
        out += list(ops.qkv_heads(x, [wq, wq * 2, wq * 3], [wq[0], wq[1], wq[0]], 1, 1, width))
        out.append(ops.heads_linear(torch.cat([x, x[..., :width - k] * 0], -1), wq * 2, None, 1))
        out += list(ops.split_qkv_heads(torch.cat([x, x * 2, x * 3], -1), 1))
        if x.shape[0] == 1:  # one sequence, a token a user: heads in the paged ops' layout
            out += list(ops.qkv_heads_decode(x, [wq, wq * 2, wq * 3], [None] * 3, 1, 1))
    return tuple(out)


def _vision_conv(x, w, b, stride, padding, dilation, groups, bn_w, bn_b, mean, var, eps, activation):
    """The meaning of ttnn_eager.conv_bn_act, from PyTorch's ops (the CPU side: the op itself on the device)."""
    if x.device.type == "ttnn":
        return torch.ops.ttnn_eager.conv_bn_act(x, w, b, stride, padding, dilation, groups, bn_w, bn_b, mean, var,
                                                eps, activation)
    y = torch.nn.functional.batch_norm(torch.nn.functional.conv2d(x, w, b, stride, padding, dilation, groups),
                                       mean, var, bn_w, bn_b, False, 0.0, eps)
    return torch.relu(y) if activation == "relu" else y


def _fused_vision_edges(x):
    """The fused vision ops torch.compile puts in graphs (features/compile/vision.py), an edge shape's last two
    dimensions as a one-channel image."""
    import ttnn_eager.lowerings  # noqa: F401  (defines torch.ops.ttnn_eager)
    out = [torch.ops.ttnn_eager.add_act(x, x * 2, "relu")]
    if x.dim() >= 2:
        img = x.reshape(1, 1, *x.shape[-2:])
        w = torch.linspace(-1, 1, 18, device=x.device).reshape(2, 1, 3, 3)
        ones = torch.ones(2, device=x.device)
        out.append(_vision_conv(img, w, ones, [1, 1], [1, 1], [1, 1], 1, ones * 2, ones * 0.5, ones * 0.1,
                                ones * 4, 1e-5, "relu"))
    return tuple(out)


def _inference(fn):
    with torch.inference_mode():  # CompositeImplicitAutograd ops arrive whole
        return fn()


def _edge_inputs(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(torch.bfloat16).float(), torch.randint(-9, 10, shape, generator=g)


def _edge_check(name, shape, seed):
    x, i = _edge_inputs(shape, seed)
    fn = EDGE_OPS[name]
    try:
        ref = fn(x, i)
    except Exception as e:  # noqa: BLE001 - PyTorch's exception is the specification
        try:
            fn(x.to(DEV), i.to(DEV))
        except type(e):
            return
        raise AssertionError(f"{name} {shape}: PyTorch raises {type(e).__name__}: {e}; the device does not")
    out = fn(x.to(DEV), i.to(DEV))
    out, ref = tree_flatten(out)[0], tree_flatten(ref)[0]
    assert len(out) == len(ref)
    for k, (o, r) in enumerate(zip(out, ref)):
        if not isinstance(r, torch.Tensor):
            assert abs(o - r) <= 0.05 * max(1.0, abs(r)), (name, shape, k, o, r)
            continue
        assert o.device.type == "ttnn" and o.dtype == r.dtype and o.shape == r.shape, (name, shape, k, o.dtype, r.dtype, o.shape, r.shape)
        got = o.cpu()
        if r.dtype.is_floating_point:
            scale = max(1.0, r[torch.isfinite(r)].abs().max().item()) if r.numel() and torch.isfinite(r).any() else 1.0
            assert torch.allclose(got, r, atol=0.05 * scale, rtol=0.03, equal_nan=True), (name, shape, k, got, r)
        else:
            assert torch.equal(got, r), (name, shape, k, got, r)


EDGE_FUZZ = settings(max_examples=10, deadline=None, derandomize=True, database=None,
                     suppress_health_check=list(HealthCheck))


@EDGE_FUZZ
@given(name=st.sampled_from(sorted(EDGE_OPS)), shape=st.sampled_from(EDGE_SHAPES), seed=st.integers(0, 99))
def edge_property(name, shape, seed):
    """Run by test_edge_shapes_in_a_subprocess (not collected: a crash would take pytest down with it)."""
    _edge_check(name, shape, seed)


def edge_sweep():
    """Every op group on every edge shape once (deterministic), then the hypothesis property."""
    failures = []
    for name in sorted(EDGE_OPS):
        for shape in EDGE_SHAPES:
            try:
                _edge_check(name, shape, 0)
            except AssertionError as e:
                failures.append(str(e)[:400])
    edge_property()
    return failures


def test_edge_shapes_in_a_subprocess():
    import os
    from ttnn_eager.lowerings import REGISTRY
    code = textwrap.dedent(f"""
        import sys, warnings
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        warnings.simplefilter("ignore")
        import ttnn_eager, test_robust
        with ttnn_eager.record_ops() as rec:
            failures = test_robust.edge_sweep()
        for f in failures:
            print("FAIL", f)
        print("REACHED", " ".join(sorted(str(op) for op in rec.aten)))
        print("done")
    """)
    r = run_python(code)
    assert r.returncode == 0 and "done" in r.stdout, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    failures = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
    assert not failures, "\n".join(failures)
    reached = set(next(line for line in r.stdout.splitlines() if line.startswith("REACHED")).split()[1:])
    host_factories = {str(op) for op, e in REGISTRY.items() if e.fn.__name__.startswith("host_")}
    missing = sorted(str(op) for op in REGISTRY if str(op) not in reached and str(op) not in host_factories)
    assert not missing, "lowerings the edge shapes never reached: " + " ".join(missing)
