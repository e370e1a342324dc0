/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernels before 6.8 name an OOM victim by pid only; when the victim was
 * not the task that ran into the OOM, the BPF side cannot read the rest.
 * These fill it in from /proc while the victim still exists (it is being
 * killed: often it still does, for a few milliseconds).
 */
#ifndef RAMCACHE_OOMVICTIM_H
#define RAMCACHE_OOMVICTIM_H

#include <linux/types.h>

#include "pressure.h"

/* True when @e lacks what only the victim itself could tell. */
static inline int oomvictim_partial(const struct rc_oom_kill *e)
{
	return e->victim_uid == RC_UID_UNKNOWN;
}

/*
 * Fill comm, uid and the RSS fields of @e from the text of a
 * /proc/<pid>/status file. Returns 0, or -EINVAL when Uid is missing.
 */
int oomvictim_parse(const char *status, struct rc_oom_kill *e);

/*
 * Read <proc_root>/<victim_pid>/status into @e. Returns 0, -ENOENT when
 * the victim is already gone, or another -errno; @e is unchanged then.
 */
int oomvictim_fill(const char *proc_root, struct rc_oom_kill *e);

#endif /* RAMCACHE_OOMVICTIM_H */
