"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 02:52:32.903471
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('kernel_configs',
    sa.Column('hash', sa.String(length=64), nullable=False),
    sa.Column('source', sa.String(length=256), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('hash')
    )
    op.create_table('metrics',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('unit', sa.String(length=32), nullable=False),
    sa.Column('direction', sa.String(length=8), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )
    op.create_table('runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job', sa.String(length=200), nullable=False),
    sa.Column('benchmark', sa.String(length=100), nullable=False),
    sa.Column('case_key', sa.Text(), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('tunables', sa.JSON(), nullable=False),
    sa.Column('monitors', sa.JSON(), nullable=False),
    sa.Column('target', sa.String(length=50), nullable=False),
    sa.Column('label', sa.String(length=200), nullable=True),
    sa.Column('kernel_commit', sa.String(length=100), nullable=True),
    sa.Column('hostname', sa.String(length=255), nullable=False),
    sa.Column('machine_id', sa.String(length=64), nullable=False),
    sa.Column('kernel_release', sa.String(length=255), nullable=False),
    sa.Column('fingerprint', sa.JSON(), nullable=False),
    sa.Column('config_hash', sa.String(length=64), nullable=True),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('output_tail', sa.Text(), nullable=True),
    sa.Column('repeat', sa.Integer(), nullable=False),
    sa.Column('warmup', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('boot_id', sa.String(length=64), nullable=False),
    sa.Column('perfline_version', sa.String(length=32), nullable=False),
    sa.ForeignKeyConstraint(['config_hash'], ['kernel_configs.hash'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runs_benchmark'), ['benchmark'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_job'), ['job'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_kernel_commit'), ['kernel_commit'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_kernel_release'), ['kernel_release'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_label'), ['label'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_machine_id'), ['machine_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_started_at'), ['started_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_status'), ['status'], unique=False)

    op.create_table('samples',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('repetition', sa.Integer(), nullable=False),
    sa.Column('metric', sa.String(length=200), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('taken_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['metric'], ['metrics.name'], ),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('samples', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_samples_metric'), ['metric'], unique=False)
        batch_op.create_index(batch_op.f('ix_samples_run_id'), ['run_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('samples', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_samples_run_id'))
        batch_op.drop_index(batch_op.f('ix_samples_metric'))

    op.drop_table('samples')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_runs_status'))
        batch_op.drop_index(batch_op.f('ix_runs_started_at'))
        batch_op.drop_index(batch_op.f('ix_runs_machine_id'))
        batch_op.drop_index(batch_op.f('ix_runs_label'))
        batch_op.drop_index(batch_op.f('ix_runs_kernel_release'))
        batch_op.drop_index(batch_op.f('ix_runs_kernel_commit'))
        batch_op.drop_index(batch_op.f('ix_runs_job'))
        batch_op.drop_index(batch_op.f('ix_runs_benchmark'))

    op.drop_table('runs')
    op.drop_table('metrics')
    op.drop_table('kernel_configs')
