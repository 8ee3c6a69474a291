/* Tests of the util area; see test-list.h for the entry format. */
#define TEST_LIST_UTIL(XX)
