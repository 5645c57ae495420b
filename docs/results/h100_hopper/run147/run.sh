#!/usr/bin/env bash
# Device run 147: N = a narrow first visit's K and V loaded as boxes of 16 rows (tmKNarrow, tmVNarrow), not
# Bc rows of TMA's zero fill (run 146: L2 bytes 21% up at N = 2049). Producer only; the consumers' loops are
# A's instruction for instruction. Against A (HEAD): rung 23's GPU tests on N, variants.py balanced 12 rounds,
# then Nsight Compute on both at d = 128, N = 2048 / 2049.
set -uo pipefail
R=/tmp/run147; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCY.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp build-carry/v147/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target flash_ladder $2 > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A ladder & mk N "test_gpu ladder" &
wait
echo "builds $(( $(date +%s)-t0 )) s"
(cd /tmp/srcN && timeout 150 build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/test_N.txt 2>&1; echo "tests N rc=$?"; grep -E "PASSED|FAILED|OK \]" $R/test_N.txt | head -14)
echo "tests $(( $(date +%s)-t0 )) s"
tar czf $OUT/run147.tgz -C /tmp run147
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run147.tgz -C /tmp run147; }
L=A=/tmp/srcA/build/libflash_ladder.so,N=/tmp/srcN/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 2048,2049,4096,4097 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 2048,2049,4096,4097 --b 16 --out $R/v_d128c.json
name=d64 v --libs $L --d 64 --n 2048,2049 --b 16 --out $R/v_d64.json
for X in A N; do for n in 2048 2049; do (cd /tmp/src$X && timeout 60 scripts/profile_ncu.sh 23 --n $n --batch 16 --heads 16 --d 128 --metrics gpu__time_duration.sum,lts__t_bytes.sum,dram__bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg,smsp__inst_executed.sum --out $R/ncu_${X}_$n.csv > $R/ncu_${X}_$n.txt 2>&1; echo "ncu $X $n rc=$?"; grep -E '^(gpu__time|lts__t_bytes|dram__bytes|sm__pipe)' $R/ncu_${X}_$n.txt); done; done; rm -f $R/*.ncu-rep
python3 - <<'PY'
import json, glob, statistics as st
med = lambda a, b: st.median([x / y for x, y in zip(a, b)])
for f in sorted(glob.glob('/tmp/run147/v_*.json')):
    rows = {r['N']: r for r in json.load(open(f))}
    for n, r in sorted(rows.items()):
        ra = r['runs']
        extra = ''
        if n % 2 == 1 and n - 1 in rows:  # time(N+1)/time(N) = TFLOP/s(N) / TFLOP/s(N+1) x flops ratio
            rb = rows[n - 1]['runs']
            extra = ' | N+1 cost: ' + ' '.join('%s %.3f' % (X, med(rb[X], ra[X]) * ((n / (n - 1)) ** 2)) for X in ('A', 'N', 'cudnn'))
        print(f.split('/')[-1][2:-5], n, 'N/A %.3f' % med(ra['N'], ra['A']), 'A/cudnn %.3f' % med(ra['A'], ra['cudnn']), 'N/cudnn %.3f' % med(ra['N'], ra['cudnn']), r['ok'], extra)
PY
tar czf $OUT/run147.tgz -C /tmp run147
