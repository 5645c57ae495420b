#!/usr/bin/env bash
# Device run 77: units (U) against the snake (A): ncu (DRAM, L2, duration) at d = 128 N = 4096 causal
# and d = 256 N = 2048 causal; 8 alternating rounds where run 76 had U below A.
set -uo pipefail
R=/tmp/run77; mkdir -p $R
t0=$(date +%s)
if [ ! -f build-pairs/libflash_ladder.so ] || [ ! -f /tmp/basesrc/build-base/libflash_ladder.so ]; then
  mkdir -p /tmp/basesrc && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/basesrc
  cp build-carry/base_snake/schedule.cuh build-carry/base_snake/final_hopper.cu /tmp/basesrc/kernels/23_final_hopper/
  for x in "build-pairs ." "/tmp/basesrc/build-base /tmp/basesrc"; do set -- $x
    cmake -S $2 -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
    cmake --build $1 -j 16 --target flash_ladder > $R/build.log 2>&1 &
  done; wait
fi
echo "builds $(( $(date +%s)-t0 )) s"
M=gpu__time_duration.sum,dram__bytes.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_lookup_hit.sum,lts__t_sectors_srcunit_tex_lookup_miss.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
known=$(ncu --query-metrics 2>/dev/null | awk 'NF {print $1}'); kept=()
IFS=, read -ra wanted <<<"$M"; for m in "${wanted[@]}"; do grep -qx "${m%%.*}" <<<"$known" && kept+=("$m"); done
MK=$(IFS=,; echo "${kept[*]}"); echo "metrics: $MK"
for shape in "16 4096 128" "16 2048 256"; do set -- $shape
  for v in A U; do lib=/tmp/basesrc/build-base/libflash_ladder.so; [ $v = U ] && lib=build-pairs/libflash_ladder.so
    LIB=$lib B=$1 N=$2 D=$3 CAUSAL=1 timeout 90 ncu --clock-control none --kernel-name regex:attention_kernel --launch-skip 2 --launch-count 1 --metrics "$MK" --csv --page raw python3 build-carry/ncu_lib.py > $R/ncu_${v}_d$3_n$2.csv 2> $R/ncu_${v}_d$3_n$2.err; echo "ncu $v d$3 n$2 rc=$?"
  done
done
echo "t $(( $(date +%s)-t0 )) s"
tar czf $OUT/run77.tgz -C /tmp run77
V="python3 build-carry/variants.py --libs A=/tmp/basesrc/build-base/libflash_ladder.so,U=build-pairs/libflash_ladder.so --rounds 8"
timeout 120 $V --d 128 --causal --n 2048,4096 --out $R/v.json > $R/v_d128c.txt 2>&1; echo "d128c rc=$?"
timeout 100 $V --d 256 --causal --n 1024,2048 --out $R/v.json > $R/v_d256c.txt 2>&1; echo "d256c rc=$?"
timeout 100 $V --d 64 --causal --n 1024,4096 --out $R/v.json > $R/v_d64c.txt 2>&1; echo "d64c rc=$?"
echo "total $(( $(date +%s)-t0 )) s"
cp build-carry/runAG.sh build-carry/ncu_lib.py $R/
tar czf $OUT/run77.tgz -C /tmp run77
python3 - <<'PY'
import csv,glob
for f in sorted(glob.glob('/tmp/run77/ncu_*.csv')):
    rows=[r for r in csv.reader(open(f))]
    hi=[i for i,r in enumerate(rows) if 'gpu__time_duration.sum' in r]
    if not hi: print(f, 'no data'); continue
    h=rows[hi[0]]; d=rows[-1]
    print(f.split('/')[-1], {k.split('.')[0][:28]: d[i] for i,k in enumerate(h) if '__' in k})
PY
cat $R/v_*.txt | grep "^d="
