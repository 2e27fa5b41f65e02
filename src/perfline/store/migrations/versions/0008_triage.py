"""triage: a regression's triage state, owner and due date, and its history

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 17:15:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('regressions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('triage', sa.String(length=16), server_default='untriaged', nullable=False))
        batch_op.add_column(sa.Column('owner', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('due', sa.Date(), nullable=True))
    op.create_table('regression_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('regression_id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('who', sa.String(length=200), nullable=False),
    sa.Column('field', sa.String(length=16), nullable=False),
    sa.Column('old', sa.Text(), nullable=True),
    sa.Column('new', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['regression_id'], ['regressions.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('regression_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_regression_events_regression_id'), ['regression_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('regression_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_regression_events_regression_id'))
    op.drop_table('regression_events')
    with op.batch_alter_table('regressions', schema=None) as batch_op:
        batch_op.drop_column('due')
        batch_op.drop_column('owner')
        batch_op.drop_column('triage')
