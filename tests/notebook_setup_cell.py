# Set-up, the same first code cell in every notebook: on Colab (only there) install the helpers,
# then fix the random seed and how tensors print, so every run prints the same numbers.
import subprocess
import sys

REPO = "https://github.com/attention-step-by-step/attention-step-by-step"
if "google.colab" in sys.modules:
    print("Colab: installing attn_helpers, the series' helper package, from its GitHub repository ...")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"git+{REPO}"], check=True)

try:
    import torch
except ModuleNotFoundError:
    raise ModuleNotFoundError("this Python has no torch: set up with `make lab` in the repository (see its README), "
                              "or open the lesson in Colab with the badge above") from None

torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)
