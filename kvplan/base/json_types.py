"""Named types for parsed documents, so that data read from JSON, TOML or YAML is typed
as what the parser can return instead of `Any`.

`JSONValue` is what `json.loads` returns (and what a JSON writer accepts): strings, numbers,
booleans, null, lists and string-keyed objects, nested. `ConfigValue` is what `tomllib` and
YAML's `safe_load` return for a configuration document: the JSON shapes plus dates and times
(`datetime.datetime` is a `datetime.date`). Narrow with `isinstance` before use; a function
that only reads takes `Mapping[str, ...]` so that a plain dict of narrower values is accepted.
"""

from __future__ import annotations

import datetime
from typing import TypeAlias, Union

JSONScalar: TypeAlias = Union[str, int, float, bool, None]
JSONValue: TypeAlias = Union[JSONScalar, list["JSONValue"], dict[str, "JSONValue"]]
JSONObject: TypeAlias = dict[str, JSONValue]

ConfigScalar: TypeAlias = Union[JSONScalar, datetime.date, datetime.time]
ConfigValue: TypeAlias = Union[ConfigScalar, list["ConfigValue"], dict[str, "ConfigValue"]]
ConfigTable: TypeAlias = dict[str, ConfigValue]

__all__ = ["ConfigScalar", "ConfigTable", "ConfigValue", "JSONObject", "JSONScalar", "JSONValue"]
