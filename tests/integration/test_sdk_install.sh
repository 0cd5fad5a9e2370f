#!/usr/bin/env bash
# The SDK as a third party sees it: install llmrt into a temporary prefix, build the example
# plugin in tests/example-plugin against that prefix only (CMake package and pkg-config),
# and load it with the installed llmrt binary; then build the Qwen3-MoE model plugin
# (plugins/model-qwen3-moe, with its CUDA kernels when a toolkit is found) out of tree against
# the prefix alone, and run it from there: the installed llmrt writes and generates from a
# qwen3-moe-tiny checkpoint through the out-of-tree build, no edit of core needed.
set -euo pipefail
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$LLMRT_BUILD_DIR" --prefix "$prefix" >/dev/null
test -f "$prefix/include/llmrt/plugin.h"
test -f "$prefix/lib/cmake/llmrt/llmrtConfig.cmake"

# 1. CMake: find_package(llmrt) from the prefix, nothing from the source tree.
cmake -S "$LLMRT_SOURCE_DIR/tests/example-plugin" -B "$tmp/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
ninja -C "$tmp/build" >/dev/null
ninja -C "$tmp/build" install >/dev/null
test -f "$prefix/lib/llmrt/plugins/memory-example.so"

# Only llmrt_plugin_get is exported.
exported=$(nm -D --defined-only "$prefix/lib/llmrt/plugins/memory-example.so" | awk '$2=="T"{print $3}')
[[ "$exported" == "llmrt_plugin_get" ]] || { echo "FAIL: exports: $exported"; exit 1; }

# The installed binary finds its plugins (exe-relative) and the example beside them.
out=$("$prefix/bin/llmrt" plugins)
grep -q "^memory  *example  *0.1.0  *1\.[0-9]* " <<<"$out" || { echo "FAIL: example not listed:"; echo "$out"; exit 1; }
grep -q "^memory  *pinned " <<<"$out" || { echo "FAIL: installed plugins not found:"; echo "$out"; exit 1; }
"$prefix/bin/llmrt" config --set memory.plugin=example --show | grep -q "^plugin = example"

# 2. pkg-config: a plugin compiled with nothing but `pkg-config --cflags llmrt`.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
mkdir -p "$tmp/pc"
cc -std=c11 -shared -fPIC -fvisibility=hidden $(pkg-config --cflags llmrt) \
  "$LLMRT_SOURCE_DIR/tests/example-plugin/memory_example.c" -o "$tmp/pc/memory-example.so"
[[ "$(realpath "$(pkg-config --variable=plugindir llmrt)")" == "$(realpath "$prefix/lib/llmrt/plugins")" ]]
out=$(LLMRT_PLUGIN_PATH="$tmp/pc" "$prefix/bin/llmrt" plugins)
# the pkg-config build is found first (LLMRT_PLUGIN_PATH) and the installed copy is then a duplicate
grep -q "^memory  *example .*$tmp/pc/memory-example.so" <<<"$out" || { echo "FAIL: pkg-config build not loaded:"; echo "$out"; exit 1; }
grep -q "duplicate plugin memory:example" <<<"$out" || { echo "FAIL: duplicate not reported"; echo "$out"; exit 1; }

# 3. A real plugin from this tree, built standalone the same way: quant-fp8 (CPU kernels only
# here, LLMRT_CUDA=OFF; its CMakeLists builds the CUDA ones where nvcc is found).
cmake -S "$LLMRT_SOURCE_DIR/plugins/quant-fp8" -B "$tmp/fp8" -G Ninja -DLLMRT_CUDA=OFF \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
ninja -C "$tmp/fp8" >/dev/null
exported=$(nm -D --defined-only "$tmp/fp8/quant-fp8.so" | awk '$2=="T"{print $3}')
[[ "$exported" == "llmrt_plugin_get" ]] || { echo "FAIL: quant-fp8 exports: $exported"; exit 1; }
mkdir -p "$tmp/fp8p" && cp "$tmp/fp8/quant-fp8.so" "$tmp/fp8p/"
out=$(LLMRT_PLUGIN_PATH="$tmp/fp8p" "$prefix/bin/llmrt" plugins)
grep -q "^quant  *fp8 .*$tmp/fp8p/quant-fp8.so" <<<"$out" || { echo "FAIL: standalone quant-fp8 not loaded:"; echo "$out"; exit 1; }

# 4. plugins/model-qwen3-moe out of tree: find_package(llmrt) from the prefix (its Qwen3 parts
# come from the sibling folder plugins/qwen3-common, as any source checkout has it). The
# installed copy is removed, so only the out-of-tree build can answer.
unset PKG_CONFIG_PATH
cuda_archs=()
[[ -x /usr/local/cuda/bin/nvcc ]] && cuda_archs=(-DCMAKE_CUDA_ARCHITECTURES=90) # one arch: quicker
cmake -S "$LLMRT_SOURCE_DIR/plugins/model-qwen3-moe" -B "$tmp/moe" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" "${cuda_archs[@]}" > "$tmp/moe.cmake.log" 2>&1 \
  || { cat "$tmp/moe.cmake.log"; echo "FAIL: configuring plugins/model-qwen3-moe out of tree"; exit 1; }
ninja -C "$tmp/moe" > "$tmp/moe.build.log" 2>&1 \
  || { cat "$tmp/moe.build.log"; echo "FAIL: building plugins/model-qwen3-moe out of tree"; exit 1; }
so=$tmp/moe/model-qwen3_moe.so
[[ -f "$so" ]] || { ls "$tmp/moe"; echo "FAIL: no model-qwen3_moe.so"; exit 1; }
exported=$(nm -D --defined-only "$so" | awk '$2=="T"{print $3}')
[[ "$exported" == "llmrt_plugin_get" ]] || { echo "FAIL: model-qwen3_moe.so exports: $exported"; exit 1; }
rm -f "$prefix/lib/llmrt/plugins/model-qwen3_moe.so"
mkdir -p "$tmp/moe-plugins" && cp "$so" "$tmp/moe-plugins/"
export LLMRT_PLUGIN_PATH="$tmp/moe-plugins"
out=$("$prefix/bin/llmrt" plugins)
grep -q "^model  *qwen3_moe .*$tmp/moe-plugins/model-qwen3_moe.so" <<<"$out" \
  || { echo "FAIL: the out-of-tree qwen3_moe not listed:"; echo "$out"; exit 1; }
"$prefix/bin/llmrt" mkmodel --preset qwen3-moe-tiny -q -o "$tmp/moe-tiny" \
  || { echo "FAIL: mkmodel --preset qwen3-moe-tiny through the out-of-tree plugin"; exit 1; }
ids=$("$prefix/bin/llmrt" generate --set runtime.backend=cpu --model "$tmp/moe-tiny" \
      --prompt-ids 1,2,3 --max-tokens 8 --ignore-eos --print-ids 2> "$tmp/moe.gen.err") \
  || { cat "$tmp/moe.gen.err"; echo "FAIL: generate through the out-of-tree plugin"; exit 1; }
[[ $(wc -w <<<"$ids") -eq 8 ]] || { echo "FAIL: 8 ids expected, got [$ids]"; exit 1; }
grep -q "Qwen3MoeForCausalLM (qwen3_moe)" "$tmp/moe.gen.err" \
  || { cat "$tmp/moe.gen.err"; echo "FAIL: the model did not load as qwen3_moe"; exit 1; }
echo "ok: SDK install, CMake package, pkg-config, example plugin, quant-fp8 and model-qwen3-moe out of tree"
