"""The metric and label names a PromQL expression uses (standard library).

    import promql
    promql.selectors('sum by (le) (rate(a_bucket{x="1"}[5m])) / b')
    # [('a_bucket', {'x'}), ('b', set())]

Enough of PromQL for the queries of contrib/prometheus and contrib/grafana:
strings, label matchers, ranges and subqueries, grouping clauses
(by/without/on/ignoring/group_left/group_right), functions, aggregations,
keywords, numbers and durations, and Grafana's $variables. A name that is
neither a function nor a keyword is a metric name; anything it cannot read
raises ValueError rather than being skipped.
"""
import re

KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on",
            "ignoring", "group_left", "group_right", "inf", "nan", "atan2",
            "start", "end"}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar",
                "count", "count_values", "bottomk", "topk", "quantile",
                "limitk", "limit_ratio"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*)
  | (?P<duration>\d+(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*)
  | (?P<number>0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}\[\],:@])
""", re.X)


def tokens(expr):
    pos, out = 0, []
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m:
            raise ValueError(f"cannot read {expr[pos:pos + 20]!r} in {expr!r}")
        pos = m.end()
        if m.lastgroup != "space":
            out.append((m.lastgroup, m.group()))
    return out


def _matchers(toks, i):
    """Label names in a {...} starting at toks[i]; returns (names, next i)."""
    names = set()
    assert toks[i][1] == "{"
    i += 1
    while i < len(toks) and toks[i][1] != "}":
        kind, text = toks[i]
        if kind == "name" and i + 1 < len(toks) and toks[i + 1][1] in (
                "=", "!=", "=~", "!~"):
            names.add(text)
        i += 1
    if i >= len(toks):
        raise ValueError("unclosed {")
    return names, i + 1


def selectors(expr):
    """[(metric name, {label names matched})] in the order they appear.
    {__name__="x"} selectors give ('x', labels)."""
    toks, out, i = tokens(expr), [], 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if kind == "name" and text.lower() in GROUPING and nxt == "(":
            i += 2  # a label list, not metric names
            while i < len(toks) and toks[i][1] != ")":
                i += 1
            i += 1
            continue
        if kind == "name" and (nxt == "(" or text in AGGREGATIONS):
            i += 1  # a function or an aggregation (by/without may follow)
            continue
        if kind == "name" and text.lower() in KEYWORDS:
            i += 1
            continue
        if kind == "name":
            labels = set()
            i += 1
            if i < len(toks) and toks[i][1] == "{":
                labels, i = _matchers(toks, i)
            out.append((text, labels))
            continue
        if text == "{":  # a selector without a name: {__name__="x"}
            start = i
            labels, i = _matchers(toks, i)
            name = re.search(r'__name__\s*=\s*"([^"]+)"',
                             " ".join(t for _, t in toks[start:i]))
            if not name:
                raise ValueError(f"selector without a metric name: {expr!r}")
            out.append((name.group(1), labels - {"__name__"}))
            continue
        if text == "[":  # a range or subquery: durations and variables
            while i < len(toks) and toks[i][1] != "]":
                i += 1
        i += 1
    return out


def grouping(expr):
    """Label names in by/without/on/ignoring/group_left/group_right lists."""
    toks, out = tokens(expr), set()
    for i, (kind, text) in enumerate(toks[:-1]):
        if kind == "name" and text.lower() in GROUPING and \
                toks[i + 1][1] == "(":
            j = i + 2
            while j < len(toks) and toks[j][1] != ")":
                if toks[j][0] == "name":
                    out.add(toks[j][1])
                j += 1
    return out


def names(expr):
    return {n for n, _ in selectors(expr)}


def unknown(expr, served, extra=()):
    """Problems with @expr against @served ({name: {label names}}): metric
    names not served and label names a served metric does not carry.
    @extra: names that exist without being served (recording rules, up),
    as {name: {labels}} or a set (any labels)."""
    extra = extra if isinstance(extra, dict) else {n: None for n in extra}
    bad = []
    for name, labels in selectors(expr):
        if name in served:
            have = served[name]
        elif name in extra:
            have = extra[name]
        else:
            bad.append(f"metric {name} is not served")
            continue
        if have is None:
            continue
        for label in sorted(labels - have):
            bad.append(f"{name} has no label {label}")
    return bad
