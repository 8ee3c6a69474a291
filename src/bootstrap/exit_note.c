/*
 * exit_note.c - a launcher's note of how a rank of the job ended, in the
 * job's store, for peers whose network does not tell them (bootstrap.h).
 *
 * A counter rather than a value: reading it (add 0) never waits for the
 * key, so a rank can look without blocking while it waits for a peer.
 */
#include <stdio.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "util/error.h"

/* How many notes there are: one key a waiting rank reads first, so that it reads the ranks'
 * own keys only when a note came since it last looked (a job of many ranks would otherwise
 * ask the store once per peer every half second). */
#define EXIT_NOTE_COUNT "collie/exits"

static void
exit_note_key(int world_rank, char *key, size_t len)
{
  snprintf(key, len, "collie/exit/%d", world_rank);
}

collie_result_t
collie__exit_note_set(collie__store_t *root, int world_rank, int code, int64_t deadline_ns)
{
  if (code < 0 || code > 255)
    return collie__err(COLLIE_INVALID_ARGUMENT, "exit note of world rank %d: code %d is not 0..255",
                       world_rank, code);
  char key[48];
  exit_note_key(world_rank, key, sizeof(key));
  int64_t now;
  collie_result_t rc = collie__store_add(root, key, code + 1, &now, deadline_ns);
  if (rc != COLLIE_SUCCESS) return rc;
  /* After the rank's own key, so that a reader who sees the count move finds it. */
  return collie__store_add(root, EXIT_NOTE_COUNT, 1, &now, deadline_ns);
}

int
collie__exit_note_count(collie__store_t *root, int64_t *count, int64_t deadline_ns)
{
  *count = 0;
  return collie__store_add(root, EXIT_NOTE_COUNT, 0, count, deadline_ns) == COLLIE_SUCCESS ? 0 : -1;
}

int
collie__exit_note_get(collie__store_t *root, int world_rank, int *code, int64_t deadline_ns)
{
  char key[48];
  exit_note_key(world_rank, key, sizeof(key));
  int64_t v = 0;
  if (collie__store_add(root, key, 0, &v, deadline_ns) != COLLIE_SUCCESS) return -1;
  if (v <= 0) return 0;
  *code = (int)(v - 1);
  return 1;
}

void
collie__exit_note_describe(int code, char *buf, size_t len)
{
  if (code > 128 && code < 128 + 65)
    snprintf(buf, len, "killed by signal %d (%s)", code - 128, strsignal(code - 128));
  else
    snprintf(buf, len, "exit with status %d", code);
}
