"""Static reader of a Hugging Face transformers source tree (a release wheel or an unpacked tree).

Nothing from transformers is imported: configuration_*.py and modeling_*.py are parsed with `ast` and
searched as text. For every model_type a configuration file declares, the reader records what the
model's modeling code does with positions and what the config class defaults, as far as static
reading can tell:

- kinds: rope, learned, sinusoidal, alibi, t5_bucket, relative (other relative schemes);
- pairing of the RoPE the text attention applies: half (rotate_half over the halves), interleaved
  (pairs (x[2i], x[2i+1]): a step-2 slice, repeat_interleave'd cos/sin, complex multiplication, a
  (..., d/2, 2) view), or both where the attention picks one by a config key (DeepSeek's
  rope_interleave);
- the config class's default partial_rotary_factor (a class default, a setdefault in __post_init__ /
  __init__, or a class attribute default_partial_rotary_factor);
- the layer_types values the config file names, and the config keys that name positions (rope,
  rotary, position, nope, theta, partial, alibi, mla, ...), among them the ones that can switch
  positions off.

Modular files (modular_*.py) are skipped: the generated modeling_*.py is what runs.
"""

from __future__ import annotations

import ast
import os
import re
import zipfile
from dataclasses import dataclass, field

# Class names that belong to a vision / audio / speech tower or another non-decoder component: their
# positions are not the language model's.
TOWER_CLASS = re.compile(
    r"Vision|Visual|ViT|Vit[A-Z]|Image|Audio|Speech|Patch|Perceiver|Perciever|QFormer|Qformer|Video|Pixel|"
    r"Sam[A-Z]|Mask|Prompt|Siglip|Conformer|Acoustic|Codec|Vq|VQ|Mel|Wav|Depth|Detr|Backbone|Projector|"
    r"Merger|Resampler|Connector|Hifigan|Tokenizer|Pooler|Window|Talker|Code2Wav|Spectrogram|Whisper|Mimi|"
    r"SinusoidsPosition"  # the Whisper-style audio encoders' table (Qwen2.5-Omni, Qwen3-ASR)
)
# model_types of sub-configs that configure such a component.
TOWER_MODEL_TYPE = re.compile(
    r"(_|-)(vision|visual|vision_model|vision_encoder|vision_tower|audio|audio_model|audio_encoder|encoder|"
    r"qformer|perceiver|perciever|vqgan|vqmodel|vq|tokenizer|vision_tokenizer|prompt_encoder|mask_decoder|"
    r"codebook|image_model|hifigan|ctc|sam_vision_model|image|speech_encoder|acoustic_tokenizer|"
    r"semantic_tokenizer|talker|code2wav|token2wav|depth_decoder_model|patcher)(_|$)"
)

# Config keys that name positions or rotation (the list: rope, rotary, position, nope, mrope,
# theta, partial, ... plus MLA's and ALiBi's).
POSITION_KEY = re.compile(
    r"rope|rotary|position|nope|theta|partial|alibi|mla|relative_attention|max_distance|sinusoid|pos_emb"
)
# Keys that can switch positions off, or move / split them, read as such by name.
OFF_SWITCH_KEYS = {
    "position_embedding_type",
    "use_mla",
    "mla_use_nope",
    "qk_rope_head_dim",
    "no_rope_layers",
    "no_rope_layer_interval",
    "nope_layer_interval",
    "use_rope",
    "use_rotary",
    "rope_layers",
    "nope_layers",
    "use_nope",
    "rope_interleave",
    "indexer_rope_interleave",
    "alibi",
    "use_alibi",
    "rotary_dim",
    "swa_rope_theta",
    "rope_local_base_freq",
    "global_head_dim",
    "partial_rotary_factor",
}


def is_tower_model_type(model_type: str, directory: str) -> bool:
    """A component sub-config: the part of its model_type after the family's directory name names a
    tower (clip_vision_model, qwen2_audio_encoder); the family's own config is never one, whatever its
    name says (aya_vision, qwen2_audio, granite4_vision and its granite4_vision_text)."""
    mt = model_type.replace("-", "_")
    d = directory.rsplit("/", 1)[-1].replace("-", "_")
    rest = mt[len(d) :] if mt.startswith(d) else mt
    return bool(rest) and bool(TOWER_MODEL_TYPE.search(rest if rest.startswith("_") else "_" + rest))


# string constants of a config class that can be layer_types values
LAYER_TYPE_STRING = re.compile(
    r"[\"']([a-z_]*(?:attention|mamba|mamba2|conv|linear|ssm|mlp|moe|rnn|recurrent|deltanet|kda|gdn|lightning|swa|"
    r"full|sliding|local|global|hybrid)[a-z_0-9]*)[\"']"
)
LAYER_KINDS = {"mamba", "mamba2", "conv", "linear_attention", "ssm", "hybrid", "recurrent"}


@dataclass
class ConfigFacts:
    model_type: str
    config_class: str
    config_file: str
    directory: str
    tower: bool = False
    default_partial_rotary_factor: float | None = None
    layer_types: list[str] = field(default_factory=list)
    position_keys: list[str] = field(default_factory=list)
    off_switch_keys: list[str] = field(default_factory=list)
    has_text_config: bool = False
    # per-layer-type RoPE defaults the config class writes ({"full_attention": {"rope_theta": 1e6, ...}})
    rope_defaults: dict[str, dict] = field(default_factory=dict)


@dataclass
class ModelingFacts:
    modeling_file: str
    kinds: dict[str, list[str]] = field(default_factory=dict)  # kind -> evidence (names), text side
    tower_kinds: dict[str, list[str]] = field(default_factory=dict)
    pairings: list[str] = field(default_factory=list)  # pairings the text attention applies
    pairing_evidence: list[str] = field(default_factory=list)
    indexer_pairings: list[str] = field(default_factory=list)  # a second RoPE site: the DSA indexer's
    wraps_text_config: bool = False
    causal_lm: bool = False  # defines a *ForCausalLM class: a decoder an engine serves


@dataclass
class Family:
    config: ConfigFacts
    modeling: ModelingFacts | None


class SourceTree:
    """The files under transformers/models/, from a wheel (zip) or a directory."""

    def __init__(self, path: str):
        self.path = path
        self.files: dict[str, str] = {}  # "models/<dir>/<file>.py" -> text
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    if name.startswith("transformers/models/") and name.endswith(".py"):
                        self.files[name[len("transformers/") :]] = z.read(name).decode("utf-8", "replace")
        else:
            root = path
            if os.path.isdir(os.path.join(root, "transformers", "models")):
                root = os.path.join(root, "transformers")
            elif os.path.isdir(os.path.join(root, "src", "transformers", "models")):
                root = os.path.join(root, "src", "transformers")
            models = os.path.join(root, "models")
            if not os.path.isdir(models):
                raise SystemExit(f"{path}: no transformers/models folder")
            for dirpath, _, names in os.walk(models):
                for n in names:
                    if n.endswith(".py"):
                        full = os.path.join(dirpath, n)
                        rel = os.path.relpath(full, root).replace(os.sep, "/")
                        with open(full, encoding="utf-8", errors="replace") as f:
                            self.files[rel] = f.read()

    def directories(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for rel in self.files:
            parts = rel.split("/")
            if len(parts) == 3:  # models/<dir>/<file>.py
                out.setdefault(parts[1], []).append(parts[2])
            elif len(parts) == 4 and parts[1] == "deprecated":
                out.setdefault("deprecated/" + parts[2], []).append(parts[3])
        return out

    def text(self, directory: str, name: str) -> str:
        return self.files[f"models/{directory}/{name}"]


class _Src:
    """Source text with line offsets, for fast segments (ast.get_source_segment re-splits each call)."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0]
        for line in text.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def seg(self, node) -> str:
        try:
            a = self.starts[node.lineno - 1] + node.col_offset
            b = self.starts[node.end_lineno - 1] + node.end_col_offset
        except (AttributeError, IndexError, TypeError):
            return ""
        return self.text[a:b]


def _const(node):
    try:
        return ast.literal_eval(node)
    except Exception:
        return None


def _parse(text: str):
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


# ---------------------------------------------------------------------------------------------------
# configuration_*.py


def _config_class_facts(cls: ast.ClassDef, src: "_Src", file: str, directory: str) -> ConfigFacts | None:
    model_type = None
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "model_type" for t in stmt.targets):
            v = _const(stmt.value)
            if isinstance(v, str):
                model_type = v
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "model_type":
            v = _const(stmt.value) if stmt.value is not None else None
            if isinstance(v, str):
                model_type = v
    if not model_type:
        return None
    facts = ConfigFacts(model_type=model_type, config_class=cls.name, config_file=file, directory=directory)
    facts.tower = is_tower_model_type(model_type, directory)
    keys: set[str] = set()
    partial = None
    for stmt in cls.body:
        # dataclass-style fields and class attributes
        target = None
        value = None
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            target, value = stmt.target.id, stmt.value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target, value = stmt.targets[0].id, stmt.value
        if target:
            keys.add(target)
            if target in ("partial_rotary_factor", "default_partial_rotary_factor") and value is not None:
                v = _const(value)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    partial = float(v)
                elif isinstance(value, ast.BinOp):
                    try:
                        partial = float(eval(compile(ast.Expression(value), "<f>", "eval"), {"__builtins__": {}}))
                    except Exception:
                        pass
            if target in ("rotary_pct", "rope_pct") and value is not None and partial is None:
                v = _const(value)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    partial = float(v)
            if target == "text_config":
                facts.has_text_config = True
            if target == "sub_configs" and isinstance(value, ast.Dict):
                for k in value.keys:
                    if _const(k) == "text_config":
                        facts.has_text_config = True
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            args = stmt.args
            names = [a.arg for a in args.args]
            defaults = [None] * (len(names) - len(args.defaults)) + list(args.defaults)
            for n, d in zip(names, defaults):
                keys.add(n)
                if n in ("partial_rotary_factor", "rotary_pct", "rope_pct") and d is not None:
                    v = _const(d)
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and partial is None:
                        partial = float(v)
                if n == "text_config":
                    facts.has_text_config = True
            for a, d in zip(args.kwonlyargs, args.kw_defaults):
                keys.add(a.arg)
    # setdefault("partial_rotary_factor", 0.5) in __post_init__ / __init__ (transformers 5's BC defaults);
    # a constant only (MiniMax-M2's rotary_dim / head_dim is not a class default).
    body = src.seg(cls)
    for m in re.finditer(r"setdefault\(\s*[\"']partial_rotary_factor[\"']\s*,\s*([0-9.]+)\s*\)", body):
        if partial is None:
            partial = float(m.group(1))
    for m in re.finditer(r"kwargs\[\s*[\"']partial_rotary_factor[\"']\s*\]\s*=\s*([0-9.]+)", body):
        if partial is None:
            partial = float(m.group(1))  # Bamba's hard-coded factor
    for m in re.finditer(r"pop\(\s*[\"'](?:rotary_pct|rope_pct)[\"']\s*,\s*([0-9.]+)\s*\)", body):
        if partial is None:
            partial = float(m.group(1))
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            keys.add(node.attr)
        # string keys read from kwargs / rope_parameters ("rope_theta", "partial_rotary_factor", ...)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"[a-z][a-z0-9_]*", node.value) and POSITION_KEY.search(node.value):
                keys.add(node.value)
    for node in ast.walk(cls):
        if isinstance(node, ast.Dict) and node.keys:
            for k, v in zip(node.keys, node.values):
                kc = _const(k) if k is not None else None
                if isinstance(kc, str) and isinstance(v, ast.Dict) and kc.endswith(("attention", "main", "compress")):
                    inner = {}
                    for ik, iv in zip(v.keys, v.values):
                        ikc = _const(ik) if ik is not None else None
                        if isinstance(ikc, str) and POSITION_KEY.search(ikc):
                            val = _const(iv)
                            inner[ikc] = val if val is not None else (src.seg(iv) or "?")
                    if inner:
                        facts.rope_defaults.setdefault(kc, {}).update(inner)
    facts.default_partial_rotary_factor = partial
    layer_types = set()
    for m in LAYER_TYPE_STRING.finditer(body):
        v = m.group(1)
        if v.startswith(("use_", "is_", "_")) or "implementation" in v:
            continue
        if v.endswith("attention") or v in LAYER_KINDS:
            layer_types.add(v)
    facts.layer_types = sorted(layer_types)
    facts.position_keys = sorted(k for k in keys if POSITION_KEY.search(k) and not k.startswith("_"))
    facts.off_switch_keys = sorted(k for k in keys if k in OFF_SWITCH_KEYS)
    return facts


def read_configs(tree: SourceTree, directory: str, files: list[str]) -> list[ConfigFacts]:
    out = []
    for name in sorted(files):
        if not (name.startswith("configuration_") and name.endswith(".py")):
            continue
        text = tree.text(directory, name)
        mod = _parse(text)
        if mod is None:
            continue
        src = _Src(text)
        for node in mod.body:
            if isinstance(node, ast.ClassDef):
                f = _config_class_facts(node, src, f"models/{directory}/{name}", directory)
                if f:
                    out.append(f)
    return out


# ---------------------------------------------------------------------------------------------------
# modeling_*.py

ROPE_FUNC = re.compile(r"rotary|rope|rotate|rot_pos|freqs_cis", re.I)
TOWER_FUNC = re.compile(r"vision|visual|image|audio|video|2d|3d")
# nn.Embedding(<this>, ...) is a learned absolute table
LEARNED_TABLE_SIZE = re.compile(
    r"max_position_embeddings|n_positions|max_positions|n_ctx|max_seq_len|max_source_positions|max_target_positions"
)
ALIBI_BUILDERS = {
    "build_alibi_tensor",
    "_build_alibi_tensor",
    "build_mpt_alibi_tensor",
    "get_alibi_slopes",
    "_get_alibi_slopes",
    "gen_slopes",
    "_get_interleave",  # Baichuan 2 13B's slopes
}
# relative schemes other than T5's buckets (DeBERTa, XLNet, SEW-D, ViTDet ...)
OTHER_RELATIVE = re.compile(
    r"relative_positional_encoding|build_relative_position|rel_attn|relative_position_embeddings|rel_pos_bias|"
    r"get_rel_pos"
)


def _calls(node) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name):
                out.add(n.func.id)
    return out


def _is_half_slice(node: ast.Subscript) -> bool:
    """x[..., : x.shape[-1] // 2] or x[..., d // 2 :]: the halves of the last dim."""
    sl = node.slice
    elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    if not elts:
        return False
    last = elts[-1]
    if isinstance(last, ast.Slice) and last.step is None:
        for b in (last.lower, last.upper):
            if isinstance(b, ast.BinOp) and isinstance(b.op, ast.FloorDiv) and _const(b.right) == 2:
                return True
    return False


def _is_step2_slice(node: ast.Subscript) -> bool:
    sl = node.slice
    elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    if not elts:
        return False
    last = elts[-1]
    return isinstance(last, ast.Slice) and _const(last.step) == 2 if last is not None else False


def _own_pairing_signals(fn) -> set[str]:
    """Signals in a function's own body: 'interleaved' or 'half'."""
    sig = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Subscript):
            if _is_step2_slice(n):
                sig.add("interleaved")
            elif _is_half_slice(n):
                sig.add("half")
        elif isinstance(n, ast.Attribute):
            if n.attr in ("view_as_complex", "polar"):
                sig.add("interleaved")
            elif n.attr == "repeat_interleave":
                sig.add("interleaved")
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            a = n.func.attr
            # q.view(b, h, s, d // 2, 2) / reshape(..., -1, 2) / unflatten(-1, (-1, 2)): adjacent pairs
            if a in ("view", "reshape") and len(n.args) >= 2 and _const(n.args[-1]) == 2:
                prev = n.args[-2]
                if isinstance(prev, ast.BinOp) and isinstance(prev.op, ast.FloorDiv) or _const(prev) == -1:
                    sig.add("interleaved")
            if a == "unflatten" and len(n.args) == 2 and isinstance(n.args[1], ast.Tuple):
                if len(n.args[1].elts) == 2 and _const(n.args[1].elts[1]) == 2:
                    sig.add("interleaved")
            if a == "chunk" and n.args and (_const(n.args[0]) == 2 or len(n.args) > 1 and _const(n.args[1]) == 2):
                sig.add("half")  # x.chunk(2, dim=-1), torch.chunk(x, 2, dim=-1) (GPT-OSS)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) is False and isinstance(n.func, ast.Name):
            if n.func.id == "rotate_every_two":
                sig.add("interleaved")
    if fn.name in ("rotate_every_two", "rotate_every_two_v2"):
        sig.add("interleaved")
    return sig


class _ModuleIndex:
    def __init__(self, mod: ast.Module):
        self.functions: dict[str, ast.FunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for node in mod.body:
            if isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
        self._pairing: dict[str, set[str]] = {}

    def pairing(self, name: str, stack=()) -> set[str]:
        """The pairing a module-level function applies: its own interleave signal first (a
        (d/2, 2) view before rotate_half is interleaved overall), else its callees', else its own
        half signal."""
        if name in self._pairing:
            return self._pairing[name]
        fn = self.functions.get(name)
        if fn is None or name in stack:
            return set()
        own = _own_pairing_signals(fn)
        if "interleaved" in own:
            res = {"interleaved"}
        else:
            sub = set()
            for c in _calls(fn):
                if c in self.functions and c != name:
                    sub |= self.pairing(c, stack + (name,))
            if sub:
                res = {"interleaved"} if "interleaved" in sub else sub
            else:
                res = own
        self._pairing[name] = res
        return res


def read_modeling(tree: SourceTree, directory: str, files: list[str], prefixes=()) -> ModelingFacts | None:
    names = sorted(
        n for n in files if n.startswith("modeling_") and n.endswith(".py") and "_tf_" not in n and "_flax_" not in n
    )
    if not names:
        return None
    facts = ModelingFacts(modeling_file=", ".join(f"models/{directory}/{n}" for n in names))
    for name in names:
        text = tree.text(directory, name)
        mod = _parse(text)
        if mod is None:
            continue
        src = _Src(text)
        idx = _ModuleIndex(mod)
        _scan_module(mod, idx, src, facts, prefixes)
    facts.pairings = sorted(set(facts.pairings))
    facts.indexer_pairings = sorted(set(facts.indexer_pairings))
    return facts


def _add(d: dict[str, list[str]], kind: str, what: str):
    lst = d.setdefault(kind, [])
    if what not in lst:
        lst.append(what)


def _is_tower_class(cname: str, prefixes) -> bool:
    """A tower class by its name, after the family's own prefix (Speech2Text..., ImageGPT...,
    Whisper... are the family, not a tower)."""
    rest = cname
    for p in prefixes:
        if p and cname.startswith(p):
            rest = cname[len(p) :]
            break
    return bool(TOWER_CLASS.search(rest))


def _scan_module(mod: ast.Module, idx: _ModuleIndex, src: "_Src", facts: ModelingFacts, prefixes=()):
    text_attn_calls: set[str] = set()
    for cname, cls in idx.classes.items():
        tower = _is_tower_class(cname, prefixes)
        target = facts.tower_kinds if tower else facts.kinds
        body = src.seg(cls)
        if re.search(r"Rotary|RoPE|Rope[A-Z]|RopeEmbedding|RotaryEmbedding", cname):
            _add(target, "rope", cname)
        if re.search(r"Sinusoidal|SinusoidsPosition|SinePosition|PositionalEncoding", cname):
            _add(target, "sinusoidal", cname)
        if re.search(r"LearnedPositionalEmbedding|LearnedPositionEmbedding", cname):
            _add(target, "learned", cname)
        elif re.search(r"Position(al)?Embeddings?$", cname) and any(
            ast.unparse(b).endswith("Embedding") for b in cls.bases
        ):
            _add(target, "learned", f"{cname}(nn.Embedding)")  # ProphetNet's table, a subclass of nn.Embedding
        if re.search(r"Relative(Logits|PositionBias|Bias)|RelPosBias", cname):
            _add(target, "relative", cname)  # Inkling's hidden-state-conditioned relative bias
        if re.search(r"Position(al)?Embedding", cname) and re.search(r"_position_bucket", body):
            _add(target, "relative", f"{cname}: bucketed relative positions")  # CPM-Ant's segment positions
        # walk only classes whose text can hold a table, a bucket or a slope builder (the walk is the
        # reader's main cost)
        interesting = ("Embedding(", "alibi", "bucket", "slopes", "_get_interleave")
        for n in ast.walk(cls) if any(w in body for w in interesting) else ():
            if isinstance(n, ast.Call):
                fn = n.func
                fname = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
                if fname == "Embedding" and n.args:
                    seg = src.seg(n.args[0])
                    if LEARNED_TABLE_SIZE.search(seg):
                        _add(target, "learned", f"{cname}: nn.Embedding({seg}, ...)")
                    elif re.search(r"relative_attention_num_buckets|num_buckets", seg):
                        _add(target, "t5_bucket", f"{cname}: nn.Embedding({seg}, ...)")
                if fname in ("_relative_position_bucket", "relative_position_bucket"):
                    _add(target, "t5_bucket", f"{cname}.{fname}")
                if fname in ALIBI_BUILDERS:
                    _add(target, "alibi", f"{cname} -> {fname}")
            if isinstance(n, ast.FunctionDef) and n.name in ("_relative_position_bucket",):
                _add(target, "t5_bucket", f"{cname}.{n.name}")
            if isinstance(n, ast.FunctionDef) and re.search(r"alibi", n.name):
                _add(target, "alibi", f"{cname}.{n.name}")
        if re.search(r"rel_pos|relative_position|pos_bias|position_bias", body) and not facts.kinds.get("t5_bucket"):
            if re.search(r"Attention|Encoder|Layer", cname) and OTHER_RELATIVE.search(body):
                _add(target, "relative", cname)
        if not tower and "Indexer" in cname:
            for c in sorted(_calls(cls)):
                if c in idx.functions and ROPE_FUNC.search(c):
                    facts.indexer_pairings.extend(sorted(idx.pairing(c)))
                    facts.pairing_evidence.append(f"{cname} (indexer) calls {c}: {'/'.join(sorted(idx.pairing(c)))}")
        elif not tower and "Attention" in cname:
            text_attn_calls |= _calls(cls)
    for fname, fn in idx.functions.items():
        tower = bool(TOWER_CLASS.search(fname.replace("_", " ").title().replace(" ", ""))) or bool(
            re.search(r"vision|visual|image|audio|video|2d|3d|multimodal_rotary", fname)
        )
        if re.search(r"positional_encoding|sinusoid", fname) and fname != "create_sinusoidal_positions" and not tower:
            _add(facts.kinds, "sinusoidal", fname)  # CTRL's positional_encoding, DistilBERT's sinusoidal table
        if re.search(r"positional_encoding|sinusoid", fname) and fname != "create_sinusoidal_positions" and not tower:
            _add(facts.kinds, "sinusoidal", fname)  # CTRL's positional_encoding, DistilBERT's sinusoidal table
        if fname in ALIBI_BUILDERS:
            _add(facts.kinds, "alibi", fname)
        if tower and re.match(r"apply_rotary|rotate_half|rotate_every_two|apply_rope|apply_.*rotary", fname):
            _add(facts.tower_kinds, "rope", fname)
    # The pairing the text attention applies: the module functions it calls that rotate.
    used = [c for c in text_attn_calls if c in idx.functions and ROPE_FUNC.search(c)]
    used = [c for c in used if not TOWER_FUNC.search(c)]
    for c in sorted(used):
        # a rope function the text attention calls is RoPE evidence; one only defined (Nemotron-H's
        # apply_rotary_pos_emb, never applied) is not
        _add(facts.kinds, "rope", f"attention calls {c}")
        p = idx.pairing(c)
        facts.pairings.extend(sorted(p))
        if p:
            facts.pairing_evidence.append(f"{c}: {'/'.join(sorted(p))}")
    if not used and facts.kinds.get("rope"):
        # no attention class calls a module-level rope function by name (a method does): every
        # module-level rotate/apply function not of a tower
        for c in sorted(idx.functions):
            if ROPE_FUNC.search(c) and re.match(r"apply_|rotate_", c) and not TOWER_FUNC.search(c):
                p = idx.pairing(c)
                facts.pairings.extend(sorted(p))
                if p:
                    facts.pairing_evidence.append(f"{c} (module): {'/'.join(sorted(p))}")
    if re.search(r"^class \w+ForCausalLM\b", src.text, re.M):
        facts.causal_lm = True
    if re.search(r"AutoModel(ForCausalLM)?\.from_config\(\s*config\.text_config", src.text):
        facts.wraps_text_config = True


# ---------------------------------------------------------------------------------------------------


def _auto_model_classes(tree: SourceTree) -> dict[str, str]:
    """model_type -> base model class, from auto/modeling_auto.py's MODEL_MAPPING_NAMES."""
    text = tree.files.get("models/auto/modeling_auto.py", "")
    m = re.search(r"MODEL_MAPPING_NAMES\s*=\s*OrderedDict\((.*?)\n\)", text, re.S)
    if not m:
        return {}
    return dict(re.findall(r"\(\s*\"([^\"]+)\"\s*,\s*\"(\w+)\"\s*\)", m.group(1)))


def read_tree(path: str) -> list[Family]:
    tree = SourceTree(path)
    families = []
    dirs = tree.directories()
    # A config-only family (Sarvam-MLA: DeepseekV3Model) runs another family's modeling code: find the
    # directory whose modeling file defines its auto-mapped model class.
    auto = _auto_model_classes(tree)
    class_dir: dict[str, str] = {}
    for directory, files in dirs.items():
        for n in files:
            if n.startswith("modeling_") and n.endswith(".py"):
                for cm in re.finditer(r"^class (\w+)\s*[(:]", tree.text(directory, n), re.M):
                    class_dir.setdefault(cm.group(1), directory)
    modeling_cache: dict[str, ModelingFacts | None] = {}
    for directory, files in sorted(dirs.items()):
        if directory in ("auto",):
            continue
        configs = read_configs(tree, directory, files)
        prefixes = sorted(
            {c.config_class[: -len("Config")] for c in configs if not c.tower and c.config_class.endswith("Config")},
            key=len,
            reverse=True,
        )
        modeling = read_modeling(tree, directory, files, prefixes)
        by_type = {c.model_type: c for c in configs}
        for c in configs:
            # a wrapper config (text_config) takes its text config's defaults: qwen3_5 <- qwen3_5_text
            text = by_type.get(c.model_type + "_text") or by_type.get(c.model_type + "_text_model")
            if text is not None and c.has_text_config:
                if c.default_partial_rotary_factor is None:
                    c.default_partial_rotary_factor = text.default_partial_rotary_factor
                c.layer_types = sorted(set(c.layer_types) | set(text.layer_types))
                c.off_switch_keys = sorted(set(c.off_switch_keys) | set(text.off_switch_keys))
                for lt, d in text.rope_defaults.items():
                    c.rope_defaults.setdefault(lt, d)
            fam_modeling = modeling
            if fam_modeling is None and c.model_type in auto and auto[c.model_type] in class_dir:
                other = class_dir[auto[c.model_type]]
                if other not in modeling_cache:
                    oc = read_configs(tree, other, dirs[other])
                    op = sorted({x.config_class[:-6] for x in oc if not x.tower}, key=len, reverse=True)
                    modeling_cache[other] = read_modeling(tree, other, dirs[other], op)
                fam_modeling = modeling_cache[other]
            families.append(Family(config=c, modeling=fam_modeling))
    return families
