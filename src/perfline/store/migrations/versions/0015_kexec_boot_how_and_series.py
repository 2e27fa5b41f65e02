"""kexec boot how and series: a boot by kexec or through the boot loader; boots that make one ab

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 08:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('kexec_series',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('machine_id', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('steps', sa.JSON(), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('label', sa.String(length=200), nullable=True),
    sa.Column('kernel_commit', sa.String(length=100), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('kexec_series', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_kexec_series_machine_id'), ['machine_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_kexec_series_state'), ['state'], unique=False)
    with op.batch_alter_table('kexec_boots', schema=None) as batch_op:
        batch_op.add_column(sa.Column('how', sa.String(length=16), server_default='kexec', nullable=False))
        batch_op.add_column(sa.Column('series_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('series_step', sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f('ix_kexec_boots_series_id'), ['series_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('kexec_boots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_kexec_boots_series_id'))
        batch_op.drop_column('series_step')
        batch_op.drop_column('series_id')
        batch_op.drop_column('how')
    with op.batch_alter_table('kexec_series', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_kexec_series_state'))
        batch_op.drop_index(batch_op.f('ix_kexec_series_machine_id'))
    op.drop_table('kexec_series')
