"""tracking: trackers, their daily numbers, and what a tracker adds to a regression

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 17:05:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('trackers',
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('file', sa.Text(), nullable=False),
    sa.Column('repo', sa.Text(), nullable=False),
    sa.Column('branch', sa.String(length=200), nullable=False),
    sa.Column('since', sa.String(length=64), nullable=False),
    sa.Column('head', sa.String(length=64), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )
    op.create_table('daily_numbers',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('tracker', sa.String(length=100), nullable=False),
    sa.Column('commit', sa.String(length=64), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('subject', sa.Text(), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('low', sa.Float(), nullable=False),
    sa.Column('high', sa.Float(), nullable=False),
    sa.Column('tested_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['tracker'], ['trackers.name'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('tracker', 'commit')
    )
    with op.batch_alter_table('daily_numbers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_daily_numbers_tracker'), ['tracker'], unique=False)
    with op.batch_alter_table('regressions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tracker', sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column('good', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('bad', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('bisection_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('culprit', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('culprit_subject', sa.Text(), nullable=True))
        batch_op.create_index(batch_op.f('ix_regressions_tracker'), ['tracker'], unique=False)
        batch_op.create_foreign_key('fk_regressions_bisection', 'bisections', ['bisection_id'], ['id'],
                                    ondelete='SET NULL')


def downgrade() -> None:
    with op.batch_alter_table('regressions', schema=None) as batch_op:
        batch_op.drop_constraint('fk_regressions_bisection', type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_regressions_tracker'))
        for column in ('culprit_subject', 'culprit', 'bisection_id', 'bad', 'good', 'tracker'):
            batch_op.drop_column(column)
    with op.batch_alter_table('daily_numbers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_daily_numbers_tracker'))
    op.drop_table('daily_numbers')
    op.drop_table('trackers')
