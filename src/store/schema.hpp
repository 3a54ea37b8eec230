#pragma once
// Names of the results schema (documented in hdf5-schema/). Bump kSchemaVersion on any change
// a reader would notice.
namespace d500::schema {
inline constexpr const char* kName = "d500-results";
inline constexpr long kVersion = 1;
}  // namespace d500::schema
