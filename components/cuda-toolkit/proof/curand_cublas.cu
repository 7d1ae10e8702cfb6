// Proof by execution for CudaToolkit: the toolkit is usable only if a program using curand and
// cublas (what FlashInfer's sampling kernels and PyTorch need) compiles, links and runs.
// Exit status 0 and the "gpuhost-proof: ok" line mean the GPU really generated and summed.
#include <cstdio>
#include <cuda_runtime.h>
#include <curand.h>
#include <cublas_v2.h>

int main() {
  const int n = 1 << 16;
  float *d = nullptr;
  if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) { std::puts("gpuhost-proof: cudaMalloc failed"); return 1; }
  curandGenerator_t gen;
  if (curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_DEFAULT) != CURAND_STATUS_SUCCESS) { std::puts("gpuhost-proof: curand failed"); return 1; }
  curandSetPseudoRandomGeneratorSeed(gen, 1234ULL);
  if (curandGenerateUniform(gen, d, n) != CURAND_STATUS_SUCCESS) { std::puts("gpuhost-proof: curandGenerateUniform failed"); return 1; }
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) { std::puts("gpuhost-proof: cublasCreate failed"); return 1; }
  float sum = 0.0f;
  if (cublasSasum(handle, n, d, 1, &sum) != CUBLAS_STATUS_SUCCESS) { std::puts("gpuhost-proof: cublasSasum failed"); return 1; }
  // Uniform(0,1] over n samples sums to about n/2.
  const bool plausible = sum > n * 0.45f && sum < n * 0.55f;
  std::printf("gpuhost-proof: %s curand+cublas sum=%.1f n=%d\n", plausible ? "ok" : "implausible", sum, n);
  cublasDestroy(handle);
  curandDestroyGenerator(gen);
  cudaFree(d);
  return plausible ? 0 : 1;
}
