/*
 * collie-report - reads what collie leaves behind (flight-recorder dumps,
 * comms.csv and the per-rank timing logs) and explains it in plain words:
 * who is stuck (hang), where the bytes and milliseconds went (summary), who
 * keeps the others waiting (stragglers), a timeline for Perfetto (trace), a
 * picture of the steps (plot), all of it in one page for a browser (html), and
 * benchmark results side by side (bench). One subcommand per file
 * (report_<name>.c), listed in the table below; this file only dispatches.
 * docs/flight-recorder.md describes `hang`, docs/collie-report.md the rest.
 */
#include <stdio.h>
#include <string.h>

#include "report.h"

struct report_cmd {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
};

static const struct report_cmd report_cmds[] = {
    {"hang", "which ranks are stuck on which operation (flight-recorder dumps)", report_hang},
    {"summary", "bytes, time, bandwidth, latency percentiles (comms.csv, timing logs)",
     report_summary},
    {"stragglers", "which rank arrives last at collectives, per host (timing logs)",
     report_stragglers},
    {"trace", "timing logs as a Chrome/Perfetto trace (JSON)", report_trace},
    {"plot", "comms.csv as an SVG: bytes per category, time per collective", report_plot},
    {"html", "all of the above in one self-contained HTML page, for a browser", report_html},
    {"bench", "benchmark CSVs of several libraries as an SVG, a panel per collective",
     report_bench},
};

static void
report_usage(FILE *f)
{
  fprintf(f, "usage: collie-report COMMAND ARGS...   (collie-report COMMAND "
             "--help)\n");
  for (size_t i = 0; i < sizeof(report_cmds) / sizeof(report_cmds[0]); i++)
    fprintf(f, "  %-10s %s\n", report_cmds[i].name, report_cmds[i].summary);
  fprintf(f, "exit status: 0 nothing wrong found, 1 a problem found, 2 bad "
             "usage or input\n");
}

int
main(int argc, char **argv)
{
  if (argc < 2) {
    report_usage(stderr);
    return REPORT_BAD_INPUT;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    report_usage(stdout);
    return REPORT_OK;
  }
  for (size_t i = 0; i < sizeof(report_cmds) / sizeof(report_cmds[0]); i++)
    if (strcmp(argv[1], report_cmds[i].name) == 0) return report_cmds[i].run(argc - 1, argv + 1);
  fprintf(stderr, "collie-report: unknown command '%s'\n", argv[1]);
  report_usage(stderr);
  return REPORT_BAD_INPUT;
}
