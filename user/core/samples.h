/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The last RC_SAMPLES_LEN samples of one figure (headroom, or RSS) in time
 * order, for the forecasts.
 */
#ifndef RAMCACHE_SAMPLES_H
#define RAMCACHE_SAMPLES_H

#include <stdint.h>

#include "core/policy.h"

#define RC_SAMPLES_LEN 128

struct rc_samples {
	struct rc_sample s[RC_SAMPLES_LEN];
	unsigned int head, count;
};

/*
 * Add @bytes at @t_ns, the oldest sample making way; a stamp that trails
 * the newest (a BPF time behind a file read) takes the newest's time.
 */
void samples_push(struct rc_samples *r, uint64_t t_ns, uint64_t bytes);

/* Copy the samples oldest first into @out (RC_SAMPLES_LEN); how many. */
unsigned int samples_copy(const struct rc_samples *r, struct rc_sample *out);

#endif /* RAMCACHE_SAMPLES_H */
