"""Hugging Face's RoPE frequencies and attention scaling, re-derived in plain torch for the conformance test.

Written from reading transformers' modeling_rope_utils.py (the v5 rope_parameters form: default, linear,
dynamic, yarn, longrope, llama3) and the families' own modeling code where they compute the angles their
own way (ChatGLM, Qwen 1.0, Phi-3-small, the DeepSeek rope slice, Gemma 3's local base, the per-layer
rules of OLMo 3). Nothing here calls posenc: it is the independent side of the comparison. Every value is
computed in float32 as torch computes it in those files.

    freqs(config, layer_type=None, seq_len=None) -> Rope(inv_freq: list[float], attention_factor, dim)
"""
import math
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class Rope:
    inv_freq: list
    attention_factor: float
    dim: int


# The families whose configs nest the language model's keys (vision-language, Gemma 3, Llama 4).
def text_config(config: dict) -> dict:
    tc = config.get("text_config")
    if isinstance(tc, dict) and any(k in tc for k in ("rope_theta", "rope_scaling", "rope_parameters", "hidden_size")):
        merged = dict(tc)
        merged.setdefault("model_type", config.get("model_type"))
        merged["_outer_model_type"] = config.get("model_type")
        return merged
    return config


def _arange_shape(dim: int) -> torch.Tensor:
    return torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim


def _default(base: float, dim: int) -> torch.Tensor:
    return 1.0 / (base**_arange_shape(dim))


def head_dim(c: dict) -> int:
    if c.get("d_model") and c.get("n_heads") and not c.get("hidden_size"):  # DBRX
        return int(c["d_model"]) // int(c["n_heads"])
    hd = c.get("head_dim")
    if hd:
        return int(hd)
    if c.get("kv_channels"):
        return int(c["kv_channels"])
    return int(c["hidden_size"]) // int(c["num_attention_heads"])


# The defaults of the families' configuration classes (configuration_<family>.py) for the keys a
# published config may leave out.
CLASS_DEFAULTS = {
    "falcon": {"max_position_embeddings": 2048},
    "persimmon": {"partial_rotary_factor": 0.5},
    "stablelm": {"partial_rotary_factor": 0.25},
    "nemotron": {"partial_rotary_factor": 0.5},
    "phi": {"partial_rotary_factor": 0.5},
    "glm": {"partial_rotary_factor": 0.5},
    "glm4": {"partial_rotary_factor": 0.5},
    "glm4_moe": {"partial_rotary_factor": 0.5},
    "qwen3_next": {"partial_rotary_factor": 0.25},
    "stablelm_epoch": {"rope_pct": 0.25},
    "dbrx": {"max_seq_len": 2048},
}


def with_class_defaults(c: dict) -> dict:
    out = dict(CLASS_DEFAULTS.get(c.get("model_type"), {}))
    out.update(c)
    # NemotronConfig: the old spelling rope_percent wins over partial_rotary_factor (backward compatibility).
    if c.get("model_type") == "nemotron" and c.get("rope_percent"):
        out["partial_rotary_factor"] = c["rope_percent"]
    # StableLMEpoch (remote code, stabilityai/stablelm-3b-4e1t): rotary_ndims = head_dim * rope_pct.
    if c.get("model_type") == "stablelm_epoch":
        out["partial_rotary_factor"] = out["rope_pct"]
    # DbrxConfig: the base is attn_config.rope_theta (DbrxRotaryEmbedding), the length max_seq_len.
    if c.get("model_type") == "dbrx":
        out["rope_theta"] = (c.get("attn_config") or {}).get("rope_theta", 10000.0)
        out.setdefault("max_position_embeddings", out["max_seq_len"])
    return out


def max_positions(c: dict) -> int:
    for k in ("max_position_embeddings", "n_positions", "seq_length", "max_sequence_length", "max_seq_len"):
        if c.get(k):
            return int(c[k])
    raise KeyError("max_position_embeddings")


def _rope_parameters(c: dict, layer_type: Optional[str]) -> dict:
    """The standardised rope_parameters of transformers v5: rope_scaling (or type) with rope_theta and
    partial_rotary_factor folded in; a per-layer-type dict where the config nests one."""
    rp = c.get("rope_parameters")
    if isinstance(rp, dict) and layer_type is not None and isinstance(rp.get(layer_type), dict):
        p = dict(rp[layer_type])
    elif isinstance(rp, dict) and rp and all(isinstance(v, dict) for v in rp.values()):
        p = dict(rp.get(layer_type or "full_attention") or next(iter(rp.values())))
    elif isinstance(rp, dict) and rp:
        p = dict(rp)
    else:
        p = dict(c.get("rope_scaling") or {})
    if "rope_type" not in p:
        p["rope_type"] = p.get("type", "default")
    if p["rope_type"] == "su":  # the old name of longrope (Phi-3 remote code; transformers maps it)
        p["rope_type"] = "longrope"
    p.setdefault("rope_theta", c.get("rope_theta", 10000.0))
    if "partial_rotary_factor" in c and "partial_rotary_factor" not in p:
        p["partial_rotary_factor"] = c["partial_rotary_factor"]
    if "original_max_position_embeddings" not in p:
        p["original_max_position_embeddings"] = c.get("original_max_position_embeddings", max_positions(c))
    return p


def _yarn(p: dict, c: dict, base: float, dim: int):
    factor = p.get("factor")
    omax = p["original_max_position_embeddings"]
    if factor is None:
        factor = max_positions(c) / omax

    def get_mscale(scale, m=1):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = p.get("attention_factor")
    if attention is None:
        ms, msa = p.get("mscale"), p.get("mscale_all_dim")
        attention = float(get_mscale(factor, ms) / get_mscale(factor, msa)) if ms and msa else get_mscale(factor)
    beta_fast = p.get("beta_fast") or 32
    beta_slow = p.get("beta_slow") or 1

    def corr(rot):
        return (dim * math.log(omax / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr(beta_fast), corr(beta_slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extra = 1.0 - ramp
    inv = (1.0 / (factor * pos)) * (1 - extra) + (1.0 / pos) * extra
    return inv, attention


def _llama3(p: dict, base: float, dim: int):
    inv = _default(base, dim)
    factor, lo, hi = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    old = p["original_max_position_embeddings"]
    low_wl, high_wl = old / lo, old / hi
    wl = 2 * math.pi / inv
    out = torch.where(wl > low_wl, inv / factor, inv)
    smooth = (old / wl - lo) / (hi - lo)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wl < high_wl) * ~(wl > low_wl)
    return torch.where(medium, smoothed, out), 1.0


def _longrope(p: dict, c: dict, base: float, dim: int, seq_len: Optional[int]):
    omax = p["original_max_position_embeddings"]
    factor = p.get("factor")
    if factor is None or "original_max_position_embeddings" in c:
        # Phi-3 keeps the pretrained length at the top level; the ratio is the factor there.
        factor = max_positions(c) / omax
    attention = p.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(omax))
    ext = p["long_factor"] if seq_len and seq_len > omax else p["short_factor"]
    inv = 1.0 / (torch.tensor(ext, dtype=torch.float32) * base**_arange_shape(dim))
    return inv, attention


def _dynamic(p: dict, c: dict, base: float, dim: int, seq_len: Optional[int]):
    mx = max_positions(c)
    s = mx if seq_len is None else max(seq_len, mx)
    factor = p["factor"]
    base = base * ((factor * s / mx) - (factor - 1)) ** (dim / (dim - 2))
    return _default(base, dim), 1.0


def _standard(c: dict, p: dict, dim: int, seq_len: Optional[int]):
    base = float(p["rope_theta"])
    kind = p["rope_type"]
    if kind in ("default", "mrope"):  # mrope: the frequencies are the default ones, the sections split them
        return _default(base, dim), 1.0
    if kind == "linear":
        return _default(base, dim) / p["factor"], 1.0
    if kind == "dynamic" and p.get("alpha"):
        # modeling_hunyuan_v1_dense.py: DynamicNTKAlpha, base * alpha ** (dim / (dim - 2)) (up to
        # max_position_embeddings, where transformers keeps these frequencies).
        return _default(base * p["alpha"] ** (dim / (dim - 2)), dim), 1.0
    if kind == "dynamic":
        return _dynamic(p, c, base, dim, seq_len)
    if kind == "yarn":
        return _yarn(p, c, base, dim)
    if kind == "longrope":
        return _longrope(p, c, base, dim, seq_len)
    if kind == "llama3":
        return _llama3(p, base, dim)
    raise ValueError(f"hf_reference: no rope_type {kind!r}")


def rotary_dim(c: dict) -> int:
    """The number of rotated dimensions, as each family's code takes it."""
    mt = c.get("model_type")
    if mt in ("deepseek_v2", "deepseek_v3", "kimi_k2") or (c.get("qk_rope_head_dim") and c.get("kv_lora_rank")):
        return int(c["qk_rope_head_dim"])
    if mt == "chatglm":
        return head_dim(c) // 2
    if mt in ("gptj", "codegen") and c.get("rotary_dim"):
        return int(c["rotary_dim"])
    if mt == "gpt_neox" or (mt == "qwen" and "rotary_pct" in c):
        return int(head_dim(c) * c.get("rotary_pct", 1.0))
    p = _rope_parameters(c, None)
    return int(head_dim(c) * p.get("partial_rotary_factor", c.get("partial_rotary_factor", 1.0)))


def freqs(config: dict, layer_type: Optional[str] = None, seq_len: Optional[int] = None) -> Rope:
    c = with_class_defaults(text_config(config))
    mt = c.get("model_type")
    dim = rotary_dim(c)
    if mt == "chatglm":
        # modeling_chatglm.py: RotaryEmbedding(dim // 2, original_impl, ...); base 10000 * rope_ratio.
        base = 10000.0 * float(c.get("rope_ratio", 1.0))
        return Rope(_default(base, dim).tolist(), 1.0, dim)
    if mt == "qwen":
        # modeling_qwen.py: base rotary_emb_base; with use_dynamic_ntk, past seq_length the base is
        # multiplied by ntk_alpha ** (dim / (dim - 2)), ntk_alpha = 2 ** ceil(log2(len / seq_length) + 1) - 1.
        base = float(c.get("rotary_emb_base", 10000.0))
        alpha = 1.0
        if c.get("use_dynamic_ntk") and seq_len:
            alpha = max(2 ** math.ceil(math.log(seq_len / c["seq_length"], 2) + 1) - 1, 1)
        base = base * alpha ** (dim / (dim - 2))
        return Rope(_default(base, dim).tolist(), 1.0, dim)
    if mt == "phi3small":
        # modeling_phi3_small.py: base rope_embedding_base; positions times rope_position_scale.
        base = float(c.get("rope_embedding_base", 1000000.0))
        inv = _default(base, dim) * float(c.get("rope_position_scale", 1.0))
        return Rope(inv.tolist(), 1.0, dim)
    p = _rope_parameters(c, layer_type)
    if layer_type == "sliding_attention" and "rope_local_base_freq" in c and not isinstance(c.get("rope_parameters"), dict):
        # Gemma 3: the local layers take rope_local_base_freq, unscaled.
        p = {"rope_type": "default", "rope_theta": c["rope_local_base_freq"]}
    if layer_type == "sliding_attention" and mt == "olmo3" and not isinstance(c.get("rope_parameters"), dict):
        # modeling_olmo3.py: sliding layers get a default rotary embedding, full layers the config's scaling.
        p = {"rope_type": "default", "rope_theta": p["rope_theta"]}
    inv, attention = _standard(c, p, dim, seq_len)
    return Rope(inv.tolist(), float(attention), dim)


def layer_types(config: dict) -> list:
    """The layer types whose RoPE may differ, as the config declares them."""
    c = text_config(config)
    lt = c.get("layer_types")
    if isinstance(lt, list) and lt:
        return sorted(set(lt))
    # Gemma 3: the sliding layers' base differs (rope_local_base_freq). A sliding_window_pattern alone
    # (Cohere 2) changes which layers rotate, not the RoPE of those that do.
    if "rope_local_base_freq" in c:
        return ["full_attention", "sliding_attention"]
    return []
