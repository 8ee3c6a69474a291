/* stub.c - see stub.h. */
#include "coll/stub.h"
#include "util/error.h"

double
collie__stub_cost(const struct collie__call *c, const struct collie__model *m)
{
  (void)c;
  (void)m;
  return -1;
}

collie_result_t
collie__stub_run(struct collie__call *c)
{
  return collie__err(COLLIE_UNSUPPORTED, "%s: this algorithm is not implemented yet",
                     collie__kind_name(c->kind));
}
