"""commit facts: each tracked commit's subject, author and date, kept in the store

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 22:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('commits',
    sa.Column('sha', sa.String(length=64), nullable=False),
    sa.Column('subject', sa.Text(), nullable=False),
    sa.Column('author', sa.Text(), nullable=False),
    sa.Column('date', sa.String(length=40), nullable=True),
    sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('sha')
    )


def downgrade() -> None:
    op.drop_table('commits')
