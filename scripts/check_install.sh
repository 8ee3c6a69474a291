#!/bin/sh
# Installs the build into a temporary prefix and builds a small program against
# it twice: with pkg-config and with CMake's find_package(collie). Then runs it
# under the installed collierun. Usage: scripts/check_install.sh BUILD_DIR
set -eu
build=${1:?usage: check_install.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/collie-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export COLLIE_LOG_DIR="$tmp" # comms.csv and any flight dump go there, not into the working directory
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib* | head -n 1)
cat > "$tmp/hello.c" <<'C'
#include <collie.h>
#include <stdio.h>
int main(void) {
  collie_comm_t *c;
  if (collie_comm_init(&c) != COLLIE_SUCCESS) { fprintf(stderr, "%s\n", collie_last_error()); return 1; }
  int x = collie_comm_rank(c) + 1, s = 0;
  if (collie_allreduce(c, &x, &s, 1, COLLIE_INT32, COLLIE_SUM, NULL, NULL) != COLLIE_SUCCESS) return 1;
  int n = collie_comm_size(c);
  collie_comm_destroy(c);
  return s == n * (n + 1) / 2 ? 0 : 2;
}
C
if command -v pkg-config >/dev/null 2>&1; then
  PKG_CONFIG_PATH="$libdir/pkgconfig" cc -o "$tmp/hello_pc" "$tmp/hello.c" \
    $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs collie)
  LD_LIBRARY_PATH="$libdir" "$tmp/prefix/bin/collierun" -n 3 "$tmp/hello_pc"
  echo "check_install: pkg-config build runs"
else
  echo "check_install: pkg-config not installed, skipping that half"
fi
mkdir -p "$tmp/cm"
cat > "$tmp/cm/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.16)
project(hello C)
find_package(collie REQUIRED)
add_executable(hello ../hello.c)
target_link_libraries(hello PRIVATE collie::collie)
C
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/prefix/bin/collierun" -n 2 "$tmp/cm/build/hello"
echo "check_install: find_package(collie) build runs"
readelf -d "$libdir/libcollie.so" | grep -q 'SONAME.*libcollie.so.0' && echo "check_install: soname libcollie.so.0"
