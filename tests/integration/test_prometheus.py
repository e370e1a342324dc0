#!/usr/bin/env python3
"""The Prometheus rules and the Grafana dashboard in contrib/, against
promtool and against what a real agent serves.

- `promtool check rules` and `promtool test rules` pass, every alert has a
  test where it fires and one where it stays quiet, and each alert's test
  fails when its rule is weakened (so the tests can tell).
- The dashboard is well-formed Grafana JSON (ids, grid, refIds, variables,
  heatmaps over buckets) and shows what docs/fleet.md promises.
- Every metric and label name in the dashboard's queries, its variables
  and the rules is one a running agent serves (agent --metrics on a real
  executor, scraped), and promtool evaluates every dashboard query to data
  over the series of that scrape.
"""
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import promql
import promtext
from rctest import (free_port, AGENT, HELPERS, OUTPUT, ROOT, Memcg, main,
                    require_root, test)

try:
    import yaml
except ImportError:  # python3-yaml, from make deps
    yaml = None

RULES = os.path.join(ROOT, "contrib", "prometheus", "ramcache.rules.yml")
RULE_TESTS = os.path.join(ROOT, "contrib", "prometheus",
                          "ramcache.rules.test.yml")
DASHBOARD = os.path.join(ROOT, "contrib", "grafana", "ramcache-bpf.json")
EXECUTOR = os.path.join(HELPERS, "executor")
# labels Prometheus adds to every scraped series, and series it makes up
TARGET_LABELS = {"instance", "job"}
SYNTHETIC = {"up": {"instance", "job"}}
# what a Prometheus query of a panel may hold (Grafana's schema leaves it
# open, so it is checked here)
TARGET_KEYS = {"datasource", "expr", "legendFormat", "refId", "format",
               "instant", "range", "interval", "exemplar", "hide",
               "editorMode"}
GRAFANA_VARS = {"__rate_interval": "1m", "__interval": "15s",
                "__range": "5m", "__range_s": "300"}


def promtool(*args, cwd=None):
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: run 'sudo make deps'"
    p = subprocess.run([tool, *args], cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    return p.returncode, p.stdout


def load_yaml(path):
    assert yaml, "python3-yaml is missing: run 'sudo make deps'"
    with open(path) as f:
        return yaml.safe_load(f)


def rules():
    """(alerts {name: expr}, records {name: expr}) of ramcache.rules.yml."""
    alerts, records = {}, {}
    for g in load_yaml(RULES)["groups"]:
        for r in g["rules"]:
            if "alert" in r:
                alerts[r["alert"]] = r["expr"]
            else:
                records[r["record"]] = r["expr"]
    return alerts, records


def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def sources(names):
    """@names with each recorded name replaced by the names its rule reads
    (recursively): the families a query really draws on."""
    records = rules()[1]
    out, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n in records:
            todo += promql.names(records[n]) - out
        else:
            out.add(n)
    return out


def queries(d):
    """(where, expr) of every panel target."""
    for p in d["panels"]:
        for t in p.get("targets", []):
            yield f"panel {p['id']} '{p['title']}' {t['refId']}", t["expr"]


def variable_queries(d):
    """(where, selector) of every label_values() variable query."""
    for v in d["templating"]["list"]:
        if v["type"] != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q.strip())
        assert m, f"variable {v['name']}: unexpected query {q!r}"
        yield f"variable {v['name']}", m.group(1), m.group(2)


def substitute(expr, values=None):
    """Grafana's variables replaced as Grafana would before querying."""
    values = dict(GRAFANA_VARS, **(values or {}))

    def one(m):
        name = m.group(1) or m.group(2)
        assert name in values, f"unknown variable ${name} in {expr!r}"
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


# ------------------------------------------------------------------ rules

@test
def rules_pass_promtool_check():
    rc, out = promtool("check", "rules", RULES)
    print("# " + out.strip().replace("\n", "\n# "))
    assert rc == 0 and "SUCCESS" in out, out


@test
def example_config_passes_promtool_check_config():
    """contrib/prometheus/prometheus.yml and the rules it loads."""
    rc, out = promtool("check", "config", "prometheus.yml",
                       cwd=os.path.dirname(RULES))
    assert rc == 0 and "1 rule files found" in out, out


@test
def rule_tests_pass_and_cover_every_alert():
    rc, out = promtool("test", "rules", os.path.basename(RULE_TESTS),
                       cwd=os.path.dirname(RULE_TESTS))
    assert rc == 0 and "SUCCESS" in out, out
    alerts, records = rules()
    fires, quiet, exprs = set(), set(), ""
    for t in load_yaml(RULE_TESTS)["tests"]:
        for a in t.get("alert_rule_test", []):
            (fires if a.get("exp_alerts") else quiet).add(a["alertname"])
        exprs += " ".join(e["expr"] for e in t.get("promql_expr_test", []))
    for name in ("RamcacheLevelHigh", "RamcacheEvictionsLost",
                 "RamcacheHeadroomEtaShort", "RamcacheAgentAbsent"):
        assert name in alerts, f"the issue's alert {name} is missing"
    assert fires == set(alerts), f"alerts never fired: {set(alerts) - fires}"
    assert quiet == set(alerts), f"never shown quiet: {set(alerts) - quiet}"
    used = exprs + " ".join(alerts.values())
    for name in records:
        assert name in used, f"recording rule {name} is tested nowhere"
    print(f"# {len(alerts)} alerts, {len(records)} recording rules")


# Each weakening must make `promtool test rules` fail: the tests look at
# more than "something fired".
MUTATIONS = [
    ("RamcacheLevelHigh fires on warn", "expr: ramcache_domain_level >= 2",
     "expr: ramcache_domain_level >= 1"),
    ("RamcacheLevelHigh without its minute", "        for: 1m\n", ""),
    ("RamcacheEvictionsLost on any count",
     "expr: executor:ramcache_evictions_lost:increase5m > 0",
     "expr: executor:ramcache_evictions_lost:increase5m >= 0"),
    ("RamcacheEvictionsLost without overwritten acks",
     '\n          + sum without (kind)\n          (increase(ramcache_executor_protocol_anomalies_total{kind="ack_overrun"}[5m]))',
     ""),
    ("RamcacheHeadroomEtaShort at 60 s",
     "ramcache_domain_forecast_eta_seconds < 30",
     "ramcache_domain_forecast_eta_seconds < 60"),
    ("RamcacheAgentAbsent without absent()",
     ' or absent(up{job="ramcache-bpf"})', ""),
    ("RamcacheEventsDropped on a steady count",
     "increase(ramcache_ringbuf_drops_total[5m]) > 0",
     "ramcache_ringbuf_drops_total > 0"),
    ("RamcacheExecutorOOMKilled on any OOM kill",
     "increase(ramcache_executor_oom_kills_total[10m]) > 0",
     "increase(ramcache_oom_kills_total[10m]) > 0"),
]


@test
def rule_tests_fail_when_a_rule_is_weakened():
    with open(RULES) as f:
        text = f.read()
    with tempfile.TemporaryDirectory(prefix="ramcache-rules.") as tmp:
        shutil.copy(RULE_TESTS, tmp)
        for what, old, new in MUTATIONS:
            assert text.count(old) == 1, f"{what}: {old!r} not found once"
            with open(os.path.join(tmp, os.path.basename(RULES)), "w") as f:
                f.write(text.replace(old, new))
            rc, out = promtool("test", "rules",
                               os.path.basename(RULE_TESTS), cwd=tmp)
            assert rc != 0 and "FAILED" in out, f"{what}: tests still pass"
            print(f"# {what}: caught")


# -------------------------------------------------------------- dashboard

@test
def dashboard_is_well_formed():
    d = dashboard()
    for key in ("title", "uid", "schemaVersion", "panels", "templating"):
        assert key in d, f"dashboard has no {key}"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {ids}"
    cells = {}
    defined = {v["name"] for v in d["templating"]["list"]}
    for p in d["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["w"] >= 1 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, \
                    f"'{p['title']}' overlaps '{cells[(x, y)]}'"
                cells[(x, y)] = p["title"]
        if p["type"] == "row":
            continue
        assert p.get("title") and p.get("description"), p
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert set(t) <= TARGET_KEYS, f"{p['title']}: {set(t) - TARGET_KEYS}"
            assert t["datasource"]["uid"] == "${datasource}", p["title"]
            for var in re.findall(r"\$\{?(\w+)", t["expr"]):
                assert var in defined or var in GRAFANA_VARS, \
                    f"{p['title']}: ${var} is not a dashboard variable"
            promql.selectors(t["expr"])  # readable
        if p["type"] == "heatmap":
            for t in p["targets"]:
                assert t.get("format") == "heatmap", p["title"]
                assert all(n.endswith("_bucket")
                           for n in sources(promql.names(t["expr"]))), \
                    p["title"]
                assert "by (le)" in t["expr"], p["title"]
    print(f"# {len(ids)} panels, {sum(1 for _ in queries(d))} queries")


# panel type: (module of Grafana's schema types, the name its file carries)
PANEL_TYPES = {"timeseries": ("timeseries", "TimeSeries"),
               "stat": ("stat", "Stat"), "heatmap": ("heatmap", "Heatmap"),
               "state-timeline": ("statetimeline", "StateTimeline")}
SCHEMA_HEAD = """import type { Dashboard } from '@grafana/schema';
%s
// Grafana's types use TypeScript enums; the JSON holds their values.
type Json<T> = T extends string ? `${T}`
  : T extends Array<infer E> ? Array<Json<E>>
  : T extends object ? { [K in keyof T]: Json<T[K]> } : T;
// Panel options and custom field settings: Grafana fills what is left out,
// but every key given must exist and every value fit.
type Some<T> = T extends string ? `${T}`
  : T extends Array<infer E> ? Array<Some<E>>
  : T extends object ? { [K in keyof T]?: Some<T[K]> } : T;
"""


def schema_ts(d):
    """TypeScript that compiles only if @d fits Grafana's schema types: the
    dashboard, then each panel's options and custom field config against
    its panel type's (object literals: an unknown key is an error)."""
    imports = "\n".join(
        f"import type * as {mod} from '@grafana/schema/dist/esm/raw/"
        f"composable/{mod}/panelcfg/x/{cap}PanelCfg_types.gen';"
        for mod, cap in sorted(PANEL_TYPES.values()))
    out = [SCHEMA_HEAD % imports,
           f"export const dashboard: Json<Dashboard> = {json.dumps(d)};"]
    for p in d["panels"]:
        if p["type"] == "row":
            continue
        assert p["type"] in PANEL_TYPES, f"no schema for {p['type']} here"
        mod = PANEL_TYPES[p["type"]][0]
        out.append(f"export const options{p['id']}: Some<{mod}.Options> = "
                   f"{json.dumps(p.get('options', {}))};")
        custom = p.get("fieldConfig", {}).get("defaults", {}).get("custom")
        if custom is not None:
            out.append(f"export const custom{p['id']}: Some<{mod}.FieldConfig>"
                       f" = {json.dumps(custom)};")
    return "\n".join(out) + "\n"


def tsc_errors(d):
    """tsc's errors for @d against Grafana's schema ([] when it fits)."""
    check = os.path.join(OUTPUT, "grafana-check")
    tsc = os.path.join(check, "node_modules", ".bin", "tsc")
    assert os.access(tsc, os.X_OK), \
        f"{tsc} is missing: run 'make grafana-check' (make test does)"
    with tempfile.TemporaryDirectory(dir=check) as tmp:
        shutil.copy(os.path.join(ROOT, "contrib", "grafana", "check",
                                 "tsconfig.json"), tmp)
        with open(os.path.join(tmp, "dashboard.ts"), "w") as f:
            f.write(schema_ts(d))
        p = subprocess.run([tsc, "-p", tmp], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
    errors = [ln for ln in p.stdout.splitlines() if "error TS" in ln]
    assert p.returncode == 0 or errors, p.stdout
    return errors


@test
def dashboard_fits_grafanas_schema():
    """@grafana/schema's types (pinned in contrib/grafana/check): the
    dashboard compiles, and a misspelt key or a value outside an enum in a
    copy of it does not."""
    d = dashboard()
    errors = tsc_errors(d)
    assert not errors, "\n".join(errors)
    text = json.dumps(d)
    for old, new in (('"gridPos"', '"gridpos"'),
                     ('"calculate"', '"calcuate"'),
                     ('"drawStyle": "bars"', '"drawStyle": "bar"'),
                     ('"mode": "absolute"', '"mode": "absolut"')):
        assert old in text, old
        errors = tsc_errors(json.loads(text.replace(old, new, 1)))
        assert errors, f"{old} -> {new} was not caught"
        print(f"# {old} -> {new}: {errors[0].split(': ', 1)[1][:90]}")


@test
def dashboard_shows_what_the_issue_asks():
    d = dashboard()
    used = set()
    heat = set()
    for p in d["panels"]:
        for t in p.get("targets", []):
            used |= sources(promql.names(t["expr"]))
            if p["type"] == "heatmap":
                heat |= sources(promql.names(t["expr"]))
    for name in ("ramcache_domain_headroom_bytes",
                 "ramcache_domain_forecast_eta_seconds",
                 "ramcache_domain_level",
                 "ramcache_executor_commands_total",
                 "ramcache_executor_evicted_bytes_total",
                 "ramcache_reclaim_stall_seconds_sum",
                 "ramcache_oom_kills_total",
                 "ramcache_executor_oom_kills_total"):
        assert name in used, f"no panel shows {name}"
    assert {"ramcache_executor_eviction_ack_seconds_bucket",
            "ramcache_executor_eviction_freed_seconds_bucket"} <= heat, heat


# ------------------------------------------------ names against the agent

def served_names(text):
    """{sample name: {label names}} of an exposition, target labels added."""
    out = {}
    for series in promtext.parse(text):
        name, _, labels = series.partition("{")
        keys = set(re.findall(r'([a-zA-Z_]\w*)="', labels))
        out.setdefault(name, set(TARGET_LABELS)).update(keys)
    return out


def problems(served):
    """Every name in the dashboard and the rules the agent does not serve."""
    d = dashboard()
    alerts, records = rules()
    # recording rules keep the labels their expressions leave
    recorded = {n: None for n in records}
    bad = []
    for where, expr in queries(d):
        bad += [f"{where}: {b}" for b in promql.unknown(
            substitute(expr, {"instance": ".*", "domain": ".*"}), served,
            dict(SYNTHETIC, **recorded))]
        bad += [f"{where}: {b}" for b in grouping_problems(expr, served)]
    for where, sel, label in variable_queries(d):
        sel = substitute(sel, {"instance": ".*"})
        bad += [f"{where}: {b}" for b in promql.unknown(sel, served)]
        for name in promql.names(sel):
            if name in served and label not in served[name]:
                bad.append(f"{where}: {name} has no label {label}")
    for name, expr in list(alerts.items()) + list(records.items()):
        bad += [f"rule {name}: {b}" for b in promql.unknown(
            expr, served, dict(SYNTHETIC, **recorded))]
        bad += [f"rule {name}: {b}" for b in grouping_problems(expr, served)]
    return bad


def recorded_labels(name, served):
    """The labels of recorded series @name: those of what its rule reads,
    less what its aggregation drops (without) or keeps only (by)."""
    expr = rules()[1].get(name)
    if expr is None:
        return set()
    have = set(TARGET_LABELS)
    for src in promql.names(expr):
        have |= served.get(src) or recorded_labels(src, served)
    m = re.search(r"\b(by|without)\s*\(([^)]*)\)", expr)
    if m:
        listed = {x.strip() for x in m.group(2).split(",") if x.strip()}
        have = have - listed if m.group(1) == "without" else listed
    return have


def grouping_problems(expr, served):
    """by/without/on labels that none of the expression's metrics carry."""
    have = set(TARGET_LABELS)
    for name in promql.names(expr):
        have |= served.get(name) or recorded_labels(name, served)
    return [f"groups by {label}, which none of its metrics has"
            for label in sorted(promql.grouping(expr) - have)]


@test
def name_check_reports_a_wrong_name():
    """The check itself: a misspelt metric or label in a query is found."""
    served = {"ramcache_domain_level": {"domain", "instance", "job"}}
    assert promql.unknown('ramcache_domain_level{domain="x"}', served) == []
    assert promql.unknown('ramcache_domain_levels{domain="x"}', served) == [
        "metric ramcache_domain_levels is not served"]
    assert promql.unknown('ramcache_domain_level{domian="x"}', served) == [
        "ramcache_domain_level has no label domian"]
    assert grouping_problems("max by (domian) (ramcache_domain_level)",
                             served) == [
        "groups by domian, which none of its metrics has"]


def scrape_real_agent():
    """The exposition of an agent serving a real executor, once the
    executor's and its domain's series are there."""
    port = free_port()
    # serves until its stdin closes; a line per command on stdout, drained
    ex = subprocess.Popen([EXECUTOR, "--entries", "32"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    agent = None
    try:
        ready = json.loads(ex.stdout.readline())
        assert ready["type"] == "ready", ready
        threading.Thread(target=ex.stdout.read, daemon=True).start()
        agent = subprocess.Popen(
            [AGENT, "--quiet", "--pid", str(ready["pid"]), "--headroom",
             "100T", "--interval", "0.2s", "--metrics", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        end, text = time.monotonic() + 15, ""
        while time.monotonic() < end:
            assert agent.poll() is None, agent.stderr.read()
            try:
                text = promtext.fetch(f"127.0.0.1:{port}")
            except OSError:
                time.sleep(0.1)
                continue
            m = promtext.parse(text)
            if (m.get("ramcache_executors") == 1 and any(
                    k.startswith("ramcache_domain_level{") for k in m) and
                    any(k.startswith("ramcache_executor_commands_total{") and
                        'status="evicted"' in k and v > 0
                        for k, v in m.items())):
                return text
            time.sleep(0.2)
        raise AssertionError(f"no executor, domain or eviction in:\n{text}")
    finally:
        if agent and agent.poll() is None:
            agent.terminate()
            agent.wait(timeout=10)
        ex.kill()
        ex.wait()


def input_series(text, instance):
    """promtool input series of a scrape @text as node @instance's, counters
    growing, each series once a scrape for 10 minutes."""
    series = []
    for s, v in promtext.parse(text).items():
        name, brace, labels = s.partition("{")
        labels = labels[:-1] if brace else ""
        extra = f'instance="{instance}",job="ramcache-bpf"'
        sel = f"{name}{{{labels + ',' if labels else ''}{extra}}}"
        grows = re.search(r"(_total|_bucket|_sum|_count)$", name)
        if v != v or v in (float("inf"), float("-inf")):
            values = " ".join(["+Inf" if v > 0 else "-Inf"] * 41)
        else:
            values = f"{v:g}+{1 if grows else 0}x40"
        series.append({"series": sel, "values": values})
    series.append({"series": f'up{{instance="{instance}",job="ramcache-bpf"}}',
                   "values": "1x40"})
    return series


def promtool_alerts(series, alerts):
    """promtool evaluates @alerts ({name: expr}) at 10m over @series, with
    the recording rules of ramcache.rules.yml loaded; returns (its exit
    code, the names of those that fired)."""
    rules_ = [{"alert": n, "expr": e} for n, e in alerts.items()]
    tests = [{"interval": "15s", "input_series": series, "alert_rule_test": [
        {"eval_time": "10m", "alertname": n, "exp_alerts": []}
        for n in alerts]}]
    with tempfile.TemporaryDirectory(prefix="ramcache-dash.") as tmp:
        shutil.copy(RULES, tmp)
        # JSON is YAML: promtool reads both files as they are written here
        with open(os.path.join(tmp, "q.rules.yml"), "w") as f:
            json.dump({"groups": [{"name": "q", "rules": rules_}]}, f)
        with open(os.path.join(tmp, "q.test.yml"), "w") as f:
            json.dump({"rule_files": [os.path.basename(RULES),
                                      "q.rules.yml"],
                       "evaluation_interval": "15s", "tests": tests}, f)
        rc, out = promtool("check", "rules", "q.rules.yml", cwd=tmp)
        assert rc == 0, f"a dashboard query does not parse:\n{out}"
        rc, out = promtool("test", "rules", "q.test.yml", cwd=tmp)
    fired = {m for m in re.findall(r"alertname: (\w+),", out)}
    assert rc == 0 or fired, out
    return rc, fired


def evaluate_queries(text, exprs):
    """promtool evaluates each expression over the series of @text (as one
    node's scrape, counters growing, the recording rules computed) and
    says which gave no data."""
    rc, fired = promtool_alerts(
        input_series(text, "node-a:9101"),
        {f"Q{i}": f"absent({e}) == 1" for i, e in enumerate(exprs)})
    empty = sorted(int(n[1:]) for n in fired)
    return rc, [exprs[i] for i in empty]


def more_executors(text, n):
    """@text with every executor's series copied into n - 1 more slots of
    the same domain, same program: a node with n times the executors."""
    out = []
    for line in text.splitlines():
        out.append(line)
        m = re.search(r'\bslot="(\d+)"', line)
        if m and not line.startswith("#"):
            out += [line.replace(m.group(0), f'slot="{100 + k}"')
                    .replace('pid="', f'pid="{k}')
                    for k in range(1, n)]
    return "\n".join(out) + "\n"


PRINCIPAL_FAMILIES = 3  # ramcache_discovery_*: per principal, at most 64


def series_by_part(text):
    """{slot: series}, {domain: series}, the fixed rest and the total,
    less the per-principal series of --all's discovery: those follow the
    users whose processes the agent looked at, on the whole machine, and
    are bounded by its table of them (asserted here)."""
    slots, domains, principals, fixed = {}, {}, {}, 0
    lines = [ln for ln in text.splitlines() if ln and ln[0] != "#"]
    for ln in lines:
        slot = re.search(r'\bslot="(\d+)"', ln)
        dom = re.match(r'ramcache_domain_\w+\{domain="((?:[^"\\]|\\.)*)"', ln)
        who = re.match(r'ramcache_discovery_\w+\{principal="((?:[^"\\]|\\.)*)"', ln)
        if who:
            principals[who.group(1)] = principals.get(who.group(1), 0) + 1
        elif slot:
            slots[slot.group(1)] = slots.get(slot.group(1), 0) + 1
        elif dom:
            domains[dom.group(1)] = domains.get(dom.group(1), 0) + 1
        else:
            fixed += 1
    assert len(principals) <= 64 and \
        set(principals.values()) <= {PRINCIPAL_FAMILIES}, principals
    return slots, domains, fixed, len(lines) - sum(principals.values())


def fleet_cgroups(stack):
    """Where the five executors run: three children of one scratch cgroup
    (one domain), a cgroup of their own, and the machine (None)."""
    shared = stack.enter_context(Memcg(2 << 30, name=(
        f"ramcache-fleet-{os.getpid()}-{int(time.monotonic())}")))
    if shared.version == 2:
        shared._w("cgroup.subtree_control", "+memory")
    # children without a limit of their own: the parent's is theirs
    unlimited = "max" if shared.version == 2 else -1
    where = [stack.enter_context(Memcg(
        unlimited, swap_limit=None,
        name=f"{os.path.basename(shared.path)}/ramcache-{c}"))
        for c in "abc"]
    return where + [stack.enter_context(Memcg(1 << 30)), None]


def executor_copy(stack):
    """A copy of the executor any uid can run: the checkout may sit in a
    directory only root can enter (a clone in /root, as in make
    test-fresh)."""
    bindir = tempfile.mkdtemp(prefix="ramcache-prom-", dir="/var/tmp")
    stack.callback(shutil.rmtree, bindir, True)
    os.chmod(bindir, 0o755)
    executor = shutil.copy(EXECUTOR, bindir)
    os.chmod(executor, 0o755)
    return executor


def start_executor(executor, uid, cg):
    """@executor as @uid in @cg (None: where the runner is)."""
    move = cg.preexec() if cg else None

    def pre():
        if move:
            move()
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return subprocess.Popen(
        [executor, "--entries", "16"], stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=pre)


def settled(agent, port, n):
    """The scrape once @n executors are up, in three domains."""
    text = ""
    end = time.monotonic() + 20
    while time.monotonic() < end:
        assert agent.poll() is None, agent.stderr.read()
        with contextlib.suppress(OSError):
            text = promtext.fetch(f"127.0.0.1:{port}")
            ups = re.findall(r"^ramcache_executor_up\{.*\} (\d)$",
                             text, re.M)
            inside = re.findall(
                r"^ramcache_domain_executors\{.*\} (\d+)$", text,
                re.M)
            if ups.count("1") == n and len(inside) == 3 and \
                    sum(map(int, inside)) == n:
                return text
        time.sleep(0.3)
    raise AssertionError(f"never {n} attached:\n{text}")


def has_page(pid):
    end = time.monotonic() + 10
    while time.monotonic() < end:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if "memfd:ramcache" in os.readlink(
                            f"/proc/{pid}/fd/{fd}"):
                        return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} made no page")


def churn(agent, live, start, where):
    """15 executors come and go, each replacing the oldest."""
    for r in range(15):
        old = live.pop(0)
        # every other time, as on a busy machine: the agent wakes to
        # the old one's exit and the new one's page at once
        busy = r % 2 == 0
        if busy:
            os.kill(agent.pid, signal.SIGSTOP)
        old.kill()
        old.wait()
        start(where[r % len(where)])
        if busy:
            has_page(live[-1].pid)
            os.kill(agent.pid, signal.SIGCONT)
        time.sleep(0.5)


@test
def series_stay_bounded_with_all():
    """--all with five executors in three domains (two scratch cgroups, one
    shared by three, and the machine), then 15 that come and go: the same
    number of series before and after, one slot per live executor."""
    require_root()
    with contextlib.ExitStack() as stack:
        where = fleet_cgroups(stack)
        port = free_port()
        # the executors run as a uid of their own and the agent follows
        # only it: other executors on a shared machine take no slot here
        uid = 61000 + os.getpid() % 1000
        executor = executor_copy(stack)
        agent = subprocess.Popen(
            [AGENT, "--all", "--user", str(uid), "--quiet", "--metrics",
             f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        live = []

        def stop_all():
            for p in live + [agent]:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        stack.callback(stop_all)

        def start(cg):
            live.append(start_executor(executor, uid, cg))

        time.sleep(1)
        for cg in where:
            start(cg)
        slots, domains, fixed, total = series_by_part(
            settled(agent, port, len(where)))
        print(f"# {total} series = {fixed} fixed + {slots} by slot + "
              f"{domains} by domain")
        assert len(set(slots.values())) == 1, slots
        assert len(set(domains.values())) == 1, domains
        assert len(slots) == 5 and len(domains) == 3, (slots, domains)
        churn(agent, live, start, where)
        slots2, domains2, fixed2, total2 = series_by_part(
            settled(agent, port, len(where)))
        print(f"# after 15 came and went: {total2} series, slots "
              f"{sorted(slots2)}")
        assert (total2, fixed2, len(slots2), len(domains2)) == \
            (total, fixed, 5, 3), (slots2, domains2)

_scraped = []


def scrape():
    """scrape_real_agent(), once for the suites that read it."""
    if not _scraped:
        _scraped.append(scrape_real_agent())
    return _scraped[0]


@test
def names_are_served_by_a_real_agent():
    require_root()
    text = scrape()
    served = served_names(text)
    bad = problems(served)
    assert not bad, "names the agent does not serve:\n  " + "\n  ".join(bad)
    d = dashboard()
    domain = next(re.search(r'domain="([^"]*)"', k).group(1)
                  for k in promtext.parse(text)
                  if k.startswith("ramcache_domain_level{"))
    exprs = [substitute(e, {"instance": "node-a:9101",
                            "domain": re.escape(domain)})
             for _, e in queries(d)]
    rc, empty = evaluate_queries(text, exprs)
    assert rc == 0 and not empty, "queries without data:\n  " + \
        "\n  ".join(empty)
    print(f"# {len(served)} names served; {len(exprs)} dashboard queries "
          f"and {sum(map(len, rules()))} rules checked; every query has data")



@test
def dashboard_reads_as_much_for_8_executors_as_for_1():
    """At 1,000 nodes the dashboard must not read every executor's series:
    no query names a per-executor family (one with a slot) itself, only the
    recording rules that sum them per domain and program; and each query
    gives as many series for a node of 8 executors in one domain as for a
    node of 1. The panel query of before the rules (per executor) is the
    control: it must be told apart."""
    require_root()
    text = scrape()
    served = served_names(text)
    per_exec = {n for n, labels in served.items() if "slot" in labels}
    assert "ramcache_executor_rss_bytes" in per_exec, sorted(per_exec)
    d = dashboard()
    direct = [f"{where}: {sorted(promql.names(e) & per_exec)}"
              for where, e in queries(d) if promql.names(e) & per_exec]
    assert not direct, "queries on per-executor series:\n  " + \
        "\n  ".join(direct)
    series = (input_series(text, "node-1:9101") +
              input_series(more_executors(text, 8), "node-8:9101"))
    control = ('sum by (instance, slot, comm) (rate(ramcache_executor_'
               'commands_total{instance=~"$instance",status="evicted"}[1m]))')
    exprs = dict(enumerate(e for _, e in queries(d)), control=control)
    alerts = {}
    for i, e in exprs.items():
        one, eight = (substitute(e, {"instance": n, "domain": ".*"})
                      for n in ("node-1:9101", "node-8:9101"))
        alerts[f"Q{i}"] = f"count({one}) != count({eight})"
    rc, fired = promtool_alerts(series, alerts)
    assert fired == {"Qcontrol"}, (
        "series per query differ between 1 and 8 executors: " +
        ", ".join(str(exprs[a[1:] if a == "Qcontrol" else int(a[1:])])
                  for a in sorted(fired - {"Qcontrol"})) if fired
        else "the control (per executor) was not told apart")
    print(f"# {len(exprs) - 1} queries: as many series for 8 executors "
          f"as for 1; the per-executor control query was caught")


main()
