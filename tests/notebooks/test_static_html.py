"""A picture without a kernel: every explorer's output in a saved notebook shows an image where no widget can run.

The hosting service's notebook view, nbviewer and ``jupyter nbconvert --to html`` draw no live widgets.
Each notebook is rendered here as they do, with nbconvert's HTML exporter (lab template), **as committed**: the
project's runner (``scripts/run_notebooks.py``) saves no widget state in the notebook's metadata, so nbconvert's
``WidgetsDataTypeFilter`` skips the widget view and takes the next MIME type of its priority list (with widget
state saved, it drew the widget view: an empty ``Out[n]`` without the scripts of a CDN). Every explorer's output, found by its
``text/plain`` line (``HeadsExplorer(num_heads=4 ...)``, a class from ``attn_helpers.widgets`` that is an
``Explorer``), must render as exactly one ``<img>`` holding that output's own ``image/png``, and not as its
text line. Outputs are matched to the HTML by cell id (``id="cell-id=..."``) and position in the cell.

* ``test_every_explorer_output_renders_as_one_picture[NN]``: the committed notebooks, as committed (no widget
  state).
* ``test_a_notebook_run_now_renders_a_picture_per_explorer``: a notebook written here, with three
  explorers, a figure and a printed line, executed by the project's own runner (``scripts/run_notebooks.py``,
  a kernel of this environment importing this checkout), then rendered the same way; and the check,
  given the same notebook with one explorer's ``image/png`` removed, reports that output.
* ``test_the_browser_tests_count_explorer_pictures_as_explorers_not_figures``: after Run All, JupyterLab shows
  an explorer's live widget, not its picture; the browser test's expected number of static figures leaves them out.
"""

from __future__ import annotations

import base64
import copy
import os
import re
import warnings
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from tools.browser_support import CommittedNotebook, explorer_class_names, lesson_notebooks

REPO_ROOT = Path(__file__).resolve().parents[2]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CLASS_NAME = re.compile(r"([A-Za-z_]\w*)\(")


def explorer_name(output: dict, known: set[str]) -> str | None:
    """The explorer class an output displays, from its ``text/plain`` line; ``None`` for any other output."""
    text = output.get("data", {}).get("text/plain", "")
    text = "".join(text) if isinstance(text, list) else text
    match = CLASS_NAME.match(text)
    return match.group(1) if match and match.group(1) in known else None


def html_of(nb: nbformat.NotebookNode) -> str:
    """The notebook as nbconvert's HTML exporter renders it (without a kernel)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Outputs are what is tested: leaving the sources out makes it ten times faster (markdown's conversion).
        body, _ = HTMLExporter(template_name="lab", exclude_input=True, exclude_markdown=True).from_notebook_node(nb)
    shows_nothing = [str(w.message) for w in caught if "not able to be represented" in str(w.message)]
    assert not shows_nothing, f"outputs the HTML export cannot show: {shows_nothing}"
    return body


def missing_pictures(nb: nbformat.NotebookNode) -> tuple[list[str], int]:
    """What is wrong with each explorer output of ``nb`` rendered without widget state, and how many there are."""
    known = explorer_class_names()
    soup = BeautifulSoup(html_of(nb), "html.parser")
    problems, count = [], 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.get("outputs"):
            continue
        node = soup.find(id=f"cell-id={cell.id}")
        assert node is not None, f"cell {index} ({cell.id}) is not in the HTML"
        children = node.select(".jp-OutputArea-child")
        assert len(children) == len(cell.outputs), (
            f"cell {index}: {len(cell.outputs)} outputs but {len(children)} output areas in the HTML")
        for output, child in zip(cell.outputs, children):
            name = explorer_name(output, known)
            if name is None:
                continue
            count += 1
            where = f"cell {index} ({name})"
            images = child.find_all("img")
            png = output.get("data", {}).get("image/png")
            if f"{name}(" in child.get_text():
                problems.append(f"{where}: the text line is shown instead of (or beside) a picture")
            if len(images) != 1:
                problems.append(f"{where}: {len(images)} <img> where one picture belongs"
                                + ("" if png else " (the output has no image/png)"))
                continue
            source = images[0].get("src", "")
            if not png or source != f"data:image/png;base64,{png.strip()}":
                problems.append(f"{where}: the <img> does not show the output's own image/png ({source[:40]!r})")
            elif not base64.b64decode(png).startswith(b"\x89PNG\r\n\x1a\n"):
                problems.append(f"{where}: its image/png is not a PNG")
    return problems, count


@pytest.mark.parametrize("path", [p for p in lesson_notebooks()
                                  if any(explorer_name(o, explorer_class_names()) for c in
                                         nbformat.read(p, as_version=4).cells for o in c.get("outputs", []))],
                         ids=lambda p: p.name)
def test_every_explorer_output_renders_as_one_picture(path: Path):
    nb = nbformat.read(path, as_version=4)
    assert WIDGET_STATE not in nb.metadata.get("widgets", {}), (
        f"{path.name} was saved with widget state: nbconvert draws its explorers as empty outputs "
        f"(regenerate with `make notebooks NB=notebooks/{path.name}`)")
    problems, count = missing_pictures(nb)
    assert count, f"{path.name}: no explorer output found"
    assert not problems, (f"{path.name}: explorer outputs without a picture when rendered without a kernel "
                          f"(regenerate with `make notebooks NB=notebooks/{path.name}`):\n" + "\n".join(problems))


GENERATED = [
    "from attn_helpers import widgets\nimport matplotlib.pyplot as plt",
    "widgets.HeadsExplorer()",
    "print('a printed line')\nwidgets.LayerCalculator()",
    "plt.plot([0, 1], [1, 0])\nplt.show()",
    "widgets.MaskExplorer()",
]


@pytest.mark.slow
def test_a_notebook_run_now_renders_a_picture_per_explorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from scripts.run_notebooks import LEAKY_VARIABLES, execute, problems

    path = tmp_path / "explorers.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in GENERATED]), path)
    for name in LEAKY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # The kernel imports the helpers of this checkout, whatever copy the environment has installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    execute(path)
    nb = nbformat.read(path, as_version=4)
    assert not problems(nb), problems(nb)
    assert WIDGET_STATE not in nb.metadata.get("widgets", {}), "the runner saved widget state"

    found, count = missing_pictures(nb)
    assert count == 3 and not found, (count, found)
    # The figure (importing the explorers imports views, which sets up how figures are shown): one HTML <img>.
    figure = nb.cells[3].outputs[-1].data
    assert "image/png" not in figure and figure["text/html"].startswith('<img src="data:image/png;base64,'), figure
    known = explorer_class_names()
    sizes = {explorer_name(o, known): len(base64.b64decode(o.data["image/png"]))
             for c in nb.cells for o in c.outputs if explorer_name(o, known)}
    print(f"static pictures (bytes): {sizes}")
    # Each picture carries its explorer's description (Explorer.describe) and its CSS size in its metadata; nbconvert
    # 7.17's classic HTML template writes the alt from it (its lab template writes the size only, and nbconvert then
    # gives every <img> without alt "No description has been provided for this image").
    stateless = copy.deepcopy(nb)
    stateless.metadata.pop("widgets", None)
    body, _ = HTMLExporter(template_name="classic", exclude_input=True).from_notebook_node(stateless)
    # each <img> found by its picture (the figure's HTML <img> sits between the explorers' pictures)
    images = {"".join(img.get("src", "").split(",", 1)[-1].split()): img
              for img in BeautifulSoup(body, "html.parser").select("img")}
    for output in (o for c in nb.cells for o in c.outputs if "image/png" in o.get("data", {})):
        image, meta = images["".join(output.data["image/png"].split())], output.metadata.get("image/png", {})
        if explorer_name(output, known):
            assert any(c.isdigit() for c in meta["alt"]) and image.get("alt") == meta["alt"], (meta, image.attrs)
            assert int(image.get("width")) == meta["width"] < 934, (meta, image.get("width"))

    # The check sees an explorer output that lost its picture: it shows the text line instead.
    broken = copy.deepcopy(nb)
    del broken.cells[2].outputs[-1].data["image/png"]
    found, count = missing_pictures(broken)
    assert count == 3 and found == ["cell 2 (LayerCalculator): the text line is shown instead of (or beside) a picture",
                                    "cell 2 (LayerCalculator): 0 <img> where one picture belongs "
                                    "(the output has no image/png)"], found


def test_the_browser_tests_count_explorer_pictures_as_explorers_not_figures(tmp_path: Path):
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    figure = nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure size 640x480>"})
    explorer = nbformat.v4.new_output("execute_result", execution_count=2, data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2, "version_minor": 0},
        "image/png": png, "text/plain": "HeadsExplorer(num_heads=4 chan=64 tokens=8 | head_dim = 16)"})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("plt.show()", outputs=[figure]),
                                         nbformat.v4.new_code_cell("widgets.HeadsExplorer()", outputs=[explorer])])
    nbformat.write(nb, tmp_path / "two.ipynb")
    committed = CommittedNotebook.read(tmp_path / "two.ipynb")
    assert (committed.n_static_png, committed.explorers) == (1, ["HeadsExplorer"])
