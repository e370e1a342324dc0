"""Headless Chromium driven through the DevTools protocol over a pipe
(--remote-debugging-pipe: NUL-terminated JSON on fds 3 and 4), stdlib only.

    with Browser() as b:
        shot = b.screenshot("file:///tmp/report.html", "/tmp/shot.png")
        b.problems  # console errors, exceptions, failed loads

Used by tests/integration/test_report.py and to take the README's
screenshots.
"""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--disable-sync", "--hide-scrollbars",
         "--remote-debugging-pipe"]


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class Browser:
    def __init__(self, width=1280, height=900):
        self.exe = chromium_path()
        if not self.exe:
            raise RuntimeError("chromium is not installed (make deps)")
        self.profile = tempfile.mkdtemp(prefix="ramcache-test-chromium-")
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()

        def fds():
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen(
            [self.exe, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=fds,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events = []
        self.problems = []
        self.session = None

    # ---------------------------------------------------------- protocol
    def _send(self, method, params=None, session=True):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        return self._id

    def _recv(self, timeout):
        end = time.monotonic() + timeout
        import select
        while b"\0" not in self._buf:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            r, _, _ = select.select([self._r], [], [], left)
            if r:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed its pipe: "
                                       + self.stderr_tail())
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, timeout=30, session=True):
        mid = self._send(method, params, session)
        while True:
            msg = self._recv(timeout)
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def _event(self, msg):
        m = msg.get("method")
        if not m:
            return
        self.events.append(msg)
        p = msg.get("params", {})
        if m == "Runtime.exceptionThrown":
            self.problems.append("exception: " + json.dumps(
                p.get("exceptionDetails", {}))[:500])
        elif m == "Runtime.consoleAPICalled" and p.get("type") in (
                "error", "assert", "warning"):
            self.problems.append(f"console.{p['type']}: " + json.dumps(
                p.get("args", []))[:500])
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in (
                "error", "warning"):
            e = p["entry"]
            self.problems.append(f"log {e.get('level')} ({e.get('source')})"
                                 f": {e.get('text')} {e.get('url', '')}")
        elif m == "Network.loadingFailed":
            self.problems.append(f"load failed: {p.get('errorText')}")
        elif m == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            if not url.startswith(("file:", "data:", "about:")):
                self.problems.append(f"network request: {url}")

    def wait_event(self, method, timeout=30):
        for e in self.events:
            if e["method"] == method:
                return e
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            msg = self._recv(end - time.monotonic())
            if "id" not in msg:
                self._event(msg)
                if msg.get("method") == method:
                    return msg
        raise TimeoutError(method)

    # ---------------------------------------------------------- use
    def open(self):
        targets = self.call("Target.getTargets", session=False)
        page = [t for t in targets["targetInfos"] if t["type"] == "page"]
        if page:
            tid = page[0]["targetId"]
        else:
            tid = self.call("Target.createTarget", {"url": "about:blank"},
                            session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {
            "targetId": tid, "flatten": True}, session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def screenshot(self, url, png, width=None, full_page=True):
        """Loads url, waits for it, writes a PNG of the whole page; returns
        the page's (width, height) in CSS pixels."""
        if not self.session:
            self.open()
        self.events = [e for e in self.events
                       if e["method"] != "Page.loadEventFired"]
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")
        m = self.call("Page.getLayoutMetrics")
        size = m.get("cssContentSize") or m["contentSize"]
        w = int(width or size["width"])
        h = int(size["height"])
        params = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            params["clip"] = {"x": 0, "y": 0, "width": w, "height": h,
                              "scale": 1}
        data = self.call("Page.captureScreenshot", params)["data"]
        with open(png, "wb") as f:
            f.write(base64.b64decode(data))
        # late console messages
        time.sleep(0.2)
        self.call("Runtime.evaluate", {"expression": "1"})
        return w, h

    def evaluate(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr,
                                           "returnByValue": True})
        return r.get("result", {}).get("value")

    def stderr_tail(self):
        return ""

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    self.call("Browser.close", session=False, timeout=5)
                except Exception:
                    pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        finally:
            for fd in (self._r, self._w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24],
                                                              "big")
