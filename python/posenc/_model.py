"""Model files: embedding and position tables read in place from the memory map."""
from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

from . import _posenc, _tensors
from ._scheme import PathLike, Scheme

# ---- model files and embeddings ---------------------------------------------------------------


class Model:
    """A model file posenc opened (GGUF, safetensors, Hugging Face folder, llama2.c, .npy): its
    embedding and position tables, read in place from the memory map. Arrays it returns keep the file
    mapped while they live, whether or not the Model does."""

    def __init__(self, path: PathLike):
        self._m = _posenc.Model.open(_tensors.path_arg(path, "path"))

    path = property(lambda self: self._m.path)
    format = property(lambda self: self._m.format, doc="gguf, safetensors, hf-folder, llama2c or npy")
    architecture = property(lambda self: self._m.architecture)
    vocab_size = property(lambda self: self._m.vocab_size)
    d_model = property(lambda self: self._m.d_model)
    n_layers = property(lambda self: self._m.n_layers)
    n_heads = property(lambda self: self._m.n_heads)
    n_kv_heads = property(lambda self: self._m.n_kv_heads)
    context_length = property(lambda self: self._m.context_length)

    @property
    def tensors(self) -> List[Tuple[str, List[int], str]]:
        """(name, shape, stored type) of every tensor."""
        return [(n, list(s), t) for n, s, t in self._m.tensors]

    def tensor(self, name: str) -> np.ndarray:
        """A read-only numpy view of a float32 / float16 tensor in the file (bfloat16: its uint16 bits)."""
        if not isinstance(name, str):
            raise TypeError(f"name: {name!r} ({type(name).__name__}) is not a tensor name (str)")
        return self._m.tensor_array(name)

    def token_embedding(self) -> np.ndarray:
        """The token embedding table [vocab, d_model] as stored (read-only view, no copy)."""
        name = self._m.token_embedding_name()
        if name is None:
            raise OSError(f"model {self.path}: no token embedding table")
        return self._m.tensor_array(name)

    def embed(self, ids: Any, *, multiplier: float = 1.0, out_dtype: str = "float32") -> np.ndarray:
        """Rows of the token table for `ids` (any stored type, ggml blocks dequantized), times
        `multiplier` (Gemma: sqrt(d_model)): [len(ids), d_model] float32 (or bfloat16 bits as uint16)."""
        return self._m.lookup(self._lookup_ids(ids, "ids"), False, _tensors.real_arg(multiplier, "multiplier"), out_dtype)

    def positions(self, positions: Any) -> np.ndarray:
        """Rows of the learned position table (GPT-2's wpe) for `positions`."""
        return self._m.lookup(self._lookup_ids(positions, "positions"), True, 1.0, "float32")

    def _lookup_ids(self, ids: Any, name: str) -> np.ndarray:
        a = _tensors.int_array(ids, name)
        _tensors.check_built_size(f"{name} x d_model", (a.size, max(int(self.d_model), 1)), 1 << 31)  # before any copy
        return _tensors.to_int64(a.reshape(-1), name)

    def scheme(self, **options: Any) -> Scheme:
        """The model's positional scheme (Scheme.from_model)."""
        return Scheme.from_model(self.path, **options)

    def __repr__(self) -> str:
        return (f"Model({self.path!r}, format={self.format}, architecture={self.architecture or '?'}, "
                f"vocab={self.vocab_size}, d_model={self.d_model}, layers={self.n_layers}, heads={self.n_heads})")
