/*
 * nccl_profiling.c - pncclX for every ncclX: NCCL's profiling interface,
 * which a tool interposes on ncclX and reaches the library through. Each
 * calls its ncclX (nccl_api.def).
 */
#include "nccl/nccl_int.h"

#define NCCL_TWIN_(ret, name, params, args)                                                        \
  NCCL_EXPORT ret p##name params;                                                                  \
  NCCL_EXPORT ret p##name params                                                                   \
  {                                                                                                \
    return name args;                                                                              \
  }
NCCL_IMPLEMENTED(NCCL_TWIN_)
NCCL_UNSUPPORTED(NCCL_TWIN_)
#undef NCCL_TWIN_

#define NCCL_VOID_TWIN_(ret, name, params, args)                                                   \
  NCCL_EXPORT void p##name params;                                                                 \
  NCCL_EXPORT void p##name params                                                                  \
  {                                                                                                \
    name args;                                                                                     \
  }
NCCL_VOID(NCCL_VOID_TWIN_)
#undef NCCL_VOID_TWIN_
