"""The whole schema on one metadata: importing this module registers every model of the store,
wherever its module is, so Alembic compares against all tables and not just those some import
happened to load."""

from __future__ import annotations

from sqlalchemy import MetaData

from store import audit_models, control_models, display_models, inbox_models
from store.models import Base

MODEL_MODULES = (audit_models, control_models, display_models, inbox_models)
"""The modules whose models sit on ``Base`` beside those of ``store.models``."""

metadata: MetaData = Base.metadata
