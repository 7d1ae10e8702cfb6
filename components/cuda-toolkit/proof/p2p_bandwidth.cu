// Peer-to-peer copy bandwidth between every ordered pair of GPUs, compiled with the toolkit's own
// nvcc by `gpuhost doctor --p2p` (components/cuda-toolkit/topology.ts parses what it prints):
//   p2p A B write W read R     GB/s of A's copies into B's memory and out of it, peer access on
//   p2p A B no-peer-access     the driver refuses peer access between them
//   p2p: not run: N GPU(s)     fewer than two GPUs
// Each direction copies 256 MiB five times after one untimed copy, timed with CUDA events on A.
#include <cstdio>
#include <cuda_runtime.h>

static const size_t kBytes = 256u << 20;
static const int kRepeats = 5;

static bool ok(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return true;
  std::printf("p2p: error: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// GB/s of `kRepeats` copies of kBytes from src (on srcDev) to dst (on dstDev), run on a's stream.
static double timed(int a, void *dst, int dstDev, const void *src, int srcDev) {
  cudaSetDevice(a);
  cudaStream_t s;
  cudaEvent_t start, stop;
  if (!ok(cudaStreamCreate(&s), "cudaStreamCreate")) return -1;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaMemcpyPeerAsync(dst, dstDev, src, srcDev, kBytes, s);
  cudaEventRecord(start, s);
  for (int i = 0; i < kRepeats; i++) cudaMemcpyPeerAsync(dst, dstDev, src, srcDev, kBytes, s);
  cudaEventRecord(stop, s);
  float ms = 0;
  const bool done = ok(cudaEventSynchronize(stop), "cudaMemcpyPeerAsync") && ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(s);
  return done && ms > 0 ? (double)kBytes * kRepeats / (ms / 1e3) / 1e9 : -1;
}

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  if (n < 2) {
    std::printf("p2p: not run: %d GPU(s)\n", n);
    return 0;
  }
  void **buf = new void *[n];
  for (int d = 0; d < n; d++) {
    cudaSetDevice(d);
    if (!ok(cudaMalloc(&buf[d], kBytes), "cudaMalloc")) return 1;
  }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      if (a == b) continue;
      int can = 0;
      cudaDeviceCanAccessPeer(&can, a, b);
      if (!can) {
        std::printf("p2p %d %d no-peer-access\n", a, b);
        continue;
      }
      cudaSetDevice(a);
      cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
        ok(e, "cudaDeviceEnablePeerAccess");
        std::printf("p2p %d %d no-peer-access\n", a, b);
        continue;
      }
      cudaGetLastError();
      const double write = timed(a, buf[b], b, buf[a], a);
      const double read = timed(a, buf[a], a, buf[b], b);
      if (write < 0 || read < 0) return 1;
      std::printf("p2p %d %d write %.1f read %.1f\n", a, b, write, read);
    }
  for (int d = 0; d < n; d++) {
    cudaSetDevice(d);
    cudaFree(buf[d]);
  }
  delete[] buf;
  return 0;
}
