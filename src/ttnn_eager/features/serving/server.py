"""`ttnn-eager serve`: transformers' own server (`transformers serve`: a FastAPI app with OpenAI's
/v1/completions, /v1/chat/completions and /v1/responses, streaming by server-sent events) with its model on a
ttnn device and continuous batching on (ContinuousBatchingManager, its paged cache on the device: memory.py
sizes it).

    Server(model, device, host, port, ...)   transformers.cli.serve.Serve with the model preloaded on
                                             `device`, serving on a background thread, with faults.py's
                                             hooks (bad input, failing forwards); .stop() ends it (the
                                             worker first) and frees the model and its cache

The model is loaded by transformers' ModelManager from a local folder (`from_pretrained(path,
device_map=device)`), as `transformers serve PATH --device ttnn:0 --continuous-batching` would, with
transformers' threaded weight loading off (HF_DEACTIVATE_ASYNC_LOAD=1): its 4 loader threads upload weights at
once, and the backend's ops are not thread-safe (seen: a weight's upload lost, then a TT_FATAL in ttnn.linear
"Operands to matmul need to be on the same device", 2 runs in 3). Nothing here
is ttnn-specific beyond the device string: the app, the request handling and the batching are
transformers'. Needs the `serving` extra (fastapi, uvicorn, openai: requirements/lock.txt).
"""
from __future__ import annotations

import socket
import threading
import time
import urllib.request

from . import faults


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Server:
    """transformers serve on `device`, started on a background thread (uvicorn); `url` its base address."""

    def __init__(self, model: str, device: str = "ttnn:0", host: str = "127.0.0.1", port: int = 0,
                 continuous_batching: bool = True, max_memory_percent: float | None = None,
                 max_batch_tokens: int | None = None, block_size: int | None = None, num_blocks: int | None = None,
                 log_level: str = "warning", seed: int | None = 0):
        import os
        from transformers.cli.serve import Serve
        if device.startswith("ttnn"):  # from_pretrained uploads weights from 4 threads at once; ops on a ttnn
            os.environ["HF_DEACTIVATE_ASYNC_LOAD"] = "1"  # device are not thread-safe (seen: a TT_FATAL in linear)
        self.host, self.port = host, port or free_port(host)
        self.model, self.device = model, device
        self.serve = Serve(force_model=model, device=device, dtype="float32", continuous_batching=continuous_batching,
                           cb_max_memory_percent=max_memory_percent, cb_max_batch_tokens=max_batch_tokens,
                           cb_block_size=block_size, cb_num_blocks=num_blocks, host=self.host, port=self.port,
                           log_level=log_level, default_seed=seed, non_blocking=True)
        faults.install(self.serve)  # before the first request: no manager exists yet
        self.url = f"http://{self.host}:{self.port}"

    def wait(self, timeout: float = 120.0) -> "Server":
        """Returns once /health answers (the model is loaded at start-up: force_model)."""
        end = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                if time.monotonic() > end:
                    raise TimeoutError(f"transformers serve did not answer at {self.url} in {timeout} s")
                time.sleep(0.2)

    def stop(self, timeout: float = 120.0) -> None:
        """Stops the batching worker (a hard stop: requests still pending fail; the forward under way finishes,
        waited for), then uvicorn, then frees the model and its cache. transformers' own kill_server waits 2 s
        for the worker, which on the mock can be mid-forward: the device must not close under it."""
        manager = self.serve._generation_state._cb_manager
        cb = manager._cb if manager is not None else None
        if cb is not None and cb._generation_thread is not None:
            cb.stop(block=True, timeout=timeout, hard_stop=True)
            manager._cb = None  # stopped: kill_server need not stop it again
        self.serve.kill_server()
        if self.serve._thread.is_alive():
            self.serve._thread.join(timeout)
        self.serve.reset_loaded_models()

    def run_forever(self, stop: "threading.Event") -> None:
        """Blocks until `stop` is set (tools/serve.py sets it on SIGTERM and Ctrl-C) or the server thread ends.
        uvicorn installs its signal handlers on the main thread only, and this server runs on another. The
        handlers must not raise: a KeyboardInterrupt inside Thread.join marks the still running uvicorn thread as
        stopped (CPython's bpo-45274 clean-up), and kill_server then leaves it serving -- measured: a process that
        never exits."""
        while self.serve._thread.is_alive() and not stop.wait(0.5):
            pass
