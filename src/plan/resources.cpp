// Planning's resource checks (src/plan/stages.hpp): each point's memory, threads and GPUs against
// what a node of its jobs has.
#include <cstdlib>
#include <string>

#include "backends/registry.hpp"
#include "common/text.hpp"
#include "plan/resolve.hpp"
#include "plan/stages.hpp"

namespace d500::planning {

ResourceChecks::ResourceChecks(Plan& plan, const PlanOptions& opt) : plan_(plan), opt_(opt) {
  const Campaign& c = plan.campaign;
  // A node's memory: this machine's for local jobs, the campaign's word for Slurm's.
  if (plan.tmpl.launcher == "local") {
    plan.node_memory_bytes = opt.host_memory_bytes > 0 ? opt.host_memory_bytes : host_memory_bytes();
    plan.node_memory_source = "this machine's memory (" + fmt_bytes(plan.node_memory_bytes) + ", MemTotal)";
  } else if (c.slurm.mem_per_node_bytes > 0) {
    plan.node_memory_bytes = c.slurm.mem_per_node_bytes;
    plan.node_memory_source =
        "[slurm] mem_per_node (" + fmt_bytes(plan.node_memory_bytes) + ", " + c.slurm.mem_where.str() + ")";
  }
  cpus_ = opt.host_cpus > 0 ? opt.host_cpus : host_cpus();
  for (const auto& g : split(c.slurm.gres, ','))
    if (g.rfind("gpu", 0) == 0) {
      const auto colon = g.rfind(':');
      gpus_asked_ = colon == std::string::npos ? 1 : std::atoll(g.c_str() + colon + 1);
    }
}

Resolved ResourceChecks::resolve_again(const Point& p, Product& product) const {
  product.set(p.combination);
  return resolve(product.raw, *plan_.registry, plan_.campaign);
}

void ResourceChecks::check(const Point& p, std::int64_t threads, const std::string& backend, Product& product) {
  if (!nodes_refusal_ && plan_.tmpl.launcher == "local" && p.nodes != 1) {
    const Resolved res = resolve_again(p, product);
    nodes_refusal_ =
        Error(*res.where, "point " + point_words(res.params, plan_.campaign) + ": template '" + plan_.tmpl.name +
                              "' runs on this machine only, so nodes must be 1 (use a Slurm template for more)");
  }
  check_memory(p, product);
  check_threads(p, threads);
  check_gpus(p, backend);
}

// Memory per point against a node's: refused (unless --force) before anything is written.
void ResourceChecks::check_memory(const Point& p, Product& product) {
  const std::int64_t rpn = p.ranks_per_node;
  if (p.memory_bytes < 0) return;
  const std::int64_t per_node = p.memory_bytes * rpn;
  if (per_node > largest_per_node_)
    largest_per_node_ = per_node, plan_.largest_memory_point = static_cast<long>(plan_.points.size());
  if (plan_.node_memory_bytes <= 0 || per_node <= plan_.node_memory_bytes || memory_refusal_) return;
  const Resolved res = resolve_again(p, product);
  const std::string driver = memory_driver(res, product.raw, p.memory_bytes);
  const std::string why =
      "point " + point_words(res.params, plan_.campaign) + ": needs about " + fmt_bytes(p.memory_bytes) +
      " of memory per rank" +
      (rpn > 1 ? " (" + fmt_bytes(per_node) + " for its " + std::to_string(rpn) + " ranks per node)" : "") +
      " for its tensors, their validation copies and the backend's workspace, more than " + plan_.node_memory_source +
      (driver.empty() ? "" : "; key '" + driver + "' = " + canonical(res.params.at(driver)) + " makes it so");
  if (!opt_.force)
    memory_refusal_ = Error(driver.empty() ? *res.where : product.raw.at(driver)->where,
                            why + "; lower it, or plan with --force to run it anyway (nothing was written)");
  else
    plan_.warnings.push_back(why + " (planned anyway: --force)");
}

// Threads: ranks x threads beyond the CPUs makes the library's threads share cores.
void ResourceChecks::check_threads(const Point& p, std::int64_t threads) {
  const Campaign& c = plan_.campaign;
  const std::int64_t rpn = p.ranks_per_node;
  const bool local_over = plan_.tmpl.launcher == "local" && rpn * threads > cpus_;
  const bool slurm_over = plan_.tmpl.launcher == "slurm" && threads > c.slurm.cpus_per_task;
  if (!(local_over || slurm_over) || !threads_said_.insert({local_over ? rpn : 0, threads}).second) return;
  const std::string w = local_over ? std::to_string(rpn) + " rank(s) x " + std::to_string(threads) +
                                         " thread(s) = " + std::to_string(rpn * threads) + " on this machine's " +
                                         std::to_string(cpus_) + " CPUs"
                                   : std::to_string(threads) + " thread(s) per rank, but [slurm] cpus_per_task = " +
                                         std::to_string(c.slurm.cpus_per_task) + " CPUs per rank";
  plan_.warnings.push_back("threads oversubscribed: " + w + " (e.g. point " + point_words(p.canonical, plan_.campaign) +
                           "): its timings will measure threads sharing cores; the worker flags such points");
}

// GPUs: a point on a device backend wants one GPU per rank of its node; a Slurm job gets them
// only if it asks (gres), and a node's GPUs are shared by its ranks otherwise.
void ResourceChecks::check_gpus(const Point& p, const std::string& backend) {
  const std::int64_t rpn = p.ranks_per_node;
  if (plan_.tmpl.launcher != "slurm" || gpus_asked_ >= rpn) return;
  const BackendInfo* b = find_backend(backend);
  if (!b || !b->no_device || !gpus_said_.insert(backend).second) return;
  const std::string eg = " (e.g. point " + point_words(p.canonical, plan_.campaign) + ")";
  if (gpus_asked_ < 0)
    plan_.warnings.push_back("point(s) on backend " + backend +
                             " run on a GPU, but [slurm] asks for none: set gres = \"gpu:" + std::to_string(rpn) +
                             "\" (one per rank), or their jobs may land where there is none" + eg);
  else
    plan_.warnings.push_back("point(s) on backend " + backend + " run " + std::to_string(rpn) + " ranks per node on " +
                             std::to_string(gpus_asked_) + " GPU(s) (gres = \"" + plan_.campaign.slurm.gres +
                             "\"): ranks will share a GPU" +
                             (backend == "nccl" ? ", which NCCL refuses" : ", and time each other's work") + eg);
}

void ResourceChecks::throw_refusals() const {
  if (nodes_refusal_) throw *nodes_refusal_;
  if (memory_refusal_) throw *memory_refusal_;
}

}  // namespace d500::planning
