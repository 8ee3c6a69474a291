/*
 * nccl_premul.c - ncclRedOpCreatePreMulSum: a sum whose every rank's input
 * is first multiplied by that rank's scalar (torch's premul_sum, FSDP's
 * gradient divide factors). collie's reductions have no such operator, so
 * the call scales a copy of this rank's input (on the host: device memory
 * is staged through it) and runs a SUM from the copy: right for any
 * scalars, the ranks' different ones included, at the price of the staging
 * copies (docs/nccl.md).
 */
#include <stdlib.h>
#include <string.h>

#include "device/cuda.h"
#include "nccl/nccl_int.h"
#include "reduce/reduce.h"
#include "util/error.h"
#include "util/util.h"

#define NCCL_PREMUL_WAIT_MS 60000

/* The op's scalar as bytes of its dtype: read now (host-immediate), or at
 * each call from device memory (ncclScalarDevice). */
static collie_result_t
premul_scalar(const struct nccl_user_op *u, cudaStream_t stream, unsigned char out[8])
{
  size_t es = collie_dtype_size(u->dtype);
  if (!u->on_device) {
    memcpy(out, u->scalar, es);
    return COLLIE_SUCCESS;
  }
  collie_result_t rc = collie__cuda_stream_sync(
      stream, collie__deadline_after_ms(NCCL_PREMUL_WAIT_MS), "the PreMulSum scalar's stream");
  return rc == COLLIE_SUCCESS ? collie__cuda_copy(out, u->scalar_dev, es, "the PreMulSum scalar")
                              : rc;
}

/* buf[i] *= scalar, n elements of dtype, in the dtype's own arithmetic
 * (16-bit floats through float32, rounded to nearest even). */
static void
premul_scale(void *buf, size_t n, collie_dtype_t dtype, const unsigned char s[8])
{
#define PREMUL_INT(T)                                                                              \
  do {                                                                                             \
    T k;                                                                                           \
    memcpy(&k, s, sizeof(k));                                                                      \
    T *b = buf;                                                                                    \
    for (size_t i = 0; i < n; i++) b[i] = (T)(b[i] * k);                                           \
  } while (0)
  switch (dtype) {
  case COLLIE_INT8:
    PREMUL_INT(int8_t);
    break;
  case COLLIE_UINT8:
    PREMUL_INT(uint8_t);
    break;
  case COLLIE_INT32:
    PREMUL_INT(int32_t);
    break;
  case COLLIE_UINT32:
    PREMUL_INT(uint32_t);
    break;
  case COLLIE_INT64:
    PREMUL_INT(int64_t);
    break;
  case COLLIE_UINT64:
    PREMUL_INT(uint64_t);
    break;
  case COLLIE_FLOAT32:
    PREMUL_INT(float);
    break;
  case COLLIE_FLOAT64:
    PREMUL_INT(double);
    break;
  case COLLIE_FLOAT16:
  case COLLIE_BFLOAT16: {
    int half = dtype == COLLIE_FLOAT16;
    unsigned short k16, *b = buf;
    memcpy(&k16, s, sizeof(k16));
    float k = half ? collie__half_to_float(k16) : collie__bf16_to_float(k16);
    for (size_t i = 0; i < n; i++) {
      float x = (half ? collie__half_to_float(b[i]) : collie__bf16_to_float(b[i])) * k;
      b[i] = half ? collie__float_to_half(x) : collie__float_to_bf16(x);
    }
    break;
  }
  default:
    break;
  }
#undef PREMUL_INT
}

NCCL_EXPORT ncclResult_t
ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                         ncclScalarResidence_t residence, ncclComm_t comm)
{
  static const char fn[] = "ncclRedOpCreatePreMulSum";
  ncclResult_t r = nccl_check_comm(comm, fn);
  if (r != ncclSuccess) return r;
  if (!op || !scalar)
    return nccl_fail(ncclInvalidArgument, fn, "%s is NULL", !op ? "op" : "scalar");
  collie_dtype_t dt;
  if ((r = nccl_dtype(datatype, fn, &dt)) != ncclSuccess) return r;
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return nccl_fail(ncclInvalidArgument, fn,
                     "residence = %d is neither ncclScalarDevice nor ncclScalarHostImmediate",
                     (int)residence);
  int slot = -1;
  for (int i = 0; i < NCCL_MAX_USER_OPS && slot < 0; i++)
    if (!comm->ops[i].live) slot = i;
  if (slot < 0)
    return nccl_fail(ncclInvalidUsage, fn,
                     "%d PreMulSum operators of this communicator are live: destroy some first "
                     "(ncclRedOpDestroy)",
                     NCCL_MAX_USER_OPS);
  struct nccl_user_op *u = &comm->ops[slot];
  memset(u, 0, sizeof(*u));
  u->dtype = dt;
  u->on_device = residence == ncclScalarDevice;
  if (u->on_device)
    u->scalar_dev = scalar;
  else
    memcpy(u->scalar, scalar, collie_dtype_size(dt));
  u->live = 1;
  *op = (ncclRedOp_t)(ncclNumOps + slot);
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t
ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
  static const char fn[] = "ncclRedOpDestroy";
  ncclResult_t r = nccl_check_comm(comm, fn);
  if (r != ncclSuccess) return r;
  struct nccl_user_op *u = nccl_user_op(comm, op);
  if (!u)
    return nccl_fail(ncclInvalidArgument, fn,
                     "op = %d is not a live PreMulSum operator of this communicator", (int)op);
  u->live = 0;
  return ncclSuccess;
}

struct nccl_user_op *
nccl_user_op(struct ncclComm *comm, ncclRedOp_t op)
{
  int i = (int)op - (int)ncclNumOps;
  if (i < 0 || i >= NCCL_MAX_USER_OPS || !comm->ops[i].live) return NULL;
  return &comm->ops[i];
}

collie_result_t
nccl_premul_run(struct ncclComm *comm, const struct nccl_user_op *u, int kind_reduce_scatter,
                int root, const void *sendbuf, void *recvbuf, size_t count, collie_dtype_t dtype,
                cudaStream_t stream, const char *fn)
{
  /* The bytes of this rank's input: reduce_scatter's whole send buffer. */
  size_t n = kind_reduce_scatter ? count * (size_t)comm->size : count;
  size_t es = collie_dtype_size(dtype), bytes = n * es;
  if (u->dtype != dtype)
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "the PreMulSum operator was made for %s, the call is on %s",
                       collie_dtype_name(u->dtype), collie_dtype_name(dtype));
  if (collie__cuda_live() && collie__cuda_capturing(stream))
    return collie__err(
        COLLIE_UNSUPPORTED,
        "a call with a PreMulSum operator cannot be captured into a CUDA graph (it "
        "scales this rank's input on the host): use ncclSum and scale on the GPU, or "
        "make the call outside the capture");
  unsigned char s[8] = {0};
  collie_result_t rc = premul_scalar(u, stream, s);
  if (rc != COLLIE_SUCCESS) return rc;
  int dev = nccl_on_device(sendbuf);
  void *host = malloc(bytes ? bytes : 1), *scaled = host;
  if (!host) return collie__err(COLLIE_SYSTEM_ERROR, "%s: out of memory for the scaled input", fn);
  if (dev) {
    rc = collie__cuda_stream_sync(stream, collie__deadline_after_ms(NCCL_PREMUL_WAIT_MS),
                                  "the PreMulSum input's stream");
    if (rc == COLLIE_SUCCESS) rc = collie__cuda_copy(host, sendbuf, bytes, "the PreMulSum input");
  } else {
    memcpy(host, sendbuf, bytes);
  }
  if (rc == COLLIE_SUCCESS) premul_scale(host, n, dtype, s);
  void *devtmp = NULL;
  if (rc == COLLIE_SUCCESS && dev) {
    rc = collie__cuda_mem_alloc(&devtmp, bytes ? bytes : 1);
    if (rc == COLLIE_SUCCESS) rc = collie__cuda_copy(devtmp, host, bytes, "the scaled input");
    scaled = devtmp;
  }
  if (rc == COLLIE_SUCCESS) {
    collie_opts_t o;
    memset(&o, 0, sizeof(o));
    o.cuda_stream = stream;
    if (kind_reduce_scatter)
      rc = collie_reduce_scatter(comm->c, scaled, recvbuf, count, dtype, COLLIE_SUM, &o, NULL);
    else if (root >= 0)
      rc = collie_reduce(comm->c, scaled, recvbuf, count, dtype, COLLIE_SUM, root, &o, NULL);
    else
      rc = collie_allreduce(comm->c, scaled, recvbuf, count, dtype, COLLIE_SUM, &o, NULL);
  }
  if (devtmp) collie__cuda_mem_free(devtmp);
  free(host);
  return rc;
}
