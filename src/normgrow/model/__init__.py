"""The model: the block-stack student, every placement's layer, the glue to the teacher's
`transformers` family, and the export. Imports torch and transformers (and, for the export,
safetensors and normgrow.design); the exported model's
remote code is these modules, copied (normgrow.model.export), so training and the export run one
definition."""
