// Datasets and the sampler: real Fashion-MNIST when Debian's package is installed, IDX and HDF5
// files written here (well-formed and broken), synthetic data, and the sampler's orders.
#include "training/data.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "common/error.hpp"

namespace fs = std::filesystem;

namespace d500 {
namespace {

std::string error_of(const DatasetRequest& r) {
  try {
    open_dataset(r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("d500-data-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_idx(const fs::path& p, const std::vector<std::uint32_t>& dims, const std::vector<std::uint8_t>& data,
               int magic_dims = -1, bool gzip = true) {
  std::string bytes = {0, 0, 8, static_cast<char>(magic_dims < 0 ? dims.size() : static_cast<std::size_t>(magic_dims))};
  for (auto d : dims)
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>((d >> s) & 0xff));
  bytes.append(data.begin(), data.end());
  if (gzip) {
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(p, std::ios::binary) << bytes;
  }
}

TEST(Data, FashionMnistFromDebiansPackage) {
  if (!fs::exists(std::string(fashion_mnist_dir()) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (launchers/install-deps.sh installs it)";
  DatasetRequest r{"fashion-mnist", "test", "", {}, 10, 0, 1};
  auto d = open_dataset(r);
  EXPECT_EQ(d->size(), 10000);
  EXPECT_EQ(d->sample_shape(), (Shape{1, 28, 28}));
  std::vector<float> x(2 * 784);
  std::vector<std::int64_t> y(2), idx{0, 9999};
  d->read(idx, x.data(), y.data());
  // The test split's first and last labels (Zalando's README: 9 = ankle boot; the last is 5 = sandal).
  EXPECT_EQ(y[0], 9);
  EXPECT_EQ(y[1], 5);
  EXPECT_GE(*std::min_element(x.begin(), x.end()), 0.0f);
  EXPECT_LE(*std::max_element(x.begin(), x.end()), 1.0f);
  EXPECT_GT(*std::max_element(x.begin(), x.end()), 0.9f);
}

TEST(Data, IdxFilesAreReadAndBrokenOnesNamed) {
  const fs::path dir = temp_dir("idx");
  std::vector<std::uint8_t> pix(3 * 4 * 4);
  std::iota(pix.begin(), pix.end(), 0);
  write_idx(dir / "t10k-images-idx3-ubyte.gz", {3, 4, 4}, pix);
  write_idx(dir / "t10k-labels-idx1-ubyte", {3}, {7, 0, 2}, -1, false);  // plain files are read too
  DatasetRequest r{"fashion-mnist", "test", dir.string(), {}, 10, 0, 1};
  auto d = open_dataset(r);
  EXPECT_EQ(d->sample_shape(), (Shape{1, 4, 4}));
  std::vector<float> x(16);
  std::vector<std::int64_t> y(1), idx{2};
  d->read(idx, x.data(), y.data());
  EXPECT_EQ(y[0], 2);
  EXPECT_FLOAT_EQ(x[0], 32.0f / 255.0f);

  // The train split is missing: the file is named, and what data_dir must hold.
  r.split = "train";
  EXPECT_NE(error_of(r).find("train-images-idx3-ubyte.gz: Fashion-MNIST file not found"), std::string::npos)
      << error_of(r);
  r.split = "test";
  write_idx(dir / "t10k-labels-idx1-ubyte", {2}, {7, 0}, -1, false);
  EXPECT_NE(error_of(r).find("3 images, but"), std::string::npos) << error_of(r);
  write_idx(dir / "t10k-labels-idx1-ubyte", {3}, {7, 0, 12}, -1, false);
  EXPECT_NE(error_of(r).find("label 12 of sample 2 is not in 0..9"), std::string::npos) << error_of(r);
  write_idx(dir / "t10k-labels-idx1-ubyte", {3}, {7, 0, 1}, 3, false);
  EXPECT_NE(error_of(r).find("not an IDX file of unsigned bytes with 1 dimensions"), std::string::npos) << error_of(r);
  pix.resize(20);
  write_idx(dir / "t10k-images-idx3-ubyte.gz", {3, 4, 4}, pix);
  EXPECT_NE(error_of(r).find("truncated"), std::string::npos) << error_of(r);
  fs::remove_all(dir);

  // Debian's place, when the package is absent, names the package.
  if (!fs::exists(fashion_mnist_dir())) {
    DatasetRequest deb{"fashion-mnist", "train", "", {}, 10, 0, 1};
    EXPECT_NE(error_of(deb).find("apt-get install dataset-fashion-mnist"), std::string::npos) << error_of(deb);
  }
}

// A training data file as hdf5-schema/README.md lays it out.
// Samples [n, 2, 3] whose values count up from first * 6, labels (first + i) % 4.
void write_h5(const fs::path& p, int n, bool bytes, bool with_labels = true, int first = 0) {
  hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t g = H5Gcreate2(f, "train", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[3] = {static_cast<hsize_t>(n), 2, 3};
  hid_t s = H5Screate_simple(3, dims, nullptr);
  std::vector<float> xf(static_cast<std::size_t>(n) * 6);
  std::vector<std::uint8_t> xb(xf.size());
  for (std::size_t i = 0; i < xf.size(); ++i)
    xf[i] = static_cast<float>(i + static_cast<std::size_t>(first) * 6), xb[i] = static_cast<std::uint8_t>(i % 256);
  hid_t d = H5Dcreate2(g, "samples", bytes ? H5T_STD_U8LE : H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, bytes ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
           bytes ? static_cast<const void*>(xb.data()) : xf.data());
  H5Dclose(d);
  H5Sclose(s);
  if (with_labels) {
    hsize_t ld[1] = {static_cast<hsize_t>(n)};
    hid_t ls = H5Screate_simple(1, ld, nullptr);
    std::vector<std::int32_t> y(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = (first + i) % 4;
    hid_t l = H5Dcreate2(g, "labels", H5T_STD_I32LE, ls, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(l, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, y.data());
    H5Dclose(l);
    H5Sclose(ls);
  }
  H5Gclose(g);
  H5Fclose(f);
}

TEST(Data, Hdf5DatasetReadsAnyBatchInItsOrder) {
  const fs::path dir = temp_dir("h5");
  write_h5(dir / "data.h5", 50, false);
  DatasetRequest r{(dir / "data.h5").string(), "train", "", {}, 10, 0, 1};
  auto d = open_dataset(r);
  EXPECT_EQ(d->size(), 50);
  EXPECT_EQ(d->sample_shape(), (Shape{2, 3}));
  EXPECT_EQ(d->classes(), 4);
  std::vector<std::int64_t> idx{41, 3, 4, 5, 17};  // unsorted, with a run of three
  std::vector<float> x(idx.size() * 6);
  std::vector<std::int64_t> y(idx.size());
  d->read(idx, x.data(), y.data());
  for (std::size_t i = 0; i < idx.size(); ++i) {
    EXPECT_EQ(y[i], idx[i] % 4);
    for (int k = 0; k < 6; ++k) EXPECT_EQ(x[i * 6 + static_cast<std::size_t>(k)], static_cast<float>(idx[i] * 6 + k));
  }
  write_h5(dir / "bytes.h5", 50, true);
  auto b = open_dataset({(dir / "bytes.h5").string(), "train", "", {}, 10, 0, 1});
  std::vector<std::int64_t> one{10};
  b->read(one, x.data(), y.data());
  EXPECT_FLOAT_EQ(x[1], 61.0f / 255.0f);

  EXPECT_NE(error_of({(dir / "data.h5").string(), "test", "", {}, 10, 0, 1}).find("has no dataset /test/samples"),
            std::string::npos);
  write_h5(dir / "nolabels.h5", 5, false, false);
  EXPECT_NE(error_of({(dir / "nolabels.h5").string(), "train", "", {}, 10, 0, 1}).find("has no dataset /train/labels"),
            std::string::npos);
  EXPECT_NE(error_of({(dir / "absent.h5").string(), "train", "", {}, 10, 0, 1}).find("training data file not found"),
            std::string::npos);
  std::ofstream(dir / "text.h5") << "not hdf5";
  EXPECT_NE(error_of({(dir / "text.h5").string(), "train", "", {}, 10, 0, 1}).find("not an HDF5 file"),
            std::string::npos);
  EXPECT_NE(error_of({"imagenet", "train", "", {}, 10, 0, 1}).find("is not fashion-mnist, cifar10, synthetic"),
            std::string::npos);
  fs::remove_all(dir);
}

// A folder of shards reads as one dataset in name order (shards of the other split skipped); a
// rank's local sampler keeps to its own contiguous range.
TEST(Data, Hdf5ShardsReadAsOneDatasetAndALocalSamplerKeepsEachRankInItsShards) {
  const fs::path dir = temp_dir("shards");
  write_h5(dir / "part-0.h5", 20, false, true, 0);
  write_h5(dir / "part-1.h5", 15, false, true, 20);
  write_h5(dir / "part-2.hdf5", 25, false, true, 35);
  {  // a test-split shard: skipped for train
    hid_t f = H5Fcreate((dir / "part-9-test.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(H5Gcreate2(f, "test", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Fclose(f);
  }
  std::ofstream(dir / "README") << "not a shard";
  auto d = open_dataset({dir.string(), "train", "", {}, 10, 0, 1});
  EXPECT_EQ(d->size(), 60);
  EXPECT_TRUE(d->sharded());
  EXPECT_NE(d->describe().find("in 3 files"), std::string::npos) << d->describe();
  std::vector<std::int64_t> idx{59, 0, 21, 19, 20, 34, 35};  // across every shard boundary
  std::vector<float> x(idx.size() * 6);
  std::vector<std::int64_t> y(idx.size());
  d->read(idx, x.data(), y.data());
  for (std::size_t i = 0; i < idx.size(); ++i) {
    EXPECT_EQ(y[i], idx[i] % 4) << idx[i];
    for (int k = 0; k < 6; ++k) EXPECT_EQ(x[i * 6 + static_cast<std::size_t>(k)], static_cast<float>(idx[i] * 6 + k));
  }
  EXPECT_NE(error_of({(dir / "nothing").string(), "train", "", {}, 10, 0, 1}).find("is not fashion-mnist"),
            std::string::npos);
  fs::create_directories(dir / "empty");
  EXPECT_NE(error_of({(dir / "empty").string(), "train", "", {}, 10, 0, 1}).find("no HDF5 shard"), std::string::npos);
  // Two ranks, 30 samples each: rank 1 draws only from 30..59, a new order every epoch.
  Sampler s(60, 5, true, 3, 1, 2, true);
  std::set<std::int64_t> first, second;
  for (int b = 0; b < 6; ++b)
    for (auto i : s.next()) first.insert(i);
  std::vector<std::int64_t> again;
  for (int b = 0; b < 6; ++b)
    for (auto i : s.next()) again.push_back(i), second.insert(i);
  EXPECT_EQ(first.size(), 30u);
  EXPECT_EQ(*first.begin(), 30);
  EXPECT_EQ(*first.rbegin(), 59);
  EXPECT_EQ(first, second);
  std::vector<std::int64_t> sorted = again;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(again, sorted) << "shuffled within the share";
  EXPECT_NE(s.describe().find("its own shards"), std::string::npos) << s.describe();
  fs::remove_all(dir);
}

// CIFAR-10's binary layout, written here: five training files and a test file of records (label
// byte, red, green, blue planes); broken files named with what is wrong.
TEST(Data, Cifar10BinaryFilesAreReadInTheirLayout) {
  const fs::path dir = temp_dir("cifar");
  auto write = [&](const std::string& name, int records, int first) {
    std::ofstream out(dir / name, std::ios::binary);
    for (int r = 0; r < records; ++r) {
      out.put(static_cast<char>((first + r) % 10));
      for (int k = 0; k < 3072; ++k) out.put(static_cast<char>((first + r + k / 1024) % 256));  // per plane
    }
  };
  for (int k = 1; k <= 5; ++k) write("data_batch_" + std::to_string(k) + ".bin", 4, (k - 1) * 4);
  write("test_batch.bin", 3, 100);
  auto train = open_dataset({"cifar10", "train", dir.string(), {}, 10, 0, 1});
  auto test = open_dataset({"cifar10", "test", dir.string(), {}, 10, 0, 1});
  EXPECT_EQ(train->size(), 20);
  EXPECT_EQ(test->size(), 3);
  EXPECT_EQ(train->sample_shape(), (Shape{3, 32, 32}));
  std::vector<std::int64_t> idx{13};
  std::vector<float> x(3072);
  std::vector<std::int64_t> y(1);
  train->read(idx, x.data(), y.data());
  EXPECT_EQ(y[0], 3);                            // sample 13: the fourth file's second record
  EXPECT_FLOAT_EQ(x[0], 13.0f / 255);            // red plane
  EXPECT_FLOAT_EQ(x[1024 + 5], 14.0f / 255);     // green
  EXPECT_FLOAT_EQ(x[2048 + 1023], 15.0f / 255);  // blue
  EXPECT_NE(error_of({"cifar10", "train", "", {}, 10, 0, 1}).find("needs data_dir"), std::string::npos);
  fs::remove(dir / "data_batch_3.bin");
  EXPECT_NE(
      error_of({"cifar10", "train", dir.string(), {}, 10, 0, 1}).find("data_batch_3.bin: CIFAR-10 file not found"),
      std::string::npos);
  { std::ofstream(dir / "data_batch_3.bin", std::ios::binary) << "short"; }
  EXPECT_NE(error_of({"cifar10", "train", dir.string(), {}, 10, 0, 1}).find("not a whole number of CIFAR-10 records"),
            std::string::npos);
  write("data_batch_3.bin", 1, 0);
  {
    std::fstream f(dir / "data_batch_3.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.put(static_cast<char>(12));
  }
  EXPECT_NE(error_of({"cifar10", "train", dir.string(), {}, 10, 0, 1}).find("record 0 has label 12"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(Data, SyntheticSamplesDependOnTheIndexAlone) {
  DatasetRequest r{"synthetic", "train", "", {3, 8, 8}, 5, 100, 7};
  auto a = open_dataset(r), b = open_dataset(r);
  std::vector<float> xa(2 * 192), xb(2 * 192);
  std::vector<std::int64_t> ya(2), yb(2), i1{4, 9}, i2{9, 4};
  a->read(i1, xa.data(), ya.data());
  b->read(i2, xb.data(), yb.data());
  EXPECT_TRUE(std::equal(xa.begin(), xa.begin() + 192, xb.begin() + 192));
  EXPECT_EQ(ya[0], yb[1]);
  EXPECT_LT(ya[0], 5);
  EXPECT_NE(xa[0], xa[192]);
}

// A batch large enough to be made on several threads (2^20 values or more) holds what reading
// its samples one at a time gives, sample for sample and label for label.
TEST(Data, ALargeSyntheticBatchMadeOnThreadsHoldsTheSamplesReadOneByOne) {
  DatasetRequest r{"synthetic", "train", "", {3, 64, 64}, 10, 1000, 7};
  auto d = open_dataset(r);
  const std::int64_t n = 3 * 64 * 64, count = 97;  // 1.19 million values: over the threshold, an odd split
  ASSERT_GE(count * n, 1 << 20);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) idx[static_cast<std::size_t>(i)] = (i * 37 + 11) % 1000;
  std::vector<float> x(static_cast<std::size_t>(count * n)), one(static_cast<std::size_t>(n));
  std::vector<std::int64_t> y(static_cast<std::size_t>(count)), label(1);
  d->read(idx, x.data(), y.data());
  for (std::int64_t i = 0; i < count; ++i) {
    d->read(std::span<const std::int64_t>(&idx[static_cast<std::size_t>(i)], 1), one.data(), label.data());
    ASSERT_TRUE(std::equal(one.begin(), one.end(), x.begin() + i * n)) << "sample " << i;
    ASSERT_EQ(label[0], y[static_cast<std::size_t>(i)]) << "sample " << i;
  }
  EXPECT_NE(x[0], x[static_cast<std::size_t>(n)]);
}

TEST(Data, SamplerShufflesPerEpochFromTheSeedAndPartitionsRanks) {
  Sampler s(10, 3, false, 1);
  EXPECT_EQ(s.batches_per_epoch(), 3);  // the tenth sample is left out
  auto b = s.next();
  EXPECT_EQ(std::vector<std::int64_t>(b.begin(), b.end()), (std::vector<std::int64_t>{0, 1, 2}));

  auto epoch = [](Sampler& x) {
    std::vector<std::int64_t> all;
    for (std::int64_t i = 0; i < x.batches_per_epoch(); ++i) {
      auto v = x.next();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  Sampler a(1000, 10, true, 42), c(1000, 10, true, 42), d(1000, 10, true, 43);
  const auto e0 = epoch(a), e1 = epoch(a);
  EXPECT_EQ(e0, epoch(c));  // same seed, same order
  EXPECT_NE(e0, epoch(d));
  EXPECT_NE(e0, e1);                                                      // a new order each epoch
  EXPECT_EQ(std::set<std::int64_t>(e0.begin(), e0.end()).size(), 1000u);  // a permutation
  // Restoring a position gives the same batches as running there.
  Sampler r(1000, 10, true, 42);
  r.seek(1, 0);
  EXPECT_EQ(epoch(r), e1);

  // Three ranks: disjoint shares of the same epoch order.
  std::set<std::int64_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    Sampler p(1000, 10, true, 42, rank, 3);
    EXPECT_EQ(p.batches_per_epoch(), 33);
    for (auto i : epoch(p)) EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " twice";
  }
  EXPECT_EQ(seen.size(), 990u);
  EXPECT_THROW(Sampler(5, 10, false, 1), Error);
}

// What a device's step prefetches: the next batch, without taking it; nothing at an epoch's end.
TEST(Data, SamplerPeeksAtTheNextBatchWithoutTakingItAndNotAcrossAnEpoch) {
  Sampler s(40, 10, true, 7, 1, 2);  // rank 1 of 2: two batches an epoch
  int peeked_batches = 0;
  for (int step = 0; step < 6; ++step) {
    const auto p = s.peek();
    const std::vector<std::int64_t> peeked(p.begin(), p.end());
    EXPECT_EQ(s.peek().data(), p.data()) << "peeking takes nothing";
    const std::int64_t epoch = s.epoch();
    const auto n = s.next();
    if (step % 2 == 0 && step > 0) {
      EXPECT_TRUE(peeked.empty()) << "step " << step << " starts an epoch, whose order next() makes";
      EXPECT_EQ(s.epoch(), epoch + 1);
    } else {
      EXPECT_EQ(std::vector<std::int64_t>(n.begin(), n.end()), peeked) << "step " << step;
      ++peeked_batches;
    }
  }
  EXPECT_EQ(peeked_batches, 4);
}

// The shift (dy, dx) and flip that make `out` from `in` (zeros where the crop left the padded
// sample), or nullopt when none does: what a crop with padding p and a flip can give.
std::optional<std::tuple<int, int, bool>> crop_of(const std::vector<float>& in, const float* out, int c, int h, int w,
                                                  int p) {
  for (int flip = 0; flip < 2; ++flip)
    for (int dy = -p; dy <= p; ++dy)
      for (int dx = -p; dx <= p; ++dx) {
        bool same = true;
        for (int k = 0; k < c && same; ++k)
          for (int y = 0; y < h && same; ++y)
            for (int x = 0; x < w && same; ++x) {
              const int sy = y + dy, sx = (flip ? w - 1 - x : x) + dx;
              const float want =
                  sy < 0 || sy >= h || sx < 0 || sx >= w ? 0.0f : in[static_cast<std::size_t>((k * h + sy) * w + sx)];
              same = out[(k * h + y) * w + x] == want;
            }
        if (same) return std::make_tuple(dy, dx, flip == 1);
      }
  return std::nullopt;
}

// Crops and flips: each sample a shifted (and perhaps mirrored) copy of itself with zeros where
// the padding shows, drawn from (seed, epoch, index) alone; normalisation per channel, in both
// splits; specs that do not fit the samples refused with the reason.
TEST(Data, AugmentationCropsFlipsAndNormalisesEachSampleFromItsSeedEpochAndIndex) {
  const int c = 2, h = 6, w = 5, n = 64;
  const Shape shape{c, h, w};
  std::vector<float> sample(static_cast<std::size_t>(c * h * w));
  std::iota(sample.begin(), sample.end(), 1.0f);  // every pixel different and nonzero
  std::vector<float> batch;
  std::vector<std::int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 100);
  auto fresh = [&] {
    batch.clear();
    for (int i = 0; i < n; ++i) batch.insert(batch.end(), sample.begin(), sample.end());
  };
  AugmentSpec s;
  s.crop_padding = 2;
  s.flip = true;
  s.seed = 5;
  Augmentation a(s, shape);
  fresh();
  a.apply(idx, 3, true, batch.data());
  std::set<std::tuple<int, int, bool>> seen;
  int flipped = 0;
  for (int i = 0; i < n; ++i) {
    const auto got = crop_of(sample, batch.data() + i * c * h * w, c, h, w, 2);
    ASSERT_TRUE(got.has_value()) << "sample " << i << " is no crop of the padded sample";
    seen.insert(*got);
    flipped += std::get<2>(*got) ? 1 : 0;
  }
  EXPECT_GE(seen.size(), 15u) << "the 50 (shift, flip) draws are spread";
  EXPECT_GT(flipped, 16);
  EXPECT_LT(flipped, 48);
  // The same sample in another batch position and batch, the same epoch: the same draw; another epoch: others.
  const std::vector<float> first(batch.begin(), batch.begin() + c * h * w);
  std::vector<std::int64_t> one{100};
  std::vector<float> alone = sample;
  a.apply(one, 3, true, alone.data());
  EXPECT_EQ(alone, first);
  std::vector<float> later = batch;
  fresh();
  a.apply(idx, 4, true, batch.data());
  EXPECT_NE(batch, later);
  // The test split is never cropped or flipped; normalisation applies to both.
  fresh();
  a.apply(idx, 3, false, batch.data());
  EXPECT_EQ(std::vector<float>(batch.begin(), batch.begin() + c * h * w), sample);
  AugmentSpec norm;
  norm.mean = {1.0, 2.0};
  norm.stddev = {0.5, 4.0};
  Augmentation z(norm, shape);
  EXPECT_FALSE(z.random());
  std::vector<float> v = sample;
  z.apply(one, 0, true, v.data());
  EXPECT_FLOAT_EQ(v[0], (sample[0] - 1.0f) / 0.5f);
  EXPECT_FLOAT_EQ(v[h * w], (sample[static_cast<std::size_t>(h * w)] - 2.0f) / 4.0f);
  EXPECT_NE(z.describe(false).find("(x - [1.0,2.0]) / [0.5,4.0]"), std::string::npos) << z.describe(false);
  EXPECT_NE(a.describe(true).find("zero-padded by 2 pixels"), std::string::npos) << a.describe(true);
  auto refused = [&](const AugmentSpec& bad, const Shape& sh) {
    try {
      Augmentation x(bad, sh);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused(s, Shape{30}).find("take image samples [C, H, W]"), std::string::npos);
  AugmentSpec three = norm;
  three.mean = {0.1, 0.2, 0.3};
  three.stddev = {1, 1, 1};
  EXPECT_NE(refused(three, shape).find("one value or one per channel"), std::string::npos) << refused(three, shape);
  AugmentSpec zero = norm;
  zero.stddev = {1, 0};
  EXPECT_NE(refused(zero, shape).find("normalize_std must be positive"), std::string::npos);
}

}  // namespace
}  // namespace d500
