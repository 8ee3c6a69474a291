/*
 * comm_shrink.c - collie_comm_shrink: after a failure, the ranks still alive
 * agree on who they are and get a new communicator of just them (the idea of
 * MPIX_Comm_shrink and ncclCommShrink; docs/reliability.md has the contract).
 *
 * The agreement runs through the job's store, never the failed channels, in
 * the old communicator's key space under "shrink/<k>/" (k counts this
 * communicator's shrinks, equal on every caller):
 *
 *   a/<p>      ADD 1 by rank p itself: "I am alive and shrinking"
 *   d/<p>      ADD 1 by anyone who knows p is dead: its process is gone
 *              (checked for ranks of the caller's host, so a host's
 *              survivors vouch for its dead), it is in the exclude list, or
 *              it neither came nor was found dead before the timeout
 *   lock       ADD 1 by every rank that has resolved every p (alive or
 *              dead): the one that gets 1 writes the decision
 *   holder     the rank that got 1 (int32), so that its host can vouch for
 *              its death
 *   seal       ADD SHRINK_SEAL_COMMIT by the holder before it writes the
 *              decision, ADD 1 by a waiter that calls the generation off;
 *              whichever comes first wins (see shrink_decide)
 *   decision   the members, ascending old ranks (int32 each)
 *   up/<p>     ADD 1 by member p once its new communicator is set up, -1
 *              if its setup failed (see shrink_confirm)
 *
 * A rank that finds the lock taken when it comes reads the decision at once.
 * Once the new communicator is up, its rank 0 removes the per-rank counters;
 * the lock and the decision stay (two small keys per shrink) so that a rank
 * that wakes later is told it was left out rather than deciding alone.
 *
 * Reads are ADDs of 0 (they answer at once and keep the connection), so a
 * rank that polls does not churn the store. Dead wins over alive: a rank
 * declared dead that comes later is left out and told so. A failure during
 * the agreement is a rank that is then found dead like the others; if the
 * writer itself dies between its lock and its decision, a rank of its host
 * sees its process gone, declares it dead and the next generation of the
 * lock ("lock.1", with "holder.1", "seal.1" and "decision.1") picks another
 * writer; on another host the others fail at their deadline with an error
 * that says so, and may shrink again. A writer that dies after its ticket
 * but before it wrote "holder" (or is that slow) is unnamed: a waiter that
 * sees a rank of its host die, or no holder for SHRINK_UNNAMED_NS, calls
 * the generation off through the seal, and the writer, if alive, finds it
 * called off and joins the next generation too. A member
 * that dies after the decision makes the new communicator's setup fail, named,
 * on every member alike (shrink_confirm); shrinking again (k + 1) leaves it
 * out.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/core.h"
#include "util/error.h"
#include "util/util.h"

/* How often an unresolved rank is looked at again. */
#define SHRINK_POLL_NS (5 * 1000000LL)
/* What the lock's holder adds to its generation's seal to commit its
 * decision (a waiter that calls the generation off adds 1): far above any
 * number of waiters, so the value tells which came first. */
#define SHRINK_SEAL_COMMIT (1LL << 40)
/* How long a waiter waits for the lock's holder to name itself before it
 * calls the generation off (the holder died, or stalls, between its ticket
 * and its name). Calling off is always safe, so this only bounds the wait. */
#define SHRINK_UNNAMED_NS (1000 * 1000000LL)

/* The counter key/<p> under shrink/<k>/, read (delta 0) or bumped; *out its value. */
static collie_result_t
shrink_add(collie_comm_t *comm, uint32_t k, const char *what, int p, int64_t delta, int64_t *out,
           int64_t deadline)
{
  char key[96];
  if (p >= 0)
    snprintf(key, sizeof(key), "shrink/%" PRIu32 "/%s/%d", k, what, p);
  else
    snprintf(key, sizeof(key), "shrink/%" PRIu32 "/%s", k, what);
  int64_t v = 0;
  collie_result_t rc = collie__store_add(comm->store, key, delta, &v, deadline);
  if (out) *out = v;
  return rc;
}

/* Every rank's fate as this caller sees it: 1 alive, -1 dead, 0 unknown yet. */
static collie_result_t
shrink_resolve(collie_comm_t *comm, uint32_t k, signed char *fate, int64_t until, int64_t deadline)
{
  const struct collie__peer *me = &comm->peers[comm->rank];
  for (;;) {
    int unknown = 0;
    for (int p = 0; p < comm->size; p++) {
      if (fate[p] != 0) continue;
      int64_t v = 0;
      collie_result_t rc = shrink_add(comm, k, "d", p, 0, &v, deadline);
      if (rc != COLLIE_SUCCESS) return rc;
      if (v > 0) {
        fate[p] = -1;
        continue;
      }
      if ((rc = shrink_add(comm, k, "a", p, 0, &v, deadline)) != COLLIE_SUCCESS) return rc;
      if (v > 0) {
        fate[p] = 1;
        continue;
      }
      if (!strcmp(comm->peers[p].host, me->host) && collie__proc_dead(comm->peers[p].pid)) {
        COLLIE_INFO("INIT", "shrink: rank %d (world rank %d, pid %d) is gone", p,
                    comm->peers[p].world_rank, comm->peers[p].pid);
        if ((rc = shrink_add(comm, k, "d", p, 1, NULL, deadline)) != COLLIE_SUCCESS) return rc;
        fate[p] = -1;
        continue;
      }
      unknown++;
    }
    if (!unknown) return COLLIE_SUCCESS;
    if (collie__now_ns() >= until) {
      /* Neither came nor was found dead in time (frozen, or on a lost host). */
      for (int p = 0; p < comm->size; p++) {
        if (fate[p] != 0) continue;
        COLLIE_WARN("INIT",
                    "shrink: rank %d (world rank %d, pid %d) neither joined nor was found dead "
                    "before the timeout: it is left out",
                    p, comm->peers[p].world_rank, comm->peers[p].pid);
        collie_result_t rc = shrink_add(comm, k, "d", p, 1, NULL, deadline);
        if (rc != COLLIE_SUCCESS) return rc;
        fate[p] = -1;
      }
      return COLLIE_SUCCESS;
    }
    collie__sleep_ns(SHRINK_POLL_NS);
  }
}

/* The key of generation g of a per-shrink word ("lock", "holder",
 * "decision"): generation 0 has the plain name. */
static void
shrink_gen_key(char *key, size_t len, uint32_t k, const char *what, int gen)
{
  if (gen == 0)
    snprintf(key, len, "shrink/%" PRIu32 "/%s", k, what);
  else
    snprintf(key, len, "shrink/%" PRIu32 "/%s.%d", k, what, gen);
}

/* Reads a decision of members into members/n: SUCCESS, TIMEOUT (not
 * written by wait_until), or an error. */
static collie_result_t
shrink_read_decision(collie_comm_t *comm, const char *key, int32_t *members, int *n,
                     int64_t wait_until)
{
  void *val = NULL;
  size_t len = 0;
  collie_result_t rc = collie__store_get(comm->store, key, &val, &len, wait_until);
  if (rc != COLLIE_SUCCESS) return rc;
  if (len % sizeof(*members) != 0 || len / sizeof(*members) > (size_t)comm->size) {
    free(val);
    return collie__err(COLLIE_REMOTE_ERROR, "malformed decision (%zu bytes)", len);
  }
  *n = (int)(len / sizeof(*members));
  memcpy(members, val, len);
  free(val);
  return COLLIE_SUCCESS;
}

/* The holder of generation gen's lock when it is known to be dead (it
 * said who it is, shares this host, and its process is gone), else -1. */
static int
shrink_dead_holder(collie_comm_t *comm, uint32_t k, int gen, int *named)
{
  char key[96];
  shrink_gen_key(key, sizeof(key), k, "holder", gen);
  void *val = NULL;
  size_t len = 0;
  if (collie__store_get(comm->store, key, &val, &len, collie__now_ns()) != COLLIE_SUCCESS)
    return -1;
  *named = 1;
  int32_t h = -1;
  if (len == sizeof(h)) memcpy(&h, val, sizeof(h));
  free(val);
  if (h < 0 || h >= comm->size || h == comm->rank) return -1;
  const struct collie__peer *me = &comm->peers[comm->rank], *hp = &comm->peers[h];
  if (strcmp(hp->host, me->host) != 0 || !collie__proc_dead(hp->pid)) return -1;
  COLLIE_INFO("INIT", "shrink: rank %d (world rank %d, pid %d) died while deciding; deciding again",
              h, hp->world_rank, hp->pid);
  return h;
}

/* Declares dead every rank of this host whose process is gone and that no
 * one has declared dead yet; *found counts them. */
static collie_result_t
shrink_declare_gone(collie_comm_t *comm, uint32_t k, int *found, int64_t deadline)
{
  const struct collie__peer *me = &comm->peers[comm->rank];
  *found = 0;
  for (int p = 0; p < comm->size; p++) {
    if (p == comm->rank || strcmp(comm->peers[p].host, me->host) != 0 ||
        !collie__proc_dead(comm->peers[p].pid))
      continue;
    int64_t v = 0;
    collie_result_t rc = shrink_add(comm, k, "d", p, 0, &v, deadline);
    if (rc != COLLIE_SUCCESS) return rc;
    if (v > 0) continue;
    COLLIE_INFO("INIT", "shrink: rank %d (world rank %d, pid %d) died during the agreement", p,
                comm->peers[p].world_rank, comm->peers[p].pid);
    if ((rc = shrink_add(comm, k, "d", p, 1, NULL, deadline)) != COLLIE_SUCCESS) return rc;
    (*found)++;
  }
  return COLLIE_SUCCESS;
}

/* Adds delta to generation gen's seal (0: reads it); *state: 1 the holder's
 * commit came first, -1 a waiter called the generation off first, 0 neither
 * yet. */
static collie_result_t
shrink_seal(collie_comm_t *comm, uint32_t k, int gen, int64_t delta, int *state, int64_t deadline)
{
  char key[96];
  int64_t v = 0;
  shrink_gen_key(key, sizeof(key), k, "seal", gen);
  collie_result_t rc = collie__store_add(comm->store, key, delta, &v, deadline);
  if (delta == SHRINK_SEAL_COMMIT)
    *state = v == SHRINK_SEAL_COMMIT ? 1 : -1;
  else
    *state = v >= SHRINK_SEAL_COMMIT ? 1 : v > 0 ? -1 : 0;
  return rc;
}

/* The decision: written by the lock's winner from the counters as they are
 * now (dead wins), read by everyone else. A winner that dies before it
 * writes (seen by a rank of its host) is declared dead, and the next
 * generation's lock picks another; the dead winner's decision, had it been
 * written, is taken first, so every rank ends with the same one. Fills
 * members (n of them).
 *
 * The lock's ticket and the holder's name are two store operations, so a
 * winner killed between them (or just after its ADD was applied) leaves a
 * lock taken by no one that anyone can name: waiting for its name, or for
 * its decision, lasted until the deadline (seen with a rank SIGKILLed a few
 * ms into its shrink, more often under ASan on a loaded machine). So each
 * generation has a seal: the holder commits to its decision by adding
 * SHRINK_SEAL_COMMIT before it writes it, and a waiter that sees a rank of
 * its host die, or no holder named for SHRINK_UNNAMED_NS, adds 1 to call
 * the generation off. One ADD is atomic, so exactly one of the two is first:
 * a committed generation's decision is the one (its holder is named, and
 * watched as before); a called-off one never has a decision, and every rank,
 * its holder included, goes on to the next generation. */
static collie_result_t
shrink_decide(collie_comm_t *comm, uint32_t k, int32_t *members, int *n, int64_t deadline)
{
  for (int gen = 0;; gen++) {
    char lock[96], key[96];
    int seal = 0; /* this generation's seal as last seen (shrink_seal) */
    shrink_gen_key(lock, sizeof(lock), k, "lock", gen);
    shrink_gen_key(key, sizeof(key), k, "decision", gen);
    int64_t ticket = 0;
    collie_result_t rc = collie__store_add(comm->store, lock, 1, &ticket, deadline);
    if (rc != COLLIE_SUCCESS) return rc;
    if (ticket == 1) {
      char holder[96];
      int32_t me = comm->rank;
      shrink_gen_key(holder, sizeof(holder), k, "holder", gen);
      if ((rc = collie__store_set(comm->store, holder, &me, sizeof(me), deadline)) !=
          COLLIE_SUCCESS)
        return rc;
      int m = 0;
      for (int p = 0; p < comm->size; p++) {
        int64_t alive = 0, dead = 0;
        if ((rc = shrink_add(comm, k, "d", p, 0, &dead, deadline)) != COLLIE_SUCCESS ||
            (rc = shrink_add(comm, k, "a", p, 0, &alive, deadline)) != COLLIE_SUCCESS)
          return rc;
        if (alive > 0 && dead == 0) members[m++] = p;
      }
      if ((rc = shrink_seal(comm, k, gen, SHRINK_SEAL_COMMIT, &seal, deadline)) != COLLIE_SUCCESS)
        return rc;
      if (seal < 0) {
        COLLIE_INFO("INIT", "shrink: decision #%d was called off by a waiter", gen);
        continue; /* the next generation, like everyone else */
      }
      *n = m;
      return collie__store_set(comm->store, key, members, (size_t)m * sizeof(*members), deadline);
    }
    int64_t waiting_since = collie__now_ns();
    for (;;) {
      int64_t slice = collie__now_ns() + 200 * 1000000LL;
      rc = shrink_read_decision(comm, key, members, n, slice < deadline ? slice : deadline);
      if (rc != COLLIE_TIMEOUT) return rc;
      if (slice >= deadline)
        return collie__err(COLLIE_TIMEOUT,
                           "the rank that took the decision never wrote it (it died while "
                           "deciding, on another host?); shrink again");
      if (seal != 1 && (rc = shrink_seal(comm, k, gen, 0, &seal, deadline)) != COLLIE_SUCCESS)
        return rc;
      if (seal < 0) break; /* called off by another waiter: the next generation */
      int named = 0, h = shrink_dead_holder(comm, k, gen, &named);
      if (h >= 0) {
        /* It can no longer commit; if it had, its decision stands if it
         * exists (it wrote nothing more after it died). */
        if (seal == 0 && (rc = shrink_seal(comm, k, gen, 1, &seal, deadline)) != COLLIE_SUCCESS)
          return rc;
        if (seal == 1) {
          rc = shrink_read_decision(comm, key, members, n, collie__now_ns());
          if (rc != COLLIE_TIMEOUT) return rc;
        }
        if ((rc = shrink_add(comm, k, "d", h, 1, NULL, deadline)) != COLLIE_SUCCESS) return rc;
        break; /* the next generation */
      }
      if (seal == 1) continue; /* its decision comes, or its death is seen above */
      int gone = 0;
      if ((rc = shrink_declare_gone(comm, k, &gone, deadline)) != COLLIE_SUCCESS) return rc;
      /* (Longer each generation: holders that are all that slow do not call
       * each other off until the deadline.) */
      if (!gone && (named || collie__now_ns() - waiting_since < SHRINK_UNNAMED_NS * (gen + 1)))
        continue;
      if ((rc = shrink_seal(comm, k, gen, 1, &seal, deadline)) != COLLIE_SUCCESS) return rc;
      if (seal < 0) {
        COLLIE_INFO("INIT", "shrink: decision #%d called off (%s)", gen,
                    gone ? "a rank of this host died meanwhile"
                         : "its holder never said who it is");
        break; /* the next generation */
      }
    }
  }
}

/* After the new communicator's setup, every member's outcome the same: the
 * setup of one member can succeed where another's fails when a member dies
 * during it (tcp: it connected to one peer and died before the next), and a
 * member that went on with the new communicator while another shrank the
 * old one again left the two waiting for each other in different
 * agreements until their deadlines. So each member says how its setup went
 * (up/<p>: +1 or -1, one ADD, before it looks at anyone's) and the shrink
 * succeeds only when every member said +1; it fails on every member when
 * one said -1, or died (seen by its host) without saying anything, since
 * then no member can ever see every +1. own: this rank's setup. */
static collie_result_t
shrink_confirm(collie_comm_t *comm, uint32_t k, const int32_t *members, int n, collie_result_t own,
               int64_t deadline)
{
  const struct collie__peer *me = &comm->peers[comm->rank];
  char saved[COLLIE_ERRMSG_LEN];
  snprintf(saved, sizeof(saved), "%s", collie__err_msg());
  collie_result_t rc =
      shrink_add(comm, k, "up", comm->rank, own == COLLIE_SUCCESS ? 1 : -1, NULL, deadline);
  if (own != COLLIE_SUCCESS) {
    collie__err_set_text(saved);
    return own;
  }
  if (rc != COLLIE_SUCCESS) return rc;
  signed char *up = calloc((size_t)n, 1);
  if (!up) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory");
  for (;;) {
    int pending = 0;
    for (int i = 0; i < n && rc == COLLIE_SUCCESS; i++) {
      int p = members[i];
      if (up[i] || p == comm->rank) continue;
      int64_t v = 0;
      /* Looked at before the read: gone and still silent is final. */
      int gone = !strcmp(comm->peers[p].host, me->host) && collie__proc_dead(comm->peers[p].pid);
      if ((rc = shrink_add(comm, k, "up", p, 0, &v, deadline)) != COLLIE_SUCCESS) break;
      if (v < 0)
        rc = collie__err(COLLIE_REMOTE_ERROR,
                         "rank %d (world rank %d) could not set up the new communicator", p,
                         comm->peers[p].world_rank);
      else if (v > 0)
        up[i] = 1;
      else if (gone)
        rc = collie__err(COLLIE_REMOTE_ERROR,
                         "rank %d (world rank %d, pid %d) died while the new communicator was "
                         "set up",
                         p, comm->peers[p].world_rank, comm->peers[p].pid);
      else
        pending++;
    }
    if (rc != COLLIE_SUCCESS || !pending) break;
    if (collie__now_ns() >= deadline) {
      rc = collie__err(COLLIE_TIMEOUT,
                       "%d member(s) never said whether they set up the new communicator "
                       "(died on another host?)",
                       pending);
      break;
    }
    collie__sleep_ns(SHRINK_POLL_NS);
  }
  free(up);
  return rc;
}

static collie_result_t
shrink_check_args(collie_comm_t *comm, const int *exclude, int nexclude, int64_t timeout_ms,
                  collie_comm_t **out)
{
  if (!comm) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_comm_shrink: comm is NULL");
  if (!collie__comm_live(comm))
    return collie__err(COLLIE_INVALID_USAGE,
                       "collie_comm_shrink: communicator %p was destroyed or never initialised",
                       (void *)comm);
  collie__log_context(comm->ctx);
  if (!out) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_comm_shrink: out is NULL");
  if (nexclude < 0 || (nexclude > 0 && !exclude))
    return collie__err(COLLIE_INVALID_ARGUMENT, "collie_comm_shrink: nexclude = %d with exclude %s",
                       nexclude, exclude ? "given" : "NULL");
  for (int i = 0; i < nexclude; i++) {
    if (exclude[i] < 0 || exclude[i] >= comm->size)
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "collie_comm_shrink: exclude[%d] = %d is outside 0..%d", i, exclude[i],
                         comm->size - 1);
    if (exclude[i] == comm->rank)
      return collie__err(COLLIE_INVALID_ARGUMENT,
                         "collie_comm_shrink: exclude[%d] = %d is the calling rank (a rank that "
                         "leaves does not call shrink)",
                         i, exclude[i]);
  }
  if (timeout_ms < -1)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_comm_shrink: timeout_ms = %lld must be >= 0, or -1 for the "
                       "communicator's",
                       (long long)timeout_ms);
  if (comm->in_group)
    return collie__err(COLLIE_INVALID_USAGE, "collie_comm_shrink: called inside a group");
  if (!comm->store && comm->size > 1)
    return collie__err(COLLIE_INVALID_USAGE, "collie_comm_shrink: the communicator has no store");
  return COLLIE_SUCCESS;
}

collie_result_t
collie_comm_shrink(collie_comm_t *comm, const int *exclude, int nexclude, int64_t timeout_ms,
                   collie_comm_t **out)
{
  if (out) *out = NULL;
  collie_result_t rc = shrink_check_args(comm, exclude, nexclude, timeout_ms, out);
  if (rc != COLLIE_SUCCESS) return rc;
  if (timeout_ms < 0) timeout_ms = comm->timeout_ms;
  /* The old channels are not used again: whatever still runs on them fails now. */
  if (collie__comm_poisoned(comm) != COLLIE_SUCCESS) collie__net_abort(comm->net);

  uint32_t k = ++comm->shrink_seq;
  int64_t until = collie__deadline_after_ms(timeout_ms);
  /* Store requests get the communicator's timeout beyond the waiting itself. */
  int64_t deadline = collie__deadline_after_ms(timeout_ms + comm->timeout_ms);
  signed char *fate = calloc((size_t)comm->size, 1);
  int32_t *members = calloc((size_t)comm->size, sizeof(*members));
  struct collie__peer *expect = calloc((size_t)comm->size, sizeof(*expect));
  int n = 0, newrank = -1;
  if (!fate || !members || !expect) {
    rc = collie__err(COLLIE_SYSTEM_ERROR, "out of memory");
    goto out;
  }
  fate[comm->rank] = 1;
  if (comm->size > 1) {
    for (int i = 0; i < nexclude && rc == COLLIE_SUCCESS; i++) {
      fate[exclude[i]] = -1;
      rc = shrink_add(comm, k, "d", exclude[i], 1, NULL, deadline);
    }
    if (rc == COLLIE_SUCCESS) rc = shrink_add(comm, k, "a", comm->rank, 1, NULL, deadline);
    /* A rank that comes after the decision was taken only reads it. */
    int64_t taken = 0;
    if (rc == COLLIE_SUCCESS) rc = shrink_add(comm, k, "lock", -1, 0, &taken, deadline);
    if (rc == COLLIE_SUCCESS && taken == 0) rc = shrink_resolve(comm, k, fate, until, deadline);
    if (rc == COLLIE_SUCCESS) rc = shrink_decide(comm, k, members, &n, deadline);
    if (rc != COLLIE_SUCCESS) goto out;
  } else {
    n = 1;
  }
  for (int i = 0; i < n; i++) {
    if (members[i] < 0 || members[i] >= comm->size || (i && members[i] <= members[i - 1])) {
      rc = collie__err(COLLIE_REMOTE_ERROR, "malformed decision (member %d is %d)", i,
                       (int)members[i]);
      goto out;
    }
    if (members[i] == comm->rank) newrank = i;
  }
  if (newrank < 0) {
    rc = collie__err(COLLIE_REMOTE_ERROR,
                     "this rank was left out: the others found it dead or too late (after the "
                     "timeout of %lld ms)",
                     (long long)timeout_ms);
    goto out;
  }
  COLLIE_INFO("INIT", "shrink #%" PRIu32 ": %d of %d ranks go on", k, n, comm->size);
  /* The new communicator's id: the old one's, the shrink's number and its
   * members, so that callers with different decisions could never meet. */
  uint64_t h = collie__hash64("shrink", 6, comm->hash);
  h = collie__hash64(&k, sizeof(k), h);
  h = collie__hash64(members, (size_t)n * sizeof(*members), h);
  for (int i = 0; i < n; i++) expect[i] = comm->peers[members[i]];
  struct collie__comm_known known = {expect, 1};
  rc = collie__comm_create(&comm->params, comm->token, comm->timeout_ms, comm->transport,
                           comm->job_store, h, newrank, n, &comm->peers[comm->rank], &known,
                           comm->tele, out);
  collie__log_context(comm->ctx);
  if (comm->size > 1 && n > 1) {
    collie_result_t agreed = shrink_confirm(comm, k, members, n, rc, deadline);
    if (rc == COLLIE_SUCCESS && agreed != COLLIE_SUCCESS) {
      /* Set up here, failed elsewhere: given up without a closing barrier. */
      char saved[COLLIE_ERRMSG_LEN];
      snprintf(saved, sizeof(saved), "%s", collie__err_msg());
      collie__comm_poison(*out, agreed);
      collie_comm_destroy(*out);
      *out = NULL;
      collie__log_context(comm->ctx);
      collie__err_set_text(saved);
    }
    rc = agreed;
  }
  if (rc == COLLIE_SUCCESS && newrank == 0 && comm->size > 1) {
    /* Every member read the decision before it joined the new
     * communicator's setup: the per-rank counters can go (not up/, which
     * members may still be reading). The lock and the
     * decision stay, so that a rank that comes late still learns it was
     * left out (and can never take a decision of its own). */
    for (int i = 0; i < 2; i++) {
      char prefix[32];
      snprintf(prefix, sizeof(prefix), "shrink/%" PRIu32 "/%s/", k, i ? "d" : "a");
      if (collie__store_del_prefix(comm->store, prefix, collie__deadline_after_ms(2000)) !=
          COLLIE_SUCCESS)
        COLLIE_INFO("INIT", "shrink: could not remove the agreement's keys (%s)",
                    collie__err_msg());
    }
    collie__err_clear();
  }

out:
  if (rc != COLLIE_SUCCESS) collie__err_prefix("collie_comm_shrink (#%" PRIu32 ")", k);
  free(fate);
  free(members);
  free(expect);
  return rc;
}
