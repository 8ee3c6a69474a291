/*
 * cuda_ipc.c - the driver's side of the IPC cache (device/ipc_cache.h):
 * what allocation a pointer is in, its legacy IPC handle, and opening and
 * closing a peer's. Legacy handles (cuIpcGetMemHandle) cover what
 * cudaMalloc and torch's default allocator hand out; memory made with
 * cuMemCreate (torch's expandable segments) is not shareable this way, and
 * a call on it takes the host path on every rank.
 */
#include <stdint.h>
#include <string.h>

#include "device/cuda.h"
#include "device/cuda_int.h"
#include "device/ipc_cache.h"
#include "util/error.h"

static collie_result_t
ipc_describe(void *ctx, const void *p, uint64_t *id, uintptr_t *base, size_t *size, int *shareable)
{
  (void)ctx;
  cu_ptr ptr = (cu_ptr)(uintptr_t)p, start = 0;
  unsigned long long buffer_id = 0;
  size_t range = 0;
  int capable = 0;
  cu_result rc = collie__cu.pointer_get_attribute(&buffer_id, CU_ATTR_BUFFER_ID, ptr);
  if (rc == CU_SUCCESS)
    rc = collie__cu.pointer_get_attribute(&start, CU_ATTR_RANGE_START_ADDR, ptr);
  if (rc == CU_SUCCESS) rc = collie__cu.pointer_get_attribute(&range, CU_ATTR_RANGE_SIZE, ptr);
  if (rc != CU_SUCCESS) return collie__cuda_fail(rc, "describing a device buffer for CUDA IPC");
  if (collie__cu.pointer_get_attribute(&capable, CU_ATTR_IS_LEGACY_IPC_CAPABLE, ptr) != CU_SUCCESS)
    capable = 0;
  *id = buffer_id;
  *base = (uintptr_t)start;
  *size = range;
  *shareable = capable;
  return COLLIE_SUCCESS;
}

static collie_result_t
ipc_export(void *ctx, uintptr_t base, unsigned char handle[COLLIE_IPC_HANDLE_BYTES])
{
  (void)ctx;
  cu_ipc_handle h;
  cu_result rc = collie__cu.ipc_get_mem_handle(&h, (cu_ptr)base);
  if (rc != CU_SUCCESS) return collie__cuda_fail(rc, "cuIpcGetMemHandle");
  memcpy(handle, h.reserved, COLLIE_IPC_HANDLE_BYTES);
  return COLLIE_SUCCESS;
}

static int
ipc_alive(void *ctx, uintptr_t base, uint64_t id)
{
  (void)ctx;
  unsigned long long now = 0;
  return collie__cu.pointer_get_attribute(&now, CU_ATTR_BUFFER_ID, (cu_ptr)base) == CU_SUCCESS &&
         now == id;
}

static collie_result_t
ipc_open(void *ctx, const unsigned char handle[COLLIE_IPC_HANDLE_BYTES], void **mapped)
{
  (void)ctx;
  cu_ipc_handle h;
  memcpy(h.reserved, handle, COLLIE_IPC_HANDLE_BYTES);
  cu_ptr p = 0;
  cu_result rc = collie__cu.ipc_open_mem_handle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (rc != CU_SUCCESS) return collie__cuda_fail(rc, "cuIpcOpenMemHandle");
  *mapped = (void *)(uintptr_t)p;
  return COLLIE_SUCCESS;
}

static void
ipc_close(void *ctx, void *mapped)
{
  (void)ctx;
  /* In the mapping's own context: the communicator may go on a thread that
   * has none current (a garbage collector's). */
  int pushed = collie__cuda_push_ctx_of(mapped, "closing a peer's buffer") == COLLIE_SUCCESS;
  collie__cu.ipc_close_mem_handle((cu_ptr)(uintptr_t)mapped);
  if (pushed) collie__cuda_pop();
}

static const struct collie__ipc_ops cuda_ipc_ops = {NULL,      ipc_describe, ipc_export,
                                                    ipc_alive, ipc_open,     ipc_close};

const struct collie__ipc_ops *
collie__cuda_ipc_ops(void)
{
  return &cuda_ipc_ops;
}
