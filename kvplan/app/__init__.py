"""The commands' core: a request in, a result out.

This layer sits above the planner, the engines and the renderers and below the
click wiring. It is where a command may both plan and write: each engine target
written from the plan made for its engine, `kvplan import` (which plans the spec it
writes), and the stale-config check (which replans a digest's spec).
"""
