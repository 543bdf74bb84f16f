"""llama.cpp's RoPE frequencies and cos/sin scale for a GGUF file's metadata, re-derived for the conformance test.

Written from reading llama.cpp's src/llama-model.cpp (load_hparams: n_rot, rope.freq_base, rope.scaling.*),
src/llama-context.cpp (the YaRN defaults: ext_factor 1 for YaRN, beta_fast 32, beta_slow 1) and
ggml/src/ggml-cpu/ops.cpp (rope_yarn, ggml_rope_yarn_corr_dims). ggml forms each pair's angle as
theta_scale ** i * p (theta_scale = base ** (-2 / n_rot)) in float32 by repeated products; this gives the
exact value of that formula in double, which is what the kernel approximates. Nothing here calls posenc.

    freqs(kv) -> hf_reference.Rope(inv_freq, attention_factor, dim)
"""
import math

from hf_reference import Rope


def _kv(kv):
    return {k: v for k, _t, v in kv}


def freqs(kv) -> Rope:
    d = _kv(kv)
    arch = d["general.architecture"]

    def get(key, default=None):
        return d.get(f"{arch}.{key}", default)

    n_embd = get("embedding_length")
    n_head = get("attention.head_count")
    n_head_k = get("attention.key_length", n_embd // n_head if n_embd and n_head else None)
    n_rot = get("rope.dimension_count", n_head_k)
    base = float(get("rope.freq_base", 10000.0))
    factor = get("rope.scaling.factor")
    if factor is None:
        factor = get("rope.scale_linear")
    freq_scale = 1.0 if not factor else 1.0 / float(factor)
    kind = get("rope.scaling.type", "linear" if factor else "none")

    theta_scale = base ** (-2.0 / n_rot)
    inv = [theta_scale**i for i in range(n_rot // 2)]
    attention = 1.0
    if kind == "yarn":
        n_ctx_orig = get("rope.scaling.original_context_length", get("context_length"))
        beta_fast = float(get("rope.scaling.yarn_beta_fast", 32.0) or 32.0)
        beta_slow = float(get("rope.scaling.yarn_beta_slow", 1.0) or 1.0)

        def corr(rot):
            return n_rot * math.log(n_ctx_orig / (rot * 2 * math.pi)) / (2 * math.log(base))

        low = max(0.0, math.floor(corr(beta_fast)))
        high = min(n_rot - 1.0, math.ceil(corr(beta_slow)))
        out = []
        for i, f in enumerate(inv):
            y = (i - low) / max(0.001, high - low)
            mix = 1.0 - min(1.0, max(0.0, y))
            out.append(f * (freq_scale * (1 - mix) + mix))
        inv = out
        attn_factor = float(get("rope.scaling.attn_factor", 1.0) or 1.0)
        if arch == "deepseek2":
            # llama.cpp's deepseek2 graph passes attn_factor / (1 + 0.1 ln(1 / freq_scale)) to rope, so the
            # cos/sin scale is 1; the YaRN mscale goes into the softmax scale instead.
            attention = 1.0
        else:
            attention = attn_factor * (1.0 + 0.1 * math.log(1.0 / freq_scale))
    elif kind in ("linear", "none") and freq_scale != 1.0:
        inv = [f * freq_scale for f in inv]
    return Rope(inv, attention, n_rot)
