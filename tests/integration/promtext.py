#!/usr/bin/env python3
"""Scrape and strictly parse the agent's Prometheus text format (0.0.4).

For integration tests (standard library only):

    import promtext
    m = promtext.scrape("127.0.0.1:9101")      # raises ValueError if bad
    m["ramcache_oom_kills_total"]             # 0.0
    m['ramcache_commands_total{status="evicted"}']
    m.get("ramcache_level", -1)

As a script it checks an exposition on stdin (`promtext.py < metrics.txt`)
or scraped (`promtext.py --scrape 127.0.0.1:9101`) and exits 1 with the
offending line when it does not parse.
"""
import math
import re
import sys
import urllib.request

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"^({NAME})(\{{(?:{LABEL}(?:,{LABEL})*,?)?\}})? (\S+)$")
META = re.compile(rf"^# (HELP|TYPE) ({NAME}) (.*)$")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def _value(s):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", s):
        raise ValueError(f"bad value {s!r}")
    return float(s)


def parse(text):
    """{'name{labels}': value} for every sample; ValueError when malformed."""
    if not text.endswith("\n"):
        raise ValueError("exposition does not end in a newline")
    samples, types, family = {}, {}, None
    buckets = {}  # histogram series -> [last cumulative count, +Inf count]
    for n, line in enumerate(text.splitlines(), 1):
        try:
            if line.startswith("#"):
                m = META.match(line)
                if not m:
                    continue  # a plain comment
                kind, name, rest = m.groups()
                if kind == "TYPE":
                    if rest not in TYPES or name in types:
                        raise ValueError("bad or repeated TYPE")
                    if rest == "counter" and not name.endswith("_total"):
                        raise ValueError("counter without _total")
                    types[name] = rest
                family = name
                continue
            m = SAMPLE.match(line)
            if not m:
                raise ValueError("not a sample")
            name, labels, value = m.group(1), m.group(2) or "", _value(m.group(3))
            series = name + labels
            if series in samples:
                raise ValueError("duplicate series")
            ftype = types.get(family)
            if ftype == "histogram":
                suffix = name[len(family):]
                if not name.startswith(family) or suffix not in (
                        "_bucket", "_sum", "_count"):
                    raise ValueError("sample outside its histogram")
                rest = re.sub(r',?le="[^"]*"', "", labels).replace("{,", "{")
                key = family + ("" if rest == "{}" else rest)
                if suffix == "_bucket":
                    if 'le="' not in labels:
                        raise ValueError("bucket without le")
                    prev = buckets.setdefault(key, [0.0, None])
                    if value < prev[0]:
                        raise ValueError("buckets not cumulative")
                    prev[0] = value
                    if 'le="+Inf"' in labels:
                        prev[1] = value
                elif suffix == "_count":
                    if buckets.get(key, [0, None])[1] != value:
                        raise ValueError("_count differs from +Inf bucket")
            elif name != family or ftype is None:
                raise ValueError("sample without HELP/TYPE")
            samples[series] = value
        except ValueError as e:
            raise ValueError(f"line {n}: {e}: {line!r}") from None
    for key, (_, inf) in buckets.items():
        if inf is None:
            raise ValueError(f"{key}: no +Inf bucket")
    return samples


def fetch(addr, path="/metrics", timeout=5.0):
    """GET http://ADDR:PORT/metrics as text; checks the Content-Type."""
    with urllib.request.urlopen(f"http://{addr}{path}", timeout=timeout) as r:
        ctype = r.headers.get("Content-Type")
        if ctype != CONTENT_TYPE:
            raise ValueError(f"Content-Type {ctype!r}")
        return r.read().decode("utf-8")


def scrape(addr, path="/metrics", timeout=5.0):
    """fetch() and parse()."""
    return parse(fetch(addr, path, timeout))


def main():
    try:
        if len(sys.argv) == 3 and sys.argv[1] == "--scrape":
            samples = scrape(sys.argv[2])
        else:
            samples = parse(sys.stdin.read())
    except (ValueError, OSError) as e:
        print(f"promtext: {e}", file=sys.stderr)
        return 1
    print(f"promtext: {len(samples)} samples, "
          f"{sum(1 for v in samples.values() if math.isnan(v))} NaN")
    return 0


if __name__ == "__main__":
    sys.exit(main())
