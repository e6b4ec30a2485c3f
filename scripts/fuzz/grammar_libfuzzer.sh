#!/bin/sh
# Builds the libFuzzer harness of the grammar engine (tests/grammar/grammar_libfuzzer.cpp: JSON
# Schema, regex, EBNF and choice compiles, then a short matcher walk) with clang under ASan and
# UBSan, and runs it for RUNS inputs (default 1 million) from a seed corpus in WORK/corpus.
# Usage: scripts/fuzz/grammar_libfuzzer.sh WORK [RUNS] [flags...]
set -eu
work=${1:?usage: grammar_libfuzzer.sh WORK [RUNS]}
runs=${2:-1000000}
shift $(( $# >= 2 ? 2 : 1 ))
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work/corpus" "$work/crashes"
CXX=${CXX:-clang++}
$CXX -std=c++20 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$root" \
  "$root/tests/grammar/grammar_libfuzzer.cpp" "$root"/grammar/*.cpp \
  "$root/shared/error.cpp" "$root/shared/bounded_json.cpp" -o "$work/m3-grammar-libfuzzer"
# Seeds: first byte 0 schema, 1 regex, 2 EBNF, 3 choices.
i=0
for f in "$root"/tests/data/grammar/schemas/*.json; do
  { printf '\000'; cat "$f"; } > "$work/corpus/schema_$i"
  i=$((i + 1))
done
printf '\001(ab|c[^d-f]*){2,5}\\d+\\.?x' > "$work/corpus/regex"
printf '\002root ::= expr\nexpr ::= term ("+" term)*\nterm ::= [0-9]+ | "(" expr ")"\n' > "$work/corpus/ebnf"
printf '\003yes\nno\nmaybe' > "$work/corpus/choice"
nice -n 10 "$work/m3-grammar-libfuzzer" -runs="$runs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$work/crashes/" -print_final_stats=1 "$@" "$work/corpus"
