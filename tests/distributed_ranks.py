"""The rank program of tests/test_distributed.py, launched by torchrun with 2 ranks on the mock n300:

    python -m torch.distributed.run --nproc-per-node 2 tests/distributed_ranks.py all|collectives|ddp|tp|fsdp|fault OUT.json

Each rank writes its results to OUT.json.<rank> (the test reads both). Mode `hosts` is the program of two
"hosts" on the loopback interface: two torchrun launches (--nnodes 2, --node-rank 0 and 1, one process each,
c10d rendezvous at 127.0.0.1), each rank alone on its host's mock n150 as ttnn:0.
"""
import json
import os
import sys
import time

T0 = time.time()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import ttnn_eager  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]
RANK, WORLD, LOCAL = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
DEV = f"ttnn:{LOCAL}"  # the rank's chip: torch.device("ttnn", LOCAL_RANK), as on CUDA
DTYPES = [torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.bool]
results: dict = {"rank": RANK, "checks": {}, "errors": {}}


def sample(shape, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * RANK + 17 * salt + DTYPES.index(dtype))
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    return torch.randint(-4, 5, shape, generator=g).to(dtype)


def same(name, got: torch.Tensor, want: torch.Tensor):
    ok = got.device.type == "ttnn" and got.dtype == want.dtype and got.shape == want.shape \
        and torch.equal(got.cpu(), want)
    results["checks"][name] = bool(ok)
    if not ok:
        results["errors"][name] = f"got {got.device} {got.dtype} {got.cpu().flatten()[:6].tolist()} " \
                                  f"want {want.dtype} {want.flatten()[:6].tolist()}"


def both(name, fn, *inputs):
    """fn(tensors..., group) on ttnn copies with the default (ttnn) group and on CPU tensors with plain gloo."""
    dev = [x.to(DEV) for x in inputs]
    cpu = [x.clone() for x in inputs]
    got = fn(*dev, group=None)
    want = fn(*cpu, group=GLOO)
    for i, (g, w) in enumerate(zip(got, want)):
        same(f"{name}[{i}]" if len(got) > 1 else name, g, w)


def collectives():
    shape = (5, 7)  # not a multiple of the 32x32 tile
    ops = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
           "min": dist.ReduceOp.MIN, "product": dist.ReduceOp.PRODUCT}
    for dtype in DTYPES:
        d = str(dtype).replace("torch.", "")
        for opname, op in ops.items():
            if dtype == torch.bool and opname == "avg":
                continue

            def ar(x, group, op=op):
                if opname == "avg" and group is GLOO:  # gloo has no AVG: its SUM, then the division
                    dist.all_reduce(x, group=group)
                    return [x / WORLD if x.dtype.is_floating_point else torch.div(x, WORLD, rounding_mode="trunc")]
                dist.all_reduce(x, op=op, group=group)
                return [x]
            both(f"all_reduce.{opname}.{d}", ar, sample(shape, dtype))

        def bc(x, group):
            dist.broadcast(x, src=1, group=group)
            return [x]
        both(f"broadcast.{d}", bc, sample(shape, dtype))

        def ag(x, group):
            outs = [torch.empty_like(x) for _ in range(WORLD)]
            dist.all_gather(outs, x, group=group)
            return outs
        both(f"all_gather.{d}", ag, sample(shape, dtype))

        def agt(x, group):
            out = torch.empty((WORLD * shape[0], shape[1]), dtype=x.dtype, device=x.device)
            dist.all_gather_into_tensor(out, x, group=group)
            return [out]
        both(f"all_gather_into_tensor.{d}", agt, sample(shape, dtype))

        for opname in ("sum", "max", "min") + (("avg",) if dtype.is_floating_point else ()):
            def rst(x, group, opname=opname):
                out = torch.empty((4, 3), dtype=x.dtype, device=x.device)
                if opname == "avg" and group is GLOO:
                    dist.reduce_scatter_tensor(out, x, group=group)
                    return [out / WORLD]
                dist.reduce_scatter_tensor(out, x, op=ops[opname], group=group)
                return [out]
            if dtype == torch.bool and opname == "sum":
                pass
            both(f"reduce_scatter_tensor.{opname}.{d}", rst, sample((WORLD * 4, 3), dtype))

        def a2a(x, group):
            out = torch.empty_like(x)
            dist.all_to_all_single(out, x, group=group)
            return [out]
        both(f"all_to_all_single.even.{d}", a2a, sample((WORLD * 3, 4), dtype))

        ins = [1 + RANK, 3 - RANK]                       # rank 0 sends 1 and 3 rows, rank 1 2 and 2
        outs = [1 + r for r in range(WORLD)] if RANK == 0 else [3 - r for r in range(WORLD)]

        def a2a_uneven(x, group):
            out = torch.empty((sum(outs), 4), dtype=x.dtype, device=x.device)
            dist.all_to_all_single(out, x, output_split_sizes=outs, input_split_sizes=ins, group=group)
            return [out]
        both(f"all_to_all_single.uneven.{d}", a2a_uneven, sample((4, 4), dtype))

        def p2p(x, group):
            buf = torch.empty_like(x)
            if RANK == 0:
                dist.send(x, dst=1, group=group)
                dist.recv(buf, src=1, group=group)
            else:
                dist.recv(buf, src=0, group=group)
                dist.send(x, dst=0, group=group)
            return [buf]
        both(f"send_recv.{d}", p2p, sample(shape, dtype))

        def batch_p2p(x, group):
            buf = torch.empty_like(x)
            peer = 1 - RANK
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, peer, group=group),
                                           dist.P2POp(dist.irecv, buf, peer, group=group)])
            for r in reqs:
                r.wait()
            return [buf]
        both(f"batch_isend_irecv.{d}", batch_p2p, sample(shape, dtype))

    # async Work: a completed future carrying the outputs (DDP's reducer reads it)
    x = sample((3, 3), torch.float32).to(DEV)
    w = dist.all_reduce(x, async_op=True)
    w.wait()
    fut = w.get_future().value()
    results["checks"]["async_work"] = bool(w.is_completed() and isinstance(fut, list) and fut[0] is x)
    dist.barrier()

    # CPU tensors on the ttnn group go to gloo as they are
    c = sample((6,), torch.float32)
    c_ref = c.clone()
    dist.all_reduce(c)
    dist.all_reduce(c_ref, group=GLOO)
    results["checks"]["cpu_tensor_on_ttnn_group"] = c.device.type == "cpu" and torch.equal(c, c_ref)

    # PCIe bytes: a tile-aligned float32 tensor (float32 storage) is 64*64*4 bytes on the device
    n = 64 * 64 * 4
    moved = {}
    for name, fn in [
            ("all_reduce", lambda x: dist.all_reduce(x)),
            ("broadcast", lambda x: dist.broadcast(x, src=0)),
            ("all_gather_into_tensor",
             lambda x: dist.all_gather_into_tensor(torch.empty((WORLD * 64, 64), device=DEV), x)),
            ("reduce_scatter_tensor",
             lambda x: dist.reduce_scatter_tensor(torch.empty((64 // WORLD, 64), device=DEV), x))]:
        x = torch.ones(64, 64).to(DEV)
        ttnn_eager.reset_stats()
        fn(x)
        s = ttnn_eager.stats()
        moved[name] = [s["collective_d2h_bytes"], s["collective_h2d_bytes"], s["collectives"]]
    results["bytes"] = moved
    results["bytes_expected"] = {
        "all_reduce": [n, n, 1],
        "broadcast": [n, 0, 1] if RANK == 0 else [0, n, 1],   # only the source reads its device
        "all_gather_into_tensor": [n, WORLD * n, 1],
        "reduce_scatter_tensor": [n, n // WORLD, 1]}

    # mismatches: the same ValueError on every rank, and the group still works afterwards
    for case, x in [("numel", torch.ones(4 if RANK == 0 else 8)),
                    ("dtype", torch.ones(4, dtype=torch.float32 if RANK == 0 else torch.int32)),
                    ("shape", torch.ones((4, 2) if RANK == 0 else (8,)))]:
        try:
            dist.all_reduce(x.to(DEV))
            results["errors"][f"mismatch.{case}"] = "no error"
        except ValueError as e:
            results.setdefault("mismatch", {})[case] = str(e)
    y = torch.full((3,), float(RANK + 1)).to(DEV)
    dist.all_reduce(y)
    results["checks"]["group_usable_after_mismatch"] = y.cpu().tolist() == [3.0, 3.0, 3.0]


def ddp():
    t0 = time.time()
    import transformers
    results["import_transformers_s"] = round(time.time() - t0, 1)
    from torch.nn.parallel import DistributedDataParallel as DDP
    transformers.logging.set_verbosity_error()
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=32, num_labels=3,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    batch, seq = 8, 12
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))
    labels = torch.randint(0, cfg.num_labels, (batch,))

    def train(model, ids, labels, steps=3, make_opt=lambda params: torch.optim.SGD(params, lr=0.5)):
        opt = make_opt(model.parameters())
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            out = model(input_ids=ids.to(DEV), labels=labels.to(DEV))
            out.loss.backward()
            opt.step()
            losses.append(float(out.loss.detach().cpu()))
        return losses

    torch.manual_seed(1)
    init = transformers.BertForSequenceClassification(cfg).eval()
    state = {k: v.clone() for k, v in init.state_dict().items()}
    model = transformers.BertForSequenceClassification(cfg).eval()
    model.load_state_dict(state)
    model.to(DEV)
    ddp_model = DDP(model)
    results["ddp_setup_s"] = round(time.time() - t0, 1)
    half = batch // WORLD
    ttnn_eager.reset_stats()
    t = time.time()
    losses = train(ddp_model, ids[RANK * half:(RANK + 1) * half], labels[RANK * half:(RANK + 1) * half])
    s = ttnn_eager.stats()
    import ttnn_eager.counters as counters
    results["ddp"] = {"losses": losses, "seconds": round(time.time() - t, 1), "collectives": dict(counters.collective_by_op),
                      "d2h_bytes": s["collective_d2h_bytes"], "h2d_bytes": s["collective_h2d_bytes"],
                      "grad_elements": sum(p.numel() for p in model.parameters())}
    trained = {k: v.detach().cpu().float() for k, v in model.state_dict().items()}
    if RANK == 0:  # one process on the whole batch (no DDP: the loss is the mean over the whole batch)
        single = transformers.BertForSequenceClassification(cfg).eval()
        single.load_state_dict(state)
        single.to(DEV)
        t = time.time()
        results["single_losses"] = train(single, ids, labels)
        results["single_seconds"] = round(time.time() - t, 1)
        ref = {k: v.detach().cpu().float() for k, v in single.state_dict().items()}
        diffs = {k: float((trained[k] - ref[k]).abs().max()) for k in ref}
        moved = {k: float((trained[k] - state[k].float()).abs().max()) for k in ref}
        results["max_param_diff"] = max(diffs.values())
        results["worst_param"] = max(diffs, key=diffs.get)
        results["max_param_update"] = max(moved.values())
        results["params_checked"] = len(diffs)
    # the ranks' replicas are identical (DDP's averaged gradients)
    flat = torch.cat([v.flatten() for v in trained.values()])
    other = [torch.empty_like(flat) for _ in range(WORLD)]
    dist.all_gather(other, flat, group=GLOO)
    results["replicas_equal"] = bool(torch.equal(other[0], other[1]))

    # the same with AdamW (its update is about lr per element whatever the gradient's scale)
    adamw = lambda params: torch.optim.AdamW(params, lr=1e-2)  # noqa: E731
    model = transformers.BertForSequenceClassification(cfg).eval()
    model.load_state_dict(state)
    ddp_model = DDP(model.to(DEV))
    train(ddp_model, ids[RANK * half:(RANK + 1) * half], labels[RANK * half:(RANK + 1) * half], make_opt=adamw)
    trained = {k: v.detach().cpu().float() for k, v in model.state_dict().items()}
    flat = torch.cat([v.flatten() for v in trained.values()])
    dist.all_gather(other, flat, group=GLOO)
    res = results["ddp_adamw"] = {"replicas_equal": bool(torch.equal(other[0], other[1]))}
    if RANK == 0:
        single = transformers.BertForSequenceClassification(cfg).eval()
        single.load_state_dict(state)
        train(single.to(DEV), ids, labels, make_opt=adamw)
        ref = torch.cat([v.detach().cpu().float().flatten() for v in single.state_dict().values()])
        start = torch.cat([v.float().flatten() for v in state.values()])
        diff, moved = (flat - ref).abs(), (ref - start).abs()
        res.update(max_param_diff=float(diff.max()), median_param_diff=float(diff.median()),
                   max_param_update=float(moved.max()), median_param_update=float(moved.median()),
                   elements=diff.numel(), over_a_tenth_of_lr=int((diff > 1e-3).sum()))


def hosts():
    """Two hosts of one process each: collectives exact against gloo, and a DDP step of a small MLP against
    one process on the whole batch; the gradient bucket (1-D) moves unpadded (layout.transfer_layout)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    results["hosts"] = {k: int(os.environ[k]) for k in ("GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                         "WORLD_SIZE", "RANK")}
    results["hosts"]["device_count"] = torch.ttnn.device_count()

    def ar(x, group):
        dist.all_reduce(x, group=group)
        return [x]

    def ag(x, group):
        outs = [torch.empty_like(x) for _ in range(WORLD)]
        dist.all_gather(outs, x, group=group)
        return outs

    def bc(x, group):
        dist.broadcast(x, src=1, group=group)
        return [x]
    both("hosts.all_reduce.float32", ar, sample((5, 7), torch.float32))
    both("hosts.all_reduce.int32", ar, sample((40, 3), torch.int32))
    both("hosts.all_gather.bfloat16", ag, sample((3, 33), torch.bfloat16))
    both("hosts.broadcast.int64", bc, sample((6,), torch.int64))

    torch.manual_seed(0)
    init = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    state = {k: v.clone() for k, v in init.state_dict().items()}
    x, y = torch.randn(8, 16), torch.randn(8, 4)

    def train(model, x, y, steps=2):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(steps):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x.to(DEV)), y.to(DEV)).backward()
            opt.step()
        return {k: v.detach().cpu() for k, v in getattr(model, "module", model).state_dict().items()}
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    model.load_state_dict(state)
    ddp_model = DDP(model.to(DEV))
    half = 8 // WORLD
    ttnn_eager.reset_stats()
    trained = train(ddp_model, x[RANK * half:(RANK + 1) * half], y[RANK * half:(RANK + 1) * half])
    s = ttnn_eager.stats()
    res = {"d2h_bytes": s["collective_d2h_bytes"], "h2d_bytes": s["collective_h2d_bytes"],
           "grad_elements": sum(p.numel() for p in model.parameters()),
           "max_update": max(float((trained[k] - state[k]).abs().max()) for k in state)}
    if RANK == 0:
        single = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        single.load_state_dict(state)
        ref = train(single.to(DEV), x, y)
        res["max_diff"] = max(float((trained[k] - ref[k]).abs().max()) for k in ref)
    results["hosts"]["ddp"] = res


def hang():
    """Rank 1 hangs (does not enter a collective) in a ttnn group made with a 2 s timeout: rank 0's collective
    must raise after about the timeout, not wait forever. Rank 1 then meets rank 0 again on the gloo group."""
    short = dist.new_group(backend="ttnn", timeout=datetime.timedelta(seconds=2))
    x = torch.ones(4, 4).to(DEV)
    if RANK == 0:
        t = time.time()
        try:
            dist.all_reduce(x, group=short)
            results["hang"] = {"error": None}
        except RuntimeError as e:
            results["hang"] = {"error": str(e)[:400], "seconds": round(time.time() - t, 2)}
    else:
        results["hang"] = {"hung": True}
    dist.barrier(group=GLOO)  # rank 1 "hangs" here until rank 0 has raised


def funcol():
    """The functional collectives (what DTensor, tensor parallelism and traced graphs call) on ttnn tensors,
    exact against the same calls on CPU tensors with gloo; in strict mode (no op may fall back to the CPU)."""
    import torch.distributed._functional_collectives as fc
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    def wait(t):
        return t.wait() if hasattr(t, "wait") else fc.wait_tensor(t)

    world = dist.group.WORLD
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        d = str(dtype).replace("torch.", "")
        cases = {
            "all_reduce.sum": lambda x, g: [fc.all_reduce(x, "sum", g)],
            "all_reduce.max": lambda x, g: [fc.all_reduce(x, "max", g)],
            "all_gather": lambda x, g: [fc.all_gather_tensor(x, 0, g)],
            "reduce_scatter": lambda x, g: [fc.reduce_scatter_tensor(x, "sum", 0, g)],
            "all_to_all_single": lambda x, g: [fc.all_to_all_single(x, None, None, g)],
            "broadcast": lambda x, g: [fc.broadcast(x, 1, g)],
            "all_reduce_coalesced": lambda x, g: fc.all_reduce_coalesced([x, x * 2], "sum", g),
        }
        for name, fn in cases.items():
            x = sample((WORLD * 2, 5), dtype, salt=7)
            with ttnn_eager.strict():
                got = [wait(t) for t in fn(x.to(DEV), world)]
            want = [wait(t) for t in fn(x.clone(), GLOO)]
            for i, (g, w) in enumerate(zip(got, want)):
                same(f"funcol.{name}.{d}" + (f"[{i}]" if len(got) > 1 else ""), g, w)
    # DTensor: shard, redistribute, gather back
    mesh = init_device_mesh("ttnn", (WORLD,))
    full = sample((WORLD * 3, 4), torch.float32, salt=9)
    dist.broadcast(full, src=0, group=GLOO)  # every rank holds rank 0's tensor
    with ttnn_eager.strict():
        dt = distribute_tensor(full.to(DEV), mesh, [Shard(0)])
        local = dt.to_local()
        rep = dt.redistribute(mesh, [Replicate()]).to_local()
        col = dt.redistribute(mesh, [Shard(1)]).to_local()
        back = dt.full_tensor()
    same("dtensor.shard0_local", local, full[RANK * 3:(RANK + 1) * 3])
    same("dtensor.redistribute_replicate", rep, full)
    same("dtensor.redistribute_shard1", col, full[:, RANK * 2:(RANK + 1) * 2])
    same("dtensor.full_tensor", back, full)


def _weights_memory(fn):
    """Device memory fn() leaves allocated (ttnn's allocator; the program cache emptied before each reading)."""
    import gc
    gc.collect()
    torch.ttnn.empty_cache()
    before = torch.ttnn.memory_allocated()
    out = fn()
    gc.collect()
    torch.ttnn.empty_cache()
    return out, torch.ttnn.memory_allocated() - before


def _device_bytes(model) -> int:
    from ttnn_eager.core import tensor as _t
    from ttnn_eager.device import api
    total = 0
    for p in list(model.parameters()) + list(model.buffers()):
        loc = p.to_local() if hasattr(p, "to_local") else p
        total += api.device_bytes(_t.handle_of(loc))
    return total


def _llama(hidden, inter):
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers, transformers.LlamaConfig(
        vocab_size=64, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False)


def ddp_large():
    """DDP of BERT's default 30,522-token vocabulary (a 1.95M-element embedding: its bucket is a flat buffer whose
    one row is longer than a core's L1 holds, which ttnn.slice stopped on in a TT_FATAL), SGD, each rank half of a
    batch of 4, against one process on the whole batch."""
    import transformers
    from torch.nn.parallel import DistributedDataParallel as DDP
    transformers.logging.set_verbosity_error()
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                                  max_position_embeddings=32, num_labels=2, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0)
    torch.manual_seed(2)
    batch, seq = 4, 8
    ids, labels = torch.randint(0, cfg.vocab_size, (batch, seq)), torch.randint(0, 2, (batch,))
    state = transformers.BertForSequenceClassification(cfg).eval().state_dict()

    def step(model, ids, labels):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        opt.zero_grad()
        model(input_ids=ids.to(DEV), labels=labels.to(DEV)).loss.backward()
        opt.step()

    t = time.time()
    model = transformers.BertForSequenceClassification(cfg).eval()
    model.load_state_dict(state)
    half = batch // WORLD
    step(DDP(model.to(DEV)), ids[RANK * half:(RANK + 1) * half], labels[RANK * half:(RANK + 1) * half])
    trained = {k: v.detach().cpu().float() for k, v in model.state_dict().items()}
    out = {"seconds": round(time.time() - t, 1), "embedding": list(state["bert.embeddings.word_embeddings.weight"].shape)}
    if RANK == 0:
        single = transformers.BertForSequenceClassification(cfg).eval()
        single.load_state_dict(state)
        step(single.to(DEV), ids, labels)
        ref = {k: v.detach().cpu().float() for k, v in single.state_dict().items()}
        out["max_param_diff"] = max(float((trained[k] - ref[k]).abs().max()) for k in ref)
        out["max_param_update"] = max(float((trained[k] - state[k].float()).abs().max()) for k in ref)
    results["ddp_large"] = out


def tp():
    """Tensor parallelism: ColwiseParallel q/k/v/gate/up, RowwiseParallel o/down of a tiny Llama, greedy
    generate() on 2 ranks against one process (exact arithmetic: float32 storage, exact shadow numerics)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    ttnn_eager.configure(float32_storage="float32", shadow_numerics="exact")
    transformers, cfg = _llama(128, 512)  # the projections dominate the weights
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ids = torch.randint(0, cfg.vocab_size, (1, 6))
    mesh = init_device_mesh("ttnn", (WORLD,))
    plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()}

    def place():
        for layer in model.model.layers:
            parallelize_module(layer, mesh, plan)
        return model.to(DEV)
    _, mem = _weights_memory(place)
    ttnn_eager.reset_stats()
    t = time.time()
    with torch.no_grad(), ttnn_eager.strict():
        out = model.generate(ids.to(DEV), max_new_tokens=8, do_sample=False)
    import ttnn_eager.counters as counters
    res = {"tokens": out.cpu().tolist(), "memory": mem, "device_bytes": _device_bytes(model),
           "seconds": round(time.time() - t, 1), "collectives": dict(counters.collective_by_op),
           "fallbacks": ttnn_eager.stats()["fallbacks"]}
    if RANK == 0:
        single = transformers.LlamaForCausalLM(cfg).eval()
        single.load_state_dict(state)
        _, res["single_memory"] = _weights_memory(lambda: single.to(DEV))
        res["single_device_bytes"] = _device_bytes(single)
        with torch.no_grad():
            res["single_tokens"] = single.generate(ids.to(DEV), max_new_tokens=8, do_sample=False).cpu().tolist()
        cpu = transformers.LlamaForCausalLM(cfg).eval()
        cpu.load_state_dict(state)
        res["cpu_tokens"] = cpu.generate(ids, max_new_tokens=8, do_sample=False).tolist()
        del single
    results["tp"] = res
    ttnn_eager.configure(float32_storage="bfloat16", shadow_numerics="hardware")


def fsdp():
    """FSDP2: fully_shard per decoder layer and the root of a tiny Llama, 3 AdamW steps, each rank half the
    batch, against one process on the whole batch (the default storage: bfloat16)."""
    from torch.distributed.fsdp import fully_shard
    transformers, cfg = _llama(64, 128)
    torch.manual_seed(0)
    init = transformers.LlamaForCausalLM(cfg)
    state = {k: v.clone() for k, v in init.state_dict().items()}
    ids = torch.randint(0, cfg.vocab_size, (4, 12))

    def train(model, ids, steps=3):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            out = model(input_ids=ids.to(DEV), labels=ids.to(DEV), use_cache=False)
            out.loss.backward()
            opt.step()
            losses.append(float(out.loss.detach().cpu()))
        return losses
    model = transformers.LlamaForCausalLM(cfg)
    model.load_state_dict(state)
    model.to(DEV)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    w = model.model.layers[0].mlp.up_proj.weight
    import ttnn_eager.counters as counters
    counters.collective_by_op.clear()
    ttnn_eager.reset_stats()
    half = ids.shape[0] // WORLD
    t = time.time()
    losses = train(model, ids[RANK * half:(RANK + 1) * half])
    res = {"losses": losses, "seconds": round(time.time() - t, 1), "collectives": dict(counters.collective_by_op),
           "fallbacks": dict(counters.fallback_by_op) if hasattr(counters, "fallback_by_op") else {},
           "sharded": [type(w).__name__, list(w.to_local().shape), list(w.shape)]}
    res["fallbacks"] = {str(k): v for k, v in res["fallbacks"].items()}
    if RANK == 0:
        single = transformers.LlamaForCausalLM(cfg)
        single.load_state_dict(state)
        single.to(DEV)
        res["single_losses"] = train(single, ids)
    results["fsdp"] = res


def fault():
    """Last: rank 1 exits in the middle of a DDP step (after its forward, before the backward's gradient
    all_reduce); rank 0 must raise within the group's timeout, and its device memory come back."""
    import gc
    from torch.nn.parallel import DistributedDataParallel as DDP
    gc.collect()
    torch.ttnn.empty_cache()
    base = torch.ttnn.memory_allocated()
    model = DDP(torch.nn.Linear(64, 64).to(DEV))
    loss = model(torch.randn(8, 64).to(DEV)).sum()
    if RANK == 1:
        results["fault"] = {"exited": True}
        _write()
        os._exit(0)  # exit code 0: torchrun does not kill rank 0 first
    t = time.time()
    try:
        loss.backward()
        results["fault"] = {"error": None}
    except RuntimeError as e:
        results["fault"] = {"error": str(e)[:400], "seconds": round(time.time() - t, 2)}
    del model, loss
    # backward() raises as soon as the failed collective does; PyTorch's autograd device thread drops the
    # failed graph (its buffers, the step's gradients) a moment later, on its own thread: the memory is
    # read until it is back at the baseline (bounded; CI saw 17 small buffers still alive at the first read)
    t, left = time.time(), None
    while left != 0 and time.time() - t < 10:
        time.sleep(0 if left is None else 0.05)
        gc.collect()
        torch.ttnn.empty_cache()
        left = torch.ttnn.memory_allocated() - base
    results["fault"]["memory_left"] = left
    results["fault"]["release_s"] = round(time.time() - t, 2)


def _write():
    results["total_s"] = round(time.time() - T0, 1)
    with open(f"{OUT}.{RANK}", "w") as f:
        json.dump(results, f, indent=1)


ttnn_eager.configure(float32_storage="float32")  # exactness against gloo on float32 values
torch.ttnn.set_device(LOCAL)  # this rank's chip (its current device already: device/runtime.py initial_device)
import datetime  # noqa: E402
TIMEOUT = datetime.timedelta(seconds=20)  # the fault test's bound
dist.init_process_group(device_id=torch.device("ttnn", LOCAL), timeout=TIMEOUT)
GLOO = dist.new_group(backend="gloo")
results["setup"] = {"backend": dist.get_backend(), "group": type(dist.group.WORLD).__name__,
                    "device_count": torch.ttnn.device_count(), "startup_s": round(time.time() - T0, 1)}
try:
    if MODE in ("all", "collectives"):
        t = time.time()
        collectives()
        results["collectives_s"] = round(time.time() - t, 1)
        t = time.time()
        funcol()
        results["funcol_s"] = round(time.time() - t, 1)
    if MODE == "hosts":
        hosts()
        hang()
    if MODE in ("all", "ddp"):
        ttnn_eager.configure(float32_storage="bfloat16")  # the default: DDP within bfloat16 tolerance
        ddp()
    if MODE in ("all", "ddp_large"):
        ddp_large()
    for name, fn in (("tp", tp), ("fsdp", fsdp)):
        if MODE in ("all", name):
            t = time.time()
            fn()
            results[f"{name}_s"] = round(time.time() - t, 1)
    if MODE in ("all", "fault"):
        fault()
except Exception:  # noqa: BLE001  (reported to the test, which fails with it)
    import traceback
    results["errors"]["exception"] = traceback.format_exc()
    print(traceback.format_exc(), file=sys.stderr)
_write()
if "fault" not in results and "hang" not in results:  # after the fault (and the hang) a group is broken
    dist.destroy_process_group()
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)  # skip the interpreter's teardown (closing the mock device, nanobind's leak report): seconds
