/* clock.h - the clocks every component reads */
#ifndef ELASTIC_COMMON_CLOCK_H
#define ELASTIC_COMMON_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Seconds on CLOCK_MONOTONIC, and since the epoch. */
double mono_now (void);
double wall_now (void);

/* CLOCK_MONOTONIC in nanoseconds (the heartbeat's clock). */
uint64_t mono_ns (void);

/* Format epoch seconds as "2024-05-01T12:00:00.123456Z" into buf. */
void format_iso_time (double t, char *buf, size_t size);

#endif /* ELASTIC_COMMON_CLOCK_H */
