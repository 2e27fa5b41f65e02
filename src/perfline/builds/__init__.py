"""A commit of a tree, checked out and built once: worktrees, build results, kernel
builds and their registration, with the rules that keep a kill from changing an answer
(an interrupted build is redone from a fresh checkout). Used by bisect, track and fleet.
"""
