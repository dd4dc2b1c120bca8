"""One SSH connection: a socket (or ProxyCommand) and a chain of paramiko transports over it,
jump hosts first. Built by :func:`connect_once`; :class:`~.ssh.SSHTransport` adds retries."""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import TYPE_CHECKING, Any

from . import sshconfig
from .auth import authenticate
from .errors import ConnectError, reason
from .hostkeys import prefer_key_types, verify_host_key
from .proxy import ProxyCommandSocket

if TYPE_CHECKING:
    from collections.abc import Callable

    import paramiko

    from .kbdint import Ask
    from .sshconfig import Hop, Route

    BeforeAuth = Callable[[paramiko.Transport, Hop], None]

log = logging.getLogger(__name__)
# paramiko logs a dropped connection from its own thread ("Socket exception: Software caused
# connection abort (103)"); with no logging configured Python prints that on stderr, into
# whichever notebook cell runs then. The views say it once, in words ("reconnecting (attempt
# ...)"): only an application that configures logging sees paramiko's records.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class Connection:
    """The transports of one connection (jump hosts first) and the socket under them."""

    def __init__(self, transports: list[paramiko.Transport], sock: Any, route: Route) -> None:
        self.transports = transports
        self.sock = sock
        self.route = route

    @property
    def transport(self) -> paramiko.Transport:
        return self.transports[-1]

    def alive(self) -> bool:
        return all(t.is_active() for t in self.transports)

    def close(self) -> None:
        for t in reversed(self.transports):
            with contextlib.suppress(Exception):
                t.close()
        with contextlib.suppress(Exception):
            self.sock.close()

    def drop(self) -> None:
        """Cut the socket under the whole connection without any SSH goodbye."""
        if isinstance(self.sock, socket.socket):
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
        else:  # a ProxyCommand: killing it cuts the connection
            self.sock.close()

    def dropped(self) -> bool:
        """Whether the connection died (checked after a channel closed without exit status).

        paramiko closes a dead transport's channels *before* marking it inactive, so when the
        transport still looks alive we confirm with a round trip (it answers, or it is dead).
        """
        t = self.transport
        if not self.alive() or getattr(t, "saved_exception", None) is not None:
            return True
        try:
            t.global_request("keepalive@openssh.com", wait=True)
        except Exception:
            return True
        return not self.alive()


def connect_once(route: Route, ask: Ask | None = None, *,
                 before_auth: BeforeAuth | None = None) -> Connection:
    """Connect and authenticate every hop; ``ask`` answers a login's one-time code prompts.
    ``before_auth`` (``jupyter tiers doctor``) sees each hop's transport once its host key is
    verified, before any key is offered."""
    first = route.hops[0]
    sock = open_socket(first, route)
    transports: list[paramiko.Transport] = []
    try:
        transports.append(handshake(first, sock, route, via=None, ask=ask, before_auth=before_auth))
        for prev, hop in zip(route.hops, route.hops[1:], strict=False):
            chan = open_tunnel(transports[-1], prev, hop, route)
            transports.append(handshake(hop, chan, route, via=prev, ask=ask, before_auth=before_auth))
    except BaseException:
        for t in reversed(transports):
            t.close()
        with contextlib.suppress(Exception):
            sock.close()
        raise
    log.debug("SSH connected to %s via %d hop(s)", route.target.label, len(route.hops))
    return Connection(transports, sock, route)


def open_socket(hop: Hop, route: Route) -> Any:
    if hop.proxy_command:
        try:
            return ProxyCommandSocket(hop.proxy_command)
        except OSError as e:
            raise ConnectError(
                f"ProxyCommand for {hop.name} failed to start: {reason(e)}", transient=False
            ) from None
    where = f"{hop.hostname}:{hop.port}"
    try:
        sock = socket.create_connection((hop.hostname, hop.port), timeout=route.connect_timeout)
    except socket.gaierror as e:
        transient = e.errno in (getattr(socket, "EAI_AGAIN", None),)
        raise ConnectError(
            f"cannot resolve host {hop.hostname!r}: {e.strerror}", transient=transient
        ) from None
    except TimeoutError:
        raise ConnectError(
            f"timed out connecting to {where} after {route.connect_timeout:g}s"
        ) from None
    except OSError as e:
        raise ConnectError(f"cannot connect to {where}: {reason(e)}") from None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if route.keepalive > 0 and hasattr(socket, "TCP_USER_TIMEOUT"):
            # Like ServerAliveCountMax=3: unacknowledged data for 3 keepalive periods means
            # the link is dead, so reads fail instead of hanging for the kernel's ~15 min.
            ms = max(30, 3 * route.keepalive) * 1000
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, ms)
    except OSError:  # pragma: no cover - best effort
        pass
    return sock


def open_tunnel(
    t: paramiko.Transport, prev: Hop, hop: Hop, route: Route
) -> paramiko.Channel:
    try:
        return t.open_channel(
            "direct-tcpip",
            (hop.hostname, hop.port),
            ("127.0.0.1", 0),
            timeout=route.connect_timeout,
        )
    except Exception as e:
        raise ConnectError(
            f"jump host {prev.hostname} could not connect to {hop.hostname}:{hop.port}: "
            f"{reason(e)}"
        ) from None


def handshake(
    hop: Hop, sock: Any, route: Route, via: Hop | None, ask: Ask | None = None,
    before_auth: BeforeAuth | None = None,
) -> paramiko.Transport:
    import paramiko

    known = sshconfig.load_known_hosts(
        (*hop.known_hosts_files, *hop.global_known_hosts_files)
    )
    t = paramiko.Transport(sock)
    ok = False
    try:
        timeout = route.connect_timeout
        t.banner_timeout = timeout
        t.handshake_timeout = timeout
        t.auth_timeout = timeout
        leave_rekeying_to_the_server(t)
        prefer_aead_ciphers(t)
        prefer_key_types(t, sshconfig.known_key_types(known, hop.host_key_name))
        try:
            t.start_client(timeout=timeout)
        except paramiko.ssh_exception.IncompatiblePeer as e:
            raise ConnectError(
                f"SSH negotiation with {hop.hostname}:{hop.port} failed: {reason(e)}",
                transient=False,
            ) from None
        except (paramiko.SSHException, EOFError, OSError) as e:
            said = sock.last_words() if isinstance(sock, ProxyCommandSocket) else ""
            raise ConnectError(
                f"SSH handshake with {hop.hostname}:{hop.port} failed: {reason(e)}"
                + (f" (ProxyCommand said: {said})" if said else "")
            ) from None
        key = t.get_remote_server_key()
        verify_host_key(hop, key.asbytes(), known, via)
        if before_auth is not None:
            before_auth(t, hop)
        authenticate(t, hop, ask)
        # Left-over auth failures must not later look like a dead transport.
        t.saved_exception = None
        t.set_keepalive(route.keepalive)
        ok = True
        return t
    finally:
        if not ok:
            t.close()  # a no-op if the handshake never started: close the socket too
            with contextlib.suppress(Exception):
                sock.close()


# Far beyond any session: paramiko then never starts a key exchange itself.
_NO_CLIENT_REKEY = 2**62


#: Ciphers asked for first: AES-GCM authenticates as it decrypts, so no HMAC-SHA2 per packet on
#: either side (paramiko's own first choice is aes128-ctr with hmac-sha2-256). Measured on the
#: cluster in a box (bench/sync_download.py): a 512 MiB read 72 -> 100 MiB/s, about 1.0x `ssh cat`.
AEAD_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def prefer_aead_ciphers(t: paramiko.Transport) -> None:
    """Offer AES-GCM first (OpenSSH servers support it by default); the other ciphers paramiko
    supports stay offered after it, for servers without it."""
    opts = t.get_security_options()
    available = list(opts.ciphers)
    first = [c for c in AEAD_CIPHERS if c in available]
    if first:
        opts.ciphers = first + [c for c in available if c not in first]


def leave_rekeying_to_the_server(t: paramiko.Transport) -> None:
    """Let the server start every re-key (OpenSSH's RekeyLimit: every 1-4 GB by default).

    A re-key that paramiko starts (after 512 MiB either way) while the server closes a channel
    livelocks paramiko's transport thread: it waits to send the close reply until the key
    exchange it should be running itself is over, and the connection dies 30 s later with
    "Key-exchange timed out waiting for key negotiation" (paramiko #822). With a rank poll closing
    a channel every second, a long log stream met it; reading a 1 GiB log did every time.
    Re-keys the server starts do not take that path.
    """
    t.packetizer.REKEY_BYTES = _NO_CLIENT_REKEY
    t.packetizer.REKEY_PACKETS = _NO_CLIENT_REKEY
