"""The Hugging Face source tree as registry_sync reads it, and its configuration_*.py files.

SourceTree holds the files under transformers/models/ (from a wheel or a directory); SourceText,
const_value and parse_source are the parsing helpers both readers use; read_configs gives a
ConfigFacts per model_type a configuration file declares (hf_reader.py reads modeling_*.py and joins
the two into a Family). Nothing from transformers is imported.
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


class SourceText:
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


def const_value(node):
    try:
        return ast.literal_eval(node)
    except Exception:
        return None


def parse_source(text: str):
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


# ---------------------------------------------------------------------------------------------------
# configuration_*.py


def _config_class_facts(cls: ast.ClassDef, src: "SourceText", file: str, directory: str) -> ConfigFacts | None:
    model_type = None
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "model_type" for t in stmt.targets):
            v = const_value(stmt.value)
            if isinstance(v, str):
                model_type = v
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "model_type":
            v = const_value(stmt.value) if stmt.value is not None else None
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
                v = const_value(value)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    partial = float(v)
                elif isinstance(value, ast.BinOp):
                    try:
                        partial = float(eval(compile(ast.Expression(value), "<f>", "eval"), {"__builtins__": {}}))
                    except Exception:
                        pass
            if target in ("rotary_pct", "rope_pct") and value is not None and partial is None:
                v = const_value(value)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    partial = float(v)
            if target == "text_config":
                facts.has_text_config = True
            if target == "sub_configs" and isinstance(value, ast.Dict):
                for k in value.keys:
                    if const_value(k) == "text_config":
                        facts.has_text_config = True
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            args = stmt.args
            names = [a.arg for a in args.args]
            defaults = [None] * (len(names) - len(args.defaults)) + list(args.defaults)
            for n, d in zip(names, defaults):
                keys.add(n)
                if n in ("partial_rotary_factor", "rotary_pct", "rope_pct") and d is not None:
                    v = const_value(d)
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
                kc = const_value(k) if k is not None else None
                if isinstance(kc, str) and isinstance(v, ast.Dict) and kc.endswith(("attention", "main", "compress")):
                    inner = {}
                    for ik, iv in zip(v.keys, v.values):
                        ikc = const_value(ik) if ik is not None else None
                        if isinstance(ikc, str) and POSITION_KEY.search(ikc):
                            val = const_value(iv)
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
        mod = parse_source(text)
        if mod is None:
            continue
        src = SourceText(text)
        for node in mod.body:
            if isinstance(node, ast.ClassDef):
                f = _config_class_facts(node, src, f"models/{directory}/{name}", directory)
                if f:
                    out.append(f)
    return out
