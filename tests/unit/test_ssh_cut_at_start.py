"""A connection cut while a command is being started: paramiko's own close of the channel then
raises EOFError too, and the transport must still say what happened (ConnectError, so --sync and
submit can start over), never leak the EOFError (a chaos run, stop 36)."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_tiers.transport.errors import ConnectError
from jupyter_tiers.transport.ssh import SSHTransport
from jupyter_tiers.transport.target import SSHTarget


class CutChannel:
    def exec_command(self, command: str) -> None:
        raise EOFError()

    def close(self) -> None:
        raise EOFError()  # what paramiko's close does before its reader has seen the cut


class DroppedConnection:
    def dropped(self) -> bool:
        return True


def test_a_cut_while_starting_a_command_is_a_connect_error(monkeypatch: pytest.MonkeyPatch) -> None:
    transport = SSHTransport(SSHTarget(host="cluster.example"))
    invalidated: list[Any] = []
    monkeypatch.setattr(transport, "_open_session", lambda: (CutChannel(), DroppedConnection()))
    monkeypatch.setattr(transport, "_invalidate", invalidated.append)
    with pytest.raises(ConnectError, match=r"connection lost while starting `true`"):
        transport.run(["true"])
    assert len(invalidated) == 1
