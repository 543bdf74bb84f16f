"""posenc from Python: token embeddings and positions for decoder-only transformers.

The same library as the C++ API and the `posenc` CLI (one CMake project; this package calls the
compiled module `posenc._posenc`, a translation of include/posenc/posenc.hpp). numpy arrays and
torch CPU tensors (float32, float16, bfloat16) are rotated in place or into `out`, contiguous or
strided, never copied; the GIL is released while kernels run.

Example::

    import numpy as np, posenc
    rope = posenc.Rope("config.json")               # or a dict, a .gguf, a model folder
    q = np.random.randn(16, 32, 128).astype(np.float32)   # [tokens, heads, head_dim]
    rope.apply(q, positions=np.arange(16))           # in place

The face over the submodules, each one area:

- schemes (`_scheme`): `Scheme`, `load_scheme`, `Frequencies`, `LayerSchedule`: what the library reads
  from a config.json, a GGUF, a model folder; its repr is `posenc inspect`'s;
- RoPE (`_rope`): `Rope` (apply, apply_qk, apply_kv_cache, apply_multi_axis, apply_layer,
  apply_rotary_pos_emb) and `split_qkv`;
- Hugging Face (`hf`): the `apply_rotary_pos_emb` drop-in, every calling convention;
- model files (`_model`): `Model`;
- absolute and relative schemes (`_bias`): `sinusoidal_table`, `alibi_slopes`, `alibi_bias`,
  `t5_buckets`, `t5_bias`, `shaw_indices`;
- vision-language rows (`_vision`): `text_vision_positions`, `vision_patch_positions`;
- an engine held to the reference (`_check`): `check`, `diff`, and `testing.assert_rope_matches`;
- context parallelism (`cp`), pictures (`plot`);
- the process (`_runtime`): `set_num_threads`, `num_threads`, `simd_target`, `golden` (the CLI's).

Errors: posenc's C++ Status becomes ValueError (invalid argument, out of range), OSError (a file
missing or corrupt), NotImplementedError (a valid but unsupported feature), with posenc's one-line
message; an argument of the wrong type is a TypeError naming it.
"""
from . import _cli, _posenc
from . import hf  # noqa: F401  (posenc.hf.drop_in)
from . import testing  # noqa: F401  (posenc.testing.assert_rope_matches)
from ._bias import alibi_bias, alibi_slopes, shaw_indices, sinusoidal_table, t5_bias, t5_buckets
from ._model import Model
from ._rope import Rope, split_qkv
from ._runtime import golden, num_threads, set_num_threads, simd_target
from ._scheme import Frequencies, LayerSchedule, Scheme, load_scheme
from ._vision import text_vision_positions, vision_patch_positions
from ._check import check, diff

_cli.export_default()  # a wheel's own CLI as POSENC_CLI, for python -m posenc.plot and golden()

__version__: str = _posenc.__version__  # the project's version (CMakeLists.txt), as `posenc --version` says

__all__ = [
    "Scheme", "Frequencies", "LayerSchedule", "Rope", "Model", "load_scheme", "set_num_threads", "num_threads", "simd_target",
    "sinusoidal_table", "alibi_slopes", "alibi_bias", "t5_buckets", "t5_bias", "shaw_indices", "golden",
    "text_vision_positions", "vision_patch_positions", "split_qkv", "hf", "check", "diff", "testing", "__version__",
]
