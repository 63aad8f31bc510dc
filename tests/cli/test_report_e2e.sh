#!/usr/bin/env bash
# imshard report, end to end: a real short convnet7 run on 1 rank and on 2
# ranks (mpirun) on the sample data, rendered into a report that headless
# Chromium opens: its screenshot is a non-blank PNG, and in the page as
# Chromium laid it out every expected chart is present with drawn marks of
# non-zero size. Skipped (77) without mpirun (or MPI in the build) or
# Chromium (scripts/setup.sh installs Debian's chromium).
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

have_mpi || { echo "skip: no mpirun, or a build without MPI"; exit 77; }
browser=""
for b in chromium chromium-browser google-chrome; do
  command -v "$b" >/dev/null && { browser=$(command -v "$b"); break; }
done
[ -n "$browser" ] || { echo "skip: no chromium (scripts/setup.sh installs it)"; exit 77; }

# OpenMPI's components leak at MPI_Finalize (see test_train.sh): no leak
# checking for the processes mpirun starts.
mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" mpirun "$@"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 16 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
# the same job at 1 and 2 ranks: batch 8 per rank, 2 epochs of the same
# 48 images, 1 thread per rank
common=(--train "$T/p/train.json" --val "$T/p/val.json" --model convnet7 --size 16
  --threads 1 --batch-size 8 --epochs 2 --lr 0.05 --log-every 2 --quiet)
expect 0 "$IMSHARD_TRAIN" "${common[@]}" --log-dir "$T/np1"
expect 0 mpi -np 2 --bind-to none "$IMSHARD_TRAIN" "${common[@]}" --log-dir "$T/np2"
exists "$T/np2/summary.json"

expect 0 "$IMSHARD" report "$T/np1" "$T/np2" -o "$T/report.html" --csv "$T/csv" --target-acc 0.3
contains "$T/out" "np2 (2 ranks) vs np1, same batch per rank: speedup_speed"
same "$(cat "$T/err")" "imshard: report: wrote '$T/report.html' (2 runs) and its CSV files into '$T/csv'" "no warnings for a clean run"
# both speedups are numbers (not nan), efficiencies within sense
/usr/bin/python3 - "$T/csv/scaling.csv" <<'PY' || fail "scaling.csv figures"
import csv, math, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["run"] == "np2"]
assert len(rows) == 1, rows
r = rows[0]
for k in ("speedup_speed", "efficiency_speed", "speedup_time", "efficiency_time"):
    v = float(r[k])
    assert math.isfinite(v) and 0 < v < 4, (k, v)
assert r["time_per_image"] == "0", "same epochs, same images"
PY
checks=$((checks + 1))

# --- what Chromium shows -------------------------------------------------------
chrome() {
  "$browser" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$T/chrome" "$@" 2>>"$T/chrome.log"
}
chrome --screenshot="$T/shot.png" --window-size=1100,1800 "file://$T/report.html" >/dev/null
exists "$T/shot.png"
read -r w h colours inked < <(/usr/bin/python3 "$IMS_SRC/tests/cli/png_info.py" "$T/shot.png")
same "$w x $h" "1100 x 1800" "screenshot size"
checks=$((checks + 1))
[ "${colours:-0}" -gt 20 ] && awk -v i="${inked:-0}" 'BEGIN { exit !(i > 0.02) }' ||
  fail "the screenshot looks blank ($colours colours, $inked inked)"

# A copy of the page with a script that measures every chart's marks as
# laid out (the report itself has no script), read back with --dump-dom.
/usr/bin/python3 - "$T/report.html" "$T/check.html" <<'PY'
import sys
page = open(sys.argv[1]).read()
probe = """<script>
var out = {};
document.querySelectorAll("svg[data-chart]").forEach(function (s) {
  var box = s.getBoundingClientRect(), drawn = 0;
  s.querySelectorAll(".mark").forEach(function (m) {
    var b = m.getBBox();
    if (b.width > 0 || b.height > 0) drawn++;
  });
  out[s.id] = {kind: s.getAttribute("data-chart"), w: box.width, h: box.height, drawn: drawn};
});
var pre = document.createElement("pre");
pre.id = "imshard-check";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>
"""
open(sys.argv[2], "w").write(page.replace("</body>", probe + "</body>"))
PY
chrome --dump-dom --virtual-time-budget=3000 "file://$T/check.html" >"$T/dom.html"
/usr/bin/python3 - "$T/dom.html" >"$T/charts.txt" <<'PY' || fail "charts as Chromium drew them"
import html, json, re, sys
m = re.search(r'<pre id="imshard-check">(.*?)</pre>', open(sys.argv[1]).read(), re.S)
assert m, "no measurements in the DOM (did the page load?)"
charts = json.loads(html.unescape(m.group(1)))
want = ["r%d-%s" % (r, k) for r in (0, 1) for k in
        ("loss-epoch", "accuracy-epoch", "loss-time", "accuracy-time", "throughput", "stall", "breakdown")]
want += ["g0-speedup", "g0-efficiency", "g0-decomposition", "all-val-epoch", "all-val-time",
         "all-acc-batch", "all-acc-world"]
bad = []
for cid in want:
    c = charts.get(cid)
    if not c or c["w"] < 100 or c["h"] < 100 or c["drawn"] < 1:
        bad.append((cid, c))
for cid, c in sorted(charts.items()):
    print(cid, c["kind"], c["drawn"])
assert not bad, bad
PY
checks=$((checks + 1))
contains "$T/charts.txt" "g0-speedup speedup"
finish
