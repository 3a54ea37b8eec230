// Training checkpoints: written by ResultWriter::checkpoint (collective, defined here beside the
// reader so that the layout lives in one file), read by the worker of a later attempt.
#include "store/checkpoint.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/contain.hpp"
#include "common/error.hpp"
#include "common/mpi_check.hpp"
#include "common/text.hpp"
#include "metrics/outcome.hpp"
#include "store/h5.hpp"
#include "store/writer.hpp"

namespace d500 {

namespace {

constexpr int kSlots = 2;

// One rank's row of the `state` dataset.
struct StateRow {
  std::int64_t step, epoch, position, training_ns, evaluation_ns, evaluations;
  double loss, accuracy;
  std::int64_t optimizer_bytes;
  std::uint32_t parameters_crc32, optimizer_crc32;
};

h5::Handle state_type() {
  h5::Handle t(h5::check(H5Tcreate(H5T_COMPOUND, sizeof(StateRow)), "H5Tcreate", "checkpoint state type"), H5Tclose);
  auto add = [&](const char* n, std::size_t off, hid_t ty) { h5::check(H5Tinsert(t, n, off, ty), "H5Tinsert", n); };
  add("step", offsetof(StateRow, step), H5T_NATIVE_INT64);
  add("epoch", offsetof(StateRow, epoch), H5T_NATIVE_INT64);
  add("position", offsetof(StateRow, position), H5T_NATIVE_INT64);
  add("training_ns", offsetof(StateRow, training_ns), H5T_NATIVE_INT64);
  add("evaluation_ns", offsetof(StateRow, evaluation_ns), H5T_NATIVE_INT64);
  add("evaluations", offsetof(StateRow, evaluations), H5T_NATIVE_INT64);
  add("loss", offsetof(StateRow, loss), H5T_NATIVE_DOUBLE);
  add("accuracy", offsetof(StateRow, accuracy), H5T_NATIVE_DOUBLE);
  add("optimizer_bytes", offsetof(StateRow, optimizer_bytes), H5T_NATIVE_INT64);
  add("parameters_crc32", offsetof(StateRow, parameters_crc32), H5T_NATIVE_UINT32);
  add("optimizer_crc32", offsetof(StateRow, optimizer_crc32), H5T_NATIVE_UINT32);
  return t;
}

std::uint32_t crc_of(const void* data, std::size_t bytes) {
  uLong c = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib takes uInt lengths
    const uInt n = static_cast<uInt>(std::min<std::size_t>(bytes, 1u << 30));
    c = crc32(c, p, n);
    p += n;
    bytes -= n;
  }
  return static_cast<std::uint32_t>(c);
}

// Selects [slot, first, 0:width) x rows in a [2, ranks, width] space (width 0: a [2, ranks] one).
void select_rows(hid_t space, int slot, int first, int rows, hsize_t width, const std::string& what) {
  hsize_t start[3] = {static_cast<hsize_t>(slot), static_cast<hsize_t>(first), 0};
  hsize_t count[3] = {1, static_cast<hsize_t>(rows), width};
  h5::check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr), "H5Sselect_hyperslab", what);
}

// What a reader learns of a point's checkpoint group.
class CheckpointGroup {
 public:
  CheckpointGroup(hid_t point, const std::string& where) : where_(where + "/checkpoint") {
    group_ = h5::checked(H5Gopen2(point, "checkpoint", H5P_DEFAULT), H5Gclose, "H5Gopen2", where_);
    if (h5::read_attr_string(group_, "format", where_) != kCheckpointFormat)
      throw Error(where_ + ": format '" + h5::read_attr_string(group_, "format", where_) + "' is not " +
                  kCheckpointFormat);
    slot_ = static_cast<int>(h5::read_attr_int(group_, "slot", where_));
    state_ = h5::checked(H5Dopen2(group_, "state", H5P_DEFAULT), H5Dclose, "H5Dopen2", where_ + "/state");
    params_ = h5::checked(H5Dopen2(group_, "parameters", H5P_DEFAULT), H5Dclose, "H5Dopen2", where_ + "/parameters");
    opt_ = h5::checked(H5Dopen2(group_, "optimizer_state", H5P_DEFAULT), H5Dclose, "H5Dopen2",
                       where_ + "/optimizer_state");
    hsize_t d[3] = {0, 0, 0};
    h5::Handle s(h5::check(H5Dget_space(state_), "H5Dget_space", where_), H5Sclose);
    if (H5Sget_simple_extent_ndims(s) != 2) throw Error(where_ + "/state: not [2, ranks]");
    H5Sget_simple_extent_dims(s, d, nullptr);
    ranks_ = static_cast<int>(d[1]);
    h5::Handle ps(h5::check(H5Dget_space(params_), "H5Dget_space", where_), H5Sclose);
    h5::Handle os(h5::check(H5Dget_space(opt_), "H5Dget_space", where_), H5Sclose);
    hsize_t p[3] = {0, 0, 0}, o[3] = {0, 0, 0};
    if (H5Sget_simple_extent_ndims(ps) != 3 || H5Sget_simple_extent_ndims(os) != 3)
      throw Error(where_ + ": parameters or optimizer_state not [2, ranks, n]");
    H5Sget_simple_extent_dims(ps, p, nullptr);
    H5Sget_simple_extent_dims(os, o, nullptr);
    if (d[0] != kSlots || p[0] != kSlots || o[0] != kSlots || p[1] != d[1] || o[1] != d[1])
      throw Error(where_ + ": state, parameters and optimizer_state disagree on [slots, ranks]");
    width_ = p[2];
    opt_width_ = o[2];
  }
  int slot() const { return slot_; }
  int ranks() const { return ranks_; }

  StateRow state(int slot, int rank) const {
    StateRow r{};
    h5::Handle mem_t = state_type();
    h5::Handle fs(h5::check(H5Dget_space(state_), "H5Dget_space", where_), H5Sclose);
    hsize_t one[1] = {1};
    h5::Handle ms(h5::check(H5Screate_simple(1, one, nullptr), "H5Screate_simple", where_), H5Sclose);
    {
      hsize_t start[2] = {static_cast<hsize_t>(slot), static_cast<hsize_t>(rank)}, count[2] = {1, 1};
      h5::check(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr), "H5Sselect_hyperslab", where_);
    }
    h5::check(H5Dread(state_, mem_t, ms, fs, H5P_DEFAULT, &r), "H5Dread", where_ + "/state");
    return r;
  }

  // The rank's row of slot `slot`, its checksums verified; "" or why not.
  std::string load(int slot, int rank, TrainingState& out) const {
    const StateRow r = state(slot, rank);
    if (r.step <= 0) return "slot " + std::to_string(slot) + " holds no checkpoint";
    if (r.optimizer_bytes < 0 || static_cast<hsize_t>(r.optimizer_bytes) > opt_width_)
      return "slot " + std::to_string(slot) + " rank " + std::to_string(rank) + ": optimizer_bytes " +
             std::to_string(r.optimizer_bytes) + " outside the dataset";
    out.parameters.assign(width_, 0.0f);
    read_row(params_, slot, rank, width_, H5T_NATIVE_FLOAT, out.parameters.data());
    std::vector<std::byte> opt(opt_width_);
    if (opt_width_ > 0) read_row(opt_, slot, rank, opt_width_, H5T_NATIVE_UINT8, opt.data());
    opt.resize(static_cast<std::size_t>(r.optimizer_bytes));
    if (crc_of(out.parameters.data(), out.parameters.size() * sizeof(float)) != r.parameters_crc32 ||
        crc_of(opt.data(), opt.size()) != r.optimizer_crc32)
      return "slot " + std::to_string(slot) + " rank " + std::to_string(rank) +
             ": the data do not match their CRC-32 (a write the job did not finish)";
    out.optimizer = std::move(opt);
    out.step = r.step;
    out.epoch = r.epoch;
    out.position = r.position;
    out.training_ns = r.training_ns;
    out.evaluation_ns = r.evaluation_ns;
    out.evaluations = r.evaluations;
    out.loss = r.loss;
    out.accuracy = r.accuracy;
    return "";
  }

  // The newest slot whose rows all verify, or -1; `why` says what was wrong with the others.
  int usable_slot(std::string& why) const {
    for (int s : {slot_, 1 - slot_}) {
      if (s < 0 || s >= kSlots) continue;
      std::string bad;
      std::int64_t step = -1;
      for (int k = 0; k < ranks_ && bad.empty(); ++k) {
        TrainingState t;
        bad = load(s, k, t);
        if (bad.empty() && step >= 0 && t.step != step)
          bad = "slot " + std::to_string(s) + ": ranks at different steps";
        step = t.step;
      }
      if (bad.empty()) return s;
      why += (why.empty() ? "" : "; ") + bad;
    }
    return -1;
  }

 private:
  void read_row(hid_t d, int slot, int rank, hsize_t width, hid_t type, void* out) const {
    h5::Handle fs(h5::check(H5Dget_space(d), "H5Dget_space", where_), H5Sclose);
    select_rows(fs, slot, rank, 1, width, where_);
    hsize_t n[1] = {width};
    h5::Handle ms(h5::check(H5Screate_simple(1, n, nullptr), "H5Screate_simple", where_), H5Sclose);
    h5::check(H5Dread(d, type, ms, fs, H5P_DEFAULT, out), "H5Dread", where_);
  }

  std::string where_;
  h5::Handle group_, state_, params_, opt_;
  int slot_ = -1, ranks_ = 0;
  hsize_t width_ = 0, opt_width_ = 0;
};

h5::Handle open_file(const std::string& file) {
  h5::init();
  if (H5Fis_hdf5(file.c_str()) <= 0) throw Error(file + ": not an HDF5 file (truncated, or not a d500 results file)");
  return h5::checked(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen", file);
}

}  // namespace

std::map<std::string, CheckpointRef> checkpoints_in(const std::string& file, const std::vector<std::string>& ids,
                                                    int ranks) {
  std::map<std::string, CheckpointRef> out;
  h5::Handle f = open_file(file);
  for (const auto& id : ids) {
    const std::string where = file + ":/points/" + id;
    const std::string path = "/points/" + id;
    if (H5Lexists(f, "points", H5P_DEFAULT) <= 0 || H5Lexists(f, path.c_str(), H5P_DEFAULT) <= 0) continue;
    h5::Handle g = h5::checked(H5Gopen2(f, path.c_str(), H5P_DEFAULT), H5Gclose, "H5Gopen2", where);
    // A record that ended (complete, failed) is not resumed: only one the job left running.
    if (h5::read_attr_string(g, "status", where) != file_status(Outcome::Incomplete)) continue;
    if (H5Lexists(g, "checkpoint", H5P_DEFAULT) <= 0) continue;
    CheckpointGroup c(g, where);
    if (c.ranks() != ranks) continue;  // written by another job shape
    std::string why;
    const int s = c.usable_slot(why);
    if (s < 0) continue;
    const StateRow r = c.state(s, 0);
    out[id] = CheckpointRef{file, s, r.step, static_cast<double>(r.training_ns) * 1e-9};
  }
  return out;
}

std::map<std::string, CheckpointRef> find_checkpoints(const std::vector<std::string>& files,
                                                      const std::vector<std::string>& ids, int ranks,
                                                      std::vector<std::string>& notes) {
  std::map<std::string, CheckpointRef> best;
  if (ids.empty()) return best;
  for (const auto& file : files) {
    if (const std::string why = not_a_regular_file(file); !why.empty()) {
      notes.push_back(file + ": " + why);
      continue;
    }
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    const Contained c = run_contained([&] { return checkpoints_text(checkpoints_in(file, ids, ranks)); },
                                      read_limits(ec ? 0 : static_cast<std::int64_t>(size)));
    if (!c.ok()) {
      notes.push_back(c.kind == Contained::Failed
                          ? c.text
                          : file + ": damaged: reading it " + c.text + "; its checkpoints are not used");
      continue;
    }
    for (const auto& [id, ref] : parse_checkpoints_text(c.text))
      if (!best.count(id) || ref.step >= best[id].step) best[id] = ref;
  }
  return best;
}

std::string checkpoints_text(const std::map<std::string, CheckpointRef>& refs) {
  std::string text;
  for (const auto& [id, r] : refs)
    text += id + "\t" + std::to_string(r.slot) + "\t" + std::to_string(r.step) + "\t" + fmt_sig(r.training_s, 17) +
            "\t" + r.file + "\n";
  return text;
}

std::map<std::string, CheckpointRef> parse_checkpoints_text(const std::string& text) {
  std::map<std::string, CheckpointRef> out;
  for (const std::string& line : split(text, '\n')) {
    const auto f = split(line, '\t');
    if (f.size() == 5)
      out[f[0]] = CheckpointRef{f[4], std::atoi(f[1].c_str()), std::atoll(f[2].c_str()), std::atof(f[3].c_str())};
  }
  return out;
}

TrainingState read_checkpoint(const CheckpointRef& ref, const std::string& id, int rank) {
  const std::string where = ref.file + ":/points/" + id;
  h5::Handle f = open_file(ref.file);
  h5::Handle g = h5::checked(H5Gopen2(f, ("/points/" + id).c_str(), H5P_DEFAULT), H5Gclose, "H5Gopen2", where);
  CheckpointGroup c(g, where);
  if (rank < 0 || rank >= c.ranks()) throw Error(where + "/checkpoint: no rank " + std::to_string(rank));
  TrainingState s;
  if (const std::string why = c.load(ref.slot, rank, s); !why.empty()) throw Error(where + "/checkpoint: " + why);
  if (H5Lexists(g, "events", H5P_DEFAULT) > 0) {
    h5::Handle t = h5::event_mem_type();
    for (const Event& e : h5::read_rows<Event>(g, "events", t, where))
      if (e.rank == rank && e.step <= s.step) s.events.push_back(e);
  }
  return s;
}

std::string checkpoint_problem(hid_t point_group, const std::string& where, long ranks) {
  if (H5Lexists(point_group, "checkpoint", H5P_DEFAULT) <= 0) return "";
  try {
    CheckpointGroup c(point_group, where);
    if (c.ranks() != ranks)
      return "checkpoint: " + std::to_string(c.ranks()) + " ranks' rows, the file has " + std::to_string(ranks);
    if (c.slot() < 0) return "";  // created, the first checkpoint not finished
    std::string why;
    const int s = c.usable_slot(why);
    if (s < 0) return "checkpoint: no slot is usable (" + why + ")";
    if (s != c.slot()) return "checkpoint: the newest slot is damaged (" + why + "); the older one is usable";
  } catch (const Error& e) {
    return std::string("checkpoint: cannot be read: ") + e.what();
  }
  return "";
}

// ---- writing ----

void ResultWriter::checkpoint(const TrainingState& s) {
  const std::string w = what() + "/checkpoint";
  // Sizes every rank must agree on: the parameter count (equal, or the ranks train different
  // networks) and the optimizer rows' width (the largest).
  long long mine[2] = {static_cast<long long>(s.parameters.size()), static_cast<long long>(s.optimizer.size())}, lo[2],
            hi[2];
  mpi_check(MPI_Allreduce(mine, hi, 2, MPI_LONG_LONG, MPI_MAX, comm_), "MPI_Allreduce", w);
  mpi_check(MPI_Allreduce(mine, lo, 2, MPI_LONG_LONG, MPI_MIN, comm_), "MPI_Allreduce", w);
  if (lo[0] != hi[0])
    throw Error(w + ": ranks hold " + std::to_string(lo[0]) + " to " + std::to_string(hi[0]) + " parameters");
  if (hi[0] <= 0 || hi[0] > (1LL << 31) - 1 || hi[1] > (1LL << 31) - 1)
    throw Error(w + ": " + std::to_string(hi[0]) + " parameters and " + std::to_string(hi[1]) +
                " optimizer bytes a rank: outside what a checkpoint holds (1 to 2^31 - 1)");
  const hsize_t P = static_cast<hsize_t>(hi[0]);
  const hsize_t B = std::max<hsize_t>(static_cast<hsize_t>(hi[1]), ckpt_.opt_width);

  StateRow row{s.step,
               s.epoch,
               s.position,
               s.training_ns,
               s.evaluation_ns,
               s.evaluations,
               s.loss,
               s.accuracy,
               static_cast<std::int64_t>(s.optimizer.size()),
               crc_of(s.parameters.data(), s.parameters.size() * sizeof(float)),
               crc_of(s.optimizer.data(), s.optimizer.size())};
  std::vector<std::byte> opt_row(s.optimizer);
  opt_row.resize(static_cast<std::size_t>(B));

  // The rows this rank writes: its own (parallel), or every rank's gathered (gather mode, rank 0).
  int first = rank_, rows = 1;
  std::vector<StateRow> states{row};
  std::vector<float> params(s.parameters);
  std::vector<std::byte> opts(opt_row);
  if (mode_ == StoreMode::Gather) {
    first = 0;
    rows = size_;
    if (rank_ == 0)
      states.resize(static_cast<std::size_t>(size_)), params.resize(P * static_cast<hsize_t>(size_)),
          opts.resize(B * static_cast<hsize_t>(size_));
    mpi_check(MPI_Gather(&row, sizeof row, MPI_BYTE, states.data(), sizeof row, MPI_BYTE, 0, comm_), "MPI_Gather", w);
    mpi_check(MPI_Gather(s.parameters.data(), static_cast<int>(P), MPI_FLOAT, params.data(), static_cast<int>(P),
                         MPI_FLOAT, 0, comm_),
              "MPI_Gather", w);
    mpi_check(
        MPI_Gather(opt_row.data(), static_cast<int>(B), MPI_BYTE, opts.data(), static_cast<int>(B), MPI_BYTE, 0, comm_),
        "MPI_Gather", w);
  }
  const int slot = (ckpt_.slot + 1) % kSlots;
  step("writing a checkpoint", [&] {
    if (!writes()) return;
    const hsize_t R = static_cast<hsize_t>(size_);
    if (ckpt_.group.get() < 0) {
      ckpt_.group = h5::checked(H5Gcreate2(point_, "checkpoint", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                                "H5Gcreate2", w);
      h5::write_attr(ckpt_.group, "format", std::string(kCheckpointFormat));
      h5::write_attr(ckpt_.group, "slot", std::int64_t{-1});
      h5::write_attr(ckpt_.group, "checkpoints", std::int64_t{0});
      hsize_t sd[2] = {kSlots, R};
      h5::Handle ss(h5::check(H5Screate_simple(2, sd, nullptr), "H5Screate_simple", w), H5Sclose);
      h5::Handle st = state_type();
      h5::Handle packed(h5::check(H5Tcopy(st), "H5Tcopy", w), H5Tclose);
      h5::check(H5Tpack(packed), "H5Tpack", w);
      ckpt_.state = h5::checked(H5Dcreate2(ckpt_.group, "state", packed, ss, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                H5Dclose, "H5Dcreate2", w + "/state");
      hsize_t pd[3] = {kSlots, R, P};
      h5::Handle ps(h5::check(H5Screate_simple(3, pd, nullptr), "H5Screate_simple", w), H5Sclose);
      ckpt_.params =
          h5::checked(H5Dcreate2(ckpt_.group, "parameters", H5T_IEEE_F32LE, ps, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                      H5Dclose, "H5Dcreate2", w + "/parameters");
      // The optimizer's rows grow when its state does (Adam's moments appear at its first step).
      hsize_t od[3] = {kSlots, R, B}, omax[3] = {kSlots, R, H5S_UNLIMITED},
              chunk[3] = {1, 1, std::clamp<hsize_t>(B, 64, 1 << 20)};
      h5::Handle os(h5::check(H5Screate_simple(3, od, omax), "H5Screate_simple", w), H5Sclose);
      h5::Handle dcpl(h5::check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", w), H5Pclose);
      h5::check(H5Pset_chunk(dcpl, 3, chunk), "H5Pset_chunk", w);
      ckpt_.opt =
          h5::checked(H5Dcreate2(ckpt_.group, "optimizer_state", H5T_NATIVE_UINT8, os, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                      H5Dclose, "H5Dcreate2", w + "/optimizer_state");
      ckpt_.opt_width = B;
    } else if (B > ckpt_.opt_width) {
      hsize_t od[3] = {kSlots, R, B};
      h5::check(H5Dset_extent(ckpt_.opt, od), "H5Dset_extent", w + "/optimizer_state");
      ckpt_.opt_width = B;
    }
    auto write = [&](hid_t d, hid_t type, hsize_t width, const void* data, const char* name) {
      h5::Handle fs(h5::check(H5Dget_space(d), "H5Dget_space", w), H5Sclose);
      if (width == 0) {
        hsize_t start[2] = {static_cast<hsize_t>(slot), static_cast<hsize_t>(first)},
                count[2] = {1, static_cast<hsize_t>(rows)};
        h5::check(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr), "H5Sselect_hyperslab", w);
      } else {
        select_rows(fs, slot, first, rows, width, w);
      }
      hsize_t n[1] = {static_cast<hsize_t>(rows) * std::max<hsize_t>(width, 1)};
      h5::Handle ms(h5::check(H5Screate_simple(1, n, nullptr), "H5Screate_simple", w), H5Sclose);
      h5::check(H5Dwrite(d, type, ms, fs, dxpl_, data), "H5Dwrite", w + "/" + name);
    };
    h5::Handle st = state_type();
    write(ckpt_.state, st, 0, states.data(), "state");
    write(ckpt_.params, H5T_NATIVE_FLOAT, P, params.data(), "parameters");
    if (B > 0) write(ckpt_.opt, H5T_NATIVE_UINT8, B, opts.data(), "optimizer_state");
  });
  // The rows reach the disk before the slot that names them: a kill in between leaves the
  // previous slot named, and it is intact.
  flush();
  step("naming the checkpoint's slot", [&] {
    if (!writes()) return;
    h5::write_attr(ckpt_.group, "slot", std::int64_t{slot});
    h5::write_attr(ckpt_.group, "checkpoints", std::int64_t{++ckpt_.count});
  });
  flush();
  ckpt_.slot = slot;
}

}  // namespace d500
