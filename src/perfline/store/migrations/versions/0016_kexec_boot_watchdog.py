"""kexec boot watchdog: which watchdog guarded a boot under test (a job's watchdog:)

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 12:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('kexec_boots', schema=None) as batch_op:
        batch_op.add_column(sa.Column('watchdog', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('kexec_boots', schema=None) as batch_op:
        batch_op.drop_column('watchdog')
