"""profile chains: each profiled repetition's top call chains

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 09:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('profile_chains',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('repetition', sa.Integer(), nullable=False),
    sa.Column('stack', sa.Text(), nullable=False),
    sa.Column('dso', sa.Text(), nullable=False),
    sa.Column('share_pct', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('profile_chains', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_profile_chains_run_id'), ['run_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('profile_chains', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_profile_chains_run_id'))

    op.drop_table('profile_chains')
