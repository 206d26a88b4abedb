"""Serving on ttnn:0 (docs/serving.md): view(dtype) on the device (the byte buffer of transformers' paged
cache), the paged cache sized from the device's memory, and continuous batching (generate_batch,
ContinuousBatchingManager) in strict mode with the CPU's greedy tokens. Tiny seeded Llama
(ttnn_eager.tools.models); exact shadow arithmetic (float32 storage, shadow_numerics="exact") as in
tests/test_generation.py."""
import gc
import time

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ttnn_eager
import ttnn_eager.lowerings  # noqa: F401  (defines torch.ops.ttnn_eager: the paged ops)
from ttnn_eager.core.tensor import handle_of
from ttnn_eager.device import api
from ttnn_eager.tools import models

from conftest import covers

DEV = "ttnn:0"
aten = torch.ops.aten
FUZZ = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
BITS = [torch.float32, torch.int32, torch.bfloat16, torch.uint8, torch.int8]


def values(dtype, *shape, seed=0):
    """Values of `dtype` whose bits vary everywhere (signs, exponents, low mantissa bits); float32 ones exact in
    the storage they will have (tests set it)."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(*shape, generator=g) * 1000).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -2**31), min(info.max, 2**31 - 1), shape, generator=g, dtype=torch.int64).to(dtype)


def bits(t):
    return t.contiguous().view(torch.uint8)


def _paged(users=3, kv=2, heads=4, block=32, d=64, blocks=8, seed=0, dtype=torch.bfloat16):
    """A paged cache [blocks, kv, block, d], new rows [1, users, kv, d], queries [1, users, heads, d], positions
    and a page table as transformers keeps it (block numbers, -1 where a request has no block)."""
    g = torch.Generator().manual_seed(seed)
    cache, vcache = (torch.randn(blocks, kv, block, d, generator=g).to(dtype) for _ in range(2))
    new, q = torch.randn(1, users, kv, d, generator=g).to(dtype), torch.randn(1, users, heads, d, generator=g).to(dtype)
    per = blocks // users
    positions = torch.randint(0, per * block, (users,), generator=g, dtype=torch.int32)
    table = torch.full((users, per), -1, dtype=torch.int32)
    order = torch.randperm(blocks, generator=g)[:users * per].reshape(users, per).to(torch.int32)
    for u, pos in enumerate(positions.tolist()):
        table[u, :pos // block + 1] = order[u, :pos // block + 1]
    return cache, vcache, new, q, positions, table


fused = torch.ops.ttnn_eager
# name -> (function, [input tuples]): tests/test_ops.py's guard sees the lowerings these reach
CASES = {
    "view_dtype": (lambda x: (x.view(torch.int32), x.view(torch.uint8), x.view(torch.bfloat16)),
                   [(values(torch.float32, 3, 8).bfloat16().float(),)]),
    # (a copy updated: the CPU meaning writes into its argument)
    "paged_update_cache": (lambda c, x, p, t: fused.paged_update_cache(c.clone(), x, p, t),
                           [(lambda c, v, x, q, p, t: (c, x, p, t))(*_paged())]),
    "paged_update_cache_functional": (fused.paged_update_cache_functional,
                                      [(lambda c, v, x, q, p, t: (c, x, p, t))(*_paged())]),
    "paged_attention_decode": (lambda q, k, v, p, t: fused.paged_attention_decode(q, k, v, p, t, 0.125),
                               [(lambda c, v, x, q, p, t: (q, c, v, p, t))(*_paged())]),
}
BIT_EXACT = ["view_dtype", "paged_update_cache", "paged_update_cache_functional"]


@pytest.mark.parametrize("name", BIT_EXACT)
def test_cases_give_the_cpu_bits(name):
    fn, sets = CASES[name]
    for inputs in sets:
        ref = fn(*inputs)
        with ttnn_eager.strict():
            out = fn(*[x.to(DEV) for x in inputs])
        for o, r in zip(out, ref):
            assert o.dtype == r.dtype and o.shape == r.shape and torch.equal(bits(o.cpu()), bits(r))


# ----------------------------------------------------------------------------------------------- view(dtype)
@covers(aten.view.dtype)
@FUZZ
@given(src=st.sampled_from(BITS), dst=st.sampled_from(BITS), rows=st.sampled_from([1, 3]),
       cols=st.sampled_from([4, 8, 40]), storage=st.sampled_from(["bfloat16", "float32"]), seed=st.integers(0, 99))
def test_view_dtype_gives_the_cpu_bits_on_the_device(src, dst, rows, cols, storage, seed, restore_config):
    """PyTorch's dtype, shape and bits, in strict mode (no CPU op): bitcast, shifts and masks on the device. A
    float32 stored as bfloat16 has the bits of its stored value."""
    ttnn_eager.configure(float32_storage=storage)
    x = values(src, rows, cols, seed=seed)
    if src == torch.float32 and storage == "bfloat16":
        x = x.bfloat16().float()
    ref = x.view(dst)
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        out = x.to(DEV).view(dst)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert torch.equal(bits(out.cpu()), bits(ref)), (src, dst, out.cpu(), ref)
    assert rec.fallbacks == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_writes_through_a_dtype_view_reach_the_byte_buffer(dtype, restore_config):
    """transformers' paged cache: a zeroed byte buffer viewed as the model's dtype, written through slices of
    the view; the bytes of the base, and a second view of it, see every write (strict mode)."""
    ttnn_eager.configure(float32_storage="float32")
    n = 256
    new = values(dtype, 6, seed=1)
    ref = torch.zeros(n, dtype=torch.uint8)
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        buf = torch.zeros(n, dtype=torch.uint8, device=DEV)
        typed = buf.view(dtype)
        typed[3:9] = new.to(DEV)
        words = buf.view(torch.int32)
        got_bytes, got_words, got_typed = buf.cpu(), words.cpu(), typed.cpu()
    ref.view(dtype)[3:9] = new
    assert torch.equal(got_bytes, ref)
    assert torch.equal(got_words, ref.view(torch.int32)) and torch.equal(bits(got_typed), bits(ref.view(dtype)))
    assert rec.fallbacks == {} and rec.ttnn.get("bitcast", 0) > 0


def test_view_dtype_errors_and_the_counted_route():
    """PyTorch's error for a last dimension the new element size does not divide; a dtype whose bits the device
    does not compute (float16, stored as bfloat16) takes the counted CPU fallback, and strict mode names it."""
    with pytest.raises(RuntimeError, match="divisible"):
        torch.zeros(3, dtype=torch.uint8, device=DEV).view(torch.float32)
    x = torch.randn(2, 8).half()
    from ttnn_eager.core import dispatch
    dispatch._warned.discard(torch.ops.aten.view.dtype)  # warned once a process: an earlier test may have
    with ttnn_eager.record_ops() as rec, pytest.warns(UserWarning):
        out = x.to(DEV).view(torch.int16)
    assert rec.fallbacks == {"aten.view.dtype": 1} and out.dtype == torch.int16 and out.shape == (2, 8)
    with ttnn_eager.strict(), pytest.raises(ttnn_eager.FallbackError, match="view.dtype"):
        x.to(DEV).view(torch.int16)


# ----------------------------------------------------------------------------------------------- paged ops
@covers(fused.paged_update_cache.default, fused.paged_attention_decode.default,
        fused.paged_update_cache_functional.default)
@FUZZ
@given(users=st.sampled_from([1, 3, 8]), kv=st.sampled_from([1, 2]), group=st.sampled_from([1, 2, 4]),
       block=st.sampled_from([32, 64, 16]), d=st.sampled_from([32, 64]), seed=st.integers(0, 99))
def test_paged_ops_on_the_device_match_their_cpu_meaning(users, kv, group, block, d, seed):
    """TT-NN's paged cache update and paged decode attention, with transformers' page table (-1 for blocks not
    held): the update writes the CPU meaning's bits into the cache, in place; the attention is within bfloat16
    of the float32 meaning. A block of 16 rows (not a whole tile) takes the counted CPU fallback, and strict
    mode names the op."""
    cache, vcache, new, q, positions, table = _paged(users, kv, kv * group, block, d, blocks=2 * users + 2, seed=seed)
    want_cache = fused.paged_update_cache(cache.clone(), new, positions, table)
    want = fused.paged_attention_decode(q.float(), want_cache.float(), vcache.float(), positions, table, d ** -0.5)
    dev = [t.to(DEV) for t in (cache, vcache, new, q, positions, table)]
    if block % 32:
        with ttnn_eager.strict(), pytest.raises(ttnn_eager.FallbackError, match="paged_update_cache"):
            fused.paged_update_cache(dev[0], dev[2], dev[4], dev[5])
        return
    with ttnn_eager.strict():  # the functional form: the same bits, into a new cache, the argument unchanged
        functional = fused.paged_update_cache_functional(dev[0], dev[2], dev[4], dev[5]).cpu()
    assert torch.equal(functional, want_cache) and torch.equal(dev[0].cpu(), cache)
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        out_cache = fused.paged_update_cache(dev[0], dev[2], dev[4], dev[5])
        got = fused.paged_attention_decode(dev[3], dev[0], dev[1], dev[4], dev[5], d ** -0.5)
    assert out_cache is dev[0] and torch.equal(dev[0].cpu(), want_cache)
    assert got.shape == (1, users, kv * group, d)
    err = float((got.cpu().float() - want).abs().max())
    assert err <= 0.02 * float(want.abs().max()) + 1e-3, err
    assert rec.ttnn["experimental.paged_update_cache"] == 1 and rec.ttnn["clone"] == 0
    assert rec.ttnn["transformer.paged_scaled_dot_product_attention_decode"] == 1 and rec.fallbacks == {}


def test_a_graph_replay_writes_the_paged_cache_in_place_again(restore_config):
    """TT-NN's paged cache update writes into the cache's buffer (it has no functional form). A capture records
    it as that write (before, it refused it: a recording names values by tensor object, so a replay would not
    have repeated the write -- a stale cache, max error 4.95 after one replay). Each replay writes the new rows
    of its static inputs into the same cache tensor, in place: after three replays at three positions the cache
    is the CPU's after the same three updates, exactly, and the cache kept its device buffer. A clone of the
    cache taken between replays (which shares its device tensor until either is written) is not written."""
    ttnn_eager.configure(float32_storage="bfloat16")
    cache, _, new, _, positions, table = _paged()
    dc, dn, dp, dt = (t.to(DEV) for t in (cache, new, positions, table))
    want = fused.paged_update_cache(cache.clone(), new, positions, table)
    g = torch.ttnn.TTNNGraph()
    with torch.ttnn.graph(g):
        fused.paged_update_cache(dc, dn, dp, dt)
    buffer = api.buffer_address(handle_of(dc))
    gen = torch.Generator().manual_seed(1)
    for step in range(3):
        rows = torch.randn(new.shape, generator=gen).to(new.dtype)
        moved = positions + 1 + step
        later = torch.where(moved // 32 == positions // 32, moved, positions)  # (within the blocks held)
        dn.copy_(rows.to(DEV))
        dp.copy_(later.to(DEV))
        g.replay()
        fused.paged_update_cache(want, rows, later, table)
    assert torch.equal(dc.cpu(), want)
    assert api.buffer_address(handle_of(dc)) == buffer
    # a tensor that shares the cache's device tensor (a clone) keeps its value: the replay writes into a copy
    kept = dc.clone()
    dn.copy_(torch.randn(new.shape, generator=gen).to(new.dtype).to(DEV))
    g.replay()
    assert torch.equal(kept.cpu(), want) and not torch.equal(dc.cpu(), want)
    # (on the mock a value is its shadow: that the write went elsewhere shows in the buffers)
    assert api.buffer_address(handle_of(dc)) != api.buffer_address(handle_of(kept))


def test_paged_attention_reads_only_the_positions_up_to_each_users_own():
    """A user's later rows (beyond its position) and other users' blocks change nothing: attention over a
    page table is per user (a wrong page table or causal limit would show here)."""
    cache, vcache, new, q, positions, table = _paged(users=2, kv=1, heads=2, blocks=6, seed=3)
    positions = torch.tensor([5, 40], dtype=torch.int32)
    table = torch.tensor([[4, -1, -1], [1, 3, -1]], dtype=torch.int32)
    noisy = cache.clone()
    noisy[4, :, 6:] = 1000  # beyond user 0's position
    noisy[0] = noisy[2] = noisy[5] = -1000  # blocks no user holds
    args = [t.to(DEV) for t in (q, cache, vcache, positions, table)]
    noisy_args = [t.to(DEV) for t in (q, noisy, vcache, positions, table)]
    with ttnn_eager.strict():
        a = fused.paged_attention_decode(*args, 0.125).cpu()
        b = fused.paged_attention_decode(*noisy_args, 0.125).cpu()
    assert torch.equal(a, b)
    want = torch.nn.functional.scaled_dot_product_attention(
        q[0, 0].float().unsqueeze(1), cache[4, :, :6].float(), vcache[4, :, :6].float(), scale=0.125).squeeze(1)
    assert float((a[0, 0].float() - want).abs().max()) <= 0.02


# ----------------------------------------------------------------------------------------------- paged cache
def _llama(restore_config):
    ttnn_eager.configure(float32_storage="float32", shadow_numerics="exact")
    model, _ = models.build("llama")
    return model


def _cb_config(**kw):
    from transformers import ContinuousBatchingConfig
    return ContinuousBatchingConfig(**{"max_batch_tokens": 64, "page_size": 16, "seed": 0, **kw})


def test_paged_cache_is_sized_from_the_device_memory(restore_config):
    """PagedAttentionCache for a ttnn model plans from torch.ttnn.mem_get_info (not the host's RAM) with the
    fraction it is given, pricing a cache byte at what it costs on the device (measured on a one-block cache):
    the cache then takes at most that fraction of the free memory, and most of it."""
    from transformers.generation.continuous_batching.cache import PagedAttentionCache
    from transformers.generation.continuous_batching.distributed import DistributedHelper
    from ttnn_eager.features.serving import memory
    model = _llama(restore_config).to(DEV)
    fraction = 0.01
    gc.collect()
    free, total = torch.ttnn.mem_get_info(DEV)
    before = torch.ttnn.memory_allocated(DEV)
    cache = PagedAttentionCache(model.config, _cb_config(max_memory_percent=fraction), model.device,
                                DistributedHelper(None, None), dtype=model.dtype, model_supports_logits_to_keep=True)
    used = torch.ttnn.memory_allocated(DEV) - before
    cost = next(iter(memory.costs.values()))
    assert 100 < cost < 1000  # device bytes a cache byte (uint32 bytes, 1-D TILE; the layer caches)
    assert 0.5 * fraction * free < used <= fraction * free, (used, fraction * free)
    assert cache.num_blocks > 8 and cache.cache_tensor.device.type == "ttnn"
    on_cpu = PagedAttentionCache(model.config, _cb_config(max_memory_percent=fraction / 10), torch.device("cpu"),
                                 DistributedHelper(None, None), dtype=model.dtype, model_supports_logits_to_keep=True)
    # the CPU's plan: the host's RAM, one byte a byte, as transformers does (a tenth of the fraction, still more)
    assert on_cpu.num_blocks > 4 * cache.num_blocks
    # the keys and values in TT-NN's paged layout, a cache a layer (features/serving/paged.py); the CPU's as it was
    (allocator,) = cache.cache_allocators.values()
    k, v = allocator.get_cache_for_block_table(0)
    assert allocator.ttnn_paged and k.device.type == "ttnn" and k.shape == v.shape == (
        cache.num_blocks + 2 * allocator.blocks_per_sector, model.config.num_key_value_heads, 16, model.config.head_dim)
    assert not getattr(next(iter(on_cpu.cache_allocators.values())), "ttnn_paged", False)
    del cache, on_cpu
    gc.collect()
    assert torch.ttnn.memory_allocated(DEV) <= before + 1 << 20  # freed with the cache


LENGTHS = [2, 9, 4, 17, 6, 12, 3, 24]   # prompt lengths
NEW = [5, 8, 3, 6, 7, 4, 8, 5]          # new tokens per request
WAVES = [[0, 1, 2], [3, 4], [5, 6, 7]]  # requests arriving together; each wave after a result of the last


def _prompts(vocab):
    return [models.prompt_ids(vocab, length=n, seed=i)[0].tolist() for i, n in enumerate(LENGTHS)]


def _serve(model, prompts, fraction, page_size=16):
    """The requests through a ContinuousBatchingManager, arriving in WAVES: {request id: tokens}."""
    from transformers import GenerationConfig
    gen = GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
    manager = model.init_continuous_batching(generation_config=gen,
                                             continuous_batching_config=_cb_config(max_memory_percent=fraction,
                                                                                   page_size=page_size))
    manager.start()
    results, errors = {}, []
    try:
        for wave in WAVES:
            for i in wave:
                manager.add_request(prompts[i], request_id=f"r{i}", max_new_tokens=NEW[i])
            out = manager.get_result(timeout=300)
            results[out.request_id] = out
        while len(results) < len(prompts):
            out = manager.get_result(timeout=300)
            if out is None:
                break
            results[out.request_id] = out
        blocks = manager.batch_processor.cache.num_blocks
    finally:
        manager.stop(block=True)
    errors = [r.error for r in results.values() if r.error]
    return {k: r.generated_tokens for k, r in results.items()}, errors, blocks


def test_continuous_batching_gives_the_cpu_tokens_in_strict_mode(restore_config):
    """8 requests of different prompt lengths and lengths of output, arriving in three waves while others
    decode, through transformers' ContinuousBatchingManager with its paged cache on the device (sized from
    the device's memory): every request's greedy tokens equal the CPU's, no CPU op (strict mode)."""
    model = _llama(restore_config)
    prompts = _prompts(model.config.vocab_size)
    cpu, cpu_errors, _ = _serve(model, prompts, 0.01)
    model.to(DEV)
    start = time.perf_counter()
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        dev, dev_errors, blocks = _serve(model, prompts, 0.01)
    seconds = time.perf_counter() - start
    assert not cpu_errors and not dev_errors, (cpu_errors, dev_errors)
    assert sorted(dev) == [f"r{i}" for i in range(8)] and all(len(dev[f"r{i}"]) == NEW[i] for i in range(8))
    assert dev == cpu, (dev, cpu)
    assert rec.fallbacks == {} and blocks > 8
    print(f"8 requests, {sum(NEW)} tokens, {blocks} cache blocks: {seconds:.1f} s on the mock")


def _decode_layer_ops(layer):
    """Hooks on one decoder layer: the TT-NN ops of each of its calls that ran the paged decode attention."""
    from ttnn_eager.features.inventory import module_calls
    return module_calls(layer, lambda ops: ops["transformer.paged_scaled_dot_product_attention_decode"])


def _margins(model, prompts, tokens) -> dict:
    """The CPU's greedy margin (top logit minus the second) at each generated token of each request."""
    out = {}
    for key, toks in tokens.items():
        prompt = prompts[int(key[1:])]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + toks])).logits[0, len(prompt) - 1:-1].float()
        top = logits.topk(2, -1).values
        out[key] = (top[:, 0] - top[:, 1]).tolist()
    return out


TIE = 2.0 ** -8  # a bfloat16 ulp of a logit near 1 (this model's logits are within +-1)


def test_continuous_batching_decodes_on_ttnns_paged_ops(restore_config):
    """The 8 requests in three waves with bfloat16 storage (TT-NN's paged decode attention takes no float32)
    and blocks of 32 tokens: every decode step (all requests at one token) runs its cache update and attention
    on TT-NN's paged ops (one cache a layer in TT-NN's layout, transformers' block table as the page table),
    prefill on the ordinary lowerings; no CPU op. Greedy tokens equal the CPU's (float32) up to the first step
    where the CPU's own choice is within a bfloat16 ulp of a tie (measured: 6 requests equal in full, the other
    two part at CPU margins of 0.0002 and 0.0008; main's flat cache in bfloat16 parts on the same two).
    TT-NN ops a decode layer: at most 56 (194 through transformers' flat cache before, docs/serving.md)."""
    ttnn_eager.configure(float32_storage="bfloat16", shadow_numerics="exact")
    model, _ = models.build("llama")
    prompts = _prompts(model.config.vocab_size)
    cpu, cpu_errors, _ = _serve(model, prompts, 0.01, page_size=32)
    margins = _margins(model, prompts, cpu)
    model.to(DEV)
    calls, hooks = _decode_layer_ops(model.model.layers[1])
    try:
        with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
            dev, dev_errors, blocks = _serve(model, prompts, 0.01, page_size=32)
    finally:
        for h in hooks:
            h.remove()
    assert not cpu_errors and not dev_errors, (cpu_errors, dev_errors)
    assert sorted(dev) == sorted(cpu) and all(len(dev[k]) == len(cpu[k]) for k in cpu)
    compared = 0
    for key, toks in cpu.items():
        upto = next((j for j, m in enumerate(margins[key]) if m < TIE), len(toks))  # (up to the near-tie)
        assert dev[key][:upto] == toks[:upto], (key, dev[key], toks, margins[key])
        compared += upto
    assert compared >= 0.5 * sum(NEW), compared  # (measured: 26 of 46 before a near-tie; 44 of 46 equal)
    layers = model.config.num_hidden_layers
    decode_steps = rec.ttnn["transformer.paged_scaled_dot_product_attention_decode"] // layers
    assert decode_steps >= 5 and rec.ttnn["experimental.paged_update_cache"] == 2 * layers * decode_steps
    assert rec.fallbacks == {} and len(calls) == decode_steps
    per_layer = sorted(sum(c.values()) for c in calls)
    assert per_layer[-1] <= 56, per_layer
    print(f"{decode_steps} decode steps on the paged ops, {compared} of {sum(NEW)} tokens compared; TT-NN ops a "
          f"decode layer {per_layer}: {calls[-1]}")


def test_generate_batch_gives_the_cpu_tokens(restore_config):
    """model.generate_batch (warm-up included) on the device: the CPU's greedy tokens, strict mode."""
    from transformers import GenerationConfig
    model = _llama(restore_config)
    prompts = _prompts(model.config.vocab_size)[:4]
    gen = GenerationConfig(max_new_tokens=4, do_sample=False, eos_token_id=None, pad_token_id=0)

    def run():
        out = model.generate_batch(inputs=prompts, generation_config=gen,
                                   continuous_batching_config=_cb_config(max_memory_percent=0.005))
        return {k: v.generated_tokens for k, v in out.items()}
    cpu = run()
    model.to(DEV)
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec:
        dev = run()
    assert dev == cpu and len(dev) == 4 and rec.fallbacks == {}


def test_generate_batch_compiled_by_transformers_gives_the_cpu_tokens(restore_config):
    """transformers' own compiled continuous batching (ContinuousBatchingConfig.varlen_compile_config, a
    CompileConfig with backend="ttnn"; its paged-attention calls are graph breaks): the CPU's greedy tokens in
    strict mode, the graphs captured and replayed."""
    from transformers import CompileConfig, GenerationConfig
    model = _llama(restore_config)
    prompts = _prompts(model.config.vocab_size)[:4]
    gen = GenerationConfig(max_new_tokens=4, do_sample=False, eos_token_id=None, pad_token_id=0)

    def run(**kw):
        out = model.generate_batch(inputs=prompts, generation_config=gen,
                                   continuous_batching_config=_cb_config(max_memory_percent=0.005, **kw))
        return {k: v.generated_tokens for k, v in out.items()}
    cpu = run()
    model.to(DEV)
    ttnn_eager.reset_stats()
    with ttnn_eager.strict():
        dev = run(varlen_compile_config=CompileConfig(backend="ttnn", fullgraph=False, dynamic=False))
    assert dev == cpu and len(dev) == 4
    assert ttnn_eager.stats()["graph_replays"] > 0 and ttnn_eager.stats()["fallbacks"] == 0


def test_decode_compiled_by_transformers_gives_the_cpu_tokens(restore_config):
    """transformers' compiled decode path (ContinuousBatchingConfig.decode_compile_config, backend="ttnn") with
    the decode steps on TT-NN's paged ops (bfloat16 storage, blocks of 32): a decode step is one graph, the paged
    cache updates in it (a functional op the compile pass paged_caches_in_place writes in place again, recorded
    by the capture and re-issued at every replay). Strict mode, graphs replayed; greedy tokens equal the CPU's
    (float32) up to the first step where the CPU's own choice is within a bfloat16 ulp of a tie (compiled
    fusions round differently from eager mode in bfloat16: measured, one request of four parts from eager mode
    at its third token) -- a replay that did not write the caches would read stale keys from the second token."""
    from transformers import CompileConfig, GenerationConfig
    from ttnn_eager.features.serving.steps import decode_steps, warm_decode
    ttnn_eager.configure(float32_storage="bfloat16", shadow_numerics="exact")
    model, _ = models.build("llama")
    prompts = _prompts(model.config.vocab_size)[:4]
    gen = GenerationConfig(max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0)
    compiled = {"decode_compile_config": CompileConfig(backend="ttnn", fullgraph=False, dynamic=False)}

    def run(model, **kw):
        out = model.generate_batch(inputs=prompts, generation_config=gen,
                                   continuous_batching_config=_cb_config(max_memory_percent=0.01, page_size=32, **kw))
        return {f"r{k.split('_')[-1]}": v.generated_tokens for k, v in out.items()}
    cpu = run(model)
    margins = _margins(model, prompts, cpu)
    model.to(DEV)
    # Dynamo keeps compiled code by code object: an earlier test's graphs of transformers' same functions would be
    # found again (and captured again, their static output_ids another test's tensor); this test's run on its own
    torch._dynamo.reset()
    ttnn_eager.reset_stats()
    with ttnn_eager.strict(), ttnn_eager.record_ops() as rec, decode_steps() as steps:
        got = run(model, **compiled)
    assert sorted(got) == sorted(cpu) and all(len(t) == 6 for t in got.values())
    compared = 0
    for key, toks in cpu.items():
        upto = next((j for j, m in enumerate(margins[key]) if m < TIE), len(toks))
        assert got[key][:upto] == toks[:upto], (key, got[key], toks, margins[key])
        compared += upto
    assert compared >= 12, compared
    assert rec.ttnn["experimental.paged_update_cache"] > 0 and rec.fallbacks == {}
    stats = ttnn_eager.stats()
    # every batch-size bucket (transformers pads a decode batch to a power of 2) captured once, then replayed, one
    # graph a step: no capture refused, none made again
    assert stats["graph_recaptures"] == 0 and stats["compiled_eager_calls"] == 0
    warm = [s for s in steps if s["path"] == "decode" and s["graph_replays"]]
    assert len(warm) >= 3 and all(s["graph_replays"] == 1 for s in warm), steps
    # TT-NN ops a decode layer (docs/serving.md lists them): a warm step of the 2-layer model less the 1-layer one's
    model.model.layers = model.model.layers[:1]
    model.config.num_hidden_layers = 1
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = model.config.layer_types[:1]
    torch._dynamo.reset()
    with ttnn_eager.strict(), decode_steps() as one:
        run(model, **compiled)
    layer = warm_decode(steps) - warm_decode(one)
    assert sum(layer.values()) <= LAYER_OPS, layer
    for op, n in (("rms_norm", 2), ("experimental.rotary_embedding_hf", 2), ("experimental.paged_update_cache", 2),
                  ("transformer.paged_scaled_dot_product_attention_decode", 1), ("linear", 5)):
        assert layer[op] == n, (op, layer)
    print(f"TT-NN ops a compiled decode layer: {sum(layer.values())}: {sorted(layer.items())}")


LAYER_OPS = 18  # the hand-written decoder: 17-19 (docs/serving.md)


# ----------------------------------------------------------------------------------------------- the server
def _ask(server, path):
    """Four requests at once (two completions, a chat, a streamed chat) with the openai client: their texts."""
    import concurrent.futures
    import openai
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", timeout=300, max_retries=0)

    def completion(prompt, n):
        return client.completions.create(model=path, prompt=prompt, max_tokens=n, temperature=0).choices[0].text

    def chat(text, n):
        msg = [{"role": "user", "content": text}]
        return client.chat.completions.create(model=path, messages=msg, max_tokens=n, temperature=0).choices[0].message.content

    def streamed(text, n):
        msg = [{"role": "user", "content": text}]
        chunks = client.chat.completions.create(model=path, messages=msg, max_tokens=n, temperature=0, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    calls = [(completion, "Hello there", 4), (completion, "The quick brown fox jumps", 6), (chat, "hi", 5),
             (streamed, "what is a tile?", 5)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return [f.result() for f in [pool.submit(fn, a, n) for fn, a, n in calls]]


def test_transformers_server_answers_with_the_cpu_tokens(tmp_path, restore_config):
    """`ttnn-eager serve`'s server (transformers serve, continuous batching) on 127.0.0.1 with the tiny seeded
    Llama and the byte tokenizer made here: concurrent completions, chats and a streamed chat answer with the
    texts the same server on the CPU gives; stopping it frees the model and its cache."""
    from ttnn_eager.features.serving.server import Server
    from ttnn_eager.tools.serve import tiny_model
    ttnn_eager.configure(float32_storage="float32", shadow_numerics="exact")  # the CPU's greedy tokens exactly
    path = tiny_model(str(tmp_path / "tiny"))
    kw = dict(max_batch_tokens=256, block_size=32)
    cpu_server = Server(path, device="cpu", max_memory_percent=0.001, **kw).wait()
    try:
        cpu = _ask(cpu_server, path)
    finally:
        cpu_server.stop()
    gc.collect()
    torch.zeros(1, device=DEV)
    before = torch.ttnn.memory_allocated(DEV)
    server = Server(path, device=DEV, max_memory_percent=0.01, **kw).wait()
    try:
        dev = _ask(server, path)
    finally:
        server.stop()
    assert dev == cpu and all(isinstance(t, str) for t in dev), (dev, cpu)
    del server
    gc.collect()
    assert torch.ttnn.memory_allocated(DEV) - before < 16 << 20
