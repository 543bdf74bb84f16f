"""Hostile inputs, second half: a seeded fuzz loop mutates one property at a time of valid calls
(success must equal the reference: a contiguous copy through the same kernel and float64 numpy math;
failure must be ValueError / TypeError with nothing written; any other exception or a crash fails),
then views reaching outside their owners, bounded nesting, NUL paths, huge counts and
validate-then-write of whole layers."""
import numpy as np
import pytest
import torch

import posenc
from posenc import cp, hf
from hostile_support import CFG, QWEN2_VL, T, H, KV, D, ast, rope, rnd, ro, snap, same, refuses  # noqa: F401 (rope: a fixture)

# ---- seeded fuzz: one property of a valid call mutated at a time ---------------------------------

def _np_rotate(x, pos, rope):
    """float64 numpy RoPE (half pairing, the whole head rotated) with the kernel's float32 cos/sin."""
    c, s = rope.cos_sin(np.asarray(pos, np.int64))
    c, s = c.astype(np.float64)[:, None, :], s.astype(np.float64)[:, None, :]
    x = np.asarray(x, np.float64)
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return np.concatenate([a * c - b * s, b * c + a * s], -1)


MUTATIONS = {  # per entry point: the properties its fuzz changes ("none": the valid call itself)
    "apply": ["none", "dtype_x", "dtype_pos", "ndim_x", "zero_dim", "pos_len", "pos_neg", "pos_huge", "pos_float",
              "stride0", "neg_stride", "head_stride", "readonly_out", "out_shift", "out_dtype", "oob_strides",
              "noncontig_heads", "torch", "torch_grad", "f16"],
    "kv": ["none", "slot_dup", "slot_oob", "layer", "cache_dtype", "cache_alias", "kv_shape", "pos_neg", "readonly_out",
           "out_shift"],
    "hf": ["none", "hf_out_alias", "hf_cos_dtype", "torch_grad", "pos_len"]}


def _fuzz_apply(rng, rope, m):
    """(call, buffers, check) for Rope.apply with mutation m."""
    t = int(rng.integers(1, 7))
    x = rnd(t + 1, H, D, seed=int(rng.integers(1 << 30)))
    pos = rng.integers(0, 3000, t)
    xin, out = x[:t], None
    if m == "dtype_x":
        xin = xin.astype([np.float64, np.int32, np.complex64, np.bool_][int(rng.integers(4))])
    elif m == "dtype_pos":
        pos = pos.astype([np.float32, np.bool_, np.uint64, object][int(rng.integers(4))])
    elif m == "ndim_x":
        xin = xin.reshape((1,) * int(rng.integers(1, 3)) + xin.shape) if rng.integers(2) else xin[0]
    elif m == "zero_dim":
        xin = xin[:, :0] if rng.integers(2) else xin[:0]
        pos = pos[:xin.shape[0]]
    elif m == "pos_len":
        pos = rng.integers(0, 10, t + int(rng.choice([-1, 1])))
    elif m == "pos_neg":
        pos[int(rng.integers(t))] = -int(rng.integers(1, 1 << 40))
    elif m == "pos_huge":
        pos[int(rng.integers(t))] = int(rng.choice([1 << 31, 1 << 62, (1 << 63) - 1]))
    elif m == "pos_float":
        pos = pos + 0.5
    elif m == "stride0":
        xin = ast(x, (t, H, D), (0, x.strides[1], 4) if rng.integers(2) else (x.strides[0], 0, 4))
    elif m == "neg_stride":
        xin = x[t - 1::-1] if t > 1 else x[:1, ::-1]
    elif m == "head_stride":
        xin = ast(x, (t, H, D), (x.strides[0], 4 * int(rng.integers(1, D)), 4))
    elif m == "readonly_out":
        out = ro(rnd(t, H, D))
    elif m == "out_shift":
        out = x[1:t + 1]
    elif m == "out_dtype":
        out = rnd(t, H, D, dtype=np.float16)
    elif m == "oob_strides":
        xin = ast(x, (t, H, D), (x.strides[0] * int(rng.integers(2, 1 << 20)), x.strides[1], 4))
    elif m == "noncontig_heads":
        big = rnd(t, 2 * H, D)
        xin = big[:, ::2]
        x = big
    elif m == "torch":
        xin = torch.from_numpy(x[:t].copy()).transpose(0, 1).contiguous().transpose(0, 1)
        x = xin
    elif m == "torch_grad":
        xin = torch.from_numpy(x[:t].copy()).requires_grad_()
        x = xin
    elif m == "f16":
        xin = x[:t].astype(np.float16)
        x = xin
    else:  # out of place into a fresh out
        out = np.zeros((t, H, D), np.float32) if rng.integers(2) else None
    ref = None  # the input's values, for the check of a call that succeeds
    if isinstance(xin, torch.Tensor) and not xin.requires_grad:
        ref = xin.numpy().copy()
    elif isinstance(xin, np.ndarray) and xin.dtype in (np.float32, np.float16) and (m != "oob_strides" or t == 1):
        ref = xin.copy()

    def call():
        return rope.apply(xin, pos, out=out)

    def check(res):
        got = res.detach().numpy() if isinstance(res, torch.Tensor) else np.asarray(res)
        if got.size == 0:
            return
        assert ref is not None, m
        want = rope.apply(np.ascontiguousarray(ref.astype(got.dtype)), pos)  # the same kernel on a contiguous copy
        assert np.array_equal(got, want), m
        tol = 4e-3 if got.dtype == np.float16 else 2e-5
        np.testing.assert_allclose(got.astype(np.float64), _np_rotate(ref.astype(got.dtype), pos, rope),
                                   atol=tol * max(1.0, float(np.abs(ref).max())), rtol=0)
    bufs = [b for b in (x, out) if isinstance(b, (np.ndarray, torch.Tensor))]
    return call, bufs, check


def _fuzz_kv(rng, rope, m):
    t = int(rng.integers(1, 5))  # (q_out over the 2048-element cache: at most 4 tokens)
    qkv = rnd(t, (H + 2 * KV) * D, seed=int(rng.integers(1 << 30)))
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    pos = rng.integers(0, 3000, t)
    slots = rng.permutation(8)[:t]
    kc, vc = np.zeros((2, 8, KV, D), np.float32), np.zeros((2, 8, KV, D), np.float32)
    layer, q_out = int(rng.integers(2)), None
    if m == "slot_dup" and t > 1:
        slots[-1] = slots[0]
    elif m == "slot_oob":
        slots[int(rng.integers(t))] = int(rng.choice([8, -1, 1 << 62]))
    elif m == "layer":
        layer = [2, -1, 1 << 63, 1.0, "0"][int(rng.integers(5))]
    elif m == "cache_dtype":
        kc = kc.astype([np.float64, np.int16, np.float16][int(rng.integers(3))])
    elif m == "cache_alias":
        if rng.integers(2):
            vc = kc
        else:
            q_out = kc.reshape(-1)[:t * H * D].reshape(t, H, D)
    elif m == "kv_shape":
        v = rnd(t + 1, KV, D)
    elif m == "pos_neg":
        pos[0] = -1
    elif m == "readonly_out":
        q_out = ro(np.zeros((t, H, D), np.float32))
    elif m == "out_shift":
        q_out = qkv.reshape(-1)[1:1 + t * H * D].reshape(t, H, D)

    def call():
        return rope.apply_kv_cache(q, k, v, pos, slots, kc, vc, q_out=q_out, layer=layer)

    q0, k0, v0 = q.copy(), k.copy(), v.copy()

    def check(res):
        q_ref, k_ref = q0.copy(), k0.copy()
        rope.apply_qk(q_ref, k_ref, pos)
        assert np.array_equal(res, q_ref), m
        assert np.array_equal(kc[layer, slots], k_ref) and np.array_equal(vc[layer, slots], v0), m
        np.testing.assert_allclose(res, _np_rotate(q0, pos, rope), atol=2e-5 * float(np.abs(q0).max()), rtol=0)
    bufs = [b for b in (qkv, kc, vc, q_out) if isinstance(b, np.ndarray)]
    return call, bufs, check


def _fuzz_hf(rng, rope, m):
    s_len = int(rng.integers(1, 6))
    q = torch.from_numpy(rnd(2, H, s_len, D, seed=int(rng.integers(1 << 30))))
    k = torch.from_numpy(rnd(2, KV, s_len, D, seed=int(rng.integers(1 << 30))))
    c, s = rope.cos_sin(np.arange(s_len))
    c = torch.from_numpy(np.concatenate([c, c], -1)[None])
    s = torch.from_numpy(np.concatenate([s, s], -1)[None])
    out = (torch.zeros_like(q), torch.zeros_like(k)) if rng.integers(2) else None
    if m == "hf_out_alias":
        out = [(q, torch.zeros_like(k)), (torch.zeros_like(q), q[:, :KV]), (c.expand(2, s_len, D)[:, None].expand(2, H, s_len, D), torch.zeros_like(k))][int(rng.integers(3))]
        if out[0] is q:  # q in place, k into a fresh tensor: valid
            pass
    elif m == "hf_cos_dtype":
        c = c.to([torch.float64, torch.float16, torch.int32][int(rng.integers(3))])
    elif m == "torch_grad":
        q = q.requires_grad_()
    elif m == "pos_len":
        c, s = c[:, :max(s_len - 1, 0)], s[:, :max(s_len - 1, 0)]
    q0, k0 = q.detach().clone(), k.clone()

    def call():
        return hf.apply_cos_sin(q, k, c, s, out=out)

    def check(res):
        want_q = _np_rotate(q0.numpy().transpose(0, 2, 1, 3).reshape(-1, H, D), np.tile(np.arange(s_len), 2), rope)
        got = res[0].detach().numpy().transpose(0, 2, 1, 3).reshape(-1, H, D)
        np.testing.assert_allclose(got, want_q, atol=2e-5 * float(q0.abs().max()), rtol=0)
        hf_q = q0 * c[:, None] + torch.cat([-q0[..., D // 2:], q0[..., :D // 2]], -1) * s[:, None]
        assert torch.equal(res[0].detach(), hf_q), m  # HF's formula, bit for bit
    bufs = [b for b in (k, c, s) + (tuple(out) if out else ())]
    if not q.requires_grad:
        bufs.append(q)
    return call, bufs, check


def test_fuzz_one_mutation_at_a_time(rope):
    rng = np.random.default_rng(20261201)
    outcomes = {"ok": 0, "refused": 0}
    for i in range(360):
        kind = ("apply", "kv", "hf")[i % 3]
        maker = {"apply": _fuzz_apply, "kv": _fuzz_kv, "hf": _fuzz_hf}[kind]
        m = MUTATIONS[kind][int(rng.integers(len(MUTATIONS[kind])))]
        call, bufs, check = maker(rng, rope, m)
        before = [snap(b) for b in bufs]
        try:
            res = call()
        except (ValueError, TypeError) as e:
            msg = str(e)
            assert msg and "\n" not in msg.strip(), (i, m, msg)
            assert ":" in msg, (i, m, msg)  # "<argument>: what is wrong"
            for j, (b, sn) in enumerate(zip(bufs, before)):
                assert same(b, sn), f"case {i} ({maker.__name__}, {m}): buffer {j} written before '{msg}'"
            outcomes["refused"] += 1
            continue
        check(res)
        outcomes["ok"] += 1
    assert outcomes["ok"] >= 60 and outcomes["refused"] >= 100, outcomes


# ---- buffer owners, argument conversion, validate-then-write (issue 32, items 3 and 4) -------------


def _owners(nbytes):
    """(name, numpy float32 array over the whole of an owner's memory, the owner) for each kind of
    buffer owner: bytearray, an mmap, a memoryview slice, array.array, and a DLPack import."""
    import array
    import mmap
    ba = bytearray(nbytes)
    mm = mmap.mmap(-1, nbytes)
    big = bytearray(nbytes + 64)
    arr = array.array("f", [0.0] * (nbytes // 4))
    out = [("bytearray", np.frombuffer(ba, np.float32), ba),
           ("mmap", np.frombuffer(mm, np.float32), mm),
           ("memoryview slice", np.frombuffer(memoryview(big)[64:], np.float32), big),
           ("array.array", np.frombuffer(arr, np.float32), arr)]
    src = np.zeros(nbytes // 4, np.float32)
    out.append(("dlpack", np.from_dlpack(src), src))
    return out


def test_views_reaching_outside_any_owner_are_refused(rope):
    """A view made with as_strided over memory numpy does not own (np.frombuffer of a bytearray, an mmap,
    a memoryview, array.array; a DLPack import) reaches past it: every call that reads or writes it
    refuses it by name, and the owner's bytes stay as they were. The same view kept inside is used."""
    n = T * H * D
    for name, flat, owner in _owners(n * 4):
        writable = flat.flags.writeable  # (np.from_dlpack's arrays are read-only)
        (flat if writable else owner)[:] = np.arange(n, dtype=np.float32)
        inside = ast(flat, (T, H, D), (H * D * 4, D * 4, 4))
        past = ast(flat, (T + 3, H, D), (H * D * 4, D * 4, 4))  # 3 tokens past the end
        ref = snap(flat)
        cos = np.ones((1, T + 3, D), np.float32)
        calls = [("hf q (read)", lambda x: hf.apply_cos_sin(x.transpose(1, 0, 2)[None], rnd(1, KV, x.shape[0], D), cos, cos))]
        if writable:
            calls += [("apply", lambda x: rope.apply(x, np.arange(x.shape[0]))),
                      ("apply out", lambda x: rope.apply(rnd(*x.shape), np.arange(x.shape[0]), out=x)),
                      ("apply_qk k", lambda x: rope.apply_qk(rnd(x.shape[0], H, D), x[:, :KV], np.arange(x.shape[0]))),
                      ("hf out", lambda x: hf.apply_cos_sin(rnd(1, H, x.shape[0], D), rnd(1, H, x.shape[0], D), cos, cos,
                                                            out=(x.transpose(1, 0, 2)[None], rnd(1, H, x.shape[0], D))))]
        for what, call in calls:
            refuses(lambda: call(past), ValueError, r"reach outside the \d+ bytes of the memory it views", flat)
            assert same(flat, ref), f"{name} {what}: the owner was written"
        if writable:
            rope.apply(inside, np.arange(T))  # inside the owner: rotated in place
            assert not same(flat, ref), f"{name}: a view inside its owner was not rotated"
        else:
            hf.apply_cos_sin(inside.transpose(1, 0, 2)[None], rnd(1, KV, T, D), cos[:, :T], cos[:, :T])  # read inside: fine
    # Memory a foreign object declares only through a strided interface (no buffer, no contiguous
    # extent): a view of it is refused, never trusted.
    class Foreign:
        def __init__(self, a):
            self.__array_interface__ = dict(a.__array_interface__)
    base = np.zeros(2 * n, np.float32)
    foreign = np.asarray(Foreign(ast(base, (T, H, D), (2 * H * D * 4, D * 4, 4))))
    refuses(lambda: rope.apply(ast(foreign, (T + 3, H, D), foreign.strides), np.arange(T + 3)), ValueError,
            r"^x: a view of memory whose extent posenc cannot find")


def test_config_nesting_is_bounded_before_recursion():
    deep = {}
    d = deep
    for _ in range(5000):
        d["a"] = {}
        d = d["a"]
    refuses(lambda: posenc.Rope(deep), ValueError, r"^config: a\.a\.a[a.]* is nested more than 32 levels deep")
    cyc = dict(CFG)
    cyc["self"] = cyc
    refuses(lambda: posenc.load_scheme(cyc), ValueError, r"is nested more than \d+ levels deep")
    lst = [0]
    for _ in range(5000):
        lst = [lst]
    refuses(lambda: posenc.Scheme.from_ggml({"n_dims": lst}, 64), ValueError, r"^params: .* is nested more than")


def test_paths_with_nul_are_refused(tmp_path):
    good = tmp_path / "config.json"
    good.write_text("{}")
    for call, pat in [(lambda: posenc.Scheme.from_config(str(good) + "\0.gguf"), r"^config: '.*\.\.\. \(\d+ characters\) holds a NUL character at index \d+"),
                      (lambda: posenc.load_scheme(str(good) + "\0x"), r"^source: .* holds a NUL character"),
                      (lambda: posenc.Scheme.from_gguf(b"/tmp/x\0y"), r"^path: .* holds a NUL character"),
                      (lambda: posenc.Scheme.from_model("a\0b"), r"^path: 'a\\x00b' holds a NUL character at index 1"),
                      (lambda: posenc.Model("m\0"), r"^path: .* holds a NUL"),
                      (lambda: posenc.golden("g\0"), r"^folder: .* holds a NUL")]:
        refuses(call, ValueError, pat)
    refuses(lambda: posenc.Model(5), TypeError, r"^path: 5 \(int\) is not a path")


def test_huge_counts_are_refused_before_allocating():
    refuses(lambda: cp.shard([2 ** 31 - 1], 2, 0), ValueError, r"^seq_lens: \d+ tokens per rank is more than posenc builds at once")
    refuses(lambda: cp.shard([1], 2 ** 31 - 1, 0), ValueError, r"^seq_len: 1 padded to a multiple of \d+ is \d+ tokens, whose positions pass 2\^31")
    refuses(lambda: cp.padded_length(2 ** 31 - 1, 3), ValueError, r"^seq_len: 2147483647 padded to a multiple of 6 is 2147483652 tokens")
    assert cp.padded_length(2 ** 31 - 1, 2) == 2 ** 31  # (its last padding position is 2^31 - 1)


def test_apply_layer_checks_everything_before_writing():
    """A query temperature that overflows float32 at these positions, and a k that does not fit: q and
    k are left as they were (the rotation used to run first, then the temperature raised)."""
    cfg = {"model_type": "llama4_text", "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2,
           "head_dim": 64, "num_hidden_layers": 4, "max_position_embeddings": 1 << 20, "rope_theta": 5e5,
           "no_rope_layers": [1, 1, 1, 0], "attn_temperature_tuning": True, "floor_scale": 1, "attn_scale": 3e38}
    try:
        r = posenc.Rope(cfg)
    except ValueError as e:
        # The config reader bounds the temperature keys to what float32 holds (attn_scale 3e38 is refused
        # before any tensor is touched): nothing to write half-way.
        assert "attn_scale" in str(e) and "\n" not in str(e)
        return
    sch = r.scheme.layer_schedule()
    layer = next(i for i, t in enumerate(sch.temperature) if t)
    pos = np.array([0, 10, 1000, 100000])
    scales = r.scheme.attn_temperature_scales(pos)
    q, k = rnd(T, H, D), rnd(T, KV, D, seed=1)
    if np.isfinite(scales).all():
        pytest.skip("the library refuses or bounds this temperature itself")
    refuses(lambda: r.apply_layer(q, k, pos, layer), ValueError, r"^attn_temperature: the scale at token \d+ is inf", q, k)
    for i, rope_on in enumerate(sch.rope):
        if rope_on:
            refuses(lambda: r.apply_layer(q, rnd(T, KV, D + 2), pos, i), ValueError, r"k has head_dim 66", q)
            break


def test_int_arguments_out_of_range_give_one_line():
    """Integers past what the library takes (2^63 - 1, -2^63, 2^64) in every integer argument are one
    line naming the argument: never pybind11's multi-line signature dump, never a wrap."""
    big = [2 ** 63 - 1, -2 ** 63, 2 ** 64, 2 ** 31]
    calls = {
        "text_vision_positions start": lambda v: posenc.text_vision_positions([2], start=v),
        "text_vision_positions spatial_merge_size": lambda v: posenc.text_vision_positions([2], v),
        "text_vision_positions grid": lambda v: posenc.text_vision_positions([{"type": "image", "grid_thw": [1, v, 2]}]),
        "vision_patch_positions": lambda v: posenc.vision_patch_positions([1, 2, v]),
        "sinusoidal d_model": lambda v: posenc.sinusoidal_table([0], v),
        "alibi_slopes": lambda v: posenc.alibi_slopes(v),
        "t5_buckets num_buckets": lambda v: posenc.t5_buckets([0], num_buckets=v),
        "t5_buckets max_distance": lambda v: posenc.t5_buckets([0], max_distance=v),
        "shaw": lambda v: posenc.shaw_indices(2, 2, v),
        "from_ggml head_dim": lambda v: posenc.Scheme.from_ggml({"n_dims": 64}, v),
        "set_num_threads": lambda v: posenc.set_num_threads(v),
        "Rope seq_len": lambda v: posenc.Rope(CFG, seq_len=v),
        "Rope max_positions": lambda v: posenc.Rope(CFG, max_positions=v),
        "frequencies seq_len": lambda v: posenc.load_scheme(CFG).frequencies(v),
        "mrope positions": lambda v: posenc.Rope(QWEN2_VL).apply_multi_axis(rnd(T, 12, 128), np.full((3, T), v, dtype=np.uint64 if v >= 2 ** 63 else np.int64)),
        "attn_temperature_scales": lambda v: posenc.load_scheme(CFG).attn_temperature_scales([v]),
        "apply positions": lambda v: posenc.Rope(CFG).apply(rnd(T, H, D), [v] * T),
    }
    for name, call in calls.items():
        for v in big:
            try:
                call(v)
            except (ValueError, TypeError, OverflowError, NotImplementedError) as e:
                msg = str(e)
                assert "\n" not in msg.strip() and len(msg) < 1024, f"{name}({v}): {msg!r}"
                assert "incompatible function arguments" not in msg, f"{name}({v}): {msg}"
                assert not isinstance(e, OverflowError) or "int" in msg, f"{name}({v}): {msg}"
