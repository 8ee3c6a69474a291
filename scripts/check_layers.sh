#!/bin/sh
# Checks docs/design.md's "nothing below calls up": which module may include
# which, and which may call which (below).
#   core      -> bootstrap, transport, coll, reduce, telemetry, device, util
#   coll      -> transport/transport.h, reduce/reduce.h, util
#                (and coll/shm_flat.c alone -> transport/shm.h: the shm-only family;
#                coll/cuda_ipc.c alone -> transport/shm.h, and coll/cuda_*.c ->
#                device/: the device algorithms meet in the flat area, run
#                kernels and stage through pinned memory)
#   transport -> bootstrap/bootstrap.h (setup only), util
#   bootstrap, telemetry, device -> util;  reduce -> itself;  util -> libc
#   nccl      -> collie.h, bootstrap (the store), device/cuda.h, reduce/reduce.h, util
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
        coll/cuda_ipc.c:transport/shm.h | coll/cuda_*.c:device/*) continue ;;
      esac
      if ! echo "$inc" | grep -Eq "$2"; then
        echo "check_layers: $f includes $inc (not allowed for $1)"
        echo x >> /tmp/check_layers.$$
      fi
    done
  done
}
rm -f /tmp/check_layers.$$
check core '^(bootstrap|transport|coll|reduce|telemetry|device|util)/'
check device '^util/'
check coll '^(transport/transport\.h|reduce/reduce\.h|util/)'
check transport '^(bootstrap/bootstrap\.h|util/)'
check bootstrap '^util/'
check telemetry '^util/'
check reduce '^$'
check util '^$'
# libcollie-nccl: collie's public API (collie.h), the store and the driver.
check nccl '^(bootstrap/bootstrap\.h|bootstrap/store_int\.h|device/cuda\.h|device/host_mem\.h|reduce/reduce\.h|util/)'

# Calls, not only includes: a function defined in one file (a line that
# starts with its name and "(", the house style) and called from a file of
# a module that may not reach it fails, as does a call within src/core
# against the order of its files:
#   capture_replay.c -> api*.c, introspect.c, comm_shrink.c -> comm.c, stage.c -> capture.c
#   -> work.c -> dispatch.c, group.c -> check.c, params.c, placement.c -> comm_state.c
# (a file may call files to its right, never to its left or beside it).
# capture_replay.c is the library's own client: the host node of a call
# captured into a CUDA graph, which the driver runs at each replay and which
# calls the public API as a user's thread would (capture.c hands the driver
# a pointer to it; nothing calls it).
allowed_calls() { # module of the caller -> regex of the modules it may call
  case $1 in
    core) echo '^(core|bootstrap|transport|coll|reduce|telemetry|device|util)$' ;;
    coll) echo '^(coll|transport|reduce|device|util)$' ;; # device: coll/cuda_*.c alone (includes)
    transport) echo '^(transport|bootstrap|util)$' ;;
    bootstrap | telemetry | device) echo "^($1|util)\$" ;;
    nccl) echo '^(nccl|core|bootstrap|device|reduce|util)$' ;; # core: collie.h's functions alone (includes)
    *) echo "^$1\$" ;;
  esac
}
core_rank() {
  case $1 in
    capture_replay.c) echo -1 ;;
    api*.c | introspect.c | comm_shrink.c) echo 0 ;;
    comm.c | stage.c) echo 1 ;;
    capture.c) echo 2 ;;
    work.c) echo 3 ;;
    dispatch.c | group.c) echo 4 ;;
    check.c | params.c | placement.c) echo 5 ;;
    comm_state.c) echo 6 ;;
    *) echo 9 ;;
  esac
}
defs=/tmp/check_layers_defs.$$
grep -o '^collie_[A-Za-z0-9_]*(' */*.c | sed 's/($//' | sort -t: -k2 >"$defs"
for f in */*.c; do
  mod=${f%%/*}
  ok=$(allowed_calls "$mod")
  # Calls outside comments and string literals (messages name functions).
  sed -e 's:/\*.*\*/::g' -e 's/"\([^"\\]\|\\.\)*"//g' -e '/^[[:space:]]*\*/d' -e '/^[[:space:]]*\/\*/d' "$f" |
    grep -o 'collie_[A-Za-z0-9_]*[[:space:]]*(' | sed 's/[[:space:]]*($//' | sort -u |
    while read -r fn; do
      def=$(awk -F: -v fn="$fn" '$2 == fn { print $1; exit }' "$defs")
      [ -n "$def" ] && [ "$def" != "$f" ] || continue
      dmod=${def%%/*}
      if ! echo "$dmod" | grep -Eq "$ok"; then
        echo "check_layers: $f calls $fn, defined in $def (not allowed for $mod)"
        echo x >>/tmp/check_layers.$$
      elif [ "$mod" = core ] && [ "$dmod" = core ]; then
        a=$(core_rank "${f#core/}")
        b=$(core_rank "${def#core/}")
        if [ "$b" -le "$a" ]; then
          echo "check_layers: $f calls $fn, defined in $def (src/core's files call rightwards only)"
          echo x >>/tmp/check_layers.$$
        fi
      fi
    done
done
rm -f "$defs"

# Tools come in through the front door: collie.h, core/introspect.h (which
# brings the contracts they measure) and core/params.h; nothing else of src/.
for f in ../tools/*.c ../tools/*.h; do
  grep -o '#include "[^"]*"' "$f" | sed 's/#include "//; s/"$//' | while read -r inc; do
    case "$inc" in
      collie.h | core/introspect.h | core/params.h) continue ;;
      */*) ;;
      *) [ -e "../tools/$inc" ] && continue ;;
    esac
    echo "check_layers: ${f#../} includes $inc (tools may include collie.h, core/introspect.h, core/params.h)"
    echo x >>/tmp/check_layers.$$
  done
done
if [ -e /tmp/check_layers.$$ ]; then rm -f /tmp/check_layers.$$; exit 1; fi
echo "check_layers: module boundaries respected (includes and calls)"
