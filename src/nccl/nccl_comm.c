/*
 * nccl_comm.c - NCCL's communicators over collie's: init from a unique id
 * (nccl_id.c), split, finalize, destroy, abort, the async error and the
 * queries; buffer registration and ncclMemAlloc.
 *
 * One GPU per process: the communicator belongs to the device current at
 * init, as NCCL's does, and any number of processes may share that GPU
 * (collie's device path, docs/gpu.md). collie's calls on device memory
 * return once their work is done, so a "non-blocking" communicator
 * (config->blocking = 0) is simply one whose calls never answer
 * ncclInProgress.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/cuda.h"
#include "nccl/nccl_int.h"

/* The device current on this thread, or -1 where no driver is loaded (a
 * program on host memory only). */
static int
nccl_current_device(void)
{
  int dev = -1;
  if (!collie__cuda_live() || collie__cuda_current_device(&dev) != COLLIE_SUCCESS) return -1;
  return dev;
}

/* config's blocking; INVALID_ARGUMENT for a config NCCL_CONFIG_INITIALIZER
 * did not make. */
static ncclResult_t
nccl_config_read(const ncclConfig_t *config, const char *fn, int *blocking)
{
  *blocking = 1;
  if (!config) return ncclSuccess;
  if (config->magic != NCCL_API_MAGIC || config->size < offsetof(ncclConfig_t, blocking))
    return nccl_fail(ncclInvalidArgument, fn,
                     "config (size %zu, magic 0x%x) was not set up with NCCL_CONFIG_INITIALIZER",
                     config->size, config->magic);
  if (config->size >= offsetof(ncclConfig_t, blocking) + sizeof(int) &&
      config->blocking != NCCL_CONFIG_UNDEF_INT)
    *blocking = config->blocking != 0;
  return ncclSuccess;
}

ncclResult_t
nccl_comm_wrap(collie_comm_t *c, int blocking, int device, ncclComm_t *out, const char *fn)
{
  struct ncclComm *comm = calloc(1, sizeof(*comm));
  if (!comm || !nccl_comm_register(comm)) {
    free(comm);
    collie_comm_destroy(c);
    return nccl_fail(ncclSystemError, fn, "out of memory");
  }
  comm->c = c;
  comm->rank = collie_comm_rank(c);
  comm->size = collie_comm_size(c);
  comm->device = device;
  comm->blocking = blocking;
  *out = comm;
  return ncclSuccess;
}

static ncclResult_t
nccl_init(ncclComm_t *newcomm, int nranks, const ncclUniqueId *id, int rank,
          const ncclConfig_t *config, const char *fn)
{
  if (!newcomm) return nccl_fail(ncclInvalidArgument, fn, "newcomm is NULL");
  *newcomm = NULL;
  if (nranks < 1) return nccl_fail(ncclInvalidArgument, fn, "nranks = %d must be >= 1", nranks);
  if (rank < 0 || rank >= nranks)
    return nccl_fail(ncclInvalidArgument, fn, "rank = %d is outside 0..%d", rank, nranks - 1);
  int blocking;
  ncclResult_t r = nccl_config_read(config, fn, &blocking);
  if (r != ncclSuccess) return r;
  struct nccl_store *store;
  const collie_store_callbacks_t *cb;
  const char *token;
  if ((r = nccl_id_open(id, rank, nranks, fn, &store, &cb, &token)) != ncclSuccess) return r;
  collie_config_t cfg = COLLIE_CONFIG_INIT;
  cfg.rank = rank;
  cfg.world_size = nranks;
  cfg.job_token = token;
  cfg.store_callbacks = cb;
  collie_comm_t *c = NULL;
  /* Called exactly once from here on (collie_store_callbacks_t): it frees
   * store, token included, when the last communicator on it goes. */
  collie_result_t rc = collie_comm_init_config(&cfg, &c);
  if (rc != COLLIE_SUCCESS) return nccl_from_collie(rc, NULL, fn);
  return nccl_comm_wrap(c, blocking, nccl_current_device(), newcomm, fn);
}

NCCL_EXPORT ncclResult_t
ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
  return nccl_init(comm, nranks, &commId, rank, NULL, "ncclCommInitRank");
}

NCCL_EXPORT ncclResult_t
ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                       ncclConfig_t *config)
{
  return nccl_init(comm, nranks, &commId, rank, config, "ncclCommInitRankConfig");
}

NCCL_EXPORT ncclResult_t
ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
  static const char fn[] = "ncclCommInitAll";
  if (!comm) return nccl_fail(ncclInvalidArgument, fn, "comm is NULL");
  if (ndev < 1) return nccl_fail(ncclInvalidArgument, fn, "ndev = %d must be >= 1", ndev);
  if (ndev > 1)
    return nccl_fail(ncclInvalidUsage, fn,
                     "ndev = %d: collie runs one GPU per process (start one process per GPU and "
                     "use ncclCommInitRank, or several processes on one GPU); ndev = 1 works",
                     ndev);
  int cur = nccl_current_device();
  if (devlist && cur >= 0 && devlist[0] != cur)
    return nccl_fail(ncclInvalidUsage, fn,
                     "devlist[0] = %d is not the current device %d: call cudaSetDevice(%d) first "
                     "(collie uses the device current at init)",
                     devlist[0], cur, devlist[0]);
  ncclUniqueId id;
  ncclResult_t r = nccl_id_make(&id);
  if (r != ncclSuccess) return r;
  return nccl_init(comm, 1, &id, 0, NULL, fn);
}

NCCL_EXPORT ncclResult_t
ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
  static const char fn[] = "ncclCommSplit";
  ncclResult_t r = nccl_check_comm(comm, fn);
  if (r != ncclSuccess) return r;
  if (!newcomm) return nccl_fail(ncclInvalidArgument, fn, "newcomm is NULL");
  *newcomm = NULL;
  if (color < NCCL_SPLIT_NOCOLOR)
    return nccl_fail(ncclInvalidArgument, fn, "color = %d must be >= 0 or NCCL_SPLIT_NOCOLOR (-1)",
                     color);
  int blocking = comm->blocking;
  if (config && (r = nccl_config_read(config, fn, &blocking)) != ncclSuccess) return r;
  collie_comm_t *c = NULL;
  collie_result_t rc = collie_comm_split(comm->c, color < 0 ? COLLIE_SPLIT_NONE : color, key, &c);
  if (rc != COLLIE_SUCCESS) return nccl_from_collie(rc, comm, fn);
  if (!c) return ncclSuccess; /* NOCOLOR: no communicator, as NCCL */
  return nccl_comm_wrap(c, blocking, comm->device, newcomm, fn);
}

NCCL_EXPORT ncclResult_t
ncclCommFinalize(ncclComm_t comm)
{
  /* Every call has finished its work when it returned: nothing to flush. */
  return nccl_check_comm(comm, "ncclCommFinalize");
}

static ncclResult_t
nccl_free(ncclComm_t comm, int abort, const char *fn)
{
  ncclResult_t r = nccl_check_comm(comm, fn);
  if (r != ncclSuccess) return r;
  nccl_comm_unregister(comm);
  collie_result_t rc = COLLIE_SUCCESS;
  if (abort) {
    /* A call of another thread may be inside collie on it: the abort fails
     * it at once; wait for it to leave before freeing what it uses. */
    collie_comm_abort(comm->c);
    for (int i = 0; atomic_load(&comm->inflight) > 0 && i < 60000; i++) usleep(1000);
  }
  rc = collie_comm_destroy(comm->c);
  free(comm);
  return abort ? ncclSuccess : nccl_from_collie(rc, NULL, fn);
}

NCCL_EXPORT ncclResult_t
ncclCommDestroy(ncclComm_t comm)
{
  return nccl_free(comm, 0, "ncclCommDestroy");
}

NCCL_EXPORT ncclResult_t
ncclCommAbort(ncclComm_t comm)
{
  return nccl_free(comm, 1, "ncclCommAbort");
}

NCCL_EXPORT ncclResult_t
ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
  static const char fn[] = "ncclCommGetAsyncError";
  ncclResult_t r = nccl_check_comm(comm, fn);
  if (r != ncclSuccess) return r;
  if (!asyncError) return nccl_fail(ncclInvalidArgument, fn, "asyncError is NULL");
  *asyncError = (ncclResult_t)atomic_load(&comm->async);
  return ncclSuccess;
}

/* One of comm's numbers into *out, read once comm is known live (a
 * destroyed one is freed): field is offsetof its int in struct ncclComm. */
static ncclResult_t
nccl_query(const ncclComm_t comm, int *out, const char *fn, const char *what, size_t field)
{
  ncclResult_t r = nccl_check_comm(comm, fn);
  if (r != ncclSuccess) return r;
  if (!out) return nccl_fail(ncclInvalidArgument, fn, "%s is NULL", what);
  memcpy(out, (const char *)comm + field, sizeof(*out));
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t
ncclCommCount(const ncclComm_t comm, int *count)
{
  return nccl_query(comm, count, "ncclCommCount", "count", offsetof(struct ncclComm, size));
}

NCCL_EXPORT ncclResult_t
ncclCommCuDevice(const ncclComm_t comm, int *device)
{
  return nccl_query(comm, device, "ncclCommCuDevice", "device", offsetof(struct ncclComm, device));
}

NCCL_EXPORT ncclResult_t
ncclCommUserRank(const ncclComm_t comm, int *rank)
{
  return nccl_query(comm, rank, "ncclCommUserRank", "rank", offsetof(struct ncclComm, rank));
}

NCCL_EXPORT ncclResult_t
ncclGetVersion(int *version)
{
  if (!version) return nccl_fail(ncclInvalidArgument, "ncclGetVersion", "version is NULL");
  *version = COLLIE_NCCL_VERSION_CODE;
  return ncclSuccess;
}

/* Registration speeds nothing up in collie (its direct path maps buffers
 * through cached IPC handles whether registered or not): a handle that
 * names the buffer, so that deregistering checks it. */
NCCL_EXPORT ncclResult_t
ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
  static const char fn[] = "ncclCommRegister";
  ncclResult_t r = nccl_check_comm(comm, fn);
  if (r != ncclSuccess) return r;
  if (!handle) return nccl_fail(ncclInvalidArgument, fn, "handle is NULL");
  if (!buff && size)
    return nccl_fail(ncclInvalidArgument, fn, "buff is NULL but size is %zu", size);
  *handle = buff ? buff : (void *)comm;
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t
ncclCommDeregister(const ncclComm_t comm, void *handle)
{
  static const char fn[] = "ncclCommDeregister";
  ncclResult_t r = nccl_check_comm(comm, fn);
  if (r != ncclSuccess) return r;
  if (!handle) return nccl_fail(ncclInvalidArgument, fn, "handle is NULL");
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t
ncclMemAlloc(void **ptr, size_t size)
{
  static const char fn[] = "ncclMemAlloc";
  if (!ptr) return nccl_fail(ncclInvalidArgument, fn, "ptr is NULL");
  *ptr = NULL;
  if (!size) return ncclSuccess;
  if (!collie__cuda_live())
    return nccl_fail(ncclUnhandledCudaError, fn,
                     "this process has not loaded the CUDA driver (initialise CUDA first)");
  collie_result_t rc = collie__cuda_mem_alloc(ptr, size);
  return rc == COLLIE_SUCCESS ? ncclSuccess
                              : nccl_fail(ncclUnhandledCudaError, fn, "%s", collie_last_error());
}

NCCL_EXPORT ncclResult_t
ncclMemFree(void *ptr)
{
  static const char fn[] = "ncclMemFree";
  if (!ptr) return ncclSuccess;
  if (!collie__cuda_live())
    return nccl_fail(ncclUnhandledCudaError, fn, "this process has not loaded the CUDA driver");
  collie_result_t rc = collie__cuda_mem_free(ptr);
  return rc == COLLIE_SUCCESS ? ncclSuccess
                              : nccl_fail(ncclUnhandledCudaError, fn, "%s", collie_last_error());
}
