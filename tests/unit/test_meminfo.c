// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* /proc readers against the fake proc trees in tests/fixtures. */
#include <fcntl.h>
#include <unistd.h>

#include "test.h"
#include "proc/meminfo.h"

TEST(meminfo_fields)
{
	struct rc_meminfo mi;

	if (!ASSERT_OK(meminfo_read(fixture("proc"), &mi), "read"))
		return;
	ASSERT_EQ(mi.mem_total, 16318412ULL * 1024, "MemTotal");
	ASSERT_EQ(mi.mem_free, 812344ULL * 1024, "MemFree");
	ASSERT_EQ(mi.mem_available, 6291456ULL * 1024, "MemAvailable");
	ASSERT_TRUE(mi.has_mem_available, "has MemAvailable");
	ASSERT_EQ(mi.swap_total, 8388604ULL * 1024, "SwapTotal");
	ASSERT_EQ(mi.swap_free, 8000000ULL * 1024, "SwapFree");
	ASSERT_EQ(mi.active_file, 2500000ULL * 1024, "Active(file)");
	ASSERT_EQ(mi.inactive_file, 3145728ULL * 1024, "Inactive(file)");
	ASSERT_EQ(mi.active_anon, 4500000ULL * 1024, "Active(anon)");
	ASSERT_EQ(mi.inactive_anon, 1200000ULL * 1024, "Inactive(anon)");
	ASSERT_EQ(mi.cached, 5923444ULL * 1024, "Cached");
	ASSERT_EQ(mi.shmem, 120000ULL * 1024, "Shmem");
}

TEST(meminfo_old_kernel)
{
	struct rc_meminfo mi;

	if (!ASSERT_OK(meminfo_read(fixture("proc-old"), &mi), "read"))
		return;
	ASSERT_EQ(mi.mem_total, 2048000ULL * 1024, "MemTotal");
	ASSERT_FALSE(mi.has_mem_available, "no MemAvailable");
	ASSERT_EQ(mi.mem_available, 0, "MemAvailable reads 0");
	ASSERT_EQ(mi.inactive_file, 0, "absent field");
}

TEST(meminfo_missing)
{
	struct rc_meminfo mi;
	struct rc_vmstat vs;

	ASSERT_EQ(meminfo_read(fixture("nonexistent"), &mi), -ENOENT, "enoent");
	ASSERT_EQ(meminfo_read(fixture("proc/1234"), &mi), -ENOENT, "no file");
	/* A file without MemTotal is not a meminfo. */
	ASSERT_EQ(meminfo_read(fixture("proc/pressure"), &mi), -ENOENT,
		  "no meminfo in dir");
	ASSERT_EQ(meminfo_vmstat_read(fixture("proc-old/.."), &vs), -ENOENT,
		  "no vmstat");
	ASSERT_EQ(meminfo_read(fixture("bad-proc"), &mi), -ENODATA,
		  "no MemTotal");
	ASSERT_EQ(meminfo_vmstat_read(fixture("bad-proc"), &vs), -ENODATA,
		  "no known counter");
}

TEST(vmstat_modern)
{
	struct rc_vmstat vs;

	if (!ASSERT_OK(meminfo_vmstat_read(fixture("proc"), &vs), "read"))
		return;
	ASSERT_EQ(vs.workingset_refault_anon, 1500, "refault anon");
	ASSERT_EQ(vs.workingset_refault_file, 132930, "refault file");
	ASSERT_EQ(vs.pswpin, 77, "pswpin");
	ASSERT_EQ(vs.pswpout, 4242, "pswpout");
	ASSERT_EQ(vs.pgmajfault, 1236, "pgmajfault");
	ASSERT_EQ(vs.allocstall, 16, "allocstall_* summed");
	ASSERT_EQ(vs.pgscan_kswapd, 1000, "pgscan_kswapd");
	/* pgscan_direct_throttle is not a zone of pgscan_direct. */
	ASSERT_EQ(vs.pgscan_direct, 100, "pgscan_direct");
	ASSERT_EQ(vs.pgsteal_kswapd, 900, "pgsteal_kswapd");
	ASSERT_EQ(vs.pgsteal_direct, 90, "pgsteal_direct");
	ASSERT_EQ(vs.oom_kill, 2, "oom_kill");
}

TEST(vmstat_old_kernel)
{
	struct rc_vmstat vs;

	if (!ASSERT_OK(meminfo_vmstat_read(fixture("proc-old"), &vs), "read"))
		return;
	ASSERT_EQ(vs.workingset_refault_file, 555, "workingset_refault");
	ASSERT_EQ(vs.workingset_refault_anon, 0, "no anon split");
	ASSERT_EQ(vs.allocstall, 4, "allocstall");
	ASSERT_EQ(vs.pgscan_kswapd, 60, "per-zone kswapd summed");
	ASSERT_EQ(vs.pgscan_direct, 40, "per-zone direct, not throttle");
	ASSERT_EQ(vs.pgsteal_kswapd, 15, "pgsteal_kswapd_normal");
	ASSERT_EQ(vs.pgsteal_direct, 25, "pgsteal_direct_normal");
}

TEST(psi_system)
{
	struct rc_psi psi;

	if (!ASSERT_OK(meminfo_psi_read(fixture("proc"), &psi), "read"))
		return;
	ASSERT_TRUE(psi.available, "available");
	ASSERT_TRUE(psi.has_full, "full line");
	ASSERT_EQ(psi.some_avg10 * 100, 1250, "some avg10");
	ASSERT_EQ(psi.some_avg60 * 100, 325, "some avg60");
	ASSERT_EQ(psi.full_avg10 * 100, 200, "full avg10");
	ASSERT_EQ(psi.some_total_us, 123456789, "some total");
	ASSERT_EQ(psi.full_total_us, 23456789, "full total");
}

TEST(psi_absent_is_not_error)
{
	struct rc_psi psi;

	psi.available = true;
	ASSERT_OK(meminfo_psi_read(fixture("proc-old"), &psi), "absent file");
	ASSERT_FALSE(psi.available, "not available");
}

TEST(psi_garbage)
{
	char path[] = "/tmp/rc-psi-XXXXXX";
	struct rc_psi psi;
	int fd = mkstemp(path);

	if (!ASSERT_GE(fd, 0, "mkstemp"))
		return;
	dprintf(fd, "some avg10=nan avg60=0.00 avg300=0.00 total=0\n");
	close(fd);
	ASSERT_EQ(meminfo_psi_read_file(path, &psi), -EINVAL, "nan rejected");
	ASSERT_FALSE(psi.available, "not available");
	fd = open(path, O_WRONLY | O_TRUNC);
	dprintf(fd, "hello\n");
	close(fd);
	ASSERT_EQ(meminfo_psi_read_file(path, &psi), -EINVAL, "no some line");
	unlink(path);
}

TEST(pidstat_fixture)
{
	struct rc_pidstat ps;
	long page = sysconf(_SC_PAGESIZE);

	if (!ASSERT_OK(meminfo_pidstat_read(fixture("proc"), 1234, &ps),
		       "read"))
		return;
	ASSERT_EQ(ps.state, 'S', "state after a comm with ')'");
	ASSERT_EQ(ps.minflt, 5000, "minflt");
	ASSERT_EQ(ps.majflt, 42, "majflt");
	ASSERT_EQ(ps.rss_pages, 25600, "rss pages");
	ASSERT_EQ(ps.rss_bytes, 25600ULL * page, "rss bytes");
	ASSERT_EQ(meminfo_pidstat_read(fixture("proc"), 99999, &ps), -ENOENT,
		  "gone");
	ASSERT_EQ(meminfo_pidstat_read(fixture("proc"), -1, &ps), -EINVAL,
		  "bad pid");
}

TEST(pidrss_fixture)
{
	struct rc_pidrss r;

	if (!ASSERT_OK(meminfo_pidrss_read(fixture("proc"), 1234, &r), "read"))
		return;
	ASSERT_EQ(r.anon, 81920ULL << 10, "anon");
	ASSERT_EQ(r.file, 16384ULL << 10, "file");
	ASSERT_EQ(r.shmem, 4096ULL << 10, "shmem");
	ASSERT_EQ(meminfo_pidrss_read(fixture("proc"), 99999, &r), -ENOENT,
		  "gone");
	ASSERT_EQ(meminfo_pidrss_read(fixture("proc"), 3002, &r), -ENODATA,
		  "no Rss lines (before 4.5)");
}

TEST(pidstat_parse_hostile)
{
	struct rc_pidstat ps;

	ASSERT_EQ(meminfo_pidstat_parse("1 (x) R 1 2", 4096, &ps), -EINVAL,
		  "truncated");
	ASSERT_EQ(meminfo_pidstat_parse("no paren at all", 4096, &ps), -EINVAL,
		  "no comm");
	ASSERT_OK(
		meminfo_pidstat_parse(
			"7 (a b) R 1 1 1 0 -1 0 1 0 2 0 0 0 0 0 20 0 1 0 5 100 -3",
			4096, &ps),
		"negative rss");
	ASSERT_EQ(ps.rss_pages, 0, "negative rss reads 0");
	ASSERT_EQ(ps.majflt, 2, "majflt");
	ASSERT_OK(
		meminfo_pidstat_parse(
			"7 (a) R 1 1 1 0 -1 0 1 0 2 0 0 0 0 0 20 0 1 0 5 100 9223372036854775807",
			4096, &ps),
		"huge rss");
	ASSERT_TRUE(ps.rss_bytes == UINT64_MAX, "rss bytes saturate");
}

TEST(pidstat_self)
{
	struct rc_pidstat ps;

	if (!ASSERT_OK(meminfo_pidstat_read(NULL, getpid(), &ps), "read /proc"))
		return;
	ASSERT_GE(ps.rss_pages, 1, "some rss");
	ASSERT_GE(ps.minflt, 1, "some faults");
}

TEST_MAIN()
