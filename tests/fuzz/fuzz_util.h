/*
 * fuzz_util.h - what collie's fuzz targets share: handing the fuzzer's bytes
 * to a parser that reads a path (a memfd, named through /proc/self/fd).
 * Built only with -DCOLLIE_FUZZ=ON (scripts/fuzz.sh).
 */
#ifndef COLLIE_FUZZ_UTIL_H
#define COLLIE_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* A file holding data[0..n), as a path in path[len]; its descriptor, or -1.
 * The caller closes it. */
static inline int
fuzz_file(const uint8_t *data, size_t n, char *path, size_t len)
{
  int fd = memfd_create("collie-fuzz", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(fd, data + off, n - off);
    if (w <= 0) {
      close(fd);
      return -1;
    }
    off += (size_t)w;
  }
  snprintf(path, len, "/proc/self/fd/%d", fd);
  return fd;
}

#endif /* COLLIE_FUZZ_UTIL_H */
