// Datasets (IDX through zlib, HDF5 through its C API, synthetic from a seed) and the sampler.
#include "training/data.hpp"

#include <hdf5.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "common/error.hpp"
#include "common/parallel.hpp"
#include "common/random.hpp"
#include "common/text.hpp"
#include "common/value.hpp"

namespace fs = std::filesystem;

namespace d500 {

const char* fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

namespace {

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x7f4a7c159e3779b9ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 29);
}

// ---- IDX (LeCun's MNIST format), gzip'd or plain: zlib's gzread reads both ----
struct Idx {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> data;
};

Idx read_idx(const std::string& path, int want_dims, const std::string& hint) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error(path + ": cannot open (" + std::strerror(errno) + ")" + hint);
  Idx idx;
  try {
    unsigned char head[4];
    if (gzread(f, head, 4) != 4) throw Error(path + ": not an IDX file (shorter than its 4-byte magic number)");
    if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] != want_dims)
      throw Error(path + ": not an IDX file of unsigned bytes with " + std::to_string(want_dims) +
                  " dimensions (magic 0x0000080" + std::to_string(want_dims) + " expected)");
    std::int64_t total = 1;
    for (int d = 0; d < want_dims; ++d) {
      unsigned char b[4];
      if (gzread(f, b, 4) != 4) throw Error(path + ": truncated IDX header");
      const std::int64_t n = (std::int64_t{b[0]} << 24) | (std::int64_t{b[1]} << 16) | (std::int64_t{b[2]} << 8) | b[3];
      if (n <= 0) throw Error(path + ": IDX dimension " + std::to_string(d) + " is " + std::to_string(n));
      idx.dims.push_back(n);
      total *= n;
    }
    idx.data.resize(static_cast<std::size_t>(total));
    std::size_t got = 0;
    while (got < idx.data.size()) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(idx.data.size() - got, 1u << 30));
      const int r = gzread(f, idx.data.data() + got, chunk);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    if (got != idx.data.size())
      throw Error(path + ": truncated: its header promises " + std::to_string(idx.data.size()) +
                  " bytes of data, it has " + std::to_string(got));
  } catch (...) {
    gzclose(f);
    throw;
  }
  gzclose(f);
  return idx;
}

// Samples idx[i] of `per` pixel bytes each, as float32 / 255, into x; their labels into y.
void read_bytes(const std::vector<std::uint8_t>& pixels, const std::vector<std::uint8_t>& labels, std::int64_t per,
                std::span<const std::int64_t> idx, float* x, std::int64_t* y) {
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const std::uint8_t* p = pixels.data() + idx[i] * per;
    float* o = x + static_cast<std::int64_t>(i) * per;
    for (std::int64_t k = 0; k < per; ++k) o[k] = static_cast<float>(p[k]) * (1.0f / 255.0f);
    y[i] = labels[static_cast<std::size_t>(idx[i])];
  }
}

class FashionMnist final : public Dataset {
 public:
  FashionMnist(const std::string& dir_in, const std::string& split) : split_(split) {
    const std::string dir = dir_in.empty() ? fashion_mnist_dir() : dir_in;
    const std::string prefix = split == "train" ? "train" : "t10k";
    const std::string hint =
        dir_in.empty()
            ? " -- Debian's package dataset-fashion-mnist provides it (apt-get install dataset-fashion-mnist)"
            : " -- data_dir must hold Fashion-MNIST's four IDX files (as Debian's dataset-fashion-mnist installs them in " +
                  std::string(fashion_mnist_dir()) + ")";
    auto find = [&](const std::string& base) {
      for (const char* ext : {".gz", ""})
        if (fs::exists(dir + "/" + base + ext)) return dir + "/" + base + ext;
      throw Error(dir + "/" + base + ".gz: Fashion-MNIST file not found" + hint);
    };
    images_path_ = find(prefix + "-images-idx3-ubyte");
    const std::string labels_path = find(prefix + "-labels-idx1-ubyte");
    Idx im = read_idx(images_path_, 3, hint);
    Idx lb = read_idx(labels_path, 1, hint);
    if (im.dims[0] != lb.dims[0])
      throw Error(images_path_ + ": " + std::to_string(im.dims[0]) + " images, but " + labels_path + " has " +
                  std::to_string(lb.dims[0]) + " labels");
    for (std::size_t i = 0; i < lb.data.size(); ++i)
      if (lb.data[i] > 9)
        throw Error(labels_path + ": label " + std::to_string(lb.data[i]) + " of sample " + std::to_string(i) +
                    " is not in 0..9");
    shape_ = {1, im.dims[1], im.dims[2]};
    pixels_ = std::move(im.data);
    labels_ = std::move(lb.data);
  }
  std::int64_t size() const override { return static_cast<std::int64_t>(labels_.size()); }
  const Shape& sample_shape() const override { return shape_; }
  int classes() const override { return 10; }
  void read(std::span<const std::int64_t> idx, float* x, std::int64_t* y) override {
    read_bytes(pixels_, labels_, numel(shape_), idx, x, y);
  }
  std::string describe() const override {
    return "Fashion-MNIST " + split_ + " (" + std::to_string(size()) + " samples " + shape_str(shape_) +
           ", 10 classes, pixels / 255) from " + images_path_;
  }

 private:
  std::string split_, images_path_;
  Shape shape_;
  std::vector<std::uint8_t> pixels_, labels_;
};

class Synthetic final : public Dataset {
 public:
  explicit Synthetic(const DatasetRequest& r)
      : shape_(r.sample_shape),
        classes_(r.classes),
        samples_(r.samples),
        seed_(mix(r.seed, r.split == "train" ? 1 : 2)),
        split_(r.split) {
    if (shape_.empty() || numel(shape_) <= 0) throw Error("synthetic data needs a sample shape (the network's input)");
    if (classes_ < 1) throw Error("synthetic data needs at least one class");
    if (samples_ < 1) throw Error("synthetic_samples must be at least 1");
  }
  std::int64_t size() const override { return samples_; }
  const Shape& sample_shape() const override { return shape_; }
  int classes() const override { return classes_; }
  // Each sample from its own seed, so a large batch (a million values or more: ResNet-50's
  // batch of 128 is 19 million, 80-90 ms on one core) is made on the cores this rank may run
  // on, a range of samples each, as a data loader's workers would: the same values whatever the
  // thread count.
  void read(std::span<const std::int64_t> idx, float* x, std::int64_t* y) override {
    const std::int64_t n = numel(shape_);
    const auto count = static_cast<std::int64_t>(idx.size());
    const std::int64_t parts = count * n >= (std::int64_t{1} << 20) ? std::min<std::int64_t>(rank_cores(), 32) : 1;
    parallel_ranges(count, parts, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        const std::uint64_t s = mix(seed_, static_cast<std::uint64_t>(idx[static_cast<std::size_t>(i)]));
        fill_uniform(x + i * n, static_cast<std::size_t>(n), s);
        y[i] = static_cast<std::int64_t>(mix(s, 3) % static_cast<std::uint64_t>(classes_));
      }
    });
  }
  std::string describe() const override {
    return "synthetic " + split_ + " (" + std::to_string(samples_) + " samples " + shape_str(shape_) +
           " uniform in [-1, 1), " + std::to_string(classes_) +
           " classes uniform; made from the seed, nothing to learn; a batch of a million values or more made on " +
           "the rank's cores)";
  }

 private:
  Shape shape_;
  int classes_;
  std::int64_t samples_;
  std::uint64_t seed_;
  std::string split_;
};

// ---- Synthetic sequences with a rule to learn: samples [T, F] uniform in [-1, 1) from the seed
// and the index; the label is the feature, among the first min(F, classes), whose sum over the
// T steps is the largest -- what a recurrent network learns by accumulating over time. ----
class Sequences final : public Dataset {
 public:
  explicit Sequences(const DatasetRequest& r) : base_(r), split_(r.split) {
    const Shape& s = base_.sample_shape();
    if (s.size() != 2)
      throw Error(
          "dataset = \"sequences\" makes samples [T, F] (time, features): the network's input must be "
          "[N, T, F]; it is [N]" +
          shape_str(s).substr(1));
    steps_ = s[0], features_ = s[1];
    ruled_ = std::min<std::int64_t>(features_, base_.classes());
  }
  std::int64_t size() const override { return base_.size(); }
  const Shape& sample_shape() const override { return base_.sample_shape(); }
  int classes() const override { return base_.classes(); }
  void read(std::span<const std::int64_t> idx, float* x, std::int64_t* y) override {
    base_.read(idx, x, y);
    for (std::size_t i = 0; i < idx.size(); ++i) {
      const float* v = x + static_cast<std::int64_t>(i) * steps_ * features_;
      std::int64_t best = 0;
      double best_sum = -1e300;
      for (std::int64_t f = 0; f < ruled_; ++f) {
        double sum = 0;
        for (std::int64_t t = 0; t < steps_; ++t) sum += v[t * features_ + f];
        if (sum > best_sum) best_sum = sum, best = f;
      }
      y[i] = best;
    }
  }
  std::string describe() const override {
    return "synthetic sequences " + split_ + " (" + std::to_string(size()) + " samples [" + std::to_string(steps_) +
           " steps, " + std::to_string(features_) +
           " features] uniform in [-1, 1) from the seed; label: the feature, of the first " + std::to_string(ruled_) +
           ", with the largest sum over time)";
  }

 private:
  Synthetic base_;
  std::string split_;
  std::int64_t steps_ = 0, features_ = 0, ruled_ = 1;
};

// ---- A user's HDF5 file ----
class H5 {
 public:
  H5() = default;
  explicit H5(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  H5(H5&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5& operator=(H5&& o) noexcept {
    std::swap(id_, o.id_);
    std::swap(close_, o.close_);
    return *this;
  }
  ~H5() {
    if (id_ >= 0 && close_) close_(id_);
  }
  hid_t get() const { return id_; }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

class Hdf5Dataset final : public Dataset {
 public:
  Hdf5Dataset(const std::string& path, const std::string& split) : path_(path), split_(split) {
    if (!fs::exists(path))
      throw Error("training data file not found (dataset = \"" + path +
                  "\"; it takes fashion-mnist, cifar10, synthetic, sequences, or an HDF5 file's or shards' folder's "
                  "path)");
    H5E_BEGIN_TRY { file_ = H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose); }
    H5E_END_TRY;
    if (file_.get() < 0) throw Error(path + ": not an HDF5 file d500 can open");
    samples_ = open(split + "/samples");
    labels_ = open(split + "/labels");
    H5 space(H5Dget_space(samples_.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 2)
      throw Error(where("samples") + ": has " + std::to_string(rank) +
                  " dimensions; [N, ...] with a sample shape is expected");
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    n_ = static_cast<std::int64_t>(dims[0]);
    for (int d = 1; d < rank; ++d) shape_.push_back(static_cast<std::int64_t>(dims[static_cast<std::size_t>(d)]));
    H5 type(H5Dget_type(samples_.get()), H5Tclose);
    if (H5Tget_class(type.get()) == H5T_FLOAT) {
      bytes_ = false;
    } else if (H5Tget_class(type.get()) == H5T_INTEGER && H5Tget_size(type.get()) == 1 &&
               H5Tget_sign(type.get()) == H5T_SGN_NONE) {
      bytes_ = true;
    } else {
      throw Error(where("samples") + ": its type must be float32 (or another float) or uint8 (scaled by 1/255)");
    }
    H5 lspace(H5Dget_space(labels_.get()), H5Sclose);
    hsize_t ln = 0;
    if (H5Sget_simple_extent_ndims(lspace.get()) != 1 ||
        (H5Sget_simple_extent_dims(lspace.get(), &ln, nullptr), false) || static_cast<std::int64_t>(ln) != n_)
      throw Error(where("labels") + ": must be one-dimensional with one label per sample (" + std::to_string(n_) + ")");
    // The classes: the root attribute `classes`, else the largest label + 1 (labels read once).
    std::vector<std::int64_t> all(static_cast<std::size_t>(n_));
    if (H5Dread(labels_.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()) < 0)
      throw Error(where("labels") + ": cannot be read as integers");
    std::int64_t lo = 0, hi = -1;
    for (auto v : all) lo = std::min(lo, v), hi = std::max(hi, v);
    if (lo < 0) throw Error(where("labels") + ": labels must be >= 0");
    classes_ = static_cast<int>(hi + 1);
    if (H5Aexists(file_.get(), "classes") > 0) {
      H5 a(H5Aopen(file_.get(), "classes", H5P_DEFAULT), H5Aclose);
      std::int64_t c = 0;
      if (H5Aread(a.get(), H5T_NATIVE_INT64, &c) < 0 || c < hi + 1)
        throw Error(path + ": the root attribute 'classes' must be an integer above every label (largest label: " +
                    std::to_string(hi) + ")");
      classes_ = static_cast<int>(c);
    }
  }
  std::int64_t size() const override { return n_; }
  const Shape& sample_shape() const override { return shape_; }
  int classes() const override { return classes_; }
  void read(std::span<const std::int64_t> idx, float* x, std::int64_t* y) override {
    const std::size_t n = idx.size();
    const std::int64_t per = numel(shape_);
    // Sorted, with runs of consecutive samples merged into one block of the selection.
    order_.resize(n);
    for (std::size_t i = 0; i < n; ++i) order_[i] = i;
    std::sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) { return idx[a] < idx[b]; });
    H5 fspace(H5Dget_space(samples_.get()), H5Sclose), lspace(H5Dget_space(labels_.get()), H5Sclose);
    H5Sselect_none(fspace.get());
    H5Sselect_none(lspace.get());
    std::vector<hsize_t> start(shape_.size() + 1, 0), count(shape_.size() + 1);
    for (std::size_t d = 0; d < shape_.size(); ++d) count[d + 1] = static_cast<hsize_t>(shape_[d]);
    for (std::size_t i = 0; i < n;) {
      std::size_t j = i + 1;
      while (j < n && idx[order_[j]] == idx[order_[j - 1]] + 1) ++j;
      const std::int64_t first = idx[order_[i]];
      if (first < 0 || idx[order_[j - 1]] >= n_)
        throw Error(where("samples") + ": sample " + std::to_string(first) + " out of range");
      start[0] = static_cast<hsize_t>(first);
      count[0] = static_cast<hsize_t>(j - i);
      H5Sselect_hyperslab(fspace.get(), H5S_SELECT_OR, start.data(), nullptr, count.data(), nullptr);
      H5Sselect_hyperslab(lspace.get(), H5S_SELECT_OR, start.data(), nullptr, count.data(), nullptr);
      i = j;
    }
    const hsize_t mdims[2] = {static_cast<hsize_t>(n), static_cast<hsize_t>(per)};
    H5 mspace(H5Screate_simple(2, mdims, nullptr), H5Sclose), lmspace(H5Screate_simple(1, mdims, nullptr), H5Sclose);
    staged_.resize(static_cast<std::size_t>(per) * n * (bytes_ ? 1 : 4));
    staged_labels_.resize(n);
    if (H5Dread(samples_.get(), bytes_ ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT,
                staged_.data()) < 0 ||
        H5Dread(labels_.get(), H5T_NATIVE_INT64, lmspace.get(), lspace.get(), H5P_DEFAULT, staged_labels_.data()) < 0)
      throw Error(path_ + ": reading a batch of " + std::to_string(n) + " samples failed (HDF5 error above)");
    for (std::size_t r = 0; r < n; ++r) {  // row r of the staging area is sample idx[order_[r]]
      float* o = x + static_cast<std::int64_t>(order_[r]) * per;
      if (bytes_) {
        const auto* p = reinterpret_cast<const std::uint8_t*>(staged_.data()) + r * static_cast<std::size_t>(per);
        for (std::int64_t k = 0; k < per; ++k) o[k] = static_cast<float>(p[k]) * (1.0f / 255.0f);
      } else {
        std::memcpy(o, staged_.data() + r * static_cast<std::size_t>(per) * 4, static_cast<std::size_t>(per) * 4);
      }
      y[order_[r]] = staged_labels_[r];
    }
  }
  std::string describe() const override {
    return "HDF5 " + path_ + " " + split_ + " (" + std::to_string(n_) + " samples " + shape_str(shape_) +
           (bytes_ ? " uint8 / 255" : " float") + ", " + std::to_string(classes_) + " classes)";
  }

 private:
  std::string where(const std::string& what) const { return path_ + ": /" + split_ + "/" + what; }
  H5 open(const std::string& name) {
    if (H5Lexists(file_.get(), split_.c_str(), H5P_DEFAULT) <= 0 ||
        H5Lexists(file_.get(), name.c_str(), H5P_DEFAULT) <= 0)
      throw Error(path_ + ": has no dataset /" + name +
                  " (a training data file holds /train/samples, /train/labels, /test/samples, "
                  "/test/labels: hdf5-schema/README.md)");
    return H5(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
  }
  std::string path_, split_;
  H5 file_, samples_, labels_;
  Shape shape_;
  std::int64_t n_ = 0;
  int classes_ = 0;
  bool bytes_ = false;
  std::vector<std::size_t> order_;
  std::vector<char> staged_;
  std::vector<std::int64_t> staged_labels_;
};

// ---- A folder of HDF5 shards: every *.h5 / *.hdf5 file in it (in name order) that holds the
// split (each a training data file, as Hdf5Dataset reads it), one after another. A batch is read
// shard by shard, each shard's samples with one selection. ----
class Hdf5Shards final : public Dataset {
 public:
  Hdf5Shards(const std::string& dir, const std::string& split) : dir_(dir), split_(split) {
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".h5" || ext == ".hdf5")) files.push_back(e.path().string());
    }
    if (ec) throw Error(dir + ": cannot list the folder of HDF5 shards: " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      {
        H5 file;
        H5E_BEGIN_TRY { file = H5(H5Fopen(f.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose); }
        H5E_END_TRY;
        if (file.get() < 0) throw Error(f + ": a shard d500 cannot open as HDF5");
        if (H5Lexists(file.get(), split.c_str(), H5P_DEFAULT) <= 0) continue;  // a shard of the other split
      }
      shards_.push_back(std::make_unique<Hdf5Dataset>(f, split));
      const Dataset& d = *shards_.back();
      if (d.sample_shape() != shards_.front()->sample_shape())
        throw Error(f + ": its samples are " + shape_str(d.sample_shape()) + ", the first shard's " +
                    shape_str(shards_.front()->sample_shape()));
      starts_.push_back(n_);
      n_ += d.size();
      classes_ = std::max(classes_, d.classes());
    }
    if (shards_.empty())
      throw Error(dir + ": no HDF5 shard (*.h5, *.hdf5) in this folder holds the " + split + " split (/" + split +
                  "/samples, /" + split + "/labels: hdf5-schema/README.md)");
    picked_.resize(shards_.size());
    rows_.resize(shards_.size());
  }
  std::int64_t size() const override { return n_; }
  const Shape& sample_shape() const override { return shards_.front()->sample_shape(); }
  int classes() const override { return classes_; }
  bool sharded() const override { return true; }
  void read(std::span<const std::int64_t> idx, float* x, std::int64_t* y) override {
    const std::int64_t per = numel(sample_shape());
    for (std::size_t s = 0; s < shards_.size(); ++s) picked_[s].clear(), rows_[s].clear();
    for (std::size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] < 0 || idx[i] >= n_) throw Error(dir_ + ": sample " + std::to_string(idx[i]) + " out of range");
      const auto s =
          static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), idx[i]) - starts_.begin() - 1);
      picked_[s].push_back(idx[i] - starts_[s]);
      rows_[s].push_back(static_cast<std::int64_t>(i));
    }
    scratch_.resize(static_cast<std::size_t>(per) * idx.size());
    labels_.resize(idx.size());
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      if (picked_[s].empty()) continue;
      shards_[s]->read(picked_[s], scratch_.data(), labels_.data());
      for (std::size_t r = 0; r < rows_[s].size(); ++r) {
        std::memcpy(x + rows_[s][r] * per, scratch_.data() + static_cast<std::int64_t>(r) * per,
                    static_cast<std::size_t>(per) * sizeof(float));
        y[rows_[s][r]] = labels_[r];
      }
    }
  }
  std::string describe() const override {
    return "HDF5 shards " + dir_ + " " + split_ + " (" + std::to_string(n_) + " samples " + shape_str(sample_shape()) +
           " in " + std::to_string(shards_.size()) + " files, " + std::to_string(classes_) + " classes)";
  }

 private:
  std::string dir_, split_;
  std::vector<std::unique_ptr<Hdf5Dataset>> shards_;
  std::vector<std::int64_t> starts_;  // each shard's first sample
  std::int64_t n_ = 0;
  int classes_ = 0;
  std::vector<std::vector<std::int64_t>> picked_, rows_;  // per shard: its samples in this batch, their rows
  std::vector<float> scratch_;
  std::vector<std::int64_t> labels_;
};

// ---- CIFAR-10's binary version: data_batch_1..5.bin (train), test_batch.bin (test); each record
// a label byte then 3072 pixel bytes (the red, green and blue 32x32 planes, rows in order) ----
class Cifar10 final : public Dataset {
 public:
  static constexpr std::int64_t kRecord = 1 + 3 * 32 * 32;
  Cifar10(const std::string& dir, const std::string& split) : split_(split), dir_(dir) {
    if (dir.empty())
      throw Error(
          "dataset = \"cifar10\" needs data_dir: the folder of CIFAR-10's binary version "
          "(data_batch_1.bin ... data_batch_5.bin, test_batch.bin, as cifar-10-binary.tar.gz unpacks them)");
    std::vector<std::string> files;
    if (split == "train")
      for (int k = 1; k <= 5; ++k) files.push_back(dir + "/data_batch_" + std::to_string(k) + ".bin");
    else
      files.push_back(dir + "/test_batch.bin");
    for (const auto& f : files) read_file(f);
    shape_ = {3, 32, 32};
  }
  std::int64_t size() const override { return static_cast<std::int64_t>(labels_.size()); }
  const Shape& sample_shape() const override { return shape_; }
  int classes() const override { return 10; }
  void read(std::span<const std::int64_t> idx, float* x, std::int64_t* y) override {
    read_bytes(pixels_, labels_, kRecord - 1, idx, x, y);
  }
  std::string describe() const override {
    return "CIFAR-10 " + split_ + " (" + std::to_string(size()) +
           " samples [3,32,32], 10 classes, pixels / 255) from " + dir_ +
           (split_ == "train" ? "/data_batch_{1..5}.bin" : "/test_batch.bin");
  }

 private:
  void read_file(const std::string& f) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw Error(f + ": CIFAR-10 file not found or unreadable (data_dir must hold CIFAR-10's binary version)");
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.empty() || bytes.size() % kRecord != 0)
      throw Error(f + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of CIFAR-10 records (" +
                  std::to_string(kRecord) + " bytes each: a label byte and 3072 pixel bytes)");
    const std::size_t records = bytes.size() / kRecord;
    for (std::size_t r = 0; r < records; ++r) {
      const std::uint8_t* rec = bytes.data() + r * kRecord;
      if (rec[0] > 9)
        throw Error(f + ": record " + std::to_string(r) + " has label " + std::to_string(rec[0]) + ", not 0..9");
      labels_.push_back(rec[0]);
      pixels_.insert(pixels_.end(), rec + 1, rec + kRecord);
    }
  }
  std::string split_, dir_;
  Shape shape_;
  std::vector<std::uint8_t> pixels_, labels_;
};

}  // namespace

bool is_named_dataset(const std::string& d) {
  return d == "fashion-mnist" || d == "cifar10" || d == "synthetic" || d == "sequences";
}

std::unique_ptr<Dataset> open_dataset(const DatasetRequest& r) {
  if (r.split != "train" && r.split != "test") throw Error("split must be train or test, not '" + r.split + "'");
  if (r.dataset == "fashion-mnist") return std::make_unique<FashionMnist>(r.data_dir, r.split);
  if (r.dataset == "synthetic") return std::make_unique<Synthetic>(r);
  if (r.dataset == "cifar10") return std::make_unique<Cifar10>(r.data_dir, r.split);
  if (r.dataset == "sequences") return std::make_unique<Sequences>(r);
  const std::string ext = fs::path(r.dataset).extension().string();
  if (ext == ".h5" || ext == ".hdf5") return std::make_unique<Hdf5Dataset>(r.dataset, r.split);
  if (fs::is_directory(r.dataset)) return std::make_unique<Hdf5Shards>(r.dataset, r.split);
  throw Error(
      "dataset '" + r.dataset +
      "' is not fashion-mnist, cifar10, synthetic, sequences, the path of an HDF5 file (.h5, .hdf5) or a folder of HDF5 "
      "shards");
}

Augmentation::Augmentation(const AugmentSpec& s, const Shape& sample) : s_(s) {
  if (s.crop_padding < 0) throw Error("crop_padding is pixels a side, >= 0");
  if (random() && sample.size() != 3)
    throw Error("crop_padding and flip take image samples [C, H, W]; these are " + shape_str(sample));
  if (sample.size() == 3) c_ = sample[0], h_ = sample[1], w_ = sample[2];
  if (s.mean.size() != s.stddev.size())
    throw Error("normalize_mean and normalize_std need as many values each (" + std::to_string(s.mean.size()) +
                " and " + std::to_string(s.stddev.size()) + " given)");
  if (!s.mean.empty()) {
    const std::int64_t c = sample.empty() ? 1 : sample[0];
    if (s.mean.size() != 1 && static_cast<std::int64_t>(s.mean.size()) != c)
      throw Error("normalize_mean and normalize_std take one value or one per channel: the samples " +
                  shape_str(sample) + " have " + std::to_string(c) + ", " + std::to_string(s.mean.size()) + " given");
    c_ = c;
    for (std::int64_t k = 0; k < c; ++k) {
      const double m = s.mean[s.mean.size() == 1 ? 0 : static_cast<std::size_t>(k)];
      const double d = s.stddev[s.stddev.size() == 1 ? 0 : static_cast<std::size_t>(k)];
      if (!(d > 0) || !std::isfinite(m)) throw Error("normalize_std must be positive and normalize_mean finite");
      mean_.push_back(static_cast<float>(m));
      inv_std_.push_back(static_cast<float>(1.0 / d));
    }
  }
  scratch_.resize(static_cast<std::size_t>(numel(sample)));
}

void Augmentation::apply(std::span<const std::int64_t> idx, std::int64_t epoch, bool train, float* x) {
  const std::int64_t n = static_cast<std::int64_t>(scratch_.size()), plane = n / std::max<std::int64_t>(1, c_);
  const std::int64_t p = s_.crop_padding, side = 2 * p + 1;
  for (std::size_t i = 0; i < idx.size(); ++i) {
    float* v = x + static_cast<std::int64_t>(i) * n;
    if (train && random()) {
      const std::uint64_t r = mix(mix(s_.seed, static_cast<std::uint64_t>(epoch)), static_cast<std::uint64_t>(idx[i]));
      const std::int64_t dy = p ? static_cast<std::int64_t>(r % static_cast<std::uint64_t>(side)) - p : 0;
      const std::int64_t dx = p ? static_cast<std::int64_t>((r >> 20) % static_cast<std::uint64_t>(side)) - p : 0;
      const bool flip = s_.flip && ((r >> 40) & 1u);
      std::copy(v, v + n, scratch_.begin());
      for (std::int64_t c = 0; c < c_; ++c)
        for (std::int64_t yy = 0; yy < h_; ++yy)
          for (std::int64_t xx = 0; xx < w_; ++xx) {
            const std::int64_t sy = yy + dy, sx = (flip ? w_ - 1 - xx : xx) + dx;
            v[(c * h_ + yy) * w_ + xx] = sy < 0 || sy >= h_ || sx < 0 || sx >= w_
                                             ? 0.0f
                                             : scratch_[static_cast<std::size_t>((c * h_ + sy) * w_ + sx)];
          }
    }
    for (std::size_t c = 0; c < mean_.size(); ++c)
      for (std::int64_t k = 0; k < plane; ++k) {
        float& e = v[static_cast<std::int64_t>(c) * plane + k];
        e = (e - mean_[c]) * inv_std_[c];
      }
  }
}

std::string Augmentation::describe(bool train) const {
  std::vector<std::string> parts;
  if (train && s_.crop_padding > 0)
    parts.push_back("random crop of the sample's size from it zero-padded by " + std::to_string(s_.crop_padding) +
                    " pixels a side");
  if (train && s_.flip) parts.push_back("horizontal flip with probability 1/2");
  if (train && random())
    parts.back() += " (each sample's draw from the seed " + std::to_string(s_.seed) + ", its epoch and its index)";
  if (!mean_.empty()) {
    std::string m, d;
    for (std::size_t c = 0; c < mean_.size(); ++c) {
      m += (c ? "," : "") + canonical(Value{static_cast<double>(s_.mean[s_.mean.size() == 1 ? 0 : c])});
      d += (c ? "," : "") + canonical(Value{static_cast<double>(s_.stddev[s_.stddev.size() == 1 ? 0 : c])});
    }
    parts.push_back("per channel (x - [" + m + "]) / [" + d + "]");
  }
  return parts.empty() ? "none" : join(parts, "; ");
}

Sampler::Sampler(std::int64_t samples, std::int64_t batch, bool shuffle, std::uint64_t seed, int rank, int ranks,
                 bool local)
    : samples_(samples),
      batch_(batch),
      share_(samples / std::max(1, ranks)),
      per_epoch_(0),
      shuffle_(shuffle),
      seed_(seed),
      rank_(rank),
      ranks_(std::max(1, ranks)),
      local_(local) {
  if (batch <= 0) throw Error("batch must be positive");
  per_epoch_ = share_ / batch_;
  if (per_epoch_ < 1)
    throw Error("a batch of " + std::to_string(batch) + " is larger than " + (ranks_ > 1 ? "a rank's share of " : "") +
                "the " + std::to_string(samples) + " samples" +
                (ranks_ > 1 ? " (" + std::to_string(share_) + " each)" : ""));
  order_.resize(static_cast<std::size_t>(samples_));
  make_order();
}

void Sampler::make_order() {
  for (std::int64_t i = 0; i < samples_; ++i) order_[static_cast<std::size_t>(i)] = i;
  if (!shuffle_) return;
  std::mt19937_64 g(mix(seed_, static_cast<std::uint64_t>(epoch_)));
  // local: only this rank's own contiguous share, shuffled in place (its shards stay its own).
  const std::int64_t lo = local_ ? static_cast<std::int64_t>(rank_) * share_ : 0, hi = local_ ? lo + share_ : samples_;
  for (std::int64_t i = hi - 1; i > lo; --i) {
    // Multiply-shift: an index in [0, i] from 64 random bits, the same on every platform.
    const auto j = lo + static_cast<std::int64_t>(
                            (static_cast<unsigned __int128>(g()) * static_cast<std::uint64_t>(i - lo + 1)) >> 64);
    std::swap(order_[static_cast<std::size_t>(i)], order_[static_cast<std::size_t>(j)]);
  }
}

std::span<const std::int64_t> Sampler::next() {
  if (pos_ == per_epoch_) {
    ++epoch_;
    pos_ = 0;
    make_order();
  }
  const std::int64_t at = static_cast<std::int64_t>(rank_) * share_ + pos_ * batch_;
  ++pos_;
  return {order_.data() + at, static_cast<std::size_t>(batch_)};
}

std::span<const std::int64_t> Sampler::peek() const {
  if (pos_ == per_epoch_) return {};
  const std::int64_t at = static_cast<std::int64_t>(rank_) * share_ + pos_ * batch_;
  return {order_.data() + at, static_cast<std::size_t>(batch_)};
}

void Sampler::seek(std::int64_t epoch, std::int64_t position) {
  if (epoch < 0 || position < 0 || position > per_epoch_) throw Error("sampler position out of range");
  epoch_ = epoch;
  pos_ = position;
  make_order();
}

std::string Sampler::describe() const {
  std::string d = shuffle_ ? "seeded shuffle per epoch" : "sequential";
  d += ", " + std::to_string(per_epoch_) + " batches of " + std::to_string(batch_) + " per epoch";
  if (ranks_ > 1)
    d += local_ ? " per rank (each rank shuffles only its own contiguous share of " + std::to_string(share_) +
                      " samples: its own shards)"
                : " per rank (each rank its own share of " + std::to_string(share_) + " samples)";
  if (per_epoch_ * batch_ * ranks_ < samples_)
    d += ", the last " + std::to_string(samples_ - per_epoch_ * batch_ * ranks_) +
         " samples of each epoch's order left out";
  return d;
}

}  // namespace d500
