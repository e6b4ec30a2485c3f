#!/usr/bin/env bash
# Tokenizer throughput on the GPU machine: builds m3-bench-tokenizer with g++ against the
# headers/libraries carried in build-device/sysroot (made here by scripts/device/make_sysroot.sh;
# env SYSROOT: another path), then
# times it and the Python `tokenizers` library, single-threaded, on the same documents in the
# same run, checks both produce the same ids, and writes $OUT/tokenizer_bench.json.
# Usage (repo root, on the device, with build-device/sysroot carried):
#   bash scripts/device/bench_tokenizer.sh
# Env: MB (text size, default 8), RUNS (default 5), TOKENIZER (default the MiniMax tokenizer.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/tokenizer_bench_out}"
mkdir -p "$OUT"
SYSROOT="${SYSROOT:-$PWD/build-device/sysroot}"
MB="${MB:-8}"
RUNS="${RUNS:-5}"
TOKENIZER="${TOKENIZER:-tests/data/tokenizer/tokenizer.json}"
BUILD=/tmp/m3-bench-tokenizer-build
mkdir -p "$BUILD"
if [ ! -f "$SYSROOT/include/pcre2.h" ]; then
  echo "bench_tokenizer.sh: $SYSROOT is missing; run scripts/device/make_sysroot.sh and carry it" >&2
  exit 2
fi

# Same optimisation level as the CMake Release build (-O3, no -march); PCRE2 and utf8proc are
# linked statically so nothing needs LD_LIBRARY_PATH.
echo "== build ($(g++ --version | head -1))"
JOBS="${JOBS:-$(nproc)}"
objs=()
for src in gateway/tokenizer/*.cpp gateway/unicode/*.cpp shared/error.cpp tests/bench/tokenizer_bench.cpp; do
  obj="$BUILD/$(echo "$src" | tr / _).o"
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  g++ -std=c++20 -O3 -DNDEBUG -Wall -Wextra -Wno-unused-parameter -I. -I"$SYSROOT/include" \
    -c "$src" -o "$obj" &
  objs+=("$obj")
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n; done
g++ -O3 "${objs[@]}" -o "$BUILD/m3-bench-tokenizer" -L"$SYSROOT/lib" \
  -Wl,-Bstatic -lpcre2-8 -lutf8proc -Wl,-Bdynamic -lpthread

echo "== m3 tokenizer"
"$BUILD/m3-bench-tokenizer" --tokenizer "$TOKENIZER" --mb "$MB" --runs "$RUNS" \
  --write-docs "$BUILD/docs.json" | tee "$OUT/m3_bench.json"

echo "== HF tokenizers (single thread)"
export RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
python3 - "$TOKENIZER" "$BUILD/docs.json" "$RUNS" "$OUT/m3_bench.json" "$OUT/tokenizer_bench.json" <<'PY'
import json, statistics, sys, time
import tokenizers
from tokenizers import Tokenizer

tok_path, docs_path, runs, m3_path, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
tok = Tokenizer.from_file(tok_path)
docs = json.load(open(docs_path, encoding="utf-8"))
nbytes = sum(len(d.encode("utf-8")) for d in docs)

def checksum(all_ids):
    c = 0
    for ids in all_ids:
        for i in ids:
            c = (c * 31 + i) & 0xFFFFFFFFFFFFFFFF
    return c

def timed(fn):
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        rates.append(nbytes / 1e6 / (time.perf_counter() - t0))
    return statistics.median(rates), rates, result

per_doc, per_doc_runs, encs = timed(lambda: [tok.encode(d, add_special_tokens=False).ids for d in docs])
batch, batch_runs, _ = timed(lambda: tok.encode_batch(docs, add_special_tokens=False))
hf_checksum = checksum(encs)
m3 = json.load(open(m3_path))
best_hf = max(per_doc, batch)
result = {
    "bytes": nbytes, "documents": len(docs), "tokenizers_version": tokenizers.__version__,
    "hf_encode_mb_per_s": per_doc, "hf_encode_runs": per_doc_runs,
    "hf_encode_batch_1thread_mb_per_s": batch, "hf_encode_batch_runs": batch_runs,
    "m3_mb_per_s": m3["median_mb_per_s"], "m3_runs": m3["runs_mb_per_s"],
    "m3_cpu_mb_per_s": m3["median_cpu_mb_per_s"],
    "speedup_vs_best_hf": m3["median_mb_per_s"] / best_hf,
    "ids_identical": hf_checksum == m3["ids_checksum"] and sum(map(len, encs)) == m3["tokens"],
}
json.dump(result, open(out_path, "w"), indent=1)
print(json.dumps(result, indent=1))
PY
