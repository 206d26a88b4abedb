"""complex64 tensors on ttnn:0, stored as real (real, imag) pairs (core/layout.py, lowerings/complex.py): every
complex op against the CPU (bfloat16 storage: bfloat16 tolerance; float32 storage: float32 rounding), the
complex rotary embedding of Llama-4 / DeepSeek-V2, writes through view_as_real / view_as_complex, PyTorch's
OpInfo samples of the lowered complex ops, and the refusals (complex128, complex32)."""
import contextlib

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ttnn_eager
from ttnn_eager import config
from ttnn_eager.core.tensor import handle_of

from conftest import covers, pcc

DEV = "ttnn:0"
aten = torch.ops.aten
C64 = torch.complex64


@contextlib.contextmanager
def float32_storage():
    previous = ttnn_eager.configure(float32_storage="float32")
    try:
        yield
    finally:
        config.settings.update(previous)


def bf(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).to(torch.bfloat16).float()


def cbf(*shape, seed=0):
    """A complex64 tensor whose parts are bfloat16 values (what is measured is the op, not the upload)."""
    return torch.complex(bf(*shape, seed=seed), bf(*shape, seed=seed + 1))


def rotary(xq, freqs):
    """Llama-4's apply_rotary_emb on one tensor (transformers' modeling_llama4), freqs_cis made by polar."""
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    return torch.view_as_real(xq_ * freqs_cis[:, :, None, :]).flatten(3).type_as(xq)


# name -> (function of tensors, [input sets]); the guards in test_ops.py run these too
CASES = {
    "view_as_complex": (lambda x: torch.view_as_complex(x), [(bf(3, 5, 2),), (bf(2, 33, 7, 2),)]),
    "view_as_real": (lambda c: torch.view_as_real(c), [(cbf(3, 5),), (cbf(33, 2),)]),
    "polar": (lambda a, t: torch.polar(a, t), [(bf(4, 6).abs(), bf(4, 6)), (bf(3, 1).abs(), bf(5))]),
    "complex": (lambda r, i: torch.complex(r, i), [(bf(4, 6), bf(4, 6)), (bf(33, 1), bf(7))]),
    "mul": (lambda a, b: a * b, [(cbf(2, 3, 4), cbf(3, 4)), (cbf(33, 5), cbf(5))]),
    "mul_real": (lambda a, b: a * b, [(cbf(2, 3, 4), bf(4)), (bf(5, 1), cbf(5, 7))]),
    "mul_scalar": (lambda a: a * 0.5, [(cbf(2, 3),)]),
    "mul_complex_scalar": (lambda a: a * (1 - 2j), [(cbf(2, 3),)]),
    "add": (lambda a, b: a + b, [(cbf(2, 3), cbf(3)), (cbf(4), bf(4))]),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=2), [(cbf(2, 3), cbf(2, 3))]),
    "add_scalar": (lambda a: a + (1 + 1j), [(cbf(2, 3),)]),
    "sub": (lambda a, b: a - b, [(cbf(2, 3), cbf(2, 3)), (bf(3), cbf(2, 3))]),
    "sub_scalar": (lambda a: 2.5 - a, [(cbf(2, 3),)]),
    "neg": (lambda a: -a, [(cbf(5, 3),)]),
    "abs": (lambda a: a.abs(), [(cbf(5, 3),)]),
    "conj": (lambda a: a.conj() * 1, [(cbf(5, 3),)]),
    "conj_physical": (lambda a: torch.conj_physical(a), [(cbf(5, 3),)]),
    "real_imag": (lambda a: (a.real, a.imag, a.real * a.imag), [(cbf(5, 3),)]),
    "to_real": (lambda a: (a.to(torch.float32), (a * 3).to(torch.int32), a.to(torch.bfloat16),
                           torch.complex(a.real, a.imag * 0).to(torch.bool), torch.complex(a.real * 0, a.imag).bool()),
                [(cbf(5, 3),)]),
    "from_real": (lambda a: a.to(C64), [(bf(5, 3),), (torch.arange(6),), (torch.tensor([True, False]),)]),
    "views": (lambda a: (a.view(-1), a.reshape(3, -1), a.unsqueeze(1), a.unsqueeze(-1).squeeze(-1), a.t(),
                         a.permute(1, 0), a.transpose(0, 1), a[1:, ::2], a[1], a[:, -1], a[None].expand(2, 6, 5),
                         *a.split(2), *a.unbind(1)[:2], a.clone()), [(cbf(6, 5),)]),
    "cat_stack": (lambda a, b: (torch.cat([a, b]), torch.cat([a, b.real], 1), torch.stack([a, b], -1)),
                  [(cbf(2, 3), cbf(2, 3))]),
    "factories": (lambda a: (torch.zeros_like(a), torch.ones_like(a), torch.full_like(a, 2 - 1j),
                             a.new_zeros(3), torch.empty_like(a).zero_(), a.clone().fill_(1j)), [(cbf(2, 3),)]),
    "rotary": (rotary, [(bf(2, 7, 4, 16), bf(2, 7, 8)), (bf(1, 33, 2, 64), bf(1, 33, 32))]),
    "pad": (lambda a: (torch.nn.functional.pad(a, (1, 2)), torch.nn.functional.pad(a, (0, -1, 2, 0)),
                       torch.nn.functional.pad(a, (3, 0, 0, 0, 1, 1))), [(cbf(2, 3, 5),)]),
}


def _compare(got, ref, tight: bool):
    got, ref = got.cpu(), ref
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype, got.shape, ref.shape)
    if not ref.numel():
        return
    if not (ref.is_floating_point() or ref.is_complex()):
        assert torch.equal(got, ref), (got, ref)
        return
    scale = max(1.0, ref.abs().max().item())
    err = (got - ref).abs().max().item()
    assert err <= (2e-6 if tight else 0.02) * scale, f"max error {err} at scale {scale}"
    if not tight and ref.numel() > 8:
        parts = (lambda t: torch.view_as_real(t)) if ref.is_complex() else (lambda t: t)
        assert pcc(parts(got), parts(ref)) >= 0.999


def _run(name, inputs, tight):
    fn, _ = CASES[name]
    ref = fn(*inputs)
    with ttnn_eager.record_ops() as rec:
        out = fn(*[x.to(DEV) for x in inputs])
    refs = ref if isinstance(ref, tuple) else (ref,)
    outs = out if isinstance(out, tuple) else (out,)
    for o, r in zip(outs, refs, strict=True):
        assert o.device.type == "ttnn"
        _compare(o, r, tight)
    assert not rec.fallbacks, rec.fallbacks


@pytest.mark.parametrize("name,k", [(n, k) for n, (_, sets) in CASES.items() for k in range(len(sets))])
def test_complex_op_matches_cpu(name, k):
    _run(name, CASES[name][1][k], tight=False)


@pytest.mark.parametrize("name", ["mul", "add", "sub", "views", "cat_stack", "conj", "rotary", "complex", "pad"])
def test_complex_op_is_exact_with_float32_storage(name):
    with float32_storage():
        for inputs in CASES[name][1]:
            _run(name, inputs, tight=True)


def test_a_complex_tensor_is_its_real_pair_on_the_device():
    c = cbf(3, 5)
    d = c.to(DEV)
    h = handle_of(d)
    assert (d.dtype, d.shape, h.dtype, tuple(h.shape)) == (C64, c.shape, C64, (3, 5))
    assert list(h.tt.shape) == [3, 5, 2]  # the view_as_real value
    assert torch.equal(d.cpu(), c)  # bfloat16 parts: exact
    assert d.untyped_storage().nbytes() == c.untyped_storage().nbytes()
    r = torch.view_as_real(d)
    assert handle_of(r).tt is h.tt  # no device op: the same device tensor, seen as float32


def test_rotary_embedding_matches_cpu_as_a_number():
    g = torch.Generator().manual_seed(0)  # (inputs rounded to bfloat16: what is measured is the op)
    xq = torch.randn(2, 24, 4, 64, generator=g).bfloat16().float()
    freqs = (torch.randn(2, 24, 32, generator=g) * 3).bfloat16().float()
    ref = rotary(xq, freqs)
    with ttnn_eager.record_ops() as rec:
        out = rotary(xq.to(DEV), freqs.to(DEV)).cpu()
    assert not rec.fallbacks and pcc(out, ref) >= 0.9999, (rec.fallbacks, pcc(out, ref))
    assert (out - ref).abs().max() < 0.01 * ref.abs().max()  # bfloat16 storage: a few roundings (0.005 measured)
    with float32_storage():
        exact = rotary(xq.to(DEV), freqs.to(DEV)).cpu()
    assert (exact - ref).abs().max() < 1e-4  # cos/sin of TT-NN's golden functions in float32


def test_writes_through_view_as_complex_and_view_as_real_reach_the_base():
    with float32_storage():
        x = bf(2, 4, 2)
        xd = x.to(DEV)
        c, cd = torch.view_as_complex(x), torch.view_as_complex(xd)
        c.mul_(2j)
        cd.mul_(2j)
        assert torch.equal(xd.cpu(), x) and torch.equal(cd.cpu(), c)
        y = cbf(3, 4)
        yd = y.to(DEV)
        r, rd = torch.view_as_real(y), torch.view_as_real(yd)
        r[..., 1] = 0
        rd[..., 1] = 0
        assert torch.equal(yd.cpu(), y)
        y.mul_(3)
        yd.mul_(3)
        assert torch.equal(rd.cpu(), r)  # the view sees its base's update
        z, zd = cbf(3, 4), cbf(3, 4).to(DEV)
        z[1:, 0] = 5 - 1j
        zd[1:, 0] = 5 - 1j
        assert torch.equal(zd.cpu(), z)


def test_conj_is_a_copy_with_the_conjugated_values():
    c = cbf(3, 4)
    d = c.to(DEV).conj()
    assert torch.equal(d.cpu(), c.conj().resolve_conj())
    assert not d.is_conj()  # made eagerly (lowerings/complex.py)


def test_complex128_and_complex32_are_refused_with_a_type_error():
    for dtype in (torch.complex128, torch.complex32):
        with pytest.raises(TypeError, match="ttnn devices do not support"):
            torch.zeros(2, dtype=dtype).to(DEV)
    with pytest.raises(TypeError, match="ttnn devices do not support torch.complex128"):
        cbf(2).to(DEV).to(torch.complex128)


def test_ops_without_a_complex_lowering_fall_back_with_the_cpu_values():
    c = cbf(4, 8)
    d = c.to(DEV)
    with ttnn_eager.record_ops() as rec:
        out = (torch.exp(d), torch.sqrt(d), d.sum(-1), d.angle())
    refs = (torch.exp(c), torch.sqrt(c), c.sum(-1), c.angle())
    for o, r in zip(out, refs):
        assert o.device.type == "ttnn" and o.dtype == r.dtype
        _compare(o, r, tight=False)  # (the results are uploaded: bfloat16 parts)
    assert rec.stats["fallbacks"] >= 4  # counted
    with ttnn_eager.strict(), pytest.raises(NotImplementedError, match="complex"):
        d.sum()


def test_opinfo_samples_of_the_complex_ops():
    """PyTorch's OpInfo samples (op_db) in complex64 for the ops lowered for complex tensors, under float32
    storage: the device's result equals the CPU's to float32 rounding, with no fallback."""
    from torch.testing._internal.common_methods_invocations import op_db
    from ttnn_eager.tools import opinfo
    names = {"mul", "add", "sub", "neg", "conj", "conj_physical", "real", "imag", "view_as_real", "abs",
             "resolve_conj", "t", "transpose", "permute", "unsqueeze", "squeeze", "view", "reshape", "expand",
             "cat", "stack", "clone", "zeros_like", "ones_like", "polar", "complex", "view_as_complex"}
    ran = 0
    with float32_storage():
        for op in op_db:
            if op.name not in names or op.variant_test_name:
                continue
            dtype = torch.float32 if op.name in ("polar", "complex", "view_as_complex") else C64
            for sample in opinfo._samples(op, dtype, 2):
                ref = opinfo._call(op, sample)
                with ttnn_eager.record_ops() as rec:
                    out = opinfo._call(op, sample.transform(opinfo._to_device))
                for o, r in zip(*(torch.utils._pytree.tree_flatten(v)[0] for v in (out, ref)), strict=True):
                    if isinstance(r, torch.Tensor):
                        _compare(o, r.resolve_conj(), tight=op.name not in ("polar", "abs"))
                assert not rec.fallbacks, (op.name, rec.fallbacks)
                ran += 1
    assert ran >= 40, ran


# ----------------------------------------------------------------------------------------------- properties
FUZZ = settings(max_examples=8, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
SHAPES = st.lists(st.sampled_from([1, 2, 31, 33]), min_size=0, max_size=3).map(tuple)


@covers(aten.view_as_complex.default, aten.polar.default, aten.complex.default, aten.mul.Tensor, aten.add.Tensor)
@FUZZ
@given(shape=SHAPES, seed=st.integers(0, 99))
def test_complex_arithmetic_property(shape, seed):
    """view_as_complex, polar, complex, and products and sums of the results equal the CPU's (float32
    storage: to float32 rounding) on any shape."""
    g = torch.Generator().manual_seed(seed)
    x, a, t = (torch.randn(*shape, 2, generator=g), torch.rand(shape, generator=g), torch.randn(shape, generator=g))

    def fn(x, a, t):
        c = torch.view_as_complex(x)
        p = torch.polar(a, t)
        return torch.view_as_real(c * p + torch.complex(t, a))
    ref = fn(x, a, t)
    with float32_storage():
        out = fn(x.to(DEV), a.to(DEV), t.to(DEV)).cpu()
    assert out.shape == ref.shape and torch.allclose(out, ref, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------------- models
@pytest.mark.parametrize("name", ["deepseek_v2", "llama4"])
def test_complex_rotary_models_match_the_cpu(name):
    """transformers' DeepSeek-V2 and Llama-4 text models (issue 23's shrunk config, one layer here; two in
    benchmarks/complex_models.py): their complex rotary embeddings run on the device (no complex op falls
    back). Llama-4's chunked attention mask indexes an int64 tensor (`left_padding[batch_idx]`): an integer
    table, gathered elementwise by aten.index.Tensor's lowering (no fallback either)."""
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "benchmarks"))
    import complex_models
    r = complex_models.measure(name, layers=1)
    assert r["shape_ok"] and r["pearson"] >= 0.999, r
    assert not r["fallbacks"], r
