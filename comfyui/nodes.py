"""The "RAMCache BPF status" node: passes its input through and shows
whether the agent is attached, the pressure level and the last evictions."""
import time

from .bridge import BRIDGE


class AnyType(str):
    """A socket type equal to every other, so any link validates."""

    def __ne__(self, other):
        return False


ANY = AnyType("*")


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def status_text(st, now=None):
    now = time.time() if now is None else now
    if not st["library"]:
        return f"ramcache: off ({st['reason'] or 'no executor yet'})"
    lines = [
        "agent: " + ("attached" if st["attached"] else "not attached"),
        f"pressure: {st['level']}  headroom {_size(st['headroom'])}"
        f"  target {_size(st['target'])}",
        f"cache: {st['cache']}  evicted {st['evicted']} ({_size(st['freed'])})",
    ]
    for ev in reversed(st["last"]):
        lines.append(f"  {now - ev['time']:.0f}s ago: entry {ev['id']} "
                     f"{_size(ev['bytes'])} ({ev['reason']})")
    return "\n".join(lines)


class RAMCacheStatus:
    CATEGORY = "utils"
    FUNCTION = "run"
    OUTPUT_NODE = True
    RETURN_TYPES = (ANY,)
    RETURN_NAMES = ("value",)
    DESCRIPTION = "Shows the ramcache-bpf agent's view; passes its input through."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": (ANY, {})}}

    @classmethod
    def IS_CHANGED(cls, **kwargs):
        return float("nan")  # the status changes without the inputs changing

    def run(self, value):
        text = status_text(BRIDGE.status())
        return {"ui": {"text": [text]}, "result": (value,)}


NODE_CLASS_MAPPINGS = {"RAMCacheBPFStatus": RAMCacheStatus}
NODE_DISPLAY_NAME_MAPPINGS = {"RAMCacheBPFStatus": "RAMCache BPF status"}
