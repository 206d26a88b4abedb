"""torch.autocast("ttnn") follows torch.autocast("cuda"): core/autocast.py registers CUDA's lists for the
AutocastPrivateUse1 key. Checked op by op against CPU autocast's output dtypes; where CPU's lists differ
from CUDA's, the ttnn device follows CUDA and the difference is listed here (DIFFERS_FROM_CPU)."""
import pytest
import torch
import torch.nn.functional as F

from conftest import pcc
from ttnn_eager.core import autocast as ac

DEV = "ttnn:0"
BF, F32 = torch.bfloat16, torch.float32
CUDNN_ONLY = {"_cudnn_rnn", "cudnn_convolution", "cudnn_convolution_transpose"}


def test_the_policy_is_cudas_every_op_with_an_autocast_cuda_kernel():
    cuda = set()
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        name = schema.name[len("aten::"):] + ("." + schema.overload_name if schema.overload_name else "")
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + name, "AutocastCUDA"):
                cuda.add(name)
        except RuntimeError:
            pass
    assert cuda - CUDNN_ONLY == set(ac.POLICY)
    for name in ac.POLICY:
        assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + name, "AutocastPrivateUse1"), name


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return {"a": r(8, 16), "b": r(16, 8), "v": r(16), "m3": r(2, 8, 16), "n3": r(2, 16, 8), "c": r(8, 8),
            "img": r(1, 3, 8, 8), "w2": r(4, 3, 3, 3), "seq": r(1, 3, 16), "w1": r(4, 3, 3),
            "q": r(1, 2, 8, 16), "pos": r(8, 16).abs() + 0.5, "t": torch.randint(0, 16, (8,), generator=g),
            "prob": torch.rand(8, 16, generator=g), "gw": r(16).abs(), "one": r(1).abs()}


# name -> (function of the inputs dict, which inputs are given as bfloat16)
AUTOCAST_CASES = {  # (not CASES: tests/test_ops.py collects op cases of that name from every test file)
    # lower_precision_fp: float32 inputs give bfloat16
    "mm": (lambda x: x["a"] @ x["b"], ()),
    "matmul": (lambda x: torch.matmul(x["m3"], x["n3"]), ()),
    "bmm": (lambda x: torch.bmm(x["m3"], x["n3"]), ()),
    "baddbmm": (lambda x: torch.baddbmm(x["c"].expand(2, 8, 8), x["m3"], x["n3"]), ()),
    "addmm": (lambda x: torch.addmm(x["c"], x["a"], x["b"]), ()),
    "linear": (lambda x: F.linear(x["a"], x["b"].t(), x["v"][:8]), ()),
    "conv1d": (lambda x: F.conv1d(x["seq"], x["w1"]), ()),
    "conv2d": (lambda x: F.conv2d(x["img"], x["w2"]), ()),
    "sdpa": (lambda x: F.scaled_dot_product_attention(x["q"], x["q"], x["q"]), ()),
    "einsum": (lambda x: torch.einsum("ij,jk->ik", x["a"], x["b"]), ()),
    "mv": (lambda x: torch.mv(x["a"], x["v"]), ()),
    "addmv": (lambda x: torch.addmv(x["v"][:8], x["a"], x["v"]), ()),
    "prelu": (lambda x: F.prelu(x["a"], x["one"]), ()),
    # fp32: bfloat16 inputs give float32
    "exp": (lambda x: torch.exp(x["a"]), ("a",)),
    "log": (lambda x: torch.log(x["pos"]), ("pos",)),
    "rsqrt": (lambda x: torch.rsqrt(x["pos"]), ("pos",)),
    "pow": (lambda x: torch.pow(x["a"], 2), ("a",)),
    "layer_norm": (lambda x: F.layer_norm(x["a"], (16,)), ("a",)),
    "group_norm": (lambda x: F.group_norm(x["img"], 3), ("img",)),
    "mse_loss": (lambda x: F.mse_loss(x["a"], x["prob"]), ("a", "prob")),
    "l1_loss": (lambda x: F.l1_loss(x["a"], x["prob"]), ("a", "prob")),
    "smooth_l1_loss": (lambda x: F.smooth_l1_loss(x["a"], x["prob"]), ("a", "prob")),
    "nll_loss": (lambda x: F.nll_loss(x["a"], x["t"]), ("a",)),
    "cross_entropy": (lambda x: F.cross_entropy(x["a"], x["t"]), ("a",)),
    "bce_with_logits": (lambda x: F.binary_cross_entropy_with_logits(x["a"], x["prob"]), ("a", "prob")),
    "softplus": (lambda x: F.softplus(x["a"]), ("a",)),
    "cosine_similarity": (lambda x: F.cosine_similarity(x["a"], x["prob"]), ("a", "prob")),
    "logsumexp": (lambda x: torch.logsumexp(x["a"], -1), ("a",)),
    "interpolate": (lambda x: F.interpolate(x["img"], scale_factor=2.0), ("img",)),
    # fp32_set_opt_dtype: bfloat16 inputs give float32 when no dtype is asked for
    "softmax": (lambda x: torch.softmax(x["a"], -1), ("a",)),
    "log_softmax": (lambda x: torch.log_softmax(x["a"], -1), ("a",)),
    "sum": (lambda x: x["a"].sum(), ("a",)),
    "sum_dim": (lambda x: x["a"].sum(-1), ("a",)),
    "cumsum": (lambda x: x["a"].cumsum(-1), ("a",)),
    "prod": (lambda x: x["pos"].prod(-1), ("pos",)),
    "softmax_dtype_given": (lambda x: torch.softmax(x["a"], -1, dtype=torch.bfloat16), ("a",)),
    # promote: the widest floating dtype of the inputs
    "addcmul": (lambda x: torch.addcmul(x["a"], x["prob"], x["pos"]), ("prob", "pos")),
    "atan2": (lambda x: torch.atan2(x["a"], x["prob"]), ("prob",)),
    # on neither list: the inputs' dtypes
    "add": (lambda x: x["a"] + x["prob"], ("a", "prob")),
    "gelu": (lambda x: F.gelu(x["a"]), ("a",)),
    "mixed_add": (lambda x: x["a"] + x["prob"], ("prob",)),
}
EXPECTED = {  # CUDA's rule for each case
    **dict.fromkeys(["mm", "matmul", "bmm", "baddbmm", "addmm", "linear", "conv1d", "conv2d", "sdpa", "einsum",
                     "mv", "addmv", "prelu", "softmax_dtype_given", "add", "gelu"], BF),
}
# Where CPU autocast (torch.autocast("cpu", dtype=torch.bfloat16)) gives another dtype than CUDA's lists
# (the ttnn device follows CUDA): CPU's lower-precision list lacks mv and addmv (float32 on the CPU), and its
# float32 lists lack the pointwise transcendentals, the norms, softmax/log_softmax, the reductions and
# upsampling (bfloat16 stays bfloat16 on the CPU). The losses agree.
DIFFERS_FROM_CPU = {"mv", "addmv", "exp", "log", "rsqrt", "pow", "softplus", "layer_norm", "group_norm",
                    "cosine_similarity", "logsumexp", "interpolate", "softmax", "log_softmax", "sum", "sum_dim",
                    "cumsum"}


def _run(device, name):
    fn, bf16 = AUTOCAST_CASES[name]
    x = {k: (v.to(BF) if k in bf16 else v).to(device) for k, v in _inputs().items()}
    with torch.no_grad(), torch.autocast(torch.device(device).type, dtype=BF):
        return fn(x)


@pytest.mark.parametrize("name", sorted(AUTOCAST_CASES))
def test_output_dtype_as_cuda_autocast(name):
    out = _run(DEV, name)
    assert out.device == torch.device(DEV)
    assert out.dtype == EXPECTED.get(name, F32)
    cpu = _run("cpu", name)
    assert (cpu.dtype != out.dtype) == (name in DIFFERS_FROM_CPU), (name, cpu.dtype, out.dtype)
    got, want = out.cpu().float(), cpu.float()
    if want.numel() == 1:
        assert abs(float(got) - float(want)) <= 0.02 * abs(float(want)) + 1e-3
    else:
        assert pcc(got, want) > 0.99


def test_autocast_training_step_gives_float32_gradients():
    """Under autocast the linear layers compute in bfloat16 and the loss in float32; autograd casts the
    gradients back, so the float32 parameters get float32 gradients, as on CUDA."""
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    dev = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    x, t = torch.randn(8, 16), torch.randint(0, 4, (8,))
    losses = {}
    for name, model, device in (("cpu", cpu, "cpu"), ("ttnn", dev, DEV)):
        with torch.autocast(torch.device(device).type, dtype=BF):
            hidden = model[0](x.to(device))
            loss = F.cross_entropy(model(x.to(device)), t.to(device))
        assert hidden.dtype == BF and loss.dtype == F32
        loss.backward()
        losses[name] = float(loss)
        assert all(p.grad.dtype == F32 and p.grad.device == torch.device(device) for p in model.parameters())
    assert abs(losses["ttnn"] - losses["cpu"]) < 0.02 * abs(losses["cpu"])
    for p, q in zip(cpu.parameters(), dev.parameters()):
        assert pcc(q.grad.cpu(), p.grad) > 0.98


def test_binary_cross_entropy_is_refused_under_autocast_as_on_cuda():
    p, t = torch.rand(4, 3).to(DEV), torch.rand(4, 3).to(DEV)
    with torch.autocast("ttnn", dtype=BF), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(p, t)
    assert F.binary_cross_entropy(p, t).dtype == F32  # outside autocast it runs
