#include <collie.h>
#include <stdio.h>

int
main(void)
{
  collie_comm_t *comm;
  if (collie_comm_init(&comm) != COLLIE_SUCCESS) { /* the job collierun started */
    fprintf(stderr, "init: %s\n", collie_last_error());
    return 1;
  }
  float x[4] = {0}, rank = (float)collie_comm_rank(comm);
  for (int i = 0; i < 4; i++) x[i] = rank;
  collie_allreduce(comm, x, x, 4, COLLIE_FLOAT32, COLLIE_SUM, NULL, NULL); /* in place */
  printf("rank %d: %g %g %g %g\n", collie_comm_rank(comm), x[0], x[1], x[2], x[3]);
  return collie_comm_destroy(comm) == COLLIE_SUCCESS ? 0 : 1;
}
