"""regressions

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 03:41:30.236447
"""

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('regressions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('metric', sa.String(length=200), nullable=False),
    sa.Column('benchmark', sa.String(length=100), nullable=False),
    sa.Column('case_key', sa.Text(), nullable=False),
    sa.Column('machine_id', sa.String(length=64), nullable=False),
    sa.Column('before_run_id', sa.Integer(), nullable=False),
    sa.Column('after_run_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('change_pct', sa.Float(), nullable=False),
    sa.Column('ci_low_pct', sa.Float(), nullable=False),
    sa.Column('ci_high_pct', sa.Float(), nullable=False),
    sa.Column('strength', sa.Float(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('detected_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['after_run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['before_run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['metric'], ['metrics.name'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('metric', 'benchmark', 'case_key', 'machine_id', 'after_run_id')
    )
    with op.batch_alter_table('regressions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_regressions_metric'), ['metric'], unique=False)
        batch_op.create_index(batch_op.f('ix_regressions_status'), ['status'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('regressions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_regressions_status'))
        batch_op.drop_index(batch_op.f('ix_regressions_metric'))

    op.drop_table('regressions')
