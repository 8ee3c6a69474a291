/*
 * cuda_int.h - what the files of src/device share about the driver: its few
 * types and constants (cuda.h's values, declared here so that a machine
 * without the toolkit builds the same library), the table of entry points
 * that cuda.c resolves, and the error helper. Not for use outside
 * src/device: the rest of collie sees device/cuda.h only.
 */
#ifndef COLLIE_DEVICE_CUDA_INT_H
#define COLLIE_DEVICE_CUDA_INT_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"

typedef int cu_result;
typedef unsigned long long cu_ptr;
typedef void *cu_ctx;
typedef void *cu_stream;
typedef void *cu_module;
typedef void *cu_function;
typedef void *cu_event;
typedef int cu_device;
typedef struct {
  char reserved[64];
} cu_ipc_handle;

enum {
  CU_SUCCESS = 0,
  CU_ERROR_NOT_READY = 600,
  CU_ATTR_CONTEXT = 1,
  CU_ATTR_MEMORY_TYPE = 2,
  CU_ATTR_BUFFER_ID = 7,
  CU_ATTR_IS_MANAGED = 8,
  CU_ATTR_DEVICE_ORDINAL = 9,
  CU_ATTR_IS_LEGACY_IPC_CAPABLE = 10,
  CU_ATTR_RANGE_START_ADDR = 11,
  CU_ATTR_RANGE_SIZE = 12,
  CU_MEMORYTYPE_DEVICE = 2,
  CU_DEV_ATTR_MULTIPROCESSOR_COUNT = 16,
  CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1,
  CU_STREAM_NON_BLOCKING = 1,
  CU_EVENT_DISABLE_TIMING = 2,
  /* cuStreamIsCapturing's failures that mean a capture is under way:
   * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED .. _WRONG_THREAD. */
  CU_ERROR_CAPTURE_FIRST = 900,
  CU_ERROR_CAPTURE_LAST = 908,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,
  CU_USER_OBJECT_NO_DESTRUCTOR_SYNC = 1,
  CU_GRAPH_USER_OBJECT_MOVE = 1,
  CU_API_VERSION = 12000, /* the entry points' behaviour asked for */
};

/* The driver's entry points collie uses, resolved by cuda.c. */
struct collie__cu {
  cu_result (*pointer_get_attribute)(void *, int, cu_ptr);
  cu_result (*ctx_push)(cu_ctx);
  cu_result (*ctx_pop)(cu_ctx *);
  cu_result (*ctx_get_device)(cu_device *);
  cu_result (*ctx_get_current)(cu_ctx *);
  cu_result (*device_get_attribute)(int *, int, cu_device);
  cu_result (*device_get_uuid)(unsigned char *, cu_device);
  cu_result (*memcpy)(cu_ptr, cu_ptr, size_t);
  cu_result (*memcpy_async)(cu_ptr, cu_ptr, size_t, cu_stream);
  cu_result (*stream_query)(cu_stream);
  cu_result (*stream_create)(cu_stream *, unsigned);
  cu_result (*stream_destroy)(cu_stream);
  cu_result (*stream_wait_event)(cu_stream, cu_event, unsigned);
  cu_result (*stream_is_capturing)(cu_stream, int *);
  /* CUDA graphs (device/cuda_graph.c) */
  cu_result (*stream_get_capture_info)(cu_stream, int *, unsigned long long *, void **,
                                       const void **, size_t *);
  cu_result (*thread_exchange_capture_mode)(int *);
  cu_result (*launch_host_func)(cu_stream, void (*)(void *), void *);
  cu_result (*user_object_create)(void **, void *, void (*)(void *), unsigned, unsigned);
  cu_result (*graph_retain_user_object)(void *, void *, unsigned, unsigned);
  cu_result (*event_create)(cu_event *, unsigned);
  cu_result (*event_record)(cu_event, cu_stream);
  cu_result (*event_query)(cu_event);
  cu_result (*event_destroy)(cu_event);
  cu_result (*mem_alloc_host)(void **, size_t);
  cu_result (*mem_alloc)(cu_ptr *, size_t);
  cu_result (*mem_free)(cu_ptr);
  cu_result (*mem_free_host)(void *);
  cu_result (*ipc_get_mem_handle)(cu_ipc_handle *, cu_ptr);
  cu_result (*ipc_open_mem_handle)(cu_ptr *, cu_ipc_handle, unsigned);
  cu_result (*ipc_close_mem_handle)(cu_ptr);
  cu_result (*module_load_data)(cu_module *, const void *);
  cu_result (*module_get_function)(cu_function *, cu_module, const char *);
  cu_result (*launch_kernel)(cu_function, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, cu_stream, void **, void **);
  cu_result (*error_string)(cu_result, const char **);
};
extern struct collie__cu collie__cu;

/* Whether the driver is open and its table filled (collie__cuda_live). */
int collie__cuda_ready(void);

/* Polls query(handle) (cuStreamQuery, cuEventQuery) until the GPU's work is
 * done, yielding the CPU between polls as the driver's own spinning wait
 * does; COLLIE_TIMEOUT naming `what` once deadline_ns (monotonic) passes, so
 * no wait for the GPU outlasts its call's deadline. */
collie_result_t collie__cuda_poll(cu_result (*query)(void *), void *handle, int64_t deadline_ns,
                                  const char *what);

/* COLLIE_SYSTEM_ERROR "CUDA: <what> failed: <driver's message> (error N)". */
collie_result_t collie__cuda_fail(cu_result rc, const char *what);

#endif /* COLLIE_DEVICE_CUDA_INT_H */
