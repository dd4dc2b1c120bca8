"""Transports to remote machines. The SSH transport is in :mod:`jupyter_tiers.transport.ssh`.

Nothing is imported here eagerly: ``import jupyter_tiers.transport`` stays cheap.
"""
