#!/bin/sh
# Checks libcollie-nccl.so's exports (docs/nccl.md): every function of
# src/nccl/nccl_api.def and its pnccl twin, nothing else (no collie_*: the
# library carries collie inside and must live beside libcollie.so); and,
# where NCCL's own nccl.h is installed (NCCL_HOME, CUDA's include folder,
# /usr/include, or the nvidia-nccl wheel of a Python on PATH), every
# function that header declares, so that a program linked against that
# NCCL loads with collie preloaded.
#   sh scripts/check_nccl_symbols.sh build/nccl/libcollie-nccl.so [path/to/nccl.h]
# Exit 1 naming what is missing or extra; 2 for bad usage.
set -eu
lib=${1:-}
if [ -z "$lib" ] || [ ! -f "$lib" ]; then
  echo "usage: check_nccl_symbols.sh path/to/libcollie-nccl.so [nccl.h]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^_init$\|^_fini$' | sort -u > "$tmp/exports"
grep -o 'X([^,]*, *nccl[A-Za-z0-9_]*' "$root/src/nccl/nccl_api.def" | sed 's/.*, *//' | sort -u > "$tmp/names"
{ cat "$tmp/names"; sed 's/^/p/' "$tmp/names"; } | sort -u > "$tmp/want"
fail=0
missing=$(comm -23 "$tmp/want" "$tmp/exports")
extra=$(comm -13 "$tmp/want" "$tmp/exports")
if [ -n "$missing" ]; then
  echo "check_nccl_symbols: $lib lacks what nccl_api.def lists:" >&2
  echo "$missing" >&2
  fail=1
fi
if [ -n "$extra" ]; then
  echo "check_nccl_symbols: $lib exports what nccl_api.def does not list:" >&2
  echo "$extra" >&2
  fail=1
fi
echo "check_nccl_symbols: $(wc -l < "$tmp/exports") exports, $(wc -l < "$tmp/names") functions of nccl_api.def and their pnccl twins"

hdr=${2:-}
if [ -z "$hdr" ]; then
  for h in ${NCCL_HOME:+"$NCCL_HOME/include/nccl.h"} ${CUDA_HOME:+"$CUDA_HOME/include/nccl.h"} \
      /usr/local/cuda/include/nccl.h /usr/include/nccl.h; do
    if [ -f "$h" ]; then hdr=$h; break; fi
  done
fi
if [ -z "$hdr" ] && command -v python3 > /dev/null 2>&1; then
  hdr=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "include", "nccl.h"))' 2> /dev/null || true)
  [ -f "$hdr" ] || hdr=
fi
if [ -n "$hdr" ]; then
  # Every name declared as a function in the header: a word starting nccl
  # or pnccl right before "(" on a line that declares a result.
  grep -E '^[[:space:]]*(ncclResult_t|const char ?\*|void)[[:space:]]+\*?[[:space:]]*p?nccl[A-Za-z0-9_]*[[:space:]]*\(' "$hdr" |
    grep -oE 'p?nccl[A-Za-z0-9_]*[[:space:]]*\(' | sed 's/[[:space:]]*($//' | sort -u > "$tmp/header"
  lacking=$(comm -23 "$tmp/header" "$tmp/exports")
  if [ -n "$lacking" ]; then
    echo "check_nccl_symbols: $lib lacks functions $hdr declares:" >&2
    echo "$lacking" >&2
    fail=1
  fi
  echo "check_nccl_symbols: $(wc -l < "$tmp/header") functions of $hdr, all exported"
else
  echo "check_nccl_symbols: no NCCL header installed here: checked against nccl_api.def only"
fi
exit $fail
