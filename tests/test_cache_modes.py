"""kvlab.cache_modes is the one definition of a cache mode: generate, the figures, the glossary and the
bad-input tests all read it, so a new mode is one entry there."""
import pytest

from kvlab import CACHE_MODES, generate
from kvlab.cache import BaseCache
from kvlab.cache_modes import EXACT_MODES, LOSSY_MODES, MODES
from kvlab.viz.style import MODE_COLORS, MODE_LABELS


def test_names_exact_and_lossy_come_from_the_entries():
    assert CACHE_MODES == tuple(MODES) and all(MODES[name].name == name for name in MODES)
    assert set(EXACT_MODES) | set(LOSSY_MODES) == set(CACHE_MODES) and not set(EXACT_MODES) & set(LOSSY_MODES)
    assert [name for name, m in MODES.items() if m.factory is None] == ["none"]


def test_figures_draw_each_mode_in_its_own_colour_under_its_own_label():
    for name, m in MODES.items():
        assert (MODE_COLORS[name], MODE_LABELS[name]) == (m.color, m.label)
        assert f"（{name}）" in m.label  # the name the code uses is part of the name the learner reads
    assert len({m.color for m in MODES.values()}) == len(MODES)


@pytest.mark.parametrize("name", CACHE_MODES)
def test_every_factory_builds_the_cache_generate_uses(tiny_model, name):
    res = generate(tiny_model, [[1, 2, 3]], 4, cache=name)
    factory = MODES[name].factory
    if factory is None:
        assert res.cache is None
        return
    built = factory(tiny_model.config, 1, 6, dtype=tiny_model.dtype, device=tiny_model.device)
    assert isinstance(built, BaseCache) and type(res.cache) is type(built)
    assert res.cache.max_seq_len == 3 + 4 - 1  # room for every token fed, never the last one drawn
    assert res.cache.length == res.cache.max_seq_len


def test_an_unknown_mode_is_refused_with_every_name(tiny_model):
    with pytest.raises(ValueError, match="^cache must be one of 'kv', 'none'") as info:
        generate(tiny_model, [[1, 2]], 2, cache="paged-typo")
    assert all(repr(name) in str(info.value) for name in CACHE_MODES)
