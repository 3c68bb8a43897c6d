"""Planning and starting a cluster run: the resource plan (parameters, memory, tokens), the memory
trace that checks it, the SLURM pre-flight, and how a training job starts its ranks. `plan` and
`preflight` import neither torch nor transformers."""
