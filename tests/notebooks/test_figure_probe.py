"""The kernel side of the figure-size test (``tools/figure_probe.py``), in a child Python of its own.

It must record, for a picture rendered the ways the lessons render (the inline backend's PNG,
an explorer's blit), the font size of its smallest text in the picture's pixels, keyed by the pixels
the page will show. The child keeps the wrapped backend out of this test process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tools.figure_probe import read_records, smallest_texts, startup_code

CHILD = r"""
import hashlib, io, json, sys
import numpy as np
from PIL import Image
exec(compile(open(sys.argv[1]).read(), "startup", "exec"))
assert "_attn_figure_probe" not in globals()  # the startup file leaves no name in the namespace
from matplotlib.figure import Figure
from matplotlib.backends.backend_agg import FigureCanvasAgg

def rgb_hash(png):
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))[..., :3]
    return hashlib.sha256(np.ascontiguousarray(pixels).tobytes()).hexdigest()

# a static figure, saved as the inline backend does (tight box): 6-pt tick labels at 100 dpi = 8.33 px
fig = Figure(figsize=(3, 2), dpi=100)
ax = fig.subplots()
ax.plot([1, 2, 3], [1, 4, 9])
ax.tick_params(labelsize=6)
ax.set_title("a title", fontsize=12)
buffer = io.BytesIO()
FigureCanvasAgg(fig).print_figure(buffer, format="png", bbox_inches="tight")
static = rgb_hash(buffer.getvalue())

# an explorer's blit: full draw without the animated text, then the text drawn on the kept picture
fig2 = Figure(figsize=(3, 2), dpi=80)
canvas = FigureCanvasAgg(fig2)
ax2 = fig2.subplots()
ax2.tick_params(labelsize=10)
label = ax2.text(0.5, 0.5, "$10^{2}$", fontsize=9, animated=True)
canvas.draw()
background = canvas.copy_from_bbox(fig2.bbox)
pictures = []
for step in range(2):
    canvas.restore_region(background)
    label.set_text("$10^{%d}$" % step)
    fig2.draw_artist(label)
    pixels = np.asarray(canvas.buffer_rgba())[..., :3]
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="png")
    pictures.append(rgb_hash(out.getvalue()))

print(json.dumps({"static": static, "blits": pictures}))
"""


def test_probe_records_the_smallest_text_of_each_rendered_picture(tmp_path: Path, clean_env: dict[str, str]):
    records = tmp_path / "records"
    startup = tmp_path / "startup.py"
    startup.write_text(startup_code(records), encoding="utf-8")
    run = subprocess.run([sys.executable, "-c", CHILD, str(startup)], capture_output=True, text=True,
                         env=clean_env, timeout=120)
    assert run.returncode == 0, run.stderr
    hashes = json.loads(run.stdout.strip().splitlines()[-1])
    found = read_records(records)

    static = found[hashes["static"]]  # the PNG's pixels are the recorded ones
    assert abs(static["smallest_px"] - 6 * 100 / 72) < 1e-6, static
    assert static["dpi"] == 100 and static["n_texts"] >= 3, static

    for blit in hashes["blits"]:
        record = found[blit]
        # the exponent of the 9-pt mathtext label (0.7 of its size in matplotlib's default math fonts), at 80 dpi
        assert record["smallest_px"] < 9 * 80 / 72 * 0.8, record
        assert record["smallest"][0][1].startswith("$10^{"), record
        # the background's tick labels are kept across restore_region (10 pt at 80 dpi = 11.1 px)
        assert any(abs(px - 10 * 80 / 72) < 0.01 for px, _ in record["smallest"][1:]), record
    json.dumps(found)  # every record is plain JSON


def test_smallest_texts_orders_by_size():
    assert smallest_texts([(9.0, "b"), (7.5, "a"), (12.0, "c")], 2) == [(7.5, "a"), (9.0, "b")]


def test_a_picture_fails_below_8_px_as_displayed_or_without_a_record():
    from tools.figure_sizes import Figure, table

    record = {"smallest_px": 11.1, "smallest": [[11.1, "0.44"]], "n_texts": 40}
    natural = Figure("05.ipynb", "figure 2 (cell 59)", False, (1414, 364), 934.0, None, 647.0, record)
    assert natural.problem() is not None and "7.3 px as displayed" in natural.problem()  # 05's old grid, at 66 %
    assert Figure("05.ipynb", "figure 2", False, (907, 638), 907.0, None, 647.0, record).problem() is None
    assert "cannot be measured" in Figure("x.ipynb", "figure 0", False, (100, 80), 100.0, None, 647.0, None).problem()
    textless = Figure("x.ipynb", "figure 0", False, (100, 80), 50.0, None, 647.0, {"smallest_px": None, "n_texts": 0})
    assert textless.problem() is None
    tall = Figure("08.ipynb", "explorer 0", True, (704, 448), 704.0, 700.0, 647.0, record)
    assert not tall.fits() and natural.fits()
    assert "7.3" in table([natural]) and "700/647" in table([tall])
