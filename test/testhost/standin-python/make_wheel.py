#!/usr/bin/env python3
"""Builds a pure-Python wheel from a stand-in package folder, by hand (the format is a zip with a
.dist-info folder), so no build backend has to be downloaded. Deterministic: fixed timestamps.

usage: make_wheel.py SRC_DIR NAME VERSION OUT_DIR [--requires REQ]... [--script NAME=MOD:FUNC]...
                     [--subst KEY=VALUE]...   (replaces @KEY@ in the package's .py files)
"""
import argparse
import base64
import hashlib
import os
import re
import zipfile

EPOCH = (2026, 1, 1, 0, 0, 0)


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("name")
    p.add_argument("version")
    p.add_argument("out")
    p.add_argument("--requires", action="append", default=[])
    p.add_argument("--script", action="append", default=[])
    p.add_argument("--subst", action="append", default=[])
    a = p.parse_args()

    subst = dict(s.split("=", 1) for s in a.subst)
    dist = re.sub(r"[-_.]+", "_", a.name).lower()
    info = f"{dist}-{a.version}.dist-info"
    files = []
    for root, dirs, names in os.walk(a.src):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for n in sorted(names):
            full = os.path.join(root, n)
            data = open(full, "rb").read()
            if n.endswith(".py"):
                text = data.decode()
                for key, value in subst.items():
                    text = text.replace(f"@{key}@", value)
                data = text.encode()
            files.append((os.path.relpath(full, a.src).replace(os.sep, "/"), data))

    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {a.name}",
        f"Version: {a.version}",
        "Summary: gpuhost stand-in for tests (not the real package)",
    ] + [f"Requires-Dist: {r}" for r in a.requires]
    files.append((f"{info}/METADATA", ("\n".join(metadata) + "\n").encode()))
    files.append((f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: gpuhost make_wheel.py\n"
                  b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    if a.script:
        lines = ["[console_scripts]"] + [s.replace("=", " = ", 1) for s in a.script]
        files.append((f"{info}/entry_points.txt", ("\n".join(lines) + "\n").encode()))
    record = [f"{path},{record_hash(data)},{len(data)}" for path, data in files]
    record.append(f"{info}/RECORD,,")
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))

    os.makedirs(a.out, exist_ok=True)
    wheel = os.path.join(a.out, f"{dist}-{a.version}-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            zi = zipfile.ZipInfo(path, EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    print(wheel)


if __name__ == "__main__":
    main()
