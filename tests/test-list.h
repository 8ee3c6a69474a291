/*
 * test-list.h - every test, gathered from one list file per area
 * (tests/list_<area>.h, each defining TEST_LIST_<AREA>(XX)).
 *
 * An entry is XX(name, function, ranks, transport, timeout_s):
 * - ranks 0 runs the function once in a plain child process with no launcher
 *   environment (unit tests); ranks N >= 1 forks N rank processes;
 * - transport is "shm", "tcp", "ofi" or "auto" (COLLIE_TRANSPORT for the ranks), or
 *   "mixed": two fake hosts (COLLIE_HOST_ID by rank parity), so shm and tcp
 *   serve one communicator together ("netofi": shm and ofi, COLLIE_NET=ofi);
 * - timeout_s is scaled by COLLIE_TEST_TIMEOUT_MULT (sanitizer builds).
 * tests/CMakeLists.txt reads the list files: one ctest entry per line.
 */
#include "list_core.h"
#include "list_util.h"
#include "list_bootstrap.h"
#include "list_transport.h"
#include "list_reduce.h"
#include "list_coll.h"
#include "list_matrix.h"
#ifdef COLLIE_HAVE_LIBFABRIC
#include "list_ofi.h"
#else
#define TEST_LIST_OFI(XX)
#endif
#include "list_tools.h"
#include "list_telemetry.h"
#include "list_bench.h"

#define TEST_LIST(XX)                                                                              \
  TEST_LIST_CORE(XX)                                                                               \
  TEST_LIST_UTIL(XX)                                                                               \
  TEST_LIST_BOOTSTRAP(XX)                                                                          \
  TEST_LIST_TRANSPORT(XX)                                                                          \
  TEST_LIST_REDUCE(XX)                                                                             \
  TEST_LIST_COLL(XX)                                                                               \
  TEST_LIST_MATRIX(XX)                                                                             \
  TEST_LIST_OFI(XX)                                                                                \
  TEST_LIST_TOOLS(XX)                                                                              \
  TEST_LIST_TELEMETRY(XX)                                                                          \
  TEST_LIST_BENCH(XX)

#define XX_DECL(name, fn, ranks, transport, timeout) TEST_IMPL(fn);
TEST_LIST(XX_DECL)
#undef XX_DECL
