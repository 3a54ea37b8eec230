// Level 3 end to end under mpirun: every scheme on one worker follows level 2's curve bit for
// bit; on three ranks the consistent schemes keep every worker's parameters identical (hash
// checks), every scheme's communication volume is the count its algorithm implies, the step's
// phases include communication and wait, the overlapped buckets start inside backward; and
// impossible points are refused at plan time.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/registry.hpp"
#include "helpers.hpp"
#include "training/data.hpp"

using namespace d500test;

namespace {

class Distributed : public ScratchDirTest {};

const std::string kDistributedHead = "[campaign]\nname = \"l3\"\nrepetitions = 1\nwarmups = 2\n";

// Real data where Debian's package is installed, else synthetic samples (the comparisons hold on either).
std::string data_lines() {
  const bool fm = fs::exists(std::string(d500::fashion_mnist_dir()) + "/train-images-idx3-ubyte.gz");
  return fm ? "dataset = \"fashion-mnist\"\n" : "dataset = \"synthetic\"\nsynthetic_samples = 4000\n";
}

// h5py: per point "workload scheme ps_servers ranks_per_node | step:loss:accuracy ..." of rank 0's events.
std::string curves_py(const fs::path& results) {
  return "/usr/bin/python3 -c \"\nimport h5py, glob\nfor fn in sorted(glob.glob('" + results.string() +
         "/*.h5')):\n  f = h5py.File(fn, 'r')\n  for pid in sorted(f['points']):\n    g = f['points'][pid]\n    c = dict(kv.split('=', 1) for kv in "
         "g.attrs['canonical'].split()[1:])\n    e = [r for r in g['events'][:] if r['rank'] == 0]\n    print(g.attrs['canonical'].split(':')[0], "
         "c.get('scheme', '-'), c.get('ps_servers', '-'), c['ranks_per_node'], '|', ' '.join('%d:%r:%r' % (r['step'], float(r['loss']), "
         "float(r['accuracy'])) for r in e))\n\"";
}

std::string scheme_of(const std::string& canonical) {
  const auto at = canonical.find(" scheme=");
  return canonical.substr(at + 8, canonical.find(' ', at + 8) - at - 8);
}

bool attr_bool(hid_t obj, const char* name) {
  return attr_int(obj, name) != 0;  // booleans are stored as integers 0/1 (hdf5-schema/README.md)
}

}  // namespace

TEST_F(Distributed, OnOneWorkerEverySchemeFollowsLevelTwosCurveBitForBit) {
  const std::string fixed =
      "[fixed]\nnetwork = \"lenet5\"\nbackend = \"reference\"\n" + data_lines() +
      "batch = 32\nsteps = 30\neval_interval_steps = 10\neval_samples = 300\noptimizer = \"momentum\"\nlr = 0.02\n"
      "checkpoint_interval = 0\nseed = 3\n";
  // One rank: level 2 and every scheme that runs on one rank; two ranks: a dedicated server and one worker.
  const std::pair<std::string, std::string> runs[] = {
      {"one",
       "[axes]\nworkload = [\"train\", \"distributed\"]\n"
       "scheme = [\"allreduce\", \"allreduce-overlap\", \"ps-sync\", \"model-averaging\", \"dpsgd\"]\n"},
      {"two",
       "workload = \"distributed\"\nranks_per_node = 2\nps_servers = 1\n[axes]\nscheme = [\"ps-sync\", \"ps-async\"]\n"}};
  std::string curves;
  for (const auto& [name, lines] : runs) {
    const fs::path run = dir_ / name;
    Cmd plan = sh(d500_cmd("plan " + write(name + ".toml", kDistributedHead + fixed + lines) + " -o " + run.string()));
    ASSERT_EQ(plan.code, 0) << plan.out;
    Cmd r = sh(d500_cmd("run " + run.string()));
    ASSERT_EQ(r.code, 0) << r.out;
    Cmd c = sh(curves_py(run / "results"));
    ASSERT_EQ(c.code, 0) << c.out;
    curves += c.out;
  }
  std::map<std::string, std::string> curve;  // "workload scheme servers ranks" -> curve
  std::istringstream lines(curves);
  for (std::string line; std::getline(lines, line);) {
    const auto bar = line.find(" | ");
    if (bar != std::string::npos) curve[line.substr(0, bar)] = line.substr(bar + 3);
  }
  ASSERT_EQ(curve.size(), 8u) << curves;
  const std::string level2 = curve.at("train - - 1");
  EXPECT_NE(level2.find("30:"), std::string::npos) << level2;
  for (const auto& [which, c] : curve) EXPECT_EQ(c, level2) << which << " differs from level 2's run of the same seed";
}

// The overlapped allreduce against the plain one in the run's results.json: one pair, its figures
// recomputed from the report's own per-point medians, and intervals around the estimates. The
// exposed time is the median over steps of the slowest rank's communication + wait, recomputed
// here from the file's samples as hdf5-schema/ describes them (phases 0 op, 5 communication,
// 6 wait; a step's slowest rank the one with the longest op row). (The sum of the two phases'
// medians is no bound on it: the slowest rank seldom waits, and with the ranks yielding the CPU
// under the suite's load the median of the sums was 2.1 times the sum of the medians.) "ok" when so.
Cmd overlap_comparison_checked(const fs::path& run) {
  return sh(
      "/usr/bin/python3 -c \"\nimport json, h5py, numpy as np\nj = json.load(open('" + (run / "results.json").string() +
      "'))\npts = {p['id']: p for p in j['points']}\nassert len(j['overlap']) == 1, j['overlap']\nc = j['overlap'][0]\n"
      "p, o = pts[c['plain_id']], pts[c['overlap_id']]\n"
      "assert ' scheme=allreduce ' in p['canonical'] and ' scheme=allreduce-overlap ' in o['canonical']\n"
      "assert c['workers'] == 3 and c['plain_step_s'] == p['median_s'] and c['overlap_step_s'] == o['median_s']\n"
      "f = h5py.File('" +
      (run / "results" / "job-0000.h5").string() +
      "', 'r')\ns = f['points'][c['plain_id']]['samples'][:]\ns = s[s['warmup'] == 0]\nop = s[s['phase'] == 0]\nex = []\n"
      "for rep in sorted(set(op['rep'].tolist())):\n"
      "  r = op[op['rep'] == rep]\n"
      "  if len(r) != int(f.attrs['ranks']): continue\n"
      "  w = r['rank'][int(np.argmax(r['end_ns'] - r['start_ns']))]\n"
      "  x = s[(s['rep'] == rep) & (s['rank'] == w) & ((s['phase'] == 5) | (s['phase'] == 6))]\n"
      "  ex.append(float((x['end_ns'] - x['start_ns']).sum()) * 1e-9)\n"
      "assert len(ex) == 18 and abs(np.median(ex) - c['plain_exposed_s']) <= 1e-9, (len(ex), np.median(ex), c)\n"
      "assert abs(c['hidden'][0] - (c['plain_step_s'] - c['overlap_step_s']) / c['plain_exposed_s']) < 1e-6\n"
      "assert c['hidden'][1] <= c['hidden'][0] <= c['hidden'][2], c\n"
      "s = c['speedup']\nassert abs(s['estimate'] / (p['median_s'] / o['median_s']) - 1) < 1e-6 and s['lo'] <= s['estimate'] <= s['hi'], s\n"
      "print('ok')\n\"");
}

TEST_F(Distributed, ThreeRanksKeepConsistentSchemesIdenticalAndCountEachSchemesVolume) {
  const std::string text =
      kDistributedHead +
      "[fixed]\nworkload = \"distributed\"\nnetwork = \"lenet5\"\nbackend = \"reference\"\ndataset = \"synthetic\"\n"
      "synthetic_samples = 3000\nbatch = 16\nsteps = 20\neval_interval_steps = 10\neval_samples = 200\n"
      "hash_interval_steps = 5\ncheckpoint_interval = 0\nranks_per_node = 3\nbucket_bytes = 65536\naverage_interval = 4\n"
      "staleness = 1\n[axes]\nscheme = [\"allreduce\", \"allreduce-overlap\", \"ps-sync\", \"ps-async\", \"model-averaging\", \"dpsgd\"]\n"
      "ps_servers = [0, 1]\n[[exclude]]\nscheme = \"ps-async\"\nps_servers = 0\n"
      "[[exclude]]\nscheme = \"allreduce\"\nps_servers = 1\n[[exclude]]\nscheme = \"allreduce-overlap\"\nps_servers = 1\n"
      "[[exclude]]\nscheme = \"model-averaging\"\nps_servers = 1\n[[exclude]]\nscheme = \"dpsgd\"\nps_servers = 1\n";
  const fs::path run = planned(text);
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  Cmd check = sh(d500_cmd("check " + (run / "results" / "job-0000.h5").string()));
  EXPECT_EQ(check.code, 0) << check.out;

  const double B = 61706.0 * 4;  // LeNet-5's trainable parameters, in bytes
  hid_t f = H5Fopen((run / "results" / "job-0000.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const std::vector<std::string> ids = point_ids(f);
  ASSERT_EQ(ids.size(), 7u);
  int seen = 0;
  for (const auto& id : ids) {
    hid_t g = H5Gopen2(f, ("points/" + id).c_str(), H5P_DEFAULT);
    const std::string canonical = attr_string(g, "canonical"), scheme = scheme_of(canonical);
    const bool dedicated = canonical.find(" ps_servers=1") != std::string::npos;
    SCOPED_TRACE(scheme + (dedicated ? " (dedicated server)" : ""));
    EXPECT_EQ(attr_string(g, "status"), "complete");
    EXPECT_EQ(attr_string(g, "validation_status"), "passed");
    EXPECT_EQ(attr_int(g, "train.steps"), 20);
    EXPECT_EQ(attr_string(g, "dist.scheme"), scheme);
    const bool consistent = scheme == "allreduce" || scheme == "allreduce-overlap" || scheme == "ps-sync";
    EXPECT_EQ(attr_bool(g, "dist.consistent"), consistent);
    if (consistent) {
      EXPECT_EQ(attr_int(g, "dist.hash_checks"), 4);  // steps 5, 10, 15, 20 (the last)
      EXPECT_EQ(attr_int(g, "dist.hash_mismatches"), 0);
      EXPECT_TRUE(attr_bool(g, "dist.parameters_identical"));
    }
    const double sent = attr_double(g, "comm.bytes_sent_per_step"),
                 received = attr_double(g, "comm.bytes_received_per_step");
    // Mean over the 3 ranks of bytes per step, from each scheme's algorithm.
    double want_sent = 0, want_received = 0;
    if (scheme == "allreduce" || scheme == "allreduce-overlap" || scheme == "ps-sync")
      want_sent = want_received = 4 * B / 3;
    if (scheme == "model-averaging") want_sent = want_received = 4 * B / 3 / 4;  // every 4th step
    if (scheme == "dpsgd") want_sent = want_received = 2 * B;                    // two ring neighbours
    if (scheme == "ps-async")
      want_sent = want_received = B;  // workers push B, pull B every 2nd step; the server gets 2B, answers B
    EXPECT_NEAR(sent, want_sent, want_sent * 1e-4);
    EXPECT_NEAR(received, want_received, want_received * 1e-4);
    // Phases: every rank's every step has a communication row; synchronous exchanges a wait row.
    std::map<int, int> rows;
    long long backward_end = 0, comm_start = 0;
    int in_backward = 0;
    const auto samples = read_samples(f, id);
    for (const auto& s : samples) ++rows[s.phase];
    EXPECT_EQ(rows[0], 3 * 20);
    if (scheme != "model-averaging") {
      EXPECT_EQ(rows[5], 3 * 20) << "communication rows";
    } else {
      EXPECT_EQ(rows[5], 3 * 5) << "communication rows (averaging steps)";
    }
    if (scheme == "allreduce" || (scheme == "ps-sync")) {
      EXPECT_EQ(rows[6], 3 * 20) << "wait rows";
    }
    if (scheme == "allreduce-overlap") {
      // Buckets start inside backward: a step's first communication row begins before its backward row ends.
      EXPECT_NE(attr_string(g, "dist.overlap").find("during backward"), std::string::npos)
          << attr_string(g, "dist.overlap");
      std::map<std::pair<int, int>, std::pair<long long, long long>> step;  // (rank, rep) -> (backward end, comm start)
      for (const auto& s : samples) {
        if (s.phase == 3) step[{s.rank, s.rep}].first = s.end_ns;
        if (s.phase == 5) step[{s.rank, s.rep}].second = s.start_ns;
      }
      for (const auto& [k, v] : step) {
        backward_end = v.first;
        comm_start = v.second;
        in_backward += comm_start < backward_end ? 1 : 0;
      }
      EXPECT_EQ(in_backward, 3 * 20);
    }
    ++seen;
    H5Gclose(g);
  }
  EXPECT_EQ(seen, 7);
  H5Fclose(f);

  // The report labels the schemes and shows communication.
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  const std::string md = read_file_text(run / "report.md");
  EXPECT_NE(md.find("inconsistent"), std::string::npos);
  EXPECT_NE(md.find("communication"), std::string::npos);
  const Cmd ov = overlap_comparison_checked(run);
  EXPECT_EQ(ov.out, "ok\n") << ov.out;
  EXPECT_NE(md.find("### Overlap"), std::string::npos);
}

TEST_F(Distributed, ImpossibleSchemesAreRefusedAtPlanTime) {
  const std::string head =
      kDistributedHead +
      "[fixed]\nworkload = \"distributed\"\nnetwork = \"lenet5\"\nbackend = \"reference\"\ndataset = \"synthetic\"\n"
      "steps = 5\n";
  struct Case {
    std::string lines, says;
  } cases[] = {
      {"scheme = \"ps-async\"\nranks_per_node = 2\n", "ps-async needs dedicated server ranks"},
      {"scheme = \"ps-sync\"\nps_servers = 2\nranks_per_node = 2\n", "leaves no worker"},
      {"scheme = \"allreduce\"\nps_servers = 1\nranks_per_node = 2\n",
       "ps_servers applies to the parameter-server schemes"},
      {"scheme = \"allreduce\"\nglobal_batch = 100\nranks_per_node = 3\n", "does not split evenly over 3 workers"},
      {"scheme = \"allreduce-ring\"\n", "allreduce-overlap"},
      // NCCL averages on a GPU: the reference keeps its tensors on the host; and the parameter servers run on NCCL only
      // on rank 0.
      {"scheme = \"allreduce\"\ncommunication = \"nccl\"\n",
       "communication = \"nccl\" averages the gradients (or parameters) where d500's executor keeps them"},
      {"scheme = \"ps-sync\"\ncommunication = \"nccl\"\n",
       "communication = \"nccl\" averages the gradients (or parameters) where d500's executor keeps them"},
      {"scheme = \"ps-sync\"\nps_servers = 1\nranks_per_node = 2\ncommunication = \"nccl\"\n",
       "runs ps-sync with its server on rank 0 (ps_servers = 0)"},
      {"scheme = \"ps-async\"\nps_servers = 1\nranks_per_node = 2\ncommunication = \"nccl\"\n",
       "a receive from any rank, which NCCL lacks"},
      {"scheme = \"model-averaging\"\ncommunication = \"nccl\"\n",
       "communication = \"nccl\" averages the gradients (or parameters) where d500's executor keeps them"},
      {"scheme = \"allreduce\"\ncommunication = \"gloo\"\n", "key 'communication' is \"gloo\" (valid: mpi, nccl)"},
  };
  for (const auto& c : cases) {
    const fs::path run = dir_ / ("r" + std::to_string(&c - cases));
    Cmd plan = sh(d500_cmd("plan " + write("c.toml", head + c.lines) + " -o " + run.string()));
    EXPECT_NE(plan.code, 0) << c.lines;
    EXPECT_NE(plan.out.find(c.says), std::string::npos) << plan.out;
    EXPECT_NE(plan.out.find("c.toml:"), std::string::npos) << plan.out;  // the file and line
    EXPECT_FALSE(fs::exists(run)) << "nothing is written";
  }
}

namespace {

// h5py: per complete point of any file in the folder, "scheme | rank:step:loss:accuracy ..." of
// every rank's events sorted by rank and step (%r: every bit), plus its resume step.
std::string complete_curves_py(const fs::path& results) {
  return "/usr/bin/python3 -c \"\nimport h5py, glob\nfor fn in sorted(glob.glob('" + results.string() +
         "/*.h5*')):\n  f = h5py.File(fn, 'r')\n  for pid in sorted(f['points']):\n    g = f['points'][pid]\n"
         "    if g.attrs['status'] != 'complete': continue\n    c = g.attrs['canonical']\n"
         "    rows = sorted((int(r['rank']), int(r['step']), float(r['loss']), float(r['accuracy'])) for r in g['events'][:])\n"
         "    print(c[c.index(' scheme=') + 8:].split()[0], int(g.attrs['train.resumed_at_step']), '|', ' '.join('%d:%d:%r:%r' % r for r in rows))\n\"";
}

}  // namespace

// Level 3 resumes like level 2: a two-point job (D-PSGD, whose two workers hold different
// parameters, and the overlapped allreduce) is killed in the middle of its first point, run
// again (resumes it, finishes it, starts the second) and killed in the middle of the second,
// then run a third time. Each point resumes from its own checkpoint, each rank from its own row,
// and both curves are the uninterrupted run's, every rank's every bit.
TEST_F(Distributed, AKilledDistributedRunResumesEachSchemeFromItsCheckpointOnTheUninterruptedCurve) {
  const std::string campaign =
      kDistributedHead +
      "[fixed]\nworkload = \"distributed\"\nnetwork = \"lenet5\"\nbackend = \"reference\"\ndataset = \"synthetic\"\n"
      "synthetic_samples = 8192\nbatch = 32\nsteps = 240\neval_interval_steps = 10\neval_samples = 64\n"
      "optimizer = \"adam\"\nlr = 0.001\nseed = 5\nranks_per_node = 2\ncheckpoint_interval = 0.2\nbucket_bytes = 65536\n"
      "hash_interval_steps = 20\n[axes]\nscheme = [\"dpsgd\", \"allreduce-overlap\"]\n";
  const auto [killed, whole] = planned_twice_and_one_run(campaign);

  // Attempts 1 and 2, each killed once its log shows three checkpoints of point 1, then of point 2.
  const fs::path log = killed / "logs" / "job-0000.log";
  for (int point : {1, 2}) {
    SCOPED_TRACE("killed in point " + std::to_string(point));
    ASSERT_GE(run_killed_after(killed, "d500:checkpoint " + std::to_string(point) + "/2 ", 3), 3)
        << read_file_text(dir_ / "attempt.txt");
    ASSERT_EQ(read_file_text(log).find("d500:done " + std::to_string(point) + "/2"), std::string::npos)
        << "point " << point << " ended before it was killed";
    if (point == 2) {
      const std::string said = read_file_text(dir_ / "attempt.txt");
      EXPECT_NE(said.find("resumed from a checkpoint after step"), std::string::npos) << said;
    }
  }
  Cmd last = sh(d500_cmd("run " + killed.string()));
  ASSERT_EQ(last.code, 0) << last.out;
  EXPECT_NE(last.out.find("resumed from a checkpoint after step"), std::string::npos) << last.out;

  Cmd a = sh(complete_curves_py(killed / "results")), b = sh(complete_curves_py(whole / "results"));
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  std::map<std::string, std::pair<int, std::string>> resumed, uninterrupted;  // scheme -> (resumed at, curve)
  for (auto [text, into] : {std::pair{a.out, &resumed}, std::pair{b.out, &uninterrupted}}) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream w(line);
      std::string scheme;
      int at = -1;
      w >> scheme >> at;
      ASSERT_FALSE(into->count(scheme)) << "two complete records of " << scheme << ":\n" << text;
      (*into)[scheme] = {at, line.substr(line.find(" | ") + 3)};
    }
  }
  ASSERT_EQ(uninterrupted.size(), 2u) << b.out;
  ASSERT_EQ(resumed.size(), 2u) << a.out;
  for (const std::string scheme : {"dpsgd", "allreduce-overlap"}) {
    SCOPED_TRACE(scheme);
    EXPECT_EQ(uninterrupted.at(scheme).first, 0);
    EXPECT_GT(resumed.at(scheme).first, 0) << "the complete record did not resume from a checkpoint";
    EXPECT_NE(uninterrupted.at(scheme).second.find("1:240:"), std::string::npos);
    EXPECT_EQ(resumed.at(scheme).second, uninterrupted.at(scheme).second);  // both ranks' curves, every bit
  }
  Cmd rep = sh(d500_cmd("report " + killed.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  const auto rows = read_csv(killed / "results.csv");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& [id, row] : rows) EXPECT_EQ(row.at("status"), "complete") << id;
}

// The volume d500 counts, cross-checked by a count it does not make: a PMPI layer
// (tests/fixtures/pmpi_count.c, LD_PRELOADed into every rank) sees each call the schemes make on
// their own communicator and its buffer's bytes as MPI sees them (count x type size). From those
// the test applies the rules d500 states (point-to-point exactly; an allreduce of b bytes as a
// ring, 2(p-1)/p b each way; a reduce and a broadcast as root <-> every other rank) and compares
// each scheme's per-rank figures, mean, smallest and largest, with what d500 stored.
TEST_F(Distributed, TheVolumeD500CountsIsWhatAPmpiLayerSeesEachSchemeHandToMpi) {
  const fs::path counts = dir_ / "pmpi";
  fs::create_directories(counts);
  const std::string text =
      kDistributedHead +
      "[fixed]\nworkload = \"distributed\"\nnetwork = \"lenet5\"\nbackend = \"reference\"\ndataset = \"synthetic\"\n"
      "synthetic_samples = 3000\nbatch = 16\nsteps = 12\neval_interval_steps = 4\neval_samples = 100\n"
      "hash_interval_steps = 4\ncheckpoint_interval = 0\nranks_per_node = 3\nbucket_bytes = 65536\naverage_interval = 3\n"
      "staleness = 1\n[axes]\nscheme = [\"allreduce\", \"allreduce-overlap\", \"ps-sync\", \"ps-async\", \"model-averaging\", \"dpsgd\"]\n"
      "ps_servers = [0, 1]\n[[exclude]]\nscheme = \"ps-async\"\nps_servers = 0\n"
      "[[exclude]]\nscheme = \"allreduce\"\nps_servers = 1\n[[exclude]]\nscheme = \"allreduce-overlap\"\nps_servers = 1\n"
      "[[exclude]]\nscheme = \"model-averaging\"\nps_servers = 1\n[[exclude]]\nscheme = \"dpsgd\"\nps_servers = 1\n";
  const fs::path run = planned(text);
  Cmd r = sh("D500_MPIRUN_FLAGS='-x LD_PRELOAD=" + std::string(D500_PMPI_COUNT) +
             " -x D500_PMPI_COUNT_DIR=" + counts.string() + "' " + d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;

  // Per scheme ("name ps_servers=N") and rank: the bytes d500's rules make of the PMPI counts.
  struct Implied {
    double sent = 0, received = 0;
    long long other = 0;
  };
  std::map<std::string, std::map<int, Implied>> seen;
  for (int rank = 0; rank < 3; ++rank) {
    std::ifstream in(counts / ("rank-" + std::to_string(rank) + ".tsv"));
    ASSERT_TRUE(in) << "the PMPI layer wrote nothing for rank " << rank;
    for (std::string line; std::getline(in, line);) {
      std::istringstream f(line);
      std::string name;
      std::getline(f, name, '\t');
      double p = 0, me = 0, n[15] = {};
      f >> p >> me;
      for (double& v : n) f >> v;
      ASSERT_TRUE(f) << line;
      const double ring = 2 * (p - 1) / p * (n[3] + n[5]);  // allreduce and iallreduce bytes
      Implied& i = seen[name][static_cast<int>(me)];
      i.sent = n[0] + ring + n[8] + n[10] * (p - 1);      // p2p sent, reduce (leaf), broadcast (root)
      i.received = n[1] + ring + n[7] * (p - 1) + n[11];  // p2p posted receives, reduce (root), broadcast (leaf)
      i.other = static_cast<long long>(n[14]);
    }
  }
  ASSERT_EQ(seen.size(), 7u) << "one scheme communicator per point";

  hid_t f = H5Fopen((run / "results" / "job-0000.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  for (const auto& id : point_ids(f)) {
    hid_t g = H5Gopen2(f, ("points/" + id).c_str(), H5P_DEFAULT);
    const std::string canonical = attr_string(g, "canonical");
    const std::string servers = canonical.substr(canonical.find(" ps_servers=") + 1, 12);
    const std::string key = scheme_of(canonical) + " " + servers;
    SCOPED_TRACE(key);
    ASSERT_TRUE(seen.count(key)) << "no PMPI count for this point";
    const auto& ranks = seen.at(key);
    ASSERT_EQ(ranks.size(), 3u);
    const double steps = static_cast<double>(attr_int(g, "comm.counted_steps"));
    EXPECT_EQ(steps, 12);
    double sent = 0, received = 0, sent_max = 0, sent_min = 1e300, received_max = 0;
    for (const auto& [rank, i] : ranks) {
      EXPECT_EQ(i.other, 0) << "rank " << rank << " made communication calls d500's count does not know";
      sent += i.sent / steps / 3, received += i.received / steps / 3;
      sent_max = std::max(sent_max, i.sent / steps), sent_min = std::min(sent_min, i.sent / steps);
      received_max = std::max(received_max, i.received / steps);
    }
    EXPECT_GT(sent, 0);
    // d500 rounds a ring's share down to whole bytes per call: less than a byte per call.
    const double tol = attr_double(g, "comm.calls_per_step") + 1e-9;
    EXPECT_NEAR(attr_double(g, "comm.bytes_sent_per_step"), sent, tol);
    EXPECT_NEAR(attr_double(g, "comm.bytes_received_per_step"), received, tol);
    EXPECT_NEAR(attr_double(g, "comm.bytes_sent_per_step_max"), sent_max, tol);
    EXPECT_NEAR(attr_double(g, "comm.bytes_sent_per_step_min"), sent_min, tol);
    EXPECT_NEAR(attr_double(g, "comm.bytes_received_per_step_max"), received_max, tol);
    H5Gclose(g);
  }
  H5Fclose(f);
}

// LibTorch's own executor overlaps too: hooks after its autograd's gradient accumulators start
// the buckets inside backward (a step's first communication row begins before its backward row
// ends), and on 2 workers the overlapped scheme's curve is the plain one's bit for bit (each
// element's sum of two is the same however the buffer is cut into buckets).
TEST_F(Distributed, LibTorchsAutogradStartsTheBucketsDuringBackwardOnThePlainCurve) {
  const d500::BackendInfo* b = d500::find_backend("libtorch-native");
  if (!b || !b->built)
    GTEST_SKIP() << "this build has no libtorch-native backend: " << (b ? b->not_built_reason : "unknown");
  const fs::path run = planned(
      kDistributedHead + "[fixed]\nworkload = \"distributed\"\nnetwork = \"lenet5\"\nbackend = \"libtorch-native\"\n" +
      data_lines() +
      "batch = 16\nsteps = 22\neval_interval_steps = 10\neval_samples = 200\noptimizer = \"momentum\"\nlr = 0.02\n"
      "checkpoint_interval = 0\nseed = 5\nranks_per_node = 2\nbucket_bytes = 16384\nhash_interval_steps = 5\n"
      "[axes]\nscheme = [\"allreduce\", \"allreduce-overlap\"]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  each_validated_point(f, 2, [&](hid_t g, const std::string& id, const std::string& canonical) {
    if (scheme_of(canonical) != "allreduce-overlap") return;
    EXPECT_NE(attr_string(g, "dist.overlap").find("during backward"), std::string::npos)
        << attr_string(g, "dist.overlap");
    std::map<std::pair<int, int>, std::pair<long long, long long>>
        step;  // (rank, rep) -> (backward end, first comm start)
    for (const auto& s : read_samples(f, id)) {
      if (s.warmup) continue;
      auto& v = step[{s.rank, s.rep}];
      if (s.phase == 3) v.first = s.end_ns;
      if (s.phase == 5 && (v.second == 0 || s.start_ns < v.second)) v.second = s.start_ns;
    }
    int in_backward = 0;
    for (const auto& [k, v] : step) in_backward += v.second > 0 && v.second < v.first;
    EXPECT_EQ(in_backward, 2 * 20) << "every timed step of both ranks starts a bucket inside backward";
  });
  H5Fclose(f);
  Cmd c = sh(curves_py(run / "results"));
  ASSERT_EQ(c.code, 0) << c.out;
  std::map<std::string, std::string> curve;
  std::istringstream lines(c.out);
  for (std::string line; std::getline(lines, line);)
    if (const auto bar = line.find(" | "); bar != std::string::npos) {
      std::string workload, scheme;
      std::istringstream(line) >> workload >> scheme;  // "workload scheme servers ranks | curve"
      curve[scheme] = line.substr(bar + 3);
    }
  ASSERT_EQ(curve.size(), 2u) << c.out;
  EXPECT_NE(curve.at("allreduce").find("20:"), std::string::npos) << curve.at("allreduce");
  EXPECT_EQ(curve.at("allreduce-overlap"), curve.at("allreduce"));
}
