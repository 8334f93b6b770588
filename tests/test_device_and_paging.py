"""The core homes of two shared ideas: the last-level cache size (kvlab.device) and paged-block arithmetic."""
import pytest

from kvlab import ModelConfig
from kvlab.device import last_level_cache, parse_cache_size
from kvlab.memory import kv_bytes_per_token, kv_cache_bytes
from kvlab.paging import blocks_for, blocks_per_sequence, mean_paged_slots, paged_slots


@pytest.mark.parametrize("text,size", [("32768K", 32 * 2**20), ("1M", 2**20), ("512", 512), ("2G\n", 2 * 2**30)])
def test_parse_cache_size(text, size):
    assert parse_cache_size(text) == size


def test_parse_cache_size_rejects_garbage():
    with pytest.raises(ValueError, match="^text"):
        parse_cache_size("lots")


def _sysfs(tmp_path, rows, with_type=True):
    for i, (level, kind, size) in enumerate(rows):
        index = tmp_path / f"index{i}"
        index.mkdir()
        (index / "level").write_text(f"{level}\n")
        if with_type:
            (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
    return tmp_path


def test_last_level_cache_reads_the_highest_data_level(tmp_path):
    sysfs = _sysfs(tmp_path, [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
                              (3, "Unified", "32768K")])
    llc = last_level_cache("cpu", sysfs)
    assert (llc.level, llc.bytes, llc.source) == ("L3", 32 * 2**20, str(tmp_path / "index3" / "size"))


def test_an_instruction_cache_is_never_the_last_level(tmp_path):
    sysfs = _sysfs(tmp_path, [(1, "Data", "48K"), (2, "Instruction", "4096K")])
    assert last_level_cache("cpu", sysfs).bytes == 48 * 2**10


def test_sysfs_without_type_files_counts_every_level(tmp_path):
    sysfs = _sysfs(tmp_path, [(1, None, "48K"), (2, None, "1024K"), (3, None, "32768K")], with_type=False)
    assert last_level_cache("cpu", sysfs).bytes == 32 * 2**20


def test_unknown_last_level_cache_is_none(tmp_path):
    assert last_level_cache("cpu", tmp_path / "missing") is None
    assert last_level_cache("meta") is None


def test_kv_bytes_per_token_is_the_formula_at_one_token():
    c = ModelConfig(vocab_size=50, d_model=24, n_layer=3, n_head=4, n_kv_head=2, head_dim=6, max_seq_len=16)
    assert kv_bytes_per_token(c) == 2 * 3 * 2 * 6 * 4 == kv_cache_bytes(3, 2, 6, 1, 1, "fp32")
    assert kv_bytes_per_token(c, "fp16") == kv_bytes_per_token(c) // 2


def test_paged_arithmetic():
    assert [blocks_for(n, 16) for n in (0, 1, 16, 17, 32)] == [0, 1, 1, 2, 2]
    assert blocks_per_sequence([12, 40, 7], 16) == [1, 3, 1]
    assert paged_slots([12, 40, 7], 16) == 5 * 16
    assert mean_paged_slots([12, 40, 7], 16) == 80 / 3
    assert paged_slots([5, 5], 1) == 10


@pytest.mark.parametrize("call", [lambda: blocks_for(-1, 16), lambda: blocks_for(3, 0), lambda: blocks_for(2.5, 4),
                                  lambda: paged_slots("12, 40", 16), lambda: mean_paged_slots([], 16)])
def test_paged_arithmetic_rejects_bad_values(call):
    with pytest.raises(ValueError):
        call()


def test_the_three_schemes_hold_the_same_sequences():
    from kvlab.paging import padded_slots, reserved_fill, reserved_slots, scheme_slots

    lengths = [12, 40, 7]
    assert padded_slots(lengths) == 3 * 40 and padded_slots(lengths, reserve=8) == 3 * 48  # 3.2
    assert reserved_slots(lengths, 32) == 96 and reserved_fill(lengths, 32) == 12 + 32 + 7  # 3.5: 40 is cut to 32
    assert [scheme_slots(s, lengths, 16, 64) for s in ("padding", "reservation", "paging")] == [120, 192, 80]
    with pytest.raises(ValueError, match="^scheme"):
        scheme_slots("swap", lengths, 16, 64)


def test_shared_prefix_arithmetic():
    from kvlab.paging import shared_prefix_blocks

    s = shared_prefix_blocks(20, [30, 25, 40], 8)  # 20 = 2 whole blocks + 4 tokens of a third
    assert s.unshared == 4 + 4 + 5 and s.full_shared_blocks == 2 and s.saved == 2 * 2 and s.shared == 13 - 4
    assert s.copies == 2  # the part-filled third block: copied by each of the two sharers' first write
    assert shared_prefix_blocks(16, [17, 17], 8).copies == 0
    assert shared_prefix_blocks(0, [3], 8).saved == 0
    assert shared_prefix_blocks(5, [9, 9], 8).copies == 0  # under one block: not shared at all
    with pytest.raises(ValueError, match="^lengths: every sequence needs more than the 20"):
        shared_prefix_blocks(20, [30, 20], 8)


def test_block_fill():
    from kvlab.paging import block_fill

    assert [block_fill(37, i, 16) for i in range(4)] == [16, 16, 5, 0]
    assert sum(block_fill(37, i, 16) for i in range(3)) == 37
