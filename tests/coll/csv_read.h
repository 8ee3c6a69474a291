/*
 * csv_read.h - reading back what collie's telemetry wrote (comms.csv,
 * timing-rank{i}.csv and its .categories.csv and .meta sidecars) so the
 * telemetry tests can check it against docs/telemetry.md.
 *
 * The parser is deliberately independent of the library's writer: it
 * follows RFC 4180 (fields quoted with "...", inner quotes doubled, commas
 * and line breaks allowed inside quotes), so a writer that forgets to quote
 * or double a quote produces a table the tests see as wrong.
 */
#ifndef COLLIE_TEST_CSV_READ_H
#define COLLIE_TEST_CSV_READ_H

#include <stddef.h>

struct csv_table {
  char *first_line; /* the raw first line of the file, without its '\n' */
  int ncols;        /* fields of the header */
  char **header;    /* ncols column names */
  int nrows;        /* data records, header excluded */
  int *nfields;     /* fields of each data record */
  char ***rows;     /* rows[i][j]: field j of data record i (unquoted) */
  size_t nlines;    /* '\n' characters in the raw file */
  char *raw;        /* the whole file, NUL-terminated */
};

/* Reads and parses path. Returns 0, or -1 when the file cannot be read (errno
 * says why; ENOENT when it does not exist) or is not well-formed CSV (an
 * unterminated quote, or a last record without its '\n': collie writes whole
 * lines). The caller frees the table with csv_free. */
int csv_load(const char *path, struct csv_table *t);
void csv_free(struct csv_table *t);

/* Index of column name in the header, -1 when absent. */
int csv_col(const struct csv_table *t, const char *name);
/* Field `name` of data record row, NULL when the column or field is absent. */
const char *csv_cell(const struct csv_table *t, int row, const char *name);

/* The whole file, NUL-terminated, in a buffer the caller frees; *len gets its
 * size (len may be NULL). NULL when it cannot be read. */
char *csv_slurp(const char *path, size_t *len);

/* Whether s is a decimal integer (digits only, optional leading '-'). */
int csv_is_int(const char *s);
/* Whether s is a fixed-point number with exactly `decimals` digits after the
 * point (optional '-'), as the writer's "%.3f" / "%.6f" produce. */
int csv_is_fixed(const char *s, int decimals);

/* Value of key in a key=value text (a .meta file) copied to out; 0 when found,
 * -1 when the key is absent. */
int csv_meta_get(const char *text, const char *key, char *out, size_t outlen);

/* Rendezvous through marker files in test_dir(), for checks that must run
 * after every rank has finished with the library (destroyed its
 * communicators): csv_mark(tag) records this rank's arrival; csv_wait_marks
 * waits until all `nranks` ranks marked tag, failing the test after
 * timeout_s. Sleeps between looks; never spins. */
void csv_mark(const char *tag);
void csv_wait_marks(const char *tag, int nranks, double timeout_s);

/* CLOCK_MONOTONIC and CLOCK_REALTIME in seconds. */
double csv_now_mono(void);
double csv_now_real(void);

#endif /* COLLIE_TEST_CSV_READ_H */
