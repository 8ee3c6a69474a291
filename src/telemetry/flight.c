/*
 * flight.c - the flight recorder: the last N operations of one rank of one
 * communicator, kept in a fixed ring so that a hang can be explained after
 * the fact (which op, which sequence number, which state), and the SIGUSR1
 * watcher that dumps every live recorder of the process on demand.
 *
 * Concurrency. The issuing thread writes new records (collie__flight_queued)
 * while the comm's worker thread moves older ones forward
 * (collie__flight_state), and a dump may read any record at any time. So a
 * record has two halves, each with one writer and a version word used as a
 * seqlock: what the issuer knows (the op, its id, when it was queued) and
 * what the runner knows (state and times, with the id they belong to). A
 * writer makes its version odd, stores, and makes it even again, all plain
 * release stores: one writer per half needs no locked instruction. A
 * blocking call costs about fifteen plain stores: its issuer's half says it
 * started at issue, and its completion is one more word of that half
 * (t_end); the runner's half is written only for calls that run on the
 * worker, or fail. The runner's half belongs to the record only while its id matches the
 * issuer's: at wraparound the issuer may refill a slot whose op is still
 * running, and the reader then shows the new op as queued (or started, if
 * it started at issue). One writer per
 * half holds because one thread issues on a communicator at a time
 * (collie.h), ops run in issue order, and the issuer writes a runner half
 * only for a call that runs at once on its own thread, when no worker runs.
 * A reader copies a half and retries when its version moved or was odd.
 * Every field is an atomic, so ThreadSanitizer sees each access as what it
 * is. Nothing here allocates or takes a lock after collie__flight_new.
 *
 * File per communicator. A process may hold several communicators (world and
 * splits), and its rank differs between them, so each recorder dumps to its
 * own file, dir/flight-rank{rank}-{comm hash as 16 hex digits}.json; the file
 * names never collide and each dump stays one atomic rename. collie-report
 * groups the files by the "comm" field.
 *
 * Wall clock: records keep monotonic nanoseconds (ordering, durations);
 * the dump converts them to ISO 8601 UTC with the offset between the two
 * clocks measured at dump time.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "telemetry/telemetry.h"
#include "util/error.h"
#include "util/util.h"

/* Field stores are releases (each is ordered after the writer's odd version)
 * and field loads acquires (each is ordered before the reader's second look
 * at the version): on x86 both are plain moves, where sequentially consistent
 * stores cost a locked instruction each, and a record has fifteen, on every
 * operation's hot path. No fences: ThreadSanitizer does not model them. */
#define FL_LD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define FL_ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* One operation: the issuer's half, then the runner's (see above). Every
 * field is read and written atomically. */
struct flight_rec {
  uint64_t ver; /* seqlock of the issuer's half: odd while it writes */
  int64_t id;   /* -1: never written */
  uint32_t seq;
  /* 1: started at issue (a call that runs at once on the issuing thread):
   * STARTED at t_queued until the runner's half, written when it is done,
   * says more. One store where writing the runner's half at issue took seven,
   * and at two ranks every store of a small call may queue behind the
   * ring's cross-core line (the recorder was a fifth of a 2-rank 8-byte
   * broadcast). */
  int started;
  /* When a call started at issue completed (0: not yet). Its issuing
   * thread also ran it, so it writes this one word
   * (collie__flight_end_at_issue), outside the version: readers see 0 or the
   * time, both true of the op the version vouches for (a refill of the slot
   * zeroes it inside the version). Failures still write the runner's half,
   * which names the state. */
  int64_t t_end;
  const char *kind, *dtype, *op, *algo;
  uint64_t count, bytes;
  int root;
  int64_t t_queued;
  uint64_t run_ver; /* seqlock of the runner's half */
  int64_t run_id;   /* the op the fields below describe */
  int state;
  const char *run_algo; /* set at STARTED, or NULL: keep algo */
  int64_t t_started, t_done;
};

struct collie__flight {
  int capacity, rank, size; /* capacity: operations a dump shows (COLLIE_FR_SIZE) */
  uint64_t comm_hash;
  int *world;        /* each rank's world rank, or NULL (collie__flight_set_world) */
  int *host_of;      /* [size] each rank's host, an index of host_names, or NULL */
  char **host_names; /* [nhosts], one allocation with host_of's names after the pointers */
  int nhosts;
  int64_t next_id; /* atomic: ids handed out so far */
  /* The ring holds the next power of two of capacity records, so that an
   * id's record is id & mask: a 64-bit division per record update was a
   * quarter of a one-rank broadcast. */
  int64_t mask;
  struct flight_rec *recs;
};

struct collie__flight *
collie__flight_new(int capacity, int rank, int size, uint64_t comm_hash)
{
  if (capacity < 1) capacity = 1;
  struct collie__flight *fr = calloc(1, sizeof(*fr));
  if (!fr) return NULL;
  size_t slots = 1;
  while (slots < (size_t)capacity) slots *= 2;
  fr->recs = calloc(slots, sizeof(*fr->recs));
  if (!fr->recs) {
    free(fr);
    return NULL;
  }
  for (size_t i = 0; i < slots; i++) fr->recs[i].id = fr->recs[i].run_id = -1;
  fr->mask = (int64_t)slots - 1;
  fr->capacity = capacity;
  fr->rank = rank;
  fr->size = size;
  fr->comm_hash = comm_hash;
  return fr;
}

void
collie__flight_free(struct collie__flight *fr)
{
  if (!fr) return;
  free(fr->world);
  free(fr->host_of);
  free(fr->host_names);
  free(fr->recs);
  free(fr);
}

void
collie__flight_set_world(struct collie__flight *fr, const int *world)
{
  if (!fr || fr->world) return;
  if (!(fr->world = malloc((size_t)fr->size * sizeof(*fr->world)))) return;
  memcpy(fr->world, world, (size_t)fr->size * sizeof(*fr->world));
}

void
collie__flight_set_hosts(struct collie__flight *fr, const int *host_of, int nhosts,
                         const char *const *names)
{
  if (!fr || fr->host_of || nhosts < 1) return;
  size_t bytes = (size_t)nhosts * sizeof(char *);
  for (int h = 0; h < nhosts; h++) bytes += strcspn(names[h], "/") + 1;
  fr->host_of = malloc((size_t)fr->size * sizeof(*fr->host_of));
  fr->host_names = malloc(bytes);
  if (!fr->host_of || !fr->host_names) {
    free(fr->host_of);
    free(fr->host_names);
    fr->host_of = NULL;
    fr->host_names = NULL;
    return;
  }
  memcpy(fr->host_of, host_of, (size_t)fr->size * sizeof(*fr->host_of));
  char *at = (char *)(fr->host_names + nhosts);
  for (int h = 0; h < nhosts; h++) {
    size_t n = strcspn(names[h], "/");
    memcpy(at, names[h], n);
    at[n] = '\0';
    fr->host_names[h] = at;
    at += n + 1;
  }
  fr->nhosts = nhosts;
}

/* A half's single writer: odd version, stores, even version. */
static void
flight_begin(uint64_t *ver)
{
  FL_ST(ver, FL_LD(ver) + 1);
}

static void
flight_end(uint64_t *ver)
{
  FL_ST(ver, FL_LD(ver) + 1);
}

/* The runner's half of r for op id (caller: its one writer). */
static void
flight_run_write(struct flight_rec *r, int64_t id, int state, const char *algo, int64_t started,
                 int64_t done)
{
  flight_begin(&r->run_ver);
  FL_ST(&r->run_id, id);
  FL_ST(&r->state, state);
  FL_ST(&r->run_algo, algo);
  FL_ST(&r->t_started, started);
  FL_ST(&r->t_done, done);
  flight_end(&r->run_ver);
}

int64_t
collie__flight_queued(struct collie__flight *fr, const struct collie__flight_op *op)
{
  return collie__flight_queued_at(fr, op, collie__now_ns());
}

int64_t
collie__flight_queued_at(struct collie__flight *fr, const struct collie__flight_op *op, int64_t now)
{
  return op ? collie__flight_queued_as(fr, op, op->seq, op->started, now) : -1;
}

int64_t
collie__flight_queued_as(struct collie__flight *fr, const struct collie__flight_op *shape,
                         uint32_t seq, int started, int64_t now)
{
  if (!fr || !shape) return -1;
  int64_t id = __atomic_load_n(&fr->next_id, __ATOMIC_RELAXED);
  __atomic_store_n(&fr->next_id, id + 1, __ATOMIC_RELAXED);
  struct flight_rec *r = &fr->recs[id & fr->mask];
  flight_begin(&r->ver);
  FL_ST(&r->id, id);
  FL_ST(&r->seq, seq);
  FL_ST(&r->started, started != 0);
  FL_ST(&r->kind, shape->kind);
  FL_ST(&r->dtype, shape->dtype);
  FL_ST(&r->op, shape->op);
  FL_ST(&r->algo, shape->algo);
  FL_ST(&r->count, (uint64_t)shape->count);
  FL_ST(&r->bytes, (uint64_t)shape->bytes);
  FL_ST(&r->root, shape->root);
  FL_ST(&r->t_queued, now);
  FL_ST(&r->t_end, 0);
  flight_end(&r->ver);
  return id;
}

void
collie__flight_state(struct collie__flight *fr, int64_t id, int state, const char *algo)
{
  collie__flight_state_at(fr, id, state, algo, collie__now_ns());
}

void
collie__flight_state_at(struct collie__flight *fr, int64_t id, int state, const char *algo,
                        int64_t now)
{
  if (!fr || id < 0 || state < COLLIE_FR_STARTED || state > COLLIE_FR_FAILED) return;
  struct flight_rec *r = &fr->recs[id & fr->mask];
  if (FL_LD(&r->id) != id) return; /* overwritten by a newer op: nothing to update */
  if (state == COLLIE_FR_STARTED) {
    flight_run_write(r, id, state, algo, now, 0);
    return;
  }
  /* Done: keeps what STARTED wrote, or the issue time of a call started at
   * issue (an op may finish without having started, e.g. skipped after a
   * failure: then it has no start time). */
  int mine = FL_LD(&r->run_id) == id;
  int64_t started = mine ? FL_LD(&r->t_started) : FL_LD(&r->started) ? FL_LD(&r->t_queued) : 0;
  flight_run_write(r, id, state, algo ? algo : mine ? FL_LD(&r->run_algo) : NULL, started, now);
}

void
collie__flight_end_at_issue(struct collie__flight *fr, int64_t id, int64_t now)
{
  if (id < 0) return;
  struct flight_rec *r = &fr->recs[id & fr->mask];
  if (FL_LD(&r->id) == id) FL_ST(&r->t_end, now); /* else overwritten by a newer op */
}

/* A snapshot of one record. */
struct flight_view {
  int64_t id;
  uint32_t seq;
  int started; /* at issue */
  int64_t t_end;
  int state;
  const char *kind, *dtype, *op, *algo;
  uint64_t count, bytes;
  int root;
  int64_t t_queued, t_started, t_done;
};

/* Copies record slot into out; 0 when it holds operation `id` consistently. */
static int
flight_read(struct collie__flight *fr, int64_t id, struct flight_view *out)
{
  struct flight_rec *r = &fr->recs[id & fr->mask];
  int have = 0;
  for (int tries = 0; tries < 1000 && !have; tries++) {
    uint64_t v1 = FL_LD(&r->ver);
    if (v1 & 1) {
      collie__cpu_relax();
      continue;
    }
    out->id = FL_LD(&r->id);
    out->seq = FL_LD(&r->seq);
    out->started = FL_LD(&r->started);
    out->kind = FL_LD(&r->kind);
    out->dtype = FL_LD(&r->dtype);
    out->op = FL_LD(&r->op);
    out->algo = FL_LD(&r->algo);
    out->count = FL_LD(&r->count);
    out->bytes = FL_LD(&r->bytes);
    out->root = FL_LD(&r->root);
    out->t_queued = FL_LD(&r->t_queued);
    out->t_end = FL_LD(&r->t_end);
    have = FL_LD(&r->ver) == v1;
  }
  /* A writer kept it busy: leave it out rather than print a torn record. */
  if (!have || out->id != id) return -1;
  out->state = out->t_end     ? COLLIE_FR_COMPLETED
               : out->started ? COLLIE_FR_STARTED
                              : COLLIE_FR_QUEUED;
  out->t_started = out->started ? out->t_queued : 0;
  out->t_done = out->t_end;
  for (int tries = 0; tries < 1000; tries++) {
    uint64_t v1 = FL_LD(&r->run_ver);
    if (v1 & 1) {
      collie__cpu_relax();
      continue;
    }
    int64_t rid = FL_LD(&r->run_id);
    int state = FL_LD(&r->state);
    const char *ralgo = FL_LD(&r->run_algo);
    int64_t ts = FL_LD(&r->t_started), td = FL_LD(&r->t_done);
    if (FL_LD(&r->run_ver) != v1) continue;
    if (rid == id) { /* else the runner's half still describes an older op */
      out->state = state;
      if (ralgo) out->algo = ralgo;
      out->t_started = ts;
      out->t_done = td;
    }
    return 0;
  }
  return -1;
}

static const char *const flight_state_names[] = {"queued", "started", "completed", "failed"};

/* Writes s as a JSON string (quoted, escaped); NULL becomes null. */
static void
flight_json_str(FILE *f, const char *s)
{
  if (!s) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* ISO 8601 UTC with microseconds for a wall-clock time in ns. */
static void
flight_iso(char *buf, size_t len, int64_t wall_ns)
{
  time_t secs = (time_t)(wall_ns / 1000000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char day[32];
  strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
  collie__fmt(buf, len, "%s.%06dZ", day, (int)((wall_ns % 1000000000) / 1000));
}

static void
flight_time_field(FILE *f, const char *name, int64_t mono, int64_t offset)
{
  char iso[64];
  if (!mono) {
    fprintf(f, ",\"t_%s\":null,\"wall_%s\":null", name, name);
    return;
  }
  flight_iso(iso, sizeof(iso), mono + offset);
  fprintf(f, ",\"t_%s\":%lld,\"wall_%s\":\"%s\"", name, (long long)mono, name, iso);
}

static void
flight_write(struct collie__flight *fr, FILE *f, const char *reason, const char *error)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t mono = collie__now_ns();
  int64_t wall = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  int64_t offset = wall - mono;
  char iso[64];
  flight_iso(iso, sizeof(iso), wall);
  fprintf(f, "{\"version\":1,\"rank\":%d,\"size\":%d,\"comm\":\"%016llx\",\"reason\":", fr->rank,
          fr->size, (unsigned long long)fr->comm_hash);
  flight_json_str(f, reason);
  if (fr->world) {
    fputs(",\"world_ranks\":[", f);
    for (int r = 0; r < fr->size; r++) fprintf(f, "%s%d", r ? "," : "", fr->world[r]);
    fputc(']', f);
  }
  if (fr->host_of) {
    fputs(",\"hosts\":[", f);
    for (int h = 0; h < fr->nhosts; h++) {
      if (h) fputc(',', f);
      flight_json_str(f, fr->host_names[h]);
    }
    fputs("],\"host_of\":[", f);
    for (int r = 0; r < fr->size; r++) fprintf(f, "%s%d", r ? "," : "", fr->host_of[r]);
    fputc(']', f);
  }
  if (error && *error) {
    fputs(",\"error\":", f);
    flight_json_str(f, error);
  }
  fprintf(f, ",\"time\":\"%s\",\"t_now\":%lld,\"pid\":%ld,\"capacity\":%d,\"ops\":[", iso,
          (long long)mono, (long)getpid(), fr->capacity);
  int64_t next = FL_LD(&fr->next_id);
  int64_t first = next > fr->capacity ? next - fr->capacity : 0;
  int n = 0;
  for (int64_t id = first; id < next; id++) {
    struct flight_view r;
    if (flight_read(fr, id, &r) != 0) continue;
    int st = r.state >= 0 && r.state <= COLLIE_FR_FAILED ? r.state : 0;
    fprintf(f, "%s\n{\"id\":%lld,\"seq\":%u,\"kind\":", n++ ? "," : "", (long long)r.id,
            (unsigned)r.seq);
    flight_json_str(f, r.kind);
    fputs(",\"dtype\":", f);
    flight_json_str(f, r.dtype);
    fputs(",\"op\":", f);
    flight_json_str(f, r.op);
    fprintf(f, ",\"count\":%llu,\"bytes\":%llu,\"root\":%d,\"algo\":", (unsigned long long)r.count,
            (unsigned long long)r.bytes, r.root);
    flight_json_str(f, r.algo);
    fprintf(f, ",\"state\":\"%s\"", flight_state_names[st]);
    flight_time_field(f, "queued", r.t_queued, offset);
    flight_time_field(f, "started", r.t_started, offset);
    flight_time_field(f, "done", r.t_done, offset);
    fputc('}', f);
  }
  fputs("\n]}\n", f);
}

collie_result_t
collie__flight_dump(struct collie__flight *fr, const char *dir, const char *reason)
{
  return collie__flight_dump_error(fr, dir, reason, NULL);
}

collie_result_t
collie__flight_dump_error(struct collie__flight *fr, const char *dir, const char *reason,
                          const char *error)
{
  if (!fr) return collie__err(COLLIE_INVALID_ARGUMENT, "flight dump: no recorder");
  if (!dir || !*dir) dir = ".";
  if (collie__mkdir_one(dir) != 0)
    return collie__err_errno(COLLIE_SYSTEM_ERROR,
                             errno == ENOENT ? "flight dump: cannot create directory %s: its "
                                               "parent does not exist (COLLIE_LOG_DIR makes one "
                                               "level)"
                                             : "flight dump: cannot create directory %s",
                             dir);
  char path[4096], tmp[4200];
  collie__fmt(path, sizeof(path), "%s/flight-rank%d-%016llx.json", dir, fr->rank,
              (unsigned long long)fr->comm_hash);
  collie__fmt(tmp, sizeof(tmp), "%s/.flight-rank%d-%016llx.json.%ld.tmp", dir, fr->rank,
              (unsigned long long)fr->comm_hash, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return collie__err_errno(COLLIE_SYSTEM_ERROR, "flight dump: cannot create %s", tmp);
  flight_write(fr, f, reason ? reason : "user", error);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    collie_result_t rc =
        collie__err_errno(COLLIE_SYSTEM_ERROR, "flight dump: cannot write %s", tmp);
    unlink(tmp);
    return rc;
  }
  if (rename(tmp, path) != 0) {
    collie_result_t rc =
        collie__err_errno(COLLIE_SYSTEM_ERROR, "flight dump: cannot rename %s to %s", tmp, path);
    unlink(tmp);
    return rc;
  }
  return COLLIE_SUCCESS;
}

/* ---- SIGUSR1 watcher
 * ------------------------------------------------------------------ */

struct flight_watch {
  struct flight_watch *next;
  struct collie__flight *fr;
  char *dir;
};

/* flight_life_mu serializes watch and unwatch as a whole (thread start and
 * join); flight_mu, taken inside it and by the thread, guards the list. */
static pthread_mutex_t flight_life_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t flight_mu = PTHREAD_MUTEX_INITIALIZER;
static struct flight_watch *flight_watched; /* under flight_mu */
static pthread_t flight_thread;             /* running iff flight_watched != NULL */
static int flight_stop;                     /* atomic */
/* The self-pipe is made once and kept for the process's life, so a handler
 * still running on another thread after unwatch never writes to a closed or
 * reused descriptor. */
static int flight_pipe[2] = {-1, -1};
static struct sigaction flight_prev; /* the handler we replaced; chained to */
/* The process that owns the thread: a child forked later inherits the handler
 * and the pipe but not the thread, and must not wake its parent's. */
static pid_t flight_owner;
static int flight_chaining; /* atomic: inside the chained handler */

static void
flight_on_signal(int sig, siginfo_t *info, void *ctx)
{
  int saved = errno;
  int fd = __atomic_load_n(&flight_pipe[1], __ATOMIC_RELAXED);
  if (fd >= 0 && getpid() == __atomic_load_n(&flight_owner, __ATOMIC_RELAXED)) {
    ssize_t w = write(fd, "s", 1); /* full pipe: a dump is already pending */
    (void)w;
  }
  errno = saved;
  /* Chain to the program's own handler, so installing ours takes nothing away. The
   * guard breaks a loop: a handler installed after ours that chains back to us, and
   * that we later found in place and saved as ours to chain to. (Two threads taking
   * SIGUSR1 at the same instant may then chain once instead of twice.) */
  if (__atomic_exchange_n(&flight_chaining, 1, __ATOMIC_SEQ_CST)) return;
  if (flight_prev.sa_flags & SA_SIGINFO) {
    if (flight_prev.sa_sigaction) flight_prev.sa_sigaction(sig, info, ctx);
  } else if (flight_prev.sa_handler != SIG_DFL && flight_prev.sa_handler != SIG_IGN &&
             flight_prev.sa_handler) {
    flight_prev.sa_handler(sig);
  }
  __atomic_store_n(&flight_chaining, 0, __ATOMIC_SEQ_CST);
}

/* Dumps every watched recorder; called with flight_mu held, so unwatch (and
 * so the free that follows it) waits until the dump is written. */
static void
flight_dump_all(void)
{
  for (struct flight_watch *w = flight_watched; w; w = w->next) {
    if (collie__flight_dump(w->fr, w->dir, "SIGUSR1") != COLLIE_SUCCESS)
      collie__log(COLLIE_LOG_WARN, "INIT", "%s", collie__err_msg());
  }
}

static void *
flight_main(void *arg)
{
  (void)arg;
  while (!__atomic_load_n(&flight_stop, __ATOMIC_SEQ_CST)) {
    /* Sleeps in poll; the 1 s bound only makes the stop flag a fallback. */
    struct pollfd p = {.fd = flight_pipe[0], .events = POLLIN};
    int n = poll(&p, 1, 1000);
    if (n <= 0) continue;
    char buf[64];
    ssize_t got = read(flight_pipe[0], buf, sizeof(buf));
    int want_dump = 0;
    for (ssize_t i = 0; i < got; i++) want_dump |= buf[i] == 's';
    if (__atomic_load_n(&flight_stop, __ATOMIC_SEQ_CST)) break;
    if (want_dump) {
      pthread_mutex_lock(&flight_mu);
      flight_dump_all();
      pthread_mutex_unlock(&flight_mu);
    }
  }
  return NULL;
}

/* Installs the handler and starts the thread; flight_life_mu held. 0 on success. */
static int
flight_start(void)
{
  if (flight_pipe[0] < 0) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return -1;
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK);
    flight_pipe[0] = p[0];
    __atomic_store_n(&flight_pipe[1], p[1], __ATOMIC_RELAXED);
  }
  char junk[64]; /* a stop byte from an earlier watcher */
  while (read(flight_pipe[0], junk, sizeof(junk)) > 0) {
  }
  __atomic_store_n(&flight_stop, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&flight_owner, getpid(), __ATOMIC_RELAXED);
  /* The thread blocks every signal: the program's handlers run on its own threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&flight_thread, NULL, flight_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) return -1;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = flight_on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, NULL, &flight_prev);
  sigaction(SIGUSR1, &sa, NULL);
  return 0;
}

/* Restores the previous handler and joins the thread; flight_life_mu held,
 * flight_mu not (the thread takes it to dump). */
static void
flight_stop_thread(void)
{
  /* Restore only our own slot: a handler the program installed after ours stays. */
  struct sigaction now;
  if (sigaction(SIGUSR1, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) &&
      now.sa_sigaction == flight_on_signal)
    sigaction(SIGUSR1, &flight_prev, NULL);
  __atomic_store_n(&flight_stop, 1, __ATOMIC_SEQ_CST);
  ssize_t w = write(flight_pipe[1], "q", 1);
  (void)w;
  pthread_join(flight_thread, NULL);
}

void
collie__flight_watch(struct collie__flight *fr, const char *dir)
{
  if (!fr) return;
  char *copy = collie__strdup(dir && *dir ? dir : ".");
  if (!copy) return;
  pthread_mutex_lock(&flight_life_mu);
  pthread_mutex_lock(&flight_mu);
  for (struct flight_watch *w = flight_watched; w; w = w->next) {
    if (w->fr == fr) { /* idempotent: the latest directory wins */
      free(w->dir);
      w->dir = copy;
      copy = NULL;
      break;
    }
  }
  int first = flight_watched == NULL;
  pthread_mutex_unlock(&flight_mu);
  if (!copy) goto out_unlock;
  struct flight_watch *w = malloc(sizeof(*w));
  if (!w || (first && flight_start() != 0)) {
    collie__log(COLLIE_LOG_WARN, "INIT", "flight recorder: SIGUSR1 dumps unavailable");
    free(w);
    free(copy);
    goto out_unlock;
  }
  w->fr = fr;
  w->dir = copy;
  pthread_mutex_lock(&flight_mu);
  w->next = flight_watched;
  flight_watched = w;
  pthread_mutex_unlock(&flight_mu);
out_unlock:
  pthread_mutex_unlock(&flight_life_mu);
}

void
collie__flight_unwatch(struct collie__flight *fr)
{
  pthread_mutex_lock(&flight_life_mu);
  pthread_mutex_lock(&flight_mu);
  int found = 0;
  for (struct flight_watch **pw = &flight_watched; *pw; pw = &(*pw)->next) {
    if ((*pw)->fr == fr) {
      struct flight_watch *w = *pw;
      *pw = w->next;
      free(w->dir);
      free(w);
      found = 1;
      break;
    }
  }
  int last = found && !flight_watched;
  pthread_mutex_unlock(&flight_mu);
  if (last) flight_stop_thread();
  pthread_mutex_unlock(&flight_life_mu);
}
