"""Plain, tiled (readable and tuned), PyTorch's fused and torch.nn.MultiheadAttention, side by side, as N grows.

    python -m benchmarks.attention                      # N = 128 ... 4096 on the CPU (and CUDA if present)
    python -m benchmarks.attention --sizes 256 1024 --repeats 3 --threads 1

A script, not a test: timings depend on the machine and on what else runs on it, so it prints them
(with the machine's load) instead of asserting them. Six implementations of the same attention,
``softmax(q k^T / sqrt(head_dim)) v`` on ``q, k, v`` of shape ``(B, H, N, head_dim)``:

* plain:  ``attn_helpers.scaled_dot_product_attention`` (lessons 02-07), builds three N x N matrices
  (raw scores, masked scores, weights: each is printed in the lessons);
* fair:   the careful plain version (``fair_plain``): the same formula keeping only two N x N matrices
  (the scores, scaled in place, and the weights), as lesson 09 writes it;
* tiled:  ``attn_helpers.tiled_attention`` (lesson 09), FlashAttention's loop in Python, never does;
* tuned:  ``tuned_tiled_attention`` (``benchmarks/tuned_tiled.py``), the same loop tuned for speed;
* sdpa:   ``torch.nn.functional.scaled_dot_product_attention``, PyTorch's fused kernel;
* nn.MHA: ``torch.nn.MultiheadAttention(H * head_dim, H, batch_first=True)`` in eval mode on
  ``x (B, N, H * head_dim)``; it also runs its four projections (8 N (H head_dim)^2 extra FLOPs), so
  it does more work than the others.

Time: the median over at least ``--repeats`` rounds after one warm-up run; the implementations take
turns in every round, so a burst of load from elsewhere hits all of them alike. Where a call is short,
more rounds are run, until each implementation has been timed for ``--min-seconds`` in all (at most
``--max-rounds``): with 5 rounds of 10 ms calls, tiled/sdpa at N = 512 moved by up to 0.3 between
runs minutes apart on this project's 2-core machine, too much to tell 1.2x from 1.4x. The table's
ratios are to plain; the closing tiled/sdpa ratio is the median of the ratios taken within each
round, printed with their middle half (quartiles), so a slow stretch of the machine cancels out of it,
and the same for tuned/sdpa. Those ratios come from rounds of their own, after the table's, in which only
tiled, tuned and sdpa take turns
(``--pair-rounds``, 15 by default, and more until each was timed for ``--pair-seconds``): the table's
rounds give N = 4096 only five pairs, each a few seconds after plain and the fair version have
allocated and freed up to 1.5 GiB, and on this project's 2-core machine their median moved between
1.16 and 1.57 from one run to the next. The ratio of the two fastest calls is printed too: a program
that takes the CPU away only ever adds time, and more to tiled's many short operations (at two threads
each waits for both threads) than to SDPA's one, so the fastest calls are the closest to each one's
own cost.

Peak memory, each way honest about what it sees:

* CPU, tensor accounting: the peak bytes held by the tensors PyTorch operations return
  (``attn_helpers.measure_peak_memory``), exact and repeatable; blind to scratch memory that a fused
  kernel (sdpa, nn.MHA's fast path) allocates and frees inside one operation.
* CPU, resident memory (Linux, glibc): what the operating system sees, kernel scratch included.
  After all timings, glibc is told to give every block of 64 KiB or more its own pages (returned
  when freed); then each call runs once to warm up, glibc hands the pages of its free blocks back
  (``malloc_trim``), the process's peak resident memory is reset to what is resident
  (``/proc/self/clear_refs``), and the call runs again: its new peak (``VmHWM``) minus the resident
  memory before it is reported. Counted in whole pages; blocks that reuse pages still resident are
  missed, so it is a lower bound. Skipped with ``--no-rss`` or where this is not possible.
* CUDA: ``torch.cuda.max_memory_allocated()`` above the memory in use before the call.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from attn_helpers import measure_peak_memory, scaled_dot_product_attention, tiled_attention
from benchmarks.tuned_tiled import tuned_tiled_attention

IMPLS = ("plain", "fair", "tiled", "tuned", "sdpa", "nn.MHA")
RACED = ("tiled", "tuned")  # each raced against sdpa in rounds of their own
MiB = 2 ** 20


def fair_plain(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d_k)) v`` with two N x N matrices: the scores (scaled in place), the weights."""
    scores = (q @ k.transpose(-2, -1)).mul_(q.shape[-1] ** -0.5)  # (B, H, N, N)
    return torch.softmax(scores, dim=-1) @ v  # (B, H, N, N) weights, then (B, H, N, head_dim)


def make_calls(N: int, *, batch: int, heads: int, head_dim: int, block_size: int,
               device: str) -> dict[str, Callable[[], torch.Tensor]]:
    """One zero-argument call per implementation, on fresh seeded inputs of length ``N``."""
    g = torch.Generator(device="cpu").manual_seed(N)
    q, k, v = (torch.randn(batch, heads, N, head_dim, generator=g).to(device) for _ in range(3))  # (B, H, N, hd)
    x = torch.randn(batch, N, heads * head_dim, generator=g).to(device)  # (B, N, H * hd)
    mha = torch.nn.MultiheadAttention(heads * head_dim, heads, batch_first=True).to(device).eval()
    return {
        "plain": lambda: scaled_dot_product_attention(q, k, v),
        "fair": lambda: fair_plain(q, k, v),
        "tiled": lambda: tiled_attention(q, k, v, block_size=block_size),
        "tuned": lambda: tuned_tiled_attention(q, k, v, block_size=block_size),
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
        "nn.MHA": lambda: mha(x, x, x, need_weights=False)[0],
    }


def time_side_by_side(calls: dict[str, Callable[[], torch.Tensor]], device: str, *, repeats: int,
                      min_seconds: float, max_rounds: int) -> dict[str, list[float]]:
    """Seconds of every round per implementation; every round runs each once, starting with a different one.

    At least ``repeats`` rounds, then more until every implementation's times add up to ``min_seconds``
    (at most ``max_rounds`` rounds in all).
    """
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    names = list(calls)
    times: dict[str, list[float]] = {name: [] for name in names}
    with torch.no_grad():
        for name in names:  # warm-up
            calls[name]()
        sync()
        r = 0
        while r < repeats or (r < max_rounds and min(sum(t) for t in times.values()) < min_seconds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                sync()
                start = time.perf_counter()
                calls[name]()
                sync()
                times[name].append(time.perf_counter() - start)
            r += 1
    return times


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """The lower quartile, the median and the upper quartile of ``values``."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    low, mid, high = statistics.quantiles(values, n=4)
    return low, statistics.median(values), high


def peak_bytes(call: Callable[[], torch.Tensor], device: str) -> int:
    """Peak memory of one call: tensor accounting on the CPU, the allocator's own peak on CUDA."""
    if device == "cuda":
        with torch.no_grad():
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            call()
            torch.cuda.synchronize()
            return torch.cuda.max_memory_allocated() - before
    return measure_peak_memory(call)


# ------------------------------------------------------------------------------------ RSS check


def _status_kib(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``: resident now, ``VmHWM``: its peak), in bytes."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Set the process's peak resident memory back to what is resident now (Linux 4.0 and later)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def _mmap_large_blocks() -> bool:
    """Make glibc give every new block of 64 KiB or more its own pages, returned to the system when freed.

    By default glibc raises that threshold as large blocks are freed (up to 32 MiB), then serves
    blocks below it from memory it keeps, which the resident count cannot see being reused. Called
    only after every timing, because it changes how fast large allocations are.
    """
    libc = _libc()
    return bool(libc and libc.mallopt(-3, 64 * 1024))  # M_MMAP_THRESHOLD


def _release_free_memory() -> None:
    """Hand the pages of every free block glibc keeps back to the system, so reusing them shows."""
    libc = _libc()
    if libc:
        libc.malloc_trim(0)


def rss_peak(call: Callable[[], torch.Tensor]) -> int | None:
    """Peak resident memory one call adds (bytes), as the operating system sees it; None if it cannot tell.

    A warm-up call first (libraries, kernels and thread pools set themselves up and stay resident;
    its temporaries are freed), then the peak is reset to what is resident now and the call runs again.
    Sees everything, kernel scratch included, in whole pages: with :func:`_mmap_large_blocks` and
    :func:`_release_free_memory`, every block that needs fresh pages, which is nearly all of them.
    """
    with torch.no_grad():
        call()
        _release_free_memory()
        before = _status_kib("VmRSS")
        if before is None or not _reset_peak_rss():
            return None
        call()
        after = _status_kib("VmHWM")
    return None if after is None else max(after - before, 0)


# ------------------------------------------------------------------------------------ report


def _fraction(part: float, whole: float, spec: str = ".3f") -> str:
    return format(part / whole, spec) if whole else "n/a"


def run_device(device: str, args: argparse.Namespace) -> None:
    sizes = args.sizes
    print(f"\n== {device}: float32, B={args.batch}, H={args.heads}, head_dim={args.head_dim}, "
          f"tiled block_size={args.block_size}, median of at least {args.repeats} rounds "
          f"(more where calls are short: {args.min_seconds:g} s of each in all, up to {args.max_rounds}) ==")
    times: dict[int, dict[str, float]] = {}
    rounds: dict[int, dict[str, list[float]]] = {}
    pairs: dict[int, dict[str, list[float]]] = {}  # tiled, tuned and sdpa alone, for their ratios
    peaks: dict[int, dict[str, int]] = {}
    rss: dict[int, dict[str, int | None]] = {}
    for N in sizes:
        calls = make_calls(N, batch=args.batch, heads=args.heads, head_dim=args.head_dim,
                           block_size=args.block_size, device=device)
        rounds[N] = time_side_by_side(calls, device, repeats=args.repeats, min_seconds=args.min_seconds,
                                      max_rounds=args.max_rounds)
        times[N] = {name: statistics.median(t) for name, t in rounds[N].items()}
        pairs[N] = time_side_by_side({name: calls[name] for name in (*RACED, "sdpa")}, device,
                                     repeats=args.pair_rounds, min_seconds=args.pair_seconds,
                                     max_rounds=max(args.max_rounds, args.pair_rounds))
        peaks[N] = {name: peak_bytes(call, device) for name, call in calls.items()}
        del calls
        if device == "cuda":
            torch.cuda.empty_cache()

    print_table("time (ms), and each as a multiple of plain's", times, sizes, unit=1e-3, ratio_format=".2f")
    what = "tensors the operations return" if device == "cpu" else "torch.cuda.max_memory_allocated"
    print_table(f"peak memory (MiB; {what}), and each as a fraction of plain's", peaks, sizes, unit=MiB)

    if device == "cpu" and not args.no_rss and _mmap_large_blocks():  # after every timing: see its docstring
        for N in sizes:
            calls = make_calls(N, batch=args.batch, heads=args.heads, head_dim=args.head_dim,
                               block_size=args.block_size, device=device)
            rss[N] = {name: rss_peak(call) for name, call in calls.items()}
            del calls
    rss_known = bool(rss) and all(v is not None for r in rss.values() for v in r.values())
    if rss_known:
        print_table("peak resident memory added by one call (MiB; the operating system's count, fused kernels' "
                    "scratch included), and each as a fraction of plain's", rss, sizes, unit=MiB)
    elif device == "cpu" and not args.no_rss:
        print("\n(peak resident memory not measured: needs Linux's glibc and /proc/self/clear_refs)")

    top = sizes[-1]
    ratio = peaks[top]["tiled"] / peaks[top]["plain"]
    fair = peaks[top]["tiled"] / peaks[top]["fair"]
    print(f"\nN={top}: tiled peak memory {peaks[top]['tiled'] / MiB:.2f} MiB = {ratio:.1%} of plain's "
          f"{peaks[top]['plain'] / MiB:.2f} MiB and {fair:.1%} of the fair plain version's "
          f"(below a tenth of both: {max(ratio, fair) < 0.1})"
          + (f"; resident memory: {_fraction(rss[top]['tiled'], rss[top]['plain'], '.1%')} of plain's" if rss_known else ""))
    print(f"N={top}: time tiled/plain = {times[top]['tiled'] / times[top]['plain']:.2f}, "
          f"tuned/plain = {times[top]['tuned'] / times[top]['plain']:.2f}, "
          f"sdpa/plain = {times[top]['sdpa'] / times[top]['plain']:.2f}, "
          f"nn.MHA/plain = {times[top]['nn.MHA'] / times[top]['plain']:.2f}")
    for name in RACED:
        # The ratio within each round, then their median: what a slow stretch of the machine does to both cancels.
        within = {N: quartiles([t / s for t, s in zip(pairs[N][name], pairs[N]["sdpa"])]) for N in sizes}
        print(f"time {name}/sdpa, median of the ratios of rounds of tiled, tuned and sdpa alone [middle half] "
              f"(rounds): " + ", ".join(f"N={N} {mid:.2f} [{low:.2f}-{high:.2f}] ({len(pairs[N]['sdpa'])})"
                                        for N, (low, mid, high) in within.items()))
        # Load from elsewhere only ever adds time, so the fastest call of each is the closest to its own cost.
        fastest = {N: min(pairs[N][name]) / min(pairs[N]["sdpa"]) for N in sizes}
        print(f"time {name}/sdpa, fastest call / fastest call in those rounds: "
              + ", ".join(f"N={N} {ratio:.2f}" for N, ratio in fastest.items()))
    print("time tiled/fair plain: " + ", ".join(f"N={N} {times[N]['tiled'] / times[N]['fair']:.2f}" for N in sizes))
    print("time tuned/fair plain: " + ", ".join(f"N={N} {times[N]['tuned'] / times[N]['fair']:.2f}" for N in sizes))


def print_table(title: str, values: dict, sizes: list[int], *, unit: float, ratio_format: str = ".3f") -> None:
    """One table: a row per N, each implementation's value in ``unit``, then each as a ratio of plain's."""
    header = (f"{'N':>6} | " + " ".join(f"{name:>9}" for name in IMPLS) + " | "
              + " ".join(f"{name + '/plain':>12}" for name in IMPLS[1:]))
    print(f"\n{title}")
    print(header)
    print("-" * len(header))
    for N in sizes:
        row = values[N]
        print(f"{N:>6} | " + " ".join(f"{row[name] / unit:>9.2f}" for name in IMPLS) + " | "
              + " ".join(f"{_fraction(row[name], row['plain'], ratio_format):>12}" for name in IMPLS[1:]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024, 2048, 4096])
    parser.add_argument("--repeats", type=int, default=5, help="rounds at least (default 5)")
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="more rounds until each implementation was timed this long in all (default 1)")
    parser.add_argument("--max-rounds", type=int, default=200, help="rounds at most (default 200)")
    parser.add_argument("--pair-rounds", type=int, default=15,
                        help="rounds at least of tiled, tuned and sdpa alone, for their ratios (default 15)")
    parser.add_argument("--pair-seconds", type=float, default=3.0,
                        help="more of those rounds until each was timed this long in all (default 3)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (default: PyTorch's choice)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="auto: the CPU, then CUDA when a GPU is present")
    parser.add_argument("--no-rss", action="store_true", help="skip the peak resident memory measurement")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{torch.get_num_threads()} torch threads, load average {load:.1f} before the run")
    devices = ["cpu", "cuda"] if args.device == "auto" else [args.device]
    for device in devices:
        if device == "cuda" and not torch.cuda.is_available():
            print("\n(no CUDA GPU here: CPU only)" if args.device == "auto" else "\nCUDA requested but not available")
            continue
        run_device(device, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
