"""bisections

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 04:09:53.084691
"""

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('bisections',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo', sa.Text(), nullable=False),
    sa.Column('good', sa.String(length=64), nullable=False),
    sa.Column('bad', sa.String(length=64), nullable=False),
    sa.Column('commits', sa.JSON(), nullable=False),
    sa.Column('build', sa.Text(), nullable=False),
    sa.Column('command', sa.Text(), nullable=True),
    sa.Column('job', sa.Text(), nullable=True),
    sa.Column('metric', sa.String(length=200), nullable=False),
    sa.Column('direction', sa.String(length=8), nullable=False),
    sa.Column('max_runs', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('bisect_builds',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('bisection_id', sa.Integer(), nullable=False),
    sa.Column('commit_index', sa.Integer(), nullable=False),
    sa.Column('ok', sa.Boolean(), nullable=False),
    sa.Column('seconds', sa.Float(), nullable=False),
    sa.Column('log_tail', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['bisection_id'], ['bisections.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('bisect_builds', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_bisect_builds_bisection_id'), ['bisection_id'], unique=False)

    op.create_table('bisect_samples',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('bisection_id', sa.Integer(), nullable=False),
    sa.Column('commit_index', sa.Integer(), nullable=False),
    sa.Column('phase', sa.String(length=8), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('taken_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['bisection_id'], ['bisections.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('bisect_samples', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_bisect_samples_bisection_id'), ['bisection_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('bisect_samples', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_bisect_samples_bisection_id'))

    op.drop_table('bisect_samples')
    with op.batch_alter_table('bisect_builds', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_bisect_builds_bisection_id'))

    op.drop_table('bisect_builds')
    op.drop_table('bisections')
