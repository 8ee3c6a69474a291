/*
 * report.h - what the pieces of collie-report share: a small JSON reader
 * (report_json.c), the loader of flight-recorder dumps (report_dumps.c), a
 * CSV reader (report_csv.c), the loader of telemetry directories
 * (report_telemetry.c) and one entry point per subcommand (report_hang.c,
 * report_summary.c, ...). collie-report.c maps
 * subcommand names to those entry points; a new subcommand is one file plus
 * one line in its table.
 */
#ifndef COLLIE_REPORT_H
#define COLLIE_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* ---- report_csv.c also holds the file reader every loader uses ---- */

/* Reads the whole file at path, NUL-terminated (one spare byte past len);
 * NULL with errno on failure. The caller frees. */
char *rt_slurp(const char *path, size_t *len);

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
  int *world; /* each rank's world rank ("world_ranks"), or NULL when absent */
  int nhosts;
  char (*hosts)[64]; /* [nhosts] host names ("hosts"), or NULL when absent */
  int *host_of;      /* [size] each rank's index in hosts ("host_of"), or NULL */
  char error[1024];  /* the error that made the rank dump ("error"), or "" */
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

/* ---- report_csv.c: a CSV reader for the telemetry files ---- */

/* One CSV file in memory: RFC 4180 fields (quoted with doubled quotes, line
 * breaks allowed inside quotes), LF or CRLF line ends, blank lines skipped, a
 * UTF-8 byte-order mark ignored. The first record is the header; every other
 * record must have as many fields. All strings point into buf. */
struct rc_table {
  char path[1024]; /* as given to rc_load: every message names it */
  char *buf;       /* the unquoted fields, each NUL-terminated */
  int ncols;
  char **head;  /* ncols column names */
  size_t nrows; /* records after the header */
  char **cells; /* nrows * ncols, row-major */
  int *lines;   /* 1-based line of the file where each record starts */
};

/* Reads and parses the file at path into t (zeroed first). Returns 0, or -1
 * with a message in err naming the file and line ("DIR/comms.csv:7: 3 fields,
 * but the header has 33"); t holds nothing to free then. */
int rc_load(const char *path, struct rc_table *t, char *err, size_t errlen);
void rc_free(struct rc_table *t);
/* The index of the first column called name, or -1. */
int rc_col(const struct rc_table *t, const char *name);
/* Checks that every name of names[0..n) is a column; else -1 with
 * "FILE:1: no column \"x\" in the header". */
int rc_require(const struct rc_table *t, const char *const *names, int n, char *err, size_t errlen);
/* The field of record row, column col. */
const char *rc_cell(const struct rc_table *t, size_t row, int col);
/* The field as a finite number (rc_double) or a whole number (rc_int64); else
 * -1 with "FILE:LINE: column \"x\": \"abc\" is not a number". */
int rc_double(const struct rc_table *t, size_t row, int col, double *out, char *err, size_t errlen);
int rc_int64(const struct rc_table *t, size_t row, int col, int64_t *out, char *err, size_t errlen);

/* ---- report_telemetry.c: a telemetry directory, loaded once (docs/telemetry.md) ---- */

/* One row of timing-rank{i}.csv. Strings point into the rank's table. */
struct rt_row {
  const char *op, *label, *phase;
  const char *start_s, *end_s; /* start_counter, end_counter as written (the join key) */
  int64_t iteration, epoch;
  uint64_t size; /* message_size_bytes */
  double elapsed_ms;
  int64_t start_us, end_us; /* the counters in whole microseconds, exactly */
  int line;
};

/* One row of timing-rank{i}.categories.csv. */
struct rt_catrow {
  const char *start_s, *end_s, *op, *cat;
};

struct rt_rank {
  int rank; /* the i of timing-rank{i}.csv */
  struct rc_table tab;
  size_t nrows;
  struct rt_row *rows; /* in file order */
  int has_meta;
  char host[256]; /* "host=" of the .meta; "" when absent */
  int has_offset;
  int64_t offset_us; /* clock_offset_s in microseconds */
  int64_t dropped;   /* records_dropped */
  int has_cats;
  struct rc_table cats_tab;
  size_t ncats;
  struct rt_catrow *cats; /* sorted for rt_category's binary search */
};

struct rt_comms {
  struct rc_table tab;
  double *v; /* tab.nrows * tab.ncols: every field of comms.csv is a number */
  int c_step, c_epoch, c_bytes_total, c_t_total;
};

struct rt_data {
  char dir[1024], timing_dir[1024];
  int has_comms;
  struct rt_comms comms;
  int nranks;
  struct rt_rank *ranks; /* sorted by rank */
};

/* What column col of comms.csv holds, read from the header so registered
 * categories need no change here: bytes_X is a collective when a t_X_ms column
 * exists (RT_COL_COLL; *t_col is that column), else a payload category
 * (RT_COL_CAT); a repeated bytes_X is a category. Anything else: RT_COL_OTHER. */
enum { RT_COL_OTHER = 0, RT_COL_COLL, RT_COL_CAT };
int rt_comms_kind(const struct rt_comms *c, int col, int *t_col);

/* What rt_load reads: comms.csv, the timing logs with their .meta, the
 * .categories.csv sidecars. */
enum { RT_COMMS = 1, RT_TIMING = 2, RT_CATS = 4 };

/* Loads from dir (comms.csv) and timing_dir (timing-rank*.csv and sidecars;
 * NULL: dir) whatever of `what` exists; a missing file is not an error, a
 * missing or unreadable directory is. Returns 0, or -1 with a message in err
 * naming the directory, or the file and line of malformed input. Free with
 * rt_free (also after a failure). */
int rt_load(struct rt_data *d, const char *dir, const char *timing_dir, unsigned what, char *err,
            size_t errlen);
void rt_free(struct rt_data *d);
/* The payload category of a timing row: its .categories.csv match on
 * (start_counter, end_counter, operation), else "other" for operations collie
 * records and "user" for the rest. */
const char *rt_category(const struct rt_rank *r, const struct rt_row *row);
/* Whether op is a name collie writes (ALLREDUCE ... RECV). */
int rt_is_collie_op(const char *op);
/* Whether op is a collective: a collie name other than SEND and RECV. */
int rt_is_collective(const char *op);
/* The nearest-rank p-th percentile (0 < p <= 100) of sorted[0..n), n >= 1. */
double rt_percentile(const double *sorted, size_t n, double p);
/* Writes s as a JSON string literal (quotes included); bytes that are not
 * UTF-8 become U+FFFD so the output stays valid JSON. */
void rt_json_string(FILE *f, const char *s);

/* Command line of the telemetry subcommands: DIR [--timing DIR2] [-o PATH] [--csv]. */
struct rt_args {
  const char *dir, *timing, *out;
  int csv;
};
enum { RT_ARG_OUT = 1, RT_ARG_CSV = 2 };
/* Parses argv[1..argc) allowing the options in `allowed` (RT_ARG_*; --timing
 * always). Returns 0, 1 when --help was asked (usage() printed), or -1 after
 * printing a message to stderr. */
int rt_parse_args(int argc, char **argv, const char *cmd, unsigned allowed, void (*usage)(void),
                  struct rt_args *a);
/* The common start of a telemetry subcommand: its options (as rt_parse_args;
 * RT_ARG_OUT in allowed makes -o required), then the files of `what` in DIR
 * (rt_load), of which those in `need` (RT_COMMS, RT_TIMING) must exist.
 * Returns -1 to go on (the caller then owns d: rt_free), else the exit code
 * to return, after a message "collie-report CMD: ..." on stderr (d freed). */
int rt_start(int argc, char **argv, const char *cmd, unsigned allowed, void (*usage)(void),
             unsigned what, unsigned need, struct rt_args *a, struct rt_data *d);

/* ---- report_summary.c, report_stragglers.c: what `summary` and `stragglers`
 * compute, for report_html.c to embed ---- */

/* A comms.csv column pair (collective) or column (category), summed over all steps. */
struct rsum_col {
  const char *name; /* without bytes_ and _ms; points into the table */
  int c_bytes, c_t; /* c_t: -1 for categories */
  double bytes, ms;
};
/* Splits comms.csv's columns into collectives and categories (rt_comms_kind)
 * and sums them. Returns 0, or -1 when out of memory; the caller frees both. */
int rsum_columns(const struct rt_comms *c, struct rsum_col **colls, int *ncoll,
                 struct rsum_col **cats, int *ncat);
/* Fills top[] with the row indices of the (at most n) steps with the largest
 * t_total_ms, largest first, ties in file order; returns how many. */
int rsum_slowest(const struct rt_comms *c, size_t *top, int n);

/* One rank's arrivals at collectives, as `stragglers` counts them. */
struct rs_rank {
  int rank;
  int group, group_size; /* the ranks compared together: one host, or all */
  size_t last;           /* calls where it arrived last, alone */
  double mean_late_ms;   /* mean start after the group's first arrival */
};
struct rs_result {
  size_t matched;    /* collective calls lined up on every rank */
  char diverge[512]; /* where the ranks' call sequences part, or "" */
  int by_host;       /* 1: grouped by the .meta host; 0: no .meta, one group */
  int nranks;
  struct rs_rank *ranks; /* in d->ranks order */
};
/* Lines up the ranks' collective calls of d as `stragglers` does. Returns 0,
 * or -1 when out of memory. Free with rs_free (also after a failure). */
int rs_compute(const struct rt_data *d, struct rs_result *out);
void rs_free(struct rs_result *r);

/* ---- subcommands: argv[0] is the subcommand's name; returns an exit code ----
 */

int report_hang(int argc, char **argv);
void report_hang_usage(void);
/* The verdict `hang` prints, written to f for the dumps d[0..n) as
 * rd_load_dir sorted them (report_html.c embeds the same text); returns 1
 * when something is stuck or failed. */
int report_hang_verdict(FILE *f, const struct rd_dump *d, int n);
/* report_partition.c: writes to f the "network:" verdict when the dumps
 * d[0..n) (every communicator's) show a lost host link rather than a lost
 * rank; returns 1 when it wrote one. */
int report_partition(FILE *f, const struct rd_dump *d, int n);
int report_summary(int argc, char **argv);
void report_summary_usage(void);
int report_stragglers(int argc, char **argv);
void report_stragglers_usage(void);
int report_trace(int argc, char **argv);
void report_trace_usage(void);
int report_plot(int argc, char **argv);
void report_plot_usage(void);
/* report_bench.c: benchmark CSVs (collie-bench's, the anchors'), not a job's logs. */
int report_bench(int argc, char **argv);
void report_bench_usage(void);

/* report_html.c and the page it writes (report_html_assets.c: the style
 * sheet, the window.onerror sink that runs first, the drawing script). */
int report_html(int argc, char **argv);
void report_html_usage(void);
extern const char report_html_css[];
extern const char report_html_onerror_js[];
extern const char report_html_js[];

/* Parses a decimal number of seconds ("8812.001234", "-3.5") into whole
 * microseconds, rounding digits past the sixth half up. Returns 0 or -1
 * (report_telemetry.c). */
int report_tel_micros(const char *s, int64_t *out);

#endif /* COLLIE_REPORT_H */
