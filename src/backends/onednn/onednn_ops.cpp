// The `onednn` backend's neural-network operators: one oneDNN primitive per problem, created with
// the point (untimed). Convolutions let oneDNN choose its memory formats (format_tag::any, as
// frameworks built on oneDNN do) and reorder inputs into them before timing and outputs back to
// NCHW after; pooling, batch normalisation, ReLU and softmax run on the plain NCHW buffers.
#include <omp.h>
#include <map>

#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "backends/onednn/onednn_backend.hpp"
#include "common/error.hpp"

namespace d500 {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

class DnnlKernel final : public OpKernel {
 public:
  DnnlKernel() = default;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;

  // Binds a user buffer to a primitive argument, through a reorder (done now) when the primitive
  // wants another format.
  void input(int arg, const memory::desc& want, const memory::desc& user_md, const float* data) {
    memory user(user_md, engine, const_cast<float*>(data));  // oneDNN takes non-const handles; it only reads
    if (want == user_md) {
      args[arg] = user;
      return;
    }
    memory m(want, engine);
    dnnl::reorder(user, m).execute(stream, user, m);
    stream.wait();
    args[arg] = m;
  }
  void output(int arg, const memory::desc& want, const memory::desc& user_md, float* data) {
    memory user(user_md, engine, data);
    if (want == user_md) {
      args[arg] = user;
      return;
    }
    memory m(want, engine);
    args[arg] = m;
    back_.push_back({m, user});
  }
  void scratch(int arg, const memory::desc& md) { args[arg] = memory(md, engine); }

  void run() override {
    prim.execute(stream, args);
    stream.wait();
  }
  void finish() override {
    for (auto& [from, to] : back_) dnnl::reorder(from, to).execute(stream, from, to);
    stream.wait();
  }

 private:
  std::vector<std::pair<memory, memory>> back_;
};

memory::desc plain(const Tensor& t) {
  memory::dims d(t.dims.begin(), t.dims.end());
  const tag f = d.size() == 4 ? tag::nchw : d.size() == 2 ? tag::nc : tag::a;
  return memory::desc(d, dt::f32, f);
}

void make_conv(DnnlKernel& k, OpProblem& p) {
  const ConvShape cs = conv_shape(p);
  const memory::dims src{cs.n, cs.c, cs.h, cs.w}, dst{cs.n, cs.k, cs.p(), cs.q()};
  const memory::dims wei =
      cs.groups > 1 ? memory::dims{cs.groups, cs.kg(), cs.cg(), cs.r, cs.s} : memory::dims{cs.k, cs.c, cs.r, cs.s};
  const tag wtag = cs.groups > 1 ? tag::goihw : tag::oihw;
  const memory::desc src_u(src, dt::f32, tag::nchw), dst_u(dst, dt::f32, tag::nchw), wei_u(wei, dt::f32, wtag);
  const memory::desc src_a(src, dt::f32, tag::any), dst_a(dst, dt::f32, tag::any), wei_a(wei, dt::f32, tag::any);
  const memory::dims strides{cs.stride, cs.stride}, dil{cs.dilation - 1, cs.dilation - 1}, pad{cs.pad, cs.pad};
  using namespace dnnl;
  convolution_forward::primitive_desc fwd(
      convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, src_a, wei_a, dst_a,
                                strides, dil, pad, pad),
      k.engine);
  if (p.pass == "forward") {
    k.prim = convolution_forward(fwd);
    k.input(DNNL_ARG_SRC, fwd.src_desc(), src_u, p.in[0].data.data());
    k.input(DNNL_ARG_WEIGHTS, fwd.weights_desc(), wei_u, p.in[1].data.data());
    k.output(DNNL_ARG_DST, fwd.dst_desc(), dst_u, p.out[0].data.data());
  } else if (p.pass == "backward_data") {
    convolution_backward_data::primitive_desc bwd(
        convolution_backward_data::desc(algorithm::convolution_direct, src_a, wei_a, dst_a, strides, dil, pad, pad),
        k.engine, fwd);
    k.prim = convolution_backward_data(bwd);
    k.input(DNNL_ARG_DIFF_DST, bwd.diff_dst_desc(), dst_u, p.in[0].data.data());
    k.input(DNNL_ARG_WEIGHTS, bwd.weights_desc(), wei_u, p.in[1].data.data());
    k.output(DNNL_ARG_DIFF_SRC, bwd.diff_src_desc(), src_u, p.out[0].data.data());
  } else {
    convolution_backward_weights::primitive_desc bwd(
        convolution_backward_weights::desc(algorithm::convolution_direct, src_a, wei_a, dst_a, strides, dil, pad, pad),
        k.engine, fwd);
    k.prim = convolution_backward_weights(bwd);
    k.input(DNNL_ARG_SRC, bwd.src_desc(), src_u, p.in[0].data.data());
    k.input(DNNL_ARG_DIFF_DST, bwd.diff_dst_desc(), dst_u, p.in[1].data.data());
    k.output(DNNL_ARG_DIFF_WEIGHTS, bwd.diff_weights_desc(), wei_u, p.out[0].data.data());
  }
}

void make_pool(DnnlKernel& k, OpProblem& p) {
  const PoolShape ps = pool_shape(p);
  using namespace dnnl;
  const algorithm alg = ps.max ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding;
  const memory::desc x = plain(p.in[0]);
  const memory::desc y(memory::dims{ps.n, ps.c, ps.p(), ps.q()}, dt::f32, tag::nchw);
  const memory::dims strides{ps.stride, ps.stride}, kernel{ps.kernel, ps.kernel}, pad{ps.pad, ps.pad};
  if (p.pass == "forward") {
    pooling_forward::primitive_desc fwd(
        pooling_forward::desc(prop_kind::forward_inference, alg, x, y, strides, kernel, pad, pad), k.engine);
    k.prim = pooling_forward(fwd);
    k.input(DNNL_ARG_SRC, x, x, p.in[0].data.data());
    k.output(DNNL_ARG_DST, y, y, p.out[0].data.data());
    return;
  }
  // Max pooling's backward pass reads the positions of the maxima from a workspace that a
  // training forward pass writes: run that forward once here, untimed.
  pooling_forward::primitive_desc fwd(
      pooling_forward::desc(prop_kind::forward_training, alg, x, y, strides, kernel, pad, pad), k.engine);
  pooling_backward::primitive_desc bwd(pooling_backward::desc(alg, x, y, strides, kernel, pad, pad), k.engine, fwd);
  k.prim = pooling_backward(bwd);
  k.input(DNNL_ARG_DIFF_DST, y, y, p.in[1].data.data());
  k.output(DNNL_ARG_DIFF_SRC, x, x, p.out[0].data.data());
  if (ps.max) {
    memory ws(fwd.workspace_desc(), k.engine), ytmp(y, k.engine);
    memory xs(x, k.engine, p.in[0].data.data());
    pooling_forward(fwd).execute(k.stream, {{DNNL_ARG_SRC, xs}, {DNNL_ARG_DST, ytmp}, {DNNL_ARG_WORKSPACE, ws}});
    k.stream.wait();
    k.args[DNNL_ARG_WORKSPACE] = ws;
  }
}

void make_bn(DnnlKernel& k, OpProblem& p) {
  using namespace dnnl;
  const auto eps = static_cast<float>(std::get<double>(p.params.at("eps")));
  const memory::desc x = plain(p.in[0]);
  const memory::desc ch = plain(p.in.back());  // a per-channel vector
  const bool training = p.s("mode") == "training";
  auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
  if (!training) flags = flags | normalization_flags::use_global_stats;
  batch_normalization_forward::primitive_desc fwd(
      batch_normalization_forward::desc(training ? prop_kind::forward_training : prop_kind::forward_inference, x, eps,
                                        flags),
      k.engine);
  if (p.pass == "forward") {
    k.prim = batch_normalization_forward(fwd);
    k.input(DNNL_ARG_SRC, x, x, p.input("x").data.data());
    k.input(DNNL_ARG_SCALE, ch, ch, p.input("gamma").data.data());
    k.input(DNNL_ARG_SHIFT, ch, ch, p.input("beta").data.data());
    k.output(DNNL_ARG_DST, x, x, p.output("y").data.data());
    if (training) {
      k.output(DNNL_ARG_MEAN, ch, ch, p.output("mean").data.data());
      k.output(DNNL_ARG_VARIANCE, ch, ch, p.output("var").data.data());
    } else {
      k.input(DNNL_ARG_MEAN, ch, ch, p.input("mean").data.data());
      k.input(DNNL_ARG_VARIANCE, ch, ch, p.input("var").data.data());
    }
  } else {
    batch_normalization_backward::primitive_desc bwd(
        batch_normalization_backward::desc(prop_kind::backward, x, x, eps, flags), k.engine, fwd);
    k.prim = batch_normalization_backward(bwd);
    k.input(DNNL_ARG_SRC, x, x, p.input("x").data.data());
    k.input(DNNL_ARG_DIFF_DST, x, x, p.input("dy").data.data());
    k.input(DNNL_ARG_SCALE, ch, ch, p.input("gamma").data.data());
    k.input(DNNL_ARG_MEAN, ch, ch, p.input("mean").data.data());
    k.input(DNNL_ARG_VARIANCE, ch, ch, p.input("var").data.data());
    // oneDNN 2.6 refuses to execute the backward pass with use_shift unless a shift is bound,
    // though the gradient does not depend on it.
    k.scratch(DNNL_ARG_SHIFT, ch);
    k.output(DNNL_ARG_DIFF_SRC, x, x, p.output("dx").data.data());
    k.output(DNNL_ARG_DIFF_SCALE, ch, ch, p.output("dgamma").data.data());
    k.output(DNNL_ARG_DIFF_SHIFT, ch, ch, p.output("dbeta").data.data());
  }
}

void make_relu(DnnlKernel& k, OpProblem& p) {
  using namespace dnnl;
  const memory::desc x = plain(p.in[0]);
  eltwise_forward::primitive_desc fwd(
      eltwise_forward::desc(prop_kind::forward_training, algorithm::eltwise_relu, x, 0.0f, 0.0f), k.engine);
  if (p.pass == "forward") {
    k.prim = eltwise_forward(fwd);
    k.input(DNNL_ARG_SRC, x, x, p.in[0].data.data());
    k.output(DNNL_ARG_DST, x, x, p.out[0].data.data());
  } else {
    eltwise_backward::primitive_desc bwd(eltwise_backward::desc(algorithm::eltwise_relu, x, x, 0.0f, 0.0f), k.engine,
                                         fwd);
    k.prim = eltwise_backward(bwd);
    k.input(DNNL_ARG_SRC, x, x, p.in[0].data.data());
    k.input(DNNL_ARG_DIFF_DST, x, x, p.in[1].data.data());
    k.output(DNNL_ARG_DIFF_SRC, x, x, p.out[0].data.data());
  }
}

void make_softmax(DnnlKernel& k, OpProblem& p) {
  using namespace dnnl;
  const memory::desc x = plain(p.in[0]);
  softmax_forward::primitive_desc fwd(softmax_forward::desc(prop_kind::forward_training, x, 1), k.engine);
  if (p.pass == "forward") {
    k.prim = softmax_forward(fwd);
    k.input(DNNL_ARG_SRC, x, x, p.in[0].data.data());
    k.output(DNNL_ARG_DST, x, x, p.out[0].data.data());
  } else {
    softmax_backward::primitive_desc bwd(softmax_backward::desc(x, x, 1), k.engine, fwd);
    k.prim = softmax_backward(bwd);
    k.input(DNNL_ARG_DST, x, x, p.in[0].data.data());
    k.input(DNNL_ARG_DIFF_DST, x, x, p.in[1].data.data());
    k.output(DNNL_ARG_DIFF_SRC, x, x, p.out[0].data.data());
  }
}

// The one table of the operators oneDNN's primitives run here: what the backend supports and
// what makes each kernel.
using MakeOp = void (*)(DnnlKernel&, OpProblem&);
const std::map<std::string, MakeOp>& op_table() {
  static const std::map<std::string, MakeOp> t = {{"conv2d", make_conv},
                                                  {"pool2d", make_pool},
                                                  {"batchnorm", make_bn},
                                                  {"relu", make_relu},
                                                  {"softmax", make_softmax}};
  return t;
}

}  // namespace

bool onednn_supports(const std::string& op) { return op_table().count(op) > 0; }

std::unique_ptr<OpKernel> make_onednn_kernel(OpProblem& p, int threads) {
  omp_set_num_threads(threads);
  auto k = std::make_unique<DnnlKernel>();
  const auto make = op_table().find(p.op);
  if (make == op_table().end()) throw Error("the onednn backend has no " + p.op);
  try {
    make->second(*k, p);
  } catch (const dnnl::error& e) {
    throw Error("oneDNN " + p.op + " " + p.pass + ": " + e.what());
  }
  return k;
}

}  // namespace d500
