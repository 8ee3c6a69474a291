/*
 * fuzz_flight_json.c - collie-report's reading of flight-recorder dumps: the
 * JSON parser (rj_parse, tools/report_json.c) and the loader that checks each
 * field of a dump (rd_load_dir, tools/report_dumps.c), on arbitrary bytes
 * put where a dump would be. A malformed dump is a message, never a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tools/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
  static char dir[64];
  char err[256], path[128];
  if (!dir[0]) {
    snprintf(dir, sizeof(dir), "/tmp/collie-fuzz-json-%ld", (long)getpid());
    mkdir(dir, 0700);
  }
  struct rj_val *v = rj_parse((const char *)data, n, err, sizeof(err));
  if (v) {
    (void)rj_get(v, "ops");
    rj_free(v);
  }
  snprintf(path, sizeof(path), "%s/flight-rank0-0000000000000001.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) return 0;
  fwrite(data, 1, n, f);
  fclose(f);
  struct rd_dump *d = NULL;
  int nd = 0;
  if (rd_load_dir(dir, &d, &nd, err, sizeof(err)) == 0) rd_free(d, nd);
  return 0;
}
