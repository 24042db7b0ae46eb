"""Failed logins lock the username (and, past a larger count, the client address) for a while:
60 wrong passwords in 25 s used to pass unnoticed."""
import pytest
from django.core.cache import cache

LOGIN = "/accounts/login/"


@pytest.fixture(autouse=True)
def empty_counters():
    cache.clear()
    yield
    cache.clear()


def log_in(client, username: str, password: str, address: str = "10.0.0.1") -> bool:
    """True when the login page let the user in (a redirect and a session)."""
    answer = client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)
    return answer.status_code == 302 and "_auth_user_id" in client.session


def test_five_wrong_passwords_lock_the_user_out_even_with_the_right_one(client, alice, settings):
    settings.TRACEDOC_LOGIN_MAX_FAILURES = 5
    for _ in range(5):
        assert not log_in(client, "alice", "wrong")
    assert not log_in(client, "alice", "alice-pw-123")  # locked: the right password is refused too
    assert not log_in(client, "ALICE ", "alice-pw-123")  # the count is the username's, whatever its case


def test_the_lockout_ends_with_its_window(client, alice, settings):
    settings.TRACEDOC_LOGIN_MAX_FAILURES = 3
    for _ in range(3):
        log_in(client, "alice", "wrong")
    assert not log_in(client, "alice", "alice-pw-123")
    cache.clear()  # what the window's expiry does
    assert log_in(client, "alice", "alice-pw-123")


def test_fewer_failures_than_the_limit_still_let_the_user_in_and_are_forgotten(client, alice, settings):
    settings.TRACEDOC_LOGIN_MAX_FAILURES = 3
    for _ in range(2):
        log_in(client, "alice", "wrong")
    assert log_in(client, "alice", "alice-pw-123")
    client.logout()
    for _ in range(2):  # the success cleared the count: two more are still below the limit
        log_in(client, "alice", "wrong")
    assert log_in(client, "alice", "alice-pw-123")


def test_one_address_guessing_many_usernames_is_locked_out(client, alice, bob, settings):
    settings.TRACEDOC_LOGIN_MAX_FAILURES = 5
    settings.TRACEDOC_LOGIN_MAX_FAILURES_PER_ADDRESS = 4
    for name in ("carol", "dave", "erin", "frank"):
        assert not log_in(client, name, "guess", address="10.9.9.9")
    assert not log_in(client, "bob", "bob-pw-123", address="10.9.9.9")
    assert log_in(client, "bob", "bob-pw-123", address="10.0.0.2")  # other addresses are not affected
