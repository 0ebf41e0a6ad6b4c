"""_optimize: `optimize` (better agent instructions from graded cases) and `align_judge` (better
judge criteria from human labels). It drives agents and evaluators from above and imports the
optimizer, `gepa` (the `judgehooks[optimize]` extra), on first use."""
