#!/bin/sh
# Memory benchmark for `posenc embed`: looking up N ids from a large table should make resident only
# the pages of those rows (plus the kernel's fault-around), not the whole table.
#   bench/embed_rss.sh BUILD_DIR [N_IDS] [VOCAB] [D_MODEL]
# Writes a GGUF with an F16 token_embd.weight [VOCAB, D_MODEL] (default 65536 x 2048 = 256 MiB) to a
# temp folder, evicts it from the page cache (posix_fadvise DONTNEED), then runs
# `posenc embed --report-rss` on N random ids (default 1000) and prints the resident-set report.
set -eu
BUILD=${1:?usage: embed_rss.sh BUILD_DIR [N_IDS] [VOCAB] [D_MODEL]}
N=${2:-1000}
VOCAB=${3:-65536}
D=${4:-2048}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
/usr/bin/python3 - "$TMP" "$N" "$VOCAB" "$D" <<'PY'
import os, struct, sys
import numpy as np
tmp, n, vocab, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def s(x): b = x.encode(); return struct.pack('<Q', len(b)) + b
hdr = b'GGUF' + struct.pack('<IQQ', 3, 1, 1) + s('general.architecture') + struct.pack('<I', 8) + s('llama')
hdr += s('token_embd.weight') + struct.pack('<I', 2) + struct.pack('<QQ', d, vocab) + struct.pack('<IQ', 1, 0)
hdr += b'\0' * (-len(hdr) % 32)
path = os.path.join(tmp, 'big.gguf')
rng = np.random.default_rng(0)
with open(path, 'wb') as f:
    f.write(hdr)
    chunk = 4096
    for r in range(0, vocab, chunk):
        f.write((rng.standard_normal((min(chunk, vocab - r), d)) * 0.02).astype(np.float16).tobytes())
    f.flush(); os.fsync(f.fileno())
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
np.save(os.path.join(tmp, 'ids.npy'), rng.choice(vocab, size=n, replace=False).astype(np.int64))
PY
"$BUILD/posenc" embed "$TMP/big.gguf" --ids-file "$TMP/ids.npy" --output "$TMP/x.npy" --report-rss
