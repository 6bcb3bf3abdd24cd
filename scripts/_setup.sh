# Sourced by scripts/demo and scripts/test: create .venv and install the project into it.
# Re-installs only when pyproject.toml or the requested extras change (a stamp in .venv).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"

jobwire_setup() {  # $1: the pip target, e.g. ".[test]"
  local target="$1"
  if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
  fi
  local stamp=".venv/.jobwire-installed"
  local want
  want="$(sha256sum pyproject.toml | cut -d' ' -f1) $target"
  if [ ! -f "$stamp" ] || ! grep -qxF "$want" "$stamp"; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e "$target" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    echo "$want" >> "$stamp"
  fi
}

jobwire_install_debs() {  # package names to install when their binary is missing and we are root
  local missing=()
  local pair
  for pair in "$@"; do
    local bin="${pair%%:*}" pkg="${pair#*:}"
    command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]} with apt-get" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "warning: ${missing[*]} missing and not root: real-server tests will skip" >&2
  fi
}
