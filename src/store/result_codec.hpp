#pragma once
// A read results file (JobResult) as bytes and back: how the contained reader's child hands
// what it read to the parent (store/guarded.cpp), so that a file the child vetted is never
// opened again in the parent -- where a file changed or damaged since could crash the report.
// The format is private to one d500 binary (a child and its parent): native byte order, no
// version. Decoding trusts nothing: every count is checked against the bytes left before
// anything is allocated for it.
#include <string>

#include "store/reader.hpp"

namespace d500 {

std::string encode_job_result(const JobResult& r);
// Throws d500::Error naming `what` when `bytes` is not a whole encoding.
JobResult decode_job_result(const std::string& bytes, const std::string& what);

}  // namespace d500
