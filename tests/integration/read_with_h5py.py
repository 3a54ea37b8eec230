#!/usr/bin/python3
"""Reads a d500 run's results with h5py and pandas only, following hdf5-schema/README.md.

Prints, per point, the number of timed repetitions and the median cost (max over ranks per
repetition) as CSV, so a test can compare it with d500's own report. Usage: RUN_DIR
"""
import glob
import sys

import h5py
import pandas as pd


def samples_of(path):
    frames = []
    with h5py.File(path, "r") as f:
        assert f.attrs["schema"] == "d500-results", path
        ranks = int(f.attrs["ranks"])
        # Schema 2: a sample's phase indexes phase_names; version-1 files had only whole repetitions.
        phases = f.attrs["phase_names"].split(",") if "phase_names" in f.attrs else ["op"]
        hosts = [h.decode() for h in f["env/hosts"][()]]
        assert len(hosts) == ranks
        for pid, g in f["points"].items():
            df = pd.DataFrame(g["samples"][()])
            if "phase" not in df.columns:
                df["phase"] = 0
            df["phase"] = [phases[i] for i in df["phase"]]
            df["point_id"] = pid
            df["ranks"] = ranks
            for k, v in g.attrs.items():
                if k.startswith("param."):
                    df[k[len("param."):]] = v
            frames.append(df)
    return frames


def main(run_dir):
    frames = []
    for path in sorted(glob.glob(run_dir + "/results/*.h5")):
        frames += samples_of(path)
    s = pd.concat(frames, ignore_index=True)
    # Samples joined with point parameters: every row knows its workload and backend.
    assert {"workload", "backend", "seed", "rank", "rep", "warmup", "phase"} <= set(s.columns)
    s["seconds"] = (s.end_ns - s.start_ns) * 1e-9
    timed = s[(s.warmup == 0) & (s.phase == "op")]
    per_rep = timed.groupby(["point_id", "rep"]).agg(seconds=("seconds", "max"), seen=("rank", "nunique"),
                                                      ranks=("ranks", "first"))
    per_rep = per_rep[per_rep.seen == per_rep.ranks]
    out = per_rep.groupby("point_id").seconds.agg(["count", "median"])
    print("point_id,n,median_s")
    for pid, row in out.iterrows():
        print(f"{pid},{int(row['count'])},{row['median']:.9g}")


if __name__ == "__main__":
    main(sys.argv[1])
