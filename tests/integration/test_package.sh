#!/usr/bin/env bash
# The Debian package as an operator gets it: `cpack -G DEB` of this build makes a .deb with
# the binary, the plugins, the SDK (headers, CMake package, pkg-config files, libllmrt),
# /etc/llmrt/runtime.ini (a conffile, every key commented out), the systemd unit of
# `llmrt serve` (its own user, loopback unless configured), man pages for llmrt and every
# subcommand (from their --help) and bash completion. Unpacked into a scratch root
# (dpkg -x) it runs from there: plugins and libllmrt found beside the binary, the scratch
# root's etc/llmrt/runtime.ini read below -c. Skipped (77) without cpack or dpkg-deb.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
command -v cpack > /dev/null && command -v dpkg-deb > /dev/null ||
  { echo "SKIP: cpack or dpkg-deb is not installed"; exit 77; }
unset LLMRT_PLUGIN_PATH LLMRT_SYSTEM_CONFIG

cpack --config "$LLMRT_BUILD_DIR/CPackConfig.cmake" -G DEB -B "$tmp/pkg" > "$tmp/cpack.log" 2>&1 ||
  { tail -20 "$tmp/cpack.log"; fail "cpack -G DEB"; }
deb=$(ls "$tmp"/pkg/llmrt_*_*.deb 2>/dev/null | head -1)
[[ -f "$deb" ]] || { tail -5 "$tmp/cpack.log"; fail "no .deb was made"; }
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' > "$tmp/files"

# ---- what is in it ----
want=(/usr/bin/llmrt /usr/lib/libllmrt.so /usr/lib/libllmrt.so.0 /etc/llmrt/runtime.ini
      /usr/lib/systemd/system/llmrt.service /usr/share/bash-completion/completions/llmrt
      /usr/lib/pkgconfig/llmrt.pc /usr/lib/pkgconfig/llmrt-engine.pc
      /usr/lib/cmake/llmrt/llmrtConfig.cmake /usr/lib/cmake/llmrt/llmrtTargets.cmake
      /usr/lib/cmake/llmrt/llmrtPlugin.cmake /usr/share/man/man1/llmrt.1.gz)
for h in "$LLMRT_SOURCE_DIR"/include/llmrt/*.h; do want+=("/usr/include/llmrt/$(basename "$h")"); done
for p in "$LLMRT_PLUGIN_DIR"/*.so; do want+=("/usr/lib/llmrt/plugins/$(basename "$p")"); done
for c in $("$LLMRT" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'); do
  want+=("/usr/share/man/man1/llmrt-$c.1.gz")
done
for f in "${want[@]}"; do grep -qx "$f" "$tmp/files" || fail "the package has no $f"; done
! grep -q '^/usr/local\|^/home\|^/tmp' "$tmp/files" || fail "the package holds files outside /usr and /etc"
dpkg-deb -f "$deb" Package | grep -qx llmrt || fail "Package"
dpkg-deb -f "$deb" Depends | grep -q 'libmicrohttpd12' || fail "Depends lacks libmicrohttpd12: $(dpkg-deb -f "$deb" Depends)"
dpkg-deb -e "$deb" "$tmp/control"
grep -qx /etc/llmrt/runtime.ini "$tmp/control/conffiles" || fail "/etc/llmrt/runtime.ini is not a conffile"
grep -q "useradd --system" "$tmp/control/postinst" && [[ -x "$tmp/control/postinst" ]] || fail "postinst does not make the service's user"
sh -n "$tmp/control/postinst" && sh -n "$tmp/control/prerm" && sh -n "$tmp/control/postrm" || fail "a maintainer script is not valid sh"

# ---- unpacked into a scratch root, it runs from there ----
root=$tmp/root
dpkg -x "$deb" "$root"
out=$("$root/usr/bin/llmrt" plugins 2>&1) || { echo "$out"; fail "llmrt plugins from the unpacked package"; }
for p in "$LLMRT_PLUGIN_DIR"/*.so; do
  grep -q " $root/usr/bin/../lib/llmrt/plugins/$(basename "$p")$" <<<"$out" || { echo "$out"; fail "plugin $(basename "$p") not loaded from the package"; }
done
ldd "$root/usr/bin/llmrt" | grep -q "libllmrt.so.0 => $root/usr/bin/../lib/libllmrt.so.0" ||
  { ldd "$root/usr/bin/llmrt"; fail "the packaged binary does not use the packaged libllmrt"; }
# the system file: read (all commented: defaults), then an operator's change, below -c
out=$("$root/usr/bin/llmrt" config 2>&1)
grep -q "^; effective configuration (file: $root/etc/llmrt/runtime.ini)$" <<<"$out" && grep -q "^block_size = 16  *; default$" <<<"$out" ||
  { echo "$out" | head; fail "the package's /etc/llmrt/runtime.ini is not read, or changes a value"; }
"$root/usr/bin/llmrt" config -c "$root/etc/llmrt/runtime.ini" > /dev/null || fail "the shipped runtime.ini does not validate"
sed -i 's/^; block_size = 16$/block_size = 32/; s/^; max_num_seqs = 32$/max_num_seqs = 8/' "$root/etc/llmrt/runtime.ini"
printf '[scheduler]\nmax_num_seqs = 4\n' > "$tmp/user.ini"
out=$("$root/usr/bin/llmrt" config -c "$tmp/user.ini" 2>&1)
grep -q "^block_size = 32  *; $root/etc/llmrt/runtime.ini:[0-9]*$" <<<"$out" || { echo "$out" | grep block_size; fail "an uncommented line of /etc/llmrt/runtime.ini"; }
grep -q "^max_num_seqs = 4  *; $tmp/user.ini:2$" <<<"$out" || fail "-c must win over /etc/llmrt/runtime.ini"
# the SDK from the package: pkg-config and the engine library
PKG_CONFIG_PATH="$root/usr/lib/pkgconfig" pkg-config --cflags llmrt-engine | grep -q -- "-I$root/usr/lib/pkgconfig/../../include" ||
  fail "llmrt-engine.pc is not relocatable"
cat > "$tmp/embed.c" <<'C'
#include <llmrt/engine.h>
#include <stdio.h>
int main(void) { printf("%s\n", llmrt_version()); return 0; }
C
san=() # a sanitized libllmrt needs its program sanitized too
grep -q '^LLMRT_SANITIZE:BOOL=ON' "$LLMRT_BUILD_DIR/CMakeCache.txt" && san=(-fsanitize=address,undefined)
cc "${san[@]}" "$tmp/embed.c" -o "$tmp/embed" $(PKG_CONFIG_PATH="$root/usr/lib/pkgconfig" pkg-config --cflags --libs llmrt-engine) &&
  [[ $(LD_LIBRARY_PATH="$root/usr/lib" "$tmp/embed") == "$("$LLMRT" --version | awk '{print $2}')" ]] ||
  fail "a program built against the packaged SDK"

# ---- the service unit: its own user, llmrt serve, the config decides the address ----
unit=$root/usr/lib/systemd/system/llmrt.service
grep -qx 'User=llmrt' "$unit" && grep -qx 'ExecStart=/usr/bin/llmrt serve' "$unit" && grep -qx 'WantedBy=multi-user.target' "$unit" ||
  { cat "$unit"; fail "the systemd unit"; }
! grep -q -- '--host\|0\.0\.0\.0' "$unit" || fail "the unit binds something else than the configured (loopback) address"
grep -qx '; host = 127.0.0.1' "$root/etc/llmrt/runtime.ini" || fail "the shipped config does not show the loopback default"

# ---- man pages: one per subcommand, from its --help ----
zcat "$root/usr/share/man/man1/llmrt-serve.1.gz" | grep -q '^\.TH LLMRT-SERVE 1' || fail "llmrt-serve(1) is not a man page"
zcat "$root/usr/share/man/man1/llmrt-serve.1.gz" | grep -q 'usage: llmrt serve \[MODEL_DIR\]' || fail "llmrt-serve(1) is not its --help"
zcat "$root/usr/share/man/man1/llmrt.1.gz" | grep -q 'llmrt\\-generate' || fail "llmrt(1) does not name the subcommands' pages"
if command -v man > /dev/null; then
  MANWIDTH=100 man -l "$root/usr/share/man/man1/llmrt-generate.1.gz" 2> "$tmp/man.err" | grep -q -- '--max-tokens N' ||
    { cat "$tmp/man.err"; fail "man renders no llmrt-generate(1)"; }
fi

# ---- bash completion: commands, each command's options from its --help ----
comp() { # WORDS... → the completions of the last word
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _llmrt; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$root/usr/share/bash-completion/completions/llmrt" "$@"
}
[[ $(comp "$LLMRT" gen) == generate ]] || fail "completion of 'llmrt gen'"
comp "$LLMRT" generate --max-t | grep -qx -- --max-tokens || fail "completion of 'llmrt generate --max-t'"
comp "$LLMRT" serve --api | grep -qx -- --api-key || fail "completion of 'llmrt serve --api'"
comp "$LLMRT" config --set cache.block | grep -qx "cache.block_size=" || fail "completion of --set keys"
echo "ok: package ($(basename "$deb"), $(wc -l < "$tmp/files") entries)"
