"""The two commands of a fresh clone (README): scripts/run (the main job) and scripts/test (the tests). Each
sets up the pinned venv (scripts/setup.sh) when it is missing or the lock file changed, and is a no-op
otherwise; .ci/run calls the README's test command and nothing else. Run here on a copy of the scripts with a
stand-in setup.sh and python (the real setup installs ~6 GB)."""
import os
import re
import shutil
import subprocess
import time

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
FAKE_SETUP = """#!/usr/bin/env bash
echo setup >> calls.log
mkdir -p .venv/bin
printf '#!/bin/sh\\necho "python $* | PYTHONPATH=$PYTHONPATH"\\n' > .venv/bin/python
chmod +x .venv/bin/python
"""


@pytest.fixture
def clone(tmp_path):
    os.makedirs(tmp_path / "scripts")
    os.makedirs(tmp_path / "requirements")
    for name in ("_ensure", "run", "test"):
        shutil.copy2(os.path.join(ROOT, "scripts", name), tmp_path / "scripts" / name)
    (tmp_path / "scripts" / "setup.sh").write_text(FAKE_SETUP)
    os.chmod(tmp_path / "scripts" / "setup.sh", 0o755)
    (tmp_path / "requirements" / "lock.txt").write_text("torch==2.14.1\n")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    return tmp_path


def _call(clone, *argv):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(clone / "scripts" / argv[0]), *argv[1:]], cwd="/", capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0, r.stderr
    setups = (clone / "calls.log").read_text().count("setup") if (clone / "calls.log").exists() else 0
    return r.stdout.strip(), setups


def test_each_command_sets_up_what_is_missing_then_is_a_no_op(clone):
    out, setups = _call(clone, "test", "-k", "guide", "-x")
    assert setups == 1
    assert out == f"python -m pytest -q -k guide -x | PYTHONPATH={clone}/src"  # arguments pass through
    out, setups = _call(clone, "run")
    assert setups == 1 and out.startswith("python -m ttnn_eager.tools.cli bert |")  # bert by default
    out, _ = _call(clone, "run", "generate", "llama")
    assert out.startswith("python -m ttnn_eager.tools.cli generate llama |")
    start = time.perf_counter()
    for _ in range(5):
        _, setups = _call(clone, "test")
    per_call = (time.perf_counter() - start) / 5
    assert setups == 1 and per_call < 0.5  # nothing to set up: a hash of two files
    (clone / "requirements" / "lock.txt").write_text("torch==2.14.1\nttnn==0.81.1\n")
    _, setups = _call(clone, "test")
    assert setups == 2  # the lock changed: set up again
    shutil.rmtree(clone / ".venv")
    _, setups = _call(clone, "run", "--help")
    assert setups == 3  # the venv is gone: set up again


def test_a_failed_setup_is_not_stamped(clone):
    (clone / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\necho setup >> calls.log\nexit 3\n")
    for attempt in (1, 2):
        r = subprocess.run([str(clone / "scripts" / "test")], capture_output=True, text=True)
        assert r.returncode == 3
        assert (clone / "calls.log").read_text().count("setup") == attempt
    assert not (clone / ".venv-setup.stamp").exists()


def test_readme_leads_with_the_two_commands_and_ci_runs_the_test_command():
    readme = open(os.path.join(ROOT, "README.md")).read()
    first_commands = [c.split("#")[0].strip() for c in re.findall(r"^    (\./\S+.*)$", readme, flags=re.M)[:2]]
    assert first_commands == ["./scripts/run bert", "./scripts/test"]
    assert readme.index("./scripts/run bert") < readme.index("## Using it")
    ci = [line for line in open(os.path.join(ROOT, ".ci", "run")).read().splitlines()
          if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    assert ci == ["./scripts/test"]
    for name in ("run", "test", "setup.sh"):
        assert os.access(os.path.join(ROOT, "scripts", name), os.X_OK)
