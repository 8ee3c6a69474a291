/*
 * capture.h - what the two halves of a captured call share (core/capture.c
 * records it at capture; core/capture_replay.c is its host node, run at
 * each replay of the graph).
 */
#ifndef COLLIE_CORE_CAPTURE_H
#define COLLIE_CORE_CAPTURE_H

#include <stdatomic.h>

#include "core/core.h"

struct collie__capture {
  struct collie__capture *next;
  collie_comm_t *graph;     /* the communicator replays run on */
  collie_comm_t *owner;     /* the one the call was made on (poisoned by a failed replay) */
  struct collie__call call; /* as made at capture: kind, count, dtype, op, root (peer), tag */
  collie_opts_t opts;
  char label[64], phase[32];
  char *hsend, *hrecv; /* the host block's parts (NULL: not used) */
  struct collie__pinned_area *area;
  atomic_int dead; /* its graph was destroyed: freed at the next capture or at destroy */
};

/* The host node (cuLaunchHostFunc's function; arg: a struct
 * collie__capture): runs the captured call's host collective on its host
 * block, on the driver's thread. */
void collie__capture_replay(void *arg);

#endif /* COLLIE_CORE_CAPTURE_H */
