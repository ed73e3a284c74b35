"""09 · Efficient attention: how much memory a KV cache takes, with one key/value head per query
head (multi-head), per group of query heads (grouped-query) or one for all (multi-query).

Three bars, always in the same order, so moving a slider shows at once what sharing key/value
heads saves; the numbers come from :func:`attn_helpers.lab.kv_cache_bytes`. A menu of real models
(:data:`attn_helpers.lab.MODEL_ATTENTION_SIZES`) sets the sliders to a model the learner has heard of.
"""

from __future__ import annotations

import html

import ipywidgets as W
from matplotlib.figure import Figure

from ..core import check_kv_heads
from ..lab import MODEL_ATTENTION_SIZES, kv_cache_bytes
from ._base import Explorer, InvalidCombination

__all__ = ["KVCacheCalculator"]

BAR_COLOURS = ("#0072B2", "#E69F00", "#009E73")  # Okabe-Ito: multi-head, grouped-query, multi-query
KINDS = ("multi-head", "grouped-query", "multi-query")
SEQ_LENS = tuple(2 ** p for p in range(9, 18))  # 512 ... 131072 tokens
DTYPES = (("float32 (4 bytes)", 4), ("float16 / bfloat16 (2 bytes)", 2), ("8-bit (1 byte)", 1))
HEAD_DIMS = (32, 64, 96, 128, 256)
OWN_SIZES = "(your own sizes)"


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
    a multiple of ``G`` (otherwise the calculator says why, in words). ``batch`` is fixed when it is
    made. The ``model`` menu (:meth:`choose_model`) sets heads, groups, layers and ``head_dim`` to a
    published model's; the title names the model whenever the sliders match one.
    """

    def __init__(self, num_heads: int = 64, kv_groups: int = 8, num_layers: int = 80, seq_len: int = 4096,
                 dtype_bytes: int = 2, *, head_dim: int = 128, batch: int = 1) -> None:
        kv_cache_bytes(num_layers=num_layers, num_kv_heads=kv_groups, head_dim=head_dim, seq_len=seq_len,
                       batch=batch, dtype_bytes=dtype_bytes)  # reject bad sizes before building anything
        if seq_len not in SEQ_LENS:
            raise ValueError(f"seq_len must be one of {list(SEQ_LENS)}, got {seq_len}")
        if dtype_bytes not in dict((b, n) for n, b in DTYPES):
            raise ValueError(f"dtype_bytes must be one of {[b for _, b in DTYPES]}, got {dtype_bytes}")
        if head_dim not in HEAD_DIMS:
            raise ValueError(f"head_dim must be one of {list(HEAD_DIMS)}, got {head_dim}")
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
            "head_dim": W.Dropdown(options=HEAD_DIMS, value=head_dim, description="head_dim", style=style),
        }
        self.model_menu = W.Dropdown(options=[OWN_SIZES, *MODEL_ATTENTION_SIZES], value=OWN_SIZES,
                                     description="model", style=style)
        self._syncing_menu = False
        super().__init__(controls, figsize=(8.0, 2.8))
        self.model_menu.observe(lambda change: self.choose_model(change["new"]), names="value")
        self.widget.children = (self.model_menu, *self.widget.children)

    # -- real models ----------------------------------------------------------------------------
    def choose_model(self, name: str) -> None:
        """Set the sliders to the published sizes of model ``name`` (a key of ``MODEL_ATTENTION_SIZES``)."""
        if self._syncing_menu or name == OWN_SIZES:
            return
        if name not in MODEL_ATTENTION_SIZES:
            raise ValueError(f"name must be one of {list(MODEL_ATTENTION_SIZES)}, got {name!r}")
        sizes = MODEL_ATTENTION_SIZES[name]
        self.set(num_heads=sizes["num_heads"], kv_groups=sizes["num_kv_heads"], num_layers=sizes["num_layers"],
                 head_dim=sizes["head_dim"])

    @staticmethod
    def model_matching(num_heads: int, kv_groups: int, num_layers: int, head_dim: int) -> str | None:
        """The name of the published model with these sizes, or ``None``."""
        for name, sizes in MODEL_ATTENTION_SIZES.items():
            if (sizes["num_heads"], sizes["num_kv_heads"], sizes["num_layers"], sizes["head_dim"]) == \
                    (num_heads, kv_groups, num_layers, head_dim):
                return name
        return None

    def _sync_menu(self, name: str | None) -> None:
        self._syncing_menu = True
        try:
            self.model_menu.value = name or OWN_SIZES
        finally:
            self._syncing_menu = False

    # -- counting -------------------------------------------------------------------------------
    def sizes(self, num_heads: int, kv_groups: int, num_layers: int, seq_len: int,
              dtype_bytes: int, head_dim: int) -> dict[str, int]:
        """Bytes of the cache for each kind (:data:`KINDS`) at these control values."""
        try:
            check_kv_heads(num_heads, kv_groups)  # the library's one message for a group count that does not divide
        except ValueError as problem:
            raise InvalidCombination(str(problem)) from None
        groups = {"multi-head": num_heads, "grouped-query": kv_groups, "multi-query": 1}
        return {kind: kv_cache_bytes(num_layers=num_layers, num_kv_heads=g, head_dim=head_dim,
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
        self.ax.set_xlim(0, 1.6)  # bar lengths relative to multi-head's; the labels give the numbers
        self.title = self.ax.set_title("", fontsize=10)
        figure.subplots_adjust(left=0.17, right=0.98, top=0.83, bottom=0.06)
        self.dynamic([*self.bars, *self.labels, self.title])  # the axes and their labels are drawn once

    def update(self, num_heads: int, kv_groups: int, num_layers: int, seq_len: int, dtype_bytes: int,
               head_dim: int) -> str:
        model = self.model_matching(num_heads, kv_groups, num_layers, head_dim)
        self._sync_menu(model)  # the menu names the model whenever the sliders match one
        sizes = self.sizes(num_heads, kv_groups, num_layers, seq_len, dtype_bytes, head_dim)
        top = sizes["multi-head"]
        groups = {"multi-head": num_heads, "grouped-query": kv_groups, "multi-query": 1}
        for bar, label, kind in zip(self.bars, self.labels, KINDS):
            bar.set_width(sizes[kind] / top)
            label.set_x(sizes[kind] / top + 0.02)
            label.set_text(f"{format_bytes(sizes[kind])}  (G = {groups[kind]}, {100 * sizes[kind] / top:.3g}%)")
        self.title.set_text((f"{model}: " if model else "") +
                            f"KV cache = 2 × {num_layers} layers × {seq_len:,} tokens × G × head_dim {head_dim} × "
                            f"{dtype_bytes} bytes" + (f" × batch {self.batch}" if self.batch != 1 else ""))
        saved = top - sizes["grouped-query"]
        return ((f"{model} | " if model else "") + f"grouped-query {format_bytes(sizes['grouped-query'])} vs multi-head {format_bytes(top)}: "
                f"saves {format_bytes(saved)} ({100 * saved / top:.3g}%)")

    def table(self, num_heads: int, kv_groups: int, num_layers: int, seq_len: int, dtype_bytes: int,
              head_dim: int) -> str:
        sizes = self.sizes(num_heads, kv_groups, num_layers, seq_len, dtype_bytes, head_dim)
        formula = (f"2 (K and V) x {num_layers} layers x {self.batch} batch x G x {seq_len:,} tokens x "
                   f"{head_dim} head_dim x {dtype_bytes} bytes")
        rows = "".join(f"<tr><td>{kind}</td><td style='text-align:right'>{g}</td>"
                       f"<td style='text-align:right'>{sizes[kind]:,}</td></tr>"
                       for kind, g in zip(KINDS, (num_heads, kv_groups, 1)))
        return (f"<p><code>{html.escape(formula)}</code></p><table><tr><th>kind</th><th>G</th>"
                f"<th>bytes</th></tr>{rows}</table>")
