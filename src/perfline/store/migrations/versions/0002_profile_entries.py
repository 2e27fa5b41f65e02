"""profile entries

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 03:12:45.357005
"""

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('profile_entries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('repetition', sa.Integer(), nullable=False),
    sa.Column('symbol', sa.Text(), nullable=False),
    sa.Column('dso', sa.Text(), nullable=False),
    sa.Column('kernel', sa.Boolean(), nullable=False),
    sa.Column('share_pct', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('profile_entries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_profile_entries_run_id'), ['run_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('profile_entries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_profile_entries_run_id'))

    op.drop_table('profile_entries')
