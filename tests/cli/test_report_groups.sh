#!/usr/bin/env bash
# imshard report: runs that differ only in threads per rank form one
# scaling group (the page shows each run's threads), and the final top-1
# charts draw one point per x (the mean of runs sharing it), never a line
# that runs back or straight up between two runs at one x.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

opts() { # WORLD BATCH SEED THREADS
  printf '"options":{"train":"p/train.json","val":"p/val.json","epochs":2,"batch_size":%s,"lr":0.1,"model":"convnet7","size":32,"threads":%s,"world":%s,"seed":%s,"optimizer":"sgd","device":"cpu","precision":"fp32","augment":"flip"}' "$2" "$4" "$1" "$3"
}
train() { # RANK STEP IPS WALL
  printf '{"type":"train","rank":%s,"epoch":0,"step":%s,"loss":2,"accuracy":0.3,"lr":0.1,"images_per_s":%s,"data_wait_ms":1,"compute_ms":95,"comm_ms":0,"steps":5,"wall_s":%s}\n' "$@"
}
# fixture DIR WORLD THREADS BATCH SEED TOP1
fixture() {
  local d=$1 w=$2 t=$3 bt=$4 seed=$5 top=$6 r busy=1.7 wait=0.02 comm=0
  mkdir -p "$d"
  {
    for ((r = 0; r < w; r++)); do train $r 5 50 1.0; train $r 10 100 1.5; done
    echo "{\"type\":\"val\",\"epoch\":0,\"step\":10,\"loss\":1.7,\"top1\":$top,\"top5\":0.9,\"records\":40,\"wall_s\":2.2,\"val_s\":0.15}"
  } >"$d/metrics.jsonl"
  for ((r = 1; r < w; r++)); do busy="$busy,1.8"; wait="$wait,0.02"; comm="$comm,0.5"; done
  echo "{\"world\":$w,\"model\":\"convnet7\",\"device\":\"cpu\",\"threads\":$t,\"batch_per_rank\":$bt,\"global_batch\":$((bt * w)),\"images\":$((100 * w)),\"train_s\":2.5,\"startup_s\":0.1,\"busy_s\":[$busy],\"data_wait_s_per_rank\":[$wait],\"comm_s_per_rank\":[$comm],\"stall_fraction\":0.008,\"val_top1\":$top,\"val_s\":0.2,\"checkpoint_s\":0.1,$(opts "$w" "$bt" "$seed" "$t")}" >"$d/summary.json"
}
# one machine of 2 cores: 1 rank x 2 threads against 2 ranks x 1 thread;
# c and d: other 1-rank runs, d at a's global batch with another seed
fixture "$T/a" 1 2 10 1 0.5
fixture "$T/b" 2 1 10 7 0.6
fixture "$T/c" 1 1 20 3 0.55
fixture "$T/d" 1 2 10 5 0.4

expect 0 "$IMSHARD" report "$T/a" "$T/b" "$T/c" "$T/d" -o "$T/r.html"
# the scaling pair at the same batch per rank, despite other threads
contains "$T/out" "b (2 ranks) vs a, same batch per rank"
contains "$T/out" "d (1 rank) vs a, same batch per rank"
lacks "$T/out" "1 ranks"
contains "$T/r.html" "Scaling at the same batch per rank"
contains "$T/r.html" "threads / rank"
contains "$T/r.html" "different threads per rank"
# the group's key does not carry threads: they are not what set it apart
key=$(grep -o 'Scaling at the same batch per rank</h3>[^.]*' "$T/r.html")
case "$key" in *threads=*) fail "group key holds threads: $key" ;; esac
checks=$((checks + 1))

# final top-1 against global batch and against ranks: x only increases
# along each line; a and d (1 rank, global batch 10) are one point, their
# mean 45%
/usr/bin/python3 - "$T/r.html" >"$T/charts" <<'PY' || fail "chart check: $(cat "$T/charts")"
import re, sys
page = open(sys.argv[1]).read()
for cid in ("all-acc-batch", "all-acc-world"):
    m = re.search(r'<svg[^>]*id="%s".*?</svg>' % cid, page, re.S)
    if not m:
        sys.exit("no chart " + cid)
    for d in re.findall(r'<path class="mark"[^>]* d="([^"]*)"', m.group(0)):
        xs = [float(x) for x in re.findall(r'[ML]([-0-9.]+),', d)]
        if any(b <= a for a, b in zip(xs, xs[1:])):
            sys.exit("%s: a line goes back or straight up: %s" % (cid, d))
print("ok")
PY
contains "$T/charts" "ok"
contains "$T/r.html" "draw their mean top-1"

finish
