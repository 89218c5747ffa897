"""Rule chains in the metadata, with an audit history (Druid's ``rules`` table and its
``AuditEntry`` rows).

Partition ``_rules`` holds a ``rule_chain`` row per datasource (and one for ``_default`` once
set) with the chain's JSON and revision, and a ``rule_audit`` row per change: who, when, why,
the old chain and the new one. A change and its audit row are ONE commit, so the history
never misses a change, and two concurrent changes become two revisions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow.compute as pc

from segmentlake.core.retention_rules import (
    DEFAULT_RULES,
    DEFAULT_RULES_KEY,
    Rule,
    rules_from_json,
    rules_to_json,
)
from segmentlake.core.spec_reader import safe_repr
from segmentlake.errors import SpecError
from segmentlake.metadata.records import metadata_row
from segmentlake.metadata.scope import Scope
from segmentlake.metadata.store import Change, MetadataStore, PartitionState, now_ms
from segmentlake.metadata.transaction import Decision, RetryPolicy, transact

__all__ = ["RULES", "RuleAudit", "all_rules", "rule_history", "rules_of", "set_rules"]

RULES = "_rules"
CHAIN = "rule_chain"
AUDIT = "rule_audit"


@dataclass(frozen=True, slots=True)
class RuleAudit:
    """One change of a datasource's rules: revision, who, why, when, old and new chain
    (``old`` is None for the first change)."""

    datasource: str
    revision: int
    author: str
    comment: str
    at_ms: int
    old: tuple[Rule, ...] | None
    new: tuple[Rule, ...]


def set_rules(
    store: MetadataStore,
    datasource: str,
    rules: Sequence[Rule] | Sequence[Mapping[str, Any]] | str,
    *,
    author: str = "",
    comment: str = "",
    policy: RetryPolicy | None = None,
) -> int:
    """Replace ``datasource``'s chain with ``rules`` and audit it in one commit; returns the
    new revision."""
    _check_name(datasource)
    for name, value in (("author", author), ("comment", comment)):
        if not isinstance(value, str):
            raise SpecError(f"set_rules {name} must be a string, got {safe_repr(value)}")
    chain = rules_from_json(rules)
    new_json = rules_to_json(chain)

    def decide(state: PartitionState) -> Decision[int]:
        current = [r for r in state.of(CHAIN) if r["id"] == datasource]
        old_json = orjson.loads(current[0]["payload"]) if current else None
        revision = (current[0]["seq"] if current else 0) + 1
        at = now_ms()
        chain_row = metadata_row(
            RULES, CHAIN, datasource, at, seq=revision, payload=orjson.dumps(new_json).decode()
        )
        audit = {
            "datasource": datasource,
            "author": author,
            "comment": comment,
            "at_ms": at,
            "old": old_json,
            "new": new_json,
        }
        audit_row = metadata_row(
            RULES,
            AUDIT,
            f"{datasource}:{revision:010d}",
            at,
            seq=revision,
            payload=orjson.dumps(audit).decode(),
        )
        return Decision([Change("upsert", chain_row), Change("insert", audit_row)], revision)

    # The decision reads the datasource's chain row only: changes of other datasources'
    # rules, committing meanwhile in the same partition, are no reason to decide again.
    return transact(
        store,
        RULES,
        decide,
        operation="set_rules",
        condition=(pc.field("kind") == CHAIN) & (pc.field("id") == datasource),
        scope=Scope.of(keys=[f"{CHAIN}:{datasource}"]),
        policy=policy,
    )


def rules_of(store: MetadataStore, datasource: str) -> tuple[Rule, ...]:
    """``datasource``'s chain (``()`` if never set; the default chain: Druid's
    ``loadForever`` with 2 replicas in ``_default_tier`` until set)."""
    rows = store.rows(RULES, (pc.field("kind") == CHAIN) & (pc.field("id") == datasource))
    if not rows:
        return DEFAULT_RULES if datasource == DEFAULT_RULES_KEY else ()
    return rules_from_json(orjson.loads(rows[0]["payload"]))


def all_rules(store: MetadataStore) -> dict[str, tuple[Rule, ...]]:
    """Every stored chain by datasource, with the default chain under ``_default``."""
    rows = store.rows(RULES, pc.field("kind") == CHAIN)
    chains = {r["id"]: rules_from_json(orjson.loads(r["payload"])) for r in rows}
    chains.setdefault(DEFAULT_RULES_KEY, DEFAULT_RULES)
    return chains


def rule_history(
    store: MetadataStore, datasource: str | None = None, *, limit: int | None = None
) -> list[RuleAudit]:
    """The audit trail (of ``datasource``), newest first."""
    condition = pc.field("kind") == AUDIT
    rows = store.rows(RULES, condition)
    entries = []
    for row in rows:
        data = orjson.loads(row["payload"])
        if datasource is not None and data["datasource"] != datasource:
            continue
        entries.append(
            RuleAudit(
                datasource=data["datasource"],
                revision=int(row["seq"]),
                author=data["author"],
                comment=data["comment"],
                at_ms=int(data["at_ms"]),
                old=None if data["old"] is None else rules_from_json(data["old"]),
                new=rules_from_json(data["new"]),
            )
        )
    entries.sort(key=lambda e: (e.at_ms, e.revision), reverse=True)
    return entries[:limit] if limit is not None else entries


def _check_name(datasource: str) -> None:
    if not isinstance(datasource, str) or not datasource:
        raise SpecError(f"rules need a datasource name, got {datasource!r}")
    if datasource.startswith("_") and datasource != DEFAULT_RULES_KEY:
        raise SpecError(
            f"{datasource!r} is a reserved name; name a datasource, or {DEFAULT_RULES_KEY!r} "
            "for the default chain"
        )
