# Sourced by scripts/demo and scripts/test: create .venv and install the project into it.
# Re-installs only when pyproject.toml or the requested extras change (a stamp in .venv).
# Each step that takes time says so on stderr first ("setup: ..."), one line a step.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"

jobwire_say() {  # one line on stderr: what the setup is doing
  echo "setup: $*" >&2
}

jobwire_setup() {  # $1: the pip target, e.g. ".[test]"
  local target="$1"
  if [ ! -x .venv/bin/python ]; then
    jobwire_say "creating the virtual environment .venv with $PYTHON (first run only)"
    "$PYTHON" -m venv .venv
  fi
  local stamp=".venv/.jobwire-installed"
  local want
  want="$(sha256sum pyproject.toml | cut -d' ' -f1) $target"
  if [ ! -f "$stamp" ] || ! grep -qxF "$want" "$stamp"; then
    jobwire_say "installing jobwire ($target) and its dependencies into .venv with pip" \
      "(about a minute the first time; again only when pyproject.toml changes)"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e "$target" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    echo "$want" >> "$stamp"
    jobwire_say "installed"
  fi
}

jobwire_install_debs() {  # BINARY:PACKAGE pairs: install each package whose binary is missing
  # With apt-get when we are root; otherwise a warning: the tests that need one skip, or fail
  # under JOBWIRE_REQUIRE_REAL_SERVERS=1 (CI), saying what to install.
  local missing=()
  local pair
  for pair in "$@"; do
    local bin="${pair%%:*}" pkg="${pair#*:}"
    command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    jobwire_say "installing ${missing[*]} with apt-get"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "warning: ${missing[*]} missing and not root: the tests that need them will skip" \
      "(fail under JOBWIRE_REQUIRE_REAL_SERVERS=1)" >&2
  fi
}
