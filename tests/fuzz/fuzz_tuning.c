/*
 * fuzz_tuning.c - COLLIE_TUNING_FILE's parser (collie__models_load, coll/select.c)
 * on arbitrary bytes: it must accept or refuse naming file:line, never crash,
 * leak or leave the models half-changed (a refused file leaves them as they were).
 */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
  char path[64];
  int fd = fuzz_file(data, n, path, sizeof(path));
  if (fd < 0) return 0;
  struct collie__models m = {0};
  collie__models_default(&m, 0);
  struct collie__models before = m;
  if (collie__models_load(path, &m) != COLLIE_SUCCESS) {
    /* All or nothing: a refused file changes nothing. */
    if (memcmp(m.cls, before.cls, sizeof(m.cls)) != 0 || m.nfits != 0) abort();
  }
  collie__models_free(&m);
  close(fd);
  return 0;
}
