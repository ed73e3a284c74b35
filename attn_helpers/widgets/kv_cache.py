"""09 · Efficient attention: how much memory a KV cache takes, with one key/value head per query
head (multi-head), per group of query heads (grouped-query) or one for all (multi-query).

Three bars, always in the same order, so moving a slider shows at once what sharing key/value
heads saves; the numbers come from :func:`attn_helpers.efficient.kv_cache_bytes`.
"""

from __future__ import annotations

import html

import ipywidgets as W
from matplotlib.figure import Figure

from ..measure import kv_cache_bytes
from ._base import Explorer, InvalidCombination

__all__ = ["KVCacheCalculator"]

BAR_COLOURS = ("#0072B2", "#E69F00", "#009E73")  # Okabe-Ito: multi-head, grouped-query, multi-query
KINDS = ("multi-head", "grouped-query", "multi-query")
SEQ_LENS = tuple(2 ** p for p in range(9, 18))  # 512 ... 131072 tokens
DTYPES = (("float32 (4 bytes)", 4), ("float16 / bfloat16 (2 bytes)", 2), ("8-bit (1 byte)", 1))


def format_bytes(n: float) -> str:
    """A byte count in a few characters: 512 B, 3.0 KiB, 1.25 GiB (binary units, 1 GiB = 2**30 bytes)."""
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


class KVCacheCalculator(Explorer):
    """KV-cache memory of a decoder for chosen heads, key/value groups, layers, sequence length and dtype.

    ``KVCacheCalculator(num_heads=64, kv_groups=8, num_layers=80, seq_len=4096, dtype_bytes=2,
    head_dim=128, batch=1)``; display it as a cell's last line. ``kv_groups`` is the number of
    key/value heads ``G``: each is shared by ``num_heads / G`` query heads, so ``num_heads`` must be
    a multiple of ``G`` (otherwise the calculator says why, in words). ``head_dim`` and ``batch`` are
    fixed when it is made.
    """

    def __init__(self, num_heads: int = 64, kv_groups: int = 8, num_layers: int = 80, seq_len: int = 4096,
                 dtype_bytes: int = 2, *, head_dim: int = 128, batch: int = 1) -> None:
        kv_cache_bytes(num_layers=num_layers, num_kv_heads=kv_groups, head_dim=head_dim, seq_len=seq_len,
                       batch=batch, dtype_bytes=dtype_bytes)  # reject bad sizes before building anything
        if seq_len not in SEQ_LENS:
            raise ValueError(f"seq_len must be one of {list(SEQ_LENS)}, got {seq_len}")
        if dtype_bytes not in dict((b, n) for n, b in DTYPES):
            raise ValueError(f"dtype_bytes must be one of {[b for _, b in DTYPES]}, got {dtype_bytes}")
        self.head_dim = head_dim
        self.batch = batch
        style = {"description_width": "initial"}
        controls = {
            "num_heads": W.IntSlider(value=num_heads, min=1, max=128, description="query heads H", style=style,
                                     continuous_update=False),
            "kv_groups": W.IntSlider(value=kv_groups, min=1, max=128, description="KV heads (groups) G",
                                     style=style, continuous_update=False),
            "num_layers": W.IntSlider(value=num_layers, min=1, max=128, description="layers", style=style,
                                      continuous_update=False),
            "seq_len": W.SelectionSlider(options=[(f"{n:,}", n) for n in SEQ_LENS], value=seq_len,
                                         description="tokens cached", style=style, continuous_update=False),
            "dtype_bytes": W.Dropdown(options=DTYPES, value=dtype_bytes, description="dtype", style=style),
        }
        super().__init__(controls, figsize=(8.0, 2.8))

    # -- counting -------------------------------------------------------------------------------
    def sizes(self, num_heads: int, kv_groups: int, num_layers: int, seq_len: int,
              dtype_bytes: int) -> dict[str, int]:
        """Bytes of the cache for each kind (:data:`KINDS`) at these control values."""
        if kv_groups > num_heads or num_heads % kv_groups:
            options = [g for g in range(1, num_heads + 1) if num_heads % g == 0]
            raise InvalidCombination(
                f"{num_heads} query heads cannot be shared out evenly over {kv_groups} key/value heads: "
                f"{num_heads} / {kv_groups} = {num_heads / kv_groups:.2f} query heads per group, not a whole "
                f"number (try G in {options})")
        groups = {"multi-head": num_heads, "grouped-query": kv_groups, "multi-query": 1}
        return {kind: kv_cache_bytes(num_layers=num_layers, num_kv_heads=g, head_dim=self.head_dim,
                                     seq_len=seq_len, batch=self.batch, dtype_bytes=dtype_bytes)
                for kind, g in groups.items()}

    # -- drawing ----------------------------------------------------------------------------------
    def draw(self, figure: Figure) -> None:
        self.ax = figure.subplots()
        rows = list(range(len(KINDS)))
        self.bars = self.ax.barh(rows, [1] * len(rows), color=BAR_COLOURS)
        self.ax.set_yticks(rows, KINDS)
        self.ax.invert_yaxis()  # multi-head on top
        self.labels = [self.ax.text(0, r, "", va="center", fontsize=9) for r in rows]
        self.ax.set_xticks([])  # each bar carries its number
        self.ax.spines[["top", "right", "bottom"]].set_visible(False)
        self.title = self.ax.set_title("", fontsize=10)
        figure.subplots_adjust(left=0.17, right=0.98, top=0.83, bottom=0.06)

    def update(self, num_heads: int, kv_groups: int, num_layers: int, seq_len: int, dtype_bytes: int) -> str:
        sizes = self.sizes(num_heads, kv_groups, num_layers, seq_len, dtype_bytes)
        top = sizes["multi-head"]
        groups = {"multi-head": num_heads, "grouped-query": kv_groups, "multi-query": 1}
        for bar, label, kind in zip(self.bars, self.labels, KINDS):
            bar.set_width(sizes[kind])
            label.set_x(sizes[kind] + 0.02 * top)
            label.set_text(f"{format_bytes(sizes[kind])}  (G = {groups[kind]}, {100 * sizes[kind] / top:.3g}%)")
        self.ax.set_xlim(0, 1.6 * top)
        self.title.set_text(f"KV cache = 2 × {num_layers} layers × {seq_len:,} tokens × G × head_dim {self.head_dim} × "
                            f"{dtype_bytes} bytes (batch {self.batch})")
        saved = top - sizes["grouped-query"]
        return (f"grouped-query {format_bytes(sizes['grouped-query'])} vs multi-head {format_bytes(top)}: "
                f"saves {format_bytes(saved)} ({100 * saved / top:.3g}%)")

    def table(self, num_heads: int, kv_groups: int, num_layers: int, seq_len: int, dtype_bytes: int) -> str:
        sizes = self.sizes(num_heads, kv_groups, num_layers, seq_len, dtype_bytes)
        formula = (f"2 (K and V) x {num_layers} layers x {self.batch} batch x G x {seq_len:,} tokens x "
                   f"{self.head_dim} head_dim x {dtype_bytes} bytes")
        rows = "".join(f"<tr><td>{kind}</td><td style='text-align:right'>{g}</td>"
                       f"<td style='text-align:right'>{sizes[kind]:,}</td></tr>"
                       for kind, g in zip(KINDS, (num_heads, kv_groups, 1)))
        return (f"<p><code>{html.escape(formula)}</code></p><table><tr><th>kind</th><th>G</th>"
                f"<th>bytes</th></tr>{rows}</table>")
