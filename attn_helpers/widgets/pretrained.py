"""Lesson 11's explorer: a real pretrained model's attention on the learner's own sentence.

The text box is not one of the explorer's ``controls`` (those are the sliders, named in the status
line): a sentence is the explorer's input, like the data of the other explorers, and changing it
runs the model again and redraws the figure for the new tokens. Moving a slider only changes the
heatmaps' data (:class:`~attn_helpers.widgets.Explorer`).
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as W
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..lab import PATTERNS, BertEncoder, attention_shares, one_thread
from ..views import WEIGHTS_CMAP, cells, heatmap
from ..views.learning import readable_labels
from ._base import WIDE, Explorer, InvalidCombination, check_int, int_slider

__all__ = ["PretrainedAttentionExplorer"]

DEFAULT_TEXT = "The cat sat on the mat because it was tired."
MAX_TOKENS = 32  # [CLS] and [SEP] included: more labels than this do not fit the heatmap
FRAME_COLOUR = "#b35806"


class PretrainedAttentionExplorer(Explorer):
    """Lesson 11: Type a sentence, pick a layer and a head: what that head of a real model attends to.

    ``model``: a :class:`attn_helpers.PretrainedModel` (from :func:`attn_helpers.load_pretrained`);
    ``encoder`` may pass an already built :class:`attn_helpers.BertEncoder` of it (the model rebuilt with the
    series' own steps; lesson 11 shows that it agrees with ``transformers``). A text box takes the sentence (press
    Enter or leave the box to apply it); an empty or too long sentence is explained in words. The picture shows
    the chosen head's weights with the sentence's tokens on both axes and, beside it, all heads of that layer,
    the chosen one framed. The status line gives the chosen head's share of attention on ``[CLS]``, ``[SEP]``,
    the previous and next token and the token itself (:func:`attn_helpers.attention_shares`)."""

    def __init__(self, model: Any, text: str = DEFAULT_TEXT, *, layer: int = 0, head: int = 0,
                 max_tokens: int = MAX_TOKENS, encoder: BertEncoder | None = None) -> None:
        self.model = model
        self.encoder = BertEncoder.from_pretrained(model) if encoder is None else encoder
        num_layers, num_heads = model.num_layers, model.num_heads
        check_int("layer", layer, 0, num_layers - 1)
        check_int("head", head, 0, num_heads - 1)
        check_int("max_tokens", max_tokens, 3, model.config["max_position_embeddings"])
        self.max_tokens = max_tokens
        self.tokens: list[str] = []
        self.weights: np.ndarray | None = None  # (L, H, N, N) for the current sentence
        self.problem = ""
        self._drawn_tokens: list[str] | None = None
        self.compute(text)
        if self.problem:
            raise ValueError(f"text: {self.problem}")
        self.text_box = W.Text(value=text, description="sentence", continuous_update=False,
                               layout=W.Layout(width="640px"), style=WIDE)
        controls = {"layer": int_slider("layer", layer, 0, num_layers - 1, continuous_update=True),
                    "head": int_slider("head", head, 0, num_heads - 1, continuous_update=True)}
        super().__init__(controls, figsize=(11.6, 5.6), dpi=80)  # 928 px: within OUTPUT_WIDTH_PX
        self.text_box.observe(self._on_text, names="value")
        sliders, *rest = self.widget.children
        self.widget.children = (sliders, self.text_box, *rest)  # the text box under the sliders

    def compute(self, text: str) -> None:
        """Tokenize ``text`` and run the model on it; or record in ``problem`` why that is not possible."""
        if not isinstance(text, str) or not text.strip():
            self.problem = "the sentence is empty: type a few words and press Enter"
            return
        encoded = self.model.tokenize(text.strip())
        n = encoded.input_ids.shape[1]
        if n > self.max_tokens:
            self.problem = (f"this sentence makes {n} tokens with [CLS] and [SEP]; the heatmap shows at most "
                            f"{self.max_tokens}: shorten it by {n - self.max_tokens} or more")
            return
        with one_thread(), torch.no_grad():  # tiny matrices: a second thread costs more than it saves
            output = self.encoder(encoded.input_ids, encoded.attention_mask)
        self.weights = output.stacked_attentions()[0].to(torch.float64).numpy()  # (L, H, N, N)
        self.tokens = encoded.tokens[0]
        self.problem = ""

    def _on_text(self, change: dict[str, Any]) -> None:
        try:
            self.compute(change["new"])
        except Exception as problem:  # a widget never shows a traceback
            self.problem = f"this sentence could not be read ({type(problem).__name__}: {problem})"
        self.refresh()

    def needs_redraw(self, layer: int, head: int) -> bool:
        return not self.problem and self.tokens != self._drawn_tokens

    def draw(self, figure: Figure) -> None:
        n, num_heads = len(self.tokens), self.model.num_heads
        blank = np.zeros((n, n))
        main = figure.add_axes((0.09, 0.2, 0.33, 0.68))
        # 8.5 px or more as shown: a long sentence (32 tokens) gets every second token labelled, not 7-px labels
        labels, fontsize = readable_labels(self.tokens, main, self.css_dpi)
        self.main_image = heatmap(blank, labels, ax=main, fontsize=fontsize, vmin=0.0, vmax=1.0, cmap=WEIGHTS_CMAP, annotate=False,
                                  colorbar=True, colorbar_label="attention weight", title=" ")
        self.main_title = main.title
        ncols = 4
        nrows = -(-num_heads // ncols)
        grid = figure.add_gridspec(nrows, ncols, left=0.56, right=0.985, bottom=0.05, top=0.86, wspace=0.12,
                                   hspace=0.3)
        self.panels = []
        for h in range(num_heads):
            ax = figure.add_subplot(grid[h // ncols, h % ncols])
            self.panels.append(cells(ax, blank, cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0))
            ax.set(xticks=[], yticks=[])
            ax.set_title(f"head {h}", fontsize=8, pad=2)
        self.grid_title = figure.text(0.7725, 0.93, " ", ha="center", va="bottom", fontsize=11)
        self.frame = Rectangle((0.0, 0.0), 0.1, 0.1, transform=figure.transFigure, fill=False, ec=FRAME_COLOUR,
                               lw=2.5)
        figure.add_artist(self.frame)
        self.dynamic([self.main_image, self.main_title, *self.panels, self.grid_title, self.frame])
        self._drawn_tokens = list(self.tokens)

    def update(self, layer: int, head: int) -> str:
        if self.problem:
            raise InvalidCombination(self.problem)
        weights = self.weights[layer]  # (H, N, N)
        self.main_image.set_data(weights[head])
        for image, w in zip(self.panels, weights):
            image.set_data(w)
        self.main_title.set_text(f"layer {layer}, head {head}")
        self.grid_title.set_text(f"all {len(self.panels)} heads of layer {layer}")
        self.frame.set_bounds(self.panels[head].axes.get_position().padded(0.004).bounds)  # figure coordinates
        shares = attention_shares(torch.from_numpy(weights[head][None]))  # (5,)
        parts = ", ".join(f"{p} {s:.2f}" for p, s in zip(PATTERNS, shares.tolist()))
        self._shares = f"This head's share on {parts}"
        return f"{len(self.tokens)} tokens; this head's share on {parts}"

    def describe(self, layer: int, head: int) -> str:
        return (f"Heatmap of layer {layer}, head {head}'s attention weights over the {len(self.tokens)} tokens "
                f"{' '.join(self.tokens)} (queries down, keys across), and beside it small heatmaps of all "
                f"{len(self.panels)} heads of layer {layer}, head {head} framed. {self._shares}.")

    def table(self, layer: int, head: int) -> str:
        tokens = " ".join(f"<code>{i}&nbsp;{html.escape(t)}</code>" for i, t in enumerate(self.tokens))
        return f'<div style="font-size:90%">tokens: {tokens}</div>'
