"""Renderers: take a finished result and return text; they compute nothing new."""
