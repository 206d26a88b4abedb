"""`ttnn-eager serve`: transformers' own OpenAI-compatible server with its model on ttnn:0
(features/serving/server.py; docs/serving.md).

    tiny_model(path)   the default model, made here (nothing from a hub): the tiny seeded Llama of
                       tools/models.py and a byte-level tokenizer (the 256 bytes plus <unk>, <s>, </s>, and a
                       chat template), saved as a local model folder
    main(args)         serve a folder (or the tiny model) until Ctrl-C / SIGTERM, then free the device
"""
from __future__ import annotations

import os
import tempfile

CHAT_TEMPLATE = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<s>assistant: {% endif %}")


def tokenizer():
    """A byte-level tokenizer: ids 0-2 <unk>, <s>, </s>; ids 3-258 the bytes (GPT-2's byte alphabet)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_model(path: str | None = None, seed: int = 0) -> str:
    """The tiny seeded Llama (tools/models.py, vocabulary 500) and the byte tokenizer in a model folder."""
    from . import models
    path = path or tempfile.mkdtemp(prefix="ttnn-eager-tiny-llama-")
    model, _ = models.build("llama", seed=seed)
    model.config.pad_token_id = 0
    model.generation_config.pad_token_id = 0
    model.save_pretrained(path)
    tokenizer().save_pretrained(path)
    return path


MOCK_MEMORY_PERCENT = 0.03  # the mock's shadow values live in host memory, and each token rewrites the cache


def memory_percent(device: str, asked: float | None) -> float | None:
    """The paged cache's share of the free device memory: as asked, else transformers' own default (0.9) on a
    card or the CPU, MOCK_MEMORY_PERCENT on the mock device."""
    if asked is not None or not device.startswith("ttnn"):
        return asked
    from ..device import runtime
    return MOCK_MEMORY_PERCENT if runtime.get().mock else None


def main(args) -> int:
    """Serves until Ctrl-C or SIGTERM, then stops the worker and the server, frees the model and its cache, and
    says how much device memory is still allocated (the device closes at exit: device/api.py)."""
    import gc
    import signal
    import threading
    from ..features.serving.server import Server
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # set a flag, raise nothing (Server.run_forever says why)
        signal.signal(sig, lambda signum, frame: stop.set())
    path = args.model or tiny_model()
    server = Server(path, device=args.device, host=args.host, port=args.port,
                    max_memory_percent=memory_percent(args.device, args.max_memory_percent),
                    max_batch_tokens=args.max_batch_tokens, block_size=args.block_size, num_blocks=args.num_blocks,
                    log_level=args.log_level)
    try:
        server.wait()
        print(f"serving {path if args.model else 'the tiny seeded Llama'} on {args.device} at {server.url}/v1 "
              f"(OpenAI API; Ctrl-C or SIGTERM stops)", flush=True)
        server.run_forever(stop)
    finally:
        server.stop()
        del server
        gc.collect()
    if args.device.startswith("ttnn"):
        import torch
        print(f"stopped; device memory still allocated: {torch.ttnn.memory_allocated(args.device)} bytes", flush=True)
    else:
        print("stopped", flush=True)
    return 0


def add_arguments(p) -> None:
    p.add_argument("--model", default=None, help="a local model folder (default: the tiny seeded Llama with a "
                   "byte tokenizer, made here)")
    p.add_argument("--device", default="ttnn:0", help="ttnn:0 or cpu")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-memory-percent", type=float, default=None,
                   help="the share of the device's free memory the paged cache may take (default: transformers' 0.9; "
                        f"{MOCK_MEMORY_PERCENT} on the mock device, whose shadow values live in host memory)")
    p.add_argument("--max-batch-tokens", type=int, default=256, help="tokens in one forward (transformers: 8192)")
    p.add_argument("--block-size", type=int, default=32, help="tokens in a cache block (transformers: 256)")
    p.add_argument("--num-blocks", type=int, default=None, help="cache blocks (default: sized from the memory share)")
    p.add_argument("--log-level", default="warning")


