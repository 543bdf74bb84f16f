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

Modular files (modular_*.py) are skipped: the generated modeling_*.py is what runs. The source tree
and the configuration files are read in hf_configs.py; this module reads modeling_*.py and joins both.
"""

from __future__ import annotations

import ast
import re

from hf_configs import (
    TOWER_CLASS,
    Family,
    ModelingFacts,
    SourceText,
    SourceTree,
    const_value,
    parse_source,
    read_configs,
)

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


def _last_dim_slice(node: ast.Subscript) -> ast.Slice | None:
    """The slice a subscript takes of the last dim (x[..., a:b:c] or x[a:b:c]), or None."""
    sl = node.slice
    elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    last = elts[-1] if elts else None
    return last if isinstance(last, ast.Slice) else None


def _is_half_slice(node: ast.Subscript) -> bool:
    """x[..., : x.shape[-1] // 2] or x[..., d // 2 :]: the halves of the last dim."""
    last = _last_dim_slice(node)
    if last is not None and last.step is None:
        for b in (last.lower, last.upper):
            if isinstance(b, ast.BinOp) and isinstance(b.op, ast.FloorDiv) and const_value(b.right) == 2:
                return True
    return False


def _is_step2_slice(node: ast.Subscript) -> bool:
    last = _last_dim_slice(node)
    return last is not None and const_value(last.step) == 2


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
            if a in ("view", "reshape") and len(n.args) >= 2 and const_value(n.args[-1]) == 2:
                prev = n.args[-2]
                if isinstance(prev, ast.BinOp) and isinstance(prev.op, ast.FloorDiv) or const_value(prev) == -1:
                    sig.add("interleaved")
            if a == "unflatten" and len(n.args) == 2 and isinstance(n.args[1], ast.Tuple):
                if len(n.args[1].elts) == 2 and const_value(n.args[1].elts[1]) == 2:
                    sig.add("interleaved")
            if a == "chunk" and n.args and (const_value(n.args[0]) == 2 or len(n.args) > 1 and const_value(n.args[1]) == 2):
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
        mod = parse_source(text)
        if mod is None:
            continue
        src = SourceText(text)
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


def _scan_module(mod: ast.Module, idx: _ModuleIndex, src: "SourceText", facts: ModelingFacts, prefixes=()):
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
