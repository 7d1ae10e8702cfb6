"""Writes a pip hash lock (requirements with --hash=sha256) from `pip install --dry-run --report`
reports: one line per package, the version every report agrees on, and the sha256 of each report's
file (one per Python version and platform), as the package index publishes them. Usage:
  python3 lock_from_reports.py constraints CUDA_YAML > CONSTRAINTS.txt
  python3 lock_from_reports.py lock HEADER_FILE CUDA_YAML REPORT.json... > LOCK.txt

The CUDA release comes from the toolkit description (cuda.yaml `serving`), never from here: every
wheel it lists under cudaWheels.releaseWheels is constrained to that release line, each one under
newerWheels to the line it declares, and the lock's header says which and why.
"""
import json
import sys
import textwrap

import yaml  # PyYAML: generate-lock.sh runs on a developer's machine, not on a host


def normalize(name):
    return name.lower().replace("_", "-").replace(".", "-")


def cuda_lines(cuda_yaml):
    """(serving release, {wheel: line}, {wheel: exception}) from the toolkit description."""
    with open(cuda_yaml, encoding="utf-8") as f:
        description = yaml.safe_load(f)
    release = description["serving"]
    wheels = description["cudaWheels"]
    newer = wheels.get("newerWheels") or {}
    lines = {name: release for name in wheels["releaseWheels"]}
    lines.update({name: n["line"] for name, n in newer.items()})
    return release, lines, newer


def constraints(cuda_yaml):
    _, lines, _ = cuda_lines(cuda_yaml)
    for name in sorted(lines):
        sys.stdout.write(f"{name}=={lines[name]}.*\n")


def cuda_header(cuda_yaml):
    release, _, newer = cuda_lines(cuda_yaml)
    out = [
        f"# One CUDA release: every NVIDIA wheel versioned by the CUDA release is held to the {release} line,",
        "# the toolkit's release (components/cuda-catalog/cuda.yaml `serving`; the wheels: its cudaWheels).",
    ]
    if not newer:
        out.append("# No dependency requires a wheel of a newer CUDA release.")
    for name in sorted(newer):
        n = newer[name]
        said = f"Newer by requirement: {name} {n['line']}.x, forced by {n['requiredBy']}."
        out += textwrap.wrap(said, 100, initial_indent="# ", subsequent_indent="#   ", break_on_hyphens=False)
        said = f"Safe on the host's driver: {n['safe']}"
        out += textwrap.wrap(said, 100, initial_indent="#   ", subsequent_indent="#   ", break_on_hyphens=False)
    return "\n".join(out) + "\n#\n"


def lock(header_file, cuda_yaml, reports):
    header = open(header_file, encoding="utf-8").read()
    pins = {}
    for path in reports:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        for item in report["install"]:
            name = normalize(item["metadata"]["name"])
            version = item["metadata"]["version"]
            digest = item["download_info"]["archive_info"]["hashes"]["sha256"]
            pinned = pins.setdefault(name, (version, set()))
            if pinned[0] != version:
                raise SystemExit(f"{name}: {pinned[0]} in one report, {version} in {path}")
            pinned[1].add(digest)
    sys.stdout.write(header + cuda_header(cuda_yaml))
    for name in sorted(pins):
        version, digests = pins[name]
        lines = [f"{name}=={version}"] + [f"    --hash=sha256:{d}" for d in sorted(digests)]
        sys.stdout.write(" \\\n".join(lines) + "\n")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "constraints":
        constraints(sys.argv[2])
    elif len(sys.argv) >= 5 and sys.argv[1] == "lock":
        lock(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
