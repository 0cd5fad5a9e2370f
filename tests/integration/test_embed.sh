#!/usr/bin/env bash
# Embedding the engine as a third party would: install llmrt into a temporary prefix, compile
# tests/embed/embed.c (it includes <llmrt/engine.h> only) against that prefix with nothing but
# `pkg-config --cflags --libs llmrt-engine`, strict warnings, and run it: it must generate the
# same greedy ids as `llmrt generate` on the same model. Also checks that libllmrt exports
# the llmrt_* API and no other symbol, and that engine.h compiles alone (C11 and C++).
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$LLMRT_BUILD_DIR" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name llmrt-engine.pc | head -1)")
lib=$(find "$prefix" -name 'libllmrt.so' | head -1)
[[ -n "$lib" ]] || fail "libllmrt.so is not installed"

# only llmrt_* is exported
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}' | grep -v '^llmrt_' || true)
[[ -z "$bad" ]] || fail "libllmrt exports non-llmrt symbols: $(echo $bad | head -c 300)"

# engine.h alone, as C11 and as C++
echo '#include <llmrt/engine.h>' > "$tmp/alone.c"
cc -std=c11 -Wall -Wextra -Werror -pedantic $(pkg-config --cflags llmrt-engine) -c "$tmp/alone.c" -o "$tmp/alone.o" \
  || fail "engine.h does not compile alone (C11)"
if command -v c++ >/dev/null; then
  cp "$tmp/alone.c" "$tmp/alone.cc"
  c++ -std=c++17 -Wall -Wextra -Werror $(pkg-config --cflags llmrt-engine) -c "$tmp/alone.cc" -o "$tmp/alone2.o" \
    || fail "engine.h does not compile alone (C++)"
fi

# a sanitizer build's libllmrt needs the program built with the same runtime (it comes first)
san=""
if ldd "$lib" | grep libasan >/dev/null; then san="-fsanitize=address,undefined"; fi
cc -std=c11 -Wall -Wextra -Werror -pedantic $san "$LLMRT_SOURCE_DIR/tests/embed/embed.c" -o "$tmp/embed" \
  $(pkg-config --cflags --libs llmrt-engine) -Wl,-rpath,"$(dirname "$lib")" || fail "embed.c does not build"

"$prefix/bin/llmrt" mkmodel --preset tiny --seed 5 -q -o "$tmp/tiny"
want=$("$prefix/bin/llmrt" generate --model "$tmp/tiny" --prompt-ids 1,2,3,4 --max-tokens 12 \
  --ignore-eos --print-ids --set runtime.backend=cpu 2>/dev/null)
got=$("$tmp/embed" "$tmp/tiny" 1,2,3,4 12 runtime.backend=cpu 2>"$tmp/embed.err") \
  || { cat "$tmp/embed.err"; fail "embed failed"; }
[[ -n "$want" && "$got" == "$want" ]] || fail "embed generated '$got', llmrt generate '$want'"
grep -q "embed: llmrt " "$tmp/embed.err" || fail "no version line"
echo "ok: libllmrt embedded through llmrt-engine.pc ($got)"
