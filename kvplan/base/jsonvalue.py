"""The type of a value that really is arbitrary JSON (a digest's canonical form, a payload)."""

from __future__ import annotations

from typing import Union

#: Any JSON document: what `json.dumps` writes and `json.loads` reads back.
JSONValue = Union[None, bool, int, float, str, list["JSONValue"], dict[str, "JSONValue"]]
