"""Hugging Face's RoPE frequencies and attention scaling, re-derived in plain torch for the conformance test.

Written from reading transformers' modeling_rope_utils.py (the v5 rope_parameters form: default, linear,
dynamic, yarn, longrope, llama3) and the families' own modeling code where they compute the angles their
own way (ChatGLM, Qwen 1.0, Phi-3-small, the DeepSeek rope slice, Gemma 3's local base, the per-layer
rules of OLMo 3). Nothing here calls posenc: it is the independent side of the comparison. Every value is
computed in float32 as torch computes it in those files.

    freqs(config, layer_type=None, seq_len=None) -> Rope(inv_freq: list[float], attention_factor, dim)
    structure(config) -> Structure: every decoder layer (kind, RoPE or not, parameter set, head size) and the
                         RoPE sites of an attention layer, for the 2026 structures (see its docstring)
    site_freqs(config, structure, site, key, seq_len=None) -> Rope of one site under one parameter set
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
    # MiniMaxM2Config: released checkpoints state partial RoPE as a legacy rotary_dim (rotary_dim / head_dim).
    if c.get("model_type") == "minimax_m2" and c.get("rotary_dim") and "partial_rotary_factor" not in c:
        out["partial_rotary_factor"] = c["rotary_dim"] / head_dim(c)
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


# ---------------------------------------------------------------------------------------------------------
# The 2026 structures: layers without attention or without RoPE, several RoPE sites in one layer, keyed
# parameter sets, per-layer head sizes, proportional RoPE. Read from transformers 5.25.0 (the pinned release of
# tests/registry_sync): configuration_utils.py (_LEGACY_LAYER_TYPE_REMAP), modeling_rope_utils.py
# (_compute_proportional_rope_parameters) and the families' configuration_*.py / modeling_*.py named below.
# ---------------------------------------------------------------------------------------------------------

# configuration_utils.py: _LEGACY_LAYER_TYPE_REMAP, applied to every config's layer_types.
LEGACY_LAYER_TYPES = {"mamba": "linear_attention", "attention": "full_attention",
                      "deepseek_sparse_attention": "indexed_attention", "qwen_sparse_attention": "indexed_attention"}
# Layer types whose mixer is not self-attention (a Mamba-2 / Gated DeltaNet / KDA mixer, LFM2's short conv,
# Nemotron-H's MoE-only and MLP-only blocks): no q / k, no positions.
NO_ATTENTION_TYPES = {"linear_attention", "conv", "moe", "mlp"}


@dataclass
class Site:
    head_dim: int      # the head the site rotates (q / k of the layer, the index head, the single KV head)
    rotary_dim: int
    rotary_start: int  # 0: front of the head; head_dim - rotary_dim: back
    layout: Optional[str]  # half or interleaved (None: the family's pairing, stated by the record)
    key: Optional[str] = None  # a site fixed to one parameter set (DeepSeek-V4's indexer and compressor)


@dataclass
class Structure:
    types: list        # per layer, the layer type as the family's config class derives it
    attention: list    # per layer: 1 = self-attention
    rope: list         # per layer: 1 = its attention rotates q / k
    keys: list         # per layer: the parameter set (a layer type or a rope label) or None
    head_dim: list     # per layer: the q / k head size of its attention (0 for none)
    sites: dict        # site name -> Site (for a layer of the default parameter set)
    none: bool         # the model applies no positions at all
    key_heads: Optional[dict] = None  # parameter set -> head size where it differs per set (Gemma 4)
    indexer_layers: Optional[list] = None  # DSA: per layer, whether it runs its own indexer (GLM-5.2)

    def site(self, name: str, key: Optional[str]) -> Site:
        s = self.sites[name]
        if self.key_heads and key in self.key_heads:
            h = self.key_heads[key]
            return Site(h, h, 0, s.layout, s.key)
        return s


def _remap(types):
    return [LEGACY_LAYER_TYPES.get(t, t) for t in types]


def _derived_layer_types(c: dict) -> Optional[list]:
    """The layer types of the families whose config class derives them (configuration_<family>.py)."""
    mt, n = c.get("model_type"), int(c.get("num_hidden_layers") or 0)
    lt = c.get("layer_types") or c.get("layers_block_type")
    if mt == "nemotron_h":
        if lt:
            return _remap(lt)
        if c.get("hybrid_override_pattern"):
            m = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}
            return [m[ch] for ch in c["hybrid_override_pattern"]]
        return ["linear_attention", "moe", "full_attention", "mlp"]
    if mt == "granitemoehybrid":
        return _remap(lt) if lt else ["linear_attention"] * n
    if mt == "kimi_linear":
        if lt:
            return _remap(lt)
        lac = c.get("linear_attn_config") or {}
        if "full_attn_layers" in lac and "kda_layers" in lac:
            out = [None] * n
            for i in lac["full_attn_layers"]:
                out[i - 1] = "full_attention"  # 1-indexed in the checkpoint
            for i in lac["kda_layers"]:
                out[i - 1] = "linear_attention"
            return out
        return ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n)]
    if mt in ("lfm2", "lfm2_moe"):
        if lt:
            return _remap(lt)
        idx = c.get("full_attn_idxs")
        idx = list(range(n)) if idx is None else idx
        return ["full_attention" if i in idx else "conv" for i in range(n)]
    if mt in ("qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"):
        if lt:
            return _remap(lt)
        k = int(c.get("full_attention_interval", 4))
        return ["linear_attention" if (i + 1) % k else "full_attention" for i in range(n)]
    if mt in ("gemma4", "gemma4_text"):
        out = list(lt) if lt else ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
        if out:
            out[-1] = "full_attention"  # Gemma4TextConfig forces the last layer to full attention
        return out
    if mt == "mimo_v2" and c.get("hybrid_layer_pattern") is not None and not lt:
        # MiMo-V2 remote code (modeling_mimo_v2.py, MiMoV2DecoderLayer): hybrid_layer_pattern 1 = a sliding-window
        # attention layer (swa_* heads, swa_rope_theta), 0 = full attention (rope_theta).
        return ["sliding_attention" if v == 1 else "full_attention" for v in c["hybrid_layer_pattern"]]
    if mt == "deepseek_v4":
        if lt:
            return list(lt)[:n]
        ratio = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
        if c.get("compress_ratios") is not None:
            return [ratio[r] for r in c["compress_ratios"]][:n]
        inter = ["compressed_sparse_attention" if i % 2 else "heavily_compressed_attention" for i in range(max(n - 2, 0))]
        return (["heavily_compressed_attention"] * min(n, 2) + inter)[:n]
    if lt:
        return _remap(lt)
    return None


def _mla_head(c: dict) -> int:
    return int(c.get("qk_nope_head_dim", 0)) + int(c.get("qk_rope_head_dim", 0))


def structure(config: dict) -> Structure:
    """What the family's modeling code does per layer, for the configs whose structure is more than one RoPE
    over every layer. Per family:

    - granitemoehybrid (modeling_granitemoehybrid.py: `rotary_emb = ... if config.position_embedding_type ==
      "rope" else None`): mamba / linear_attention layers have no attention; attention rotates only when
      position_embedding_type is exactly "rope".
    - nemotron_h (NemotronHAttention.forward never applies the rotary function): no positions anywhere.
    - kimi_linear (no rotary embedding class in modeling_kimi_linear.py; MLA with mla_use_nope): no positions.
    - MLA families with qk_rope_head_dim 0: no rotary slice, no positions.
    - qwen3_next / qwen3_5 / lfm2 / olmo_hybrid: linear-attention or conv layers carry no positions.
    - gemma4(_text): full-attention layers have head global_head_dim (default 512) and proportional RoPE.
    - deepseek_v32, glm_moe_dsa: the MLA site (back of the qk_nope + qk_rope head, interleaved) and the DSA
      indexer site (front qk_rope dims of the index head; half for V3.2, interleaved for GLM).
    - deepseek_v4: parameter sets keyed main / compress, the window at the back of head_dim, interleaved;
      sites attention, attention_output, indexer (compress set), compressor (compress set).
    """
    c = text_config(config)
    mt = c.get("model_type")
    n = int(c.get("num_hidden_layers") or 0)
    types = _derived_layer_types(c) or ["full_attention"] * n
    attention = [0 if t in NO_ATTENTION_TYPES else 1 for t in types]
    none = False
    if mt == "granitemoehybrid" and c.get("position_embedding_type") != "rope":
        none = True
    if mt in ("nemotron_h", "kimi_linear"):
        none = True
    if c.get("kv_lora_rank") and c.get("qk_rope_head_dim") == 0:
        none = True
    rope = [0 if none else a for a in attention]

    hd = head_dim(with_class_defaults(c)) if (c.get("hidden_size") or c.get("head_dim")) else 0
    keys = [None] * n
    rp = c.get("rope_parameters")
    if isinstance(rp, dict) and rp and all(isinstance(v, dict) for v in rp.values()) and set(rp) <= set(types):
        keys = [t if a and not none else None for t, a in zip(types, attention)]  # keyed by layer type (MiMo-V2)
    if mt == "mimo_v2" and "swa_rope_theta" in c:
        keys = list(types)
    key_heads = None
    indexer_layers = None
    heads = [hd if a else 0 for a in attention]
    sites = {}
    dim = 0 if none else rotary_dim(with_class_defaults(c))
    if mt in ("gemma4", "gemma4_text"):
        ghd = int(c.get("global_head_dim", 512))
        hd = int(c.get("head_dim", 256))
        heads = [ghd if t == "full_attention" else hd for t in types]
        keys = list(types)
        sites["attention"] = Site(hd, hd, 0, "half")
        key_heads = {"sliding_attention": hd, "full_attention": ghd}
    elif mt in ("deepseek_v32", "glm_moe_dsa"):
        head = _mla_head(c)
        r = int(c["qk_rope_head_dim"])
        heads = [head if a else 0 for a in attention]
        sites["mla"] = Site(head, r, head - r, "interleaved")
        ihd = int(c.get("index_head_dim", 128))
        sites["indexer"] = Site(ihd, r, 0, "half" if mt == "deepseek_v32" else "interleaved")
        if mt == "glm_moe_dsa":
            # configuration_glm_moe_dsa.py: indexer_types, else index_topk_pattern (F / S), else full where
            # max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0; modeling: no indexer on "shared".
            it = c.get("indexer_types")
            if it is None and c.get("index_topk_pattern") is not None:
                p = c["index_topk_pattern"]
                it = [{"F": "full", "S": "shared"}[ch] for ch in p] if isinstance(p, str) else list(p)
            if it is None:
                freq = max(c.get("index_topk_freq", 1), 1)
                off = c.get("index_skip_topk_offset", 2)
                it = ["full" if max(i - off + 1, 0) % freq == 0 else "shared" for i in range(n)]
            indexer_layers = [t == "full" for t in it]
    elif mt == "deepseek_v4":
        head = int(c.get("head_dim", 512))
        prf = c.get("partial_rotary_factor")
        if prf is None:
            prf = c["qk_rope_head_dim"] / head if c.get("qk_rope_head_dim") is not None else 64 / 512
        r = int(head * prf)
        keys = ["main" if t == "sliding_attention" else "compress" for t in types]
        heads = [head] * n
        ihd = int(c.get("index_head_dim", 128))
        sites["attention"] = Site(head, r, head - r, "interleaved")
        sites["attention_output"] = Site(head, r, head - r, "interleaved")
        sites["indexer"] = Site(ihd, r, ihd - r, "interleaved", key="compress")
        sites["compressor"] = Site(head, r, head - r, "interleaved", key="compress")
    elif not none and dim:
        heads = [hd if a else 0 for a in attention]
        if mt in ("deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe_lite", "longcat_flash") or c.get("kv_lora_rank"):
            head = _mla_head(c)
            heads = [head if a else 0 for a in attention]
            layout = "interleaved" if c.get("rope_interleave", True) else "half"
            sites["mla"] = Site(head, dim, head - dim, layout)
        elif mt == "mistral4":
            head = _mla_head(c)
            heads = [head if a else 0 for a in attention]
            layout = "interleaved" if c.get("rope_interleave", True) else "half"
            sites["attention"] = Site(head, dim, head - dim, layout)
        else:  # one site at the front of the head; its pairing is the record's `expect.layout` (not checked here)
            sites["attention"] = Site(hd, dim, 0, None)
    return Structure(types, attention, rope, keys, heads, sites, none, key_heads, indexer_layers)


def _proportional(p: dict, head: int):
    """modeling_rope_utils.py _compute_proportional_rope_parameters: pairs over the whole head; the first
    int(partial_rotary_factor * head // 2) turn at theta^(-2j/head), the rest are 0; all divided by `factor`
    (default 1)."""
    base = float(p["rope_theta"])
    n = int(p.get("partial_rotary_factor", 1.0) * head // 2)
    rot = 1.0 / (base ** (torch.arange(0, 2 * n, 2, dtype=torch.int64).to(dtype=torch.float) / head))
    rest = head // 2 - n
    inv = torch.cat((rot, torch.zeros(rest, dtype=torch.float32))) if rest > 0 else rot
    return inv / float(p.get("factor", 1.0)), 1.0


def site_freqs(config: dict, st: Structure, site: Optional[str], key: Optional[str],
               seq_len: Optional[int] = None) -> Rope:
    """The frequencies one site of one parameter set applies."""
    c = with_class_defaults(text_config(config))
    mt = c.get("model_type")
    if mt in ("gemma4", "gemma4_text"):
        rp = c.get("rope_parameters") or {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0}}
        p = dict(rp[key])
        head = int(c.get("global_head_dim", 512)) if key == "full_attention" else int(c.get("head_dim", 256))
        if p.get("rope_type", "default") == "proportional":
            inv, att = _proportional(p, head)
            return Rope(inv.tolist(), att, head)
        # Gemma4TextRotaryEmbedding.compute_default_rope_parameters: the whole head, partial factor not read
        return Rope(_default(float(p["rope_theta"]), head).tolist(), 1.0, head)
    if mt == "deepseek_v4":
        s = st.sites[site]
        k = s.key or key
        rp = c.get("rope_parameters")
        if isinstance(rp, dict) and isinstance(rp.get("main"), dict) and isinstance(rp.get("compress"), dict):
            sets = {"main": dict(rp["main"]), "compress": dict(rp["compress"])}
        else:
            flat = dict(rp) if isinstance(rp, dict) and rp else dict(c.get("rope_scaling") or {})
            if "type" in flat and "rope_type" not in flat:
                flat["rope_type"] = flat.pop("type")
            comp = {**flat, "rope_theta": c.get("compress_rope_theta", 160000.0)}
            comp.setdefault("rope_type", "default")
            if comp["rope_type"] == "yarn":
                comp.setdefault("attention_factor", 1.0)
            sets = {"main": {"rope_type": "default", "rope_theta": c.get("rope_theta", 10000.0)}, "compress": comp}
        p = sets[k]
        p.setdefault("original_max_position_embeddings", c.get("max_position_embeddings"))
        p["truncate"] = True  # transformers reads truncate from the top of the keyed dict, where it never is
        inv, att = _standard(c, p, s.rotary_dim, seq_len)
        return Rope(inv.tolist(), float(att), s.rotary_dim)
    if mt == "mimo_v2" and "swa_rope_theta" in c:
        # modeling_mimo_v2.py: MiMoV2Attention(rope_theta=getattr(config, "swa_rope_theta", rope_theta)) on sliding
        # layers, rope_theta on full ones; rotary dims int(head_dim * partial_rotary_factor), default RoPE.
        base = float(c["swa_rope_theta"] if key == "sliding_attention" else c.get("rope_theta", 10000.0))
        dim = rotary_dim(c)
        return Rope(_default(base, dim).tolist(), 1.0, dim)
    r = freqs(config, key, seq_len)
    return r


# The families whose configs structure() models beyond "one RoPE on every layer" (the text model's model_type).
STRUCTURE_FAMILIES = {
    "granitemoehybrid", "nemotron_h", "kimi_linear", "lfm2", "lfm2_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe",
    "qwen3_5_text", "qwen3_5_moe_text", "olmo_hybrid", "gemma4", "gemma4_text", "deepseek_v4", "deepseek_v32",
    "glm_moe_dsa", "glm4_moe_lite", "longcat_flash", "mistral4", "mimo_v2_flash", "mimo_v2", "minimax_m2",
}


def has_structure(config: dict) -> bool:
    return text_config(config).get("model_type") in STRUCTURE_FAMILIES
