"""Context parallelism: which tokens, at which global positions, a rank holds.

A sequence of S tokens is split over cp ranks. RoPE (and every position scheme) must see each token's
*global* position, not its index in the shard, or attention across shards is wrong.

- zigzag (the load-balanced causal split of Megatron-LM / TransformerEngine): each sequence is padded
  to a multiple of 2*cp and cut into 2*cp chunks of c tokens; rank r holds chunks r and 2*cp-1-r, so
  every rank has as much causal work as every other.
- contiguous: each sequence padded to a multiple of cp, rank r holds tokens [r*S/cp, (r+1)*S/cp).

Packed sequences (several sequences in one buffer, as cu_seqlens describes them) are split one by
one and each rank's pieces concatenated in sequence order; positions restart at 0 in each sequence.
Padding tokens are marked invalid (index -1); their positions continue past the sequence's end so
that they are ordinary positions for any kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import _tensors

MAX_SEQ_LEN = 1 << 31  # RoPE's position bound: a longer sequence has positions no kernel takes
MAX_SHARD_TOKENS = 1 << 24  # one rank's tokens: four int64/bool arrays and their temporaries, ~1 GiB at most

__all__ = ["Shard", "padded_length", "shard"]


@dataclass(frozen=True)
class Shard:
    """One rank's tokens: per token its global position in its sequence, its index among the unpadded
    packed tokens (-1 for padding), its sequence number, and whether it is a real token."""
    positions: np.ndarray  # int64 [n]
    index: np.ndarray      # int64 [n]
    sequence: np.ndarray   # int64 [n]
    valid: np.ndarray      # bool [n]


def padded_length(seq_len: int, cp_size: int, split: str = "zigzag") -> int:
    """The sequence's length after padding: a multiple of 2*cp (zigzag) or cp (contiguous)."""
    cp_size = _tensors.int_arg(cp_size, "cp_size")
    if cp_size < 1:
        raise ValueError(f"cp_size: {cp_size} (expected >= 1)")
    if cp_size >= MAX_SEQ_LEN:
        raise ValueError(f"cp_size: {cp_size} is beyond 2^31")
    seq_len = _tensors.int_arg(seq_len, "seq_len")
    if seq_len < 0:
        raise ValueError(f"seq_len: {seq_len} is negative")
    if seq_len >= MAX_SEQ_LEN:
        raise ValueError(f"seq_len: {seq_len} is beyond 2^31 (positions must stay below 2^31)")
    unit = {"zigzag": 2 * cp_size, "contiguous": cp_size}.get(split) if isinstance(split, str) else None
    if unit is None:
        raise ValueError(f"split: {split!r} (expected zigzag or contiguous)")
    padded = -(-seq_len // unit) * unit
    if padded > MAX_SEQ_LEN:  # (padding tokens take positions up to padded - 1)
        raise ValueError(f"seq_len: {seq_len} padded to a multiple of {unit} is {padded} tokens, whose positions pass 2^31")
    return padded


def shard(seq_lens: Sequence[int], cp_size: int, rank: int, split: str = "zigzag") -> Shard:
    """The tokens rank `rank` of `cp_size` holds for sequences of lengths `seq_lens` (one sequence:
    [S]; packed: the lengths cu_seqlens differences give)."""
    padded_length(0, cp_size, split)  # cp_size and split checked even for no sequences
    cp_size = int(cp_size)
    rank = _tensors.int_arg(rank, "rank")
    if not 0 <= rank < cp_size:
        raise ValueError(f"rank: {rank} is outside [0, {cp_size})")
    if isinstance(seq_lens, (str, bytes)) or not hasattr(seq_lens, "__iter__"):
        raise TypeError(f"seq_lens: {type(seq_lens).__name__} is not a sequence of lengths")
    lens = [_tensors.int_arg(x, f"seq_lens[{i}]") for i, x in enumerate(seq_lens)]
    padded = [padded_length(n, cp_size, split) for n in lens]  # every length checked before any is sharded
    if sum(padded) // cp_size > MAX_SHARD_TOKENS:  # (bounded before any array is built)
        raise ValueError(f"seq_lens: {sum(padded) // cp_size} tokens per rank is more than posenc builds at once "
                         f"(2^{MAX_SHARD_TOKENS.bit_length() - 1})")
    pos, idx, seq = [], [], []
    start = 0
    for s, (n, p) in enumerate(zip(lens, padded)):
        if split == "zigzag":
            c = p // (2 * cp_size)
            local = np.concatenate((np.arange(rank * c, (rank + 1) * c),
                                    np.arange((2 * cp_size - 1 - rank) * c, (2 * cp_size - rank) * c)))
        else:
            c = p // cp_size
            local = np.arange(rank * c, (rank + 1) * c)
        pos.append(local)
        idx.append(np.where(local < n, start + local, -1))
        seq.append(np.full(local.shape, s))
        start += n
    cat = (lambda xs: np.concatenate(xs).astype(np.int64)) if pos else (lambda xs: np.zeros(0, np.int64))
    positions, index, sequence = cat(pos), cat(idx), cat(seq)
    return Shard(positions, index, sequence, index >= 0)
