#!/usr/bin/env python3
"""The frontend extension (comfyui/web): shipped through WEB_DIRECTORY,
type-checked with tsc against @comfyorg/comfyui-frontend-types (installed
by 'make comfyui-web' from the pinned package-lock.json), and its view
logic run under node's test runner. Fails, never skips, without them."""
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import env
from rctest import Skip, main, test

WEB = os.path.join(env.PKG, "web")
PINS = os.path.join(env.HERE, "web")
CHECK = os.path.join(env.OUTPUT, "comfyui-web")


def tsc():
    path = os.path.join(CHECK, "node_modules", ".bin", "tsc")
    types = os.path.join(CHECK, "node_modules", "@comfyorg", "comfyui-frontend-types",
                         "index.d.ts")
    if not (os.access(path, os.X_OK) and os.path.exists(types)):
        raise AssertionError(f"{CHECK} has no typescript or frontend types: run "
                             "'make comfyui-web' (make test does)")
    return path


@test
def package_ships_its_web_directory():
    src = open(os.path.join(env.PKG, "__init__.py")).read()
    assert 'WEB_DIRECTORY = "./web"' in src
    assert sorted(f for f in os.listdir(WEB) if f.endswith(".js")) == \
        ["ramcache.js", "ramcache_view.js"]


@test
def extension_type_checks_against_the_frontend_types():
    """The served layout: /extensions/<package>/*.js importing
    /scripts/app.js and /scripts/api.js, typed by the frontend types."""
    binary = tsc()
    root = os.path.join(CHECK, "check")
    shutil.rmtree(root, ignore_errors=True)
    ext = os.path.join(root, "extensions", "ramcache")
    os.makedirs(ext)
    shutil.copytree(os.path.join(PINS, "scripts"), os.path.join(root, "scripts"))
    shutil.copy(os.path.join(PINS, "tsconfig.json"), root)
    for f in os.listdir(WEB):
        if f.endswith(".js"):
            shutil.copy(os.path.join(WEB, f), ext)
    r = subprocess.run([binary, "-p", os.path.join(root, "tsconfig.json")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout


@test
def view_logic_under_node_test():
    """The shipped ramcache_view.js, copied unchanged next to a package.json
    saying "type": "module" (as ComfyUI's browser loads it: an ES module).
    Node 20.19+ would guess that from the syntax; Debian 12's node 18 reads
    a .js file without it as CommonJS and finds no named exports."""
    with tempfile.TemporaryDirectory(prefix="ramcache-web-") as root:
        os.makedirs(os.path.join(root, "tests", "web"))
        shutil.copytree(WEB, os.path.join(root, "web"))
        with open(os.path.join(root, "web", "package.json"), "w") as f:
            json.dump({"type": "module"}, f)
        test_file = os.path.join(root, "tests", "web", "view.test.mjs")
        shutil.copy(os.path.join(PINS, "view.test.mjs"), test_file)
        r = subprocess.run(["node", "--test", test_file], cwd=root,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
    assert r.returncode == 0, r.stdout
    assert "# fail 0" in r.stdout and "# pass 5" in r.stdout, r.stdout


MiB = 1 << 20
STATUS = {"page": True, "reason": None, "control": "memfd:ramcache", "attached": True,
          "agent_pid": 4242, "level": "ok", "headroom": 3072 * MiB, "target": 0, "eta_s": None,
          "cache": "ram", "entries": 5, "evicted": 0, "evicted_bytes": 0, "rss_drop": 0,
          "settled": 0, "hooks": [], "last": [],
          "comfyui": {"version": "0.3.75", "cache_type": "RAM_PRESSURE",
                      "recommended": "python main.py --cache-ram 1"}}


def serve_site():
    """ComfyUI's layout for the extension: /extensions/ramcache_bpf/*.js,
    /scripts/app.js and api.js (test doubles that record what the extension
    registers and toasts), and /ramcache/status: level ok on the first
    poll, high with 40 s left afterwards."""
    polls = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            path = self.path.split("?")[0]
            body, ctype = None, "text/javascript"
            if path == "/ramcache/status":
                polls.append(path)
                st = dict(STATUS)
                if len(polls) > 1:
                    st.update(level="high", headroom=300 * MiB, target=256 * MiB, eta_s=40.2,
                              evicted=1, evicted_bytes=192 * MiB, rss_drop=190 * MiB,
                              last=[{"id": 3, "label": "1:EmptyImage", "bytes": 192 * MiB,
                                     "rss_drop": 190 * MiB, "reason": "inactive",
                                     "latency_ms": 120.4, "time": time.time() - 30}])
                body, ctype = json.dumps(st).encode(), "application/json"
            elif path == "/index.html":
                body, ctype = open(os.path.join(PINS, "shim", "index.html"), "rb").read(), "text/html"
            elif path in ("/scripts/app.js", "/scripts/api.js"):
                body = open(os.path.join(PINS, "shim", os.path.basename(path)), "rb").read()
            elif path.startswith("/extensions/ramcache_bpf/"):
                f = os.path.join(WEB, os.path.basename(path))
                if os.path.exists(f):
                    body = open(f, "rb").read()
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, polls


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise Skip("chromium is not installed (make deps installs it with the report tools)")


@test
def extension_runs_in_a_browser():
    """Headless Chromium loads the extension as ComfyUI serves it: a badge
    with the level, a sidebar tab, one toast when the level rises."""
    browser = chromium()
    srv, polls = serve_site()
    profile = tempfile.mkdtemp(prefix="ramcache-chromium-")
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/index.html"
        shot = os.path.join(env.OUTPUT, "comfyui-web", "extension.png")
        os.makedirs(os.path.dirname(shot), exist_ok=True)
        base = [browser, "--headless", "--no-sandbox", "--disable-gpu",
                f"--user-data-dir={profile}", "--virtual-time-budget=8000"]
        r = subprocess.run(base + ["--dump-dom", url], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
        m = re.search(r'<pre id="result">(.*?)</pre>', r.stdout, re.S)
        assert m and m.group(1), (r.stdout[-2000:], r.stderr[-2000:])
        got = json.loads(html.unescape(m.group(1)))
        assert got["error"] is None and got["extensions"] == ["ramcache-bpf.status"], got
        assert len(polls) >= 2, polls
        assert got["badge"].startswith("RAM: high · 300.0 MiB free · ~40 s left"), got
        assert got["badgeColor"], got
        assert got["tabs"] == [{"id": "ramcache", "title": "RAM cache", "iconBadge": "high"}], got
        assert [t["summary"] for t in got["toasts"]] == ["RAM pressure high"], got["toasts"]
        assert re.search(r"3\d s ago: 1:EmptyImage 192\.0 MiB \(inactive, 120 ms after the "
                         r"command\)", got["panel"]), got["panel"]
        # a picture for people (build/comfyui-web/extension.png)
        subprocess.run(base + ["--window-size=800,300", f"--screenshot={shot}", url],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    finally:
        srv.shutdown()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
