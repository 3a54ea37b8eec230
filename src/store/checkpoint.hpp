#pragma once
// Training checkpoints in the results file (levels 2 and 3): the writer's side is
// ResultWriter::checkpoint (writer.hpp); this is the reading side, which a later attempt's worker
// uses to resume a point that its job's time limit (or a crash) cut off.
//
// Layout, under /points/<id>/checkpoint (hdf5-schema/README.md, "Checkpoints"): two slots, so
// that a checkpoint being written never overwrites the last complete one.
//   state            compound [2, ranks]: step, epoch, position, training_ns, evaluation_ns,
//                    evaluations, loss, accuracy, optimizer_bytes, parameters_crc32, optimizer_crc32
//   parameters       float32 [2, ranks, P]: every trainable parameter, concatenated
//   optimizer_state  uint8 [2, ranks, B] (B grows): the optimizer's own bytes
//   attributes slot (the newest complete slot, -1 before the first), checkpoints (written so
//   far), format.
// A slot counts only when every rank's row matches its CRC-32s (zlib's): a job killed while
// writing leaves the other slot, written and flushed before, to resume from.
#include <hdf5.h>

#include <map>
#include <string>
#include <vector>

#include "metrics/metrics.hpp"

namespace d500 {

inline constexpr const char* kCheckpointFormat = "d500-checkpoint 1";

// One usable checkpoint: where it is and how far its training got.
struct CheckpointRef {
  std::string file;
  int slot = -1;
  std::int64_t step = 0;
  double training_s = 0;  // rank 0's training time at the checkpoint
};

// The usable checkpoint of each of `ids` in `file` whose record did not end (its status is
// still `running`: the job ended while it trained) and was written by `ranks` ranks. Serial.
// Throws d500::Error naming the file when it cannot be read.
std::map<std::string, CheckpointRef> checkpoints_in(const std::string& file, const std::vector<std::string>& ids,
                                                    int ranks);

// The newest checkpoint of each of `ids` across `files` (the most steps; among equals the later
// file), each file read first in a contained child (store/guarded.hpp's rule: results files are
// untrusted). A file that cannot be read is skipped with a line in `notes`. Forks: call it
// before MPI starts and before any thread.
std::map<std::string, CheckpointRef> find_checkpoints(const std::vector<std::string>& files,
                                                      const std::vector<std::string>& ids, int ranks,
                                                      std::vector<std::string>& notes);

// The refs as text ("id\tslot\tstep\ttraining_s\tfile" lines) and back: how a contained child
// answers its parent, and how rank 0 shares what it found with the other ranks.
std::string checkpoints_text(const std::map<std::string, CheckpointRef>& refs);
std::map<std::string, CheckpointRef> parse_checkpoints_text(const std::string& text);

// Rank `rank`'s state in checkpoint `ref` of point `id`, with its events up to the checkpoint's
// step. Serial; throws naming the file.
TrainingState read_checkpoint(const CheckpointRef& ref, const std::string& id, int rank);

// The problem of the checkpoint group of an open point group (for d500 check), as
// "checkpoint: ...": "" when it is absent or sound (its newest slot's rows match their checksums).
std::string checkpoint_problem(hid_t point_group, const std::string& where, long ranks);

}  // namespace d500
