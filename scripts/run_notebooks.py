"""Re-execute notebooks from a clean kernel and save them with their outputs.

This is the only way the series' outputs are produced (``make notebooks``). Each notebook runs in a
fresh kernel of *this* Python environment (never a kernelspec found elsewhere on the machine),
with its own folder as the working directory, and the time it took is printed so the README index
can list it.

    python -m scripts.run_notebooks notebooks/*.ipynb
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import ipykernel.kernelspec
import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

BUDGET_SECONDS = 20.0  # the series' promise: every notebook runs in under 20 s on a 2-core CPU (but one, below)
#: The one lesson allowed longer: it trains its own two-layer models (five seeds and two controls) from scratch.
LONGER_BUDGETS = {"14_induction_heads.ipynb": 60.0}


class CurrentEnvKernelSpecs(KernelSpecManager):
    """Resolve every kernel name to a kernel running this interpreter."""

    def get_kernel_spec(self, kernel_name: str):  # noqa: D102 - jupyter_client API
        return self.kernel_spec_class(
            resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict()
        )


def kernelspec() -> dict[str, str]:
    """The ``kernelspec`` metadata a front end writes for this environment's kernel.

    JupyterLab sets ``{name, display_name, language}`` from the kernel it starts (the installed
    ipykernel's kernelspec, e.g. display name "Python 3 (ipykernel)"); a notebook saved with the same
    three values stays unchanged when it is opened.
    """
    spec = ipykernel.kernelspec.get_kernel_dict()
    return {"display_name": spec["display_name"], "language": spec["language"],
            "name": ipykernel.kernelspec.KERNEL_NAME}


# Settings that leak from the shell into a kernel and change what a notebook shows: MPLBACKEND=Agg
# silently removes every figure, PYTHONWARNINGS can add stderr output.
LEAKY_VARIABLES = ("MPLBACKEND", "PYTHONWARNINGS")


def problems(nb: nbformat.NotebookNode) -> list[str]:
    """Errors and stderr output in an executed notebook, one line each."""
    found = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                found.append(f"cell {index}: {output.ename}: {output.evalue}")
            elif output.output_type == "stream" and output.name == "stderr":
                found.append(f"cell {index}: stderr: {output.text.strip()[:200]}")
    return found


def joined_streams(outputs: list) -> list:
    """``outputs`` with each run of consecutive stream outputs of one name (stdout, stderr) joined into one: a busy
    kernel flushes one cell's printing in several messages, which a front end shows as one text anyway, so the saved
    notebook does not depend on the machine's load."""
    joined: list = []
    for output in outputs:
        last = joined[-1] if joined else None
        if (output.output_type == "stream" and last is not None and last.output_type == "stream"
                and last.name == output.name):
            last.text += output.text
        else:
            joined.append(output)
    return joined


def execute(path: Path) -> float:
    """Execute ``path`` in place and return the seconds it took."""
    for name in LEAKY_VARIABLES:
        os.environ.pop(name, None)
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_name=ipykernel.kernelspec.KERNEL_NAME, kernel_spec_manager=CurrentEnvKernelSpecs())
    client = NotebookClient(
        nb,
        km=km,
        timeout=600,
        record_timing=False,
        # No widget state in the saved notebook: without it, a page drawn without a kernel (nbconvert's HTML,
        # nbviewer) shows each explorer's picture (its image/png); with it, an empty widget area.
        store_widget_state=False,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    # Keep the metadata the same on every machine and exactly what a front end writes on opening the
    # notebook: ipykernel's own kernelspec, without the interpreter path (JupyterLab replaces a
    # kernelspec that differs, marks the notebook changed and autosaves it).
    for cell in nb.cells:
        if cell.get("outputs"):
            cell.outputs = joined_streams(cell.outputs)
    nb.metadata["kernelspec"] = kernelspec()
    nb.metadata.pop("widgets", None)  # a state saved by an earlier run (nbclient keeps what it does not store)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return seconds


def update_readme_times(readme: Path, seconds: dict[str, float]) -> None:
    """Write each notebook's measured time into its row of the README index ("runs in" column)."""
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
    for i, line in enumerate(lines):
        for name, value in seconds.items():
            if line.startswith("|") and f"](notebooks/{name})" in line:
                cells = line.split("|")
                cells[4] = f" {value:.0f} s "  # | # | notebook | what you learn | runs in | Colab |
                lines[i] = "|".join(cells)
    readme.write_text("".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--update-readme", type=Path, metavar="README",
                        help="write the measured times into this README's notebook index")
    args = parser.parse_args(argv)
    over = []
    times: dict[str, float] = {}
    print(f"{'notebook':<40} seconds")
    for path in sorted(args.notebooks):
        seconds = times[path.name] = execute(path)
        found = problems(nbformat.read(path, as_version=4))
        if found:
            print(f"{path.name}: saved, but it has errors or stderr output:", *found, sep="\n  ")
            over.append(path.name)
        budget = LONGER_BUDGETS.get(path.name, BUDGET_SECONDS)
        flag = "" if seconds < budget else f"  (over the {budget:.0f} s budget)"
        print(f"{path.name:<40} {seconds:7.1f}{flag}", flush=True)
        if seconds >= budget:
            over.append(path.name)
    if args.update_readme:
        update_readme_times(args.update_readme, times)
    return 1 if over else 0  # over budget or with errors: make notebooks fails


if __name__ == "__main__":
    sys.exit(main())
