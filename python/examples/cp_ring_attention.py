#!/usr/bin/env python3
"""Context-parallel causal attention with posenc's RoPE at global positions, under torch.distributed.

    PYTHONPATH=build/python /usr/bin/python3 -m torch.distributed.run --redirects 1 --tee 1 --nproc_per_node 2 \
        python/examples/cp_ring_attention.py [--split zigzag|contiguous]

(`--redirects 1 --tee 1`: Debian 12's torch 1.13 under Python 3.11 cannot parse the default "0" of
these options, as enum.Flag no longer lists its zero member; 1 sends the workers' stdout to the console
and to a log file.)

Every rank builds the same packed batch (three sequences of different lengths, seeded), keeps its
shard (posenc.cp.shard: zigzag chunks r and 2*cp-1-r of each sequence, padded to a multiple of 2*cp),
rotates its q and k with posenc at the shard's *global* positions, and runs causal attention while the
key/value blocks travel around the ring (gloo isend/irecv, cp - 1 steps), combining blocks with an
online softmax. Rank 0 gathers the outputs and compares them with one process doing the whole batch;
it prints the largest difference and exits 1 if it is past float32 rounding (1e-5).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import posenc
import posenc.cp

CONFIG = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 4096, "rope_theta": 10000.0}
SEQ_LENS = [37, 64, 19]
HEADS, DIM = 4, 64


def packed_batch():
    """q, k, v [T, H, D] float32 of all sequences back to back (T = sum of lengths), seeded."""
    g = torch.Generator().manual_seed(7)
    t = sum(SEQ_LENS)
    return [torch.randn(t, HEADS, DIM, generator=g) for _ in range(3)]


def block_attention(q, k, v, q_pos, q_seq, k_pos, k_seq, k_valid, state):
    """Adds one key/value block to the online softmax (m, l, acc) of the queries: causal within a
    sequence, padding keys masked."""
    m, l, acc = state
    s = torch.einsum("thd,shd->hts", q.double(), k.double()) / math.sqrt(DIM)
    allowed = (q_seq[:, None] == k_seq[None, :]) & (k_pos[None, :] <= q_pos[:, None]) & k_valid[None, :]
    s = s.masked_fill(~allowed[None], float("-inf"))
    m_new = torch.maximum(m, s.amax(-1))
    safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    p = torch.exp(s - safe[..., None])
    scale = torch.exp(torch.where(torch.isinf(m), torch.full_like(m, -float("inf")), m - safe))
    l = l * scale + p.sum(-1)
    acc = acc * scale[..., None] + torch.einsum("hts,shd->htd", p, v.double())
    return m_new, l, acc


def single_process(rope):
    q, k, v = packed_batch()
    pos = np.concatenate([np.arange(n) for n in SEQ_LENS])
    seq = torch.from_numpy(np.concatenate([np.full(n, i) for i, n in enumerate(SEQ_LENS)]))
    rope.apply_qk(q, k, pos)
    p = torch.from_numpy(pos)
    t = q.shape[0]
    state = (torch.full((HEADS, t), -float("inf"), dtype=torch.float64), torch.zeros(HEADS, t, dtype=torch.float64),
             torch.zeros(HEADS, t, DIM, dtype=torch.float64))
    m, l, acc = block_attention(q, k, v, p, seq, p, seq, torch.ones(t, dtype=torch.bool), state)
    return (acc / l[..., None]).permute(1, 0, 2).float()  # [T, H, D]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="zigzag", choices=["zigzag", "contiguous"])
    ap.add_argument("--local-positions", action="store_true",
                    help="the bug this avoids: RoPE at each token's index in the shard instead of its global position")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank, cp = dist.get_rank(), dist.get_world_size()
    posenc.set_num_threads(1)
    rope = posenc.Rope(CONFIG)

    sh = posenc.cp.shard(SEQ_LENS, cp, rank, a.split)
    q_all, k_all, v_all = packed_batch()
    n = sh.positions.shape[0]
    take = torch.from_numpy(np.where(sh.valid, sh.index, 0))
    keep = torch.from_numpy(sh.valid)[:, None, None]
    q, k, v = [torch.where(keep, x[take], torch.zeros(())).contiguous() for x in (q_all, k_all, v_all)]
    rope_pos = np.arange(n) if a.local_positions else sh.positions
    rope.apply_qk(q, k, rope_pos)  # the shard's tokens at their global positions

    q_pos, q_seq = torch.from_numpy(sh.positions), torch.from_numpy(sh.sequence)
    meta = torch.stack((q_pos, q_seq, torch.from_numpy(sh.valid.astype(np.int64))))  # travels with k, v
    state = (torch.full((HEADS, n), -float("inf"), dtype=torch.float64), torch.zeros(HEADS, n, dtype=torch.float64),
             torch.zeros(HEADS, n, DIM, dtype=torch.float64))
    kv = torch.stack((k, v))
    for step in range(cp):
        state = block_attention(q, kv[0], kv[1], q_pos, q_seq, meta[0], meta[1], meta[2].bool(), state)
        if step == cp - 1:
            break
        recv_kv, recv_meta = torch.empty_like(kv), torch.empty_like(meta)
        reqs = [dist.isend(kv, (rank + 1) % cp), dist.isend(meta, (rank + 1) % cp),
                dist.irecv(recv_kv, (rank - 1) % cp), dist.irecv(recv_meta, (rank - 1) % cp)]
        for r in reqs:
            r.wait()
        kv, meta = recv_kv, recv_meta
    m, l, acc = state
    out = (acc / l.clamp_min(1e-300)[..., None]).permute(1, 0, 2).float().contiguous()  # [n, H, D]

    outs = [torch.empty_like(out) for _ in range(cp)]
    idxs = [torch.empty(n, dtype=torch.int64) for _ in range(cp)]
    dist.all_gather(outs, out)
    dist.all_gather(idxs, torch.from_numpy(sh.index))
    code = 0
    if rank == 0:
        want = single_process(rope)
        got = torch.zeros_like(want)
        seen = torch.zeros(want.shape[0], dtype=torch.int64)
        for o, i in zip(outs, idxs):
            ok = i >= 0
            got[i[ok]] = o[ok]
            seen[i[ok]] += 1
        err = float((got - want).abs().max())
        print(f"cp={cp} split={a.split} tokens={want.shape[0]} (sequences {SEQ_LENS}): "
              f"max |context-parallel - one process| = {err:.3g}")
        code = 0 if bool((seen == 1).all()) and err <= 1e-5 else 1
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(code)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
