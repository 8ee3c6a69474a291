/*
 * mini_mpi.c - mpi.h's calls over collie (see mpi.h): the world is
 * collie_comm_init's (collierun's environment), a split is collie's, and
 * each call maps to one collective on host memory. Any failure prints
 * collie's message and aborts the process, as MPI's default error handler
 * does.
 */
#include "mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"

struct mini_mpi_comm {
  collie_comm_t *c;
};

struct mini_mpi_comm mini_mpi_world;

static int
mini_check(collie_result_t rc, const char *fn)
{
  if (rc == COLLIE_SUCCESS) return MPI_SUCCESS;
  fprintf(stderr, "mini MPI: %s: %s\n", fn, collie_last_error());
  abort();
}

static size_t
mini_size(MPI_Datatype t)
{
  switch (t) {
  case MPI_BYTE:
  case MPI_CHAR:
    return 1;
  case MPI_INT:
  case MPI_FLOAT:
    return 4;
  case MPI_LONG:
  case MPI_LONG_LONG:
  case MPI_INT64_T:
  case MPI_UNSIGNED_LONG:
  case MPI_DOUBLE:
    return 8;
  default:
    return 0;
  }
}

static collie_dtype_t
mini_dtype(MPI_Datatype t, const char *fn)
{
  switch (t) {
  case MPI_BYTE:
  case MPI_CHAR:
    return COLLIE_UINT8;
  case MPI_INT:
    return COLLIE_INT32;
  case MPI_LONG:
  case MPI_LONG_LONG:
  case MPI_INT64_T:
    return COLLIE_INT64;
  case MPI_UNSIGNED_LONG:
    return COLLIE_UINT64;
  case MPI_FLOAT:
    return COLLIE_FLOAT32;
  case MPI_DOUBLE:
    return COLLIE_FLOAT64;
  default:
    fprintf(stderr, "mini MPI: %s: datatype %d is not one this MPI knows\n", fn, (int)t);
    abort();
  }
}

int
MPI_Init(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  return mini_check(collie_comm_init(&mini_mpi_world.c), "MPI_Init");
}

int
MPI_Finalize(void)
{
  collie_result_t rc = collie_comm_destroy(mini_mpi_world.c);
  mini_mpi_world.c = NULL;
  return mini_check(rc, "MPI_Finalize");
}

int
MPI_Abort(MPI_Comm comm, int code)
{
  collie_comm_abort(comm->c);
  exit(code ? code : 1);
}

int
MPI_Comm_size(MPI_Comm comm, int *size)
{
  *size = collie_comm_size(comm->c);
  return MPI_SUCCESS;
}

int
MPI_Comm_rank(MPI_Comm comm, int *rank)
{
  *rank = collie_comm_rank(comm->c);
  return MPI_SUCCESS;
}

int
MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out)
{
  struct mini_mpi_comm *n = calloc(1, sizeof(*n));
  if (!n) mini_check(COLLIE_SYSTEM_ERROR, "MPI_Comm_split (out of memory)");
  mini_check(collie_comm_split(comm->c, color, key, &n->c), "MPI_Comm_split");
  *out = n;
  return MPI_SUCCESS;
}

int
MPI_Comm_free(MPI_Comm *comm)
{
  if (*comm == MPI_COMM_WORLD) return MPI_SUCCESS;
  collie_result_t rc = collie_comm_destroy((*comm)->c);
  free(*comm);
  *comm = NULL;
  return mini_check(rc, "MPI_Comm_free");
}

int
MPI_Barrier(MPI_Comm comm)
{
  return mini_check(collie_barrier(comm->c, NULL, NULL), "MPI_Barrier");
}

int
MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
  return mini_check(collie_broadcast(comm->c, buf, (size_t)count * mini_size(type), COLLIE_UINT8,
                                     root, NULL, NULL),
                    "MPI_Bcast");
}

int
MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
              MPI_Comm comm)
{
  collie_op_t o = op == MPI_MIN ? COLLIE_MIN : op == MPI_MAX ? COLLIE_MAX : COLLIE_SUM;
  const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  return mini_check(collie_allreduce(comm->c, in, recvbuf, (size_t)count,
                                     mini_dtype(type, "MPI_Allreduce"), o, NULL, NULL),
                    "MPI_Allreduce");
}

int
MPI_Allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount,
              MPI_Datatype rtype, MPI_Comm comm)
{
  (void)scount;
  (void)stype;
  size_t block = (size_t)rcount * mini_size(rtype);
  const char *in = sendbuf == MPI_IN_PLACE
                       ? (const char *)recvbuf + (size_t)collie_comm_rank(comm->c) * block
                       : sendbuf;
  return mini_check(collie_allgather(comm->c, in, recvbuf, block, COLLIE_UINT8, NULL, NULL),
                    "MPI_Allgather");
}

int
MPI_Gather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount,
           MPI_Datatype rtype, int root, MPI_Comm comm)
{
  int rank = collie_comm_rank(comm->c);
  size_t block =
      rank == root ? (size_t)rcount * mini_size(rtype) : (size_t)scount * mini_size(stype);
  /* The root's own block, in place, is already where it goes: send a copy. */
  void *copy = NULL;
  const void *in = sendbuf;
  if (sendbuf == MPI_IN_PLACE) {
    copy = malloc(block ? block : 1);
    if (!copy) mini_check(COLLIE_SYSTEM_ERROR, "MPI_Gather (out of memory)");
    memcpy(copy, (char *)recvbuf + (size_t)root * block, block);
    in = copy;
  }
  collie_result_t rc = collie_gather(comm->c, in, recvbuf, block, COLLIE_UINT8, root, NULL, NULL);
  free(copy);
  return mini_check(rc, "MPI_Gather");
}
