/*
 * nccl_unsupported.c - the rest of NCCL's API: exported, so that a program
 * linked against NCCL (torch's libtorch_cuda, nccl-tests) loads, and
 * answering ncclInvalidUsage with ncclGetLastError naming the call collie
 * lacks. The list is nccl_api.def's NCCL_UNSUPPORTED; docs/nccl.md says
 * what each would take.
 */
#include "nccl/nccl_int.h"

#define NCCL_STUB_(ret, name, params, args)                                                        \
  NCCL_EXPORT ret name params                                                                      \
  {                                                                                                \
    return nccl_fail(ncclInvalidUsage, #name,                                                      \
                     "not supported by collie's NCCL library (docs/nccl.md lists what is)");       \
  }
NCCL_UNSUPPORTED(NCCL_STUB_)
#undef NCCL_STUB_

/* Logging's reload (ncclResetDebugInit) and the parameter dump: nothing to
 * do (collie reads its settings at each init). */
NCCL_EXPORT void
ncclResetDebugInit(void)
{
}

NCCL_EXPORT void
ncclParamDumpAll(void)
{
}
