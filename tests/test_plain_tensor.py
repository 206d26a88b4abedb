"""A ttnn tensor is a plain PrivateUse1 torch.Tensor whose device value is found through its storage
(core/tensor.py): aliases PyTorch makes in C++, torch.compile, what PyTorch would allocate in C++, identity."""
import copy
import io

import pytest
import torch

import ttnn_eager
from conftest import pcc
from ttnn_eager.core.tensor import handle_of, is_ttnn, new_tensor  # noqa: F401

DEV = "ttnn:0"


def test_a_ttnn_tensor_is_a_plain_tensor():
    x = torch.randn(3, 4).to(DEV)
    assert type(x) is torch.Tensor and x.device == torch.device(DEV)
    assert isinstance(x, ttnn_eager.TtnnTensor) and not isinstance(torch.ones(1), ttnn_eager.TtnnTensor)
    assert x.untyped_storage().nbytes() == 48 and x.untyped_storage().data_ptr() != 0
    with pytest.raises(TypeError, match="not a tensor class"):
        ttnn_eager.TtnnTensor(x)


@pytest.mark.parametrize("make", [
    lambda x: x.detach(),
    lambda x: x.data,
    lambda x: torch.ops.aten.alias(x),
    lambda x: x.as_strided((2, 3), (1, 4), 1),
    lambda x: x.t().detach(),
    lambda x: x[1:].detach(),
    lambda x: x.view(torch.int32),
], ids=["detach", "data", "alias", "as_strided", "detach_of_t", "detach_of_slice", "view_dtype"])
def test_aliases_made_in_cpp_find_their_value_through_the_storage(make):
    cpu = torch.randn(3, 4)
    dev = cpu.to(DEV)
    a, ref = make(dev), make(cpu)
    assert a.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    if ref.dtype == torch.int32:  # the bit pattern of the device's stored float32 (bfloat16 by default)
        assert a.shape == ref.shape
        return
    torch.testing.assert_close(a.cpu(), ref, atol=0.02, rtol=0.01)


def test_writes_through_a_cpp_alias_reach_the_base():
    cpu = torch.arange(12.0).reshape(3, 4)
    dev = cpu.to(DEV)
    dev.as_strided((2, 2), (1, 4), 1).mul_(-1)
    cpu.as_strided((2, 2), (1, 4), 1).mul_(-1)
    dev.detach()[0].add_(100)
    cpu.detach()[0].add_(100)
    assert torch.equal(dev.cpu(), cpu)


@pytest.mark.parametrize("make", [
    lambda x: x.transpose(0, 2), lambda x: x.permute(1, 2, 0), lambda x: x[1:3, :, 2], lambda x: x.view(24, 8),
    lambda x: x.unsqueeze(1), lambda x: x.select(1, 3), lambda x: x.transpose(0, 1).reshape(6, 32),
    lambda x: x.transpose(-1, 0), lambda x: x.permute(-1, 0, 1), lambda x: x.view(-1, 8), lambda x: x.unsqueeze(-1),
    lambda x: x[:, 1:5:2], lambda x: x[:, -3:], lambda x: x.narrow(2, 1, 3), lambda x: x.select(-1, -2),
    lambda x: x[2], lambda x: x[0].t(), lambda x: x.view(4, 6, 2, 4).transpose(1, 2).transpose(1, 2),
    lambda x: x[:, 1:4].transpose(0, 1)[1],
], ids=["transpose", "permute", "slice", "view", "unsqueeze", "select", "reshape_of_transpose", "transpose_negative",
        "permute_negative", "view_inferred", "unsqueeze_last", "slice_step", "slice_negative", "narrow",
        "select_negative", "index", "t", "transpose_of_transpose_of_view", "select_of_transpose_of_slice"])
def test_view_op_results_are_pytorchs_aliases_and_write_through(make):
    """A view op's result (made by the C++ part: csrc/tensor.cpp's alias, from the geometry dispatch computes) is
    the alias PyTorch makes: the base's storage, PyTorch's sizes, strides and offset, autograd's _base and one
    version counter with the base; a write through it reaches the base and a write into the base is seen
    through it. (Small integers: exact in bfloat16, the default storage of float32.)"""
    torch.manual_seed(0)
    cpu = torch.randint(-8, 8, (4, 6, 8)).float()
    dev = cpu.to(DEV)
    a, ref = make(dev), make(cpu)
    if ref._base is None:  # (a view of a non-contiguous tensor that copies: reshape's rule, not an alias)
        assert a.untyped_storage().data_ptr() != dev.untyped_storage().data_ptr()
        assert torch.equal(a.cpu(), ref)
        return
    assert a.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr() and a._base is dev
    assert (a.shape, a.stride(), a.storage_offset()) == (ref.shape, ref.stride(), ref.storage_offset())
    assert torch.equal(a.cpu(), ref)
    version = dev._version
    a.mul_(2)
    ref.mul_(2)
    assert dev._version == a._version == version + 1
    assert torch.equal(dev.cpu(), cpu)
    dev.sub_(1)
    cpu.sub_(1)
    assert torch.equal(a.cpu(), ref)


def test_view_ops_errors_and_empty_slices_are_pytorchs():
    """The forms the C++ geometry leaves to the Python way (dispatch._g_*, the meta kernel) give PyTorch's errors;
    empty slices and expands are PyTorch's aliases."""
    cpu = torch.randint(-8, 8, (4, 6, 8)).float()
    dev = cpu.to(DEV)
    with pytest.raises(RuntimeError, match=r"shape '\[5, 7\]' is invalid for input of size 192"):
        dev.view(5, 7)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        dev.transpose(0, 1).view(24, 8)
    for make in (lambda x: x[:, 2:2], lambda x: x[:, 10:], lambda x: x[:, :1].expand(4, 6, 8),
                 lambda x: x[0, :1].expand(3, 6, 8), lambda x: x[:, :, :1].expand(-1, -1, 5)):
        a, ref = make(dev), make(cpu)
        assert (a.shape, a.stride(), a.storage_offset()) == (ref.shape, ref.stride(), ref.storage_offset())
        assert torch.equal(a.cpu(), ref)


def test_the_cpp_handle_lookup_finds_what_the_python_one_finds():
    """csrc/tensor.cpp's handle() (tensor.maybe_handle) and the Python lookup it leaves the other cases to
    (tensor._maybe_handle) give the same Handle: base, Parameter, views seen or not, dtype views, other objects."""
    from ttnn_eager.core import tensor
    assert tensor.maybe_handle is not tensor._maybe_handle  # (the C++ one)
    dev = torch.randint(-8, 8, (4, 6)).float().to(DEV)
    param = torch.nn.Parameter(torch.randn(3, 4).to(DEV))
    seen = dev.transpose(0, 1)  # its view Handle stored by the view op
    unseen = dev.as_strided((2, 3), (1, 6), 1)  # made in C++ without the dispatcher: derived on first lookup
    for x in (dev, param, seen, unseen, dev.view(torch.int32), dev[1:3], dev.detach()):
        h = tensor.maybe_handle(x)
        assert h is not None and h is tensor._maybe_handle(x)
        assert tuple(h.shape) == tuple(x.shape)
    assert tensor.maybe_handle(dev) is tensor.maybe_handle(dev.detach())  # the same geometry: the base Handle
    for other in (torch.ones(2), 3, 2.5, None, [dev], "x", torch.device(DEV)):
        assert tensor.maybe_handle(other) is None and tensor._maybe_handle(other) is None


def test_the_cpp_zero_size_check_is_the_python_one():
    from ttnn_eager.core import dispatch
    dev, empty, cpu_empty = torch.ones(2, 3).to(DEV), torch.ones(0, 3).to(DEV), torch.ones(0)
    for args in ((dev, 1), (empty,), (dev, empty), ([dev, empty], 0), ((dev, dev), 1), ([0, 1],), (cpu_empty,),
                 ([cpu_empty],), ([],), (dev[:, 3:],), (torch.nn.Parameter(empty),), ()):
        assert dispatch._has_empty(args) is dispatch._has_empty_py(args), args
    assert dispatch._has_empty((empty,)) and not dispatch._has_empty((dev, cpu_empty))


def test_plain_keyword_arguments_reach_the_lowering():
    """Keyword arguments holding no tensor (sdpa's scale, contiguous's memory_format) go to the lowering as
    they are (dispatch: no _Call); the values are PyTorch's."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 32, 16) for _ in range(3))
    out = torch.nn.functional.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), scale=0.3)
    assert pcc(out.cpu(), torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.3)) > 0.999
    cpu = torch.randint(-8, 8, (2, 3, 4)).float()
    c = cpu.to(DEV).transpose(1, 2).contiguous()
    assert c.is_contiguous() and torch.equal(c.cpu(), cpu.transpose(1, 2).contiguous())
    assert torch.equal(cpu.to(DEV).clone(memory_format=torch.contiguous_format).cpu(), cpu)


def test_an_alias_beyond_its_storage_is_pytorchs_error():
    """The C++ alias checks the geometry against the storage as as_strided does, with PyTorch's message."""
    from ttnn_eager.core import tensor
    dev = torch.randn(3, 4).to(DEV)
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 48"):
        tensor.alias(dev, (5, 5), (5, 1), 0)
    assert tensor.alias(dev, (2, 2), (1, 4), 1).stride() == (1, 4)


def test_expand_and_stride_zero_views():
    cpu = torch.randn(4, 1)
    dev = cpu.to(DEV)
    e = dev.expand(4, 3)
    assert e.stride() == (1, 0)
    torch.testing.assert_close(e.cpu(), cpu.expand(4, 3), atol=0.02, rtol=0.01)
    torch.testing.assert_close((e * 2).cpu(), cpu.expand(4, 3) * 2, atol=0.04, rtol=0.01)


def test_compile_aot_eager_fullgraph_on_ttnn_tensors():
    torch.manual_seed(0)
    x, w, b = torch.randn(32, 64), torch.randn(64, 32), torch.randn(32)

    def f(x, w, b):
        return torch.nn.functional.gelu(x @ w + b).softmax(-1) * 3 + x[:, :32].t().sum(0)

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    out = compiled(x.to(DEV), w.to(DEV), b.to(DEV))
    ref = f(x, w, b)
    assert out.device == torch.device(DEV)
    assert pcc(out.cpu(), ref) >= 0.999
    assert float((out.cpu() - ref).abs().max()) < 0.1


def test_compile_aot_eager_training_step():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))
    ref = copy.deepcopy(m)
    m.to(DEV)
    x = torch.randn(8, 32)
    torch._dynamo.reset()
    step = torch.compile(lambda x: m(x).pow(2).mean(), backend="aot_eager", fullgraph=True)
    loss = step(x.to(DEV))
    loss.backward()
    rloss = ref(x).pow(2).mean()
    rloss.backward()
    assert abs(float(loss.cpu()) - float(rloss)) < 0.02 * abs(float(rloss)) + 1e-3
    g, rg = m[0].weight.grad, ref[0].weight.grad
    assert g.device == torch.device(DEV) and pcc(g.cpu(), rg) >= 0.99


def test_storage_allocation_on_the_device_is_refused_cleanly():
    """What PyTorch would allocate in C++ on the device (a Python backend has no allocator: the process would
    die) is an error or done in Python."""
    with pytest.raises(RuntimeError, match="cannot be allocated"):
        torch.UntypedStorage(64, device=DEV)
    with pytest.raises(RuntimeError, match="cannot be allocated"):
        torch.UntypedStorage(64, device="ttnn")
    x = torch.randn(4, 4).to(DEV)
    s = x.untyped_storage()
    for call in (lambda: s.resize_(0), lambda: s.resize_(128), lambda: s.share_memory_(), lambda: s.fill_(0),
                 lambda: s.copy_(torch.ones(16).untyped_storage())):
        with pytest.raises(RuntimeError, match="not supported on a ttnn storage"):
            call()
    c = s.clone()  # copy.deepcopy's path: made in Python
    assert c.data_ptr() != s.data_ptr() and c.nbytes() == s.nbytes()
    assert torch.equal(torch.frombuffer(bytearray(bytes(s.cpu())), dtype=torch.float32), x.cpu().flatten())
    y = copy.deepcopy(x)
    assert torch.equal(y.cpu(), x.cpu()) and y.untyped_storage().data_ptr() != s.data_ptr()


def test_resize_and_out_into_an_empty_tensor():
    a, b = torch.randn(3, 5), torch.randn(3, 5)
    out = torch.empty(0, device=DEV)
    r = torch.add(a.to(DEV), b.to(DEV), out=out)
    assert r is out and out.shape == (3, 5)
    torch.testing.assert_close(out.cpu(), a + b, atol=0.05, rtol=0.01)


def test_module_to_keeps_identity_and_ties_and_saves():
    m = torch.nn.Module()
    m.a, m.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    m.b.weight = m.a.weight
    held = m.a.weight
    m.to(DEV)
    assert held is m.a.weight and m.a.weight is m.b.weight and held.device == torch.device(DEV)
    assert not torch.__future__.get_swap_module_params_on_conversion()  # set only during the conversion
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    assert sd["a.weight"].device == torch.device(DEV)  # saved as its CPU value, rebuilt on its device
    torch.testing.assert_close(sd["a.weight"].cpu(), m.a.weight.detach().cpu())
    m.to("cpu")
    assert held is m.a.weight and held.device.type == "cpu" and m.a.weight is m.b.weight


def test_mark_static_address_pins_the_storage_handle():
    x = torch.zeros(4, 32).to(DEV)
    torch._dynamo.mark_static_address(x)
    x.add_(1)
    assert handle_of(x).pinned and torch.equal(x.cpu(), torch.ones(4, 32))
