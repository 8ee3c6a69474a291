#!/bin/sh
# Checks docs/design.md's "nothing below calls up": which module may include which.
#   core      -> bootstrap, transport, coll, reduce, telemetry, util
#   coll      -> transport/transport.h, reduce/reduce.h, util
#                (and coll/shm_flat.c alone -> transport/shm.h: the shm-only family)
#   transport -> bootstrap/bootstrap.h (setup only), util
#   bootstrap, telemetry -> util;  reduce -> itself;  util -> libc
set -eu
cd "$(dirname "$0")/../src"
fail=0
check() { # module allowed-regex
  for f in "$1"/*.c "$1"/*.h; do
    [ -e "$f" ] || continue
    grep -o '#include "[^"]*"' "$f" | sed 's/#include "//; s/"$//' | while read -r inc; do
      case "$inc" in
        collie.h) continue ;;
        "$1"/*) continue ;;
      esac
      case "$f:$inc" in
        coll/shm_flat.c:transport/shm.h) continue ;;
      esac
      if ! echo "$inc" | grep -Eq "$2"; then
        echo "check_layers: $f includes $inc (not allowed for $1)"
        echo x >> /tmp/check_layers.$$
      fi
    done
  done
}
rm -f /tmp/check_layers.$$
check core '^(bootstrap|transport|coll|reduce|telemetry|util)/'
check coll '^(transport/transport\.h|reduce/reduce\.h|util/)'
check transport '^(bootstrap/bootstrap\.h|util/)'
check bootstrap '^util/'
check telemetry '^util/'
check reduce '^$'
check util '^$'
if [ -e /tmp/check_layers.$$ ]; then rm -f /tmp/check_layers.$$; exit 1; fi
echo "check_layers: module boundaries respected"
