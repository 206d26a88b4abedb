"""torch.compile(backend="ttnn") (features/compile): aot_autograd's graphs through the lowerings, fused, captured
and replayed. Accuracy against float32 PyTorch on the CPU; each fusion pass against the unfused graph."""
import collections
import copy
import math

import pytest
import torch
import torch.nn.functional as F

import ttnn_eager
import ttnn_eager.lowerings  # noqa: F401  (defines the fused ops, torch.ops.ttnn_eager.*)
from ttnn_eager.features.compile import compiler, passes

from conftest import covers, pcc

DEV = "ttnn:0"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _tiny_bert(layers=2, hidden=128, heads=4):
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=256,
                     vocab_size=100, max_position_embeddings=64)
    return BertModel(cfg, add_pooling_layer=False).eval()


def test_the_backend_is_registered_by_name():
    assert "ttnn" in torch._dynamo.list_backends()


def test_bert_compiled_fused_and_replayed_matches_the_cpu():
    ref = _tiny_bert()
    m = copy.deepcopy(ref).to(DEV)
    f = torch.compile(m, backend="ttnn", fullgraph=True)
    with torch.no_grad():
        outs = []
        for i in range(4):
            ids = torch.randint(0, 100, (2, 32), generator=torch.Generator().manual_seed(i))
            d_ids = ids.to(DEV)
            before, by_op = ttnn_eager.stats(), dict(ttnn_eager.counters.ttnn_by_op)
            out = f(d_ids).last_hidden_state
            after = ttnn_eager.stats()
            assert after["fallbacks"] == before["fallbacks"]
            outs.append((out, ref(ids).last_hidden_state))
        # the 3rd and 4th calls are replays: no lowering ran (the input copy and the upload are the only aten ops)
        assert after["graph_replays"] - before["graph_replays"] == 1
        assert after["aten_ops"] - before["aten_ops"] <= 2
        # ... nor a factory op (the position ids, the mask's constants: folded at capture), nor a copy of the
        # new input_ids (the graph reads them where they are)
        issued = {k for k, v in ttnn_eager.counters.ttnn_by_op.items() if v > by_op.get(k, 0)}
        assert not issued & {"arange", "full", "zeros", "ones", "copy"}, issued
        assert {"linear", "transformer.split_query_key_value_and_split_heads"} <= issued, issued
    for got, want in outs:
        assert pcc(got.cpu(), want) >= 0.999
    # every call's output is its own: a replay does not overwrite what an earlier call returned
    assert outs[2][0] is not outs[3][0]
    assert pcc(outs[2][0].cpu(), outs[2][1]) >= 0.999


@pytest.mark.parametrize("hidden,heads", [(128, 4), (128, 8), (320, 4)])
def test_bert_layer_is_nine_ttnn_ops_compiled(hidden, heads):
    """The hand-written TT-NN BERT's layer (tt-metal ttnn_optimized_bert.py) with sdpa: fused QKV linear, head
    split, sdpa, head merge, output linear, add+layer_norm, linear+gelu, linear, add+layer_norm. At heads of 16
    and 80 (Phi-2's size) too: the q, k, v weights padded head by head to whole tiles once (padded_heads), so no
    pad or slice runs in the forward (17 TT-NN ops for the attention without it), and the result is the CPU's."""
    counts, kinds = {}, {}
    for layers in (1, 3):
        ref = _tiny_bert(layers, hidden, heads)
        m = copy.deepcopy(ref).to(DEV)
        torch._dynamo.reset()
        f = torch.compile(m, backend="ttnn", fullgraph=True)
        ids = torch.randint(0, 100, (1, 32), generator=torch.Generator().manual_seed(layers))
        with torch.no_grad():
            f(ids.to(DEV))
            f(ids.to(DEV))
            before, by_op = ttnn_eager.stats()["ttnn_ops"], dict(ttnn_eager.counters.ttnn_by_op)
            got = f(ids.to(DEV)).last_hidden_state
            counts[layers] = ttnn_eager.stats()["ttnn_ops"] - before
            want = ref(ids).last_hidden_state
        kinds[layers] = {k: v - by_op.get(k, 0) for k, v in ttnn_eager.counters.ttnn_by_op.items()}
        assert pcc(got.cpu(), want) >= 0.9999
    assert (counts[3] - counts[1]) / 2 == 9
    per_layer = {k: (v - kinds[1].get(k, 0)) // 2 for k, v in kinds[3].items() if v != kinds[1].get(k, 0)}
    assert per_layer["transformer.split_query_key_value_and_split_heads"] == 1 and "pad" not in per_layer, per_layer


def test_default_torch_compile_on_ttnn_tensors_uses_the_ttnn_backend():
    x = torch.randn(32, 64)
    f = torch.compile(lambda t: F.gelu(t * 2 + 1).sum(-1))
    before = ttnn_eager.stats()["graph_replays"]
    for _ in range(3):
        got = f(x.to(DEV))
    assert got.device == torch.device(DEV)
    assert ttnn_eager.stats()["graph_replays"] == before + 1
    assert pcc(got.cpu(), F.gelu(x * 2 + 1).sum(-1)) >= 0.999


def test_a_weight_written_after_capture_is_seen():
    """The fused QKV weight is made from q, k, v at capture; an optimizer-like write into one of them makes
    the graph capture again (its version moved), so the output follows the new weight."""
    ref = _tiny_bert(1)
    m = copy.deepcopy(ref).to(DEV)
    f = torch.compile(m, backend="ttnn", fullgraph=True)
    ids = torch.randint(0, 100, (1, 32))
    with torch.no_grad():
        for _ in range(3):
            f(ids.to(DEV))
        for model in (m, ref):
            model.encoder.layer[0].attention.self.key.weight.mul_(-0.5)
        before = ttnn_eager.stats()["graph_recaptures"]
        got = f(ids.to(DEV)).last_hidden_state
        assert ttnn_eager.stats()["graph_recaptures"] == before + 1
        assert pcc(got.cpu(), ref(ids).last_hidden_state) >= 0.999


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "eager_first"])
def test_one_graph_of_two_modules_replays_each_modules_weights(warm):
    """Dynamo compiles one graph for modules of the same shapes (their parameters are the graph's inputs: Mimi's
    and pocket_tts_audio_tokenizer's 1x1 shortcut convolutions after a graph break), so one compiled graph is
    called with one module's weights, then another's. The replay copied the other module's weights into the
    static inputs captured from the first, but conv2d reads the form prepared from them at capture: the second
    module's output was the first module's convolution (Pearson 0.02; pocket_tts_audio_tokenizer 0.639 compiled
    against 0.99985 eagerly), or, the modules not run eagerly before, the replay refused the static bias as
    unwritten. Each module's output against its own on the CPU, every call, and the graphs replayed."""
    torch.manual_seed(0)
    convs = [torch.nn.Conv1d(8, 16, 1), torch.nn.Conv1d(8, 16, 1)]
    x = torch.randn(2, 8, 40)
    want = [c(x).detach() for c in convs]
    dev = [copy.deepcopy(c).to(DEV) for c in convs]

    def f(conv, t):
        return conv(t)
    g = torch.compile(f, backend="ttnn")
    ttnn_eager.reset_stats()
    with torch.no_grad():
        if warm:
            for c in dev:
                c(x.to(DEV))
        for _ in range(3):
            for c, w in zip(dev, want):
                got = g(c, x.to(DEV)).cpu()
                assert pcc(got, w) >= 0.999
                assert float((got - w).abs().max()) <= 0.02 * float(w.abs().max())
    assert ttnn_eager.stats()["graph_replays"] == 2


def test_a_moving_input_converted_in_place_before_its_capture_is_replayed():
    """A layout change is in place, so an eager reader can convert a graph's input before the graph reads it at
    one call and not at another: oneformer's mask features, unsqueezed ROW_MAJOR by another graph's warm-up just
    before this graph's capture, arrived TILE at the next call, and the replay refused the refill ("static input
    ... changed since capture"). The refill is put back in the layout the capture read: the CPU's values at every
    call, and the calls after the capture replayed."""
    from ttnn_eager.core import tensor as ttensor

    def g(t):
        return (t * 3).sum(-1)
    c = torch.compile(g, backend="ttnn")
    ttnn_eager.reset_stats()
    layouts = []
    with torch.no_grad():
        for i in range(4):
            x = torch.randn(2, 64, 56, 56, generator=torch.Generator().manual_seed(i))
            y = x.to(DEV) * 2
            if i == 1:
                y.unsqueeze(-1)  # (an eager reader: converts y ROW_MAJOR in place)
            layouts.append(str(ttensor.maybe_handle(y).tt.layout))
            got, want = c(y).cpu(), g(x * 2)
            assert pcc(got, want) >= 0.999
            assert float((got - want).abs().max()) <= 0.02 * float(want.abs().max())
    assert layouts[1] != layouts[2], layouts  # (what the test is about: the capture read another layout)
    assert ttnn_eager.stats()["graph_replays"] == 2


def test_a_graph_break_runs_eagerly_in_between():
    w = torch.randn(64, 64)

    def f(x):
        y = x @ w.to(x.device)
        print("graph break")  # Dynamo splits the function here
        return torch.relu(y).sum(0)

    x = torch.randn(32, 64)
    compiled = torch.compile(f, backend="ttnn")
    for _ in range(3):
        got = compiled(x.to(DEV))
    assert pcc(got.cpu(), torch.relu(x @ w).sum(0)) >= 0.999
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch._dynamo.reset()
        torch.compile(f, backend="ttnn", fullgraph=True)(x.to(DEV))


class _ItemBreak(torch.nn.Module):
    """A data-dependent .item() between two linears (transformers' checks, siglip2's resize, a length)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)

    def forward(self, x):
        h = torch.relu(self.a(x))
        if h.sum().item() > 0:  # a graph break: .item() runs eagerly, through this package's kernel
            h = h * 2
        return self.b(h)


def test_dynamo_does_not_trace_the_backends_own_code_in_a_graph_break():
    """The eager code of a graph break runs the backend's Python (the .item() kernel, the device layer); Dynamo's
    frame hook tried to trace it as the model's code (video_llama_3_vision compiled: 77 graph breaks and 635 TT-NN
    ops against eager's 398; with the package skipped, 15 breaks and 392 ops). Only the model's own break is
    counted, two graphs, and compiled is not more TT-NN ops than eager. ttnn's own Python is skipped alike."""
    from torch._dynamo import trace_rules
    from torch._dynamo.utils import counters
    import ttnn_eager.lowerings.factory as factory
    torch.manual_seed(0)
    model, x = _ItemBreak().eval(), torch.randn(4, 32)
    with torch.no_grad():
        ref = model(x)
        model.to(DEV)
        ttnn_eager.reset_stats()
        eager = model(x.to(DEV))
        eager_ops = ttnn_eager.stats()["ttnn_ops"]
        counters.clear()
        fast = torch.compile(model, backend="ttnn")
        for _ in range(3):
            ttnn_eager.reset_stats()
            got = fast(x.to(DEV))
    assert trace_rules.check_file(factory.__file__).skipped
    import importlib.util
    import os
    ttnn_dir = os.path.dirname(importlib.util.find_spec("ttnn").origin)  # the ttnn library's Python too (the
    assert trace_rules.check_file(os.path.join(ttnn_dir, "operations", "core.py")).skipped  # mock's golden functions)
    assert sum(counters["graph_break"].values()) == 1, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 2
    assert ttnn_eager.stats()["ttnn_ops"] <= eager_ops
    assert pcc(got.cpu(), ref) >= 0.999 and pcc(eager.cpu(), ref) >= 0.999


def test_a_slice_scatter_of_an_empty_slice_is_captured_and_replayed():
    """Qwen3.5's interleaved mrope writes the slices [1:33:3] and [2:30:3] of its frequencies; a shrunk head
    leaves the second empty. An op with an empty argument ran on the CPU (the whole base read and uploaded
    again), which a graph capture refuses: its compiled forward ran eagerly at every call. slice_scatter of
    nothing is its base: no read, the graph replayed, eager mode without a device-to-host transfer."""
    def f(x, v, e):
        y = torch.slice_scatter(x * 2, v, 2, 1, 33, 3)
        return torch.slice_scatter(y, e, 2, 2, 2, 3) + 1  # (an empty slice)
    torch.manual_seed(0)
    x, v, e = torch.randn(3, 4, 32), torch.randn(3, 4, 11), torch.randn(3, 4, 0)
    d = [t.to(DEV) for t in (x, v, e)]
    ttnn_eager.reset_stats()
    eager = f(*d)
    assert ttnn_eager.stats()["device_to_host"] == 0
    g = torch.compile(f, backend="ttnn")
    for _ in range(3):
        ttnn_eager.reset_stats()
        got = g(*d)
    stats = ttnn_eager.stats()
    assert stats["graph_replays"] == 1 and stats["compiled_eager_calls"] == 0, stats
    ref = f(x, v, e)
    assert torch.equal(eager.cpu(), got.cpu()) and (got.cpu() - ref).abs().max() <= 0.05


def test_an_unlowered_op_in_a_graph_is_the_counted_fallback_and_the_graph_stays_eager():
    x = torch.randn(16, 16)
    f = torch.compile(lambda t: torch.special.bessel_j0(t) + 1, backend="ttnn", fullgraph=True)
    before = ttnn_eager.stats()
    for _ in range(3):
        got = f(x.to(DEV))
    after = ttnn_eager.stats()
    assert after["fallbacks"] - before["fallbacks"] == 3  # every call: a graph with a fallback is not captured
    assert after["compiled_eager_calls"] - before["compiled_eager_calls"] == 2  # the 2nd call (its capture refused) and the 3rd
    torch.testing.assert_close(got.cpu(), torch.special.bessel_j0(x) + 1, atol=0.05, rtol=0.02)
    torch._dynamo.reset()
    with ttnn_eager.strict(), pytest.raises(Exception, match="bessel_j0"):
        torch.compile(lambda t: torch.special.bessel_j0(t) + 1, backend="ttnn")(x.to(DEV))


def test_training_step_compiled_matches_eager(monkeypatch):
    """5 AdamW steps of a tiny BertForSequenceClassification compiled: losses within 1% of eager's, no CPU
    fallback, and the backward is a compiled graph too (aot_autograd's, run by the backend)."""
    from ttnn_eager.features.compile.replay import Replayed
    kinds = collections.Counter()
    call = Replayed.__call__
    monkeypatch.setattr(Replayed, "__call__", lambda self, *a: (kinds.update([self.kind]), call(self, *a))[1])
    from transformers import BertConfig, BertForSequenceClassification
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, intermediate_size=128,
                     vocab_size=100, max_position_embeddings=64, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, num_labels=3)
    base = BertForSequenceClassification(cfg)
    losses = {}
    for mode in ("eager", "compiled"):
        m = copy.deepcopy(base).to(DEV).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        step = m if mode == "eager" else torch.compile(m, backend="ttnn")
        losses[mode] = []
        before = ttnn_eager.stats()["fallbacks"]
        for i in range(5):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(0, 100, (4, 16), generator=g)
            labels = torch.randint(0, 3, (4,), generator=g)
            loss = step(input_ids=ids.to(DEV), labels=labels.to(DEV)).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses[mode].append(float(loss.cpu()))
        assert ttnn_eager.stats()["fallbacks"] == before, mode
    assert kinds == {"forward": 5, "backward": 5}, kinds
    for a, b in zip(losses["eager"], losses["compiled"]):
        assert abs(a - b) <= 0.01 * abs(a)
    assert losses["compiled"][-1] < losses["compiled"][0]


# ------------------------------------------------------------------------------------------ fused ops
def _r(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


fused = torch.ops.ttnn_eager
# (tests/test_ops.py's lowering guard runs every file's CASES on the device)
CASES = {
    "linear_activation": (lambda x, w, b: fused.linear_activation(x, w, b, "gelu"), [[_r(2, 32, 64), _r(96, 64), _r(96)]]),
    "linear_activation_relu": (lambda x, w: fused.linear_activation(x, w, None, "relu"), [[_r(3, 40), _r(64, 40)]]),
    "add_layer_norm": (lambda a, r, w, b: fused.add_layer_norm(a, r, [64], w, b, 1e-5),
                       [[_r(2, 30, 64), _r(2, 30, 64), _r(64), _r(64)]]),
    "qkv_heads": (lambda x, wq, wk, wv, bq, bk, bv: fused.qkv_heads(x, [wq, wk, wv], [bq, bk, bv], 4, 4),
                  [[_r(2, 32, 128), _r(128, 128), _r(128, 128) * 0.5, _r(128, 128) * 2, _r(128), _r(128), _r(128)]]),
    "qkv_heads_gqa": (lambda x, wq, wk, wv: fused.qkv_heads(x, [wq, wk, wv], [None] * 3, 4, 2),
                      [[_r(1, 40, 128), _r(128, 128), _r(64, 128), _r(64, 128)]]),
    # heads of 16 (and 80, grouped) zero-padded to whole tiles; the projection of such padded heads
    "qkv_heads_padded": (lambda x, wq, wk, wv, bq, bk, bv: fused.qkv_heads(x, [wq, wk, wv], [bq, bk, bv], 4, 4, 32),
                         [[_r(2, 24, 64), _r(64, 64), _r(64, 64) * 0.5, _r(64, 64) * 2, _r(64), _r(64), _r(64)]]),
    "qkv_heads_padded_key_without_bias": (lambda x, wq, wk, wv, bq, bv: fused.qkv_heads(x, [wq, wk, wv], [bq, None, bv],
                                                                                          4, 4, 32),
                                          [[_r(2, 24, 64), _r(64, 64), _r(64, 64), _r(64, 64), _r(64), _r(64)]]),
    # a missing bias beside heads already of whole tiles (head_width = the head size: nothing padded)
    "qkv_heads_whole_tiles_key_without_bias": (lambda x, wq, wk, wv, bq, bv: fused.qkv_heads(
        x, [wq, wk, wv], [bq, None, bv], 4, 4, 32), [[_r(2, 24, 128), _r(128, 128), _r(128, 128), _r(128, 128),
                                                     _r(128), _r(128)]]),
    "qkv_heads_padded_gqa": (lambda x, wq, wk, wv: fused.qkv_heads(x, [wq, wk, wv], [None] * 3, 4, 2, 96),
                             [[_r(1, 40, 320), _r(320, 320), _r(160, 320), _r(160, 320)]]),
    "heads_linear": (lambda x, w, b: fused.heads_linear(x, w, b, 4), [[_r(2, 24, 128), _r(64, 64), _r(64)]]),
    "heads_linear_unpadded": (lambda x, w: fused.heads_linear(x, w, None, 4), [[_r(2, 24, 128), _r(64, 128)]]),
    "concat_heads": (lambda x: fused.concat_heads(x), [[_r(2, 4, 32, 32)]]),
    # the residual one row (TT-NN's linear bias), then two rows (a linear and an add), then of another dtype
    "linear_add": (lambda x, w, r: fused.linear_add(x, w, r), [[_r(1, 1, 64), _r(96, 64), _r(1, 1, 96)],
                                                               [_r(2, 1, 64), _r(96, 64), _r(2, 1, 96)],
                                                               [_r(1, 1, 64).bfloat16(), _r(96, 64).bfloat16(),
                                                                _r(1, 1, 96)]]),
    "rms_norm": (lambda x, w: fused.rms_norm(x, w, 1e-6), [[_r(2, 30, 64), _r(64)]]),
    "matmul_bias": (lambda x, w, b: fused.matmul_bias(x, w, b, None), [[_r(2, 32, 64), _r(64, 96), _r(96)]]),
    "matmul_bias_gelu_tanh": (lambda x, w, b: fused.matmul_bias(x, w, b, "gelu_tanh"),
                              [[_r(2, 30, 64), _r(64, 96), _r(96)]]),
    "split_qkv_heads": (lambda x: fused.split_qkv_heads(x, 4), [[_r(2, 32, 384)]]),
    "lift_fresh_copy": (lambda x: torch.ops.aten.lift_fresh_copy(x), [[_r(4, 5)]]),
    # TT-NN's rotary embedding (heads of 64, 128; 7 rows: its padded result sliced back), then op by op (a
    # head of 32, a cos per sequence of the batch)
    "rotary_embedding": (lambda x, c, s: fused.rotary_embedding(x, c, s),
                         [[_r(1, 4, 7, 64), _r(1, 1, 7, 64), _r(1, 1, 7, 64)],
                          [_r(2, 2, 32, 128), _r(1, 1, 32, 128), _r(1, 1, 32, 128)],
                          [_r(1, 2, 5, 32), _r(1, 1, 5, 32), _r(1, 1, 5, 32)],
                          [_r(2, 8, 1, 64), _r(1, 1, 1, 64), _r(1, 1, 1, 64)],
                          [_r(1, 2, 5, 16), _r(1, 1, 5, 16), _r(1, 1, 5, 16)],
                          [_r(2, 2, 3, 64), _r(2, 1, 3, 64), _r(2, 1, 3, 64)],
                          # the first 16 (or 32) columns rotated, the rest passed through (heads zero-padded)
                          [_r(1, 2, 5, 32), _r(1, 1, 5, 16), _r(1, 1, 5, 16)],
                          [_r(2, 2, 7, 64), _r(1, 1, 7, 32), _r(1, 1, 7, 32)]]),
    # a static cache's decode update at a device position (a head of 64; a head of 48 and two sequences)
    "cache_update": (lambda c, x, p: fused.cache_update(c, x, p),
                     [[_r(1, 4, 32, 64), _r(1, 4, 1, 64), torch.tensor(5)],
                      [_r(2, 2, 40, 48), _r(2, 2, 1, 48), torch.tensor(39)]]),
}


@covers(fused.linear_activation.default, fused.add_layer_norm.default, fused.qkv_heads.default,
        fused.concat_heads.default, fused.heads_linear.default, fused.linear_add.default, fused.rms_norm.default, fused.matmul_bias.default,
        fused.split_qkv_heads.default, fused.rotary_embedding.default, fused.cache_update.default,
        torch.ops.aten.lift_fresh_copy.default)
@pytest.mark.parametrize("name", list(CASES))
def test_fused_ops_on_the_device_match_their_cpu_meaning(name):
    fn, sets = CASES[name]
    for inputs in sets:
        want = fn(*inputs)
        with torch.no_grad(), ttnn_eager.strict():
            got = fn(*[x.to(DEV) for x in inputs])
        for g, w in zip(*(((got, want) if isinstance(want, tuple) else ((got,), (want,))))):
            assert g.device == torch.device(DEV) and g.shape == w.shape
            assert pcc(g.cpu(), w) >= 0.999
            assert float((g.cpu() - w).abs().max()) <= 0.03 * float(w.abs().max()) + 1e-3


@pytest.mark.parametrize("d", [16, 48, 80])
def test_a_rotary_embedding_of_other_head_sizes_turns_the_half_in_one_exact_matmul(d):
    """bfloat16 heads whose size TT-NN's rotary kernel does not take (not 32 or a multiple of 64): rotate_half as
    one matmul by a signed permutation at HiFi4, then x * cos + that * sin -- 4 TT-NN ops, not 7 -- equal bit for
    bit to the same arithmetic op by op on the device (the products x_i * +-1 and one-term sums are exact), and
    to the CPU's float32 as a number. The table is uploaded once. Under float32 storage: op by op (TF32 would
    not be exact)."""
    torch.manual_seed(d)
    x, ang = torch.randn(2, 4, 24, d), torch.randn(1, 1, 24, d)
    cos, sin = ang.cos(), ang.sin()
    want = x * cos + _rotate_half(x) * sin
    dx, dc, ds = x.to(DEV), cos.to(DEV), sin.to(DEV)
    for call in range(2):
        with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
            got = fused.rotary_embedding(dx, dc, ds).cpu()
        assert rec.ttnn == {"matmul": 1, "multiply": 2, "add": 1}, rec.ttnn
        assert rec.stats["host_to_device"] == 0 or call == 0
    assert torch.equal(got, (dx * dc + _rotate_half(dx) * ds).cpu())
    assert pcc(got, want) >= 0.9999 and float((got - want).abs().max()) < 0.05
    previous = ttnn_eager.configure(float32_storage="float32")
    try:
        with ttnn_eager.record_ops() as rec:
            got = fused.rotary_embedding(x.to(DEV), cos.to(DEV), sin.to(DEV)).cpu()
        assert "matmul" not in rec.ttnn and float((got - want).abs().max()) < 1e-5, rec.ttnn
    finally:
        ttnn_eager.configure(**previous)


@pytest.mark.parametrize("width,rotated", [(32, 16), (96, 80)])
def test_a_rotary_embedding_of_padded_heads_rotates_their_first_columns(width, rotated):
    """Heads zero-padded to whole tiles (padded_heads) keep cos and sin of the model's head size: the first
    `rotated` columns are rotated, the rest passed through. bfloat16: one exact matmul by the half turn of those
    columns and x * cos' + that * sin' with cos, sin padded by ones and zeros once (4 TT-NN ops a call, the pads
    not again for the same cos and sin); the passed-through columns come out bit for bit. float32 storage: op by
    op on the slices, the CPU's to float32 rounding."""
    torch.manual_seed(width)
    x, ang = torch.randn(2, 4, 24, width), torch.randn(1, 1, 24, rotated)
    cos, sin = ang.cos(), ang.sin()
    want = torch.cat((x[..., :rotated] * cos + _rotate_half(x[..., :rotated]) * sin, x[..., rotated:]), -1)
    torch.testing.assert_close(fused.rotary_embedding(x, cos, sin), want)  # (the op's meaning)
    dx, dc, ds = x.to(DEV), cos.to(DEV), sin.to(DEV)
    for call in range(2):
        with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
            got = fused.rotary_embedding(dx, dc, ds).cpu()
        assert rec.ttnn == ({"pad": 2} if call == 0 else {}) | {"matmul": 1, "multiply": 2, "add": 1}, rec.ttnn
    assert torch.equal(got[..., rotated:], dx[..., rotated:].cpu())
    assert pcc(got, want) >= 0.9999 and float((got - want).abs().max()) < 0.05
    previous = ttnn_eager.configure(float32_storage="float32")
    try:
        got = fused.rotary_embedding(x.to(DEV), cos.to(DEV), sin.to(DEV)).cpu()
        assert float((got - want).abs().max()) < 1e-5
    finally:
        ttnn_eager.configure(**previous)


def test_an_attention_without_a_heads_dimension_compiles():
    """sdpa of 3-D q, k, v ([batch, seq, d]: PyTorch allows it) at a head size of 16: the head-padding pass,
    which reads [b, h, s, d], leaves it alone."""
    f = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v) * 2, backend="ttnn")
    q, k, v = _r(2, 24, 16), _r(2, 24, 16) * 0.5, _r(2, 24, 16)
    with torch.no_grad():
        got = f(q.to(DEV), k.to(DEV), v.to(DEV)).cpu()
    assert pcc(got, F.scaled_dot_product_attention(q, k, v) * 2) >= 0.999


# ------------------------------------------------------------------------------------------ fusion passes
def _aten_graph(fn, *args):
    """fn's inference aten graph on ttnn tensors (aot_autograd's, as the backend receives it: linear and
    layer_norm kept whole) and a copy to rewrite."""
    from torch._functorch.aot_autograd import aot_function
    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return gm
    with torch.no_grad(), compiler.kept_whole():
        aot_function(fn, fw_compiler=keep)(*[a.to(DEV) for a in args])
    gm = graphs[0]
    return gm, copy.deepcopy(gm)


def _targets(gm) -> list:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


PATTERNS = {
    "linear_activation": (lambda x, w, b: F.gelu(F.linear(x, w, b)), [(2, 32, 64), (96, 64), (96,)]),
    "linear_activation_silu": (lambda x, w, b: F.silu(F.linear(x, w, b)), [(2, 32, 64), (96, 64), (96,)]),
    "add_layer_norm": (lambda a, r, w, b: F.layer_norm(a + r, (64,), w, b, 1e-12), [(2, 32, 64), (2, 32, 64), (64,), (64,)]),
    # a decode step's residual add after a projection: one row
    "residual_bias": (lambda x, w, r: (r + F.linear(x, w)) * 2, [(1, 1, 64), (96, 64), (1, 1, 96)]),
    "qkv_heads": (lambda x, wq, wk, wv, bq, bk, bv: tuple(
        F.linear(x, w, b).view(2, 32, -1, 32).transpose(1, 2) for w, b in ((wq, bq), (wk, bk), (wv, bv))),
        [(2, 32, 128), (128, 128), (128, 128), (128, 128), (128,), (128,), (128,)]),
    "qkv_heads_gqa": (lambda x, wq, wk, wv: tuple(
        F.linear(x, w).view(2, 32, -1, 32).transpose(1, 2) for w in (wq, wk, wv)),
        [(2, 32, 128), (128, 128), (64, 128), (64, 128)]),
    "concat_heads": (lambda x: x.transpose(1, 2).contiguous().view(2, 32, -1) * 1.5, [(2, 4, 32, 32)]),
    # attention at heads of 16: the weights padded to whole-tile heads (with the keys and values also returned,
    # as a layer's cache)
    "padded_heads": (lambda x, wq, wk, wv, bq, bk, bv, wo, m: _attention_block(x, (wq, wk, wv), (bq, bk, bv), wo, m),
                     [(2, 24, 64), (64, 64), (64, 64), (64, 64), (64,), (64,), (64,), (64, 64), (2, 1, 24, 24)]),
    "padded_heads_cache": (lambda x, wq, wk, wv, wo: _attention_block(x, (wq, wk, wv), (None,) * 3, wo, None, True),
                           [(1, 24, 64), (64, 64), (32, 64), (32, 64), (64, 64)]),
    # Llama's: the rotary embedding of q and k between (rotary_embedding runs first), grouped heads, k, v returned
    "padded_heads_rotary": (lambda x, wq, wk, wv, wo, a: _attention_block(x, (wq, wk, wv), (None,) * 3, wo, None, True,
                                                                          a),
                            [(1, 24, 64), (64, 64), (32, 64), (32, 64), (64, 64), (1, 24, 16)]),
    "noop_views": (lambda x: x.view(2, 32, 64).relu(), [(2, 32, 64)]),
    "rms_norm": (lambda x, w: w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)), [(2, 32, 64), (64,)]),
    "gelu_tanh": (lambda x: _gelu_new(x) * 2, [(2, 32, 64)]),
    "matmul_bias": (lambda x, w, b: torch.addmm(b, x.view(-1, 64), w).view(2, 32, 96), [(2, 32, 64), (64, 96), (96,)]),
    # GPT-2's MLP up-projection: its Conv1D then gelu_new: three rewrites, one op
    "matmul_bias_activation": (lambda x, w, b: _gelu_new(torch.addmm(b, x.view(-1, 64), w).view(2, 32, 96)),
                               [(2, 32, 64), (64, 96), (96,)]),
    "split_qkv_heads": (lambda y: tuple(t.view(2, 32, -1, 32).transpose(1, 2) for t in y.split(128, 2)),
                        [(2, 32, 384)]),
    "rotary_embedding": (lambda x, c, s: x * c[:, None] + _rotate_half(x) * s[:, None],
                         [(1, 4, 7, 64), (1, 7, 64), (1, 7, 64)]),
    # continuous batching's decode step: 8 users' tokens as one sequence, heads back in the paged ops' layout
    "decode_heads": (lambda x, wq, wk, wv, c, s: _decode_step_heads(x, (wq, wk, wv), c, s),
                     [(1, 8, 128), (128, 128), (64, 128), (64, 128), (1, 8, 32), (1, 8, 32)]),
    "grouped_attention": (lambda q, k, v: F.scaled_dot_product_attention(q, _repeat_kv(k, 2), _repeat_kv(v, 2),
                                                                         is_causal=True),
                          [(1, 8, 16, 64), (1, 4, 16, 64), (1, 4, 16, 64)]),
    "view_chains": (lambda x: x.view(64, 32).view(2048) * 2, [(2, 32, 32)]),
    "view_chains_transposes": (lambda x: x.transpose(1, 2).transpose(2, 1) * 2, [(2, 32, 32)]),
    # two layers' rotary embeddings each unsqueezing the one cos of the step
    "duplicates": (lambda x, c: x * c.unsqueeze(1) + (x * 2) * c.unsqueeze(1), [(1, 4, 8, 64), (1, 8, 64)]),
    # transformers' rotary attention_scaling of 1.0
    "identities": (lambda x: (x * 1.0).cos() * 2, [(2, 32, 64)]),
    # transformers' interpolate_pos_encoding under tracing: the patch position embeddings to their own size
    "noop_resizes": (lambda x: F.interpolate(x, size=(16, 16), mode="bicubic", align_corners=False) * 2,
                     [(1, 4, 16, 16)]),
    "noop_resizes_nearest": (lambda x: F.interpolate(x, size=(8, 16), mode="nearest") * 2, [(1, 4, 8, 16)]),
    "inverse_permutes": (lambda x: x.permute(0, 3, 1, 2).permute(0, 2, 3, 1) * 2, [(1, 16, 16, 64)]),
    "inverse_permutes_composed": (lambda x: x.permute(0, 3, 1, 2).permute(0, 1, 3, 2) * 2, [(1, 16, 8, 64)]),
    "cat_slices": (lambda x: torch.cat([x[:, :8], x[:, 8:]], 1) * 2, [(1, 264, 64)]),
    "cat_slices_part": (lambda x, y: torch.cat([y, x[:, 2:8], x[:, 8:-4]], 1) * 2, [(1, 32, 64), (1, 8, 64)]),
    # transformers' padding mask under tracing: padding_mask[batch_arange, kv_arange], and `& (kv_idx >= 0)`
    "arange_index": (lambda x: x[torch.arange(2, device=x.device).view(2, 1, 1, 1),
                                 torch.arange(16, device=x.device).view(1, 1, 1, 16)] * 2, [(2, 16)]),
    "true_ands": (lambda x, m: x * ((m > 0) & (torch.arange(16, device=m.device) >= 0)), [(2, 16), (2, 16)]),
    "true_ands_broadcast": (lambda x, m: x * ((m[:, None, :] > 0) & (torch.arange(16, device=m.device)[:, None] >= 0))
                            .expand(2, 16, 16), [(2, 16, 16), (2, 16)]),
    "attention_masks": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m.expand(1, 4, 32, 32)),
                        [(1, 4, 32, 32), (1, 4, 32, 32), (1, 4, 32, 32), (1, 1, 1, 32)]),
    # transformers' bidirectional mask under tracing with no padding (kv_idx >= 0): eager mode passes no mask
    "attention_masks_true": (lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.arange(32, device=q.device)[None, None, :, None] >= 0),
        [(1, 4, 32, 32), (1, 4, 32, 32), (1, 4, 32, 32)]),
    "noop_views_expand": (lambda x: x.expand(2, 32, 64).relu(), [(2, 32, 64)]),
    # transformers' DynamicCache: the first keys concatenated to the layer's empty cache
    "cat_empties": (lambda k, c: torch.cat([c, k], -2) * 2, [(1, 2, 8, 16), (1, 2, 0, 16)]),
    "cat_empties_part": (lambda k, c: torch.cat([c, k, k], -2) * 2, [(1, 2, 8, 16), (1, 2, 0, 16)]),
}
SEVERAL = {"qkv_heads", "matmul_bias_activation", "decode_heads", "padded_heads_rotary"}
FEWER_INPUTS = {"cat_empties_part"}  # the same ops, one taking fewer inputs
FACTORIES = {"arange_index", "true_ands", "true_ands_broadcast", "attention_masks_true"}  # graphs that make tensors on the device  # patterns whose match takes more than one rewrite


def _attention_block(x, weights, biases, wo, mask, cache=False, angles=None):  # transformers' sdpa attention, heads of 16
    b, s, _ = x.shape
    x = x / 8  # (scores of a trained model's size: randn weights and inputs would saturate the softmax)
    q, k, v = (F.linear(x, w, bias).view(b, s, -1, 16).transpose(1, 2) for w, bias in zip(weights, biases))
    if angles is not None:
        cos, sin = angles.cos().unsqueeze(1), angles.sin().unsqueeze(1)
        q, k = (u * cos + _rotate_half(u) * sin for u in (q, k))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=cache, is_causal=cache)
    out = F.linear(out.transpose(1, 2).contiguous().view(b, s, -1), wo)
    return (out, k, v) if cache else out


def _repeat_kv(x, n):  # transformers' (Llama's grouped-query attention without enable_gqa)
    b, kv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)


def _rotate_half(x):  # transformers' (Llama's apply_rotary_pos_emb)
    return torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), dim=-1)


def _decode_step_heads(x, weights, cos, sin):  # transformers' Llama attention under the paged decode (serving/paged.py)
    b, t, _ = x.shape
    q, k, v = (F.linear(x, w).view(b, t, -1, cos.shape[-1]).transpose(1, 2) for w in weights)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    q, k = (u * cos + _rotate_half(u) * sin for u in (q, k))
    return tuple(u.transpose(1, 2) * 2 for u in (q, k, v))


def _gelu_new(x):  # transformers' NewGELUActivation (GPT-2's gelu_new)
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


@pytest.mark.parametrize("name", list(PATTERNS))
def test_each_fusion_pass_computes_what_the_unfused_graph_did(name):
    fn, shapes = PATTERNS[name]
    torch.manual_seed(0)
    args = [torch.randn(s) for s in shapes]
    gm, fused = _aten_graph(fn, *args)
    done = passes.run(fused)
    want = name
    for variant in ("_gqa", "_silu", "_transposes", "_nearest", "_composed", "_part", "_broadcast", "_expand", "_true",
                    "_cache", "_rotary"):
        want = want.split(variant)[0]
    assert done[want] == 1, (done, _targets(gm))
    assert sum(done.values()) == 1 or name in SEVERAL, done
    if name in FEWER_INPUTS:
        cat = next(n for n in fused.graph.nodes if n.target is torch.ops.aten.cat.default)
        assert len(cat.args[0]) == 2, cat.args
    else:
        assert len(_targets(fused)) < len(_targets(gm))
    # the rewrite on the CPU (the fused ops' CPU kernels are their meaning) against the original graph (a graph
    # that makes tensors on the device -- aranges -- against fn itself on the CPU)
    dargs = [a.to(DEV) for a in args]
    with torch.no_grad():
        unfused = gm(*args) if name not in FACTORIES else [fn(*args)]
        for a, b in zip(fused(*args), unfused):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # and on the device, through the fused lowerings, against the original graph on the CPU
    with torch.no_grad():
        with ttnn_eager.strict():
            got = fused(*dargs)
        ref = gm(*args) if name not in FACTORIES else [fn(*args)]
    for a, b in zip(got, ref):
        assert a.shape == b.shape
        assert pcc(a.cpu(), b) >= 0.999


def _static_cache_update(kc, vc, k, v, pos):  # transformers' StaticLayer.update (one new token)
    rows = torch.arange(k.shape[2], device=k.device) + pos
    return kc.index_copy(2, rows, k), vc.index_copy(2, rows, v)


def test_the_cache_update_pass_computes_what_index_copy_did():
    """StaticCache's index_copy_(2, arange(1) + cumulative_length, x) of the key and value caches: two
    cache_update ops at the 0-d position (the arange and add gone), on the device against the CPU's."""
    g = torch.Generator().manual_seed(0)
    args = [torch.randn(1, 4, 32, 64, generator=g), torch.randn(1, 4, 32, 64, generator=g),
            torch.randn(1, 4, 1, 64, generator=g), torch.randn(1, 4, 1, 64, generator=g), torch.tensor(7)]
    gm, fused_gm = _aten_graph(_static_cache_update, *args)
    done = passes.run(fused_gm)
    assert done["cache_update"] == 2, (done, _targets(gm))
    assert "aten.index_copy.default" not in _targets(fused_gm) and "aten.arange.default" not in _targets(fused_gm)
    # (the graphs were traced on the device: their arange is made there) the fused and the unfused graph on
    # the device against float32 PyTorch on the CPU
    dargs = [a.to(DEV) for a in args]
    with torch.no_grad():
        with ttnn_eager.strict():
            got = fused_gm(*dargs)
        unfused = gm(*dargs)
        ref = _static_cache_update(*args)
    for a, u, b in zip(got, unfused, ref):
        assert pcc(a.cpu(), b) >= 0.999 and float((a.cpu() - b).abs().max()) <= 0.02
        assert torch.equal(a.cpu(), u.cpu())  # (the same row written into the same stored cache)
    # more than one new row (a prefill) keeps its index_copy
    args = [args[0], args[1], torch.randn(1, 4, 3, 64), torch.randn(1, 4, 3, 64), torch.tensor(7)]
    gm, fused_gm = _aten_graph(_static_cache_update, *args)
    assert passes.run(fused_gm)["cache_update"] == 0


def test_position_embeddings_interpolated_to_their_own_size_are_the_embeddings():
    """transformers' interpolate_pos_encoding returns the position embeddings as they are in eager mode, but under
    tracing splits off the class token's, views the rest as an image, permutes, interpolates to the same size,
    permutes back and concatenates (pixio: +9 TT-NN ops compiled): noop_resizes, inverse_permutes, view_chains,
    noop_views and cat_slices leave the embeddings themselves, on the CPU and on the device."""
    def pos(e):
        patches = e[:, 1:].reshape(1, 4, 4, 64).permute(0, 3, 1, 2)
        patches = F.interpolate(patches, size=(4, 4), mode="bicubic", align_corners=False)
        return torch.cat([e[:, :1], patches.permute(0, 2, 3, 1).view(1, -1, 64)], dim=1) * 2
    e = torch.randn(1, 17, 64)
    gm, fused = _aten_graph(pos, e)
    done = passes.run(fused)
    assert done["noop_resizes"] == 1 and done["inverse_permutes"] == 1 and done["cat_slices"] == 1, done
    assert _targets(fused) == ["aten.mul.Tensor"], _targets(fused)
    with torch.no_grad():
        torch.testing.assert_close(fused(e)[0], gm(e)[0], atol=0, rtol=0)
        with ttnn_eager.strict():
            got = fused(e.to(DEV))[0].cpu()
    assert pcc(got, pos(e)) >= 0.9999 and float((got - pos(e)).abs().max()) <= 0.02 * float(pos(e).abs().max())


def test_a_result_of_the_graph_is_not_merged_into_another_value():
    """x * 1 and a second clone of x, returned: merged they would alias x or each other (an in-place write into
    one result would show in the other)."""
    gm, fused_gm = _aten_graph(lambda x: (x * 1, x.clone(), x.clone()), torch.randn(4, 32))
    done = passes.run(fused_gm)
    assert done["identities"] == 0 and done["duplicates"] == 0, done


def _paged_step(read_old_after: bool):
    """A traced decode step's cache write as features/serving/paged.py makes it: the functional update written
    back with copy_ (a graph input mutated: aot_autograd keeps the copy_ in the graph), then a read of the cache;
    read_old_after: the old cache's sum read after the update is computed (the pass must leave that alone)."""
    ops = torch.ops.ttnn_eager

    def step(cache, x, positions, table):
        new = ops.paged_update_cache_functional(cache, x, positions, table)
        old = cache.sum() if read_old_after else None
        cache.copy_(new)
        return (cache * 2,) if old is None else (cache * 2, old)
    return step


@pytest.mark.parametrize("read_old_after", [False, True])
def test_paged_caches_in_place_writes_the_cache_it_was_given(read_old_after):
    """copy_(cache, copy(cache, paged_update_cache_functional(cache, ...))) of a graph input -> the in-place
    paged_update_cache(cache, ...): one rewrite, the same cache and results as the functional graph (on the CPU:
    the ops' meanings); not where the old value is read after the update."""
    from torch._functorch.aot_autograd import aot_function
    g = torch.Generator().manual_seed(0)
    cache = torch.randn(4, 2, 32, 32, generator=g)
    x = torch.randn(1, 2, 2, 32, generator=g)
    positions, table = torch.tensor([3, 40], dtype=torch.int32), torch.tensor([[0, -1], [2, 1]], dtype=torch.int32)
    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return gm
    with torch.no_grad():
        aot_function(_paged_step(read_old_after), fw_compiler=keep, keep_inference_input_mutations=True)(
            cache.clone(), x, positions, table)
    gm = graphs[0]
    fused = copy.deepcopy(gm)
    done = passes.run(fused)
    assert done["paged_caches_in_place"] == (0 if read_old_after else 1), _targets(fused)
    targets = _targets(fused)
    assert ("ttnn_eager.paged_update_cache.default" in targets) == (not read_old_after), targets
    a, b = cache.clone(), cache.clone()
    with torch.no_grad():
        want, got = gm(a, x, positions, table), fused(b, x, positions, table)
    assert torch.equal(a, b) and not torch.equal(a, cache)  # written, and the same way
    for u, v in zip(got, want):
        assert torch.equal(u, v)


def test_a_pattern_whose_intermediate_is_used_elsewhere_is_left_alone():
    args = [torch.randn(2, 32, 64), torch.randn(96, 64), torch.randn(96)]
    gm, fused = _aten_graph(lambda x, w, b: (lambda y: (F.gelu(y), y * 2))(F.linear(x, w, b)), *args)
    assert passes.run(fused)["linear_activation"] == 0
    # and a head size that is not a multiple of the tile is not given to the head split
    args = [torch.randn(2, 32, 64)] + [torch.randn(64, 64)] * 3
    gm, fused = _aten_graph(lambda x, *ws: tuple(F.linear(x, w).view(2, 32, -1, 16).transpose(1, 2) for w in ws), *args)
    assert passes.run(fused)["qkv_heads"] == 0
    # a constant that is false somewhere is not dropped from an &; positions not in order stay a gather
    gm, fused = _aten_graph(lambda x, m: x * ((m > 0) & (torch.arange(16, device=m.device) >= 1)),
                            torch.randn(2, 16), torch.randn(2, 16))
    assert passes.run(fused)["true_ands"] == 0
    gm, fused = _aten_graph(lambda x: x[torch.arange(2, device=x.device).view(1, 2), torch.arange(16, device=x.device)
                                        .view(16, 1)], torch.randn(2, 16))
    assert passes.run(fused)["arange_index"] == 0
    # a residual add of more than one row stays an add (TT-NN's linear takes one bias row); and so does one whose
    # linear has a bias of its own
    args = [torch.randn(2, 1, 64), torch.randn(96, 64), torch.randn(2, 1, 96)]
    gm, fused = _aten_graph(lambda x, w, r: r + F.linear(x, w), *args)
    assert passes.run(fused)["residual_bias"] == 0
    args = [torch.randn(1, 1, 64), torch.randn(96, 64), torch.randn(96), torch.randn(1, 1, 96)]
    gm, fused = _aten_graph(lambda x, w, b, r: r + F.linear(x, w, b), *args)
    assert passes.run(fused)["residual_bias"] == 0
    # a mask made from factory ops that masks some position is kept
    gm, fused = _aten_graph(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.arange(32, device=q.device)[None, None, None, :] >= 1), *[torch.randn(1, 4, 32, 32)] * 3)
    assert passes.run(fused)["attention_masks"] == 0



def test_generation_with_a_static_cache_and_a_compiled_forward_equals_eager():
    """transformers' own recipe: cache_implementation="static" and the forward compiled (mode="reduce-overhead",
    CUDA graphs' mode: every mode replays here): tokens equal eager's, the decode steps replayed after a warm-up
    and a capture, no recompile per token."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1,
                      num_hidden_layers=1, vocab_size=100, max_position_embeddings=64)
    model = LlamaForCausalLM(cfg).eval().to(DEV)
    ids = torch.randint(0, 100, (1, 8), generator=torch.Generator().manual_seed(0)).to(DEV)
    kw = dict(max_new_tokens=8, do_sample=False, cache_implementation="static")
    with torch.no_grad():
        want = model.generate(ids, **kw)
        model.forward = torch.compile(model.forward, backend="ttnn", fullgraph=True, mode="reduce-overhead")
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        before = ttnn_eager.stats()
        got = model.generate(ids, **kw)
        after = ttnn_eager.stats()
    assert got.cpu().tolist() == want.cpu().tolist()
    # the prefill and the decode step: two graphs for eight tokens
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs == 2
    # 7 decode steps: the first eager, the second captured, the other 5 replayed
    assert after["graph_replays"] - before["graph_replays"] == 5
    assert after["fallbacks"] == before["fallbacks"]


def _decode_llama(layers: int):
    """A grouped-query Llama (hidden 512, 8 heads of 64, 4 key/value heads) on the CPU and its copy on the device,
    a 9-token prompt, and static caches (32 rows) of both with the first 8 tokens prefilled (the device's by
    its compiled forward)."""
    import transformers
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=512, intermediate_size=1024, num_attention_heads=8,
                                   num_key_value_heads=4, num_hidden_layers=layers, vocab_size=300,
                                   max_position_embeddings=64)
    cpu = transformers.LlamaForCausalLM(cfg).eval()
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.load_state_dict(cpu.state_dict())
    model = model.to(DEV)
    ids = torch.randint(0, 300, (1, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cache = transformers.StaticCache(config=cfg, max_cache_len=32)
        cpu(input_ids=ids[:, :8], past_key_values=cache, cache_position=torch.arange(8), use_cache=True)
        forward = torch.compile(model.forward, backend="ttnn", fullgraph=True)
        dcache = transformers.StaticCache(config=cfg, max_cache_len=32)
        forward(input_ids=ids[:, :8].to(DEV), past_key_values=dcache, cache_position=torch.arange(8).to(DEV),
                use_cache=True)
    return cpu, forward, ids, cache, dcache


def _replayed_decode_step(layers: int) -> collections.Counter:
    """The TT-NN ops of a replayed static-cache decode step of the grouped-query Llama of _decode_llama, compiled;
    the logits of each step (eager through the lowerings, captured, replayed) against the CPU's."""
    from ttnn_eager import counters
    cpu, forward, ids, cache, dcache = _decode_llama(layers)
    with torch.no_grad():
        for step in range(3):  # eager through the lowerings, captured, replayed
            counters.ttnn_by_op.clear()
            replays = ttnn_eager.stats()["graph_replays"]
            pos = torch.tensor([8 + step])
            tok = ids[:, 8:9] if step == 0 else torch.tensor([[step + 1]])
            got = forward(input_ids=tok.to(DEV), past_key_values=dcache, cache_position=pos.to(DEV), use_cache=True)
            want = cpu(input_ids=tok, past_key_values=cache, cache_position=pos, use_cache=True)
            assert pcc(got.logits.cpu(), want.logits) >= 0.999
        assert ttnn_eager.stats()["graph_replays"] == replays + 1
    torch._dynamo.reset()
    return collections.Counter(counters.ttnn_by_op)


def test_a_compiled_grouped_query_decode_step_is_the_fused_ops():
    """A static-cache decode step of a grouped-query Llama layer compiled and replayed: the rotary embedding is
    TT-NN's (HF's layout, no padded rows to slice off), the cache update one scatter per cache at the device
    position (cache_update), attention one sdpa of the grouped heads (no repeat_kv copies), the two residual adds
    the bias of the attention output's and the down projection's linears (residual_bias: one row); a layer is the
    difference between two layers and one."""
    one, two = _replayed_decode_step(1), _replayed_decode_step(2)
    layer = two - one
    assert layer["experimental.rotary_embedding_hf"] == 2 and layer["scatter"] == 2, layer
    assert layer["transformer.scaled_dot_product_attention"] == 1 and not {"permute", "slice"} & set(layer), layer
    assert layer["linear"] == 5 and layer["add"] == 1, layer
    # linear 5 (the o and down projections with the residual as bias), rms_norm 2, split heads 1, rotary 2,
    # expand 1 (the cache position), scatter 2, sdpa 1, concatenate_heads 1, multiply 1, add 1 (the cache's
    # cumulative_length + 1)
    assert sum(layer.values()) <= 17, layer  # was 19 (2026-12-06, before residual_bias), 27 (2026-12-05)
    assert sum(one.values()) <= 34, one       # was 36 (2026-12-06), 47 (2026-12-04: 64)


def test_a_replayed_static_cache_decode_generates_the_cpus_tokens():
    """Greedy decoding of the grouped-query Llama (2 layers) with its forward compiled, in strict mode: ten
    steps -- eager, captured, then 8 replays -- each step's token the argmax of the device's logits, fed back; the
    tokens equal float32 CPU's, the logits close, and after the replays the device's static caches hold the CPU's
    keys and values at every position written (a replay writes the cache)."""
    cpu, forward, ids, cache, dcache = _decode_llama(2)
    mine, theirs = ids[:, 8:9], ids[:, 8:9]
    tokens, want_tokens = [], []
    before = ttnn_eager.stats()
    with torch.no_grad(), ttnn_eager.strict():
        for step in range(10):
            pos = torch.tensor([8 + step])
            got = forward(input_ids=mine.to(DEV), past_key_values=dcache, cache_position=pos.to(DEV), use_cache=True)
            want = cpu(input_ids=theirs, past_key_values=cache, cache_position=pos, use_cache=True)
            logits = got.logits.cpu()
            assert pcc(logits, want.logits) >= 0.999, step
            mine, theirs = logits[:, -1:].argmax(-1), want.logits[:, -1:].argmax(-1)
            tokens.append(int(mine)), want_tokens.append(int(theirs))
    after = ttnn_eager.stats()
    assert tokens == want_tokens and len(set(tokens)) > 1, (tokens, want_tokens)
    assert after["graph_replays"] - before["graph_replays"] == 8 and after["fallbacks"] == before["fallbacks"]
    for mine_layer, cpu_layer in zip(dcache.layers, cache.layers):
        for got, want in ((mine_layer.keys, cpu_layer.keys), (mine_layer.values, cpu_layer.values)):
            got = got.cpu()
            assert pcc(got[:, :, :18], want[:, :, :18]) >= 0.999
            assert not got[:, :, 18:].any() and not want[:, :, 18:].any()  # (nothing written past the last step)
        assert int(mine_layer.cumulative_length.cpu()) == int(cpu_layer.cumulative_length) == 18


def test_transformers_grouped_mm_fallback_compiles_to_the_grouped_matmul_eager_mode_runs():
    """transformers' MoE layers call torch._grouped_mm eagerly, but under Dynamo with float32 weights their opaque
    transformers::grouped_mm_fallback (a loop of mm into slices of the output: per expert a slice, an mm and a
    functionalized copy); the backend compiles it as aten._grouped_mm (compiler.whole_ops), as eager mode runs it."""
    import transformers.integrations.moe  # noqa: F401  (registers transformers::grouped_mm_fallback)
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(12, 32, generator=g), torch.randn(3, 32, 64, generator=g)
    offs = torch.tensor([5, 5, 12], dtype=torch.int32)  # an expert with no rows
    ref = torch.ops.transformers.grouped_mm_fallback(x, w, offs)
    f = torch.compile(lambda a, b, o: torch.ops.transformers.grouped_mm_fallback(a, b, o) * 2, backend="ttnn",
                      fullgraph=True)
    with torch.no_grad(), ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        out = f(x.to(DEV), w.to(DEV), offs.to(DEV))
    assert rec.aten["aten._grouped_mm.default"] == 1 and not rec.aten["aten.mm.default"], dict(rec.aten)
    assert out.shape == ref.shape and pcc(out.cpu(), ref * 2) >= 0.999


def test_a_functionalized_copy_stays_on_the_device():
    """x.copy_(y) into a graph-local tensor, and an out= into a slice, become the functional aten.copy under
    aot_autograd: lowered (it was the CPU fallback compiled that eager mode did not have)."""
    def fn(a, b):
        out = torch.zeros(4, 6, device=a.device)
        torch.mm(a[:2], b, out=out[1:3])
        c = torch.empty(4, 6, dtype=torch.int32, device=a.device)
        c.copy_(out * 10)
        return out + 1, c
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(3, 5, generator=g), torch.randn(5, 6, generator=g)
    ref = fn(a, b)
    f = torch.compile(fn, backend="ttnn", fullgraph=True)
    with torch.no_grad(), ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        out = f(a.to(DEV), b.to(DEV))
    assert rec.aten["aten.copy.default"] >= 1 and not rec.fallbacks
    assert pcc(out[0].cpu(), ref[0]) >= 0.999 and out[1].dtype == torch.int32
    assert (out[1].cpu() - ref[1]).abs().max() <= 0.05 * ref[1].abs().max()


def test_a_view_traced_on_pytorchs_strides_runs_on_the_backends():
    """aot_autograd traces with PyTorch's strides: x.transpose(1, 2) * y keeps the transposed strides, so the
    reshape of its transpose back is traced as a view -- impossible on the backend's contiguous result ("view size
    is not compatible": falcon_h1, granitemoehybrid, mamba2 compiled). A functionalized graph's views are values
    (compiler.views_as_values): the CPU's result, on the device."""
    def fn(x, y):
        h = x.transpose(1, 2) * y
        return torch.relu(h.transpose(1, 2).reshape(2, -1)) + 1
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(2, 24, 48, generator=g), torch.randn(48, 1, generator=g)
    f = torch.compile(fn, backend="ttnn", fullgraph=True)
    with torch.no_grad(), ttnn_eager.strict():
        outs = [f(x.to(DEV), y.to(DEV)).cpu() for _ in range(3)]  # eager through the lowerings, captured, replayed
    for out in outs:
        assert pcc(out, fn(x, y)) >= 0.9999


def test_what_a_graph_computes_from_its_own_constants_is_computed_once():
    """A model's torch.tensor(...) constant and what is computed from it alone (gemma3n's
    Normal(0, 1).icdf(torch.tensor(0.95)) in every layer: an erfinv and its arithmetic) are folded into a constant
    when the graph is compiled (compiler.fold_constants): no erfinv at the later calls, the CPU's values."""
    def fn(x):
        cut = torch.distributions.normal.Normal(0, 1).icdf(torch.tensor(0.95, device=x.device))
        return torch.relu(x - x.mean(-1, keepdim=True) - x.std(-1, keepdim=True) * cut)
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(3))
    f = torch.compile(fn, backend="ttnn", fullgraph=True)
    recs = []
    with torch.no_grad(), ttnn_eager.strict():
        for _ in range(3):
            with ttnn_eager.record_ops() as rec:
                out = f(x.to(DEV)).cpu()
            recs.append(rec)
            assert pcc(out, fn(x)) >= 0.999
    assert not recs[1].ttnn["erfinv"] and not recs[1].aten["aten.erfinv.default"], dict(recs[1].ttnn)
    with torch.no_grad(), ttnn_eager.record_ops() as eager:
        fn(x.to(DEV))
    assert eager.ttnn["erfinv"] == 1 and sum(recs[1].ttnn.values()) < sum(eager.ttnn.values())


def test_what_a_graph_computes_from_factory_ops_alone_is_computed_once_and_the_graph_replayed():
    """Tensors a forward makes from sizes alone (idefics3's vision embeddings: a torch.ones patch mask made on the
    host and copied to the device, the patch positions computed from it, sums and views on the way) are folded
    into constants when the graph is compiled: the host-to-device copy no longer keeps the graph from being
    captured, the later calls replay without those ops, fewer TT-NN ops than eager mode; the CPU's result. A
    result of the graph that is constant is a new tensor at every call: a write into it (a cache's `+=`) does not
    reach the next call's (nor does the graph copy a host constant to the device at each call: still replayed)."""
    def fn(x):
        mask = torch.ones(2, 8).to(dtype=torch.bool, device=x.device)  # (made on the host, as idefics3's)
        steps = 1.0 / mask[:, 0:4].sum(dim=1)
        pos = torch.arange(8, device=x.device, dtype=torch.float32)[None, :] * steps[:, None]
        return (x + torch.where(mask, pos, torch.zeros_like(pos)).view(2, 8, 1), torch.arange(3, device=x.device),
                torch.tensor([7, 8]).to(x.device))  # (a host constant moved to the device: mistral's cache's)
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(4))
    f = torch.compile(fn, backend="ttnn", fullgraph=True)
    recs, ranges = [], []
    with torch.no_grad():
        ttnn_eager.reset_stats()
        for _ in range(3):
            with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
                out, r, t = f(x.to(DEV))
            recs.append(rec)
            ranges.append(r)
            assert pcc(out.cpu(), fn(x)[0]) >= 0.9999 and torch.equal(r.cpu(), torch.arange(3))
            assert torch.equal(t.cpu(), torch.tensor([7, 8]))
            r.add_(10)
            t.add_(10)
        stats = ttnn_eager.stats()
        with ttnn_eager.record_ops() as eager:
            fn(x.to(DEV))
    assert stats["graph_replays"] == 1 and stats["compiled_eager_calls"] == 0, stats
    assert not recs[2].ttnn["sum"] and not recs[2].ttnn["reciprocal"], dict(recs[2].ttnn)
    assert eager.ttnn["sum"] and sum(recs[2].ttnn.values()) < sum(eager.ttnn.values())
    assert ranges[1] is not ranges[2] and ranges[1].untyped_storage() is not ranges[2].untyped_storage()


def test_a_tensor_assert_in_a_graph_is_checked_after_it_and_the_graph_replayed():
    """one_hot's traced decomposition checks its classes with aten._assert_async (all(x >= 0), all(x < n));
    in the graph it was a host read on the CPU fallback, so dbrx's and switch_transformers' router graphs ran
    eagerly at every call. The conditions are outputs of the graph now, read after each call: no fallback, the
    graph replayed, the result the CPU's; a failing assert raises, captured or replayed."""
    def f(x, idx):
        return x * F.one_hot(idx, 5).float()
    torch.manual_seed(0)
    x, idx = torch.randn(3, 4, 5), torch.randint(0, 5, (3, 4))
    g = torch.compile(f, backend="ttnn", fullgraph=True)
    dx = x.to(DEV)
    for _ in range(3):
        ttnn_eager.reset_stats()
        got = g(dx, idx.to(DEV))
    stats = ttnn_eager.stats()
    assert stats["fallbacks"] == 0 and stats["graph_replays"] == 1 and stats["compiled_eager_calls"] == 0, stats
    assert (got.cpu() - f(x, idx)).abs().max() <= 0.02
    ttnn_eager.reset_stats()
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        g(dx, torch.tensor([[0, 1, 2, 7]] * 3).to(DEV))
    assert ttnn_eager.stats()["graph_replays"] == 1  # (checked after the replay)
    assert (g(dx, idx.to(DEV)).cpu() - f(x, idx)).abs().max() <= 0.02
    # (a negative integer input is another device dtype: a new capture, so a new compile here; its first call)
    torch._dynamo.reset()
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.compile(f, backend="ttnn", fullgraph=True)(dx, torch.tensor([[0, -1, 2, 3]] * 3).to(DEV))


@pytest.mark.parametrize("mode", ["nearest", "nearest_other_size", "bilinear", "bicubic"])
def test_an_interpolate_in_a_graph_is_the_one_upsample_lowering_of_eager_mode(mode):
    """PyTorch's Python decompositions of the upsample ops (py_impl at Autograd / CompositeImplicitAutograd) ran
    while aot_autograd traced, whatever the decomposition table: interpolate became index gathers and their
    arithmetic (bicubic 8x8 -> 12x12: 116 TT-NN ops compiled against eager's 5; the source coordinates computed
    in bfloat16 on the device: sam3_lite_text_text_model's Pearson 0.974). The backend traces them whole
    (compiler.kept_whole): one upsample op in the graph, no more TT-NN ops than eager mode, the CPU's values,
    the graph replayed, and PyTorch's decompositions back in place after compiling."""
    from torch._C import DispatchKey
    size = (12, 12) if mode != "nearest" else (16, 16)
    kw = {"align_corners": False} if mode in ("bilinear", "bicubic") else {}
    real = "nearest" if mode.startswith("nearest") else mode

    def f(t):
        return F.interpolate(t, size=size, mode=real, **kw) * 2
    x = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    want = f(x)
    g = torch.compile(f, backend="ttnn", fullgraph=True)
    with torch.no_grad(), ttnn_eager.strict():
        for _ in range(3):
            ttnn_eager.reset_stats()
            with ttnn_eager.record_ops() as rec:
                got = g(x.to(DEV))
        with ttnn_eager.record_ops() as eager:
            f(x.to(DEV))
    stats = ttnn_eager.stats()
    op = {"nearest": "upsample_nearest2d", "bilinear": "upsample_bilinear2d", "bicubic": "upsample_bicubic2d"}[real]
    assert stats["graph_replays"] == 1 and not rec.fallbacks, stats
    assert sum(rec.ttnn.values()) <= sum(eager.ttnn.values()), (dict(rec.ttnn), dict(eager.ttnn))
    assert not rec.ttnn["embedding"] and not rec.ttnn["gather"] or real == "nearest", dict(rec.ttnn)
    assert pcc(got.cpu(), want) >= 0.999
    assert float((got.cpu() - want).abs().max()) <= 0.02 * float(want.abs().max())
    # the first call ran the graph through the lowerings: one upsample op
    torch._dynamo.reset()
    with torch.no_grad(), ttnn_eager.record_ops() as first:
        torch.compile(f, backend="ttnn", fullgraph=True)(x.to(DEV))
    assert first.aten[f"aten.{op}.default"] == 1 and not first.aten["aten.index.Tensor"], dict(first.aten)
    assert DispatchKey.Autograd in getattr(torch.ops.aten, op).default.py_kernels  # (put back)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_an_interpolate_to_a_dynamic_size_compiles(mode):
    """oneformer interpolates its masks to a feature map's size, which Dynamo made dynamic at a recompile: with
    PyTorch's Python kernel of the .vec overload set aside, its C++ kernel raised ("SymIntArrayRef expected to
    contain only concrete integers", BackendCompilerFailed). The backend's own .vec kernel computes the size on
    symbolic sizes: the CPU's values at the first size and at the second (the recompile with dynamic sizes)."""
    kw = {"align_corners": False} if mode == "bilinear" else {}

    def f(x, y):
        return F.interpolate(x, size=y.shape[-2:], mode=mode, **kw) * 2
    g = torch.compile(f, backend="ttnn", fullgraph=True)
    x = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    for h, w in ((6, 8), (10, 12)):
        y = torch.zeros(1, 1, h, w)
        with torch.no_grad(), ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
            got = g(x.to(DEV), y.to(DEV)).cpu()
        want = f(x, y)
        assert got.shape == want.shape and not rec.fallbacks
        assert pcc(got, want) >= 0.999
        assert float((got - want).abs().max()) <= 0.02 * float(want.abs().max())


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_an_interpolate_in_a_graph_gathers_on_the_device(mode):
    """PyTorch's traced decompositions of interpolate gather with aten._unsafe_index (index without the bounds
    check), which ran on the CPU fallback compiled only (conditional_detr, pixio, sam_hq_vision_model, vilt): it
    is aten.index's lowering now: no fallback, the graph replayed, the CPU's values."""
    kw = {} if mode == "nearest" else {"align_corners": False}

    def f(t):
        return F.interpolate(t, size=(12, 12), mode=mode, **kw)
    x = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    g = torch.compile(f, backend="ttnn", fullgraph=True)
    with torch.no_grad():
        for _ in range(3):
            ttnn_eager.reset_stats()
            got = g(x.to(DEV))
    stats = ttnn_eager.stats()
    assert stats["fallbacks"] == 0 and stats["graph_replays"] == 1, stats
    assert pcc(got.cpu(), f(x)) >= 0.999
