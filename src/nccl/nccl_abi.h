/*
 * nccl_abi.h - NCCL's C ABI as programs compiled against NCCL's nccl.h
 * (2.2x) see it: the values of its enums, the layout of ncclUniqueId and
 * of ncclConfig_t's versioned header, and the prototypes libcollie-nccl
 * exports (src/nccl/, docs/nccl.md). Written from NCCL's documentation of
 * its API; nothing here includes NCCL's or CUDA's headers, so the library
 * builds on a machine with neither.
 */
#ifndef COLLIE_NCCL_ABI_H
#define COLLIE_NCCL_ABI_H

#include <stddef.h>
#include <stdint.h>

/* The NCCL version this library answers ncclGetVersion with: the API it
 * follows (2.23's calls; newer headers' config fields are read by size). */
#define COLLIE_NCCL_MAJOR 2
#define COLLIE_NCCL_MINOR 23
#define COLLIE_NCCL_PATCH 4
#define COLLIE_NCCL_VERSION_CODE                                                                   \
  (COLLIE_NCCL_MAJOR * 10000 + COLLIE_NCCL_MINOR * 100 + COLLIE_NCCL_PATCH)

typedef struct ncclComm *ncclComm_t;
typedef void *cudaStream_t; /* a CUstream; NULL: the legacy default stream */

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Built-in ops 0..4; ncclRedOpCreatePreMulSum hands out values from
 * ncclNumOps up. An int-sized enum in every NCCL. */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

#define NCCL_SPLIT_NOCOLOR (-1)
#define NCCL_CONFIG_UNDEF_INT INT32_MIN
#define NCCL_API_MAGIC 0xcafebeefu

/* The fields of ncclConfig_t this library reads: its header (which every
 * version shares) and the first fields after it, present in every
 * ncclConfig_t since NCCL 2.14. Later fields are read only where the
 * caller's size covers them (a header of another version works). */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;
  int splitShare;
} ncclConfig_t;

/* The header of ncclCollConfig_t (NCCL 2.30's per-call configuration):
 * collie checks it and otherwise runs the call as the plain one. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
} ncclCollConfig_t;

#endif /* COLLIE_NCCL_ABI_H */
