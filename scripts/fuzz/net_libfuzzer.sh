#!/bin/sh
# Builds the libFuzzer harness of the network fuzz properties (tests/net/net_libfuzzer.cpp:
# the HTTP request parser and the JSON request parsers: the preprocessing request, and the
# OpenAI / Anthropic request readers behind ParseRequestBody, differentially against nlohmann's
# parser) with clang under ASan and UBSan, and runs it for RUNS inputs (default 10 million) from
# the seed corpus in WORK/corpus. An input slower than M3_NET_FUZZ_NS_PER_BYTE (default 2000 ns
# of CPU per byte, floor M3_NET_FUZZ_FLOOR_US = 5000) is a finding, like a crash.
# Usage: [M3_NET_FUZZ_TARGET=http|json] scripts/fuzz/net_libfuzzer.sh WORK [RUNS] [flags...]
# (M3_NET_FUZZ_TARGET fuzzes one target; unset, the first input byte picks it.)
# Only these few sources are compiled, so it needs neither the CMake build nor the media stack.
set -eu
work=${1:?usage: net_libfuzzer.sh WORK [RUNS]}
runs=${2:-10000000}
shift $(( $# >= 2 ? 2 : 1 ))
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work/corpus" "$work/crashes"
CXX=${CXX:-clang++}
$CXX -std=c++20 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -DBOOST_ASIO_NO_DEPRECATED -DBOOST_BEAST_USE_STD_STRING_VIEW -I"$root" \
  "$root/tests/net/net_libfuzzer.cpp" "$root/tests/net/net_fuzz_targets.cpp" \
  "$root/gateway/net/http_request_parser.cpp" "$root/gateway/net/request_json.cpp" \
  "$root/gateway/preprocess/preprocess_request.cpp" "$root/gateway/net/api_error.cpp" \
  "$root/gateway/content/content_part.cpp" "$root/gateway/content/json_type_name.cpp" \
  "$root/gateway/net/media_sniffer.cpp" "$root/gateway/unicode/utf8.cpp" \
  "$root/gateway/net/printable_excerpt.cpp" \
  "$root/gateway/openai/request_body.cpp" "$root/gateway/openai/chat_request.cpp" \
  "$root/gateway/openai/completion_request.cpp" "$root/gateway/openai/request_common.cpp" \
  "$root/gateway/openai/sampling_request.cpp" "$root/gateway/openai/field_reader.cpp" \
  "$root/gateway/openai/request_error.cpp" "$root/gateway/openai/chat_template_kwargs.cpp" \
  "$root/gateway/anthropic/messages_request.cpp" \
  "$root/shared/error.cpp" "$root/shared/bounded_json.cpp" "$root/shared/generation_config.cpp" \
  "$root/shared/json_file.cpp" \
  $(pkg-config --cflags --libs libutf8proc) -o "$work/m3-net-libfuzzer"
# Seeds: one request of each kind (first byte: even = HTTP, odd = JSON).
printf '\000GET /health HTTP/1.1\r\nHost: x\r\n\r\n' > "$work/corpus/http_get"
printf '\002POST /v1/preprocess HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4;a=b\r\nabcd\r\n0\r\nT: 1\r\n\r\n' > "$work/corpus/http_chunked"
printf '\004POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc' > "$work/corpus/http_length"
printf '\001{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}],"max_pixels":50176}' > "$work/corpus/json_content"
printf '\003{"messages":[{"role":"user","content":[{"type":"video_url","video_url":"https://a/b.mp4"}]}],"fps":2}' > "$work/corpus/json_messages"
# The API readers: the first byte's upper bits pick chat (0), completions (1), messages (2),
# count_tokens (3).
printf '\001{"model":"m3","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"stop":["x"],"temperature":0.5,"max_tokens":4}' > "$work/corpus/api_chat"
printf '\003{"model":"m3","prompt":[[1,2],[3]],"max_tokens":4,"logprobs":1}' > "$work/corpus/api_completion"
printf '\005{"model":"m3","max_tokens":8,"system":"s","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://a/b.png"}}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"thinking":{"type":"enabled","budget_tokens":1024}}' > "$work/corpus/api_messages"
printf '\007{"model":"m3","messages":[{"role":"user","content":"hi"}]}' > "$work/corpus/api_count"
nice -n 10 "$work/m3-net-libfuzzer" -runs="$runs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$work/crashes/" -print_final_stats=1 "$@" "$work/corpus"
