"""Joining a Ray cluster by address: which cluster (:func:`ray_address`), and a check that
it is a live Ray cluster before anything is written (:func:`check_ray_address`: a TCP
connection, then :func:`ray_handshake`, the question ``ray.init`` asks first, over gRPC,
with a deadline and open to signals). ``ray.init`` itself retries a wrong address for ten
minutes and more, printing lines that name another one, and holds SIGTERM off meanwhile.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from .._extras import require


def ray_address(address: str | None) -> str:
    """The Ray cluster to join: ``address``, else ``$RAY_ADDRESS``, else ``"local"`` — a
    Ray instance of this process's own on this machine. Never Ray's own default, which
    joins the last cluster started on the machine, even one that died and left
    ``/tmp/ray/ray_current_cluster`` behind (the run then fails to connect).

    Examples
    --------
    >>> ray_address("10.0.0.2:6379"), ray_address(None) in ("local", os.environ.get("RAY_ADDRESS"))
    ('10.0.0.2:6379', True)
    """
    return address or os.environ.get("RAY_ADDRESS") or "local"


#: Seconds to wait for a named Ray cluster's head to accept a connection.
CONNECT_TIMEOUT = 5.0

#: Seconds the head may take to answer the handshake (:func:`ray_handshake`): a head that
#: accepts connections but says nothing (a frozen or dying one, or another program) fails
#: after this, where ``ray.init`` would retry for ten minutes and more.
HANDSHAKE_TIMEOUT = 20.0

#: The first question ``ray.init`` asks a head (its GCS) and a Ray Client server; an empty
#: message is a valid request to both (every field at its default; PING for the client).
_QUESTIONS = {"gcs": ("/ray.rpc.NodeInfoGcsService/GetClusterId", b""),
              "client": ("/ray.rpc.RayletDriver/ClusterInfo", b"\x08\x06")}

#: What to pass instead, in every refusal of an address.
_FIX = ("start a cluster with 'ray start --head' and pass the address it prints (HOST:6379, "
        "or ray://HOST:10001 for Ray Client), or leave --ray-address and $RAY_ADDRESS unset "
        "to run on a Ray instance on this machine")


def check_ray_address(address: str | None, timeout: float = CONNECT_TIMEOUT,
                      handshake: float | None = None) -> None:
    """Refuse, in one line naming it, a cluster address that is not a live Ray cluster.

    ``ray.init`` would retry for minutes, printing warnings that name another address: a
    TCP connection to the head's ``host:port`` (``ray://host:port`` for Ray Client) tells
    within ``timeout`` seconds whether anything listens, and :func:`ray_handshake` within
    ``handshake`` seconds (default :data:`HANDSHAKE_TIMEOUT`) whether it is Ray.
    ``"local"`` is left to Ray; ``"auto"`` is checked at the address Ray finds for it (its
    address file may name a cluster that died). A signal (Ctrl-C, SIGTERM) ends the wait.
    """
    joined = name = ray_address(address)
    if joined == "local":
        return
    if joined == "auto":
        found = _auto_address()
        if found is None:
            return
        joined, name = found, f"{found} (the cluster 'auto' finds)"
    host, _, port = joined.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ray-address {joined!r} is not HOST:PORT (or ray://HOST:PORT); "
                         "pass the address 'ray start --head' prints")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise ValueError(f"no Ray cluster answers at {name} ({exc.strerror or exc} within "
                         f"{timeout:g} s); {_FIX}") from None
    ray_handshake(joined, HANDSHAKE_TIMEOUT if handshake is None else handshake, name=name)


def _auto_address() -> str | None:
    """The head ``ray.init(address="auto")`` would join (the newest one started on this
    machine, from Ray's address file), None where Ray's private lookup is not there."""
    require("ray", "fedcomp run --executor ray")
    try:
        from ray._private.services import get_ray_address_from_environment
    except ImportError:  # pragma: no cover - moved in another Ray: Ray alone judges "auto"
        return None
    try:
        return str(get_ray_address_from_environment("auto", None))
    except ConnectionError as exc:
        raise ValueError(f"--ray-address auto: {exc} ({_FIX})") from None


def ray_handshake(address: str, timeout: float, name: str | None = None) -> None:
    """Ask the Ray head at ``address`` the question ``ray.init`` asks first, over gRPC.

    A ``ValueError`` naming the address (as ``name``, default ``address``) when it does not
    answer as Ray within ``timeout`` seconds: an HTTP server (the dashboard's port 8265, a
    web page), a gRPC server that is not Ray, or one that accepts connections and says
    nothing. The main thread waits on the answer in short slices, so SIGTERM's handler
    (:func:`~fedcomp._lifetime.signals_as_interrupt`) runs while it waits: a blocking gRPC
    call would hold it off.
    """
    require("ray", "fedcomp run --executor ray")  # gRPC comes with it
    import grpc
    target, joined = address.removeprefix("ray://"), name or address
    method, request = _QUESTIONS["client" if address.startswith("ray://") else "gcs"]
    with grpc.insecure_channel(target) as channel:
        answer = channel.unary_unary(method).future(request, timeout=timeout)
        try:
            while True:
                try:
                    answer.result(timeout=0.25)
                    return
                except grpc.FutureTimeoutError:
                    continue
                except grpc.RpcError:
                    break
        finally:
            answer.cancel()
    refusal = _refusal(joined, answer.code(), answer.details() or "", timeout, grpc)
    if refusal:
        raise ValueError(refusal)


def _refusal(joined: str, code: Any, details: str, timeout: float, grpc: Any) -> str | None:
    """The error for a handshake that ended in ``code``; None when the answer came from Ray
    (a head that refuses the question, for want of a token, still is one)."""
    status = grpc.StatusCode
    if code == status.UNAVAILABLE and ("http1" in details.lower()
                                       or "parsing http/2" in details.lower()):
        return (f"{joined} answers, but not as a Ray cluster: it does not speak gRPC (a web "
                f"server? the Ray dashboard listens on 8265, the head on 6379); {_FIX}")
    if code == status.UNAVAILABLE:
        return f"no Ray cluster answers at {joined} ({details.strip()[:160]}); {_FIX}"
    if code == status.DEADLINE_EXCEEDED:
        return (f"no Ray cluster answered at {joined} within {timeout:g} s (something accepts "
                f"connections there but says nothing: a frozen or dead head, or another "
                f"program); {_FIX}")
    if code == status.UNIMPLEMENTED:
        return f"{joined} speaks gRPC but is not a Ray cluster ({details.strip()[:80]}); {_FIX}"
    return None
