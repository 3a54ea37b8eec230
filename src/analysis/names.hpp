#pragma once
// How the report names a point: by `workload:backend` and the parameters that vary among the
// report's points of that workload (seed, nodes and ranks_per_node among them when they vary),
// never by the defaults every point shares, which each section states once. The full canonical
// text stays in results.csv/json and the HTML row's tooltip.
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/value.hpp"

namespace d500 {

struct PointRow;

struct PointNames {
  // workload -> the parameters whose values differ between its points (an absent parameter
  // counts as a value), in name order; backend and workload themselves are never listed.
  std::map<std::string, std::vector<std::string>> varying;
  // workload -> the parameters every point of it has with the same value.
  std::map<std::string, Params> shared;
  // workload -> a backend's own settings rather than the work's: the parameters set on some point
  // of one backend and on no point of another (cuda's cudnn_api, its fusion: the planner writes
  // their defaults into a cuda point's id, and libtorch-cuda has neither). Comparisons across
  // backends leave them out of what two points must share, and a figure out of its axes and panels;
  // both name them beside the backend where they tell two points of one backend apart (who).
  std::map<std::string, std::set<std::string>> own;
  // workload -> those of its own settings with one value on all of each backend's points (onednn's
  // fusion=off, cuda's cudnn_api=graph, written where the file says what unset stands for): they
  // tell no two points apart that their backends do not, so they are not in `varying`; the results
  // table says them once, beside the shared parameters.
  std::map<std::string, std::set<std::string>> by_backend;
  // workload -> its varying numbers another of its parameters fixes (conv2d's c, h, k, ... by its
  // named shape: fixed_by_another): a label leaves them out, its determinant names the point.
  std::map<std::string, std::set<std::string>> fixed;
  // workload -> a varying parameter with the same value as an earlier one on every point (gemm's
  // m and n swept with k: same_value_groups) -> that earlier one: a label says them once, "k=m=n=256".
  std::map<std::string, std::map<std::string, std::string>> same_as;
  // workload -> the one backend all its points ran on (the distributed campaign's reference): it
  // tells no two points apart, so a label leaves it out and shared_text says it once.
  std::map<std::string, std::string> lone_backend;

  bool varies(const std::string& workload, const std::string& name) const;
  // "gemm:blas n=512 ranks_per_node=2": the point by what tells it apart, less `without` (and less
  // what `fixed` sets aside; "distributed scheme=ps-sync" where the backend is its lone_backend).
  std::string label(const PointRow& r, std::initializer_list<const char*> without = {}, bool with_backend = true) const;
  // The same less every parameter in `also` too.
  std::string label(const PointRow& r, std::initializer_list<const char*> without, bool with_backend,
                    const std::set<std::string>& also) const;
  // Only the varying parameters' "k=v" (no workload or backend), less `without`.
  std::string varying_text(const PointRow& r, std::initializer_list<const char*> without = {}) const;
  // "batch=64 network=lenet5 seed=42": what every point of the workload shares ("" when none),
  // led by "backend=reference" where every point ran on one.
  std::string shared_text(const std::string& workload) const;
  // The workload's backend-own settings (own), or nullptr where it has none.
  const std::set<std::string>* own_of(const PointRow& r) const;
  // How a point reads among `group`: its backend, and where the group has more than one point of
  // that backend, the settings of its own that tell them apart ("cuda (fusion=add_relu+bn_relu)").
  std::string who(const PointRow& r, const std::vector<const PointRow*>& group) const;
};

PointNames point_names(const std::vector<PointRow>& rows);

// A label's workload ("gemm" of "gemm:blas n=512", of "distributed scheme=ps-sync" and of "gemm,
// 2 ranks") and what follows it ("blas n=512", "scheme=ps-sync"; a label of its workload alone is
// kept whole).
std::string label_workload(const std::string& label);
std::string label_rest(const std::string& label);

// A parameter's value in a table cell, on an axis or in a comparison of two parameters. An unset
// one holds what it stood for where the results file says (summary.cpp's apply_unset: "fp32",
// "nchw"); one left unset that the file does not explain (a file before 2026-12, gemm's math, which
// follows its dtype) reads "default", an absent one "-".
std::string value_text(const PointRow& r, const std::string& k);

// `keys` in groups of the same value (value_text) in every one of `rows` (gemm's k, m and n swept
// together: one group), each group in `keys`' order and the groups in that of their first: a
// Results column headed "k = m = n", a figure's "k = m = n" axis, a label's "k=m=n=256".
std::vector<std::vector<std::string>> same_value_groups(const std::vector<const PointRow*>& rows,
                                                        const std::vector<std::string>& keys);

}  // namespace d500
