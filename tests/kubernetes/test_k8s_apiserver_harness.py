"""The API server harness (tests/support/kube_apiserver.py), without the bundle: the
processes' arguments from the plan's ClusterConfiguration as kubeadm gives them, the
certificates, and that a start that fails leaves nothing behind."""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from k8s_plans import expanded_plan
from support.kube_apiserver import (
    CONTROLLERS,
    ApiServer,
    ApiServerError,
    Files,
    apiserver_arguments,
    controller_manager_arguments,
    etcd_arguments,
    kubeconfig,
    running,
    status_message,
    write_certificates,
)

from cluster_plan.kubernetes import render


def cluster_configuration(version: str = "1.36") -> dict:
    expanded = expanded_plan("lab-k8s")
    expanded["scheduler"]["kubernetes"]["version"] = version
    if version != "1.36":  # a connected cluster: the lab plan's mirror carries 1.36 and 1.37
        expanded["scheduler"]["kubernetes"]["mirror"] = None
    rendering = render(expanded)
    first = rendering.plan.first_control_plane
    return next(d for d in rendering.kubeadm[first] if d["kind"] == "ClusterConfiguration")


def as_dict(arguments: list[str]) -> dict[str, str]:
    pairs = [a.removeprefix("--").split("=", 1) for a in arguments]
    assert len({name for name, _ in pairs}) == len(pairs), "an argument given twice"
    return dict(pairs)


def test_the_api_server_gets_kubeadm_s_arguments(tmp_path: Path) -> None:
    args = apiserver_arguments(cluster_configuration(), Files(tmp_path))
    assert args == sorted(args)
    given = as_dict(args)
    assert given["enable-admission-plugins"] == "NodeRestriction"
    assert given["authorization-mode"] == "Node,RBAC"
    assert given["service-cluster-ip-range"] == "10.96.0.0/12"
    assert given["service-account-issuer"] == "https://kubernetes.default.svc.cluster.local"
    assert given["allow-privileged"] == "true"
    assert given["requestheader-allowed-names"] == "front-proxy-client"
    assert given["client-ca-file"] == str(tmp_path / "ca.crt")
    # 1.36: MutatingAdmissionPolicy is GA, nothing to switch on
    assert "feature-gates" not in given and "runtime-config" not in given


def test_the_plan_s_extra_arguments_reach_the_api_server(tmp_path: Path) -> None:
    configuration = cluster_configuration("1.34")
    given = as_dict(apiserver_arguments(configuration, Files(tmp_path)))
    assert given["feature-gates"] == "MutatingAdmissionPolicy=true"
    assert given["runtime-config"] == "admissionregistration.k8s.io/v1beta1=true"
    # an extra argument replaces kubeadm's default of the same name, as kubeadm does
    configuration["apiServer"]["extraArgs"].append({"name": "authorization-mode", "value": "RBAC"})
    assert (
        as_dict(apiserver_arguments(configuration, Files(tmp_path)))["authorization-mode"] == "RBAC"
    )


def test_the_controller_manager_and_etcd_arguments(tmp_path: Path) -> None:
    kcm = as_dict(controller_manager_arguments(Files(tmp_path), tmp_path / "kcm.conf"))
    assert kcm["controllers"] == CONTROLLERS
    assert kcm["use-service-account-credentials"] == "true"
    assert kcm["service-account-private-key-file"] == str(tmp_path / "sa.key")
    etcd = as_dict(etcd_arguments(tmp_path / "etcd"))
    assert etcd["listen-client-urls"].startswith("http://127.0.0.1:")
    assert etcd["data-dir"] == str(tmp_path / "etcd")


def test_the_certificates_chain_to_the_run_s_ca(tmp_path: Path) -> None:
    files = Files(tmp_path / "pki")
    write_certificates(files, "10.96.0.0/12")
    ca = x509.load_pem_x509_certificate(files("ca").read_bytes())
    now = datetime.datetime.now(datetime.UTC)
    for name, usage in [
        ("apiserver", ExtendedKeyUsageOID.SERVER_AUTH),
        ("admin", ExtendedKeyUsageOID.CLIENT_AUTH),
        ("controller_manager", ExtendedKeyUsageOID.CLIENT_AUTH),
    ]:
        cert = x509.load_pem_x509_certificate(files(name).read_bytes())
        cert.verify_directly_issued_by(ca)
        assert cert.not_valid_before_utc < now < cert.not_valid_after_utc
        assert cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == (
            x509.ExtendedKeyUsage([usage])
        )
    serving = x509.load_pem_x509_certificate(files("apiserver").read_bytes())
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    addresses = names.get_values_for_type(x509.IPAddress)
    assert {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("10.96.0.1")} <= set(addresses)
    assert "kubernetes.default.svc.cluster.local" in names.get_values_for_type(x509.DNSName)
    admin = x509.load_pem_x509_certificate(files("admin").read_bytes())
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == (
        "system:masters"
    )
    front = x509.load_pem_x509_certificate(files("front_proxy_client").read_bytes())
    front.verify_directly_issued_by(
        x509.load_pem_x509_certificate(files("front_proxy_ca").read_bytes())
    )
    assert isinstance(front.public_key(), ec.EllipticCurvePublicKey)
    assert {oct(p.stat().st_mode & 0o777) for p in files.pki.iterdir()} == {"0o600"}


def test_kubeconfig_and_status_messages() -> None:
    config = kubeconfig(Path("/p/ca.crt"), Path("/p/a.crt"), Path("/p/a.key"), "me")
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert config["users"][0]["user"]["client-key"] == "/p/a.key"
    assert status_message({"kind": "Status", "message": "no"}) == "no"
    assert status_message({"kind": "Pod"}) == '{"kind": "Pod"}'


def test_stop_before_start_removes_the_directory(tmp_path: Path) -> None:
    server = ApiServer(Path("x"), Path("x"), Path("x"), Path("x"), {}, workdir=tmp_path / "w")
    (tmp_path / "w").mkdir()
    server.stop()
    server.stop()
    assert not (tmp_path / "w").exists()
    with pytest.raises(ApiServerError, match="not running"):
        server.request("GET", "/readyz")


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare: the processes run in a network namespace of their own",
)
def test_a_failed_start_leaves_no_process_and_no_directory(tmp_path: Path) -> None:
    """etcd that exits at once: the start fails naming it, with its log; every process is
    ended and the directory removed."""
    fake = tmp_path / "etcd"
    fake.write_text("#!/bin/sh\necho 'etcd: cannot start' >&2\nexit 3\n")
    fake.chmod(0o755)
    sleeper = tmp_path / "sleeper"
    sleeper.write_text("#!/bin/sh\nexec sleep 600\n")
    sleeper.chmod(0o755)
    server = ApiServer(
        etcd=fake,
        kube_apiserver=sleeper,
        kube_controller_manager=sleeper,
        kubectl_binary=sleeper,
        cluster_configuration=cluster_configuration(),
        workdir=tmp_path / "run",
    )
    with pytest.raises(ApiServerError) as raised, running(server):
        pass
    assert "etcd" in str(raised.value)
    assert server.processes == []
    assert not (tmp_path / "run").exists()
