/*
 * nccl_err.c - NCCL's result codes and last-error message over collie's:
 * every failing call leaves "<nccl call>: <why>" for ncclGetLastError, with
 * collie's message (which names the peer, the operation, the argument)
 * where collie said why; a failure of communication also becomes the
 * communicator's async error (ncclCommGetAsyncError), as NCCL reports a
 * dead peer or a timeout.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>

#include "nccl/nccl_int.h"

static _Thread_local char nccl_msg[NCCL_MSG_LEN];

ncclResult_t
nccl_fail(ncclResult_t rc, const char *fn, const char *fmt, ...)
{
  int n = snprintf(nccl_msg, sizeof(nccl_msg), "%s: ", fn);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof(nccl_msg))
    vsnprintf(nccl_msg + n, sizeof(nccl_msg) - (size_t)n, fmt, ap);
  va_end(ap);
  return rc;
}

static ncclResult_t
nccl_result_of(collie_result_t rc)
{
  switch (rc) {
  case COLLIE_SUCCESS:
    return ncclSuccess;
  case COLLIE_INVALID_ARGUMENT:
    return ncclInvalidArgument;
  case COLLIE_INVALID_USAGE:
  case COLLIE_UNSUPPORTED:
    return ncclInvalidUsage;
  case COLLIE_TIMEOUT:
    return ncclTimeout;
  case COLLIE_REMOTE_ERROR:
    return ncclRemoteError;
  case COLLIE_SYSTEM_ERROR:
    return ncclSystemError;
  case COLLIE_IN_PROGRESS:
    return ncclInProgress;
  default:
    return ncclInternalError;
  }
}

ncclResult_t
nccl_from_collie(collie_result_t rc, struct ncclComm *comm, const char *fn)
{
  if (rc == COLLIE_SUCCESS) return ncclSuccess;
  ncclResult_t r = nccl_result_of(rc);
  nccl_fail(r, fn, "%s", collie_last_error());
  /* What NCCL would find only later, on the stream: a peer gone, a
   * deadline passed, the communicator failed. An argument error leaves the
   * communicator usable (collie's too). */
  if (comm &&
      (r == ncclRemoteError || r == ncclTimeout || r == ncclSystemError ||
       r == ncclInternalError) &&
      atomic_load(&comm->async) == ncclSuccess) {
    snprintf(comm->async_msg, sizeof(comm->async_msg), "%s", nccl_msg);
    atomic_store(&comm->async, (int)r);
  }
  return r;
}

/* The live communicators: a destroyed one is refused by address, never
 * read (its memory is freed). */
static pthread_mutex_t nccl_live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm **nccl_live;
static size_t nccl_nlive, nccl_live_cap;

int
nccl_comm_register(struct ncclComm *comm)
{
  pthread_mutex_lock(&nccl_live_mu);
  int ok = 1;
  if (nccl_nlive == nccl_live_cap) {
    size_t cap = nccl_live_cap ? 2 * nccl_live_cap : 16;
    struct ncclComm **grown = realloc(nccl_live, cap * sizeof(*grown));
    if (grown) {
      nccl_live = grown;
      nccl_live_cap = cap;
    } else {
      ok = 0;
    }
  }
  if (ok) nccl_live[nccl_nlive++] = comm;
  pthread_mutex_unlock(&nccl_live_mu);
  return ok;
}

void
nccl_comm_unregister(struct ncclComm *comm)
{
  pthread_mutex_lock(&nccl_live_mu);
  for (size_t i = 0; i < nccl_nlive; i++)
    if (nccl_live[i] == comm) {
      nccl_live[i] = nccl_live[--nccl_nlive];
      break;
    }
  pthread_mutex_unlock(&nccl_live_mu);
}

static int
nccl_comm_live(const struct ncclComm *comm)
{
  pthread_mutex_lock(&nccl_live_mu);
  int live = 0;
  for (size_t i = 0; i < nccl_nlive && !live; i++) live = nccl_live[i] == comm;
  pthread_mutex_unlock(&nccl_live_mu);
  return live;
}

ncclResult_t
nccl_check_comm(const struct ncclComm *comm, const char *fn)
{
  if (!comm) return nccl_fail(ncclInvalidArgument, fn, "comm is NULL");
  if (!nccl_comm_live(comm))
    return nccl_fail(ncclInvalidUsage, fn, "communicator %p was destroyed or never initialised",
                     (const void *)comm);
  return ncclSuccess;
}

ncclResult_t
nccl_comm_enter(struct ncclComm *comm, const char *fn)
{
  if (!comm) return nccl_fail(ncclInvalidArgument, fn, "comm is NULL");
  pthread_mutex_lock(&nccl_live_mu);
  int live = 0;
  for (size_t i = 0; i < nccl_nlive && !live; i++) live = nccl_live[i] == comm;
  if (live) atomic_fetch_add(&comm->inflight, 1);
  pthread_mutex_unlock(&nccl_live_mu);
  if (!live)
    return nccl_fail(ncclInvalidUsage, fn, "communicator %p was destroyed or never initialised",
                     (const void *)comm);
  return ncclSuccess;
}

void
nccl_comm_leave(struct ncclComm *comm)
{
  atomic_fetch_sub(&comm->inflight, 1);
}

const char *
nccl_last_msg(void)
{
  return nccl_msg;
}

NCCL_EXPORT const char *
ncclGetErrorString(ncclResult_t result)
{
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (ncclGetLastError says which)";
  case ncclSystemError:
    return "unhandled system error (ncclGetLastError says which)";
  case ncclInternalError:
    return "internal error (a bug in collie: please report it with ncclGetLastError's message)";
  case ncclInvalidArgument:
    return "invalid argument (ncclGetLastError says which)";
  case ncclInvalidUsage:
    return "invalid usage (ncclGetLastError says what)";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  case ncclTimeout:
    return "operation timed out";
  default:
    return "unknown result code";
  }
}

NCCL_EXPORT const char *
ncclGetLastError(ncclComm_t comm)
{
  if (nccl_msg[0] || !comm || !nccl_comm_live(comm) || atomic_load(&comm->async) == ncclSuccess)
    return nccl_msg;
  return comm->async_msg;
}
