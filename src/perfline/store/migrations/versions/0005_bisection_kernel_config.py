"""bisection kernel config

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 10:12:41.508113
"""

import shlex

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

# Before this revision a kernel bisection was told by the first line of its build
# command, which named the config copy; that line is how existing rows are filled in.
HEADER = "# perfline kernel build: config "


def upgrade() -> None:
    with op.batch_alter_table('bisections', schema=None) as batch_op:
        batch_op.add_column(sa.Column('kernel_config', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('kernel_config_source', sa.Text(), nullable=True))

    bisections = sa.table('bisections', sa.column('id', sa.Integer()), sa.column('build', sa.Text()),
                          sa.column('kernel_config', sa.Text()))
    connection = op.get_bind()
    for row in connection.execute(sa.select(bisections.c.id, bisections.c.build)).all():
        first = row.build.partition("\n")[0]
        if first.startswith(HEADER):
            [config] = shlex.split(first[len(HEADER):])
            connection.execute(bisections.update().where(bisections.c.id == row.id).values(kernel_config=config))


def downgrade() -> None:
    with op.batch_alter_table('bisections', schema=None) as batch_op:
        batch_op.drop_column('kernel_config_source')
        batch_op.drop_column('kernel_config')
