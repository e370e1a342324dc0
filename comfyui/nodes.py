"""The "RAMCache BPF status" node: passes its input through and shows what
the agent reported when the node ran. It has no IS_CHANGED: its cache key is
its inputs' key, so the nodes after it keep their cache keys and stay
cached (a changing IS_CHANGED re-ran everything downstream on every prompt).
The live status is the frontend badge and /ramcache/status."""
import time

from .bridge import BRIDGE


class AnyType(str):
    """A socket type equal to every other, so any link validates."""

    def __ne__(self, other):
        return False


ANY = AnyType("*")


def size_text(n):
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def status_text(st, now=None):
    now = time.time() if now is None else now
    stamp = time.strftime("%H:%M:%S", time.localtime(now))
    if not st["page"]:
        return f"ramcache ({stamp}): off ({st['reason'] or 'no executor yet'})"
    if not st["attached"]:
        lines = [f"ramcache ({stamp}): agent not attached "
                 f"(sudo ramcache-bpf --pid <ComfyUI pid>)"]
    else:
        eta = st.get("eta_s")
        lines = [f"ramcache ({stamp}): agent attached, pressure {st['level']}",
                 f"headroom {size_text(st['headroom'])}, wants {size_text(st['target'])} "
                 f"freed" + (f", headroom gone in ~{eta:.0f} s" if eta is not None else "")]
    lines.append(f"cache: {st['cache']}, {st['entries']} entries published; "
                 f"evicted {st['evicted']} ({size_text(st['evicted_bytes'])} of entries, "
                 f"RSS dropped {size_text(st['rss_drop'])} after gc)")
    for ev in reversed(st["last"]):
        lat = f", {ev['latency_ms']:.0f} ms after the command" \
            if ev.get("latency_ms") is not None else ""
        lines.append(f"  {now - ev['time']:.0f}s ago: {ev['label']} "
                     f"{size_text(ev['bytes'])} ({ev['reason']}{lat})")
    return "\n".join(lines)


class RAMCacheStatus:
    CATEGORY = "utils"
    FUNCTION = "run"
    OUTPUT_NODE = True
    RETURN_TYPES = (ANY,)
    RETURN_NAMES = ("value",)
    DESCRIPTION = ("Shows the ramcache-bpf agent's view when it runs and passes "
                   "its input through; never changes the cache keys after it.")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": (ANY, {})}}

    def run(self, value):
        text = status_text(BRIDGE.status())
        return {"ui": {"text": [text]}, "result": (value,)}


NODE_CLASS_MAPPINGS = {"RAMCacheBPFStatus": RAMCacheStatus}
NODE_DISPLAY_NAME_MAPPINGS = {"RAMCacheBPFStatus": "RAMCache BPF status"}
