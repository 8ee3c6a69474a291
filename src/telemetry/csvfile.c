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

/* Says in words where the header line `have` first departs from `want`. */
static void
csv_describe_difference(const char *have, const char *want, char *out, size_t len)
{
  for (int col = 1;; col++) {
    size_t a = strcspn(have, ","), b = strcspn(want, ",");
    if (a != b || strncmp(have, want, a) != 0) {
      if (!*have)
        snprintf(out, len, "it ends before column %d, where collie writes '%.*s'", col, (int)b,
                 want);
      else if (!*want)
        snprintf(out, len, "its column %d '%.*s' is past the %d that collie writes", col, (int)a,
                 have, col - 1);
      else
        snprintf(out, len, "column %d is '%.*s', where collie writes '%.*s'", col, (int)a, have,
                 (int)b, want);
      return;
    }
    have += a + (have[a] ? 1 : 0);
    want += b + (want[b] ? 1 : 0);
  }
}

/* Writes the header into the empty file f. */
static collie_result_t
csv_write_header(int f, const char *path, const char *header)
{
  if (collie__csv_write(f, header, strlen(header)) == 0 && collie__csv_write(f, "\n", 1) == 0)
    return COLLIE_SUCCESS;
  return collie__err_errno(COLLIE_SYSTEM_ERROR, "writing the header of %s", path);
}

/* Checks that the open file f (path) starts with the header line `header`
 * (an empty file gets it: made by hand, or its creator died). */
static collie_result_t
csv_check_header(int f, const char *path, const char *header, int may_write)
{
  enum { HEADER_MAX = 64 * 1024 };
  collie_result_t rc;
  char *line = malloc(HEADER_MAX + 1);
  if (!line) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory reading %s", path);
  ssize_t n = pread(f, line, HEADER_MAX, 0);
  if (n < 0) {
    rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "reading %s", path);
  } else if (n == 0) { /* an empty file: ours to head */
    rc = may_write ? csv_write_header(f, path, header) : COLLIE_SUCCESS;
  } else {
    line[n] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    rc = COLLIE_SUCCESS;
    if (strcmp(line, header) != 0) {
      char why[256];
      csv_describe_difference(line, header, why, sizeof(why));
      rc = collie__err(COLLIE_INVALID_USAGE,
                       "%s exists with a different header (%s); move the old file away, log "
                       "elsewhere (COLLIE_LOG_DIR, COLLIE_TIMING_LOG) or turn the log off "
                       "(COLLIE_COMMS_LOG=0)",
                       path, why);
    }
  }
  free(line);
  return rc;
}

collie_result_t
collie__csv_open(const char *path, const char *header, int *fd)
{
  collie_result_t rc;
  /* Whoever creates the file writes the header; everyone else reads it. */
  int f = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (f >= 0) {
    if ((rc = csv_write_header(f, path, header)) != COLLIE_SUCCESS) {
      close(f);
      return rc;
    }
    *fd = f;
    return COLLIE_SUCCESS;
  }
  if (errno != EEXIST || (f = open(path, O_RDWR | O_APPEND | O_CLOEXEC)) < 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "opening %s", path);
  if ((rc = csv_check_header(f, path, header, 1)) != COLLIE_SUCCESS) {
    close(f);
    return rc;
  }
  *fd = f;
  return COLLIE_SUCCESS;
}

collie_result_t
collie__csv_check(const char *path, const char *header)
{
  int f = open(path, O_RDONLY | O_CLOEXEC);
  if (f >= 0) {
    collie_result_t rc = csv_check_header(f, path, header, 0);
    close(f);
    return rc;
  }
  if (errno != ENOENT) return collie__err_errno(COLLIE_SYSTEM_ERROR, "opening %s", path);
  /* Missing: whether it could be made, as open(O_CREAT) would ask. */
  char dir[1200];
  snprintf(dir, sizeof(dir), "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof(dir), ".");
  else if (slash == dir)
    dir[1] = '\0';
  else
    *slash = '\0';
  if (access(dir, W_OK | X_OK) != 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "cannot create %s (directory %s)", path, dir);
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
