"""Tensors that are neither numpy arrays nor torch tensors but speak DLPack (__dlpack__ /
__dlpack_device__) are used without copies: posenc writes the producer's own memory; a tensor on
another device raises ValueError naming it."""
import numpy as np
import pytest
import torch

import posenc
from posenc import _tensors

CONFIG = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 500000.0}


class Producer:
    """A foreign array type: only the DLPack protocol, over a numpy array it owns."""

    def __init__(self, a, device=(1, 0)):
        self._a, self._device = a, device

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._device


def test_dlpack_in_place_without_copy():
    rope = posenc.Rope(CONFIG)
    a = np.random.default_rng(0).standard_normal((5, 4, 64)).astype(np.float32)
    want = rope.apply(a.copy(), np.arange(5))
    view = _tensors.as_tensor(Producer(a), "x")
    assert view.data_ptr() == a.__array_interface__["data"][0], "a view of the producer's memory, not a copy"
    rope.apply(Producer(a), np.arange(5))  # rotates a itself
    np.testing.assert_array_equal(a, want)


def test_dlpack_qk_and_drop_in():
    rope = posenc.Rope(CONFIG)
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 4, 6, 64)).astype(np.float32)
    k = rng.standard_normal((1, 2, 6, 64)).astype(np.float32)
    wq, wk = rope.apply_qk(q.copy(), k.copy(), np.arange(6))
    rope.apply_qk(Producer(q), Producer(k), np.arange(6))
    np.testing.assert_array_equal(q, wq)
    np.testing.assert_array_equal(k, wk)
    c, s = rope.cos_sin(np.arange(6))
    cos = np.concatenate((c, c), -1)[None].astype(np.float32)
    sin = np.concatenate((s, s), -1)[None].astype(np.float32)
    got_q, _ = posenc.hf.drop_in(rope)(Producer(q), Producer(k), Producer(cos), Producer(sin))
    tq = torch.from_numpy(q)
    want = tq * torch.from_numpy(cos)[:, None] + torch.cat((-tq[..., 32:], tq[..., :32]), -1) * torch.from_numpy(sin)[:, None]
    assert torch.equal(got_q, want)


@pytest.mark.parametrize("device, name", [((2, 0), "cuda:0"), ((10, 1), "rocm:1"), ((14, 0), "oneapi:0"), ((99, 3), "type 99:3")])
def test_dlpack_other_device_is_refused(device, name):
    rope = posenc.Rope(CONFIG)
    a = np.zeros((2, 4, 64), np.float32)
    with pytest.raises(ValueError, match=f"x: DLPack tensor is on device {name}; posenc runs on CPU tensors only"):
        rope.apply(Producer(a, device), np.arange(2))
    with pytest.raises(ValueError, match=f"q: DLPack tensor is on device {name}"):
        posenc.hf.drop_in(rope)(Producer(a[None], device), a[None], a[None, :, 0], a[None, :, 0])


def test_dlpack_bfloat16_through_torch():
    """numpy has no bfloat16; a bfloat16 DLPack tensor arrives through torch.utils.dlpack, unchanged."""
    rope = posenc.Rope(CONFIG)
    t = torch.randn(3, 4, 64).bfloat16()
    want = rope.apply(t.clone(), np.arange(3))

    class TorchProducer(Producer):
        def __dlpack__(self, stream=None):
            return torch.utils.dlpack.to_dlpack(self._a)

    rope.apply(TorchProducer(t), np.arange(3))
    assert torch.equal(t, want)
