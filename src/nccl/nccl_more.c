/*
 * nccl_more.c - the calls that are others in NCCL's newer headers: init
 * from several ids (collie's bootstrap needs one), shrink (collie's own,
 * which agrees on the survivors), and the per-call-config variants of the
 * collectives (NCCL 2.30: a tuning hint; collie checks the header and runs
 * the plain call).
 */
#include <stddef.h>

#include "nccl/nccl_int.h"

NCCL_EXPORT ncclResult_t
ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                         ncclUniqueId *commIds, ncclConfig_t *config)
{
  static const char fn[] = "ncclCommInitRankScalable";
  if (nId < 1 || !commIds)
    return nccl_fail(ncclInvalidArgument, fn, "nId = %d ids at %p: at least one is needed", nId,
                     (void *)commIds);
  /* Every rank holds the same ids in the same order: the first serves all. */
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

NCCL_EXPORT ncclResult_t
ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
               ncclConfig_t *config, int shrinkFlags)
{
  static const char fn[] = "ncclCommShrink";
  ncclResult_t r = nccl_check_comm(comm, fn);
  if (r != ncclSuccess) return r;
  if (!newcomm) return nccl_fail(ncclInvalidArgument, fn, "newcomm is NULL");
  *newcomm = NULL;
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
    return nccl_fail(ncclInvalidArgument, fn, "excludeRanksList %p with excludeRanksCount = %d",
                     (void *)excludeRanksList, excludeRanksCount);
  if (shrinkFlags & ~1)
    return nccl_fail(ncclInvalidArgument, fn,
                     "shrinkFlags = 0x%x: only NCCL_SHRINK_DEFAULT (0) and NCCL_SHRINK_ABORT (1)",
                     shrinkFlags);
  (void)config; /* the new communicator keeps comm's */
  collie_comm_t *c = NULL;
  collie_result_t rc = collie_comm_shrink(comm->c, excludeRanksList, excludeRanksCount, -1, &c);
  if (rc != COLLIE_SUCCESS) return nccl_from_collie(rc, comm, fn);
  return nccl_comm_wrap(c, comm->blocking, comm->device, newcomm, fn);
}

/* A per-call config: NULL, or one NCCL_COLLCONFIG_INITIALIZER made. */
static ncclResult_t
nccl_coll_config(const ncclCollConfig_t *config, const char *fn)
{
  if (config && (config->magic != NCCL_API_MAGIC || config->size < sizeof(ncclCollConfig_t)))
    return nccl_fail(ncclInvalidArgument, fn,
                     "config (size %zu, magic 0x%x) was not set up with "
                     "NCCL_COLLCONFIG_INITIALIZER",
                     config->size, config->magic);
  return ncclSuccess;
}

#define NCCL_WITH_CONFIG(fn, call)                                                                 \
  do {                                                                                             \
    ncclResult_t r_ = nccl_coll_config(config, fn);                                                \
    return r_ != ncclSuccess ? r_ : (call);                                                        \
  } while (0)

NCCL_EXPORT ncclResult_t
ncclAllReduceConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                    const ncclCollConfig_t *config)
{
  NCCL_WITH_CONFIG("ncclAllReduceConfig",
                   ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream));
}

NCCL_EXPORT ncclResult_t
ncclBroadcastConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                    int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)
{
  NCCL_WITH_CONFIG("ncclBroadcastConfig",
                   ncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream));
}

NCCL_EXPORT ncclResult_t
ncclReduceConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                 ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                 const ncclCollConfig_t *config)
{
  NCCL_WITH_CONFIG("ncclReduceConfig",
                   ncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream));
}

NCCL_EXPORT ncclResult_t
ncclAllGatherConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                    ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)
{
  NCCL_WITH_CONFIG("ncclAllGatherConfig",
                   ncclAllGather(sendbuff, recvbuff, count, datatype, comm, stream));
}

NCCL_EXPORT ncclResult_t
ncclReduceScatterConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                        const ncclCollConfig_t *config)
{
  NCCL_WITH_CONFIG("ncclReduceScatterConfig",
                   ncclReduceScatter(sendbuff, recvbuff, count, datatype, op, comm, stream));
}

NCCL_EXPORT ncclResult_t
ncclAlltoAllConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)
{
  NCCL_WITH_CONFIG("ncclAlltoAllConfig",
                   ncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream));
}

NCCL_EXPORT ncclResult_t
ncclGatherConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                 int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)
{
  NCCL_WITH_CONFIG("ncclGatherConfig",
                   ncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream));
}

NCCL_EXPORT ncclResult_t
ncclScatterConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                  int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)
{
  NCCL_WITH_CONFIG("ncclScatterConfig",
                   ncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream));
}
