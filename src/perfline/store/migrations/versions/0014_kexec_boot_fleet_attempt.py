"""kexec boot fleet attempt: the fleet job attempt a worker's kexec boot is for

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27 05:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('kexec_boots', schema=None) as batch_op:
        batch_op.add_column(sa.Column('fleet_attempt', sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f('ix_kexec_boots_fleet_attempt'), ['fleet_attempt'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('kexec_boots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_kexec_boots_fleet_attempt'))
        batch_op.drop_column('fleet_attempt')
