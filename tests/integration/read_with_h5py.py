#!/usr/bin/python3
"""Reads a d500 run's results with h5py and pandas only, following hdf5-schema/README.md.

Prints, per point, the number of timed repetitions and the median cost (max over ranks per
repetition) as CSV, so a test can compare it with d500's own report. Usage: RUN_DIR
"""
import glob
import os
import re
import sys

import h5py
import pandas as pd


SCHEMA_DOC = os.path.join(os.path.dirname(__file__), "..", "..", "hdf5-schema", "README.md")


def documented(section):
    """The attributes of one of the schema doc's tables: {name: meaning} for every `name` in the
    first column of the table under the heading that starts with `section`."""
    text = open(SCHEMA_DOC).read()
    body = text[text.index("\n## " + section):]
    body = body[: body.find("\n## ", 4)]
    rows = {}
    started = False
    for line in body.splitlines():
        if not line.startswith("|"):
            if started:
                break  # the first table only: the attributes, not the datasets after them
            continue
        started = True
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1] not in ("type", "---"):
            for name in re.findall(r"`([^`]+)`", cells[0]):
                rows[name] = cells[2]
    return rows


def check_against_doc(f):
    """The doc's root table and point table against a real file: the version it states is the
    file's, and every attribute it lists without saying it may be absent is there."""
    root = documented("Root group `/`")
    assert f"`{int(f.attrs['schema_version'])}`" in root["schema_version"].split(" ")[0], \
        f"the schema doc says schema_version {root['schema_version'].split(' ')[0]}, the file has {f.attrs['schema_version']}"
    optional = re.compile(r"optional|absent|since version|only|where|when", re.I)
    for name, meaning in root.items():
        if not optional.search(meaning) and "<" not in name and "/" not in name:
            assert name in f.attrs, f"root attribute {name} is documented but not in the file"
    point = documented("One group per point")
    for pid, g in f["points"].items():
        for name, meaning in point.items():
            if not optional.search(meaning) and "<" not in name and "." not in name and "/" not in name:
                assert name in g.attrs, f"point attribute {name} is documented but not in {pid}"


def samples_of(path):
    frames = []
    with h5py.File(path, "r") as f:
        assert f.attrs["schema"] == "d500-results", path
        check_against_doc(f)
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
