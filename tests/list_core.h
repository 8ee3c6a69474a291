/* Tests of the core area; see test-list.h for the entry format. */
#define TEST_LIST_CORE(XX)                                                                         \
  XX(runner_selftest_1, runner_selftest, 1, "auto", 10)                                            \
  XX(runner_selftest_3, runner_selftest, 3, "auto", 10)
