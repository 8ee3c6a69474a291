/* Tests of the core area; see test-list.h for the entry format. */
#define TEST_LIST_CORE(XX)                                                                         \
  XX(runner_selftest_3, runner_selftest, 3, "auto", 10)                                            \
  XX(api_names, api_names, 0, "auto", 10)                                                          \
  XX(api_init_errors, api_init_errors, 0, "auto", 20)                                              \
  XX(api_bad_arguments_1, api_bad_arguments, 1, "auto", 20)                                        \
  XX(api_bad_arguments_shm_3, api_bad_arguments, 3, "shm", 30)                                     \
  XX(api_bad_arguments_tcp_2, api_bad_arguments, 2, "tcp", 30)                                     \
  XX(log_levels_shm_2, log_levels, 2, "shm", 30)                                                   \
  XX(log_levels_tcp_2, log_levels, 2, "tcp", 30)                                                   \
  XX(place_pick, place_pick, 0, "auto", 10)                                                        \
  XX(crowd_spin, crowd_spin, 0, "auto", 10)                                                        \
  XX(select_tuning_file, select_tuning_file, 0, "auto", 20)                                        \
  XX(select_decision_table_shm_2, select_decision_table, 2, "shm", 30)                             \
  XX(select_decision_table_tcp_3, select_decision_table, 3, "tcp", 30)                             \
  XX(select_forced_shm_2, select_forced, 2, "shm", 30)                                             \
  XX(select_forced_device_shm_2, select_forced_device, 2, "shm", 30)                               \
  XX(select_rounds_by_host, select_rounds_by_host, 0, "auto", 10)                                  \
  XX(select_overlapped_exchanges, select_overlapped_exchanges, 0, "auto", 10)
