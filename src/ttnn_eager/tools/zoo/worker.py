"""The crash- and timeout-proof driver: a worker subprocess (`python -m ttnn_eager.tools.zoo --worker`)
that runs entries one after another (`worker_main`), restarted after a crash or a timeout (`Worker`), and the
resumable JSON of results (`sweep`, `load`, `save`)."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

import torch

from .outputs import classify
from .results import SRC, load, save
from .run import run_one
from .shrinking import BATCH, MASKED, SEQ, SHRINK


STARTUP_TIMEOUT = 600.0  # seconds for a worker to import torch and the backend (a loaded machine)


class Worker:
    """A `python -m ttnn_eager.tools.zoo --worker` subprocess: entry names on its stdin, one JSON line each on
    its stdout, its stderr in a temporary file (the crash's last words)."""

    def __init__(self, nice: int = 0, bfloat16_cpu: bool = False, compiled: bool = False):
        self.log = tempfile.NamedTemporaryFile("w+b", prefix="zoo-worker-", suffix=".log", delete=False)
        env = dict(os.environ)
        env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, "-m", "ttnn_eager.tools.zoo", "--worker"] + (["--bfloat16-cpu"] if bfloat16_cpu else []) \
            + (["--compile"] if compiled else [])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, start_new_session=True,
                                     preexec_fn=(lambda: os.nice(nice)) if nice else None)
        self.buf = b""
        self.served = 0
        self.ready = False

    def _line(self, timeout: float):
        """The worker's next line (bytes), or None at its death, or "timeout"."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([fd], [], [], min(left, 5.0))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def ask(self, name: str, timeout: float):
        """The worker's JSON result, or ("crash" | "timeout", detail). The timeout starts once the worker
        has imported the backend (its "ready" line)."""
        self.log.seek(0, os.SEEK_END)
        start = self.log.tell()
        if not self.ready:
            line = self._line(STARTUP_TIMEOUT)
            if not isinstance(line, bytes):
                self.stop()
                return "crash", f"the worker did not start ({line or 'it died'})"
            self.ready = True
        try:
            self.proc.stdin.write((name + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return "crash", self._death(start)
        line = self._line(timeout)
        if line == "timeout":
            return "timeout", f"no result in {timeout:.0f} s"
        if line is None:
            return "crash", self._death(start)
        self.served += 1
        return json.loads(line)

    def _death(self, start: int) -> str:
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.stop()
            code = None
        self.log.flush()
        self.log.seek(start)
        tail = [ln.strip() for ln in self.log.read().decode(errors="replace").splitlines() if ln.strip()]
        said = [ln for ln in tail if "TT_FATAL" in ln or "TT_THROW" in ln or "Error" in ln or "error" in ln]
        how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exit code {code}")
        return f"{how}: {(said or tail or [''])[-1][:300]}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        if not self.log.closed:
            self.log.close()
            try:
                os.unlink(self.log.name)
            except FileNotFoundError:
                pass


def _commit() -> str:
    """The commit measured (ZOO_COMMIT when the sweep runs from an exported copy of the sources)."""
    if os.environ.get("ZOO_COMMIT"):
        return os.environ["ZOO_COMMIT"]
    try:
        root = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def sweep(names, path: str | None = None, timeout: float = 180.0, redo: bool = False, recycle: int = 20,
          nice: int = 0, source: str = "transformers", log=None, redo_classes=(), bfloat16_cpu: bool = False,
          compiled: bool = False) -> dict:
    """Run `names` through a worker subprocess, one after another; a crash or a timeout is that entry's
    result and the worker restarts. With `path`, results already there are kept (resume) and the JSON is
    rewritten after every entry (`redo_classes`: those of these classes measured at another commit are
    measured again). The worker is also restarted every `recycle` entries (0: never). bfloat16_cpu: the
    CPU in bfloat16 instead of the device (run_one); compiled: each model compiled too (run_one)."""
    import torch as _torch
    data = load(path)
    results = data.setdefault("results", {})
    meta = data.setdefault("meta", {})
    commit = _commit()
    meta.update(source=source, timeout_s=timeout, recycle=recycle, shrink=SHRINK,
                reference="the CPU in bfloat16" if bfloat16_cpu else "ttnn:0",
                compiled='torch.compile(backend="ttnn")' if compiled else None,
                inputs=f"({BATCH}, {SEQ}) ids, row 2's last {MASKED} masked", torch=_torch.__version__)
    try:
        import transformers
        meta["transformers"] = transformers.__version__
        import torchvision
        meta["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    todo = [n for n in names if redo or n not in results
            or results[n].get("class_") in redo_classes and results[n].get("commit") != commit]
    meta["entries"] = max(meta.get("entries", 0), len(names))  # (an --only subset keeps the whole list's size)
    worker = None
    try:
        for i, name in enumerate(todo):
            if worker is None or (recycle and worker.served >= recycle):
                if worker is not None:
                    worker.stop()
                worker = Worker(nice, bfloat16_cpu, compiled)
            answer = worker.ask(name, timeout)
            if isinstance(answer, tuple):
                kind, detail = answer
                r = {"name": name, "status": kind, "error": detail}
                worker.stop()
                worker = None
            else:
                r = answer
            r["commit"] = commit
            r["class_"] = classify(r)
            results[name] = r
            if log:
                log(f"[{i + 1}/{len(todo)}] {name}: {r['class_']}"
                    f"{' pearson %.5f' % r['pearson'] if r.get('pearson') is not None else ''}"
                    f"{' fallbacks ' + ','.join(r['fallbacks']) if r.get('fallbacks') else ''}"
                    f"{' -- ' + r['error'][:160] if r.get('error') else ''}")
            if path:
                save(data, path)
    finally:
        if worker is not None:
            worker.stop()
    return data


def worker_main(bfloat16_cpu: bool = False, compiled: bool = False) -> int:
    """The worker loop: entry names on stdin, JSON results on the original stdout (fd 1 then points to
    stderr, so that what models print cannot break the protocol)."""
    import warnings
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    warnings.simplefilter("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import ttnn_eager  # noqa: F401  (the backend)
    torch.ones(1, device="ttnn:0").cpu()  # the device opened before the first entry's clock starts
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        r = run_one(name, bfloat16_cpu=bfloat16_cpu, compiled=compiled)
        out.write(json.dumps(r, default=str) + "\n")
        out.flush()
    return 0
