/* Tests of telemetry (comms.csv, timing logs, categories, collie-report's
 * telemetry commands); see test-list.h for the entry format. */
#define TEST_LIST_TELEMETRY(XX)                                                                    \
  XX(telemetry_timing_threads_shm_2, telemetry_timing_threads, 2, "shm", 60)                       \
  XX(telemetry_category_rules, telemetry_category_rules, 0, "auto", 20)                            \
  XX(telemetry_categories_csv_shm_2, telemetry_categories_csv, 2, "shm", 20)                       \
  XX(telemetry_values_shm_1, telemetry_values, 1, "shm", 20)                                       \
  XX(telemetry_values_shm_2, telemetry_values, 2, "shm", 20)                                       \
  XX(telemetry_values_shm_3, telemetry_values, 3, "shm", 20)                                       \
  XX(telemetry_values_shm_4, telemetry_values, 4, "shm", 20)                                       \
  XX(telemetry_values_shm_5, telemetry_values, 5, "shm", 30)                                       \
  XX(telemetry_values_tcp_3, telemetry_values, 3, "tcp", 30)                                       \
  XX(telemetry_async_steps_shm_2, telemetry_async_steps, 2, "shm", 20)                             \
  XX(telemetry_async_steps_shm_3, telemetry_async_steps, 3, "shm", 20)                             \
  XX(telemetry_step_errors_shm_2, telemetry_step_errors, 2, "shm", 20)                             \
  XX(telemetry_rank0_only_shm_4, telemetry_rank0_only, 4, "shm", 20)                               \
  XX(telemetry_comms_log_off_shm_2, telemetry_comms_log_off, 2, "shm", 20)                         \
  XX(telemetry_log_dir_default_shm_2, telemetry_log_dir_default, 2, "shm", 20)                     \
  XX(telemetry_log_dir_missing_parent, telemetry_log_dir_missing_parent, 1, "shm", 20)             \
  XX(telemetry_env_bad, telemetry_env_bad, 1, "shm", 20)                                           \
  XX(telemetry_append_shm_2, telemetry_append, 2, "shm", 30)                                       \
  XX(telemetry_header_mismatch_shm_3, telemetry_header_mismatch, 3, "shm", 30)                     \
  XX(telemetry_timing_env_shm_3, telemetry_timing_env, 3, "shm", 20)                               \
  XX(timing_log_alone, timing_log_alone, 0, "auto", 20)                                            \
  XX(comms_log_alone, comms_log_alone, 0, "auto", 20)                                              \
  XX(timing_log_shared_with_comm_shm_2, timing_log_shared_with_comm, 2, "shm", 20)                 \
  XX(telemetry_timing_open_shm_2, telemetry_timing_open, 2, "shm", 20)                             \
  XX(telemetry_timing_overflow_shm_2, telemetry_timing_overflow, 2, "shm", 20)                     \
  XX(telemetry_timing_destroy_flush_shm_2, telemetry_timing_destroy_flush, 2, "shm", 20)           \
  XX(telemetry_timing_exit_flush_shm_2, telemetry_timing_exit_flush, 2, "shm", 20)                 \
  XX(telemetry_timing_killed_peer_shm_2, telemetry_timing_killed_peer, 2, "shm", 30)               \
  XX(telemetry_timing_header_mismatch_shm_3, telemetry_timing_header_mismatch, 3, "shm", 30)       \
  XX(report_summary_numbers, report_summary_numbers, 0, "auto", 20)                                \
  XX(report_summary_sources, report_summary_sources, 0, "auto", 20)                                \
  XX(report_csv_reader, report_csv_reader, 0, "auto", 10)                                          \
  XX(report_stragglers_late_rank, report_stragglers_late_rank, 0, "auto", 20)                      \
  XX(report_stragglers_diverge, report_stragglers_diverge, 0, "auto", 20)                          \
  XX(report_trace_json, report_trace_json, 0, "auto", 20)                                          \
  XX(report_plot_svg, report_plot_svg, 0, "auto", 20)                                              \
  XX(report_plot_many_steps, report_plot_many_steps, 0, "auto", 20)                                \
  XX(report_telemetry_bad_input, report_telemetry_bad_input, 0, "auto", 30)                        \
  XX(report_html_bad_input, report_html_bad_input, 0, "auto", 20)                                  \
  XX(report_html_escaping, report_html_escaping, 0, "auto", 20)                                    \
  XX(report_html_absent_and_caps, report_html_absent_and_caps, 0, "auto", 20)                      \
  XX(report_bench_svg, report_bench_svg, 0, "auto", 20)                                            \
  XX(report_bench_bad_input, report_bench_bad_input, 0, "auto", 20)
