"""Page 1 · Address translation: the seed article's example and the shared sizes every lesson starts from.

The article's example: block_size 4, block_table [7, 2, 9]; token 5 -> logical block 1, physical block 2, offset 1.
"""

from __future__ import annotations

import torch

SEED_BLOCK_SIZE = 4
SEED_NUM_BLOCKS = 12
SEED_BLOCK_TABLE = (7, 2, 9)
SEED_TOKEN_INDEX = 5
SEED_BATCH = (((7, 2, 9), 10), ((4, 1), 6), ((8, 5, 3, 6), 15))  # (block_table, context_len) of A, B, C

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def dtype_of(name: str) -> torch.dtype:
    """torch dtype for "float32" / "float16" / "bfloat16" (ValueError otherwise)."""
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {name!r}")
    return DTYPES[name]
