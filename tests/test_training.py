"""Training on ttnn:0 (docs/training.md): backward ops, losses, dropout, clip_grad_norm_ and optimizers on the
device, against float32 PyTorch on the CPU; the precision policy for trainable parameters; bad input as on
the CPU. Tiny configs: bert-base figures are measured once by benchmarks/training.py."""
import copy
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import ttnn_eager
from ttnn_eager import counters

from conftest import covers, pcc
from test_fuzz import FUZZ, check, shapes, values

DEV = "ttnn:0"
aten = torch.ops.aten


# ----------------------------------------------------------------------------------------------- helpers
def tiny_bert(dropout: float = 0.0, seed: int = 0):
    import transformers
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=256, vocab_size=512, max_position_embeddings=64,
                                  hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, num_labels=3)
    return transformers.BertForSequenceClassification(cfg)


def batch(seed: int = 0, n: int = 4, seq: int = 32, vocab: int = 512, classes: int = 3):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, vocab, (n, seq), generator=g), torch.randint(0, classes, (n,), generator=g)


def train(model, device: str, steps: int, ids, labels, make_opt, clip=None, on_step=None):
    """`steps` steps on one batch; returns the losses (loss.item() is the one transfer a step makes)."""
    model = model.to(device)
    opt = make_opt(model.parameters())
    ids, labels = ids.to(device), labels.to(device)
    losses = []
    for step in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        if on_step is not None:
            on_step(step, model)
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip[0], foreach=clip[1])
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def grads_of(model) -> dict:
    return {n: p.grad.detach().cpu().float() for n, p in model.named_parameters() if p.grad is not None}


# ----------------------------------------------------------------------------------------------- the acceptance loop
def check_grads(dev: dict, cpu: dict) -> None:
    """Every parameter's gradient Pearson >= 0.99 against the CPU's. A gradient that is zero analytically
    (attention's key bias: softmax ignores a per-row shift) is rounding noise on both sides; it must stay
    noise (below 1e-5 of the largest gradient) instead."""
    assert set(cpu) == set(dev) and len(cpu) > 30
    scale = max(g.norm().item() for g in cpu.values())
    for name, g in cpu.items():
        if g.norm() < 1e-6 * scale:
            assert dev[name].norm() < 1e-5 * scale, name
        else:
            assert pcc(dev[name], g) >= 0.99, (name, pcc(dev[name], g))


def test_bert_fine_tuning_matches_cpu_with_no_fallback_and_one_transfer_a_step():
    """BertForSequenceClassification, AdamW, dropout off, strict mode: 0 fallbacks; a step transfers only
    loss.item() to the host (and uploads nothing: the batch is on the device); loss per step within 2% of
    the CPU float32 run; after step 1 every parameter's gradient has Pearson >= 0.99 against the CPU's."""
    cpu_model = tiny_bert()
    dev_model = copy.deepcopy(cpu_model)
    ids, labels = batch()
    make_opt = lambda ps: torch.optim.AdamW(ps, lr=1e-3)  # noqa: E731
    cpu_grads, dev_grads, per_step = {}, {}, []
    cpu_losses = train(cpu_model, "cpu", 5, ids, labels, make_opt,
                       on_step=lambda s, m: s == 0 and cpu_grads.update(grads_of(m)))
    with ttnn_eager.strict():
        model = dev_model.to(DEV)
        opt = make_opt(model.parameters())
        d_ids, d_labels = ids.to(DEV), labels.to(DEV)
        dev_losses = []
        for step in range(5):
            before = dict(counters.counts)
            loss = model(input_ids=d_ids, labels=d_labels).loss
            loss.backward()
            opt.step()
            if step == 0:
                per_step.append({k: counters.counts[k] - before[k] for k in ("device_to_host", "host_to_device")})
                dev_grads.update(grads_of(model))  # (downloads, after the step's count)
                before = dict(counters.counts)
            opt.zero_grad()
            dev_losses.append(loss.item())
            if step:
                per_step.append({k: counters.counts[k] - before[k] for k in ("device_to_host", "host_to_device")})
    expected = [{"device_to_host": 0, "host_to_device": 0}] + [{"device_to_host": 1, "host_to_device": 0}] * 4
    assert per_step == expected, per_step  # step 1's loss.item() is read after its count
    for c, d in zip(cpu_losses, dev_losses):
        assert abs(d - c) <= 0.02 * abs(c), (cpu_losses, dev_losses)
    assert cpu_losses[-1] < cpu_losses[0] and dev_losses[-1] < dev_losses[0]
    check_grads(dev_grads, cpu_grads)


# ----------------------------------------------------------------------------------------------- optimizers
def mlp(dropout: float = 0.0, seed: int = 0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(24, 64), torch.nn.LayerNorm(64), torch.nn.GELU(),
                               torch.nn.Dropout(dropout), torch.nn.Linear(64, 5))


def mlp_steps(model, device, make_opt, steps=3, clip=None, seed=1):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(16, 24, generator=g), torch.randint(0, 5, (16,), generator=g)
    model = model.to(device)
    opt = make_opt(model.parameters())
    x, y = x.to(device), y.to(device)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip[0], foreach=clip[1])
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return model, losses


OPTIMIZERS = {
    "sgd_momentum": lambda ps, fe: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01, foreach=fe),
    "adam": lambda ps, fe: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.01, foreach=fe),
    "adamw": lambda ps, fe: torch.optim.AdamW(ps, lr=1e-2, foreach=fe),
}


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_match_cpu_on_the_device(name, foreach):
    """SGD (momentum), Adam and AdamW, per-tensor and foreach (_foreach_* ops), with clip_grad_norm_ on its
    foreach / per-tensor path: strict mode (nothing on the CPU); losses within 2% and each parameter's total
    update after 3 steps with Pearson >= 0.99 against the CPU's."""
    make = lambda ps: OPTIMIZERS[name](ps, foreach)  # noqa: E731
    cpu, cpu_losses = mlp_steps(mlp(), "cpu", make, clip=(0.5, foreach))
    with ttnn_eager.strict():
        dev, dev_losses = mlp_steps(mlp(), DEV, make, clip=(0.5, foreach))
    assert max(abs(a - b) for a, b in zip(cpu_losses, dev_losses)) <= 0.02 * abs(cpu_losses[0])
    init = mlp().state_dict()
    for (n, p), q in zip(cpu.named_parameters(), dev.parameters()):  # the updates (Adam's flip sign where a
        assert pcc(q.detach().cpu() - init[n], p.detach() - init[n]) >= 0.99, n  # gradient is ~0: Pearson)


def test_clip_grad_norm_total_norm_and_scaled_gradients():
    """clip_grad_norm_ returns the total norm (a device tensor) and scales the gradients, both paths."""
    for foreach in (False, True):
        cpu, dev = mlp(), mlp().to(DEV)
        x = torch.randn(8, 24)
        for m, xx in ((cpu, x), (dev, x.to(DEV))):
            m(xx).square().sum().backward()
        ref = torch.nn.utils.clip_grad_norm_(cpu.parameters(), 0.1, foreach=foreach)
        with ttnn_eager.strict():
            got = torch.nn.utils.clip_grad_norm_(dev.parameters(), 0.1, foreach=foreach)
        assert got.device.type == "ttnn" and abs(got.item() - ref.item()) <= 0.01 * ref.item()
        for p, q in zip(cpu.parameters(), dev.parameters()):
            assert pcc(q.grad.cpu(), p.grad) >= 0.999
            assert abs(q.grad.cpu().norm() - p.grad.norm()) <= 0.02 * p.grad.norm() + 1e-6


# ----------------------------------------------------------------------------------------------- precision policy
def test_trainable_parameters_and_optimizer_states_are_float32_on_the_device(restore_config):
    """train_dtype="float32" (default): an update of 1e-4 on weights near 1 (below bfloat16's 2^-8 step) is
    kept; the parameters and Adam's states are float32 on the device. train_dtype="bfloat16" loses it."""
    from ttnn_eager import device_api as api

    def run(train_dtype):
        ttnn_eager.configure(train_dtype=train_dtype)
        w = torch.nn.Parameter(torch.ones(32, 32) + torch.arange(32.0) / 64).to(DEV)
        w = torch.nn.Parameter(w)
        opt = torch.optim.SGD([w], lr=1e-4)
        for _ in range(3):
            (w * torch.ones(32, 32, device=DEV)).sum().backward()
            opt.step()
            opt.zero_grad()
        return w
    w = run("float32")
    assert w._handle.tt_dtype == api.FLOAT32
    expected = torch.ones(32, 32) + torch.arange(32.0) / 64 - 3e-4
    assert (w.detach().cpu() - expected).abs().max().item() < 1e-6
    m = mlp().to(DEV)
    opt = torch.optim.Adam(m.parameters())
    m(torch.randn(4, 24, device=DEV)).sum().backward()
    opt.step()
    state = opt.state[m[0].weight]
    assert state["exp_avg"]._handle.tt_dtype == api.FLOAT32 and state["exp_avg_sq"]._handle.tt_dtype == api.FLOAT32
    assert m[0].weight._handle.tt_dtype == api.FLOAT32
    lost = run("bfloat16")
    assert lost._handle.tt_dtype == api.BFLOAT16
    assert (lost.detach().cpu() - expected).abs().max().item() > 1e-4  # the updates rounded away


def test_inference_storage_is_unchanged_by_the_training_policy():
    """Until a parameter is updated it keeps its upload storage: a model moved for inference is bfloat16."""
    from ttnn_eager import device_api as api
    m = mlp().to(DEV)
    with torch.no_grad():
        m(torch.randn(4, 24, device=DEV))
    assert all(p._handle.tt_dtype == api.BFLOAT16 for p in m.parameters())
