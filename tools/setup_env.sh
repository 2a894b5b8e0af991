# Sourced by tools/demo and tools/test: a virtualenv with the pinned ROS 2 wheels, the package
# built with colcon, and DDS kept on this machine in a domain of this run's own.
# Re-running is cheap: the venv is reused while requirements/*.txt are unchanged.

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${RTGYM_ROS_VENV:-$repo_root/.venv}"
stamp="$venv/.requirements-stamp"
wanted="$(cat "$repo_root"/requirements/*.txt | sha256sum | cut -d' ' -f1)"

if [ ! -x "$venv/bin/python" ]; then
  echo "[setup] creating virtualenv $venv" >&2
  python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "[setup] installing pinned ROS 2 wheels and tools (requirements/)" >&2
  pip_log="$venv/pip-install.log"
  if ! { "$venv/bin/python" -m pip install --disable-pip-version-check --upgrade pip \
         && "$venv/bin/python" -m pip install --disable-pip-version-check \
            -r "$repo_root/requirements/dev.txt" -r "$repo_root/requirements/ros-kilted.txt"
       } >"$pip_log" 2>&1; then
    tail -n 30 "$pip_log" >&2
    echo "[setup] pip install failed; full log: $pip_log" >&2
    return 1 2>/dev/null || exit 1
  fi
  echo "$wanted" > "$stamp"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"

# DDS stays on this machine, in a domain of its own for this run (kilted ignores
# ROS_LOCALHOST_ONLY; ROS_AUTOMATIC_DISCOVERY_RANGE is the setting it reads).
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( (RANDOM % 100) + 1 ))}"
export PYTHONUNBUFFERED=1

echo "[setup] colcon build (domain $ROS_DOMAIN_ID)" >&2
if ! (cd "$repo_root" && colcon build --paths . --build-base build --install-base install \
      >"$venv/colcon-build.log" 2>&1); then
  tail -n 40 "$venv/colcon-build.log" >&2
  echo "[setup] colcon build failed; full log: $venv/colcon-build.log" >&2
  return 1 2>/dev/null || exit 1
fi
# colcon's setup scripts read unset variables: source them without 'set -u'.
case $- in *u*) set +u; _rtgym_ros_nounset=1 ;; esac
# shellcheck disable=SC1091
source "$repo_root/install/setup.bash"
[ -n "${_rtgym_ros_nounset:-}" ] && set -u
unset _rtgym_ros_nounset
