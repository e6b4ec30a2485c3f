#!/usr/bin/env bash
# Runs a doctest GPU test binary under one compute-sanitizer tool with every test case in its own
# process, JOBS processes at a time on the one GPU, so the whole suite fits the device's 10-minute
# call (run one after another, the suite takes far longer under memcheck / racecheck). Each case
# has its own time limit and log (OUT/TOOL/NN.log); the summary line per case and the verdict go
# to stdout. Hazards inside cuBLAS's sm90 GEMMs (nvjet_sm90_*: warp-specialized pipelines
# synchronized by mbarriers, which racecheck does not model) are counted apart from this
# project's kernels; anything else (a memcheck error, a hazard in our kernels, an internal
# sanitizer error, a failed or timed-out case) makes the verdict FAIL.
# Usage: sanitize_cases.sh TOOL BIN OUT [JOBS] [CASE_S] [EXCLUDE] [INCLUDE]
#   TOOL: memcheck | racecheck | initcheck | synccheck; JOBS default 6; CASE_S: per-case limit
#   in seconds (default 420); EXCLUDE / INCLUDE: doctest -tce / -tc filters of the cases
set -uo pipefail
TOOL="$1" BIN="$2" OUT="$3" JOBS="${4:-6}" CASE_S="${5:-420}" EXCLUDE="${6:-}" INCLUDE="${7:-*}"
mkdir -p "$OUT/$TOOL"
# Every case name; doctest filters treat ',' as a separator, so each name's commas become '?'.
mapfile -t cases < <("$BIN" -ltc -tc="$INCLUDE" ${EXCLUDE:+-tce="$EXCLUDE"} 2>/dev/null |
  grep -v -e '^\[doctest\]' -e '^=\+$' -e '^$')
[ "${#cases[@]}" -gt 0 ] || { echo "sanitize $TOOL: no test cases listed by $BIN"; exit 1; }
echo "sanitize $TOOL: ${#cases[@]} cases, $JOBS at a time, ${CASE_S} s each at most"
run_case() {
  local i="$1" name="$2" log
  log="$OUT/$TOOL/$(printf %02d "$i").log"
  local start=$SECONDS
  {
    echo "case: $name"
    timeout "$CASE_S" compute-sanitizer --tool "$TOOL" --error-exitcode 9 \
      "$BIN" -tc="${name//,/?}" 2>&1
    echo "exit: $? after $((SECONDS - start)) s"
  } >"$log"
}
export -f run_case
export TOOL BIN OUT CASE_S
for i in "${!cases[@]}"; do printf '%s\0%s\0' "$i" "${cases[$i]}"; done |
  xargs -0 -n 2 -P "$JOBS" bash -c 'run_case "$1" "$2"' _
verdict=clean
ours_total=0 nvjet_total=0
for log in "$OUT/$TOOL"/*.log; do
  name=$(sed -n 's/^case: //p' "$log")
  rc=$(sed -n 's/^exit: \([0-9]*\).*/\1/p' "$log")
  secs=$(sed -n 's/^exit: [0-9]* after \([0-9]*\) s/\1/p' "$log")
  errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log" | head -1)
  races=$(grep "Race reported between" "$log")
  ours=$(grep -v " access at nvjet_" <<<"$races" | grep -c "Race reported")
  nvjet=$(grep -c " access at nvjet_" <<<"$races")
  internal=$(grep -c "Internal Sanitizer Error" "$log")
  passed=$(grep -c "Status: SUCCESS" "$log")
  ours_total=$((ours_total + ours)) nvjet_total=$((nvjet_total + nvjet))
  ok=clean
  case "$TOOL" in
    racecheck) [ "$ours" -eq 0 ] && [ "$internal" -eq 0 ] && [ "$passed" -eq 1 ] || ok=FAIL ;;
    *) [ "${rc:-1}" = 0 ] && [ "$internal" -eq 0 ] || ok=FAIL ;;
  esac
  [ "$ok" = clean ] || verdict=FAIL
  printf '  %-5s %4ss rc=%-3s errors=%-4s ours=%-3s nvjet=%-4s %s\n' "$ok" "${secs:-?}" \
    "${rc:-?}" "${errors:-?}" "$ours" "$nvjet" "$name"
done
echo "sanitize $TOOL: hazards in this project's kernels $ours_total, in cuBLAS nvjet GEMMs" \
  "$nvjet_total (not ours): $verdict"
[ "$verdict" = clean ]
