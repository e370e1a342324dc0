// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Creating, mapping and removing the control page (a sealed memfd, or a file
 * at an explicit path), and reading the agent's side of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U /* Linux 6.3 */
#endif

RC_API uint64_t ramcache_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* @path, else $RAMCACHE_CONTROL; "" when neither names a file. */
static int resolve_path(const char *path, char *buf, size_t len)
{
	int n;

	if (!path)
		path = secure_getenv(RAMCACHE_CTL_ENV);
	n = snprintf(buf, len, "%s", path ? path : "");
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

static void init_header(struct ramcache *rc)
{
	struct ramcache_ctl *c = rc->ctl;

	c->version = RAMCACHE_CTL_VERSION;
	c->header_size = sizeof(*c);
	c->total_size = rc->size;
	c->max_entries = rc->max_entries;
	c->ring_size = rc->ring_size;
	c->entry_size = sizeof(struct ramcache_ctl_entry);
	c->cmd_size = sizeof(struct ramcache_ctl_cmd);
	c->ack_size = sizeof(struct ramcache_ctl_ack);
	c->executor_pid = (uint32_t)getpid();
	c->executor_uid = (uint32_t)geteuid();
	c->entries_off = sizeof(*c);
	c->cmds_off = c->entries_off +
		      (uint64_t)rc->max_entries * sizeof(*rc->entries);
	c->acks_off = c->cmds_off + (uint64_t)rc->ring_size * sizeof(*rc->cmds);
	c->exec_heartbeat_ns = ramcache_now_ns();

	rc->entries = (void *)((char *)c + c->entries_off);
	rc->cmds = (void *)((char *)c + c->cmds_off);
	rc->acks = (void *)((char *)c + c->acks_off);
	/* The magic last: a page without it is not a page yet. */
	rc_store_release(&c->magic, RAMCACHE_CTL_MAGIC);
}

/* A free name "@path.XXXXXX" for the page, in @tmp. */
static int temp_name(char *tmp, size_t len, const char *path)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[6];
	int n;

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -EAGAIN;
	n = snprintf(tmp, len, "%s.%c%c%c%c%c%c", path, abc[r[0] % 36],
		     abc[r[1] % 36], abc[r[2] % 36], abc[r[3] % 36],
		     abc[r[4] % 36], abc[r[5] % 36]);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/*
 * The page's file, still without a name: O_TMPFILE in @path's directory.
 * -EOPNOTSUPP when the file system (or kernel) has no O_TMPFILE, or there
 * is no /proc to name the file through later.
 */
static int open_unnamed(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if (snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path),
			  path) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	if (access("/proc/self/fd", X_OK)) /* no /proc: no way to link it */
		return -EOPNOTSUPP;
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	return errno == EISDIR || errno == EOPNOTSUPP || errno == EINVAL
		       ? -EOPNOTSUPP
		       : -errno;
}

/*
 * Give the finished, unnamed page @fd a fresh temporary name in @tmp. With
 * O_TMPFILE this is the only moment a temporary name exists, between this
 * link and the rename that follows it; nothing else happens in between.
 */
static int link_unnamed(int fd, char *tmp, size_t len, const char *path)
{
	char self[64];
	int err;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	for (int i = 0; i < 100; i++) {
		err = temp_name(tmp, len, path);
		if (err)
			return err;
		if (!linkat(AT_FDCWD, self, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW))
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

#define BUILD_UNLINKABLE 1 /* the unnamed page could not be linked */

/*
 * Size, map and fill the page in @fd (closed here), then rename it over
 * @path: from @tmp, or when @tmp is "" (an O_TMPFILE page) from the
 * temporary name it is linked under first. On any error nothing is left
 * mapped and no temporary name is left behind.
 */
static int build_page(struct ramcache *rc, int fd, char *tmp, size_t len,
		      const char *path)
{
	void *map = MAP_FAILED;
	struct stat st;
	int err;

	if (fchmod(fd, 0600) || ftruncate(fd, (off_t)rc->size) ||
	    fstat(fd, &st)) {
		err = -errno;
		goto fail;
	}
	map = mmap(NULL, rc->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		err = -errno;
		goto fail;
	}
	rc->ctl = map;
	rc->dev = st.st_dev;
	rc->ino = st.st_ino;
	init_header(rc);
	if (!tmp[0] && link_unnamed(fd, tmp, len, path)) {
		tmp[0] = '\0'; /* nothing was linked */
		err = BUILD_UNLINKABLE;
		goto fail;
	}
	if (rename(tmp, path)) {
		err = -errno;
		goto fail;
	}
	close(fd);
	return 0;
fail:
	if (map != MAP_FAILED) {
		munmap(map, rc->size);
		rc->ctl = NULL;
	}
	if (tmp[0])
		unlink(tmp);
	close(fd);
	return err;
}

/*
 * Build the page unnamed (O_TMPFILE), name it with a fresh temporary name
 * and rename that over @path: the agent never sees a half-made page, a
 * symlink planted at @path is replaced, never followed, and an executor
 * killed while building it leaves no file behind. Where O_TMPFILE or the
 * link through /proc is not possible, the page is built under an O_EXCL
 * temporary name instead (then a kill in the middle leaves that name).
 */
static int make_page(struct ramcache *rc, const char *path)
{
	char tmp[PATH_MAX] = "";
	int fd, err;

	fd = open_unnamed(path);
	if (fd >= 0) {
		err = build_page(rc, fd, tmp, sizeof(tmp), path);
		if (err != BUILD_UNLINKABLE)
			return err;
	} else if (fd != -EOPNOTSUPP) {
		return fd;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC); /* O_EXCL, mode 0600 */
	if (fd < 0)
		return -errno;
	return build_page(rc, fd, tmp, sizeof(tmp), path);
}

/*
 * The default page: an anonymous memfd that lives as long as this process
 * holds it. The agent finds it in /proc/<pid>/fd, so there is no name to
 * squat and nothing left behind after a SIGKILL. Sealed against shrinking:
 * neither side can be hit by SIGBUS through a truncate.
 */
static int make_memfd(struct ramcache *rc)
{
	unsigned int flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	char path[64];
	struct stat st;
	void *map;
	int fd, err;

	fd = memfd_create(RAMCACHE_CTL_MEMFD_NAME, flags | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL) /* before 6.3: no MFD_NOEXEC_SEAL */
		fd = memfd_create(RAMCACHE_CTL_MEMFD_NAME, flags);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) || ftruncate(fd, (off_t)rc->size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ||
	    fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	map = mmap(NULL, rc->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		err = -errno;
		close(fd);
		return err;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
	rc->path = strdup(path);
	if (!rc->path) {
		munmap(map, rc->size);
		close(fd);
		return -ENOMEM;
	}
	rc->ctl = map;
	rc->fd = fd;
	rc->dev = st.st_dev;
	rc->ino = st.st_ino;
	init_header(rc);
	return 0;
}

RC_API int ramcache_create(struct ramcache **out, const char *path,
			   uint32_t max_entries, uint32_t ring_size)
{
	char buf[PATH_MAX];
	struct ramcache *rc;
	int err;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!max_entries)
		max_entries = RAMCACHE_DEFAULT_ENTRIES;
	if (!ring_size)
		ring_size = RAMCACHE_DEFAULT_RING;
	if (max_entries > RAMCACHE_MAX_ENTRIES ||
	    ring_size > RAMCACHE_MAX_RING || (ring_size & (ring_size - 1)))
		return -EINVAL;
	err = resolve_path(path, buf, sizeof(buf));
	if (err)
		return err;

	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return -ENOMEM;
	rc->fd = -1;
	rc->max_entries = max_entries;
	rc->ring_size = ring_size;
	rc->size = ramcache_ctl_size(max_entries, ring_size);
	rc->ids = calloc(max_entries, sizeof(*rc->ids));
	if (!rc->ids) {
		err = -ENOMEM;
		goto fail;
	}
	if (buf[0]) {
		rc->path = strdup(buf);
		err = rc->path ? make_page(rc, rc->path) : -ENOMEM;
	} else {
		err = make_memfd(rc);
	}
	if (err)
		goto fail;
	pthread_mutex_init(&rc->pub_lock, NULL);
	pthread_mutex_init(&rc->cmd_lock, NULL);
	*out = rc;
	return 0;
fail:
	free(rc->ids);
	free(rc->path);
	free(rc);
	return err;
}

RC_API void ramcache_destroy(struct ramcache *rc, bool unlink_file)
{
	struct stat st;

	if (!rc)
		return;
	/* Only remove the file if it is still ours, not a successor's. */
	if (unlink_file && rc->fd < 0 && !lstat(rc->path, &st) &&
	    st.st_dev == rc->dev && st.st_ino == rc->ino)
		unlink(rc->path);
	munmap(rc->ctl, rc->size);
	if (rc->fd >= 0)
		close(rc->fd); /* the memfd goes with its last reference */
	pthread_mutex_destroy(&rc->pub_lock);
	pthread_mutex_destroy(&rc->cmd_lock);
	free(rc->ids);
	free(rc->path);
	free(rc);
}

RC_API const char *ramcache_path(const struct ramcache *rc)
{
	return rc ? rc->path : NULL;
}

RC_API enum ramcache_agent_state ramcache_agent_state(const struct ramcache *rc)
{
	uint32_t lock;
	uint64_t hb;

	if (!rc)
		return RAMCACHE_AGENT_NONE;
	lock = rc_load_acquire(&rc->ctl->agent_lock);
	hb = rc_load_acquire(&rc->ctl->agent_heartbeat_ns);
	if (lock & RAMCACHE_LOCK_OWNER_DIED)
		return RAMCACHE_AGENT_DIED;
	if (!hb)
		return RAMCACHE_AGENT_NONE;
	if (!ramcache_heartbeat_fresh(hb, ramcache_now_ns()))
		return RAMCACHE_AGENT_SILENT;
	return RAMCACHE_AGENT_ALIVE;
}

RC_API bool ramcache_agent_alive(const struct ramcache *rc)
{
	return ramcache_agent_fresh(
		rc_load_acquire(&rc->ctl->agent_heartbeat_ns),
		rc_load_acquire(&rc->ctl->agent_lock), ramcache_now_ns());
}

RC_API uint32_t ramcache_level(const struct ramcache *rc)
{
	return rc_load(&rc->ctl->level);
}

RC_API uint64_t ramcache_headroom(const struct ramcache *rc)
{
	return rc_load(&rc->ctl->headroom_bytes);
}

RC_API uint64_t ramcache_target(const struct ramcache *rc)
{
	return rc_load(&rc->ctl->target_bytes);
}
