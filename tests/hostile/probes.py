"""What the hostile tests share: hypothesis settings, arbitrary JSON, and the store's state."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from store.audit_models import AuditEvent
from store.models import ApprovalRequest, Decision, Run

HOSTILE_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)


def snapshot(h):  # type: ignore[no-untyped-def]
    """Everything a request could change except the audit of refused attempts, read once the
    bot has finished what earlier requests handed it."""
    assert h.bot.settle(timeout=60), "the bot did not finish its work"
    with h.bot.db.transaction() as s:
        return (
            s.scalar(select(func.count()).select_from(Run)),
            s.scalar(select(func.count()).select_from(Decision)),
            tuple(s.scalars(select(ApprovalRequest.status))),
            s.scalar(
                select(func.count()).select_from(AuditEvent).where(AuditEvent.outcome != "refused")
            ),
        )
