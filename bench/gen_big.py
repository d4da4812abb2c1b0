"""Generate a large Parquet file of scored rows in chunks (bounded memory): id, score, label, day.

Scores are a realistic rare-event model: logit ~ N(-4, 1.5) (base rate about 3%), labels drawn
from the scores (so the scores are calibrated), 30 days. Written one row group per chunk with
pyarrow, so a 1e8-row file needs no more memory than one chunk.

    .venv/bin/python -m bench.gen_big --rows 10000000 -o /tmp/big.parquet
"""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.special import expit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--chunk", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    schema = pa.schema(
        [("id", pa.int64()), ("score", pa.float64()), ("label", pa.int8()), ("day", pa.int16())]
    )
    with pq.ParquetWriter(args.output, schema) as writer:
        for start in range(0, args.rows, args.chunk):
            n = min(args.chunk, args.rows - start)
            score = expit(rng.normal(-4.0, 1.5, n))
            table = pa.table(
                {
                    "id": np.arange(start, start + n, dtype=np.int64),
                    "score": score,
                    "label": (rng.random(n) < score).astype(np.int8),
                    "day": rng.integers(0, 30, n).astype(np.int16),
                },
                schema=schema,
            )
            writer.write_table(table, row_group_size=n)


if __name__ == "__main__":
    main()
