/*
 * stub.h - a placeholder for an algorithm whose family is still being
 * written: it never applies (cost < 0), so the model never picks it and
 * naming it is a clear INVALID_ARGUMENT ("cannot run this call"). Remove the
 * line when the algorithm lands.
 */
#ifndef COLLIE_COLL_STUB_H
#define COLLIE_COLL_STUB_H

#include "coll/coll.h"

double collie__stub_cost(const struct collie__call *c, const struct collie__model *m);
collie_result_t collie__stub_run(struct collie__call *c);

#define COLLIE_ALGO_STUB(name, ID, KIND)                                                           \
  const struct collie__algo collie__algo_##name = {#name, COLLIE_ALGO_##ID,  COLLIE_KIND_##KIND,   \
                                                   0,     collie__stub_cost, collie__stub_run}

#endif
