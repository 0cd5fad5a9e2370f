#!/usr/bin/env bash
# `llmrt doctor`'s verdicts say why: the recommendation names memory.plugin's default and
# agrees with it or says why not (and names the config's own value when that differs), and
# what the pinned-memory probe got is explained against RLIMIT_MEMLOCK — lifted by
# CAP_IPC_LOCK (root), or the limit mlock stopped at — on the CPU backend here. There CPU
# weight offload has no meaning (device memory is host memory): said once, h2d bandwidth
# n/a and not measured, whatever memory.cpu_offload_gb or --offload-gb says, and no failure
# (the measured lines are test_doctor_cuda.sh's).
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export LLMRT_SYSTEM_CONFIG=

"$LLMRT" doctor --pin-cap-gb 0.25 > "$tmp/out" 2>&1; rc=$?
[[ $rc -le 1 ]] || { cat "$tmp/out"; fail "doctor exited $rc"; }
rec=$(grep '^recommendation: ' "$tmp/out") || { cat "$tmp/out"; fail "no recommendation"; }
[[ "$rec" =~ ^recommendation:\ memory.plugin\ =\ pinned,\ the\ default\ — ||
   "$rec" =~ ^recommendation:\ memory.plugin\ =\ [a-z]+,\ not\ the\ default\ pinned\ —\  ]] ||
  fail "the recommendation neither agrees with the default nor says why not: $rec"
grep -q '^\[[a-z ]*\] memlock .*RLIMIT_MEMLOCK' "$tmp/out" || { cat "$tmp/out"; fail "no RLIMIT_MEMLOCK explanation"; }
# how tensor-parallel ranks would be linked: threads on the CPU, GPU pairs on CUDA
grep -Eq '^\[info\] tensor parallel runtime.tensor_parallel = 1; (tensor-parallel ranks run as threads|.*GPU|this backend)' "$tmp/out" || { cat "$tmp/out"; fail "no tensor parallel line"; }

# a config that chose otherwise is named
"$LLMRT" doctor --pin-cap-gb 0.25 --set memory.plugin=uva > "$tmp/out" 2>&1
grep -q '^recommendation: .*This config sets memory.plugin = uva (--set)\.' "$tmp/out" || { grep recommendation "$tmp/out"; fail "the config's own choice is not named"; }

# a 1 MiB RLIMIT_MEMLOCK and a probe of 256 MiB blocks: root pins past it (CAP_IPC_LOCK) and
# says so; anyone else is stopped by it, hears why, and is told pageable, not the default
cap=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
# (the CPU backend's mlock: on CUDA the driver pins past RLIMIT_MEMLOCK itself, said otherwise)
(ulimit -l 1024 && "$LLMRT" doctor --pin-cap-gb 0.25 --set runtime.backend=cpu) > "$tmp/out" 2>&1
if (( (0x$cap >> 14) & 1 )); then
  grep -q 'memlock .*pinned 0.25 GiB although RLIMIT_MEMLOCK is 1.0 MiB: this process has CAP_IPC_LOCK' "$tmp/out" ||
    { cat "$tmp/out"; fail "pinning past RLIMIT_MEMLOCK with CAP_IPC_LOCK is not explained"; }
  grep -q '^recommendation: memory.plugin = pinned, the default' "$tmp/out" || fail "root can pin: the default stands"
else
  grep -q 'memlock .*mlock stopped at the first 256 MiB block: RLIMIT_MEMLOCK 1.0 MiB is the limit' "$tmp/out" ||
    { cat "$tmp/out"; fail "the limit mlock stopped at is not explained"; }
  grep -q '^recommendation: memory.plugin = pageable, not the default pinned — this machine refuses to pin memory' "$tmp/out" ||
    { grep recommendation "$tmp/out"; fail "a machine that cannot pin: pageable, and why not the default"; }
fi
# CPU weight offload on the CPU backend: one "no meaning" line, no h2d figures, no cost
dir="$LLMRT_SOURCE_DIR/tests/fixtures/models/qwen3-f32-sharded"
for args in "" "--set memory.cpu_offload_gb=2.5" "--offload-gb 1e5 --model $dir"; do
  # shellcheck disable=SC2086
  "$LLMRT" doctor --pin-cap-gb 0.25 --set runtime.backend=cpu $args > "$tmp/out" 2>&1; rc=$?
  [[ $rc -le 1 ]] || { cat "$tmp/out"; fail "doctor $args exited $rc"; }
  n=$(grep -c '^\[info\] offload .*CPU weight offload has no meaning on the cpu backend (its device memory is host memory); h2d bandwidth: n/a$' "$tmp/out")
  [[ $n -eq 1 ]] || { cat "$tmp/out"; fail "doctor $args: the no-meaning line $n times (once expected)"; }
  grep -Eq 'h2d (pageable|pinned|mapped): [0-9]' "$tmp/out" && { cat "$tmp/out"; fail "doctor $args: h2d figures on the cpu backend"; }
  grep -q 'offload cost' "$tmp/out" && { cat "$tmp/out"; fail "doctor $args: an offload cost on the cpu backend"; }
  grep -q '^\[FAIL\]' "$tmp/out" && { cat "$tmp/out"; fail "doctor $args: a failure"; }
done
grep -q '^\[info\] offload  *--offload-gb = 100000: ' "$tmp/out" || { cat "$tmp/out"; fail "--offload-gb is not the figure named"; }
"$LLMRT" doctor --set runtime.backend=cpu --set memory.cpu_offload_gb=3 --no-probe > "$tmp/out" 2>&1
grep -q 'memory.cpu_offload_gb = 3: CPU weight offload has no meaning on the cpu backend' "$tmp/out" || { cat "$tmp/out"; fail "memory.cpu_offload_gb is not the figure named"; }
for bad in -1 abc 1e9 ""; do
  "$LLMRT" doctor --offload-gb "$bad" > "$tmp/out" 2>&1; rc=$?
  [[ $rc -eq 2 ]] || { cat "$tmp/out"; fail "--offload-gb '$bad': exit $rc, 2 expected"; }
  grep -q -- "--offload-gb wants a number of GB" "$tmp/out" || { cat "$tmp/out"; fail "--offload-gb '$bad': no reason"; }
done
echo "ok: doctor"
