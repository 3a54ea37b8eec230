#pragma once
// The backends' own settings (BackendSetting, declared in each backend's folder) as the workloads
// that run on backends take them: one ParamSpec per key over every backend d500 knows, whether
// this build has it or not, and the checks every such workload applies to a point, naming no
// backend of its own.
#include <string>
#include <vector>

#include "backends/registry.hpp"
#include "common/param_spec.hpp"
#include "common/value.hpp"

namespace d500 {

// One parameter per setting name, backends in name order: the union of the
// backends' choices, default "" (each backend's own), and each backend's help joined:
// `backend = "cuda": ...; backend = "libtorch-cuda": ...`.
std::vector<ParamSpec> backend_setting_params();

// A point of `workload` with the settings' keys: sets a key its backend's default changed for
// and the point leaves unset to the new default (BackendSetting::planned: its id names it),
// clears the settings that do not change that workload, normalises each backend's own choice to
// "" (BackendSetting::neutral) and a path to an absolute one. Once per point, at planning: ""
// means unset there, and the old default afterwards.
void normalize_backend_settings(Params& p, const std::string& workload);

// What each backend setting the point leaves unset ("") means on it, for its results file
// (`unset.<key>`, hdf5-schema/README.md): the value the point's backend then uses (`neutral`, by
// workload; cuda's cudnn_api: legacy, since a point planned without it names graph in its id), or
// "" where the setting is none of this backend's or changes nothing on `workload`'s points. Left
// out: a setting whose unset value follows another key there (BackendSetting::unset_follows).
std::vector<std::pair<std::string, std::string>> unset_settings(const Params& p, const std::string& workload);

// "" when the point's backend takes every setting the point sets and has every setting it
// requires; else why not, naming the key first (the planner then points at its line): "'math' is
// only for backends "cuda" and "libtorch-cuda" (this point's backend is "blas"; ...)". Then the
// backend's own check of the point (BackendInfo::check_point).
std::string check_backend_settings(const Params& p);

// What a point on a backend that does not declare `math` (or `memory_format`) is told, as each
// declaring backend's BackendSetting::other_note: check_backend_settings quotes whichever one
// declares it, so they say one sentence.
inline constexpr const char* kOthersComputeInFloat32 = "reference, blas and libtorch compute in strict float32";
inline constexpr const char* kOthersKeepNchw = "reference, blas and libtorch keep NCHW";

// The `fusion` setting of a backend whose kernels run networks/fuse.hpp's joined nodes (cuda,
// onednn): one meaning everywhere; `how` says how this backend runs the joined nodes, `dflt` its
// default ("add_relu" is planned into the ids, so that "off" keeps the ids points had before).
BackendSetting fusion_setting(const std::string& how, const std::string& dflt);

// The reference backend's name: every workload's own implementation, the yardstick of validation.
const std::string& reference_backend_name();

}  // namespace d500
