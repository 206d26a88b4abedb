"""The zoo's driver (src/ttnn_eager/tools/zoo/worker.py): a worker subprocess that dies or hangs (fake entries in
tests/zoo_fakes.py) is recorded and the sweep goes on, resumable from its JSON."""
import os

from ttnn_eager.tools import zoo

FAKES = os.path.join(os.path.dirname(__file__), "zoo_fakes.py")


def test_worker_crash_and_timeout_recorded_and_the_run_continues(tmp_path):
    path = str(tmp_path / "zoo.json")
    names = [f"file:{FAKES}:segv", f"file:{FAKES}:hangs", f"file:{FAKES}:tiny"]
    data = zoo.sweep(names, path, timeout=8, recycle=0)
    res = data["results"]
    assert res[names[0]]["status"] == "crash" and "SIGSEGV" in res[names[0]]["error"]
    assert res[names[1]]["status"] == "timeout"
    tiny = res[names[2]]
    assert tiny["status"] == "ran" and tiny["class_"] == "clean" and tiny["pearson"] > 0.999, tiny
    # resumable: the JSON has every result, and a second sweep measures nothing again
    again = zoo.sweep(names, path, timeout=4)
    assert again["results"] == res and zoo.load(path)["results"] == res
    md = zoo.zoo_md(again)
    assert "| crash | 1 |" in md and "| timeout | 1 |" in md and "| clean | 1 |" in md
