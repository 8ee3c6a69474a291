/*
 * nccl_int.h - what the files of libcollie-nccl share: the communicator
 * behind an ncclComm_t, the translation of NCCL's values to collie's, and
 * the messages ncclGetLastError returns.
 */
#ifndef COLLIE_NCCL_INT_H
#define COLLIE_NCCL_INT_H

#include <stdatomic.h>

#include "collie.h"
#include "nccl/nccl_abi.h"

#define NCCL_EXPORT __attribute__((visibility("default")))
#define NCCL_MSG_LEN 640

struct nccl_store; /* nccl_id.c: the store the communicator met in */

/* PreMulSum operators of a communicator (ncclRedOpCreatePreMulSum). */
#define NCCL_MAX_USER_OPS 64
struct nccl_user_op {
  int live;
  collie_dtype_t dtype;
  int on_device;           /* ncclScalarDevice: read from scalar_dev at each call */
  unsigned char scalar[8]; /* ncclScalarHostImmediate: its bytes, read at creation */
  const void *scalar_dev;
};

struct ncclComm {
  collie_comm_t *c;
  int rank, size, device;
  int blocking; /* config's blocking (1 unless 0 was asked) */
  struct nccl_store *store;
  /* The first failure of a call on it (NCCL's async error: read by other
   * threads, torch's watchdog, while calls run) and its message, written
   * before async is. */
  _Atomic int async;
  char async_msg[NCCL_MSG_LEN];
  /* Calls running on it now: ncclCommAbort from another thread fails them
   * and waits for them to leave before it frees the communicator. */
  _Atomic int inflight;
  struct nccl_user_op ops[NCCL_MAX_USER_OPS];
};

/* Every NCCL function, declared from nccl_api.def (the definitions must
 * match it) and exported. */
#include "nccl/nccl_api.def"
#define NCCL_PROTO_(ret, name, params, args) NCCL_EXPORT ret name params;
NCCL_IMPLEMENTED(NCCL_PROTO_)
NCCL_UNSUPPORTED(NCCL_PROTO_)
NCCL_VOID(NCCL_PROTO_)
#undef NCCL_PROTO_

/* ---- nccl_comm.c ---- */

/* An ncclComm_t for c (freed, with c destroyed, when out of memory). */
ncclResult_t nccl_comm_wrap(collie_comm_t *c, int blocking, int device, ncclComm_t *out,
                            const char *fn);

/* ---- nccl_err.c ---- */

/* Sets the thread's last error to "<fn>: <message>" and returns rc. */
ncclResult_t nccl_fail(ncclResult_t rc, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A collie result as NCCL's, the thread's last error set from collie's
 * message (naming fn) when it failed; a failure of communication is also
 * the communicator's async error. */
ncclResult_t nccl_from_collie(collie_result_t rc, struct ncclComm *comm, const char *fn);
/* The registry of live communicators (register: 0 when out of memory). */
int nccl_comm_register(struct ncclComm *comm);
void nccl_comm_unregister(struct ncclComm *comm);
/* comm is live (INVALID_ARGUMENT for NULL, INVALID_USAGE for a destroyed
 * one; the message names fn). */
ncclResult_t nccl_check_comm(const struct ncclComm *comm, const char *fn);
/* As nccl_check_comm, and counts a call in (comm->inflight) in the same
 * step, so that an abort that unregisters comm then waits for it; leave
 * counts it out. */
ncclResult_t nccl_comm_enter(struct ncclComm *comm, const char *fn);
void nccl_comm_leave(struct ncclComm *comm);
/* The thread's last error ("" when none). */
const char *nccl_last_msg(void);

/* ---- nccl_id.c: the unique id and the store behind it ---- */

/* A new id: a store this process serves (or the launcher's, under
 * collierun) and a fresh nonce. */
ncclResult_t nccl_id_make(ncclUniqueId *id);
/* Opens id's store for rank of size (a prefixed view of it, the id's own
 * keys) as callbacks for collie_config_t, and the id's job token. */
ncclResult_t nccl_id_open(const ncclUniqueId *id, int rank, int size, const char *fn,
                          struct nccl_store **store, const collie_store_callbacks_t **cb,
                          const char **token);

/* ---- nccl_coll.c ---- */

/* Inside ncclGroupStart/End: the call is recorded, not run (1); else 0. */
int nccl_group_open(void);
/* Whether p is device memory (the driver is loaded and says so). */
int nccl_on_device(const void *p);
/* NCCL's datatype as collie's (INVALID_ARGUMENT naming fn: fp8, unknown). */
ncclResult_t nccl_dtype(ncclDataType_t t, const char *fn, collie_dtype_t *out);

/* ---- nccl_premul.c ---- */

/* comm's live PreMulSum operator op, or NULL. */
struct nccl_user_op *nccl_user_op(struct ncclComm *comm, ncclRedOp_t op);
/* The allreduce (root < 0), reduce (root) or reduce_scatter of a PreMulSum
 * operator u: this rank's input scaled by its scalar, then summed. */
collie_result_t nccl_premul_run(struct ncclComm *comm, const struct nccl_user_op *u,
                                int kind_reduce_scatter, int root, const void *sendbuf,
                                void *recvbuf, size_t count, collie_dtype_t dtype,
                                cudaStream_t stream, const char *fn);

#endif /* COLLIE_NCCL_INT_H */
