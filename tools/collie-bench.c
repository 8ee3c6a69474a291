/*
 * collie-bench - the collective profiler (being written; see tools/cbench.h).
 */
#include <stdio.h>

int
main(void)
{
  fprintf(stderr, "collie-bench: not built yet\n");
  return 2;
}
