"""KVCacheCalculator (09 · Efficient attention) driven without a browser: every control changes the
picture and the status line, the numbers are kv_cache_bytes', an impossible grouping is explained, and
the model menu sets the published sizes of real models (and names them when the sliders match)."""

from __future__ import annotations

import pytest

from attn_helpers import MODEL_ATTENTION_SIZES, kv_cache_bytes
from attn_helpers.widgets import KVCacheCalculator
from attn_helpers.widgets.kv_cache import format_bytes


DEFAULTS = dict(num_heads=64, num_kv_heads=8, num_layers=80, seq_len=4096, dtype_bytes=2, head_dim=128)


@pytest.fixture(scope="module")
def calc() -> KVCacheCalculator:
    return KVCacheCalculator()


def test_starts_valid_with_a_stable_one_line_repr(calc):
    calc.set(**DEFAULTS)
    text = repr(calc)
    assert calc.valid
    assert text == repr(KVCacheCalculator())
    assert text.startswith("KVCacheCalculator(num_heads=64 num_kv_heads=8 num_layers=80 seq_len=4096 dtype_bytes=2 "
                           "head_dim=128 | Llama-2-70B | ")
    assert "\n" not in text and "0x" not in text
    assert calc._repr_mimebundle_()[0]["text/plain"] == text


@pytest.mark.parametrize("change", [dict(num_heads=32), dict(num_kv_heads=1), dict(num_layers=40),
                                    dict(seq_len=32768), dict(dtype_bytes=4), dict(head_dim=64)])
def test_each_control_changes_the_picture_and_the_status(calc, change):
    calc.set(**DEFAULTS)
    before_png, before_status = calc.image.value, calc.last_status
    calc.set(**change)
    assert calc.valid
    assert calc.image.value != before_png
    assert calc.last_status != before_status
    for name, value in change.items():
        assert f"{name}={value}" in calc.last_status


def test_the_bars_and_the_table_are_kv_cache_bytes(calc):
    calc.set(num_heads=32, num_kv_heads=4, num_layers=24, seq_len=8192, dtype_bytes=2, head_dim=128)
    sizes = {g: kv_cache_bytes(num_layers=24, num_kv_heads=g, head_dim=128, seq_len=8192, dtype_bytes=2)
             for g in (32, 4, 1)}
    # bar lengths relative to multi-head's (the axis stays fixed while the bars move)
    assert [bar.get_width() for bar in calc.bars] == pytest.approx([1.0, sizes[4] / sizes[32], sizes[1] / sizes[32]])
    for size in sizes.values():
        assert f"{size:,}" in calc.table_html.value
    assert f"grouped-query {format_bytes(sizes[4])} vs multi-head {format_bytes(sizes[32])}" in calc.last_status
    assert "saves" in calc.last_status and "(87.5%)" in calc.last_status


def test_the_groups_slider_offers_only_divisors_of_the_heads_and_keeps_the_layout_still(calc):
    """From Llama-2-70B's sizes every press on H gives a picture (7 of 8 said "not possible" when G took any
    number), and the table under it stays; moving H back gives the G chosen before and names the model again."""
    calc.choose_model("Llama-2-70B")
    for heads in range(65, 73):
        calc.set(num_heads=heads)
        groups = calc.controls["num_kv_heads"]
        assert calc.valid and list(groups.options) == [d for d in range(1, heads + 1) if heads % d == 0]
        assert groups.value == max(d for d in groups.options if d <= 8) and calc.table_html.value
    calc.set(num_heads=64)
    assert calc.values["num_kv_heads"] == 8 and calc.model_menu.value == "Llama-2-70B"
    calc.set(num_kv_heads=2, num_heads=4)  # the G chosen last is kept where H allows it
    assert calc.values["num_kv_heads"] == 2
    with pytest.raises(ValueError, match="num_heads"):
        KVCacheCalculator(num_heads=64, num_kv_heads=6)


def test_the_sliding_window_layers_never_outnumber_the_layers():
    calc = KVCacheCalculator(windows=True)
    calc.set(local_layers=60)
    calc.set(num_layers=40)
    assert calc.controls["local_layers"].max == 40 and calc.values["local_layers"] == 40 and calc.valid


def test_the_title_fits_the_figure_for_every_model_and_setting():
    """The title was cut at the right edge ("... × 2 bytes (batch 1"): at 1366 x 768 the picture is shown unshrunk
    (640 px), so every line of the title must lie inside it."""
    for windows in (False, True):
        calc = KVCacheCalculator(windows=windows, batch=8)
        for name in calc.presets:
            calc.choose_model(name)
            for seq_len in (512, 131072):
                calc.set(seq_len=seq_len, **({"window": 4096} if windows else {}))
                calc.render_png()
                box = calc.title.get_window_extent(calc.canvas.get_renderer())
                assert 0 <= box.x0 and box.x1 <= calc.canvas.get_width_height()[0], (name, seq_len, box)
                assert calc.canvas.get_width_height()[0] / calc.pixel_density <= 900  # CSS px


def test_bad_sizes_are_rejected_at_construction():
    with pytest.raises(ValueError, match="seq_len must be one of"):
        KVCacheCalculator(seq_len=1000)
    with pytest.raises(ValueError, match="num_layers must be at least 1"):
        KVCacheCalculator(num_layers=0)
    with pytest.raises(ValueError, match="dtype_bytes must be one of"):
        KVCacheCalculator(dtype_bytes=3)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        KVCacheCalculator(head_dim=100)


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 2 ** 10) == "3 KiB"
    assert format_bytes(1.25 * 2 ** 30) == "1.25 GiB"


def test_llama_2_70b_caches_320_kib_per_token_in_float16():
    sizes = MODEL_ATTENTION_SIZES["Llama-2-70B"]
    per_token = kv_cache_bytes(num_layers=sizes["num_layers"], num_kv_heads=sizes["num_kv_heads"],
                               head_dim=sizes["head_dim"], seq_len=1, dtype_bytes=2)
    assert per_token == 320 * 2 ** 10  # 2 x 80 layers x 8 KV heads x 128 x 2 bytes


@pytest.mark.parametrize("name", list(MODEL_ATTENTION_SIZES))
def test_the_model_menu_sets_the_published_sizes_and_names_the_model(calc, name):
    calc.set(**DEFAULTS)
    calc.set(num_layers=7)  # sizes of no model: the menu says so
    assert calc.model_menu.value == "(your own sizes)"
    calc.model_menu.value = name
    sizes = MODEL_ATTENTION_SIZES[name]
    assert calc.valid
    assert calc.values["num_heads"] == sizes["num_heads"] and calc.values["num_kv_heads"] == sizes["num_kv_heads"]
    assert calc.values["num_layers"] == sizes["num_layers"] and calc.values["head_dim"] == sizes["head_dim"]
    assert f"| {name} |" in calc.last_status and calc.title.get_text().startswith(f"{name}: ")
    expected = kv_cache_bytes(num_layers=sizes["num_layers"], num_kv_heads=sizes["num_kv_heads"],
                              head_dim=sizes["head_dim"], seq_len=4096, dtype_bytes=2)
    multi_head = kv_cache_bytes(num_layers=sizes["num_layers"], num_kv_heads=sizes["num_heads"],
                                head_dim=sizes["head_dim"], seq_len=4096, dtype_bytes=2)
    assert calc.bars[1].get_width() == pytest.approx(expected / multi_head)
    calc.set(num_layers=sizes["num_layers"] + 1)  # moving a slider off the model: the menu follows
    assert calc.model_menu.value == "(your own sizes)" and name not in calc.last_status
    calc.set(**DEFAULTS)


def test_the_model_menu_is_part_of_the_widget_and_rejects_unknown_names(calc):
    assert calc.widget.children[0] is calc.model_menu
    with pytest.raises(ValueError, match="name must be one of"):
        calc.choose_model("GPT-5")


def test_with_windows_the_presets_of_models_with_local_layers_count_only_their_window():
    from attn_helpers.lab import WINDOWED_ATTENTION_SIZES, kv_cache_bytes, windowed_kv_cache_bytes

    calc = KVCacheCalculator(seq_len=32768, windows=True)
    for name, sizes in WINDOWED_ATTENTION_SIZES.items():
        calc.choose_model(name)
        assert calc.valid and f"| {name} |" in calc.last_status
        local = kv_cache_bytes(num_layers=sizes["local_layers"], num_kv_heads=sizes["num_kv_heads"],
                               head_dim=sizes["head_dim"], seq_len=min(32768, sizes["window"]))
        rest = sizes["num_layers"] - sizes["local_layers"]
        full = kv_cache_bytes(num_layers=rest, num_kv_heads=sizes["num_kv_heads"], head_dim=sizes["head_dim"],
                              seq_len=32768) if rest else 0
        assert windowed_kv_cache_bytes(seq_len=32768, **{k: sizes[k] for k in (
            "num_layers", "local_layers", "window", "num_kv_heads", "head_dim")}) == local + full
    calc.set(local_layers=100)  # the slider stops at the model's layers
    assert calc.valid and calc.values["local_layers"] == 24


def test_without_windows_the_calculator_is_lesson_09s():
    assert "window" not in KVCacheCalculator().controls
    assert "Gemma-3-27B" not in KVCacheCalculator().model_menu.options


@pytest.mark.parametrize("name", ["DeepSeek-V3", "Qwen3-Next"])
def test_a_model_with_another_cache_shows_it_as_a_fourth_bar(calc, name):
    from attn_helpers.lab import model_cache_bytes

    calc.set(**DEFAULTS)
    assert not calc.published_bar.get_visible()
    calc.choose_model(name)
    calc.set(seq_len=32768)
    published = model_cache_bytes(name, seq_len=32768)
    assert calc.valid and calc.model_menu.value == name
    assert calc.published_bar.get_visible()
    assert f"as published {format_bytes(published)}" in calc.last_status
    assert f"{published:,}" in calc.table_html.value
    calc.set(num_layers=60)  # no longer that model: the fourth bar goes
    assert not calc.published_bar.get_visible() and calc.model_menu.value != name
    calc.set(**DEFAULTS)


@pytest.mark.parametrize("name", list(MODEL_ATTENTION_SIZES))
def test_the_title_fits_in_the_figure_for_every_model_at_the_longest_sequence(calc, name):
    calc.set(**DEFAULTS)
    calc.model_menu.value = name
    calc.set(seq_len=131072)
    calc.render_png()
    box = calc.title.get_window_extent(calc.canvas.get_renderer())
    assert 0 <= box.x0 and box.x1 <= calc.figure.bbox.x1, (box, calc.title.get_text())


def test_the_title_fits_the_figure_and_its_brackets_give_the_bar():
    """With windows the title's token count is bracketed (2 × (global + local) tokens × ...) and, on two lines,
    stays inside the figure for every preset and sequence length."""
    calc = KVCacheCalculator(windows=True)
    renderer = calc.figure.canvas.get_renderer()
    for name in calc.presets:
        calc.choose_model(name)
        for seq_len in (512, 32768):
            calc.set(seq_len=seq_len)
            box = calc.title.get_window_extent(renderer)
            assert 0 <= box.x0 and box.x1 <= calc.figure.bbox.x1 and box.y1 <= calc.figure.bbox.y1, (name, seq_len)
    calc.choose_model("Gemma-3-27B")
    calc.set(seq_len=32768)
    assert "2 × (10 layers × 32,768 + 52 layers × 1,024) tokens" in calc.title.get_text()
