"""base: what every layer uses and that imports nothing of kvplan above it: errors with spans, units,
numbers with their evidence, diagnostics and the one table of codes, input limits, the safe file
reader and the output-tree writer."""
