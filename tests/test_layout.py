"""The layout and dtype policy: nothing converted inside a steady-state forward, weights prepared once,
device memory of bert-large in bfloat16 and bfloat8_b, the measured row-major table."""
import gc

import pytest
import torch
import transformers

import ttnn_eager
from ttnn_eager.tools import bert, docs, layout_probe
from ttnn_eager import counters

from conftest import pcc
from ttnn_eager.core.tensor import handle_of  # noqa: E402

DEV = "ttnn:0"


@pytest.fixture(scope="module")
def memory_base():
    torch.zeros(1, device=DEV)
    gc.collect()
    return torch.ttnn.memory_allocated()


def _bert_large_on_device(weight_dtype, memory_base, restore):
    ttnn_eager.configure(weight_dtype=weight_dtype)
    torch.manual_seed(0)
    cpu = transformers.BertModel(bert.bert_large_config()).eval()
    n_params = sum(p.numel() for p in cpu.parameters())
    import copy
    dev = copy.deepcopy(cpu).to(DEV)
    used = torch.ttnn.memory_allocated() - memory_base
    return cpu, dev, n_params, used


def test_bert_large_memory_and_steady_state_forward(memory_base, restore_config):
    cpu, dev, n_params, used = _bert_large_on_device("bfloat16", memory_base, restore_config)
    assert abs(used - 2 * n_params) <= 0.10 * 2 * n_params, (used, n_params)

    ids, mask = bert.make_inputs(2, 100, cpu.config.vocab_size, padded=20)
    d_ids, d_mask = ids.to(DEV), mask.to(DEV)
    with torch.no_grad():
        dev(input_ids=d_ids, attention_mask=d_mask)  # first forward: prepares the embedding tables once
    gc.collect()
    after_first = torch.ttnn.memory_allocated() - memory_base
    assert after_first <= used * 1.01  # weights were converted in place: no second copy kept

    ttnn_eager.reset_stats()
    with torch.no_grad():
        out = dev(input_ids=d_ids, attention_mask=d_mask)
    stats = ttnn_eager.stats()
    syncs = counters.aten_by_op()[torch.ops.aten._local_scalar_dense.default]  # transformers' mask check
    assert stats["layout_conversions"] == 0, stats
    assert stats["host_to_device"] == 0, stats  # the inputs were uploaded before the forward
    assert syncs == 1 and stats["device_to_host"] == 0, stats  # answered from the mask's known values
    ttnn_eager.reset_stats()
    hidden = out.last_hidden_state.cpu()
    assert ttnn_eager.stats()["device_to_host"] == 1 and ttnn_eager.stats()["layout_conversions"] == 0
    with torch.no_grad():
        ref = cpu(input_ids=ids, attention_mask=mask).last_hidden_state
    assert pcc(hidden[mask.bool()], ref[mask.bool()]) >= 0.999


def test_bert_large_bfloat8_b_weights(memory_base, restore_config):
    _, dev16, n_params, used16 = _bert_large_on_device("bfloat16", memory_base, restore_config)
    del dev16
    gc.collect()
    cpu, dev, _, used8 = _bert_large_on_device("bfloat8_b", memory_base, restore_config)
    assert used8 <= 0.60 * used16, (used8, used16)
    weight = dev.encoder.layer[0].attention.self.query.weight
    assert handle_of(weight).tt_dtype == ttnn_eager.device.api.BFLOAT8_B
    ids, mask = bert.make_inputs(2, 100, cpu.config.vocab_size, padded=20)
    with torch.no_grad(), ttnn_eager.strict():
        out = dev(input_ids=ids.to(DEV), attention_mask=mask.to(DEV))
        ref = cpu(input_ids=ids, attention_mask=mask)
    valid = mask.bool()
    assert pcc(out.last_hidden_state.cpu()[valid], ref.last_hidden_state[valid]) >= 0.99
    assert pcc(out.pooler_output.cpu(), ref.pooler_output) >= 0.99


def test_integers_are_stored_by_sign():
    api = ttnn_eager.device.api
    assert handle_of(torch.tensor([0, 5, 7]).to(DEV)).tt_dtype == api.UINT32
    assert handle_of(torch.tensor([-1, 5]).to(DEV)).tt_dtype == api.INT32
    u = torch.tensor([1, 2, 3]).to(DEV)
    assert torch.equal((u - 5).cpu(), torch.tensor([-4, -3, -2]))  # no uint32 wrap-around
    assert torch.equal((-u).cpu(), torch.tensor([-1, -2, -3]))
    assert torch.equal((u > -1).cpu(), torch.tensor([True, True, True]))


def test_layouts_doc_is_current():
    text = docs.layouts_md(layout_probe.measure())
    assert text == open(f"{docs.DOCS}/layouts.md").read(), "docs/layouts.md is stale: run `ttnn-eager docs`"
    assert "| `ttnn.matmul` | rejects |" in text and "| `ttnn.add` | accepts |" in text


@pytest.mark.parametrize("values", [[[1, 1, 1], [1, 1, 1]], [[1, 1, 0], [1, 1, 1]], [0, 0, 0], [True, False],
                                    [-3, 5], [-3, 0, 5], [-2, -1]])
def test_mask_checks_answered_from_known_values_without_a_device_read(values):
    m = torch.tensor(values)
    d = m.to(DEV)
    ttnn_eager.reset_stats()
    got = [bool(d.all()), bool(d.any()), bool(d.bool().all()), bool(d.bool().any())]
    assert got == [bool(m.all()), bool(m.any()), bool(m.bool().all()), bool(m.bool().any())]
    if set(m.flatten().tolist()) <= {0, 1}:  # a mask: every answer is known from its upload
        assert ttnn_eager.stats()["device_to_host"] == 0
    assert [bool(d[1:].all()), bool(d.flatten()[:1].any())] == [bool(m[1:].all()), bool(m.flatten()[:1].any())]


def test_known_values_follow_in_place_writes():
    """What the backend knows of a tensor's values must change with them: after an in-place write a mask
    check may not be answered from the values the tensor had at upload."""
    m = torch.ones(2, 3, dtype=torch.long).to(DEV)
    view = m.view(6)
    assert bool(m.all()) and bool(view.all())
    m.zero_()
    assert not bool(m.all()) and not bool(m.any()) and not bool(view.all())
    m.add_(torch.tensor([[0, 1, 0], [0, 0, 0]]).to(DEV))
    assert not bool(m.all()) and bool(m.any()) and m.sum().item() == 1


def test_permute_layout_decisions_are_cached_by_everything_they_read(monkeypatch):
    """layout.permute_layout decides once per (shape, result shape, device dtype, layout, limits): the same
    question gets the cached answer, and a change in any of them -- the limit PERMUTE_ROW_MAJOR_MIN_SAVING, the
    tensor's layout -- is another question, never a stale answer. The values stay exact through the relayout."""
    from ttnn_eager.core import layout
    from ttnn_eager.device import api
    torch.manual_seed(0)
    cpu = torch.randn(2, 24, 4, 16).to(torch.bfloat16).float()
    x = cpu.to(DEV)
    h, shape = handle_of(x), (2, 24, 4, 16, 1)  # a [16, 1] plane padded to a whole tile: 64x the bytes
    assert h.layout == api.TILE
    assert layout.permute_layout(h, shape).layout == api.TILE  # saves less than 16 MiB: stays TILE
    assert layout._permute_layouts[(h.shape, shape, id(h.tt_dtype), id(api.TILE), layout.ROW_BYTES_MAX,
                                    layout.PERMUTE_ROW_MAJOR_MIN_SAVING)] is None  # (enums keyed by id)
    monkeypatch.setattr(layout, "PERMUTE_ROW_MAJOR_MIN_SAVING", 0)  # any saving counts now
    conversions = counters.counts["layout_conversions"]
    assert layout.permute_layout(h, shape).layout == api.ROW_MAJOR
    assert layout.permute_layout(h, shape).layout == api.ROW_MAJOR  # asked again from ROW_MAJOR: rows fit, kept
    assert counters.counts["layout_conversions"] == conversions + 1
    y = x.unsqueeze(-1)
    assert handle_of(y).layout == api.ROW_MAJOR and torch.equal(y.cpu(), cpu.unsqueeze(-1))
    monkeypatch.setattr(layout, "ROW_BYTES_MAX", 16)  # rows of 32 bytes no longer fit: back to TILE
    assert layout.permute_layout(h, shape).layout == api.TILE
    assert torch.equal(x.cpu(), cpu)
