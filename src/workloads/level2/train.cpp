// Level 2: training to accuracy. A network (built-in or .onnx, with d500's softmax cross-entropy
// appended) is trained on a dataset by an executor (d500's graph executor on a backend's
// kernels, or LibTorch's own) with an optimizer (d500's reference, or the framework's own), step
// after step until `steps`/`epochs`, the target test accuracy, or the training-time budget.
//
// What is timed, per step (Harness::train): data (the sampler's indices, reading and converting
// the batch into the executor's input), forward, backward, update (the optimizer, and the
// executor re-preparing its weights). Training time is the sum of the steps' durations; the
// evaluation on the test split every eval_interval_steps is timed as its own phase and left out
// of it, and each evaluation writes an event (step, training time, loss, accuracy).
//
// Validation, before any timing: the first batch's loss and every parameter's gradient against
// d500's reference executor in double on the same weights and data (level 1's check); with a
// native optimizer also K steps of it against the reference optimizer applied to the same
// gradients. Training then starts again from the seeded weights with fresh optimizer state.
#include "workloads/level2/train.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>

#include "backends/graph_ops.hpp"
#include "backends/registry.hpp"
#include "backends/settings.hpp"
#include "common/error.hpp"
#include "common/mpi_check.hpp"
#include "common/parallel.hpp"
#include "common/text.hpp"
#include "networks/executor.hpp"
#include "networks/prepare.hpp"
#include "networks/validate.hpp"
#include "training/distributed.hpp"
#include "workloads/level0/operator.hpp"
#include "workloads/level1/network.hpp"

namespace fs = std::filesystem;

namespace d500 {

namespace {

constexpr int kOptimizerCheckSteps = 5;
// Relative L2 distance of parameters after kOptimizerCheckSteps steps of the native and the
// reference optimizer on the same gradients. Float32 rounding of the two implementations
// (vectorised, fused multiply-adds) differs by a few ulps a step; Adam's m / sqrt(v) magnifies it
// where gradients are tiny (measured on LeNet-5, 5 steps: sgd/momentum/nesterov/adagrad/rmsprop
// 5e-8 to 5e-7, adam/adamw 6.7e-6). A wrong rule (a missing bias correction, weight decay
// coupled instead of decoupled) is off by 1e-3 or more.
constexpr double kOptimizerTolerance = 1e-4;

struct TrainPoint {
  std::string network, dataset, data_dir, optimizer_impl, init, eval_statistics;
  std::string fusion;  // cuda's and onednn's setting (networks/fuse.hpp)
  AugmentSpec augment;
  std::int64_t batch, epochs, steps, eval_interval, eval_samples, synthetic_samples;
  double target, budget_s, checkpoint_s;
  bool shuffle, stop_at_target, prefetch;
  int threads;
  std::uint64_t seed;
  // Level 3 (workload `distributed`): the scheme; `distributed` false for level 2.
  bool distributed;
  SchemeSpec scheme;
  std::int64_t global_batch, hash_interval;
  std::int64_t ranks, workers;  // nodes x ranks_per_node; those that train (all but dedicated servers)
  explicit TrainPoint(const Params& p)
      : network(param<std::string>(p, "network")),
        dataset(param<std::string>(p, "dataset")),
        data_dir(param<std::string>(p, "data_dir")),
        optimizer_impl(param<std::string>(p, "optimizer_impl")),
        init(param<std::string>(p, "init")),
        eval_statistics(str_param_or(p, "eval_statistics", "running")),
        fusion(str_param_or(p, "fusion", "")),
        batch(param<std::int64_t>(p, "batch")),
        epochs(param<std::int64_t>(p, "epochs")),
        steps(param<std::int64_t>(p, "steps")),
        eval_interval(param<std::int64_t>(p, "eval_interval_steps")),
        eval_samples(param<std::int64_t>(p, "eval_samples")),
        synthetic_samples(param<std::int64_t>(p, "synthetic_samples")),
        target(param<double>(p, "target_accuracy")),
        budget_s(param<double>(p, "time_budget")),
        checkpoint_s(param<double>(p, "checkpoint_interval")),
        shuffle(param<bool>(p, "shuffle")),
        stop_at_target(param<bool>(p, "stop_at_target")),
        prefetch(p.count("prefetch") && param<bool>(p, "prefetch")),
        threads(static_cast<int>(param<std::int64_t>(p, "threads"))),
        seed(static_cast<std::uint64_t>(int_param_or(p, "seed", 1))),
        distributed(p.count("scheme") > 0),
        global_batch(int_param_or(p, "global_batch", 0)),
        hash_interval(int_param_or(p, "hash_interval_steps", 0)),
        ranks(int_param_or(p, "nodes", 1) * int_param_or(p, "ranks_per_node", 1)),
        workers(ranks) {
    augment.crop_padding = static_cast<int>(int_param_or(p, "crop_padding", 0));
    augment.flip = p.count("flip") && param<bool>(p, "flip");
    augment.mean = parse_number_list(str_param_or(p, "normalize_mean", "")).value_or(std::vector<double>{});
    augment.stddev = parse_number_list(str_param_or(p, "normalize_std", "")).value_or(std::vector<double>{});
    augment.seed = seed;
    if (!distributed) return;
    scheme.name = param<std::string>(p, "scheme");
    scheme.bucket_bytes = param<std::int64_t>(p, "bucket_bytes");
    scheme.average_interval = param<std::int64_t>(p, "average_interval");
    scheme.ps_servers = static_cast<int>(param<std::int64_t>(p, "ps_servers"));
    scheme.staleness = static_cast<int>(param<std::int64_t>(p, "staleness"));
    scheme.communication = param<std::string>(p, "communication");
    workers = ranks - scheme.ps_servers;  // >= 1 where train_check passed (scheme_check)
    // A global batch is split over the workers: each rank's network takes its share.
    if (global_batch > 0) batch = std::max<std::int64_t>(1, global_batch / std::max<std::int64_t>(1, workers));
  }
};

// The graph's data input (its one float input) and the labels d500 appended with the loss.
struct Roles {
  std::size_t image = 0, labels = 0;  // indices into graph.inputs
  int classes = 0;
};

Roles roles_of(const LoadedNetwork& n) {
  const Graph& g = n.graph;
  if (n.loss.labels < 0)
    throw Error(
        "train needs a classifier: a network whose first output is [N, classes] (d500 appends softmax cross-entropy); " +
        n.loss.description);
  Roles r;
  int floats = 0;
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    if (g.inputs[k] == n.loss.labels)
      r.labels = k;
    else if (g.info(g.inputs[k]).dtype == DType::F32)
      r.image = k, ++floats;
    else
      throw Error("train feeds one float input and the labels: input '" + g.info(g.inputs[k]).name + "' is " +
                  dtype_name(g.info(g.inputs[k]).dtype));
  }
  if (floats != 1)
    throw Error("train feeds exactly one float input (the samples); the network has " + std::to_string(floats));
  r.classes = static_cast<int>(g.info(g.outputs.at(0)).shape.at(1));  // the logits: graph output 0
  return r;
}

DatasetRequest data_request(const TrainPoint& pt, const Graph& g, const Roles& r, const std::string& split) {
  DatasetRequest q;
  q.dataset = pt.dataset;
  q.split = split;
  q.data_dir = pt.data_dir;
  const Shape& in = g.info(g.inputs[r.image]).shape;
  q.sample_shape.assign(in.begin() + 1, in.end());
  q.classes = r.classes;
  q.samples = split == "train" ? pt.synthetic_samples : std::max<std::int64_t>(1, pt.synthetic_samples / 6);
  q.seed = 0x5eed;  // synthetic data is the same for every point: the seed varies the model and the order
  return q;
}

// The checks a point's data must pass against its network.
void check_data(const Dataset& d, const Graph& g, const Roles& r) {
  const Shape& in = g.info(g.inputs[r.image]).shape;
  const Shape want(in.begin() + 1, in.end());
  if (d.sample_shape() != want)
    throw Error(d.describe() + ": its samples are " + shape_str(d.sample_shape()) + ", the network's input '" +
                g.info(g.inputs[r.image]).name + "' takes " + shape_str(want) + " per sample");
  if (d.classes() > r.classes)
    throw Error(d.describe() + ": " + std::to_string(d.classes()) + " classes, but the network's output has " +
                std::to_string(r.classes));
}

std::vector<std::vector<float>> snapshot(GraphRunner& r, const ParamAccess& a) {
  std::vector<std::vector<float>> s;
  for (std::size_t k = 0; k < a.count(); ++k) {
    const float* p = r.parameter_value(k);
    s.emplace_back(p, p + a.numel(k));
  }
  return s;
}

class TrainWorkload final : public Workload {
 public:
  TrainWorkload(const RunContext& ctx, const BackendInfo& backend)
      : pt_(ctx.params), params_(ctx.params), backend_(backend), rank_(ctx.rank), comm_(ctx.comm) {
    // Level 3: the workers are the ranks after the dedicated servers; the data is shared among them.
    const int servers = pt_.distributed ? pt_.scheme.ps_servers : 0;
    worker_ = ctx.rank - servers;
    workers_ = ctx.size - servers;
    loaded_ = load_point_network(pt_.network, pt_.batch, true, true, pt_.fusion);
    graph_ = loaded_->graph;  // the point's own weights
    roles_ = roles_of(*loaded_);
    init_words_ = pt_.init == "seeded" ? seeded_weights(graph_, loaded_->params, pt_.seed) : "the model's own weights";
    train_ = shared_dataset(data_request(pt_, graph_, roles_, "train"));
    test_ = shared_dataset(data_request(pt_, graph_, roles_, "test"));
    check_data(*train_, graph_, roles_);
    check_data(*test_, graph_, roles_);
    augment_ = std::make_unique<Augmentation>(pt_.augment, train_->sample_shape());
    sampler_ = std::make_unique<Sampler>(train_->size(), pt_.batch, pt_.shuffle, pt_.seed, std::max(worker_, 0),
                                         workers_, train_->sharded());
    max_steps_ = pt_.steps > 0    ? pt_.steps
                 : pt_.epochs > 0 ? pt_.epochs * sampler_->batches_per_epoch()
                                  : std::numeric_limits<std::int64_t>::max();
    opt_spec_ = optimizer_spec(ctx.params, max_steps_ == std::numeric_limits<std::int64_t>::max() ? 0 : max_steps_);

    inputs_ = make_inputs(graph_, 1, ctx.seed);  // the input buffers, refilled by every step
    x_ = reinterpret_cast<float*>(inputs_.bytes[roles_.image].data());
    y_ = reinterpret_cast<std::int64_t*>(inputs_.bytes[roles_.labels].data());
    RunnerSpec spec = training_spec(graph_, *loaded_, inputs_, pt_.threads);
    if (pt_.eval_statistics == "batch") spec.buffers.clear();
    spec.step = &steps_done_;  // Dropout's masks: the same in every executor, and after a resume
    buffers_ = spec.buffers;
    runner_ = make_runner(backend, spec, &params_);
    // On a device, one training step runs as a framework's loop runs it: passes enqueued without a
    // wait between them, the next batch made on the host meanwhile (level 3's schemes talk to the
    // device and MPI between the passes: they keep a wait after each).
    deferred_ = !pt_.distributed && runner_->defer_waits(true);
    // Recorded once and replayed (cuda_graph = "step"); the runner says why not where it cannot.
    graphed_ = deferred_ && runner_->records_steps();
    // On the host (prefetch): the next batch read into a staging area of its own on a thread
    // beside the step, copied into the inputs at the next step's start.
    host_prefetch_ = pt_.prefetch && !deferred_;
    if (deferred_ || host_prefetch_) {
      beside_ = std::make_unique<Beside>();
      prefetched_idx_.reserve(static_cast<std::size_t>(pt_.batch));
    }
    if (host_prefetch_) {
      staged_x_.resize(static_cast<std::size_t>(pt_.batch * numel(train_->sample_shape())));
      staged_y_.resize(static_cast<std::size_t>(pt_.batch));
    }
    access_ = std::make_unique<RunnerParams>(*runner_, graph_, loaded_->params);
    initial_ = snapshot(*runner_, *access_);
    initial_buffers_ = buffers();
    make_optimizer();
    if (pt_.distributed) {
      model_ = std::make_unique<RunnerModel>(*runner_, *access_);
      if (pt_.scheme.communication == "nccl") {
        // Gradients averaged where the executor keeps them (train_check: a device backend, nccl built).
        const BackendInfo* nccl = find_backend(pt_.scheme.communication);
        if (!runner_->device_memory() || !nccl || !nccl->make_device_collective)
          throw Error("communication = \"nccl\" needs d500's executor on a device and the nccl backend");
        collective_ = nccl->make_device_collective(*runner_->device_memory(), ctx.comm);
      }
      scheme_ = Scheme::make(pt_.scheme, ctx.comm, *model_, opt_spec_, collective_.get());
    }
    const double flops = loaded_->work.training_flops;
    work_ = Work{static_cast<std::int64_t>(flops), 0, pt_.batch};
    tta_ = TimeToAccuracy{pt_.target, pt_.budget_s, pt_.eval_interval};
    eval_n_ = pt_.eval_samples > 0 ? std::min(pt_.eval_samples, test_->size()) : test_->size();
    eval_idx_.resize(static_cast<std::size_t>(pt_.batch));
  }

  // The scheme and its collective hold memory of the runner's device: they go first.
  ~TrainWorkload() override {
    scheme_.reset();
    collective_.reset();
  }
  TrainWorkload(const TrainWorkload&) = delete;
  TrainWorkload& operator=(const TrainWorkload&) = delete;

  Validation validate() override {
    // The first batch: one step's loss and gradients against the yardstick.
    load_batch(sampler_->next());
    runner_->forward(0);
    runner_->backward(0);
    const StepValues got = step_values(*runner_, graph_, loaded_->params, true);
    const StepValues ref = yardstick_step(graph_, true, loaded_->loss.loss, loaded_->params, inputs_.pointers(), 1);
    const StepJudgement j = judge_step(got, ref, with_point_math(loaded_->tolerance, params_, runner_.get()), graph_,
                                       true, loaded_->loss.loss, loaded_->params, inputs_.pointers(), 1);
    double ratio = j.error / j.tolerance;
    std::string method =
        "worst of two ratios error/tolerance (<= 1 passes): (1) the first batch's loss and the gradient of each of the " +
        std::to_string(loaded_->params.size()) +
        " weights against d500's reference executor in double on the same weights and "
        "batch: relative L2 error " +
        fmt_sig(j.error, 3) + " (worst: " + j.where + "), tolerance " + fmt_sig(j.tolerance, 3) + ": " + j.words;
    if (pt_.optimizer_impl == "native") {
      const double e = optimizer_agreement();
      ratio = std::max(ratio, e / kOptimizerTolerance);
      method += "; (2) " + std::to_string(kOptimizerCheckSteps) + " steps of " + optimizer_->describe() +
                " against d500's reference optimizer on the same gradients: relative L2 distance of the parameters " +
                fmt_sig(e, 3) + ", tolerance " + fmt_sig(kOptimizerTolerance, 3);
    }
    // Training starts from the seeded weights, fresh optimizer state, the first batch (or from a
    // checkpoint: resume()).
    restore(initial_);
    set_buffers(initial_buffers_.data());
    make_optimizer();
    sampler_->seek(0, 0);
    train_ns_ = steps_done_ = eval_ns_ = evaluations_ = resumed_at_ = 0;
    hash_checks_ = hash_mismatches_ = 0;
    first_mismatch_ = -1;
    last_loss_ = last_acc_ = std::nan("");
    stop_reason_ = "";
    if (!std::isfinite(ratio)) ratio = std::numeric_limits<double>::infinity();
    return Validation{ratio, 1.0, method, j.verdict()};
  }

  void measure(Harness& h) override {
    Harness::Checkpointing cp;
    cp.interval_ns = static_cast<std::int64_t>(pt_.checkpoint_s * 1e9);
    cp.state = [this] { return state(); };
    h.train(
        [this](int, const Harness::PhaseMark& mark) {
          const std::int64_t t0 = now_ns();
          const double lr = learning_rate(opt_spec_, steps_done_);
          if (scheme_ && scheme_->is_server()) {
            scheme_->serve(lr, tally_);
          } else if (deferred_) {
            deferred_step(t0, lr);
          } else {
            load_batch(sampler_->next());
            const std::int64_t t1 = now_ns();
            if (host_prefetch_ && steps_done_ + 1 < max_steps_) beside_->start(make_next_);
            runner_->forward(0);
            const std::int64_t t2 = now_ns();
            if (scheme_) scheme_->before_backward();
            runner_->backward(0);
            const std::int64_t t3 = now_ns();
            tally_.add(Phase::Data, t0, t1);
            tally_.add(Phase::Forward, t1, t2);
            tally_.add(Phase::Backward, t2, t3);
            if (scheme_) scheme_->after_backward(lr, tally_);
            if (!scheme_ || scheme_->local_update()) {
              const std::int64_t u0 = now_ns();
              optimizer_->step(lr);
              tally_.add(Phase::Update, u0, now_ns());
            }
            if (scheme_) scheme_->after_update(steps_done_ + 1, tally_);
          }
          const std::int64_t t4 = now_ns();
          tally_.mark(mark);
          train_ns_ += t4 - t0;
          ++steps_done_;
          if (steps_done_ >= max_steps_)
            return stop("the step limit (" + std::to_string(max_steps_) + " steps) was reached");
          if (pt_.budget_s > 0 && static_cast<double>(train_ns_) * 1e-9 >= pt_.budget_s)
            return stop("the time budget (" + canonical(Value{pt_.budget_s}) + " s of training) was spent");
          return true;
        },
        [this, &h](int, const Harness::PhaseMark& mark, bool last) {
          if (scheme_ && scheme_->consistent() &&
              (last || (pt_.hash_interval > 0 && steps_done_ % pt_.hash_interval == 0)))
            check_hash();
          const bool due = pt_.eval_interval > 0 && steps_done_ % pt_.eval_interval == 0;
          if (!due && !last) return true;
          const std::int64_t t0 = now_ns();
          const auto [loss, acc] = evaluate();
          const std::int64_t t1 = now_ns();
          mark(Phase::Evaluation, t0, t1);
          eval_ns_ += t1 - t0;
          ++evaluations_;
          last_loss_ = loss;
          last_acc_ = acc;
          h.event(Event{train_ns_, steps_done_, loss, acc, rank_});
          if (!last && pt_.target > 0 && pt_.stop_at_target && acc >= pt_.target) {
            stop("the target accuracy " + canonical(Value{pt_.target}) + " was reached (" + fmt_sig(acc, 4) + ")");
            return false;
          }
          return true;
        },
        scheme_ ? 6 : 4, cp);
    checkpoints_ = h.checkpoints();
  }

  bool graph_has_batch_norm() const {
    return std::any_of(graph_.nodes.begin(), graph_.nodes.end(), [&](const Node& n) { return is_batch_norm(n.op); });
  }

  // A parameter server's optimizer state lives on the servers, which a worker's checkpoint lacks.
  bool checkpoints() const override { return pt_.checkpoint_s > 0 && !(scheme_ && scheme_->has_server_state()); }

  std::string why_not_resume(const TrainingState& s) const override {
    std::size_t want = 0;
    for (std::size_t k = 0; k < access_->count(); ++k) want += static_cast<std::size_t>(access_->numel(k));
    const std::size_t stats = initial_buffers_.size();
    if (s.parameters.size() != want + stats)
      return "the checkpoint holds " + std::to_string(s.parameters.size()) + " values, the network has " +
             std::to_string(want) + " parameters and " + std::to_string(stats) + " running statistics";
    if (s.epoch < 0 || s.position < 0 || s.position > sampler_->batches_per_epoch() || s.step <= 0 ||
        s.step >= max_steps_)
      return "the checkpoint's position (step " + std::to_string(s.step) + ", epoch " + std::to_string(s.epoch) +
             " batch " + std::to_string(s.position) + ") does not fit this point's sampler and step limit";
    try {  // a scratch optimizer over the same parameters takes the bytes, or says why not
      auto scratch = pt_.optimizer_impl == "native" ? runner_->native_optimizer(opt_spec_)
                                                    : make_reference_optimizer(opt_spec_, *access_);
      scratch->load(s.optimizer);
    } catch (const std::exception& e) {
      return std::string("the optimizer does not take the checkpoint's state: ") + e.what();
    }
    return "";
  }

  void resume(const TrainingState& s) override {
    set_parameters(s.parameters.data());
    set_buffers(s.parameters.data() + (s.parameters.size() - initial_buffers_.size()));
    optimizer_->load(s.optimizer);
    sampler_->seek(s.epoch, s.position);
    steps_done_ = resumed_at_ = s.step;
    train_ns_ = s.training_ns;
    eval_ns_ = s.evaluation_ns;
    evaluations_ = s.evaluations;
    last_loss_ = s.loss;
    last_acc_ = s.accuracy;
  }

  Work work() const override { return work_; }
  const TimeToAccuracy* time_to_accuracy() const override { return &tta_; }

  std::vector<std::pair<std::string, Value>> attributes() const override {
    std::vector<std::pair<std::string, Value>> a;
    std::int64_t params = 0;
    for (int t : loaded_->params) params += numel(graph_.info(t).shape);
    a.push_back({"network.model", std::string(find_builtin_network(pt_.network) ? "built-in" : "file")});
    a.push_back({"network.model_hash", loaded_->model_hash});
    a.push_back({"network.trainable_parameters", params});
    a.push_back({"network.flops_per_sample", loaded_->work.training_flops / static_cast<double>(pt_.batch)});
    a.push_back({"network.loss", loaded_->loss.description});
    a.push_back({"executor", runner_->describe()});
    if (const auto* e = dynamic_cast<const GraphExecutor*>(runner_.get())) {
      const auto f = fallback_attributes(*e, graph_);
      a.insert(a.end(), f.begin(), f.end());
      a.push_back({"executor.fused_add_relu", std::int64_t{loaded_->fused_add_relu}});
      a.push_back({"executor.fused_bn_relu", std::int64_t{loaded_->fused_bn_relu}});
      const auto peak = executor_peak_attributes(backend_, params_, runner_->device_memory() != nullptr);
      a.insert(a.end(), peak.begin(), peak.end());
    }
    a.push_back({"train.init", init_words_});
    a.push_back({"train.running_statistics", static_cast<std::int64_t>(initial_buffers_.size())});
    a.push_back({"train.dataset", train_->describe()});
    a.push_back({"train.test_dataset", test_->describe()});
    a.push_back({"train.sampler", sampler_->describe()});
    a.push_back({"train.augmentation", augment_->describe(true)});
    a.push_back({"train.test_augmentation", augment_->describe(false)});
    a.push_back({"train.optimizer", optimizer_->describe()});
    a.push_back(
        {"train.max_steps", max_steps_ == std::numeric_limits<std::int64_t>::max() ? std::int64_t{-1} : max_steps_});
    a.push_back(
        {"train.evaluation",
         "the first " + std::to_string(eval_n_) + " samples of the test split, every " +
             std::to_string(pt_.eval_interval) +
             " steps and after the last, by the training executor's forward pass in evaluation mode" +
             (buffers_.empty()
                  ? std::string(graph_has_batch_norm()
                                    ? " (eval_statistics = \"batch\": BatchNormalization normalises with the "
                                      "evaluation batch's own statistics, none kept)"
                                    : "")
                  : " (BatchNormalization normalises with running statistics the training steps keep, ONNX's momentum " +
                        std::string(backend_.make_graph_runner ? "and PyTorch's unbiased batch variance"
                                                               : "and the biased batch variance") +
                        (scheme_ ? "; level 3: averaged over the workers before each evaluation" : "") + ")") +
             "; mean cross-entropy and top-1 accuracy; timed as phase 'evaluation', left out of training time"});
    a.push_back(
        {"train.timing",
         std::string("training time: the sum of the steps' durations (phases data, forward, backward, update") +
             (scheme_ ? ", communication, wait" : "") + "); an event's time_ns is the training time at its evaluation" +
             (deferred_
                  ? "; on the device a step's passes are enqueued without waits between them and the step "
                    "ends with one wait for the device, during which the host makes the next batch and "
                    "copies it to the device on a stream beside the step's; data: the host's time before "
                    "the device starts (a copy of the batch on the device, or its upload, and making it "
                    "where it was not made during the previous step); forward, backward, update: the "
                    "device's own times between events recorded on its stream" +
                        std::string(graphed_ ? "; recorded (cuda_graph = \"step\"): the passes and the optimizer's "
                                               "step recorded once as a graph at the second step this run made (its "
                                               "time holds the recording and its instantiation: a warm-up with the "
                                               "default warmups = 2) and replayed at every later step, whose device "
                                               "time is one 'device' row instead of forward, backward and update"
                                             : "")
              : host_prefetch_
                  ? "; prefetch: the next batch is read (and augmented) on a thread beside the step while it "
                    "computes; data holds the wait for it and its copy into the inputs"
                  : "")});
    if (scheme_) {
      a.push_back({"dist.scheme", pt_.scheme.name});
      a.push_back({"dist.consistent", scheme_->consistent()});
      a.push_back({"dist.workers", std::int64_t{workers_}});
      a.push_back({"dist.servers", std::int64_t{scheme_->servers()}});
      a.push_back({"dist.batch_per_worker", pt_.batch});
      a.push_back({"dist.global_batch", pt_.batch * workers_});
      a.push_back({"dist.method", scheme_->describe()});
      if (!scheme_->overlap().empty()) a.push_back({"dist.overlap", scheme_->overlap()});
      a.push_back(
          {"dist.phases",
           std::string(
               "wait: an MPI_Barrier before a synchronous exchange (the slowest rank's lateness); communication: "
               "time inside the scheme's MPI calls (with no barrier before them, waiting too); update: the "
               "optimizer and the scheme's local arithmetic (packing, averaging); one row per phase and step, "
               "its duration the phase's time added over the step")});
      a.push_back(
          {"dist.evaluation",
           std::string(scheme_->consistent()           ? "every worker's own parameters (identical: checked by hash)"
                       : pt_.scheme.name == "ps-async" ? "the servers' parameters, gathered after the step"
                                                       : "the mean of the workers' parameters, taken after the step") +
               "; the test samples shared among the workers, losses and hits added by MPI_Allreduce"});
    }
    return a;
  }

  std::vector<std::pair<std::string, Value>> final_attributes() const override {
    std::vector<std::pair<std::string, Value>> a = {
        {"train.steps", steps_done_},
        {"train.epochs", static_cast<double>(steps_done_) / static_cast<double>(sampler_->batches_per_epoch())},
        {"train.stop_reason", stop_reason_},
        {"train.training_seconds", static_cast<double>(train_ns_) * 1e-9},
        {"train.evaluation_seconds", static_cast<double>(eval_ns_) * 1e-9},
        {"train.evaluations", evaluations_},
        {"train.final_accuracy", last_acc_},
        {"train.final_loss", last_loss_},
        {"train.resumed_at_step", resumed_at_},
        {"train.checkpoints", std::int64_t{checkpoints_}}};
    // On a device (d500's executor, LibTorch's): the device memory the run held (collective).
    const auto dm = device_memory_attributes(comm_, runner_->device_peak_bytes());  // none on the host
    a.insert(a.end(), dm.begin(), dm.end());
    if (!scheme_) return a;
    // Communication per rank and step, agreed over the ranks (collective: every rank is here).
    const double steps = static_cast<double>(std::max<std::int64_t>(1, steps_done_ - resumed_at_));
    const CommCounts& c = scheme_->counts();
    double mine[4] = {static_cast<double>(c.sent) / steps, static_cast<double>(c.received) / steps, 0, 0};
    mine[2] = -mine[0];
    mine[3] = -mine[1];
    double lo_hi[4], sum[2];
    mpi_check(MPI_Allreduce(mine, lo_hi, 4, MPI_DOUBLE, MPI_MAX, comm_), "MPI_Allreduce", "communication volume");
    mpi_check(MPI_Allreduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, comm_), "MPI_Allreduce", "communication volume");
    int size = 1;
    mpi_check(MPI_Comm_size(comm_, &size), "MPI_Comm_size", "communication volume");
    long long checks[2] = {hash_checks_, hash_mismatches_}, first = first_mismatch_ < 0 ? LLONG_MAX : first_mismatch_,
              first_all = 0;
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, checks, 2, MPI_LONG_LONG, MPI_MAX, comm_), "MPI_Allreduce", "hash checks");
    mpi_check(MPI_Allreduce(&first, &first_all, 1, MPI_LONG_LONG, MPI_MIN, comm_), "MPI_Allreduce", "hash checks");
    a.push_back({"comm.bytes_sent_per_step", sum[0] / size});
    a.push_back({"comm.bytes_received_per_step", sum[1] / size});
    a.push_back({"comm.bytes_sent_per_step_max", lo_hi[0]});
    a.push_back({"comm.bytes_sent_per_step_min", -lo_hi[2]});
    a.push_back({"comm.bytes_received_per_step_max", lo_hi[1]});
    a.push_back({"comm.calls_per_step", static_cast<double>(c.calls) / steps});
    a.push_back({"comm.counted_steps", static_cast<std::int64_t>(steps)});
    if (scheme_->consistent()) {
      a.push_back({"dist.hash_checks", static_cast<std::int64_t>(checks[0])});
      a.push_back({"dist.hash_mismatches", static_cast<std::int64_t>(checks[1])});
      a.push_back({"dist.parameters_identical", checks[1] == 0});
      if (checks[1] > 0) a.push_back({"dist.first_mismatch_step", static_cast<std::int64_t>(first_all)});
    }
    return a;
  }

 private:
  bool stop(const std::string& why) {
    if (stop_reason_.empty()) stop_reason_ = why;
    return false;
  }

  void make_optimizer() {
    optimizer_ = pt_.optimizer_impl == "native" ? runner_->native_optimizer(opt_spec_)
                                                : make_reference_optimizer(opt_spec_, *access_);
    if (!optimizer_)
      throw Error("backend " + backend_.name + " has no optimizer of its own for " + opt_spec_.name +
                  " (optimizer_impl = \"native\")");
  }

  // The step's batch into the runner's inputs: read and copied, unless the previous step made
  // exactly these samples while the device computed (prefetch()), and copied them to the device
  // beside it (taken from there).
  void load_batch(std::span<const std::int64_t> idx) {
    if (host_prefetch_) {  // the batch beside is done before its flags are read
      beside_->wait();
      const bool made =
          prefetched_ && std::equal(idx.begin(), idx.end(), prefetched_idx_.begin(), prefetched_idx_.end());
      if (made) {
        std::copy(staged_x_.begin(), staged_x_.end(), x_);
        std::copy(staged_y_.begin(), staged_y_.end(), y_);
      } else {
        read_train(idx, x_, y_);
      }
      runner_->inputs_changed();
      prefetched_ = false;
      return;
    }
    const bool made = prefetched_ && std::equal(idx.begin(), idx.end(), prefetched_idx_.begin(), prefetched_idx_.end());
    if (made && staged_) {
      runner_->inputs_from_stage();
    } else {
      if (staged_) runner_->inputs_from_stage();  // the copy beside reads x_: done before x_ is written
      if (!made) read_train(idx, x_, y_);
      runner_->inputs_changed();
    }
    prefetched_ = staged_ = false;
  }
  // A training batch of the sampler's current epoch into x_, y_, augmented as the point asks.
  void read_train(std::span<const std::int64_t> idx, float* x, std::int64_t* y) {
    train_->read(idx, x, y);
    if (augment_->any()) augment_->apply(idx, sampler_->epoch(), true, x);
  }
  // While a step computes (deferred_, on the thread beside): the next step's batch made into the
  // input buffers, which the device no longer reads (the step's inputs are on it). None at an
  // epoch's end, where the next order is not made yet.
  void prefetch() {
    const std::span<const std::int64_t> idx = sampler_->peek();
    if (idx.empty()) return;
    if (host_prefetch_)
      read_train(idx, staged_x_.data(), staged_y_.data());
    else
      read_train(idx, x_, y_);
    prefetched_idx_.assign(idx.begin(), idx.end());
    prefetched_ = true;
  }
  // One step with its passes enqueued and one wait at its end (deferred_): data is the host's
  // time until the device starts (the batch's copy, and making it when prefetch() could not);
  // forward, backward and update are the device's own times between the step's marks, placed
  // one after another from the device's start. The next batch is made on a thread beside this
  // one while it launches the step's work (a launch-bound step would wait for it otherwise), and
  // copied to the device once both are done.
  // Recorded (graphed_): the step after the first this process runs (momentum's buffer starts
  // as the first gradient, a step of its own) is recorded, not run, then replayed like every later
  // one; the device's time of a replay is the step's one `device` row.
  void deferred_step(std::int64_t t0, double lr) {
    load_batch(sampler_->next());
    const std::int64_t t1 = now_ns();
    const bool ahead = steps_done_ + 1 < max_steps_;
    if (ahead) beside_->start(make_next_);
    const bool replay = graphed_ && steps_run_ > 0, record = replay && steps_run_ == 1;
    if (record) {  // the optimizer counts this step as it is recorded
      runner_->begin_step_capture();
      runner_->forward(0);
      runner_->backward(0);
      optimizer_->step(lr);
      runner_->end_step_capture();
    }
    runner_->step_mark(0);
    if (replay) {
      runner_->replay_step();
      if (!record) optimizer_->replayed(lr);
    } else {
      runner_->forward(0);
      runner_->step_mark(1);
      runner_->backward(0);
      runner_->step_mark(2);
      optimizer_->step(lr);
    }
    runner_->step_mark(3);
    ++steps_run_;
    if (ahead) {
      beside_->wait();
      if (prefetched_) staged_ = runner_->stage_inputs();
    }
    runner_->finish();
    tally_.add(Phase::Data, t0, t1);
    if (replay) {
      if (const std::int64_t ns = runner_->step_mark_ns(0, 3); ns >= 0) tally_.add(Phase::Device, t1, t1 + ns);
      return;
    }
    std::int64_t at = t1;
    const Phase phases[] = {Phase::Forward, Phase::Backward, Phase::Update};
    for (std::size_t i = 0; i < 3; ++i) {
      const std::int64_t ns = runner_->step_mark_ns(i, i + 1);
      if (ns < 0) continue;
      tally_.add(phases[i], at, at + ns);
      at += ns;
    }
  }

  // This rank's state between steps, for a checkpoint.
  TrainingState state() const {
    TrainingState s;
    s.step = steps_done_;
    s.epoch = sampler_->epoch();
    s.position = sampler_->position();
    s.training_ns = train_ns_;
    s.evaluation_ns = eval_ns_;
    s.evaluations = evaluations_;
    s.loss = last_loss_;
    s.accuracy = last_acc_;
    for (std::size_t k = 0; k < access_->count(); ++k) {
      const float* p = runner_->parameter_value(k);
      s.parameters.insert(s.parameters.end(), p, p + access_->numel(k));
    }
    const std::vector<float> b = buffers();
    s.parameters.insert(s.parameters.end(), b.begin(), b.end());
    s.optimizer = optimizer_->save();
    return s;
  }

  // Every parameter from one flat array in the network's order (a checkpoint's, a model to evaluate).
  void set_parameters(const float* flat) {
    for (std::size_t k = 0; k < access_->count(); ++k) {
      const auto n = static_cast<std::size_t>(access_->numel(k));
      std::memcpy(runner_->parameter(k), flat, n * sizeof(float));
      flat += n;
    }
    runner_->parameters_changed();
  }

  // The running statistics the runner keeps (RunnerSpec::buffers), one after another in their order.
  std::vector<float> buffers() const {
    std::vector<float> all;
    for (std::size_t k = 0; k < buffers_.size(); ++k) {
      const std::vector<float> b = runner_->buffer(k);
      all.insert(all.end(), b.begin(), b.end());
    }
    return all;
  }
  void set_buffers(const float* flat) {
    for (std::size_t k = 0; k < buffers_.size(); ++k) {
      const auto n = static_cast<std::size_t>(numel(graph_.info(buffers_[k]).shape));
      runner_->set_buffer(k, std::span<const float>(flat, n));
      flat += n;
    }
  }

  void restore(const std::vector<std::vector<float>>& v) {
    for (std::size_t k = 0; k < v.size(); ++k)
      std::memcpy(runner_->parameter(k), v[k].data(), v[k].size() * sizeof(float));
    runner_->parameters_changed();
  }

  // K steps of the native optimizer, and of the reference one on a shadow copy of the parameters
  // fed the same gradients; the worst relative L2 distance of a parameter at the end.
  double optimizer_agreement() {
    restore(initial_);
    std::vector<std::vector<float>> shadow = initial_;
    RunnerParams shadow_access(*runner_, graph_, loaded_->params);
    shadow_access.shadow(&shadow);
    auto reference = make_reference_optimizer(opt_spec_, shadow_access);
    for (int s = 0; s < kOptimizerCheckSteps; ++s) {
      load_batch(sampler_->next());
      runner_->forward(0);
      runner_->backward(0);
      const double lr = learning_rate(opt_spec_, s);
      reference->step(lr);
      optimizer_->step(lr);
    }
    double worst = 0;
    for (std::size_t k = 0; k < shadow.size(); ++k) {
      const float* p = runner_->parameter_value(k);
      double num = 0, den = 0;
      for (std::size_t i = 0; i < shadow[k].size(); ++i) {
        const double d = static_cast<double>(p[i]) - shadow[k][i];
        num += d * d;
        den += static_cast<double>(shadow[k][i]) * shadow[k][i];
      }
      worst = std::max(worst, std::sqrt(num) / std::max(std::sqrt(den), 1e-12));
    }
    return worst;
  }

  // Mean cross-entropy and top-1 accuracy over the first eval_n_ test samples.
  std::pair<double, double> evaluate() {
    if (!scheme_) {
      const auto [loss, correct] = evaluate_range(0, eval_n_);
      return {loss / static_cast<double>(eval_n_), static_cast<double>(correct) / static_cast<double>(eval_n_)};
    }
    // Level 3: the model the scheme names, on this worker's share of the test samples.
    std::vector<std::vector<float>> own;
    const bool swap = scheme_->evaluation_model(eval_model_) && !scheme_->is_server();
    if (swap) {
      own = snapshot(*runner_, *access_);
      set_parameters(eval_model_.data());
    }
    average_buffers();
    double sums[2] = {0, 0};
    if (!scheme_->is_server()) {
      const std::int64_t lo = eval_n_ * worker_ / workers_, hi = eval_n_ * (worker_ + 1) / workers_;
      const auto [loss, correct] = evaluate_range(lo, hi);
      sums[0] = loss;
      sums[1] = static_cast<double>(correct);
    }
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, comm_), "MPI_Allreduce", "the evaluation");
    if (swap) restore(own);
    return {sums[0] / static_cast<double>(eval_n_), sums[1] / static_cast<double>(eval_n_)};
  }

  // Level 3, before an evaluation: the workers' running statistics (each kept from its own
  // batches) replaced by their mean over the workers, which every worker keeps (collective).
  void average_buffers() {
    if (buffers_.empty()) return;
    std::vector<double> sum(initial_buffers_.size(), 0.0);
    if (!scheme_->is_server()) {
      const std::vector<float> own = buffers();
      std::copy(own.begin(), own.end(), sum.begin());
    }
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, sum.data(), static_cast<int>(sum.size()), MPI_DOUBLE, MPI_SUM, comm_),
              "MPI_Allreduce", "the running statistics");
    if (scheme_->is_server()) return;
    std::vector<float> mean(sum.size());
    for (std::size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / workers_);
    set_buffers(mean.data());
  }

  // Every worker's parameter hash against the others' (consistent schemes; collective).
  void check_hash() {
    std::uint64_t v[2] = {UINT64_MAX, UINT64_MAX};  // a server holds no parameters: neutral for MIN
    if (!scheme_->is_server()) {
      const std::uint64_t h = parameter_hash(*model_);
      v[0] = h, v[1] = ~h;
    }
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MIN, comm_), "MPI_Allreduce", "the parameter hash");
    ++hash_checks_;
    if (v[0] != ~v[1]) {  // min(h) != max(h): some workers differ
      ++hash_mismatches_;
      if (first_mismatch_ < 0) first_mismatch_ = steps_done_;
    }
  }

  // Summed cross-entropy and hits over test samples [lo, hi), in batches of the graph's batch
  // (the last one padded with sample 0, whose rows are not counted).
  std::pair<double, std::int64_t> evaluate_range(std::int64_t lo, std::int64_t hi) {
    if (host_prefetch_) beside_->wait();  // its augmentation's scratch is the evaluation's too
    const std::int64_t b = pt_.batch;
    double loss = 0;
    std::int64_t correct = 0;
    for (std::int64_t at = lo; at < hi; at += b) {
      const std::int64_t valid = std::min(b, hi - at);
      for (std::int64_t i = 0; i < b; ++i) eval_idx_[static_cast<std::size_t>(i)] = i < valid ? at + i : 0;
      if (staged_) runner_->inputs_from_stage();  // the copy beside reads x_: done before x_ is written
      test_->read(eval_idx_, x_, y_);
      if (augment_->any()) augment_->apply(eval_idx_, 0, false, x_);
      prefetched_ = staged_ = false;
      runner_->inputs_changed();
      runner_->infer();
      const std::vector<double> logits = runner_->output(0);
      const int c = roles_.classes;
      for (std::int64_t i = 0; i < valid; ++i) {
        const double* z = logits.data() + i * c;
        const double mx = *std::max_element(z, z + c);
        double sum = 0;
        for (int k = 0; k < c; ++k) sum += std::exp(z[k] - mx);
        const std::int64_t label = y_[i];
        loss += std::log(sum) + mx - z[label];
        correct += (std::max_element(z, z + c) - z) == label ? 1 : 0;
      }
    }
    return {loss, correct};
  }

  TrainPoint pt_;
  Params params_;
  const BackendInfo& backend_;
  int rank_;
  MPI_Comm comm_;
  int worker_ = 0, workers_ = 1;  // level 3: this rank's index among the workers (-1: a server)
  std::unique_ptr<RunnerModel> model_;
  std::unique_ptr<DeviceCollective> collective_;  // communication = "nccl"
  std::unique_ptr<Scheme> scheme_;
  PhaseTally tally_;
  std::vector<float> eval_model_;
  std::int64_t hash_checks_ = 0, hash_mismatches_ = 0, first_mismatch_ = -1;
  std::shared_ptr<const LoadedNetwork> loaded_;
  Graph graph_;
  Roles roles_;
  std::string init_words_;
  std::shared_ptr<Dataset> train_, test_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Augmentation> augment_;
  std::int64_t max_steps_ = 0;
  OptimizerSpec opt_spec_;
  InputData inputs_;
  float* x_ = nullptr;
  std::int64_t* y_ = nullptr;
  bool deferred_ = false;        // GraphRunner::defer_waits: a device's step without waits between its passes
  bool graphed_ = false;         // GraphRunner::records_steps: ... recorded once, then replayed
  std::int64_t steps_run_ = 0;   // steps this process ran in measure() (a resumed run's first is 0)
  bool host_prefetch_ = false;   // prefetch on the host: the next batch into staged_x_, staged_y_
  std::vector<float> staged_x_;  // ... read beside the step
  std::vector<std::int64_t> staged_y_;
  bool prefetched_ = false;  // x_ and y_ hold prefetched_idx_'s samples, made during the previous step
  bool staged_ = false;      // and the runner copies them to the device beside it (stage_inputs)
  std::vector<std::int64_t> prefetched_idx_;
  std::function<void()> make_next_ = [this] { prefetch(); };
  std::unique_ptr<Beside> beside_;  // prefetch()'s thread, when deferred_
  std::unique_ptr<GraphRunner> runner_;
  std::unique_ptr<RunnerParams> access_;
  std::vector<std::vector<float>> initial_;
  std::vector<int> buffers_;            // the running statistics the runner keeps (RunnerSpec::buffers)
  std::vector<float> initial_buffers_;  // their values before any step
  std::unique_ptr<Optimizer> optimizer_;
  Work work_;
  TimeToAccuracy tta_;
  std::int64_t eval_n_ = 0;
  std::vector<std::int64_t> eval_idx_;
  std::int64_t train_ns_ = 0, steps_done_ = 0, eval_ns_ = 0, evaluations_ = 0, resumed_at_ = 0;
  int checkpoints_ = 0;
  double last_loss_ = std::nan(""), last_acc_ = std::nan("");
  std::string stop_reason_;
};

std::string train_check(const Params& p) {
  std::string why = operator_common_check(p);
  if (!why.empty()) return why;
  const TrainPoint pt(p);
  const std::string& backend = param<std::string>(p, "backend");
  const BackendInfo* b = find_backend(backend);
  if (pt.optimizer_impl == "native" && !(b && b->native_optimizer)) {
    std::vector<std::string> with;
    for (const auto& o : all_backends())
      if (o.native_optimizer) with.push_back(o.name);
    return "optimizer_impl = \"native\" needs a backend with optimizers of its own: " + join(with, ", ") +
           " (backend here: " + backend + ")";
  }
  if (pt.steps <= 0 && pt.epochs <= 0 && !(pt.budget_s > 0))
    return "training needs an end: steps, epochs or time_budget";
  if (pt.target < 0 || pt.target > 1) return "target_accuracy is a fraction in (0, 1] (0: none)";
  if (pt.budget_s < 0) return "time_budget is in seconds of training, >= 0 (0: none)";
  if (const std::string& more = param<std::string>(p, "report_targets"); !more.empty()) {
    const auto targets = parse_number_list(more);
    if (!targets)
      return "report_targets is a list of accuracies separated by spaces or commas, e.g. \"0.8 0.85\"; got \"" + more +
             "\"";
    if (!(pt.target > 0))
      return "report_targets needs target_accuracy (and its time_budget): the report judges them by the same budget";
    for (double t : *targets) {
      if (!(t > 0 && t <= 1)) return "report_targets: " + canonical(Value{t}) + " is not an accuracy in (0, 1]";
      if (pt.stop_at_target && t >= pt.target)
        return "report_targets: " + canonical(Value{t}) + " is not below target_accuracy " +
               canonical(Value{pt.target}) +
               ", where training stops (stop_at_target): the curve never shows it; raise target_accuracy or set stop_at_target = false";
    }
  }
  if (pt.checkpoint_s < 0) return "checkpoint_interval is in seconds of wall time, >= 0 (0: no checkpoints)";
  for (const char* key : {"normalize_mean", "normalize_std"})
    if (const std::string v = str_param_or(p, key, ""); !v.empty() && !parse_number_list(v))
      return std::string(key) + " is a list of numbers separated by spaces or commas, e.g. \"0.286\"; got \"" + v +
             "\"";
  if (pt.distributed) {
    if (const std::string why = scheme_check(pt.scheme, static_cast<int>(pt.ranks)); !why.empty()) return why;
    if (pt.global_batch > 0 && pt.global_batch % pt.workers != 0)
      return "global_batch " + std::to_string(pt.global_batch) + " does not split evenly over " +
             std::to_string(pt.workers) + " workers (ranks " + std::to_string(pt.ranks) + " minus ps_servers " +
             std::to_string(pt.scheme.ps_servers) + ")";
    if (pt.scheme.communication == "nccl") {
      const BackendInfo* nccl = find_backend(pt.scheme.communication);
      if (!(b && b->make_device_memory)) {
        std::vector<std::string> with;
        for (const auto& o : all_backends())
          if (o.make_device_memory) with.push_back(o.name);
        return "communication = \"nccl\" averages the gradients (or parameters) where d500's executor keeps them, on a GPU: it needs backend " +
               (with.empty() ? std::string("cuda (not in this build)") : join(with, ", ")) +
               " (backend here: " + backend + ")";
      }
      if (!nccl || !nccl->built || !nccl->make_device_collective)
        return "communication = \"nccl\" needs the nccl backend, which this build lacks" +
               (nccl ? ": " + nccl->not_built_reason : std::string());
    }
    if (pt.optimizer_impl == "native" && (pt.scheme.name == "ps-sync" || pt.scheme.name == "ps-async") &&
        pt.scheme.communication != "nccl")
      return "a parameter server over MPI applies d500's reference optimizer to its shard: optimizer_impl = \"native\" does not apply to " +
             pt.scheme.name +
             " with communication = \"mpi\" (ps-sync with communication = \"nccl\" runs rank 0's own optimizer)";
  }
  if (pt.target > 0 && !(pt.budget_s > 0))
    return "target_accuracy needs a time_budget (seconds of training): time to accuracy censors a run that misses the target at its budget";
  if (const std::string e = check_optimizer(optimizer_spec(p, 0)); !e.empty()) return e;
  try {
    const auto n = load_point_network(pt.network, pt.batch, true, false, pt.fusion);
    const Roles r = roles_of(*n);
    for (const char* split : {"train", "test"}) {
      const auto d = shared_dataset(data_request(pt, n->graph, r, split));
      check_data(*d, n->graph, r);
      if (std::string(split) == "train") {
        Sampler(d->size(), pt.batch, false, 1, 0, static_cast<int>(pt.workers));
        Augmentation(pt.augment, d->sample_shape());
      }
    }
    const BackendInfo* b = find_backend(backend);
    if (b && b->built && b->check_graph) return b->check_graph(n->graph);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

RunnerSpec training_spec(const Graph& g, const LoadedNetwork& n, const InputData& inputs, int threads) {
  RunnerSpec spec;
  spec.graph = &g;
  spec.training = true;
  spec.loss = n.loss.loss;
  spec.params = n.params;
  spec.buffers = running_statistics(g);
  spec.inputs = inputs.pointers();
  spec.threads = threads;
  return spec;
}

OptimizerSpec optimizer_spec(const Params& p, std::int64_t total_steps) {
  OptimizerSpec s;
  s.name = param<std::string>(p, "optimizer");
  s.lr = param<double>(p, "lr");
  s.momentum = param<double>(p, "momentum");
  s.beta1 = param<double>(p, "beta1");
  s.beta2 = param<double>(p, "beta2");
  s.eps = param<double>(p, "eps");
  s.alpha = param<double>(p, "alpha");
  s.weight_decay = param<double>(p, "weight_decay");
  s.schedule = param<std::string>(p, "schedule");
  s.step_size = param<std::int64_t>(p, "step_size");
  s.gamma = param<double>(p, "gamma");
  s.warmup_steps = param<std::int64_t>(p, "warmup_steps");
  s.total_steps = total_steps;
  return s;
}

std::shared_ptr<Dataset> shared_dataset(const DatasetRequest& r) {
  // Thread-safe, as the planner checks points on several threads; one dataset opened at a time.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  static std::vector<std::pair<std::string, std::shared_ptr<Dataset>>> cache;
  const std::string key = r.dataset + "\n" + r.split + "\n" + r.data_dir + "\n" + shape_str(r.sample_shape) + "\n" +
                          std::to_string(r.classes) + "\n" + std::to_string(r.samples) + "\n" + std::to_string(r.seed);
  for (const auto& [k, d] : cache)
    if (k == key) return d;
  auto d = std::shared_ptr<Dataset>(open_dataset(r));
  cache.push_back({key, d});
  if (cache.size() > 4) cache.erase(cache.begin());
  return d;
}

namespace {

ParamSpec real_param(const char* n, double d, const char* help) {
  return ParamSpec{n, ValueType::Real, Value{d}, 0, 0, {}, help};
}
ParamSpec int_param(const char* n, std::int64_t d, std::int64_t lo, std::int64_t hi, const char* help) {
  return ParamSpec{n, ValueType::Int, Value{d}, lo, hi, {}, help};
}

// Level 2's own parameters: the network, the data, the optimizer and its schedule, when to stop,
// evaluate and checkpoint.
std::vector<ParamSpec> training_params() {
  using V = Value;
  const auto real = real_param;
  const auto integer = int_param;
  // A table: one entry a line, as written.
  // clang-format off
  return {
      {"network", ValueType::String, V{std::string("lenet5")}, 0, 0, {}, "a built-in network (d500 networks) or the path of an .onnx classifier"},
      {"dataset", ValueType::String, V{std::string("fashion-mnist")}, 0, 0, {},
       "fashion-mnist (Debian's dataset-fashion-mnist), cifar10 (CIFAR-10's binary version, in data_dir), synthetic, sequences "
       "(synthetic [T, F] sequences with a rule to learn), the path of "
       "an HDF5 file, or of a folder of HDF5 shards (hdf5-schema/README.md, Training data)"},
      {"data_dir", ValueType::String, V{std::string()}, 0, 0, {},
       "where fashion-mnist's IDX files are (default: /usr/share/datasets/fashion-mnist), or cifar10's data_batch_*.bin and test_batch.bin"},
      integer("synthetic_samples", 60000, 1, std::int64_t{1} << 40, "dataset = synthetic or sequences: training samples (the test split has a sixth)"),
      integer("batch", 64, 1, 1 << 24, "samples per step (per rank)"),
      {"optimizer", ValueType::String, V{std::string("momentum")}, 0, 0, optimizer_names(), "the update rule (PyTorch's definitions)"},
      {"optimizer_impl", ValueType::String, V{std::string("reference")}, 0, 0, {"reference", "native"},
       "reference: d500's optimizer on any executor; native: the framework's own (libtorch-native: torch::optim)"},
      real("lr", 0.01, "learning rate (the schedule's peak)"),
      real("momentum", 0.9, "momentum, nesterov: the momentum factor; rmsprop: its momentum too (PyTorch's rmsprop default is 0: set momentum = 0)"),
      real("beta1", 0.9, "adam, adamw"),
      real("beta2", 0.999, "adam, adamw"),
      real("eps", 1e-8, "adam, adamw, adagrad, rmsprop: the denominator's epsilon"),
      real("alpha", 0.99, "rmsprop: smoothing of the squared gradient"),
      real("weight_decay", 0, "L2 penalty added to the gradient (adamw: decoupled)"),
      {"schedule", ValueType::String, V{std::string("constant")}, 0, 0, schedule_names(), "learning-rate schedule"},
      integer("step_size", 1000, 1, std::int64_t{1} << 40, "schedule = step: steps between decays"),
      real("gamma", 0.1, "schedule = step: the decay factor"),
      integer("warmup_steps", 0, 0, std::int64_t{1} << 40, "linear warm-up of the learning rate over these first steps"),
      integer("epochs", 1, 0, 1 << 20, "passes over the training split (0: no limit from epochs)"),
      integer("steps", 0, 0, std::int64_t{1} << 40, "steps to run (0: epochs decide); with cosine, its horizon"),
      integer("eval_interval_steps", 100, 0, std::int64_t{1} << 40, "steps between evaluations on the test split (0: only at the end)"),
      integer("eval_samples", 0, 0, std::int64_t{1} << 40, "test samples per evaluation (0: the whole test split)"),
      real("target_accuracy", 0, "test accuracy that counts as reached (0: none)"),
      {"report_targets", ValueType::String, V{std::string()}, 0, 0, {},
       "further test accuracies (e.g. \"0.8 0.85\") whose time to accuracy the report gives from the same curve; below target_accuracy "
       "when training stops there"},
      real("time_budget", 0, "seconds of training (evaluation excluded) after which the run stops (0: none)"),
      real("checkpoint_interval", 120,
           "seconds of wall time between checkpoints of the training state into the results file, taken between steps "
           "(0: none); a job killed at its time limit resumes from the last one"),
      {"stop_at_target", ValueType::Bool, V{true}, 0, 0, {}, "stop at the first evaluation that reaches target_accuracy"},
      {"shuffle", ValueType::Bool, V{true}, 0, 0, {}, "a seeded shuffle of the training split per epoch (false: sequential)"},
      integer("crop_padding", 0, 0, 1 << 16,
              "augmentation (training split): a random crop of the sample's size from it zero-padded by this many pixels a side (0: none)"),
      {"flip", ValueType::Bool, V{false}, 0, 0, {}, "augmentation (training split): a horizontal flip with probability 1/2"},
      {"normalize_mean", ValueType::String, V{std::string()}, 0, 0, {},
       "per-channel normalisation of both splits, (x - mean) / std: one mean, or one per channel (e.g. \"0.286\"); with normalize_std"},
      {"normalize_std", ValueType::String, V{std::string()}, 0, 0, {}, "the standard deviations of normalize_mean (e.g. \"0.353\")"},
      {"prefetch", ValueType::Bool, V{false}, 0, 0, {},
       "read the next batch (and augment it) on a thread beside the step while it computes, as a framework's data loader "
       "does; the data phase then holds the wait for it and its copy (on a device this always happens)"},
      {"eval_statistics", ValueType::String, V{std::string("running")}, 0, 0, {"running", "batch"},
       "what normalises BatchNormalization in the evaluation: running (statistics kept over the training steps by ONNX's "
       "momentum, as frameworks evaluate) or batch (each evaluation batch's own, none kept: d500 before 2026-11)"},
      {"init", ValueType::String, V{std::string("seeded")}, 0, 0, {"seeded", "model"},
       "seeded: new weights from the point's seed (He-uniform); model: the model file's weights"},
  };
  // clang-format on
}

// Level 3: the same training, data-parallel over the ranks through a scheme.
WorkloadInfo distributed_workload(const WorkloadInfo& w) {
  using V = Value;
  const auto integer = int_param;
  WorkloadInfo d = w;
  // On a GPU only d500's executor (cuda): its host copies of parameters and gradients stay what the
  // scheme wrote until the next backward pass, and with communication = "nccl" its device
  // gradients are averaged in place. LibTorch's runner on CUDA copies a gradient from the device
  // at every ask, so an average written into the copy would not reach its optimizer: refused.
  for (const auto& b : all_backends())
    if (b.no_device && !b.make_device_memory) d.backends.erase(b.name);
  d.name = "distributed";
  d.level = 3;
  d.description =
      "data-parallel training over the ranks by a scheme (allreduce, overlapped buckets, parameter servers, model averaging, "
      "D-PSGD); phases include communication and wait, volume counted per rank and step, consistency checked by hash";
  d.scaling_note =
      "batch is per worker (the global batch grows with the workers); with global_batch, the global batch is split";
  d.scaling_of = [](const Params& p) {
    return int_param_or(p, "global_batch", 0) > 0 ? std::string("strong") : std::string("weak");
  };
  for (auto& ps : d.params)
    if (ps.name == "batch") ps.help = "samples per step per worker (ignored when global_batch is set)";
  // A table: one entry a line, as written.
  // clang-format off
  d.params.insert(d.params.begin() + 1,
                  {{"scheme", ValueType::String, V{std::string("allreduce")}, 0, 0, scheme_names(),
                    "allreduce | allreduce-overlap | ps-sync | ps-async | model-averaging | dpsgd (src/training/distributed.hpp)"},
                   integer("global_batch", 0, 0, std::int64_t{1} << 30,
                           "samples per step over all workers, split evenly (strong scaling); 0: batch per worker (weak scaling)"),
                   integer("bucket_bytes", 4 << 20, 4, std::int64_t{1} << 34, "allreduce-overlap: bytes of gradients per bucket"),
                   integer("average_interval", 8, 1, std::int64_t{1} << 30, "model-averaging: steps between averages"),
                   integer("ps_servers", 0, 0, 1 << 20, "ps-sync, ps-async: dedicated server ranks (0: rank 0 serves and trains; ps-sync only)"),
                   integer("staleness", 0, 0, 1 << 20, "ps-async: steps a worker computes on its own copy between pulls"),
                   {"communication", ValueType::String, V{std::string("mpi")}, 0, 0, {"mpi", "nccl"},
                    "mpi: the scheme exchanges host buffers over MPI (on a device, through the host's copies); nccl (every scheme but "
                    "the parameter servers, backend cuda): gradients (model-averaging, dpsgd: parameters) averaged on the GPU, by "
                    "ncclAllReduce (dpsgd: ncclSend/ncclRecv with its neighbours)"},
                   integer("hash_interval_steps", 50, 0, std::int64_t{1} << 40,
                           "consistent schemes: steps between checks that every worker holds identical parameters (and at the end; 0: end only)")});
  // clang-format on
  return d;
}

}  // namespace

void register_train(WorkloadRegistry& r) {
  WorkloadInfo w;
  w.name = "train";
  w.level = 2;
  w.description =
      "a network trained on a dataset to a step count, a target test accuracy or a time budget; steps timed by phase, accuracy as events";
  w.rate_unit = "samples/s";
  w.scaling = "weak";
  w.scaling_note = "every rank trains on its own share of each epoch";
  w.params = training_params();
  for (const auto& s : operator_common_params()) w.params.push_back(s);
  w.normalize = [](Params& p) {
    absolute_network_path(std::get<std::string>(p.at("network")));
    // Files by their absolute paths (the named datasets are not files).
    auto absolute = [](std::string& v) {
      if (!v.empty()) v = fs::absolute(v).lexically_normal().string();
    };
    auto& dataset = std::get<std::string>(p.at("dataset"));
    if (!is_named_dataset(dataset)) absolute(dataset);
    absolute(std::get<std::string>(p.at("data_dir")));
    normalize_backend_settings(p, "train");
  };
  w.check = train_check;
  w.memory_bytes = [](const Params& p) -> std::int64_t {
    const TrainPoint pt(p);
    try {
      const NetworkBytes b = network_bytes(*load_point_network(pt.network, pt.batch, true, false, pt.fusion));
      // The point's graph, the runner, two optimizer states, the yardstick in double; data.
      const double step = 2 * b.activations + b.weights;
      return memory_figure(5 * b.weights + step + 2 * (b.weights + step) + 64e6);
    } catch (const Error&) {
      return 0;
    }
  };
  for (const auto& b : all_backends())
    if (b.built && (b.reference || b.make_node_kernel || b.make_graph_runner))
      w.backends[b.name] = [&b](const RunContext& c) { return std::make_unique<TrainWorkload>(c, b); };

  WorkloadInfo d = distributed_workload(w);
  r.add(std::move(w));
  r.add(std::move(d));
}

}  // namespace d500
