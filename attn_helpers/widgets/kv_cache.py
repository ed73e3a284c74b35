"""09 · Efficient attention: how much memory a KV cache takes, with one key/value head per query
head (multi-head), per group of query heads (grouped-query) or one for all (multi-query).

Three bars, always in the same order, so moving a slider shows at once what sharing key/value heads saves
(:func:`attn_helpers.lab.kv_cache_bytes`). With ``windows=True`` (lesson 12) two more controls say how many
layers are sliding-window layers and how many tokens they keep (:func:`attn_helpers.lab.windowed_kv_cache_bytes`).
13 · The cache that does not grow: while the sliders show a model whose cache is something else
(:data:`attn_helpers.lab.MODEL_CACHE_SIZES`: DeepSeek-V3's latents, Qwen3-Next's hybrid of attention and linear
layers), a fourth bar gives its cache as published (:func:`attn_helpers.lab.model_cache_bytes`).
"""

from __future__ import annotations

import html

import ipywidgets as W
from matplotlib.figure import Figure

from ..core import check_kv_heads
from ..lab import (MODEL_ATTENTION_SIZES, MODEL_CACHE_SIZES, WINDOWED_ATTENTION_SIZES, kv_cache_bytes, model_cache_bytes,
                   windowed_kv_cache_bytes)
from ._base import WIDE, Explorer, bar_rows, check_choice, in_units, int_slider, set_bar

__all__ = ["KVCacheCalculator"]

BAR_COLOURS = ("#0072B2", "#E69F00", "#009E73")  # Okabe-Ito: multi-head, grouped-query, multi-query
PUBLISHED_COLOUR = "#CC79A7"  # Okabe-Ito reddish purple: the fourth bar, a model's cache as published
PUBLISHED_KINDS = {"latent": "latent (MLA)", "hybrid": "hybrid: 1 in 4 layers attends"}
KINDS = ("multi-head", "grouped-query", "multi-query")
SEQ_LENS = tuple(2 ** p for p in range(9, 18))  # 512 ... 131072 tokens
DTYPES = (("float32 (4 bytes)", 4), ("float16 / bfloat16 (2 bytes)", 2), ("8-bit (1 byte)", 1))
HEAD_DIMS = (32, 64, 96, 128, 256)
OWN_SIZES = "(your own sizes)"
WINDOWS = (("none (all global)", 0), ("128", 128), ("512", 512), ("1,024", 1024), ("4,096", 4096))


def _divisors(n: int) -> list[int]:
    """The group counts G that a number of query heads H allows: every divisor of H."""
    return [d for d in range(1, n + 1) if n % d == 0]


def format_bytes(n: float) -> str:
    """A byte count in a few characters: 512 B, 3 KiB, 1.25 GiB (binary units, 1 GiB = 2**30 bytes)."""
    return in_units(n, ((2 ** 30, " GiB"), (2 ** 20, " MiB"), (2 ** 10, " KiB")), "{:.0f} B")


class KVCacheCalculator(Explorer):
    """Lessons 09, 12 and 13:
    KV-cache memory of a decoder for chosen heads, key/value groups, layers, sequence length and dtype.

    ``num_kv_heads`` is the number of key/value heads ``G``: each is shared by ``num_heads / G`` query heads, so
    ``num_heads`` must be a multiple of ``G`` (the ``G`` slider offers only those). ``batch`` is fixed when it is
    made. The ``model`` menu (:meth:`choose_model`: ``MODEL_ATTENTION_SIZES``, ``MODEL_CACHE_SIZES``, with
    ``windows`` ``WINDOWED_ATTENTION_SIZES``) sets heads, groups, layers and ``head_dim`` to a published model's;
    the title names the model whenever the sliders match one.
    """

    def __init__(self, num_heads: int = 64, num_kv_heads: int = 8, num_layers: int = 80, seq_len: int = 4096,
                 dtype_bytes: int = 2, *, head_dim: int = 128, batch: int = 1, windows: bool = False) -> None:
        kv_cache_bytes(num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=head_dim, seq_len=seq_len,
                       batch=batch, dtype_bytes=dtype_bytes)  # reject bad sizes before building anything
        check_kv_heads(num_heads, num_kv_heads)
        check_choice("seq_len", seq_len, SEQ_LENS)
        check_choice("dtype_bytes", dtype_bytes, dict(DTYPES).values())
        check_choice("head_dim", head_dim, HEAD_DIMS)
        self.batch = batch
        self.presets = {**MODEL_ATTENTION_SIZES, **MODEL_CACHE_SIZES, **(WINDOWED_ATTENTION_SIZES if windows else {})}
        controls = {
            "num_heads": int_slider("query heads H", num_heads, 1, 128),
            # only the group counts that divide H: every position of the sliders can be drawn
            "num_kv_heads": W.SelectionSlider(options=_divisors(num_heads), value=num_kv_heads,
                                              description="KV heads (groups) G", style=WIDE, continuous_update=False),
            "num_layers": int_slider("layers", num_layers, 1, 128),
            "seq_len": W.SelectionSlider(options=[(f"{n:,}", n) for n in SEQ_LENS], value=seq_len,
                                         description="tokens cached", style=WIDE, continuous_update=False),
            "dtype_bytes": W.Dropdown(options=DTYPES, value=dtype_bytes, description="dtype", style=WIDE),
            "head_dim": W.Dropdown(options=HEAD_DIMS, value=head_dim, description="head_dim", style=WIDE),
        }
        if windows:  # lesson 12: how many layers keep only a window of tokens
            controls["window"] = W.Dropdown(options=WINDOWS, value=0, description="window", style=WIDE)
            controls["local_layers"] = int_slider("sliding-window layers", 0, 0, num_layers)
            controls["num_layers"].observe(self._on_layers, names="value")  # at most every layer is a local one
        self.model_menu = W.Dropdown(options=[OWN_SIZES, *self.presets], value=OWN_SIZES, description="model",
                                     style=WIDE)
        self._syncing_menu = False
        self.wanted_groups = num_kv_heads  # the G last chosen: H moved away and back gives it again
        # observed before the explorer's own refresh (registered first): G follows H before the picture is drawn
        controls["num_heads"].observe(self._on_heads, names="value")
        controls["num_kv_heads"].observe(self._on_groups, names="value")
        super().__init__(controls, figsize=(8.0, 2.8))
        self.model_menu.observe(lambda change: self.choose_model(change["new"]), names="value")
        self.widget.children = (self.model_menu, *self.widget.children)

    def _on_heads(self, change: dict) -> None:
        """H moved: G offers the divisors of the new H, at the largest one up to the G last chosen."""
        groups = self.controls["num_kv_heads"]
        options = _divisors(change["new"])
        # one message to the page, not three (options, then index 0, then the value): the page redraws G's slider once
        with self._hold(), self._hold("_following"), groups.hold_sync():
            groups.options = options
            groups.value = max(d for d in options if d <= self.wanted_groups)

    _following = False

    def _on_groups(self, change: dict) -> None:
        if not self._following:
            self.wanted_groups = change["new"]

    def _on_layers(self, change: dict) -> None:
        self.controls["local_layers"].max = change["new"]  # a lower max lowers the value with it

    def choose_model(self, name: str) -> None:
        """Set the sliders to the published sizes of model ``name`` (one the menu offers)."""
        if self._syncing_menu or name == OWN_SIZES:
            return
        if name not in self.presets:
            raise ValueError(f"name must be one of {list(self.presets)}, got {name!r}")
        sizes = self.presets[name]
        window = {"window": sizes.get("window", 0), "local_layers": sizes.get("local_layers", 0)} \
            if "window" in self.controls else {}
        self.set(num_heads=sizes["num_heads"], num_kv_heads=sizes["num_kv_heads"], num_layers=sizes["num_layers"],
                 head_dim=sizes["head_dim"], **window)

    def counted(self, num_heads: int, num_kv_heads: int, num_layers: int, seq_len: int, dtype_bytes: int, head_dim: int,
                window: int = 0, local_layers: int = 0) -> tuple[str | None, dict[str, int], int | None]:
        """At these control values (G divides H, the sliders see to it; the sliding-window layers are at most the
        layers): the published model with these sizes (or ``None``), the cache's bytes for each kind
        (:data:`KINDS`: G = H, the chosen G, 1), and a model of ``MODEL_CACHE_SIZES``'s cache as published."""
        model = next((name for name, sizes in self.presets.items()
                      if (sizes["num_heads"], sizes["num_kv_heads"], sizes["num_layers"], sizes["head_dim"],
                          sizes.get("window", 0), sizes.get("local_layers", 0))
                      == (num_heads, num_kv_heads, num_layers, head_dim, window, local_layers)), None)
        common = dict(num_layers=num_layers, head_dim=head_dim, seq_len=seq_len, batch=self.batch,
                      dtype_bytes=dtype_bytes)
        # lesson 12: with a window, the local layers keep only the last `window` tokens
        sizes = {kind: (windowed_kv_cache_bytes(local_layers=local_layers, window=window, num_kv_heads=g, **common)
                        if window else kv_cache_bytes(num_kv_heads=g, **common))
                 for kind, g in zip(KINDS, (num_heads, num_kv_heads, 1))}
        published = model_cache_bytes(model, seq_len=seq_len, batch=self.batch, dtype_bytes=dtype_bytes) \
            if model in MODEL_CACHE_SIZES else None
        return model, sizes, published

    def draw(self, figure: Figure) -> None:
        self.ax = figure.subplots()
        # the last row: a model's cache as published, shown for such a model (it names itself in its label)
        (*self.bars, self.published_bar), (*self.labels, self.published_label) = bar_rows(
            self.ax, [*BAR_COLOURS, PUBLISHED_COLOUR], len(KINDS) + 1, right=1.6, fontsize=9)
        self.ax.set_yticks(range(len(KINDS) + 1), [*KINDS, ""])
        self.ax.invert_yaxis()  # multi-head on top
        self.title = self.ax.set_title("", fontsize=9)  # two lines, each within the figure for every model and setting
        figure.subplots_adjust(left=0.17, right=0.98, top=0.78, bottom=0.06)
        # the axes and their labels are drawn once
        self.dynamic([*self.bars, *self.labels, self.published_bar, self.published_label, self.title])

    def update(self, num_heads: int, num_kv_heads: int, num_layers: int, seq_len: int, dtype_bytes: int,
               head_dim: int, window: int = 0, local_layers: int = 0) -> str:
        model, sizes, published = self._counted = self.counted(num_heads, num_kv_heads, num_layers, seq_len,
                                                               dtype_bytes, head_dim, window, local_layers)
        with self._hold("_syncing_menu"):  # the menu names the model whenever the sliders match one
            self.model_menu.value = model or OWN_SIZES
        top = sizes["multi-head"]
        for bar, label, kind, g in zip(self.bars, self.labels, KINDS, (num_heads, num_kv_heads, 1)):
            set_bar(bar, label, sizes[kind] / top,
                    f"{format_bytes(sizes[kind])}  (G = {g}, {100 * sizes[kind] / top:.3g}%)")
        self.published_bar.set_visible(published is not None)
        self.published_label.set_visible(published is not None)
        if published is not None:
            kind = PUBLISHED_KINDS[str(MODEL_CACHE_SIZES[model]["kind"])]
            set_bar(self.published_bar, self.published_label, published / top,
                    f"as published: {format_bytes(published)}  ({kind}, {100 * published / top:.3g}%)")
        kept = (f"({num_layers - local_layers} layers × {seq_len:,} + {local_layers} layers × "
                f"{min(window, seq_len):,}) tokens" if window else f"{num_layers} layers × {seq_len:,} tokens")
        self.title.set_text((f"{model}: " if model else "") + f"KV cache = 2 × {kept}\n× G × head_dim {head_dim} × "
                            f"{dtype_bytes} bytes" + (f" × batch {self.batch}" if self.batch != 1 else ""))
        saved = top - sizes["grouped-query"]
        if published is not None:
            return (f"{model} | as published {format_bytes(published)} vs multi-head {format_bytes(top)} "
                    f"({100 * published / top:.3g}%)")
        return ((f"{model} | " if model else "") + f"grouped-query {format_bytes(sizes['grouped-query'])} vs multi-head {format_bytes(top)}: "
                f"saves {format_bytes(saved)} ({100 * saved / top:.3g}%)")

    def describe(self, num_heads: int, num_kv_heads: int, num_layers: int, seq_len: int, dtype_bytes: int,
                 head_dim: int, window: int = 0, local_layers: int = 0) -> str:
        model, sizes, _ = self._counted  # update's
        return (f"Bars of the KV cache of {model or 'a decoder'} ({num_layers} layers, {seq_len:,} tokens, head_dim "
                f"{head_dim}, {dtype_bytes} bytes a number): multi-head (G = {num_heads}) "
                f"{format_bytes(sizes['multi-head'])}, grouped-query (G = {num_kv_heads}) "
                f"{format_bytes(sizes['grouped-query'])}, multi-query (G = 1) {format_bytes(sizes['multi-query'])}.")

    def table(self, num_heads: int, num_kv_heads: int, num_layers: int, seq_len: int, dtype_bytes: int,
              head_dim: int, window: int = 0, local_layers: int = 0) -> str:
        model, sizes, published = self._counted  # update's
        formula = (f"2 (K and V) x {num_layers} layers x {self.batch} batch x G x {seq_len:,} tokens x "
                   f"{head_dim} head_dim x {dtype_bytes} bytes")
        if window:  # lesson 12: the sliding-window layers keep at most `window` tokens
            formula = (f"2 (K and V) x ({num_layers - local_layers} global layers x {seq_len:,} tokens + "
                       f"{local_layers} sliding-window layers x {min(window, seq_len):,} tokens) x {self.batch} batch "
                       f"x G x {head_dim} head_dim x {dtype_bytes} bytes")
        rows = "".join(f"<tr><td>{kind}</td><td style='text-align:right'>{g}</td>"
                       f"<td style='text-align:right'>{sizes[kind]:,}</td></tr>"
                       for kind, g in zip(KINDS, (num_heads, num_kv_heads, 1)))
        if published is not None:
            rows += (f"<tr><td>{html.escape(model)} as published</td><td></td>"
                     f"<td style='text-align:right'>{published:,}</td></tr>")
        return (f"<p><code>{html.escape(formula)}</code></p><table><tr><th>kind</th><th>G</th>"
                f"<th>bytes</th></tr>{rows}</table>")
