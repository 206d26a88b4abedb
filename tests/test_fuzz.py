"""Property-based tests (hypothesis) for every registered lowering: random shapes with sizes 1, 2, 31, 32,
33 and 100, broadcast patterns, the dtypes each op accepts, against PyTorch on the CPU within bfloat16
tolerance. `test_every_lowering_has_a_property` fails when a lowering is registered without one."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ttnn_eager
from ttnn_eager.lowerings import REGISTRY

from conftest import COVERS, covers, all_test_modules

DEV = "ttnn:0"
aten = torch.ops.aten
SIZES = [1, 2, 31, 32, 33, 100]
FUZZ = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def shapes(min_dims=1, max_dims=3, max_numel=40_000):
    return st.lists(st.sampled_from(SIZES), min_size=min_dims, max_size=max_dims).filter(
        lambda s: math.prod(s) <= max_numel).map(tuple)


@st.composite
def broadcast_pair(draw):
    a = draw(shapes())
    b = tuple(1 if draw(st.booleans()) else s for s in a)
    b = b[draw(st.integers(0, len(b) - 1)):]  # drop some leading dims
    return (a, b) if draw(st.booleans()) else (b, a)


def values(shape, draw, kind="float", seed=None):
    g = torch.Generator().manual_seed(seed if seed is not None else draw(st.integers(0, 2**16)))
    if kind == "int":
        return torch.randint(-50, 50, shape, generator=g)
    if kind == "nonneg":
        return torch.randint(0, 50, shape, generator=g)
    if kind == "bool":
        return torch.rand(shape, generator=g) > 0.5
    return torch.randn(shape, generator=g).to(torch.bfloat16).float()


def check(fn, *inputs, atol=0.03, rtol=0.02):
    ref = fn(*inputs)
    with ttnn_eager.strict():
        out = fn(*[x.to(DEV) if isinstance(x, torch.Tensor) else x for x in inputs])
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o, r in zip(outs, refs):
        assert o.device.type == "ttnn" and o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype, o.shape, r.shape)
        got = o.cpu()
        if r.dtype.is_floating_point:
            scale = r.abs().max().item() if r.numel() else 0.0
            assert torch.allclose(got, r, atol=atol * max(scale, 1.0), rtol=rtol, equal_nan=True), \
                (got - r).abs().max()
        else:
            assert torch.equal(got, r)


# ----------------------------------------------------------------------------------------------- elementwise
BINARY = {
    "add": (lambda a, b: a + b, aten.add.Tensor), "sub": (lambda a, b: a - b, aten.sub.Tensor),
    "mul": (lambda a, b: a * b, aten.mul.Tensor), "eq": (lambda a, b: a == b, aten.eq.Tensor),
    "ne": (lambda a, b: a != b, aten.ne.Tensor), "gt": (lambda a, b: a > b, aten.gt.Tensor),
    "ge": (lambda a, b: a >= b, aten.ge.Tensor), "lt": (lambda a, b: a < b, aten.lt.Tensor),
    "le": (lambda a, b: a <= b, aten.le.Tensor),
}


@covers(*[op for _, op in BINARY.values()])
@FUZZ
@given(pair=broadcast_pair(), kind=st.sampled_from(["float", "int"]), data=st.data())
def test_binary_broadcast(pair, kind, data):
    a, b = values(pair[0], data.draw, kind), values(pair[1], data.draw, kind)
    for fn, _ in BINARY.values():  # every op, every example
        check(fn, a, b)


SCALAR_OPS = {
    "add": aten.add.Scalar, "sub": aten.sub.Scalar, "mul": aten.mul.Scalar, "div": aten.div.Scalar,
    "rsub": aten.rsub.Scalar, "eq": aten.eq.Scalar, "ne": aten.ne.Scalar, "gt": aten.gt.Scalar,
    "ge": aten.ge.Scalar, "lt": aten.lt.Scalar, "le": aten.le.Scalar,
}


@covers(*SCALAR_OPS.values(), aten.rsub.Tensor, aten.div.Tensor, aten.div.Tensor_mode, aten.div.Scalar_mode)
@FUZZ
@given(shape=shapes(), scalar=st.sampled_from([-3, -0.5, 0, 2, 7.25]),
       kind=st.sampled_from(["float", "int", "nonneg"]), data=st.data())
def test_scalar_operands(shape, scalar, kind, data):
    x = values(shape, data.draw, kind)
    for op, overload in SCALAR_OPS.items():
        check(lambda t: overload(t, 2 if op == "div" and scalar == 0 else scalar), x)
    y = values(shape, data.draw, "float").abs() + 1
    check(lambda t, u: torch.stack([aten.rsub.Tensor(t, u), aten.div.Tensor(t, u)]), x.float(), y)
    a, b = (x.float() * 4).round(), y.round()
    check(lambda t, u: torch.stack([aten.div.Tensor_mode(t, u, rounding_mode="trunc"),
                                    aten.div.Scalar_mode(t, 3, rounding_mode="floor")]), a, b)
    # integer quotients of operands beyond bfloat16's 8 bits (token ids, positions): exact, as on the CPU
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 999)))
    n, m = torch.randint(-70000, 70000, shape, generator=g), torch.randint(1, 300, shape, generator=g)
    m = torch.where(torch.rand(shape, generator=g) < 0.5, -m, m)
    for mode in ("trunc", "floor"):
        check(lambda t, u: torch.stack([torch.div(t, u, rounding_mode=mode), torch.div(t, 7, rounding_mode=mode)]),
              n, m)  # (integer results compare exactly)


UNARY = {
    aten.tanh.default: (torch.tanh, None), aten.relu.default: (torch.relu, None),
    aten.sigmoid.default: (torch.sigmoid, None), aten.exp.default: (torch.exp, None),
    aten.log.default: (lambda x: torch.log(x.abs() + 0.5), None), aten.sqrt.default: (lambda x: torch.sqrt(x.abs()), None),
    aten.rsqrt.default: (lambda x: torch.rsqrt(x.abs() + 0.5), None), aten.erf.default: (torch.erf, None),
    aten.silu.default: (F.silu, None), aten.reciprocal.default: (lambda x: torch.reciprocal(x.abs() + 0.5), None),
    aten.neg.default: (torch.neg, "int"), aten.abs.default: (torch.abs, "int"),
    aten.gelu.default: (lambda x: torch.stack([F.gelu(x), F.gelu(x, approximate="tanh")]), None),
    aten.pow.Tensor_Scalar: (lambda x: torch.stack([x ** 2, x.abs() ** 1.5]), None),
    aten.clamp.default: (lambda x: x.clamp(-0.7, 0.4), "int"), aten.clamp_min.default: (lambda x: x.clamp_min(0.3), None),
    aten.clamp_max.default: (lambda x: x.clamp_max(-0.3), None),
    aten.atanh.default: (lambda x: torch.atanh(x.clamp(-0.9, 0.9)), None),
    aten.asinh.default: (lambda x: torch.stack([torch.asinh(x), torch.asinh(x * 1000)]), "int"),
    aten.acosh.default: (lambda x: torch.acosh(x.abs() * 4 + 1.5), "int"),  # (1 + tiny rounds to 1 in bfloat16)
}


@covers(*UNARY)
@FUZZ
@given(shape=shapes(), data=st.data())
def test_unary(shape, data):
    x, i = values(shape, data.draw), values(shape, data.draw, "int")
    for fn, also in UNARY.values():
        check(fn, x)
        if also == "int":
            check(fn, i)


@covers(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar, aten.masked_fill.Scalar,
        aten.masked_fill.Tensor, aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.bitwise_or.Tensor,
        aten.bitwise_or.Scalar, aten.bitwise_not.default, aten.logical_and.default, aten.logical_or.default,
        aten.logical_not.default)
@FUZZ
@given(pair=broadcast_pair(), data=st.data())
def test_selection_and_logic(pair, data):
    c, a, b = values(pair[0], data.draw, "bool"), values(pair[0], data.draw), values(pair[1], data.draw)
    check(lambda c, a, b: torch.where(c, a, b), c, a, b)
    check(lambda c, a: torch.stack([aten.where.ScalarSelf(c, 2.0, a), aten.where.ScalarOther(c, a, -1.0),
                                    aten.where.Scalar(c, 1.0, 0.0).expand(a.shape)]), c, a)
    check(lambda a, c: torch.stack([a.masked_fill(c, -2.0), aten.masked_fill.Tensor(a, c, torch.tensor(3.0))]), a, c)
    d = values(pair[1], data.draw, "bool")
    check(lambda c, d: (c & d, c | d, ~c, torch.logical_and(c, d), torch.logical_or(c, d), torch.logical_not(c),
                        c & True, c | False), c, d)
    i, j = values(pair[0], data.draw, "nonneg"), values(pair[1], data.draw, "nonneg")
    check(lambda i, j: (i & j, i | j, aten.bitwise_and.Scalar(i, 6), aten.bitwise_or.Scalar(i, 1), ~i), i, j)


# ----------------------------------------------------------------------------------------------- reductions
@covers(aten.sum.default, aten.sum.dim_IntList, aten.mean.default, aten.mean.dim, aten.amax.default,
        aten.amin.default, aten.all.default, aten.all.dim, aten.all.dims, aten.any.default, aten.any.dim,
        aten.any.dims, aten.cumsum.default, aten.linalg_vector_norm.default)
@FUZZ
@given(shape=shapes(), keepdim=st.booleans(), data=st.data())
def test_reductions(shape, keepdim, data):
    d = data.draw(st.integers(0, len(shape) - 1))
    x = values(shape, data.draw)
    check(lambda x: (x.sum(d, keepdim=keepdim), x.mean(d, keepdim=keepdim), x.amax(d, keepdim=keepdim),
                     x.amin(d, keepdim=keepdim), torch.linalg.vector_norm(x, dim=d, keepdim=keepdim)), x, atol=0.05)
    check(lambda x: (x.sum(), x.mean()), x, atol=0.05)
    m = values(shape, data.draw, "bool")
    check(lambda m: (m.all(), m.any(), m.all(d, keepdim=keepdim), m.any(d, keepdim=keepdim),
                     aten.all.dims(m, [d], keepdim), aten.any.dims(m, [d], keepdim)), m)
    check(lambda i: i.cumsum(d), values(shape, data.draw, "nonneg"))


# ----------------------------------------------------------------------------------------------- views
@covers(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default,
        aten.transpose.int, aten.t.default, aten.unsqueeze.default, aten.squeeze.default, aten.squeeze.dim,
        aten.squeeze.dims, aten.clone.default, aten.contiguous.default, aten.alias.default, aten.detach.default,
        aten.lift_fresh.default)
@FUZZ
@given(shape=shapes(2, 4), data=st.data())
def test_reshapes_and_permutes(shape, data):
    x = values(shape, data.draw)
    perm = data.draw(st.permutations(range(len(shape))))
    d0, d1 = data.draw(st.integers(0, len(shape) - 1)), data.draw(st.integers(0, len(shape) - 1))
    check(lambda x: (x.view(-1), aten._unsafe_view(x, [shape[0], -1]), x.reshape(shape[::-1]), x.permute(perm),
                     x.transpose(d0, d1), x.reshape(shape[0], -1).t(), x.unsqueeze(d0).squeeze(d0), x.squeeze(),
                     aten.squeeze.dims(x.unsqueeze(0), [0]), x.clone(), aten.contiguous(x), aten.alias(x),
                     x.detach(), aten.lift_fresh(x)), x)
    with torch.inference_mode():  # composites arrive whole
        check(lambda x: (x.reshape(-1), x.contiguous()), x)


@covers(aten.expand.default, aten.slice.Tensor, aten.select.int, aten.cat.default, aten.stack.default,
        aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int)
@FUZZ
@given(shape=shapes(1, 3), data=st.data())
def test_slices_and_joins(shape, data):
    x = values(shape, data.draw)
    d = data.draw(st.integers(0, len(shape) - 1))
    n = shape[d]
    start = data.draw(st.integers(-n, n - 1))
    step = data.draw(st.sampled_from([1, 2, 3]))
    index = data.draw(st.integers(-n, n - 1))
    k = data.draw(st.integers(1, n))
    sl = [slice(None)] * len(shape)
    sl[d] = slice(start, None, step)
    check(lambda x: (x[tuple(sl)], x.select(d, index), torch.cat([x, x * 2], d), torch.stack([x, -x], d),
                     *x.split(k, d), *x.split([n - n // 2, n // 2], d), *x.unbind(d)[:2]), x)
    one = values(tuple(1 if i == d else s for i, s in enumerate(shape)), data.draw)
    check(lambda o: (o.expand(shape), o.expand(2, *shape)), one)


# ----------------------------------------------------------------------------------------------- matmul
@covers(aten.mm.default, aten.bmm.default, aten.matmul.default, aten.linear.default, aten.addmm.default)
@FUZZ
@given(m=st.sampled_from(SIZES), k=st.sampled_from(SIZES), n=st.sampled_from(SIZES), b=st.sampled_from([1, 2, 3]),
       data=st.data())
def test_matmuls(m, k, n, b, data):
    a, w, bias = values((m, k), data.draw), values((n, k), data.draw), values((n,), data.draw)
    batch = values((b, m, k), data.draw)
    check(lambda a, w, bias, batch: (a @ w.t(), torch.mm(a, w.t()), torch.addmm(bias, a, w.t()),
                                     F.linear(batch, w, bias), F.linear(a, w), torch.bmm(batch, batch.transpose(1, 2)),
                                     torch.matmul(batch, w.t()), torch.matmul(a[0], w.t())), a, w, bias, batch,
          atol=0.05)
    with torch.inference_mode():
        check(lambda a, w, bias: (F.linear(a, w, bias), torch.matmul(a, w.t())), a, w, bias, atol=0.05)


# ----------------------------------------------------------------------------------------------- norms
@covers(aten.layer_norm.default, aten.native_layer_norm.default, aten._softmax.default, aten.softmax.int,
        aten._safe_softmax.default)
@FUZZ
@given(shape=shapes(1, 3), data=st.data())
def test_norms_and_softmax(shape, data):
    x = (values(shape, data.draw) * 3).to(torch.bfloat16).float()  # inputs the device holds exactly
    w, b = values(shape[-1:], data.draw), values(shape[-1:], data.draw)
    d = data.draw(st.integers(0, len(shape) - 1))
    check(lambda x, w, b: (F.layer_norm(x, shape[-1:], w, b, 1e-5), *aten.native_layer_norm(x, shape[-1:], w, b, 1e-5),
                           torch.softmax(x, d), aten._safe_softmax(x, d)), x, w, b, atol=0.05)
    with torch.inference_mode():
        check(lambda x, w, b: (F.layer_norm(x, shape[-1:], w, b), torch.softmax(x, d)), x, w, b, atol=0.05)


@covers(aten.scaled_dot_product_attention.default)
@FUZZ
@given(b=st.sampled_from([1, 2]), h=st.sampled_from([1, 3]), s=st.sampled_from([1, 7, 33, 100]),
       d=st.sampled_from([16, 32, 64]), masked=st.booleans(), data=st.data())
def test_attention(b, h, s, d, masked, data):
    q, k, v = (values((b, h, s, d), data.draw) for _ in range(3))
    mask = values((b, 1, 1, s), data.draw, "bool") | (torch.arange(s) == 0)  # every query sees a key
    with torch.inference_mode():
        check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m if masked else None),
              q, k, v, mask, atol=0.05)


# ----------------------------------------------------------------------------------------------- indexing
@covers(aten.embedding.default, aten.gather.default, aten.index.Tensor)
@FUZZ
@given(rows=st.sampled_from(SIZES), width=st.sampled_from([1, 31, 32, 64]), ids=shapes(1, 2, 4000), data=st.data())
def test_indexing(rows, width, ids, data):
    table = values((rows, width), data.draw)
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 99)))
    idx = torch.randint(0, rows, ids, generator=g)
    check(lambda t, i: F.embedding(i, t), table, idx)
    src = values((2, rows), data.draw)
    gi = torch.randint(0, rows, (2, data.draw(st.sampled_from([1, 7, rows]))), generator=g)
    check(lambda s, i: torch.gather(s, 1, i), src, gi)
    i0 = torch.randint(-rows, rows, ids, generator=g)
    check(lambda t, i: t[i], table, i0)


# ----------------------------------------------------------------------------------------------- factories, copies
@covers(aten.empty.memory_format, aten.empty_strided.default, aten.empty_permuted.default, aten.zeros.default,
        aten.ones.default, aten.full.default, aten.empty_like.default, aten.zeros_like.default, aten.ones_like.default,
        aten.full_like.default, aten.new_zeros.default, aten.new_ones.default, aten.new_full.default,
        aten.new_empty.default, aten.new_empty_strided.default, aten.scalar_tensor.default, aten.arange.default,
        aten.arange.start, aten.arange.start_step, aten.fill.Scalar, aten.fill.Tensor, aten.zero.default,
        aten._to_copy.default, aten.copy_.default, aten._local_scalar_dense.default)
@FUZZ
@given(shape=shapes(1, 3), value=st.sampled_from([-2, 0, 3, 1.5]),
       dtype=st.sampled_from([torch.float32, torch.int64, torch.bool, torch.bfloat16]), data=st.data())
def test_factories_and_copies(shape, value, dtype, data):
    d = torch.device(DEV)
    with ttnn_eager.strict():
        made = [torch.zeros(shape, dtype=dtype, device=d), torch.ones(shape, dtype=dtype, device=d),
                torch.full(shape, value, dtype=dtype, device=d), torch.scalar_tensor(value, device=d)]
        refs = [torch.zeros(shape, dtype=dtype), torch.ones(shape, dtype=dtype), torch.full(shape, value, dtype=dtype),
                torch.scalar_tensor(value)]
        x = values(shape, data.draw).to(dtype).to(d)
        made += [torch.zeros_like(x), torch.ones_like(x), torch.full_like(x, value), x.new_zeros(shape),
                 x.new_ones(2), x.new_full((3,), value), torch.empty_like(x).fill_(value),
                 torch.empty(shape, dtype=dtype, device=d).zero_(), x.new_empty(shape).fill_(torch.tensor(value)),
                 aten.empty_strided(shape, [1] * len(shape), dtype=dtype, device=d).fill_(1),
                 aten.new_empty_strided(x, shape, [1] * len(shape)).fill_(2)]
        c = x.cpu()
        refs += [torch.zeros_like(c), torch.ones_like(c), torch.full_like(c, value), c.new_zeros(shape), c.new_ones(2),
                 c.new_full((3,), value), torch.empty_like(c).fill_(value), torch.zeros(shape, dtype=dtype),
                 torch.full(shape, value, dtype=dtype), torch.ones(shape, dtype=dtype),
                 torch.full(shape, 2, dtype=dtype)]
        n = shape[0]
        made += [torch.arange(n, device=d), torch.arange(-n, n, 3, device=d), torch.arange(1, n + 1, device=d)]
        refs += [torch.arange(n), torch.arange(-n, n, 3), torch.arange(1, n + 1)]
        dst = torch.empty(shape, dtype=torch.float32, device=d)
        dst.copy_(c.float())
        made.append(dst)
        refs.append(c.float().to(torch.bfloat16).float())
        made.append(x.to(torch.float32))
        refs.append(c.to(torch.float32))
    for m, r in zip(made, refs):
        assert m.device == d and m.dtype == r.dtype and m.shape == r.shape
        assert torch.equal(m.cpu(), r), (m.cpu(), r)
    assert made[3].item() == value


def test_every_lowering_has_a_property():
    all_test_modules()  # every file's @covers marks
    covered = set().union(*COVERS.values())
    host_factories = {op for op, e in REGISTRY.items() if e.fn.__name__.startswith("host_")}  # PyTorch's own
    missing = sorted(str(op) for op in REGISTRY if op not in covered and op not in host_factories)
    assert not missing, "lowerings without a property test: " + " ".join(missing)


HOST_CALLS = {  # PyTorch's own generator on the host, then an upload: equal to the CPU under one seed
    "rand": lambda dev, **g: torch.rand(3, 33, device=dev, **g), "randn": lambda dev, **g: torch.randn(3, 33, device=dev, **g),
    "randint": lambda dev, **g: torch.randint(2, 9, (3, 33), device=dev, **g),
    "randperm": lambda dev, **g: torch.randperm(40, device=dev, **g),
    "normal": lambda dev, **g: torch.normal(1.0, 2.0, (5,), device=dev, **g),
    "eye": lambda dev, **g: torch.eye(33, 7, device=dev), "linspace": lambda dev, **g: torch.linspace(0, 1, 9, device=dev),
    "tril_indices": lambda dev, **g: torch.tril_indices(4, 4, device=dev),
    "triu_indices": lambda dev, **g: torch.triu_indices(4, 4, device=dev),
    "rand_like": lambda dev, **g: torch.rand_like(torch.zeros(3, 4, device=dev)),
    "randn_like": lambda dev, **g: torch.randn_like(torch.zeros(3, 4, device=dev)),
    "randint_like": lambda dev, **g: torch.randint_like(torch.zeros(3, 4, device=dev), 5),
}


@pytest.mark.parametrize("name", ["rand_like", "randn_like", "randint_like"])
def test_random_like_of_a_transposed_tensor_draws_the_cpus_numbers_in_the_cpus_places(name):
    """*_like keep a transposed tensor's strides, and the CPU then draws another way (randn: per element in
    memory order): VITS' prior noise is randn_like of a transposed tensor."""
    outs = []
    for dev in ("cpu", DEV):
        torch.manual_seed(5)
        x = torch.zeros(2, 40, 33, device=dev).transpose(1, 2)
        fn = {"rand_like": torch.rand_like, "randn_like": torch.randn_like}.get(name)
        outs.append(fn(x) if fn else torch.randint_like(x, 5))
    ref, out = outs
    expected = ref.to(torch.bfloat16).to(ref.dtype) if ref.dtype.is_floating_point else ref
    assert out.stride() == ref.stride() and torch.equal(out.cpu(), expected)


@pytest.mark.parametrize("op", sorted(str(op) for op, e in REGISTRY.items() if e.fn.__name__.startswith("host_")))
def test_host_factories_match_the_cpu_generator(op):
    name, overload = op.split(".")[1:]
    call = HOST_CALLS[name]
    kw = (lambda: {"generator": torch.Generator().manual_seed(5)}) if "generator" in overload else dict
    with ttnn_eager.record_ops() as rec:
        torch.manual_seed(5)
        out = call(DEV, **kw())
    torch.manual_seed(5)
    ref = call("cpu", **kw())
    expected = ref.to(torch.bfloat16).to(ref.dtype) if ref.dtype.is_floating_point else ref
    assert out.device == torch.device(DEV) and torch.equal(out.cpu(), expected)
    assert rec.fallbacks == {}
