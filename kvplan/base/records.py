"""`record` and `field`: the decorator of kvplan's frozen record classes and its field, attrs' own.

`record` is `attrs.frozen` (slotted, frozen, compared and hashed by field) and `field` is `attrs.field`;
the names stay so that a record reads as kvplan's kind of value, and mypy's attrs plugin types them.
"""

from __future__ import annotations

from attrs import field
from attrs import frozen as record

__all__ = ["field", "record"]
