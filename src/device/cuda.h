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

#include "collie.h"

/* Whether this process has the CUDA driver loaded (by itself: torch, CuPy,
 * the user's code): only then can a buffer be device memory. The first
 * time the driver is seen, its entry points are resolved. Costs one
 * dl_iterate_phdr step while the driver is absent (+8 ns on a 1-rank
 * broadcast, docs/gpu.md), one atomic load after. */
int collie__cuda_live(void);

/* Where p points: 1 device memory (cuMemAlloc, cudaMalloc; also memory of
 * another process mapped through IPC), 0 memory the CPU can read (plain,
 * pinned, registered or managed). *device gets the device ordinal of device
 * memory. Never fails: anything the driver does not know is host memory. */
int collie__cuda_is_device(const void *p, int *device);

/* Copies n bytes between a device and the host (dst or src may be either;
 * unified addressing tells which), synchronously: the copy is ordered after
 * the work already queued on the legacy default stream, and done when it
 * returns. Errors: COLLIE_UNSUPPORTED without a driver, COLLIE_SYSTEM_ERROR
 * naming the driver's error. what names the copy in messages. */
collie_result_t collie__cuda_copy(void *dst, const void *src, size_t n, const char *what);

/* Opens the driver from path (NULL: "libcuda.so.1") and resolves its entry
 * points through cuGetProcAddress. COLLIE_UNSUPPORTED with the reason (no
 * such library, too old for cuGetProcAddress, an entry point missing). The
 * loader collie__cuda_live uses; tests call it with a bad path. */
collie_result_t collie__cuda_open(const char *path);

#endif /* COLLIE_DEVICE_CUDA_H */
