"""kvplan: plan the KV cache of long-context LLM serving before buying GPUs."""

__version__ = "0.1.0"
