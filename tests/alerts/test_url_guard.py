"""Destinations may not reach internal addresses (SSRF): refused when saved through the API,
and again when an alert is sent (the name resolved, the connected address checked, no
redirect followed), unless TRACEDOC_ALERT_ALLOWED_NETWORKS holds the address."""
import socket

import pytest
from django.core.exceptions import ValidationError

from alerts.models import Delivery, Destination
from alerts.url_guard import UnsafeDestination, check_url, guarded_session
from tests.alerts.conftest import invalid, rule
from tests.support.cluster_world import NCCL, seen

pytestmark = pytest.mark.timeout(120)

INTERNAL = ["http://127.0.0.1:8080/hook", "http://localhost/x", "http://api.localhost/x", "http://[::1]/x",
            "http://[::ffff:127.0.0.1]/x", "http://10.1.2.3/x", "http://192.168.0.9/x", "http://172.16.5.5/x",
            "http://100.64.0.1/x", "http://169.254.169.254/latest/meta-data/", "http://metadata.google.internal/x",
            "http://[fd00:ec2::254]/x", "http://0.0.0.0/x", "http://224.0.0.1/x",
            # IPv6 addresses that carry an internal IPv4 one: NAT64, 6to4, IPv4-compatible, Teredo
            "http://[64:ff9b::a00:1]/x", "http://[64:ff9b::7f00:1]/x", "http://[2002:7f00:1::]/x",
            "http://[2002:a9fe:a9fe::1]/x", "http://[::7f00:1]/x", "http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/x"]


def a_name_resolving_to_loopback() -> str:
    """This machine's own name, resolved by the system resolver (not a literal address)."""
    name = socket.gethostname()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP)}
    except socket.gaierror:
        pytest.skip(f"{name} does not resolve here")
    if not any(a.startswith("127.") or a == "::1" for a in addresses):
        pytest.skip(f"{name} resolves to {addresses}, not loopback")
    return name


@pytest.mark.parametrize("url", INTERNAL)
def test_the_api_refuses_an_internal_destination(alice_api, infra, url):
    response = alice_api.post("/api/v1/destinations/", {"name": "d", "kind": "slack", "url": url}, format="json")
    assert response.status_code == 400 and "url" in invalid(response), (url, response.content)
    assert "internal address" in invalid(response)["url"] or "metadata" in invalid(response)["url"]
    assert not Destination.objects.exists()


def test_a_name_is_resolved_when_saved(infra):
    """The model's check (what the API and the form run): the name's addresses, resolved now."""
    name = a_name_resolving_to_loopback()  # a one-label name: the API's URL field wants a dot
    with pytest.raises(ValidationError, match="127.0.0.1"):
        Destination(team=infra, name="d", kind="slack", url=f"http://{name}:9/x").clean()


def test_public_and_allowed_addresses_pass(alice_api, infra, settings):
    for n, url in enumerate(["https://93.184.216.34/hook", "https://hooks.example/x",  # the second: no DNS here
                             "https://[64:ff9b::5db8:d822]/hook", "https://[2606:4700::6810:84e5]/hook"]):
        response = alice_api.post("/api/v1/destinations/", {"name": f"d{n}", "kind": "slack", "url": url},
                                  format="json")
        assert response.status_code == 201, (url, response.content)
    settings.TRACEDOC_ALERT_ALLOWED_NETWORKS = ["10.20.0.0/16"]
    ok = alice_api.post("/api/v1/destinations/", {"name": "am", "kind": "alertmanager", "url": "http://10.20.3.4:9093"},
                        format="json")
    assert ok.status_code == 201, ok.content
    refused = alice_api.post("/api/v1/destinations/", {"name": "am2", "kind": "alertmanager",
                                                       "url": "http://10.21.3.4:9093"}, format="json")
    assert refused.status_code == 400 and "url" in invalid(refused)


def test_the_connected_address_is_checked_whatever_the_name(receiver, settings):
    """The session alone (no check of the URL first) refuses a socket connected to loopback:
    a name re-pointed between the save-time check and the send (DNS rebinding) gains nothing."""
    name = a_name_resolving_to_loopback()
    url = receiver.url.replace("127.0.0.1", name) + "/hook"
    settings.TRACEDOC_ALERT_ALLOWED_NETWORKS = []
    with pytest.raises(UnsafeDestination, match="127.0.0.1"):
        guarded_session().post(url, data=b"{}", timeout=5)
    assert receiver.requests == []
    settings.TRACEDOC_ALERT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    assert guarded_session().post(url, data=b"{}", timeout=5).status_code == 202
    check_url(url)


def test_a_destination_no_longer_allowed_is_refused_at_send_and_not_retried(
        infra, destinations, receiver, mailoutbox, eager, settings, django_capture_on_commit_callbacks):
    rule(infra, "new", [destinations["slack"]])
    settings.TRACEDOC_ALERT_ALLOWED_NETWORKS = []  # saved while allowed, then the allow-list changed
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("failed", 1)
    assert delivery.log[0]["error"].startswith("refused:") and "internal address" in delivery.log[0]["error"]
    assert receiver.requests == []


def test_a_redirect_is_not_followed(infra, destinations, receiver, eager, django_capture_on_commit_callbacks, settings):
    settings.TRACEDOC_ALERT_MAX_ATTEMPTS = 1
    receiver.redirect = f"{receiver.url}/elsewhere"
    rule(infra, "new", [destinations["slack"]])
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.log[0]["status"]) == ("failed", 307)
    assert [r.path for r in receiver.requests] == ["/slack"]
