"""Bad input and faults in `ttnn-eager serve`: small hooks on transformers' own serving objects (a `Serve`, the
`CBGenerateManager` it makes, that manager's `ContinuousBatchingManager`), none of transformers rewritten.

    install(serve)   hooks every continuous-batching manager `serve` makes (GenerationState.get_manager):

      admission      a request whose prompt plus max_tokens exceeds the model's context
                     (config.max_position_embeddings) or the paged cache's capacity (blocks x block size) is
                     refused with HTTP 400 naming the numbers, before it reaches the batching worker.
                     transformers admits it, and its worker then stops with "No requests can be scheduled and no
                     requests can be offloaded": every later request 503, a dead server.
      isolation      a forward that raises no longer stops the worker (transformers: every request fails and the
                     server answers 503 from then on). The requests of the failed batch are put back in the
                     queue as transformers' own offloading does (prompt plus the tokens generated so far,
                     create_equivalent_initial_request), and until each of them has passed a forward the
                     scheduler takes one request per batch; a request whose forward fails alone fails alone
                     (HTTP 500 with the error as its detail, or an error event in its stream) and frees its
                     blocks. Every other request is answered.

      forgetting     a stream cancelled by its client drops the request's result handler (transformers keeps it)

What transformers already does and these hooks keep: a client that disconnects mid-stream cancels its request
(the SSE generator's CancelledError -> CBStreamer.cancel -> the scheduler frees its blocks); a full cache makes
requests wait (the scheduler's safety margin holds back new prompts, a starving request is offloaded to the host
and restored). Measured in tests/test_serving_faults.py and docs/serving.md ("Faults").

Imports: transformers and fastapi inside functions only (the serving extra).
"""
from __future__ import annotations

import time

RETRIES = 2  # times a request is put back after a failed forward before it fails (isolation)


class ForwardFailed(Exception):
    """A model forward of the batching worker raised `error` (isolation above)."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def install(serve) -> None:
    """Hooks the managers `serve` (a transformers.cli.serve.Serve) will make: admission and isolation above."""
    state = serve._generation_state
    get_manager = state.get_manager

    def hooked(model_id, use_cb=False):
        manager = get_manager(model_id, use_cb=use_cb)
        if use_cb and not getattr(manager, "_ttnn_eager_hooked", False):
            _hook_manager(manager)
        return manager

    state.get_manager = hooked


def _hook_manager(manager) -> None:
    init_cb, streaming, non_streaming = manager.init_cb, manager.generate_streaming, manager.generate_non_streaming

    def hooked_init_cb(model, gen_config):
        fresh = manager._cb is None
        init_cb(model, gen_config)
        if fresh:
            isolate_failures(manager._cb)

    def hooked_streaming(model, processor, inputs, gen_config, request_id, *args, **kwargs):
        admit(manager._cb, model, inputs, gen_config)
        queue, streamer = streaming(model, processor, inputs, gen_config, request_id, *args, **kwargs)
        forget_when_cancelled(manager._cb, streamer)
        return queue, streamer

    async def hooked_non_streaming(model, processor, inputs, gen_config, request_id, *args, **kwargs):
        from fastapi import HTTPException
        from transformers.cli.serving.utils import CBWorkerDeadError
        admit(manager._cb, model, inputs, gen_config)
        try:
            return await non_streaming(model, processor, inputs, gen_config, request_id, *args, **kwargs)
        except CBWorkerDeadError:
            raise  # transformers' 503
        except RuntimeError as e:  # the request's own failure: a 500 that says why (Starlette's says nothing)
            raise HTTPException(status_code=500, detail=str(e)) from e

    manager.init_cb, manager.generate_streaming = hooked_init_cb, hooked_streaming
    manager.generate_non_streaming = hooked_non_streaming
    manager._ttnn_eager_hooked = True


def forget_when_cancelled(cb, streamer) -> None:
    """A cancelled stream (its client gone) drops its result handler too: transformers removes a handler when its
    request finishes, and a cancelled request never does (measured: one handler left per disconnect)."""
    cancel = streamer.cancel

    def cancel_and_forget():
        cancel()
        with cb.output_router._lock:
            cb.output_router.result_handlers.pop(streamer._request_id, None)

    streamer.cancel = cancel_and_forget


def capacity(cb, timeout: float = 120.0) -> int | None:
    """Tokens the paged cache of a started ContinuousBatchingManager holds (None if its worker died first). The
    cache is made on the worker thread at start: waits for it."""
    end = time.monotonic() + timeout
    while cb.batch_processor is None:
        if cb.background_thread_status.fatal_error is not None or time.monotonic() > end:
            return None
        time.sleep(0.01)
    return cb.batch_processor.cache.num_blocks * cb.continuous_batching_config.page_size


def admit(cb, model, inputs, gen_config) -> None:
    """HTTP 400 for a request that can never be served: prompt + max_new_tokens beyond the model's context or
    beyond the whole paged cache."""
    from fastapi import HTTPException
    ids = inputs["input_ids"]
    prompt = len(ids) if isinstance(ids, list) else ids.shape[-1]
    new = gen_config.max_new_tokens or 0
    context = getattr(model.config, "max_position_embeddings", None)
    if context is not None and prompt + new > context:
        raise HTTPException(status_code=400, detail=(
            f"the prompt ({prompt} tokens) plus max_tokens ({new}) exceeds the model's context of {context} tokens"))
    tokens = capacity(cb) if cb is not None else None
    if tokens is not None and prompt + new > tokens:
        raise HTTPException(status_code=400, detail=(
            f"the prompt ({prompt} tokens) plus max_tokens ({new}) exceeds the paged cache's capacity of {tokens} "
            f"tokens"))


def isolate_failures(cb) -> None:
    """Hooks a ContinuousBatchingManager (before its first batch) so that a failing forward fails only the
    request(s) it can be pinned on and the worker keeps serving (isolation above)."""
    step, body = cb._generation_step, cb._generation_loop_body
    suspects: dict[str, int] = {}  # request id -> times put back
    saved = {}

    def hooked_step():
        try:
            step()
        except Exception as e:  # the forward, logits processing and sampling of one batch
            raise ForwardFailed(e) from e

    def hooked_body(bp, bootstrapping):
        if bp.use_async_batching:  # the batch in flight is not the one that failed: not handled here
            return body(bp, bootstrapping)
        steps = cb.current_batch
        try:
            more = body(bp, bootstrapping)
        except ForwardFailed as failed:
            _requeue_or_fail(bp, failed.error, suspects, saved)
            return True
        if suspects and cb.current_batch != steps:  # a forward passed: its requests are cleared
            for f in bp.inputs_and_outputs.requests_in_batch:
                suspects.pop(f.state.request_id, None)
            if not suspects:
                bp.scheduler.max_requests_per_batch = saved.pop("max_requests_per_batch")
        return more

    cb._generation_step, cb._generation_loop_body = hooked_step, hooked_body


def _requeue_or_fail(bp, error: Exception, suspects: dict[str, int], saved: dict) -> None:
    from transformers.utils import logging
    batch = [f.state for f in bp.inputs_and_outputs.requests_in_batch]
    scheduler = bp.scheduler
    alone = len(batch) == 1
    logging.get_logger(__name__).warning(
        f"a forward of {len(batch)} request(s) failed ({type(error).__name__}: {error}): "
        + ("that request fails" if alone else "retrying each alone"))
    for state in batch:
        rid = state.request_id
        if alone or suspects.get(rid, 0) >= RETRIES:
            bp._handle_request_error(error, state)  # delivers the error: HTTP 500 / an error event in the stream
            scheduler.finish_request(rid)  # frees its blocks
            suspects.pop(rid, None)
        else:
            scheduler.finish_request(rid)
            scheduler.add_waiting_request(state.create_equivalent_initial_request())
            suspects[rid] = suspects.get(rid, 0) + 1
    if suspects and "max_requests_per_batch" not in saved:
        saved["max_requests_per_batch"] = scheduler.max_requests_per_batch
        scheduler.max_requests_per_batch = 1
    elif not suspects and "max_requests_per_batch" in saved:
        scheduler.max_requests_per_batch = saved.pop("max_requests_per_batch")
