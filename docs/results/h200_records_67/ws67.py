# Which merge each moved d = 96 call takes: the workspace rungs 66 and 67 ask (0 with splits > 1: a cluster).
import os, sys, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flash_ladder as fl
from flash_ladder import _ops
seen = []
orig = _ops._run_forward
def rec(lib, number, params, device):
    seen.append((number, lib.workspace_size(number, params)))
    return orig(lib, number, params, device)
_ops._run_forward = rec
print(torch.cuda.get_device_name(), torch.cuda.get_device_properties(0).multi_processor_count, "SMs")
for hq, hkv, B, nk in [(32, 8, 1, 8192), (32, 8, 1, 32768), (32, 8, 2, 4096), (32, 8, 3, 2048), (32, 8, 4, 4096),
                       (32, 8, 5, 1024), (32, 8, 7, 1024), (32, 8, 8, 1024), (32, 32, 1, 4096), (32, 32, 2, 1024)]:
    q = torch.randn(B, 1, hq, 96, device="cuda", dtype=torch.float16)
    k = torch.randn(B, nk, hkv, 96, device="cuda", dtype=torch.float16); v = torch.randn_like(k)
    row = []
    for n in (66, 67):
        seen.clear(); fl.attention_with_kvcache(q, k, v, causal=False, kernel=n); torch.cuda.synchronize()
        row.append(seen[-1][1])
    print(f"H {hq}/{hkv} B {B} Nk {nk}: workspace bytes rung 66 {row[0]}, rung 67 {row[1]}")
