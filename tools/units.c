/* units.c - byte counts as people read them (units.h). */
#include <stdio.h>

#include "units.h"

void
tool_bytes_label(char *buf, size_t len, uint64_t bytes)
{
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, len, "%llu B", (unsigned long long)bytes);
  else if (v == (double)(uint64_t)v)
    snprintf(buf, len, "%llu %s", (unsigned long long)v, units[u]);
  else
    snprintf(buf, len, "%.1f %s", v, units[u]);
}
