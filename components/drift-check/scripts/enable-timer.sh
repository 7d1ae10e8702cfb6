#!/usr/bin/env bash
# Makes the drift check's timer run: creates the metrics folder (owned by the check's user when this
# makes it), enables the timer and (re)starts it, so a changed schedule counts from now. The units
# themselves are written by services/scripts/install-unit.sh; this runs again only when one of them
# changed (STAMP is their hash), so a `pulumi up` that changes nothing restarts nothing.
# It also writes gpuhost_drift_check_installed_timestamp_seconds{stack} into the metrics folder: a
# series that exists before the first check ends, so a check that never writes its own file (its
# service fails before the CLI runs) is an alert (GpuhostDriftCheckNeverRan), not an absent series.
# Usage: enable-timer.sh TIMER_UNIT TEXTFILE_DIR USER STAMP STACK
set -euo pipefail

timer="$1"
textfile_dir="$2"
user="$3"
stamp="$4"
stack="$5"
root="${GPUHOST_ROOT:-}"

if [[ ! "$timer" =~ ^gpuhost-drift-check-[A-Za-z0-9_.-]+\.timer$ ]]; then
  echo "enable-timer: refusing unit name '$timer'" >&2
  exit 2
fi
if [[ ! "$textfile_dir" == /* ]]; then
  echo "enable-timer: the textfile folder must be absolute, got '$textfile_dir'" >&2
  exit 2
fi
if [[ ! "$user" =~ ^[a-z_][a-z0-9_-]{0,31}$ ]]; then
  echo "enable-timer: refusing user '$user'" >&2
  exit 2
fi
if [[ ! "$stamp" =~ ^[0-9a-f]{64}$ ]]; then
  echo "enable-timer: refusing stamp '$stamp'" >&2
  exit 2
fi
# A Pulumi stack name (org/project/stack): nothing a metric label or a file name would need escaped.
if [[ ! "$stack" =~ ^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}$ ]]; then
  echo "enable-timer: refusing stack name '$stack'" >&2
  exit 2
fi
if [[ -z "$root" && $EUID -ne 0 ]]; then
  echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi

dir="$root$textfile_dir"
if [[ ! -d "$dir" ]]; then
  mkdir -p "$dir"
  # Under a simulated root the login user owns everything already; on a host the check's user writes here.
  if [[ -z "$root" ]]; then chown "$user" "$dir"; fi
  chmod 0755 "$dir"
fi
# Beside the check's own gpuhost-drift-<stack>.prom, under a name no stack's file can take ('@').
metric="gpuhost_drift_check_installed_timestamp_seconds"
installed="$dir/gpuhost-drift-timer@${stack//[^A-Za-z0-9_.-]/_}.prom"
temp="$(mktemp "$dir/.gpuhost-drift-timer.XXXXXX")"
trap 'rm -f "$temp"' EXIT
printf '# HELP %s %s\n# TYPE %s gauge\n%s{stack="%s"} %s\n' \
  "$metric" "When pulumi up installed or last changed the drift check's timer, in seconds since the epoch" \
  "$metric" "$metric" "$stack" "$(date +%s)" >"$temp"
chmod 0644 "$temp"
mv -f "$temp" "$installed"
systemctl enable "$timer"
systemctl restart "$timer"
echo "timer=$timer"
