/*
 * plan_cost.c - what a persistent collective saves per call (issue 22 item
 * 4): an 8-byte allreduce started from a plan (collie_allreduce_init once,
 * collie_start per call) against the plain call, in interleaved rounds
 * (plain, planned, plain, ...) so that the machine's drift hits both alike;
 * the best round of each. Run it under collierun:
 *
 *   collierun -n 1 build/bench/plan_cost        (the per-call path alone)
 *   collierun -n 2 build/bench/plan_cost
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "collie.h"

#define ROUNDS 7
#define ITERS 20000

int
main(void)
{
  collie_comm_t *c;
  if (collie_comm_init(&c) != COLLIE_SUCCESS) {
    fprintf(stderr, "plan_cost: %s\n", collie_last_error());
    return 1;
  }
  float b[2] = {1, 2};
  collie_plan_t *plan = NULL;
  if (collie_allreduce_init(c, b, b, 2, COLLIE_FLOAT32, COLLIE_SUM, NULL, &plan) !=
      COLLIE_SUCCESS) {
    fprintf(stderr, "plan_cost: %s\n", collie_last_error());
    return 1;
  }
  double best[2] = {1e9, 1e9};
  for (int i = 0; i < 1000; i++) collie_start(plan, NULL);
  for (int r = 0; r < 2 * ROUNDS; r++) {
    int planned = r % 2;
    collie_barrier(c, NULL, NULL);
    double t0 = cli_now_s();
    for (int i = 0; i < ITERS; i++) {
      collie_result_t rc =
          planned ? collie_start(plan, NULL)
                  : collie_allreduce(c, b, b, 2, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL);
      if (rc != COLLIE_SUCCESS) {
        fprintf(stderr, "plan_cost: %s\n", collie_last_error());
        return 1;
      }
    }
    double us = (cli_now_s() - t0) / ITERS * 1e6;
    if (us < best[planned]) best[planned] = us;
  }
  if (collie_comm_rank(c) == 0)
    printf("%d ranks, allreduce of 2 float32 (best of %d rounds of %d): plain %.3f us, planned "
           "%.3f us, planned/plain %.2f\n",
           collie_comm_size(c), ROUNDS, ITERS, best[0], best[1], best[1] / best[0]);
  collie_plan_free(plan);
  collie_comm_destroy(c);
  return 0;
}
