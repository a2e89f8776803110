"""Programs kvplan ships as package data and writes out with a plan's settings (`kvplan emit`): each module is
standalone (the standard library at import, its GPU packages inside the functions that need them) and never
imports kvplan, so the emitted copy runs where only those packages are installed."""
