/*
 * kinds.c - the texts and charges of kinds.h's list.
 */
#include "util/kinds.h"

static const struct {
  const char *name, *opname;
  collie_collective_t coll;
} kinds[COLLIE_KIND_COUNT_] = {
#define COLLIE_XX_(name, str, coll, op) {str, op, COLLIE_COLL_##coll},
    COLLIE_KIND_MAP(COLLIE_XX_)
#undef COLLIE_XX_
};

const char *
collie__kind_name(int kind)
{
  return kind >= 0 && kind < COLLIE_KIND_COUNT_ ? kinds[kind].name : "unknown";
}

collie_collective_t
collie__kind_collective(int kind)
{
  return kind >= 0 && kind < COLLIE_KIND_COUNT_ ? kinds[kind].coll : COLLIE_COLL_COUNT_;
}

const char *
collie__kind_opname(int kind)
{
  return kind >= 0 && kind < COLLIE_KIND_COUNT_ ? kinds[kind].opname : "";
}
