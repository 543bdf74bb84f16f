#!/usr/bin/env sh
# Runs `posenc golden` on the shared golden folder. Where the folder is absent (a clone outside the
# workspace) it says what is missing and skips (exit 77), unless POSENC_REQUIRE_DATA is set (CI).
cli=$1
dir=${POSENC_DATA_DIR:+$POSENC_DATA_DIR/golden}
dir=${dir:-$2}
if [ ! -d "$dir" ]; then
  echo "shared golden data missing: $dir (set POSENC_DATA_DIR to the folder holding golden/)"
  [ -n "${POSENC_REQUIRE_DATA:-}" ] && exit 1
  exit 77
fi
exec "$cli" golden "$dir"
