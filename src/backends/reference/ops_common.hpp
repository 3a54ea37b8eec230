#pragma once
// What the reference implementations of the level-1 operators share: typed access to a node's
// buffers, broadcasting loops, a plain blocked GEMM, and the helpers that build table entries.
// Float tensors hold T (float for the timed reference, double for the yardstick); integer and
// bool tensors hold their own type in both.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/graph_ops.hpp"
#include "common/error.hpp"

namespace d500::ref {

using I = std::int64_t;

// The entry tables of each family (ops_*.cpp); op_table.cpp joins them.
void add_elementwise_ops(std::vector<OpSchema>& t);
void add_linalg_ops(std::vector<OpSchema>& t);
void add_conv_ops(std::vector<OpSchema>& t);
void add_norm_ops(std::vector<OpSchema>& t);
void add_shape_ops(std::vector<OpSchema>& t);
void add_reduce_ops(std::vector<OpSchema>& t);
void add_index_ops(std::vector<OpSchema>& t);
void add_rnn_ops(std::vector<OpSchema>& t);

// Both instantiations of a reference forward kernel, as an OpSchema's designated fields.
#define D500_FWD(fn) .fwd_f = fn<float>, .fwd_d = fn<double>

template <class T>
const T* cin(const NodeProblem& p, std::size_t i) {
  return i < p.in.size() ? p.in[i].as<const T>() : nullptr;
}
template <class T>
T* out(const NodeProblem& p, std::size_t j) {
  return j < p.out.size() ? p.out[j].as<T>() : nullptr;
}
template <class T>
const T* dout(const NodeProblem& p, std::size_t j) {
  return j < p.dout.size() ? p.dout[j].as<const T>() : nullptr;
}
template <class T>
T* din(const NodeProblem& p, std::size_t i) {
  return i < p.din.size() ? p.din[i].as<T>() : nullptr;
}
inline const Shape& shape_in(const NodeProblem& p, std::size_t i) { return *p.in[i].shape; }
inline const Shape& shape_out(const NodeProblem& p, std::size_t j) { return *p.out[j].shape; }

// When the node's output has no gradient (it is zero), zeroes every input gradient wanted and
// returns true: the backward pass has nothing else to do.
template <class T>
bool zero_without_upstream(const NodeProblem& p) {
  if (p.dout[0].present()) return false;
  for (std::size_t i = 0; i < p.din.size(); ++i)
    if (T* d = din<T>(p, i)) std::fill(d, d + p.in[i].numel(), T(0));
  return true;
}

// Reads an integer tensor (int64 or int32) as int64.
inline I int_at(const TensorView& t, I i) {
  return t.dtype == DType::I32 ? static_cast<const std::int32_t*>(t.data)[i]
                               : static_cast<const std::int64_t*>(t.data)[i];
}

// A shape or strides of at most kMaxRank axes, held without allocation: the reference kernels
// are timed, and a timed region allocates nothing. The loader refuses tensors of more axes.
inline constexpr std::size_t kMaxRank = 8;
struct Dims {
  std::array<I, kMaxRank> v{};
  std::size_t n = 0;
  Dims() = default;
  explicit Dims(const Shape& s) : n(s.size()) { std::copy(s.begin(), s.end(), v.begin()); }
  I operator[](std::size_t i) const { return v[i]; }
  I& operator[](std::size_t i) { return v[i]; }
  std::size_t size() const { return n; }
  bool empty() const { return n == 0; }
  I back() const { return v[n - 1]; }
  void push_back(I x) { v[n++] = x; }
  I count() const {
    I c = 1;
    for (std::size_t i = 0; i < n; ++i) c *= v[i];
    return c;
  }
  bool operator==(const Dims& o) const {
    return n == o.n && std::equal(v.begin(), v.begin() + static_cast<long>(n), o.v.begin());
  }
};

// The strides with which `from` (right-aligned, size-1 axes repeated) is read at every position
// of `to`.
inline Dims bstrides(const Dims& from, const Dims& to) {
  Dims st;
  st.n = to.n;
  const std::size_t off = to.n - from.n;
  I stride = 1;
  for (std::size_t i = from.n; i-- > 0;) {
    st[off + i] = from[i] == 1 ? 0 : stride;
    stride *= from[i];
  }
  return st;
}
inline Dims bstrides(const Shape& from, const Shape& to) { return bstrides(Dims(from), Dims(to)); }

// Calls f(position in out, offsets of the K operands) for every position of `out`, each operand
// read with its broadcast strides.
template <std::size_t K, class F>
void for_each_broadcast(const Dims& out, const std::array<Dims, K>& st, F&& f) {
  const std::size_t rank = out.size();
  const I total = out.count();
  if (total == 0) return;
  if (rank == 0) {
    std::array<I, K> z{};
    f(I{0}, z);
    return;
  }
  const I inner = out[rank - 1];
  std::array<I, K> in_st{}, base{};
  for (std::size_t k = 0; k < K; ++k) in_st[k] = st[k][rank - 1];
  std::array<I, kMaxRank> idx{};
  std::array<I, K> offs{};
  for (I pos = 0; pos < total; pos += inner) {
    for (I j = 0; j < inner; ++j) {
      for (std::size_t k = 0; k < K; ++k) offs[k] = base[k] + j * in_st[k];
      f(pos + j, offs);
    }
    for (std::size_t d = rank - 1; d-- > 0;) {
      ++idx[d];
      for (std::size_t k = 0; k < K; ++k) base[k] += st[k][d];
      if (idx[d] < out[d]) break;
      for (std::size_t k = 0; k < K; ++k) base[k] -= st[k][d] * out[d];
      idx[d] = 0;
    }
  }
}
template <std::size_t K, class F>
void for_each_broadcast(const Shape& out, const std::array<Dims, K>& st, F&& f) {
  for_each_broadcast<K>(Dims(out), st, std::forward<F>(f));
}

// dst (shape `to`) = the sum of src (shape `from`) over the axes `to` broadcasts along: the
// gradient of a broadcast input.
template <class T>
void reduce_to(const T* src, const Dims& from, T* dst, const Dims& to) {
  const I n = to.count();
  if (to == from) {
    std::copy(src, src + n, dst);
    return;
  }
  std::fill(dst, dst + n, T(0));
  for_each_broadcast<1>(from, {bstrides(to, from)}, [&](I pos, const std::array<I, 1>& o) { dst[o[0]] += src[pos]; });
}
template <class T>
void reduce_to(const T* src, const Shape& from, T* dst, const Shape& to) {
  reduce_to(src, Dims(from), dst, Dims(to));
}

// C = alpha op(A) op(B) + beta C; row-major; op(A) is M x K, op(B) is K x N. Loops ordered so
// that the innermost one runs over contiguous memory and vectorises; when B is transposed the
// inner products use eight independent partial sums (no reassociation the compiler must avoid).
template <class T>
void gemm(bool ta, bool tb, I M, I N, I K, T alpha, const T* A, I lda, const T* B, I ldb, T beta, T* C, I ldc) {
  for (I i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0))
      std::fill(c, c + N, T(0));
    else if (beta != T(1))
      for (I j = 0; j < N; ++j) c[j] *= beta;
  }
  if (!tb) {
    constexpr I kb = 256;  // a block of B's rows stays in cache across the rows of C
    for (I p0 = 0; p0 < K; p0 += kb) {
      const I p1 = std::min(K, p0 + kb);
      for (I i = 0; i < M; ++i) {
        T* c = C + i * ldc;
        for (I p = p0; p < p1; ++p) {
          const T a = alpha * (ta ? A[p * lda + i] : A[i * lda + p]);
          const T* b = B + p * ldb;
          for (I j = 0; j < N; ++j) c[j] += a * b[j];
        }
      }
    }
    return;
  }
  for (I i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    // op(A) row i: contiguous unless A is transposed.
    for (I j = 0; j < N; ++j) {
      const T* b = B + j * ldb;
      T acc[8] = {};
      I p = 0;
      if (!ta) {
        const T* a = A + i * lda;
        for (; p + 8 <= K; p += 8)
          for (int u = 0; u < 8; ++u) acc[u] += a[p + u] * b[p + u];
        for (; p < K; ++p) acc[0] += a[p] * b[p];
      } else {
        for (; p < K; ++p) acc[p & 7] += A[p * lda + i] * b[p];
      }
      T s = 0;
      for (int u = 0; u < 8; ++u) s += acc[u];
      c[j] += alpha * s;
    }
  }
}

// Shape inference of a reduction of input 0 over `axes`: made positive (refused when out of range
// or repeated) and kept as the node's `axes` attribute -- every axis when `axes` is empty and
// `all_when_empty` --, and the output's shape under the node's keepdims (default 1).
Shape reduced_shape(InferCtx& c, std::vector<I> axes, bool all_when_empty);

// Windows over three spatial axes (X [N, C, D, H, W]), in direct loops (ops_conv3d.cpp); ops_conv.cpp
// hands a rank-5 node to these.
bool is_3d(const NodeProblem& p);
Shape window3d_output(const Node& n, const Shape& x, I channels);
template <class T>
void conv3d_fwd(const NodeProblem& p);
template <class T>
void conv3d_bwd(const NodeProblem& p);
template <class T>
void pool3d_fwd(const NodeProblem& p, bool max);
template <class T>
void pool3d_bwd(const NodeProblem& p, bool max);
double window3d_flops(const NodeProblem& p, bool conv, bool backward);

// The logistic function, without overflow for either sign (Sigmoid, Softplus's gradient, Mish,
// the recurrent cells' gates).
template <class T>
T sigmoid(T x) {
  return x >= T(0) ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x));
}

inline double elems(const NodeProblem& p, std::size_t j = 0) { return static_cast<double>(p.out[j].numel()); }

// Relu's forward f and gradient g(x, dy), shared by Relu and the internal operators that end in
// one (AddRelu, BatchNormRelu): g tests x > 0, which the output y passes exactly where x does.
template <class T>
struct Relu {
  explicit Relu(const Node&) {}
  static constexpr bool kUsesY = false;
  T f(T x) const { return x > T(0) ? x : T(0); }
  T g(T x, T dy) const { return x > T(0) ? dy : T(0); }
};

}  // namespace d500::ref
