"""Helpers of the hostile-input suites (test_hostile_inputs.py, test_hostile_fuzz.py): a small
Llama config, random arrays, bit-exact snapshots of the caller's buffers and the refusal check."""
import numpy as np
import pytest
import torch

import posenc

CFG = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 2048,
       "rope_theta": 10000.0, "num_hidden_layers": 4}
T, H, KV, D = 4, 8, 2, 64
ast = np.lib.stride_tricks.as_strided


@pytest.fixture(scope="module")
def rope():
    return posenc.Rope(CFG)


def rnd(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def ro(a):
    a.setflags(write=False)
    return a


def snap(x):
    """A bit-exact copy of a caller's buffer (NaN-safe: compared as integers)."""
    if isinstance(x, torch.Tensor):
        return x.detach().view({8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[x.element_size()]).clone()
    return np.array(x, copy=True).view({4: np.uint32, 2: np.uint16, 1: np.uint8, 8: np.uint64}[x.itemsize])


def same(x, before):
    if isinstance(x, torch.Tensor):
        return torch.equal(x.detach().view(before.dtype), before)
    return np.array_equal(np.asarray(x).view(before.dtype), before)


def refuses(call, exc, pattern, *buffers):
    """`call` raises `exc` whose one-line message matches `pattern`; `buffers` are left as they were."""
    before = [snap(b) for b in buffers]
    with pytest.raises(exc) as info:
        call()
    msg = str(info.value)
    assert "\n" not in msg.strip(), msg
    assert info.match(pattern), msg
    for i, (b, s) in enumerate(zip(buffers, before)):
        assert same(b, s), f"buffer {i} was written by a refused call ({msg})"


QWEN2_VL = {"model_type": "qwen2_vl", "hidden_size": 1536, "num_attention_heads": 12, "num_key_value_heads": 2,
            "max_position_embeddings": 32768, "rope_theta": 1000000.0,
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
