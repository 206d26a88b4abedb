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
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_special_value_tests_match_cpu(case):
    fn, sets = CASES[case]
    for (x,) in sets:
        with ttnn_eager.strict():
            out = fn(x.to(DEV))
        assert out.device == torch.device(DEV) and out.dtype == torch.bool
        assert torch.equal(out.cpu(), fn(x)), case


@covers(aten.isnan.default, aten.isinf.default)
@FUZZ
@given(shape=shapes(max_numel=5000), kind=st.sampled_from(["float", "int", "special"]), data=st.data())
def test_special_value_tests_property(shape, kind, data):
    """isnan and isinf (lowered), isfinite (PyTorch's composite of lowered ops) against the CPU."""
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
                             save_strategy="no", seed=0, disable_tqdm=True)  # pinning on: the default
    model = _tiny_bert()
    trainer = Trainer(model=model, args=args, train_dataset=_Pairs(), eval_dataset=_Pairs(n=8, seed=1))
    ttnn_eager.reset_stats()
    trainer.train()
    fallbacks = ttnn_eager.stats()["fallbacks"]
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return args, model, trainer, losses, fallbacks


def test_hf_trainer_trains_on_ttnn_like_on_the_cpu(tmp_path, monkeypatch):
    """ACCELERATE_TORCH_DEVICE=ttnn:0 and otherwise default TrainingArguments (dataloader_pin_memory=True: the
    batches come pinned, from the device's host allocator): TrainingArguments picks ttnn:0, Trainer.train() runs its default
    fused AdamW there (5 steps, 0 fallbacks); the losses fall and each is within 2% of the CPU run's;
    evaluate() and save_model() work."""
    args, model, trainer, losses, fallbacks = _trainer_run(tmp_path, True, monkeypatch)
    assert args.device == torch.device(DEV) and args.dataloader_pin_memory  # the default: batches pinned
    assert trainer.get_train_dataloader().pin_memory  # (accelerate's loader hands batches over on ttnn:0)
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


# ----------------------------------------------------------------------------------------------- PEFT LoRA
def _lora_run(device: str):
    import transformers
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    model = get_peft_model(transformers.LlamaForCausalLM(cfg),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    g = torch.Generator().manual_seed(1)
    for name, p in model.named_parameters():
        if "lora_B" in name:  # PEFT starts B at zero; a seeded B makes step 1's A gradient non-zero too
            torch.nn.init.normal_(p, std=0.02, generator=g)
    model.to(device)
    before = {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0)).to(device)
    losses = []
    ttnn_eager.reset_stats()
    with ttnn_eager.strict(device != "cpu"):
        for _ in range(3):
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    changed = sorted(n for n, p in model.named_parameters() if not torch.equal(p.detach().cpu(), before[n]))
    return losses, changed, ttnn_eager.stats()["fallbacks"]


def test_peft_lora_on_a_llama_model_trains_only_the_adapters_like_the_cpu():
    """PEFT LoRA (r=4 on q_proj/v_proj) of a 1-layer Llama, AdamW, 3 steps in strict mode: 0 fallbacks;
    exactly the 4 adapter matrices change (the base weights stay bit-identical); losses fall and are within
    1% of the CPU's."""
    losses, changed, fallbacks = _lora_run(DEV)
    cpu_losses, cpu_changed, _ = _lora_run("cpu")
    assert fallbacks == 0
    assert changed == cpu_changed and len(changed) == 4 and all(".lora_" in n for n in changed)
    assert losses[-1] < losses[0] and cpu_losses[-1] < cpu_losses[0]
    for d, c in zip(losses, cpu_losses):
        assert abs(d - c) <= 0.01 * c, (losses, cpu_losses)


# ----------------------------------------------------------------------------------------------- Lightning
def _lightning_run(on_ttnn: bool):
    import lightning as L
    from ttnn_eager.features.libraries import register_lightning
    register_lightning()

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 3))
            self.losses, self.devices_seen = [], set()

        def training_step(self, batch, index):
            x, y = batch
            self.devices_seen |= {x.device, next(self.parameters()).device}
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            self.losses.append(loss.detach())
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.5)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(8, 16, generator=g), torch.randint(0, 3, (8,), generator=g))
    module = Tiny()
    trainer = L.Trainer(accelerator="ttnn" if on_ttnn else "cpu", strategy="single_ttnn" if on_ttnn else "auto",
                        devices=1, max_steps=5, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    ttnn_eager.reset_stats()
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=8))
    return trainer, module, [v.item() for v in module.losses], ttnn_eager.stats()["fallbacks"]


def test_lightning_fits_on_ttnn_like_on_the_cpu():
    """lightning.Trainer(accelerator="ttnn", strategy="single_ttnn"): fit runs its 5 steps with the batch
    and the module on ttnn:0, 0 fallbacks; the losses fall and are within 2% of the CPU fit's."""
    from ttnn_eager.features.libraries.lightning import TTNNAccelerator
    trainer, module, losses, fallbacks = _lightning_run(True)
    assert isinstance(trainer.accelerator, TTNNAccelerator) and trainer.strategy.root_device == torch.device(DEV)
    assert module.devices_seen == {torch.device(DEV)} and fallbacks == 0
    _, _, cpu_losses, _ = _lightning_run(False)
    assert len(losses) == len(cpu_losses) == 5 and losses[-1] < 0.8 * losses[0]
    for d, c in zip(losses, cpu_losses):
        assert abs(d - c) <= 0.02 * c, (losses, cpu_losses)
