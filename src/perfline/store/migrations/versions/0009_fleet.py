"""fleet: the fleet's machines and each attempt at a queued job

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 19:48:45
"""

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('fleet_machines',
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('machine_class', sa.String(length=200), nullable=False),
    sa.Column('cpu_model', sa.Text(), nullable=False),
    sa.Column('cpus', sa.Integer(), nullable=False),
    sa.Column('memory_bytes', sa.BigInteger(), nullable=False),
    sa.Column('kernel', sa.String(length=255), nullable=False),
    sa.Column('hostname', sa.String(length=255), nullable=False),
    sa.Column('machine_id', sa.String(length=64), nullable=False),
    sa.Column('registered_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('worker_id', sa.BigInteger(), nullable=True),
    sa.Column('job_id', sa.BigInteger(), nullable=True),
    sa.Column('hold', sa.String(length=16), nullable=True),
    sa.Column('hold_reason', sa.Text(), nullable=True),
    sa.Column('pace_ns', sa.BigInteger(), nullable=True),
    sa.Column('health_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('jobs_since_health', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )
    with op.batch_alter_table('fleet_machines', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_fleet_machines_machine_class'), ['machine_class'], unique=False)

    op.create_table('fleet_attempts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.BigInteger(), nullable=False),
    sa.Column('machine', sa.String(length=100), nullable=False),
    sa.Column('worker_id', sa.BigInteger(), nullable=True),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('fleet_attempts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_fleet_attempts_job_id'), ['job_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_fleet_attempts_machine'), ['machine'], unique=False)
        batch_op.create_index(batch_op.f('ix_fleet_attempts_state'), ['state'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('fleet_attempts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_fleet_attempts_state'))
        batch_op.drop_index(batch_op.f('ix_fleet_attempts_machine'))
        batch_op.drop_index(batch_op.f('ix_fleet_attempts_job_id'))

    op.drop_table('fleet_attempts')
    with op.batch_alter_table('fleet_machines', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_fleet_machines_machine_class'))

    op.drop_table('fleet_machines')
