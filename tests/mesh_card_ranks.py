"""The card-shaped launch (tests/test_mesh.py): a T3000 as 4 torchrun ranks, each driving its n300 as a 1x2 mesh
(TTNN_EAGER_MESH=1x2; ttnn_eager.mesh.open_local), tensor parallel inside a card on its fabric, DDP between the
cards through the host. One training step of an MLP (Colwise w1, Rowwise w2 over the card's 2 chips, written
with the card's group), SGD, against one process on the whole batch on the CPU; exact arithmetic.
    torchrun --nproc-per-node 4 mesh_card_ranks.py OUT.json     (TTNN_EAGER_DEVICE=mock-t3000 TTNN_EAGER_MESH=1x2)
"""
import json
import os
import sys

import torch
import torch.distributed as dist

import ttnn_eager
from ttnn_eager import counters

RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group()
card = ttnn_eager.mesh.open_local((1, 2))
ttnn_eager.configure(float32_storage="float32", shadow_numerics="exact")
SUM = dist.ReduceOp.SUM


class _ToParallel(torch.autograd.Function):  # a colwise layer's input: the same on every chip; its gradient sums
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        opts = dist.AllreduceOptions()
        opts.reduceOp = SUM
        card.allreduce([g], opts)
        return g


class _FromParallel(torch.autograd.Function):  # a rowwise layer's partial sums, made whole on the fabric
    @staticmethod
    def forward(ctx, y):
        y = y.clone()
        opts = dist.AllreduceOptions()
        opts.reduceOp = SUM
        card.allreduce([y], opts)
        return y

    @staticmethod
    def backward(ctx, g):
        return g


class ParallelMLP(torch.nn.Module):
    def __init__(self, mlp):
        super().__init__()
        shard = ttnn_eager.mesh.shard
        self.w1 = torch.nn.Parameter(shard(mlp[0].weight.detach(), 0, card))
        self.b1 = torch.nn.Parameter(shard(mlp[0].bias.detach(), 0, card))
        self.w2 = torch.nn.Parameter(shard(mlp[2].weight.detach(), 1, card))
        self.b2 = torch.nn.Parameter(mlp[2].bias.detach().to("ttnn:0"))

    def forward(self, x):
        h = torch.relu(torch.nn.functional.linear(_ToParallel.apply(x), self.w1, self.b1))
        return _FromParallel.apply(torch.nn.functional.linear(h, self.w2)) + self.b2


torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32))
x, target = torch.randn(4 * WORLD, 64), torch.randn(4 * WORLD, 32)
mine = slice(4 * RANK, 4 * RANK + 4)

model = torch.nn.parallel.DistributedDataParallel(ParallelMLP(mlp))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
counters.reset_stats()
loss = torch.nn.functional.mse_loss(model(x[mine].to("ttnn:0")), target[mine].to("ttnn:0"))
loss.backward()
opt.step()
stats = ttnn_eager.stats()
gather = ttnn_eager.mesh.gather
p = model.module
trained = {"0.weight": gather(p.w1.detach(), 0, card), "0.bias": gather(p.b1.detach(), 0, card),
           "2.weight": gather(p.w2.detach(), 1, card), "2.bias": p.b2.detach()}
trained = {k: v.cpu() for k, v in trained.items()}
out = {"rank": RANK, "fallbacks": stats["fallbacks"], "ccl_ops": {k: v for k, v in counters.ttnn_by_op.items() if
                                                                    k in ("all_reduce", "all_gather", "mesh_partition")},
       "collectives": dict(counters.collective_by_op), "pcie_bytes": stats["collective_d2h_bytes"],
       "replicas_equal": True}
# every card holds the same parameters (DDP): compare with rank 0's through the host
for k, v in trained.items():
    ref = v.clone()
    dist.broadcast(ref, 0)
    out["replicas_equal"] &= torch.equal(ref, v)
if RANK == 0:
    init = {k: v.detach().clone() for k, v in mlp.state_dict().items()}
    cpu_opt = torch.optim.SGD(mlp.parameters(), lr=0.5)
    torch.nn.functional.mse_loss(mlp(x), target).backward()
    cpu_opt.step()
    out["max_param_diff"] = max(float((trained[k] - v.detach()).abs().max()) for k, v in mlp.state_dict().items())
    out["max_param_update"] = max(float((v.detach() - init[k]).abs().max()) for k, v in mlp.state_dict().items())
with open(f"{sys.argv[1]}.{RANK}", "w") as f:
    json.dump(out, f)
dist.destroy_process_group()
