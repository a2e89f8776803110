"""model: the paper's equations over the catalog's records: footprint, roofline, tiering, the memory
model, the regime map, the sweep, the paper's tables, decode kernels, and the typed Scenario the
planner consumes."""
