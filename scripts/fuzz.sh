#!/bin/sh
# scripts/fuzz.sh - builds collie's libFuzzer targets (tests/fuzz) with clang,
# ASan and UBSan in build-fuzz, and runs one or all of them from their seed
# corpus (tests/fuzz/corpus/NAME), each for SECONDS (default 60).
#
#   sh scripts/fuzz.sh NAME [SECONDS]     one target: fuzz_tuning, fuzz_env,
#                                         fuzz_store, fuzz_tcp_handshake, fuzz_tcp_frames,
#                                         fuzz_report_csv, fuzz_flight_json
#   sh scripts/fuzz.sh all [SECONDS]      every target in turn (CI: a few seconds each)
#
# New inputs the fuzzer finds go to build-fuzz/corpus/NAME (the seeds in the
# repository are not written to). A crash stops the run with libFuzzer's report
# and the input in build-fuzz/crash-NAME-*; reproduce it with
# `build-fuzz/tests/fuzz/NAME FILE`, then make it a regression test (and a
# seed). Exit status: 0 when every target ran clean, 1 otherwise, 2 for usage.
set -u
cd "$(dirname "$0")/.." || exit 2
name=${1:-}
secs=${2:-60}
all="fuzz_tuning fuzz_env fuzz_store fuzz_tcp_handshake fuzz_tcp_frames"
all="$all fuzz_report_csv fuzz_flight_json"
case "$name" in
  all) targets=$all ;;
  fuzz_tuning | fuzz_env | fuzz_store | fuzz_tcp_handshake | fuzz_tcp_frames | fuzz_report_csv | \
    fuzz_flight_json) targets=$name ;;
  *)
    echo "usage: sh scripts/fuzz.sh NAME|all [SECONDS]   (NAME: $all)" >&2
    exit 2
    ;;
esac
if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz.sh: clang is needed (apt-get install clang)" >&2
  exit 2
fi
jobs=$(nproc 2>/dev/null || echo 2)
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLIE_FUZZ=ON \
  -DCOLLIE_BUILD_TESTS=OFF >/dev/null || exit 1
cmake --build build-fuzz -j"$jobs" --target $targets >/dev/null || {
  cmake --build build-fuzz -j1 --target $targets 2>&1 | tail -30
  exit 1
}
failed=0
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export COLLIE_DEBUG=NONE # the parsers' warnings about what they refuse are the point, not news
for t in $targets; do
  mkdir -p "build-fuzz/corpus/$t"
  echo "=== $t: $secs s"
  if ! "build-fuzz/tests/fuzz/$t" -max_total_time="$secs" -print_final_stats=0 \
    -artifact_prefix="build-fuzz/crash-$t-" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" \
    >"build-fuzz/$t.log" 2>&1; then
    echo "=== $t: FAILED (build-fuzz/$t.log):"
    tail -40 "build-fuzz/$t.log"
    failed=1
  else
    tail -1 "build-fuzz/$t.log"
  fi
done
exit $failed
