"""Where to keep track embeddings: insert and query time at 10k, 100k and 1M vectors.

Contenders, each fed the same unit vectors (Gaussian, normalised) and the same queries (a
stored vector plus noise, as a second sighting of one person is):

* ``sqlite-numpy``: vidpipe's store. Rows of the event store's ``tracks`` table inserted by
  ``vectors.insert_track`` in transactions of ``events.store.BATCH_MAX`` (WAL,
  ``synchronous=FULL``: the writer's real cost), then ``VectorIndex``: the first search
  loads the table (``load_s``), each later one follows it and scans exactly.
* ``usearch``: an HNSW index (``metric="cos"``, f32), added in the same batches; ``save_s``
  is what writing it to disk once costs (it keeps no log: a vector is durable only after a
  save). Recall@k against the exact answer.
* ``sqlite-vec``: a ``vec0`` table (``distance_metric=cosine``) in one SQLite file, same
  batches and pragmas, KNN by ``MATCH ... AND k = ?``. It needs a Python whose ``sqlite3``
  can load extensions (``--sqlite-vec-python``, e.g. Debian's ``/usr/bin/python3``, with
  ``--sqlite-vec-path`` holding the unpacked ``sqlite_vec`` wheel); it runs there, in a child.

    python -m benchmarks.vector_index --sizes 10000,100000,1000000 \
        --sqlite-vec-python /usr/bin/python3 --sqlite-vec-path /tmp/sqlvec \
        --json benchmarks/results/vector-index-2cpu.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from vidpipe.events.db import connect_writer
from vidpipe.events.store import BATCH_MAX
from vidpipe.events.vectors import VectorIndex, insert_track
from vidpipe.quantiles import quantile_of
from vidpipe.types import TrackSummary

#: The sqlite-vec child: stdlib only (the Python that can load extensions may lack numpy).
_SQLITE_VEC_CHILD = r"""
import json, sqlite3, sys, time
import sqlite_vec
data, queries, db, n, dim, k, batch = sys.argv[1:8]
n, dim, k, batch = int(n), int(dim), int(k), int(batch)
row = dim * 4
raw, qraw = open(data, "rb").read(), open(queries, "rb").read()
conn = sqlite3.connect(db, isolation_level=None)
conn.enable_load_extension(True)
sqlite_vec.load(conn)
conn.execute("PRAGMA journal_mode = WAL")
conn.execute("PRAGMA synchronous = FULL")
conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{dim}] distance_metric=cosine)")
t0 = time.perf_counter()
for start in range(0, n, batch):
    conn.execute("BEGIN IMMEDIATE")
    rows = [(i + 1, raw[i * row:(i + 1) * row]) for i in range(start, min(n, start + batch))]
    conn.executemany("INSERT INTO v (rowid, embedding) VALUES (?, ?)", rows)
    conn.execute("COMMIT")
insert_s = time.perf_counter() - t0
times, answers = [], []
for q in range(len(qraw) // row):
    t0 = time.perf_counter()
    got = conn.execute("SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance",
                       (qraw[q * row:(q + 1) * row], k)).fetchall()
    times.append(time.perf_counter() - t0)
    answers.append([r[0] - 1 for r in got])
print(json.dumps({"insert_s": insert_s, "query_s": times, "answers": answers}))
"""


def unit_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def summary(i: int, vec: np.ndarray) -> TrackSummary:
    t = 1.8e9 + i
    return TrackSummary("cam", i, t, i, i, 0, "person", t - 5, t, 8, vec, "reid")


def exact(data: np.ndarray, queries: np.ndarray, k: int) -> list[set[int]]:
    sims = queries @ data.T
    return [set(np.argpartition(-s, k)[:k].tolist()) for s in sims]


def recall(answers: list[list[int]], truth: list[set[int]]) -> float:
    return float(np.mean([len(set(a) & t) / len(t) for a, t in zip(answers, truth, strict=True)]))


def figures(name: str, n: int, query_s: list[float], **extra: Any) -> dict[str, Any]:
    ms = [t * 1000 for t in query_s]
    p50, p95 = quantile_of(ms, 0.5), quantile_of(ms, 0.95)
    out = {"contender": name, "n": n, **extra, "query_ms_p50": p50, "query_ms_p95": p95}
    if "insert_s" in out:
        out["insert_us_per_vector"] = out["insert_s"] / n * 1e6
    return out


def run_sqlite_numpy(data: np.ndarray, queries: np.ndarray, k: int, where: Path) -> dict:
    conn = connect_writer(where / "events.db")
    t0 = time.perf_counter()
    for start in range(0, len(data), BATCH_MAX):
        conn.execute("BEGIN IMMEDIATE")
        for i in range(start, min(len(data), start + BATCH_MAX)):
            insert_track(conn, summary(i, data[i]))
        conn.execute("COMMIT")
    insert_s = time.perf_counter() - t0
    index = VectorIndex()
    t0 = time.perf_counter()
    index.refresh(conn)
    load_s = time.perf_counter() - t0
    times, answers = [], []
    for q in queries:
        t0 = time.perf_counter()
        got = index.search(conn, q, model="reid", limit=k)
        times.append(time.perf_counter() - t0)
        answers.append([i - 1 for i, _ in got])  # row ids start at 1
    conn.close()
    size = (where / "events.db").stat().st_size
    extra = {"insert_s": insert_s, "load_s": load_s, "file_mb": size / 2**20}
    return {**figures("sqlite-numpy", len(data), times, **extra), "answers": answers}


def run_usearch(data: np.ndarray, queries: np.ndarray, k: int, where: Path) -> dict:
    # optional (pip install usearch): imported by name, so the checks run without it
    usearch = importlib.import_module("usearch.index")
    index = usearch.Index(ndim=data.shape[1], metric="cos", dtype="f32")
    t0 = time.perf_counter()
    for start in range(0, len(data), BATCH_MAX):
        stop = min(len(data), start + BATCH_MAX)
        index.add(np.arange(start, stop), data[start:stop])
    insert_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    index.save(str(where / "tracks.usearch"))
    save_s = time.perf_counter() - t0
    times, answers = [], []
    for q in queries:
        t0 = time.perf_counter()
        got = index.search(q, k)
        times.append(time.perf_counter() - t0)
        answers.append([int(x) for x in got.keys])
    extra = {"insert_s": insert_s, "save_s": save_s}
    return {**figures("usearch", len(data), times, **extra), "answers": answers}


def run_sqlite_vec(
    data: np.ndarray, queries: np.ndarray, k: int, where: Path, python: str, path: str
) -> dict:
    (where / "data.f32").write_bytes(data.astype("<f4").tobytes())
    (where / "queries.f32").write_bytes(queries.astype("<f4").tobytes())
    args = [str(where / "data.f32"), str(where / "queries.f32"), str(where / "vec.db")]
    args += [str(len(data)), str(data.shape[1]), str(k), str(BATCH_MAX)]
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.run(
        [python, "-c", _SQLITE_VEC_CHILD, *args], env=env, capture_output=True, check=True
    )
    got = json.loads(out.stdout)
    extra = {"insert_s": got["insert_s"]}
    return {**figures("sqlite-vec", len(data), got["query_s"], **extra), "answers": got["answers"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--contenders", default="sqlite-numpy,usearch,sqlite-vec")
    ap.add_argument("--sqlite-vec-python", default="/usr/bin/python3")
    ap.add_argument("--sqlite-vec-path", default="", help="folder holding the sqlite_vec package")
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for n in (int(s) for s in args.sizes.split(",")):
        data = unit_vectors(n, args.dim, seed=n)
        rng = np.random.default_rng(1)
        picked = rng.choice(n, args.queries, replace=False)
        queries = data[picked] + rng.standard_normal((args.queries, args.dim), np.float32) * 0.05
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        truth = exact(data, queries, args.k)
        for name in args.contenders.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                where = Path(tmp)
                if name == "sqlite-numpy":
                    row = run_sqlite_numpy(data, queries, args.k, where)
                elif name == "usearch":
                    row = run_usearch(data, queries, args.k, where)
                else:
                    py, path = args.sqlite_vec_python, args.sqlite_vec_path
                    row = run_sqlite_vec(data, queries, args.k, where, py, path)
            row["recall_at_k"] = recall(row.pop("answers"), truth)
            rows.append(row)
            print(json.dumps(row), flush=True)
    machine = {"cpus": os.cpu_count(), "cpu": platform.processor(), "python": sys.version}
    result = {"dim": args.dim, "k": args.k, "queries": args.queries, "machine": machine}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({**result, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
