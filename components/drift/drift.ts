// Observed vs expected: the list of fields that drifted, each with a repair a person can run.
// Pure functions (no I/O), shared by the provider's read/diff/create/update and by the tests.
import { foreignCudaWheel, normalizeWheelName } from "../cuda-catalog/catalog";
import { unitApiKeyField, VENV_WHEELS_FIELD } from "./repair";
import type { Baseline, Drift, ExpectedState, ObservedState } from "./schema";

/** Baseline recorded at create: what no provisioning step states up front. */
export function baselineOf(observed: ObservedState): Baseline {
  return {
    files: { ...observed.files },
    driverVersion: observed.gpu.driverVersion,
    computeCapabilities: [...observed.gpu.computeCapabilities],
  };
}

const reinstall = (pkg: string): string => `apt-get install --reinstall ${pkg}`;

/** Every field in which OBSERVED differs from EXPECTED (and BASELINE), in a stable order. */
export function findDrift(expected: ExpectedState, baseline: Baseline, observed: ObservedState): Drift[] {
  return [
    ...nvccDrift(expected, observed),
    ...cudaLinkDrift(expected, observed),
    ...packageDrift(expected, observed),
    ...fileDrift(expected, baseline, observed),
    ...gpuDrift(baseline, observed),
    ...jitDrift(expected, observed),
    ...venvWheelDrift(expected, observed),
    ...unitDrift(expected, observed),
    ...apiKeyDrift(expected, observed),
  ];
}

/** nvcc as FlashInfer finds it: CUDA_HOME first, then `which nvcc` with the units' PATH. */
function nvccDrift(expected: ExpectedState, observed: ObservedState): Drift[] {
  const drift: Drift[] = [];
  const meta =
    expected.packages[`cuda-toolkit-${expected.packageSuffix}`] !== undefined
      ? `cuda-toolkit-${expected.packageSuffix}`
      : undefined;
  const toolkitRepair = meta ? reinstall(meta) : "pulumi up (re-run the toolkit's install step)";
  if (observed.cudaHome.version !== expected.toolkitVersion) {
    drift.push({
      field: "nvcc.cudaHome.version",
      expected: expected.toolkitVersion,
      found: observed.cudaHome.version,
      repair:
        observed.cudaHome.nvcc === null
          ? `${expected.cudaHome}/bin/nvcc is missing: ${reinstall(`cuda-nvcc-${expected.packageSuffix}`)}`
          : `${expected.cudaHome}/bin/nvcc reports ${observed.cudaHome.version ?? "no version"}: ${toolkitRepair}`,
    });
  }
  if (expected.unitPath !== undefined && observed.pathNvcc.version !== expected.toolkitVersion) {
    drift.push({
      field: "nvcc.path.version",
      expected: expected.toolkitVersion,
      found: observed.pathNvcc.version,
      repair:
        observed.pathNvcc.nvcc === null
          ? `no nvcc on the units' PATH: put ${expected.cudaHome}/bin on it (pulumi up re-renders the units)`
          : `${observed.pathNvcc.nvcc} comes first on the units' PATH: put ${expected.cudaHome}/bin before it`,
    });
  }
  return drift;
}

function cudaLinkDrift(expected: ExpectedState, observed: ObservedState): Drift[] {
  if (observed.cudaLink === expected.cudaLink) return [];
  return [
    {
      field: "cudaLink",
      expected: expected.cudaLink,
      found: observed.cudaLink,
      repair: `update-alternatives --set cuda ${expected.cudaLink}`,
    },
  ];
}

function packageDrift(expected: ExpectedState, observed: ObservedState): Drift[] {
  const drift: Drift[] = [];
  for (const [pkg, version] of Object.entries(expected.packages).sort(([a], [b]) => a.localeCompare(b))) {
    const found = observed.packages[pkg];
    if (found === undefined) {
      drift.push({ field: `packages.${pkg}`, expected: version || "installed", found: null, repair: reinstall(pkg) });
    } else if (version !== "" && found !== version) {
      drift.push({
        field: `packages.${pkg}`,
        expected: version,
        found,
        repair: `apt-get install --allow-downgrades ${pkg}=${version}`,
      });
    }
  }
  return drift;
}

/** A file is judged against the content recorded at create, so its package is what repairs it. */
function fileDrift(expected: ExpectedState, baseline: Baseline, observed: ObservedState): Drift[] {
  const drift: Drift[] = [];
  for (const [file, owner] of Object.entries(expected.files).sort(([a], [b]) => a.localeCompare(b))) {
    const found = observed.files[file] ?? null;
    const recorded = baseline.files[file] ?? null;
    if (found === null) {
      drift.push({ field: `files.${file}`, expected: recorded ?? "present", found: null, repair: reinstall(owner) });
    } else if (recorded !== null && found !== recorded) {
      drift.push({
        field: `files.${file}`,
        expected: recorded,
        found,
        repair: `${reinstall(owner)} (the file's content changed)`,
      });
    }
  }
  return drift;
}

/** The driver and the GPUs are no provisioning step's to state: they are judged against the baseline. */
function gpuDrift(baseline: Baseline, observed: ObservedState): Drift[] {
  const drift: Drift[] = [];
  if (baseline.driverVersion !== null && observed.gpu.driverVersion !== baseline.driverVersion) {
    drift.push({
      field: "gpu.driverVersion",
      expected: baseline.driverVersion,
      found: observed.gpu.driverVersion,
      repair:
        "the NVIDIA driver changed: reinstall the recorded driver, or accept it with `pulumi up --replace <ToolkitState urn>`",
    });
  }
  const caps = (c: string[]): string => c.join(",");
  if (
    baseline.computeCapabilities.length > 0 &&
    caps(observed.gpu.computeCapabilities) !== caps(baseline.computeCapabilities)
  ) {
    drift.push({
      field: "gpu.computeCapabilities",
      expected: caps(baseline.computeCapabilities),
      found: caps(observed.gpu.computeCapabilities) || null,
      repair:
        "the GPUs changed (or one is not visible): check `nvidia-smi`, or accept with `pulumi up --replace <ToolkitState urn>`",
    });
  }
  return drift;
}

function jitDrift(expected: ExpectedState, observed: ObservedState): Drift[] {
  if (expected.jitBase === undefined || expected.jitKey === undefined) return [];
  const keys = [...observed.jit.keys].sort();
  if (keys.length === 1 && keys[0] === expected.jitKey) return [];
  const stale = keys.filter((k) => k !== expected.jitKey);
  const missing = !keys.includes(expected.jitKey);
  return [
    {
      field: "jit.key",
      expected: expected.jitKey,
      found: keys.length > 0 ? keys.join(",") : null,
      repair: [
        stale.length > 0
          ? `remove stale JIT caches: rm -rf ${stale.map((k) => `${expected.jitBase}/${k}`).join(" ")}`
          : "",
        missing ? `re-create ${expected.jitBase}/${expected.jitKey} (pulumi up)` : "",
      ]
        .filter(Boolean)
        .join("; "),
    },
  ];
}

/** Each unit's file, then whether it is enabled, then whether it runs, in the units' name order. */
function unitDrift(expected: ExpectedState, observed: ObservedState): Drift[] {
  return Object.entries(expected.units)
    .sort(([a], [b]) => a.localeCompare(b))
    .flatMap(([unitFile, want]) => oneUnitDrift(unitFile, want, observed.units[unitFile]));
}

function oneUnitDrift(
  unitFile: string,
  want: ExpectedState["units"][string],
  seen: ObservedState["units"][string] | undefined,
): Drift[] {
  const drift: Drift[] = [];
  const name = unitFile.slice(unitFile.lastIndexOf("/") + 1);
  const foundHash = seen?.sha256 ?? null;
  if (foundHash !== want.sha256) {
    drift.push({
      field: `units.${unitFile}.sha256`,
      expected: want.sha256,
      found: foundHash,
      repair: `${foundHash === null ? "the unit file is missing" : "the unit file was edited on the host"}: restore the rendered unit (pulumi up), then systemctl daemon-reload && systemctl restart ${name}`,
    });
  }
  if (want.enabled !== undefined && seen?.enabled !== want.enabled) {
    drift.push({
      field: `units.${unitFile}.enabled`,
      expected: want.enabled,
      found: seen?.enabled ?? null,
      repair: want.enabled === "enabled" ? `systemctl enable ${name}` : `systemctl disable ${name}`,
    });
  }
  if (want.active !== undefined && seen?.active !== want.active) {
    drift.push({
      field: `units.${unitFile}.active`,
      expected: want.active,
      found: seen?.active ?? null,
      repair:
        want.active === "active"
          ? `systemctl start ${name} (journalctl -u ${name} if it does not stay up)`
          : // A stop leaves a failed unit failed: only reset-failed makes it inactive.
            seen?.active === "failed"
            ? `journalctl -u ${name} says why it failed; systemctl reset-failed ${name} clears it`
            : `systemctl stop ${name}`,
    });
  }
  return drift;
}

/** The key file on disk, then the key the running service started with. */
function apiKeyDrift(expected: ExpectedState, observed: ObservedState): Drift[] {
  const drift: Drift[] = [];
  if (observed.apiKeyFile !== undefined && observed.apiKeyFile !== "match") {
    drift.push({
      field: "apiKeyFile",
      expected: "the configured API key",
      found: observed.apiKeyFile === "missing" ? null : "another content",
      repair: "pulumi up rewrites it from the apiKey secret (api-key-file.sh)",
    });
  }
  const running = Object.entries(expected.units).find(([, u]) => u.active === "active")?.[0];
  if (running !== undefined && observed.apiKeyRunning === "differs") {
    const name = running.slice(running.lastIndexOf("/") + 1);
    drift.push({
      field: unitApiKeyField(running),
      expected: "the configured API key",
      found: "another key (the service started from an earlier key file: clients get 401)",
      repair: `pulumi up rewrites the key file, restarts ${name} and verifies it again (by hand: systemctl restart ${name})`,
    });
  }
  return drift;
}

/**
 * A wheel of another CUDA release in the serving venv (a `pip install` by hand, an unbounded
 * requirement): named, with the release it is of, judged by the same rule as the lock
 * (foreignCudaWheel, from the toolkit description).
 */
export function venvWheelDrift(expected: ExpectedState, observed: ObservedState): Drift[] {
  if (expected.venvPath === undefined) return [];
  return Object.entries(observed.venvWheels)
    .sort(([a], [b]) => a.localeCompare(b))
    .flatMap(([name, version]) => {
      const why = foreignCudaWheel(name, version, expected.toolkitVersion);
      if (why === undefined) return [];
      const wheel = normalizeWheelName(name);
      return [
        {
          field: `${VENV_WHEELS_FIELD}${wheel}`,
          expected: `CUDA ${expected.toolkitVersion}'s wheels (the hash lock)`,
          found: `${wheel} ${version}`,
          repair: `${why} in ${expected.venvPath}: pulumi up puts the locked wheels back (by hand: ${expected.venvPath}/bin/pip uninstall -y ${wheel}, then install the hash lock again)`,
        },
      ];
    });
}
