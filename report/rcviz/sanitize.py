"""The one text sanitiser of the project, for Python: whatever named a
process, wrote an entry label or crafted a record must not be able to move
the operator's cursor, retitle the terminal or reorder what is shown.

The rule is the agent's (user/emit/sanitize.c); tests/fixtures/sanitize.txt
states it and holds the vectors both implementations are tested against.
Text arrives here as str: a byte that was not UTF-8 is a lone surrogate
U+DC80-U+DCFF (Python's surrogateescape) and is written as that byte.
"""


def _unsafe(c):
    return (c < 0x20 or 0x7f <= c <= 0x9f or 0x202a <= c <= 0x202e
            or 0x2066 <= c <= 0x2069 or 0xd800 <= c <= 0xdfff)


def _hex(bs):
    return "".join(f"\\x{b:02x}" for b in bs)


def text(s):
    """@s with every unsafe character written as \\xHH per UTF-8 byte and
    a backslash as \\\\; anything that is not a str is str() first."""
    if not isinstance(s, str):
        s = str(s)
    out = []
    for ch in s:
        c = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif 0xdc80 <= c <= 0xdcff:
            out.append(_hex([c - 0xdc00]))
        elif _unsafe(c):
            out.append(_hex(ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return "".join(out)


def of_bytes(b):
    """text() of raw bytes as the agent would see them."""
    return text(b.decode("utf-8", "surrogateescape"))


def deep(v):
    """Every string in a parsed JSON value (keys too) through text()."""
    if isinstance(v, str):
        return text(v)
    if isinstance(v, dict):
        return {deep(k): deep(x) for k, x in v.items()}
    if isinstance(v, list):
        return [deep(x) for x in v]
    return v
