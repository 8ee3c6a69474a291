/*
 * pinned.h - a communicator's pinned staging for device data that crosses
 * hosts (issue 21 item 4; coll/cuda_pipeline.c): two page-locked host
 * buffers of one chunk each and two streams of its own, one copying chunks
 * in from the device and one copying them out, so that the copy engines move
 * chunk k+1 in and chunk k-1 out while the CPU runs the host collective on
 * chunk k. Events order the reuse of a buffer on the GPU's side: a buffer is
 * copied into only once its last copy out has finished.
 *
 * Made on first use in the current context and kept for the communicator's
 * life (page-locking memory costs milliseconds); made again, larger or in
 * another context, when a call needs it.
 */
#ifndef COLLIE_DEVICE_PINNED_H
#define COLLIE_DEVICE_PINNED_H

#include <stddef.h>
#include <stdint.h>

#include "collie.h"

struct collie__pinned;

/* *p ready for chunks of `chunk` bytes in the current context (made or
 * remade as needed). Errors: the driver's (out of pinned memory). */
collie_result_t collie__pinned_get(struct collie__pinned **p, size_t chunk);
/* Frees the buffers, streams and events (NULL: nothing). */
void collie__pinned_free(struct collie__pinned *p);

/* Buffer i (0 or 1). */
void *collie__pinned_buf(struct collie__pinned *p, int i);
/* Queues n bytes from device src into buffer i at byte off, after the last
 * copy out of buffer i. */
collie_result_t collie__pinned_in(struct collie__pinned *p, int i, size_t off, const void *src,
                                  size_t n);
/* The waits below end at deadline_ns (monotonic) with COLLIE_TIMEOUT. */
/* Waits until every copy in queued so far has finished. */
collie_result_t collie__pinned_wait_in(struct collie__pinned *p, int64_t deadline_ns);
/* Queues n bytes from buffer i at byte off to device dst. */
collie_result_t collie__pinned_out(struct collie__pinned *p, int i, size_t off, void *dst,
                                   size_t n);
/* Waits until buffer i's last copy out has finished (before the CPU writes
 * it again). */
collie_result_t collie__pinned_wait_buf(struct collie__pinned *p, int i, int64_t deadline_ns);
/* Waits until every copy out queued so far has finished. */
collie_result_t collie__pinned_wait_out(struct collie__pinned *p, int64_t deadline_ns);

/* A communicator's page-locked area for staging whole calls (core/stage.c):
 * copies to and from it run at the copy engines' speed, where pageable
 * memory is copied through the driver's own bounce buffers and faults its
 * pages in on every call. Made in the current context at the first call,
 * grown when a call needs more, freed with the communicator. Used by the
 * issuing thread only (one thread issues calls on a communicator). */
struct collie__pinned_area;

/* *buf: at least `bytes` of the area (made or grown in the current context;
 * growing takes half as much again, up to cap). Errors: the driver's (out of
 * pinned memory); the area is then left empty. */
collie_result_t collie__pinned_area_get(struct collie__pinned_area **a, size_t bytes, size_t cap,
                                        void **buf);
/* Frees the area (NULL: nothing). */
void collie__pinned_area_free(struct collie__pinned_area *a);

#endif /* COLLIE_DEVICE_PINNED_H */
