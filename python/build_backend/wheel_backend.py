"""A PEP 517 build backend for the ramcache package, standard library only:
a wheel (and an editable wheel) of the ramcache/ folder, and an sdist.
Nothing to download, so `pip install ./python` works offline. The name,
version, summary and classifiers come from pyproject.toml."""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = "ramcache"
TAG = "py3-none-any"


def _project():
    """name, version, description, requires-python and classifiers
    (a list) of [project]."""
    text = open(os.path.join(HERE, "pyproject.toml")).read()
    body = text.split("[project]", 1)[1].split("\n[", 1)[0]
    out = {k: v for k, v in re.findall(r'^([\w-]+) = "([^"]*)"', body, re.M)}
    m = re.search(r"^classifiers = \[(.*?)\]", body, re.M | re.S)
    out["classifiers"] = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    return out


def _metadata():
    p = _project()
    readme = open(os.path.join(HERE, "README.md")).read()
    return (f"Metadata-Version: 2.1\nName: {p['name']}\nVersion: {p['version']}\n"
            f"Summary: {p['description']}\nRequires-Python: {p['requires-python']}\n"
            f"License: LGPL-2.1-only OR BSD-2-Clause\n"
            + "".join(f"Classifier: {c}\n" for c in p["classifiers"]) +
            f"Description-Content-Type: text/markdown\n\n{readme}")


def _dist_info():
    p = _project()
    return f"{p['name']}-{p['version']}.dist-info", f"{p['name']}-{p['version']}"


def _files():
    """(path in the wheel, bytes) of the package's modules and its py.typed
    marker (PEP 561: the type hints are part of the package)."""
    root = os.path.join(HERE, PKG)
    for name in sorted(os.listdir(root)):
        if name.endswith(".py") or name == "py.typed":
            with open(os.path.join(root, name), "rb") as f:
                yield f"{PKG}/{name}", f.read()


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{path},sha256={digest.decode()},{len(data)}"


def _write_wheel(directory, files):
    info, base = _dist_info()
    name = f"{base}-{TAG}.whl"
    files = list(files) + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: ramcache wheel_backend\n"
                          f"Root-Is-Purelib: true\nTag: {TAG}\n".encode()),
    ]
    record = [_record_line(p, d) for p, d in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            z.writestr(zipfile.ZipInfo(path, (2020, 1, 1, 0, 0, 0)), data)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_sdist = get_requires_for_build_wheel
get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel holding a .pth that puts this folder on sys.path."""
    return _write_wheel(wheel_directory, [(f"{PKG}.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    _, base = _dist_info()
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "build_backend/wheel_backend.py"] + \
                [p for p, _ in _files()]:
            t.add(os.path.join(HERE, rel), f"{base}/{rel}")
        pkg_info = _metadata().encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
