"""Teacher variants for choosing the embedded miniature (docs/miniature.md): pretrain each
LAYERS:STEPS:LR teacher of the embedded default's width on the tokens of a finished run, and print
its validation CE and wall time.

    python benchmarks/miniature_teachers.py results/data OUT 9:1000:3e-3 12:1000:3e-3
"""

import json
import sys
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer

from normgrow.data import TokenStore
from normgrow.teacher import check_teacher, pretrain_teacher, save_teacher

if __name__ == "__main__":
    data, out, *variants = sys.argv[1:]
    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(Path(data) / "tokenizer")
    train, valid = TokenStore(Path(data) / "tokens" / "train"), TokenStore(Path(data) / "tokens" / "valid")
    for variant in variants:
        layers, steps, lr = variant.split(":")
        spec = dict(hidden_size=128, num_hidden_layers=int(layers), num_attention_heads=4, num_key_value_heads=2,
                    head_dim=32, intermediate_size=384, max_position_embeddings=512, steps=int(steps), batch_size=16,
                    lr=float(lr), weight_decay=0.1, warmup_fraction=0.05)
        start = time.time()
        model = pretrain_teacher(spec, tokenizer, train, 0, 42, open("/dev/null", "w"))
        wall = time.time() - start
        report = check_teacher(model, tokenizer, train, valid, 0, 8, 0.5, 4096)
        save_teacher(model, tokenizer, Path(out) / f"teacher-L{layers}-s{steps}-lr{lr}")
        print(json.dumps({"layers": int(layers), "steps": int(steps), "lr": float(lr), "wall_s": round(wall, 1),
                          "validation_ce": report["validation_ce"]}), flush=True)
