/*
 * mpi.h - the few MPI calls nccl-tests makes (its MPI=1 build: one process
 * per rank, the unique id broadcast, results gathered), over collie's host
 * collectives, so that nccl-tests runs its ranks as processes under
 * collierun where no MPI is installed (the GPU machine). Not an MPI: only
 * these calls, on host memory, with these types and ops
 * (tests/nccl/mini_mpi/mini_mpi.c; scripts/gpu_check.sh's nccl_tests step).
 */
#ifndef COLLIE_MINI_MPI_H
#define COLLIE_MINI_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mini_mpi_comm *MPI_Comm;
typedef enum {
  MPI_DATATYPE_NULL = 0,
  MPI_BYTE,
  MPI_CHAR,
  MPI_INT,
  MPI_LONG,
  MPI_LONG_LONG,
  MPI_INT64_T,
  MPI_UNSIGNED_LONG,
  MPI_FLOAT,
  MPI_DOUBLE
} MPI_Datatype;
typedef enum { MPI_SUM = 1, MPI_MIN, MPI_MAX } MPI_Op;

#define MPI_SUCCESS 0
#define MPI_IN_PLACE ((void *)1)
extern struct mini_mpi_comm mini_mpi_world;
#define MPI_COMM_WORLD (&mini_mpi_world)

int MPI_Init(int *argc, char ***argv);
int MPI_Finalize(void);
int MPI_Abort(MPI_Comm comm, int code);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm);
int MPI_Allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm);
int MPI_Gather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm);

#ifdef __cplusplus
}
#endif
#endif /* COLLIE_MINI_MPI_H */
