"""Every Python example of docs/guide.md runs, in order, in a fresh interpreter, and prints what the guide
says it prints."""
import os
import re

from conftest import run_python

GUIDE = os.path.join(os.path.dirname(__file__), "..", "docs", "guide.md")


def test_guide_examples_run(tmp_path):
    text = open(GUIDE).read()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 6
    script = "\n".join(f"print('--- block {i}')\n{b}" for i, b in enumerate(blocks))
    r = run_python(f"import os; os.chdir({str(tmp_path)!r})\n" + script)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = r.stdout
    assert "ttnn:0 torch.float32" in out
    assert "torch.Size([2, 16, 128]) ttnn:0" in out
    assert "Wormhole n150 (mock)" in out
    grown = int(re.search(r"--- block 2\n.*\n.*\n(\d+)\n", out).group(1))
    assert 2 * 1024 * 1024 <= grown <= 1.02 * 2 * 1024 * 1024  # whole tiles per DRAM bank
    assert "WORMHOLE_B0 (8, 8) (2, 0)\nTrue\nTrue\n" in out  # device properties and the peak
    assert "autocast: torch.bfloat16 torch.float32 torch.float32\ntorch.float32\n" in out
    assert "scale: 1024.0\n" in out  # GradScaler: no inf step, the scale kept
    assert "True ttnn:0\npinned batches: True\n" in out  # pinned memory
    assert "compiled == eager: True" in out
    assert "3.1406" in out and "3.1416" in out
    assert "ttnn devices do not support torch.float64" in out
    assert "aten.cumprod.default" in out
    assert "'fallbacks': 0" in out and "| `aten.linear.default` | matmul |" in out
    assert "replayed == eager: True" in out
    assert (tmp_path / "report.png").read_bytes()[:4] == b"\x89PNG"
    losses = [float(v) for v in re.findall(r"step \d: loss ([\d.]+)", out)]  # the training example
    assert len(losses) == 5 and losses[-1] < losses[0] and "\n0 5\n" in out
