/*
 * csvfile.c - the append-only CSV files telemetry writes (comms.csv,
 * timing-rank{i}.csv). The header is a contract with whoever reads the file
 * later: a file that exists with another header (an older collie, other
 * registered categories) is refused rather than extended with rows that do
 * not match its columns. Rows go out with one write(2) on an O_APPEND
 * descriptor, so two writers never interleave inside a row and a crash never
 * leaves half of one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "telemetry/telemetry.h"
#include "util/error.h"

/* The 1-based column where two different header lines first differ, and the
 * names found there in each ("(none)" past the end of a line). */
static int
csv_first_difference(const char *have, const char *want, char *h, size_t hl, char *w, size_t wl)
{
  for (int col = 1;; col++) {
    size_t a = have ? strcspn(have, ",") : 0, b = want ? strcspn(want, ",") : 0;
    if (!have || !want || a != b || strncmp(have, want, a) != 0) {
      snprintf(h, hl, "%.*s", have ? (int)a : 6, have ? have : "(none)");
      snprintf(w, wl, "%.*s", want ? (int)b : 6, want ? want : "(none)");
      return col;
    }
    have = have[a] ? have + a + 1 : NULL;
    want = want[b] ? want + b + 1 : NULL;
  }
}

collie_result_t
collie__csv_open(const char *path, const char *header, int *fd)
{
  int f = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (f < 0) return collie__err_errno(COLLIE_SYSTEM_ERROR, "opening %s", path);
  /* The existing header: the first line, read in one go (headers are short). */
  size_t want = strlen(header), cap = want + 2;
  char *line = malloc(cap + 1);
  if (!line) {
    close(f);
    return collie__err(COLLIE_SYSTEM_ERROR, "out of memory reading %s", path);
  }
  ssize_t n = pread(f, line, cap, 0);
  if (n < 0) {
    free(line);
    close(f);
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "reading %s", path);
  }
  line[n] = '\0';
  if (n == 0) {
    line[0] = '\0';
    int ok = collie__csv_write(f, header, want) == 0 && collie__csv_write(f, "\n", 1) == 0;
    free(line);
    if (!ok) {
      collie_result_t rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "writing the header of %s", path);
      close(f);
      return rc;
    }
    *fd = f;
    return COLLIE_SUCCESS;
  }
  line[strcspn(line, "\r\n")] = '\0';
  if (strcmp(line, header) != 0) {
    char have[64], exp[64];
    int col = csv_first_difference(line, header, have, sizeof(have), exp, sizeof(exp));
    free(line);
    close(f);
    return collie__err(COLLIE_INVALID_USAGE,
                       "%s exists with a different header (column %d is '%s', collie writes "
                       "'%s'); move the old file away or log elsewhere (COLLIE_LOG_DIR, "
                       "COLLIE_TIMING_LOG)",
                       path, col, have, exp);
  }
  free(line);
  *fd = f;
  return COLLIE_SUCCESS;
}

int
collie__csv_write(int fd, const char *buf, size_t len)
{
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

size_t
collie__csv_field(char *out, size_t len, size_t cap, const char *field)
{
  if (!field) field = "";
  int quote = strpbrk(field, ",\"\r\n") != NULL;
  if (len + 1 >= cap) return len;
  if (quote) out[len++] = '"';
  for (const char *p = field; *p && len + 3 < cap; p++) {
    if (*p == '"') out[len++] = '"';
    out[len++] = *p;
  }
  if (quote && len + 1 < cap) out[len++] = '"';
  out[len] = '\0';
  return len;
}
