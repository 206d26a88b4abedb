"""Load on `ttnn-eager serve` (transformers serve, continuous batching) against the same server on the CPU:
N requests, C at a time, prompt and output lengths mixed, a quarter streamed, with the openai client, on
127.0.0.1 only. Checks 0 lost, 0 errors and every greedy completion equal to the CPU server's; prints
tokens/s, time to first token and per-token latency (p50/p99), and the ratio against sequential
`generate()` calls of the same requests on the same device. Host time on the mock device (the device's
share is shadow execution on the host, docs/serving.md).

    .venv/bin/python benchmarks/serve.py [--requests 64] [--concurrency 16] [--max-memory-percent 0.03] [--json out.json]

Bounded: every request has a 600 s client timeout and the run stops at the first lost request.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import tempfile
from time import perf_counter

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")

import torch  # noqa: E402

import ttnn_eager  # noqa: E402,F401
from ttnn_eager.features.serving.server import Server  # noqa: E402
from ttnn_eager.tools.serve import tiny_model  # noqa: E402


def requests(n: int) -> list:
    """(prompt text, max new tokens, streamed) for n requests: lengths mixed, every 4th streamed."""
    words = "the quick brown fox jumps over a lazy dog while tiles of thirty two move through the mesh".split()
    out = []
    for i in range(n):
        prompt = " ".join(words[(i * 3) % len(words):][: 2 + (i * 5) % 11]) or "hello"
        out.append((prompt, 2 + (i * 7) % 9, i % 4 == 3))
    return out


def ask(client, model, prompt, n, stream):
    """(text, seconds to the first token, seconds in all, tokens)."""
    start = perf_counter()
    if not stream:
        r = client.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0)
        took = perf_counter() - start
        return r.choices[0].text, took, took, r.usage.completion_tokens
    first, parts, tokens = None, [], 0
    for chunk in client.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0, stream=True):
        if chunk.choices and chunk.choices[0].text is not None:
            first = first or perf_counter() - start
            parts.append(chunk.choices[0].text)
            tokens += 1
    return "".join(parts), first or perf_counter() - start, perf_counter() - start, tokens


def load(server, model, reqs, concurrency):
    import openai
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", timeout=600, max_retries=0)
    start = perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        futures = [pool.submit(ask, client, model, p, n, s) for p, n, s in reqs]
        results, errors = [], []
        for f in futures:
            try:
                results.append(f.result())
            except Exception as e:  # noqa: BLE001 (an error is a result of the benchmark)
                results.append(None)
                errors.append(repr(e)[:200])
    return results, errors, perf_counter() - start


def sequential_generate(path, device, reqs):
    """The same requests one after another through model.generate() (greedy), seconds."""
    import transformers
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device).eval()
    start = perf_counter()
    for prompt, n, _ in reqs:
        ids = tok(prompt, return_tensors="pt").input_ids.to(device)
        model.generate(ids, max_new_tokens=n, do_sample=False, pad_token_id=0)
    return perf_counter() - start


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-memory-percent", type=float, default=0.03)
    ap.add_argument("--json", default=None)
    ap.add_argument("--numerics", choices=["exact", "hardware"], default="exact",
                    help="exact: float32 storage and exact shadow arithmetic (the CPU's tokens are then expected); "
                         "hardware: the defaults (bfloat16 storage, the matrix engine's numerics)")
    args = ap.parse_args(argv)
    if args.numerics == "exact":
        ttnn_eager.configure(float32_storage="float32", shadow_numerics="exact")
    os.environ["HF_DEACTIVATE_ASYNC_LOAD"] = "1"
    path = tiny_model(tempfile.mkdtemp(prefix="serve-bench-"))
    reqs = requests(args.requests)
    rows = {}
    for device, fraction in (("cpu", 0.001), ("ttnn:0", args.max_memory_percent)):
        server = Server(path, device=device, max_memory_percent=fraction, max_batch_tokens=256, block_size=32).wait()
        try:
            rows[device] = load(server, path, reqs, args.concurrency)
        finally:
            server.stop()
    (cpu, _, _), (dev, errors, seconds) = rows["cpu"], rows["ttnn:0"]
    answered = [r for r in dev if r is not None]
    equal = sum(1 for a, b in zip(dev, cpu) if a is not None and b is not None and a[0] == b[0])
    tokens = sum(r[3] for r in answered)
    streamed = [r for r, (_, _, s) in zip(dev, reqs) if s and r is not None]  # first token seen apart
    ttft = [r[1] for r in streamed]
    per_token = [(r[2] - r[1]) / (r[3] - 1) for r in streamed if r[3] > 1]
    seq = sequential_generate(path, "ttnn:0", reqs)
    out = {"requests": len(reqs), "concurrency": args.concurrency, "streamed": sum(s for _, _, s in reqs),
           "lost": len(reqs) - len(answered) - len(errors), "errors": len(errors), "equal_to_cpu": equal,
           "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds,
           "ttft_p50": pct(ttft, 0.5), "ttft_p99": pct(ttft, 0.99),
           "per_token_p50": pct(per_token, 0.5), "per_token_p99": pct(per_token, 0.99),
           "numerics": args.numerics, "sequential_generate_s": seq, "speedup_vs_sequential": seq / seconds, "error_samples": errors[:3]}
    print("| requests | concurrency | streamed | lost | errors | equal to CPU | tokens | tokens/s | TTFT p50 / p99 (s, streamed) "
          "| per token p50 / p99 (s, streamed) | sequential generate() (s) | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {out['requests']} | {out['concurrency']} | {out['streamed']} | {out['lost']} | {out['errors']} | "
          f"{equal}/{len(reqs)} | {tokens} | {out['tokens_per_s']:.2f} | {out['ttft_p50']:.2f} / {out['ttft_p99']:.2f} | "
          f"{out['per_token_p50']:.2f} / {out['per_token_p99']:.2f} | {seq:.1f} | {out['speedup_vs_sequential']:.2f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if out["lost"] == 0 and out["errors"] == 0 and equal == len(reqs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
