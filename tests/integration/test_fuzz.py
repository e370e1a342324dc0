#!/usr/bin/env python3
"""The control-page fuzzer (tests/fuzz/fuzz_control.c) for a bounded time:
arbitrary bytes through the agent's parsers and policy under ASan+UBSan.
`make fuzz` runs the same harness for FUZZ_SECONDS."""
import os
import shutil
import subprocess
import tempfile

from rctest import OUTPUT, main, test

FUZZ = os.path.join(OUTPUT, "fuzz", "fuzz_control")
SEEDS = os.path.join(OUTPUT, "fuzz", "seeds")
SECONDS = int(os.environ.get("RAMCACHE_FUZZ_SECONDS", "20"))


@test
def seeds_are_valid_pages_from_the_library():
    pages = [f for f in os.listdir(SEEDS) if f.startswith("page-")]
    assert len(pages) >= 4, pages
    for f in pages:
        with open(os.path.join(SEEDS, f), "rb") as fh:
            assert fh.read(8) == b"RARCCTL1", f


@test
def control_page_fuzzer_finds_nothing():
    if not os.access(FUZZ, os.X_OK):
        raise RuntimeError(f"{FUZZ} is not built")
    work = tempfile.mkdtemp(prefix="ramcache-fuzz-")
    try:
        corpus = os.path.join(work, "corpus")
        os.mkdir(corpus)
        r = subprocess.run(
            [FUZZ, f"-max_total_time={SECONDS}", "-max_len=8192",
             "-timeout=5", "-rss_limit_mb=1024", "-print_final_stats=1",
             f"-artifact_prefix={work}/", corpus, SEEDS],
            capture_output=True, text=True, timeout=SECONDS + 120)
        lines = r.stderr.splitlines()
        runs = [ln for ln in lines if ln.startswith("stat::number_of_executed_units")]
        if runs:
            print(f"# {runs[0]}")
        crashes = [f for f in os.listdir(work) if f != "corpus"]
        assert r.returncode == 0 and not crashes, (
            r.returncode, crashes, "\n".join(lines[-40:]))
        assert runs and int(runs[0].split()[-1]) > 1000, runs
    finally:
        shutil.rmtree(work, ignore_errors=True)


main()
