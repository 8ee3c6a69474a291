/*
 * mini_mpi_test.c - every call of the mini MPI (mpi.h) as nccl-tests makes
 * it, under collierun, checked: exit 0 when all agree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi.h"

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "mini_mpi_test: " __VA_ARGS__);                                              \
      fprintf(stderr, "\n");                                                                       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

int
main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int p, r;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  /* the id's broadcast */
  char id[128];
  memset(id, r == 0 ? 'x' : 0, sizeof(id));
  MPI_Bcast(id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  CHECK(id[0] == 'x' && id[127] == 'x', "bcast");
  /* host hashes, gathered in place */
  long long h[16] = {0};
  h[r] = 1000 + r;
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h, sizeof(long long), MPI_BYTE, MPI_COMM_WORLD);
  for (int q = 0; q < p; q++) CHECK(h[q] == 1000 + q, "allgather in place: %lld", h[q]);
  /* results: in-place allreduces of int, long, double */
  int mn = 10 + r;
  MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  CHECK(mn == 10, "allreduce min: %d", mn);
  double d = r + 0.5, dmax;
  MPI_Allreduce(&d, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  CHECK(dmax == p - 0.5, "allreduce max: %g", dmax);
  long long big = (long long)r << 40, most = 0;
  MPI_Allreduce(&big, &most, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  CHECK(most == (long long)(p - 1) << 40, "allreduce int64 max: %lld", most);
  long errors = r;
  MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  CHECK(errors == (long)p * (p - 1) / 2, "allreduce sum: %ld", errors);
  /* gather to 0, the root's own in place */
  double all[16];
  all[r] = r * 2.0;
  if (r == 0)
    MPI_Gather(MPI_IN_PLACE, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  else
    MPI_Gather(&all[r], 1, MPI_DOUBLE, NULL, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (r == 0)
    for (int q = 0; q < p; q++) CHECK(all[q] == q * 2.0, "gather: %g", all[q]);
  /* split by parity, then free */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half);
  int hp;
  MPI_Comm_size(half, &hp);
  CHECK(hp == (p - r % 2 + 1) / 2, "split size %d", hp);
  MPI_Barrier(half);
  MPI_Comm_free(&half);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  if (r == 0) printf("mini_mpi_test: %d ranks passed\n", p);
  return 0;
}
