/* Tests of the reduce area; see test-list.h for the entry format. */
#define TEST_LIST_REDUCE(XX)                                                                       \
  XX(reduce_kernels_all_pairs, reduce_kernels_all_pairs, 0, "auto", 60)                            \
  XX(reduce_kernel_lookup, reduce_kernel_lookup, 0, "auto", 10)                                    \
  XX(reduce_half_convert, reduce_half_convert, 0, "auto", 30)                                      \
  XX(reduce_bf16_convert, reduce_bf16_convert, 0, "auto", 30)                                      \
  XX(reduce_minmax_nan, reduce_minmax_nan, 0, "auto", 10)                                          \
  XX(reduce_int_wrap, reduce_int_wrap, 0, "auto", 10)                                              \
  XX(reduce_avg_finish, reduce_avg_finish, 0, "auto", 30)                                          \
  XX(reduce_into_tiles, reduce_into_tiles, 0, "auto", 30)                                          \
  XX(reduce_half_kernels_exhaustive, reduce_half_kernels_exhaustive, 0, "auto", 60)                \
  XX(reduce_isa_dispatch, reduce_isa_dispatch, 0, "auto", 10)                                      \
  XX(reduce_isa_threads, reduce_isa_threads, 0, "auto", 10)                                        \
  XX(reduce_wire_bulk, reduce_wire_bulk, 0, "auto", 30)
