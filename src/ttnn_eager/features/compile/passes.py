"""Fusion passes on aot_autograd's aten graphs: each a small pattern rewrite into a fused op of
lowerings/fused.py (torch.ops.ttnn_eager.*), matched only where the fused op computes exactly what the
pattern did (shapes read from the nodes' fake values) and no intermediate is used elsewhere.

    duplicates            an op computed again on the same inputs with the same arguments (no write, no random
                          numbers)                                          -> the first one (a decoder's layers each
                          unsqueeze the step's one cos and sin; transformers computes arange(1) + position twice)
    identities            x * 1, x / 1, x + 0, x - 0 of the result's dtype and shape (transformers' rotary
                          attention_scaling of 1.0, its mask's kv_arange + 0) -> x
    noop_views            view/reshape/expand to the shape it already has   -> removed
    arange_index          x[i0, i1, ...] of aranges each along its own result dimension, in order (transformers'
                          padding mask under tracing: mask[batch_arange, kv_arange]) -> a view of x
    true_ands             a & t of a t made from factory ops alone that is true everywhere (evaluated while
                          compiling; `kv_idx >= 0` of an arange)             -> a (or its expand)
    noop_resizes          an upsample to the size it has                    -> removed
    inverse_permutes      permute of a permute                              -> removed (they undo each other), or one
    cat_slices            cat of consecutive slices of one tensor           -> one slice, or the tensor
    cat_empties           cat with empty inputs (a DynamicCache's first keys and values) -> of the others, or the one
    padded_heads          attention at a head size d not of whole tiles (16, 48, 80 ...): q, k, v linears of one input
                          viewed into heads (q and k maybe through a rotary_embedding, which then rotates the padded
                          heads' first d columns), sdpa, heads merged and projected -> ttnn_eager.qkv_heads(head_width=
                          d rounded up to 32: the weights zero-padded head by head, once), sdpa of the padded heads
                          at scale 1/sqrt(d), ttnn_eager.concat_heads, ttnn_eager.heads_linear (the projection's
                          weight padded to match); a key or value also returned (a cache) is sliced back for that use
    attention_masks       sdpa of an expanded mask                          -> of the mask (sdpa broadcasts it);
                          of a mask made from factory ops alone that masks nothing -> of no mask
    qkv_heads             three linears of one input, each viewed into heads and transposed
                          ([b, s, h*d] -> [b, h, s, d])                    -> ttnn_eager.qkv_heads
    concat_heads          transpose(1, 2) of [b, h, s, d], contiguous, viewed to [b, s, h*d]
                                                                            -> ttnn_eager.concat_heads
    linear_activation     gelu/relu/silu of a linear                        -> ttnn_eager.linear_activation
    add_layer_norm        layer_norm of a sum of two tensors of one shape   -> ttnn_eager.add_layer_norm
    residual_bias         r + linear(x, w) of one row (a decode step's residual add after the attention output
                          and the MLP's down projection)                   -> ttnn_eager.linear_add: TT-NN's linear
                          adds r as its one-row bias (after add_layer_norm and rms_norm, which take their sums whole)
    rms_norm              w * (x * rsqrt(mean(x^2, -1, keepdim) + eps))    -> ttnn_eager.rms_norm
    view_chains           a view of a view                                  -> one view of the first input
                          (removed by noop_views when it gives the input's shape); transpose of a transpose
                          of the same two dimensions                        -> removed
    gelu_tanh             0.5 * y * (1 + tanh(sqrt(2/pi) * (y + 0.044715 * y^3))) (GPT-2's gelu_new)
                                                                            -> aten.gelu(approximate="tanh")
    matmul_bias           view back to [..., n] of addmm(b, view(x, [-1, k]), w) (GPT-2's Conv1D)
                                                                            -> ttnn_eager.matmul_bias
    matmul_bias_activation  gelu/relu/silu of a matmul_bias                 -> ttnn_eager.matmul_bias(activation=)
    split_qkv_heads       the three parts of split(y [b, s, 3*h*d], h*d, -1), each viewed into heads and
                          transposed ([b, s, h*d] -> [b, h, s, d])         -> ttnn_eager.split_qkv_heads
    grouped_attention     sdpa of key/value heads repeated to the query's (transformers' repeat_kv: unsqueeze,
                          expand, clone, view [b, kv*g, s, d])            -> sdpa(enable_gqa=True) of the heads
    rotary_embedding      x * cos + cat(-x[..., d/2:], x[..., :d/2]) * sin (Llama's apply_rotary_pos_emb on
                          heads [b, h, s, d])                              -> ttnn_eager.rotary_embedding
    decode_heads          three linears of one sequence of at most 32 tokens x [1, T, H] (continuous batching's
                          decode step: a token a user), each viewed into heads [1, T, heads, d]: q and k transposed
                          to [1, h, T, d], each used only by a rotary_embedding of cos, sin [1, 1, T, d] and then
                          only by transpose(1, 2) -- back in the paged ops' layout -- and v as its view (its two
                          transposes gone: view_chains) -> ttnn_eager.qkv_heads_decode, the rotary embeddings of its
                          q and k with cos, sin viewed [1, T, 1, d] (a position a token; one view each for every
                          layer): no permutes, as tt_transformers' decoder (nlp_create_qkv_heads_decode, rotary in
                          decode mode)
    cache_update          index_copy(cache, 2, arange(1) + p, x) of one new row x [b, h, 1, d] at a 0-d
                          integer position p (transformers' StaticCache update at its cumulative length)
                                                                            -> ttnn_eager.cache_update
    paged_caches_in_place copy_(cache, paged_update_cache_functional(cache, ...)) of a graph input read no more
                          after it (a traced continuous-batching decode step) -> paged_update_cache(cache, ...):
                          TT-NN's paged update into the cache's buffer (replays re-issue it: features/graphs.py)

A bert-large encoder layer goes from 22 aten ops (20 TT-NN ops eagerly) to 9 (qkv_heads is a linear and the
heads split); a GPT-2 block's Conv1Ds, gelu_new and qkv split fuse the same way. Passes run in this order
(the head merge before view chains: it matches its own view; view chains before the patterns written for
one view; the head split needs the linears unfused; gelu_tanh before the activations).
"""
from __future__ import annotations

import operator
import typing

import torch
import torch.fx as fx

aten = torch.ops.aten
_VIEWS = (aten.view.default, aten.reshape.default, aten._unsafe_view.default)
_ACTIVATIONS = {aten.relu.default: "relu", aten.silu.default: "silu", aten.gelu.default: "gelu"}


def _activation(n) -> str | None:
    """The fused ops' name of the activation node n computes (gelu: "gelu" or "gelu_tanh"), or None."""
    act = _ACTIVATIONS.get(n.target) if isinstance(n, fx.Node) and n.op == "call_function" else None
    if act == "gelu":
        approximate = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
        return {"none": "gelu", "tanh": "gelu_tanh"}.get(approximate)
    return act
TILE = 32


def _ops():
    return torch.ops.ttnn_eager  # defined by lowerings/fused.py (loaded with the backend's lowerings)


def _shape(n) -> tuple | None:
    v = n.meta.get("val") if isinstance(n, fx.Node) else None
    return tuple(v.shape) if isinstance(v, torch.Tensor) else None


def _is(n, *targets) -> bool:
    return isinstance(n, fx.Node) and n.op == "call_function" and n.target in targets


def _only_user(n) -> bool:
    return len(n.users) == 1


def _replace(old: fx.Node, new: fx.Node, dead=()) -> None:
    new.meta.update(old.meta)
    old.replace_all_uses_with(new)
    g = old.graph
    for n in (old, *dead):
        if not n.users:
            g.erase_node(n)


def noop_views(g: fx.Graph) -> int:
    done = 0
    for n in list(g.nodes):
        if _is(n, *_VIEWS, aten.expand.default) and _shape(n) is not None and _shape(n) == _shape(n.args[0]):
            n.replace_all_uses_with(n.args[0])
            g.erase_node(n)
            done += 1
    return done



# the upsample ops (interpolate, kept whole by compiler.kept_whole): -> (the number of spatial sizes, where the
# optional scales start in the arguments)
_RESIZES = {aten.upsample_nearest1d.default: (1, 2), aten.upsample_nearest2d.default: (2, 2),
            aten.upsample_nearest3d.default: (3, 2), aten._upsample_nearest_exact1d.default: (1, 2),
            aten._upsample_nearest_exact2d.default: (2, 2), aten._upsample_nearest_exact3d.default: (3, 2),
            aten.upsample_linear1d.default: (1, 3), aten.upsample_bilinear2d.default: (2, 3),
            aten.upsample_trilinear3d.default: (3, 3), aten.upsample_bicubic2d.default: (2, 3)}


def noop_resizes(g: fx.Graph) -> int:
    """An upsample to the size its input has (no scales other than 1): every output element is read at an
    input element's own coordinate (nearest; linear and cubic with the weight 1 there) -- the input.
    (transformers' interpolate_pos_encoding under tracing: interpolates the position embeddings to their own
    size, which eager mode skips.)"""
    done = 0
    for n in list(g.nodes):
        if not _is(n, *_RESIZES) or _returned(n):
            continue
        k, first_scale = _RESIZES[n.target]
        xs = _shape(n.args[0])
        scales = [*n.args[first_scale:], *n.kwargs.values()]
        if xs is None or _shape(n) != xs or any(s is not None and s != 1.0 for s in scales):
            continue
        n.replace_all_uses_with(n.args[0])
        g.erase_node(n)
        done += 1
    return done


def inverse_permutes(g: fx.Graph) -> int:
    """permute(permute(x, p), q): x where the two undo each other, else one permute of x (where the inner
    one has no other use)."""
    done = 0
    for n in list(g.nodes):
        if not (_is(n, aten.permute.default) and _is(n.args[0], aten.permute.default)) or _shape(n) is None:
            continue
        inner = n.args[0]
        nd = len(_shape(n))
        p, q = ([d % nd for d in m.args[1]] for m in (inner, n))
        order = [p[j] for j in q]
        if order == list(range(nd)):
            if _returned(n):
                continue
            n.replace_all_uses_with(inner.args[0])
            g.erase_node(n)
        elif _only_user(inner):
            n.args = (inner.args[0], order)
        else:
            continue
        if not inner.users:
            g.erase_node(inner)
        done += 1
    return done


def _slice_range(n, dim: int):
    """n = x[start:end] along dim (step 1; x's size known): (x, start, end) with both in [0, size], else None."""
    if not (_is(n, aten.slice.Tensor) and _shape(n.args[0]) is not None):
        return None
    x, d, start, end, step = (list(n.args) + [0, None, None, 1][len(n.args) - 1:])[:5]
    size = _shape(x)[dim] if len(_shape(x)) > dim else None
    if size is None or d % len(_shape(x)) != dim or step != 1 or not all(isinstance(v, (int, type(None)))
                                                                         for v in (start, end)):
        return None
    start = 0 if start is None else start + size if start < 0 else start
    end = size if end is None else end + size if end < 0 else end
    return x, min(max(start, 0), size), min(max(end, 0), size)


def cat_slices(g: fx.Graph) -> int:
    """cat of consecutive slices of one tensor along the cat's dimension (x[a:b], x[b:c] -> x[a:c]): one slice,
    or x itself where they tile it (transformers' interpolate_pos_encoding under tracing: the class and patch
    position embeddings split, then put back together)."""
    done = 0
    for n in list(g.nodes):
        if not _is(n, aten.cat.default) or _shape(n) is None or _returned(n):
            continue
        nd = len(_shape(n))
        dim = (n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0)) % nd
        parts, merged = [], 0
        for t in n.args[0]:
            r = _slice_range(t, dim)
            if r is not None and parts and isinstance(parts[-1], tuple) and parts[-1][0] is r[0] \
                    and parts[-1][2] == r[1]:
                parts[-1] = (r[0], parts[-1][1], r[2])
                merged += 1
            else:
                parts.append(r if r is not None else t)
        if not merged:
            continue
        with g.inserting_before(n):
            items = []
            for part in parts:
                if isinstance(part, tuple):
                    x, start, end = part
                    whole = start == 0 and end == _shape(x)[dim]
                    items.append(x if whole else g.call_function(aten.slice.Tensor, (x, dim, start, end)))
                else:
                    items.append(part)
            new = items[0] if len(items) == 1 else g.call_function(aten.cat.default, (items, dim))
        if len(items) > 1:
            new.meta.update(n.meta)
        old = [t for t in n.args[0] if isinstance(t, fx.Node)]
        n.replace_all_uses_with(new)
        g.erase_node(n)
        for t in old:
            if not t.users and not getattr(t, "_erased", False):
                g.erase_node(t)
        for item in items:
            if isinstance(item, fx.Node) and _is(item, aten.slice.Tensor) and "val" not in item.meta:
                x, d, start, end = item.args
                item.meta["val"] = x.meta["val"].narrow(d, start, end - start)
        done += 1
    return done



_UNSQUEEZES = (aten.unsqueeze.default, *_VIEWS)


def _positions(i, size: int) -> int | None:
    """i = arange(size) (integers 0, 1, ..., size - 1) through unsqueezes and views that keep one dimension of
    size `size`, the others 1: that dimension's position, else None."""
    shape = _shape(i)
    v = i.meta.get("val") if isinstance(i, fx.Node) else None
    if shape is None or not isinstance(v, torch.Tensor) or v.dtype not in (torch.int64, torch.int32) \
            or sorted(shape) != [1] * (len(shape) - 1) + [size]:
        return None
    src = i
    while _is(src, *_UNSQUEEZES):
        src = src.args[0]
    if not _is(src, aten.arange.default, aten.arange.start, aten.arange.start_step):
        return None
    bounds = list(src.args) if src.target is not aten.arange.default else [0, *src.args]
    if bounds[:2] != [0, size] or (len(bounds) > 2 and bounds[2] != 1) or _shape(src) != (size,):
        return None
    return shape.index(size) if size != 1 else None


def arange_index(g: fx.Graph) -> int:
    """x[i0, i1, ...] where each i_k is arange(x.shape[k]) unsqueezed to its own dimension of the result, in
    order (transformers' mask functions under tracing: padding_mask[batch_arange, kv_arange] of
    `[b, 1, 1, 1]` and `[1, 1, 1, k]` positions): every element read in place -- a view of x to the result's
    shape, not a gather."""
    done = 0
    for n in list(g.nodes):
        if not _is(n, aten.index.Tensor) or _shape(n) is None or _shape(n.args[0]) is None:
            continue
        x, indices = n.args[0], n.args[1]
        xs = _shape(x)
        if not indices or len(indices) > len(xs) or any(not isinstance(i, fx.Node) for i in indices) \
                or not _contiguous(x):  # (a view of x's elements in order)
            continue
        ranks = {len(_shape(i) or ()) for i in indices}
        places = [_positions(i, xs[k]) for k, i in enumerate(indices)]
        if len(ranks) != 1 or None in places or places != sorted(set(places)):
            continue
        rank = ranks.pop()
        want = [1] * rank
        for k, p in enumerate(places):
            want[p] = xs[k]
        if _shape(n) != (*want, *xs[len(indices):]):
            continue
        n.target, n.args = aten._unsafe_view.default, (x, list(_shape(n)))
        done += 1
    _erase_dead(g)
    return done


_CONSTANT_MAX = 1 << 16  # elements of a constant evaluated while compiling


def _evaluated(n, cache: dict):
    """The value of n on the CPU where n is computed from factory ops alone (no graph input, no random numbers,
    at most _CONSTANT_MAX elements each), else None."""
    if n in cache:
        return cache[n]
    cache[n] = None
    v = n.meta.get("val") if isinstance(n, fx.Node) else None
    if not isinstance(v, torch.Tensor) or v.numel() > _CONSTANT_MAX or not _pure(n) or n.target is operator.getitem:
        return None
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.fx.node import map_arg
    inputs = [_evaluated(a, cache) for a in n.all_input_nodes]
    if any(a is None for a in inputs):
        return None
    values = dict(zip(n.all_input_nodes, inputs))
    kwargs = {k: ("cpu" if k == "device" else a) for k, a in n.kwargs.items()}
    try:
        with torch.no_grad(), unset_fake_temporarily():
            out = n.target(*map_arg(n.args, values.__getitem__), **map_arg(kwargs, values.__getitem__))
    except Exception:  # (an op with no CPU kernel: not evaluated)
        return None
    cache[n] = out if isinstance(out, torch.Tensor) and out.shape == v.shape and out.dtype == v.dtype else None
    return cache[n]


def _all_true(value) -> bool:
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        return value is not None and bool(value.all())


def true_ands(g: fx.Graph) -> int:
    """a & t (bitwise or logical) of a boolean a and a t computed from factory ops alone that is true everywhere
    and does not widen a (transformers' mask functions under tracing: `ones & (kv_idx >= 0)` of aranges, then
    that & the padding mask): a."""
    done, cache = 0, {}
    for n in list(g.nodes):
        if not (_is(n, aten.bitwise_and.Tensor, aten.logical_and.default) and len(n.args) == 2) or _returned(n):
            continue
        for a, t in (n.args, n.args[::-1]):
            va, out = (a.meta.get("val") if isinstance(a, fx.Node) else None), n.meta.get("val")
            if not (isinstance(va, torch.Tensor) and isinstance(out, torch.Tensor) and va.dtype == out.dtype
                    == torch.bool and isinstance(t, fx.Node)) or not _all_true(_evaluated(t, cache)):
                continue
            if va.shape == out.shape:
                n.replace_all_uses_with(a)
                g.erase_node(n)
            else:  # (t broadcast a: a expanded to the result's shape, one expand with an expand after it)
                users = list(n.users)
                if not users or not all(_is(u, aten.expand.default) and u.args[0] is n for u in users):
                    continue
                for u in users:
                    u.args = (a, [s if s != -1 else out.shape[i] for i, s in enumerate(u.args[1])])
                g.erase_node(n)
            done += 1
            break
    _erase_dead(g)
    return done


def _erase_dead(g: fx.Graph) -> None:
    """Nodes a rewrite left without users that compute a value and write nothing (last first)."""
    for n in reversed(list(g.nodes)):
        if not n.users and _pure(n):
            g.erase_node(n)


def _own_value(n) -> bool:
    """n (through the views it is made by) is computed in the graph from no graph input or constant directly and
    is none of its results: returned in place of another result, it aliases nothing the caller sees."""
    while True:
        if not isinstance(n, fx.Node) or n.op != "call_function" or _returned(n):
            return False
        if not getattr(n.target, "is_view", False):
            return True
        n = n.args[0]


def cat_empties(g: fx.Graph) -> int:
    """cat of empty tensors and others: of the others, or the one other itself (transformers' DynamicCache under
    tracing: each layer's first keys and values concatenated to the cache's empty [b, h, 0, d] tensors)."""
    done = 0
    for n in list(g.nodes):
        out = n.meta.get("val")
        if not _is(n, aten.cat.default) or not isinstance(out, torch.Tensor):
            continue
        vals = [t.meta.get("val") if isinstance(t, fx.Node) else None for t in n.args[0]]
        if not all(isinstance(v, torch.Tensor) for v in vals):
            continue
        kept = [t for t, v in zip(n.args[0], vals)  # (cat skips an empty tensor of the result's rank, or of [0])
                if v.numel() or not (v.dim() == out.dim() or tuple(v.shape) == (0,))]
        if len(kept) == len(vals) or not kept:
            continue
        if len(kept) == 1:
            v = kept[0].meta["val"]
            if v.shape != out.shape or v.dtype != out.dtype or (_returned(n) and not _own_value(kept[0])):
                continue
            n.replace_all_uses_with(kept[0])
            g.erase_node(n)
        else:
            n.args = (kept, *n.args[1:])
        done += 1
    _erase_dead(g)
    return done


def _key(a):
    return tuple(_key(x) for x in a) if isinstance(a, (list, tuple)) else a


def _pure(n) -> bool:
    """n computes a value from its arguments alone: no write into an argument, no random numbers."""
    if n.op != "call_function":
        return False
    if n.target is operator.getitem:
        return True
    schema = getattr(n.target, "_schema", None)
    if schema is None or any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return False
    return torch.Tag.nondeterministic_seeded not in getattr(n.target, "tags", ())


def duplicates(g: fx.Graph) -> int:
    done = 0
    # (an input written back with copy_ -- in a functionalized graph, at its end -- is the same value only
    # before its first copy_)
    written: dict = {}
    for i, n in enumerate(g.nodes):
        if _is(n, aten.copy_.default):
            written.setdefault(n.args[0], i)
    seen: dict = {}
    for i, n in enumerate(list(g.nodes)):
        if not _pure(n) or any(written.get(a, i + 1) <= i for a in n.all_input_nodes):
            continue
        key = (n.target, _key(n.args), _key(tuple(sorted(n.kwargs.items()))))
        try:
            first = seen.setdefault(key, n)
        except TypeError:  # (an unhashable argument)
            continue
        if first is not n and not _returned(n) and not _returned(first):
            n.replace_all_uses_with(first)
            g.erase_node(n)
            done += 1
    return done


_IDENTITY = {aten.mul.Tensor: 1, aten.div.Tensor: 1, aten.add.Tensor: 0, aten.sub.Tensor: 0}


def _returned(n) -> bool:
    """n is one of the graph's results (merged into another value it would alias it: a caller's in-place write
    into one result would show in the other)."""
    return any(u.op == "output" for u in n.users)


def identities(g: fx.Graph) -> int:
    done = 0
    for n in list(g.nodes):
        if not (_is(n, *_IDENTITY) and len(n.args) == 2 and not n.kwargs) or _returned(n):
            continue
        x, c = n.args
        if not isinstance(x, fx.Node) and n.target in (aten.mul.Tensor, aten.add.Tensor):
            x, c = c, x  # (1 * x, 0 + x)
        v, out = (x.meta.get("val") if isinstance(x, fx.Node) else None), n.meta.get("val")
        if (type(c) in (int, float) and c == _IDENTITY[n.target] and isinstance(v, torch.Tensor)
                and isinstance(out, torch.Tensor) and v.dtype == out.dtype and v.shape == out.shape):
            n.replace_all_uses_with(x)
            g.erase_node(n)
            done += 1
    return done


def _head_branch(lin: fx.Node):
    """linear -> view [b, s, h, d] -> transpose(1, 2), each used once: (transpose node, heads, d, nodes) or None."""
    if not _is(lin, aten.linear.default) or not _only_user(lin):
        return None
    view = next(iter(lin.users))
    if not _is(view, *_VIEWS) or not _only_user(view):
        return None
    t = next(iter(view.users))
    if not _is(t, aten.transpose.int) or sorted(d % 4 for d in t.args[1:3]) != [1, 2]:
        return None
    vs, ls = _shape(view), _shape(lin)
    if vs is None or ls is None or len(vs) != 4 or len(ls) != 3 or vs[:2] != ls[:2]:
        return None
    return t, vs[2], vs[3], (view, lin)


def qkv_heads(g: fx.Graph) -> int:
    done = 0
    by_input: dict = {}
    for n in g.nodes:
        b = _head_branch(n)
        if b is not None:
            by_input.setdefault(n.args[0], []).append((n, b))
    for x, branches in by_input.items():
        if len(branches) != 3 or _shape(x) is None or len(_shape(x)) != 3:
            continue
        d = {b[2] for _, b in branches}
        if len(d) != 1 or d.pop() % TILE:
            continue
        # the query is the branch with the most heads (grouped-query attention), first in the fused weight
        branches.sort(key=lambda nb: -nb[1][1])
        heads = [b[1] for _, b in branches]
        if heads[1] != heads[2] or heads[0] % heads[1]:
            continue
        lins = [lin for lin, _ in branches]
        biases = [lin.args[2] if len(lin.args) > 2 else None for lin in lins]
        if len({b is None for b in biases}) != 1:
            continue
        order = {node: i for i, node in enumerate(g.nodes)}
        first = min((t for _, (t, *_r) in branches), key=order.__getitem__)
        weights = [lin.args[1] for lin in lins]
        if any(isinstance(a, fx.Node) and order[a] > order[first] for a in (*weights, *biases)):
            continue  # a weight made after the first head is used: leave the pattern alone
        with g.inserting_before(first):
            fused = g.call_function(_ops().qkv_heads.default, (x, weights, biases, heads[0], heads[1]))
            outs = [g.call_function(operator.getitem, (fused, i)) for i in range(3)]
        for (lin, (t, _h, _d, dead)), out in zip(branches, outs):
            _replace(t, out, dead)
        done += 1
    return done


def _rewrite(match):
    """A pass from `match(node) -> (fused op, its arguments, the matched nodes the node consumed[, keyword
    arguments]) or None`:
    each match is replaced by one call of the fused op (inserted before the node), dead nodes erased."""
    def run(g: fx.Graph) -> int:
        done = 0
        for n in list(g.nodes):
            if getattr(n, "_erased", False) or n.op != "call_function":
                continue
            m = match(n)
            if m is None:
                continue
            target, args, dead, *kwargs = m
            with g.inserting_before(n):
                new = g.call_function(target, args, *kwargs)
            _replace(n, new, dead)
            done += 1
        return done
    run.__name__ = match.__name__
    run.__doc__ = match.__doc__
    return run


@_rewrite
def concat_heads(n):
    """view [b, s, h*d] of (contiguous) transpose(1, 2) of [b, h, s, d]."""
    if not _is(n, *_VIEWS):
        return None
    src, dead = n.args[0], []
    if _is(src, aten.clone.default) and _only_user(src):
        dead.append(src)
        src = src.args[0]
    if not (_is(src, aten.transpose.int) and _only_user(src)):
        return None
    x = src.args[0]
    xs, out = _shape(x), _shape(n)
    if xs is None or out is None or len(xs) != 4 or sorted(d % 4 for d in src.args[1:3]) != [1, 2]:
        return None
    b, h, s, d = xs
    if out != (b, s, h * d) or d % TILE:
        return None
    return _ops().concat_heads.default, (x,), (*dead, src)  # (erased consumer first: the clone, the transpose)


@_rewrite
def linear_activation(n):
    """gelu (erf or tanh), relu or silu of a linear used only by it."""
    act = _activation(n)
    if act is None:
        return None
    lin = n.args[0]
    if not _is(lin, aten.linear.default) or not _only_user(lin):
        return None
    x, w, *rest = lin.args
    return _ops().linear_activation.default, (x, w, rest[0] if rest else None, act), (lin,)


@_rewrite
def add_layer_norm(n):
    """layer_norm over the last dimension of a + r (one shape, the sum used only by it)."""
    if not _is(n, aten.layer_norm.default):
        return None
    add = n.args[0]
    if not _is(add, aten.add.Tensor) or not _only_user(add) or add.kwargs.get("alpha", 1) != 1 or len(add.args) != 2:
        return None
    a, r = add.args
    shape = n.args[1]
    if _shape(a) is None or _shape(a) != _shape(r) or len(shape) != 1 or _shape(a)[-1] != shape[0]:
        return None
    w = n.args[2] if len(n.args) > 2 else None
    bias = n.args[3] if len(n.args) > 3 else None
    eps = n.args[4] if len(n.args) > 4 else 1e-5
    return _ops().add_layer_norm.default, (a, r, list(shape), w, bias, float(eps)), (add,)


@_rewrite
def residual_bias(n):
    """r + linear(x, w) of one row (b * s = 1: a decode step of one sequence), r of the product's shape and dtype,
    the linear unbiased and used only by the sum: linear_add(x, w, r), which TT-NN's linear computes with r as
    its one-row bias (aten.linear itself takes a bias of at most 2 dimensions)."""
    if not _is(n, aten.add.Tensor) or len(n.args) != 2 or n.kwargs.get("alpha", 1) != 1:
        return None
    out = n.meta.get("val")
    if not isinstance(out, torch.Tensor) or not out.dtype.is_floating_point or not out.shape \
            or not all(isinstance(d, int) for d in out.shape) or not 0 < out.shape[-1] == out.shape.numel():
        return None
    for r, lin in (n.args, n.args[::-1]):
        if not (_is(lin, aten.linear.default) and _only_user(lin) and len(lin.args) in (2, 3) and not lin.kwargs):
            continue
        if len(lin.args) == 3 and lin.args[2] is not None:
            continue
        rv, lv = (v.meta.get("val") if isinstance(v, fx.Node) else None for v in (r, lin))
        if isinstance(rv, torch.Tensor) and isinstance(lv, torch.Tensor) and rv.shape == lv.shape == out.shape \
                and rv.dtype == lv.dtype == out.dtype:
            return _ops().linear_add.default, (lin.args[0], lin.args[1], r), (lin,)
    return None


def _rms_parts(inner):
    """inner = x * rsqrt(mean(x^2, [-1], keepdim) + eps), each intermediate used once: (x, eps, nodes) or None."""
    if not _is(inner, aten.mul.Tensor) or not _only_user(inner):
        return None
    for x, r in (inner.args, inner.args[::-1]):
        if not (_is(r, aten.rsqrt.default) and _only_user(r)):
            continue
        add = r.args[0]
        if not (_is(add, aten.add.Tensor) and _only_user(add) and isinstance(add.args[1], float)):
            continue
        mean = add.args[0]
        if not (_is(mean, aten.mean.dim) and _only_user(mean) and len(mean.args) >= 3 and mean.args[2]):
            continue
        nd = len(_shape(x) or ())
        if list(mean.args[1]) not in ([-1], [nd - 1]):
            continue
        sq = mean.args[0]
        if _is(sq, aten.pow.Tensor_Scalar) and _only_user(sq) and sq.args[0] is x and sq.args[1] == 2:
            return x, add.args[1], (inner, r, add, mean, sq)
    return None


@_rewrite
def rms_norm(n):
    """w * (x * rsqrt(mean(x^2, -1, keepdim) + eps)), w of the last dimension's size."""
    if not _is(n, aten.mul.Tensor):
        return None
    for w, inner in (n.args, n.args[::-1]):
        parts = _rms_parts(inner) if isinstance(inner, fx.Node) else None
        if parts is None:
            continue
        x, eps, dead = parts
        xs = _shape(x)
        if xs and _shape(w) == (xs[-1],) and _shape(n) == xs:
            return _ops().rms_norm.default, (x, w, float(eps)), dead
    return None


def _rotate_half_of(cat):
    """cat = cat([-x[..., d/2:], x[..., :d/2]], -1) (transformers' rotate_half), each part used once: (x, nodes)."""
    if not (_is(cat, aten.cat.default) and _only_user(cat) and len(cat.args[0]) == 2):
        return None
    xs = _shape(cat)
    if xs is None or (cat.args[1] if len(cat.args) > 1 else 0) not in (-1, len(xs) - 1):
        return None
    neg, low = cat.args[0]
    if not (_is(neg, aten.neg.default) and _only_user(neg) and _is(neg.args[0], aten.slice.Tensor)):
        return None
    high = neg.args[0]
    if not (_is(low, aten.slice.Tensor) and _only_user(low) and _only_user(high) and high.args[0] is low.args[0]):
        return None
    half = xs[-1] // 2
    last = (-1, len(xs) - 1)
    if (high.args[1] in last and low.args[1] in last and list(low.args[2:4]) == [0, half]
            and high.args[2] == half and high.args[3] >= xs[-1] and len(low.args) <= 4 and len(high.args) <= 4):
        return low.args[0], (cat, neg, high, low)
    return None


@_rewrite
def rotary_embedding(n):
    """x * cos + rotate_half(x) * sin of heads x [b, h, s, d] (the lowering decides whether TT-NN's rotary
    embedding takes the shapes)."""
    if not _is(n, aten.add.Tensor) or len(n.args) != 2 or n.kwargs:
        return None
    for plain, turned in (n.args, n.args[::-1]):
        if not (_is(plain, aten.mul.Tensor) and _only_user(plain) and _is(turned, aten.mul.Tensor)
                and _only_user(turned)):
            continue
        for rot, sin in (turned.args, turned.args[::-1]):
            parts = _rotate_half_of(rot)
            if parts is None:
                continue
            x, dead = parts
            cos = plain.args[1] if plain.args[0] is x else plain.args[0] if plain.args[1] is x else None
            if cos is None or not isinstance(sin, fx.Node):
                continue
            vals = [v.meta.get("val") for v in (x, cos, sin)]
            if (all(isinstance(v, torch.Tensor) for v in vals) and len({v.dtype for v in vals}) == 1
                    and len(vals[0].shape) == 4 and _shape(n) == _shape(x)):
                return _ops().rotary_embedding.default, (x, cos, sin), (plain, turned, *dead)
    return None


def _swaps_heads(t) -> bool:
    """t = transpose(., 1, 2) of a 4-d tensor ([1, T, h, d] <-> [1, h, T, d])."""
    return _is(t, aten.transpose.int) and _shape(t) is not None and len(_shape(t)) == 4 \
        and sorted(d % 4 for d in t.args[1:3]) == [1, 2]


def _rotated_heads(view):
    """view [1, T, h, d] -> transpose(1, 2) -> rotary_embedding(., cos, sin), cos and sin [1, 1, T, d] ->
    transpose(1, 2), each used once but the last: (the rotary node, the last transpose) or None."""
    t = next(iter(view.users))
    if not (_only_user(view) and _swaps_heads(t) and _only_user(t)):
        return None
    rot = next(iter(t.users))
    if not (_is(rot, _ops().rotary_embedding.default) and rot.args[0] is t and _only_user(rot)):
        return None
    _, seq, _, d = _shape(view)
    back = next(iter(rot.users))
    if any(_shape(c) != (1, 1, seq, d) for c in rot.args[1:3]) or not _swaps_heads(back):
        return None
    return rot, back


def _after_definition(g: fx.Graph, c: fx.Node) -> fx.Node:
    """The node before which a new use of c may go anywhere later: after c (after the placeholders for one)."""
    return next(m for m in g.nodes if m.op != "placeholder") if c.op == "placeholder" else c.next


def decode_heads(g: fx.Graph) -> int:
    done = 0
    by_input: dict = {}
    for n in g.nodes:
        if _is(n, aten.linear.default) and _only_user(n) and _is(next(iter(n.users)), *_VIEWS):
            by_input.setdefault(n.args[0], []).append(n)
    rows: dict = {}  # cos or sin node -> its view [1, T, 1, d] (one for every layer)
    order = {node: i for i, node in enumerate(g.nodes)}
    for x, lins in by_input.items():
        xs = _shape(x)
        if len(lins) != 3 or xs is None or len(xs) != 3 or xs[0] != 1 or xs[1] > TILE:
            continue  # (one sequence of at most 32 tokens: nlp_create_qkv_heads_decode's most users)
        views = [next(iter(lin.users)) for lin in lins]
        shapes = [_shape(v) for v in views]
        if any(vs is None or len(vs) != 4 or vs[:2] != xs[:2] or _shape(lin) != (*xs[:2], vs[2] * vs[3])
               for lin, vs in zip(lins, shapes)):
            continue
        rotated = [_rotated_heads(v) for v in views]
        if sum(r is not None for r in rotated) != 2:
            continue
        # the query: the rotated branch with the most heads (grouped-query attention); the value: the one not rotated
        parts = sorted(zip(lins, views, shapes, rotated), key=lambda p: (p[3] is None, -p[2][2]))
        heads = [vs[2] for _, _, vs, _ in parts]
        if len({vs[3] for vs in shapes}) != 1 or shapes[0][3] % TILE or heads[0] > TILE or heads[1] != heads[2] \
                or heads[0] % heads[1]:
            continue  # (head size a multiple of 32, at most 32 query heads: the decode head split's limits)
        biases = [lin.args[2] if len(lin.args) > 2 else None for lin, *_ in parts]
        weights = [lin.args[1] for lin, *_ in parts]
        first = min(lins, key=order.__getitem__)
        if len({b is None for b in biases}) != 1 or any(
                isinstance(a, fx.Node) and order[a] > order[first] for a in (*weights, *biases)):
            continue
        with g.inserting_before(first):
            fused = g.call_function(_ops().qkv_heads_decode.default, (x, weights, biases, heads[0], heads[1]))
            outs = [g.call_function(operator.getitem, (fused, i)) for i in range(3)]
        for out, (lin, view, vs, rot) in zip(outs, parts):
            out.meta["val"] = view.meta["val"]
            if rot is None:  # the value: [1, T, kv, d] as its view was
                _replace(view, out, (lin,))
                continue
            rot, back = rot
            cos_sin = []
            for c in rot.args[1:3]:
                if c not in rows:  # (of the tensor c is a view of, when contiguous: transformers' cos.unsqueeze(1))
                    src = c.args[0] if _is(c, aten.unsqueeze.default, *_VIEWS) and _contiguous(c.args[0]) else c
                    op = aten.view.default if _contiguous(src) else aten.reshape.default
                    with g.inserting_before(_after_definition(g, src)):
                        rows[c] = g.call_function(op, (src, [1, vs[1], 1, vs[3]]))
                    rows[c].meta["val"] = c.meta["val"].reshape(1, vs[1], 1, vs[3])
                cos_sin.append(rows[c])
            with g.inserting_before(rot):
                new = g.call_function(_ops().rotary_embedding.default, (out, *cos_sin))
            _replace(back, new, (rot, rot.args[0], view, lin))
        done += 1
    for c in rows:
        if not c.users and _pure(c):
            g.erase_node(c)
    return done


@_rewrite
def cache_update(n):
    """index_copy(cache, 2, arange(1) + position, x) of a cache [b, h, L, d], one new row x [b, h, 1, d] and a
    0-d integer position (transformers' StaticCache.update at its cumulative_length)."""
    if not _is(n, aten.index_copy.default) or len(n.args) != 4 or n.kwargs:
        return None
    cache, d, rows, x = n.args
    cs, xs = _shape(cache), _shape(x)
    if cs is None or xs is None or len(cs) != 4 or d not in (2, -2) or xs != (cs[0], cs[1], 1, cs[3]):
        return None
    if not (_is(rows, aten.add.Tensor) and len(rows.args) == 2 and not rows.kwargs):
        return None
    for first, position in (rows.args, rows.args[::-1]):
        if not (_is(first, aten.arange.default) and list(first.args) == [1]):
            continue
        p = position.meta.get("val") if isinstance(position, fx.Node) else None
        if isinstance(p, torch.Tensor) and p.dim() == 0 and not p.dtype.is_floating_point and p.dtype != torch.bool:
            return _ops().cache_update.default, (cache, x, position), (rows, first)
    return None


def paged_caches_in_place(g: fx.Graph) -> int:
    """copy_(cache, copy(cache, paged_update_cache_functional(cache, x, positions, page_table))) of a cache the
    graph is given (a traced decode step writes its paged caches so: features/serving/paged.py; aot_autograd
    writes the input back at the end) -> paged_update_cache(cache, x, positions, page_table), TT-NN's update
    into the cache's own buffer, where nothing reads the cache's old value after the update (inductor's
    reinplacing of a functional op whose input is overwritten anyway)."""
    done = 0
    order = {n: i for i, n in enumerate(g.nodes)}
    for n in list(g.nodes):
        if not (_is(n, aten.copy_.default) and len(n.args) == 2 and not n.kwargs):
            continue
        cache, c = n.args
        if not (isinstance(cache, fx.Node) and cache.op == "placeholder" and _is(c, aten.copy.default)
                and c.args[0] is cache):
            continue
        f = c.args[1]
        if not (_is(f, _ops().paged_update_cache_functional.default) and f.args[0] is cache and _only_user(f)):
            continue
        if any(order.get(u, 0) > order[f] for u in cache.users if u not in (f, c, n)):
            continue  # the old value is read after the update
        with g.inserting_before(f):
            new = g.call_function(_ops().paged_update_cache.default, f.args, f.kwargs)
        new.meta.update(c.meta)
        g.erase_node(n)
        c.replace_all_uses_with(new)
        g.erase_node(c)
        g.erase_node(f)
        done += 1
    return done


def _repeated_heads(n):
    """n = view(clone(expand(unsqueeze(x, 2), [b, kv, g, s, d])), [b, kv*g, s, d]) (transformers' repeat_kv),
    each intermediate used once: (x, nodes) or None."""
    if not (_is(n, *_VIEWS) and _only_user(n)):
        return None
    clone = n.args[0]
    if _is(clone, aten.clone.default) and _only_user(clone):
        inner, dead = clone.args[0], [n, clone]
    else:
        inner, dead = clone, [n]
    if not (_is(inner, aten.expand.default) and _only_user(inner) and _is(inner.args[0], aten.unsqueeze.default)
            and _only_user(inner.args[0]) and inner.args[0].args[1] == 2):
        return None
    x = inner.args[0].args[0]
    xs, es, ns = _shape(x), _shape(inner), _shape(n)
    if xs is None or es is None or ns is None or len(xs) != 4 or len(es) != 5:
        return None
    b, kv, s, d = xs
    if es[:2] != (b, kv) or es[3:] != (s, d) or ns != (b, kv * es[2], s, d):
        return None
    return x, (*dead, inner, inner.args[0])


def grouped_attention(g: fx.Graph) -> int:
    done = 0
    for n in list(g.nodes):
        if not _is(n, aten.scaled_dot_product_attention.default) or len(n.args) < 3:
            continue
        k, v = (_repeated_heads(a) for a in n.args[1:3])
        if k is None or v is None or _shape(k[0])[1] != _shape(v[0])[1]:
            continue
        n.args = (n.args[0], k[0], v[0], *n.args[3:])
        n.kwargs = {**n.kwargs, "enable_gqa": True}
        for dead in (*k[1], *v[1]):
            if not dead.users:
                g.erase_node(dead)
        done += 1
    return done


class _Projection(typing.NamedTuple):
    x: fx.Node      # the linear's input
    weight: fx.Node
    bias: fx.Node | None
    heads: int
    size: int       # d
    nodes: tuple    # (t, the view, the linear)
    arg: fx.Node    # what sdpa takes: t, or the rotary embedding of t


def _projection_heads(a, sdpa) -> _Projection | None:
    """sdpa's argument a = t or rotary_embedding(t, cos, sin) of t = transpose(view(linear(x, w, b) [b, s, h*d],
    [b, s, h, d]), 1, 2), each used only by the next, a by sdpa once (and by others: a key or value returned as
    the layer's cache)."""
    if not (sdpa in a.users and sum(u is a for u in sdpa.args[:3]) == 1):
        return None
    t = a.args[0] if _is(a, _ops().rotary_embedding.default) else a
    if not (_is(t, aten.transpose.int) and _is(t.args[0], *_VIEWS) and (t is a or list(t.users) == [a])):
        return None
    b = _head_branch(t.args[0].args[0])
    if b is None or b[0] is not t:
        return None
    lin = b[3][1]
    return _Projection(lin.args[0], lin.args[1], lin.args[2] if len(lin.args) > 2 else None, b[1], b[2], (t, *b[3]), a)


def _projected_output(sdpa):
    """sdpa [b, h, s, d] used only by transpose(1, 2) -> (contiguous clone) -> view [b, s, h*d] -> linear (as its
    input), each used only by the next: (the linear, the nodes before it) or None."""
    nodes, n = [], sdpa
    for want in (aten.transpose.int, aten.clone.default, _VIEWS, aten.linear.default):
        if not _only_user(n):
            return None
        u = next(iter(n.users))
        if want is aten.clone.default and not _is(u, want):
            continue  # (the clone is optional)
        if not _is(u, *(want if isinstance(want, tuple) else (want,))) or u.args[0] is not n:
            return None
        nodes.append(u)
        n = u
    b, h, s, d = _shape(sdpa)
    if sorted(a % 4 for a in nodes[0].args[1:3]) != [1, 2] or _shape(nodes[-2]) != (b, s, h * d):
        return None
    return nodes[-1], nodes[:-1]


def _with_shape(n: fx.Node, shape) -> None:
    """n's recorded value (meta "val", what later passes read shapes from) given a new shape."""
    v = n.meta.get("val")
    if isinstance(v, torch.Tensor):
        n.meta["val"] = v.new_empty(shape)


def padded_heads(g: fx.Graph) -> int:
    """Attention at a head size d that is not whole tiles (16, 48, 80 ...): q, k, v each a linear of one input
    viewed into heads, sdpa, its heads merged and projected -> the q, k, v weights zero-padded head by head to
    the next multiple of 32 (ttnn_eager.qkv_heads(head_width=)), sdpa of those heads (the zeros add nothing to
    q.k and give zero output columns; its scale stays 1/sqrt(d)), ttnn_eager.concat_heads, and the output
    projection's weight padded with zero input columns to match (ttnn_eager.heads_linear): the weights padded
    once, no pad or slice in the forward (a bert layer at head 16: 5 TT-NN ops for the attention, not 17). A
    rotary embedding of q or k between stays, on the padded heads (it rotates their first d columns)."""
    done = 0
    for n in list(g.nodes):
        if not _is(n, aten.scaled_dot_product_attention.default) or len(n.args) < 3 or len(_shape(n) or ()) != 4:
            continue
        dropout = n.args[4] if len(n.args) > 4 else n.kwargs.get("dropout_p", 0.0)
        branches = [_projection_heads(t, n) for t in n.args[:3]]
        out = _projected_output(n)
        if dropout or out is None or any(b is None for b in branches) or len({b.x for b in branches}) != 1:
            continue
        heads, sizes = [b.heads for b in branches], {b.size for b in branches}
        d = sizes.pop()
        if sizes or not d % TILE or heads[1] != heads[2] or heads[0] % heads[1] \
                or (heads[0] != heads[1] and not n.kwargs.get("enable_gqa", False)):
            continue
        biases = [b.bias for b in branches]  # (some may be None: whisper's key has no bias)
        if len(_shape(branches[0].x) or ()) != 3:
            continue
        order = {node: i for i, node in enumerate(g.nodes)}
        first = min((b.nodes[0] for b in branches), key=order.__getitem__)
        if any(isinstance(a, fx.Node) and order[a] > order[first] for b in branches for a in (b.weight, b.bias)):
            continue  # a weight made after the first head is used: leave the pattern alone
        width = d + -d % TILE
        with g.inserting_before(first):
            fused = g.call_function(_ops().qkv_heads.default,
                                    (branches[0].x, [b.weight for b in branches], biases, heads[0], heads[1], width))
            parts = [g.call_function(operator.getitem, (fused, i)) for i in range(3)]
        for b, part in zip(branches, parts):
            t, a = b.nodes[0], b.arg
            head = part if a is t else a  # (a rotary embedding of the padded heads rotates their first d columns)
            for user in [u for u in a.users if u is not n]:  # (they see heads of d: a slice of the padded ones)
                with g.inserting_before(user):
                    narrow = g.call_function(aten.slice.Tensor, (head, 3, 0, d))
                narrow.meta.update(a.meta)
                user.replace_input_with(a, narrow)
            _replace(t, part, b.nodes[1:])
            for node in {part, head}:
                _with_shape(node, (*_shape(node)[:3], width))
        scale = n.kwargs.get("scale")
        n.kwargs = {**n.kwargs, "scale": d ** -0.5 if scale is None else scale}
        _with_shape(n, (*_shape(n)[:3], width))
        lin, merge = out
        _, w, *bias = lin.args
        with g.inserting_before(lin):
            heads_out = g.call_function(_ops().concat_heads.default, (n,))
            proj = g.call_function(_ops().heads_linear.default, (heads_out, w, bias[0] if bias else None, heads[0]))
        heads_out.meta["val"] = merge[-1].meta.get("val")
        _with_shape(heads_out, (*_shape(merge[-1])[:2], heads[0] * width))
        _replace(lin, proj, merge[::-1])
        done += 1
    return done


def _no_mask(mask, cache: dict) -> bool:
    """mask, computed from factory ops alone, masks nothing: boolean and true everywhere, or additive and zero
    everywhere."""
    v = mask.meta.get("val") if isinstance(mask, fx.Node) else None
    if not isinstance(v, torch.Tensor) or not (v.dtype == torch.bool or v.dtype.is_floating_point):
        return False
    value = _evaluated(mask, cache)
    if value is None:
        return False
    return _all_true(value if v.dtype == torch.bool else value == 0)


def attention_masks(g: fx.Graph) -> int:
    """scaled_dot_product_attention of a mask expanded to the scores' shape: of the mask before its expand
    (sdpa broadcasts its mask; the lowering expands it once per mask, its decomposition adds it broadcast); of a
    mask made from factory ops alone that masks nothing: of no mask (transformers' bidirectional mask under
    tracing, with no padding: `kv_idx >= 0` of an arange, true everywhere, which eager mode skips after reading
    the mask's values on the host -- idefics3's vision model: a ge, its arange and the mask's conversion in
    each layer's attention, +2 TT-NN ops compiled against eager)."""
    done, cache = 0, {}
    for n in list(g.nodes):
        if not _is(n, aten.scaled_dot_product_attention.default):
            continue
        mask = n.args[3] if len(n.args) > 3 else n.kwargs.get("attn_mask")
        if isinstance(mask, fx.Node) and _no_mask(mask, cache):
            to = None
        elif _is(mask, aten.expand.default) and _shape(mask.args[0]) is not None:
            to = mask.args[0]
        else:
            continue
        if len(n.args) > 3:
            n.args = (*n.args[:3], to, *n.args[4:])
        else:
            n.kwargs = {**n.kwargs, "attn_mask": to}
        if not mask.users:
            g.erase_node(mask)
        done += 1
    _erase_dead(g)
    return done


def _contiguous(n) -> bool:
    v = n.meta.get("val") if isinstance(n, fx.Node) else None
    return isinstance(v, torch.Tensor) and v.is_contiguous()


def view_chains(g: fx.Graph) -> int:
    done = 0
    for n in list(g.nodes):
        if _is(n, *_VIEWS) and _is(n.args[0], *_VIEWS) and _contiguous(n.args[0].args[0]):
            n.args = (n.args[0].args[0], *n.args[1:])  # (a view reads its input's elements in order)
            done += 1
        elif _is(n, aten.transpose.int) and _is(n.args[0], aten.transpose.int) and _shape(n) is not None:
            src = n.args[0]
            nd = len(_shape(n))
            if sorted(d % nd for d in n.args[1:3]) == sorted(d % nd for d in src.args[1:3]):
                n.replace_all_uses_with(src.args[0])
                g.erase_node(n)
                done += 1
    for n in list(g.nodes):  # the views left without users
        if (_is(n, *_VIEWS) or _is(n, aten.transpose.int)) and not n.users:
            g.erase_node(n)
    return done


def _near(a, b) -> bool:
    return isinstance(a, (int, float)) and abs(a - b) <= 1e-6 * abs(b)


def _scaled(n, factor):
    """n = mul(x, factor) (either order): x, else None."""
    if _is(n, aten.mul.Tensor) and _only_user(n):
        for x, c in (n.args, n.args[::-1]):
            if _near(c, factor) and isinstance(x, fx.Node):
                return x
    return None


@_rewrite
def gelu_tanh(n):
    """0.5 * y * (1 + tanh(sqrt(2 / pi) * (y + 0.044715 * y^3))), as GPT-2's gelu_new computes it."""
    if not _is(n, aten.mul.Tensor):
        return None
    for half, one_plus in (n.args, n.args[::-1]):
        y = _scaled(half, 0.5)
        if y is None or not (_is(one_plus, aten.add.Tensor) and _only_user(one_plus)
                             and _near(one_plus.args[1], 1.0)):
            continue
        tanh = one_plus.args[0]
        if not (_is(tanh, aten.tanh.default) and _only_user(tanh)):
            continue
        inner = _scaled(tanh.args[0], 0.7978845608028654)
        if not (_is(inner, aten.add.Tensor) and _only_user(inner) and inner.args[0] is y):
            continue
        cube = _scaled(inner.args[1], 0.044715)
        if _is(cube, aten.pow.Tensor_Scalar) and _only_user(cube) and cube.args[0] is y and cube.args[1] == 3:
            return (aten.gelu.default, (y,), (one_plus, tanh, tanh.args[0], inner, inner.args[1], cube, half),
                    {"approximate": "tanh"})
    return None


@_rewrite
def matmul_bias(n):
    """view [..., n] of addmm(b, view(x [..., k], [-1, k]), w [k, n]) (GPT-2's Conv1D), each used once."""
    if not _is(n, *_VIEWS):
        return None
    mm = n.args[0]
    if not (_is(mm, aten.addmm.default) and _only_user(mm)) or mm.kwargs.get("beta", 1) != 1 \
            or mm.kwargs.get("alpha", 1) != 1 or len(mm.args) != 3:
        return None
    b, flat, w = mm.args
    if not (_is(flat, *_VIEWS) and _only_user(flat)):
        return None
    x = flat.args[0]
    xs, ws, out = _shape(x), _shape(w), _shape(n)
    if xs is None or ws is None or out is None or len(ws) != 2 or len(xs) < 2 or _shape(b) != (ws[1],) \
            or out != (*xs[:-1], ws[1]) or xs[-1] != ws[0]:
        return None
    return _ops().matmul_bias.default, (x, w, b, None), (mm, flat)


@_rewrite
def matmul_bias_activation(n):
    """gelu (erf or tanh), relu or silu of a matmul_bias used only by it."""
    act = _activation(n)
    mm = n.args[0] if act is not None else None
    if not (_is(mm, _ops().matmul_bias.default) and _only_user(mm) and mm.args[3] is None):
        return None
    x, w, b, _ = mm.args
    return _ops().matmul_bias.default, (x, w, b, act), (mm,)


def split_qkv_heads(g: fx.Graph) -> int:
    done = 0
    for n in list(g.nodes):
        if not _is(n, aten.split.Tensor) or len(n.users) != 3:
            continue
        ys = _shape(n.args[0])
        if ys is None or len(ys) != 3 or len(n.args) < 3 or n.args[2] % 3 != 2 or n.args[1] * 3 != ys[2]:
            continue
        parts = {}
        for item in n.users:
            if not (_is(item, operator.getitem) and _only_user(item)):
                break
            view = next(iter(item.users))
            if not (_is(view, *_VIEWS) and _only_user(view)):
                break
            t = next(iter(view.users))
            vs = _shape(view)
            if not _is(t, aten.transpose.int) or sorted(d % 4 for d in t.args[1:3]) != [1, 2] or vs is None \
                    or len(vs) != 4 or vs[:2] != ys[:2]:
                break
            parts[item.args[1]] = (t, vs[2], vs[3], (view, item))
        if sorted(parts) != [0, 1, 2] or len({p[1:3] for p in parts.values()}) != 1 or parts[0][2] % TILE:
            continue
        with g.inserting_before(n):
            fused = g.call_function(_ops().split_qkv_heads.default, (n.args[0], parts[0][1]))
        for i, (t, _h, _d, dead) in parts.items():
            with g.inserting_before(t):
                out = g.call_function(operator.getitem, (fused, i))
            _replace(t, out, dead)
        g.erase_node(n)
        done += 1
    return done


PASSES = (identities, duplicates, arange_index, true_ands, noop_resizes, inverse_permutes, noop_views, concat_heads, view_chains,
          noop_views, cat_slices, cat_empties, gelu_tanh, matmul_bias, split_qkv_heads,
          qkv_heads, linear_activation, matmul_bias_activation, add_layer_norm, rms_norm, residual_bias,
          rotary_embedding, decode_heads, cache_update, grouped_attention, padded_heads, attention_masks,
          paged_caches_in_place)


def run(gm: fx.GraphModule, example_inputs=None) -> dict:
    """Every pass on gm's graph, in order; returns how many rewrites each made."""
    from . import vision  # (conv + batch norm + activation, residual add + activation: its own file)
    done: dict = {}
    for p in (*vision.PASSES, *PASSES):
        done[p.__name__] = done.get(p.__name__, 0) + p(gm.graph)
    gm.graph.lint()
    gm.recompile()
    return done
