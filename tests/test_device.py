"""The `ttnn` device: registration, device module, tensors, round trips, factories, memory, bad input."""
import gc
import math
import warnings

import pytest
import torch

import ttnn_eager
from conftest import run_python
from ttnn_eager.tools.models import pcc

DEV = "ttnn:0"


def test_import_torch_alone_autoloads_the_backend():
    r = run_python("import torch; x = torch.randn(4, 5); y = x.to('ttnn:0'); print(y.device, y.cpu())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ttnn:0 tensor(")
    assert "ttnn_eager" not in r.stdout


def test_autoload_is_cheap_and_does_not_import_ttnn():
    r = run_python("import sys, torch; print(torch.device('ttnn:0'), 'ttnn' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ttnn:0", "False"]


def test_device_module():
    assert torch.ttnn.is_available()
    assert torch.ttnn.device_count() == 1
    assert torch.ttnn.current_device() == 0
    assert torch.ttnn.get_device_name() == "Wormhole n150 (mock)"
    torch.ttnn.set_device(0)
    torch.ttnn.synchronize()
    assert isinstance(torch.ttnn.memory_allocated(), int)
    with pytest.raises(RuntimeError, match="ttnn:3 is not available"):
        torch.ttnn.set_device(3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int32, torch.int64, torch.bool, torch.uint8, torch.int16])
def test_round_trip_exact(dtype):
    g = torch.Generator().manual_seed(1)
    if dtype == torch.bool:
        x = torch.rand(3, 37, generator=g) > 0.5
    elif dtype.is_floating_point:
        x = torch.randn(3, 37, generator=g).to(dtype)
    else:
        hi = 100 if dtype == torch.uint8 else 30000
        x = torch.randint(0 if dtype == torch.uint8 else -hi, hi, (3, 37), generator=g).to(dtype)
    y = x.to(DEV)
    assert y.device == torch.device(DEV) and y.dtype == dtype and y.shape == x.shape
    back = y.cpu()
    assert back.dtype == dtype and torch.equal(back, x)


def test_round_trip_float32_is_bfloat16_rounded_by_default():
    x = torch.randn(5, 70) * 100
    y = x.to(DEV)
    assert y.dtype == torch.float32  # the torch-visible dtype never changes
    back = y.cpu()
    assert torch.equal(back, x.to(torch.bfloat16).float())
    assert not torch.equal(back, x)


def test_round_trip_float32_exact_with_float32_storage(restore_config):
    ttnn_eager.configure(float32_storage="float32")
    x = torch.randn(5, 70) * 100
    assert torch.equal(x.to(DEV).cpu(), x)


def test_to_device_spellings_and_dtype_conversion():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    for dev in ("ttnn", "ttnn:0", torch.device("ttnn", 0)):
        assert x.to(dev).device == torch.device("ttnn:0")
    y = x.to(DEV)
    z = y.to(torch.int32)
    assert z.dtype == torch.int32 and z.device == y.device
    assert torch.equal(z.cpu(), x.to(torch.int32))
    assert torch.equal((y - 5.5).to(torch.int64).cpu(), (x - 5.5).to(torch.int64))  # truncation
    assert torch.equal((y > 4).cpu(), x > 4)
    assert x.ttnn().device.type == "ttnn" and y.is_ttnn


def test_repr_tolist_item_numpy():
    x = torch.tensor([[1.5, -2.0], [3.25, 4.0]])
    y = x.to(DEV)
    text = repr(y)
    assert text.startswith("tensor([[") and "device='ttnn:0'" in text and "1.5000" in text
    assert str(y) == text
    assert y.tolist() == x.tolist()
    assert y[1, 0].item() == 3.25
    assert (y.cpu().numpy() == x.numpy()).all()
    with pytest.raises(TypeError, match="Use Tensor.cpu"):  # a plain device tensor, as on CUDA
        y.numpy()


def test_factories():
    d = torch.device(DEV)
    assert torch.equal(torch.zeros(2, 3, device=d).cpu(), torch.zeros(2, 3))
    assert torch.equal(torch.ones(2, 33, device=d).cpu(), torch.ones(2, 33))
    assert torch.equal(torch.full((4,), 7.0, device=d).cpu(), torch.full((4,), 7.0))
    assert torch.equal(torch.arange(10, device=d).cpu(), torch.arange(10))
    assert torch.equal(torch.arange(1, 10, 2, device=d).cpu(), torch.arange(1, 10, 2))
    assert torch.equal(torch.tensor([1, 2, 3], device=d).cpu(), torch.tensor([1, 2, 3]))
    e = torch.empty(3, 5, device=d)
    assert e.shape == (3, 5) and e.device == d
    torch.manual_seed(3)
    r = torch.randn(4, 4, device=d).cpu()
    torch.manual_seed(3)
    assert torch.equal(r, torch.randn(4, 4).to(torch.bfloat16).float())
    x = torch.randn(3, 4).to(d)
    for fn, ref in ((torch.zeros_like, torch.zeros), (torch.ones_like, torch.ones)):
        out = fn(x)
        assert out.device == d and torch.equal(out.cpu(), ref(3, 4))
    assert torch.equal(torch.full_like(x, 2.5).cpu(), torch.full((3, 4), 2.5))
    assert torch.equal(x.new_zeros(2).cpu(), torch.zeros(2))
    assert torch.equal(x.new_ones((1, 2)).cpu(), torch.ones(1, 2))
    assert torch.randint(0, 5, (10,), device=d).cpu().max() < 5
    assert torch.rand(3, device=d).device == d
    assert torch.equal(torch.eye(3, device=d).cpu(), torch.eye(3))


def test_module_to_keeps_parameter_identity_and_tied_weights():
    import transformers
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64)
    model = transformers.BertForMaskedLM(cfg)
    word = model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.weight is word
    expected = word.detach().to(torch.bfloat16).float().clone()
    model.to(DEV)
    assert model.bert.embeddings.word_embeddings.weight is word  # the same Parameter object
    assert model.cls.predictions.decoder.weight is word
    assert isinstance(word, torch.nn.Parameter) and word.device == torch.device(DEV) and word.requires_grad
    assert torch.equal(word.detach().cpu(), expected)
    # Back to the CPU: PyTorch swaps (and so keeps identity and ties) only with its future flag set.
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        model.to("cpu")
    finally:
        torch.__future__.set_swap_module_params_on_conversion(False)
    assert model.cls.predictions.decoder.weight is word is model.bert.embeddings.word_embeddings.weight
    assert word.device.type == "cpu" and torch.equal(word.detach(), expected)


def test_a_module_converted_to_what_it_is_inside_a_compiled_forward_is_left_alone():
    """switch_transformers' router calls `self.classifier.to(self.dtype)` in its forward: under torch.compile the
    graph's guards hold weak references to the parameters, so swapping each with itself (what PyTorch's _apply
    does with swaps on) raised "_apply(): Couldn't swap Linear.weight". A conversion to the device and dtype a
    module on ttnn already has changes nothing (its Parameters stay the same objects)."""
    class Router(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.classifier = torch.nn.Linear(8, 4)

        def forward(self, x):
            self.classifier = self.classifier.to(torch.float32)
            return self.classifier(x).softmax(-1)

    torch.manual_seed(0)
    ref, x = Router(), torch.randn(2, 5, 8)
    m = Router()
    m.load_state_dict(ref.state_dict())
    m.to(DEV)
    weight = m.classifier.weight
    torch._dynamo.reset()
    fast = torch.compile(m, backend="ttnn")
    with torch.no_grad():
        for _ in range(3):
            got = fast(x.to(DEV)).cpu()
            assert float((got - ref(x)).abs().max()) < 0.01
    assert m.classifier.weight is weight and m.to(DEV, torch.float32).classifier.weight is weight
    torch._dynamo.reset()


def test_memory_returns_to_baseline_after_del():
    torch.zeros(1, device=DEV)  # the device is open
    gc.collect()
    base = torch.ttnn.memory_allocated()
    x = torch.randn(1024, 1024).to(DEV)
    y = x * 2
    grown = torch.ttnn.memory_allocated()
    assert grown >= base + 2 * 1024 * 1024 * 2  # two bfloat16 1M-element tensors
    del x, y
    gc.collect()
    assert torch.ttnn.memory_allocated() == base


def test_memory_is_freed_when_the_last_tensor_dies_without_the_garbage_collector():
    """Device buffers go with the last reference, not with a later gc pass: the backend's own bookkeeping
    (argument promotion, view tracking) must make no reference cycles. A cycle here once kept every
    promoted operand of a BERT forward alive: 476 MiB instead of 116 MiB of activations at batch 8 seq 384."""
    def ops():
        ints = torch.arange(64 * 64).reshape(64, 64).to(DEV)
        floats = torch.rand(64, 64).to(DEV)
        mixed = ints + floats                        # operands promoted to one device dtype
        same = floats * floats                       # operands already alike
        view = same.view(-1)[:100].reshape(10, 10)   # views tracked against their base
        return ints, floats, mixed, same, view

    ops()  # warm-up: ttnn keeps a small device-side table for each reshape it has compiled
    gc.collect()
    base = torch.ttnn.memory_allocated()
    gc.disable()
    try:
        tensors = ops()
        assert torch.ttnn.memory_allocated() > base
        del tensors
        assert torch.ttnn.memory_allocated() == base
    finally:
        gc.enable()


def test_bad_device_index():
    with pytest.raises(RuntimeError, match=r"ttnn:7 is not available: this system has 1 ttnn device"):
        torch.randn(2).to("ttnn:7")
    with pytest.raises(RuntimeError, match=r"ttnn:7 is not available"):
        torch.zeros(2, device="ttnn:7")


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_unsupported_dtypes(dtype):
    x = torch.zeros(3, dtype=dtype)
    with pytest.raises(TypeError, match=f"ttnn devices do not support {dtype}.*x.to"):
        x.to(DEV)
    with pytest.raises(TypeError, match="ttnn devices do not support"):
        torch.zeros(3, dtype=dtype, device=DEV)


def test_float64_stored_as_float32_when_configured():
    """configure(float64="float32"): PyTorch sees float64 (dtypes of results and host copies), the values are
    float32's, the first float64 tensor warns once; the default refuses with a hint naming the setting."""
    from ttnn_eager.core import layout
    with pytest.raises(TypeError, match='configure\\(float64="float32"\\)'):
        torch.zeros(3, dtype=torch.float64, device=DEV)
    previous = ttnn_eager.configure(float64="float32", float32_storage="bfloat16")
    was = layout._float64_warned
    try:
        layout._float64_warned = False
        with pytest.warns(UserWarning, match="stored and computed as float32"):
            x = torch.arange(7, dtype=torch.float64, device=DEV)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once only
            y = torch.linspace(-3, 3, 7, dtype=torch.float64).to(DEV)
        ref_x, ref_y = torch.arange(7, dtype=torch.float64), torch.linspace(-3, 3, 7, dtype=torch.float64)
        assert x.dtype == y.dtype == torch.float64
        z = (x / 3 + y * 1.5)
        assert z.dtype == torch.float64 and z.cpu().dtype == torch.float64
        # float32 storage even with float32_storage="bfloat16": float32's error, not bfloat16's (1/3 -> 0.3340)
        assert (z.cpu() - (ref_x / 3 + ref_y * 1.5)).abs().max() < 1e-6
        assert torch.equal(x.to(torch.float32).cpu(), ref_x.float())
        assert (x * torch.ones(7, device=DEV)).dtype == torch.float64  # PyTorch's promotion
        assert x.sum().item() == 21.0
    finally:
        layout._float64_warned = was
        ttnn_eager.configure(**previous)


def test_float64_sine_position_embedding_as_rt_detr_builds_it():
    """RT-DETR / PP-DocLayout build their 2-D sine position embedding in float64 on the input's device (MPS
    alone excepted) and cast it to float32: with configure(float64="float32") it runs on the device."""
    from transformers.models.rt_detr.modeling_rt_detr import build_2d_sinusoidal_position_embedding as build
    ref = build(10, 12, 64, 10000.0, device=torch.device("cpu"), dtype=torch.float32)
    previous = ttnn_eager.configure(float64="float32")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = build(10, 12, 64, 10000.0, device=torch.device(DEV), dtype=torch.float32)
    finally:
        ttnn_eager.configure(**previous)
    assert out.dtype == torch.float32 and out.shape == ref.shape
    assert (out.cpu() - ref).abs().max() < 5e-3
    assert pcc(out.cpu(), ref) > 0.99999


def test_int64_beyond_int32_is_kept_on_the_host_and_computed_exactly():
    """The device's integers are int32. int64 values beyond them (a rolling hash's powers of a large prime, as
    BLT's hash embeddings compute) are kept exactly on the host; every op on them runs on the counted CPU
    fallback, and a result that fits int32 (the hash modulo a table size) goes back to the device."""
    from ttnn_eager import counters
    from ttnn_eager.core.tensor import handle_of

    def hashed(ids, prime, group=3, table=30000):  # transformers' BLT byte_group_hash_function
        pad = torch.zeros(ids.shape[0], group - 1, dtype=torch.int64, device=ids.device)
        windows = torch.cat([pad, ids], dim=1).unfold(1, group, 1)
        powers = torch.tensor(prime, dtype=torch.int64, device=ids.device) ** torch.arange(group, device=ids.device)
        return torch.sum(windows * powers, dim=-1) % table

    ids = torch.randint(0, 260, (2, 24), generator=torch.Generator().manual_seed(0))
    before = counters.counts["fallbacks"]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for prime in (1000000007, 5915587277):
            out = hashed(ids.to(DEV), prime)
            assert out.dtype == torch.int64 and torch.equal(out.cpu(), hashed(ids, prime))
            assert handle_of(out).tt is not None  # back on the device: it fits int32
    assert counters.counts["fallbacks"] > before
    assert any("do not fit the device's int32" in str(w.message) for w in seen)
    x = torch.tensor([1, 2**40]).to(DEV)
    assert handle_of(x).tt is None and torch.equal(x.cpu(), torch.tensor([1, 2**40]))
    assert torch.equal((x + 1).cpu(), torch.tensor([2, 2**40 + 1])) and x[1].item() == 2**40
    with ttnn_eager.strict(), pytest.raises(ttnn_eager.FallbackError, match="do not fit the device's int32"):
        x * 2
    ok = torch.tensor([-(2**31), 2**31 - 1])
    assert torch.equal(ok.to(DEV).cpu(), ok) and handle_of(ok.to(DEV)).tt is not None


def test_int64_beyond_int32_in_constants_and_writes_through_views():
    """Constants beyond int32 (full, fill_, an item assignment) and writes of such values through views of
    device tensors, or into views of them, give PyTorch's values (they gave 0: ttnn.full wrapped 2**41)."""
    warnings.simplefilter("ignore")
    assert torch.full((3,), 2**40, device=DEV).cpu().tolist() == [2**40] * 3
    assert torch.zeros(3, dtype=torch.int64, device=DEV).fill_(2**33).cpu().tolist() == [2**33] * 3
    t = torch.zeros(4, dtype=torch.int64, device=DEV)
    t[1] = 2**41
    assert t.cpu().tolist() == [0, 2**41, 0, 0]
    c = torch.tensor([1, 2**40, -(2**35), 7])
    x = c.to(DEV)
    z = torch.zeros(2, 4, dtype=torch.int64, device=DEV)
    z[1] = x
    assert z.cpu().tolist() == [[0] * 4, c.tolist()]
    v = x.view(2, 2)
    v[1, 1] = 2**41
    v[1][0] = 9
    c.view(2, 2)[1, 1], c.view(2, 2)[1][0] = 2**41, 9
    assert x.cpu().tolist() == c.tolist() and v.cpu().tolist() == c.view(2, 2).tolist()


def test_int64_sum_known_to_leave_int32_is_not_wrapped():
    """An int64 add whose operands' values are known on the host (an upload) and whose sum leaves int32 is
    refused by the lowering (the device would wrap around) and computed exactly on the CPU fallback."""
    ids = torch.tensor([[0, 7, 259], [3, 100, 1]])
    for offset in (2**31 - 10, -(2**31) - 5, 2**33):
        assert torch.equal((ids.to(DEV) + offset).cpu(), ids + offset)
    ints = torch.tensor([5, -7], dtype=torch.int32)  # int32 wraps in PyTorch too
    assert torch.equal((ints.to(DEV) + (2**31 - 3)).cpu(), ints + (2**31 - 3))


def test_integer_sums_are_exact():
    """The device sums in float32 (exact below 2**24): an integer sum that could pass 2**24 (terms x largest
    magnitude, from the dtype, the known bounds or one read of the extremes) runs on the CPU fallback; masks
    and small counts stay on the device. Each result equals the CPU's int64 sum."""
    cases = [(torch.full((5000,), 2**24 + 1), None, True),                 # every term is beyond float32's 2**24
             (torch.randint(-2**30, 2**30, (64,), generator=torch.Generator().manual_seed(0)), None, True),
             (torch.arange(70_000, dtype=torch.int32), None, True),       # leaves int32: an int64 result
             (torch.arange(10_000).reshape(100, 100), -1, False),         # 100 terms up to 9999: exact
             (torch.ones(2, 24, dtype=torch.int64), -1, False),           # an attention mask
             (torch.ones(3, 7, dtype=torch.bool), None, False)]
    for x, d, falls_back in cases:
        ref = x.sum() if d is None else x.sum(d)
        x = x.to(DEV)
        ttnn_eager.reset_stats()
        out = x.sum() if d is None else x.sum(d)
        assert (ttnn_eager.stats()["fallbacks"] == 1) == falls_back
        out = out.cpu()
        assert out.dtype == ref.dtype == torch.int64 and torch.equal(out, ref), (x.dtype, out, ref)
    products = torch.randint(0, 100, (50,)).to(DEV) * torch.randint(0, 100, (50,)).to(DEV)
    assert products.sum().item() == products.cpu().sum().item()


def test_integer_matmuls_are_exact():
    """ttnn.matmul multiplies integers as float32 on the matrix engine: at HiFi4 (the integer config, whatever
    configure() says) with operands within 1024 and sums below 2**24 the product is exact; beyond, the CPU
    fallback computes it (the default HiFi2 config gave an error of 3703 on the first case)."""
    g = torch.Generator().manual_seed(0)
    previous = ttnn_eager.configure(math_fidelity="LoFi")
    try:
        for high, k, falls_back in ((300, 64, False), (1000, 64, True), (3000, 4, True), (2, 8, False)):
            a, b = torch.randint(-high, high, (8, k), generator=g), torch.randint(-high, high, (k, 8), generator=g)
            da, db = a.to(DEV), b.to(DEV)
            ttnn_eager.reset_stats()
            out = da @ db
            assert (ttnn_eager.stats()["fallbacks"] == 1) == falls_back
            assert out.dtype == torch.int64 and torch.equal(out.cpu(), a @ b)
    finally:
        ttnn_eager.configure(**previous)


def test_mixed_devices():
    a = torch.randn(4, 4).to(DEV)
    b = torch.randn(4, 4)
    for op in (lambda: a + b, lambda: b * a, lambda: torch.matmul(a, b)):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found "
                                               "at least two devices, ttnn:0 and cpu!"):
            op()
    # a 0-d CPU tensor mixes with any device, as in PyTorch
    assert torch.allclose((a * torch.tensor(2.0)).cpu(), a.cpu() * 2)


def test_zero_dim_cpu_tensors_mix_with_every_binary_op():
    """A 0-d CPU tensor mixes with device tensors in any op, as in PyTorch: it reaches a lowering as a number
    where the lowering takes numbers (add) and as a device tensor where it does not (maximum, clamp.Tensor,
    lerp, xlogy, pow.Tensor_Tensor raised AttributeError or a ttnn TypeError)."""
    t = torch.tensor([[1.0, 5, 9], [2, 3, 4]])
    ops = {"maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow, "add": torch.add,
           "clamp": lambda a, s: a.clamp(min=s), "lerp": lambda a, s: torch.lerp(a, a * 2, s),
           "xlogy": torch.xlogy, "where": lambda a, s: torch.where(a > 3, a, s), "eq": torch.eq}
    for name, f in ops.items():
        for s in (torch.tensor(4.0), torch.tensor(3)):
            r, e = f(t.to(DEV), s), f(t, s)
            assert r.device.type == "ttnn" and r.dtype == e.dtype, name
            assert torch.allclose(r.cpu().float(), e.float(), rtol=1e-2, atol=1e-2), name
    assert torch.equal(torch.maximum(torch.tensor(4), torch.tensor([1, 7]).to(DEV)).cpu(), torch.tensor([4, 7]))


def test_int64_numbers_beyond_int32_with_integer_tensors():
    """A Python int beyond int32 in an op on integer tensors (t + 2**40, t == 2**40, masked_fill, clamp,
    index_fill, scatter) computes PyTorch's int64 answer on the CPU fallback: ttnn refused such scalars with a
    TT_FATAL, and index_fill/scatter wrote 0."""
    warnings.simplefilter("ignore")
    c = torch.tensor([[1, 5, 9], [2, 3, 4]])
    i, j = torch.tensor([0]), torch.tensor([[0], [1]])
    ops = [lambda t, d: t + 2**40, lambda t, d: t - 2**40, lambda t, d: 2**40 - t, lambda t, d: t == 2**40,
           lambda t, d: t < 2**40, lambda t, d: t.clamp(max=2**40), lambda t, d: t.masked_fill(t > 5, 2**40),
           lambda t, d: t + torch.tensor(2**40), lambda t, d: t.index_fill(1, i.to(d), 2**40),
           lambda t, d: t.scatter(1, j.to(d), 2**40), lambda t, d: torch.maximum(t, torch.tensor(2**40))]
    for k, f in enumerate(ops):
        x = c.to(DEV) * 3  # (no value bounds known)
        assert torch.equal(f(x, DEV).cpu(), f(c * 3, "cpu")), k
    assert torch.equal((torch.ones(3, device=DEV) * 2**40).cpu(), torch.ones(3) * 2**40)  # (float: no fallback)


def test_copy_between_devices_in_place():
    x = torch.zeros(2, 3).to(DEV)
    src = torch.arange(6.0).reshape(2, 3)
    x.copy_(src)
    assert torch.equal(x.cpu(), src)
    dst = torch.empty(2, 3)
    dst.copy_(x)
    assert torch.equal(dst, src)


@pytest.mark.parametrize("kind,name", [("mock-blackhole", "Blackhole p150 (mock)"),
                                       ("mock-wormhole", "Wormhole n150 (mock)")])
def test_mock_devices(kind, name):
    code = ("import torch, transformers; import ttnn_eager\n"
            "x = torch.randn(3, 70); y = x.to('ttnn:0')\n"
            "lin = torch.nn.Linear(70, 40).to('ttnn:0')\n"
            "with torch.no_grad(): out = lin(y).cpu(); ref = torch.nn.functional.linear(x, lin.weight.cpu(), lin.bias.cpu())\n"
            "print(torch.ttnn.get_device_name(), float((out - ref).abs().max()), float(ref.abs().max()))")
    r = run_python(code, env={"TTNN_EAGER_DEVICE": kind})
    assert r.returncode == 0, r.stderr[-3000:]
    line = r.stdout.strip().splitlines()[-1]
    assert line.startswith(name)
    err, scale = map(float, line[len(name):].split())
    assert err < 0.02 * scale


@pytest.mark.parametrize("kind,arch,grid,capability", [("mock-blackhole", "BLACKHOLE", (11, 10), (3, 0)),
                                                        ("mock-wormhole", "WORMHOLE_B0", (8, 8), (2, 0))])
def test_device_properties_are_what_ttnn_reports(kind, arch, grid, capability):
    code = ("import torch\np = torch.ttnn.get_device_properties('ttnn:0')\n"
            "print(p.architecture, p.core_grid, p.multi_processor_count, torch.ttnn.get_device_capability(0), "
            "p.total_memory == torch.ttnn.mem_get_info()[1], p.l1_size == p.l1_size_per_core * p.multi_processor_count, "
            "p.name == torch.ttnn.get_device_name(), p.l1_size_per_core > 1 << 20)")
    r = run_python(code, env={"TTNN_EAGER_DEVICE": kind})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == (
        f"{arch} {grid} {grid[0] * grid[1]} {capability} True True True True")


def test_device_api_signatures_match_torch_cuda():
    import inspect
    names = ["get_device_properties", "get_device_capability", "is_bf16_supported", "max_memory_allocated",
             "reset_peak_memory_stats", "reset_max_memory_allocated", "memory_allocated", "memory_reserved",
             "max_memory_reserved", "memory_stats", "memory_summary", "mem_get_info", "empty_cache", "seed",
             "seed_all", "init", "manual_seed", "manual_seed_all", "initial_seed", "get_rng_state",
             "set_rng_state", "synchronize", "device_count", "current_device", "set_device", "is_available"]
    for name in names:
        ours = inspect.signature(getattr(torch.ttnn, name)).parameters
        theirs = inspect.signature(getattr(torch.cuda, name)).parameters
        assert list(ours) == list(theirs), name
        defaults = [{"cuda": "ttnn"}.get(p.default, p.default) for p in theirs.values()]
        assert [p.default for p in ours.values()] == defaults, name


def test_peak_memory_is_sampled_from_ttnns_allocator(monkeypatch):
    """max_memory_allocated sees a peak made and freed inside a chain of ops (x * 2 + 1 holds three 32 MiB
    tensors at once); reset_peak_memory_stats restarts it from what is allocated now. The readings' time
    spacing is made endless here, so the peak is seen by the reading forced when the tally passes
    PEAK_FORCE_ELEMENTS, whatever the machine's speed (CI once missed it inside a spacing window)."""
    from ttnn_eager.device import api
    monkeypatch.setattr(api, "PEAK_READ_SPACING", 1e9)
    gc.collect()
    torch.ttnn.reset_peak_memory_stats()
    base = torch.ttnn.memory_allocated()
    assert torch.ttnn.max_memory_allocated() == base
    x = torch.randn(4096, 4096).to(DEV)            # bfloat16 on the device: 32 MiB
    one = torch.ttnn.memory_allocated() - base
    assert 32 << 20 <= one <= 1.01 * (32 << 20)
    y = x * 2 + 1                                 # x, x * 2 and the sum are live at once
    del x
    gc.collect()
    assert torch.ttnn.memory_allocated() - base == one
    assert torch.ttnn.max_memory_allocated() - base >= 3 * one
    assert torch.ttnn.max_memory_reserved() == torch.ttnn.max_memory_allocated()
    del y
    gc.collect()
    assert torch.ttnn.memory_allocated() == base == torch.ttnn.memory_reserved()
    torch.ttnn.reset_peak_memory_stats()
    assert torch.ttnn.max_memory_allocated() == base


def test_results_on_their_inputs_buffer_do_not_count_toward_the_peak_tally(monkeypatch):
    """The peak tally (device.api: when it passes PEAK_SAMPLE_ELEMENTS ttnn's allocator is read) counts what
    results allocate: a result on its input's buffer (ttnn's reshape keeping the tiles) adds nothing, a result of
    its own adds its elements."""
    from ttnn_eager.core.tensor import handle_of
    from ttnn_eager.device import api
    monkeypatch.setattr(api, "PEAK_SAMPLE_ELEMENTS", 1 << 60)  # (no reading restarts the tally in between)
    monkeypatch.setattr(api, "PEAK_FORCE_ELEMENTS", 1 << 60)
    x = torch.randn(64, 64).to(DEV)
    before = api._tally.get(0, 0)
    y = x.unsqueeze(0)
    assert handle_of(y).root is not None  # the same buffer
    assert api._tally.get(0, 0) == before
    z = x + 1
    assert handle_of(z).root is None and api._tally.get(0, 0) == before + 64 * 64


def test_memory_stats_and_summary():
    x_cpu = torch.randn(1024, 1024)
    x = x_cpu.to(DEV)
    (x + 1).cpu()  # at least one cached program
    stats = torch.ttnn.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.ttnn.memory_allocated() > 0
    assert stats["allocated_bytes.all.peak"] >= stats["allocated_bytes.all.current"]
    assert stats["dram.allocated_bytes"] + stats["l1.allocated_bytes"] == stats["allocated_bytes.all.current"]
    assert stats["dram.banks"] * stats["dram.bank_bytes"] == torch.ttnn.mem_get_info()[1]
    assert stats["allocation.all.current"] >= 1 and stats["num_ooms"] == 0
    summary = torch.ttnn.memory_summary()
    assert "dram" in summary and "l1_small" in summary and "Wormhole n150 (mock)" in summary
    torch.ttnn.empty_cache()  # frees the programs ttnn's program cache kept, and nothing of the tensors
    assert ttnn_eager.device.api.program_cache_entries(0) == 0
    assert stats["allocated_bytes.all.current"] >= torch.ttnn.memory_allocated() >= x.numel() * 2
    assert torch.equal(x.cpu(), x_cpu.to(torch.bfloat16).float())
    del x


def test_seed_init_bf16_and_default_generators():
    torch.ttnn.init()
    assert torch.ttnn.is_initialized() and torch.ttnn.is_bf16_supported()
    gens = torch.ttnn.default_generators
    assert isinstance(gens, tuple) and len(gens) == torch.ttnn.device_count()
    assert gens[0].device == torch.device(DEV)
    gens[0].manual_seed(1234)
    assert torch.ttnn.initial_seed() == 1234 == gens[0].initial_seed()
    x = torch.ones(64, 64).to(DEV)
    state = gens[0].get_state()
    first = torch.nn.functional.dropout(x, 0.5).cpu()
    gens[0].set_state(state)
    assert torch.equal(torch.nn.functional.dropout(x, 0.5).cpu(), first)
    torch.ttnn.seed()
    assert torch.ttnn.initial_seed() != 1234
    torch.ttnn.seed_all()


def test_rng_state_saves_and_restores_the_device_generator():
    """torch.ttnn.get_rng_state / set_rng_state (torch.cuda's API; torch.random.fork_rng and torch.testing
    use them): restoring a state repeats the device's dropout masks; a malformed state is refused."""
    d = torch.device("ttnn:0")
    x = torch.ones(64, 64).to(d)
    torch.manual_seed(5)
    state = torch.ttnn.get_rng_state()
    first = torch.nn.functional.dropout(x, 0.5).cpu()
    second = torch.nn.functional.dropout(x, 0.5).cpu()
    assert not torch.equal(first, second)  # the generator moved on
    torch.ttnn.set_rng_state(state)
    assert torch.equal(torch.nn.functional.dropout(x, 0.5).cpu(), first)
    torch.ttnn.set_rng_state(state)
    with torch.random.fork_rng(device_type="ttnn"):  # draws inside do not move the generator outside
        torch.nn.functional.dropout(x, 0.5)
    assert torch.equal(torch.nn.functional.dropout(x, 0.5).cpu(), first)
    torch.ttnn.set_rng_state_all(torch.ttnn.get_rng_state_all())
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.ttnn.set_rng_state(torch.zeros(3, dtype=torch.uint8))


def test_save_pretrained_from_the_device_and_reload_on_the_cpu(tmp_path):
    """model.to("ttnn:0") ... model.save_pretrained(dir) (transformers tells tied weights apart by their
    storage, which a ttnn tensor gives as its device tensor's identity): the reloaded CPU model has the
    device model's values, tied weights tied, and an untied clone is not mistaken for a tied one."""
    import transformers
    from ttnn_eager.tools import models
    model, _ = models.build("gpt2")
    dev = model.to("ttnn:0")
    with torch.no_grad():
        dev.transformer.wte.weight.mul_(2)  # a change made on the device
    assert dev.transformer.wte.weight.untyped_storage().data_ptr() == dev.lm_head.weight.untyped_storage().data_ptr()
    clone = dev.lm_head.weight.clone()
    assert clone.untyped_storage().data_ptr() != dev.lm_head.weight.untyped_storage().data_ptr()
    dev.save_pretrained(tmp_path)
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    expected = {k: v.cpu() for k, v in dev.state_dict().items()}
    got = back.state_dict()
    assert set(got) == set(expected)
    assert all(torch.equal(got[k], expected[k]) for k in expected)
    assert back.lm_head.weight is back.transformer.wte.weight


@pytest.mark.skipif(bool(__import__("glob").glob("/dev/tenstorrent/*")), reason="a card is present")
def test_hardware_without_a_card_says_what_to_set():
    r = run_python("import torch\nprint(torch.ttnn.is_available())\ntorch.ones(2).to('ttnn:0')",
                   env={"TTNN_EAGER_DEVICE": "hardware"})
    assert r.returncode != 0 and r.stdout.strip() == "False"
    assert "TTNN_EAGER_DEVICE=hardware, but no Tenstorrent card" in r.stderr
    assert "mock-wormhole" in r.stderr and "TTNN_EAGER_DEVICE=auto" in r.stderr
    assert "No chips detected" not in r.stderr  # stopped before ttnn was asked


def test_module_to_with_a_live_autograd_graph_moves_the_whole_module():
    """A CPU forward with grad enabled whose output is kept holds Conv1d.weight and LayerNorm.weight in its
    graph, so they cannot be swapped in place (.to("cuda") would move them anyway): those modules' parameters
    become new Parameters on the device, with one warning naming them; the others keep their identity, tied
    weights stay tied, nothing is left on the CPU, and the forward matches. (A backward through the old graph
    then fails for the swapped Linear: PyTorch poisons a swapped parameter's AccumulateGrad node, as with any
    swap.)"""
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(8, 8, 1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), conv, torch.nn.Flatten(1), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 16))
    model.add_module("tied", model[4])  # the same Linear twice: one module, tied
    x = torch.randn(2, 8, 2)
    out = model[1:4](model[0](x.transpose(1, 2)).transpose(1, 2))  # conv and layer norm in a live graph
    first, old_conv_weight = model[0].weight, conv.weight
    with pytest.warns(UserWarning, match=r"Conv1d.weight, Conv1d.bias, LayerNorm.weight, LayerNorm.bias could not "
                                         r"be swapped.*autograd graph.*new Parameter.*tied weights stay tied"):
        model.to(DEV)
    assert all(t.device == torch.device(DEV) for t in [*model.parameters(), *model.buffers()])
    assert model[0].weight is first and conv.weight is not old_conv_weight  # swapped / replaced
    assert model.tied.weight is model[4].weight and isinstance(conv.weight, torch.nn.Parameter)
    assert conv.weight.requires_grad
    assert old_conv_weight.device.type == "cpu"  # (what the old graph recorded)
    with torch.no_grad():
        dev = model[1:4](model[0](x.to(DEV).transpose(1, 2)).transpose(1, 2)).cpu()
    assert torch.allclose(dev, out.detach(), atol=0.05) and pcc(dev, out.detach()) > 0.999
    fresh = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    with torch.no_grad():
        kept = fresh(torch.randn(2, 8))
    ln = fresh[1].weight
    fresh.to(DEV)  # a no_grad reference holds no graph: identity kept
    assert kept.shape == (2, 8) and fresh[1].weight is ln and ln.device == torch.device(DEV)
    with pytest.raises(TypeError):  # other failures of Module._apply pass through unchanged
        fresh.to(object())
