/*
 * shm_setup.c - setting up the shared-memory transport: which peers it can
 * link, and open(), which names, creates or attaches, and checks the
 * segment, then meets every local rank on it. Kept apart from the data path
 * (shm.c) because it runs once per communicator and may block, sleep and
 * use the store, which the data path never does.
 *
 * Segment. The local ranks of a communicator (this rank and the peers passed
 * to open()) share one POSIX shared-memory segment, laid out as shm_int.h
 * describes. The lowest comm rank among them (the leader) creates it with
 * mode 0600 under "/collie-<token hash>-<comm hash>-<leader>", initialises
 * it, stores a ready magic and publishes a per-creation nonce in the store;
 * the others wait for the nonce, map the segment and check it. A leader that
 * cannot create it (a full /dev/shm) publishes "!" and its error instead, so
 * the others fail at once with the cause rather than at the deadline. Every rank
 * then bumps the "attached" counter, and the one that completes it unlinks
 * the name: from then on the segment lives only as long as some rank maps
 * it, so a crash cannot leave a file behind. On any failure in open() the
 * name is unlinked too. When the group is the whole communicator, the
 * segment also carries the flat area of the shm-only algorithms (shm.h),
 * set up here with the rest so that those algorithms never rendezvous.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "transport/shm_int.h"
#include "transport/transport.h"
#include "util/error.h"
#include "util/util.h"

/* Poll interval while waiting for the leader's segment in open(). */
#define SHM_OPEN_POLL_NS (1 * 1000000LL)
/* Longest futex sleep while waiting for the others to attach. */
#define SHM_ATTACH_POLL_NS (10 * 1000000LL)
/* How often a setup wait looks whether the ranks it waits for still live;
 * a wait in the store less often: each slice of it that ends empty costs
 * a tcp store a new connection (comm.c's wait for peer records does the
 * same). */
#define SHM_LIVENESS_POLL_NS (50 * 1000000LL)
#define SHM_STORE_SLICE_NS (200 * 1000000LL)

/* The ops' can_connect: a peer on the same host (equal host identity),
 * never this rank itself. Pure. */
int
collie__shm_can_connect(const struct collie__net_cfg *cfg, int peer)
{
  if (!cfg || !cfg->peers || peer < 0 || peer >= cfg->size || peer == cfg->rank) return 0;
  if (cfg->rank < 0 || cfg->rank >= cfg->size) return 0;
  return strcmp(cfg->peers[cfg->rank].host, cfg->peers[peer].host) == 0;
}

/* ---- Layout ---- */

/* Places every part of a segment of n ranks with slots of slot bytes and
 * flat buffers of flat_buf bytes (0: no flat area). The flat area follows
 * the rings, page-aligned so that every buffer starts a page. */
static void
shm_layout_place(struct collie__shm_layout *l, size_t n, size_t slot, size_t flat_buf)
{
  l->slot_bytes = slot;
  l->payload_off = COLLIE_SHM_ALIGN_UP(sizeof(struct collie__shm_ring) +
                                           COLLIE_SHM_NCELLS * sizeof(struct collie__shm_chunk),
                                       COLLIE_SHM_LINE);
  l->ring_bytes = COLLIE_SHM_ALIGN_UP(l->payload_off + COLLIE_SHM_NSLOTS * slot, COLLIE_SHM_PAGE);
  l->ranks_off = sizeof(struct collie__shm_header);
  l->ctrl_off = l->ranks_off + COLLIE_SHM_ALIGN_UP(n * sizeof(int32_t), COLLIE_SHM_LINE);
  l->rings_off =
      COLLIE_SHM_ALIGN_UP(l->ctrl_off + n * sizeof(struct collie__shm_ctrl), COLLIE_SHM_PAGE);
  l->bytes = l->rings_off + n * (n - 1) * l->ring_bytes;
  l->flat_ctrl_off = l->flat_off = 0;
  l->flat_buf_bytes = flat_buf;
  if (flat_buf) {
    l->flat_ctrl_off = l->bytes;
    l->flat_off = COLLIE_SHM_ALIGN_UP(l->flat_ctrl_off + n * sizeof(struct collie__shm_flat_ctrl),
                                      COLLIE_SHM_PAGE);
    l->bytes = l->flat_off + n * 2 * flat_buf;
  }
}

/* One rank's share of the segment, rounded up: share <= budget exactly when
 * bytes <= n x budget, without the product's overflow. */
static size_t
shm_layout_share(const struct collie__shm_layout *l, size_t n)
{
  return l->bytes / n + (l->bytes % n != 0);
}

/* Far beyond any host (the segment of even the smallest layout would take
 * terabytes), and low enough that no size computation above overflows. */
#define SHM_LAYOUT_MAX_RANKS 65536

size_t
collie__shm_layout_min(int nlocal)
{
  struct collie__shm_layout l;
  size_t n = nlocal < 1 ? 1 : nlocal > SHM_LAYOUT_MAX_RANKS ? SHM_LAYOUT_MAX_RANKS : (size_t)nlocal;
  shm_layout_place(&l, n, COLLIE_SHM_SLOT_BYTES_MIN, 0);
  return shm_layout_share(&l, n);
}

/* Tries to fit the segment of n ranks into budget per rank, starting from
 * 64 KiB slots and flat buffers of flat_buf bytes (0: no flat area) and
 * halving the larger of a rank's two shares (its rings, its two flat
 * buffers) while neither is at its floor. Why the larger: the rings grow
 * with the peers and dominate on large hosts, where smaller slots cost
 * little (a ring step moves a p-th of the message anyway); the flat buffers
 * dominate on small hosts, where pieces of a few hundred KiB still amortise
 * a sync. Returns 1 with *l set when it fits. */
static int
shm_layout_fit(size_t n, size_t flat_buf, size_t budget, struct collie__shm_layout *l)
{
  size_t slot = COLLIE_SHM_SLOT_BYTES_DEFAULT;
  for (;;) {
    shm_layout_place(l, n, slot, flat_buf);
    if (shm_layout_share(l, n) <= budget) return 1;
    size_t rings = (n - 1) * l->ring_bytes, flats = 2 * flat_buf;
    int can_flat = flat_buf > COLLIE_SHM_FLAT_BUF_BYTES_MIN;
    int can_slot = slot > COLLIE_SHM_SLOT_BYTES_MIN;
    if (can_flat && (flats >= rings || !can_slot))
      flat_buf /= 2;
    else if (can_slot)
      slot /= 2;
    else
      return 0;
  }
}

/* The flat area goes last: the shm-only algorithms are the fastest there
 * are, but the message algorithms serve every call without them; and
 * without it the slots start again from 64 KiB, so they take back the room
 * the flat buffers leave. */
collie_result_t
collie__shm_layout(int nlocal, int flat, size_t budget, struct collie__shm_layout *out)
{
  if (nlocal < 1 || nlocal > SHM_LAYOUT_MAX_RANKS)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "shm: cannot lay out a segment for %d local ranks (1..%d)", nlocal,
                       SHM_LAYOUT_MAX_RANKS);
  if (budget == 0) budget = COLLIE_SHM_BYTES_DEFAULT;
  size_t n = (size_t)nlocal;
  struct collie__shm_layout l;
  if ((flat && shm_layout_fit(n, COLLIE_SHM_FLAT_BUF_BYTES_DEFAULT, budget, &l)) ||
      shm_layout_fit(n, 0, budget, &l)) {
    *out = l;
    return COLLIE_SUCCESS;
  }
  size_t min = collie__shm_layout_min(nlocal);
  return collie__err(COLLIE_INVALID_ARGUMENT,
                     "COLLIE_SHM_BYTES=%zu is too small for the shared-memory segment of %d local "
                     "ranks: the smallest one (%u-byte slots, no flat area) takes %zu bytes per "
                     "local rank; set COLLIE_SHM_BYTES >= %zu",
                     budget, nlocal, COLLIE_SHM_SLOT_BYTES_MIN, min, min);
}

/* The ring carrying i -> j (local indices, i != j). */
static struct collie__shm_ring *
shm_ring(const struct collie__shm_xport *x, int i, int j)
{
  size_t k = (size_t)i * (size_t)(x->nlocal - 1) + (size_t)(j < i ? j : j - 1);
  return (struct collie__shm_ring *)((char *)x->base + x->layout.rings_off +
                                     k * x->layout.ring_bytes);
}

/* Points this rank's view of the flat area into the mapped segment. Phase
 * words start at 0 (the segment was zero-filled), as does our count. */
static void
shm_flat_init(struct collie__shm_xport *x)
{
  struct collie__shm_flat *f = &x->flat;
  if (!x->layout.flat_off) return;
  f->x = x;
  f->ctrl = (struct collie__shm_flat_ctrl *)((char *)x->base + x->layout.flat_ctrl_off);
  f->regions = (char *)x->base + x->layout.flat_off;
  f->buf_bytes = x->layout.flat_buf_bytes;
}

/* ---- open ---- */

static int
shm_pidfd_open(int pid)
{
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0); /* close-on-exec by default */
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

/* Whether comm rank r's process has exited (a zombie counts), by the pid of
 * its peer record. Every rank of a shm group shares this host, but its pid
 * is ours to check only in our pid namespace: not when our own record does
 * not carry our pid (then the records' pids mean nothing here), nor when
 * `foreign` says the group spans pid namespaces. A pid of 0 is unknown. */
static int
shm_rank_dead(const struct collie__net_cfg *cfg, int r, int foreign)
{
  int pid = cfg->peers[r].pid;
  if (foreign || pid <= 0 || cfg->peers[cfg->rank].pid != (int32_t)getpid()) return 0;
  return collie__proc_dead(pid);
}

/* Whether some attached rank is not the process its record names, or is
 * invisible here while its state says it is alive: the group spans pid
 * namespaces (processes sharing /dev/shm across containers), and the pids
 * of the ranks not attached yet may not be ours to check either. */
static int
shm_group_foreign(const struct collie__shm_xport *x, const struct collie__net_cfg *cfg,
                  const int *group)
{
  for (int i = 0; i < x->nlocal; i++) {
    if (i == x->me ||
        atomic_load_explicit(&x->ctrl[i].state, memory_order_acquire) != COLLIE_SHM_ALIVE)
      continue;
    int pid = x->ctrl[i].pid;
    if (pid != cfg->peers[group[i]].pid || (kill(pid, 0) != 0 && errno == ESRCH)) return 1;
  }
  return 0;
}

/* "rank 3 (world rank 5)" for each local index whose state is still 0. */
static void
shm_list_unattached(const struct collie__shm_xport *x, const struct collie__net_cfg *cfg,
                    const int *group, char *buf, size_t len)
{
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < x->nlocal && o + 1 < len; i++) {
    if (atomic_load_explicit(&x->ctrl[i].state, memory_order_acquire) != COLLIE_SHM_UNATTACHED)
      continue;
    int n = snprintf(buf + o, len - o, "%srank %d (world rank %d)", o ? ", " : "", group[i],
                     cfg->peers[group[i]].world_rank);
    if (n < 0) break;
    o += (size_t)n;
  }
}

/* Leader: creates, sizes, maps and initialises the segment, then publishes
 * its nonce under "shm/seg/<leader>". On failure nothing is left behind. */
static collie_result_t
shm_create(struct collie__shm_xport *x, const struct collie__net_cfg *cfg, const int *group)
{
  int fd = shm_open(x->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    /* Left by a crashed job with the same token and communicator. */
    COLLIE_INFO("SHM", "removing stale segment %s", x->name);
    shm_unlink(x->name);
    fd = shm_open(x->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot create segment /dev/shm%s", x->name);
  collie_result_t rc;
  if (ftruncate(fd, (off_t)x->bytes) != 0) {
    rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot size segment /dev/shm%s to %zu bytes",
                           x->name, x->bytes);
    goto out_close;
  }
  /* Reserve the pages now: a tmpfs that is too small (a container's 64 MiB
   * /dev/shm) then fails here with a message instead of SIGBUS mid-run. */
  int err;
  do {
    err = posix_fallocate(fd, 0, (off_t)x->bytes);
  } while (err == EINTR);
  if (err != 0 && err != EOPNOTSUPP && err != ENOSYS) {
    errno = err;
    rc = collie__err_errno(COLLIE_SYSTEM_ERROR,
                           "shm: cannot reserve %zu bytes for segment /dev/shm%s "
                           "(%d local ranks; is /dev/shm too small?)",
                           x->bytes, x->name, x->nlocal);
    goto out_close;
  }
  void *base = mmap(NULL, x->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot map segment /dev/shm%s (%zu bytes)",
                           x->name, x->bytes);
    goto out_close;
  }
  close(fd);
  x->base = base;
  x->hdr = base;
  struct collie__shm_layout l = x->layout;
  x->ctrl = (struct collie__shm_ctrl *)((char *)base + l.ctrl_off);
  /* ftruncate zero-filled everything: counters, states, doorbells are 0. */
  struct collie__shm_header *h = x->hdr;
  uint64_t seed = (uint64_t)getpid() ^ (uint64_t)collie__now_ns();
  h->nonce = collie__hash64(&seed, sizeof(seed), collie__hash64(x->name, strlen(x->name), 0));
  if (h->nonce == 0) h->nonce = 1;
  h->comm_hash = cfg->comm_hash;
  h->seg_bytes = x->bytes;
  h->version = COLLIE_SHM_VERSION;
  h->nlocal = (uint32_t)x->nlocal;
  h->nslots = COLLIE_SHM_NSLOTS;
  h->slot_bytes = (uint32_t)l.slot_bytes;
  h->flat_buf_bytes = (uint32_t)l.flat_buf_bytes;
  h->shm_bytes = x->shm_bytes;
  h->ncpus = (uint32_t)collie__ncpus();
  h->leader_pid = (int32_t)getpid();
  int32_t *ranks = (int32_t *)((char *)base + l.ranks_off);
  for (int i = 0; i < x->nlocal; i++) ranks[i] = group[i];
  atomic_store_explicit(&h->magic, COLLIE_SHM_MAGIC, memory_order_release);

  char key[64], val[32];
  collie__fmt(key, sizeof(key), "shm/seg/%d", cfg->rank);
  collie__fmt(val, sizeof(val), "%016" PRIx64, h->nonce);
  rc = collie__store_set(cfg->store, key, val, strlen(val), cfg->deadline_ns);
  if (rc != COLLIE_SUCCESS) {
    collie__err_prefix("shm: publishing segment %s", x->name);
    shm_unlink(x->name);
    return rc;
  }
  return COLLIE_SUCCESS;

out_close:
  close(fd);
  shm_unlink(x->name);
  return rc;
}

/* INVALID_USAGE: the leader's segment h (ours by its nonce) has another
 * geometry than this rank's layout, most likely because the ranks of this
 * host run with different COLLIE_SHM_BYTES (or different library builds). */
static collie_result_t
shm_layout_mismatch(const struct collie__shm_xport *x, const int *group,
                    const struct collie__shm_header *h)
{
  return collie__err(COLLIE_INVALID_USAGE,
                     "shm: segment /dev/shm%s of rank %d does not match this rank's layout: it has "
                     "layout version %u, %u local ranks, %u-byte slots, flat buffers of %u bytes, "
                     "%" PRIu64 " bytes (COLLIE_SHM_BYTES=%" PRIu64
                     " there); this rank expects version %u, %d local ranks, %zu-byte slots, "
                     "flat buffers of %zu bytes (0: no flat area), %zu bytes (COLLIE_SHM_BYTES=%zu "
                     "here): every rank of "
                     "a host must run the same library with the same COLLIE_SHM_BYTES",
                     x->name, group[0], h->version, h->nlocal, h->slot_bytes, h->flat_buf_bytes,
                     h->seg_bytes, h->shm_bytes, COLLIE_SHM_VERSION, x->nlocal,
                     x->layout.slot_bytes, x->layout.flat_buf_bytes, x->bytes, x->shm_bytes);
}

/* Tells the ranks waiting in shm_join on the leader's segment (header h,
 * size bytes, open as fd) that this rank will never attach, and why (in
 * short: the reason must fit its slot): they fail at once instead of at the
 * setup deadline. Only when the control entries sit where this rank's layout puts
 * them (same version and rank count: they do not depend on the slots); else
 * the others wait for their deadline, which names this rank. */
static void
shm_refuse(const struct collie__shm_xport *x, const struct collie__shm_header *h, size_t bytes,
           int fd)
{
  char why[COLLIE_SHM_REASON_LEN];
  if (h->version != COLLIE_SHM_VERSION || h->nlocal != (uint32_t)x->nlocal ||
      h->seg_bytes != bytes || bytes < x->layout.rings_off)
    return;
  void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return;
  struct collie__shm_header *hdr = base;
  struct collie__shm_ctrl *mine = (struct collie__shm_ctrl *)((char *)base + x->layout.ctrl_off);
  mine += x->me;
  collie__fmt(why, sizeof(why),
              "its COLLIE_SHM_BYTES=%zu lays out %zu-byte slots and flat buffers of %zu bytes (0: "
              "none), the segment has %u and %u (COLLIE_SHM_BYTES=%" PRIu64
              "): every rank of a host needs the same value",
              x->shm_bytes, x->layout.slot_bytes, x->layout.flat_buf_bytes, h->slot_bytes,
              h->flat_buf_bytes, h->shm_bytes);
  memcpy(mine->reason, why, sizeof(why));
  atomic_store_explicit(&mine->state, COLLIE_SHM_REFUSED, memory_order_release);
  atomic_fetch_add_explicit(&hdr->events, 1, memory_order_seq_cst);
  collie__futex_wake_all(collie__shm_futex_word(&hdr->attached));
  munmap(base, bytes);
}

/* Maps the segment if it is the leader's current one. Returns 1 when mapped
 * and checked, 0 to retry later (not there yet, stale, still being built),
 * or -1 with the error set. The header is read first, on its own: the
 * segment's size only tells whether it has the shape this rank expects, and
 * a leader whose layout differs must be named, not waited for. */
static int
shm_try_map(struct collie__shm_xport *x, const struct collie__net_cfg *cfg, const int *group,
            uint64_t nonce, collie_result_t *rc)
{
  int fd = shm_open(x->name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    *rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot open segment /dev/shm%s", x->name);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot stat segment /dev/shm%s", x->name);
    close(fd);
    return -1;
  }
  size_t hbytes = sizeof(struct collie__shm_header);
  if ((size_t)st.st_size < hbytes) {
    close(fd); /* not sized yet, or a stale segment of another shape */
    return 0;
  }
  struct collie__shm_header *h = mmap(NULL, hbytes, PROT_READ, MAP_SHARED, fd, 0);
  if (h == MAP_FAILED) {
    *rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot map segment /dev/shm%s", x->name);
    close(fd);
    return -1;
  }
  if (atomic_load_explicit(&h->magic, memory_order_acquire) != COLLIE_SHM_MAGIC ||
      h->nonce != nonce) {
    munmap(h, hbytes); /* a stale segment, or ours still being built */
    close(fd);
    return 0;
  }
  struct collie__shm_layout l = x->layout;
  int same = h->version == COLLIE_SHM_VERSION && h->nlocal == (uint32_t)x->nlocal &&
             h->comm_hash == cfg->comm_hash && h->seg_bytes == x->bytes &&
             (size_t)st.st_size == x->bytes && h->nslots == COLLIE_SHM_NSLOTS &&
             h->slot_bytes == l.slot_bytes && h->flat_buf_bytes == l.flat_buf_bytes;
  if (!same) {
    *rc = shm_layout_mismatch(x, group, h);
    shm_refuse(x, h, (size_t)st.st_size, fd);
    munmap(h, hbytes);
    close(fd);
    return -1;
  }
  munmap(h, hbytes);
  void *base = mmap(NULL, x->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    *rc = collie__err_errno(COLLIE_SYSTEM_ERROR, "shm: cannot map segment /dev/shm%s (%zu bytes)",
                            x->name, x->bytes);
    return -1;
  }
  h = base;
  const int32_t *ranks = (const int32_t *)((char *)base + l.ranks_off);
  same = h->nonce == nonce;
  for (int i = 0; same && i < x->nlocal; i++) same = ranks[i] == group[i];
  if (!same) {
    *rc = collie__err(COLLIE_INTERNAL_ERROR,
                      "shm: segment /dev/shm%s of rank %d lists another set of local ranks than "
                      "this rank's view",
                      x->name, group[0]);
    munmap(base, x->bytes);
    return -1;
  }
  x->base = base;
  x->hdr = h;
  x->ctrl = (struct collie__shm_ctrl *)((char *)base + l.ctrl_off);
  return 1;
}

/* The leader could not make the segment (rc, with its message): says so
 * under the key its peers wait on, best effort (the store may be what failed). */
static void
shm_tell_failed(const struct collie__net_cfg *cfg, collie_result_t rc)
{
  char key[64], val[COLLIE_ERRMSG_LEN + 2], saved[COLLIE_ERRMSG_LEN];
  snprintf(saved, sizeof(saved), "%s", collie__err_msg());
  collie__fmt(key, sizeof(key), "shm/seg/%d", cfg->rank);
  int n = snprintf(val, sizeof(val), "!%s", saved);
  size_t len = n < 0 ? 1 : (size_t)n < sizeof(val) ? (size_t)n : sizeof(val) - 1;
  /* A short deadline of its own: the failure must not wait on a dead store. */
  int64_t soon = collie__now_ns() + 1000000000LL;
  (void)collie__store_set(cfg->store, key, val, len,
                          soon < cfg->deadline_ns ? soon : cfg->deadline_ns);
  collie__err(rc, "%s", saved);
}

/* The error of a setup another rank gave up on (setup_fail.c). */
static collie_result_t
shm_gave_up(const struct collie__net_cfg *cfg, int who, const char *why)
{
  if (who < 0 || who >= cfg->size)
    return collie__err(COLLIE_REMOTE_ERROR, "shm: a rank gave up on this communicator's setup: %s",
                       why);
  return collie__err(COLLIE_REMOTE_ERROR,
                     "shm: rank %d (world rank %d) gave up on this communicator's setup: %s", who,
                     cfg->peers[who].world_rank, why);
}

/* Non-leader: waits for the leader's nonce in the store, then maps the
 * segment carrying it, retrying until the setup deadline. */
static collie_result_t
shm_attach(struct collie__shm_xport *x, const struct collie__net_cfg *cfg, const int *group)
{
  char key[64];
  collie__fmt(key, sizeof(key), "shm/seg/%d", group[0]);
  for (;;) {
    void *val = NULL;
    size_t len = 0;
    /* In slices, looking between them whether the leader still lives. */
    int64_t slice = collie__now_ns() + SHM_STORE_SLICE_NS;
    if (slice > cfg->deadline_ns) slice = cfg->deadline_ns;
    collie_result_t rc = collie__store_get(cfg->store, key, &val, &len, slice);
    if (rc == COLLIE_TIMEOUT && slice < cfg->deadline_ns) {
      char why[COLLIE_ERRMSG_LEN];
      if (shm_rank_dead(cfg, group[0], 0))
        return collie__err(COLLIE_REMOTE_ERROR,
                           "shm: rank %d (world rank %d, pid %d) died before it created the "
                           "shared-memory segment",
                           group[0], cfg->peers[group[0]].world_rank, cfg->peers[group[0]].pid);
      int who = -1;
      if (collie__setup_gave_up(cfg->store, &who, why, sizeof(why)))
        return shm_gave_up(cfg, who, why);
      continue;
    }
    if (rc == COLLIE_TIMEOUT)
      return collie__err(COLLIE_TIMEOUT,
                         "shm: rank %d (world rank %d, pid %d) never created the shared-memory "
                         "segment before the setup deadline (store key %s not set)",
                         group[0], cfg->peers[group[0]].world_rank, cfg->peers[group[0]].pid, key);
    if (rc != COLLIE_SUCCESS) {
      collie__err_prefix("shm: waiting for the segment of rank %d", group[0]);
      return rc;
    }
    if (len > 0 && ((const char *)val)[0] == '!') {
      rc = collie__err(COLLIE_REMOTE_ERROR,
                       "shm: rank %d (world rank %d, pid %d) could not create the "
                       "shared-memory segment: %.*s",
                       group[0], cfg->peers[group[0]].world_rank, cfg->peers[group[0]].pid,
                       (int)(len - 1), (const char *)val + 1);
      free(val);
      return rc;
    }
    char text[32];
    size_t n = len < sizeof(text) - 1 ? len : sizeof(text) - 1;
    memcpy(text, val, n);
    text[n] = '\0';
    free(val);
    uint64_t nonce = strtoull(text, NULL, 16);
    int got = shm_try_map(x, cfg, group, nonce, &rc);
    if (got < 0) return rc;
    if (got > 0) return COLLIE_SUCCESS;
    if (shm_rank_dead(cfg, group[0], 0))
      return collie__err(COLLIE_REMOTE_ERROR,
                         "shm: rank %d (world rank %d, pid %d) died before its shared-memory "
                         "segment /dev/shm%s could be mapped",
                         group[0], cfg->peers[group[0]].world_rank, cfg->peers[group[0]].pid,
                         x->name);
    if (collie__now_ns() >= cfg->deadline_ns)
      return collie__err(COLLIE_TIMEOUT,
                         "shm: the segment /dev/shm%s announced by rank %d (world rank %d) did not "
                         "appear before the setup deadline",
                         x->name, group[0], cfg->peers[group[0]].world_rank);
    collie__sleep_ns(SHM_OPEN_POLL_NS);
  }
}

const uint64_t collie__shm_cma_probe = 0x636d612d70726f62ull; /* "cma-prob" */

/* Whether this process can read the peer's memory with process_vm_readv:
 * reads the probe value at the address the peer published. Fails (and the
 * channel keeps copying through slots) under a ptrace policy that forbids
 * it, across users, in another pid namespace, or without the syscall. */
static int
shm_cma_works(const struct collie__shm_chan *ch, uint64_t addr)
{
  uint64_t got = 0;
  struct iovec local = {.iov_base = &got, .iov_len = sizeof(got)};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof(got)};
  if (!ch->pid_check || !addr) return 0;
  ssize_t n = process_vm_readv(ch->pid, &local, 1, &remote, 1, 0);
  return n == (ssize_t)sizeof(got) && got == collie__shm_cma_probe;
}

/* Marks this rank attached; the rank that completes the group unlinks the
 * name. Then waits until every local rank has attached. */
static collie_result_t
shm_join(struct collie__shm_xport *x, const struct collie__net_cfg *cfg, const int *group)
{
  struct collie__shm_ctrl *mine = &x->ctrl[x->me];
  mine->pid = (int32_t)getpid();
  mine->cma_addr = (uint64_t)(uintptr_t)&collie__shm_cma_probe;
  mine->membarrier = (uint32_t)collie__membarrier_register();
  x->my_cpu = sched_getcpu();
  atomic_store_explicit(&mine->cpu, x->my_cpu, memory_order_relaxed);
  atomic_store_explicit(&mine->state, COLLIE_SHM_ALIVE, memory_order_release);
  uint32_t n = atomic_fetch_add_explicit(&x->hdr->attached, 1, memory_order_acq_rel) + 1;
  if (n == (uint32_t)x->nlocal) {
    shm_unlink(x->name);
    collie__futex_wake_all(collie__shm_futex_word(&x->hdr->attached));
  }
  int64_t next_look = collie__now_ns() + SHM_LIVENESS_POLL_NS;
  for (;;) {
    n = atomic_load_explicit(&x->hdr->attached, memory_order_acquire);
    if (n >= (uint32_t)x->nlocal) return COLLIE_SUCCESS;
    /* A rank that attached and gave up (its own deadline came first) means
     * the group cannot complete: fail now, naming those still missing. */
    int quit = -1;
    for (int i = 0; i < x->nlocal && quit < 0; i++) {
      uint32_t st = atomic_load_explicit(&x->ctrl[i].state, memory_order_acquire);
      if (st == COLLIE_SHM_REFUSED) {
        /* Written before the state, which we read with acquire. */
        const char *r = x->ctrl[i].reason;
        return collie__err(COLLIE_INVALID_USAGE,
                           "shm: rank %d (world rank %d) refused the shared-memory segment: %.*s",
                           group[i], cfg->peers[group[i]].world_rank,
                           (int)strnlen(r, COLLIE_SHM_REASON_LEN - 1), r);
      }
      if (st == COLLIE_SHM_ABORTED || st == COLLIE_SHM_CLOSED) quit = i;
    }
    int64_t now = collie__now_ns();
    /* A rank of this host that died before it attached never will: name
     * it now rather than at the deadline (also when another rank gave up
     * first, most likely because it found the same death). */
    if (quit >= 0 || now >= next_look) {
      next_look = now + SHM_LIVENESS_POLL_NS;
      int foreign = shm_group_foreign(x, cfg, group);
      for (int i = 0; i < x->nlocal && !foreign; i++) {
        if (atomic_load_explicit(&x->ctrl[i].state, memory_order_acquire) !=
                COLLIE_SHM_UNATTACHED ||
            !shm_rank_dead(cfg, group[i], foreign))
          continue;
        /* It may have attached and exited since (a rank that closes at
         * once): only a rank still unattached is missing. */
        if (atomic_load_explicit(&x->ctrl[i].state, memory_order_acquire) != COLLIE_SHM_UNATTACHED)
          continue;
        return collie__err(COLLIE_REMOTE_ERROR,
                           "shm: rank %d (world rank %d, pid %d) died before it attached to the "
                           "shared-memory segment (%u of %d local ranks did)",
                           group[i], cfg->peers[group[i]].world_rank, cfg->peers[group[i]].pid, n,
                           x->nlocal);
      }
      char why[COLLIE_ERRMSG_LEN];
      int who = -1;
      if (collie__setup_gave_up(cfg->store, &who, why, sizeof(why)))
        return shm_gave_up(cfg, who, why);
    }
    if (quit >= 0 || now >= cfg->deadline_ns) {
      char who[512], why[128] = "";
      shm_list_unattached(x, cfg, group, who, sizeof(who));
      if (!who[0]) continue; /* the last one attached just now */
      if (quit >= 0)
        collie__fmt(why, sizeof(why), "; rank %d (world rank %d) gave up waiting", group[quit],
                    cfg->peers[group[quit]].world_rank);
      return collie__err(COLLIE_TIMEOUT,
                         "shm: %s never attached to the shared-memory segment before the setup "
                         "deadline (%u of %d local ranks did%s)",
                         who, n, x->nlocal, why);
    }
    int64_t until = now + SHM_ATTACH_POLL_NS;
    if (until > cfg->deadline_ns) until = cfg->deadline_ns;
    collie__futex_wait(collie__shm_futex_word(&x->hdr->attached), n, until);
  }
}

/* The ops' open (see transport.h for the contract): validates the peer
 * list, then the leader creates the segment and the others attach; blocks
 * until every local rank attached or cfg->deadline_ns. With no peers it
 * returns a transport that owns no segment. On failure nothing is left
 * behind (the name is unlinked, peers see this rank ABORTED). */
collie_result_t
collie__shm_open(const struct collie__net_cfg *cfg, const int *peers, int npeers,
                 struct collie__xport **out)
{
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "shm: open: out is NULL");
  *out = NULL;
  if (!cfg || !cfg->peers || cfg->size <= 0 || cfg->rank < 0 || cfg->rank >= cfg->size)
    return collie__err(COLLIE_INVALID_ARGUMENT, "shm: open: bad configuration (rank %d of %d)",
                       cfg ? cfg->rank : -1, cfg ? cfg->size : -1);
  if (npeers < 0 || npeers >= cfg->size || (npeers > 0 && !peers))
    return collie__err(COLLIE_INVALID_ARGUMENT, "shm: open: bad peer list (%d peers of %d ranks)",
                       npeers, cfg->size);
  if (npeers > 0 && (!cfg->store || !cfg->token))
    return collie__err(COLLIE_INVALID_ARGUMENT, "shm: open: no store or job token to meet peers");
  for (int i = 0; i < npeers; i++) {
    if (peers[i] < 0 || peers[i] >= cfg->size || (i > 0 && peers[i] <= peers[i - 1]))
      return collie__err(
          COLLIE_INVALID_ARGUMENT,
          "shm: open: peer list must hold ascending comm ranks in [0, %d): entry %d is %d",
          cfg->size, i, peers[i]);
    if (peers[i] == cfg->rank)
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "shm: open: peer list entry %d is this rank (%d) itself", i, cfg->rank);
    if (!collie__shm_can_connect(cfg, peers[i]))
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "shm: open: rank %d (world rank %d, host %s) does not share memory with "
                         "this rank (host %s)",
                         peers[i], cfg->peers[peers[i]].world_rank, cfg->peers[peers[i]].host,
                         cfg->peers[cfg->rank].host);
  }

  collie_result_t rc = COLLIE_SUCCESS;
  struct collie__shm_xport *x = calloc(1, sizeof(*x));
  int *group = calloc((size_t)npeers + 1, sizeof(int));
  if (!x || !group) goto out_nomem;
  x->wake_fd = -1;
  x->rank = cfg->rank;
  x->comm_size = cfg->size;
  x->spin = cfg->spin > 0 ? cfg->spin : 0;
  x->nlocal = npeers + 1;
  x->nchans = npeers;
  x->chan_of_rank = malloc((size_t)cfg->size * sizeof(int));
  x->chans = calloc((size_t)npeers + 1, sizeof(struct collie__shm_chan));
  if (!x->chan_of_rank || !x->chans) goto out_nomem;
  for (int i = 0; i < cfg->size; i++) x->chan_of_rank[i] = -1;
  /* The group: this rank merged into the ascending peer list. */
  int k = 0, placed = 0;
  for (int j = 0; j < npeers; j++) {
    if (!placed && cfg->rank < peers[j]) {
      x->me = k;
      group[k++] = cfg->rank;
      placed = 1;
    }
    group[k++] = peers[j];
  }
  if (!placed) {
    x->me = k;
    group[k++] = cfg->rank;
  }
  for (int i = 0; i < x->nchans; i++) x->chans[i].pidfd = -1;
  if (npeers == 0) {
    *out = (struct collie__xport *)(void *)x;
    free(group);
    return COLLIE_SUCCESS;
  }

  /* The flat area only where the shm-only algorithms can run: every rank
   * of the communicator is in this group. Every local rank computes the
   * same layout from the same inputs; the leader records it in the header
   * and the others check it there. */
  x->shm_bytes = cfg->shm_bytes ? cfg->shm_bytes : COLLIE_SHM_BYTES_DEFAULT;
  rc = collie__shm_layout(x->nlocal, x->nlocal == cfg->size, x->shm_bytes, &x->layout);
  if (rc != COLLIE_SUCCESS) goto out_free;
  x->bytes = x->layout.bytes;
  collie__fmt(x->name, sizeof(x->name), "/collie-%016llx-%016llx-%d",
              (unsigned long long)collie__hash64(cfg->token, strlen(cfg->token), 0),
              (unsigned long long)cfg->comm_hash, group[0]);
  int leader = group[0] == cfg->rank;
  if (leader) {
    if ((rc = shm_create(x, cfg, group)) != COLLIE_SUCCESS) shm_tell_failed(cfg, rc);
  } else if ((rc = shm_attach(x, cfg, group)) != COLLIE_SUCCESS)
    /* The leader may have made the segment and died before we attached:
     * nobody else would remove the (predictable) name, and this init fails
     * everywhere now anyway. ENOENT when there is none: fine. */
    shm_unlink(x->name);
  if (rc != COLLIE_SUCCESS) goto out_free;
  rc = shm_join(x, cfg, group);
  if (rc != COLLIE_SUCCESS) goto out_leave;

  for (int i = 0, c = 0; i < x->nlocal; i++) {
    if (i == x->me) continue;
    struct collie__shm_chan *ch = &x->chans[c];
    ch->rank = group[i];
    ch->world_rank = cfg->peers[group[i]].world_rank;
    ch->local = i;
    ch->pid = x->ctrl[i].pid;
    ch->out = shm_ring(x, x->me, i);
    ch->in = shm_ring(x, i, x->me);
    ch->pid_check = 1;
    ch->pidfd = shm_pidfd_open(ch->pid);
    if (ch->pidfd < 0 && errno == ESRCH &&
        atomic_load_explicit(&x->ctrl[i].state, memory_order_acquire) == COLLIE_SHM_ALIVE) {
      /* Attached and alive, yet no such pid here: another pid namespace
       * sharing /dev/shm. Rely on its state word alone. */
      ch->pid_check = 0;
    }
    /* This rank reads what the peer sends: say whether it can read the
     * peer's memory directly (the peer's sends check before using it). */
    if (cfg->cma_min > 0 && shm_cma_works(ch, x->ctrl[i].cma_addr))
      atomic_store_explicit(&ch->in->cma_ok, 1, memory_order_release);
    x->chan_of_rank[group[i]] = c++;
  }
  x->cma_min = cfg->cma_min;
  x->sink = cfg->sink;
  x->cores = x->hdr->ncpus > 0 ? (int)x->hdr->ncpus : 1;
  /* Oversubscribed ranks sleep often, and a sleeper's membarrier would
   * interrupt a peer's core each time: they keep their fences. */
  x->fence_free = x->nlocal <= x->cores;
  for (int i = 0; i < x->nlocal; i++) x->fence_free &= x->ctrl[i].membarrier == 1;
  x->events_seen = atomic_load_explicit(&x->hdr->events, memory_order_acquire);
  shm_flat_init(x);
  collie__shm_wake_open(x);
  COLLIE_INFO("SHM",
              "segment %s: %d local ranks (this is index %d), %zu bytes (COLLIE_SHM_BYTES=%zu per "
              "local rank), %u x %zu-byte slots per ring, flat area of 2 x %zu KiB per rank, "
              "publishes %s",
              x->name, x->nlocal, x->me, x->bytes, x->shm_bytes, COLLIE_SHM_NSLOTS,
              x->layout.slot_bytes, x->layout.flat_buf_bytes / 1024,
              x->fence_free ? "fence-free (membarrier)" : "fenced");
  free(group);
  *out = (struct collie__xport *)(void *)x;
  return COLLIE_SUCCESS;

out_leave:
  /* Peers that attached late must not wait on us: mark ourselves gone. */
  collie__shm_leave(x, COLLIE_SHM_ABORTED, collie__err_msg());
  shm_unlink(x->name); /* ENOENT when it is gone already: fine */
  goto out_free;
out_nomem:
  rc = collie__err(COLLIE_SYSTEM_ERROR, "shm: open: out of memory for %d peers", npeers);
out_free:
  free(group);
  if (x) {
    x->nchans = 0; /* no pidfds opened yet */
    collie__shm_free(x);
  }
  return rc;
}
