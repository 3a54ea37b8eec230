#pragma once
// Level 2's data: datasets a training point reads batches from, and the sampler that says which
// samples make each batch. Three sources behind one interface:
//  - "fashion-mnist": the IDX files of Debian's dataset-fashion-mnist (gzip'd or not), in
//    /usr/share/datasets/fashion-mnist or a `data_dir`; pixels scaled to [0, 1] (x / 255);
//  - "synthetic": samples of any shape made from a seed (uniform in [-1, 1), labels uniform over
//    the classes), for throughput-only campaigns where the data does not matter;
//  - a user's HDF5 file (hdf5-schema/README.md, "Training data"): `<split>/samples` [N, ...]
//    float32 or uint8 (uint8 scaled by 1/255) and `<split>/labels` [N] integers, read batch by
//    batch with one hyperslab selection, so the data may be larger than memory.
// No augmentation: a sample is read as stored (DESIGN: augmentation is out of scope and would
// make frameworks' pipelines incomparable).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/graph.hpp"

namespace d500 {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  virtual const Shape& sample_shape() const = 0;  // one sample, without the batch axis
  virtual int classes() const = 0;
  // Samples idx[i] as float32 into x[i * numel(sample_shape) ...] and their labels into y[i].
  // Allocates nothing once it has served a batch of this size.
  virtual void read(std::span<const std::int64_t> idx, float* x, std::int64_t* y) = 0;
  virtual std::string describe() const = 0;  // "Fashion-MNIST train (60000 samples [1,28,28], 10 classes) from ..."
};

struct DatasetRequest {
  std::string dataset;       // fashion-mnist, synthetic, or the path of an .h5 file
  std::string split;         // train or test
  std::string data_dir;      // fashion-mnist: where its files are ("" : Debian's place)
  Shape sample_shape;        // synthetic: the shape to make (the network's input without batch)
  int classes = 10;          // synthetic
  std::int64_t samples = 0;  // synthetic: how many
  std::uint64_t seed = 1;    // synthetic
};
// Opens a dataset; throws d500::Error naming the file and what is wrong (a missing file names
// the Debian package that provides it).
std::unique_ptr<Dataset> open_dataset(const DatasetRequest& r);
// Where Debian's dataset-fashion-mnist puts its files.
const char* fashion_mnist_dir();

// Which samples make each batch, epoch after epoch. Sequential, or a fresh permutation of all
// samples per epoch from (seed, epoch) (Fisher-Yates on a 64-bit Mersenne Twister: the same
// order on every platform). With `ranks` > 1 every rank takes its own contiguous share of the
// epoch's order (level 3's distributed sampler); samples beyond ranks x shares, and a last
// partial batch, are left out of that epoch. The position is (epoch, batch) and can be restored.
class Sampler {
 public:
  Sampler(std::int64_t samples, std::int64_t batch, bool shuffle, std::uint64_t seed, int rank = 0, int ranks = 1);
  std::int64_t batches_per_epoch() const { return per_epoch_; }
  // The next batch's sample indices (batch of them, into preallocated storage).
  std::span<const std::int64_t> next();
  // The indices the next call of next() returns, without taking them; empty at an epoch's end
  // (the next epoch's order is made by next()). Valid until next() or seek().
  std::span<const std::int64_t> peek() const;
  std::int64_t epoch() const { return epoch_; }
  std::int64_t position() const { return pos_; }  // batches already taken in this epoch
  void seek(std::int64_t epoch, std::int64_t position);
  std::string describe() const;

 private:
  void make_order();
  std::int64_t samples_, batch_, share_, per_epoch_;
  bool shuffle_;
  std::uint64_t seed_;
  int rank_, ranks_;
  std::int64_t epoch_ = 0, pos_ = 0;
  std::vector<std::int64_t> order_;
};

}  // namespace d500
