"""Context parallelism: shard positions (zigzag and contiguous, packed sequences), and the ring
attention example under torch.distributed with 2 and 4 processes matching one process."""
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

import posenc.cp as cp

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "cp_ring_attention.py"


def test_zigzag_one_sequence():
    # 16 tokens, cp 2: chunks of 4; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2
    assert cp.shard([16], 2, 0).positions.tolist() == [0, 1, 2, 3, 12, 13, 14, 15]
    assert cp.shard([16], 2, 1).positions.tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    s = cp.shard([13], 2, 0)  # padded to 16: positions 13..15 are padding
    assert s.positions.tolist() == [0, 1, 2, 3, 12, 13, 14, 15]
    assert s.valid.tolist() == [True] * 5 + [False] * 3
    assert s.index.tolist() == [0, 1, 2, 3, 12, -1, -1, -1]


def test_every_token_once_and_balanced():
    lens = [37, 64, 19, 1]
    for split in ("zigzag", "contiguous"):
        for size in (1, 2, 3, 4):
            shards = [cp.shard(lens, size, r, split) for r in range(size)]
            idx = np.concatenate([s.index[s.valid] for s in shards])
            assert sorted(idx.tolist()) == list(range(sum(lens)))
            assert len({s.positions.shape[0] for s in shards}) == 1  # equal shard sizes
            for s in shards:  # positions restart in each packed sequence
                starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
                ok = s.valid
                assert np.array_equal(s.index[ok] - starts[s.sequence[ok]], s.positions[ok])
    assert cp.padded_length(37, 4) == 40 and cp.padded_length(37, 4, "contiguous") == 40
    assert cp.padded_length(33, 4, "contiguous") == 36


def test_zigzag_balances_causal_work():
    size, n = 4, 1024
    work = [int((cp.shard([n], size, r).positions + 1).sum()) for r in range(size)]
    assert max(work) == min(work)  # each rank's queries see the same number of keys in total


def test_errors():
    with pytest.raises(ValueError, match=r"rank: 2 is outside \[0, 2\)"):
        cp.shard([8], 2, 2)
    with pytest.raises(ValueError, match=r"split: 'ring'"):
        cp.shard([8], 2, 0, "ring")
    with pytest.raises(ValueError, match=r"cp_size: 0"):
        cp.padded_length(8, 0)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(procs, *args):
    pytest.importorskip("torch.distributed")
    env = dict(os.environ, OMP_NUM_THREADS="1", POSENC_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1", "--nnodes", "1",
           "--nproc_per_node", str(procs), "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
           str(EXAMPLE), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    line = [l for l in r.stdout.splitlines() if "max |context-parallel - one process|" in l]
    assert line, r.stdout[-2000:] + r.stderr[-4000:]
    return r.returncode, float(line[0].rsplit("=", 1)[1])


@pytest.mark.parametrize("split", ["zigzag", "contiguous"])
@pytest.mark.parametrize("procs", [2, 4])
def test_ring_attention_matches_one_process(procs, split):
    code, err = _run(procs, "--split", split)
    assert code == 0 and err <= 1e-5, err


def test_ring_attention_with_shard_local_positions_fails():
    """The comparison can fail: RoPE at shard-local positions gives other scores."""
    code, err = _run(2, "--local-positions")
    assert code != 0 and err > 1e-3, err
