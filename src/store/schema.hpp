#pragma once
// Names of the results schema (documented in hdf5-schema/). Bump kSchemaVersion on any change
// a reader would notice.
namespace d500::schema {
inline constexpr const char* kName = "d500-results";
inline constexpr long kVersion = 5;
// Version 2 added the `phase` column of samples and the root attribute `phase_names`; files of
// version 1 are still read (their samples are all phase 0, op). Version 3 added level 1's
// networks: the rate unit samples/s with `work_items`, the point's network.*, executor and
// memory.* attributes, and the `steps` and `step_times` datasets. Version 4 added training
// checkpoints (a point's `checkpoint` group), the sample phase `checkpoint` and train.* attributes.
// Version 5 added the sample phase `device` (9): a GPU kernel's own duration (CUDA events).
inline constexpr long kOldestReadable = 1;
}  // namespace d500::schema
