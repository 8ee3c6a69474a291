/*
 * tools_impl.c - the tools' code that the unit tests call, compiled into the
 * test binary exactly once. The tools are programs, not libraries, so their
 * .c files are compiled in here rather than linked; doing it in one place
 * keeps a second copy (a duplicate symbol) from appearing when two tests use
 * the same piece, and the test files include only the tools' headers.
 *
 * Three tools files are compiled by their test instead, because that test
 * renames a function the file calls or calls one of its statics; no other
 * file may include them:
 *   tools/cbench_measure.c, tools/cbench_output.c  bench_test.c
 *   tools/cbench_fit.c                               fit_test.c
 *   tools/report_telemetry.c                         report_telemetry_test.c
 */
#include "../../tools/cbench_plot.c"
#include "../../tools/cbench_shape.c"
#include "../../tools/report_csv.c"
#include "../../tools/report_dumps.c"
#include "../../tools/report_json.c"
#include "../../tools/svg.c"
#include "../../tools/units.c"
