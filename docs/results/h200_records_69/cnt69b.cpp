#include <cstdio>
#include <cstdint>
#include "kernels/69_decode_rows_two/splits.h"
using namespace fl::k69_decode_rows_two;
int main(){
  const int sms=132, per=2; const int64_t tb=32*1024, rows=64;
  for (int64_t b: {1,2,4,8,12,16,18,20,24,40,48,64}) for (int64_t nk: {4096,8192,16384,32768,131072}) {
    int64_t blocks=b*8, tiles=nk/64;
    int two=two_slot_splits(blocks,sms,per,tiles,tb,rows);
    int one=one_wave_splits(blocks,sms,tiles,tb,rows);
    int w=choose_splits(blocks,sms,split_slots_per_sm(tb,per),tiles,cut_pct(tb));
    int s68= one?one:price_splits(w,blocks,sms,tiles,tb,rows,per);
    int c2=choose_splits(blocks,sms,per,tiles,cut_pct(tb));
    printf("B=%3ld nk=%6ld blocks %4ld 68:%2d (chunk %5ld KiB)  2slot:%2d (chunk %5ld KiB) taken:%d\n",b,nk,blocks,s68,(tiles+s68-1)/s68*32,c2,(tiles+c2-1)/c2*32,two);
  }
}
