"""The one table of diagnostic codes: every code with its stage, severity, title and docs page.

A literal table, as ruff's `codes.rs` is: the set of known codes does not depend
on which modules were imported. A code never changes meaning; retire a code
rather than reuse it. Ranges: KV0xx syntax, KV1xx meaning, KV2xx pinned choices
that break a design rule, KV3xx failed expectations and unmeetable constraints,
KV4xx emitted configs, KV9xx suppressions. Every code has a page under docs/rules/.
The front end, the planner and the engines name their codes from here.
"""

from __future__ import annotations

import enum
from typing import Mapping

from attrs import Factory

from kvplan.base.records import field, record


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 3, "warning": 2, "info": 1}[self.value]


class Stage(str, enum.Enum):
    """Which stage of the pipeline reports a code."""

    SYNTAX = "syntax"            # kvplan.lang.syntax
    MEANING = "meaning"          # kvplan.lang.check
    RULE = "rule"                # kvplan.planner.lint: a pinned choice against a design rule
    PLAN = "plan"                # kvplan.planner.lint: what the plan cannot meet
    CONFIG = "config"            # kvplan.app.digest: emitted engine configs
    SUPPRESSION = "suppression"  # kvplan.lang.lint


@record
class Code:
    """A table entry: what a code means, forever."""

    code: str
    name: str           # kebab-case, e.g. "unknown-model"
    stage: Stage
    severity: Severity  # the default; a finding may report a lower one
    title: str          # one line, used as SARIF shortDescription
    page: str = field(default=Factory(lambda self: f"docs/rules/{self.code}.md", takes_self=True))


E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO  # noqa: E741  (I: info, beside E and W)
SYNTAX, MEANING, RULE, PLAN, CONFIG, SUPPRESSION = Stage

CODES: Mapping[str, Code] = {c.code: c for c in (
    # KV0xx: the text does not follow the grammar (kvplan.lang.syntax)
    Code("KV001", "unreadable-file", SYNTAX, E, "The file cannot be read."),
    Code("KV002", "not-utf8", SYNTAX, E, "The file is not valid UTF-8 text."),
    Code("KV003", "syntax-error", SYNTAX, E, "The text does not follow the .kvp grammar."),
    Code("KV004", "unclosed-block", SYNTAX, E, "A `{` or `[` is never closed."),
    Code("KV005", "unclosed-string", SYNTAX, E, "A string has no closing quote on its line."),
    Code("KV006", "missing-equals", SYNTAX, E, "A key and its value are not joined by `=`."),
    Code("KV007", "missing-comma", SYNTAX, E, "Two list elements are not separated by a comma."),
    Code("KV008", "value-without-key", SYNTAX, E, "A value stands where a key should."),
    Code("KV009", "missing-value", SYNTAX, E, "A key has `=` but no value."),
    Code("KV010", "one-setting-per-line", SYNTAX, E, "Two settings share a line."),
    Code("KV011", "unquoted-name", SYNTAX, E, "A declaration's name is not a quoted string."),
    Code("KV012", "unknown-declaration", SYNTAX, E, "A top-level block is not `deployment`, `model` or `device`."),
    Code("KV013", "unmatched-brace", SYNTAX, E, "A `}` closes no block."),
    Code("KV014", "misplaced-unit", SYNTAX, E, "A unit stands before its number or after a key."),
    Code("KV015", "file-too-large", SYNTAX, E, "The file is larger than a spec can reasonably be."),
    Code("KV016", "bad-version", SYNTAX, E, "The `kvplan` version line is unsupported or misplaced."),
    Code("KV017", "empty-file", SYNTAX, E, "The file declares nothing: it is empty or holds only comments."),
    Code("KV018", "not-kvp", SYNTAX, E, "The file is JSON or YAML, not .kvp text."),
    Code("KV019", "control-character", SYNTAX, E,
         "A string holds a control, line-separator or bidirectional-formatting character."),
    # KV1xx: the text parses but means something kvplan cannot plan (kvplan.lang.check)
    Code("KV101", "unknown-key", MEANING, E, "A key this block does not know."),
    Code("KV102", "duplicate-key", MEANING, E, "A key or block given twice."),
    Code("KV103", "duplicate-name", MEANING, E, "Two declarations of one kind share a name."),
    Code("KV104", "missing-key", MEANING, E, "A required key or block is missing."),
    Code("KV105", "unknown-block", MEANING, E, "A nested block this place does not know."),
    Code("KV106", "wrong-dimension", MEANING, E, "A quantity of the wrong dimension (bytes for tokens)."),
    Code("KV107", "unknown-unit", MEANING, E, "A unit kvplan does not know."),
    Code("KV108", "out-of-range", MEANING, E, "A value outside the range its key admits."),
    Code("KV109", "not-an-integer", MEANING, E, "A fractional value where a whole number is needed."),
    Code("KV110", "unknown-value", MEANING, E, "A word that is not one of the key's choices."),
    Code("KV111", "unknown-model", MEANING, E, "A model that is neither in the catalog nor a model block."),
    Code("KV112", "unknown-device", MEANING, E, "A device that is neither in the catalog nor a device block."),
    Code("KV113", "wrong-kind-of-value", MEANING, E, "A value of the wrong kind (a word for a number, ...)."),
    Code("KV114", "list-not-allowed", MEANING, E, "A list outside `workload`, where lists expand."),
    Code("KV115", "wrong-operator", MEANING, E, "A comparison or `=` that this key does not take."),
    Code("KV116", "unknown-metric", MEANING, E, "An `expect` assertion on a metric the plan has not."),
    Code("KV117", "prefix-exceeds-context", MEANING, E, "A shared prefix longer than the context."),
    Code("KV118", "too-many-scenarios", MEANING, E, "Workload lists expand into too many scenarios."),
    Code("KV119", "config-error", MEANING, E, "A model block's config.json or a deployment's calibration profile "
                                              "cannot be read."),
    Code("KV120", "conflicting-settings", MEANING, W, "Two settings that contradict each other."),
    Code("KV121", "unknown-link", MEANING, E, "A link id that is not in the catalog."),
    Code("KV122", "link-not-in-catalog", MEANING, W, "A link bandwidth no catalog link has; tiering cannot use it."),
    Code("KV123", "fanout-exceeds-batch", MEANING, W, "More requests share a prefix than run at once."),
    Code("KV124", "no-effect", MEANING, W, "A setting that changes nothing in this deployment."),
    Code("KV125", "ambiguous-unit", MEANING, W, "A token count in `K`, which kvplan reads as 1000 and vLLM as 1024."),
    Code("KV126", "context-exceeds-model-limit", MEANING, E,
         "A context beyond the model's own max_position_embeddings (with its rope scaling)."),
    # KV2xx: a pinned choice breaks a design rule, one code per rule R1-R8 (kvplan.planner.lint)
    Code("KV201", "regime-not-asserted", RULE, I,
         "R1: the spec does not assert its regime, so a change that moves it goes unnoticed"),
    Code("KV202", "lossless-domain-disabled", RULE, W,
         "R2: a pin turns off a lossless domain (paging or prefix caching)"),
    Code("KV203", "compressed-below-s-star", RULE, W,
         "R3: KV compressed in the weight-bound regime, where it barely helps"),
    Code("KV204", "evicts-before-quantizing", RULE, W,
         "R4: tokens evicted while the KV is still 16-bit; quantize first"),
    Code("KV205", "eviction-not-tolerated", RULE, E,
         "R5: eviction where the workload forbids it, or retention below 0.5"),
    Code("KV206", "remote-tier-in-step", RULE, E,
         "R6: KV that does not fit in device memory would be read from a remote tier inside a step"),
    Code("KV207", "pinned-pages-multi-die", RULE, E, "R7: pages pinned to one partition of a multi-die device"),
    Code("KV208", "compression-past-regime", RULE, W,
         "R8: after the pinned quantization the point is weight-bound, yet eviction is pinned too"),
    # KV3xx: failed expectations and unmeetable constraints (kvplan.planner.lint)
    Code("KV301", "does-not-fit", PLAN, E, "the deployment does not fit on any allowed device count"),
    Code("KV302", "step-time-slo-unmet", PLAN, E, "no admissible plan meets the step-time SLO"),
    Code("KV303", "throughput-slo-unmet", PLAN, E, "no admissible plan meets the throughput SLO"),
    Code("KV304", "expectation-failed", PLAN, E, "an `expect` assertion is false for the plan"),
    Code("KV305", "pin-unsupported", PLAN, E, "a pinned choice the engine or the quality budget does not admit"),
    Code("KV306", "ttft-slo-unmet", PLAN, E, "no admissible plan meets the time-to-first-token SLO"),
    # KV4xx: emitted engine configs (kvplan.app.digest)
    Code("KV401", "stale-config", CONFIG, E,
         "an emitted engine config was made from a plan that the spec no longer produces"),
    # KV9xx: suppression comments (kvplan.lang.lint)
    Code("KV901", "unused-suppression", SUPPRESSION, W, "A suppression comment that silences nothing."),
    Code("KV902", "suppression-without-reason", SUPPRESSION, W, "A suppression comment that gives no reason."),
    Code("KV903", "unknown-code-in-suppression", SUPPRESSION, W, "A suppression names a code kvplan does not have."),
)}


def _known(code: str) -> str:
    """`code`, which must be in the table (a misspelt constant fails at import)."""
    return CODES[code].code


# Names the front end and the engines report by (the planner names its KV2xx and KV3xx by number).
UNREADABLE_FILE = _known("KV001")
NOT_UTF8 = _known("KV002")
SYNTAX_ERROR = _known("KV003")
UNCLOSED_BLOCK = _known("KV004")
UNCLOSED_STRING = _known("KV005")
MISSING_EQUALS = _known("KV006")
MISSING_COMMA = _known("KV007")
VALUE_WITHOUT_KEY = _known("KV008")
MISSING_VALUE = _known("KV009")
ONE_SETTING_PER_LINE = _known("KV010")
UNQUOTED_NAME = _known("KV011")
UNKNOWN_DECLARATION = _known("KV012")
UNMATCHED_BRACE = _known("KV013")
MISPLACED_UNIT = _known("KV014")
FILE_TOO_LARGE = _known("KV015")
BAD_VERSION = _known("KV016")
EMPTY_FILE = _known("KV017")
NOT_KVP = _known("KV018")
CONTROL_CHARACTER = _known("KV019")
UNKNOWN_KEY = _known("KV101")
DUPLICATE_KEY = _known("KV102")
DUPLICATE_NAME = _known("KV103")
MISSING_KEY = _known("KV104")
UNKNOWN_BLOCK = _known("KV105")
WRONG_DIMENSION = _known("KV106")
UNKNOWN_UNIT = _known("KV107")
OUT_OF_RANGE = _known("KV108")
NOT_AN_INTEGER = _known("KV109")
UNKNOWN_VALUE = _known("KV110")
UNKNOWN_MODEL = _known("KV111")
UNKNOWN_DEVICE = _known("KV112")
WRONG_KIND = _known("KV113")
LIST_NOT_ALLOWED = _known("KV114")
WRONG_OPERATOR = _known("KV115")
UNKNOWN_METRIC = _known("KV116")
PREFIX_EXCEEDS_CONTEXT = _known("KV117")
TOO_MANY_SCENARIOS = _known("KV118")
CONFIG_ERROR = _known("KV119")
CONFLICTING_SETTINGS = _known("KV120")
UNKNOWN_LINK = _known("KV121")
LINK_NOT_IN_CATALOG = _known("KV122")
FANOUT_EXCEEDS_BATCH = _known("KV123")
NO_EFFECT = _known("KV124")
AMBIGUOUS_UNIT = _known("KV125")
CONTEXT_EXCEEDS_MODEL = _known("KV126")
STALE_CONFIG = _known("KV401")
# suppressions (emitted by kvplan.lang.lint)
UNUSED_SUPPRESSION = _known("KV901")
SUPPRESSION_WITHOUT_REASON = _known("KV902")
UNKNOWN_SUPPRESSED_CODE = _known("KV903")
