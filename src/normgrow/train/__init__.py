"""Training a phase: the data path, the teacher, the distillation objective and its fused forward,
the trainer (a phase alone or a group on one teacher forward), evaluation, checkpoints and resume
states, the ranks (FSDP2), live tracking, the boundary diagnostics and the teacher's probe."""
