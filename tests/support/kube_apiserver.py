"""A real Kubernetes API server for tests, envtest-style: etcd, kube-apiserver and
kube-controller-manager from the Kubernetes bundle (docs/kubernetes.md, "The offline bundle")
as processes, without nodes.

- Everything runs inside a network namespace of its own (`unshare --net`, lo up), so nothing
  listens in the machine's namespace and two servers never share a port; the tests talk to
  it from a thread that entered that namespace (setns affects only the calling thread) and
  run kubectl under `nsenter --net`.
- Certificates are made for the run (a throwaway CA, the API server's serving certificate,
  client certificates for the admin in `system:masters` and for the controller manager, the
  front proxy's CA, an ECDSA service-account key pair) with the `cryptography` package.
- kube-apiserver gets kubeadm's arguments (cmd/kubeadm/app/phases/controlplane/manifests.go
  of the pinned release: NodeRestriction on top of the default admission plugins,
  authorization Node,RBAC, the service-account issuer and keys, the front proxy's request
  headers) with the plan's ClusterConfiguration `apiServer.extraArgs` over them, as kubeadm
  merges them. Differences, none of which admission reads: etcd is plain HTTP on the
  namespace's loopback (kubeadm: TLS on 127.0.0.1), and there is no kubelet client
  certificate (no kubelet to reach).
- kube-controller-manager runs only the controllers admission depends on (CONTROLLERS):
  the namespaces' `default` ServiceAccount, quota status (the quota admission plugin reads
  `status.hard`, which the controller writes), the aggregated ClusterRoles (`edit` has no
  rules until aggregated), and the ValidatingAdmissionPolicies' type check.

Start is bounded (every process alive, /readyz ok) and `stop()` always ends the processes by
pid (SIGTERM, then SIGKILL), and removes the temporary directory; the processes also get
SIGKILL if the test process dies (PR_SET_PDEATHSIG).

The pure parts (`apiserver_arguments`, `controller_manager_arguments`, `etcd_arguments`,
`kubeconfig`, `status_message`) are unit-tested in tests/kubernetes/test_k8s_apiserver_harness.py.
A test module that runs a server takes it from the built bundle (`from_bundle`) and skips with
`unavailable(bundle)`'s reason where none can run.
"""

from __future__ import annotations

import ctypes
import datetime
import ipaddress
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.client import HTTPSConnection
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cluster_plan.kubernetes.bundle import Bundle, BundleNeeds, built_bundle

PORT = 6443
# The API server's own address (the `kubernetes` Service's endpoint, which may not be a
# loopback one), on the namespace's lo: TEST-NET-1, nothing real.
ADVERTISE_ADDRESS = "192.0.2.1"
ETCD_URL = "http://127.0.0.1:2379"
DNS_DOMAIN = "cluster.local"
ADMIN = "kubernetes-admin"
# what admission depends on: the namespaces' default ServiceAccount (the ServiceAccount plugin
# refuses pods without it), quota status (a quota without status.hard restricts nothing), the
# rules of the aggregated ClusterRoles edit and admin (empty until aggregated), and the
# ValidatingAdmissionPolicies' type check (their status)
CONTROLLERS = (
    "serviceaccount-controller,resourcequota-controller,clusterrole-aggregation-controller,"
    "validatingadmissionpolicy-status-controller"
)
START_TIMEOUT_S = 90.0
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1


class ApiServerError(RuntimeError):
    """The server did not start, or a request could not be made; str() says why, with the
    tail of the process's log where there is one."""


# --- pure parts ---


_PKI = {
    "ca": "ca.crt",
    "ca_key": "ca.key",
    "apiserver": "apiserver.crt",
    "apiserver_key": "apiserver.key",
    "sa_pub": "sa.pub",
    "sa_key": "sa.key",
    "front_proxy_ca": "front-proxy-ca.crt",
    "front_proxy_client": "front-proxy-client.crt",
    "front_proxy_client_key": "front-proxy-client.key",
    "admin": "admin.crt",
    "admin_key": "admin.key",
    "controller_manager": "controller-manager.crt",
    "controller_manager_key": "controller-manager.key",
}


@dataclass(frozen=True)
class Files:
    """Where the run's certificates and keys are (names as in kubeadm's /etc/kubernetes/pki)."""

    pki: Path

    def __call__(self, name: str) -> Path:
        return self.pki / _PKI[name]


def _arguments(defaults: Sequence[tuple[str, str]], extra: Sequence[dict[str, str]]) -> list[str]:
    """kubeadm's ArgumentsToCommand: an extra argument replaces the default of its name, the
    rest are added; sorted by name, as kubeadm writes them."""
    merged = dict(defaults)
    overridden: dict[str, list[str]] = {}
    for arg in extra:
        overridden.setdefault(arg["name"], []).append(arg["value"])
    out = [(name, value) for name, value in merged.items() if name not in overridden]
    out += [(name, value) for name, values in overridden.items() for value in values]
    return [f"--{name}={value}" for name, value in sorted(out, key=lambda nv: nv[0])]


def apiserver_arguments(cluster_configuration: dict[str, Any], files: Files) -> list[str]:
    """kube-apiserver's arguments as kubeadm gives them for this ClusterConfiguration."""
    networking = cluster_configuration.get("networking") or {}
    domain = networking.get("dnsDomain") or DNS_DOMAIN
    defaults = [
        ("advertise-address", ADVERTISE_ADDRESS),
        ("enable-admission-plugins", "NodeRestriction"),
        ("service-cluster-ip-range", networking["serviceSubnet"]),
        ("service-account-key-file", str(files("sa_pub"))),
        ("service-account-signing-key-file", str(files("sa_key"))),
        ("service-account-issuer", f"https://kubernetes.default.svc.{domain}"),
        ("client-ca-file", str(files("ca"))),
        ("tls-cert-file", str(files("apiserver"))),
        ("tls-private-key-file", str(files("apiserver_key"))),
        ("enable-bootstrap-token-auth", "true"),
        ("secure-port", str(PORT)),
        ("allow-privileged", "true"),
        ("kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname"),
        ("requestheader-username-headers", "X-Remote-User"),
        ("requestheader-group-headers", "X-Remote-Group"),
        ("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
        ("requestheader-client-ca-file", str(files("front_proxy_ca"))),
        ("requestheader-allowed-names", "front-proxy-client"),
        ("proxy-client-cert-file", str(files("front_proxy_client"))),
        ("proxy-client-key-file", str(files("front_proxy_client_key"))),
        ("etcd-servers", ETCD_URL),
        ("authorization-mode", "Node,RBAC"),
    ]
    extra = (cluster_configuration.get("apiServer") or {}).get("extraArgs") or []
    return _arguments(defaults, extra)


def controller_manager_arguments(files: Files, kubeconfig_path: Path) -> list[str]:
    """kube-controller-manager's arguments as kubeadm gives them, with only the controllers
    admission depends on, no leader election (one instance) and no serving port."""
    defaults = [
        ("bind-address", "127.0.0.1"),
        ("secure-port", "0"),
        ("leader-elect", "false"),
        ("kubeconfig", str(kubeconfig_path)),
        ("root-ca-file", str(files("ca"))),
        ("service-account-private-key-file", str(files("sa_key"))),
        ("use-service-account-credentials", "true"),
        ("controllers", CONTROLLERS),
    ]
    return _arguments(defaults, [])


def etcd_arguments(data_dir: Path) -> list[str]:
    """A single etcd member on the namespace's loopback; no fsync (the data is thrown away)."""
    return [
        f"--data-dir={data_dir}",
        "--name=apitest",
        f"--listen-client-urls={ETCD_URL}",
        f"--advertise-client-urls={ETCD_URL}",
        "--listen-peer-urls=http://127.0.0.1:2380",
        "--initial-advertise-peer-urls=http://127.0.0.1:2380",
        "--initial-cluster=apitest=http://127.0.0.1:2380",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]


def kubeconfig(ca: Path, cert: Path, key: Path, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "apitest",
                "cluster": {
                    "server": f"https://127.0.0.1:{PORT}",
                    "certificate-authority": str(ca),
                },
            }
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "apitest", "context": {"cluster": "apitest", "user": user}}],
        "current-context": "apitest",
    }


def status_message(status: dict[str, Any]) -> str:
    """The message of an API error (a Status object), or the whole object as text."""
    if status.get("kind") == "Status" and "message" in status:
        return str(status["message"])
    return json.dumps(status, sort_keys=True)


# --- certificates ---


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common: str, organisation: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if organisation:
        parts.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation))
    return x509.Name(parts)


def _certificate(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None = None,
    usage: x509.ObjectIdentifier | None = None,
    sans: Sequence[x509.GeneralName] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, signer = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is None:
        usages = {"key_cert_sign": True, "crl_sign": True, "digital_signature": True}
    else:
        usages = {"key_cert_sign": False, "crl_sign": False, "digital_signature": True}
        assert usage is not None, "a leaf certificate says what it is for"
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    builder = builder.add_extension(
        x509.KeyUsage(
            content_commitment=False,
            key_encipherment=False,
            data_encipherment=False,
            key_agreement=False,
            encipher_only=False,
            decipher_only=False,
            **usages,
        ),
        critical=True,
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(signer, hashes.SHA256())


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def write_certificates(files: Files, service_subnet: str) -> None:
    """A CA and everything signed by it that the processes and the tests need."""
    files.pki.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    ca_key = _key()
    ca_name = _name("kubernetes")
    ca = _certificate(ca_name, ca_key)
    _write(files("ca"), ca.public_bytes(pem))
    _write(files("ca_key"), _pem_key(ca_key))
    service_ip = ipaddress.ip_address(str(next(ipaddress.ip_network(service_subnet).hosts())))
    sans = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(service_ip),
        *(
            x509.DNSName(n)
            for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
        ),
        x509.DNSName(f"kubernetes.default.svc.{DNS_DOMAIN}"),
    ]
    leaves = [
        ("apiserver", _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans, ca_name),
        ("admin", _name(ADMIN, "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH, [], ca_name),
        (
            "controller_manager",
            _name("system:kube-controller-manager"),
            ExtendedKeyUsageOID.CLIENT_AUTH,
            [],
            ca_name,
        ),
    ]
    for attr, subject, usage, alt_names, _ in leaves:
        key = _key()
        cert = _certificate(subject, key, (ca_name, ca_key), usage, alt_names)
        _write(files(attr), cert.public_bytes(pem))
        _write(files(f"{attr}_key"), _pem_key(key))
    proxy_key = _key()
    proxy_name = _name("front-proxy-ca")
    _write(files("front_proxy_ca"), _certificate(proxy_name, proxy_key).public_bytes(pem))
    client_key = _key()
    client = _certificate(
        _name("front-proxy-client"),
        client_key,
        (proxy_name, proxy_key),
        ExtendedKeyUsageOID.CLIENT_AUTH,
    )
    _write(files("front_proxy_client"), client.public_bytes(pem))
    _write(files("front_proxy_client_key"), _pem_key(client_key))
    sa_key = _key()
    _write(files("sa_key"), _pem_key(sa_key))
    public = sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    _write(files("sa_pub"), public)


# --- processes ---


_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the test process goes away."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _enter_netns(fd: int) -> None:
    if _LIBC.setns(fd, _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns into the API server's network namespace: {os.strerror(errno)}")


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]

    @property
    def message(self) -> str:
        return status_message(self.body)


@dataclass
class ApiServer:
    """One API server; `start()`, then requests, `kubectl()`, and always `stop()` (or use
    `running()`)."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubectl_binary: Path
    cluster_configuration: dict[str, Any]
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cpl-apitest-")))
    processes: list[_Process] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    _netns_fd: int | None = None
    _client: ThreadPoolExecutor | None = None
    _connection: HTTPSConnection | None = None

    @property
    def files(self) -> Files:
        return Files(self.workdir / "pki")

    @property
    def admin_kubeconfig(self) -> Path:
        return self.workdir / "admin.conf"

    # -- lifecycle --

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        started = time.monotonic()
        networking = self.cluster_configuration["networking"]
        write_certificates(self.files, networking["serviceSubnet"])
        files = self.files
        self._write_kubeconfig(self.admin_kubeconfig, files("admin"), files("admin_key"), ADMIN)
        kcm_config = self.workdir / "controller-manager.conf"
        self._write_kubeconfig(
            kcm_config,
            files("controller_manager"),
            files("controller_manager_key"),
            "system:kube-controller-manager",
        )
        self.timings["certificates_s"] = time.monotonic() - started
        etcd = self._spawn(
            "etcd",
            [
                "unshare",
                "--net",
                "--",
                "sh",
                "-c",
                f'ip link set lo up && ip addr add {ADVERTISE_ADDRESS}/32 dev lo && exec "$@"',
                "etcd",
            ],
            [str(self.etcd), *etcd_arguments(self.workdir / "etcd")],
        )
        self._netns_fd = self._namespace_of(etcd, started + timeout_s)
        enter = ["nsenter", f"--net=/proc/self/fd/{self._netns_fd}", "--"]
        self._spawn(
            "kube-apiserver",
            enter,
            [str(self.kube_apiserver), *apiserver_arguments(self.cluster_configuration, files)],
        )
        self._spawn(
            "kube-controller-manager",
            enter,
            [str(self.kube_controller_manager), *controller_manager_arguments(files, kcm_config)],
        )
        self._client = ThreadPoolExecutor(
            max_workers=1, initializer=_enter_netns, initargs=(self._netns_fd,)
        )
        self._wait_ready(started + timeout_s)
        self.timings["ready_s"] = time.monotonic() - started

    def _namespace_of(self, holder: _Process, deadline: float) -> int:
        """An fd of the holder's network namespace, once it has left ours (unshare runs
        after the exec that Popen waits for)."""
        ours = os.stat("/proc/self/ns/net").st_ino
        path = f"/proc/{holder.popen.pid}/ns/net"
        while time.monotonic() < deadline and holder.popen.poll() is None:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:  # it exited meanwhile: poll() says so next
                continue
            if os.fstat(fd).st_ino != ours:
                return fd
            os.close(fd)
            time.sleep(0.01)
        raise self._failure("etcd did not get a network namespace of its own")

    def _write_kubeconfig(self, path: Path, cert: Path, key: Path, user: str) -> None:
        path.write_text(yaml.safe_dump(kubeconfig(self.files("ca"), cert, key, user)))
        path.chmod(0o600)

    def _spawn(self, name: str, wrapper: list[str], argv: list[str]) -> _Process:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [*wrapper, *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                pass_fds=() if self._netns_fd is None else (self._netns_fd,),
                preexec_fn=_die_with_parent,
            )
        process = _Process(name, popen, log)
        self.processes.append(process)
        return process

    def _exited(self) -> list[_Process]:
        return [p for p in self.processes if p.popen.poll() is not None]

    def _failure(self, why: str) -> ApiServerError:
        tails = "\n".join(
            f"--- {p.name} (exit {p.popen.poll()}):\n{p.tail()}" for p in self.processes
        )
        return ApiServerError(f"{why}\n{tails}")

    def _wait_ready(self, deadline: float) -> None:
        last = "no answer"
        while time.monotonic() < deadline:
            if dead := self._exited():
                raise self._failure(f"{dead[0].name} exited while the API server started")
            try:
                response = self.request("GET", "/readyz", timeout_s=5)
                if response.status == 200:
                    return
                last = f"/readyz {response.status}"
            except (OSError, ssl.SSLError) as exc:
                last = str(exc)
            time.sleep(0.25)
        raise self._failure(f"the API server was not ready in time ({last})")

    def stop(self) -> None:
        """End every process by its pid, close the client, remove the directory. Safe to call
        twice and after a failed start."""
        # the client's kept connection first: the API server drains open ones before it exits
        if self._client is not None:
            self._client.submit(self._close_connection).result()
            self._client.shutdown(wait=True)
            self._client = None
        # one after the other, in reverse: the API server shuts down slowly without etcd
        for process in reversed(self.processes):
            if process.popen.poll() is None:
                process.popen.send_signal(signal.SIGTERM)
            try:
                process.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.wait(timeout=15)
        self.processes.clear()
        if self._netns_fd is not None:
            os.close(self._netns_fd)
            self._netns_fd = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- requests --

    def _close_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _send(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: list[tuple[str, str]],
        timeout_s: float,
    ) -> Response:
        """In the client thread, inside the namespace: one request on a kept connection
        (headers as a list: impersonation repeats Impersonate-Group)."""
        if self._connection is None:
            context = ssl.create_default_context(cafile=str(self.files("ca")))
            context.load_cert_chain(str(self.files("admin")), str(self.files("admin_key")))
            self._connection = HTTPSConnection(
                "127.0.0.1", PORT, timeout=timeout_s, context=context
            )
        connection = self._connection
        try:
            if connection.sock is not None:
                connection.sock.settimeout(timeout_s)
            connection.putrequest(method, path, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(body or b"")))
            connection.endheaders(body)
            reply = connection.getresponse()
            data = reply.read()
        except (OSError, ssl.SSLError):
            self._close_connection()
            raise
        try:
            parsed = json.loads(data) if data else {}
        except json.JSONDecodeError:
            parsed = {"text": data.decode(errors="replace")}
        return Response(reply.status, parsed if isinstance(parsed, dict) else {"items": parsed})

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
        user: str | None = None,
        groups: Sequence[str] = (),
        timeout_s: float = 30,
    ) -> Response:
        """A request as the admin, or as `user` (and `groups`) by impersonation."""
        if self._client is None:
            raise ApiServerError("the API server is not running")
        headers = [("Accept", "application/json")]
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers.append(("Content-Type", content_type))
        if user is not None:
            headers.append(("Impersonate-User", user))
            headers += [("Impersonate-Group", group) for group in groups]
        target = f"{path}?{urlencode(query)}" if query else path
        future = self._client.submit(self._send, method, target, data, headers, timeout_s)
        return future.result(timeout=timeout_s + 5)

    def kubectl(
        self, *args: str, stdin: str | None = None, timeout_s: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """kubectl as the admin, inside the namespace."""
        if self._netns_fd is None or not self.processes:
            raise ApiServerError("the API server is not running")
        argv = [
            "nsenter",
            f"--net=/proc/self/fd/{self._netns_fd}",
            "--",
            str(self.kubectl_binary),
            f"--kubeconfig={self.admin_kubeconfig}",
            *args,
        ]
        return subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            pass_fds=(self._netns_fd,),
        )

    def kubectl_program(self, path: Path) -> Path:
        """An executable at `path` that any process of this machine (a play's task) runs as
        its kubectl: the bundle's kubectl inside the server's network namespace, with the
        caller's arguments and kubeconfig (the admin's is `admin_kubeconfig`)."""
        if self._netns_fd is None or not self.processes:
            raise ApiServerError("the API server is not running")
        netns = f"/proc/{os.getpid()}/fd/{self._netns_fd}"
        path.write_text(f'#!/bin/sh\nexec nsenter --net={netns} -- {self.kubectl_binary} "$@"\n')
        path.chmod(0o755)
        return path


class RecordingKubectl:
    """A `Run` for the code under test (argv -> exit status, stdout, stderr): the bundle's
    kubectl as the admin, against the server, every argv kept in `calls`."""

    def __init__(self, server: ApiServer, timeout_s: float = 120) -> None:
        self.server = server
        self.timeout_s = timeout_s
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str, str]:
        assert argv[0] == "kubectl", argv
        self.calls.append(list(argv))
        result = self.server.kubectl(*argv[1:], timeout_s=self.timeout_s)
        return result.returncode, result.stdout, result.stderr

    @property
    def changes(self) -> list[list[str]]:
        """The calls other than reads (`kubectl get`)."""
        return [c for c in self.calls if c[1] != "get"]


@contextmanager
def running(server: ApiServer) -> Iterator[ApiServer]:
    """The server started, and stopped whatever happens."""
    try:
        server.start()
        yield server
    finally:
        server.stop()


def server_bundle(version: str = "1.36") -> Bundle | None:
    """A bundle of the release built on this machine, for its etcd, kube-apiserver,
    kube-controller-manager and kubectl: the release's own, or the lab plan's (the release and
    the project's device plugin), the one the Kubernetes lab's converge builds."""
    return built_bundle(version) or built_bundle(version, needs=BundleNeeds(device_plugin=True))


def unavailable(bundle: Bundle | None) -> str | None:
    """Why no API server can run on this machine, None where one can."""
    if bundle is None:
        return (
            "the Kubernetes bundle is not built on this machine: "
            "cluster-plan k8s bundle inventory/lab/k8s.yml"
        )
    if os.geteuid() != 0:
        return "needs root: the API server runs in a network namespace of its own"
    missing = [tool for tool in ("unshare", "nsenter", "ip") if shutil.which(tool) is None]
    if missing:
        return f"needs {', '.join(missing)} (util-linux, iproute2)"
    return None


def from_bundle(bundle: Bundle, cluster_configuration: dict[str, Any]) -> ApiServer:
    """A server (not started) of the bundle's binaries, for a kubeadm ClusterConfiguration."""
    return ApiServer(
        etcd=bundle.binary("etcd"),
        kube_apiserver=bundle.binary("kube-apiserver"),
        kube_controller_manager=bundle.binary("kube-controller-manager"),
        kubectl_binary=bundle.binary("kubectl"),
        cluster_configuration=cluster_configuration,
    )
