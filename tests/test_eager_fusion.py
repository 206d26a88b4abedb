"""Eager fusion (issue 36, item 2; lowerings/conv.py "eager fusion", base.Handle.pending): with autograd not
recording, a convolution's result is deferred until its first reader, so that an eval batch norm and a
ReLU/ReLU6/SiLU reading it fold into one ttnn.conv2d, and a residual add + activation becomes one ttnn.add.
Every other reader (read twice, a view, an in-place op, .cpu(), a forward hook, a parameter written in between)
gets PyTorch's values; training and the switch off run op by op."""
import copy

import pytest
import torch
import torch.nn as nn

import ttnn_eager
from ttnn_eager import counters

from conftest import pcc, run_python

DEV = "ttnn:0"


@pytest.fixture(autouse=True)
def _fusion_on():
    previous = ttnn_eager.configure(eager_fusion=True)
    yield
    ttnn_eager.configure(**previous)


def _seeded(model: nn.Module) -> nn.Module:
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.rand(c, generator=g) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
                m.weight.copy_(torch.rand(c, generator=g) + 0.5)
                m.bias.copy_(torch.rand(c, generator=g) - 0.5)
    return model.eval()


def _block(activation, kernel=3, groups=1, c=64, o=64):
    torch.manual_seed(0)
    o = c if groups > 1 else o
    return _seeded(nn.Sequential(nn.Conv2d(c, o, kernel, padding=kernel // 2, groups=groups, bias=groups > 1),
                                 nn.BatchNorm2d(o), activation))


def _x(c=64, size=16, batch=1):
    return torch.randn(batch, c, size, size, generator=torch.Generator().manual_seed(3))


def _forward(model, x):
    """model(x) on the device (the second forward: weights prepared), its TT-NN ops by op (the input's and the
    result's layout changes among them: a permute and a reshape each)."""
    with torch.no_grad():
        model(x).cpu()
        ttnn_eager.reset_stats()
        out = model(x).cpu()
    return out, dict(counters.ttnn_by_op)


def _close(got, want, tol=0.03):
    assert got.shape == want.shape
    assert pcc(got, want) >= 0.999
    assert float((got - want).abs().max()) <= tol * max(1.0, float(want.abs().max()))


@pytest.mark.parametrize("activation", [nn.ReLU(inplace=True), nn.ReLU(), nn.ReLU6(inplace=True), nn.SiLU()],
                         ids=["relu_", "relu", "relu6", "silu"])
@pytest.mark.parametrize("kernel", [3, 1])
def test_conv_bn_activation_is_one_conv2d(activation, kernel):
    model = _block(activation, kernel)
    x = _x()
    with torch.no_grad():
        want = model(x)
    got, by_op = _forward(copy.deepcopy(model).to(DEV), x.to(DEV))
    _close(got, want)
    compute = {k: v for k, v in by_op.items() if k not in ("permute", "reshape", "to_layout", "slice")}
    if kernel == 3:  # one conv2d, the norm folded into its weight and bias, the activation its own
        assert compute == {"conv2d": 1}, by_op
    else:  # a small 1x1 convolution: a linear of the folded packed kernel and bias row (two slices); relu6 after
        assert by_op["slice"] == 2, by_op
        assert compute == ({"linear": 1, "relu6": 1} if isinstance(activation, nn.ReLU6) else {"linear": 1}), by_op
    previous = ttnn_eager.configure(eager_fusion=False)  # the switch off: conv, bn (multiply, add), activation
    try:
        off, by_off = _forward(copy.deepcopy(model).to(DEV), x.to(DEV))
    finally:
        ttnn_eager.configure(**previous)
    _close(off, want)
    assert sum(by_off.values()) > 1 and "multiply" in by_off, by_off


def test_a_small_kernel_is_not_folded_into_conv2d():
    """A 3-channel stem's kernel is smaller than the prepared bias the fold would add (layout.folds_into_conv2d):
    it runs unfused (conv2d, the norm's multiply and add, the activation), with PyTorch's values."""
    model = _block(nn.ReLU(), 3, c=3, o=16)
    x = _x(c=3)
    with torch.no_grad():
        want = model(x)
    got, by_op = _forward(copy.deepcopy(model).to(DEV), x.to(DEV))
    _close(got, want)
    assert by_op["conv2d"] == 1 and by_op["multiply"] == 1 and by_op["relu"] == 1, by_op


def test_depthwise_conv_bn_relu6_folds_into_the_taps():
    model = _block(nn.ReLU6(inplace=True), 3, groups=64)
    x = _x()
    with torch.no_grad():
        want = model(x)
    got, by_op = _forward(copy.deepcopy(model).to(DEV), x.to(DEV))
    _close(got, want)
    # the taps' one multiply and sum; no batch norm (multiply, add) nor clamp: the relu6 rides on the bias row's add
    assert by_op["mul"] == 1 and by_op["add"] == 1 and "multiply" not in by_op and "clamp" not in by_op, by_op


def _parts(model, x):
    conv, bn, act = model
    return conv, bn, act


@pytest.mark.parametrize("reader", ["twice", "view", "inplace", "cpu", "hook", "input_written",
                                    "weight_written", "stats_written", "print"])
def test_a_deferred_result_read_elsewhere_keeps_pytorchs_values(reader):
    """The convolution's result y also read by something else than the batch norm (before or after the fused
    consumer used it), or its inputs written in between: every value is PyTorch's."""
    model = _block(nn.ReLU())
    x = _x()
    cpu, dev = model, copy.deepcopy(model).to(DEV)

    def run(m, x):
        conv, bn, act = m
        seen = []
        if reader == "hook":
            conv.register_forward_hook(lambda mod, inp, out: seen.append(out * 3))
        y = conv(x)
        if reader == "input_written":
            x.add_(1.0)  # after the convolution read it: the deferred one must see the old x
        if reader == "weight_written":
            conv.weight.mul_(2.0)
        if reader == "view":
            seen.append(y[:, 3:9].clone())
        z = bn(y)
        if reader == "stats_written":
            bn.running_var.mul_(3.0)
        z = act(z)
        if reader == "twice":
            seen.append(y * 2)
        if reader == "inplace":
            y.mul_(-1.0)
            seen.append(y + 0)
        if reader == "cpu":
            seen.append(y.cpu())
        if reader == "print":
            assert "tensor(" in repr(y)
        return [z, y, *seen]

    with torch.no_grad():
        want = run(cpu, x.clone())
        got = run(dev, x.to(DEV))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _close(g.cpu(), w)


def test_training_and_grad_mode_are_unchanged():
    """bn.train() (running statistics updated) and autograd recording: no deferral -- the same ops as with the
    switch off, the CPU's values and gradients."""
    model = _block(nn.ReLU())
    x = _x(batch=2)

    def step(m, x, train):
        m.train(train)
        m.zero_grad()
        out = m(x)
        out.square().sum().backward()
        return out, [p.grad for p in m.parameters()], m[1].running_mean.clone()

    for train in (True, False):
        want = step(copy.deepcopy(model), x, train)
        ops = {}
        for fusion in (True, False):
            previous = ttnn_eager.configure(eager_fusion=fusion)
            try:
                dev = copy.deepcopy(model).to(DEV)
                ttnn_eager.reset_stats()
                got = step(dev, x.to(DEV), train)
                ops[fusion] = dict(counters.ttnn_by_op)
            finally:
                ttnn_eager.configure(**previous)
            _close(got[0].cpu(), want[0])
            for g, w in zip(got[1], want[1]):
                assert pcc(g.cpu(), w) >= 0.999
            _close(got[2].cpu(), want[2])
        assert ops[True] == ops[False]


def test_residual_add_and_relu_is_one_add():
    """A bottleneck's tail: conv -> bn, += identity, relu (torchvision's in-place ops) is one conv2d and one add."""
    model = _block(nn.Identity())
    x = _x()
    identity = torch.randn(1, 64, 16, 16, generator=torch.Generator().manual_seed(5))
    _seeded(model)

    def tail(m, x, identity):
        out = m(x)
        out += identity
        return torch.relu_(out)

    with torch.no_grad():
        want = tail(model, x, identity)
        dev, dx, di = copy.deepcopy(model).to(DEV), x.to(DEV), identity.to(DEV)
        tail(dev, dx, di).cpu()
        ttnn_eager.reset_stats()
        got = tail(dev, dx, di).cpu()
    _close(got, want)
    compute = {k: v for k, v in counters.ttnn_by_op.items() if k not in ("permute", "reshape", "to_layout")}
    assert compute == {"conv2d": 1, "add": 1}, dict(counters.ttnn_by_op)


def test_an_unread_deferred_result_holds_no_device_memory():
    """A deferred result is a computation, not a buffer: until read it takes no device memory; read, it does."""
    from ttnn_eager.core.tensor import handle_of
    from ttnn_eager.device import api
    model = copy.deepcopy(_block(nn.ReLU())).to(DEV)
    x = _x(size=64).to(DEV)
    with torch.no_grad():
        model(x).cpu()
        before = api.memory_used(0, "DRAM")
        z = model(x)
        h = handle_of(z)
        assert h.pending is not None and api.memory_used(0, "DRAM") == before
        z.cpu()
        assert h.pending is None and api.memory_used(0, "DRAM") > before


def test_synchronize_and_graph_capture_compute_deferred_values_first():
    """torch.ttnn.synchronize() waits for deferred work too; a graph capture computes a value deferred before it
    first (its convolution is not recorded: the replay is the captured region's own op)."""
    from ttnn_eager.core.tensor import handle_of
    model = copy.deepcopy(_block(nn.ReLU())).to(DEV)
    x = _x()
    with torch.no_grad():
        want = _block(nn.ReLU())(x)
        dx = x.to(DEV)
        z = model(dx)
        assert handle_of(z).pending is not None
        torch.ttnn.synchronize()
        assert handle_of(z).pending is None
        z = model(dx)
        g = torch.ttnn.TTNNGraph()
        with torch.ttnn.graph(g):
            w = z * 2.0
        assert handle_of(z).pending is None
        ttnn_eager.reset_stats()
        g.replay()
        assert dict(counters.ttnn_by_op) == {"multiply": 1}, dict(counters.ttnn_by_op)
    _close(w.cpu(), want * 2)


def test_the_switch():
    """configure(eager_fusion=) takes a bool; TTNN_EAGER_FUSION=0 turns it off for a process (on by default)."""
    with pytest.raises(TypeError, match="eager_fusion"):
        ttnn_eager.configure(eager_fusion="no")
    # config.py alone (it imports only the standard library): a fresh process reads the variable at import
    code = ("import importlib.util as u; s = u.spec_from_file_location('config', %r); m = u.module_from_spec(s); "
            "s.loader.exec_module(m); print(m.settings['eager_fusion'])" % ttnn_eager.config.__file__)
    assert run_python(code, {"TTNN_EAGER_FUSION": "0"}).stdout.strip() == "False"
    assert run_python(code, {"TTNN_EAGER_FUSION": ""}).stdout.strip() == "True"


def test_a_deferred_handle_is_computed_at_its_first_read_and_an_overwrite_drops_it():
    """Handle.tt/.shadow are plain slots, unset while deferred: any read of either computes the value first
    (once), and a value written over a deferred handle is kept (its deferred run never happens)."""
    from ttnn_eager.device import api
    x = torch.randn(2, 3).to(DEV)
    source = api.Handle(object(), torch.ones(2, 3), torch.float32, (2, 3), 0)
    runs = []

    class Pending:
        def run(self):
            runs.append(1)
            return source

    h = api.Handle(None, None, torch.float32, (2, 3), 0).defer(Pending())
    assert h.pending is not None and h in api.DEFERRED
    assert h.shadow is source.shadow and h.tt is source.tt and len(runs) == 1
    assert h.pending is None and h not in api.DEFERRED
    h2 = api.Handle(None, None, torch.float32, (2, 3), 0).defer(Pending())
    mine = object()
    h2.tt = mine  # an overwrite without a read
    assert h2.tt is mine and h2.shadow is None and h2.pending is None and len(runs) == 1
    h3 = api.Handle(None, None, torch.float32, (2, 3), 0).defer(Pending())
    h3.assign(ttnn_eager.core.tensor.handle_of(x))
    assert h3.pending is None and h3.tt is ttnn_eager.core.tensor.handle_of(x).tt and len(runs) == 1
    with pytest.raises(AttributeError):
        h.no_such_attribute
