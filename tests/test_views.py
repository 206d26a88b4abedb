"""PyTorch's view semantics on a device without strides: writes through every view reach the base, and every
other live view of that base sees them (in no_grad, inference_mode and with autograd recording, whose
gradients stay right); indexing assignment (index_put_, index_copy_, index_fill_, masked_scatter_, scatter_*).
Everything against PyTorch on the CPU, in strict mode (on the device, no fallback)."""
import warnings

import pytest
import torch
from hypothesis import given, settings, HealthCheck
from hypothesis import strategies as st

import ttnn_eager

from conftest import covers
from ttnn_eager.core.tensor import handle_of  # noqa: E402

DEV = "ttnn:0"
aten = torch.ops.aten

# view name -> a function of the base (4, 6, 5): the view (every view op the backend has; expand is read-only)
VIEWS = {
    "slice": lambda x: x[1:3],
    "slice_step": lambda x: x[:, ::2],
    "narrow": lambda x: x.narrow(2, 1, 3),
    "select": lambda x: x[2],
    "int_index": lambda x: x[:, -1],
    "view": lambda x: x.view(-1),
    "reshape": lambda x: x.reshape(24, 5),
    "transpose": lambda x: x.transpose(0, 2),
    "permute": lambda x: x.permute(1, 2, 0),
    "t": lambda x: x[0].t(),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "squeeze": lambda x: x[:, :1].squeeze(1),
    "diagonal": lambda x: x.diagonal(1, 1, 2),
    "split": lambda x: x.split(2, 1)[1],
    "chunk": lambda x: x.chunk(2, 0)[1],
    "unbind": lambda x: x.unbind(2)[3],
    "view_of_view": lambda x: x[1:].transpose(0, 1)[2],
}

# write name -> a function writing into the view v (other: a device tensor of v's shape)
WRITES = {
    "inplace": lambda v, other: v.mul_(2).add_(other),
    "copy_": lambda v, other: v.copy_(other),
    "fill_": lambda v, other: v.fill_(-3.5),
    "zero_": lambda v, other: v.zero_(),
    "out=": lambda v, other: torch.add(other, 1.5, out=v),
}


def _base():
    return torch.arange(120.0).reshape(4, 6, 5) / 8


def _check(name, write, grad_mode):
    """Write through the view on the CPU and the device; compare the base, the view and another live view."""
    results = []
    for device in ("cpu", DEV):
        try:
            results.append(_write(name, write, grad_mode, device))
        except RuntimeError as e:  # what PyTorch refuses (out= with autograd) the device refuses alike
            results.append(type(e))
    if results[0] is RuntimeError or results[1] is RuntimeError:
        assert results[0] is results[1], results
        return
    (cpu, cpu_grad), (dev, dev_grad) = results
    for what, a, b in zip(("base", "view", "other view"), cpu, dev):
        assert a.shape == b.shape, what
        torch.testing.assert_close(b, a, atol=0.07, rtol=0.01, msg=lambda m: f"{what}: {m}")
    if cpu_grad is not None:
        torch.testing.assert_close(dev_grad, cpu_grad, atol=0.02, rtol=0.01)


def _write(name, write, grad_mode, device):
    leaf = _base().to(device).requires_grad_(grad_mode == "autograd")
    ctx = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}.get(grad_mode)
    with (ctx() if ctx else torch.enable_grad()), ttnn_eager.strict():
        base = leaf * 1  # not a leaf: autograd allows writes into its views
        view = VIEWS[name](base)
        witness = base[:, 1:4]  # another live view of the same base
        other = (torch.arange(view.numel(), dtype=torch.float32).reshape(view.shape) / 4).to(device)
        WRITES[write](view, other)
        out = (base.detach().cpu(), view.detach().cpu(), witness.detach().cpu())
        grad = None
        if grad_mode == "autograd":
            (base * torch.linspace(-1, 1, base.numel()).reshape(base.shape).to(device)).sum().backward()
            grad = leaf.grad.cpu()
    return out, grad


@pytest.mark.parametrize("grad_mode", ["no_grad", "inference_mode", "autograd"])
@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("name", list(VIEWS))
def test_writes_through_views_reach_the_base_and_other_views(name, write, grad_mode):
    _check(name, write, grad_mode)


def test_the_user_lines_of_the_issue():
    """x[0] = 5.0, x[:, 1] = 0, x[0].add_(1), x.view(-1).zero_() (all refused before) are PyTorch's."""
    for device in ("cpu", DEV):
        x = _base().to(device)
        x[0] = 5.0
        x[:, 1] = 0
        x[0].add_(1)
        y = x.clone()
        y.view(-1).zero_()
        if device == "cpu":
            ref = (x.clone(), y.clone())
    assert torch.equal(x.cpu(), ref[0]) and torch.equal(y.cpu(), ref[1])


def test_views_see_base_updates():
    base_cpu = _base()
    base = base_cpu.to(DEV)
    views = {name: (fn(base), fn(base_cpu)) for name, fn in VIEWS.items()}
    base.mul_(2).add_(1)
    base_cpu.mul_(2).add_(1)
    for name, (v, ref) in views.items():
        assert torch.equal(v.cpu(), ref), name


def test_expand_stays_read_only_as_in_pytorch():
    for device in ("cpu", DEV):
        x = torch.ones(1, 6, device=device)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            x.expand(3, 6).add_(1)
        assert torch.equal(x.cpu(), torch.ones(1, 6))


def test_a_view_op_without_lowering_stays_a_view_through_the_fallback():
    """unfold has no lowering: it runs on the CPU fallback, and its result still behaves as a view."""
    results = []
    for device in ("cpu", DEV):
        x = _base()[0].to(device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            u = x.unfold(1, 2, 2)
            u.mul_(0)        # a write through it reaches x
            x.add_(1)        # and it sees x's update
            results.append((x.cpu(), u.cpu()))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


@pytest.mark.parametrize("dtype,to", [(torch.float32, torch.int32), (torch.float32, torch.uint8),
                                      (torch.bfloat16, torch.int16), (torch.int32, torch.float32)])
def test_a_view_as_another_dtype_has_that_dtype_and_stays_a_view(dtype, to):
    """x.view(dtype) reinterprets the bytes (the CPU fallback's alias once kept the base's dtype: a silent wrong
    answer); writes through it reach the base, and it sees the base's updates."""
    results = []
    for device in ("cpu", DEV):
        x = torch.arange(1, 13, dtype=torch.float32) * 1.25
        x = (x.view(dtype) if dtype is torch.int32 else x.to(dtype)).to(device)  # bits of normal floats
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = x.view(to)
            assert v.dtype is to and v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            first = v.cpu().clone()  # (on the CPU, .cpu() is v itself)
            v[1] = v[5]      # a write through the view reaches x
            x.mul_(2)        # and the view sees x's update
            results.append((first, x.cpu().clone(), v.cpu().clone()))
    for c, d in zip(*results):
        assert c.dtype is d.dtype and torch.equal(c, d)


# ----------------------------------------------------------------------------------------------- indexing assignment
_G = torch.Generator().manual_seed(0)
X = (torch.randn(5, 6, 7, generator=_G)).to(torch.bfloat16).float()
MASK = torch.rand(5, 6, generator=_G) > 0.5
MASK3 = torch.rand(5, 6, 7, generator=_G) > 0.5
IDX = torch.tensor([4, 0, 2])


def _put(fn):
    """A CASES function: fn writes into a clone of x (so the input is left alone) and the clone is the result."""
    def run(x, *args):
        y = x.clone()
        fn(y, *args)
        return y
    return run


CASES = {
    "put_mask_scalar": (_put(lambda x, m: x.__setitem__(m, 3.0)), [(X, MASK), (X, MASK3)]),
    "put_mask_row": (_put(lambda x, m, v: x.__setitem__(m, v)), [(X, MASK, torch.arange(7.0))]),
    "put_mask_rows": (_put(lambda x, m, v: x.__setitem__(m, v)), [(X, MASK, torch.ones(int(MASK.sum()), 7))]),
    "put_index": (_put(lambda x, i, v: x.__setitem__(i, v)), [(X, IDX, torch.ones(3, 6, 7)),
                                                             (X, torch.tensor([-1, -5]), torch.ones(7))]),
    "put_index_column": (_put(lambda x, i, v: x.__setitem__((slice(None), i), v)), [(X, IDX, torch.ones(5, 3, 7))]),
    "put_two_indices": (_put(lambda x, i, j, v: x.__setitem__((i, j), v)), [(X, IDX, torch.tensor([1, 1, 5]), torch.full((3, 7), 4.0))]),
    "put_accumulate": (_put(lambda x, i, v: x.index_put_((i,), v, accumulate=True)), [(X, torch.tensor([1, 1, 3]), torch.ones(3, 6, 7))]),
    "unsafe_index_put": (lambda x, i, v: aten._unsafe_index_put(x, [i], v), [(X, IDX, torch.ones(3, 6, 7))]),
    "index_put_int": (_put(lambda x, i: x.__setitem__(i, -3)), [(torch.arange(30).reshape(6, 5), IDX)]),
    "index_copy": (_put(lambda x, i, s: x.index_copy_(1, i, s)), [(X, torch.tensor([5, 0]), torch.ones(5, 2, 7))]),
    "index_copy_functional": (lambda x, i, s: torch.index_copy(x, 1, i, s), [(X, torch.tensor([4]), torch.ones(5, 1, 7))]),
    "index_fill": (_put(lambda x, i: x.index_fill_(2, i, -2.0)), [(X, torch.tensor([6, 1]))]),
    "index_fill_tensor": (_put(lambda x, i, v: x.index_fill_(0, i, v)), [(X, torch.tensor([2]), torch.tensor(1.5))]),
    "masked_scatter": (_put(lambda x, m, s: x.masked_scatter_(m, s)), [(X, MASK3, torch.arange(210.0).reshape(5, 6, 7) / 10),
                                                                       (X, MASK[..., None], torch.randn(300))]),
    "scatter": (_put(lambda x, i, s: x.scatter_(1, i, s)), [(X, torch.randint(0, 6, (5, 3, 7), generator=_G), torch.ones(5, 3, 7))]),
    "scatter_value": (_put(lambda x, i: x.scatter_(2, i, 7.0)), [(X, torch.tensor([[[1, 3]] * 6] * 5))]),
    "scatter_add": (_put(lambda x, i, s: x.scatter_add_(0, i, s)), [(X, torch.randint(0, 5, (5, 6, 7), generator=_G), torch.ones(5, 6, 7))]),
    "scatter_reduce_sum": (_put(lambda x, i, s: x.scatter_reduce_(0, i, s, "sum")), [(X, torch.randint(0, 5, (2, 6, 7), generator=_G), torch.ones(2, 6, 7))]),
    "slice_scatter": (lambda x, s: torch.slice_scatter(x, s, 1, 2, 6, 3), [(X, torch.ones(5, 2, 7))]),
    "select_scatter": (lambda x, s: torch.select_scatter(x, s, 2, -1), [(X, torch.ones(5, 6))]),
    "diagonal": (lambda x: x.diagonal(-1, 0, 2), [(X,)]),
    "diagonal_scatter": (lambda x, s: torch.diagonal_scatter(x, s, 2, 1, 2), [(X, torch.ones(5, 5))]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_indexing_assignment_matches_cpu_on_the_device(case):
    fn, sets = CASES[case]
    for inputs in sets:
        ref = fn(*inputs)
        with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
            out = fn(*[x.to(DEV) for x in inputs])
        assert rec.fallbacks == {} and out.device == torch.device(DEV)
        torch.testing.assert_close(out.cpu(), ref, atol=0.02, rtol=0.01)


def test_indexing_and_flip_of_wide_rows_fit_in_l1():
    """x[i] and flip gather rows with ttnn.embedding, whose row buffers are in L1: LightGlue's flip(1) of its
    [2, 2, 784, 256] descriptors (a [2, 401408] table) asked for 1.7 MB of the 1.5 MB L1 (a TT_THROW) before
    wide rows were split into rows of at most EMBEDDING_WIDTH elements."""
    x = torch.randn(2, 2, 784, 256, generator=torch.Generator().manual_seed(0))
    i = torch.tensor([3, 0, 2])
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        flipped = torch.flip(x.to(DEV), [1]).cpu()
        picked = x.reshape(4, 784, 256).to(DEV)[i.to(DEV)].cpu()
    assert rec.fallbacks == {}
    torch.testing.assert_close(flipped, x.flip(1), atol=0.02, rtol=0.01)  # (bfloat16 rows)
    torch.testing.assert_close(picked, x.reshape(4, 784, 256)[i], atol=0.02, rtol=0.01)


def test_indices_and_values_may_be_cpu_tensors_as_in_pytorch():
    x = X.clone()
    d = X.to(DEV)
    x[IDX] = 2.0
    d[IDX] = torch.tensor(2.0)  # CPU index tensor, 0-d CPU value
    assert torch.equal(d.cpu(), x)
    with pytest.raises(RuntimeError, match="same device"):
        d[IDX] = torch.ones(3, 6, 7)  # a CPU value tensor is refused


def test_out_of_range_indices_raise_pytorch_errors_before_ttnn():
    d = X.to(DEV)
    with pytest.raises(IndexError, match="out of bounds"):
        d[torch.tensor([5])] = 1.0
    with pytest.raises(IndexError, match="out of bounds"):
        d[torch.tensor([-6])]
    with pytest.raises(RuntimeError, match="out of bounds"):
        d.scatter_(0, torch.tensor([[[9]]]).to(DEV), 1.0)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        d[MASK.to(DEV)] = torch.ones(2, 7).to(DEV)
    with pytest.raises(IndexError, match="does not match"):
        d[torch.ones(4, 6, dtype=torch.bool).to(DEV)] = 1.0
    assert torch.equal(d.cpu(), X)  # nothing half-done


def test_a_static_kv_cache_written_token_by_token():
    """The StaticCache pattern: a preallocated cache, one position written per step (index_copy_ and slice
    assignment), read back whole every step."""
    caches = {}
    for device in ("cpu", DEV):
        cache = torch.zeros(1, 2, 8, 32, device=device)
        torch._dynamo.mark_static_address(cache)  # as transformers' StaticLayer does
        address = _address(cache)
        for step in range(4):
            kv = torch.full((1, 2, 1, 32), float(step + 1)).to(device)
            cache.index_copy_(2, torch.tensor([step]).to(device), kv)
            cache[:, :, step + 4:step + 5] = kv * 2
            seen = cache.sum()
            assert _address(cache) == address  # the same device buffer every step: written in place
        caches[device] = (cache.cpu(), seen.cpu())
    assert torch.equal(caches["cpu"][0], caches[DEV][0]) and torch.equal(caches["cpu"][1], caches[DEV][1])


@pytest.mark.parametrize("users, dtype", [(1, torch.float32), (3, torch.float32), (2, torch.bfloat16)])
def test_a_decode_step_row_is_written_by_update_cache_in_place(users, dtype):
    """index_copy_ of one position known on the host (arange + an offset, as transformers' StaticLayer
    computes it) into a [users, heads, length, dim] cache is ttnn.update_cache into the cache's own buffer;
    a position computed on the device, or a cache a clone shares, takes the general route (scatter)."""
    got = {}
    for device in ("cpu", DEV):
        torch.manual_seed(0)
        cache = _rows(users, 40, dtype).to(device)
        offset = torch.tensor([3]).to(device)
        address = _address(cache)
        with ttnn_eager.record_ops() as rec:
            for step in range(3):
                position = torch.arange(1, device=device) + offset
                offset.add_(1)
                cache.index_copy_(2, position, _rows(users, 1, dtype).to(device))
        same_buffer = _address(cache) == address
        computed = (offset * 2 - offset).to(torch.int64)  # a position the host does not know
        cache.index_copy_(2, computed, _rows(users, 1, dtype).to(device))
        shared = cache.clone()
        cache.index_copy_(2, torch.tensor([0]).to(device), _rows(users, 1, dtype).to(device))
        got[device] = (cache.cpu(), shared.cpu())
        if device == DEV:
            assert same_buffer and rec.ttnn["update_cache"] == 3 and "scatter" not in rec.ttnn, rec.ttnn
    assert torch.equal(got["cpu"][0], got[DEV][0]) and torch.equal(got["cpu"][1], got[DEV][1])


def _rows(users, length, dtype):
    """Values bfloat16 holds exactly (float32 is stored as bfloat16 by default): the writes compare exactly."""
    return torch.randn(users, 2, length, 64).bfloat16().to(dtype)


def _address(t):
    from ttnn_eager.device import api as device_api
    return device_api.buffer_address(handle_of(t)) if t.device.type == "ttnn" else t.data_ptr()


def test_in_place_writes_keep_a_pinned_buffer_only_where_no_other_tensor_can_see_it():
    """A tensor marked with torch._dynamo.mark_static_address (as transformers' StaticCache marks its
    tensors for CUDA graphs) keeps its device buffer across in-place writes: the new value is ttnn.copy'd into
    it -- except where another tensor is on that buffer: a clone (copy-on-write: the same ttnn tensor), or a
    tensor that ttnn made by handing back its input's buffer (repeat by ones, cat of one tensor). Those must
    keep their values. The mock's shadows cannot show a shared buffer overwritten (each tensor has its own),
    so the test asserts the buffers: after the write, no other tensor is on x's buffer. An unmarked tensor
    takes the result's buffer (no extra op)."""
    for device in ("cpu", DEV):
        x = torch.arange(64.0).reshape(4, 16).to(device)
        torch._dynamo.mark_static_address(x)
        start = _address(x)
        with ttnn_eager.record_ops() as rec:
            x.add_(1)
        alone = _address(x) == start
        others = {"clone": x.clone(), "repeat": x.repeat(1, 1), "cat": torch.cat([x]),
                  "unsafe_view": torch.ops.aten._unsafe_view(x.clone(), (2, 32))}
        v = x.view(64)
        x.mul_(2)
        got = {k: t.cpu() for k, t in {"x": x, "view": v, **others}.items()}
        if device == "cpu":
            ref = got
        else:
            assert alone and rec.ttnn["copy"] == 1, "x alone on its buffer: add_ must keep it"
            shared = [k for k, t in others.items() if _address(t) == _address(x)]
            assert not shared, f"written through x's buffer: {shared}"
            y = torch.zeros(4, 16, device=DEV)
            with ttnn_eager.record_ops() as rec:
                y.add_(1)
            assert "copy" not in rec.ttnn and torch.equal(y.cpu(), torch.ones(4, 16))
    assert all(torch.equal(got[k], ref[k]) for k in ref)


# ----------------------------------------------------------------------------------------------- properties
SIZES = [1, 2, 31, 32, 33]
PROPS = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))


@covers(aten.slice_scatter.default, aten.select_scatter.default, aten.diagonal.default, aten.diagonal_scatter.default)
@PROPS
@given(st.lists(st.sampled_from(SIZES), min_size=2, max_size=3), st.data())
def test_property_view_scatters_match_cpu(shape, data):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape))).to(torch.bfloat16).float()
    d = data.draw(st.integers(0, len(shape) - 1))
    start = data.draw(st.integers(0, shape[d] - 1))
    end = data.draw(st.integers(start + 1, shape[d]))
    step = data.draw(st.integers(1, 3))
    index = data.draw(st.integers(-shape[d], shape[d] - 1))
    offset = data.draw(st.integers(-2, 2))
    sliced = x.narrow(d, start, end - start)[(slice(None),) * d + (slice(None, None, step),)]
    calls = [
        (lambda x, s: torch.slice_scatter(x, s, d, start, end, step), (x, torch.ones_like(sliced) * 2)),
        (lambda x, s: torch.select_scatter(x, s, d, index), (x, -x.select(d, index))),
        (lambda x: x.diagonal(offset, 0, -1), (x,)),
        (lambda x, s: torch.diagonal_scatter(x, s, offset, 0, -1), (x, x.diagonal(offset, 0, -1) + 1)),
    ]
    for fn, inputs in calls:
        ref = fn(*inputs)
        with ttnn_eager.strict():
            out = fn(*[t.to(DEV) for t in inputs])
        torch.testing.assert_close(out.cpu(), ref, atol=0.05, rtol=0.01)


@covers(aten.index_put.default, aten._unsafe_index_put.default, aten.index_copy.default, aten.index_copy_.default,
        aten.index_fill.int_Scalar,
        aten.index_fill.int_Tensor, aten.masked_scatter.default, aten.scatter.src, aten.scatter.value,
        aten.scatter_add.default, aten.scatter_reduce.two)
@PROPS
@given(st.lists(st.sampled_from(SIZES), min_size=1, max_size=3), st.data())
def test_property_indexing_assignment_matches_cpu(shape, data):
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=g).to(torch.bfloat16).float()
    d = data.draw(st.integers(0, len(shape) - 1))
    n = data.draw(st.integers(1, 4))
    idx = torch.randint(-shape[0], shape[0], (n,), generator=g)
    unique = torch.randperm(shape[d], generator=g)[:min(n, shape[d])]
    mask = torch.rand(shape, generator=g) > 0.5
    values = torch.randn([n] + shape[1:], generator=g).to(torch.bfloat16).float()
    src = torch.randn(shape, generator=g).to(torch.bfloat16).float()
    scatter_index = torch.randint(0, shape[d], shape, generator=g)
    permutation = torch.argsort(torch.rand(shape, generator=g), dim=d)  # no position written twice
    copied = torch.randn(shape[:d] + [len(unique)] + shape[d + 1:], generator=g).to(torch.bfloat16).float()
    calls = [
        (lambda x, m: x.clone().index_put_((m,), torch.tensor(1.5)), (x, mask)),
        (lambda x, i, v: x.clone().index_put_((i,), v, accumulate=True), (x, idx, values)),
        (lambda x, i, v: aten._unsafe_index_put(x, [i], v[:1]), (x, idx[:1] % shape[0], values)),
        (lambda x, i, c: x.clone().index_copy_(d, i, c), (x, unique, copied)),
        (lambda x, i, c: torch.index_copy(x, d, i, c), (x, unique, copied)),
        (lambda x, i: x.index_fill(d, i, -1.0), (x, unique)),
        (lambda x, i: x.index_fill(d, i, torch.tensor(2.0)), (x, unique)),
        (lambda x, m, s: x.masked_scatter(m, s), (x, mask, src)),
        (lambda x, i, s: x.scatter(d, i, s), (x, permutation, src)),
        (lambda x, i: x.scatter(d, i, 3.0), (x, scatter_index)),
        (lambda x, i, s: x.scatter_add(d, i, s), (x, scatter_index, src)),
        (lambda x, i, s: x.scatter_reduce(d, i, s, "sum"), (x, scatter_index, src)),
    ]
    for fn, inputs in calls:
        ref = fn(*inputs)
        with ttnn_eager.strict():
            out = fn(*[t.to(DEV) for t in inputs])
        # sums of several bfloat16 values are rounded once on the device: a relative tolerance
        torch.testing.assert_close(out.cpu(), ref, atol=0.05, rtol=0.02)


def test_permute_to_tiny_trailing_dims_runs_row_major():
    """FalconH1's Mamba2 einsum 'bclhn,bcshn->bclsh' permutes B (2, 1, 256, 1, 128, 256) to (2, 128, 256, 256,
    1, 1): 32 GiB in TILE (each 1x1 plane padded to a 32x32 tile; the device has 12) for 32 MiB of values.
    The layout policy runs such a permute ROW_MAJOR: exact values, a result of its elements' size."""
    from ttnn_eager.device import api
    x = torch.randn(2, 1, 256, 1, 128, 256)
    y = x.to(DEV).permute(0, 4, 2, 5, 1, 3).contiguous()
    assert y.shape == (2, 128, 256, 256, 1, 1)
    h = handle_of(y)
    assert h.layout == api.ROW_MAJOR and api.device_bytes(h) < 1 << 30
    assert torch.equal(y.cpu(), x.permute(0, 4, 2, 5, 1, 3).bfloat16().float())
    small = torch.randn(2, 24, 4, 16)  # an ordinary permute stays TILE
    assert handle_of(small.to(DEV).permute(0, 2, 1, 3).contiguous()).layout == api.TILE
    # the whole einsum, at a size that runs either way: the CPU's values
    c, b = torch.randn(2, 1, 64, 16, 32), torch.randn(2, 1, 64, 16, 32, generator=torch.Generator().manual_seed(1))
    ref = torch.einsum("bclhn,bcshn->bclsh", c, b)
    out = torch.einsum("bclhn,bcshn->bclsh", c.to(DEV), b.to(DEV)).cpu()
    assert out.shape == ref.shape
    assert torch.corrcoef(torch.stack([out.flatten(), ref.flatten()]))[0, 1] > 0.9999


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_long_one_dimensional_buffers_slice_and_write_without_a_tt_fatal(dtype):
    """A flat buffer whose one row is longer than a core's L1 holds (DDP's gradient bucket of a default-vocabulary
    BERT: 1.95M elements): ttnn.slice / ttnn.concat of it stop in a TT_FATAL, so the lowerings refuse it before
    the call (layout.row_fits) and the cut, the join and the write through a view take the CPU route -- exact."""
    from ttnn_eager.core import layout
    n = 1_953_408 + 130
    assert not layout.row_fits([n], ttnn_eager.device.api.BFLOAT16) and layout.row_fits([4096], ttnn_eager.device.api.FLOAT32)
    x = (torch.arange(n) % 256).to(dtype)
    d = x.to("ttnn:0")
    assert torch.equal(d[1000:1_953_408].cpu(), x[1000:1_953_408])
    assert torch.equal(torch.cat([d, d[:7]]).cpu(), torch.cat([x, x[:7]]))
    d[5:1_900_005] = 3  # a write through a view of the flat buffer reaches the base
    x[5:1_900_005] = 3
    assert torch.equal(d.cpu(), x)
    run = d.as_strided((1000, 64), (64, 1), 130)  # DDP's views into its bucket: a contiguous run
    run.mul_(2)
    x.as_strided((1000, 64), (64, 1), 130).mul_(2)
    assert torch.equal(d.cpu(), x)
    assert torch.equal(d[:1000].cpu(), x[:1000])  # short cuts of it still run on the device


@pytest.mark.parametrize("storage", ["float32", "bfloat16"])
def test_slices_of_rows_too_long_for_ttnn_slice_run_as_rows_of_pieces(restore_config, storage):
    """Longformer's and led's diagonalized attention chunks under float32 storage: rows of 197120 elements (770 KB,
    more than a core's L1 holds for ttnn.slice) cut by 256 at the end took the CPU fallback. A slice whose bounds
    and row share a factor that is a multiple of 32 (views._row_piece) is a slice of whole pieces of the rows
    viewed [size / piece, piece]: strict, exact. Bounds without one still take the counted fallback, exactly."""
    ttnn_eager.configure(float32_storage=storage)
    x = torch.randn(2, 3, 197120 if storage == "float32" else 394240)
    d = x.to(DEV)
    with ttnn_eager.strict():
        for f in (lambda t: t[..., :-256], lambda t: t[..., 256:102400], lambda t: t[..., 32:-64]):
            out, ref = f(d).cpu(), f(x)
            assert out.shape == ref.shape and torch.equal(out, ref.to(torch.bfloat16).float() if storage == "bfloat16"
                                                          else ref)
    before = ttnn_eager.stats()["fallbacks"]
    out = d[..., 5:-7].cpu()
    ref = x[..., 5:-7]
    assert ttnn_eager.stats()["fallbacks"] == before + 1
    assert torch.equal(out, ref.to(torch.bfloat16).float() if storage == "bfloat16" else ref)
