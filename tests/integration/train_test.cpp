// Level 2 end to end: LeNet-5 trained on Fashion-MNIST under mpirun to a target accuracy, its
// events and phases read back from HDF5 and its time to accuracy in the report; the same seed
// gives the same loss curve bit for bit; two ranks share an epoch; LibTorch's own optimizers
// agree with d500's reference ones; impossible points are refused at plan time.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "backends/registry.hpp"
#include "helpers.hpp"
#include "training/data.hpp"

using namespace d500test;

namespace {

class Training : public ScratchDirTest {};

bool have_fashion_mnist() { return fs::exists(std::string(d500::fashion_mnist_dir()) + "/train-images-idx3-ubyte.gz"); }

const std::string kHead = "[campaign]\nname = \"train\"\nrepetitions = 1\nwarmups = 2\n[fixed]\nworkload = \"train\"\n";

// h5py: a line per point id with its events as "step:loss:accuracy" (%r: every bit), rank by rank
// in step order: ranks' rows interleave by flush, which differs between runs (a CI-shaped run
// of 2026-12-06 failed the prefetch test on that order alone, every value equal).
std::string events_py(const fs::path& file) {
  return "/usr/bin/python3 -c \"\nimport h5py\nf = h5py.File('" + file.string() +
         "', 'r')\nfor pid in sorted(f['points']):\n  e = sorted(f['points'][pid]['events'][:], key=lambda r: (int(r['rank']), "
         "int(r['step'])))\n  print(pid, ' '.join('%d:%r:%r' % (r['step'], "
         "float(r['loss']), float(r['accuracy'])) for r in e))\n\"";
}

}  // namespace

TEST_F(Training, LeNetReachesItsTargetOnFashionMnistAndTheReportTimesIt) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  const fs::path run =
      planned(kHead +
              "network = \"lenet5\"\nbackend = \"reference\"\nsteps = 600\neval_interval_steps = 50\n"
              "eval_samples = 1000\ntarget_accuracy = 0.7\nreport_targets = \"0.5\"\ntime_budget = 120\nlr = 0.02\n"
              "[axes]\nseed = [1, 2]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  const std::vector<std::string> ids = point_ids(f);
  ASSERT_EQ(ids.size(), 2u);
  for (const auto& id : ids) {
    hid_t g = H5Gopen2(f, ("points/" + id).c_str(), H5P_DEFAULT);
    EXPECT_EQ(attr_string(g, "status"), "complete");
    EXPECT_EQ(attr_string(g, "validation_status"), "passed") << attr_string(g, "validation_method");
    // Stopped at the target, at an evaluation (every 50 steps), well before 600 steps.
    EXPECT_NE(attr_string(g, "train.stop_reason").find("target accuracy 0.7 was reached"), std::string::npos)
        << attr_string(g, "train.stop_reason");
    const long long steps = attr_int(g, "train.steps");
    EXPECT_EQ(steps % 50, 0);
    EXPECT_LT(steps, 600);
    EXPECT_EQ(attr_int(g, "repetitions"), steps - 2);  // the steps after the 2 warm-ups
    // Every step has its op row and its four phases; each evaluation its row.
    std::map<int, int> phases;
    for (const auto& s : read_samples(f, id)) ++phases[s.phase];
    for (int ph = 0; ph <= 4; ++ph) EXPECT_EQ(phases[ph], steps) << "phase " << ph;
    EXPECT_EQ(phases[7], steps / 50);
    H5Gclose(g);
  }
  H5Fclose(f);

  // The events, read with h5py: accuracy after the first evaluation below the last (>= 0.7).
  Cmd py = sh(events_py(run / "results" / "job-0000.h5"));
  ASSERT_EQ(py.code, 0) << py.out;
  EXPECT_NE(py.out.find(" 50:"), std::string::npos) << py.out;

  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  const std::string md = read_file_text(run / "report.md");
  EXPECT_NE(md.find("Time to accuracy"), std::string::npos) << md;
  EXPECT_NE(md.find("2/2"), std::string::npos) << md;
  // What the campaign file names is said first; the many parameters it left at their defaults are
  // counted in the terminal and named in report.md (the run directory's copy of the file says which).
  const std::regex named("Shared by every train point: backend=reference [^;]*network=lenet5[^;]*; [0-9]+ more left");
  EXPECT_TRUE(std::regex_search(rep.out, named)) << rep.out;
  EXPECT_NE(md.find("Left at their defaults (the campaign file does not name them): alpha="), std::string::npos) << md;
  // Two targets from the same two curves: 50% (report_targets) no later than 70% in each run.
  Cmd tt = sh("/usr/bin/python3 -c \"\nimport json\nt = json.load(open('" + (run / "results.json").string() +
              "'))['time_to_accuracy']\nprint(len(t), [x['target'] for x in t], [x['reached'] for x in t], "
              "int(all(a <= b for a, b in zip(t[0]['tta_s'], t[1]['tta_s']))))\n\"");
  ASSERT_EQ(tt.code, 0) << tt.out;
  EXPECT_EQ(tt.out, "2 [0.5, 0.7] [2, 2] 1\n");

  // MLPerf-style logs: every line ":::MLLOG {json}", run_start first, run_stop last with status
  // success, and run_stop - run_start the run's time to accuracy from its events (ms).
  Cmd ex = sh(d500_cmd("export mllog " + run.string()));
  ASSERT_EQ(ex.code, 0) << ex.out;
  EXPECT_NE(ex.out.find("wrote 2 MLPerf-style log(s)"), std::string::npos) << ex.out;
  Cmd ml = sh(
      "/usr/bin/python3 -c \"\nimport h5py, json, glob, os\nf = h5py.File('" +
      (run / "results" / "job-0000.h5").string() + "', 'r')\nfor path in sorted(glob.glob('" +
      (run / "mllog").string() +
      "/*.log')):\n"
      "  lines = open(path).read().splitlines()\n  assert all(l.startswith(':::MLLOG {') for l in lines)\n"
      "  ev = [json.loads(l[len(':::MLLOG '):]) for l in lines]\n  keys = [e['key'] for e in ev]\n"
      "  start = ev[keys.index('run_start')]\n  stop = ev[-1]\n  assert stop['key'] == 'run_stop' and stop['event_type'] == 'INTERVAL_END'\n"
      "  p = f['points'][os.path.basename(path)[:-4]]\n  e = p['events'][:]\n"
      "  hit = [r['time_ns'] for r in e if r['rank'] == 0 and r['accuracy'] >= 0.7][0]\n"
      "  print(stop['metadata']['status'], stop['time_ms'] - start['time_ms'] - round(hit / 1e6), keys.count('eval_accuracy'))\n\"");
  ASSERT_EQ(ml.code, 0) << ml.out;
  EXPECT_EQ(ml.out.find("aborted"), std::string::npos) << ml.out;
  int logs = 0;
  std::istringstream lines(ml.out);
  for (std::string status, diff; lines >> status >> diff;) {
    std::string evals;
    lines >> evals;
    ++logs;
    EXPECT_EQ(status, "success");
    EXPECT_EQ(diff, "0") << "run_stop - run_start is the time to accuracy, to the ms";
    EXPECT_GE(std::atoi(evals.c_str()), 1);
  }
  EXPECT_EQ(logs, 2) << ml.out;
}

TEST_F(Training, TheSameSeedGivesTheSameLossCurveBitForBit) {
  const std::string campaign =
      kHead +
      "network = \"lenet5\"\nbackend = \"reference\"\ndataset = \"synthetic\"\nsynthetic_samples = 2000\n"
      "steps = 40\neval_interval_steps = 10\neval_samples = 256\noptimizer = \"adam\"\nlr = 0.001\nseed = 5\n";
  std::string curves[2];
  for (int i = 0; i < 2; ++i) {
    const fs::path run = dir_ / ("run" + std::to_string(i));
    Cmd plan = sh(d500_cmd("plan " + write("c.toml", campaign) + " -o " + run.string()));
    ASSERT_EQ(plan.code, 0) << plan.out;
    Cmd r = sh(d500_cmd("run " + run.string()));
    ASSERT_EQ(r.code, 0) << r.out;
    Cmd py = sh(events_py(run / "results" / "job-0000.h5"));
    ASSERT_EQ(py.code, 0) << py.out;
    curves[i] = py.out;
  }
  EXPECT_NE(curves[0].find(" 10:"), std::string::npos) << curves[0];
  EXPECT_NE(curves[0].find(" 40:"), std::string::npos) << curves[0];
  EXPECT_EQ(curves[0], curves[1]);  // %r: every bit of every loss and accuracy
}

namespace {

// h5py: every event of the file's one point as "rank:step:loss:accuracy" lines (%r: every bit),
// sorted by rank and step (ranks' rows interleave by flush, which differs between runs).
std::string sorted_events_py(const fs::path& file) {
  return "/usr/bin/python3 -c \"\nimport h5py\nf = h5py.File('" + file.string() +
         "', 'r')\ng = list(f['points'].values())[0]\nrows = sorted((int(r['rank']), int(r['step']), float(r['loss']), float(r['accuracy'])) "
         "for r in g['events'][:])\nprint('\\n'.join('%d:%d:%r:%r' % r for r in rows))\n\"";
}

}  // namespace

// A job killed in the middle of training (its ranks SIGKILLed, as at a time limit) resumes from
// its last checkpoint when run again: the newest slot of the killed attempt's checkpoint is
// damaged on purpose, so the resume must notice (CRC-32) and take the older slot; the resumed
// curve is the uninterrupted run's, bit for bit, on two ranks with Adam's state.
// With BatchNormalization (fashion-cnn-bn): the checkpoint carries the running statistics, which
// the evaluations after the resume read.
TEST_F(Training, AKilledRunResumesFromItsLastIntactCheckpointAndEndsOnTheUninterruptedCurve) {
  if (!d500::find_backend("onednn") || !d500::find_backend("onednn")->built) GTEST_SKIP() << "this build has no oneDNN";
  const std::string campaign =
      kHead +
      "network = \"fashion-cnn-bn\"\nbackend = \"onednn\"\ndataset = \"synthetic\"\nsynthetic_samples = 8192\n"
      "batch = 16\nsteps = 240\neval_interval_steps = 10\neval_samples = 64\noptimizer = \"adam\"\nlr = 0.001\n"
      "seed = 9\nranks_per_node = 2\ncheckpoint_interval = 0.2\n";
  const auto [killed, whole] = planned_twice_and_one_run(campaign);

  // The first attempt: killed once its log shows three checkpoints.
  const fs::path log = killed / "logs" / "job-0000.log";
  ASSERT_GE(run_killed_after(killed, "d500:checkpoint", 3), 3) << read_file_text(dir_ / "attempt.txt");
  ASSERT_EQ(read_file_text(log).find("d500:done"), std::string::npos) << "the first attempt ended before it was killed";
  const fs::path attempt1 = killed / "results" / "job-0000.h5";
  Cmd check1 = sh(d500_cmd("check " + attempt1.string()));
  EXPECT_EQ(check1.code, 0) << check1.out;  // an incomplete training point, its checkpoint sound

  // Both slots hold checkpoints; flip a byte of rank 1's parameters in the newest one.
  Cmd slots = sh("/usr/bin/python3 -c \"\nimport h5py\nf = h5py.File('" + attempt1.string() +
                 "', 'r')\n"
                 "c = list(f['points'].values())[0]['checkpoint']\ns = int(c.attrs['slot'])\nst = c['state'][:]\n"
                 "p = c['parameters']\nat = p.id.get_offset() + ((s * 2 + 1) * p.shape[2] + 7) * 4\n"
                 "print(s, st[s][0]['step'], st[1 - s][0]['step'], st[s][1]['step'], at)\n\"");
  ASSERT_EQ(slots.code, 0) << slots.out;
  int newest = -1;
  long long newest_step = 0, older_step = 0, rank1_step = 0, offset = 0;
  ASSERT_EQ(std::sscanf(slots.out.c_str(), "%d %lld %lld %lld %lld", &newest, &newest_step, &older_step, &rank1_step,
                        &offset),
            5)
      << slots.out;
  EXPECT_GT(newest_step, older_step);
  EXPECT_GT(older_step, 0);
  EXPECT_EQ(rank1_step, newest_step);  // the ranks checkpoint the same step
  {
    std::fstream io(attempt1, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(offset);
    char c = 0;
    io.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    io.seekp(offset);
    io.write(&c, 1);
  }
  Cmd check2 = sh(d500_cmd("check " + attempt1.string()));
  EXPECT_NE(check2.code, 0);
  EXPECT_NE(check2.out.find("the newest slot is damaged"), std::string::npos) << check2.out;

  // The second attempt resumes from the older slot and runs to the end.
  Cmd second = sh(d500_cmd("run " + killed.string()));
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_NE(second.out.find("resumed from a checkpoint after step " + std::to_string(older_step)), std::string::npos)
      << second.out;
  const fs::path attempt2 = killed / "results" / "job-0000.h5";
  EXPECT_TRUE(fs::exists(killed / "results" / "job-0000.h5.prev-1"));
  Cmd check3 = sh(d500_cmd("check " + attempt2.string()));
  EXPECT_EQ(check3.code, 0) << check3.out;
  {
    const OnePoint point(attempt2);
    ASSERT_GE(point.group, 0);
    const hid_t g = point.group;
    EXPECT_EQ(attr_string(g, "status"), "complete");
    EXPECT_EQ(attr_int(g, "train.resumed_at_step"), older_step);
    EXPECT_EQ(attr_int(g, "train.steps"), 240);
    EXPECT_EQ(attr_int(g, "repetitions"), 240 - older_step - 2);  // this attempt's steps after its 2 warm-ups
    EXPECT_NE(attr_string(g, "train.resumed_from").find("job-0000.h5.prev-1"), std::string::npos)
        << attr_string(g, "train.resumed_from");
  }

  Cmd a = sh(sorted_events_py(attempt2)), b = sh(sorted_events_py(whole / "results" / "job-0000.h5"));
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("1:240:"), std::string::npos) << b.out;
  EXPECT_EQ(a.out, b.out);  // both ranks' curves, copied and continued, every bit

  // The report takes the resumed, complete record.
  Cmd rep = sh(d500_cmd("report " + killed.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  const auto rows = read_csv(killed / "results.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows.begin()->second.at("status"), "complete");
}

// The input pipelines beyond Fashion-MNIST, on 2 ranks: CIFAR-10's binary files (written here in
// their real layout: a label byte, then the red, green and blue 32x32 planes) with augmentation,
// and a folder of HDF5 shards, each rank reading its own; each with its next batch read beside the
// step (prefetch) and without, which trains on the same data: the same loss curve, bit for bit.
// The report's Training steps section gives each point's data phase and the pipeline's rate.
TEST_F(Training, Cifar10FilesAndHdf5ShardsTrainOnTwoRanksAndTheReportGivesTheDataPhase) {
  if (!d500::find_backend("onednn") || !d500::find_backend("onednn")->built) GTEST_SKIP() << "this build has no oneDNN";
  const fs::path cifar = dir_ / "cifar", shards = dir_ / "shards";
  Cmd made =
      sh("/usr/bin/python3 -c \"\nimport numpy as np, h5py, os\nr = np.random.default_rng(5)\n"
         "os.makedirs('" +
         cifar.string() + "')\nos.makedirs('" + shards.string() +
         "')\n"
         "def cifar(name, n):\n  rec = np.zeros((n, 3073), np.uint8)\n  rec[:, 0] = r.integers(0, 10, n)\n"
         "  rec[:, 1:] = r.integers(0, 256, (n, 3072))\n  rec.tofile('" +
         cifar.string() +
         "/' + name)\n"
         "for k in range(1, 6): cifar('data_batch_%d.bin' % k, 64)\ncifar('test_batch.bin', 64)\n"
         "for k in range(4):\n  with h5py.File('" +
         shards.string() +
         "/part-%d.h5' % k, 'w') as f:\n"
         "    for split in ('train', 'test'):\n"
         "      f[split + '/samples'] = r.integers(0, 256, (48, 1, 28, 28)).astype(np.uint8)\n"
         "      f[split + '/labels'] = r.integers(0, 10, 48)\n\"");
  ASSERT_EQ(made.code, 0) << made.out;
  const fs::path run =
      planned(kHead +
              "backend = \"onednn\"\nbatch = 8\nsteps = 12\neval_interval_steps = 6\n"
              "eval_samples = 32\nranks_per_node = 2\ncheckpoint_interval = 0\n"
              "[axes]\nnetwork = [\"resnet20-cifar\", \"lenet5\"]\n"
              "dataset = [\"cifar10\", \"" +
              shards.string() +
              "\"]\n"
              "data_dir = [\"" +
              cifar.string() +
              "\", \"\"]\n"
              "crop_padding = [4, 0]\nflip = [true, false]\nprefetch = [false, true]\n"
              "[[zip]]\naxes = [\"network\", \"dataset\", \"data_dir\", \"crop_padding\", \"flip\"]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  std::map<std::string, int> seen;
  std::map<std::string, std::set<std::string>> curves;  // per dataset: each point's loss curve
  const std::string events = sh(events_py(run / "results" / "job-0000.h5")).out;
  for (const auto& id : point_ids(f)) {
    hid_t g = H5Gopen2(f, ("points/" + id).c_str(), H5P_DEFAULT);
    const bool prefetch = attr_string(g, "train.timing").find("prefetch") != std::string::npos;
    EXPECT_EQ(prefetch, attr_int(g, "param.prefetch") != 0) << attr_string(g, "train.timing");
    EXPECT_EQ(attr_string(g, "status"), "complete") << attr_string(g, "status_reason");
    EXPECT_EQ(attr_int(g, "train.steps"), 12);
    const std::string data = attr_string(g, "train.dataset");
    const std::string kind = data.find("CIFAR-10") != std::string::npos ? "cifar" : "shards";
    std::istringstream lines(events);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(id + " ", 0) == 0) curves[kind].insert(line.substr(id.size() + 1));
    if (data.find("CIFAR-10 train (320 samples [3,32,32]") != std::string::npos) {
      ++seen["cifar"];
      EXPECT_NE(attr_string(g, "train.augmentation").find("zero-padded by 4 pixels"), std::string::npos);
    } else if (data.find("HDF5 shards") != std::string::npos) {
      ++seen["shards"];
      EXPECT_NE(data.find("192 samples [1,28,28] in 4 files"), std::string::npos) << data;
      EXPECT_NE(attr_string(g, "train.sampler").find("its own shards"), std::string::npos)
          << attr_string(g, "train.sampler");
    }
    std::map<int, int> data_rows;  // phase 1 (data) per rank
    for (const auto& smp : read_samples(f, id))
      if (smp.phase == 1) ++data_rows[smp.rank];
    EXPECT_EQ(data_rows[0], 12);
    EXPECT_EQ(data_rows[1], 12);
    H5Gclose(g);
  }
  H5Fclose(f);
  EXPECT_EQ(seen["cifar"], 2);
  EXPECT_EQ(seen["shards"], 2);
  for (const auto& [kind, c] : curves) EXPECT_EQ(c.size(), 1u) << kind << ": prefetch changed the curve";
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  const std::string md = read_file_text(run / "report.md");
  EXPECT_NE(md.find("## Training steps"), std::string::npos) << md;
  EXPECT_NE(md.find("pipeline /s"), std::string::npos);
}

// Recurrent networks nobody here wrote: an nn.GRU and a bidirectional nn.LSTM classifier exported
// by PyTorch (tests/fixtures/onnx/make_fixtures.py) train on synthetic sequences with a rule to
// learn on every CPU backend of the build, each validated against the double yardstick first,
// and learn the rule (chance: 1 in 4).
TEST_F(Training, PyTorchsGruAndLstmTrainOnEveryCpuBackendAndLearnTheRule) {
  std::string backends;
  for (const auto& b : d500::all_backends())
    if (b.built && (b.name == "reference" || b.make_node_kernel || b.make_graph_runner) && b.name != "custom" &&
        !(b.no_device && !b.no_device().empty()))
      backends += (backends.empty() ? "\"" : ", \"") + b.name + "\"";
  const std::string fx = std::string(D500_TEST_DIR) + "/fixtures/onnx/";
  const fs::path run =
      planned(kHead +
              "dataset = \"sequences\"\nsynthetic_samples = 2048\nbatch = 16\nsteps = 200\n"
              "eval_interval_steps = 100\neval_samples = 0\noptimizer = \"adam\"\nlr = 0.01\n"
              "checkpoint_interval = 0\n[axes]\nnetwork = [\"" +
              fx + "pytorch_gru.onnx\", \"" + fx + "pytorch_lstm.onnx\"]\nbackend = [" + backends + "]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  const std::vector<std::string> ids = point_ids(f);
  EXPECT_GE(ids.size(), 4u);
  for (const auto& id : ids) {
    hid_t g = H5Gopen2(f, ("points/" + id).c_str(), H5P_DEFAULT);
    const std::string what = attr_string(g, "param.network") + " on " + attr_string(g, "param.backend");
    EXPECT_EQ(attr_string(g, "status"), "complete") << what << ": " << attr_string(g, "status_reason");
    EXPECT_EQ(attr_string(g, "validation_status"), "passed") << what << ": " << attr_string(g, "validation_method");
    EXPECT_GT(attr_double(g, "train.final_accuracy"), 0.6) << what;
    H5Gclose(g);
  }
  H5Fclose(f);
}

TEST_F(Training, TwoRanksTrainOnTheirSharesInLockstep) {
  const fs::path run =
      planned(kHead +
              "network = \"mlp\"\nbackend = \"reference\"\ndataset = \"synthetic\"\nsynthetic_samples = 1024\n"
              "batch = 32\nepochs = 2\neval_interval_steps = 8\neval_samples = 64\nranks_per_node = 2\n");
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  // Every attribute equal on both ranks, as parallel HDF5 needs (the validation's words differ
  // per rank: the worst rank's are written), so the point's checksum holds.
  Cmd check = sh(d500_cmd("check " + (run / "results" / "job-0000.h5").string()));
  EXPECT_EQ(check.code, 0) << check.out;
  const OnePoint point(run / "results" / "job-0000.h5");
  ASSERT_GE(point.group, 0);
  const hid_t g = point.group;
  // 1024 samples, 512 per rank, 16 batches of 32 per rank and epoch: 32 steps in 2 epochs.
  EXPECT_EQ(attr_int(g, "train.steps"), 32);
  EXPECT_NE(attr_string(g, "train.sampler").find("each rank its own share of 512 samples"), std::string::npos)
      << attr_string(g, "train.sampler");
  std::map<int, int> per_rank;
  for (const auto& s : read_samples(point.file, point.id))
    if (s.phase == 0) ++per_rank[s.rank];
  EXPECT_EQ(per_rank[0], 32);
  EXPECT_EQ(per_rank[1], 32);
}

TEST_F(Training, LibTorchsOptimizersAgreeWithTheReferenceOnes) {
  const d500::BackendInfo* b = d500::find_backend("libtorch-native");
  if (!b || !b->built)
    GTEST_SKIP() << "this build has no libtorch-native backend: " << (b ? b->not_built_reason : "unknown");
  const fs::path run = planned(
      kHead +
      "network = \"lenet5\"\nbackend = \"libtorch-native\"\noptimizer_impl = \"native\"\ndataset = \"synthetic\"\n"
      "synthetic_samples = 2000\nsteps = 10\neval_interval_steps = 0\neval_samples = 64\nweight_decay = 0.01\n"
      "[axes]\noptimizer = [\"sgd\", \"momentum\", \"nesterov\", \"adam\", \"adamw\", \"adagrad\", \"rmsprop\"]\n");
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  int rows = 0;
  for (const auto& [id, row] : read_csv(run / "results.csv")) {
    ++rows;
    EXPECT_EQ(row.at("validation_status"), "passed") << row.at("canonical");
  }
  EXPECT_EQ(rows, 7);
}

TEST_F(Training, ImpossiblePointsAreRefusedAtPlanTime) {
  struct Case {
    std::string fixed, error;
  };
  const std::vector<Case> cases = {
      {"target_accuracy = 0.8\n", "target_accuracy needs a time_budget"},
      {"optimizer = \"adamax\"\n", "valid: sgd, momentum, nesterov, adam, adamw, adagrad, rmsprop"},
      {"optimizer_impl = \"native\"\nbackend = \"reference\"\n", "needs a backend with optimizers of its own"},
      {"network = \"resnet20-cifar\"\ndataset = \"synthetic\"\nbatch = 2\nsynthetic_samples = 12\nsteps = 1\n", ""},
      {"dataset = \"fashion-mnist\"\ndata_dir = \"/nonexistent\"\n", "Fashion-MNIST file not found"},
      {"dataset = \"/nonexistent/data.h5\"\n", "training data file not found"},
      {"dataset = \"synthetic\"\nsynthetic_samples = 10\nbatch = 64\n", "larger than"},
      {"steps = 0\nepochs = 0\n", "training needs an end"},
      {"target_accuracy = 0.85\ntime_budget = 60\nreport_targets = \"0.8, 0.9\"\n",
       "0.9 is not below target_accuracy 0.85"},
      {"target_accuracy = 0.85\ntime_budget = 60\nreport_targets = \"0.8 high\"\n",
       "a list of accuracies separated by spaces or commas"},
      {"report_targets = \"0.5\"\n", "report_targets needs target_accuracy"},
  };
  for (const auto& c : cases) {
    std::string text = kHead + c.fixed;
    if (text.find("backend =") == std::string::npos) text += "backend = \"reference\"\n";
    Cmd plan = sh(d500_cmd("plan " + write("bad.toml", text) + " --dry-run"));
    if (c.error.empty()) {
      EXPECT_EQ(plan.code, 0) << c.fixed << plan.out;  // a CIFAR-shaped network runs on synthetic data of its shape
      continue;
    }
    EXPECT_NE(plan.code, 0) << c.fixed;
    EXPECT_NE(plan.out.find(c.error), std::string::npos) << c.fixed << "\n" << plan.out;
    EXPECT_NE(plan.out.find("bad.toml"), std::string::npos) << plan.out;
  }
  // Fashion-MNIST's [1,28,28] samples do not fit a CIFAR network.
  if (have_fashion_mnist()) {
    Cmd plan = sh(d500_cmd(
        "plan " + write("bad.toml", kHead + "backend = \"reference\"\nnetwork = \"resnet20-cifar\"\n") + " --dry-run"));
    EXPECT_NE(plan.out.find("its samples are [1,28,28], the network's input"), std::string::npos) << plan.out;
  }
}

// SIGTERM in the middle of training (Slurm's warning at a job's time limit, KillWait seconds
// before its SIGKILL; `d500 run` stopped): every rank takes a checkpoint before its next step
// and the job ends as the signal asks. Run again, the point resumes from that step -- with
// periodic checkpoints an hour apart there is no other -- and ends on the uninterrupted curve.
TEST_F(Training, ASigtermCheckpointsBeforeTheNextStepAndTheResumeLosesNoStep) {
  // Samples made durable every 0.25 s (not 2 s): the signal comes early in a short run.
  const ScopedEnv flush("D500_FLUSH_INTERVAL_S", "0.25");
  const std::string campaign =
      kHead +
      "network = \"lenet5\"\nbackend = \"reference\"\ndataset = \"synthetic\"\nsynthetic_samples = 8192\n"
      "batch = 32\nsteps = 300\neval_interval_steps = 10\neval_samples = 64\noptimizer = \"adam\"\nlr = 0.001\n"
      "seed = 9\nranks_per_node = 2\ncheckpoint_interval = 3600\n";
  const auto [stopped, whole] = planned_twice_and_one_run(campaign);
  // The first attempt: its workers sent SIGTERM once the log shows training under way (its
  // first durable flush comes about 0.25 s into the point, of about 4 s).
  ASSERT_GE(run_killed_after(stopped, "d500:flushed", 1, "TERM"), 1) << read_file_text(dir_ / "attempt.txt");
  const std::string log = read_file_text(stopped / "logs" / "job-0000.log");
  ASSERT_EQ(log.find("d500:done"), std::string::npos) << "the first attempt ended before the signal: " << log;
  EXPECT_NE(log.find("SIGTERM during point"), std::string::npos) << log;
  const auto checkpoints = [&] {
    int n = 0;
    for (auto at = log.find("\nd500:checkpoint "); at != std::string::npos; at = log.find("\nd500:checkpoint ", at + 1))
      ++n;
    return n;
  };
  ASSERT_EQ(checkpoints(), 1) << log;
  const long long step = last_line_number(log, "d500:checkpoint ");
  EXPECT_GT(step, 0);
  EXPECT_LT(step, 300);
  Cmd check = sh(d500_cmd("check " + (stopped / "results" / "job-0000.h5").string()));
  EXPECT_EQ(check.code, 0) << check.out;  // an incomplete training point, its checkpoint sound

  Cmd second = sh(d500_cmd("run " + stopped.string()));
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_NE(second.out.find("resumed from a checkpoint after step " + std::to_string(step)), std::string::npos)
      << second.out;
  const fs::path results = stopped / "results" / "job-0000.h5";
  {
    const OnePoint point(results);
    ASSERT_GE(point.group, 0);
    EXPECT_EQ(attr_string(point.group, "status"), "complete");
    EXPECT_EQ(attr_int(point.group, "train.resumed_at_step"), step);
    EXPECT_EQ(attr_int(point.group, "train.steps"), 300);
  }
  Cmd a = sh(sorted_events_py(results)), b = sh(sorted_events_py(whole / "results" / "job-0000.h5"));
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(a.out, b.out);  // both ranks' curves, every bit
}

// `d500 run` stopped (Ctrl-C) in the middle of training: its SIGTERM reaches mpirun, which sends
// the ranks SIGTERM 3 s later (templates/local.sh.in) and SIGKILL 3 s after that; they checkpoint
// before their next step. Run again, the point resumes from that step and completes.
TEST_F(Training, AStoppedRunCheckpointsAndTheNextRunResumesFromThere) {
  // Stopped at its first durable flush, 0.25 s in: the ranks must outlast mpirun's 3 s before
  // it passes the SIGTERM on, so the run is about 10 s long.
  const ScopedEnv flush("D500_FLUSH_INTERVAL_S", "0.25");
  const fs::path run =
      planned(kHead +
              "network = \"lenet5\"\nbackend = \"reference\"\ndataset = \"synthetic\"\nsynthetic_samples = 8192\n"
              "batch = 32\nsteps = 700\neval_interval_steps = 10\neval_samples = 64\noptimizer = \"adam\"\nlr = 0.001\n"
              "seed = 9\nranks_per_node = 2\ncheckpoint_interval = 3600\n");
  const fs::path log = run / "logs" / "job-0000.log";
  Cmd stopped = sh("(" + d500_cmd("run " + run.string()) + " > " + (dir_ / "attempt.txt").string() +
                   " 2>&1 & pid=$!\n"
                   "for i in $(seq 1 1200); do grep -q '^d500:flushed' " +
                   log.string() +
                   " 2>/dev/null && break; sleep 0.05; done\n"
                   "kill -INT $pid; wait $pid; echo \"rc=$?\")");
  const std::string first = read_file_text(log);
  ASSERT_EQ(first.find("d500:done"), std::string::npos) << "the first attempt ended before it was stopped: " << first;
  EXPECT_NE(stopped.out.find("rc=130"), std::string::npos) << stopped.out << read_file_text(dir_ / "attempt.txt");
  EXPECT_NE(first.find("SIGTERM during point"), std::string::npos) << first;
  const long long step = last_line_number(first, "d500:checkpoint ");
  EXPECT_GT(step, 0) << first;
  Cmd second = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_NE(second.out.find("resumed from a checkpoint after step " + std::to_string(step)), std::string::npos)
      << second.out;
}
