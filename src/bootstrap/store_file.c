/*
 * store_file.c - the file store: a directory that every rank can reach
 * (local disk for one host, a shared file system for several).
 *
 * Layout: <dir>/<16 hex digits of hash64(token)>/ holds one job's keys, so
 * jobs sharing a directory never see each other's keys. Each key is one file,
 * "k_<encoded key>"; set writes a temporary file and renames it over the key,
 * so a reader sees the whole old value or the whole new one, never a torn
 * write (rename is atomic on POSIX file systems, NFS included). get polls for
 * the file with a backoff from 50 us to 5 ms: waiting is bounded by the
 * deadline and never spins. add takes flock() on a per-key lock file
 * "l_<encoded key>", reads the decimal counter, writes the sum back as a set
 * does and unlocks; the counter is a plain decimal value, so get on a
 * counter key returns its digits, as with the tcp store.
 *
 * Key encoding: keys may hold '/', '.' and ':', which are not safe in one
 * file name, so every character outside [A-Za-z0-9_-] becomes "%XX". A name
 * that would exceed the file-name limit becomes "k#<hash>_<first part>".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bootstrap/store_int.h"
#include "util/error.h"
#include "util/util.h"

#define FILE_NAME_MAX 240           /* below NAME_MAX (255) with room to spare */
#define FILE_BACKOFF_MIN_NS 50000   /* 50 us: a key set a moment ago is found fast */
#define FILE_BACKOFF_MAX_NS 5000000 /* 5 ms: eight waiting ranks cost little CPU */

struct file_store {
  collie__store_t base;
  char url[PATH_MAX + 8];
  char dir[PATH_MAX]; /* <dir>/<token hash> */
  uint64_t host_hash; /* temp names stay unique across hosts sharing the directory */
  unsigned seq;       /* temp names stay unique across threads (atomic) */
};

/* Writes the file name of key with kind 'k' (value) or 'l' (lock) into out. */
static void
file_key_name(char kind, const char *key, char *out)
{
  static const char hex[] = "0123456789ABCDEF";
  char enc[COLLIE_STORE_MAX_KEY * 3 + 1];
  size_t o = 0;
  for (const char *p = key; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '-') {
      enc[o++] = (char)c;
    } else {
      enc[o++] = '%';
      enc[o++] = hex[c >> 4];
      enc[o++] = hex[c & 15];
    }
  }
  enc[o] = '\0';
  if (o + 2 <= FILE_NAME_MAX)
    snprintf(out, FILE_NAME_MAX + 1, "%c_%s", kind, enc);
  else
    snprintf(out, FILE_NAME_MAX + 1, "%c#%016llx_%.200s", kind,
             (unsigned long long)collie__hash64(key, strlen(key), 0), enc);
}

static void
file_key_path(const struct file_store *fs, char kind, const char *key, char *path)
{
  char name[FILE_NAME_MAX + 1];
  file_key_name(kind, key, name);
  snprintf(path, PATH_MAX, "%s/%s", fs->dir, name);
}

/* mkdir -p with mode 0700 for every directory it creates. */
static collie_result_t
file_mkdirs(const char *url, const char *dir)
{
  char buf[PATH_MAX];
  size_t n = strlen(dir);
  memcpy(buf, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char saved = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
      return collie__err_errno(COLLIE_SYSTEM_ERROR, "store %s: cannot create directory %s", url,
                               buf);
    buf[i] = saved;
  }
  struct stat st;
  if (stat(dir, &st) != 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "store %s: cannot stat %s", url, dir);
  if (!S_ISDIR(st.st_mode))
    return collie__err(COLLIE_SYSTEM_ERROR, "store %s: %s exists and is not a directory", url, dir);
  if (access(dir, W_OK | X_OK) != 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "store %s: directory %s is not writable", url,
                             dir);
  return COLLIE_SUCCESS;
}

/* Writes val to path atomically: a unique temp file in the same directory, then rename. */
static collie_result_t
file_write_atomic(struct file_store *fs, const char *key, const char *path, const void *val,
                  size_t len)
{
  char tmp[PATH_MAX];
  unsigned seq = __atomic_fetch_add(&fs->seq, 1, __ATOMIC_RELAXED);
  snprintf(tmp, sizeof(tmp), "%s/.tmp.%016llx.%ld.%ld.%u", fs->dir,
           (unsigned long long)fs->host_hash, (long)getpid(), (long)syscall(SYS_gettid), seq);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "store set \"%s\" on %s: cannot create %s", key,
                             fs->url, tmp);
  const char *p = val;
  size_t left = len;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      collie_result_t rc = collie__err_errno(
          COLLIE_SYSTEM_ERROR, "store set \"%s\" on %s: cannot write %s", key, fs->url, tmp);
      close(fd);
      unlink(tmp);
      return rc;
    }
    p += w;
    left -= (size_t)w;
  }
  if (close(fd) != 0 || rename(tmp, path) != 0) {
    collie_result_t rc = collie__err_errno(
        COLLIE_SYSTEM_ERROR, "store set \"%s\" on %s: cannot write %s", key, fs->url, path);
    unlink(tmp);
    return rc;
  }
  return COLLIE_SUCCESS;
}

/* Reads the whole file at path. Returns SUCCESS, or TIMEOUT-free codes:
 * *missing = 1 (and SUCCESS) when the file does not exist yet. */
static collie_result_t
file_read(struct file_store *fs, const char *key, const char *path, void **val, size_t *len,
          int *missing)
{
  *missing = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *missing = 1;
      return COLLIE_SUCCESS;
    }
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "store get \"%s\" on %s: cannot open %s", key,
                             fs->url, path);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    collie_result_t rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "store get \"%s\" on %s: stat %s",
                                           key, fs->url, path);
    close(fd);
    return rc;
  }
  if (st.st_size < 0 || (uint64_t)st.st_size > COLLIE_STORE_MAX_VALUE) {
    close(fd);
    return collie__err(COLLIE_SYSTEM_ERROR, "store get \"%s\" on %s: %s holds %lld bytes (max %u)",
                       key, fs->url, path, (long long)st.st_size, (unsigned)COLLIE_STORE_MAX_VALUE);
  }
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n ? n : 1);
  if (!buf) {
    close(fd);
    return collie__err(COLLIE_SYSTEM_ERROR, "store get \"%s\" on %s: out of memory (%zu bytes)",
                       key, fs->url, n);
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      collie_result_t rc =
          r < 0 ? collie__err_errno(COLLIE_SYSTEM_ERROR, "store get \"%s\" on %s: read %s", key,
                                    fs->url, path)
                : collie__err(COLLIE_SYSTEM_ERROR, "store get \"%s\" on %s: %s shrank while read",
                              key, fs->url, path);
      free(buf);
      close(fd);
      return rc;
    }
    got += (size_t)r;
  }
  close(fd);
  *val = buf;
  *len = n;
  return COLLIE_SUCCESS;
}

/* Sleeps the current backoff step (never past the deadline) and grows it. */
static void
file_backoff(int64_t *backoff, int64_t deadline_ns)
{
  int64_t left = deadline_ns - collie__now_ns();
  collie__sleep_ns(*backoff < left ? *backoff : left);
  *backoff = *backoff * 2 > FILE_BACKOFF_MAX_NS ? FILE_BACKOFF_MAX_NS : *backoff * 2;
}

static collie_result_t
file_set(collie__store_t *s, const char *key, const void *val, size_t len, int64_t deadline_ns)
{
  struct file_store *fs = (struct file_store *)s;
  char what[PATH_MAX + 32], path[PATH_MAX];
  collie_result_t rc;
  snprintf(what, sizeof(what), "store set on %s", fs->url);
  if ((rc = collie__store_check_key(what, key)) != COLLIE_SUCCESS) return rc;
  if ((rc = collie__store_check_value(what, key, val, len)) != COLLIE_SUCCESS) return rc;
  (void)deadline_ns; /* a local write does not wait for anyone */
  file_key_path(fs, 'k', key, path);
  return file_write_atomic(fs, key, path, val, len);
}

static collie_result_t
file_get(collie__store_t *s, const char *key, void **val, size_t *len, int64_t deadline_ns)
{
  struct file_store *fs = (struct file_store *)s;
  char what[PATH_MAX + 32], path[PATH_MAX];
  collie_result_t rc;
  snprintf(what, sizeof(what), "store get on %s", fs->url);
  if ((rc = collie__store_check_key(what, key)) != COLLIE_SUCCESS) return rc;
  if (!val || !len)
    return collie__err(COLLIE_INVALID_ARGUMENT, "%s: key \"%s\": val or len is NULL", what, key);
  file_key_path(fs, 'k', key, path);
  int64_t start = collie__now_ns(), backoff = FILE_BACKOFF_MIN_NS;
  for (;;) {
    int missing;
    if ((rc = file_read(fs, key, path, val, len, &missing)) != COLLIE_SUCCESS) return rc;
    if (!missing) return COLLIE_SUCCESS;
    if (collie__now_ns() >= deadline_ns)
      return collie__err(COLLIE_TIMEOUT,
                         "store get \"%s\" on %s: the key was not set within %.3f s (deadline)",
                         key, fs->url, (double)(collie__now_ns() - start) / 1e9);
    file_backoff(&backoff, deadline_ns);
  }
}

static collie_result_t
file_add(collie__store_t *s, const char *key, int64_t delta, int64_t *out, int64_t deadline_ns)
{
  struct file_store *fs = (struct file_store *)s;
  char what[PATH_MAX + 32], path[PATH_MAX], lock[PATH_MAX];
  collie_result_t rc;
  snprintf(what, sizeof(what), "store add on %s", fs->url);
  if ((rc = collie__store_check_key(what, key)) != COLLIE_SUCCESS) return rc;
  file_key_path(fs, 'k', key, path);
  file_key_path(fs, 'l', key, lock);
  int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lfd < 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "store add \"%s\" on %s: cannot open %s", key,
                             fs->url, lock);
  /* Non-blocking attempts with backoff: a plain flock() could outwait the deadline. */
  int64_t start = collie__now_ns(), backoff = FILE_BACKOFF_MIN_NS;
  while (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "store add \"%s\" on %s: flock %s", key, fs->url,
                             lock);
      goto out_close;
    }
    if (collie__now_ns() >= deadline_ns) {
      rc = collie__err(COLLIE_TIMEOUT,
                       "store add \"%s\" on %s: lock %s held by another process for %.3f s", key,
                       fs->url, lock, (double)(collie__now_ns() - start) / 1e9);
      goto out_close;
    }
    file_backoff(&backoff, deadline_ns);
  }
  void *cur = NULL;
  size_t curlen = 0;
  int missing;
  int64_t v = 0;
  COLLIE_CHECK_GOTO(file_read(fs, key, path, &cur, &curlen, &missing), rc, out_unlock);
  if (!missing) {
    int bad = collie__store_parse_counter(cur, curlen, &v) != 0;
    free(cur);
    if (bad) {
      rc = collie__err(COLLIE_INVALID_ARGUMENT,
                       "store add \"%s\" on %s: the key holds a value that is not an integer", key,
                       fs->url);
      goto out_unlock;
    }
  }
  if (__builtin_add_overflow(v, delta, &v)) {
    rc = collie__err(COLLIE_INVALID_ARGUMENT, "store add \"%s\" on %s: %lld overflows the counter",
                     key, fs->url, (long long)delta);
    goto out_unlock;
  }
  char digits[32];
  int n = snprintf(digits, sizeof(digits), "%lld", (long long)v);
  COLLIE_CHECK_GOTO(file_write_atomic(fs, key, path, digits, (size_t)n), rc, out_unlock);
  if (out) *out = v;
out_unlock:
  flock(lfd, LOCK_UN);
out_close:
  close(lfd);
  return rc;
}

static void
file_close(collie__store_t *s)
{
  free(s);
}

/* Removes every value and lock file whose key starts with prefix: a name is
 * "<kind>_<encoded key>", or for long keys "<kind>#<16 hex>_<encoded key,
 * cut>", and the encoding keeps a prefix a prefix. */
static collie_result_t
file_del_prefix(collie__store_t *s, const char *prefix, int64_t deadline_ns)
{
  struct file_store *fs = (struct file_store *)s;
  (void)deadline_ns;
  char enc[FILE_NAME_MAX + 1];
  file_key_name('k', prefix, enc); /* "k_<encoded prefix>" (prefixes are short) */
  const char *ep = enc + 2;
  size_t el = strlen(ep);
  DIR *d = opendir(fs->dir);
  if (!d) return collie__err_errno(COLLIE_SYSTEM_ERROR, "store delete-prefix on %s", fs->url);
  struct dirent *de;
  char path[PATH_MAX];
  while ((de = readdir(d))) {
    const char *n = de->d_name, *k = NULL;
    if ((n[0] == 'k' || n[0] == 'l') && n[1] == '_')
      k = n + 2;
    else if ((n[0] == 'k' || n[0] == 'l') && n[1] == '#' && strlen(n) > 19 && n[18] == '_')
      k = n + 19;
    if (!k || strncmp(k, ep, el) != 0) continue;
    snprintf(path, sizeof(path), "%s/%s", fs->dir, n);
    unlink(path); /* gone already: fine */
  }
  closedir(d);
  return COLLIE_SUCCESS;
}

static const struct collie__store_ops file_ops = {.scheme = "file",
                                                  .set = file_set,
                                                  .get = file_get,
                                                  .add = file_add,
                                                  .close = file_close,
                                                  .del_prefix = file_del_prefix};

collie_result_t
collie__store_file_open(const char *url, const char *path, const char *token, collie__store_t **out)
{
  if (path[0] != '/' || path[1] == '\0')
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "store url \"%s\" is malformed: a file store needs an absolute directory, "
                       "as in file:///abs/dir",
                       url);
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  if (n + 1 + 16 + 1 + FILE_NAME_MAX + 64 >= PATH_MAX)
    return collie__err(COLLIE_INVALID_ARGUMENT, "store url \"%.64s...\": directory path too long",
                       url);
  struct file_store *fs = calloc(1, sizeof(*fs));
  if (!fs) return collie__err(COLLIE_SYSTEM_ERROR, "store %s: out of memory", url);
  collie__store_init(&fs->base, &file_ops);
  snprintf(fs->url, sizeof(fs->url), "%s", url);
  snprintf(fs->dir, sizeof(fs->dir), "%.*s/%016llx", (int)n, path,
           (unsigned long long)collie__hash64(token, strlen(token), 0));
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  fs->host_hash = collie__hash64(host, strlen(host), 0);
  collie_result_t rc = file_mkdirs(url, fs->dir);
  if (rc != COLLIE_SUCCESS) {
    free(fs);
    return rc;
  }
  *out = &fs->base;
  return COLLIE_SUCCESS;
}
