"""Vision fusions under torch.compile (issue 36, item 2; features/compile/vision.py, lowerings/conv.py's fused
ops): convolution + eval batch norm + activation as one ttnn.conv2d (the norm folded into the prepared weight and
bias, the activation given to conv2d), residual add + activation as one ttnn.add. Each pattern against the
unfused graph (on the CPU through the fused ops' meanings, and on the device), the fused ops against their CPU
meaning, and the TT-NN ops of a compiled ResNet."""
import copy

import pytest
import torch
import torch.nn.functional as F

import ttnn_eager
import ttnn_eager.lowerings  # noqa: F401  (defines the fused ops)
from ttnn_eager import counters
from ttnn_eager.features.compile import passes

from conftest import covers, pcc

DEV = "ttnn:0"
ops = torch.ops.ttnn_eager


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape)))


def _bn_args(c: int):
    g = torch.Generator().manual_seed(c)
    return (torch.rand(c, generator=g) + 0.5, torch.rand(c, generator=g) - 0.5, torch.rand(c, generator=g) * 0.2 - 0.1,
            torch.rand(c, generator=g) + 0.5)


# (tests/test_ops.py's lowering guard runs every file's CASES on the device)
CASES = {
    "conv_bn_act": (lambda x, w, b, bw, bb, m, v: ops.conv_bn_act(x, w, b, [1, 1], [1, 1], [1, 1], 1, bw, bb, m, v,
                                                                  1e-5, "relu"),
                    [[_r(1, 16, 32, 32), _r(32, 16, 3, 3) * 0.2, _r(32), *_bn_args(32)]]),
    "add_act": (lambda a, b: ops.add_act(a, b, "relu"), [[_r(2, 32, 16, 16), _r(2, 32, 16, 16, seed=1)]]),
}


@covers(ops.conv_bn_act.default, ops.add_act.default)
@pytest.mark.parametrize("activation", [None, "relu", "relu6", "silu"])
@pytest.mark.parametrize("kernel, stride, groups", [(3, 1, 1), (1, 1, 1), (3, 2, 1), (3, 1, 16)])
def test_fused_ops_match_their_cpu_meaning(activation, kernel, stride, groups):
    """conv_bn_act on an NCHW input and on a channels-last one (a convolution's result), every activation, the
    fused route (conv2d) and the unfused ones (a 1x1 convolution's packed matmul, depthwise taps)."""
    torch.manual_seed(0)
    c = 16
    x, w0 = _r(2, c, 32, 32), _r(c, c, 3, 3) * 0.2
    w, b = _r(32, c // groups, kernel, kernel) * 0.3, _r(32)
    if groups > 1:
        w = _r(c, 1, kernel, kernel) * 0.3
        b = _r(c)
    bn = _bn_args(w.shape[0])
    args = ([stride] * 2, [kernel // 2] * 2, [1, 1], groups)
    want = ops.conv_bn_act(F.conv2d(x, w0, padding=1), w, b, *args, *bn, 1e-5, activation)
    scale = float(ops.conv_bn_act(F.conv2d(x, w0, padding=1), w, b, *args, *bn, 1e-5, None).abs().max())
    dx, dw0, dw, db = (t.to(DEV) for t in (x, w0, w, b))
    dbn = [t.to(DEV) for t in bn]
    with torch.no_grad(), ttnn_eager.strict():
        for inp in (F.conv2d(dx, dw0, padding=1), F.conv2d(dx, dw0, padding=1).contiguous() * 1.0):
            got = ops.conv_bn_act(inp, dw, db, *args, *dbn, 1e-5, activation)
            assert got.shape == want.shape
            assert pcc(got.cpu(), want) >= 0.999
            assert float((got.cpu() - want).abs().max()) <= 0.03 * scale  # (of the values before the activation)
    if activation is not None:
        a, r = _r(2, 32, 16, 16), _r(2, 32, 16, 16, seed=3)
        with torch.no_grad(), ttnn_eager.strict():
            got = ops.add_act(a.to(DEV), r.to(DEV), activation)
        assert pcc(got.cpu(), ops.add_act(a, r, activation)) >= 0.999


def _aten_graph(fn, *args):
    from torch._functorch.aot_autograd import aot_function
    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return gm
    with torch.no_grad():
        aot_function(fn, fw_compiler=keep)(*[a.to(DEV) for a in args])
    return graphs[0], copy.deepcopy(graphs[0])


def _bn(y, bw, bb, m, v):
    return F.batch_norm(y, m, v, bw, bb, False, 0.0, 1e-5)


PATTERNS = {  # name -> (fn, shapes, {pass: rewrites})
    "conv_bn_relu": (lambda x, w, bw, bb, m, v: torch.relu(_bn(F.conv2d(x, w, padding=1), bw, bb, m, v)),
                     [(1, 16, 32, 32), (32, 16, 3, 3), (32,), (32,), (32,), (32,)], {"conv_bn_act": 1}),
    "conv_bn_silu": (lambda x, w, bw, bb, m, v: F.silu(_bn(F.conv2d(x, w, stride=2), bw, bb, m, v)),
                     [(1, 16, 32, 32), (32, 16, 1, 1), (32,), (32,), (32,), (32,)], {"conv_bn_act": 1}),
    "conv_bn_relu6": (lambda x, w, bw, bb, m, v: F.relu6(_bn(F.conv2d(x, w, padding=1), bw, bb, m, v)),
                      [(1, 16, 32, 32), (32, 16, 3, 3), (32,), (32,), (32,), (32,)], {"conv_bn_act": 1}),
    # ResNet's block end: conv -> bn -> (+ identity) -> relu: conv_bn_act without activation, then add_act
    "conv_bn_add_relu": (lambda x, w, bw, bb, m, v: torch.relu(_bn(F.conv2d(x, w, padding=1), bw, bb, m, v) + x),
                         [(1, 16, 32, 32), (16, 16, 3, 3), (16,), (16,), (16,), (16,)],
                         {"conv_bn_act": 1, "add_act": 1}),
}


def _args(shapes):
    torch.manual_seed(0)
    args = [torch.randn(s) for s in shapes]
    args[1] = args[1] * 0.2
    args[5] = args[5].abs() + 0.5  # a variance
    return args


@pytest.mark.parametrize("name", list(PATTERNS))
def test_each_vision_pattern_computes_what_the_unfused_graph_did(name):
    fn, shapes, want = PATTERNS[name]
    args = _args(shapes)
    gm, fused = _aten_graph(fn, *args)
    done = passes.run(fused)
    assert {k: v for k, v in done.items() if v} == want, done
    targets = [str(n.target) for n in fused.graph.nodes if n.op == "call_function"]
    assert not any("convolution" in t or "batch_norm" in t for t in targets), targets
    with torch.no_grad():
        torch.testing.assert_close(fused(*args)[0], gm(*args)[0], atol=1e-4, rtol=1e-4)
        with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
            got = fused(*[a.to(DEV) for a in args])[0]
        ref = gm(*args)[0]
    assert pcc(got.cpu(), ref) >= 0.999
    assert rec.ttnn["conv2d"] + rec.ttnn.get("linear", 0) == 1 and "multiply" not in rec.ttnn, dict(rec.ttnn)


def test_a_convolution_read_elsewhere_is_not_fused():
    args = _args(PATTERNS["conv_bn_relu"][1])
    gm, fused = _aten_graph(lambda x, w, bw, bb, m, v: (lambda y: (torch.relu(_bn(y, bw, bb, m, v)), y * 2))(
        F.conv2d(x, w, padding=1)), *args)
    assert passes.run(fused)["conv_bn_act"] == 0


def test_compiled_resnet_is_one_ttnn_op_per_convolution_and_residual():
    """A ResNet of four bottlenecks (torchvision's blocks, seeded random statistics) at 96x96, compiled: every
    convolution one conv2d (its batch norm and ReLU in it), every residual add one add (its ReLU in it)."""
    torchvision = pytest.importorskip("torchvision")
    from torchvision.models.resnet import Bottleneck, ResNet
    torch.manual_seed(0)
    model = ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
    x = torch.randn(1, 3, 96, 96, generator=g)
    with torch.no_grad():
        ref = copy.deepcopy(model)(x)
    f = torch.compile(model.to(DEV), backend="ttnn")
    dx = x.to(DEV)
    with torch.no_grad():
        for _ in range(3):  # eager, captured, replayed
            ttnn_eager.reset_stats()
            out = f(dx)
    by_op = dict(counters.ttnn_by_op)
    assert pcc(out.cpu(), ref) >= 0.999
    assert ttnn_eager.stats()["graph_replays"] == 1 and ttnn_eager.stats()["fallbacks"] == 0
    convs = sum(isinstance(m, torch.nn.Conv2d) for m in model.modules())  # 17
    assert by_op["conv2d"] == convs and by_op["add"] == 4, by_op
    # besides: the input's permute and reshape, the max pool, the mean of the channels-last pixels (its [N, C, 1, 1]
    # result made NCHW for the flatten: a reshape), the flatten (reshape), the classifier
    assert sum(by_op.values()) == convs + 4 + 7, by_op
