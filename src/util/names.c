/* names.c - strings for result codes, dtypes and ops, generated from the
 * X-macro lists of collie.h so that no code can lack its text. In util, the
 * bottom layer, because every module names dtypes, ops and results in its
 * messages (public functions all the same: collie_dtype_name, ...). */
#include "collie.h"

static const char *names_results[] = {
#define COLLIE_XX_(name, desc) desc,
    COLLIE_RESULT_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

static const struct {
  const char *name;
  size_t size;
} names_dtypes[] = {
#define COLLIE_XX_(name, size, isf, str) {str, size},
    COLLIE_DTYPE_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

static const char *names_ops[] = {
#define COLLIE_XX_(name, str, intonly) str,
    COLLIE_OP_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

const char *
collie_result_string(collie_result_t r)
{
  if ((unsigned)r >= sizeof(names_results) / sizeof(names_results[0])) return "unknown result code";
  return names_results[r];
}

size_t
collie_dtype_size(collie_dtype_t dtype)
{
  if ((unsigned)dtype >= (unsigned)COLLIE_DTYPE_COUNT_) return 0;
  return names_dtypes[dtype].size;
}

const char *
collie_dtype_name(collie_dtype_t dtype)
{
  if ((unsigned)dtype >= (unsigned)COLLIE_DTYPE_COUNT_) return "?";
  return names_dtypes[dtype].name;
}

const char *
collie_op_name(collie_op_t op)
{
  if ((unsigned)op >= (unsigned)COLLIE_OP_COUNT_) return "?";
  return names_ops[op];
}
