"""Decode-kernel settings a plan implies (FlashInfer's wrapper, split-KV counts): below the planner, so
that a plan carries its kernel payload and the renderers and the FlashInfer emit target only write it out."""
