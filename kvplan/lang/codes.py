"""Diagnostic codes of the .kvp front end: KV0xx syntax, KV1xx meaning, KV9xx suppressions.

A code never changes meaning; retire a code rather than reuse it. Each has a
page under docs/rules/.
"""

from __future__ import annotations

from kvplan.diagnostics import Severity, register

E, W = Severity.ERROR, Severity.WARNING

# ----------------------------------------------------------------- syntax
UNREADABLE_FILE = register("KV001", "unreadable-file", "The file cannot be read.", E).code
NOT_UTF8 = register("KV002", "not-utf8", "The file is not valid UTF-8 text.", E).code
SYNTAX_ERROR = register("KV003", "syntax-error", "The text does not follow the .kvp grammar.", E).code
UNCLOSED_BLOCK = register("KV004", "unclosed-block", "A `{` or `[` is never closed.", E).code
UNCLOSED_STRING = register("KV005", "unclosed-string", "A string has no closing quote on its line.", E).code
MISSING_EQUALS = register("KV006", "missing-equals", "A key and its value are not joined by `=`.", E).code
MISSING_COMMA = register("KV007", "missing-comma", "Two list elements are not separated by a comma.", E).code
VALUE_WITHOUT_KEY = register("KV008", "value-without-key", "A value stands where a key should.", E).code
MISSING_VALUE = register("KV009", "missing-value", "A key has `=` but no value.", E).code
ONE_SETTING_PER_LINE = register("KV010", "one-setting-per-line", "Two settings share a line.", E).code
UNQUOTED_NAME = register("KV011", "unquoted-name", "A declaration's name is not a quoted string.", E).code
UNKNOWN_DECLARATION = register("KV012", "unknown-declaration",
                               "A top-level block is not `deployment`, `model` or `device`.", E).code
UNMATCHED_BRACE = register("KV013", "unmatched-brace", "A `}` closes no block.", E).code
MISPLACED_UNIT = register("KV014", "misplaced-unit", "A unit stands before its number or after a key.", E).code
FILE_TOO_LARGE = register("KV015", "file-too-large", "The file is larger than a spec can reasonably be.", E).code
BAD_VERSION = register("KV016", "bad-version", "The `kvplan` version line is unsupported or misplaced.", E).code
EMPTY_FILE = register("KV017", "empty-file", "The file declares nothing: it is empty or holds only comments.", E).code
NOT_KVP = register("KV018", "not-kvp", "The file is JSON or YAML, not .kvp text.", E).code

# ---------------------------------------------------------------- meaning
UNKNOWN_KEY = register("KV101", "unknown-key", "A key this block does not know.", E).code
DUPLICATE_KEY = register("KV102", "duplicate-key", "A key or block given twice.", E).code
DUPLICATE_NAME = register("KV103", "duplicate-name", "Two declarations of one kind share a name.", E).code
MISSING_KEY = register("KV104", "missing-key", "A required key or block is missing.", E).code
UNKNOWN_BLOCK = register("KV105", "unknown-block", "A nested block this place does not know.", E).code
WRONG_DIMENSION = register("KV106", "wrong-dimension", "A quantity of the wrong dimension (bytes for tokens).", E).code
UNKNOWN_UNIT = register("KV107", "unknown-unit", "A unit kvplan does not know.", E).code
OUT_OF_RANGE = register("KV108", "out-of-range", "A value outside the range its key admits.", E).code
NOT_AN_INTEGER = register("KV109", "not-an-integer", "A fractional value where a whole number is needed.", E).code
UNKNOWN_VALUE = register("KV110", "unknown-value", "A word that is not one of the key's choices.", E).code
UNKNOWN_MODEL = register("KV111", "unknown-model", "A model that is neither in the catalog nor a model block.", E).code
UNKNOWN_DEVICE = register("KV112", "unknown-device",
                          "A device that is neither in the catalog nor a device block.", E).code
WRONG_KIND = register("KV113", "wrong-kind-of-value", "A value of the wrong kind (a word for a number, ...).", E).code
LIST_NOT_ALLOWED = register("KV114", "list-not-allowed", "A list outside `workload`, where lists expand.", E).code
WRONG_OPERATOR = register("KV115", "wrong-operator", "A comparison or `=` that this key does not take.", E).code
UNKNOWN_METRIC = register("KV116", "unknown-metric", "An `expect` assertion on a metric the plan has not.", E).code
PREFIX_EXCEEDS_CONTEXT = register("KV117", "prefix-exceeds-context",
                                  "A shared prefix longer than the context.", E).code
TOO_MANY_SCENARIOS = register("KV118", "too-many-scenarios", "Workload lists expand into too many scenarios.", E).code
CONFIG_ERROR = register("KV119", "config-error", "A model block's config.json cannot be read.", E).code
CONFLICTING_SETTINGS = register("KV120", "conflicting-settings", "Two settings that contradict each other.", W).code
UNKNOWN_LINK = register("KV121", "unknown-link", "A link id that is not in the catalog.", E).code
LINK_NOT_IN_CATALOG = register("KV122", "link-not-in-catalog",
                               "A link bandwidth no catalog link has; tiering cannot use it.", W).code
FANOUT_EXCEEDS_BATCH = register("KV123", "fanout-exceeds-batch",
                                "More requests share a prefix than run at once.", W).code
NO_EFFECT = register("KV124", "no-effect", "A setting that changes nothing in this deployment.", W).code
AMBIGUOUS_UNIT = register("KV125", "ambiguous-unit",
                          "A token count in `K`, which kvplan reads as 1000 and vLLM as 1024.", W).code

# ----------------------------------------------------------- suppressions (emitted by kvplan.lint)
UNUSED_SUPPRESSION = register("KV901", "unused-suppression", "A suppression comment that silences nothing.", W).code
SUPPRESSION_WITHOUT_REASON = register("KV902", "suppression-without-reason",
                                      "A suppression comment that gives no reason.", W).code
UNKNOWN_SUPPRESSED_CODE = register("KV903", "unknown-code-in-suppression",
                                   "A suppression names a code kvplan does not have.", W).code
