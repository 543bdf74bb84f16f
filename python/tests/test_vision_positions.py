"""posenc.text_vision_positions / vision_patch_positions: the rows of every Hugging Face multi-axis golden
case rebuilt from its token layout (as get_rope_index and the vision encoder produced them), the same
numbers as the C++ builders, and ValueError for bad layouts."""
import json
import os

import numpy as np
import pytest

import posenc

from conftest import DATA, golden_cases, need

CASES = [(d.name, str(d), json.loads((d / "case.json").read_text()))
         for d in golden_cases("hf", ("mrope", "rope_vision_2d"))]


def test_there_are_cases():
    need(DATA / "golden" / "hf", "golden/hf")
    assert len(CASES) >= 9  # 6 text M-RoPE and 3 vision-encoder cases when this was written


@pytest.mark.parametrize("name,folder,case", CASES, ids=[c[0] for c in CASES])
def test_golden_positions_from_the_layout(name, folder, case):
    want = np.load(os.path.join(folder, "positions.npy")).astype(np.int64)
    cfg = case["config"]
    if isinstance(case.get("token_layout"), dict):
        # The 2026 cases' token_layout is information only: their positions come from each family's own
        # get_rope_index (GLM-4.5V, ERNIE-4.5-VL, Qwen3-Omni), which text_vision_positions does not build;
        # the golden runner checks their rotation from positions.npy.
        pytest.skip(f"{case.get('hf_model_type')}: positions from its own get_rope_index")
    if "token_layout" in case:
        tps = None
        if case.get("hf_model_type") == "qwen2_5_vl":
            tps = cfg.get("vision_config", {}).get("tokens_per_second", 2)
        merge = next(s["spatial_merge_size"] for s in case["token_layout"] if s["type"] != "text")
        got, nxt = posenc.text_vision_positions(case["token_layout"], merge, tokens_per_second=tps)
        assert nxt == int(got.max()) + 1
    elif "grid_thw" in case:
        got = posenc.vision_patch_positions(case["grid_thw"], cfg.get("spatial_merge_size", 2))
    else:
        h, w = case["image_patches"]
        got = posenc.vision_patch_positions([1, h, w], 1)
    assert got.dtype == np.int64 and got.shape[0] == want.shape[0]
    if "token_subset" in case:  # the stored tokens are an ordered subsequence of the whole sequence
        j = 0
        for i in range(got.shape[1]):
            if j < want.shape[1] and np.array_equal(got[:, i], want[:, j]):
                j += 1
        assert j == want.shape[1]
    else:
        np.testing.assert_array_equal(got, want)


def test_example_start_and_time_index():
    rows, nxt = posenc.text_vision_positions([3, {"type": "image", "grid_thw": [1, 4, 4]}, 2], 2)
    assert rows.tolist() == [[0, 1, 2, 3, 3, 3, 3, 5, 6], [0, 1, 2, 3, 3, 4, 4, 5, 6], [0, 1, 2, 3, 4, 3, 4, 5, 6]]
    assert nxt == 7
    moved, nxt2 = posenc.text_vision_positions([3, {"type": "image", "grid_thw": [1, 4, 4]}, 2], 2, start=10)
    np.testing.assert_array_equal(moved, rows + 10)
    assert nxt2 == 17
    # Qwen2.5-VL: trunc(float32(f * second_per_grid_t) * tokens_per_second); an image's time is 0.
    video = {"type": "video", "grid_thw": [4, 2, 2], "second_per_grid_t": 0.5}
    rows, _ = posenc.text_vision_positions([video], 2, tokens_per_second=2)
    f = np.arange(4, dtype=np.float32)
    assert rows[0].tolist() == ((f * np.float32(0.5)) * np.float32(2)).astype(np.int64).tolist()
    rows, _ = posenc.text_vision_positions([video], 2)  # Qwen2-VL: the frame index
    assert rows[0].tolist() == [0, 1, 2, 3]


def test_bad_layouts_raise_value_error_naming_the_span():
    with pytest.raises(ValueError, match="span 1: grid h 6 x w 5 is not a multiple of spatial_merge_size 2"):
        posenc.text_vision_positions([1, {"type": "image", "grid_thw": [1, 6, 5]}], 2)
    with pytest.raises(ValueError, match="span 0: text tokens = -4"):
        posenc.text_vision_positions([-4], 2)
    with pytest.raises(ValueError, match="span 2: type 'audio'"):
        posenc.text_vision_positions([1, 2, {"type": "audio"}], 2)
    with pytest.raises(ValueError, match="span 0: grid_thw"):
        posenc.text_vision_positions([{"type": "image", "grid_thw": [4, 4]}], 2)
    with pytest.raises(ValueError, match="is more than"):
        posenc.text_vision_positions([{"type": "image", "grid_thw": [1, 1 << 30, 1 << 30]}], 2)
    with pytest.raises(ValueError, match="spatial_merge_size = 0"):
        posenc.vision_patch_positions([1, 4, 4], 0)
