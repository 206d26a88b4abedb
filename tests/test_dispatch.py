"""Dispatch: strict mode, the CPU fallback, stats, generated docs."""
import warnings

import pytest
import torch

import ttnn_eager
from ttnn_eager import docs

DEV = "ttnn:0"


def test_fallback_runs_on_cpu_warns_once_and_counts():
    x = torch.rand(3, 5) + 0.5
    d = x.to(DEV)
    ref = torch.cumprod(x.to(torch.bfloat16).float(), dim=1)
    ttnn_eager.reset_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [torch.cumprod(d, dim=1) for _ in range(3)]
    named = [w for w in caught if "aten.cumprod.default" in str(w.message)]
    assert len(named) <= 1  # once per process: an earlier test may have warned already
    assert ttnn_eager.stats()["fallbacks"] == 3
    for o in outs:
        assert o.device == torch.device(DEV)
        assert torch.allclose(o.cpu(), ref, rtol=2e-2)


def test_fallback_keeps_in_place_semantics():
    x = torch.rand(4, 6)
    d = x.to(DEV)
    same = torch.ops.aten.cumprod_(d, 1)
    assert same is d
    assert torch.allclose(d.cpu(), torch.cumprod(x.to(torch.bfloat16).float(), 1), rtol=2e-2)


def test_strict_mode_raises_naming_the_op():
    d = torch.rand(3, 5).to(DEV)
    with ttnn_eager.strict(), pytest.raises(ttnn_eager.FallbackError, match=r"aten\.cumprod\.default"):
        torch.cumprod(d, dim=1)
    torch.cumprod(d, dim=1)  # outside the block: falls back again


def test_strict_mode_from_environment():
    from conftest import run_python
    r = run_python("import torch, ttnn_eager\nd = torch.rand(3).to('ttnn:0')\ntry:\n    torch.sort(d)\n"
                   "except ttnn_eager.FallbackError as e:\n    print('raised', e)\n", env={"TTNN_EAGER_STRICT": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("raised") and "aten.sort" in r.stdout


def test_stats_count_and_reset():
    ttnn_eager.reset_stats()
    assert set(ttnn_eager.stats().values()) == {0}
    x = torch.randn(2, 40).to(DEV)
    y = (x * 2).sum()
    y.item()
    s = ttnn_eager.stats()
    assert s["host_to_device"] == 1 and s["device_to_host"] == 1
    assert s["aten_ops"] >= 4 and s["ttnn_ops"] >= 2


def test_in_place_and_out_variants_match_cpu():
    x = torch.randn(3, 40)
    d = x.to(DEV)
    alias = d.detach()  # shares the device tensor: sees in-place updates
    d.add_(1.0).mul_(2.0)
    ref = (x.to(torch.bfloat16).float() + 1) * 2
    assert torch.allclose(d.cpu(), ref, atol=0.05) and torch.equal(alias.cpu(), d.cpu())
    out = torch.empty(3, 40, device=DEV)
    torch.add(d, d, out=out)
    assert torch.allclose(out.cpu(), 2 * d.cpu(), atol=0.05)


def test_ops_doc_is_current():
    assert docs.ops_md() == open(f"{docs.DOCS}/ops.md").read(), "docs/ops.md is stale: run `ttnn-eager docs`"


def test_bert_checklist_doc_is_current():
    inventories = {key: docs.bert_inventory(*key) for key in docs.BERT_SCENARIOS}
    assert all(not inv["fallbacks"] for inv in inventories.values())
    assert docs.bert_md(inventories) == open(f"{docs.DOCS}/bert.md").read(), \
        "docs/bert.md is stale: run `ttnn-eager docs`"


def test_in_place_write_through_a_reshaped_view_raises_instead_of_silently_copying():
    x = torch.zeros(3, 4).to(DEV)
    for write in (lambda: x[0].add_(1), lambda: x.view(12).zero_(), lambda: x.t().mul_(2)):
        with pytest.raises(RuntimeError, match="in-place write into a view"):
            write()
    assert torch.equal(x.cpu(), torch.zeros(3, 4))  # nothing half-done
    x.detach().add_(1)  # same-shape alias: shares the device tensor, so the write is seen by both
    assert torch.equal(x.cpu(), torch.ones(3, 4))
