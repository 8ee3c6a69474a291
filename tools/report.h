/*
 * report.h - what the pieces of collie-report share: a small JSON reader
 * (report_json.c), the loader of flight-recorder dumps (report_dumps.c) and
 * one entry point per subcommand (report_hang.c, ...). collie-report.c maps
 * subcommand names to those entry points; a new subcommand is one file plus
 * one line in its table.
 */
#ifndef COLLIE_REPORT_H
#define COLLIE_REPORT_H

#include <stddef.h>
#include <stdint.h>

/* Exit codes of every subcommand. */
enum { REPORT_OK = 0, REPORT_FOUND = 1, REPORT_BAD_INPUT = 2 };

/* ---- report_json.c: a JSON DOM, enough for the files collie writes ---- */

enum rj_type { RJ_NULL, RJ_BOOL, RJ_NUM, RJ_STR, RJ_ARR, RJ_OBJ };

struct rj_val {
  enum rj_type type;
  int is_int;           /* RJ_NUM written without fraction or exponent, and fits int64 */
  int64_t i;            /* RJ_NUM when is_int; RJ_BOOL: 0 or 1 */
  double num;           /* RJ_NUM */
  char *str;            /* RJ_STR, NUL-terminated (an embedded \u0000 ends it) */
  size_t n;             /* RJ_ARR, RJ_OBJ: number of items */
  struct rj_val *items; /* RJ_ARR, RJ_OBJ */
  char **keys;          /* RJ_OBJ: keys[k] names items[k] */
};

/* Parses text[0..len) as one JSON value (surrounding whitespace allowed).
 * Returns the value (free with rj_free) or NULL with a message in err naming
 * the line and column. Nesting deeper than 64 is an error; never crashes. */
struct rj_val *rj_parse(const char *text, size_t len, char *err, size_t errlen);
void rj_free(struct rj_val *v);
/* The member `key` of an object, or NULL (also when obj is not an object). */
const struct rj_val *rj_get(const struct rj_val *obj, const char *key);

/* ---- report_dumps.c: flight-recorder dumps ---- */

enum { RD_QUEUED = 0, RD_STARTED, RD_COMPLETED, RD_FAILED };

struct rd_op {
  int64_t id;
  int64_t seq;
  char kind[32], dtype[16], op[16], algo[32]; /* "" when null */
  uint64_t count, bytes;
  int root;
  int state;                           /* RD_* */
  int64_t t_queued, t_started, t_done; /* monotonic ns; 0 when not reached */
};

struct rd_dump {
  char path[1024];
  int rank, size;
  char comm[40];
  char reason[64];
  char time[64];
  long pid;
  int nops;
  struct rd_op *ops; /* oldest first */
};

/* The name of an RD_* state ("started"). */
const char *rd_state_name(int state);
/* Whether kind is point-to-point (its seq counts per pair, not per comm). */
int rd_is_p2p(const char *kind);
/* Loads every flight-rank*.json in dir, sorted by comm then rank. Returns 0,
 * or -1 with a message in err naming the directory or the file and the field
 * that is wrong; no dump at all is an error too. Free with rd_free. */
int rd_load_dir(const char *dir, struct rd_dump **out, int *n, char *err, size_t errlen);
void rd_free(struct rd_dump *dumps, int n);

/* ---- subcommands: argv[0] is the subcommand's name; returns an exit code ----
 */

int report_hang(int argc, char **argv);
void report_hang_usage(void);

#endif /* COLLIE_REPORT_H */
