/* Tests of collie-bench (conventions, outputs, fit, tuning file); see
 * test-list.h for the entry format. */
#define TEST_LIST_BENCH(XX)                                                                        \
  XX(fit_line_exact, fit_line_exact, 0, "auto", 10)                                                \
  XX(fit_line_noisy, fit_line_noisy, 0, "auto", 10)                                                \
  XX(fit_line_degenerate, fit_line_degenerate, 0, "auto", 10)                                      \
  XX(fit_segments, fit_segments, 0, "auto", 10)                                                    \
  XX(fit_tune_file_roundtrip, fit_tune_file_roundtrip, 0, "auto", 10)                              \
  XX(fit_tune_select, fit_tune_select, 0, "auto", 10)                                              \
  XX(fit_oversubscribed_broadcast, fit_oversubscribed_broadcast, 0, "auto", 10)                    \
  XX(fit_oversubscribed_broadcast_4, fit_oversubscribed_broadcast_4, 0, "auto", 10)                \
  XX(fit_tune_file_errors, fit_tune_file_errors, 0, "auto", 10)                                    \
  XX(fit_tuning_env_shm_2, fit_tuning_env, 2, "shm", 30)                                           \
  XX(fit_tuning_env_tcp_3, fit_tuning_env, 3, "tcp", 30)                                           \
  XX(fit_main_fake_1, fit_main_fake, 1, "auto", 30)                                                \
  XX(fit_main_fake_shm_2, fit_main_fake, 2, "shm", 60)                                             \
  XX(fit_main_fake_tcp_2, fit_main_fake, 2, "tcp", 60)                                             \
  XX(bench_shape_rules, bench_shape_rules, 0, "auto", 10)                                          \
  XX(bench_names, bench_names, 0, "auto", 10)                                                      \
  XX(bench_check_model, bench_check_model, 0, "auto", 30)                                          \
  XX(bench_output_formats, bench_output_formats, 0, "auto", 10)                                    \
  XX(bench_plot_svg, bench_plot_svg, 0, "auto", 10)                                                \
  XX(bench_measure_ranks_1, bench_measure_ranks, 1, "shm", 30)                                     \
  XX(bench_measure_ranks_shm_3, bench_measure_ranks, 3, "shm", 30)                                 \
  XX(bench_measure_ranks_tcp_2, bench_measure_ranks, 2, "tcp", 30)                                 \
  XX(bench_run_csv, bench_run_csv, 0, "auto", 60)                                                  \
  XX(bench_run_device_fake, bench_run_device_fake, 0, "auto", 60)                                  \
  XX(bench_run_mem_collie, bench_run_mem_collie, 0, "auto", 60)                                    \
  XX(bench_run_profile, bench_run_profile, 0, "auto", 90)                                          \
  XX(bench_bad_options, bench_bad_options, 0, "auto", 60)                                          \
  XX(bench_help_and_alone, bench_help_and_alone, 0, "auto", 30)                                    \
  XX(bench_model, bench_model, 0, "auto", 30)                                                      \
  XX(bench_run_tcp_refused, bench_run_tcp_refused, 0, "auto", 60)                                  \
  XX(bench_run_alltoallv_shm_2, bench_run_alltoallv_shm_2, 0, "auto", 60)                          \
  XX(bench_run_alltoallv_tcp_3, bench_run_alltoallv_tcp_3, 0, "auto", 60)                          \
  XX(bench_alltoallv_not_modelled, bench_alltoallv_not_modelled, 0, "auto", 60)                    \
  XX(fit_bench_run, fit_bench_run, 0, "auto", 120)
