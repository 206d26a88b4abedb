"""Soak (issue 23, item 8), short: one process runs a handful of different models in a row (tools/soak.py;
`benchmarks/soak.py` runs the ~100-model loop). After each model is deleted (and ttnn's program cache
emptied), DRAM, L1 and L1_SMALL are back at their baseline, no device tensor of it is alive, and the first
model run again at the end gives the same output. Also: module.to() of a model holding extra references to
its parameters (torchvision's VisionTransformer class_token) keeps them the same objects, now on the device.
"""
import os

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("torchvision")
pytest.importorskip("transformers")

from conftest import pcc  # noqa: E402
from ttnn_eager.tools import soak  # noqa: E402

DEV = "ttnn:0"


def test_a_short_soak_returns_the_device_to_its_baseline_after_every_model():
    # a BERT, a ViT (class token, patch convolution), SqueezeBERT (grouped conv1d); then BERT again
    entries = ["hf:bert", "tv:vit_tiny@32", "hf:squeezebert"]
    result = soak.soak(entries, warmup=False)
    rows = result["rows"]
    assert [r["model"] for r in rows] == entries + entries[:1]
    for r in rows:
        assert "error" not in r, r
        assert r["shape_ok"] and r["pcc"] >= 0.999, (r["model"], r["pcc"])
        assert r["leaked"] == {} and r["leaked_tensors"] == 0, (r["model"], r["leaked"], r["leaked_tensors"])
    assert rows[2]["fallbacks"] == 0  # SqueezeBERT's grouped conv1d runs on the device
    assert result["last_equals_first"]
    assert result["baseline"] == soak.memory()


def test_module_to_keeps_extra_references_to_parameters():
    """torchvision's VisionTransformer; with a wrapper-subclass tensor PyTorch had to swap parameters and
    `model.to("ttnn:0")` failed with "Couldn't swap VisionTransformer.cls_token" while anything held one."""
    model, inputs = soak.build("tv:vit_tiny@32")
    token, kept = model.class_token, [model.class_token, model.encoder.pos_embedding]
    model.extra = kept  # a second holder of both parameters
    with torch.no_grad():
        ref = model(**inputs)
        model.to(DEV)
        assert model.class_token is token and kept[0] is token and kept[1] is model.encoder.pos_embedding
        assert token.device == torch.device(DEV) and isinstance(token, torch.nn.Parameter)
        out = model(**{k: v.to(DEV) for k, v in inputs.items()}).cpu()
    assert pcc(out, ref) >= 0.999
    model.to("cpu")
    assert model.class_token is token and token.device.type == "cpu"


def test_the_soak_sees_a_device_tensor_that_outlives_its_model():
    """The leak check can fail: a device tensor kept alive across runs (here by the report callback) shows up
    in the next row as DRAM above the baseline and a live device tensor."""
    kept = []

    def keep(row):
        if not kept:
            kept.append(torch.ones(64, 64).to(DEV))
    result = soak.soak(["hf:bert"], warmup=False, report=keep)
    first, last = result["rows"]
    assert first["leaked"] == {} and first["leaked_tensors"] == 0
    assert last["leaked"].get("DRAM", 0) >= 64 * 64 * 2 and last["leaked_tensors"] == 1, last["leaked"]
    del kept[:]
    assert soak.memory() == result["baseline"]
