/* Tests of the tools area; see test-list.h for the entry format. */
#define TEST_LIST_TOOLS(XX)                                                                        \
  XX(collierun_env, collierun_env, 0, "auto", 20)                                                  \
  XX(collierun_env_multinode, collierun_env_multinode, 0, "auto", 20)                              \
  XX(collierun_tag_output, collierun_tag_output, 0, "auto", 20)                                    \
  XX(collierun_bind_to, collierun_bind_to, 0, "auto", 20)                                          \
  XX(collierun_all_succeed, collierun_all_succeed, 0, "auto", 20)                                  \
  XX(collierun_rank_exit_code, collierun_rank_exit_code, 0, "auto", 20)                            \
  XX(collierun_rank_killed, collierun_rank_killed, 0, "auto", 20)                                  \
  XX(collierun_grace_sigkill, collierun_grace_sigkill, 0, "auto", 20)                              \
  XX(collierun_sigterm_forwarded, collierun_sigterm_forwarded, 0, "auto", 20)                      \
  XX(collierun_timeout, collierun_timeout, 0, "auto", 20)                                          \
  XX(collierun_sigkill_no_orphans, collierun_sigkill_no_orphans, 0, "auto", 20)                    \
  XX(collierun_pdeathsig, collierun_pdeathsig, 0, "auto", 20)                                      \
  XX(collierun_bad_options, collierun_bad_options, 0, "auto", 30)                                  \
  XX(collierun_not_found, collierun_not_found, 0, "auto", 20)                                      \
  XX(collierun_help, collierun_help, 0, "auto", 20)                                                \
  XX(docs_env_complete, docs_env_complete, 0, "auto", 20)                                          \
  XX(collierun_real_job, collierun_real_job, 0, "auto", 60)                                        \
  XX(flight_ring_wraparound, flight_ring_wraparound, 0, "auto", 10)                                \
  XX(flight_ring_capacity_not_pow2, flight_ring_capacity_not_pow2, 0, "auto", 10)                  \
  XX(flight_started_at_issue, flight_started_at_issue, 0, "auto", 10)                              \
  XX(flight_states_and_null, flight_states_and_null, 0, "auto", 10)                                \
  XX(flight_json_escaping, flight_json_escaping, 0, "auto", 10)                                    \
  XX(flight_dump_bad_dir, flight_dump_bad_dir, 0, "auto", 10)                                      \
  XX(flight_thread_concurrent, flight_thread_concurrent, 0, "auto", 60)                            \
  XX(flight_sigusr1_dump, flight_sigusr1_dump, 0, "auto", 20)                                      \
  XX(flight_sigusr1_chain, flight_sigusr1_chain, 0, "auto", 20)                                    \
  XX(flight_sigusr1_later_handler, flight_sigusr1_later_handler, 0, "auto", 20)                    \
  XX(report_hang_never_joined, report_hang_never_joined, 0, "auto", 20)                            \
  XX(report_hang_all_completed, report_hang_all_completed, 0, "auto", 20)                          \
  XX(report_hang_rank_failed, report_hang_rank_failed, 0, "auto", 20)                              \
  XX(report_hang_missing_rank_and_queued, report_hang_missing_rank_and_queued, 0, "auto", 20)      \
  XX(report_hang_malformed, report_hang_malformed, 0, "auto", 20)                                  \
  XX(report_hang_bad_usage, report_hang_bad_usage, 0, "auto", 20)                                  \
  XX(report_hang_from_recorder, report_hang_from_recorder, 0, "auto", 20)                          \
  XX(report_hang_overwritten_and_p2p, report_hang_overwritten_and_p2p, 0, "auto", 20)
