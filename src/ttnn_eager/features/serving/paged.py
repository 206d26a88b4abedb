"""transformers' paged KV cache on TT-NN's paged layout, and its decode step on TT-NN's paged ops.

transformers keeps one flat byte buffer for the whole cache, `[L0 K | L0 V | L1 K | L1 V]` a block, viewed
per layer (cache.py, FullAttentionCacheAllocator): a key/value write is `index_copy_` into a view of it and
a read `index_select`. TT-NN tensors have no strides, so on the device every such view is a tensor of its own
and each write goes back to the byte buffer through the chain of views: O(cache) device work a token and
layer (docs/serving.md). TT-NN's paged ops instead take one cache a layer, `[blocks, kv heads, block, d]`,
and a page table `[users, blocks a user]` of block numbers -- the layout of tt-metal's tt_transformers.

So for a ttnn model (full-attention layers), each layer's keys and values live in caches of TT-NN's layout
(`register_cache_tensor`, patched), indexed by transformers' own block numbers: its block table, prefix
sharing and scheduling are unchanged, and a block number is a page number (`block_physical_stride` is one
page). transformers' byte buffer is still allocated (its sizing, memory.py, prices the new caches in) but
no longer read or written.

    decode (every request of the batch at one new token, block table "fast path": transformers enables it
        for flash attention on CUDA/XPU only; here for ttnn when TT-NN's paged ops take the cache --
        `_fast_path_fits`) -> the attention function (`attention`, wrapping transformers' sdpa and
        paged|eager for ttnn tensors) calls ttnn_eager.paged_update_cache (keys, values) and
        ttnn_eager.paged_attention_decode (lowerings/fused.py: ttnn.experimental.paged_update_cache,
        ttnn.transformer.paged_scaled_dot_product_attention_decode)
    prefill and mixed batches (transformers' index path, `update`): the new keys and values `index_copy_`d
        into rows of the layer's cache seen as [blocks * kv heads * block, d], and the request's rows read
        back with `index_select` -- ordinary lowerings (one ttnn.scatter, one gather-like read), on the layer's
        own cache instead of the shared byte buffer

The page table and positions a decode step needs are made once a forward, not once a layer (`_once`).
CPU offloading (`cpu_offload_space`) and sliding-window layers keep transformers' own layout.
"""
from __future__ import annotations

import contextvars
import math
import sys

import torch

from . import imports

CACHE_MODULE = "transformers.generation.continuous_batching.cache"
INIT_MODULE = "transformers.generation.continuous_batching.initialization"
API_MODULE = "transformers.generation.continuous_batching.continuous_api"

_device: contextvars.ContextVar = contextvars.ContextVar("ttnn_paged_device", default=None)


def _once(tag, source: torch.Tensor, make):
    """make() once per source tensor (and its version): the page table, positions and rows of one forward are
    the same for every layer (transformers hands every layer the same tensors, made anew for each batch). Kept
    on the source tensor, so it dies with it. Under Dynamo, make() itself: the compile passes share what the
    layers of one graph compute alike (`duplicates`)."""
    if torch.compiler.is_compiling():
        return make()
    kept = getattr(source, "_ttnn_paged", None)
    if kept is None:
        kept = source._ttnn_paged = {}
    if tag not in kept or kept[tag][0] != source._version:
        kept[tag] = (source._version, make())
    return kept[tag][1]


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.ttnn.current_device()


def _is_ttnn(device) -> bool:
    return device is not None and torch.device(device).type == "ttnn"


# ----------------------------------------------------------------------------------------------- the layout
def _patched_register(original):
    def register_cache_tensor(self, bytes_per_sector, non_trash_bytes, cache_tensor, pool):
        if not (_is_ttnn(cache_tensor.device) and _device.get() is not None):
            return original(self, bytes_per_sector, non_trash_bytes, cache_tensor, pool)
        self.bytes_per_sector = bytes_per_sector
        self.block_physical_stride = self.tokens_per_page  # a block is one page of each layer's own cache
        self._after_cache_tensor_init(non_trash_bytes, bytes_per_sector, cache_tensor, pool)
        blocks = (non_trash_bytes + 2 * bytes_per_sector) // self.bytes_per_block  # (the two trash sectors too)
        shape = (blocks, self.num_key_value_heads, self.tokens_per_page, self.head_dim)
        self._kv_page_views = {layer: tuple(torch.zeros(shape, dtype=self.cache_dtype, device=cache_tensor.device)
                                            for _ in range(2)) for layer in self.layer_indices}
        self._kv_token_views = {}
        self._copy_view = None  # (transformers' CPU offloading reads it: not with this layout)
        self.ttnn_paged = True
    register_cache_tensor.__wrapped__ = original
    return register_cache_tensor


def _patched_copy_blocks(original):
    def copy_blocks(self, source_block_ids, dest_block_ids):
        if not getattr(self, "ttnn_paged", False):
            return original(self, source_block_ids, dest_block_ids)
        device = next(iter(self._kv_page_views.values()))[0].device
        src, dst = (torch.tensor(ids, dtype=torch.long, device=device) for ids in (source_block_ids, dest_block_ids))
        for caches in self._kv_page_views.values():
            for c in caches:
                c.index_copy_(0, dst, c.index_select(0, src))
    copy_blocks.__wrapped__ = original
    return copy_blocks


def _rows(allocator, index: torch.Tensor) -> torch.Tensor:
    """Token indices of the layer caches (block * block size + offset: what transformers computes with
    block_physical_stride one page) as rows of a cache seen as [blocks * kv heads * block, d], head by head:
    [kv heads * tokens]."""
    page, kv = allocator.tokens_per_page, allocator.num_key_value_heads
    first = index + torch.div(index, page, rounding_mode="floor") * ((kv - 1) * page)
    heads = torch.arange(kv, dtype=index.dtype, device=index.device) * page
    return (heads.unsqueeze(1) + first.unsqueeze(0)).reshape(-1)


@torch.compiler.disable  # (a graph break under Dynamo, as before the decode branch was traced: written in the
# graph, a row write into a view of the whole cache would be functionalized into a copy of the cache a layer)
def _index_update(allocator, k_cache, v_cache, key_states, value_states, read_index, write_index):
    """The index path: [1, kv heads, tokens, d] written at the rows of the write index, read at the read index's."""
    d = allocator.head_dim
    written = _once(("write", allocator.index), write_index, lambda: _rows(allocator, write_index))
    for cache, new in ((k_cache, key_states), (v_cache, value_states)):
        cache.view(-1, d).index_copy_(0, written, new.reshape(-1, d))
    if read_index.numel() == 0:
        return key_states, value_states
    read = _once(("read", allocator.index), read_index, lambda: _rows(allocator, read_index))
    kv = allocator.num_key_value_heads
    return tuple(c.view(-1, d).index_select(0, read).view(1, kv, -1, d) for c in (k_cache, v_cache))


def _patched_update(original):
    def update(self, key_states, value_states, layer_idx, kwargs):
        allocator = self.layer_to_allocator[layer_idx]
        if not getattr(allocator, "ttnn_paged", False):
            return original(self, key_states, value_states, layer_idx, kwargs)
        kwargs["cu_seq_lens_k"] = kwargs["cu_seq_lens_k"][allocator.layer_type].to(torch.int32)
        kwargs["max_length_k"] = kwargs["max_length_k"][allocator.layer_type]
        k_cache, v_cache = allocator._kv_page_views[layer_idx]
        block_table = kwargs.get("block_table")
        if block_table is not None:  # decode: the attention function writes and reads the caches (paged ops)
            kwargs["block_table"] = _once(("table", allocator.index), block_table, lambda: block_table[allocator.index])
            kwargs["k_cache"], kwargs["v_cache"] = k_cache, v_cache
            return key_states, value_states
        return _index_update(allocator, k_cache, v_cache, key_states, value_states,
                             kwargs["read_index"][allocator.index], kwargs["write_index"][allocator.index])
    update.__wrapped__ = original
    # traced by Dynamo (this package's files are skipped: features/compile), so that a compiled decode step's
    # layer stays one graph through the cache update (its decode branch only sets the paged ops' arguments)
    traced = torch._dynamo.dont_skip_tracing(update)
    traced.__wrapped__ = original
    return traced


def _patched_init(original):
    def __init__(self, config, continuous_batching_config, device, *args, **kwargs):
        on_ttnn = _is_ttnn(device) and not continuous_batching_config.cpu_offload_space
        token = _device.set(torch.device(device) if on_ttnn else None)
        try:
            original(self, config, continuous_batching_config, device, *args, **kwargs)
        finally:
            _device.reset(token)
        layers = [a for a in self.cache_allocators.values() if getattr(a, "ttnn_paged", False)]
        if layers and self.max_blocks_per_request:
            # TT-NN's paged cache update takes a page table no wider than the cache has blocks
            blocks = next(iter(layers[0]._kv_page_views.values()))[0].shape[0]
            self.max_blocks_per_request = min(self.max_blocks_per_request, blocks)
            self.max_decode_fast_path_length = self._infer_max_decode_fast_path_length()
    __init__.__wrapped__ = original
    return __init__


# ----------------------------------------------------------------------------------------------- the decode path
def _fast_path_fits(config, cb_config, device) -> bool:
    """Whether decode steps can run on TT-NN's paged ops for this model: full-attention layers only, block
    and head size multiples of 32, a cache stored bfloat16 (ttnn's paged decode attention takes no float32),
    and no CPU offloading."""
    from transformers.generation.continuous_batching.cache import group_layers_by_attn_type
    from transformers.generation.continuous_batching.utils import find_head_dim
    from ...core import layout
    from ...device import api
    if cb_config.cpu_offload_space or set(group_layers_by_attn_type(config)) != {"full_attention"}:
        return False
    dtype = getattr(config, "dtype", None) or torch.float32
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    return (cb_config.page_size % 32 == 0 and find_head_dim(config) % 32 == 0
            and layout.storage_for(dtype)[0] == api.BFLOAT16)


def _patched_ensure(original):
    def ensure_decode_fast_path_is_available(config, cb_config, user_requested):
        wanted = cb_config.max_blocks_per_request
        original(config, cb_config, user_requested)
        device = _device.get()
        if wanted and not cb_config.max_blocks_per_request and device is not None \
                and _fast_path_fits(config, cb_config, device):
            from ...device import api
            cb_config.max_blocks_per_request = wanted
            # one request a core: the paged cache update shards its input so (lowerings/fused.py)
            cb_config.max_requests_per_batch = min(cb_config.max_requests_per_batch, api.core_count(_index(device)))
    ensure_decode_fast_path_is_available.__wrapped__ = original
    return ensure_decode_fast_path_is_available


def _patched_resolve(original):
    def resolve_continuous_batching_config(config, cb_config, workload_hints, has_logit_processors, device=None):
        token = _device.set(torch.device(device) if _is_ttnn(device) else None)
        try:
            return original(config, cb_config, workload_hints, has_logit_processors, device)
        finally:
            _device.reset(token)
    resolve_continuous_batching_config.__wrapped__ = original
    return resolve_continuous_batching_config


def _paged_decode(query, key, value, k_cache, v_cache, cu, block_table, scale):
    """A decode step's cache update and attention on TT-NN's paged ops: [1, tokens, heads, d]. Under Dynamo the
    update is the functional op written back with copy_ (functionalization takes no custom op that returns its
    argument); the compile pass `paged_caches_in_place` makes it the in-place update again."""
    positions = _once("positions", cu, lambda: cu[1:] - cu[:-1] - 1)  # each request's new token
    ops = torch.ops.ttnn_eager
    for cache, new in ((k_cache, key), (v_cache, value)):
        if torch.compiler.is_compiling():
            cache.copy_(ops.paged_update_cache_functional(cache, new.transpose(1, 2), positions, block_table))
        else:
            ops.paged_update_cache(cache, new.transpose(1, 2), positions, block_table)
    return ops.paged_attention_decode(query.transpose(1, 2), k_cache, v_cache, positions, block_table, scale)


def attention(original):
    """transformers' attention function `original` (sdpa, paged|eager), with the decode step of a block table
    on a ttnn device on TT-NN's paged ops."""
    def forward(module, query, key, value, attention_mask, *args, **kwargs):
        k_cache, block_table = kwargs.get("k_cache"), kwargs.get("block_table")
        if block_table is None or k_cache is None or query.device.type != "ttnn":
            return original(module, query, key, value, attention_mask, *args, **kwargs)
        scaling = kwargs.get("scaling", args[1] if len(args) > 1 else None)
        scale = scaling if scaling is not None else 1.0 / math.sqrt(query.shape[-1])
        out = _paged_decode(query, key, value, k_cache, kwargs["v_cache"], kwargs["cu_seq_lens_k"], block_table,
                            float(scale))
        return out, None  # [1, tokens, heads, d], as transformers' attention functions return it
    forward.__wrapped__ = original
    # This package's files are skipped by Dynamo (features/compile: skip_in_dynamo), but this function stands in
    # for transformers' own sdpa in every model: traced through, so a compiled model's attention stays in its
    # graph (Dynamo is imported already: transformers' modeling_utils imports it)
    traced = torch._dynamo.dont_skip_tracing(forward)
    traced.__wrapped__ = original
    return traced


def patch_cache(module) -> None:
    """Wires the paged layout into transformers' cache module (once)."""
    if getattr(module, "_ttnn_paged", False):
        return
    from transformers.generation.continuous_batching.cache_allocators.full_attention import FullAttentionCacheAllocator
    from transformers.modeling_utils import AttentionInterface
    cls = FullAttentionCacheAllocator
    cls.register_cache_tensor = _patched_register(cls.register_cache_tensor)
    cls.copy_blocks = _patched_copy_blocks(cls.copy_blocks)
    module.PagedAttentionCache.update = _patched_update(module.PagedAttentionCache.update)
    module.PagedAttentionCache.__init__ = _patched_init(module.PagedAttentionCache.__init__)
    for name in ("sdpa", "paged|eager"):
        AttentionInterface.register(name, attention(AttentionInterface._global_mapping[name]))
    module._ttnn_paged = True


def patch_initialization(module) -> None:
    """The decode fast path kept for ttnn models that fit (`_patched_ensure`), knowing the device."""
    if getattr(module, "_ttnn_paged", False):
        return
    module.ensure_decode_fast_path_is_available = _patched_ensure(module.ensure_decode_fast_path_is_available)
    module.resolve_continuous_batching_config = _patched_resolve(module.resolve_continuous_batching_config)
    module._ttnn_paged = True


def patch_api(module) -> None:
    """continuous_api took initialization's resolve function by name when it was imported."""
    init = sys.modules[INIT_MODULE]
    patch_initialization(init)
    module.resolve_continuous_batching_config = init.resolve_continuous_batching_config


def install() -> None:
    imports.after_import(INIT_MODULE, patch_initialization)
    imports.after_import(CACHE_MODULE, patch_cache)
    imports.after_import(API_MODULE, patch_api)
