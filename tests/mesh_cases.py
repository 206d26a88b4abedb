"""Mesh-mode cases run in a process of their own (the device mode is chosen once per process):
`python mesh_cases.py ROWSxCOLS CASE[,CASE...] OUT.json` with TTNN_EAGER_DEVICE set (mock-n300, mock-t3000).
Each case writes its measurements under its name; tests/test_mesh.py asserts on them."""
import json
import sys
import time

import torch

import ttnn_eager
from ttnn_eager import counters
from ttnn_eager.device import api

SHAPE = tuple(int(x) for x in sys.argv[1].split("x"))
CASES, OUT = sys.argv[2].split(","), sys.argv[3]
CHIPS = SHAPE[0] * SHAPE[1]
results = {}


def _llama(kv_heads):
    import transformers
    transformers.logging.set_verbosity_error()
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                   num_attention_heads=8, num_key_value_heads=kv_heads, max_position_embeddings=64,
                                   tie_word_embeddings=False)
    torch.manual_seed(0)
    return transformers, cfg, transformers.LlamaForCausalLM(cfg).eval()


def _ccl():
    return {k: v for k, v in counters.ttnn_by_op.items() if k in ("all_reduce", "all_gather", "reduce_scatter",
                                                                   "mesh_partition")}


def _plan() -> dict:
    """PyTorch's tensor-parallel plan of a Llama decoder layer, as under torchrun (tests/distributed_ranks.py)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    return {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()}


def _sgd_step(m, ids) -> float:
    """One step of causal-LM SGD (per tensor: DTensor refuses a foreach step mixing DTensor and plain parameters,
    under torchrun as here)."""
    opt = torch.optim.SGD(m.parameters(), lr=0.5, foreach=False)
    opt.zero_grad()
    loss = m(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    return loss.item()


def _param_gap(model, cpu, init) -> dict:
    """The largest difference of model's parameters (DTensors made whole) from cpu's, and cpu's largest update."""
    from torch.distributed.tensor import DTensor
    diff = update = 0.0
    trained = dict(model.named_parameters())
    for k, q in cpu.named_parameters():
        p = trained[k]
        v = (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu()
        diff = max(diff, float((v - q.detach()).abs().max()))
        update = max(update, float((q.detach() - init[k]).abs().max()))
    return {"max_param_diff": diff, "max_param_update": update}


def tp(mesh, caches=("dynamic", "static")):
    """Tensor parallel (the torchrun plan of tests/distributed_ranks.py, unchanged) over every chip: greedy
    generate() against the CPU, exact arithmetic; weight bytes per chip against the same model replicated."""
    from torch.distributed.tensor.parallel import parallelize_module
    ttnn_eager.configure(float32_storage="float32", shadow_numerics="exact")
    transformers, cfg, model = _llama(8 if CHIPS == 8 else 2)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    cpu = transformers.LlamaForCausalLM(cfg).eval()
    cpu.load_state_dict(state)
    ids = torch.randint(0, cfg.vocab_size, (1, 6))
    plan = _plan()
    base = api.memory_allocated(0)
    for layer in model.model.layers:
        parallelize_module(layer, mesh, plan)
    model.to("ttnn:0")
    out = {"weight_bytes_per_chip": api.memory_allocated(0) - base,
           "local_q_rows": model.model.layers[0].self_attn.q_proj.weight.to_local().shape[0]}
    for cache in caches:
        ttnn_eager.reset_stats()
        t = time.time()
        kw = {"cache_implementation": "static"} if cache == "static" else {}
        with torch.no_grad(), ttnn_eager.strict():
            tokens = model.generate(ids.to("ttnn:0"), max_new_tokens=8, do_sample=False, **kw)
        stats = ttnn_eager.stats()
        out[cache] = {"tokens": tokens.cpu().tolist(), "seconds": round(time.time() - t, 1), "ccl_ops": _ccl(),
                      "ttnn_ops": stats["ttnn_ops"],
                      "collectives": dict(counters.collective_by_op), "fallbacks": stats["fallbacks"],
                      "collective_pcie_bytes": stats["collective_d2h_bytes"] + stats["collective_h2d_bytes"]}
        out[cache]["cpu_tokens"] = cpu.generate(ids, max_new_tokens=8, do_sample=False, **kw).tolist()
    del model
    base = api.memory_allocated(0)
    whole = transformers.LlamaForCausalLM(cfg).eval().to("ttnn:0")
    out["replicated_weight_bytes"] = api.memory_allocated(0) - base
    ttnn_eager.reset_stats()
    with torch.no_grad():
        whole.generate(ids.to("ttnn:0"), max_new_tokens=8, do_sample=False)
    out["replicated_ttnn_ops"] = ttnn_eager.stats()["ttnn_ops"]
    del whole
    ttnn_eager.configure(float32_storage="bfloat16", shadow_numerics="hardware")
    results["tp"] = out


def tp_train(mesh):
    """A training step of the tensor-parallel model (autograd through DTensor on the mesh: the colwise inputs'
    gradients are partial sums, all-reduced on the fabric in backward), SGD, against the CPU, exact arithmetic.
    The optimizer runs per tensor (foreach=False): DTensor refuses a foreach step mixing DTensor parameters
    with plain ones, under torchrun as here."""
    from torch.distributed.tensor.parallel import parallelize_module
    ttnn_eager.configure(float32_storage="float32", shadow_numerics="exact")
    transformers, cfg, model = _llama(2)
    cpu = transformers.LlamaForCausalLM(cfg)
    cpu.load_state_dict(model.state_dict())
    init = {k: v.clone() for k, v in cpu.state_dict().items()}
    plan = _plan()
    for layer in model.model.layers:
        parallelize_module(layer, mesh, plan)
    model.train().to("ttnn:0")
    cpu.train()
    ids = torch.randint(0, cfg.vocab_size, (2, 8))

    ttnn_eager.reset_stats()
    with ttnn_eager.strict():
        loss = _sgd_step(model, ids.to("ttnn:0"))
    stats = ttnn_eager.stats()
    out = {"loss": loss, "cpu_loss": _sgd_step(cpu, ids), "ccl_ops": _ccl(), "fallbacks": stats["fallbacks"],
           "collective_pcie_bytes": stats["collective_d2h_bytes"] + stats["collective_h2d_bytes"]}
    out.update(_param_gap(model, cpu, init))
    ttnn_eager.configure(float32_storage="bfloat16", shadow_numerics="hardware")
    results["tp_train"] = out


def dp_tp(mesh):
    """A 2-D mesh as DP x TP: the TP plan over each row's chips (mesh["tp"], cluster axis 1), the batch sharded
    over the rows and gradients averaged along the columns (mesh_dim 0, cluster axis 0); one SGD step against
    the CPU on the whole batch, exact arithmetic."""
    from torch.distributed.tensor.parallel import parallelize_module
    ttnn_eager.configure(float32_storage="float32", shadow_numerics="exact")
    transformers, cfg, model = _llama(8)
    cpu = transformers.LlamaForCausalLM(cfg)
    cpu.load_state_dict(model.state_dict())
    init = {k: v.clone() for k, v in cpu.state_dict().items()}
    plan = _plan()
    for layer in model.model.layers:
        parallelize_module(layer, mesh["tp"], plan)
    ttnn_eager.mesh.data_parallel(model.train().to("ttnn:0"), mesh, mesh_dim=0)
    cpu.train()
    ids = torch.randint(0, cfg.vocab_size, (SHAPE[0] * 2, 8))

    ttnn_eager.reset_stats()
    with ttnn_eager.strict():
        loss = _sgd_step(model, ttnn_eager.mesh.shard(ids, 0, mesh, mesh_dim=0))
    stats = ttnn_eager.stats()
    out = {"loss_chip0": loss, "cpu_loss": _sgd_step(cpu, ids), "ccl_ops": _ccl(), "fallbacks": stats["fallbacks"],
           "collective_pcie_bytes": stats["collective_d2h_bytes"] + stats["collective_h2d_bytes"]}
    out.update(_param_gap(model, cpu, init))
    ttnn_eager.configure(float32_storage="bfloat16", shadow_numerics="hardware")
    results["dp_tp"] = out


def compiled(mesh):
    """torch.compile(backend="ttnn") of the tensor-parallel model's forward, static cache: the decode step is
    captured once and replayed, the replay issuing the ttnn.all_reduce calls too."""
    from torch.distributed.tensor.parallel import parallelize_module
    ttnn_eager.configure(float32_storage="float32", shadow_numerics="exact")
    transformers, cfg, model = _llama(2)
    cpu = transformers.LlamaForCausalLM(cfg).eval()
    cpu.load_state_dict(model.state_dict())
    ids = torch.randint(0, cfg.vocab_size, (1, 6))
    plan = _plan()
    for layer in model.model.layers:
        parallelize_module(layer, mesh, plan)
    model.to("ttnn:0")
    model.forward = torch.compile(model.forward, backend="ttnn")
    ttnn_eager.reset_stats()
    with torch.no_grad():
        tokens = model.generate(ids.to("ttnn:0"), max_new_tokens=8, do_sample=False, cache_implementation="static")
    stats = ttnn_eager.stats()
    results["compiled"] = {
        "tokens": tokens.cpu().tolist(), "ccl_ops": _ccl(), "collectives": dict(counters.collective_by_op),
        "fallbacks": stats["fallbacks"], "cpu_tokens": cpu.generate(ids, max_new_tokens=8, do_sample=False,
                                                                    cache_implementation="static").tolist()}
    ttnn_eager.configure(float32_storage="bfloat16", shadow_numerics="hardware")


def dp(mesh):
    """Data parallel: a BertForSequenceClassification step, the batch sharded over the chips, gradients
    averaged on the fabric, AdamW; against the same step on the whole batch with nothing sharded (every chip
    computing it alike: one chip's arithmetic) and the CPU."""
    import transformers
    transformers.logging.set_verbosity_error()
    cfg = transformers.BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=128, max_position_embeddings=32, num_labels=2,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(2)
    batch, seq = 4 * CHIPS // 2, 8
    ids, labels = torch.randint(0, cfg.vocab_size, (batch, seq)), torch.randint(0, 2, (batch,))
    state = transformers.BertForSequenceClassification(cfg).eval().state_dict()

    def fresh():
        m = transformers.BertForSequenceClassification(cfg).eval()
        m.load_state_dict(state)
        return m

    def step(model, ids, labels, opt):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2) if opt == "adamw" else \
            torch.optim.SGD(model.parameters(), lr=0.5)
        opt.zero_grad()
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        return loss

    out = {}
    for opt in ("sgd", "adamw"):
        ttnn_eager.reset_stats()
        model = ttnn_eager.mesh.data_parallel(fresh().to("ttnn:0"), mesh)
        with ttnn_eager.strict():
            step(model, ttnn_eager.mesh.shard(ids, 0, mesh), ttnn_eager.mesh.shard(labels, 0, mesh), opt)
        stats = ttnn_eager.stats()
        r = {"ccl_ops": _ccl(), "fallbacks": stats["fallbacks"],
             "collective_pcie_bytes": stats["collective_d2h_bytes"] + stats["collective_h2d_bytes"],
             "params": sum(1 for p in model.parameters())}
        one = fresh().to("ttnn:0")  # the whole batch, nothing sharded: every chip computes it alike
        step(one, ids.to("ttnn:0"), labels.to("ttnn:0"), opt)
        solo = fresh().to("ttnn:0")  # each chip's half alone, no reduction: what a missing all_reduce gives
        step(solo, ttnn_eager.mesh.shard(ids, 0, mesh), ttnn_eager.mesh.shard(labels, 0, mesh), opt)
        a, b, s = ({k: v.detach().cpu().float().flatten() for k, v in m.state_dict().items()}
                   for m in (model, one, solo))
        init = {k: v.float().flatten() for k, v in state.items()}
        diff = torch.cat([(a[k] - b[k]).abs() for k in a])
        solo_diff = torch.cat([(s[k] - b[k]).abs() for k in a])
        update = torch.cat([(b[k] - init[k]).abs() for k in a])
        r.update({"mean_param_diff": float(diff.mean()), "mean_solo_diff": float(solo_diff.mean()),
                  "mean_param_update": float(update.mean()), "max_param_diff": float(diff.max()),
                  "max_param_update": float(update.max())})
        out[opt] = r
    results["dp"] = out


def bad_input(mesh):
    out = {}
    try:
        ttnn_eager.mesh.shard(torch.zeros(3, 64), 0, mesh)
    except ValueError as e:
        out["indivisible"] = str(e)
    from torch.distributed.tensor import Shard, distribute_tensor
    try:
        distribute_tensor(torch.zeros(5, 64), mesh, [Shard(0)])
    except ValueError as e:
        out["uneven_distribute"] = str(e)
    try:
        ttnn_eager.mesh.init((1, CHIPS * 2))
    except RuntimeError as e:
        out["second_mesh"] = str(e)
    import gc
    gc.collect()
    base = api.memory_allocated(0)
    y = ttnn_eager.mesh.gather(ttnn_eager.mesh.shard(torch.ones(CHIPS * 64, 256), 0, mesh) + 1, 0, mesh)
    out["held"] = api.memory_allocated(0) - base
    del y
    gc.collect()
    out["freed_to_baseline"] = api.memory_allocated(0) == base
    x = ttnn_eager.mesh.shard(torch.arange(CHIPS * 32, dtype=torch.float32).reshape(CHIPS, 32), 0, mesh)
    out["local_shape"] = list(x.shape)
    out["gathered_equal"] = torch.equal(ttnn_eager.mesh.gather(x * 2, 0, mesh).cpu(),
                                        torch.arange(CHIPS * 32, dtype=torch.float32).reshape(CHIPS, 32) * 2)
    results["bad_input"] = out


mesh = ttnn_eager.mesh.init(SHAPE)
results["mesh"] = {"shape": list(SHAPE), "device_count": torch.ttnn.device_count(), "dims": list(mesh.mesh.shape)}
for case in CASES:
    globals()[case](mesh)
with open(OUT, "w") as f:
    json.dump(results, f, indent=1)
