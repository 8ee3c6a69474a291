/* Tests of the bootstrap area; see test-list.h for the entry format. */
#define TEST_LIST_BOOTSTRAP(XX)                                                                    \
  XX(bootstrap_file_store_ranks_4, bootstrap_file_store_ranks, 4, "auto", 20)                      \
  XX(bootstrap_file_store_timeout, bootstrap_file_store_timeout, 0, "auto", 10)                    \
  XX(bootstrap_file_store_tokens, bootstrap_file_store_tokens, 0, "auto", 10)                      \
  XX(bootstrap_file_store_keys, bootstrap_file_store_keys, 0, "auto", 10)                          \
  XX(bootstrap_store_bad_urls, bootstrap_store_bad_urls, 0, "auto", 10)                            \
  XX(bootstrap_prefix_store, bootstrap_prefix_store, 0, "auto", 10)                                \
  XX(bootstrap_tcp_store_ranks_4, bootstrap_tcp_store_ranks, 4, "auto", 30)                        \
  XX(bootstrap_tcp_store_token, bootstrap_tcp_store_token, 0, "auto", 10)                          \
  XX(bootstrap_exit_notes, bootstrap_exit_notes, 0, "auto", 15)                                    \
  XX(bootstrap_tcp_store_timeout, bootstrap_tcp_store_timeout, 0, "auto", 10)                      \
  XX(bootstrap_tcp_store_server_gone, bootstrap_tcp_store_server_gone, 0, "auto", 10)              \
  XX(bootstrap_tcp_store_threads, bootstrap_tcp_store_threads, 0, "auto", 10)                      \
  XX(bootstrap_tcp_store_port_in_use, bootstrap_tcp_store_port_in_use, 0, "auto", 10)              \
  XX(bootstrap_tcp_store_malformed, bootstrap_tcp_store_malformed, 0, "auto", 10)                  \
  XX(bootstrap_tcp_store_strangers, bootstrap_tcp_store_strangers, 0, "auto", 20)                  \
  XX(bootstrap_tcp_store_delete_prefix, bootstrap_tcp_store_delete_prefix, 0, "auto", 20)          \
  XX(bootstrap_user_store_shm_3, bootstrap_user_store_ranks, 3, "shm", 30)                         \
  XX(bootstrap_user_store_mixed_4, bootstrap_user_store_ranks, 4, "mixed", 30)                     \
  XX(bootstrap_user_store_parent_3, bootstrap_user_store_parent, 3, "shm", 30)                     \
  XX(bootstrap_user_store_errors, bootstrap_user_store_errors, 0, "auto", 10)                      \
  XX(bootstrap_env_launchers, bootstrap_env_launchers, 0, "auto", 10)                              \
  XX(bootstrap_env_precedence, bootstrap_env_precedence, 0, "auto", 10)                            \
  XX(bootstrap_env_tokens, bootstrap_env_tokens, 0, "auto", 10)                                    \
  XX(bootstrap_env_errors, bootstrap_env_errors, 0, "auto", 10)                                    \
  XX(bootstrap_host_id, bootstrap_host_id, 0, "auto", 10)                                          \
  XX(ring_bootstrap_allgather_2, ring_bootstrap_allgather, 2, "auto", 20)                          \
  XX(ring_bootstrap_allgather_5, ring_bootstrap_allgather, 5, "auto", 30)                          \
  XX(ring_bootstrap_stranger, ring_bootstrap_stranger, 0, "auto", 20)                              \
  XX(ring_bootstrap_comm_shm_3, ring_bootstrap_comm, 3, "shm", 30)                                 \
  XX(ring_bootstrap_comm_tcp_4, ring_bootstrap_comm, 4, "tcp", 30)                                 \
  XX(ring_bootstrap_comm_mixed_4, ring_bootstrap_comm, 4, "mixed", 30)                             \
  XX(ring_bootstrap_missing_rank_3, ring_bootstrap_missing_rank, 3, "auto", 30)
