"""Mesh mode (features/mesh): one process drives a board's chips as one TT-NN MeshDevice, DTensor's plans over it,
collectives as TT-NN's on the fabric. The cases run in subprocesses on the mock n300 (1x2) and the mock T3000
(1x8), written by tests/mesh_cases.py; each test reads its part."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(device: str, shape: str, cases: str, tmp_path) -> dict:
    out = str(tmp_path / f"{device}.json")
    env = dict(os.environ, TTNN_EAGER_DEVICE=device, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "src"), os.environ.get("PYTHONPATH", "")]))
    env.pop("TTNN_EAGER_MESH", None)
    r = subprocess.run([sys.executable, os.path.join(HERE, "mesh_cases.py"), shape, cases, out], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and os.path.exists(out), r.stderr[-4000:]
    with open(out) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def n300(tmp_path_factory):
    return _run("mock-n300", "1x2", "tp,tp_train,compiled,dp,bad_input", tmp_path_factory.mktemp("n300"))


@pytest.fixture(scope="module")
def t3000(tmp_path_factory):
    return _run("mock-t3000", "1x8", "tp,bad_input", tmp_path_factory.mktemp("t3000"))


@pytest.fixture(scope="module")
def t3000_2d(tmp_path_factory):
    return _run("mock-t3000", "2x4", "dp_tp", tmp_path_factory.mktemp("t3000_2d"))


def test_the_mesh_is_one_device(n300):
    assert n300["mesh"] == {"shape": [1, 2], "device_count": 1, "dims": [2]}


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_tensor_parallel_generate_equals_the_cpu_on_the_fabric(n300, cache):
    r = n300["tp"][cache]
    assert r["tokens"] == r["cpu_tokens"]
    assert r["fallbacks"] == 0
    # RowwiseParallel's partial sums: one all_reduce per o_proj and down_proj, per layer and step (2 x 2 x 8),
    # each one ttnn.all_reduce; nothing crosses PCIe for them
    assert r["collectives"] == {"all_reduce": 32} and r["ccl_ops"] == {"all_reduce": 32}
    assert r["collective_pcie_bytes"] == 0


def test_tensor_parallel_runs_the_replicated_models_ops_plus_its_collectives(n300):
    """DTensor decomposes a linear it has no rule for into t + mm + views (four TT-NN ops, and a transpose of
    the weight every call); the mesh's linear rule keeps each projection one ttnn.linear."""
    r = n300["tp"]
    assert r["dynamic"]["ttnn_ops"] == r["replicated_ttnn_ops"] + 32, r


def test_tensor_parallel_weights_per_chip(n300):
    r = n300["tp"]
    assert r["local_q_rows"] == 128  # q_proj [256, 256] colwise over 2 chips
    # the decoder layers' projections are split, the embeddings, norms and head replicated: 0.67x measured
    assert r["weight_bytes_per_chip"] < 0.72 * r["replicated_weight_bytes"], r


@pytest.mark.parametrize("opt", ["sgd", "adamw"])
def test_data_parallel_step_equals_the_whole_batch(n300, opt):
    r = n300["dp"][opt]
    assert r["fallbacks"] == 0 and r["collective_pcie_bytes"] == 0
    assert r["ccl_ops"]["all_reduce"] == r["params"]  # one gradient average per parameter, on the fabric
    assert r["ccl_ops"]["mesh_partition"] == 2        # the batch and the labels sharded on the device
    # measured: SGD 3e-7 against a solo chip's 1.5e-4 (updates 1.6e-4 on average); AdamW 3.3e-6 against 5.4e-3
    assert r["mean_param_diff"] < 0.02 * r["mean_param_update"], r
    assert r["mean_solo_diff"] > 20 * r["mean_param_diff"], r
    assert r["max_param_diff"] < r["max_param_update"], r


def test_bad_input_gets_clear_errors(n300):
    r = n300["bad_input"]
    assert "dimension 0 of a (3, 64) tensor is not a multiple of the mesh's 2 chips" in r["indivisible"]
    assert "already open" in r["second_mesh"]
    assert "dimension 0 of a (5, 64) tensor is not a multiple of the mesh's 2 chips" in r["uneven_distribute"]
    assert r["local_shape"] == [1, 32] and r["gathered_equal"]
    assert r["held"] > 0 and r["freed_to_baseline"]  # a mesh tensor's buffers, on every chip, go with it


def test_t3000_tensor_parallel_over_eight_chips(t3000):
    r = t3000["tp"]
    for cache in ("dynamic", "static"):
        assert r[cache]["tokens"] == r[cache]["cpu_tokens"], cache
        assert r[cache]["ccl_ops"] == {"all_reduce": 32} and r[cache]["collective_pcie_bytes"] == 0
    assert r["local_q_rows"] == 32  # 256 rows over 8 chips (8 KV heads: one per chip)
    assert r["weight_bytes_per_chip"] < 0.5 * r["replicated_weight_bytes"], r
    assert t3000["bad_input"]["local_shape"] == [1, 32] and t3000["bad_input"]["gathered_equal"]


def test_compiled_tensor_parallel_decode_replays_the_collectives(n300):
    r = n300["compiled"]
    assert r["tokens"] == r["cpu_tokens"] and r["fallbacks"] == 0
    # 32 all_reduce calls reach ttnn for the 8 tokens, fewer through the process group: the replayed
    # graphs issue theirs with no PyTorch dispatch (measured 12 through the group)
    assert r["ccl_ops"]["all_reduce"] == 32 and r["collectives"]["all_reduce"] < 32, r


def test_generate_command_on_a_two_dimensional_mesh():
    """`ttnn-eager generate llama --mesh 2x4 --json` on the mock T3000: tensor parallel over each row's 4 chips
    (cluster axis 1), the rows replicated."""
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "src"), os.environ.get("PYTHONPATH", "")]))
    env.pop("TTNN_EAGER_DEVICE", None)
    env.pop("TTNN_EAGER_MESH", None)
    r = subprocess.run([sys.executable, "-m", "ttnn_eager.tools.cli", "generate", "llama", "--mesh", "2x4",
                        "--max-new-tokens", "6", "--float32-storage", "float32", "--strict", "--json"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["mesh"] == [2, 4] and out["tp_degree"] == 4 and out["tokens_equal_cpu"]
    assert out["ccl_ops"] == {"all_reduce": 2 * 2 * 6} and out["collective_pcie_bytes"] == 0
    assert len(out["weight_bytes_per_chip"]) == 8
    assert out["weight_bytes_per_chip"][0] < 0.7 * out["replicated_weight_bytes"]


def test_tensor_parallel_training_step_equals_the_cpu(n300):
    r = n300["tp_train"]
    assert r["fallbacks"] == 0 and r["collective_pcie_bytes"] == 0
    assert abs(r["loss"] - r["cpu_loss"]) < 1e-5, r
    assert r["ccl_ops"]["all_reduce"] == 14  # forward: 2 rowwise x 2 layers; backward: the colwise inputs (measured)
    assert r["max_param_diff"] < 0.01 * r["max_param_update"], r


def test_t3000_as_data_parallel_by_tensor_parallel(t3000_2d):
    """2x4: TP=4 along each row (cluster axis 1), the batch over the 2 rows, gradients averaged along the columns
    (cluster axis 0); one SGD step against the CPU on the whole batch."""
    r = t3000_2d["dp_tp"]
    assert t3000_2d["mesh"]["dims"] == [2, 4]
    assert r["fallbacks"] == 0 and r["collective_pcie_bytes"] == 0
    assert r["ccl_ops"] == {"mesh_partition": 1, "all_reduce": 14 + 21}  # TP's (as on 1x2) + one per parameter
    assert r["max_param_diff"] < 0.01 * r["max_param_update"], r


def test_card_shaped_launch_ddp_over_tensor_parallel(tmp_path):
    """A T3000 as 4 torchrun ranks, each driving its n300 as a 1x2 mesh (TTNN_EAGER_MESH=1x2: rank r's card is
    chips r and r + 4 of the mock T3000): an MLP tensor parallel over the card's 2 chips (its partial sums
    all-reduced on the card's fabric), DDP between the 4 cards through the host (every chip's value moved: the
    chips of a card hold different shards); one SGD step against one process on the whole batch."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "card.json")
    env = dict(os.environ, TTNN_EAGER_DEVICE="mock-t3000", TTNN_EAGER_MESH="1x2", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "src"), os.environ.get("PYTHONPATH", "")]))
    env.pop("TTNN_EAGER_VISIBLE_DEVICES", None)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-addr",
                        "127.0.0.1", "--master-port", str(port), os.path.join(HERE, "mesh_card_ranks.py"), out],
                       env=env, capture_output=True, text=True, timeout=600)
    ranks = []
    for rank in range(4):
        assert os.path.exists(f"{out}.{rank}"), r.stderr[-3000:]
        with open(f"{out}.{rank}") as f:
            ranks.append(json.load(f))
    assert r.returncode == 0, r.stderr[-3000:]
    for k in ranks:
        assert k["fallbacks"] == 0 and k["replicas_equal"]
        assert k["ccl_ops"]["all_reduce"] == 1  # the rowwise partial sums, on the card's fabric
        assert k["collectives"]["all_reduce"] == 2  # that one, and DDP's bucket between the cards
        assert k["pcie_bytes"] > 0  # DDP's bucket crosses PCIe: every chip's part
    assert ranks[0]["max_param_diff"] < 1e-4 * ranks[0]["max_param_update"], ranks[0]
