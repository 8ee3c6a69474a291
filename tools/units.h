/*
 * units.h - byte counts as people read them ("4 MiB", "1.5 KiB", "100 B"),
 * one rule for every tool's tables, labels and messages (collie-bench,
 * collie-report).
 */
#ifndef COLLIE_TOOLS_UNITS_H
#define COLLIE_TOOLS_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Writes bytes into buf (len bytes, always terminated) in the largest binary
 * unit up to PiB that keeps the number at least 1: a whole number without
 * decimals, else one decimal. */
void tool_bytes_label(char *buf, size_t len, uint64_t bytes);

#endif /* COLLIE_TOOLS_UNITS_H */
