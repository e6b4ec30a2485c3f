#!/usr/bin/env bash
# Still-JPEG comparison on the GPU machine, same run, same bytes, same core: builds m3-bench-jpeg
# alone (M3_IMAGE_BENCH_ONLY: m3_image + libjpeg-turbo from the carried build-device/sysroot, made
# here by scripts/device/make_sysroot.sh), writes the 1920x1080 test JPEGs
# (tests/bench/torch/hf_image_processor_bench.py --write-images), times the reference (PIL + HF
# MiniMaxM3VLImageProcessor, one torch thread) on them, then m3-bench-jpeg on the same files,
# both pinned to one core and one after the other, and prints a side-by-side summary with the
# libjpeg-turbo floors.
# Usage (repo root, on the device, with build-device/sysroot carried):
#   bash scripts/device/bench_images.sh
# Env: OUT (results; default /tmp/bench_images_out), CORE (default 2), RUNS (default 15),
# BUILD (build directory; default /tmp/m3-bench-jpeg-build), SYSROOT (default build-device/sysroot).
# Results: $OUT/images/*.jpg, reference.json, m3_bench_jpeg.json, summary.json, build.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/bench_images_out}"
CORE="${CORE:-2}"
RUNS="${RUNS:-15}"
SYSROOT="${SYSROOT:-$PWD/build-device/sysroot}"
BUILD="${BUILD:-/tmp/m3-bench-jpeg-build}"
mkdir -p "$OUT"
if [ ! -f "$SYSROOT/include/jpeglib.h" ] || [ ! -f "$SYSROOT/lib/libjpeg.a" ]; then
  echo "bench_images.sh: $SYSROOT lacks libjpeg-turbo; run scripts/device/make_sysroot.sh and carry it" >&2
  exit 2
fi

build() {
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DM3_WERROR="$1" -DM3_CUDA=OFF \
    -DM3_GATEWAY=OFF -DM3_TESTS=OFF -DM3_IMAGE_BENCH_ONLY=ON \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DCMAKE_PREFIX_PATH="$SYSROOT" &&
    cmake --build "$BUILD" --target m3-bench-jpeg -j "$(nproc)"
}
echo "== build m3-bench-jpeg ($(g++ --version | head -1))"
# A warning only this compiler reports must not cost the timings: it is reported, and the
# benchmark is built again without -Werror (same optimization flags).
if ! build ON >"$OUT/build.log" 2>&1; then
  grep -E 'error|warning' "$OUT/build.log" | head -20
  echo "== WARNING: the -Werror build failed (above; $OUT/build.log); building without -Werror"
  build OFF >>"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
fi
BENCH="$BUILD/bin/m3-bench-jpeg"
# The libjpeg-turbo used must be the carried one, linked statically.
grep -E '^JPEG_(INCLUDE_DIR|LIBRARY_RELEASE):' "$BUILD/CMakeCache.txt" | tee -a "$OUT/build.log"
if ! grep -q "^JPEG_LIBRARY_RELEASE:FILEPATH=$SYSROOT/lib/libjpeg.a$" "$BUILD/CMakeCache.txt"; then
  echo "bench_images.sh: CMake did not pick $SYSROOT/lib/libjpeg.a" >&2
  exit 1
fi
if ldd "$BENCH" | grep -q jpeg; then
  echo "bench_images.sh: m3-bench-jpeg links a shared libjpeg" >&2
  exit 1
fi

PIN=()
if command -v taskset >/dev/null && taskset -c "$CORE" true 2>/dev/null; then
  PIN=(taskset -c "$CORE")
  echo "== pinned to core $CORE: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
else
  echo "== taskset unavailable or core $CORE not allowed: running unpinned" >&2
fi

echo "== reference (PIL + HF processor, 1 torch thread), writing the test JPEGs"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1
${PIN[@]+"${PIN[@]}"} python3 tests/bench/torch/hf_image_processor_bench.py "$OUT/reference.json" \
  --write-images "$OUT/images" --runs "$RUNS" >/dev/null
echo "== m3-bench-jpeg (1 thread)"
${PIN[@]+"${PIN[@]}"} "$BENCH" --runs "$RUNS" "$OUT"/images/*.jpg >"$OUT/m3_bench_jpeg.json"

python3 - "$OUT/reference.json" "$OUT/m3_bench_jpeg.json" "$OUT/summary.json" <<'PY'
import json, os, sys

ref, ours, out_path = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
rows = []
print(f"reference: torch {ref['versions']['torch']}, transformers {ref['versions']['transformers']}, "
      f"Pillow {ref['versions']['pillow']} (libjpeg-turbo {ref['versions']['pillow_libjpeg_turbo']}); "
      f"ours: g++ {ours['compiler']}, libjpeg-turbo {ours['libjpeg_turbo']}; cpu {ours['cpu']}; "
      f"medians of {ours['runs']} runs, ms")
head = ("file", "ref_dec", "ref_e2e", "pil_dec", "pil_1/8", "ours_str", "ours_2p", "decode",
        "resize", "patch", "lj_full", "lj_1/8", "x_ours", "x_max_ex", "x_ex+rp", "x_max_any")
print(" ".join(f"{h:>9}" if i else f"{h:<28}" for i, h in enumerate(head)))
for f in ours["files"]:
    name = os.path.basename(f["file"])
    if "error" in f or name not in ref["files"]:
        print(f"{name}: {f.get('error', 'not in the reference results')}")
        continue
    r = ref["files"][name]
    med = lambda key: f[key]["median_ms"] if f.get(key) else float("nan")
    best = min(med("ours_e2e_stream"), med("ours_e2e_two_pass"))
    row = {
        "file": name,
        "reference_decoded_ms": r["decoded_ms"],
        "reference_e2e_ms": r["jpeg_end_to_end_ms"],
        "pil_decode_ms": r["pil_decode_ms"],
        "pil_draft_1_8_ms": r["pil_draft_1_8_decode_ms"],
        "ours_e2e_stream_ms": med("ours_e2e_stream"),
        "ours_e2e_two_pass_ms": med("ours_e2e_two_pass"),
        "ours_decode_ms": med("stage_decode_full"),
        "ours_resize_ms": med("stage_resize"),
        "ours_patchify_ms": med("stage_patchify"),
        "libjpeg_full_ms": med("libjpeg_full_rgb"),
        "libjpeg_1_8_ms": med("libjpeg_scale_1_8"),
        "stream_identical_to_two_pass": f.get("stream_identical_to_two_pass"),
        # The speedup reached; the most any exact decoder built on libjpeg-turbo can reach
        # (it pays at least the full decode); the most any decoder can (entropy decoding).
        "speedup_ours": r["jpeg_end_to_end_ms"] / best,
        "speedup_max_exact_libjpeg": r["jpeg_end_to_end_ms"] / med("libjpeg_full_rgb"),
        # ... and with our resize and patchify added to that decode.
        "speedup_max_exact_with_our_resize_patchify": r["jpeg_end_to_end_ms"]
        / (med("libjpeg_full_rgb") + med("stage_resize") + med("stage_patchify")),
        "speedup_max_any": r["jpeg_end_to_end_ms"] / med("libjpeg_scale_1_8"),
        "target_5x_ms": r["jpeg_end_to_end_ms"] / 5,
    }
    rows.append(row)
    vals = list(row.values())[1:12] + [row["speedup_ours"], row["speedup_max_exact_libjpeg"],
                                       row["speedup_max_exact_with_our_resize_patchify"], row["speedup_max_any"]]
    print(f"{name:<28} " + " ".join(f"{v:9.2f}" for v in vals))
print("x_ours = ref_e2e / best of ours; x_max_ex = ref_e2e / libjpeg full decode (ceiling for an "
      "exact decoder on libjpeg-turbo); x_ex+rp = ref_e2e / (libjpeg full + our resize + patchify); x_max_any = ref_e2e / libjpeg 1/8 decode (entropy-decoding floor)")
json.dump({"rows": rows, "reference_versions": ref["versions"], "ours_cpu": ours["cpu"],
           "runs": ours["runs"]}, open(out_path, "w"), indent=1)
PY
