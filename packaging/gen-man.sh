#!/usr/bin/env bash
# gen-man.sh — man pages from the binary's own --help text, so they never disagree with it:
# llmrt(1) from `llmrt --help`, llmrt-CMD(1) from `llmrt CMD --help` for every command it
# lists. Each page is gzip'ed (as Debian installs man pages).
# usage: packaging/gen-man.sh LLMRT OUT_DIR VERSION
set -euo pipefail
llmrt=$1 out=$2 version=$3
mkdir -p "$out"
export LLMRT_SYSTEM_CONFIG= # the help text only, never a machine's config

# roff of plain text: backslashes escaped, lines starting with . or ' protected
roff() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }

# page NAME SUMMARY HELP_FILE [SEE_ALSO]
page() {
  local name=$1 summary=$2 help=$3 see=${4:-}
  local upper
  upper=$(tr '[:lower:]' '[:upper:]' <<<"$name")
  {
    printf '.TH %s 1 "" "llmrt %s" "llmrt manual"\n' "$upper" "$version"
    printf '.SH NAME\n%s \\- %s\n' "${name//-/\\-}" "$(roff <<<"$summary")"
    printf '.SH DESCRIPTION\n.nf\n'
    roff < "$help"
    printf '.fi\n'
    printf '.SH FILES\n.TP\n.I /etc/llmrt/runtime.ini\nthe system configuration (below \\fB\\-c\\fR FILE); \\fBllmrt config \\-\\-show\\fR says where each value comes from\n'
    [[ -n "$see" ]] && printf '.SH SEE ALSO\n%s\n' "$see"
  } > "$out/$name.1"
  gzip -9nf "$out/$name.1"
}

"$llmrt" --help > "$out/llmrt.txt"
cmds=$(awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }' "$out/llmrt.txt")
see=""
for c in $cmds; do see="$see${see:+, }\\fBllmrt\\-$c\\fR(1)"; done
page llmrt "a small, fast LLM inference runtime with pluggable memory paths" "$out/llmrt.txt" "$see"
for c in $cmds; do
  summary=$(awk -v c="$c" '$1 == c { $1 = ""; sub(/^ +/, ""); print }' "$out/llmrt.txt")
  "$llmrt" "$c" --help > "$out/$c.txt"
  page "llmrt-$c" "$summary" "$out/$c.txt" '\fBllmrt\fR(1)'
  rm "$out/$c.txt"
done
rm "$out/llmrt.txt"
