/*
 * work.c - asynchronous operations: work handles, the communicator's queue
 * and its worker thread.
 *
 * An operation issued with a work handle returns at once; a per-communicator
 * worker thread runs queued operations one at a time in issue order. The
 * worker starts at the first async call (purely blocking programs never get
 * one) and is joined at destroy. Everything that the ranks must agree on (the
 * collective's sequence number, p2p pair counters, the algorithm) was decided
 * on the caller's thread at issue (dispatch.c, api.c, group.c): the worker
 * only runs. The algorithms and transports are single-threaded per
 * communicator, so exactly one thread runs ops at any time: the worker while
 * anything is queued, else the caller. A blocking call with nothing pending
 * therefore runs on the caller's thread with no hop; one issued behind pending
 * work first waits for the queue to drain (its turn), then runs.
 *
 * An async send or receive is posted, not run (the worker posts it to the
 * net's matching and takes the next item): sends and receives then complete
 * in whatever order their messages allow, as MPI's nonblocking calls do, and
 * an Irecv; Isend; Waitall exchange cannot deadlock on issue order. A posted
 * item completes with whatever progresses the net: another operation's
 * wait, or a collie_wait or collie_test of any posted item, whose thread
 * drives the net itself when nothing else runs ("owns" it: busy). Whoever
 * owns the net reaps the posted items that are done (work_reap), and fails
 * one whose deadline passed.
 *
 * A handle is shared by the caller and the queue (two references), so freeing
 * it before completion is safe: the worker still runs the operation and drops
 * the last reference. It carries the result and the operation's own error
 * message, which collie_wait/collie_test copy into the caller's thread-local
 * slot (collie_last_error). A failure poisons the communicator as a blocking
 * one would; items queued behind it fail fast quoting the first error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

enum { WORK_QUEUED, WORK_RUNNING, WORK_DONE };

/* How long past a running operation's own deadline collie_wait(-1) waits
 * before it reports TIMEOUT: the op fails itself at its deadline, this only
 * covers the time it takes to notice and report. */
#define WORK_GRACE_NS (2 * 1000000000LL)

struct collie_work {
  pthread_mutex_t lock;
  pthread_cond_t cond; /* state changes (CLOCK_MONOTONIC) */
  int refs;            /* caller + queue */
  int state;           /* WORK_* */
  int64_t deadline_ns; /* the run's own deadline, once RUNNING */
  collie_result_t rc;
  char msg[COLLIE_ERRMSG_LEN];
  /* The queued operation, read by the worker only. */
  struct collie_work *next;
  struct collie__op op;        /* when group is NULL */
  struct collie__group *group; /* an async group, owned by the item */
  int posted;                  /* an async send or receive, posted (on the queue's posted list) */
  int64_t timeout_ms;
  collie_comm_t *comm; /* alive while the item is queued (destroy drains first) */
};

struct collie__workq {
  pthread_mutex_t lock;
  pthread_cond_t wake; /* the worker: an item arrived, or stop */
  pthread_cond_t idle; /* drainers: an item finished (CLOCK_MONOTONIC) */
  struct collie_work *head, *tail;
  size_t pending; /* queued + running (not posted) */
  int busy;       /* the net is owned: an item runs (on the worker, or on a waiter that claimed it),
                     a blocking call runs, or a waiter drives posted items */
  /* Posted sends and receives, not done yet (linked by next). Only the
   * thread that owns the net (busy) touches the list. */
  struct collie_work *posted;
  int owners_waiting; /* blocking calls waiting to own the net (work_own) */
  int stop;
  pthread_t thread;
};

static void
work_cond_init(pthread_cond_t *c)
{
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
}

/* Waits on c until woken or deadline_ns (monotonic); INT64_MAX-like deadlines
 * are capped so the timespec stays valid (callers loop and recheck). */
static void
work_cond_wait(pthread_cond_t *c, pthread_mutex_t *m, int64_t deadline_ns)
{
  int64_t cap = collie__now_ns() + 3600 * 1000000000LL;
  if (deadline_ns > cap) deadline_ns = cap;
  struct timespec ts = {.tv_sec = deadline_ns / 1000000000LL,
                        .tv_nsec = deadline_ns % 1000000000LL};
  pthread_cond_timedwait(c, m, &ts);
}

static collie_work_t *
work_alloc(int refs, int state)
{
  collie_work_t *w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  pthread_mutex_init(&w->lock, NULL);
  work_cond_init(&w->cond);
  w->refs = refs;
  w->state = state;
  return w;
}

static void
work_unref(collie_work_t *w)
{
  pthread_mutex_lock(&w->lock);
  int left = --w->refs;
  pthread_mutex_unlock(&w->lock);
  if (left) return;
  collie__group_free(w->group);
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

/* ---- The worker ---- */

/* Sets the error of an operation that will not run because comm is
 * poisoned (quoting the first error) and returns INVALID_USAGE. */
static collie_result_t
work_fail_fast(collie_comm_t *comm, const struct collie_work *w)
{
  collie_result_t poisoned = collie__comm_poisoned(comm);
  char what[96];
  if (w->group)
    snprintf(what, sizeof(what), "queued group of send/recv");
  else if (w->op.call.kind == COLLIE_KIND_P2P)
    snprintf(what, sizeof(what), "queued %s rank %d", w->op.call.sendbuf ? "send to" : "recv from",
             w->op.call.root);
  else
    snprintf(what, sizeof(what), "queued %s #%u", collie__kind_name(w->op.call.kind),
             w->op.call.seq);
  return collie__err(COLLIE_INVALID_USAGE,
                     "%s not run: communicator is unusable after an earlier error (%s): %s", what,
                     collie_result_string(poisoned), comm->poison_msg);
}

/* Ends the records of w, which will never run. */
static void
work_skipped(collie_comm_t *comm, collie_work_t *w)
{
  if (w->group)
    collie__group_skipped(comm, w->group);
  else
    collie__dispatch_skipped(comm, &w->op);
}

/* Fails w fast (the communicator failed before its turn). */
static collie_result_t
work_skip(collie_comm_t *comm, collie_work_t *w)
{
  collie_result_t rc = work_fail_fast(comm, w);
  work_skipped(comm, w);
  return rc;
}

/* work_skip (fail = 1) or work_skipped for a blocking op or group that has
 * no work item: the rare path builds one. */
static collie_result_t
work_skip_now(collie_comm_t *comm, const struct collie__op *op, struct collie__group *g, int fail)
{
  struct collie_work tmp = {.group = g};
  if (op) tmp.op = *op;
  if (fail) return work_skip(comm, &tmp);
  work_skipped(comm, &tmp);
  return COLLIE_SUCCESS;
}

/* w is done with rc (its message in the thread's slot). */
static void
work_end(collie_work_t *w, collie_result_t rc)
{
  pthread_mutex_lock(&w->lock);
  w->rc = rc;
  if (rc != COLLIE_SUCCESS) snprintf(w->msg, sizeof(w->msg), "%s", collie__err_msg());
  w->state = WORK_DONE;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

/* Runs w on the thread that owns the net. Returns 1 when w was posted (a
 * send or receive, now on the posted list, which holds the queue's
 * reference), else 0 (w is done). */
static int
work_run(collie_comm_t *comm, collie_work_t *w)
{
  collie_result_t rc;
  pthread_mutex_lock(&w->lock);
  w->state = WORK_RUNNING;
  w->deadline_ns = collie__deadline_after_ms(w->timeout_ms);
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
  collie__err_clear();
  if (collie__comm_poisoned(comm) != COLLIE_SUCCESS) {
    rc = work_skip(comm, w);
  } else if (w->group) {
    rc = collie__group_run(comm, w->group, w->timeout_ms);
  } else if (collie__dispatch_postable(&w->op)) {
    rc = collie__dispatch_post(comm, &w->op, collie__dispatch_now(&w->op));
    if (rc == COLLIE_SUCCESS) {
      struct collie__workq *q = comm->workq;
      pthread_mutex_lock(&w->lock);
      w->posted = 1;
      w->deadline_ns = w->op.call.deadline_ns;
      pthread_cond_broadcast(&w->cond); /* a waiter now drives it (collie_wait) */
      pthread_mutex_unlock(&w->lock);
      w->next = q->posted;
      q->posted = w;
      return 1;
    }
  } else {
    rc = collie__dispatch_run(comm, &w->op, collie__dispatch_now(&w->op));
  }
  work_end(w, rc);
  return 0;
}

/* Ends the posted items that are done, on the thread that owns the net:
 * with their result, the net's failure, or TIMEOUT once their deadline
 * passed (which fails the net, as a blocking wait's timeout does). */
static void
work_reap(collie_comm_t *comm)
{
  struct collie__workq *q = comm->workq;
  if (!q || !q->posted) return;
  int64_t now = collie__now_ns();
  for (collie_work_t **wp = &q->posted, *w; (w = *wp) != NULL;) {
    struct collie__req *reqs[2];
    int k = collie__p2p_reqs(&w->op.p2p, reqs), done = 1;
    collie_result_t rc = COLLIE_SUCCESS;
    for (int i = 0; i < k; i++) {
      if (!reqs[i]->done)
        done = 0;
      else if (reqs[i]->rc != COLLIE_SUCCESS)
        rc = reqs[i]->rc;
    }
    if ((!done || rc != COLLIE_SUCCESS) &&
        (rc = collie__net_failure(comm->net)) != COLLIE_SUCCESS) {
      done = 1; /* the net failed: its message is the thread's now */
    } else if (!done && now >= w->op.call.deadline_ns) {
      collie__err(COLLIE_TIMEOUT, "timed out: its deadline passed while it was posted");
      collie__net_give_up(comm->net, COLLIE_TIMEOUT);
      rc = COLLIE_TIMEOUT;
      done = 1;
    }
    if (!done) {
      wp = &w->next;
      continue;
    }
    *wp = w->next;
    w->next = NULL;
    work_end(w, collie__dispatch_posted_end(comm, &w->op, rc));
    work_unref(w); /* the queue's reference */
  }
}

/* Takes the net for this thread: when nothing runs (block: waits until
 * then) and, unless block, nothing is queued either (the worker will run
 * it, and progress the net meanwhile). Returns 1 when taken. */
static int
work_own(struct collie__workq *q, int block)
{
  pthread_mutex_lock(&q->lock);
  if (block) {
    q->owners_waiting++; /* ahead of waiters that drive posted items in slices */
    while (q->busy) work_cond_wait(&q->idle, &q->lock, collie__now_ns() + 10000000);
    q->owners_waiting--;
  }
  int mine = !q->busy && (block || (!q->head && !q->owners_waiting));
  if (mine) q->busy = 1;
  pthread_mutex_unlock(&q->lock);
  return mine;
}

/* Reaps, then hands the net back to the worker. */
static void
work_release(collie_comm_t *comm)
{
  struct collie__workq *q = comm->workq;
  work_reap(comm);
  pthread_mutex_lock(&q->lock);
  q->busy = 0;
  pthread_cond_broadcast(&q->idle);
  if (q->head || q->stop) pthread_cond_signal(&q->wake);
  pthread_mutex_unlock(&q->lock);
}

/* A waiter (or tester: until_ns 0) of the posted item w drives the net
 * itself when nothing else owns it: until w is done, until_ns (a soft limit:
 * the op goes on) or w's own deadline (which fails it). When another
 * thread owns the net, a waiter naps 1 ms on w->cond instead (the owner
 * reaps w) and looks again. Called with w->lock held; returns with it held. */
static void
work_drive(collie_work_t *w, int64_t until_ns)
{
  collie_comm_t *comm = w->comm;
  struct collie__workq *q = comm->workq;
  if (w->state != WORK_RUNNING || !work_own(q, 0)) {
    if (until_ns && w->state != WORK_DONE)
      work_cond_wait(&w->cond, &w->lock, collie__now_ns() + 1000000);
    return;
  }
  pthread_mutex_unlock(&w->lock);
  if (w->state == WORK_RUNNING) { /* still posted (only the owner reaps) */
    struct collie__req *reqs[2];
    int k = collie__p2p_reqs(&w->op.p2p, reqs);
    /* In slices of 10 ms: between them a blocking call of the issuing
     * thread may take the net (its own work may be what w waits for). */
    int64_t slice = collie__now_ns() + 10000000;
    if (until_ns > slice) until_ns = slice;
    if (!until_ns)
      (void)collie__net_poll(comm->net);
    else if (until_ns >= w->op.call.deadline_ns)
      (void)collie__net_wait(comm->net, reqs, k, w->op.call.deadline_ns);
    else
      (void)collie__net_wait_soft(comm->net, reqs, k, until_ns);
  }
  work_release(comm); /* reaps w if it is done */
  pthread_mutex_lock(&w->lock);
}

static void *
work_main(void *arg)
{
  collie_comm_t *comm = arg;
  struct collie__workq *q = comm->workq;
  collie__log_context(comm->ctx);
  pthread_mutex_lock(&q->lock);
  for (;;) {
    while ((!q->head || q->busy) && !q->stop) pthread_cond_wait(&q->wake, &q->lock);
    if (q->busy) { /* stopping while a waiter runs the last item */
      pthread_cond_wait(&q->wake, &q->lock);
      continue;
    }
    collie_work_t *w = q->head;
    if (!w) break; /* stopping, and nothing left */
    q->head = w->next;
    if (!q->head) q->tail = NULL;
    q->busy = 1;
    pthread_mutex_unlock(&q->lock);
    if (!work_run(comm, w)) work_unref(w); /* the queue's reference */
    work_reap(comm);
    pthread_mutex_lock(&q->lock);
    q->busy = 0;
    q->pending--;
    pthread_cond_broadcast(&q->idle);
  }
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

/* Creates comm's queue and starts its worker. */
static collie_result_t
work_start(collie_comm_t *comm)
{
  struct collie__workq *q = calloc(1, sizeof(*q));
  if (!q) return collie__err(COLLIE_SYSTEM_ERROR, "out of memory creating the work queue");
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->wake, NULL);
  work_cond_init(&q->idle);
  comm->workq = q;
  int e = pthread_create(&q->thread, NULL, work_main, comm);
  if (e) {
    comm->workq = NULL;
    pthread_cond_destroy(&q->idle);
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->lock);
    free(q);
    errno = e;
    return collie__err_errno(COLLIE_SYSTEM_ERROR, "starting the communicator's worker thread");
  }
  return COLLIE_SUCCESS;
}

/* ---- Issue ---- */

collie_result_t
collie__work_issue(collie_comm_t *comm, struct collie__op *op, struct collie__group *g,
                   collie_work_t **work)
{
  collie_result_t rc;
  if (!work) {
    /* Blocking: wait for the queue to be empty (this call's turn), then run
     * here. With nothing pending this is one lock-free check. */
    if (comm->workq && (rc = collie__work_drain(comm, comm->timeout_ms)) != COLLIE_SUCCESS) {
      collie__err_prefix("%s issued behind async work",
                         op ? collie__kind_name(op->call.kind) : "group");
      collie__comm_poison(comm, rc);
      work_skip_now(comm, op, g, 0);
      return rc;
    }
    if (collie__comm_poisoned(comm) != COLLIE_SUCCESS) return work_skip_now(comm, op, g, 1);
    if (!comm->workq) {
      if (g) return collie__group_run(comm, g, comm->timeout_ms);
      /* Nothing ran since issue: its timestamp still holds (one clock read less). */
      return collie__dispatch_run(comm, op, op->t_issue);
    }
    /* Posted items may be progressed by a waiter on another thread: own
     * the net while this call runs. */
    work_own(comm->workq, 1);
    rc = g ? collie__group_run(comm, g, comm->timeout_ms)
           : collie__dispatch_run(comm, op, collie__dispatch_now(op));
    if (rc == COLLIE_SUCCESS) {
      work_release(comm);
      return rc;
    }
    char why[COLLIE_ERRMSG_LEN]; /* reaping may end posted items with messages of their own */
    snprintf(why, sizeof(why), "%s", collie__err_msg());
    work_release(comm);
    collie__err_set_text(why);
    return rc;
  }

  /* The op already took its sequence number: failing to queue it leaves
   * this rank out of step with the others, so it poisons. */
  if (!comm->workq && (rc = work_start(comm)) != COLLIE_SUCCESS)
    return collie__comm_poison(comm, rc);
  collie_work_t *w = work_alloc(2, WORK_QUEUED);
  if (!w) {
    collie__err(COLLIE_SYSTEM_ERROR, "out of memory allocating a work handle");
    return collie__comm_poison(comm, COLLIE_SYSTEM_ERROR);
  }
  if (g) {
    w->group = g;
    if (comm->group == g) comm->group = NULL; /* the next group_start makes a new record */
    w->timeout_ms = comm->timeout_ms;
  } else {
    w->op = *op;
    w->timeout_ms = op->timeout_ms;
  }
  w->comm = comm;
  struct collie__workq *q = comm->workq;
  pthread_mutex_lock(&q->lock);
  if (q->tail)
    q->tail->next = w;
  else
    q->head = w;
  q->tail = w;
  q->pending++;
  pthread_cond_signal(&q->wake);
  pthread_mutex_unlock(&q->lock);
  *work = w;
  return COLLIE_SUCCESS;
}

collie_work_t *
collie__work_completed(void)
{
  return work_alloc(1, WORK_DONE); /* rc 0: success; the caller's reference alone */
}

collie_result_t
collie__work_drain(collie_comm_t *comm, int64_t quiet_ms)
{
  struct collie__workq *q = comm->workq;
  if (!q) return COLLIE_SUCCESS;
  pthread_mutex_lock(&q->lock);
  size_t last = q->pending;
  int64_t deadline = collie__deadline_after_ms(quiet_ms);
  while (q->pending) {
    if (q->pending < last) { /* progress: the bound is per operation, not for the whole queue */
      last = q->pending;
      deadline = collie__deadline_after_ms(quiet_ms);
    }
    if (collie__now_ns() >= deadline) {
      size_t n = q->pending;
      pthread_mutex_unlock(&q->lock);
      return collie__err(COLLIE_TIMEOUT, "%zu queued async operations made no progress for %lld ms",
                         n, (long long)quiet_ms);
    }
    work_cond_wait(&q->idle, &q->lock, deadline);
  }
  pthread_mutex_unlock(&q->lock);
  return COLLIE_SUCCESS;
}

void
collie__work_finish_posted(collie_comm_t *comm)
{
  struct collie__workq *q = comm->workq;
  if (!q) return;
  work_own(q, 1);
  while (q->posted) {
    collie_work_t *w = q->posted;
    struct collie__req *reqs[2];
    int k = collie__p2p_reqs(&w->op.p2p, reqs);
    if (collie__net_failure(comm->net) == COLLIE_SUCCESS)
      (void)collie__net_wait(comm->net, reqs, k, w->op.call.deadline_ns);
    work_reap(comm);
    if (q->posted == w) break; /* cannot happen: its wait ended it or failed the net */
  }
  work_release(comm);
}

void
collie__work_own_net(collie_comm_t *comm)
{
  if (comm->workq) work_own(comm->workq, 1);
}

void
collie__work_release_net(collie_comm_t *comm)
{
  if (!comm->workq) return;
  char why[COLLIE_ERRMSG_LEN]; /* the caller's, which reaping must not replace */
  snprintf(why, sizeof(why), "%s", collie__err_msg());
  work_release(comm);
  collie__err_set_text(why);
}

void
collie__work_stop(collie_comm_t *comm)
{
  struct collie__workq *q = comm->workq;
  if (!q) return;
  pthread_mutex_lock(&q->lock);
  q->stop = 1;
  pthread_cond_signal(&q->wake);
  pthread_mutex_unlock(&q->lock);
  pthread_join(q->thread, NULL);
  comm->workq = NULL;
  pthread_cond_destroy(&q->idle);
  pthread_cond_destroy(&q->wake);
  pthread_mutex_destroy(&q->lock);
  free(q);
}

/* ---- Handles ---- */

/* Hands a finished handle's result to the caller's thread. Called locked. */
static collie_result_t
work_result(collie_work_t *w)
{
  if (w->rc != COLLIE_SUCCESS) collie__err_set_text(w->msg);
  return w->rc;
}

/* A waiter whose operation is next in line and not yet taken runs it itself:
 * issue-then-wait (every blocking torch.distributed call, a send or recv that
 * is waited on at once) then costs no hop to the worker thread and back,
 * which on a busy machine is most of a small operation's time. Only one
 * thread runs operations at a time still (busy), and issue order holds: the
 * item is the head of the queue. Called with w->lock held and w QUEUED, so
 * the item has not started and its communicator is alive (destroy drains
 * the queue). Only for waits without a timeout (collie_wait(w, -1)). Returns
 * with w->lock held; 1 when it ran w. */
static int
work_claim_and_run(collie_work_t *w)
{
  collie_comm_t *comm = w->comm;
  struct collie__workq *q = comm ? comm->workq : NULL;
  if (!q) return 0;
  pthread_mutex_lock(&q->lock);
  int mine = q->head == w && !q->busy;
  if (mine) {
    q->head = w->next;
    if (!q->head) q->tail = NULL;
    q->busy = 1;
  }
  pthread_mutex_unlock(&q->lock);
  if (!mine) return 0;
  pthread_mutex_unlock(&w->lock);
  if (!work_run(comm, w)) work_unref(w); /* the queue's reference; the caller holds its own */
  work_reap(comm);
  pthread_mutex_lock(&q->lock);
  q->busy = 0;
  q->pending--;
  pthread_cond_broadcast(&q->idle);
  if (q->head || q->stop) pthread_cond_signal(&q->wake);
  pthread_mutex_unlock(&q->lock);
  pthread_mutex_lock(&w->lock);
  return 1;
}

collie_result_t
collie_wait(collie_work_t *work, int64_t timeout_ms)
{
  if (!work) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_wait: work is NULL");
  collie_result_t rc;
  int64_t deadline = timeout_ms >= 0 ? collie__deadline_after_ms(timeout_ms) : INT64_MAX;
  pthread_mutex_lock(&work->lock);
  /* Only a wait without a timeout of its own may run the operation: once
   * running it ends at its own deadline, which a shorter wait must not
   * outlast. */
  if (work->state == WORK_QUEUED && timeout_ms < 0) work_claim_and_run(work);
  for (;;) {
    if (work->state == WORK_DONE) {
      rc = work_result(work);
      break;
    }
    int64_t until = deadline;
    /* Until the op's own deadline: known once it runs; while it is queued,
     * the ops ahead of it are bounded by theirs. */
    if (timeout_ms < 0 && work->state == WORK_RUNNING) until = work->deadline_ns + WORK_GRACE_NS;
    if (collie__now_ns() >= until) {
      rc = collie__err(COLLIE_TIMEOUT,
                       "collie_wait: the operation is still %s after %s (it goes on: wait again "
                       "or free the handle)",
                       work->state == WORK_RUNNING ? "running" : "queued",
                       timeout_ms >= 0 ? "the timeout" : "its own deadline");
      break;
    }
    if (work->posted) { /* no one may be progressing it: this thread does, if it can */
      work_drive(work, timeout_ms >= 0 ? deadline : INT64_MAX);
      continue;
    }
    work_cond_wait(&work->cond, &work->lock, until);
  }
  pthread_mutex_unlock(&work->lock);
  return rc;
}

collie_result_t
collie_test(collie_work_t *work)
{
  if (!work) return collie__err(COLLIE_INVALID_ARGUMENT, "collie_test: work is NULL");
  collie_result_t rc = COLLIE_IN_PROGRESS;
  pthread_mutex_lock(&work->lock);
  if (work->state == WORK_RUNNING && work->posted) work_drive(work, 0);
  if (work->state == WORK_DONE) rc = work_result(work);
  pthread_mutex_unlock(&work->lock);
  return rc;
}

void
collie_work_free(collie_work_t *work)
{
  if (work) work_unref(work);
}
