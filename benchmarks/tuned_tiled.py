"""A tuned version of lesson 09's tiled attention, raced against PyTorch's kernel by ``attention.py``.

Optional reading. ``attn_helpers.tiled_attention`` is the loop lesson 09 teaches, written to be read:
blocks of queries and keys, a running max ``m``, a running sum ``l``, an accumulator ``acc`` and the
online-softmax rescale. This file is the same loop with the tricks that bring it close to
``torch.nn.functional.scaled_dot_product_attention`` on a CPU (its docstring lists them): base-2
scores, reused buffers, query blocks sized by the thread count, and rescaling only when the max has
grown by more than ``RESCALE_ABOVE``. ``tests/test_efficient.py`` checks it against PyTorch with the
same tests as the readable loop (it loads this file by its path).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attn_helpers.core.arguments import broadcast_shape, check_mask, check_positive_int, check_qkv

__all__ = ["tuned_tiled_attention"]

LOG2_E = 1.0 / math.log(2.0)  # log2(e): exp(x) == exp2(x * LOG2_E)
# The loop keeps its rows' running max m for a tile unless a score there exceeds it by more than this
# (base 2): the unnormalised weights it sums are then at most 2 ** 8, far from float32's limit of 2 ** 128.
RESCALE_ABOVE = 8.0


def _safe_max(m: Tensor) -> Tensor:
    """``m`` with ``-inf`` replaced by 0, so ``exp(s - m)`` is 0 (not NaN) on rows that saw only ``-inf``."""
    return m.masked_fill(torch.isneginf(m), 0.0)


def tuned_tiled_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    scale: float | None = None,
    block_size: int = 256,
    is_causal: bool = False,
) -> Tensor:
    """:func:`attn_helpers.tiled_attention` tuned for speed on a CPU: the same arguments and result.

    Arguments, conventions (masks, ``scale``, ``is_causal``) and errors are those of ``tiled_attention``.

    For each block of queries, the loop visits the key/value blocks of ``block_size`` keys and keeps, per
    query row, a running reference ``m`` (the row's max so far, or a little below it: see below), the
    running sum ``l`` of ``exp(score - m)`` and the running weighted sum ``acc`` of values, rescaling ``l``
    and ``acc`` by ``exp(m_old - m_new)`` whenever ``m`` moves (the online softmax). For contiguous inputs
    that need no broadcasting (folded into one batch axis as views, not copies), the largest temporary is
    one block of scores, ``block_size`` by ``block_size`` for each head (and each math thread), so memory
    grows linearly with ``N``.

    A query block has ``block_size`` rows for each of PyTorch's math threads (``torch.get_num_threads()``):
    ``block_size`` rows with one thread, twice as many with two. Each operation then has about a
    ``block_size`` x ``block_size`` tile's worth of work per thread (PyTorch divides it among its threads),
    close to how FlashAttention-2 gives each query block a group of GPU threads of its own, and the threads
    wait for each other half as often per tile as with ``block_size``-row blocks.

    Three more speed tricks. As in FlashAttention, the scores are computed in base 2 (``q`` is multiplied by
    ``scale * log2(e)``, an additive mask by ``log2(e)``) and ``exp2`` replaces ``exp``, since
    ``exp(x) = 2 ** (x * log2(e))``; every ``exp`` above is then an ``exp2``, and the weights are the same.
    Second, FlashAttention-4's idea of rescaling only when the maximum has grown enough to matter (not with
    an added mask, whose -1e9 would swamp a shifted float32 score): the first key blocks use the exact
    update until every row of the query block has seen a key; from then on, a tile moves ``m`` only if some
    row of it (over all leading axes) has a score more than ``RESCALE_ABOVE`` (8, in base 2) above its
    ``m``, and then every row with a score above its ``m`` moves ``m`` up to its largest score in the tile.
    So ``m`` may sit up to 8 below the row's true max: each unnormalised weight is at most ``2 ** 8``, far
    from overflowing, and ``acc / l`` is the same whichever ``m`` both were taken against. A tile that moves
    no ``m`` skips the rescaling, and its scores come out of one product already minus ``m`` (``baddbmm``).
    Third, every tile of scores, scaled query block and running ``acc`` is written into the same few
    buffers, allocated once per call (:func:`_scratch`), instead of into new tensors (a mask's tile is still
    cut out anew). Autograd cannot follow those writes, so while autograd is on, inputs that require grad
    are refused with a ``ValueError``.
    """
    q, k, v = check_qkv(q, k, v)
    check_positive_int("block_size", block_size)
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be True or False, got {is_causal!r}")
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        needs = ", ".join(name for name, t in zip("qkv", (q, k, v)) if t.requires_grad)
        raise ValueError(f"tuned_tiled_attention computes attention without gradients (it writes every tile into "
                         f"reused buffers), but {needs} require grad: call it under torch.no_grad(), or use "
                         f"scaled_dot_product_attention to train")
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores_shape = broadcast_shape(q.shape[:-2], k.shape[:-2]) + (n_q, n_k)
    if mask is not None:
        mask = check_mask(mask, torch.Size(scores_shape)).expand(scores_shape)  # (..., N_q, N_k), a view
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    batch = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])  # the leading axes of the output
    d_k, d_v = q.shape[-1], v.shape[-1]
    # Every leading axis folded into one: (BH, N, d), a view where the input's layout allows, else a copy.
    q3 = q.expand(*batch, n_q, d_k).reshape(-1, n_q, d_k)  # (BH, N_q, d_k)
    k_t3 = k.expand(*batch, n_k, d_k).reshape(-1, n_k, d_k).transpose(1, 2)  # (BH, d_k, N_k), a view of that
    v3 = v.expand(*batch, n_k, d_v).reshape(-1, n_k, d_v)  # (BH, N_k, d_v)
    out = q.new_empty(q3.shape[0], n_q, d_v)  # (BH, N_q, d_v), filled block by block
    can_block = mask is not None or is_causal  # only then can a score be -inf (a row may see no key yet)
    # An added mask is added after the product: with -1e9 in it, float32 cannot hold q k^T - m and the
    # mask apart (-1e9 is 64 apart from its neighbours there), so with one the scores are never shifted.
    can_shift = mask is None or mask.dtype == torch.bool
    # Scratch memory for one tile, allocated once and reused by every tile (see _scratch).
    q_rows = block_size * torch.get_num_threads()  # queries per block: block_size for each thread
    bq, bk = min(q_rows, n_q), min(block_size, n_k)
    q_buf = q.new_empty(q3.shape[0] * bq * d_k)  # one scaled query block
    s_buf = q.new_empty(q3.shape[0] * bq * bk)  # one tile of scores, then its weights
    acc_buf = q.new_empty(q3.shape[0] * bq * d_v)  # the running weighted values of one query block
    for i0 in range(0, n_q, q_rows):
        i1 = min(i0 + q_rows, n_q)
        q_blk = torch.mul(q3[:, i0:i1], scale * LOG2_E,  # (BH, bq, d_k): its scores come out in base 2
                          out=_scratch(q_buf, (q3.shape[0], i1 - i0, d_k)))
        m = l = acc = None  # (BH, bq, 1) running max and sum of exp2, (BH, bq, d_v) running weighted values
        shifted = False  # True once every row of the block has seen a key (and no added mask): scores minus m
        k_end = min(n_k, i1) if is_causal else n_k  # causal: keys after the block's last query never count
        for j0 in range(0, k_end, block_size):
            j1 = min(j0 + block_size, k_end)
            s = _scratch(s_buf, (q3.shape[0], i1 - i0, j1 - j0))  # (BH, bq, bk): one block of scores
            if shifted:
                torch.baddbmm(m, q_blk, k_t3[:, :, j0:j1], beta=-1, out=s)  # q k^T - m, in one product
            else:
                torch.bmm(q_blk, k_t3[:, :, j0:j1], out=s)
            if mask is not None:
                m_blk = mask[..., i0:i1, j0:j1]  # (..., bq, bk)
                s_all = s.view(*batch, i1 - i0, j1 - j0)  # (..., bq, bk), the same numbers
                (s_all.masked_fill_(~m_blk, float("-inf")) if m_blk.dtype == torch.bool
                 else s_all.add_(m_blk.to(s.dtype), alpha=LOG2_E))  # an added mask, in base 2 too
            if is_causal and j1 > i0 + 1:  # the block reaches past the diagonal
                rows = torch.arange(i0, i1, device=q.device)[:, None]  # (bq, 1)
                cols = torch.arange(j0, j1, device=q.device)[None, :]  # (1, bk)
                s = s.masked_fill_(cols > rows, float("-inf"))
            if shifted:
                _fold_shifted_tile(s, m, l, acc, v3[:, j0:j1])
                continue
            block_max = s.amax(dim=-1, keepdim=True)  # (BH, bq, 1)
            m_new = block_max if m is None else torch.maximum(m, block_max)  # (BH, bq, 1)
            safe = m_new if can_block is False else _safe_max(m_new)  # (BH, bq, 1): no -inf without a mask
            p = s.sub_(safe).exp2_()  # (BH, bq, bk), unnormalised weights of this block (in place of s)
            if m is None:  # the first key block: nothing to rescale yet
                l = p.sum(dim=-1, keepdim=True)  # (BH, bq, 1)
                acc = torch.bmm(p, v3[:, j0:j1], out=_scratch(acc_buf, (q3.shape[0], i1 - i0, d_v)))  # (BH, bq, d_v)
            else:
                rescale = (m - safe).exp2_()  # (BH, bq, 1)
                l = l.mul_(rescale).add_(p.sum(dim=-1, keepdim=True))  # (BH, bq, 1)
                acc = acc.mul_(rescale).baddbmm_(p, v3[:, j0:j1])  # (BH, bq, d_v): acc * rescale + p @ v
            m = m_new
            shifted = can_shift and (not can_block or not torch.isneginf(m).any().item())  # every row saw a key
        if acc is None:  # no key at all (N_k = 0): nothing to attend to
            out[:, i0:i1] = 0.0
            continue
        out[:, i0:i1] = acc.div_(l.masked_fill_(l == 0, 1.0))  # rows with nothing to attend to stay 0
    return out.view(*batch, n_q, d_v)  # (..., N_q, d_v)


def _fold_shifted_tile(s: Tensor, m: Tensor, l: Tensor, acc: Tensor, v_blk: Tensor) -> None:
    """Fold one tile of scores, already minus the running max ``m`` (base 2), into ``l`` and ``acc``.

    ``m`` is kept unless some score is more than ``RESCALE_ABOVE`` above it; then every row with a score
    above its ``m`` moves ``m`` up to its largest score, and ``l`` and ``acc`` are rescaled to match.
    ``s (BH, bq, bk)`` becomes the tile's weights; ``m``, ``l (BH, bq, 1)`` and ``acc (BH, bq, d_v)``
    are updated in place.
    """
    above = s.amax(dim=-1, keepdim=True)  # (BH, bq, 1): each row's largest score, measured from m
    if above.max().item() > RESCALE_ABOVE:  # a score more than 8 (base 2) above its m: move m
        grow = above.clamp_(min=0.0)  # (BH, bq, 1), 0 where no score is above m
        s.sub_(grow)
        m.add_(grow)
        rescale = grow.neg_().exp2_()  # (BH, bq, 1)
        l.mul_(rescale)
        acc.mul_(rescale)
    p = s.exp2_()  # (BH, bq, bk), each at most 2 ** 8: weights relative to 2 ** m
    l.add_(p.sum(dim=-1, keepdim=True))  # (BH, bq, 1)
    acc.baddbmm_(p, v_blk)  # (BH, bq, d_v): acc + p @ v


def _scratch(buffer: Tensor, shape: tuple[int, ...]) -> Tensor:
    """The first ``prod(shape)`` numbers of the flat ``buffer``, viewed as a contiguous ``shape``.

    ``tuned_tiled_attention`` writes every tile into the same few buffers instead of asking for new memory
    each time: a fresh block of a few MiB can come from the operating system as untouched pages, and
    touching each page the first time costs a page fault (at N = 512, 8 heads of 64, the loop with a new
    tensor per tile took about 2,000 page faults per call; this one 256, the output's own pages).
    """
    return buffer[:math.prod(shape)].view(shape)
