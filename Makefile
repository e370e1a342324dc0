# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# ramcache-bpf: `make` only builds, everything into build/; `make deps`
# installs what the build and the tests need on Debian; `make test` and
# `make demo` run deps first, then build and run in a second make, so link
# flags are computed only once the packages are there. V=1 shows the full
# commands.

OUTPUT ?= build
CLANG ?= clang
# bpftool is in /usr/sbin, which a user's PATH on Debian leaves out.
ifeq ($(origin BPFTOOL),undefined)
BPFTOOL := $(or $(shell command -v bpftool 2>/dev/null),$(wildcard /usr/sbin/bpftool),bpftool)
endif
LLVM_STRIP ?= llvm-strip
CC ?= cc
PYTHON ?= /usr/bin/python3
ARCH_DIR := $(shell uname -m)
ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/' \
	  -e 's/ppc64le/powerpc/' -e 's/s390x/s390/' -e 's/riscv64/riscv/')
VMLINUX_DIR := vmlinux/$(ARCH_DIR)
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

WARN := -Wall -Wextra -Werror -Wno-unused-parameter
CFLAGS ?= -g -O2
ALL_CFLAGS := $(CFLAGS) $(WARN) -std=gnu11 -D_GNU_SOURCE -MMD -MP \
	      -DRAMCACHE_VERSION='"$(VERSION)"' \
	      -I$(OUTPUT) -Ibpf -Iinclude -Iuser
BPF_CFLAGS := -g -O2 -Wall -Werror -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) \
	      -MMD -MP -I$(VMLINUX_DIR) -Ibpf -I$(OUTPUT)
# Recursive (=), not :=, so pkg-config runs when a link needs it: after
# `make deps` has installed libmicrohttpd-dev, never at parse time.
AGENT_LIBS = -lbpf -lelf -lz $(shell pkg-config --libs libmicrohttpd) -lm

# Debian packages the build and the tests need.
DEPS_PKGS := clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev pkg-config \
	     make gcc python3 python3-pip python3-aiohttp python3-yaml libmicrohttpd-dev systemtap-sdt-dev \
	     libclang-rt-14-dev clang-format cppcheck procps util-linux mount \
	     binutils coreutils systemd linux-libc-dev chromium tmux \
	     qemu-system-x86 busybox-static cpio kmod debootstrap git \
	     ca-certificates e2fsprogs bpftrace podman runc \
	     build-essential debhelper dh-python lintian bash-completion
# Installed without their recommends and with their services stopped and
# disabled: prometheus is here only for promtool, never as a server;
# docker.io for test_docker.py, which starts a daemon of its own (not where
# a Docker engine is installed already: Docker CE conflicts with it).
DEPS_PKGS_BARE := prometheus $(if $(shell command -v dockerd 2>/dev/null),,docker.io)
# What real ComfyUI imports on Debian 12 (comfyui/COMPATIBILITY.md): for
# `make test` when the real trees are here (COMFY_TREES) and for
# `sudo make bench RAMCACHE_COMFYUI=DIR`.
COMFY_PKGS := python3-torch python3-torchvision python3-torchaudio \
	      python3-scipy python3-tqdm python3-sentencepiece \
	      python3-sqlalchemy python3-alembic python3-pydantic python3-av \
	      python3-soundfile python3-pil python3-psutil python3-packaging \
	      python3-filelock
# The real ComfyUI trees (comfyui/tests/realcomfy.py finds them the same
# way): $RAMCACHE_COMFYUI_TREES, else ../shared/comfyui beside this
# repository, its main worktree or the repository it was cloned from.
COMFY_TREES := $(or $(RAMCACHE_COMFYUI_TREES),$(firstword $(foreach r,. \
	$(shell git rev-parse --path-format=absolute --git-common-dir 2>/dev/null)/.. \
	$(shell git remote get-url origin 2>/dev/null),$(wildcard $(r)/../shared/comfyui/comfyui-*.tar.gz))))

# What the build reads, by package: a command on PATH or a header in the
# system's include directories. Checked (never installed) before a plain
# `make` builds anything: a missing package is named in one line, with
# what to run, instead of a compiler error half way through.
BUILD_NEEDS := clang:cmd:$(CLANG) llvm:cmd:$(LLVM_STRIP) bpftool:cmd:$(BPFTOOL) \
	       gcc:cmd:$(CC) pkg-config:cmd:pkg-config \
	       libbpf-dev:h:bpf/bpf_core_read.h libbpf-dev:h:bpf/libbpf.h \
	       libelf-dev:h:libelf.h zlib1g-dev:h:zlib.h \
	       libmicrohttpd-dev:h:microhttpd.h systemtap-sdt-dev:h:sys/sdt.h \
	       linux-libc-dev:h:linux/bpf.h
HDR_DIRS := /usr/local/include /usr/include $(wildcard /usr/include/*-linux-gnu*)
need_cmd = $(if $(shell p=$$(command -v $(firstword $(1))) && [ -f "$$p" ] && [ -x "$$p" ] && echo y),,$(1))
need_h = $(if $(wildcard $(addsuffix /$(1),$(HDR_DIRS))),,$(1))
need = $(foreach n,$(BUILD_NEEDS),$(call need_one,$(subst :, ,$(n))))
need_one = $(if $(call need_$(word 2,$(1)),$(word 3,$(1))),$(word 1,$(1)):$(word 3,$(1)))
# Goals that build nothing themselves (those that run deps first build in
# a second make, which checks); with deps among the goals it installs first.
NO_BUILD_GOALS := deps kernels clean format check-format vmlinux test demo bench \
		  soak fuzz vmtest test-fresh uninstall
ifeq ($(filter deps,$(MAKECMDGOALS)),)
ifneq ($(filter-out $(NO_BUILD_GOALS),$(or $(MAKECMDGOALS),all)),)
BUILD_MISSING := $(strip $(need))
ifneq ($(BUILD_MISSING),)
comma := ,
missing_files := $(foreach m,$(BUILD_MISSING),$(word 2,$(subst :, ,$(m))))
missing_what := $(if $(word 4,$(missing_files)),$(words $(missing_files)) programs and headers,$(subst $() ,$(comma) ,$(missing_files)))
$(error ramcache-bpf: failed to find $(missing_what): missing packages $(sort $(foreach m,$(BUILD_MISSING),$(word 1,$(subst :, ,$(m))))) (run 'sudo make deps'))
endif
endif
endif

# The most executors one agent follows: the size of the BPF side's tables
# and of the agent's (bpf/tablesize.h). A power of two, 64 to 1024; build
# each size into its own OUTPUT.
MAX_EXECUTORS ?= 64
RC_BUILD_H := $(OUTPUT)/rc_build.h

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.bpf.o,$(BPF_SRCS))
SKELS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS))

USER_SRCS := $(wildcard user/*.c user/*/*.c)
USER_OBJS := $(patsubst user/%.c,$(OUTPUT)/obj/user/%.o,$(USER_SRCS))
USER_LIB_OBJS := $(filter-out $(OUTPUT)/obj/user/main.o,$(USER_OBJS))

LIB_SRCS := $(wildcard lib/*.c)
LIB_OBJS := $(patsubst lib/%.c,$(OUTPUT)/obj/lib/%.o,$(LIB_SRCS))

DEMO_SRCS := $(wildcard demo/*.c)
DEMO_OBJS := $(patsubst demo/%.c,$(OUTPUT)/obj/demo/%.o,$(DEMO_SRCS))

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUTPUT)/tests/%,$(UNIT_SRCS))
HELPER_SRCS := $(wildcard tests/helpers/*.c)
HELPER_BINS := $(patsubst tests/helpers/%.c,$(OUTPUT)/tests/%,$(HELPER_SRCS))
BENCH_BINS := $(OUTPUT)/bench/faultbench $(OUTPUT)/bench/fpbench \
	      $(OUTPUT)/bench/empty.bpf.o

AGENT := $(OUTPUT)/ramcache-bpf
DEMO := $(OUTPUT)/ramcache-demo
LIBSO := $(OUTPUT)/libramcache.so
LIBA := $(OUTPUT)/libramcache.a

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

.DELETE_ON_ERROR:
.SECONDARY: $(BPF_OBJS) $(SKELS)
.PHONY: all deps kernels test demo bench fuzz soak clean vmlinux format check-format \
	lint hardening run-test run-demo run-bench run-soak run-fuzz \
	vmtest run-vmtest test-fresh

all: $(AGENT) $(LIBSO) $(LIBA) $(if $(DEMO_SRCS),$(DEMO)) $(UNIT_BINS) \
     $(HELPER_BINS) $(BENCH_BINS)

# The only target that queries or installs packages. Quick when everything
# is there: one dpkg query, no network.
deps:
	$(Q)missing() { for p in "$$@"; do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
		grep -q 'install ok installed' || echo $$p; done; }; \
	missing=$$(missing $(DEPS_PKGS) $(if $(RAMCACHE_COMFYUI)$(COMFY_TREES),$(COMFY_PKGS))); \
	bare=$$(missing $(DEPS_PKGS_BARE)); \
	if [ -n "$$missing$$bare" ]; then \
		if [ "$$(id -u)" != 0 ]; then \
			echo "ramcache-bpf: missing packages:" $$missing $$bare "(run 'sudo make deps')"; exit 1; \
		fi; \
		echo "  DEPS     installing" $$missing $$bare; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && \
		{ [ -z "$$missing" ] || apt-get install -y -qq $$missing >/dev/null; } && \
		{ [ -z "$$bare" ] || apt-get install -y -qq --no-install-recommends $$bare >/dev/null; } && \
		for s in $$(echo $$bare | sed 's/docker\.io/docker containerd/'); do \
			{ systemctl disable --now $$s || \
			{ invoke-rc.d $$s stop; update-rc.d $$s disable; }; } >/dev/null 2>&1 || true; \
		done; \
	fi
	$(Q)if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		if [ "$$(id -u)" != 0 ]; then \
			echo "ramcache-bpf: missing node and npm (run 'sudo make deps')"; exit 1; \
		fi; \
		echo "  DEPS     installing nodejs npm"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	fi

# User-facing targets that need packages: deps, then a fresh make that reads
# the installed tools (pkg-config, bpftool) from scratch.
test demo bench soak fuzz vmtest: deps
	$(Q)$(MAKE) --no-print-directory run-$@

# The kernels the VM suites boot (tests/run.py's VM_KERNELS), fetched with
# the packages (apt-get download, unpacked once under
# /var/cache/ramcache-bpf/kernel) unless the VM suites are left out.
VM_KERNELS := 6.1 6.12
test vmtest: kernels
kernels: deps
	$(Q)[ "$(RAMCACHE_NO_VM)" = 1 ] || for k in $(VM_KERNELS); do \
		tests/vm/kernel.sh $$k >/dev/null || exit 1; done

run-test: all hardening comfyui-web grafana-check
	$(Q)OUTPUT=$(OUTPUT) PYTHON=$(PYTHON) $(PYTHON) tests/run.py

# The suites that need a real kernel, on this one and on Debian's 6.1 and
# 6.12 (cgroup v2) in QEMU: tests/vm/run.sh boots them.
run-vmtest: all
	$(Q)OUTPUT=$(OUTPUT) PYTHON=$(PYTHON) $(PYTHON) tests/run.py --kernels

# `make test` as the README says, in a clean clone of HEAD on a freshly
# debootstrap'd Debian 12 root (tests/fresh/run.sh).
test-fresh: deps
	$(Q)tests/fresh/run.sh test

run-demo: all
	$(Q)OUTPUT=$(OUTPUT) demo/run-demo.sh

$(OUTPUT) $(OUTPUT)/obj/user $(OUTPUT)/obj/lib $(OUTPUT)/obj/demo \
$(OUTPUT)/tests $(OUTPUT)/bench:
	$(Q)mkdir -p $@

# Rewritten only when MAX_EXECUTORS changes: what includes it (-MMD) is
# rebuilt then, and only then.
$(RC_BUILD_H): FORCE | $(OUTPUT)
	$(Q)echo '#define RC_MAX_TARGETS $(MAX_EXECUTORS)' > $@.new && \
		{ cmp -s $@.new $@ && rm $@.new || mv $@.new $@; }
FORCE:

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c $(VMLINUX_DIR)/vmlinux.h $(RC_BUILD_H) | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@
	$(Q)$(LLVM_STRIP) -g $@ # DWARF: the agent embeds the object; BTF stays

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

# The skeletons are order-only: -MMD records which objects include them.
$(OUTPUT)/obj/user/%.o: user/%.c | $(OUTPUT)/obj/user $(SKELS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(AGENT): $(USER_OBJS)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $^ $(AGENT_LIBS) -o $@

$(OUTPUT)/obj/lib/%.o: lib/%.c | $(OUTPUT)/obj/lib
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(LIBSO): $(LIB_OBJS)
	$(call msg,LIB,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,libramcache.so.1 $^ -o $@

$(LIBA): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(OUTPUT)/obj/demo/%.o: demo/%.c | $(OUTPUT)/obj/demo
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Idemo -c $< -o $@

$(DEMO): $(DEMO_OBJS) $(LIBA)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $^ -lm -o $@

# Unit tests link the agent's objects (less main) and the executor library.
$(OUTPUT)/tests/test_%: tests/unit/test_%.c $(USER_LIB_OBJS) $(LIBA) | $(OUTPUT)/tests $(SKELS)
	$(call msg,TEST,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/unit $< $(USER_LIB_OBJS) $(LIBA) $(AGENT_LIBS) -lpthread -o $@

$(OUTPUT)/tests/%: tests/helpers/%.c $(LIBA) | $(OUTPUT)/tests
	$(call msg,HELPER,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $< $(LIBA) -lpthread -lm -o $@

# fpbench drives the agent's BPF programs through bpfstate.
$(OUTPUT)/bench/fpbench: bench/fpbench.c $(USER_LIB_OBJS) | $(OUTPUT)/bench $(SKELS)
	$(call msg,BENCH,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $< $(USER_LIB_OBJS) $(AGENT_LIBS) -o $@

$(OUTPUT)/bench/%.bpf.o: bench/%.bpf.c $(VMLINUX_DIR)/vmlinux.h | $(OUTPUT)/bench
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/bench/%: bench/%.c | $(OUTPUT)/bench
	$(call msg,BENCH,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $< -o $@

# The ComfyUI frontend extension is type-checked against ComfyUI's frontend
# types (comfyui/tests/test_web.py), and the Grafana dashboard against
# Grafana's schema types (tests/integration/test_prometheus.py); npm installs
# the pinned versions here, never into the source tree (node and npm come
# from make deps).
WEB_CHECK := $(OUTPUT)/comfyui-web
WEB_PINS := comfyui/tests/web/package.json comfyui/tests/web/package-lock.json \
	comfyui/tests/web/.npmrc
GRAFANA_CHECK := $(OUTPUT)/grafana-check
GRAFANA_PINS := contrib/grafana/check/package.json \
	contrib/grafana/check/package-lock.json contrib/grafana/check/.npmrc
.PHONY: comfyui-web grafana-check
$(WEB_CHECK)/node_modules/.package-lock.json: $(WEB_PINS)
$(GRAFANA_CHECK)/node_modules/.package-lock.json: $(GRAFANA_PINS)
$(OUTPUT)/%/node_modules/.package-lock.json:
	$(call msg,NPM,$(OUTPUT)/$*)
	$(Q)mkdir -p $(OUTPUT)/$* && cp $^ $(OUTPUT)/$*/ && \
		cd $(OUTPUT)/$* && npm ci --cache $(abspath $(OUTPUT))/npm-cache >/dev/null
	$(Q)touch $@
comfyui-web: $(WEB_CHECK)/node_modules/.package-lock.json
grafana-check: $(GRAFANA_CHECK)/node_modules/.package-lock.json

# Regenerate the committed vmlinux.h from the running kernel's BTF.
vmlinux:
	$(Q)mkdir -p $(VMLINUX_DIR)
	$(call msg,GEN,$(VMLINUX_DIR)/vmlinux.h)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $(VMLINUX_DIR)/vmlinux.h

FORMAT_FILES = $$(git ls-files '*.c' '*.h' | grep -v '^vmlinux/')

format:
	$(Q)clang-format -i $(FORMAT_FILES)

check-format:
	$(Q)clang-format --dry-run -Werror $(FORMAT_FILES)

clean:
	$(call msg,CLEAN,$(OUTPUT))
	$(Q)rm -rf $(OUTPUT)

# ------------------------------------------------------------------ hardening
# Fuzzing, sanitizer builds of the unit tests, static analysis and the soak.
# `make test` builds all of it; `make fuzz` and `make soak` run the long
# versions (FUZZ_SECONDS, SOAK_SECONDS).

FUZZ_SECONDS ?= 300
SOAK_SECONDS ?= 300
FUZZ_CC ?= clang
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	     -fno-omit-frame-pointer
ASAN_DIR := $(OUTPUT)/asan
ASAN_USER_OBJS := $(patsubst user/%.c,$(ASAN_DIR)/obj/user/%.o,$(USER_SRCS))
ASAN_USER_LIB_OBJS := $(filter-out $(ASAN_DIR)/obj/user/main.o,$(ASAN_USER_OBJS))
ASAN_LIB_OBJS := $(patsubst lib/%.c,$(ASAN_DIR)/obj/lib/%.o,$(LIB_SRCS))
ASAN_UNIT_BINS := $(patsubst tests/unit/%.c,$(ASAN_DIR)/tests/%,$(UNIT_SRCS))
FUZZ_DIR := $(OUTPUT)/fuzz
FUZZ_BIN := $(FUZZ_DIR)/fuzz_control
FUZZ_SEED := $(FUZZ_DIR)/fuzz_seed
FUZZ_SRCS := tests/fuzz/fuzz_control.c user/page/control_parse.c user/core/policy.c
CPPCHECK_FLAGS := --quiet --error-exitcode=1 --enable=warning,portability \
		  --std=c11 --inline-suppr --suppress=missingIncludeSystem \
		  -D__x86_64__ -D_GNU_SOURCE -Iinclude -Iuser -Ibpf -Idemo -Ilib

.SECONDARY: $(ASAN_USER_OBJS) $(ASAN_LIB_OBJS)

hardening: $(ASAN_UNIT_BINS) $(FUZZ_BIN) $(FUZZ_DIR)/seeds/.done

$(ASAN_DIR)/obj/user $(ASAN_DIR)/obj/lib $(ASAN_DIR)/tests $(FUZZ_DIR):
	$(Q)mkdir -p $@

$(ASAN_DIR)/obj/user/%.o: user/%.c | $(ASAN_DIR)/obj/user $(SKELS)
	$(call msg,CC-ASAN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -c $< -o $@

$(ASAN_DIR)/obj/lib/%.o: lib/%.c | $(ASAN_DIR)/obj/lib
	$(call msg,CC-ASAN,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -fPIC -c $< -o $@

$(ASAN_DIR)/tests/test_%: tests/unit/test_%.c $(ASAN_USER_LIB_OBJS) $(ASAN_LIB_OBJS) | $(ASAN_DIR)/tests $(SKELS)
	$(call msg,TEST-ASAN,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -Itests/unit $< $(ASAN_USER_LIB_OBJS) $(ASAN_LIB_OBJS) $(AGENT_LIBS) -lpthread -o $@

$(FUZZ_BIN): $(FUZZ_SRCS) user/page/control.h user/core/policy.h \
	    user/core/units.h include/ramcache/*.h | $(FUZZ_DIR)
	$(call msg,FUZZ,$@)
	$(Q)$(FUZZ_CC) -g -O1 $(WARN) -std=gnu11 -D_GNU_SOURCE -Iinclude -Iuser \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		$(FUZZ_SRCS) -lm -o $@

$(FUZZ_SEED): tests/fuzz/fuzz_seed.c $(LIBA) | $(FUZZ_DIR)
	$(call msg,HELPER,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $< $(LIBA) -lpthread -o $@

# Seeds are generated by the library, never committed.
$(FUZZ_DIR)/seeds/.done: $(FUZZ_SEED)
	$(Q)rm -rf $(FUZZ_DIR)/seeds && mkdir -p $(FUZZ_DIR)/seeds
	$(Q)$(FUZZ_SEED) $(FUZZ_DIR)/seeds && touch $@

run-fuzz: $(FUZZ_BIN) $(FUZZ_DIR)/seeds/.done
	$(Q)mkdir -p fuzz-corpus
	$(call msg,FUZZ,$(FUZZ_SECONDS) s)
	$(Q)$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
		-timeout=5 -rss_limit_mb=1024 -print_final_stats=1 \
		-artifact_prefix=fuzz-corpus/ fuzz-corpus $(FUZZ_DIR)/seeds

LINT_DIRS := user lib demo tests/fuzz tests/helpers

lint:
	$(call msg,CPPCHECK,$(LINT_DIRS))
	$(Q)cppcheck $(CPPCHECK_FLAGS) $(LINT_DIRS)

run-soak: all
	$(Q)OUTPUT=$(OUTPUT) SOAK_SECONDS=$(SOAK_SECONDS) \
		$(PYTHON) tests/integration/test_soak.py
# ---- bench: `make bench` (not part of `make test`) --------------------------
# Benchmarks side by side in one run (about 15 minutes on 2 cores): fault-path
# overhead, reaction and eviction latency, outcomes against other policies,
# footprint. Writes BENCHMARKS.md and bench/results.json. Needs root.
# `make test` runs the harness in quick mode (tests/integration/test_bench.py).
# `sudo make bench RAMCACHE_COMFYUI=/path/to/ComfyUI` adds eviction rows
# measured in that real ComfyUI checkout (3 rounds, about 2 minutes more;
# make deps then also installs the Debian packages ComfyUI imports);
# RAMCACHE_COMFYUI_COMMIT names its commit when it is not a git work tree.
# `sudo make bench RAMCACHE_COMFYUI_VERSIONS=all` (or '0.33.0 0.3.64') adds
# ComfyUI alone against the package and agent in the real versions of
# ../shared/comfyui (bench/sections/comfyui_versions.py; hours on 2 cores;
# the runner's own JSON stays in build/bench/comfyui-versions; --only
# comfyui-versions --merge bench/results.json runs it alone).
# `sudo make bench RAMCACHE_COMFYUI_MODELS=all` (or small, or full) adds real model
# loads in real ComfyUI (bench/sections/comfyui_models.py; about 90 minutes).
run-bench: all
	$(Q)RAMCACHE_BENCH_CMD="sudo make bench$(if $(RAMCACHE_COMFYUI), RAMCACHE_COMFYUI=$(RAMCACHE_COMFYUI))$(if $(RAMCACHE_COMFYUI_VERSIONS), RAMCACHE_COMFYUI_VERSIONS='$(RAMCACHE_COMFYUI_VERSIONS)')$(if $(RAMCACHE_COMFYUI_MODELS), RAMCACHE_COMFYUI_MODELS=$(RAMCACHE_COMFYUI_MODELS))" \
		RAMCACHE_COMFYUI="$(RAMCACHE_COMFYUI)" \
		RAMCACHE_COMFYUI_VERSIONS="$(RAMCACHE_COMFYUI_VERSIONS)" \
		RAMCACHE_COMFYUI_MODELS="$(RAMCACHE_COMFYUI_MODELS)" \
		RAMCACHE_COMFYUI_COMMIT="$(RAMCACHE_COMFYUI_COMMIT)" \
		OUTPUT=$(OUTPUT) \
		$(PYTHON) bench/run.py --md BENCHMARKS.md --json bench/results.json
# ---- end bench ---------------------------------------------------------------

# ---- install ----------------------------------------------------------------
# `make install` (PREFIX=/usr/local, DESTDIR for staging): the agent, the
# executor library (then ldconfig, without DESTDIR: the loader finds a new
# library in /usr/local/lib only through its cache), its headers and its
# pkg-config file (libramcache), the systemd unit and its settings (an
# existing /etc/default/ramcache-bpf is kept), ramcache-report and
# ramcache-top (Python, stdlib only) with their modules in lib/ramcache-bpf,
# the manual pages and the bash completion. `make uninstall` removes them
# all but the settings. debian/rules runs it with PREFIX=/usr.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
UNITDIR ?= $(PREFIX)/lib/systemd/system
MANDIR ?= $(PREFIX)/share/man
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
VIEWERS := ramcache-report ramcache-top
.PHONY: install uninstall man
install: $(AGENT) $(LIBSO) $(LIBA) man
	$(call msg,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)install -D -m 0755 $(AGENT) $(DESTDIR)$(PREFIX)/bin/ramcache-bpf
	$(Q)install -D -m 0755 $(LIBSO) $(DESTDIR)$(LIBDIR)/libramcache.so.1
	$(Q)ln -sf libramcache.so.1 $(DESTDIR)$(LIBDIR)/libramcache.so
	$(Q)[ -n "$(DESTDIR)" ] || [ "$$(id -u)" != 0 ] || ! command -v ldconfig >/dev/null || ldconfig
	$(Q)install -D -m 0644 $(LIBA) $(DESTDIR)$(LIBDIR)/libramcache.a
	$(Q)install -d $(DESTDIR)$(PREFIX)/include/ramcache $(DESTDIR)$(LIBDIR)/pkgconfig
	$(Q)install -m 0644 include/ramcache/*.h $(DESTDIR)$(PREFIX)/include/ramcache/
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' \
		'includedir=$${prefix}/include' '' 'Name: libramcache' \
		'Description: the executor side of the ramcache-bpf control page' \
		'Version: $(VERSION)' 'Libs: -L$${libdir} -lramcache' \
		'Cflags: -I$${includedir}' > $(DESTDIR)$(LIBDIR)/pkgconfig/libramcache.pc
	$(Q)install -d $(DESTDIR)$(UNITDIR)
	$(Q)sed -e 's|/usr/local/bin/|$(PREFIX)/bin/|' \
		contrib/systemd/ramcache-bpf.service > $(DESTDIR)$(UNITDIR)/ramcache-bpf.service
	$(Q)[ -e $(DESTDIR)/etc/default/ramcache-bpf ] || \
		install -D -m 0644 contrib/systemd/ramcache-bpf.default \
		$(DESTDIR)/etc/default/ramcache-bpf
	$(Q)for v in $(VIEWERS); do \
		install -D -m 0755 report/$$v $(DESTDIR)$(PREFIX)/bin/$$v || exit 1; done
	$(Q)install -d $(DESTDIR)$(PREFIX)/lib/ramcache-bpf/rcviz
	$(Q)install -m 0644 report/rcviz/*.py $(DESTDIR)$(PREFIX)/lib/ramcache-bpf/rcviz/
	$(Q)for p in $(MAN_PAGES); do install -D -m 0644 $$p \
		$(DESTDIR)$(MANDIR)/man$${p##*.}/$${p##*/} || exit 1; done
	$(Q)install -D -m 0644 contrib/bash-completion/ramcache-bpf \
		$(DESTDIR)$(COMPLETIONDIR)/ramcache-bpf
	$(Q)for v in $(VIEWERS); do ln -sf ramcache-bpf $(DESTDIR)$(COMPLETIONDIR)/$$v; done

uninstall:
	$(call msg,UNINSTALL,$(DESTDIR)$(PREFIX))
	$(Q)rm -f $(DESTDIR)$(PREFIX)/bin/ramcache-bpf \
		$(addprefix $(DESTDIR)$(PREFIX)/bin/,$(VIEWERS)) \
		$(addprefix $(DESTDIR)$(LIBDIR)/,libramcache.so.1 libramcache.so \
			libramcache.a pkgconfig/libramcache.pc) \
		$(DESTDIR)$(UNITDIR)/ramcache-bpf.service \
		$(foreach p,$(MAN_PAGES),$(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(p)))/$(notdir $(p))) \
		$(addprefix $(DESTDIR)$(COMPLETIONDIR)/,ramcache-bpf $(VIEWERS))
	$(Q)rm -rf $(DESTDIR)$(PREFIX)/include/ramcache $(DESTDIR)$(PREFIX)/lib/ramcache-bpf
	$(Q)[ -n "$(DESTDIR)" ] || [ "$$(id -u)" != 0 ] || ! command -v ldconfig >/dev/null || ldconfig

# The manual pages (`make man`, into $(OUTPUT)/man), each from one source:
# the program's --help, or the header's comments, turned into roff by
# docs/man/mkman.py, with the sections neither holds from docs/man/PAGE.md.
MAN_DIR := $(OUTPUT)/man
MAN_PAGES := $(MAN_DIR)/ramcache-bpf.8 $(addprefix $(MAN_DIR)/,$(addsuffix .1,$(VIEWERS))) \
	     $(MAN_DIR)/libramcache.3
MKMAN = $(PYTHON) docs/man/mkman.py $< --version $(VERSION)
man: $(MAN_PAGES)
$(MAN_DIR):
	$(Q)mkdir -p $@
$(MAN_DIR)/ramcache-bpf.8: docs/man/ramcache-bpf.8.md docs/man/mkman.py $(AGENT) | $(MAN_DIR)
	$(call msg,MAN,$@)
	$(Q)$(MKMAN) --help-of $(AGENT) > $@
$(MAN_DIR)/ramcache-%.1: docs/man/ramcache-%.1.md docs/man/mkman.py report/ramcache-% | $(MAN_DIR)
	$(call msg,MAN,$@)
	$(Q)$(MKMAN) --help-of $(PYTHON) report/ramcache-$* > $@
$(MAN_DIR)/libramcache.3: docs/man/libramcache.3.md docs/man/mkman.py include/ramcache/ramcache.h | $(MAN_DIR)
	$(call msg,MAN,$@)
	$(Q)$(MKMAN) --header include/ramcache/ramcache.h > $@

# ---- deb: `make deb` ----------------------------------------------------------
# Debian packages of this tree, built with debhelper (debian/) into
# $(DEB_OUT): ramcache-bpf, libramcache1, libramcache-dev, python3-ramcache
# and ramcache-bpf-comfyui, of version DEB_VERSION (VERSION's; the tests
# build a lower one as the previous release). dpkg-buildpackage runs in a
# copy of the tree's files the packages are made of (DEB_PATHS; git
# ls-files: committed or not, less what git ignores), never in the
# checkout, whose debian/, build/ and parent folder it leaves alone. Built
# again only when one of those files changes (or their list does); the
# objects stay in $(DEB_WORK)/build. `make test` runs lintian on them
# (tests/integration/test_deb.py).
DEB_VERSION ?= $(VERSION)
DEB_OUT ?= $(OUTPUT)/deb
DEB_WORK = $(OUTPUT)/deb-work/$(DEB_VERSION)
DEB_TREE = $(DEB_WORK)/ramcache-bpf
DEB_PATHS := Makefile VERSION bpf user lib include vmlinux report python/ramcache \
	     python/README.md comfyui contrib/systemd contrib/bash-completion \
	     docs/man debian
DEB_LIST = if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	{ git ls-files -co --exclude-standard -- $(DEB_PATHS) ':!comfyui/tests'; \
	  git ls-files -d -- $(DEB_PATHS) ':!comfyui/tests'; } | sort | uniq -u; \
	else find $(DEB_PATHS) \( -name __pycache__ -o -path comfyui/tests \) -prune \
		-o ! -type d -print; fi
ifneq ($(filter deb,$(MAKECMDGOALS)),)
DEB_SRCS := $(shell $(DEB_LIST))
endif
.PHONY: deb
deb: $(DEB_WORK)/stamp
	$(Q)mkdir -p $(DEB_OUT) && rm -f $(DEB_OUT)/*.deb $(DEB_OUT)/*.changes $(DEB_OUT)/*.buildinfo
	$(Q)cp $(DEB_WORK)/*.deb $(DEB_WORK)/*.changes $(DEB_WORK)/*.buildinfo $(DEB_OUT)/
	$(Q)for f in $(DEB_OUT)/*.deb; do printf '  %-8s %s\n' DEB "$$f"; done

# Rewritten only when the list of files changes.
$(DEB_WORK)/files: FORCE
	$(Q)mkdir -p $(@D) && { $(DEB_LIST); } > $@.new && \
		{ cmp -s $@.new $@ && rm $@.new || mv $@.new $@; }

$(DEB_WORK)/stamp: $(DEB_WORK)/files $(DEB_SRCS)
	$(Q)command -v dh >/dev/null && command -v dh_python3 >/dev/null || \
		{ echo "ramcache-bpf: failed to find debhelper and dh-python (run 'sudo make deps')"; exit 1; }
	$(call msg,COPY,$(DEB_TREE))
	$(Q)touch $@.new && rm -rf $(DEB_TREE) $(DEB_WORK)/*.deb && mkdir -p $(DEB_TREE)
	$(Q)tar -cf - -T $(DEB_WORK)/files | tar -xf - -C $(DEB_TREE)
	$(Q)sed -i '1s/(.*)/($(DEB_VERSION))/' $(DEB_TREE)/debian/changelog
	$(call msg,DEB,$(DEB_VERSION) (log: $(DEB_WORK)/build.log))
	$(Q)cd $(DEB_TREE) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
		RAMCACHE_DEB_BUILD=$(abspath $(DEB_WORK))/build \
		DEB_BUILD_OPTIONS="noddebs $(DEB_BUILD_OPTIONS)" \
		dpkg-buildpackage -b -nc --no-sign -jauto > ../build.log 2>&1 || \
		{ tail -n 40 ../build.log; echo "ramcache-bpf: failed to build the packages (log: $(DEB_WORK)/build.log)"; exit 1; }
	$(Q)mv $@.new $@

# Dependencies recorded by -MMD (absent before the first build).
-include $(shell find $(OUTPUT) -name '*.d' -type f -not -path '$(OUTPUT)/deb-work/*' 2>/dev/null)
