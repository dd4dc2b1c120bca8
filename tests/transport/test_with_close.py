"""``with`` on the transport and on a stream (closing.ClosedOnExit), against the real sshd."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_tiers.transport.ssh import SSHTransport
from tests.transport.conftest import SSHServer


def test_with_gives_the_object_back_and_closes_it_even_on_an_error(sshd: SSHServer, transports: list[Any]):
    transport = SSHTransport(sshd.target())
    transports.append(transport)
    with pytest.raises(RuntimeError, match="inside"), transport as same:
        assert same is transport
        with transport.stream(["sh", "-c", "while true; do echo tick; sleep 0.1; done"]) as stream:
            assert next(stream).startswith(b"tick")
            raise RuntimeError("inside")
    assert stream.closed and stream.exit_status is None
    assert not transport.connected
