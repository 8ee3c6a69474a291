/* Tests of collie-bench (conventions, outputs, fit, tuning file); see
 * test-list.h for the entry format. */
#define TEST_LIST_BENCH(XX)
