/*
 * params.h - the list of COLLIE_* variables (params.def) for tools that print
 * it: collierun --help, and the docs check. The parser itself is internal to
 * core (core.h).
 */
#ifndef COLLIE_PARAMS_H
#define COLLIE_PARAMS_H

/* Calls line() once per variable of params.def, in its order, with the full name
 * ("COLLIE_TIMEOUT_MS"), the default as text ("(unset)" when none) and the help. */
void collie__params_describe(void (*line)(const char *name, const char *def, const char *help,
                                          void *arg),
                             void *arg);

#endif /* COLLIE_PARAMS_H */
