/*
 * shm_flat.c - the shm-only family: allreduce, reduce_scatter, allgather,
 * alltoall and barrier for communicators whose ranks all share one host. Instead of passing
 * messages through the rings, every rank reads the others' data straight out
 * of the communicator's shared segment (the "flat area" of transport/shm.h:
 * per rank two buffers of 1 MiB, or smaller when COLLIE_SHM_BYTES bounds the
 * segment tightly, and one phase word, set up at open with the rest of the
 * segment). A "sync" is one flag round: a rank publishes its next
 * phase and waits until every rank has published it, spinning as long as the
 * transport spins (but at most ~20 us: a sync still open after that means a
 * peer is off its core) and then sleeping on its futex doorbell, which
 * publishers ring only when it sleeps; bounded by the call's deadline (TIMEOUT naming
 * who never came); a rank that died, left or aborted fails it within the
 * transport's liveness interval, and a rank that runs another call fails it
 * at once (the first sync of a call compares every rank's descriptor; a
 * queued message of a non-flat collective of this call gives the ring or
 * tree away).
 *
 * allreduce, S bytes, p ranks, cut into pieces (1 MiB oversubscribed, 512 KiB
 * otherwise; at most a flat buffer). Per piece:
 *   1. every rank copies its piece of sendbuf into its own buffer (split:
 *      all but its own block, see 2b); sync;
 *   2a. small S (replicated; see flat_shape): every rank reduces the whole
 *       piece itself, reading every rank's buffer in rank order 0..p-1, so all
 *       ranks compute bit-identical results. One sync per piece;
 *   2b. otherwise (split): the piece is cut into p blocks on 64-byte lines;
 *       rank r reduces block r into its own buffer (its own data first, then
 *       the others' in rank order: one fixed order per element, so every rank
 *       and every run gets the same bits), the first step straight from its
 *       sendbuf (collie__reduce_into: no copy of its own block in), and
 *       finishes AVG on it; sync; every rank copies each block from its
 *       owner's buffer into recvbuf.
 * Buffers alternate between pieces (shm.h says why that needs no sync beyond
 * the ones above): a rank may copy in piece g+1 while a slower one still
 * reads piece g, which absorbs some skew between ranks. Every rank copies
 * (p-1)/p S in and S out and reduces (p-1)/p S, where the ring copies
 * 4 (p-1)/p S (into and out of a slot, twice) and takes 2(p-1) steps
 * instead of 2. (Copying its own block in too, as it once did, cost a
 * 64 MiB allreduce at 2 ranks ~11 %.)
 *
 * reduce_scatter, count c per rank (sendbuf holds p blocks of c), cut into
 * pieces of k elements per block (k p elements fill a piece): rank r copies
 * the k-element slices of blocks q != r into its buffer; sync; rank r reduces
 * slice r from its own sendbuf (nothing to copy in place), then from every
 * other buffer in rank order, into recvbuf. One sync per piece.
 *
 * barrier: one sync.
 *
 * Costs under the model (alpha per step, beta per byte through a ring slot,
 * gamma per byte reduced), n pieces, with the two constants fitted on the
 * reference machine: a sync costs a' = FLAT_SYNC ceil(log2 p) alpha, a plain
 * copy costs b' = FLAT_COPY beta per byte:
 *   allreduce, replicated  a' + 2 S b' + (p-1) S gamma
 *   allreduce, split       2n a' + 2 S b' + (p-1)/p S gamma
 *   reduce_scatter         n a' + S b' + (p-1)/p S gamma
 *   barrier                a'
 *
 * Measured on the reference machine (2 cores shared with other jobs; best
 * of many interleaved rounds, float32 sum), ring time / shm_flat time, with
 * shm_flat's own time in brackets:
 *   allreduce       8 B             64 KiB          1 MiB            16 MiB
 *     2 ranks       2.4x (0.5 us)   1.0x (11 us)    1.14x (183 us)   1.38x (3.0 ms)
 *     4 ranks       5.5x (20 us)    2.4x (52 us)    1.33x (482 us)   1.42x (9.5 ms)
 *     8 ranks       4.0x (57 us)    2.8x (133 us)   1.54x (1.1 ms)   1.60x (21 ms)
 *   reduce_scatter
 *     2 ranks       1.3x (0.5 us)   1.3x (6.3 us)   1.95x (94 us)    2.2x (1.7 ms)
 *     4 ranks       2.2x (20 us)    1.8x (35 us)    1.8x (245 us)    2.0x (5.2 ms)
 *   barrier against dissemination: 1.8x at 2 ranks (0.3 us), 1.8x at 4
 *   (19 us), 1.3x at 8 (62 us).
 * Everywhere measured, the model with the constants above picks shm_flat,
 * and it was the fastest algorithm but at 2 ranks around 8 KiB, where
 * recursive doubling's one exchange beats two syncs by ~10%. When other load
 * leaves 2 ranks one core between them, the capped spin matters more than
 * the algorithm: 8 B took 2.1 ms with the ring (each wait spins out its
 * count), 23 us with shm_flat; 16 MiB 78 ms against 10 ms.
 *
 * Correct for any p >= 1 and any count (0 included: one empty piece, whose
 * sync still checks that every rank runs this call). p = 1 only copies.
 */
#include <string.h>

#include "coll/coll.h"
#include "reduce/reduce.h"
#include "transport/shm.h"
#include "util/error.h"
#include "util/util.h"

/* One plain copy of a byte, in the model's beta (which prices the two copies
 * of a ring slot plus its per-chunk bookkeeping): fitted to 16 MiB allreduce
 * and reduce_scatter on 2 ranks (see the essay). */
#define FLAT_COPY 0.32
/* One sync, in the model's alpha per ceil(log2 p): every rank must run (and,
 * oversubscribed, be woken) once, which costs about what one round of the
 * dissemination barrier does per log2 p of it; measured 0.5-0.6 for p = 2..8,
 * busy and oversubscribed alike. */
#define FLAT_SYNC 0.55
/* One byte through the copy-in / copy-out of allgather and alltoall, in beta:
 * fitted so that at 2 ranks they hand over to the message algorithms near
 * 8 KiB, where those measured faster (16 MiB: 1.9 ms flat, 1.4 ms ring). */
#define FLAT_GATHER_COPY 0.52

#define FLAT_NEEDS_REDUCE (COLLIE_NEEDS_ALL_SHM | COLLIE_NEEDS_REDUCE)

/* How calls are cut. Every rank computes the same (from the segment's core
 * count, one value for all) and records it in its descriptor, so a rank that
 * somehow differs is a mismatch, never a misread. */
struct flat_shape {
  size_t piece; /* bytes per allreduce piece, whole 64-byte lines */
  size_t small; /* allreduce of at most this many bytes: replicated */
};

static struct flat_shape
flat_shape(int p, const struct collie__shm_flat *f)
{
  size_t buf_bytes = collie__shm_flat_buf_bytes(f);
  struct flat_shape s;
  /* Oversubscribed (as the model's defaults assume: more ranks than cores),
   * a sync costs wake-ups (~10-60 us): big pieces, and replication up to tens
   * of KiB (measured break-even: 64 KiB at 4 ranks, ~40 KiB at 8). Busy
   * ranks sync in well under a microsecond: pieces that stay in L2, and
   * replication only while the extra reads are a few KiB (4 KiB at 2 ranks). */
  size_t q = (size_t)(p > 1 ? p - 1 : 1);
  if (p > collie__shm_flat_cores(f)) {
    s.piece = (size_t)1 << 20;
    s.small = ((size_t)256 << 10) / (size_t)p;
  } else {
    s.piece = (size_t)512 << 10;
    s.small = (size_t)2048 * (size_t)p / (q * q);
  }
  if (s.piece > buf_bytes) s.piece = buf_bytes;
  if (s.small > s.piece) s.small = s.piece;
  return s;
}

static struct collie__shm_flat *
flat_area(struct collie__call *c)
{
  struct collie__shm_flat *f = collie__net_shm_flat(c->net);
  if (!f)
    collie__err(COLLIE_INTERNAL_ERROR,
                "shm_flat: the communicator has no shared flat area (not every rank is on this "
                "host, or the segment lacks one)");
  return f;
}

/* Records what this call is, for the mismatch check of its first sync. */
static void
flat_begin(struct collie__shm_flat *f, const struct collie__call *c, int reduces, uint32_t shape)
{
  struct collie__shm_flat_desc d;
  memset(&d, 0, sizeof(d));
  d.slot = collie__call_slot(c, 0);
  d.count = c->count;
  if (reduces) {
    d.dtype = (int32_t)c->dtype;
    d.op = (int32_t)c->op;
  }
  d.shape = shape;
  collie__shm_flat_begin(f, &d);
}

/* Start of block i (0 <= i <= p) of a piece of len bytes: blocks are whole
 * 64-byte lines (so whole elements of every dtype), the last one takes the
 * remainder. */
static size_t
flat_cut(size_t len, int p, int i)
{
  if (i >= p) return len;
  return len / 64 * (size_t)i / (size_t)p * 64;
}

/* Whether the flat area can run a call of c's shape: every rank on this host
 * with an area (all ranks get the same answer), or a single rank. Sets *f. */
static int
flat_usable(const struct collie__call *c, struct collie__shm_flat **f)
{
  *f = NULL;
  if (!c->all_shm) return 0;
  if (c->size == 1) return 1;
  *f = collie__net_shm_flat(c->net);
  /* reduce_scatter needs one element of every rank in a piece. */
  return *f && (size_t)c->size * 64 <= collie__shm_flat_buf_bytes(*f);
}

/* Cost of one sync under model m. */
static double
flat_sync_cost(const struct collie__call *c, const struct collie__model *m)
{
  return FLAT_SYNC * collie__log2_ceil(c->size) * m->alpha_us;
}

/* ---- allreduce ---- */

static collie_result_t
flat_allreduce_run(struct collie__call *c)
{
  int p = c->size, r = c->rank;
  size_t es = c->esize, bytes = c->count * es;
  const char *in = c->sendbuf;
  char *out = c->recvbuf;
  collie_result_t rc;
  if (p == 1) {
    if (bytes && in != out) collie__call_copy_small(c, out, in, bytes);
    return COLLIE_SUCCESS; /* AVG over one rank is the value itself */
  }
  struct collie__shm_flat *f = flat_area(c);
  if (!f) return COLLIE_INTERNAL_ERROR;
  struct flat_shape sh = flat_shape(p, f);
  size_t piece = sh.piece;
  int replicate = bytes <= sh.small;
  flat_begin(f, c, 1, (uint32_t)(piece >> 6) << 1 | (uint32_t)replicate);
  size_t done = 0;
  do {
    size_t len = bytes - done < piece ? bytes - done : piece;
    int b = collie__shm_flat_next_buf(f);
    char *mine = collie__shm_flat_piece(f, r, b, len);
    size_t lo = replicate ? len : flat_cut(len, p, r),
           hi = replicate ? len : flat_cut(len, p, r + 1);
    /* Split: the others read every block but this rank's own, which it
     * reduces from sendbuf straight into its buffer after the sync. */
    if (lo) collie__call_copy_small(c, mine, in + done, lo);
    if (len > hi) collie__call_copy_small(c, mine + hi, in + done + hi, len - hi);
    if ((rc = collie__shm_flat_sync(f, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
    char *dst = out + done;
    if (replicate) {
      if (len) {
        collie__reduce_into(c->reduce, dst, collie__shm_flat_piece(f, 0, b, len),
                            collie__shm_flat_piece(f, 1, b, len), len / es, es);
        for (int q = 2; q < p; q++) c->reduce(dst, collie__shm_flat_piece(f, q, b, len), len / es);
        if (c->op == COLLIE_AVG) collie__reduce_avg_finish(dst, len / es, c->dtype, p);
      }
    } else {
      if (hi > lo) {
        /* Its own data first, then the others' in rank order: one order per
         * element, so every rank and every run gets the same bits. */
        const char *own = in + done + lo;
        for (int q = 0; q < p; q++)
          if (q != r) {
            const char *theirs = (const char *)collie__shm_flat_piece(f, q, b, len) + lo;
            collie__reduce_into(c->reduce, mine + lo, own, theirs, (hi - lo) / es, es);
            own = mine + lo;
          }
        if (c->op == COLLIE_AVG) collie__reduce_avg_finish(mine + lo, (hi - lo) / es, c->dtype, p);
      }
      if ((rc = collie__shm_flat_sync(f, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
      for (int q = 0; q < p; q++) {
        size_t qlo = flat_cut(len, p, q), qhi = flat_cut(len, p, q + 1);
        if (qhi > qlo)
          collie__copy_part(dst + qlo, (const char *)collie__shm_flat_piece(f, q, b, len) + qlo,
                            qhi - qlo, bytes);
      }
    }
    done += len;
  } while (done < bytes);
  return COLLIE_SUCCESS;
}

static double
flat_allreduce_cost(const struct collie__call *c, const struct collie__model *m)
{
  struct collie__shm_flat *f;
  if (!flat_usable(c, &f)) return -1;
  double p = c->size, S = (double)collie__call_bytes(c), copy = FLAT_COPY * m->beta_us;
  if (c->size == 1) return S * copy;
  struct flat_shape sh = flat_shape(c->size, f);
  double pieces = S > (double)sh.piece ? (double)(((size_t)S + sh.piece - 1) / sh.piece) : 1;
  if ((size_t)S <= sh.small) return flat_sync_cost(c, m) + 2 * S * copy + (p - 1) * S * m->gamma_us;
  return 2 * pieces * flat_sync_cost(c, m) + 2 * S * copy + (p - 1) / p * S * m->gamma_us;
}

const struct collie__algo collie__algo_allreduce_shm_flat = {
    "shm_flat",        COLLIE_ALGO_SHM_FLAT, COLLIE_KIND_ALLREDUCE,
    FLAT_NEEDS_REDUCE, flat_allreduce_cost,  flat_allreduce_run};

/* ---- reduce_scatter ---- */

static collie_result_t
flat_reduce_scatter_run(struct collie__call *c)
{
  int p = c->size, r = c->rank;
  size_t es = c->esize, n = c->count;
  const char *in = c->sendbuf;
  char *out = c->recvbuf;
  collie_result_t rc;
  if (p == 1) {
    if (n && in != out) collie__call_copy_small(c, out, in, n * es);
    return COLLIE_SUCCESS;
  }
  struct collie__shm_flat *f = flat_area(c);
  if (!f) return COLLIE_INTERNAL_ERROR;
  /* Elements of each block per piece. */
  size_t per = flat_shape(p, f).piece / (size_t)p / es;
  flat_begin(f, c, 1, (uint32_t)per);
  size_t o = 0;
  do {
    size_t k = n - o < per ? n - o : per, kb = k * es, all = (size_t)p * kb;
    int b = collie__shm_flat_next_buf(f);
    char *mine = collie__shm_flat_piece(f, r, b, all);
    for (int q = 0; q < p; q++)
      if (q != r && kb)
        collie__call_copy_small(c, mine + (size_t)q * kb, in + ((size_t)q * n + o) * es, kb);
    if ((rc = collie__shm_flat_sync(f, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
    if (kb) {
      char *dst = out + o * es;
      const char *own = in + ((size_t)r * n + o) * es;
      for (int q = 0; q < p; q++)
        if (q != r) {
          collie__reduce_into(c->reduce, dst, own,
                              (const char *)collie__shm_flat_piece(f, q, b, all) + (size_t)r * kb,
                              k, es);
          own = dst;
        }
      if (c->op == COLLIE_AVG) collie__reduce_avg_finish(dst, k, c->dtype, p);
    }
    o += k;
  } while (o < n);
  return COLLIE_SUCCESS;
}

static double
flat_reduce_scatter_cost(const struct collie__call *c, const struct collie__model *m)
{
  struct collie__shm_flat *f;
  if (!flat_usable(c, &f)) return -1;
  double p = c->size, S = (double)collie__call_bytes(c), copy = FLAT_COPY * m->beta_us;
  if (c->size == 1) return S / p * copy;
  size_t piece = flat_shape(c->size, f).piece;
  double pieces = S > (double)piece ? (double)(((size_t)S + piece - 1) / piece) : 1;
  return pieces * flat_sync_cost(c, m) + S * copy + (p - 1) / p * S * m->gamma_us;
}

const struct collie__algo collie__algo_reduce_scatter_shm_flat = {
    "shm_flat",        COLLIE_ALGO_SHM_FLAT,     COLLIE_KIND_REDUCE_SCATTER,
    FLAT_NEEDS_REDUCE, flat_reduce_scatter_cost, flat_reduce_scatter_run};

/* ---- allgather and alltoall: copies through the flat area ----
 *
 * The data-movement pair of reduce_scatter's layout, for the sizes where a
 * message exchange's handoffs cost more than the bytes: per piece every rank
 * copies what others need into its own buffer, one sync, and every rank
 * copies what it needs out of the others' buffers (one sync per piece, as
 * the replicated allreduce, so the alternating buffers need nothing more).
 * allgather: k elements of the rank's block per piece, read by all; alltoall:
 * the k-element slices of the blocks for the other ranks, each read by its
 * owner. The own block never leaves the rank. */

static collie_result_t
flat_gather_pieces(struct collie__call *c, int all_to_all)
{
  int p = c->size, r = c->rank;
  size_t es = c->esize, n = c->count;
  const char *in = c->sendbuf;
  char *out = c->recvbuf;
  collie_result_t rc;
  /* In place, the own block already sits where it belongs (allgather:
   * sendbuf is block r of recvbuf; alltoall: the same buffer). */
  const char *own = all_to_all ? in + (size_t)r * n * es : in;
  char *own_dst = out + (size_t)r * n * es;
  if (n && own != own_dst) memmove(own_dst, own, n * es);
  if (p == 1) return COLLIE_SUCCESS;
  struct collie__shm_flat *f = flat_area(c);
  if (!f) return COLLIE_INTERNAL_ERROR;
  size_t per = flat_shape(p, f).piece / (all_to_all ? (size_t)p : 1) / es;
  flat_begin(f, c, 0, (uint32_t)per);
  size_t o = 0;
  do {
    size_t k = n - o < per ? n - o : per, kb = k * es, all = all_to_all ? (size_t)p * kb : kb;
    int b = collie__shm_flat_next_buf(f);
    char *mine = collie__shm_flat_piece(f, r, b, all);
    if (kb) {
      if (all_to_all) {
        for (int q = 0; q < p; q++)
          if (q != r)
            collie__call_copy_small(c, mine + (size_t)q * kb, in + ((size_t)q * n + o) * es, kb);
      } else {
        collie__call_copy_small(c, mine, in + o * es, kb);
      }
    }
    if ((rc = collie__shm_flat_sync(f, c->deadline_ns)) != COLLIE_SUCCESS) return rc;
    for (int q = 0; q < p && kb; q++)
      if (q != r)
        collie__copy_part(out + ((size_t)q * n + o) * es,
                          (const char *)collie__shm_flat_piece(f, q, b, all) +
                              (all_to_all ? (size_t)r * kb : 0),
                          kb, n * es * (size_t)p);
    o += k;
  } while (o < n);
  return COLLIE_SUCCESS;
}

static collie_result_t
flat_allgather_run(struct collie__call *c)
{
  return flat_gather_pieces(c, 0);
}

static collie_result_t
flat_alltoall_run(struct collie__call *c)
{
  return flat_gather_pieces(c, 1);
}

/* Model: a sync per piece; allgather copies its block in and all blocks out,
 * (1 + 1/p) S; alltoall the p-1 foreign blocks in and out plus its own,
 * (2p - 1)/p S (S: collie__call_bytes, the p-block buffer). */
static double
flat_gather_cost(const struct collie__call *c, const struct collie__model *m, int all_to_all)
{
  struct collie__shm_flat *f;
  if (!flat_usable(c, &f)) return -1;
  double p = c->size, S = (double)collie__call_bytes(c), copy = FLAT_GATHER_COPY * m->beta_us;
  if (c->size == 1) return S * copy;
  size_t per = flat_shape(c->size, f).piece / (all_to_all ? (size_t)c->size : 1) / c->esize;
  double pieces = c->count > per ? (double)((c->count + per - 1) / per) : 1;
  double copied = all_to_all ? (2 * p - 1) / p * S : (1 + 1 / p) * S;
  return pieces * flat_sync_cost(c, m) + copied * copy;
}

static double
flat_allgather_cost(const struct collie__call *c, const struct collie__model *m)
{
  return flat_gather_cost(c, m, 0);
}

static double
flat_alltoall_cost(const struct collie__call *c, const struct collie__model *m)
{
  return flat_gather_cost(c, m, 1);
}

const struct collie__algo collie__algo_allgather_shm_flat = {
    "shm_flat",           COLLIE_ALGO_SHM_FLAT, COLLIE_KIND_ALLGATHER,
    COLLIE_NEEDS_ALL_SHM, flat_allgather_cost,  flat_allgather_run};

const struct collie__algo collie__algo_alltoall_shm_flat = {
    "shm_flat",           COLLIE_ALGO_SHM_FLAT, COLLIE_KIND_ALLTOALL,
    COLLIE_NEEDS_ALL_SHM, flat_alltoall_cost,   flat_alltoall_run};

/* ---- barrier ---- */

static collie_result_t
flat_barrier_run(struct collie__call *c)
{
  if (c->size == 1) return COLLIE_SUCCESS;
  struct collie__shm_flat *f = flat_area(c);
  if (!f) return COLLIE_INTERNAL_ERROR;
  flat_begin(f, c, 0, 0);
  return collie__shm_flat_sync(f, c->deadline_ns);
}

static double
flat_barrier_cost(const struct collie__call *c, const struct collie__model *m)
{
  struct collie__shm_flat *f;
  if (!flat_usable(c, &f)) return -1;
  return c->size == 1 ? 0 : flat_sync_cost(c, m);
}

const struct collie__algo collie__algo_barrier_shm_flat = {
    "shm_flat",           COLLIE_ALGO_SHM_FLAT, COLLIE_KIND_BARRIER,
    COLLIE_NEEDS_ALL_SHM, flat_barrier_cost,    flat_barrier_run};
