"""10 · Positions: rotary embeddings (RoPE) as rotating arrows."""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.figure import Figure

from ..core import DEFAULT_BASE, apply_rope, rope_frequencies, rope_pair_scores
from ..views import HEAD_COLOURS
from ._base import Explorer, check_int, int_slider

__all__ = ["RopeExplorer"]

KEY_POSITION = 40  # n: where the key sits; the query sits at n + offset
Q_COLOUR, K_COLOUR = HEAD_COLOURS[4], HEAD_COLOURS[0]  # blue query, orange key (Okabe-Ito)
PANEL_COLOURS = (HEAD_COLOURS[5], HEAD_COLOURS[2], HEAD_COLOURS[3])  # fastest, chosen, slowest pair


class RopeExplorer(Explorer):
    """Lesson 10: Slide the offset between a query and a key, and pick a feature pair, to watch RoPE rotate them.

    One query and one key with the same content (``k = q``, ``head_dim`` features, seeded). RoPE cuts each into
    ``head_dim / 2`` pairs of features (feature ``i`` with ``i + head_dim/2``, as ``apply_rope``); each pair is an
    arrow in its own plane, and pair ``i`` turns by ``θ_i`` per position: pair 0 fastest (1 radian per position),
    pair ``head_dim/2 - 1`` slowest. The key sits at position ``n = KEY_POSITION``, the query at ``m = n + offset``.
    The picture shows the arrows of the fastest, the chosen and the slowest pair, and the raw score ``q_m · k_n``
    against the offset, with each shown pair's term of it: only the angle *between* the arrows, ``offset · θ_i``,
    matters, so the curve is the same wherever the two tokens sit.
    """

    def __init__(self, offset: int = 3, pair: int = 2, *, head_dim: int = 16, base: float = DEFAULT_BASE,
                 max_offset: int = 32, seed: int = 0) -> None:
        self.theta = rope_frequencies(head_dim, base=base)  # (P,), checks head_dim and base
        self.pairs = head_dim // 2
        check_int("max_offset", max_offset, 1, KEY_POSITION)
        if not -max_offset <= offset <= max_offset:
            raise ValueError(f"offset must lie in [-{max_offset}, {max_offset}], got {offset}")
        if not 0 <= pair < self.pairs:
            raise ValueError(f"pair must be a pair index in [0, {self.pairs - 1}] for head_dim={head_dim}, got {pair}")
        self.head_dim, self.base, self.max_offset = head_dim, float(base), max_offset
        self.q = torch.randn(head_dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)  # (head_dim,)
        self.k = self.q.clone()  # same content: the score changes only through the positions
        self.offsets = torch.arange(-max_offset, max_offset + 1)  # (T,)
        self.terms = rope_pair_scores(self.q, self.k, self.offsets, base=base).numpy()  # (T, P): each pair's term of q·k
        self.raw_scores = self.terms.sum(axis=1)  # (T,): q_m · k_n at each offset
        controls = {"offset": int_slider("offset m - n", offset, -max_offset, max_offset),
                    "pair": int_slider("feature pair i", pair, 0, self.pairs - 1)}
        super().__init__(controls, figsize=(11.0, 3.6), dpi=80)

    def arrows(self, offset: int) -> tuple[np.ndarray, np.ndarray]:
        """The rotated pairs of the query at ``m = KEY_POSITION + offset`` and of the key at ``n = KEY_POSITION``:
        ``(P, 2)`` each, pair ``i`` as the point ``(x_i, x_(i + head_dim/2))``."""
        q_rot = apply_rope(self.q[None], [KEY_POSITION + offset], base=self.base)[0]  # (head_dim,)
        k_rot = apply_rope(self.k[None], [KEY_POSITION], base=self.base)[0]  # (head_dim,)
        return q_rot.reshape(2, -1).T.numpy(), k_rot.reshape(2, -1).T.numpy()  # (P, 2) each: the halves side by side

    def shown_pairs(self, pair: int) -> tuple[int, int, int]:
        return (0, pair, self.pairs - 1)

    def draw(self, figure: Figure) -> None:
        grid = figure.add_gridspec(1, 4, width_ratios=[1, 1, 1, 2.4], wspace=0.35, left=0.03, right=0.98,
                                   bottom=0.16, top=0.8)
        self.arrow_axes = [figure.add_subplot(grid[0, i]) for i in range(3)]
        radius = 1.15 * float((self.q.reshape(2, -1) ** 2).sum(dim=0).sqrt().max())  # the longest pair
        circle = np.linspace(0, 2 * math.pi, 100)
        self.q_lines, self.k_lines = [], []
        for ax, colour in zip(self.arrow_axes, PANEL_COLOURS):
            ax.set(xlim=(-radius, radius), ylim=(-radius, radius), aspect="equal", xticks=[], yticks=[])
            ax.spines[:].set(edgecolor=colour, linewidth=2)
            ax.plot(radius / 1.15 * np.cos(circle), radius / 1.15 * np.sin(circle), color="0.85", lw=0.8)
            self.k_lines.append(ax.plot([0, 0], [0, 0], color=K_COLOUR, lw=5, marker="o", ms=9, markevery=[1],
                                        label="key at n")[0])  # wider, so a query on top of it leaves it visible
            self.q_lines.append(ax.plot([0, 0], [0, 0], color=Q_COLOUR, lw=2, marker="o", ms=5, markevery=[1],
                                        label="query at m")[0])
        self.titles = [ax.set_title("", fontsize=9) for ax in self.arrow_axes]  # two lines: the pair; the angle
        self.arrow_axes[0].legend(loc="lower left", fontsize=8, frameon=False, handlelength=1.2,
                                  bbox_to_anchor=(-0.05, -0.22), ncol=2)
        self.ax_curve = figure.add_subplot(grid[0, 3])
        offsets = self.offsets.numpy()
        self.ax_curve.plot(offsets, self.raw_scores, color="black", lw=1.8, label="raw score q·k (all pairs)")
        self.term_lines = [self.ax_curve.plot(offsets, self.terms[:, p], color=c, lw=1.2, label=label)[0]
                            for p, c, label in zip(self.shown_pairs(0), PANEL_COLOURS,
                                                   ("fastest pair 0", "chosen pair", f"slowest pair {self.pairs - 1}"))]
        top = float(np.abs(self.raw_scores).max())
        self.ax_curve.set(ylim=(-1.1 * top, 1.75 * top), xlim=(offsets[0], offsets[-1]))  # room for the legend
        self.ax_curve.axhline(0, color="0.8", lw=0.8)
        self.ax_curve.set(xlabel="offset m - n (query position - key position)", ylabel="raw score")
        self.ax_curve.legend(loc="upper right", fontsize=8, frameon=False, ncol=2)
        self.marker = self.ax_curve.axvline(0, color="0.4", ls=":", lw=1.2)
        self.dots = self.ax_curve.plot([0, 0, 0, 0], [0, 0, 0, 0], ls="none", marker="o", ms=5, color="black")[0]
        self.title = figure.suptitle("", fontsize=10)
        self.dynamic([*self.k_lines, *self.q_lines, *self.titles,  # the query drawn over the key, as in a full draw
                      self.term_lines[1],
                      self.marker, self.dots, self.title])

    def update(self, offset: int, pair: int) -> str:
        q_pairs, k_pairs = self.arrows(offset)  # (P, 2) each
        row = offset + self.max_offset  # index into self.offsets
        names = ("fastest", "chosen", "slowest")
        for title, q_line, k_line, p, name in zip(self.titles, self.q_lines, self.k_lines, self.shown_pairs(pair), names):
            q_line.set_data([0, q_pairs[p, 0]], [0, q_pairs[p, 1]])
            k_line.set_data([0, k_pairs[p, 0]], [0, k_pairs[p, 1]])
            title.set_text(f"{name}: pair {p}, θ = {self.theta[p].item():.3g}\n"
                           f"apart {self._degrees(offset, p):.0f}°, term {self.terms[row, p]:+.2f}")
        self.term_lines[1].set_ydata(self.terms[:, pair])
        self.marker.set_xdata([offset, offset])
        shown = self.shown_pairs(pair)
        self.dots.set_data([offset] * 4, [self.raw_scores[row], *(self.terms[row, p] for p in shown)])
        self.title.set_text(f"query at m = {KEY_POSITION + offset}, key at n = {KEY_POSITION}: "
                            f"raw score q·k = {self.raw_scores[row]:.2f} (at offset 0: {self.raw_scores[self.max_offset]:.2f})")
        return (f"pair {pair} turns {self.theta[pair].item():.3g} rad per position, "
                f"arrows {self._degrees(offset, pair):.0f}° apart, term {self.terms[row, pair]:+.2f}; raw score q·k = {self.raw_scores[row]:.2f}")

    def _degrees(self, offset: int, pair: int) -> float:
        """The angle from the key's arrow to the query's, ``offset · θ_pair``, in degrees in (-180, 180]."""
        angle = math.degrees(offset * self.theta[pair].item()) % 360.0
        return angle - 360.0 if angle > 180.0 else angle

    def describe(self, offset: int, pair: int) -> str:
        row = offset + self.max_offset
        return (f"Three circles with a query arrow (position {KEY_POSITION + offset}) and a key arrow (position "
                f"{KEY_POSITION}) for feature pairs 0, {pair} and {self.pairs - 1}, {self._degrees(offset, 0):.0f}°, "
                f"{self._degrees(offset, pair):.0f}° and {self._degrees(offset, self.pairs - 1):.0f}° apart; beside them "
                f"the raw score q·k against the offset from -{self.max_offset} to {self.max_offset}, "
                f"{self.raw_scores[row]:.2f} at offset {offset} ({self.raw_scores[self.max_offset]:.2f} at 0).")

    def table(self, offset: int, pair: int) -> str:
        row = offset + self.max_offset
        bold = " style='font-weight:bold'"
        cells = "".join(
            f"<tr{bold if p == pair else ''}><td>{p}</td>"
            f"<td style='text-align:right'>{self.theta[p].item():.3g}</td>"
            f"<td style='text-align:right'>{2 * math.pi / self.theta[p].item():,.0f}</td>"
            f"<td style='text-align:right'>{self.terms[row, p]:+.2f}</td></tr>" for p in range(self.pairs))
        return ("<table><tr><th>pair i</th><th>θ_i (rad per position)</th><th>positions per full turn</th>"
                f"<th>term of the raw score</th></tr>{cells}</table>")
