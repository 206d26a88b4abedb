"""Decode-layout heads (issue 34): ttnn_eager.qkv_heads_decode, the rotary embedding in decode mode, and the
decode_heads pass, which puts a continuous-batching decode step's heads (T users' tokens as one sequence
[1, T, H]) into TT-NN's decode layout [1, T, heads, d] under torch.compile -- no permutes. Accuracy against
float32 PyTorch on the CPU."""
import collections

import pytest
import torch
import torch.nn.functional as F

import ttnn_eager
import ttnn_eager.lowerings  # noqa: F401  (defines the fused ops, torch.ops.ttnn_eager.*)
from ttnn_eager import counters
from ttnn_eager.features.compile import passes

from conftest import covers, pcc
from test_compile import _rotate_half

DEV = "ttnn:0"
fused = torch.ops.ttnn_eager


def _r(*shape, scale=1.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape))) * scale


def _cos_sin(users: int, d: int, positions=None):
    """transformers' rotary cos and sin [1, users, d] at each user's own position."""
    pos = torch.arange(users) * 3 + 1 if positions is None else positions
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    freqs = torch.cat([pos[:, None].float() * inv[None]] * 2, -1)[None]
    return freqs.cos(), freqs.sin()


def _qkv_args(users, hidden, heads, kv, d, batch=1, bias=True):
    ws = [_r(heads * d, hidden, scale=hidden ** -0.5), _r(kv * d, hidden, scale=0.5 * hidden ** -0.5),
          _r(kv * d, hidden + 1, scale=hidden ** -0.5)[:, :hidden].contiguous()]
    bs = [_r(w.shape[0] + 7)[:w.shape[0]].contiguous() for w in ws] if bias else [None] * 3
    return _r(batch, users, hidden), ws, bs


def _qkv_decode(x, wq, wk, wv, bq, bk, bv, heads=4, kv=2):
    return fused.qkv_heads_decode(x, [wq, wk, wv], [bq, bk, bv], heads, kv)


# (tests/test_ops.py's lowering guard runs every file's CASES on the device)
CASES = {
    # 8 users, 4 query heads of 64 and 2 key/value heads, biases; then 32 users (a full tile), heads of 32
    "qkv_heads_decode": (_qkv_decode, [[_r(1, 8, 256), _r(256, 256) / 16, _r(128, 256) / 16, _r(128, 256) / 16,
                                        _r(256), _r(128), _r(128)],
                                       [_r(1, 32, 128), _r(128, 128) / 11, _r(64, 128) / 11, _r(64, 128) / 11,
                                        _r(128), _r(64), _r(64)]]),
    # decode-layout heads with a position a user: the rotary embedding's decode mode (heads interleaved here:
    # sharded first)
    "rotary_embedding_decode": (lambda x, c, s: fused.rotary_embedding(x, c, s),
                                [[_r(1, 8, 4, 64), *(t[:, :, None] for t in _cos_sin(8, 64))],
                                 [_r(1, 5, 2, 32), *(t[:, :, None] for t in _cos_sin(5, 32))],
                                 [_r(1, 40, 2, 128), *(t[:, :, None] for t in _cos_sin(40, 128))]]),
}


def _close(got, want, what=""):
    """Pearson and max error of a device result against the float32 CPU value (asserted; returned)."""
    got = got.cpu().float()
    assert got.shape == want.shape, (what, got.shape, want.shape)
    p, err = (pcc(got, want) if want.numel() > 1 else None), float((got - want).abs().max())
    assert (p is None or p >= 0.999) and err <= 0.03 * float(want.abs().max()) + 1e-3, (what, p, err)
    return p, err


@covers(fused.qkv_heads_decode.default)
@pytest.mark.parametrize("case", [(8, 256, 4, 2, 64, True), (32, 128, 4, 4, 32, False), (1, 64, 2, 1, 32, True),
                                  (17, 512, 8, 2, 64, True)])
def test_qkv_heads_decode_on_the_device_matches_its_cpu_meaning(case):
    """The fused op called on ttnn tensors, in strict mode: one linear on the concatenated weights, a reshape and
    nlp_create_qkv_heads_decode; q [1, T, h, d], k, v [1, T, kv, d] within bfloat16 of the float32 meaning, which
    is the three linears viewed into heads."""
    users, hidden, heads, kv, d, bias = case
    x, ws, bs = _qkv_args(users, hidden, heads, kv, d, bias=bias)
    want = fused.qkv_heads_decode(x, ws, bs, heads, kv)
    for t, w, b, n in zip(want, ws, bs, (heads, kv, kv)):
        torch.testing.assert_close(t, F.linear(x, w, b).view(1, users, n, d))
    counters.ttnn_by_op.clear()
    with torch.no_grad(), ttnn_eager.strict():
        got = fused.qkv_heads_decode(x.to(DEV), [w.to(DEV) for w in ws], [None if b is None else b.to(DEV) for b in bs],
                                     heads, kv)
    ops = collections.Counter(counters.ttnn_by_op)
    assert ops["experimental.nlp_create_qkv_heads_decode"] == 1 and ops["linear"] == 1, ops
    for g, w, name in zip(got, want, "qkv"):
        _close(g, w, name)


@pytest.mark.parametrize("why, args", [
    ("batch", (2, 8, 128, 4, 2, 32)),     # two sequences: not the decode layout
    ("users", (1, 33, 128, 4, 2, 32)),    # more than 32 users
    ("head size", (1, 8, 192, 4, 2, 48)),  # heads of 48: not whole tiles
    ("query heads", (1, 4, 1280, 40, 8, 32)),  # more than 32 query heads
])
def test_qkv_heads_decode_that_tt_nn_cannot_take_is_the_counted_cpu_meaning(why, args):
    batch, users, hidden, heads, kv, d = args
    x, ws, bs = _qkv_args(users, hidden, heads, kv, d, batch=batch)
    want = fused.qkv_heads_decode(x, ws, bs, heads, kv)
    dx, dws, dbs = x.to(DEV), [w.to(DEV) for w in ws], [b.to(DEV) for b in bs]
    with torch.no_grad(), ttnn_eager.strict(), pytest.raises(ttnn_eager.FallbackError, match="qkv_heads_decode"):
        fused.qkv_heads_decode(dx, dws, dbs, heads, kv)
    before = ttnn_eager.stats()["fallbacks"]
    counters.ttnn_by_op.clear()
    with torch.no_grad():
        got = fused.qkv_heads_decode(dx, dws, dbs, heads, kv)
    assert ttnn_eager.stats()["fallbacks"] == before + 1
    assert "experimental.nlp_create_qkv_heads_decode" not in counters.ttnn_by_op
    for g, w in zip(got, want):
        assert g.device == torch.device(DEV)
        _close(g, w, why)  # (the CPU meaning of the inputs as the device stores them: bfloat16)


def test_qkv_heads_decode_refuses_weights_of_other_head_sizes():
    x, ws, bs = _qkv_args(8, 128, 4, 2, 32)
    with torch.no_grad(), pytest.raises(RuntimeError, match="key and value weights"):
        fused.qkv_heads_decode(x.to(DEV), [w.to(DEV) for w in ws], [b.to(DEV) for b in bs], 4, 1)


@covers(fused.rotary_embedding.default)
def test_the_rotary_embedding_of_decode_layout_heads_is_decode_mode_with_cos_and_sin_sharded_once():
    """Heads [1, T, h, d] from qkv_heads_decode (height-sharded) and cos, sin [1, T, 1, d]: rotary_embedding_hf in
    decode mode, cos and sin sharded once for both the query and the key (layout.decode_rows); a reduction of the
    result (which TT-NN takes interleaved only) moves it to DRAM first."""
    users, heads, kv, d = 8, 4, 2, 64
    x, ws, bs = _qkv_args(users, 256, heads, kv, d)
    cos, sin = (t[:, :, None] for t in _cos_sin(users, d))
    q, k, _ = fused.qkv_heads_decode(x, ws, bs, heads, kv)
    want = [fused.rotary_embedding(t, cos, sin) for t in (q, k)]
    ref = (q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin)
    for w, r in zip(want, ref):
        torch.testing.assert_close(w, r)
    with torch.no_grad(), ttnn_eager.strict():
        dq, dk, _ = fused.qkv_heads_decode(x.to(DEV), [w.to(DEV) for w in ws], [b.to(DEV) for b in bs], heads, kv)
        dc, ds = cos.to(DEV), sin.to(DEV)
        counters.ttnn_by_op.clear()
        got = [fused.rotary_embedding(t, dc, ds) for t in (dq, dk)]
        ops = collections.Counter(counters.ttnn_by_op)
        total = got[0].sum(-1)
    assert ops == {"experimental.rotary_embedding_hf": 2, "to_memory_config": 2}, ops  # cos and sin, once each
    for g, w in zip(got, want):
        _close(g, w)
    _close(total, want[0].sum(-1))


# ------------------------------------------------------------------------------------------ the pass, compiled
class DecodeStepHeads(torch.nn.Module):
    """transformers' Llama attention up to the paged attention, as continuous batching runs a decode step: the T
    users' new tokens as one sequence [1, T, H], q, k, v viewed into heads and transposed, the rotary embedding
    (cos, sin [1, T, d] unsqueezed to [1, 1, T, d]: a position a token), then transposed back to [1, T, heads, d]
    as the paged decode does (features/serving/paged.py) -- here consumed by a sum, a scale and an add (a reshape
    of v's would be concat_heads' pattern, matched first: its heads then stay qkv_heads')."""

    def __init__(self, hidden=256, heads=4, kv=2, d=64, bias=True, layers=1):
        super().__init__()
        self.heads, self.kv, self.d = heads, kv, d
        self.layers = torch.nn.ModuleList(torch.nn.ModuleList(
            torch.nn.Linear(hidden, n * d, bias=bias) for n in (heads, kv, kv)) for _ in range(layers))

    def forward(self, x, cos, sin, reuse=False):
        b, t, _ = x.shape
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        outs = []
        for i, (qp, kp, vp) in enumerate(self.layers):
            h = x if i == 0 else x * (i + 1)  # (each layer its own input, as a decoder's normed hidden states)
            q, k, v = (p(h).view(b, t, -1, self.d).transpose(1, 2) for p in (qp, kp, vp))
            if reuse:
                outs.append(q.sum())  # a head also used elsewhere
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            q, k, v = (u.transpose(1, 2) for u in (q, k, v))  # [b, t, heads, d]: the paged ops' layout
            outs += [q.sum(-1), k * 2, v + 1]
        return tuple(outs)


def _step(users=8, batch=1, d=64, **kw):
    torch.manual_seed(0)
    model = DecodeStepHeads(d=d, **kw).eval()
    cos, sin = _cos_sin(users, d)
    return model, (torch.randn(batch, users, 256), cos.expand(batch, -1, -1).contiguous(),
                   sin.expand(batch, -1, -1).contiguous())


def _compiled(fn, monkeypatch):
    """fn compiled with backend "ttnn", and the rewrites of the fusion passes on its graphs (a list: one dict a
    graph compiled)."""
    done, run = [], passes.run
    monkeypatch.setattr(passes, "run", lambda gm, example_inputs=None: done.append(run(gm, example_inputs)) or done[-1])
    torch._dynamo.reset()
    return torch.compile(fn, backend="ttnn", fullgraph=True), done


def _compiled_model(model, monkeypatch, **kwargs):
    dev = model.to(DEV)
    return _compiled(lambda *a: dev(*a, **kwargs), monkeypatch)


def _replayed(compiled, args):
    """compiled called three times in strict mode -- eagerly through the lowerings, captured, replayed --: the
    last call's result and TT-NN ops, that call asserted to be one replay."""
    with torch.no_grad(), ttnn_eager.strict():
        for _ in range(3):
            counters.ttnn_by_op.clear()
            replays = ttnn_eager.stats()["graph_replays"]
            got = compiled(*args)
    assert ttnn_eager.stats()["graph_replays"] == replays + 1
    return got, collections.Counter(counters.ttnn_by_op)


@pytest.mark.parametrize("numerics", ["default", "float32"])
def test_a_compiled_decode_step_puts_the_heads_in_the_decode_layout(numerics, restore_config, monkeypatch):
    """Two layers of a decode step's heads compiled with backend "ttnn" in strict mode, replayed: each layer's
    heads are one qkv_heads_decode (linear, reshape, nlp_create_qkv_heads_decode) and two decode-mode rotary
    embeddings, no permute; cos and sin viewed [1, T, 1, d] and sharded once for both layers. Values against the
    float32 CPU (bfloat16 storage, and float32 storage with exact shadow numerics)."""
    if numerics == "float32":
        ttnn_eager.configure(float32_storage="float32", shadow_numerics="exact")
    model, args = _step(layers=2)
    with torch.no_grad():
        want = model(*args)
    step, done = _compiled_model(model, monkeypatch)
    got, ops = _replayed(step, [a.to(DEV) for a in args])
    assert len(done) == 1 and done[0]["decode_heads"] == 2 and done[0]["rotary_embedding"] == 4, done
    assert ops["experimental.nlp_create_qkv_heads_decode"] == 2 and ops["experimental.rotary_embedding_hf"] == 4, ops
    assert not {"permute", "transpose", "transformer.split_query_key_value_and_split_heads"} & set(ops), ops
    # cos and sin: one view [1, T, 1, d] and one sharded form each for both layers; the sum's, scale's and
    # add's inputs moved to DRAM (3 a layer)
    assert ops["to_memory_config"] == 2 + 3 * 2, ops
    figures = [_close(g, w, i) for i, (g, w) in enumerate(zip(got, want))]
    print(numerics, dict(ops), [f"pcc {p:.6f} max err {e:.2e}" for p, e in figures])


@pytest.mark.parametrize("what, users, batch, kwargs", [
    ("two sequences", 8, 2, {}),
    ("33 users", 33, 1, {}),
    ("a head used elsewhere", 8, 1, {"reuse": True}),
])
def test_the_decode_heads_pass_leaves_other_steps_alone(what, users, batch, kwargs, monkeypatch):
    """No rewrite for a batch of two sequences, more than 32 users (nlp_create_qkv_heads_decode's most), or heads
    also used before the rotary embedding (the heads then stay three linears, viewed and transposed); the values
    stay those of the CPU."""
    model, args = _step(users=users, batch=batch)
    with torch.no_grad():
        want = model(*args, **kwargs)
        step, done = _compiled_model(model, monkeypatch, **kwargs)
        got = step(*[a.to(DEV) for a in args])
    assert len(done) == 1 and done[0]["decode_heads"] == 0 and done[0]["rotary_embedding"] == 2, done
    for g, w in zip(got, want):
        _close(g, w, what)


def test_the_paged_ops_take_the_decode_layout_heads_as_they_are():
    """A decode step as continuous batching runs it on TT-NN's decode ops (tt_transformers' order): the heads
    (qkv_heads_decode), the rotary embedding of q and k in decode mode, the new keys and values written into
    the paged caches, the query attending to them. Heads stay height-sharded from op to op: the only memory
    moves are cos's and sin's (once each); the attention within bfloat16 of the float32 CPU meaning."""
    import test_serving
    users, heads, kv, d = 3, 4, 2, 64
    cache, vcache, _, _, positions, table = test_serving._paged(users, kv, heads, d=d, seed=3)
    cache, vcache = cache.float(), vcache.float()
    x, ws, bs = _qkv_args(users, 256, heads, kv, d)
    cos, sin = (t[:, :, None] for t in _cos_sin(users, d, positions.long()))

    def step(x, ws, bs, cos, sin, cache, vcache, positions, table):
        q, k, v = fused.qkv_heads_decode(x, ws, bs, heads, kv)
        q, k = fused.rotary_embedding(q, cos, sin), fused.rotary_embedding(k, cos, sin)
        fused.paged_update_cache(cache, k, positions, table)
        fused.paged_update_cache(vcache, v, positions, table)
        return fused.paged_attention_decode(q, cache, vcache, positions, table, d ** -0.5)

    want = step(x, ws, bs, cos, sin, cache.clone(), vcache.clone(), positions, table)
    dev = [x.to(DEV), [w.to(DEV) for w in ws], [b.to(DEV) for b in bs], cos.to(DEV), sin.to(DEV),
           cache.bfloat16().to(DEV), vcache.bfloat16().to(DEV), positions.to(DEV), table.to(DEV)]
    with torch.no_grad(), ttnn_eager.strict():
        counters.ttnn_by_op.clear()
        got = step(*dev)
        ops = collections.Counter(counters.ttnn_by_op)
    assert ops["experimental.nlp_create_qkv_heads_decode"] == 1 and ops["experimental.rotary_embedding_hf"] == 2, ops
    assert ops["experimental.paged_update_cache"] == 2, ops
    assert ops["transformer.paged_scaled_dot_product_attention_decode"] == 1, ops
    assert ops["to_memory_config"] == 2 and "permute" not in ops, ops  # cos and sin sharded; no head moved
    print(dict(ops), _close(got, want))


def test_a_compiled_decode_step_gives_the_paged_attention_its_sharded_query(monkeypatch):
    """The decode step's heads compiled and replayed with TT-NN's paged attention on the query (the paged decode's
    query.transpose(1, 2)): the rotary's height-sharded query goes into the attention as it is -- the memory
    moves are cos's, sin's and those of the key and value for their other consumers (a scale, an add)."""
    import test_serving
    users, heads, kv, d = 3, 4, 2, 64
    cache, vcache, _, _, positions, table = test_serving._paged(users, kv, heads, d=d, seed=3)
    model, _ = _step(users=users, d=d, heads=heads, kv=kv)
    cos, sin = _cos_sin(users, d, positions.long())
    x = _r(1, users, 256)

    def step(x, cos, sin, kc, vc, positions, table):
        qp, kp, vp = model.layers[0]
        q, k, v = (p(x).view(1, users, -1, d).transpose(1, 2) for p in (qp, kp, vp))
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = (u * cos + _rotate_half(u) * sin for u in (q, k))
        att = fused.paged_attention_decode(q.transpose(1, 2), kc, vc, positions, table, d ** -0.5)
        return att, k.transpose(1, 2) * 2, v.transpose(1, 2) + 1

    with torch.no_grad():
        want = step(x, cos, sin, cache.float(), vcache.float(), positions, table)
    model.to(DEV)
    compiled, done = _compiled(step, monkeypatch)
    got, ops = _replayed(compiled, [t.to(DEV) for t in (x, cos, sin, cache, vcache, positions, table)])
    assert len(done) == 1 and done[0]["decode_heads"] == 1, done
    assert ops["transformer.paged_scaled_dot_product_attention_decode"] == 1, ops
    assert ops["to_memory_config"] == 4 and not {"permute", "transpose"} & set(ops), ops
    print(dict(ops), [_close(g, w, i) for i, (g, w) in enumerate(zip(got, want))])
