/*
 * cbench_model.c - collie-bench --model: what collie would pick, and the
 * cost model's time of every algorithm, for communicators too big to run
 * here (8 to 4096 ranks at --per-host ranks a host), under two sets of
 * constants: this machine's (the built-in defaults, or COLLIE_TUNING_FILE's)
 * and a datacenter's network between hosts (--net ALPHA_US,GBPS; default
 * 5 us and 25 GB/s), keeping this machine's shared memory inside a host.
 * Nothing is measured and no communicator is made: a user with a thousand
 * ranks reads the pick before the job runs (docs/performance.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbench.h"
#include "core/introspect.h"

/* The models of one table: name, and the constants. */
struct model_set {
  const char *name;
  struct collie__models m;
};

static void
model_print_constants(FILE *f, const struct model_set *s)
{
  fprintf(f, "# model \"%s\":", s->name);
  for (int i = 0; i < collie__net_class_count() && i < COLLIE_CLASS_MAX; i++)
    fprintf(f, " %s alpha %.3g us, beta %.3g us/B (%.3g GB/s)%s", collie__net_class_name(i),
            s->m.cls[i].alpha_us, s->m.cls[i].beta_us,
            s->m.cls[i].beta_us > 0 ? 1e-3 / s->m.cls[i].beta_us : 0.0,
            i + 1 < collie__net_class_count() ? ";" : "");
  fprintf(f, "\n");
}

/* One line per (collective, ranks, size): hosts, the pick, then every
 * algorithm that can run it with its time. */
static int
model_table(FILE *f, const struct cb_opts *o, const struct model_set *s, int per_host,
            int max_ranks)
{
  model_print_constants(f, s);
  fprintf(f, "# %-14s %6s %6s %12s  %-20s %12s  all algorithms (us)\n", "collective", "ranks",
          "hosts", "bytes", "pick", "time_us");
  size_t es = collie_dtype_size(o->dtype);
  for (int c = 0; c < CB_NCOLL; c++) {
    /* alltoallv's cost comes from its counts, which a size does not give
     * (the model prices it by latency alone): cb_model_main notes it. */
    if (!o->ops[c] || c == CB_SENDRECV || c == CB_ALLTOALLV) continue;
    int kind = cb_coll_kind(c);
    if (kind <= 0) continue;
    for (int p = per_host; p <= max_ranks; p *= 2) {
      struct collie__topo topo;
      if (collie__topo_uniform(p, per_host, &topo) != COLLIE_SUCCESS) return -1;
      for (size_t b = o->minbytes; b <= o->maxbytes;) {
        struct cb_shape sh;
        if (cb_shape(c, c == CB_BARRIER ? 0 : b, p, es, &sh)) {
          double cost[COLLIE_ALGO_COUNT_];
          const struct collie__algo *pick =
              collie__algo_predict(kind, &topo, sh.count, o->dtype, &s->m, cost);
          fprintf(f, "%-16s %6d %6d %12zu  %-20s %12.1f ", cb_coll_name(c), p, topo.nhosts,
                  sh.bytes, pick ? pick->name : "-", pick ? cost[pick->id] : -1.0);
          for (int a = 0; a < COLLIE_ALGO_COUNT_; a++)
            if (cost[a] >= 0) fprintf(f, " %s=%.1f", cb_algo_name(a), cost[a]);
          fprintf(f, "\n");
        }
        if (c == CB_BARRIER) break;
        size_t next = (size_t)((double)b * o->stepfactor);
        if (next <= b) break;
        b = next;
      }
      collie__topo_free(&topo);
    }
  }
  return 0;
}

int
cb_model_main(const struct cb_opts *o, int per_host, int max_ranks, double net_alpha_us,
              double net_gbps)
{
  struct model_set here = {.name = "here"}, dc = {.name = "datacenter"};
  collie__models_default(&here.m, 0);
  const char *tuning = getenv("COLLIE_TUNING_FILE");
  if (tuning && *tuning && collie__models_load(tuning, &here.m) != COLLIE_SUCCESS) {
    fprintf(stderr, "collie-bench: --model: %s\n", collie_last_error());
    return 3;
  }
  collie__models_free(&here.m); /* class constants only: fit lines are per measured size */
  memcpy(dc.m.cls, here.m.cls, sizeof(dc.m.cls));
  int net = collie__net_class_remote();
  dc.m.cls[net].alpha_us = net_alpha_us;
  dc.m.cls[net].beta_us = 1e-3 / net_gbps;
  char name[64];
  snprintf(name, sizeof(name), "datacenter: %g us, %g GB/s between hosts", net_alpha_us, net_gbps);
  dc.name = name;
  printf("# collie-bench --model: the cost model's predictions at %d ranks per host (no "
         "measurement)\n",
         per_host);
  if (o->ops[CB_ALLTOALLV])
    printf("# note: alltoallv not modelled: its cost depends on the per-peer counts, not on a "
           "size\n");
  if (model_table(stdout, o, &here, per_host, max_ranks) ||
      model_table(stdout, o, &dc, per_host, max_ranks)) {
    fprintf(stderr, "collie-bench: --model: %s\n", collie_last_error());
    return 3;
  }
  return 0;
}
