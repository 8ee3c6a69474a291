/*
 * shm_layout_test.c - the shm segment's layout function (collie__shm_layout)
 * on its own: for every local rank count and budget the segment stays within
 * local ranks x COLLIE_SHM_BYTES, its parts do not overlap and follow the
 * rules the data path relies on (whole-line slots, page-aligned rings and
 * flat buffers); today's geometry is kept wherever it fits; a budget below
 * the minimum is refused naming COLLIE_SHM_BYTES and that minimum; and
 * params.def's default is the transport's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/params.h"
#include "runner.h"
#include "transport/shm_int.h"
#include "util/error.h"

static int
lay_pow2(size_t v)
{
  return v && (v & (v - 1)) == 0;
}

/* Asserts everything a layout of n ranks must satisfy, within budget. */
static void
lay_check(const struct collie__shm_layout *l, int nlocal, int flat, size_t budget)
{
  size_t n = (size_t)nlocal;
  ASSERTF(l->bytes <= n * budget, "%d ranks, budget %zu: %zu bytes > %zu", nlocal, budget, l->bytes,
          n * budget);
  ASSERTF(lay_pow2(l->slot_bytes) && l->slot_bytes >= COLLIE_SHM_SLOT_BYTES_MIN &&
              l->slot_bytes <= COLLIE_SHM_SLOT_BYTES_DEFAULT,
          "%d ranks, budget %zu: slot of %zu bytes", nlocal, budget, l->slot_bytes);
  ASSERT(l->payload_off >= sizeof(struct collie__shm_ring) +
                               COLLIE_SHM_NCELLS * sizeof(struct collie__shm_chunk) &&
         l->payload_off % COLLIE_SHM_LINE == 0);
  ASSERT(l->ring_bytes % COLLIE_SHM_PAGE == 0);
  ASSERT(l->ring_bytes >= l->payload_off + COLLIE_SHM_NSLOTS * l->slot_bytes);
  ASSERT(l->ranks_off >= sizeof(struct collie__shm_header));
  ASSERT(l->ctrl_off >= l->ranks_off + n * sizeof(int32_t) && l->ctrl_off % COLLIE_SHM_LINE == 0);
  ASSERT(l->rings_off >= l->ctrl_off + n * sizeof(struct collie__shm_ctrl));
  ASSERT(l->rings_off % COLLIE_SHM_PAGE == 0);
  size_t rings_end = l->rings_off + n * (n - 1) * l->ring_bytes;
  if (l->flat_buf_bytes) {
    ASSERTF(flat, "%d ranks: a flat area that was not asked for", nlocal);
    ASSERTF(lay_pow2(l->flat_buf_bytes) && l->flat_buf_bytes >= COLLIE_SHM_FLAT_BUF_BYTES_MIN &&
                l->flat_buf_bytes <= COLLIE_SHM_FLAT_BUF_BYTES_DEFAULT,
            "%d ranks, budget %zu: flat buffers of %zu bytes", nlocal, budget, l->flat_buf_bytes);
    ASSERT(l->flat_ctrl_off >= rings_end);
    ASSERT(l->flat_off >= l->flat_ctrl_off + n * sizeof(struct collie__shm_flat_ctrl));
    ASSERT(l->flat_off % COLLIE_SHM_PAGE == 0 && l->flat_buf_bytes % COLLIE_SHM_PAGE == 0);
    ASSERT(l->bytes == l->flat_off + 2 * n * l->flat_buf_bytes);
  } else {
    ASSERT(l->flat_off == 0 && l->flat_ctrl_off == 0);
    ASSERT(l->bytes == rings_end);
  }
}

/* Every rank count x {default, 1 MiB, the minimum, just below it} x flat or
 * not: accepted exactly when the budget reaches the minimum, and then within
 * it; refused with a message naming the variable, the value and the minimum. */
TEST_IMPL(shm_layout_bounds)
{
  static const int ns[] = {1, 2, 3, 4, 8, 16, 64, 128};
  for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
    int n = ns[i];
    size_t min = collie__shm_layout_min(n);
    ASSERT(min > 0);
    const size_t budgets[] = {COLLIE_SHM_BYTES_DEFAULT, (size_t)1 << 20, min, min - 1};
    for (int flat = 0; flat < 2; flat++) {
      for (size_t k = 0; k < sizeof(budgets) / sizeof(budgets[0]); k++) {
        size_t b = budgets[k];
        struct collie__shm_layout l, again;
        memset(&l, 0x5a, sizeof(l));
        collie_result_t rc = collie__shm_layout(n, flat, b, &l);
        if (b >= min) {
          ASSERTF(rc == COLLIE_SUCCESS, "%d ranks, flat %d, budget %zu (min %zu): %s", n, flat, b,
                  min, collie_last_error());
          lay_check(&l, n, flat, b);
          /* Pure: every rank computes the same. */
          ASSERT_OK(collie__shm_layout(n, flat, b, &again));
          ASSERT(memcmp(&l, &again, sizeof(l)) == 0);
        } else {
          char want[64], val[64];
          ASSERTF(rc == COLLIE_INVALID_ARGUMENT, "%d ranks, budget %zu below the minimum %zu: %s",
                  n, b, min, collie_result_string(rc));
          snprintf(val, sizeof(val), "COLLIE_SHM_BYTES=%zu", b);
          snprintf(want, sizeof(want), ">= %zu", min);
          ASSERTF(strstr(collie_last_error(), val) && strstr(collie_last_error(), want),
                  "message \"%s\" lacks \"%s\" or \"%s\"", collie_last_error(), val, want);
        }
      }
    }
    /* The minimum is the smallest layout: smallest slots, no flat area. */
    struct collie__shm_layout l;
    ASSERT_OK(collie__shm_layout(n, 1, min, &l));
    if (n > 1) ASSERT(l.slot_bytes == COLLIE_SHM_SLOT_BYTES_MIN && l.flat_buf_bytes == 0);
  }
  /* 1 MiB is below the minimum from some rank count on: refused at 64. */
  ASSERT(collie__shm_layout_min(64) > ((size_t)1 << 20));
}

/* Today's geometry wherever it fits the default budget (and up to 124 local
 * ranks it does), the sizes it had before COLLIE_SHM_BYTES existed; past
 * that, slots shrink first. A budget of 0 means the default, a huge one
 * changes nothing. */
TEST_IMPL(shm_layout_default_geometry)
{
  static const int ns[] = {2, 3, 8, 64, 124};
  for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
    const size_t budgets[] = {0, COLLIE_SHM_BYTES_DEFAULT, SIZE_MAX};
    for (size_t k = 0; k < 3; k++) {
      struct collie__shm_layout l;
      ASSERT_OK(collie__shm_layout(ns[i], 1, budgets[k], &l));
      ASSERTF(l.slot_bytes == 64 * 1024 && l.flat_buf_bytes == 1024 * 1024,
              "%d ranks, budget %zu: %zu-byte slots, %zu-byte flat buffers", ns[i], budgets[k],
              l.slot_bytes, l.flat_buf_bytes);
      lay_check(&l, ns[i], 1, COLLIE_SHM_BYTES_DEFAULT);
    }
  }
  /* The sizes docs/performance.md quotes: ~5 MiB at 2 ranks, ~44 MiB at 8. */
  struct collie__shm_layout l2, l8, l128;
  ASSERT_OK(collie__shm_layout(2, 1, 0, &l2));
  ASSERT_OK(collie__shm_layout(8, 1, 0, &l8));
  ASSERTF(l2.bytes > (5u << 20) - (64u << 10) && l2.bytes < (5u << 20) + (64u << 10),
          "2 ranks: %zu bytes", l2.bytes);
  ASSERTF(l8.bytes > (44u << 20) && l8.bytes < (45u << 20), "8 ranks: %zu bytes", l8.bytes);
  /* 128 ranks: a rank's 127 rings of 64 KiB slots alone would take 64 MiB. */
  ASSERT_OK(collie__shm_layout(128, 1, 0, &l128));
  ASSERT(l128.slot_bytes < 64 * 1024 && l128.flat_buf_bytes == 1024 * 1024);
  ASSERT(l128.bytes <= 128 * COLLIE_SHM_BYTES_DEFAULT);
  /* Without a flat area 128 ranks fit exactly, with it they do not. */
  ASSERT_OK(collie__shm_layout(128, 0, 0, &l128));
  ASSERT(l128.slot_bytes == 64 * 1024);
}

/* Shrinking: a small budget keeps a (smaller) flat area while it can, then
 * drops it and gives the room back to the slots; a larger budget never
 * gives a smaller geometry. */
TEST_IMPL(shm_layout_shrinks)
{
  struct collie__shm_layout l;
  /* 2 ranks in 1 MiB each: flat buffers and slots both smaller, area kept. */
  ASSERT_OK(collie__shm_layout(2, 1, (size_t)1 << 20, &l));
  ASSERT(l.flat_buf_bytes >= COLLIE_SHM_FLAT_BUF_BYTES_MIN && l.flat_buf_bytes < (1u << 20));
  ASSERT(l.slot_bytes < 64 * 1024 || l.flat_buf_bytes < (1u << 20));
  /* 4 ranks at their minimum: no flat area; 2 ranks in that budget: none
   * either (two 64 KiB flat buffers do not fit), but bigger slots. */
  size_t min4 = collie__shm_layout_min(4);
  ASSERT_OK(collie__shm_layout(4, 1, min4, &l));
  ASSERT(l.flat_buf_bytes == 0 && l.slot_bytes == COLLIE_SHM_SLOT_BYTES_MIN);
  ASSERT_OK(collie__shm_layout(2, 1, min4, &l));
  ASSERT(l.flat_buf_bytes == 0 && l.slot_bytes > COLLIE_SHM_SLOT_BYTES_MIN);
  /* Monotonic in the budget, for a few rank counts. */
  static const int ns[] = {2, 4, 8, 16};
  for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
    struct collie__shm_layout prev;
    memset(&prev, 0, sizeof(prev));
    for (size_t b = collie__shm_layout_min(ns[i]); b <= ((size_t)16 << 20); b += b / 8 + 4096) {
      ASSERT_OK(collie__shm_layout(ns[i], 1, b, &l));
      lay_check(&l, ns[i], 1, b);
      if (prev.bytes)
        ASSERTF(l.bytes >= prev.bytes, "%d ranks: budget %zu gives %zu bytes, less budget %zu",
                ns[i], b, l.bytes, prev.bytes);
      prev = l;
    }
  }
  /* Rank counts out of range are refused, not laid out. */
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "0 local ranks", collie__shm_layout(0, 1, 0, &l));
  ASSERT_RC(COLLIE_INVALID_ARGUMENT, "-3 local ranks", collie__shm_layout(-3, 0, 0, &l));
}

static void
lay_default_of(const char *name, const char *def, const char *help, void *arg)
{
  (void)help;
  if (!strcmp(name, "COLLIE_SHM_BYTES")) *(const char **)arg = def;
}

/* params.def spells the default as a literal; it must be the transport's. */
TEST_IMPL(shm_layout_param_default)
{
  const char *def = NULL;
  collie__params_describe(lay_default_of, &def);
  ASSERTF(def, "params.def has no COLLIE_SHM_BYTES");
  ASSERTF(strtoull(def, NULL, 10) == COLLIE_SHM_BYTES_DEFAULT, "params.def says %s, shm %zu", def,
          COLLIE_SHM_BYTES_DEFAULT);
}
