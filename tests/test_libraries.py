"""The libraries people train with, on ttnn:0 (docs/libraries.md): the HF Trainer (through accelerate's
ACCELERATE_TORCH_DEVICE), torch.amp.GradScaler("ttnn"), fused AdamW, PEFT LoRA and Lightning, each against
the same run on the CPU, with 0 CPU fallbacks. Tiny models, a few steps each."""
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import ttnn_eager

from conftest import covers
from test_fuzz import FUZZ, check, shapes, values

DEV = "ttnn:0"
aten = torch.ops.aten


def _specials(*shape):
    """Floats with NaN, +inf and -inf among them (bfloat16-exact)."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16).float()
    flat = x.view(-1)
    flat[::7], flat[1::11], flat[2::13] = float("nan"), float("inf"), -float("inf")
    return x


# name -> (function, input sets): the lowerings this file brings (tests/test_ops.py's guard collects them)
CASES = {
    "isnan": (torch.isnan, [(_specials(3, 33),), (torch.arange(6),)]),
    "isinf": (torch.isinf, [(_specials(2, 40),), (torch.arange(6),)]),
    "isfinite": (torch.isfinite, [(_specials(5, 7),), (torch.arange(6),)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_special_value_tests_match_cpu(case):
    fn, sets = CASES[case]
    for (x,) in sets:
        with ttnn_eager.strict():
            out = fn(x.to(DEV))
        assert out.device == torch.device(DEV) and out.dtype == torch.bool
        assert torch.equal(out.cpu(), fn(x)), case


@covers(aten.isnan.default, aten.isinf.default, aten.isfinite.default)
@FUZZ
@given(shape=shapes(max_numel=5000), kind=st.sampled_from(["float", "int", "special"]), data=st.data())
def test_special_value_tests_property(shape, kind, data):
    x = values(shape, data.draw, "float" if kind == "special" else kind)
    if kind == "special":
        flat = x.view(-1)
        flat[data.draw(st.integers(0, flat.numel() - 1))] = float("inf")
        flat[::5] = float("nan")
    for fn in (torch.isnan, torch.isinf, torch.isfinite):
        check(fn, x)


# ----------------------------------------------------------------------------------------------- GradScaler
def _scaler_run(device: str, steps: int = 4, inf_step: int = 1):
    """SGD on a Linear under GradScaler (growth_interval 2), an inf in the input at `inf_step`."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(torch.device(device).type, init_scale=1024.0, growth_interval=2)
    x = torch.randn(4, 8)
    trace = []
    for step in range(steps):
        xs = x.clone()
        if step == inf_step:
            xs[0, 0] = float("inf")
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            loss = model(xs.to(device)).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        trace.append((scaler.get_scale(), scaler._get_growth_tracker(), model.weight.detach().cpu().clone()))
    return trace


def test_grad_scaler_skips_an_inf_step_and_halves_the_scale_as_on_cpu():
    """torch.amp.GradScaler("ttnn") with torch.autocast("ttnn"): the inf step leaves the weights as they
    were and halves the scale (1024 -> 512, tracker reset); two good steps double it again -- every scale
    and tracker value equal to the CPU's, weights within bfloat16 of the CPU's; no float64 on the device
    and no fallback."""
    ttnn_eager.reset_stats()
    with ttnn_eager.strict():
        dev = _scaler_run(DEV)
    assert ttnn_eager.stats()["fallbacks"] == 0
    cpu = _scaler_run("cpu")
    assert [(s, t) for s, t, _ in dev] == [(s, t) for s, t, _ in cpu] == [(1024.0, 1), (512.0, 0), (512.0, 1),
                                                                         (1024.0, 0)]
    assert torch.equal(dev[1][2], dev[0][2])  # the inf step was skipped on the device
    assert not torch.equal(dev[2][2], dev[1][2])  # and the next one was not
    for (_, _, w_dev), (_, _, w_cpu) in zip(dev, cpu):
        assert (w_dev - w_cpu).abs().max() < 0.01 * w_cpu.abs().max()


def test_grad_scaler_finite_steps_update_and_found_inf_is_zero():
    """No inf: every step updates; the per-device found_inf is a ttnn tensor holding 0."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 3).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("ttnn", init_scale=2.0 ** 16)
    loss = model(torch.randn(4, 8).to(DEV)).sum()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    (found,) = scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values()
    assert found.device == torch.device(DEV) and found.item() == 0.0
    grad = model.weight.grad.cpu()
    assert 0.1 < grad.abs().max() < 100  # unscaled (2**16 times smaller than the scaled gradient)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 16


def test_fused_adamw_matches_the_cpu_fused_kernel():
    """torch.optim.AdamW(fused=True) (the HF Trainer's default optimizer): 3 steps, then 2 from step 299 (the
    step counter stays exact past bfloat16's 256) on ttnn:0 against the CPU's fused kernel, amsgrad off
    and on, with weight decay: weights within 5% of the 5 updates' size (lr 1e-2) of the CPU's."""
    for amsgrad in (False, True):
        weights = {}
        for device in ("cpu", DEV):
            torch.manual_seed(0)
            model = torch.nn.Linear(16, 4).to(device)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, amsgrad=amsgrad, fused=True)
            x = torch.randn(8, 16).to(device)
            ttnn_eager.reset_stats()
            with ttnn_eager.strict(device != "cpu"):
                for _ in range(3):
                    model(x).pow(2).mean().backward()
                    opt.step()
                    opt.zero_grad()
                opt.state[model.weight]["step"].fill_(299.0)  # past bfloat16's exact integers (256)
                for _ in range(2):
                    model(x).pow(2).mean().backward()
                    opt.step()
                    opt.zero_grad()
            assert opt.state[model.weight]["step"].item() == 301.0
            weights[device] = model.weight.detach().cpu()
        assert ttnn_eager.stats()["fallbacks"] == 0
        assert (weights[DEV] - weights["cpu"]).abs().max() < 0.05 * 5e-2, amsgrad


# ----------------------------------------------------------------------------------------------- HF Trainer
def _tiny_bert():
    import transformers
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                                  vocab_size=256, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, num_labels=3)
    return transformers.BertForSequenceClassification(cfg)


class _Pairs(torch.utils.data.Dataset):
    def __init__(self, n=16, seq=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.ids, self.labels = torch.randint(1, 256, (n, seq), generator=g), torch.randint(0, 3, (n,), generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def _trainer_run(tmp_path, on_ttnn: bool, monkeypatch):
    from transformers import Trainer, TrainingArguments
    if on_ttnn:
        monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", DEV)
    else:
        monkeypatch.delenv("ACCELERATE_TORCH_DEVICE", raising=False)
    args = TrainingArguments(output_dir=str(tmp_path / ("ttnn" if on_ttnn else "cpu")), per_device_train_batch_size=8,
                             max_steps=5, learning_rate=1e-3, logging_steps=1, report_to=[], use_cpu=not on_ttnn,
                             dataloader_pin_memory=False, save_strategy="no", seed=0, disable_tqdm=True)
    model = _tiny_bert()
    trainer = Trainer(model=model, args=args, train_dataset=_Pairs(), eval_dataset=_Pairs(n=8, seed=1))
    ttnn_eager.reset_stats()
    trainer.train()
    fallbacks = ttnn_eager.stats()["fallbacks"]
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return args, model, trainer, losses, fallbacks


def test_hf_trainer_trains_on_ttnn_like_on_the_cpu(tmp_path, monkeypatch):
    """ACCELERATE_TORCH_DEVICE=ttnn:0: TrainingArguments picks ttnn:0, Trainer.train() runs its default
    fused AdamW there (5 steps, 0 fallbacks); the losses fall and each is within 2% of the CPU run's;
    evaluate() and save_model() work."""
    args, model, trainer, losses, fallbacks = _trainer_run(tmp_path, True, monkeypatch)
    assert args.device == torch.device(DEV)
    assert all(p.device == torch.device(DEV) for p in model.parameters())
    assert fallbacks == 0
    metrics = trainer.evaluate()
    trainer.save_model(str(tmp_path / "saved"))
    _, _, cpu_trainer, cpu_losses, _ = _trainer_run(tmp_path, False, monkeypatch)
    cpu_metrics = cpu_trainer.evaluate()
    assert len(losses) == len(cpu_losses) == 5
    assert losses[-1] < losses[0] and cpu_losses[-1] < cpu_losses[0]
    for d, c in zip(losses, cpu_losses):
        assert abs(d - c) <= 0.02 * c, (losses, cpu_losses)
    assert abs(metrics["eval_loss"] - cpu_metrics["eval_loss"]) <= 0.02 * cpu_metrics["eval_loss"]
    import transformers
    reloaded = transformers.BertForSequenceClassification.from_pretrained(str(tmp_path / "saved"))
    trained = model.bert.embeddings.word_embeddings.weight.detach().cpu()
    assert torch.allclose(reloaded.bert.embeddings.word_embeddings.weight, trained)
