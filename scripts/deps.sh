#!/usr/bin/env bash
# deps.sh — make sure the Debian packages llmrt builds and tests with are installed.
# As root it installs what is missing (apt-get); otherwise it prints the exact command.
# Sourced by run.sh and test.sh; safe to run on its own.
set -euo pipefail

LLMRT_DEBS=(build-essential cmake ninja-build pkg-config git
            libinih-dev uthash-dev check libjansson-dev libpcre2-dev libutf8proc-dev
            libmicrohttpd-dev libcairo2-dev curl ca-certificates python3 nodejs npm rsync
            dpkg-dev)  # rsync: scripts/gpu-pack.sh; dpkg-dev: dpkg-shlibdeps, for `cpack -G DEB`

llmrt_missing_debs() {
  local missing=() p
  for p in "${LLMRT_DEBS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # nodejs/npm may come from elsewhere (nodesource, nvm): accept working binaries.
  local filtered=()
  for p in "${missing[@]}"; do
    if [[ "$p" == nodejs ]] && command -v node >/dev/null; then continue; fi
    if [[ "$p" == npm ]] && command -v npm >/dev/null; then continue; fi
    filtered+=("$p")
  done
  echo "${filtered[@]}"
}

llmrt_ensure_debs() {
  local missing
  missing=$(llmrt_missing_debs)
  [[ -z "$missing" ]] && return 0
  if [[ $(id -u) -eq 0 ]]; then
    echo "deps: installing $missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >&2
  else
    echo "deps: missing Debian packages. Install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y $missing" >&2
    exit 1
  fi
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  llmrt_ensure_debs
fi
