// cuDNN's graph API for one convolution pass (cudnn_graph_conv.hpp): tensors, the convolution
// and its operation, an operation graph of that one operation, heuristics' engine
// configurations, execution plans, and one variant pack, each a backend descriptor finalised in
// turn, as cuDNN's developer guide ("Graph API") lays them out.
#include "backends/cuda/cudnn_graph_conv.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace d500::cuda {

// What GraphConv::Impl holds (Desc, Candidate) and their helpers: a named namespace rather than an
// anonymous one, since a unity build includes this file into another, where a member of Impl's of
// a type of internal linkage is an error waiting to happen (GCC's -Wsubobject-linkage).
namespace graph_detail {

// What a refusal (GraphConvUnserved) suggests at level 0, where it fails the point.
constexpr const char* kLegacyHint = " (cudnn_api = \"legacy\" runs it through cuDNN's legacy calls)";

// The variant pack's names of the pass's three tensors (cuDNN's forward names: a backward pass's
// gradients take the place of what it differentiates).
constexpr std::int64_t kX = 'x', kW = 'w', kY = 'y';

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    cudnn_check(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&&) = delete;
  Desc(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t* address() { return &d_; }
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count, const void* values,
            const char* what) {
    cudnn_check(cudnnBackendSetAttribute(d_, name, type, count, values), what);
    return *this;
  }
  Desc& set(cudnnBackendAttributeName_t name, const Desc& other, const char* what) {
    const cudnnBackendDescriptor_t d = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d, what);
  }
  Desc& finalize(const char* what) {
    cudnn_check(cudnnBackendFinalize(d_), what);
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A tensor of `type` of four dimensions N C H W (K C R S for weights), packed in that order or,
// with `nhwc`, channels-last (N H W C in memory, K R S C for weights).
Desc tensor(std::int64_t uid, std::array<std::int64_t, 4> dims, cudnnDataType_t type, bool nhwc) {
  const std::array<std::int64_t, 4> strides =
      nhwc ? std::array<std::int64_t, 4>{dims[1] * dims[2] * dims[3], 1, dims[3] * dims[1], dims[1]}
           : std::array<std::int64_t, 4>{dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  const std::int64_t alignment = 16;  // cudaMalloc's buffers are aligned to 256 bytes
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "the tensor's data type")
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), "the tensor's dimensions")
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), "the tensor's strides")
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "the tensor's id")
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, "the tensor's alignment")
      .finalize("cudnnBackendFinalize (a tensor)");
  return t;
}

// An engine configuration's engine: cuDNN's global index and its numerical notes.
struct EngineFacts {
  std::int64_t index = -1;
  bool tensor_cores = false, down_converts = false, nondeterministic = false;
};

EngineFacts engine_facts(cudnnBackendDescriptor_t config) {
  EngineFacts f;
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  std::int64_t got = 0;
  cudnn_check(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                                       engine.address()),
              "cudnnBackendGetAttribute (a configuration's engine)");
  cudnn_check(
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &f.index),
      "cudnnBackendGetAttribute (the engine's index)");
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  got = 0;
  cudnn_check(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                       static_cast<std::int64_t>(notes.size()), &got, notes.data()),
              "cudnnBackendGetAttribute (the engine's numerical notes)");
  for (std::int64_t i = 0; i < std::min<std::int64_t>(got, static_cast<std::int64_t>(notes.size())); ++i) {
    const auto n = notes[static_cast<std::size_t>(i)];
    f.tensor_cores = f.tensor_cores || n == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
    f.down_converts = f.down_converts || n == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    f.nondeterministic = f.nondeterministic || n == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  }
  return f;
}

// A candidate: an engine configuration whose plan built, with its workspace (the configuration
// kept alive beside the plan made from it).
struct Candidate {
  Desc config;
  Desc plan;
  EngineFacts engine;
  std::int64_t workspace = 0;
};

const char* pass_name(ConvPass p) {
  return p == ConvPass::Forward ? "forward" : p == ConvPass::BackwardData ? "backward data" : "backward filter";
}

}  // namespace graph_detail

using namespace graph_detail;  // NOLINT(google-build-using-namespace): this file's own helpers

struct GraphConv::Impl {
  cudnnHandle_t handle = nullptr;
  ConvBuffers on;
  void* workspace = nullptr;
  bool tf32 = false;                      // engines with tensor cores (TF32 for float32) allowed
  cudnnDataType_t io = CUDNN_DATA_FLOAT;  // x, w and y's type: float32, or bfloat16 / half (every engine allowed)
  std::vector<Desc> keep;                 // the tensors, the convolution, the operation and the graph
  std::unique_ptr<Candidate> chosen;
  std::unique_ptr<Desc> pack;
  std::shared_ptr<const Impl> same;  // SamePlan: whose graph and plan these are (keep, chosen empty)
  const Candidate& plan() const { return same ? *same->chosen : *chosen; }

  // The variant pack of `plan`'s three tensors at `on` and `workspace`.
  Desc variant_pack(void* workspace) const {
    const std::array<std::int64_t, 3> uids{kX, kW, kY};  // the same in every GraphConv: a shared plan's too
    std::array<void*, 3> pointers{on.x, on.w, on.y};
    Desc p(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    p.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data(), "the variant pack's ids")
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers.data(),
             "the variant pack's buffers")
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, "the variant pack's workspace")
        .finalize("cudnnBackendFinalize (the variant pack)");
    return p;
  }

  // The configurations of heuristics `mode` for `graph`, in its order, whose plans build within
  // the workspace limit and, on float32 tensors, whose engines keep float32 arithmetic, or with
  // `tf32` may use TF32 tensor cores (and, `deterministic`, repeat bit for bit). `offered` counts
  // what the heuristics returned.
  // Choice::Find's pick among `list` (below the class).
  std::size_t fastest(const std::vector<Candidate>& list, ConvPass pass, double* best_ms) const;

  std::vector<Candidate> candidates(const Desc& graph, cudnnBackendHeurMode_t mode, bool deterministic,
                                    int* offered) const {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "the heuristics' graph")
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "the heuristics' mode")
        .finalize("cudnnBackendFinalize (the heuristics)");
    std::int64_t count = 0;
    cudnn_check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                         &count, nullptr),
                "cudnnBackendGetAttribute (how many configurations the heuristics have)");
    std::vector<Desc> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (std::int64_t i = 0; i < count; ++i) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(configs.back().get());
    }
    std::int64_t got = 0;
    if (count > 0)
      cudnn_check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                           count, &got, raw.data()),
                  "cudnnBackendGetAttribute (the heuristics' configurations)");
    *offered += static_cast<int>(got);
    std::vector<Candidate> out;
    for (std::int64_t i = 0; i < std::min(got, count); ++i) {
      const EngineFacts e = engine_facts(raw[static_cast<std::size_t>(i)]);
      const bool f32 = io == CUDNN_DATA_FLOAT;
      if ((f32 && ((e.tensor_cores && !tf32) || e.down_converts)) || (deterministic && e.nondeterministic)) continue;
      Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "the plan's handle")
          .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
               &raw[static_cast<std::size_t>(i)], "the plan's configuration");
      if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS) continue;  // this configuration does not build here
      std::int64_t workspace = 0;
      cudnn_check(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                           &got, &workspace),
                  "cudnnBackendGetAttribute (the plan's workspace)");
      if (workspace < 0 || workspace > kCudnnWorkspaceLimit) continue;
      out.push_back(Candidate{std::move(configs[static_cast<std::size_t>(i)]), std::move(plan), e, workspace});
    }
    return out;
  }
};

ConvGeom graph_geom(const ConvShape& cs) {
  ConvGeom g;
  g.n = cs.n, g.c = cs.c, g.h = cs.h, g.w = cs.w, g.k = cs.k, g.kh = cs.r, g.kw = cs.s;
  g.sh = g.sw = cs.stride, g.dh = g.dw = cs.dilation;
  g.pt = g.pl = g.pb = g.pr = cs.pad;
  g.p = cs.p(), g.q = cs.q(), g.groups = cs.groups;
  return g;
}

namespace {

// The pass's operation graph into `keep` (x, w, y, the convolution, the operation, the graph, in
// that order: the graph last), NHWC with `nhwc`.
void operation_graph(std::vector<Desc>& keep, cudnnHandle_t h, const ConvGeom& cs, ConvPass pass, cudnnDataType_t io,
                     bool nhwc) {
  keep.reserve(6);  // x, w, y, the convolution, the operation, the graph: references to them stay valid
  keep.push_back(tensor(kX, {cs.n, cs.c, cs.h, cs.w}, io, nhwc));
  keep.push_back(tensor(kW, {cs.k, cs.cg(), cs.kh, cs.kw}, io, nhwc));
  keep.push_back(tensor(kY, {cs.n, cs.k, cs.p, cs.q}, io, nhwc));
  const Desc &x = keep[0], &w = keep[1], &y = keep[2];
  {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const std::int64_t spatial = 2;
    const std::array<std::int64_t, 2> pad{cs.pt, cs.pl}, stride{cs.sh, cs.sw}, dilation{cs.dh, cs.dw};
    Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, "the convolution's compute type")
        .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "the convolution's mode")
        .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial, "the convolution's dimensions")
        .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad.data(), "the convolution's padding")
        .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad.data(), "the convolution's padding")
        .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride.data(), "the convolution's strides")
        .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation.data(), "the convolution's dilations")
        .finalize("cudnnBackendFinalize (the convolution)");
    keep.push_back(std::move(conv));
  }
  const Desc& conv = keep.back();
  // The pass's operation: its descriptor type and the attributes of its x (or dx), w (or dw), y
  // (or dy), convolution, alpha and beta, in that order.
  struct OpNames {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  const OpNames names = pass == ConvPass::Forward ? OpNames{CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                                            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                                            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                                            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                                            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                                            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                                            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA}
                        : pass == ConvPass::BackwardData
                            ? OpNames{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA}
                            : OpNames{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
  const float alpha = 1.0f, beta = 0.0f;  // the output overwritten
  {
    Desc op(names.type);
    op.set(names.x, x, "the operation's x")
        .set(names.w, w, "the operation's w")
        .set(names.y, y, "the operation's y")
        .set(names.conv, conv, "the operation's convolution")
        .set(names.alpha, CUDNN_TYPE_FLOAT, 1, &alpha, "the operation's alpha")
        .set(names.beta, CUDNN_TYPE_FLOAT, 1, &beta, "the operation's beta")
        .finalize((std::string("cudnnBackendFinalize (the ") + pass_name(pass) + " operation)").c_str());
    keep.push_back(std::move(op));
  }
  const cudnnBackendDescriptor_t op = keep.back().get();
  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op, "the graph's operation")
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "the graph's handle")
      .finalize("cudnnBackendFinalize (the operation graph)");
  keep.push_back(std::move(graph));
}

}  // namespace

// Choice::Find: every candidate on the pass's own buffers (on): one run, then three timed, the
// fastest of those taken (its index; its time into *best_ms); a workspace as large as the
// largest candidate's, held only while it searches.
std::size_t GraphConv::Impl::fastest(const std::vector<Candidate>& list, ConvPass pass, double* best_ms) const {
  std::size_t pick = 0;
  *best_ms = -1;
  std::int64_t most = 0;
  for (const auto& k : list) most = std::max(most, k.workspace);
  std::unique_ptr<DeviceBuffer> search;
  if (most > 0) search = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(most));
  const Desc pack = variant_pack(search ? search->get() : nullptr);
  cudaStream_t stream = nullptr;
  cudnn_check(cudnnGetStream(handle, &stream), "cudnnGetStream");
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (cudnnBackendExecute(handle, list[i].plan.get(), pack.get()) != CUDNN_STATUS_SUCCESS) continue;
    double quickest = std::numeric_limits<double>::infinity();
    bool ran = true;
    for (int r = 0; r < 3 && ran; ++r) {
      check(cudaEventRecord(start, stream), "cudaEventRecord");
      ran = cudnnBackendExecute(handle, list[i].plan.get(), pack.get()) == CUDNN_STATUS_SUCCESS;
      check(cudaEventRecord(stop, stream), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      quickest = std::min(quickest, static_cast<double>(ms));
    }
    if (ran && (*best_ms < 0 || quickest < *best_ms)) *best_ms = quickest, pick = i;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (*best_ms < 0)
    throw GraphConvUnserved(std::string("cuda: none of the ") + std::to_string(list.size()) + " " + pass_name(pass) +
                            " engine configurations of cuDNN's graph API that built ran on this convolution" +
                            kLegacyHint);
  return pick;
}

GraphConv::GraphConv(cudnnHandle_t h, const ConvGeom& cs, ConvPass pass, Choice c, bool tf32, const ConvBuffers& on,
                     cudnnDataType_t io, bool nhwc)
    : impl_(std::make_shared<Impl>()) {
  if (cs.pt != cs.pb || cs.pl != cs.pr)
    throw Error("cuda: cuDNN's graph API is given equal pads on both sides of an axis (an internal error)");
  if (io != CUDNN_DATA_FLOAT && io != CUDNN_DATA_BFLOAT16 && io != CUDNN_DATA_HALF)
    throw Error("cuda: cuDNN's graph API is given float32, bfloat16 or half tensors (an internal error)");
  impl_->handle = h;
  impl_->on = on;
  impl_->tf32 = tf32;
  impl_->io = io;
  operation_graph(impl_->keep, h, cs, pass, io, nhwc);
  const auto& keep = impl_->keep;

  const bool deterministic = c == Choice::Deterministic;
  int offered = 0;
  std::vector<Candidate> list = impl_->candidates(keep.back(), CUDNN_HEUR_MODE_A, deterministic, &offered);
  const char* modes = "heuristics mode A";
  if (c == Choice::Find || list.empty()) {
    for (auto& more : impl_->candidates(keep.back(), CUDNN_HEUR_MODE_FALLBACK, deterministic, &offered))
      list.push_back(std::move(more));
    modes = "heuristics mode A and the fallback mode";
  }
  if (list.empty())
    throw GraphConvUnserved(std::string("cuda: cuDNN's graph API offers no ") + pass_name(pass) +
                            " engine configuration for this convolution in " + modes + " (" + std::to_string(offered) +
                            " offered) that builds within a 1 GiB workspace" + (tf32 ? "" : " without TF32") +
                            (deterministic ? " and repeats bit for bit" : "") + kLegacyHint);
  std::size_t pick = 0;
  double best_ms = -1;
  if (c == Choice::Find) pick = impl_->fastest(list, pass, &best_ms);
  impl_->chosen = std::make_unique<Candidate>(std::move(list[pick]));
  const EngineFacts& e = impl_->chosen->engine;
  chosen_ = ConvAlgorithm{true,
                          static_cast<int>(e.index),
                          static_cast<std::size_t>(impl_->chosen->workspace),
                          !e.nondeterministic,
                          std::string(pass_name(pass)) + " engine " + std::to_string(e.index) + " (graph API" +
                              (e.nondeterministic ? ", non-deterministic" : "") + ")",
                          best_ms};
  const std::string considered =
      std::to_string(list.size()) + " of the " + std::to_string(offered) + " configurations " + modes +
      " offered built within a 1 GiB workspace" +
      (io != CUDNN_DATA_FLOAT ? std::string()
                              : std::string(" without ") + (tf32 ? "" : "TF32 or ") + "down-converted inputs") +
      (deterministic ? " and repeat bit for bit" : "");
  how_ =
      c == Choice::Find
          ? "the fastest engine configuration of cuDNN's graph API, each run once and then timed three times at setup "
            "on the point's own tensors (cudnn_api = graph, cudnn_algorithms = find; PyTorch's cudnn.benchmark); " +
                considered
      : deterministic
          ? "the first engine configuration of cuDNN's graph API's heuristics without cuDNN's non-deterministic note "
            "(cudnn_api = graph, cudnn_algorithms = deterministic); " +
                considered
          : "the first engine configuration of cuDNN's graph API's heuristics (cudnn_api = graph; PyTorch's default); " +
                considered;
}

std::string GraphConv::math() const {
  if (impl_->io != CUDNN_DATA_FLOAT) {
    const bool bf16 = impl_->io == CUDNN_DATA_BFLOAT16;
    return std::string("tensor cores allowed (dtype = ") + (bf16 ? "bf16: bfloat16" : "fp16: half") +
           " x, w and y, float32 compute type, PyTorch's conv2d on such tensors); the chosen engine " +
           (impl_->plan().engine.tensor_cores ? "uses tensor cores" : "does not use tensor cores");
  }
  if (!impl_->tf32) return "float32 arithmetic, no TF32";
  return std::string("TF32 tensor cores allowed for float32 (math = tf32, PyTorch's allow_tf32); the chosen engine ") +
         (impl_->plan().engine.tensor_cores ? "uses tensor cores" : "computes in float32");
}

GraphConv::GraphConv(SamePlan, const GraphConv& like)
    : impl_(std::make_shared<Impl>()),
      chosen_(like.chosen_),
      how_(like.how_ +
           "; the plan chosen for an earlier convolution of "
           "this geometry and pass, shared") {
  impl_->handle = like.impl_->handle;
  impl_->tf32 = like.impl_->tf32;
  impl_->io = like.impl_->io;
  impl_->same = like.impl_->same ? like.impl_->same : like.impl_;
}

void GraphConv::bind(void* workspace) {
  impl_->workspace = workspace;
  impl_->pack.reset();
  if (impl_->on.x && impl_->on.w && impl_->on.y) impl_->pack = std::make_unique<Desc>(impl_->variant_pack(workspace));
}

GraphConv::~GraphConv() = default;

cudnnStatus_t GraphConv::run() const {
  if (!impl_->pack) return CUDNN_STATUS_BAD_PARAM;  // no buffers given: run_on is the call
  return cudnnBackendExecute(impl_->handle, impl_->plan().plan.get(), impl_->pack->get());
}

cudnnStatus_t GraphConv::run_on(const ConvBuffers& on) {
  if (!impl_->pack || on.x != impl_->on.x || on.w != impl_->on.w || on.y != impl_->on.y) {
    impl_->on = on;
    bind(impl_->workspace);
  }
  return run();
}

}  // namespace d500::cuda
