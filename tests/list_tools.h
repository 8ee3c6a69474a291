/* Tests of the tools area; see test-list.h for the entry format. */
#define TEST_LIST_TOOLS(XX)                                                                        \
  XX(collierun_env, collierun_env, 0, "auto", 20)                                                  \
  XX(collierun_env_multinode, collierun_env_multinode, 0, "auto", 20)                              \
  XX(collierun_tag_output, collierun_tag_output, 0, "auto", 20)                                    \
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
  XX(collierun_help, collierun_help, 0, "auto", 20)                                              \
  XX(docs_env_complete, docs_env_complete, 0, "auto", 20)                                        \
  XX(collierun_real_job, collierun_real_job, 0, "auto", 60)
