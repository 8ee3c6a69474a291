/*
 * cuda_graph.c - the driver's side of capturing collie's calls into a CUDA
 * graph (core/capture.c; docs/gpu.md, "CUDA graphs"): which graph a stream
 * captures into, the capture mode a library may relax to page-lock its
 * buffers, host nodes, and the graph's ownership of what its nodes use.
 * Every entry point comes through cuGetProcAddress with the others
 * (device/cuda.c).
 */
#include <stddef.h>

#include "device/cuda.h"
#include "device/cuda_int.h"
#include "util/error.h"

#define cu collie__cu

int
collie__cuda_capture_graph(void *stream, void **graph)
{
  *graph = NULL;
  if (!collie__cuda_ready()) return 0;
  int status = 0;
  unsigned long long id = 0;
  const void *deps = NULL;
  size_t ndeps = 0;
  cu_result rc = cu.stream_get_capture_info(stream, &status, &id, graph, &deps, &ndeps);
  if (rc != CU_SUCCESS) return rc >= CU_ERROR_CAPTURE_FIRST && rc <= CU_ERROR_CAPTURE_LAST ? -1 : 0;
  if (status == CU_STREAM_CAPTURE_STATUS_ACTIVE) return *graph ? 1 : -1;
  return status == 0 ? 0 : -1; /* INVALIDATED */
}

int
collie__cuda_capture_relax(void)
{
  int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (cu.thread_exchange_capture_mode(&mode) != CU_SUCCESS) return -1;
  return mode;
}

void
collie__cuda_capture_restore(int mode)
{
  if (mode >= 0) cu.thread_exchange_capture_mode(&mode);
}

collie_result_t
collie__cuda_host_node(void *stream, void (*fn)(void *), void *arg, const char *what)
{
  cu_result rc = cu.launch_host_func(stream, fn, arg);
  return rc == CU_SUCCESS ? COLLIE_SUCCESS : collie__cuda_fail(rc, what);
}

collie_result_t
collie__cuda_graph_own(void *graph, void *arg, void (*destroy)(void *), const char *what)
{
  void *obj = NULL;
  cu_result rc = cu.user_object_create(&obj, arg, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
  if (rc == CU_SUCCESS) rc = cu.graph_retain_user_object(graph, obj, 1, CU_GRAPH_USER_OBJECT_MOVE);
  return rc == CU_SUCCESS ? COLLIE_SUCCESS : collie__cuda_fail(rc, what);
}

collie_result_t
collie__cuda_refuse_capture(const char *fn, void *stream)
{
  return collie__err(COLLIE_UNSUPPORTED,
                     "%s on CUDA device memory while %s is capturing a CUDA graph: collie captures "
                     "a call given the capturing stream in opts->cuda_stream (allreduce, "
                     "allgather, reduce_scatter, broadcast, send, recv; not a group's), and no "
                     "other, which would break the capture (docs/gpu.md, \"CUDA graphs\")",
                     fn, stream ? "opts->cuda_stream" : "a stream of this process");
}
