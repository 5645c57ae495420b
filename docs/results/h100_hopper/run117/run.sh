#!/usr/bin/env bash
# Device run 117: which SM each block lands on and which L2 partition each SM is near (smprobe);
# where rung 23 and cuDNN move their L2 bytes (ncu, the L2 traffic split by source); and rung 23
# with the blocks' slots given by SM (S: by %smid; P: one L2 partition's SMs, then the other's)
# against the kernel (A), in one process (variants.py).
set -uo pipefail
R=/tmp/run117; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBU.sh $R/run.sh; cp build-carry/smprobe.cu build-carry/smgroups.py build-carry/v117/final_hopper.cu $R/
nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o /tmp/smprobe build-carry/smprobe.cu && /tmp/smprobe > $R/probe.txt
python3 build-carry/smgroups.py $R/probe.txt $R | tee $R/groups.txt | grep -v "^block\|^smid\|^group[01]:"
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp build-carry/v117/final_hopper.cu build-carry/v117/schedule.cuh /tmp/src$1/kernels/23_final_hopper/
  sed -i "s/#define FL23_ENV \"FL23_SLOTS\"/#define FL23_ENV \"FL23_SLOTS_$1\"/" /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 5 --target flash_ladder ladder > $R/build_$1.log 2>&1 || tail -20 $R/build_$1.log; }
mk S & mk P &
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 6 --target flash_ladder ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
export FL23_SLOTS_S=$(cat $R/slots_S.txt) FL23_SLOTS_P=$(cat $R/slots_P.txt)
tar czf $OUT/run117.tgz -C /tmp run117
v() { left=$(( 560 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --rounds 8 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run117.tgz -C /tmp run117; }
L=A=build/libflash_ladder.so,S=/tmp/srcS/build/libflash_ladder.so,P=/tmp/srcP/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 512,1024,4096,8192 --b 16 --out $R/v_d128.json
grep -h "k23 FL23" $R/v_d128.txt | sort | uniq -c
# ncu: the L2 traffic by source
W="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes.sum,lts__t_bytes.sum,lts__t_sectors.sum,lts__t_requests.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcnode_gpc.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_lookup_hit.sum,lts__t_sectors_srcunit_tex_lookup_miss.sum,lts__t_sectors_srcunit_ltcfabric_lookup_hit.sum,lts__t_sectors_srcunit_ltcfabric_lookup_miss.sum,lts__t_requests_srcunit_tex.sum,lts__t_requests_srcunit_ltcfabric.sum,lts__t_sectors_lookup_hit.sum,lts__t_sectors_lookup_miss.sum,l1tex__m_xbar2l1tex_read_bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum"
ncu --query-metrics > $R/query.txt 2>&1; grep -E "^(lts__|l1tex__m)" $R/query.txt | awk '{print $1}' > $R/query_lts.txt
known=$(awk 'NF {print $1}' $R/query.txt); kept=()
IFS=, read -ra wanted <<<"$W"; for m in "${wanted[@]}"; do grep -qx "${m%%.*}" <<<"$known" && kept+=("$m"); done
MK=$(IFS=,; echo "${kept[*]}"); echo "metrics kept ${#kept[@]} of $(echo $W | tr , '\n' | wc -l)"
for nb in "4096 4" "512 16"; do set -- $nb; n=$1; b=$2
  for lib in A P; do lad=build/ladder; [ $lib = P ] && lad=/tmp/srcP/build/ladder
    timeout 90 scripts/profile_ncu.sh 23 --n $n --batch $b --ladder $lad --metrics "$MK" --out $R/ncu23${lib}_$n.csv > $R/ncu23${lib}_$n.txt 2>&1; echo "ncu 23$lib $n rc=$? $(( $(date +%s)-t0 )) s"; done
  N=$n B=$b BE=cudnn timeout 90 ncu --clock-control none --kernel-name regex:"sdpa|flash|fmha|attn|attention" --launch-skip 2 --launch-count 1 --metrics "$MK" --csv --page raw python3 build-carry/ncu_sdpa2.py > $R/ncu_cudnn_$n.csv 2> $R/ncu_cudnn_$n.err; echo "ncu cudnn $n rc=$? $(( $(date +%s)-t0 )) s"
done
tar czf $OUT/run117.tgz -C /tmp run117
name=d128c v --libs $L --d 128 --causal --n 2048,4096 --b 16 --out $R/v_d128c.json
name=d64 v --libs $L --d 64 --n 512,4096 --b 16 --out $R/v_d64.json
python3 - <<'PY'
import csv, glob, json, statistics as st
for f in sorted(glob.glob('/tmp/run117/ncu*.csv')):
    rows = [r for r in csv.reader(open(f)) if r]
    try:
        h = rows.index(next(r for r in rows if "Kernel Name" in r)); names, units, vals = rows[h], rows[h+1], rows[h+2]
    except Exception as e:
        print(f, "no data", e); continue
    d = dict(zip(names, vals))
    print(f.split('/')[-1], " ".join("%s=%s" % (k.split('.')[0].replace("lts__t_", "").replace("srcunit_", ""), v) for k, v in d.items() if k.startswith(("gpu__time", "lts__", "dram__bytes", "l1tex__m"))))
for f in sorted(glob.glob('/tmp/run117/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        print(f.split('/')[-1][2:-5], r['N'], ' '.join('%s/A %.3f' % (x, st.median([m/a for m, a in zip(ra[x], ra['A'])])) for x in ('S', 'P')),
              'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), 'P', [round(m/a, 3) for m, a in zip(ra['P'], ra['A'])], r['ok'])
PY
tar czf $OUT/run117.tgz -C /tmp run117
