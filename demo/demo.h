/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ramcache-demo: a ComfyUI-like executor on libramcache. It loads "models"
 * (a generated file, mmap'd, plus an anonymous copy), caches node outputs
 * across prompts and returns memory to the kernel when told to.
 */
#ifndef RAMCACHE_DEMO_H
#define RAMCACHE_DEMO_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ramcache/ramcache.h>

#define MiB (1ULL << 20)

/* exit codes */
#define DEMO_EXIT_OK	0
#define DEMO_EXIT_ERROR 1
#define DEMO_EXIT_USAGE 2

enum demo_policy {
	DEMO_POLICY_NONE,  /* never evict: the classic cache */
	DEMO_POLICY_LOCAL, /* evict after each node on our own memory check */
	DEMO_POLICY_AGENT, /* obey ramcache-bpf, fall back to local */
	DEMO_POLICY_PSI,   /* evict when a PSI trigger fires */
};

struct demo_opts {
	enum demo_policy policy;
	unsigned int prompts;
	unsigned int nodes;
	unsigned int models;
	unsigned int steps;
	unsigned int step_ms;
	uint64_t output_size;
	uint64_t model_size;
	uint64_t local_headroom;
	const char *model_dir;
	const char *psi_trigger;
	unsigned int wait_agent_s;
	bool json;
	bool publish; /* none policy: publish the cache all the same */
};

/* args.c */
int demo_parse_args(struct demo_opts *o, int argc, char **argv);
const char *demo_policy_name(enum demo_policy p);

/* report.c: progress lines, text or JSON lines on stdout */
void report_init(bool json);
void report_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void report_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool report_json(void);
void json_str(const char *s);

/* an entry of the cache: a model or a node output */
enum demo_kind {
	DEMO_KIND_OUTPUT,
	DEMO_KIND_MODEL,
};

struct demo_entry {
	uint64_t id;  /* published id, new for every (re)computation */
	uint64_t key; /* what was computed: hash of the node's inputs */
	enum demo_kind kind;
	unsigned int model; /* for models: index */
	void *anon;	    /* anonymous memory: the output or model copy */
	size_t anon_len;
	void *map; /* models: the file mapping */
	size_t map_len;
	uint64_t last_use_ns;
	uint64_t used_generation;
	uint64_t cost_ns;
	uint32_t flags; /* RAMCACHE_F_* */
	bool busy;	/* needed by the running node */
	char label[RAMCACHE_LABEL_LEN];
};

struct demo_cache {
	struct demo_entry **v;
	size_t n, cap;
	uint64_t next_id;
	struct ramcache *rc; /* NULL: publish nothing */
	uint64_t bytes;	     /* anonymous bytes held */
	uint64_t evicted;
	uint64_t bytes_evicted;
};

/* cache.c */
void cache_init(struct demo_cache *c, struct ramcache *rc);
void cache_destroy(struct demo_cache *c);
struct demo_entry *cache_find_key(struct demo_cache *c, enum demo_kind kind,
				  uint64_t key);
struct demo_entry *cache_find_id(struct demo_cache *c, uint64_t id);
int cache_add(struct demo_cache *c, struct demo_entry *e);
int cache_publish(struct demo_cache *c, struct demo_entry *e);
void cache_use(struct demo_cache *c, struct demo_entry *e, uint64_t gen);
void cache_set_active(struct demo_cache *c, struct demo_entry *e, bool on);
uint64_t cache_evict(struct demo_cache *c, struct demo_entry *e);
struct demo_entry *cache_pick_victim(const struct demo_cache *c);
void entry_release(struct demo_entry *e);
uint64_t rss_anon_bytes(void);

/* model.c */
int model_generate(const char *path, uint64_t size, unsigned int seed,
		   void (*tick)(void *), void *arg);
int model_load(struct demo_entry *e, const char *path, uint64_t size,
	       void (*tick)(void *), void *arg);

/* memavail.c: what the local policy measures */
struct memavail {
	char *dirs[16]; /* own memory cgroup and its ancestors */
	int nr_dirs;
	int version; /* 1, 2, or 0 without a memory cgroup */
};
int memavail_init(struct memavail *m);
void memavail_free(struct memavail *m);
uint64_t memavail_read(const struct memavail *m);

/* cmdq.c: a thread waiting for agent commands, queued for the executor */
#define CMDQ_LEN 256
struct cmdq {
	pthread_mutex_t lock;
	pthread_cond_t space;
	pthread_cond_t ready; /* CLOCK_MONOTONIC: a command was queued */
	struct ramcache_command q[CMDQ_LEN];
	unsigned int head, tail;
	struct ramcache *rc;
	pthread_t thread;
	bool running;
	int stop; /* atomic */
};
int cmdq_start(struct cmdq *q, struct ramcache *rc);
void cmdq_stop(struct cmdq *q);
bool cmdq_pop(struct cmdq *q, struct ramcache_command *cmd);
/* Sleep until @deadline_ns (ramcache_now_ns) or until a command is queued. */
void cmdq_wait(struct cmdq *q, uint64_t deadline_ns);

/* psi.c: a thread polling a PSI trigger, for --policy psi */
struct psi_watch {
	int fd;
	pthread_t thread;
	bool running;
	volatile int stop;
	unsigned int events; /* atomic: triggers fired */
	unsigned int seen;   /* events already taken */
	uint64_t last_ns;
};
int psi_start(struct psi_watch *w, const struct memavail *m,
	      const char *trigger);
void psi_stop(struct psi_watch *w);
unsigned int psi_take(struct psi_watch *w);

/* workload.c */
struct demo_stats {
	unsigned int prompts;
	uint64_t computed, hits, model_loads;
	uint64_t acks, acks_evicted, acks_busy, acks_not_found;
	uint64_t held; /* commands held while their entry was in use */
	uint64_t local_evictions;
	uint64_t psi_events;
	uint64_t evicted, bytes_evicted;
	uint64_t peak_cached;
	uint64_t elapsed_ms;
};
extern volatile int demo_stop_signal;
int workload_run(const struct demo_opts *o, struct ramcache *rc,
		 const char *model_dir, struct demo_stats *st);

#endif /* RAMCACHE_DEMO_H */
