#!/bin/sh
# Fails when libcollie.so exports a symbol that is not collie_* (the public API).
# Usage: scripts/check_exports.sh path/to/libcollie.so
set -eu
lib=${1:?usage: check_exports.sh libcollie.so}
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^collie_' | grep -v '^_init$\|^_fini$' || true)
if [ -n "$bad" ]; then
  echo "check_exports: $lib exports symbols outside the collie_ namespace:" >&2
  echo "$bad" >&2
  exit 1
fi
n=$(nm -D --defined-only "$lib" | grep -c ' collie_' || true)
echo "check_exports: $n exported symbols, all collie_*"
