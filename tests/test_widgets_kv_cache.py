"""KVCacheCalculator (09 · Efficient attention) driven without a browser: every control changes the
picture and the status line, the numbers are kv_cache_bytes', and an impossible grouping is explained."""

from __future__ import annotations

import pytest

from attn_helpers import kv_cache_bytes
from attn_helpers.widgets import KVCacheCalculator
from attn_helpers.widgets.kv_cache import format_bytes

DEFAULTS = dict(num_heads=64, kv_groups=8, num_layers=80, seq_len=4096, dtype_bytes=2)


@pytest.fixture(scope="module")
def calc() -> KVCacheCalculator:
    return KVCacheCalculator()


def test_starts_valid_with_a_stable_one_line_repr(calc):
    calc.set(**DEFAULTS)
    text = repr(calc)
    assert calc.valid
    assert text == repr(KVCacheCalculator())
    assert text.startswith("KVCacheCalculator(num_heads=64 kv_groups=8 num_layers=80 seq_len=4096 dtype_bytes=2 | ")
    assert "\n" not in text and "0x" not in text
    assert calc._repr_mimebundle_()["text/plain"] == text


@pytest.mark.parametrize("change", [dict(num_heads=32), dict(kv_groups=1), dict(num_layers=40),
                                    dict(seq_len=32768), dict(dtype_bytes=4)])
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
    calc.set(num_heads=32, kv_groups=4, num_layers=24, seq_len=8192, dtype_bytes=2)
    sizes = {g: kv_cache_bytes(num_layers=24, num_kv_heads=g, head_dim=128, seq_len=8192, dtype_bytes=2)
             for g in (32, 4, 1)}
    assert [bar.get_width() for bar in calc.bars] == [sizes[32], sizes[4], sizes[1]]
    for size in sizes.values():
        assert f"{size:,}" in calc.table_html.value
    assert f"grouped-query {format_bytes(sizes[4])} vs multi-head {format_bytes(sizes[32])}" in calc.last_status
    assert "saves" in calc.last_status and "(87.5%)" in calc.last_status


def test_heads_not_divisible_by_groups_are_explained_without_a_traceback(calc):
    calc.set(**DEFAULTS)
    calc.set(kv_groups=6)
    assert not calc.valid
    assert "not possible" in calc.last_status and "64 / 6 = 10.67" in calc.last_status
    assert "[1, 2, 4, 8, 16, 32, 64]" in calc.last_status
    assert "Traceback" not in calc.status.value
    calc.set(num_heads=4, kv_groups=8)  # more groups than heads
    assert not calc.valid and "4 / 8 = 0.50" in calc.last_status
    calc.set(**DEFAULTS)
    assert calc.valid


def test_bad_sizes_are_rejected_at_construction():
    with pytest.raises(ValueError, match="seq_len must be one of"):
        KVCacheCalculator(seq_len=1000)
    with pytest.raises(ValueError, match="num_layers must be at least 1"):
        KVCacheCalculator(num_layers=0)
    with pytest.raises(ValueError, match="dtype_bytes must be one of"):
        KVCacheCalculator(dtype_bytes=3)


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 2 ** 10) == "3 KiB"
    assert format_bytes(1.25 * 2 ** 30) == "1.25 GiB"
