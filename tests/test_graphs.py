"""Graph capture and replay (torch.ttnn.graph, TTNNGraph, make_graphed_callables): replayed values against
float32 PyTorch on the CPU and against the eager forward, the same output tensors after every replay, flat
device memory and no new programs, guards on host-known decisions, and the refusals at capture."""
import copy

import pytest
import torch
import transformers

import ttnn_eager
from conftest import pcc, run_python
from ttnn_eager.tools import bert

DEV = "ttnn:0"


def _small_bert(layers=2, hidden=64):
    cfg = bert.bert_large_config("sdpa", hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                                 intermediate_size=2 * hidden, vocab_size=100, max_position_embeddings=64)
    torch.manual_seed(0)
    cpu = transformers.BertModel(cfg).eval()
    return cpu, copy.deepcopy(cpu).to(DEV)


@pytest.fixture(scope="module")
def captured():
    """A small BERT captured once at batch 2, seq 40, with a padded attention mask (after a warm-up run)."""
    cpu, dev = _small_bert(layers=1)
    ids, mask = bert.make_inputs(2, 40, 100, padded=5)
    s_ids, s_mask = ids.to(DEV), mask.to(DEV)
    with torch.no_grad():
        dev(input_ids=s_ids, attention_mask=s_mask)  # warm-up
        g = torch.ttnn.TTNNGraph()
        with torch.ttnn.graph(g):
            out = dev(input_ids=s_ids, attention_mask=s_mask)
    return cpu, dev, g, s_ids, s_mask, out


def test_replay_with_new_inputs_matches_cpu_and_eager_in_the_same_output_tensors(captured):
    cpu, dev, g, s_ids, s_mask, out = captured
    hidden, pooled = out.last_hidden_state, out.pooler_output
    for seed, padded in ((1, 9), (2, 3)):
        ids, mask = bert.make_inputs(2, 40, 100, padded=padded, seed=seed)
        s_ids.copy_(ids)
        s_mask.copy_(mask)
        ttnn_eager.reset_stats()
        g.replay()
        stats = ttnn_eager.stats()
        # only ttnn calls: no PyTorch dispatch, no transfers, no layout decisions
        assert stats["aten_ops"] == 0 and stats["ttnn_ops"] == g.num_ops > 0
        assert stats["host_to_device"] == stats["device_to_host"] == stats["layout_conversions"] == 0
        assert out.last_hidden_state is hidden and out.pooler_output is pooled
        with torch.no_grad():
            ref = cpu(input_ids=ids, attention_mask=mask)
            eager = dev(input_ids=ids.to(DEV), attention_mask=mask.to(DEV))
        valid = mask.bool()
        assert pcc(hidden.cpu()[valid], ref.last_hidden_state[valid]) >= 0.999
        assert pcc(pooled.cpu(), ref.pooler_output) >= 0.999
        assert torch.equal(hidden.cpu(), eager.last_hidden_state.cpu())  # the same ops on the same values
        assert torch.equal(pooled.cpu(), eager.pooler_output.cpu())


def test_a_replay_that_would_change_a_host_decision_is_refused(captured):
    cpu, dev, g, s_ids, s_mask, out = captured
    ids, mask = bert.make_inputs(2, 40, 100, padded=0)  # all ones: eager mode would drop the mask
    s_ids.copy_(ids)
    s_mask.copy_(mask)
    with pytest.raises(RuntimeError, match=r"decided aten\.all .*masking_utils\.py:\d+"):
        g.replay()
    ids[0, 0] = 100  # out of the vocabulary: the embedding's own error, as in eager mode
    mask[-1, -4:] = 0
    s_ids.copy_(ids)
    s_mask.copy_(mask)
    with pytest.raises(IndexError, match="index out of range"):
        g.replay()
    ids[0, 0] = -1  # negative ids are stored int32 instead of uint32: the static input changed kind
    s_ids.copy_(ids)
    with pytest.raises(RuntimeError, match="changed since capture"):
        g.replay()
    s_ids.copy_(bert.make_inputs(2, 40, 100)[0])
    g.replay()  # back to inputs of the captured kind


def test_memory_flat_and_no_new_programs_over_200_replays():
    cpu, dev = _small_bert(layers=1, hidden=32)
    ids, mask = bert.make_inputs(1, 32, 100)
    s_ids, s_mask = ids.to(DEV), mask.to(DEV)
    with torch.no_grad():
        dev(s_ids, s_mask)
        g = torch.ttnn.TTNNGraph()
        with torch.ttnn.graph(g):
            out = dev(s_ids, s_mask)
    g.replay()
    memory, programs = torch.ttnn.memory_allocated(), ttnn_eager.device.api.program_cache_entries(0)
    with ttnn_eager.device.api.shadows_off():  # device memory and programs do not depend on the mock's values
        for i in range(199):
            s_ids.copy_(bert.make_inputs(1, 32, 100, seed=i)[0])
            g.replay()
    s_ids.copy_(bert.make_inputs(1, 32, 100, seed=199)[0])
    g.replay()  # the 200th, with values
    assert torch.ttnn.memory_allocated() == memory
    assert ttnn_eager.device.api.program_cache_entries(0) == programs
    with torch.no_grad():
        ref = cpu(bert.make_inputs(1, 32, 100, seed=199)[0], mask)
    assert pcc(out.last_hidden_state.cpu(), ref.last_hidden_state) >= 0.999


def test_make_graphed_callables_module_and_function():
    cpu, dev = _small_bert(layers=1, hidden=32)
    ids, mask = bert.make_inputs(2, 24, 100, padded=4)
    graphed = torch.ttnn.make_graphed_callables(dev, (ids.to(DEV), mask.to(DEV)), num_warmup_iters=1)
    assert graphed is dev
    outs = []
    for seed in (3, 4):
        ids, mask = bert.make_inputs(2, 24, 100, padded=4 + seed, seed=seed)
        with torch.no_grad():
            out = graphed(ids.to(DEV), mask.to(DEV))
            ref = cpu(ids, mask)
        outs.append(out)
        assert pcc(out.pooler_output.cpu(), ref.pooler_output) >= 0.999
    assert outs[0] is outs[1]

    x = torch.randn(4, 32)
    fn = torch.ttnn.make_graphed_callables(lambda t: torch.nn.functional.gelu(t @ t.T) + 1, (x.to(DEV),))
    y = torch.randn(4, 32)
    got = fn(y.to(DEV))
    assert pcc(got.cpu(), torch.nn.functional.gelu(y @ y.T) + 1) >= 0.999
    with pytest.raises(RuntimeError, match="captured on ttnn:0"):
        fn(y)  # a CPU tensor: the graph replays on the device it was captured on
    with pytest.raises(RuntimeError, match="captured for"):
        fn(torch.randn(5, 32).to(DEV))
    with pytest.raises(RuntimeError, match="inference graphs"):
        fn(y.to(DEV).requires_grad_())
    with pytest.raises(RuntimeError, match="inference graphs"):
        torch.ttnn.make_graphed_callables(lambda t: t * 2, (x.to(DEV).requires_grad_(),))
    # a region that clones its input reads a value the static input shares with the sample argument
    sample = x.to(DEV)
    fn = torch.ttnn.make_graphed_callables(lambda t: t.clone(), (sample,))
    assert torch.equal(fn(y.to(DEV)).cpu(), y.to(torch.bfloat16).float())
    assert torch.equal(fn(x.to(DEV)).cpu(), x.to(torch.bfloat16).float())


def test_in_place_writes_into_preallocated_tensors_carry_state_across_replays():
    """The pattern of a StaticCache decode step: the region writes into tensors made before it."""
    cache = torch.zeros(4, 32).to(DEV)
    view = cache[1:3]  # a view made before capture sees the region's writes
    step = torch.ones(4, 32).to(DEV)
    g = torch.ttnn.TTNNGraph()
    with torch.ttnn.graph(g):
        cache.add_(step)
        out = cache * 2
        same = step.clone()
    assert torch.equal(out.cpu(), torch.full((4, 32), 2.0))
    for n in (2, 3):
        step.copy_(torch.full((4, 32), float(n)))
        g.replay()
    total = 1 + 2 + 3
    assert torch.equal(cache.cpu(), torch.full((4, 32), float(total)))
    assert torch.equal(view.cpu(), torch.full((2, 32), float(total)))
    assert torch.equal(out.cpu(), torch.full((4, 32), 2.0 * total))
    assert torch.equal(same.cpu(), torch.full((4, 32), 3.0))  # a clone of the input follows the input


def test_capture_refuses_what_a_replay_cannot_repeat():
    x = torch.randn(4, 32).to(DEV)
    regions = {
        "device-to-host read": lambda: (x * 2).cpu(),
        "device-to-host read ": lambda: print(x + 1),
        "has no TT-NN lowering": lambda: torch.linalg.matrix_exp((x @ x.T)[:4, :4]),
        "host-to-device copy": lambda: x + torch.ones(4, 32).to(DEV),
        "copy_ from a CPU tensor": lambda: x.clone().copy_(torch.ones(4, 32)),
        "random factory": lambda: x + torch.rand(4, 32, device=DEV),
        "host sync": lambda: torch.ttnn.synchronize(),
        "nested captures": lambda: torch.ttnn.graph(torch.ttnn.TTNNGraph()).__enter__(),
    }
    for message, region in regions.items():
        g = torch.ttnn.TTNNGraph()
        with pytest.raises(RuntimeError, match=message.strip()):
            with torch.ttnn.graph(g):
                assert torch.ttnn.is_current_stream_capturing()
                region()
        assert not torch.ttnn.is_current_stream_capturing()
        with pytest.raises(RuntimeError, match="not been captured"):
            g.replay()


def test_replay_after_the_static_input_was_freed_or_the_graph_reset():
    x = torch.randn(4, 32).to(DEV)
    g = torch.ttnn.TTNNGraph()
    with torch.ttnn.graph(g):
        y = torch.softmax(x, -1)
    g.replay()
    assert pcc(y.cpu(), torch.softmax(x.cpu(), -1)) >= 0.999
    del x
    import gc
    gc.collect()
    with pytest.raises(RuntimeError, match="was freed"):
        g.replay()
    g.reset()
    with pytest.raises(RuntimeError, match="not been captured"):
        g.replay()


def test_a_graph_runs_on_one_device_mock_n300():
    code = """
import torch, ttnn_eager
x0, x1 = torch.randn(4, 32).to("ttnn:0"), torch.randn(4, 32).to("ttnn:1")
g = torch.ttnn.TTNNGraph()
try:
    with torch.ttnn.graph(g):
        (x0 * 2, x1 * 2)
except RuntimeError as e:
    print("REFUSED", "a graph runs on one device" in str(e))
fn = torch.ttnn.make_graphed_callables(lambda t: t * 2, (x0,))
try:
    fn(x1)
except RuntimeError as e:
    print("REPLAY", "captured on ttnn:0" in str(e))
"""
    r = run_python(code, env={"TTNN_EAGER_DEVICE": "mock-n300"})
    assert "REFUSED True" in r.stdout and "REPLAY True" in r.stdout, r.stdout + r.stderr


def test_a_capture_without_warm_up_is_caught_at_replay():
    """A weight converted at its first use (the embedding table, to ROW_MAJOR) inside the capture no longer
    matches what the region read: the replay says to warm up, and a warmed-up capture replays."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(50, 32)
    ref = copy.deepcopy(emb)
    emb.to(DEV)
    ids = torch.randint(0, 50, (2, 8))
    s_ids = ids.to(DEV)
    g = torch.ttnn.TTNNGraph()
    with torch.no_grad(), torch.ttnn.graph(g):
        out = emb(s_ids)
    with pytest.raises(RuntimeError, match="warm-up"):
        g.replay()
    g.reset()
    with torch.no_grad(), torch.ttnn.graph(g):
        out = emb(s_ids)
    new = torch.randint(0, 50, (2, 8))
    s_ids.copy_(new)
    g.replay()
    with torch.no_grad():
        assert pcc(out.cpu(), ref(new)) >= 0.999


def test_the_hardware_trace_path_bookkeeping_with_stubbed_trace_verbs(monkeypatch):
    """The card path (graphs._Trace) cannot run on the mock (tt-metal's trace capture crashes there). With
    the four trace verbs stubbed, its bookkeeping runs: capture inside begin/end, a changed static input
    copied into the trace's input buffer, execute_trace per replay, the same output buffers every replay."""
    from ttnn_eager.device import api as api
    from ttnn_eager.features import graphs
    calls = []
    monkeypatch.setattr(api, "begin_trace", lambda index: calls.append("begin") or 7)
    monkeypatch.setattr(api, "end_trace", lambda index, tid: calls.append(("end", tid)))
    monkeypatch.setattr(api, "execute_trace", lambda index, tid: calls.append(("execute", tid)))
    monkeypatch.setattr(api, "release_trace", lambda index, tid: calls.append(("release", tid)))
    monkeypatch.setattr(api, "copy_into", lambda src, dst: calls.append(("copy", src, dst)))
    x = torch.randn(4, 32).to(DEV)
    g = torch.ttnn.TTNNGraph()
    with torch.ttnn.graph(g):
        y = torch.softmax(x * 2, -1)
    trace = graphs._Trace(g._program)
    assert calls == ["begin", ("end", 7)]
    read = trace.inputs
    trace.replay()
    assert calls[-1] == ("execute", 7) and not any(c[0] == "copy" for c in calls[2:])
    out_buffer = y._handle.tt
    x.copy_(torch.randn(4, 32))
    trace.replay()
    assert ("copy", x._handle.tt, next(iter(read.values()))) in calls
    assert y._handle.tt is out_buffer  # the trace writes the same buffers every replay
    trace.release()
    assert calls[-1] == ("release", 7)


def test_a_static_cache_decode_step_captured_once_and_replayed_per_token():
    """The decode step of generation with a StaticCache (transformers' preallocated KV cache, written at the
    cache position by index_copy_): captured once, replayed per token with the new token and position
    refilled; the tokens are those of eager generate() and of the CPU."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    cpu = transformers.LlamaForCausalLM(cfg).eval()
    dev = copy.deepcopy(cpu).to(DEV)
    ids = torch.randint(3, 256, (1, 8))
    steps = 10
    with torch.no_grad():
        ref = cpu.generate(ids, max_new_tokens=steps + 1, do_sample=False, cache_implementation="static",
                           pad_token_id=0)[0, 8:].tolist()
        cache = transformers.StaticCache(config=cfg, max_cache_len=32)
        prefill = dev(ids.to(DEV), past_key_values=cache, cache_position=torch.arange(8).to(DEV), use_cache=True)
        token = prefill.logits[:, -1].argmax(-1, keepdim=True)
        static_token, static_position = token.clone(), torch.tensor([8]).to(DEV)
        graph = torch.ttnn.TTNNGraph()
        with torch.ttnn.graph(graph):
            logits = dev(static_token, past_key_values=cache, cache_position=static_position, use_cache=True).logits
        tokens = [token.item()]
        for step in range(steps):
            if step:
                graph.replay()
            token = logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(token.item())
            static_token.copy_(token)
            static_position.copy_(torch.tensor([9 + step]))
    assert tokens == ref
    assert graph.num_ops > 50  # the whole decode step, not a fragment of it
