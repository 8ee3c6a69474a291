/* Tests of the bootstrap area; see test-list.h for the entry format. */
#define TEST_LIST_BOOTSTRAP(XX)                                                                    \
  XX(bootstrap_file_store_ranks_4, bootstrap_file_store_ranks, 4, "auto", 20)                      \
  XX(bootstrap_file_store_timeout, bootstrap_file_store_timeout, 0, "auto", 10)                    \
  XX(bootstrap_file_store_tokens, bootstrap_file_store_tokens, 0, "auto", 10)                      \
  XX(bootstrap_file_store_keys, bootstrap_file_store_keys, 0, "auto", 10)                          \
  XX(bootstrap_prefix_store, bootstrap_prefix_store, 0, "auto", 10)
