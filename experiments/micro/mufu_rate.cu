// mufu_rate.cu — issue rate of the special-function unit (MUFU) on one SM partition: how many
// cycles one warp-wide tanh.approx.f32 / ex2.approx.f32 occupies it, next to FFMA and the forward's
// fast_gelu chain (x^2, FFMA, FMUL, tanh, FFMA), with one and two warps per partition. 132 blocks
// of 4 or 8 warps, 16 independent chains per thread, clock64 around the loop.
// Build and run on an sm_90 GPU:  nvcc -arch=sm_90a -O3 -o mufu_rate mufu_rate.cu && ./mufu_rate
// Seventeenth session, H200 (experiments/PERF_NOTES.md): tanh 8.0-8.1 cycles per warp instruction
// per partition (16 per cycle per SM), ex2 8.3, FFMA 1.15-1.3, the fast_gelu chain 11.9 per element
// with one warp, 9.7 with two.
#include <cstdio>
#include <cuda_runtime.h>
__device__ __forceinline__ float tanhx(float x){float y; asm volatile("tanh.approx.f32 %0, %1;":"=f"(y):"f"(x)); return y;}
__device__ __forceinline__ float ex2x(float x){float y; asm volatile("ex2.approx.f32 %0, %1;":"=f"(y):"f"(x)); return y;}
template<int OP>
__global__ void k(float* out, long long* cyc, int iters){
  float v[16];
  for(int i=0;i<16;++i) v[i]=0.001f*(threadIdx.x+i);
  __syncthreads();
  long long t0=clock64();
  for(int it=0;it<iters;++it){
#pragma unroll
    for(int i=0;i<16;++i){
      if(OP==0) v[i]=tanhx(v[i]);
      else if(OP==1) v[i]=ex2x(v[i])*-0.5f;
      else if(OP==2) v[i]=fmaf(v[i],0.999f,0.001f);
      else { // gelu-like chain: 4 FP32 + 1 MUFU, independent element per i, fed back
        float x=v[i]; float z=x*fmaf(0.0356774f,x*x,0.7978846f); float t=tanhx(z); v[i]=fmaf(x,t,x)*0.5f; }
    }
  }
  long long t1=clock64();
  float s=0; for(int i=0;i<16;++i) s+=v[i];
  out[blockIdx.x*blockDim.x+threadIdx.x]=s;
  if(threadIdx.x%32==0) cyc[blockIdx.x*32+threadIdx.x/32]=t1-t0;
}
int main(){
  float* o; long long* c; cudaMalloc(&o,1<<24); cudaMalloc(&c,1<<20);
  long long h[64];
  const char* names[]={"tanh.approx.f32","ex2.approx.f32 (+FMUL)","FFMA","fast_gelu chain (FMUL,FFMA,FMUL,MUFU,FFMA)"};
  for(int op=0;op<4;++op) for(int warps=4;warps<=8;warps+=4){
    int iters=4096;
    for(int rep=0;rep<2;++rep){
    if(op==0) k<0><<<132,32*warps>>>(o,c,iters);
    if(op==1) k<1><<<132,32*warps>>>(o,c,iters);
    if(op==2) k<2><<<132,32*warps>>>(o,c,iters);
    if(op==3) k<3><<<132,32*warps>>>(o,c,iters);
    }
    cudaError_t e=cudaDeviceSynchronize(); if(e){printf("err %s\n",cudaGetErrorString(e));return 1;}
    cudaMemcpy(h,c,sizeof(long long)*32,cudaMemcpyDeviceToHost);
    long long mx=0; for(int w=0;w<warps;++w) if(h[w]>mx) mx=h[w];
    double per_warp_instr = (double)mx/(iters*16.0);  // cycles per element-iteration per warp
    int per_smsp=warps/4;
    printf("%-45s warps/SMSP %d: %.2f cycles per warp-element per warp, SMSP: %.2f cycles per warp-element\n",names[op],per_smsp,per_warp_instr,per_warp_instr/per_smsp);
  }
  return 0;
}
