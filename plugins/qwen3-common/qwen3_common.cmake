# qwen3_common(<target>): compile the Qwen3 parts shared by model-qwen3 and model-qwen3-moe
# (config keys, loaders, attention block, dense MLP, the decoder skeleton, the chat format,
# synthetic-checkpoint helpers) into a model plugin, as memory-common is for the memory
# plugins: one source, no library (plugins link nothing of llmrt's). Needs jansson.
set(QWEN3_COMMON_DIR ${CMAKE_CURRENT_LIST_DIR})
set(QWEN3_COMMON_SOURCES
  ${QWEN3_COMMON_DIR}/qwen3_config_common.c
  ${QWEN3_COMMON_DIR}/qwen3_load.c
  ${QWEN3_COMMON_DIR}/qwen3_layer.c
  ${QWEN3_COMMON_DIR}/qwen3_decoder.c
  ${QWEN3_COMMON_DIR}/qwen3_shard.c
  ${QWEN3_COMMON_DIR}/qwen3_offload.c
  ${QWEN3_COMMON_DIR}/qwen3_chat.c
  ${QWEN3_COMMON_DIR}/qwen3_reply.c
  ${QWEN3_COMMON_DIR}/qwen3_synth_common.c)

function(qwen3_common target)
  target_sources(${target} PRIVATE ${QWEN3_COMMON_SOURCES})
  target_include_directories(${target} PRIVATE ${QWEN3_COMMON_DIR})
endfunction()
