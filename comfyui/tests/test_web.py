#!/usr/bin/env python3
"""The frontend extension (comfyui/web): shipped through WEB_DIRECTORY,
type-checked with tsc against @comfyorg/comfyui-frontend-types (installed
by 'make comfyui-web' from the pinned package-lock.json), and its view
logic run under node's test runner. Fails, never skips, without them."""
import os
import shutil
import subprocess

import env
from rctest import main, test

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
    r = subprocess.run(["node", "--test", os.path.join(PINS, "view.test.mjs")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout
    assert "# fail 0" in r.stdout and "# pass 4" in r.stdout, r.stdout


if __name__ == "__main__":
    main()
