"""Text generation on ttnn:0 against float32 PyTorch on the CPU: the lowerings generate() needs (search,
math, bitwise), greedy decoding equal to the CPU's tokens, per-token transfers, the family forwards, bad
input. Tiny seeded configs from ttnn_eager.tools.models."""
import copy
import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ttnn_eager
from ttnn_eager.tools import models

from conftest import covers, pcc

DEV = "ttnn:0"
aten = torch.ops.aten
FUZZ = settings(max_examples=10, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def distinct(*shape, seed=0):
    """Values with no ties, exact in bfloat16 (multiples of 1/8 up to 32): argmax/sort/topk are then
    defined by the values alone."""
    g = torch.Generator().manual_seed(seed)
    n = shape[-1]
    rows = [torch.randperm(n, generator=g) for _ in range(math.prod(shape[:-1]))]
    return ((torch.stack(rows).reshape(shape).float() - n / 2) / (8 if n <= 256 else 1)).contiguous()


def bf(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(torch.bfloat16).float()


def ints(*shape, lo=0, hi=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g)


def check(fn, *inputs, atol=0.02):
    ref = fn(*inputs)
    with ttnn_eager.strict():
        out = fn(*[x.to(DEV) if isinstance(x, torch.Tensor) else x for x in inputs])
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o, r in zip(outs, refs):
        assert o.device.type == "ttnn" and o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype, o.shape, r.shape)
        got = o.cpu()
        if r.dtype.is_floating_point:
            assert torch.allclose(got, r, atol=atol * max(r.abs().max().item(), 1.0), rtol=0.02), (got - r).abs().max()
        else:
            assert torch.equal(got, r), (got, r)


# name -> (function, [input tuples]); the lowering guards (tests/test_ops.py) gather these
CASES = {
    "cos_sin": (lambda x: torch.stack([x.cos(), x.sin()]), [(bf(1, 40, 32) * 4,), (bf(7),)]),
    "minimum_maximum": (lambda a, b: torch.stack([torch.minimum(a, b), torch.maximum(a, b)]),
                        [(bf(3, 33), bf(33)), (bf(2, 1, 5), bf(4, 1))]),
    "minimum_int": (lambda a, b: torch.minimum(a, b), [(ints(5, 7), ints(7, hi=5))]),
    "tril_triu": (lambda x: torch.stack([x.tril(), x.triu(1), x.tril(-2)]), [(bf(2, 40, 40),), (bf(5, 3),)]),
    "tril_bool": (lambda m: m.tril(), [(torch.ones(9, 9, dtype=torch.bool),)]),
    "argmax": (lambda x: (x.argmax(-1), x.argmax(1, keepdim=True), x.argmax()), [(distinct(2, 3, 40),)]),
    "argmin": (lambda x: x.argmin(-1), [(distinct(4, 33),)]),
    "max_min": (lambda x: (x.max(), x.min()), [(bf(3, 33),), (ints(4, 5, lo=-9),)]),
    "max_min_dim": (lambda x: (*x.max(-1), *x.min(0, keepdim=True)), [(distinct(5, 33),)]),
    "topk": (lambda x: torch.topk(x, 5), [(distinct(2, 100),), (distinct(3, 33),)]),
    "topk_smallest": (lambda x: torch.topk(x, 3, largest=False), [(distinct(2, 40),)]),
    "sort": (lambda x: (*torch.sort(x), *torch.sort(x, descending=True)), [(distinct(2, 64),)]),
    "sort_stable": (lambda x: torch.sort(x, stable=True, dim=-1), [(distinct(3, 33),)]),
    "isin": (lambda a, b: (torch.isin(a, b), torch.isin(a, b, invert=True)), [(ints(3, 7), ints(3, seed=1))]),
    "bitwise_xor": (lambda a, b: (a ^ b, aten.bitwise_xor.Scalar(a, 5)), [(ints(4, 33, hi=64), ints(33, hi=64))]),
    "int_and_bool": (lambda i, m: (i & m, i | m, i ^ m), [(ints(2, 33, hi=2), ints(2, 33, hi=2, seed=2) > 0)]),
    "logical_xor": (lambda a, b: torch.logical_xor(a, b), [(bf(3, 33), bf(3, 33).round())]),
    "multinomial": (lambda p: torch.multinomial(p, 1), [(torch.softmax(bf(3, 50) * 3, -1),)]),
    "log_softmax": (lambda x: torch.log_softmax(x, -1), [(bf(3, 500),), (bf(2, 5, 33),)]),
    "floor_divide_remainder": (lambda a, b: (a // 7, a % 7, a // b, a % b, torch.remainder(a, -3),
                                             aten.floor_divide.Scalar(a, 3)),
                               [(ints(4, 33, lo=-90, hi=1500), ints(33, lo=1, hi=9))]),
    "remainder_float": (lambda x: torch.remainder(x, 0.75), [(bf(3, 33) * 4,)]),
    "constant_pad_nd": (lambda x: torch.nn.functional.pad(x, (0, 1)), [(bf(1, 500),), (bf(2, 3, 40),)]),
    "index_select": (lambda x, i: (x.index_select(0, i), x.index_select(2, i)), [(bf(3, 4, 5, 33), ints(3, hi=3))]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_cpu(name):
    fn, sets = CASES[name]
    for inputs in sets:
        torch.manual_seed(0)  # multinomial: one seed for both devices
        ref = fn(*inputs)
        torch.manual_seed(0)
        with ttnn_eager.strict():
            out = fn(*[x.to(DEV) for x in inputs])
        refs = ref if isinstance(ref, tuple) else (ref,)
        outs = out if isinstance(out, tuple) else (out,)
        for o, r in zip(outs, refs):
            assert o.dtype == r.dtype and o.shape == r.shape, (name, o.dtype, r.dtype, o.shape, r.shape)
            got = o.cpu()
            if r.dtype.is_floating_point:
                assert (got - r).abs().max() <= 0.02 * max(r.abs().max().item(), 1.0), name
            else:
                assert torch.equal(got, r), (name, got, r)


# ----------------------------------------------------------------------------------------------- properties
@covers(aten.cos.default, aten.sin.default, aten.minimum.default, aten.maximum.default, aten.tril.default,
        aten.triu.default)
@FUZZ
@given(rows=st.sampled_from([1, 2, 31, 33]), cols=st.sampled_from([1, 5, 32, 40]),
       diagonal=st.integers(-3, 3), seed=st.integers(0, 999))
def test_math_ops(rows, cols, diagonal, seed):
    x, y = bf(rows, cols, seed=seed) * 4, bf(cols, seed=seed + 1)
    check(lambda a: torch.stack([a.cos(), a.sin()]), x)
    check(lambda a, b: torch.stack([torch.minimum(a, b), torch.maximum(b, a)]), x, y)
    check(lambda a, b: torch.minimum(a, b), x.long(), y.long())
    check(lambda a: torch.stack([a.tril(diagonal), a.triu(diagonal)]), x)


@covers(aten.argmax.default, aten.argmin.default, aten.max.default, aten.min.default, aten.max.dim,
        aten.min.dim, aten.topk.default, aten.sort.default, aten.sort.stable)
@FUZZ
@given(lead=st.sampled_from([(), (1,), (3,), (2, 2)]), n=st.sampled_from([2, 31, 33, 100, 256]),
       k=st.integers(1, 8), descending=st.booleans(), seed=st.integers(0, 999))
def test_search_ops(lead, n, k, descending, seed):
    x = distinct(*lead, n, seed=seed)
    k = min(k, n)
    d = len(lead)
    check(lambda a: (a.argmax(-1), a.argmin(-1), a.argmax(), a.max(), a.min()), x)
    check(lambda a: (*a.max(-1, keepdim=True), *a.min(0)), x)
    check(lambda a: torch.topk(a, k, largest=not descending), x)
    check(lambda a: (*torch.sort(a, descending=descending), *torch.sort(a, stable=True, dim=d)), x)


@covers(aten.isin.Tensor_Tensor)
@FUZZ
@given(n=st.sampled_from([1, 3, 40]), m=st.sampled_from([1, 2, 33]), invert=st.booleans(), seed=st.integers(0, 99))
def test_isin(n, m, invert, seed):
    check(lambda a, b: torch.isin(a, b, invert=invert), ints(2, n, hi=60, seed=seed), ints(m, hi=60, seed=seed + 1))


@covers(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.logical_xor.default)
@FUZZ
@given(shape=st.sampled_from([(1,), (3, 33), (2, 1, 40)]), seed=st.integers(0, 999))
def test_bitwise_and_logical_mixed(shape, seed):
    i, j = ints(*shape, hi=100, seed=seed), ints(*shape, lo=-50, hi=50, seed=seed + 1)
    b = ints(*shape, hi=2, seed=seed + 2) > 0
    check(lambda x, y, m: (x ^ y, x & m, y | m, x ^ m, aten.bitwise_xor.Scalar(x, 3), m ^ True), i, j, b)
    check(lambda x, y, m: (torch.logical_xor(x, y), torch.logical_and(x.float(), m), torch.logical_or(y, m)),
          i, j, b)


@covers(aten._log_softmax.default, aten.floor_divide.default, aten.floor_divide.Scalar, aten.remainder.Scalar,
        aten.remainder.Tensor, aten.index_select.default)
@FUZZ
@given(rows=st.sampled_from([1, 3, 6]), n=st.sampled_from([2, 33, 500]), divisor=st.sampled_from([1, 3, 500, -7]),
       seed=st.integers(0, 999))
def test_beam_search_ops(rows, n, divisor, seed):
    """What beam search computes each step: log-probabilities, the beam (index // vocab) and the token
    (index % vocab) of each candidate, and the cache reordered by beam."""
    check(lambda x: torch.log_softmax(x, -1), bf(rows, n, seed=seed) * 4)
    i = ints(rows, n, lo=-2000, hi=3000, seed=seed)
    check(lambda a, b: (a // divisor, a % divisor, a // b, a % b, aten.floor_divide.Scalar(a, divisor)),
          i, ints(n, lo=1, hi=50, seed=seed + 1))
    beams = ints(rows, hi=rows, seed=seed + 2)
    check(lambda x, j: (x.index_select(0, j), x.index_select(1, j)), bf(rows, rows, n, seed=seed), beams)


@covers(aten.multinomial.default)
@FUZZ
@given(rows=st.sampled_from([1, 2, 4]), n=st.sampled_from([5, 33, 200]), samples=st.sampled_from([1, 3]),
       seed=st.integers(0, 999))
def test_multinomial_samples_what_the_cpu_samples(rows, n, samples, seed, restore_config):
    """PyTorch's own algorithm with host-drawn noise: under one seed the device draws the CPU's samples
    (float32 storage, where p / noise is computed exactly)."""
    ttnn_eager.configure(float32_storage="float32")
    p = torch.softmax(bf(rows, n, seed=seed) * 2, -1)
    for gen in (None, 7):
        def draw(probs):
            g = torch.Generator().manual_seed(gen) if gen is not None else None
            torch.manual_seed(seed)
            return torch.multinomial(probs, samples, generator=g)
        check(draw, p)


def test_multinomial_with_replacement_falls_back_with_a_count():
    p = torch.softmax(bf(2, 9), -1).to(DEV)
    with ttnn_eager.record_ops() as rec, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = torch.multinomial(p, 4, replacement=True)
    assert out.shape == (2, 4) and rec.fallbacks == {"aten.multinomial.default": 1}


def test_finfo_min_mask_stays_finite_under_bfloat16_storage():
    """torch.finfo(float32).min (attention masks) saturates to bfloat16's largest finite value instead of
    -inf: a fully masked softmax row is uniform, as on the CPU, not NaN."""
    mask = torch.tensor([[True, False, False], [False, False, False]])
    lo = torch.finfo(torch.float32).min
    fn = lambda m, s: torch.softmax(s + torch.where(m, torch.zeros(()), lo), -1)  # noqa: E731
    scores = bf(2, 3)
    ref = fn(mask, scores)
    out = fn(mask.to(DEV), scores.to(DEV)).cpu()
    assert not out.isnan().any() and torch.allclose(out, ref, atol=0.01)


# ----------------------------------------------------------------------------------------------- generate()
def _greedy(name, tokens, storage, restore_config, cache="dynamic"):
    ttnn_eager.configure(float32_storage=storage)
    model, fam = models.build(name)
    ids = models.prompt_ids(model.config.vocab_size)
    return models.compare_generate(model, ids, max_new_tokens=tokens, cache=cache, strict=True)


def test_llama_greedy_32_tokens_equals_the_cpu_in_float32(restore_config):
    """Rotary embeddings, RMSNorm, SwiGLU, grouped-query attention; DynamicCache; strict mode (no CPU op);
    one device-to-host read per generated token (the stopping check), no upload. Exact with the float32
    shadow (shadow_numerics="exact"): the hardware model cuts float32 matmul operands to TF32 as the Tensix
    matrix engine does (docs/numerics.md), and then tokens agree only up to near-ties."""
    ttnn_eager.configure(shadow_numerics="exact")
    r = _greedy("llama", 32, "float32", restore_config)
    assert r["new_tokens"] == 32 and r["exact"], (r["tokens"], r["cpu_tokens"])
    assert r["min_step_logits_pearson"] > 0.99999 and r["steps_compared"] == 32
    assert r["totals"]["fallbacks"] == 0
    assert r["per_token"]["device_to_host"] == 1 and r["per_token"]["host_to_device"] == 0


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_llama_greedy_with_mixed_storage_and_hifi4(cache, restore_config):
    """float32_storage="mixed" (bfloat16 parameters, float32 activations and KV cache) with HiFi4 matmuls, the
    hardware numerics model: the CPU's 16 tokens in strict mode, every step's logits >= 0.99998 (the tiny
    Llama's logits nearly tie: at the default HiFi2 they part at token 14, docs/numerics.md)."""
    ttnn_eager.configure(math_fidelity="HiFi4")
    r = _greedy("llama", 16, "mixed", restore_config, cache=cache)
    assert r["new_tokens"] == 16 and r["exact"], (r["tokens"], r["cpu_tokens"])
    assert r["min_step_logits_pearson"] >= 0.99998 and r["totals"]["fallbacks"] == 0


@pytest.mark.parametrize("name", ["gpt2", "qwen3", "t5"])
def test_greedy_bfloat16(name, restore_config):
    """Default bfloat16 storage: the tokens agree with the CPU until logits nearly tie; every step's
    logits (up to and including the first differing token) correlate >= 0.999."""
    r = _greedy(name, 12, "bfloat16", restore_config)
    assert r["new_tokens"] == 12 and r["totals"]["fallbacks"] == 0
    assert r["min_step_logits_pearson"] >= 0.999, r["min_step_logits_pearson"]
    assert r["token_agreement"] >= 0.25 and r["tokens"][0][0] == r["cpu_tokens"][0][0]
    assert r["per_token"]["device_to_host"] == 1


FORWARD = ["gpt2", "llama", "qwen2", "phi", "phi3", "opt", "gemma", "gemma2", "bart"]


@pytest.mark.parametrize("name", FORWARD)
def test_family_forward(name):
    model, fam = models.build(name)
    with ttnn_eager.strict():
        r = models.compare_forward(model, fam)
    assert r["pearson"] >= 0.999 and r["fallbacks"] == {}, r


# ----------------------------------------------------------------------------------------------- bad input
def test_prompt_longer_than_the_positions_is_refused_naming_what_to_do():
    model, _ = models.build("gpt2")  # 256 learned positions
    dev = copy.deepcopy(model).to(DEV)
    ids = models.prompt_ids(model.config.vocab_size, length=300)
    with pytest.raises(ValueError, match="longer than the model's 256 positions: shorten the prompt"):
        models.compare_generate(model, ids, max_new_tokens=2, on_device=dev)
    with pytest.raises(IndexError, match="index out of range"), torch.no_grad():  # as on the CPU
        dev.generate(ids.to(DEV), max_new_tokens=2, do_sample=False, pad_token_id=0)


def test_cache_on_another_device_is_refused():
    import transformers
    model, _ = models.build("llama")
    dev = copy.deepcopy(model).to(DEV)
    ids = models.prompt_ids(model.config.vocab_size)
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values  # made on the CPU
        assert isinstance(cache, transformers.DynamicCache)
        with pytest.raises(RuntimeError, match="same device"):
            dev.generate(ids.to(DEV), past_key_values=cache, max_new_tokens=2, do_sample=False, pad_token_id=0)


# ----------------------------------------------------------------------------------------------- the CLI
def _local_model_with_tokenizer(path):
    """A tiny Llama-style model and a byte-level BPE tokenizer trained on a few sentences, saved to `path`
    (what a model in the local cache looks like)."""
    import transformers
    from tokenizers import Tokenizer, decoders, models as tok_models, pre_tokenizers, trainers
    tok = Tokenizer(tok_models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = ["the accelerator runs the model eagerly", "tokens come out one at a time", "hello tenstorrent"] * 20
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<s>", "</s>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                                                eos_token="</s>")
    fast.save_pretrained(path)
    cfg = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                   max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(path)


def test_cli_generate_text_prompt_json(tmp_path, capsys, restore_config):
    import json
    from ttnn_eager.tools import cli
    _local_model_with_tokenizer(tmp_path)
    ttnn_eager.configure(shadow_numerics="exact")  # float32 exactness: see the llama test above
    assert cli.main(["generate", str(tmp_path), "--prompt", "hello tenstorrent", "--max-new-tokens", "5",
                     "--float32-storage", "float32", "--strict", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["new_tokens"] == 5 and r["exact"] and r["tokens"] == r["cpu_tokens"]
    assert isinstance(r["text"], str) and r["text"] == r["cpu_text"]
    assert r["tokens_per_s"] > 0 and r["host_ms_per_token"] > 0 and r["per_token"]["fallbacks"] == 0


def test_cli_generate_refuses_bad_input(capsys):
    from ttnn_eager.tools import cli
    with pytest.raises(SystemExit, match="must be token ids"):
        cli.main(["generate", "gpt2", "--prompt", "some text"])  # no tokenizer
    with pytest.raises(SystemExit, match="longer than the model's 256 positions"):
        cli.main(["generate", "gpt2", "--prompt", " ".join(["5"] * 250), "--max-new-tokens", "10"])
    with pytest.raises(SystemExit, match="unknown model 'nope'"):
        cli.main(["generate", "nope"])
    with pytest.raises(SystemExit):
        cli.main(["generate", "gpt2", "--cache", "offloaded"])  # argparse: not a choice
    assert "invalid choice: 'offloaded'" in capsys.readouterr().err


def test_seeded_top_k_sampling_draws_the_cpu_tokens(restore_config):
    """do_sample with top_k and temperature, under one torch.manual_seed: topk, softmax and multinomial on
    the device (strict mode), and the tokens are the CPU's (float32 storage)."""
    ttnn_eager.configure(float32_storage="float32")
    model, _ = models.build("llama")
    dev = copy.deepcopy(model).to(DEV)
    ids = models.prompt_ids(model.config.vocab_size)
    kw = dict(max_new_tokens=8, do_sample=True, top_k=20, temperature=0.8, top_p=1.0, pad_token_id=0)
    with torch.no_grad():
        torch.manual_seed(3)
        ref = model.generate(ids, **kw)
        torch.manual_seed(3)
        with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
            out = dev.generate(ids.to(DEV), **kw)
    assert torch.equal(out.cpu(), ref)
    assert rec.ttnn["topk"] == 8 and rec.ttnn["argmax"] == 8 and rec.fallbacks == {}


@pytest.mark.parametrize("name", ["vit", "clip_vision"])
def test_vision_forward(name):
    """ViT and the CLIP vision tower, the patch embedding's convolution included, run on ttnn:0."""
    model, fam = models.build(name)
    r = models.compare_forward(model, fam)
    assert r["pearson"] >= 0.999 and not r["fallbacks"], r


def test_image_classification_pipeline():
    import numpy as np
    import transformers
    from PIL import Image
    model, _ = models.build("vit")
    proc = transformers.ViTImageProcessor(size={"height": 64, "width": 64})
    img = Image.fromarray((np.random.RandomState(0).rand(80, 80, 3) * 255).astype("uint8"))
    ref = transformers.pipeline("image-classification", model=model, image_processor=proc, device="cpu")(img, top_k=3)
    dev = transformers.pipeline("image-classification", model=copy.deepcopy(model), image_processor=proc,
                                device=DEV)
    with warnings.catch_warnings(), ttnn_eager.record_ops() as rec:
        warnings.simplefilter("ignore")
        out = dev(img, top_k=3)
    assert [o["label"] for o in out] == [r["label"] for r in ref]
    assert all(abs(o["score"] - r["score"]) < 2e-3 for o, r in zip(out, ref))
    assert rec.fallbacks == {} and rec.ttnn["conv2d"] == 1 and rec.ttnn["linear"] > 0


def test_static_cache_greedy_in_strict_mode(restore_config):
    """cache_implementation="static": the cache is written by index_copy_ into preallocated device tensors,
    strict mode, tokens equal to the CPU's, one read per token, device memory flat across decode steps."""
    ttnn_eager.configure(float32_storage="float32")
    model, _ = models.build("llama")
    ids = models.prompt_ids(model.config.vocab_size)
    r = models.compare_generate(model, ids, max_new_tokens=12, cache="static", strict=True)
    assert r["exact"] and r["totals"]["fallbacks"] == 0
    assert r["per_token"]["device_to_host"] == 1 and r["per_token"]["host_to_device"] == 0
    # the same device buffers every token: keys, values and positions of both layers, written in place
    assert r["cache_buffers"]["tensors"] == 6 and r["cache_buffers"]["reallocated"] == 0, r["cache_buffers"]
    # keys and values: one ttnn.update_cache each (the row, in place); the positions: add, then copy
    per_op = r["ttnn_ops_per_token_by_op"]
    assert per_op["update_cache"] == 4 and per_op["copy"] == 2 and "scatter" not in per_op, per_op
    # device memory per decode step, without the per-step logits compare_generate keeps (output_logits)
    import transformers
    dev = copy.deepcopy(model).to(DEV)
    snap = models._Snapshots()
    with torch.no_grad():
        dev.generate(ids.to(DEV), logits_processor=transformers.LogitsProcessorList([snap]),
                     **models.generation_kwargs(model, 8, "static"))
    memory = [m[3] for m in snap.marks][1:]
    assert max(memory) == min(memory), memory


@pytest.mark.parametrize("mode", ["sample", "beam"])
def test_sampling_and_beam_search_equal_the_cpu(mode, restore_config):
    """top-k + top-p + temperature sampling under one seed, and 3-beam search: strict mode, tokens equal to
    the CPU's (float32 storage)."""
    ttnn_eager.configure(float32_storage="float32")
    model, _ = models.build("qwen2")
    ids = models.prompt_ids(model.config.vocab_size)
    r = models.compare_generate(model, ids, max_new_tokens=6, mode=mode, strict=True, seed=1)
    assert r["exact"] and r["totals"]["fallbacks"] == 0, (r["tokens"], r["cpu_tokens"])
    assert r["per_token"]["device_to_host"] == 1


@covers(aten.constant_pad_nd.default)
@FUZZ
@given(shape=st.sampled_from([(1, 500), (2, 3, 40), (33, 1)]), after=st.integers(0, 40), value=st.sampled_from([0.0, -1.5]),
       seed=st.integers(0, 99))
def test_constant_pad_at_the_end(shape, after, value, seed):
    import torch.nn.functional as F
    x = bf(*shape, seed=seed)
    check(lambda t: F.pad(t, (0, after), value=value), x)
    check(lambda t: F.pad(t, (0, 1, 0, after)), x)


def test_constant_pad_in_front_and_of_1d_tensors_runs_on_the_device():
    """(ttnn.pad cannot pad in front on TILE tensors; padding.py's concatenation can.)"""
    import torch.nn.functional as F
    x = bf(2, 40)
    with ttnn_eager.record_ops() as rec, ttnn_eager.strict():
        out = (F.pad(x.to(DEV), (2, 1)), F.pad(x[0].to(DEV), (0, 3)))
    assert torch.equal(out[0].cpu(), F.pad(x, (2, 1))) and torch.equal(out[1].cpu(), F.pad(x[0], (0, 3)))
    assert rec.fallbacks == {}
