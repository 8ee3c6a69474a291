/*
 * cuda.h - the CUDA driver, opened at run time (issue 21): libcollie links
 * only libc and pthreads, and a process that never loads the driver pays
 * one cheap check per call (collie__cuda_live).
 *
 * Nothing here includes cuda.h: the few driver types and constants used are
 * declared in cuda.c, so a machine without the CUDA toolkit builds the same
 * library.
 */
#ifndef COLLIE_DEVICE_CUDA_H
#define COLLIE_DEVICE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"
#include "device/host_mem.h"

/* Whether this process has the CUDA driver loaded (by itself: torch, CuPy,
 * the user's code): only then can a buffer be device memory. The first
 * time the driver is seen, its entry points are resolved. Costs one
 * dl_iterate_phdr step while the driver is absent (the loader's lock: ask
 * collie__host_mem_plain first), one atomic load after. */
int collie__cuda_live(void);

/* collie__host_mem_plain, collie__host_mem_plain_both: device/host_mem.h. */

/* Where p points: 1 device memory (cuMemAlloc, cudaMalloc; also memory of
 * another process mapped through IPC), 0 memory the CPU can read (plain,
 * pinned, registered or managed). *device gets the device ordinal of device
 * memory. Never fails: anything the driver does not know is host memory. */
int collie__cuda_is_device(const void *p, int *device);

/* Copies n bytes between a device and the host (dst or src may be either;
 * unified addressing tells which), synchronously: the copy is ordered after
 * the work already queued on the legacy default stream, and done when it
 * returns (a copy into device memory waits for that stream, up to 60 s:
 * then COLLIE_TIMEOUT). Errors: COLLIE_UNSUPPORTED without a driver,
 * COLLIE_SYSTEM_ERROR naming the driver's error. what names the copy in
 * messages. */
collie_result_t collie__cuda_copy(void *dst, const void *src, size_t n, const char *what);

/* Opens the driver from path (NULL: "libcuda.so.1") and resolves its entry
 * points through cuGetProcAddress. COLLIE_UNSUPPORTED with the reason (no
 * such library, too old for cuGetProcAddress, an entry point missing). The
 * loader collie__cuda_live uses; tests call it with a bad path. */
collie_result_t collie__cuda_open(const char *path);

/* ---- The direct path (coll/cuda_ipc.c): kernels, streams, IPC ---- */

struct collie__ipc_ops;

/* The device code this build carries, as logs and collie-bench --version
 * print it: "PTX compute_75 (nvcc release 13.0)", or "none (built without
 * nvcc)". collie__cuda_has_kernels: whether there is any. */
const char *collie__cuda_device_code(void);
int collie__cuda_has_kernels(void);

/* Pushes the context that owns device pointer p (the buffer's own, whatever
 * the calling thread has current); undo with collie__cuda_pop. */
collie_result_t collie__cuda_push_ctx_of(const void *p, const char *what);
void collie__cuda_pop(void);
/* The context that owns device pointer p, kept to be pushed later
 * (collie__cuda_push_ctx) on a thread that has none: a receive into host
 * memory of a peer's device message maps the peer's buffer there. */
collie_result_t collie__cuda_ctx_of(const void *p, void **ctx, const char *what);
collie_result_t collie__cuda_push_ctx(void *ctx, const char *what);

/* Whether stream (NULL: the legacy default stream) is capturing a CUDA graph
 * (cuStreamIsCapturing; for the legacy stream, also while another stream of
 * the process captures, which forbids it). Asks nothing without a driver.
 * A call on device memory checks this first: collie's device path waits
 * for streams and copies synchronously, which a capture cannot hold and
 * which would invalidate it, so such a call is refused before any CUDA
 * call (docs/gpu.md, "CUDA graphs"). */
int collie__cuda_capturing(void *stream);
/* COLLIE_UNSUPPORTED for a call named fn on device memory that cannot be
 * captured while stream (NULL: the legacy default one) captures a graph:
 * what collie captures, and how. */
collie_result_t collie__cuda_refuse_capture(const char *fn, void *stream);

/* off: this thread makes no driver call from now on (collie__cuda_live and
 * collie__cuda_is_device answer 0: every buffer is host memory); 0 undoes
 * it. For the driver's thread that runs a graph's host nodes. */
void collie__cuda_thread_off(int off);

/* ---- CUDA graphs (cuda_graph.c; docs/gpu.md, "CUDA graphs") ---- */

/* The graph stream is capturing into (*graph; 1), 0 when it is not
 * capturing, -1 when its capture is invalidated or the query says a capture
 * elsewhere forbids it. */
int collie__cuda_capture_graph(void *stream, void **graph);
/* Lets this thread make calls a capture in global mode forbids (page-locking
 * memory, pointer queries): returns the mode to give back to
 * collie__cuda_capture_restore. */
int collie__cuda_capture_relax(void);
void collie__cuda_capture_restore(int mode);
/* Queues fn(arg) on stream as a host node (cuLaunchHostFunc). */
collie_result_t collie__cuda_host_node(void *stream, void (*fn)(void *), void *arg,
                                       const char *what);
/* Makes graph own arg: destroy(arg) runs once the graph is destroyed, on a
 * thread of the driver's, which must make no driver call in it. */
collie_result_t collie__cuda_graph_own(void *graph, void *arg, void (*destroy)(void *),
                                       const char *what);

/* Waits for everything queued on stream (NULL: the legacy default stream),
 * at most until deadline_ns (monotonic): then COLLIE_TIMEOUT naming what. */
collie_result_t collie__cuda_stream_sync(void *stream, int64_t deadline_ns, const char *what);

/* Queues a copy of n bytes on stream (unified addressing: any direction). */
collie_result_t collie__cuda_copy_async(void *dst, const void *src, size_t n, void *stream,
                                        const char *what);

/* Queues, on stream in the current context, the n copies bytes[k] from
 * srcs[k] to dsts[k] (device memory, mapped peers' included; none empty or
 * onto itself is skipped): in launches of one kernel for up to 32 of them
 * (without device code, and for unaligned copies of 256 KiB and more, one
 * cuMemcpyAsync each). Errors as collie__cuda_copy_async's, what naming
 * the caller's copies. */
collie_result_t collie__cuda_copy_list(void *const *dsts, const void *const *srcs,
                                       const size_t *bytes, int n, void *stream, const char *what);

/* Queues, on stream in the current context (collie__cuda_push_ctx_of), for
 * i < n: every dsts[k][i] (k < ndst) = srcs[0][i] op ... op srcs[nsrc-1][i],
 * then / div when div > 1 (AVG's division; op AVG combines as SUM). A
 * destination may be a source (in place). With one source it is a copy to
 * every destination. COLLIE_UNSUPPORTED without device code; driver errors
 * as SYSTEM_ERROR. */
collie_result_t collie__cuda_reduce(void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                                    size_t n, collie_dtype_t dtype, collie_op_t op, int div,
                                    void *stream);

/* The device this thread's current context is on, as the driver's 16-byte
 * UUID (the same GPU in every process, whatever CUDA_VISIBLE_DEVICES). */
collie_result_t collie__cuda_current_uuid(unsigned char uuid[16]);

/* The device ordinal of this thread's current context (cuCtxGetDevice). */
collie_result_t collie__cuda_current_device(int *device);
/* Device memory of n bytes in the current context (cuMemAlloc), and its
 * release (libcollie-nccl's ncclMemAlloc and ncclMemFree). Driver errors
 * as SYSTEM_ERROR naming the call. */
collie_result_t collie__cuda_mem_alloc(void **p, size_t n);
collie_result_t collie__cuda_mem_free(void *p);
/* The launch of a reduction of n elements of esize bytes on a device of sms
 * multiprocessors: threads per block and blocks (a grid-stride loop covers
 * the rest; aligned: 16 bytes per thread and step, else one element). */
void collie__cuda_grid(size_t n, size_t esize, int aligned, int sms, unsigned *blocks,
                       unsigned *threads);

/* The driver's side of the IPC cache (device/ipc_cache.h). */
const struct collie__ipc_ops *collie__cuda_ipc_ops(void);

#endif /* COLLIE_DEVICE_CUDA_H */
