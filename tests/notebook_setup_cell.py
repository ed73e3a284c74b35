# Set-up, the same first cell in every notebook: on Colab (only there) install the helpers,
# then fix the random seed and how tensors print, so every run prints the same numbers.
import subprocess
import sys

REPO = "https://github.com/attention-step-by-step/attention-step-by-step"
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"git+{REPO}"], check=True)

import torch

torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)
