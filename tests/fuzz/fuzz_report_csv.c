/*
 * fuzz_report_csv.c - collie-report's CSV reader (rc_load, tools/report_csv.c),
 * which reads comms.csv and timing logs a job or a person may have damaged:
 * any bytes are a table or a message, never a crash; every cell the table
 * says it has can be read.
 */
#include <stdlib.h>

#include "../../tools/report.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
  char path[64], err[256];
  int fd = fuzz_file(data, n, path, sizeof(path));
  if (fd < 0) return 0;
  struct rc_table t;
  if (rc_load(path, &t, err, sizeof(err)) == 0) {
    for (size_t r = 0; r < t.nrows; r++)
      for (int c = 0; c < t.ncols; c++) {
        double d;
        int64_t i;
        (void)rc_cell(&t, r, c);
        (void)rc_double(&t, r, c, &d, err, sizeof(err));
        (void)rc_int64(&t, r, c, &i, err, sizeof(err));
      }
    rc_free(&t);
  }
  close(fd);
  return 0;
}
