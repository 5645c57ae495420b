#!/usr/bin/env bash
# Device run 146: where N + 1's time goes, profiled. Nsight Compute on rung 23 (the tree), fp16, d = 128,
# B = 16, H = 16, non-causal, N = 2048 / 2049 and 4096 / 4097 (one launch each, the GPU's own clocks):
# tensor-pipe busy cycles, elapsed cycles, clock, instructions, L2 / DRAM bytes, stalls.
set -uo pipefail
R=/tmp/run146; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCX.sh $R/run.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 16 --target ladder > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
M=$(cat scripts/ncu_hopper_metrics.txt),sm__pipe_tensor_op_hmma_cycles_active.avg,sm__pipe_tensor_op_hmma_cycles_active.max,sm__cycles_elapsed.avg,sm__cycles_elapsed.avg.per_second,sm__cycles_active.avg
for n in 2048 2049 4096 4097; do
  timeout 150 scripts/profile_ncu.sh 23 --n $n --batch 16 --heads 16 --d 128 --metrics $M --out $R/ncu_$n.csv > $R/ncu_$n.txt 2>&1
  echo "N=$n rc=$? $(( $(date +%s)-t0 )) s"
done
rm -f $R/*.ncu-rep
python3 - <<'PY'
import csv
rows = {}
for n in (2048, 2049, 4096, 4097):
    try:
        r = list(csv.reader(open(f'/tmp/run146/ncu_{n}.csv')))
        rows[n] = dict(zip(r[0], r[2]))
    except Exception as e:
        print(n, 'missing', e)
keys = [('gpu__time_duration.sum', 'duration'), ('sm__cycles_elapsed.avg.per_second', 'clock'),
        ('sm__cycles_elapsed.avg', 'elapsed cyc'), ('sm__pipe_tensor_op_hmma_cycles_active.avg', 'tensor cyc avg'),
        ('sm__pipe_tensor_op_hmma_cycles_active.max', 'tensor cyc max'),
        ('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active', 'tensor %'),
        ('smsp__inst_executed.sum', 'instr'), ('lts__t_bytes.sum', 'L2 B'), ('dram__bytes.sum', 'DRAM B'),
        ('smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio', 'st barrier'),
        ('smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio', 'st long sb'),
        ('smsp__average_warps_issue_stalled_wait_per_issue_active.ratio', 'st wait'),
        ('smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio', 'st gmma')]
f = lambda x: float(x.replace(',', ''))
for k, name in keys:
    v = [rows.get(n, {}).get(k) for n in (2048, 2049, 4096, 4097)]
    if None in v: print(name, v); continue
    v = [f(x) for x in v]
    print('%-15s %14.4g %14.4g %14.4g %14.4g | N+1/N %.4f %.4f' % (name, *v, v[1] / v[0], v[3] / v[2]))
PY
tar czf $OUT/run146.tgz -C /tmp run146
