"""Tensors in and out: in-place semantics on views, out=, dtypes, threads, and refusals that name the
argument (never a silent copy)."""
import numpy as np
import pytest
import torch

import posenc

CONFIG = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 2048,
          "rope_theta": 10000.0}


@pytest.fixture(scope="module")
def rope():
    return posenc.Rope(CONFIG)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_in_place_on_a_strided_numpy_view(rope):
    """Every other head of a buffer: the view's elements rotate, the others stay, nothing is copied."""
    base = _rand(10, 16, 64)
    before = base.copy()
    view = base[:, ::2]
    assert not view.flags.c_contiguous
    want = view.copy()
    rope.apply(want, np.arange(10))
    got = rope.apply(view, np.arange(10))
    assert got is view
    assert np.array_equal(base[:, ::2], want)
    assert np.array_equal(base[:, 1::2], before[:, 1::2])


def test_hf_transposed_view_in_place(rope):
    """[B, S, H, D] storage viewed as [B, H, S, D] (HF's q.transpose(1, 2)) rotates in place."""
    bshd = torch.from_numpy(_rand(2, 12, 8, 64))
    q = bshd.transpose(1, 2)
    positions = torch.stack((torch.arange(12), torch.arange(5, 17)))
    want = q.contiguous().clone()
    rope.apply(want, positions)
    rope.apply(q, positions)
    assert torch.equal(q, want)
    assert torch.equal(bshd.transpose(1, 2), want)  # the storage itself was written


def test_orders_agree(rope):
    x = _rand(12, 8, 64)
    pos = np.arange(3, 15)
    thd = rope.apply(x.copy(), pos)
    htd = rope.apply(np.ascontiguousarray(x.transpose(1, 0, 2)), pos, order="htd")
    bshd = rope.apply(x.copy()[None], pos, order="bshd")
    assert np.array_equal(thd, htd.transpose(1, 0, 2))
    assert np.array_equal(thd, bshd[0])


def test_out_leaves_the_input(rope):
    x = _rand(6, 8, 64)
    keep = x.copy()
    out = np.empty_like(x)
    assert rope.apply(x, np.arange(6), out=out) is out
    assert np.array_equal(x, keep)
    assert np.array_equal(out, rope.apply(keep.copy(), np.arange(6)))
    assert rope.apply(x, np.arange(6), out=x) is x  # out may be the input exactly
    assert np.array_equal(x, out)


def test_backward_undoes_forward_and_reference_agrees(rope):
    x = _rand(7, 8, 64)
    y = rope.apply(x.copy(), np.arange(7) * 100)
    z = rope.apply(y.copy(), np.arange(7) * 100, direction="backward")
    np.testing.assert_allclose(z, x, atol=2e-6)
    r = rope.apply_reference(x.copy(), np.arange(7) * 100)
    np.testing.assert_allclose(y, r, rtol=0, atol=4 * 2.0 ** -24 * float(np.abs(x).max()) * 2)


def test_apply_qk_grouped_query(rope):
    q, k = _rand(5, 8, 64), _rand(5, 2, 64, seed=1)
    wq, wk = rope.apply(q.copy(), np.arange(5)), rope.apply(k.copy(), np.arange(5))
    rope.apply_qk(q, k, np.arange(5))
    assert np.array_equal(q, wq) and np.array_equal(k, wk)


@pytest.mark.parametrize("dtype,ulp", [(torch.float16, 2.0 ** -11), (torch.bfloat16, 2.0 ** -8)])
def test_sixteen_bit_tensors(rope, dtype, ulp):
    """float16 and bfloat16 torch tensors rotate in their own storage, within one rounding of the
    float32 result (numpy has no bfloat16: torch is how it gets in)."""
    x = torch.from_numpy(_rand(9, 8, 64))
    h = x.to(dtype)
    want = rope.apply(h.float().clone(), np.arange(9))
    got = rope.apply(h, np.arange(9))
    assert got.dtype == dtype and got.data_ptr() == h.data_ptr()
    assert float((got.float() - want).abs().max()) <= ulp * float(want.abs().max()) + 1e-6
    f16 = x.numpy().astype(np.float16)
    rope.apply(f16, np.arange(9))
    assert np.array_equal(f16.view(np.uint16), rope.apply(x.to(torch.float16), np.arange(9)).numpy().view(np.uint16))


def test_thread_count_does_not_change_bits(rope):
    x = _rand(256, 8, 64)  # 512 KiB: past the size that runs inline
    prev = posenc.num_threads()
    try:
        posenc.set_num_threads(1)
        assert posenc.num_threads() == 1
        one = rope.apply(x.copy(), np.arange(256))
        posenc.set_num_threads(2)
        assert posenc.num_threads() == 2
        two = rope.apply(x.copy(), np.arange(256))
    finally:
        posenc.set_num_threads(0)
    assert np.array_equal(one, two)
    assert posenc.num_threads() == prev or prev >= 1


# ---- refusals ---------------------------------------------------------------------------------


def test_wrong_dtype(rope):
    with pytest.raises(ValueError, match=r"^x: dtype float64 is not float32 or float16"):
        rope.apply(np.zeros((2, 8, 64)), np.arange(2))
    with pytest.raises(ValueError, match=r"^x: dtype torch.int32"):
        rope.apply(torch.zeros(2, 8, 64, dtype=torch.int32), np.arange(2))
    with pytest.raises(ValueError, match=r"^positions: dtype float64 is not an integer type"):
        rope.apply(_rand(2, 8, 64), np.array([0.0, 1.0]))


def test_wrong_shape(rope):
    with pytest.raises(ValueError, match=r"^x: shape \[8, 64\] is not"):
        rope.apply(_rand(8, 64), np.arange(8))
    with pytest.raises(ValueError, match=r"head_dim 32"):  # posenc's own check, naming x
        rope.apply(_rand(2, 8, 32), np.arange(2))
    with pytest.raises(ValueError, match=r"^positions: 3 positions for 2 tokens"):
        rope.apply(_rand(2, 8, 64), np.arange(3))
    with pytest.raises(ValueError, match=r"^out: shape"):
        rope.apply(_rand(2, 8, 64), np.arange(2), out=_rand(3, 8, 64))
    with pytest.raises(ValueError, match=r"^x: order 'bhsd' does not fit a 3-d shape"):
        rope.apply(_rand(2, 8, 64), np.arange(2), order="bhsd")


def test_wrong_device():
    rope = posenc.Rope(CONFIG)
    with pytest.raises(ValueError, match=r"^x: tensor is on device meta"):
        rope.apply(torch.empty(2, 8, 64, device="meta"), np.arange(2))


def test_strides_that_do_not_fit(rope):
    x = _rand(4, 8, 128)
    with pytest.raises(ValueError, match=r"^x: head_dim axis has stride 2"):
        rope.apply(x[:, :, ::2], np.arange(4))
    overlapping = np.lib.stride_tricks.as_strided(x, shape=(4, 8, 64), strides=(4 * 64, 4 * 16, 4))
    with pytest.raises(ValueError, match=r"overlap rows"):
        rope.apply(overlapping, np.arange(4))
    expanded = torch.zeros(1, 8, 5, 64).expand(3, 8, 5, 64)  # one batch element seen three times
    with pytest.raises(ValueError, match=r"^x: batch stride 0 overlaps"):
        rope.apply(expanded, np.arange(5))
    y = _rand(4, 8, 64)
    with pytest.raises(ValueError, match=r"^out: overlaps the input without being it"):
        rope.apply(y[:3], np.arange(3), out=y[1:])
    for k in (y[:, :2], y):  # k inside q, k the same memory as q: it would be rotated twice
        with pytest.raises(ValueError, match=r"^k: overlaps q without being it"):
            rope.apply_qk(y, k, np.arange(4))


def test_read_only_and_grad(rope):
    x = _rand(2, 8, 64)
    x.setflags(write=False)
    with pytest.raises(ValueError, match=r"^x: array is read-only"):
        rope.apply(x, np.arange(2))
    t = torch.zeros(2, 8, 64, requires_grad=True)
    with pytest.raises(ValueError, match=r"^x: tensor requires grad"):
        rope.apply(t, np.arange(2))
    with torch.no_grad():
        rope.apply(t, np.arange(2))


def test_bad_positions_write_nothing(rope):
    """A negative position in the second batch element: posenc's error names it, and neither batch
    element was written."""
    x = torch.from_numpy(_rand(2, 8, 3, 64))
    keep = x.clone()
    with pytest.raises(ValueError, match=r"position -1 at index 1"):
        rope.apply(x, np.array([[0, 1, 2], [0, -1, 2]]))
    assert torch.equal(x, keep)
    with pytest.raises(ValueError, match=r"^x: list is not a numpy array or a torch tensor"):
        rope.apply([[0.0]], [0])


def test_gil_released_while_kernels_run(rope):
    """A Python thread keeps running while posenc rotates a large array (the scalar reference on
    16M elements or more, one posenc thread): it records timestamps in the middle of the call, which it could
    not if the call held the GIL (it would run only before and after, in 5 ms switch slices)."""
    import threading
    import time

    def run(tokens):
        x = np.ones((tokens, 64, 64), np.float32)
        stamps = []
        stop = threading.Event()

        def spin():
            n = 0
            while not stop.is_set():
                n += 1
                if n % 200 == 0:
                    stamps.append(time.perf_counter())

        t = threading.Thread(target=spin)
        posenc.set_num_threads(1)
        try:
            t.start()
            time.sleep(0.01)
            start = time.perf_counter()
            rope.apply_reference(x, np.arange(tokens))
            end = time.perf_counter()
        finally:
            stop.set()
            t.join()
            posenc.set_num_threads(0)
        return stamps, start, end

    # The call must outlast a few 5 ms switch intervals so that its middle 40% is long enough to see
    # the other thread run; a fast CPU does 4096 tokens in ~30 ms, so grow the work until it does.
    for tokens in (4096, 16384):
        stamps, start, end = run(tokens)
        elapsed = end - start
        if elapsed > 0.025:
            break
    assert elapsed > 0.025, elapsed
    middle = [s for s in stamps if start + 0.3 * elapsed < s < end - 0.3 * elapsed]
    assert len(middle) > 10, (len(middle), elapsed)
