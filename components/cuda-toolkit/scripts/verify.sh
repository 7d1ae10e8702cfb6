#!/usr/bin/env bash
# Verify the CUDA toolkit as FlashInfer and PyTorch will use it. Every problem is reported, each
# naming exactly what is missing and the package that provides it; exit 1 if there is any.
#   verify.sh --release 13.0 --root /usr/local/cuda-13.0 --min-driver-branch 580 --proof 1|0
#             --proof-b64 <base64 of proof/curand_cublas.cu>
#             [--pcie-query <nvidia-smi --query-gpu fields>] [--p2p-b64 <base64 of proof/p2p_bandwidth.cu>]
#             [--package <name>]...  [--require <path>:<package>]...  [--venv <serving venv>]
# Prints key=value lines: nvcc_release, nvcc_version, cuda_link, jit_* (step 4b: which nvcc each JIT
# consumer resolves), gpus, proof, proof_venv, packages, fingerprint, and where GPUs exist topology_*
# (step 7).
# The fingerprint = sha256 over "cuda-<release>" and the sorted "<package> <version>" lines
# (same as toolkitFingerprint() in components/cuda-toolkit/fingerprint.ts), first 16 hex digits.
set -euo pipefail

release="" root="" min_driver=580 proof=1 proof_b64="" pcie_query="" p2p_b64="" venv=""
packages=() requires=()
while (($# > 0)); do
  case "$1" in
    --release) release="$2" ;;
    --root) root="$2" ;;
    --min-driver-branch) min_driver="$2" ;;
    --proof) proof="$2" ;;
    --proof-b64) proof_b64="$2" ;;
    --pcie-query) pcie_query="$2" ;;
    --p2p-b64) p2p_b64="$2" ;;
    --package) packages+=("$2") ;;
    --require) requires+=("$2") ;;
    --venv) venv="$2" ;;
    *) echo "verify.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
R="${GPUHOST_ROOT:-}"
problems=()
problem() { problems+=("$1"); }
provider_of() { # the package providing a toolkit-relative or absolute path, from the --require list
  local pair
  for pair in "${requires[@]}"; do
    if [[ "${pair%%:*}" == "$1" || "${pair%%:*}" == "${root}/$1" ]]; then echo "${pair#*:}"; return; fi
  done
  echo "the package that ships $1"
}

# 1. Packages, with versions for the fingerprint.
# One dpkg-query for all of them (it exits 1 when some are unknown, and still prints the rest).
declare -A installed=()
if ((${#packages[@]} > 0)); then
  while read -r name s1 s2 s3 version; do
    [[ "$s1 $s2 $s3" == "install ok installed" ]] && installed["$name"]="$version"
  done < <(dpkg-query -W -f='${Package} ${Status} ${Version}\n' "${packages[@]}" 2>/dev/null || true)
fi
versions=()
for pkg in "${packages[@]}"; do
  if [[ -n "${installed[$pkg]:-}" ]]; then versions+=("$pkg ${installed[$pkg]}")
  else problem "package ${pkg} is not installed (apt-get install ${pkg})"; fi
done

# 2. Files FlashInfer's JIT and the proof program need.
for pair in "${requires[@]}"; do
  path="${pair%%:*}" pkg="${pair#*:}"
  [[ -e "${R}${path}" ]] || problem "missing ${path} (provided by package ${pkg})"
done

# 3. nvcc as FlashInfer finds it through CUDA_HOME (= the pinned toolkit root).
export CUDA_HOME="${R}${root}"
nvcc="${CUDA_HOME}/bin/nvcc"
nvcc_release="" nvcc_version=""
if [[ -x "$nvcc" ]]; then
  line="$("$nvcc" --version | grep 'Cuda compilation tools' || true)"
  nvcc_release="$(sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p' <<<"$line")"
  nvcc_version="${line##* }"
  [[ "$nvcc_release" == "$release" ]] || problem "nvcc at ${root}/bin/nvcc reports release '${nvcc_release}', expected ${release}"
else
  problem "missing ${root}/bin/nvcc (provided by package $(provider_of bin/nvcc))"
fi

# 4. /usr/local/cuda (the last place FlashInfer looks, and what most tools assume).
link="$(readlink -f "${R}/usr/local/cuda" 2>/dev/null || true)"
link="${link#"$R"}"
[[ "$link" == "$root" ]] || problem "/usr/local/cuda points at '${link:-nothing}', not ${root} (update-alternatives --set cuda ${root})"

# 4b. Which nvcc each JIT consumer of the serving venv resolves, each by its own rule (read from the
# wheels sglang pins), and a refusal when two of them would compile with different CUDA releases: a
# JIT that finds a newer nvcc than the driver writes PTX the driver refuses at the first request that
# needs that kernel, after the gate said ready. Pinning CUDA_HOME is not enough (humming-kernels).
major="${release%%.*}"
release_of() { "$1" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p' | head -1; }
site=""
if [[ -n "$venv" ]]; then site="$(compgen -G "${R}${venv}/lib/python3*/site-packages" | head -1 || true)"; fi
no_venv="not built yet (no site-packages under ${venv:-the venv})"
# FlashInfer 0.7.2 (jit/cpp_ext.py get_cuda_path): CUDA_HOME, CUDA_PATH, `which nvcc`, /usr/local/cuda;
# the units set CUDA_HOME to the toolkit root, so its nvcc is step 3's.
jit_lines=("jit_flashinfer=${root}/bin/nvcc ${nvcc_release:-none} (CUDA_HOME)")
# humming-kernels 0.1.12 (humming/utils/cuda.py): of /usr/local/cuda-*, CUDA_HOME and the venv's wheel,
# those of torch's CUDA major; the highest minor among system installs whatever CUDA_HOME says, then
# the wheel.
humming="" humming_release="" humming_rule=""
for dir in "${R}"/usr/local/cuda-"${major}".* "$CUDA_HOME"; do
  [[ -x "$dir/bin/nvcc" ]] || continue
  r="$(release_of "$dir/bin/nvcc")"
  [[ "${r%%.*}" == "$major" ]] || continue
  if [[ -z "$humming_release" ]] || ((${r#*.} > ${humming_release#*.})); then
    humming="${dir#"$R"}/bin/nvcc" humming_release="$r" humming_rule="the highest /usr/local/cuda-${major}.* install, whatever CUDA_HOME says"
  fi
done
if [[ -z "$humming" && -n "$site" && -x "$site/nvidia/cu${major}/bin/nvcc" ]]; then
  humming="${site#"$R"}/nvidia/cu${major}/bin/nvcc" humming_release="$(release_of "$site/nvidia/cu${major}/bin/nvcc")"
  humming_rule="the venv's nvidia-cuda-nvcc wheel: no system CUDA ${major}.x"
fi
jit_lines+=("jit_humming_kernels=${humming:-none} ${humming_release:-none} (${humming_rule:-no CUDA ${major}.x nvcc found})")
# FlashInfer's CuTe-DSL kernels compile with the bundled nvidia-cutlass-dsl stack, not CUDA_HOME.
cute="$no_venv"
if [[ -n "$site" ]]; then
  cute="$(compgen -G "$site/nvidia_cutlass_dsl_libs_cu${major}-*.dist-info" | head -1 || true)"
  cute="${cute##*/}"; cute="${cute%.dist-info}"
  cute="${cute:+nvidia-cutlass-dsl-libs-cu${major} ${cute##*-} (its bundled stack, not CUDA_HOME)}"
fi
jit_lines+=("jit_cute_dsl=${cute:-none}")
# triton compiles its PTX to SASS with its own ptxas: the driver gets SASS, never triton's PTX.
triton="$no_venv"
if [[ -n "$site" ]]; then
  ptxas="$site/triton/backends/nvidia/bin/ptxas"
  triton="none"
  [[ ! -x "$ptxas" ]] || triton="${ptxas#"$R"} $(release_of "$ptxas") (its own ptxas: SASS to the driver, no PTX)"
fi
jit_lines+=("jit_triton=${triton}")
if [[ -n "$nvcc_release" && -n "$humming_release" && "$humming_release" != "$nvcc_release" ]]; then
  problem "two CUDA releases for the JIT: FlashInfer resolves ${root}/bin/nvcc (CUDA ${nvcc_release}, through CUDA_HOME) and humming-kernels resolves ${humming} (CUDA ${humming_release}: ${humming_rule}); remove ${humming%/bin/nvcc} (its cuda-*-${humming_release/./-} packages) so every JIT compiles with CUDA ${release}"
fi

# 5. GPUs: driver branch and compute capabilities (only where nvidia-smi exists).
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  while IFS=', ' read -r driver cap; do
    [[ -n "$driver" ]] || continue
    gpus=$((gpus + 1))
    (( ${driver%%.*} >= min_driver )) || problem "GPU $gpus: driver ${driver} is older than the R${min_driver} branch CUDA ${release} needs"
    major="${cap%%.*}" minor="${cap#*.}"
    if (( major >= 12 )) && [[ "$(printf '%s\n' "$release" 12.9 | sort -V | head -1)" != 12.9 ]]; then
      problem "GPU $gpus: compute capability ${cap} (SM ${major}.x) needs CUDA >= 12.9 for FlashInfer, toolkit is ${release}"
    fi
    if (( major * 10 + minor < 75 )) && [[ "$(printf '%s\n' "$release" 13.0 | sort -V | head -1)" == 13.0 ]]; then
      problem "GPU $gpus: compute capability ${cap} is not supported by CUDA ${release} (Maxwell, Pascal and Volta were dropped in 13.0)"
    fi
  done < <(nvidia-smi --query-gpu=driver_version,compute_cap --format=csv,noheader 2>/dev/null || true)
fi

# 6. Proof by execution: compile and link a curand + cublas program with this toolkit's nvcc, and run
# it where there are GPUs. Without one it is reported as compiled, never as run.
proof_result="skipped"
if [[ "$proof" == 1 && -x "$nvcc" && -n "$proof_b64" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  base64 -d <<<"$proof_b64" >"$work/proof.cu"
  # Compiled inside its folder so messages name proof.cu, as FlashInfer's would name its sources.
  # Bounded: the real nvcc takes seconds, a busy 2-core host tens of them.
  if ! (cd "$work" && timeout 300 "$nvcc" -o proof proof.cu -lcurand -lcublas >compile.log 2>&1); then
    first="$(grep -m1 -E 'error|cannot find' "$work/compile.log" || head -1 "$work/compile.log")"
    header="$(sed -n 's/.*fatal error: \([^:]*\): No such file or directory.*/\1/p' <<<"$first")"
    lib="$(sed -n 's/.*cannot find -l\([^: ]*\).*/\1/p' <<<"$first")"
    if [[ -n "$header" ]]; then
      problem "the proof program does not compile: ${first} (${root}/include/${header} is provided by package $(provider_of "include/${header}"))"
    elif [[ -n "$lib" ]]; then
      problem "the proof program does not link: ${first} (${root}/lib64/lib${lib}.so is provided by package $(provider_of "lib64/lib${lib}.so"))"
    else
      problem "the proof program does not compile: ${first}"
    fi
    proof_result="compile-failed"
  elif [[ "$gpus" -gt 0 || "$(head -c2 "$work/proof")" == "#!" ]]; then
    # Run on real GPUs, or when the simulated host's stand-in nvcc produced a script.
    if out="$(LD_LIBRARY_PATH="${CUDA_HOME}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 120 "$work/proof" 2>&1)"; then
      proof_result="ran: ${out//$'\n'/ }"
    else problem "the proof program compiled but failed when run: ${out//$'\n'/ }"; proof_result="run-failed"; fi
  else
    proof_result="compiled and linked with nvcc ${nvcc_version#V}; not run: no GPU"
  fi
fi

# 6b. The venv's CUDA libraries (a wheel cuda.yaml lets a dependency take from a newer CUDA line, such
# as torch's cuBLAS) run on this driver: minor-version compatibility, shown by running the proof
# program again against the venv's libraries. Only where GPUs exist, and only after the proof ran.
proof_venv="not run: no venv libraries"
venv_lib="${site:+$site/nvidia/cu${major}/lib}"
if [[ -z "$site" ]]; then proof_venv="not run: venv ${no_venv}"
elif [[ ! -d "$venv_lib" ]]; then :
elif [[ "$proof_result" != ran:* ]]; then proof_venv="not run: ${proof_result##*not run: }"
elif out="$(LD_LIBRARY_PATH="${venv_lib}:${CUDA_HOME}/lib64" timeout 120 "$work/proof" 2>&1)"; then
  proof_venv="ran with ${venv_lib#"$R"}: ${out//$'\n'/ }"
else
  problem "the proof program fails against the venv's CUDA libraries (${venv_lib#"$R"}), which this driver must run under minor-version compatibility: ${out//$'\n'/ }"
  proof_venv="run-failed"
fi

# 7. The GPUs' links (issue 28.4), reported, never a reason to fail: each GPU's PCIe link, the
# topology matrix and, with two GPUs or more, the peer-to-peer program compiled with this nvcc and
# run. Multi-line outputs travel base64; components/cuda-toolkit/topology.ts reads them, as it reads
# what `gpuhost doctor` runs on its own machine. The P2P test allocates 256 MiB on each GPU and loads
# every link: it runs only while no process holds GPU memory (a re-verify beside a running service
# does not disturb it).
topology=()
if ((gpus > 0)); then
  [[ -z "$pcie_query" ]] || topology+=("topology_pcie=$(timeout 60 nvidia-smi --query-gpu="$pcie_query" --format=csv,noheader 2>&1 | base64 -w0 || true)")
  topology+=("topology_matrix=$(timeout 60 nvidia-smi topo -m 2>&1 | base64 -w0 || true)")
fi
if ((gpus > 1)) && [[ -n "$p2p_b64" ]]; then
  holders="$(timeout 60 nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c . || true)"
  if ((holders > 0)); then
    topology+=("topology_p2p_skipped=${holders} process(es) hold GPU memory (a running service): the test would disturb them")
  elif [[ ! -x "$nvcc" ]]; then
    topology+=("topology_p2p_failed=not compiled: no nvcc")
  else
    p2p_work="$(mktemp -d)"
    trap 'rm -rf "${work:-}" "$p2p_work"' EXIT
    base64 -d <<<"$p2p_b64" >"$p2p_work/p2p.cu"
    if ! (cd "$p2p_work" && timeout 300 "$nvcc" -o p2p p2p.cu >compile.log 2>&1); then
      topology+=("topology_p2p_failed=did not compile: $(grep -m1 -E 'error' "$p2p_work/compile.log" || head -1 "$p2p_work/compile.log")")
    elif out="$(LD_LIBRARY_PATH="${CUDA_HOME}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 300 "$p2p_work/p2p" 2>&1)"; then
      topology+=("topology_p2p=$(base64 -w0 <<<"$out")")
    else
      topology+=("topology_p2p_failed=failed when run: $(grep -m1 -E 'error' <<<"$out" || head -1 <<<"$out")")
    fi
    rm -rf "$p2p_work"
  fi
fi

sorted="$(printf '%s\n' "${versions[@]}" | LC_ALL=C sort)"
fingerprint="$(printf 'cuda-%s\n%s\n' "$release" "$sorted" | sha256sum | cut -c1-16)"
echo "nvcc_release=${nvcc_release}"
echo "nvcc_version=${nvcc_version}"
echo "cuda_link=${link}"
printf '%s\n' "${jit_lines[@]}"
echo "gpus=${gpus}"
echo "proof=${proof_result}"
echo "proof_venv=${proof_venv}"
echo "packages=$(tr '\n' ',' <<<"$sorted" | sed 's/,$//')"
echo "fingerprint=${fingerprint}"
((${#topology[@]} == 0)) || printf '%s\n' "${topology[@]}"

if ((${#problems[@]} > 0)); then
  echo "CUDA ${release} toolkit verification failed (${#problems[@]} problem(s)):" >&2
  printf '  - %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "verified=yes"
