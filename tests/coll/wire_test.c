/*
 * wire_test.c - the compressed allreduce (src/coll/wire.c,
 * docs/compression.md): float32 data with float16 or bfloat16 on the wire.
 *
 *   - the result is within the documented bound of the exact sum (computed
 *     in double from every rank's data, which each rank regenerates);
 *   - it went through the wire format: every value is representable in it;
 *   - every rank holds the very same bits;
 *   - the same through the hierarchical allreduce on several hosts, whose
 *     rails carry the wire format and whose hosts sum in float32;
 *   - misuse is refused by name (a format on a call it cannot apply to, a
 *     value out of range, another algorithm forced on a compressed call, a
 *     bad collie_config_t.wire), and the communicator stays usable;
 *   - the communicator's default (COLLIE_WIRE) applies where it can, leaves
 *     other calls exact, and opts->wire = NATIVE overrides it.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

/* Rank r's element i: magnitudes from 1e-3 to ~300, both signs, so that
 * both roundings (the inputs' and the result's) matter. */
static float
wire_value(int r, size_t i)
{
  uint32_t s = (uint32_t)(r + 1) * 2654435761u ^ (uint32_t)i * 40503u;
  s = s * 1664525u + 1013904223u;
  float mag = ldexpf(1.0f + (float)(s >> 9 & 0x3fff) / 16384.0f, (int)(s % 19) - 10);
  return (s >> 31) ? -mag : mag;
}

/* Whether f is exactly a value of the wire format. */
static int
wire_representable(int wire, float f)
{
  if (f == 0 || isinf(f)) return 1;
  if (wire == COLLIE_WIRE_BFLOAT16) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return (u & 0xffffu) == 0;
  }
  double a = fabs((double)f);
  if (a > 65504.0) return 0;
  int e;
  frexp(a, &e); /* a = m 2^e, 0.5 <= m < 1 */
  double scaled = a < ldexp(1, -14) ? ldexp(a, 24) : ldexp(a, 11 - e);
  return scaled == floor(scaled);
}

static uint64_t
wire_hash(const float *v, size_t n)
{
  uint64_t h = 1469598103934665603ull;
  const unsigned char *b = (const unsigned char *)v;
  for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

TEST_IMPL(wire_allreduce_bound)
{
  static const size_t counts[] = {0, 1, 7, 1000, 65537};
  static const int wires[] = {COLLIE_WIRE_FLOAT16, COLLIE_WIRE_BFLOAT16};
  static const collie_op_t ops[] = {COLLIE_SUM, COLLIE_AVG};
  collie_comm_t *comm = test_comm();
  int me = test_rank(), p = test_size();
  uint64_t *hashes = malloc((size_t)p * sizeof(uint64_t));
  ASSERT(hashes);
  for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
    for (int wi = 0; wi < 2; wi++)
      for (int oi = 0; oi < 2; oi++)
        for (int inplace = 0; inplace < 2; inplace++)
          for (int hier = 0; hier < 2; hier++) {
            size_t n = counts[ci];
            int wire = wires[wi];
            collie_op_t op = ops[oi];
            float *in = malloc((n + 1) * sizeof(float)), *out = malloc((n + 1) * sizeof(float));
            ASSERT(in && out);
            for (size_t i = 0; i < n; i++) in[i] = wire_value(me, i);
            /* hier: the hierarchical allreduce, float32 inside a host and the
             * wire over the rails (several hosts only: refused on one). */
            collie_opts_t o = {.wire = wire,
                               .algorithm = hier ? COLLIE_ALGO_HIERARCHICAL : COLLIE_ALGO_AUTO};
            if (inplace) memcpy(out, in, n * sizeof(float));
            collie_result_t rc =
                collie_allreduce(comm, inplace ? out : in, out, n, COLLIE_FLOAT32, op, &o, NULL);
            if (hier && rc == COLLIE_INVALID_ARGUMENT &&
                strstr(collie_last_error(), "cannot run this call")) {
              free(in);
              free(out);
              continue;
            }
            ASSERTF(rc == COLLIE_SUCCESS, "%s", collie_last_error());
            double u = wire == COLLIE_WIRE_FLOAT16 ? ldexp(1, -11) : ldexp(1, -8);
            double tiny = wire == COLLIE_WIRE_FLOAT16 ? ldexp(1, -25) : 0;
            for (size_t i = 0; i < n; i++) {
              double s = 0, abs = 0;
              for (int r = 0; r < p; r++) {
                s += wire_value(r, i);
                abs += fabs(wire_value(r, i));
              }
              /* docs/compression.md: u sum|x| + u |s| + (p-1) 2^-24 sum|x|,
               * + 2^-25 per float16 rounding (p of them); AVG: all over p,
               * plus the division's own rounding. */
              double bound = u * abs + u * fabs(s) + (p - 1) * ldexp(1, -24) * abs + (p + 1) * tiny;
              double want = s;
              if (op == COLLIE_AVG) {
                want = s / p;
                bound = bound / p + ldexp(1, -24) * fabs(want);
              }
              double err = fabs((double)out[i] - want);
              ASSERTF(err <= bound * 1.0001,
                      "wire %d op %d n %zu inplace %d [%zu]: %.9g vs %.9g (err %g > %g)", wire,
                      (int)op, n, inplace, i, out[i], want, err, bound);
              /* A sum is a value of the wire format (the hierarchical form
               * divides an AVG after the wire, in float32). */
              ASSERTF(op != COLLIE_SUM || wire_representable(wire, out[i]),
                      "wire %d [%zu] = %.9g is not a wire value", wire, i, out[i]);
            }
            /* Every rank the same bits. */
            uint64_t h = wire_hash(out, n);
            ASSERT_OK(collie_allgather(comm, &h, hashes, 1, COLLIE_UINT64, NULL, NULL));
            for (int r = 0; r < p; r++)
              ASSERTF(hashes[r] == h, "rank %d's result differs from rank %d's (n %zu)", r, me, n);
            free(in);
            free(out);
          }
  free(hashes);
  ASSERT_OK(collie_comm_destroy(comm));
}

TEST_IMPL(wire_refused)
{
  collie_comm_t *comm = test_comm();
  int32_t xi[4] = {1, 2, 3, 4}, yi[4];
  float xf[4] = {1, 2, 3, 4}, yf[4];
  collie_opts_t o = {.wire = COLLIE_WIRE_FLOAT16};
  ASSERT_RC(COLLIE_INVALID_ARGUMENT,
            "opts->wire = COLLIE_WIRE_FLOAT16 applies to float32 SUM or "
            "AVG only; this call is int32 sum",
            collie_allreduce(comm, xi, yi, 4, COLLIE_INT32, COLLIE_SUM, &o, NULL));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "this call is float32 max",
            collie_allreduce(comm, xf, yf, 4, COLLIE_FLOAT32, COLLIE_MAX, &o, NULL));
  o.wire = COLLIE_WIRE_BFLOAT16;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT,
            "collie_broadcast: opts->wire = COLLIE_WIRE_BFLOAT16 applies to allreduce only",
            collie_broadcast(comm, xf, 4, COLLIE_FLOAT32, 0, &o, NULL));
  o.wire = 7;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "opts->wire = 7 is not a COLLIE_WIRE_* value",
            collie_allreduce(comm, xf, yf, 4, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  o.wire = -1;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "opts->wire = -1 is not a COLLIE_WIRE_* value",
            collie_allreduce(comm, xf, yf, 4, COLLIE_FLOAT32, COLLIE_SUM, &o, NULL));
  /* Another algorithm cannot run a compressed call, nor "compressed" a native one. */
  collie_opts_t ring = {.wire = COLLIE_WIRE_FLOAT16, .algorithm = COLLIE_ALGO_RING};
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "cannot run this call",
            collie_allreduce(comm, xf, yf, 4, COLLIE_FLOAT32, COLLIE_SUM, &ring, NULL));
  collie_opts_t comp = {.algorithm = COLLIE_ALGO_COMPRESSED};
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "cannot run this call",
            collie_allreduce(comm, xf, yf, 4, COLLIE_FLOAT32, COLLIE_SUM, &comp, NULL));
  /* None of that took a sequence number: the communicator goes on. */
  ASSERT_OK(collie_allreduce(comm, xf, yf, 4, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  ASSERT(yf[3] == 4.0f * (float)test_size());
  ASSERT_OK(collie_comm_destroy(comm));
}

/* 1000.25 needs 12 significant bits: bfloat16 cannot hold it or a sum of a
 * few of them, float32 holds those sums exactly. */
TEST_IMPL(wire_comm_default)
{
  setenv("COLLIE_WIRE", "bfloat16", 1);
  collie_comm_t *comm = test_comm();
  unsetenv("COLLIE_WIRE");
  int p = test_size();
  float x[3] = {1000.25f, 3.0f, -0.5f}, y[3];
  ASSERT_OK(collie_allreduce(comm, x, y, 3, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  ASSERTF(wire_representable(COLLIE_WIRE_BFLOAT16, y[0]) && fabsf(y[0] - 1000.25f * (float)p) < 16,
          "default bfloat16: %.9g", y[0]);
  ASSERT(y[1] == 3.0f * (float)p && y[2] == -0.5f * (float)p);
  /* opts->wire = NATIVE: exact. */
  collie_opts_t native = {.wire = COLLIE_WIRE_NATIVE};
  ASSERT_OK(collie_allreduce(comm, x, y, 3, COLLIE_FLOAT32, COLLIE_SUM, &native, NULL));
  ASSERTF(y[0] == 1000.25f * (float)p, "native: %.9g", y[0]);
  /* What the default cannot compress runs as it is, exactly: MAX, int32. */
  ASSERT_OK(collie_allreduce(comm, x, y, 3, COLLIE_FLOAT32, COLLIE_MAX, NULL, NULL));
  ASSERT(y[0] == 1000.25f);
  int32_t xi = 1000001, yi = 0;
  ASSERT_OK(collie_allreduce(comm, &xi, &yi, 1, COLLIE_INT32, COLLIE_SUM, NULL, NULL));
  ASSERT(yi == 1000001 * p);
  /* A persistent plan keeps the wire it was made with, start after start. */
  collie_plan_t *plan = NULL;
  collie_opts_t f16 = {.wire = COLLIE_WIRE_FLOAT16};
  float big[2];
  ASSERT_OK(collie_allreduce_init(comm, big, y, 2, COLLIE_FLOAT32, COLLIE_SUM, &f16, &plan));
  for (int k = 0; k < 2; k++) {
    big[0] = 1000.25f + (float)k; /* float16 near 1000 steps by 0.5 */
    big[1] = 0.1f;
    ASSERT_OK(collie_start(plan, NULL));
    ASSERTF(wire_representable(COLLIE_WIRE_FLOAT16, y[0]) && y[0] != big[0] * (float)p,
            "plan start %d: %.9g", k, y[0]);
    ASSERT(wire_representable(COLLIE_WIRE_FLOAT16, y[1]));
  }
  collie_plan_free(plan);
  /* A split keeps the default. */
  collie_comm_t *sub = NULL;
  ASSERT_OK(collie_comm_split(comm, 0, test_rank(), &sub));
  ASSERT_OK(collie_allreduce(sub, x, y, 3, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  ASSERTF(wire_representable(COLLIE_WIRE_BFLOAT16, y[0]) && fabsf(y[0] - 1000.25f * (float)p) < 16,
          "split: %.9g", y[0]);
  ASSERT_OK(collie_comm_destroy(sub));
  ASSERT_OK(collie_comm_destroy(comm));
}

TEST_IMPL(wire_bad_env_and_config)
{
  collie_comm_t *comm = NULL;
  setenv("COLLIE_WIRE", "fp8", 1);
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "COLLIE_WIRE=\"fp8\" is not one of native, float16, bfloat16",
            collie_comm_init(&comm));
  unsetenv("COLLIE_WIRE");
  collie_config_t cfg = COLLIE_CONFIG_INIT;
  cfg.rank = 0;
  cfg.world_size = 1;
  cfg.wire = 9;
  ASSERT_RC(COLLIE_INVALID_ARGUMENT,
            "collie_comm_init_config: wire = 9 is not a COLLIE_WIRE_* value",
            collie_comm_init_config(&cfg, &comm));
  ASSERT(comm == NULL);
  /* A valid one on one rank: the result is rounded once, as the wire would. */
  cfg.wire = COLLIE_WIRE_BFLOAT16;
  ASSERT_OK(collie_comm_init_config(&cfg, &comm));
  float x = 1000.25f, y = 0;
  ASSERT_OK(collie_allreduce(comm, &x, &y, 1, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL));
  ASSERTF(y == 1000.0f, "%.9g", y);
  ASSERT_OK(collie_comm_destroy(comm));
}
