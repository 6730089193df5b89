// act_schedule.cu — the forward's activation alone: one warp per SM partition turns 64 scores per
// thread into packed bf16 P with fast_gelu's 2f form (kernels/common/activations.cuh), as the
// consumer warpgroup does per step, in several source orders (plain, grouped with warp syncs, all
// z first, skewed). ptxas schedules all of them alike (a MUFU every ~8 instructions), so the
// difference is small; the point is the cost of the activation with nothing else on the SM.
// Build and run on an sm_90 GPU:  nvcc -arch=sm_90a -O3 -o act_schedule act_schedule.cu && ./act_schedule
// Seventeenth session, H200: 665-685 cycles per 64-score step including the loop's 96 stand-in
// instructions, against about 1000-1250 cycles inside the kernel (experiments/PERF_NOTES.md).
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
__device__ __forceinline__ float tanhx(float x){float y; asm("tanh.approx.f32 %0, %1;":"=f"(y):"f"(x)); return y;}
__device__ __forceinline__ unsigned pack(float a,float b){unsigned r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;":"=r"(r):"f"(b),"f"(a)); return r;}
__device__ __forceinline__ float zof(float x){return x*fmaf(0.0356774081f,x*x,0.7978845608f);}
__device__ __forceinline__ float g2(float x,float t){return fmaf(x,t,x);}
__device__ __forceinline__ void fence(){ asm volatile("" ::: "memory"); }
template<int V>
__device__ __forceinline__ void act(const float (&s)[64], unsigned (&p)[32]){
  if constexpr (V==0){
#pragma unroll
    for(int i=0;i<32;++i) p[i]=pack(g2(s[2*i],tanhx(zof(s[2*i]))),g2(s[2*i+1],tanhx(zof(s[2*i+1]))));
  } else if constexpr (V==1 || V==2 || V==3){ // groups of G pairs separated by a warp sync
    constexpr int G = V==1?8:(V==2?4:16);
#pragma unroll
    for(int g=0;g<32;g+=G){
#pragma unroll
      for(int i=g;i<g+G;++i) p[i]=pack(g2(s[2*i],tanhx(zof(s[2*i]))),g2(s[2*i+1],tanhx(zof(s[2*i+1]))));
      __syncwarp();
    }
  } else if constexpr (V==4){ // z of all first, then t in place
    float z[64];
#pragma unroll
    for(int i=0;i<64;++i) z[i]=zof(s[i]);
#pragma unroll
    for(int i=0;i<32;++i) p[i]=pack(g2(s[2*i],tanhx(z[2*i])),g2(s[2*i+1],tanhx(z[2*i+1])));
  } else if constexpr (V==5 || V==6){ // skewed: t of pair i with z of pair i+D, groups fenced by warp sync
    constexpr int D = 4;
    float z[64];
#pragma unroll
    for(int i=0;i<D;++i){ z[2*i]=zof(s[2*i]); z[2*i+1]=zof(s[2*i+1]); }
#pragma unroll
    for(int i=0;i<32;++i){
      if(i+D<32){ z[2*(i+D)]=zof(s[2*(i+D)]); z[2*(i+D)+1]=zof(s[2*(i+D)+1]); }
      float t0=tanhx(z[2*i]), t1=tanhx(z[2*i+1]);
      p[i]=pack(g2(s[2*i],t0),g2(s[2*i+1],t1));
      if(V==6 && (i%4)==3) __syncwarp();
    }
  }
}
template<int V>
__global__ void k(const float* in, unsigned* out, long long* cyc, int iters){
  float s[64]; unsigned p[32];
  for(int i=0;i<64;++i) s[i]=in[(blockIdx.x*blockDim.x+threadIdx.x)*64+i];
  unsigned acc=0;
  __syncthreads();
  long long t0=clock64();
  for(int it=0;it<iters;++it){
    act<V>(s,p);
#pragma unroll
    for(int i=0;i<32;++i){ acc^=p[i]; }
#pragma unroll
    for(int i=0;i<64;++i) s[i]=s[i]*1.0001f;   // 64 FMULs per step: new scores (stands in for the GEMM)
  }
  long long t1=clock64();
  out[blockIdx.x*blockDim.x+threadIdx.x]=acc;
  if(threadIdx.x%32==0) cyc[blockIdx.x*32+threadIdx.x/32]=t1-t0;
}
int main(){
  const int threads=128, blocks=132, iters=2000;
  float* in; unsigned* o; long long* c;
  cudaMalloc(&in,sizeof(float)*64*threads*blocks); cudaMalloc(&o,1<<22); cudaMalloc(&c,1<<20);
  float* h=new float[64*threads*blocks]; unsigned x=1; for(int i=0;i<64*threads*blocks;++i){x=x*1664525u+1013904223u; h[i]=((x>>8)/16777216.0f-0.5f)*6;}
  cudaMemcpy(in,h,sizeof(float)*64*threads*blocks,cudaMemcpyHostToDevice);
  const char* names[]={"plain loop (the kernel's order)","groups of 8 pairs + syncwarp","groups of 4 pairs + syncwarp","groups of 16 pairs + syncwarp","all z first","skewed by 4 pairs","skewed by 4, syncwarp every 4"};
  long long hc[32];
  for(int v=0;v<7;++v){
    for(int rep=0;rep<2;++rep){
      switch(v){case 0:k<0><<<blocks,threads>>>(in,o,c,iters);break;case 1:k<1><<<blocks,threads>>>(in,o,c,iters);break;
      case 2:k<2><<<blocks,threads>>>(in,o,c,iters);break;case 3:k<3><<<blocks,threads>>>(in,o,c,iters);break;
      case 4:k<4><<<blocks,threads>>>(in,o,c,iters);break;case 5:k<5><<<blocks,threads>>>(in,o,c,iters);break;
      case 6:k<6><<<blocks,threads>>>(in,o,c,iters);break;}
    }
    cudaError_t e=cudaDeviceSynchronize(); if(e){printf("err %s\n",cudaGetErrorString(e));return 1;}
    cudaMemcpy(hc,c,sizeof(hc),cudaMemcpyDeviceToHost);
    long long mx=0; for(int w=0;w<4;++w) if(hc[w]>mx) mx=hc[w];
    printf("%-40s %.0f cycles per 64-score step per warp (MUFU floor 512; incl. 64 FMUL + 32 LOP of the harness)\n",names[v],(double)mx/iters);
  }
  return 0;
}
