"""kexec boots: what a machine booted into a kernel under test is to do, and how it went

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 22:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('kexec_boots',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('machine_id', sa.String(length=64), nullable=False),
    sa.Column('hostname', sa.String(length=255), nullable=False),
    sa.Column('kernel', sa.String(length=100), nullable=False),
    sa.Column('release', sa.String(length=255), nullable=False),
    sa.Column('banner', sa.Text(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('cmdline', sa.Text(), nullable=False),
    sa.Column('token', sa.String(length=64), nullable=False),
    sa.Column('default_release', sa.String(length=255), nullable=False),
    sa.Column('cases', sa.JSON(), nullable=False),
    sa.Column('label', sa.String(length=200), nullable=True),
    sa.Column('kernel_commit', sa.String(length=100), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('boot_id_before', sa.String(length=64), nullable=False),
    sa.Column('boot_id_after', sa.String(length=64), nullable=True),
    sa.Column('run_ids', sa.JSON(), nullable=False),
    sa.Column('console', sa.Text(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('kexec_boots', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_kexec_boots_machine_id'), ['machine_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_kexec_boots_state'), ['state'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('kexec_boots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_kexec_boots_state'))
        batch_op.drop_index(batch_op.f('ix_kexec_boots_machine_id'))

    op.drop_table('kexec_boots')
