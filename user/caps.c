// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Capabilities after set-up; see caps.h. */
#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"

#define BIT(c) CAPS_BIT(c)

uint64_t caps_keep(const struct caps_need *n, uint64_t have)
{
	/* bpf() on maps as executors come and go (before 5.19 every bpf()
	 * command needs it while unprivileged BPF is off); pidfd_getfd and
	 * /proc/PID/{fd,maps,ns} of other users' processes; listing their
	 * /proc/PID/fd (mode 0500) */
	uint64_t keep = BIT(CAP_BPF) | BIT(CAP_SYS_PTRACE) |
			BIT(CAP_DAC_READ_SEARCH);

	/* without CAP_DAC_READ_SEARCH only CAP_DAC_OVERRIDE lists fd/ */
	if (!(have & BIT(CAP_DAC_READ_SEARCH)) || n->open_paths)
		keep |= BIT(CAP_DAC_OVERRIDE);
	if (n->discover)
		keep |= BIT(CAP_PERFMON) | BIT(CAP_CHECKPOINT_RESTORE);
	if (n->memlock)
		keep |= BIT(CAP_IPC_LOCK);
	return keep & have;
}

static int capget_(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };

	return syscall(SYS_capget, &h, d) ? -errno : 0;
}

uint64_t caps_effective(void)
{
	struct __user_cap_data_struct d[2] = { 0 };

	if (capget_(d))
		return 0;
	return d[0].effective | (uint64_t)d[1].effective << 32;
}

/* root's execve gains no capability, for good (needs CAP_SETPCAP). */
static int lock_noroot(void)
{
	int bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	int want = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED;

	if (bits < 0)
		return -errno;
	if ((bits & want) == want)
		return 0;
	return prctl(PR_SET_SECUREBITS, bits | want, 0, 0, 0) ? -errno : 0;
}

int caps_drop_to(uint64_t keep)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = { 0 };
	uint64_t have;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) &&
	    errno != EINVAL) /* before 4.3: no ambient set */
		return -errno;
	have = caps_effective();
	if (have & BIT(CAP_SETPCAP)) {
		int err = lock_noroot();

		if (err)
			return err;
		for (int c = 0; c < 64; c++)
			if (!(keep & BIT(c)) &&
			    prctl(PR_CAPBSET_DROP, c, 0, 0, 0) &&
			    errno != EINVAL)
				return -errno;
	}
	keep &= have;
	d[0].effective = d[0].permitted = (uint32_t)keep;
	d[1].effective = d[1].permitted = (uint32_t)(keep >> 32);
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

bool caps_would_do(uint64_t keep, int (*fn)(const void *ctx), const void *ctx)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return false;
	if (!pid)
		_exit(caps_drop_to(keep) || fn(ctx) ? 1 : 0);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return false;
	return WIFEXITED(status) && !WEXITSTATUS(status);
}
