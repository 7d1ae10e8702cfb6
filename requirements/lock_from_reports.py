"""Writes a pip hash lock (requirements with --hash=sha256) from `pip install --dry-run --report`
reports: one line per package, the version every report agrees on, and the sha256 of each report's
file (one per Python version and platform), as the package index publishes them. Usage:
  python3 lock_from_reports.py HEADER_FILE REPORT.json... > LOCK.txt
"""
import json
import sys


def main():
    header = open(sys.argv[1], encoding="utf-8").read()
    pins = {}
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        for item in report["install"]:
            name = item["metadata"]["name"].lower().replace("_", "-").replace(".", "-")
            version = item["metadata"]["version"]
            digest = item["download_info"]["archive_info"]["hashes"]["sha256"]
            pinned = pins.setdefault(name, (version, set()))
            if pinned[0] != version:
                raise SystemExit(f"{name}: {pinned[0]} in one report, {version} in {path}")
            pinned[1].add(digest)
    sys.stdout.write(header)
    for name in sorted(pins):
        version, digests = pins[name]
        lines = [f"{name}=={version}"] + [f"    --hash=sha256:{d}" for d in sorted(digests)]
        sys.stdout.write(" \\\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
