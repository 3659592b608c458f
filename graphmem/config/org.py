"""Sections for sharing and runs: org write rules and run limits."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)

# ---------------------------------------------------------------------------------------
# organisation memory

SENIORITY_LEVELS: tuple[str, ...] = ("junior", "mid", "senior", "lead")
HUMAN = "human"


class WriteRule(BaseModel):
    """Who may publish or retract facts of one category.

    ``min_seniority``: the lowest agent seniority allowed (``None``: no agent may);
    ``min_autonomy``: the lowest agent autonomy level allowed; ``humans``: whether humans may.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    min_seniority: str | None = "senior"
    min_autonomy: int = Field(default=0, ge=0, le=5)
    humans: bool = True


DEFAULT_RULE = WriteRule(min_seniority="mid")
DEFAULT_CORE_RULE = WriteRule(min_seniority="lead")
DEFAULT_WRITE_RULES: dict[str, WriteRule] = {
    "policy": WriteRule(min_seniority="senior"),
    "adr": WriteRule(min_seniority="senior"),
    "security": WriteRule(min_seniority="lead"),
    "procedure": WriteRule(min_seniority="mid"),
    "convention": WriteRule(min_seniority="mid"),
}


class OrgConfig(BaseModel):
    """Org memory settings: write rules per category, the rule for the fallback category and
    for core facts, the seniority ladder, and the configured core policies (texts that head
    every ``context()``; they are not stored and cannot be retracted)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    rules: dict[str, WriteRule] = Field(default_factory=lambda: dict(DEFAULT_WRITE_RULES))
    default_rule: WriteRule = DEFAULT_RULE
    core_rule: WriteRule = DEFAULT_CORE_RULE
    seniority_levels: tuple[str, ...] = SENIORITY_LEVELS
    core_policies: tuple[str, ...] = ()

    @field_validator("seniority_levels")
    @classmethod
    def _levels(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or len(set(v)) != len(v) or HUMAN in v:
            raise ValueError("seniority_levels must be distinct, non-empty, without 'human'")
        return v

    @field_validator("core_policies", mode="before")
    @classmethod
    def _policies(cls, v: object) -> tuple[str, ...]:
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list | tuple) or not all(isinstance(p, str) and p.strip() for p in v):
            raise ValueError("core policies must be a list of non-empty strings")
        return tuple(v)

    def rule_for(self, category: str) -> WriteRule:
        return self.rules.get(category, self.default_rule)


# ---------------------------------------------------------------------------------------
# runs


class RunLimits(BaseModel):
    """Session limits (the seed's defaults); ``None`` means unlimited. Over a limit, the
    oldest ``archive_fraction`` (at least the excess) is archived."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    max_runs: int | None = Field(default=1000, ge=1)
    max_events_per_run: int | None = Field(default=500, ge=1)
    archive_fraction: float = Field(default=0.1, gt=0.0, le=1.0)
    #: ``fraction``: over a limit, archive the oldest ``archive_fraction`` at once;
    #: ``oldest``: archive just the excess, oldest first (one per append at the limit)
    eviction: Literal["fraction", "oldest"] = "fraction"

    def evict(self, n: int, limit: int) -> int:
        """How many of ``n`` (over ``limit``) go."""
        if self.eviction == "oldest":
            return n - limit
        return max(n - limit, math.ceil(n * self.archive_fraction))
