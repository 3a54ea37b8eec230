// d500-bench-cuda: the yardstick of the harness's overhead on the GPU. The same cuBLAS call as the
// cuda backend's GEMM (cublasGemmEx, row-major C = A B as column-major C^T = B^T A^T, the dtype's
// data and compute types, CUBLAS_GEMM_DEFAULT) in a bare loop, without d500's harness, store or
// barrier: per repetition, CUDA events around the call on one stream and the wait for the second
// (the device duration), and the host's steady clock around the launch and the wait.
//   d500-bench-cuda N DTYPE [REPETITIONS [WARMUPS]]     DTYPE: fp32, tf32, bf16, fp16
// Prints one line: n, dtype, repetitions, the median device and host durations (seconds) and
// the device's TFLOP/s. launchers/bench-gpu.sh sets it beside d500's own figures.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backends/half.hpp"
#include "common/random.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void need(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "d500-bench-cuda: %s failed (CUDA: %s)\n", what, cudaGetErrorString(cudaGetLastError()));
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: d500-bench-cuda N DTYPE [REPETITIONS [WARMUPS]]   (DTYPE: fp32, tf32, bf16, fp16)\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const std::string dtype = argv[2];
  const int reps = argc > 3 ? std::atoi(argv[3]) : 50, warmups = argc > 4 ? std::atoi(argv[4]) : 5;
  cudaDataType_t data = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  std::size_t bytes = 4;
  if (dtype == "tf32")
    compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  else if (dtype == "bf16")
    data = CUDA_R_16BF, bytes = 2;
  else if (dtype == "fp16")
    data = CUDA_R_16F, bytes = 2;
  else if (dtype != "fp32")
    need(false, "DTYPE (fp32, tf32, bf16 or fp16)");
  need(n > 0 && reps > 0 && warmups >= 0, "N, REPETITIONS and WARMUPS (positive)");

  const std::size_t size = static_cast<std::size_t>(n) * static_cast<std::size_t>(n) * bytes;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  need(
      cudaMalloc(&a, size) == cudaSuccess && cudaMalloc(&b, size) == cudaSuccess && cudaMalloc(&c, size) == cudaSuccess,
      "cudaMalloc");
  // The operands d500's GEMM multiplies: uniform in [-1, 1) (d500's fill_uniform, two seeds),
  // rounded to the dtype. A GPU's speed on a GEMM depends on its data (the power its bits draw):
  // on an H100, a bare loop over sparse byte patterns ran 13% faster than over these values.
  const auto n2 = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<float> values(n2);
  std::vector<unsigned char> host(size);
  for (int m = 0; m < 2; ++m) {
    d500::fill_uniform(values.data(), n2, 0x5eed + m, -1.0f, 1.0f);
    for (std::size_t i = 0; i < n2; ++i) {
      if (bytes == 4) {
        std::memcpy(host.data() + 4 * i, &values[i], 4);
      } else {
        const std::uint16_t h = data == CUDA_R_16BF ? d500::to_bf16(values[i]) : d500::to_half(values[i]);
        std::memcpy(host.data() + 2 * i, &h, 2);
      }
    }
    need(cudaMemcpy(m == 0 ? a : b, host.data(), size, cudaMemcpyHostToDevice) == cudaSuccess, "cudaMemcpy");
  }
  need(cudaDeviceSynchronize() == cudaSuccess,
       "cudaDeviceSynchronize (the uploads landed before the timed stream reads them)");
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  need(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate");
  need(cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess, "cudaEventCreate");
  cublasHandle_t handle = nullptr;
  need(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  need(cublasSetStream(handle, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");

  const float alpha = 1.0f, beta = 0.0f;
  std::vector<double> device, wall;
  for (int r = 0; r < warmups + reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    cudaEventRecord(start, stream);
    const cublasStatus_t s = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, b, data, n, a, data, n,
                                          &beta, c, data, n, compute, CUBLAS_GEMM_DEFAULT);
    cudaEventRecord(stop, stream);
    need(cudaEventSynchronize(stop) == cudaSuccess, "cudaEventSynchronize");
    const auto t1 = std::chrono::steady_clock::now();
    need(s == CUBLAS_STATUS_SUCCESS, "cublasGemmEx");
    float ms = 0;
    need(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess, "cudaEventElapsedTime");
    if (r < warmups) continue;
    device.push_back(static_cast<double>(ms) * 1e-3);
    wall.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  const double dev = median(device), host_s = median(wall);
  std::printf("n=%d dtype=%s repetitions=%d device_median_s=%.9g host_median_s=%.9g device_tflops=%.4g\n", n,
              dtype.c_str(), reps, dev, host_s, 2.0 * n * n * static_cast<double>(n) / dev / 1e12);
  cublasDestroy(handle);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 0;
}
