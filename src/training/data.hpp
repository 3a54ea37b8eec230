#pragma once
// Level 2's data: datasets a training point reads batches from, and the sampler that says which
// samples make each batch. Sources behind one interface:
//  - "fashion-mnist": the IDX files of Debian's dataset-fashion-mnist (gzip'd or not), in
//    /usr/share/datasets/fashion-mnist or a `data_dir`; pixels scaled to [0, 1] (x / 255);
//  - "synthetic": samples of any shape made from a seed (uniform in [-1, 1), labels uniform over
//    the classes), for throughput-only campaigns where the data does not matter;
//  - a user's HDF5 file (hdf5-schema/README.md, "Training data"): `<split>/samples` [N, ...]
//    float32 or uint8 (uint8 scaled by 1/255) and `<split>/labels` [N] integers, read batch by
//    batch with one hyperslab selection, so the data may be larger than memory; or a folder of
//    such files (shards, ImageNet-scale data), one after another in name order;
//  - "sequences": synthetic sequences [T, F] with a rule to learn (the label is the feature with
//    the largest sum over time), for recurrent networks;
//  - "cifar10": CIFAR-10's binary version (data_batch_1..5.bin, test_batch.bin) in a data_dir.
// A sample is read as stored; Augmentation (below) changes it after the read, as a point asks:
// seeded, so every framework's pipeline gets the same samples, and described in the results.
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
  // Its samples are in shards (a folder of HDF5 files, one after another): a rank should read
  // its own contiguous range (Sampler's `local`).
  virtual bool sharded() const { return false; }
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
// A dataset open_dataset knows by name (fashion-mnist, cifar10, synthetic, sequences), not a path.
bool is_named_dataset(const std::string& dataset);

// Seeded augmentation of image samples [C, H, W] after they are read, as torchvision's
// RandomCrop(padding), RandomHorizontalFlip and Normalize do it: in the training split a random
// crop of the sample's own size from it zero-padded by crop_padding pixels a side, and a
// horizontal flip with probability 1/2; in both splits (x - mean[c]) / std[c] per channel. Each
// sample's draw is a function of (seed, epoch, its index) alone: the same on every rank, in
// every attempt (a resumed run sees the samples the uninterrupted one saw), whatever thread or
// order reads it.
struct AugmentSpec {
  int crop_padding = 0;
  bool flip = false;
  std::vector<double> mean, stddev;  // one value, or one per channel; empty: no normalisation
  std::uint64_t seed = 1;
};
class Augmentation {
 public:
  // Throws d500::Error saying why the spec does not fit samples of this shape.
  Augmentation(const AugmentSpec& s, const Shape& sample);
  bool any() const { return random() || !mean_.empty(); }
  bool random() const { return s_.crop_padding > 0 || s_.flip; }
  // Samples idx[i] (x[i * numel(sample) ...]) of a batch of `epoch`, in place: cropped and
  // flipped (train) and normalised. Allocates nothing.
  void apply(std::span<const std::int64_t> idx, std::int64_t epoch, bool train, float* x);
  std::string describe(bool train) const;

 private:
  AugmentSpec s_;
  std::int64_t c_ = 1, h_ = 1, w_ = 1;
  std::vector<float> mean_, inv_std_;  // per channel
  std::vector<float> scratch_;         // one sample
};

// Which samples make each batch, epoch after epoch. Sequential, or a fresh permutation of all
// samples per epoch from (seed, epoch) (Fisher-Yates on a 64-bit Mersenne Twister: the same
// order on every platform). With `ranks` > 1 every rank takes its own contiguous share of the
// epoch's order (level 3's distributed sampler); samples beyond ranks x shares, and a last
// partial batch, are left out of that epoch. The position is (epoch, batch) and can be restored.
class Sampler {
 public:
  // local: each rank shuffles only its own contiguous share (a sharded dataset's shard range),
  // instead of taking a share of one shuffle of all samples.
  Sampler(std::int64_t samples, std::int64_t batch, bool shuffle, std::uint64_t seed, int rank = 0, int ranks = 1,
          bool local = false);
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
  bool local_;
  std::int64_t epoch_ = 0, pos_ = 0;
  std::vector<std::int64_t> order_;
};

}  // namespace d500
