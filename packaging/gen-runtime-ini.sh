#!/usr/bin/env bash
# gen-runtime-ini.sh — the system configuration an installation ships (etc/llmrt/runtime.ini,
# /etc/llmrt/runtime.ini in the Debian package): `llmrt config --template` of this build,
# every key commented out at its default, so the file changes nothing until an operator
# uncomments a line.
# usage: packaging/gen-runtime-ini.sh LLMRT OUT_FILE
set -euo pipefail
llmrt=$1 out=$2
mkdir -p "$(dirname "$out")"
{
  cat <<'HEAD'
; /etc/llmrt/runtime.ini — llmrt's system configuration, read by every llmrt command of this
; installation (and by the llmrt service, which serves [model] path). Below it: -c FILE,
; then LLMRT_<SECTION>_<KEY> variables, the short flags and --set (`llmrt config --show`
; says where each value came from; LLMRT_SYSTEM_CONFIG= skips this file).
; Every key is here at its default, commented out: uncomment and change what this machine
; needs, e.g. [model] path = /srv/models/Qwen3-8B-AWQ.
HEAD
  echo
  LLMRT_SYSTEM_CONFIG= env -u LLMRT_PLUGIN_PATH "$llmrt" config --template |
    sed -e '1,/^$/d' -e 's/^\([a-z][a-z0-9_-]* = \)/; \1/'
} > "$out.tmp"
mv "$out.tmp" "$out"
